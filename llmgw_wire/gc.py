"""Keeping Python's full garbage collections from walking a control plane's adopted fleet.

A control plane keeps what it adopts: a `Registration` per agent, tens of
tracked objects each (16 for the sample node: `decode` shares equal values,
so what a registration owns is mostly its node and one object per GPU and
per shard), millions for a large fleet.
With the collector's default settings every full collection walks all of
them again, and during a registration
storm (a whole fleet registering at once, after a failover) full collections
come every 1,000 to 2,000 registrations: the storm then spends most of its time
in the collector, finding nothing to free.

`gc.freeze()` moves every object the collector tracks into a permanent
generation that collections never walk. Called after each batch of
adoptions (which `AdoptionFreezer` counts), it keeps the fleet out of every
later collection, so that a collection only walks what arrived since the
last batch:

    freezer = AdoptionFreezer(every=100)
    for registration in storm:
        fleet[registration.node.id] = registration
        freezer.adopted()
    freezer.flush()  # the last, partial batch

What this costs: frozen objects are still freed the moment nothing refers to
them (reference counting does not depend on the collector), but a reference
cycle among frozen objects is never collected until `gc.unfreeze()`. The
library's decoding leaves no cyclic garbage; a control plane whose own objects do can,
once the storm is over or a large part of its fleet has left, call
`gc.unfreeze()`, `gc.collect()` and `flush()`: one full collection, at a
moment it chooses. Frozen objects are also not in
`gc.get_objects()`. This module changes nothing until it is called.
"""

from __future__ import annotations

import gc

__all__ = ["AdoptionFreezer"]


class AdoptionFreezer:
    """Freezes everything the collector tracks (`gc.freeze()`) after every `every` adoptions.

    The freeze moves the collector's lists whole: it costs the same however
    much is frozen, so it can follow every batch. It collects nothing first
    (a collection of the young generations before every batch cost more than
    it saved, in the storm of `make bench`): garbage in reference cycles that
    is young when a freeze comes stays until `gc.unfreeze()`. (Counting what
    is frozen, `gc.get_freeze_count()`, walks all of it: not something to do
    after every batch.)

    Args:
        every: adoptions per batch, each followed by a freeze; between two
            freezes, collections walk only what the last batch left.

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
        gc.freeze()
