"""The recipe that keeps full collections from walking an adopted fleet (`llmgw_wire.gc`)."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import pytest

from llmgw_wire import Registration, decode, encode
from llmgw_wire.gc import AdoptionFreezer
from llmgw_wire.testing.stream import registration_of

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    # Freezing is process-wide: every test starts and ends with nothing frozen.
    gc.unfreeze()
    yield
    gc.unfreeze()


def _fleet(size: int) -> dict[str, Registration]:
    fleet = {}
    for number in range(size):
        registration = decode(encode(registration_of(f"node-{number}")), Registration)
        fleet[registration.node.id] = registration
    return fleet


def _in_oldest(objects: Sequence[object]) -> list[bool]:
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    return [id(o) in oldest for o in objects]


def test_the_adopted_fleet_leaves_the_oldest_generation() -> None:
    fleet = _fleet(20)
    gc.collect()  # everything alive is now in the oldest generation
    tracked = [r for r in fleet.values() if gc.is_tracked(r)] + [fleet]
    assert all(_in_oldest(tracked))
    before = gc.get_freeze_count()
    AdoptionFreezer().flush()
    assert gc.get_freeze_count() > before
    assert not any(_in_oldest(tracked))
    # A full collection walks none of it, and frees none of it.
    gc.collect()
    assert not any(_in_oldest(tracked))
    assert len(fleet) == 20


def test_unfreeze_gives_the_fleet_back_to_full_collections() -> None:
    fleet = _fleet(5)
    AdoptionFreezer().flush()
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert all(_in_oldest([fleet]))


def test_the_freezer_freezes_after_each_batch() -> None:
    freezer = AdoptionFreezer(every=3)
    fleet = _fleet(7)
    froze = [freezer.adopted() for _ in fleet]
    assert froze == [False, False, True, False, False, True, False]
    counted = gc.get_freeze_count()
    assert counted > 0
    assert not any(_in_oldest([fleet]))
    late = _fleet(1)
    freezer.flush()  # the partial batch
    assert gc.get_freeze_count() > counted
    assert not any(_in_oldest([late]))


def test_a_frozen_value_is_still_freed_once_unreferenced() -> None:
    import weakref

    class Kept:
        pass

    kept = Kept()
    ref = weakref.ref(kept)
    AdoptionFreezer().flush()
    del kept
    assert ref() is None


def test_a_batch_is_at_least_one_adoption() -> None:
    with pytest.raises(ValueError, match="every: a batch is at least 1 adoption, got 0"):
        AdoptionFreezer(every=0)
