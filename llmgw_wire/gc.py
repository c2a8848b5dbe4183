"""Keeping Python's full garbage collections from walking a control plane's adopted fleet.

A control plane keeps what it adopts: a `Registration` per agent, tens of
thousands of long-lived objects each. With the collector's default settings
every full collection walks all of them again, and during a registration
storm (a whole fleet registering at once, after a failover) full collections
come every few thousand registrations: the storm then spends most of its time
in the collector, finding nothing to free.

`gc.freeze()` moves every object the collector tracks into a permanent
generation that collections never walk. Called after each batch of
adoptions, it keeps the fleet out of every later collection, so that a
collection only walks what arrived since the last batch:

    freezer = AdoptionFreezer(every=100)
    for registration in storm:
        fleet[registration.node.id] = registration
        freezer.adopted()
    freezer.flush()  # the last, partial batch

What this costs: frozen objects are still freed the moment nothing refers to
them (reference counting does not depend on the collector), but a reference
cycle among frozen objects is never collected until `gc.unfreeze()`. The
library's values hold no cycles; a control plane whose own objects do can
call `unfreeze()` (and let the next full collection run) after a large part
of its fleet has left. Frozen objects are also not in `gc.get_objects()`.
This module changes nothing until it is called.
"""

from __future__ import annotations

import gc

__all__ = ["AdoptionFreezer", "freeze_adopted", "unfreeze"]


def freeze_adopted() -> None:
    """Collect the young generations, then freeze everything that survived.

    The young collection first leaves the garbage of the last batch (the
    decoders' temporaries, say) out of the permanent generation, and costs
    only as much as the young generations hold. The freeze itself moves a
    list whole: it costs the same however much is frozen. (Counting what is
    frozen, `gc.get_freeze_count()`, walks all of it: not something to call
    after every batch.)
    """
    gc.collect(1)
    gc.freeze()


def unfreeze() -> None:
    """Move every frozen object back into the oldest generation.

    The next full collection walks them all again, and frees the cycles among
    them that have become garbage.
    """
    gc.unfreeze()


class AdoptionFreezer:
    """Calls `freeze_adopted()` after every `every` adoptions.

    Args:
        every: adoptions per batch; each batch ends with a young collection
            and a freeze, so a smaller batch freezes more often (each freeze
            is cheap: it walks only the young generations).

    Raises:
        ValueError: `every` is below 1.
    """

    def __init__(self, every: int = 100) -> None:
        if every < 1:
            raise ValueError(f"every: a batch is at least 1 adoption, got {every}")
        self.every = every
        self._pending = 0

    def adopted(self, count: int = 1) -> bool:
        """Count `count` adoptions; freeze when a batch is complete.

        Returns:
            whether this call froze.
        """
        self._pending += count
        if self._pending < self.every:
            return False
        self.flush()
        return True

    def flush(self) -> None:
        """Freeze what was adopted since the last freeze, even a partial batch."""
        self._pending = 0
        freeze_adopted()
