"""The registration storm: every agent of a fleet registering at once after a failover.

Each agent's `Register` differs (its node id and hostname); the control plane
decodes each one into a `Registration` and adopts it (keeps it by node id),
in one thread. Timed three ways: with the garbage collector on and its
default thresholds, as in a service, counting the time spent in collections;
with the one-line tuning a service holding this much long-lived data would
make (`gc.set_threshold(700, 10, 100)`: a full collection ten times less
often); with the library's recipe (`llmgw_wire.gc.AdoptionFreezer`: the
adopted values frozen out of the collector's reach after every 100
adoptions, default thresholds); and with the collector off, which is the
cost of decoding alone. The kinds of run are interleaved, one of each per
round, so that a change in the machine's load falls on all of them.
Memory is measured in a last pass under `tracemalloc`, which slows Python
down and so is never timed.
"""

from __future__ import annotations

import gc
import resource
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench import samples
from llmgw_wire import decode, encode
from llmgw_wire.domain import Registration
from llmgw_wire.gc import AdoptionFreezer

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "FREEZE_EVERY",
    "TUNED_THRESHOLDS",
    "StormResult",
    "StormRun",
    "fleet",
    "storm",
    "tracked_per_registration",
]

#: The collector thresholds of the tuned run: full collections ten times rarer.
TUNED_THRESHOLDS = (700, 10, 100)
#: Adoptions per batch of the recipe's run: a freeze after each.
FREEZE_EVERY = 100


@dataclass(frozen=True)
class StormRun:
    """One storm, timed."""

    wall_s: float
    cpu_s: float  # this process's CPU time: below wall_s when other load took the core
    gc_s: float  # wall time inside garbage collections (0 with the collector off)
    collections: tuple[int, int, int]  # by generation


@dataclass(frozen=True)
class StormResult:
    """What the storm cost: the median run of each kind, and memory."""

    registrations: int
    bytes_each: int
    gc_on: StormRun
    gc_tuned: StormRun
    gc_frozen: StormRun
    gc_off: StormRun
    runs_gc_on_s: tuple[float, ...]
    traced_peak_bytes: int  # tracemalloc peak: Python allocations, adopted values included
    maxrss_delta_bytes: int  # growth of the process's peak RSS over the storm runs
    tracked_each: float  # objects the collector tracks per registration adopted

    @property
    def wall_s(self) -> float:
        """The figure the target is about: wall time with the collector on."""
        return self.gc_on.wall_s

    def as_dict(self) -> dict[str, object]:
        """The result as plain data, for the JSON report."""
        return {
            "registrations": self.registrations,
            "bytes_each": self.bytes_each,
            "gc_on": vars(self.gc_on),
            "gc_tuned": {"thresholds": list(TUNED_THRESHOLDS), **vars(self.gc_tuned)},
            "gc_frozen": {"freeze_every": FREEZE_EVERY, **vars(self.gc_frozen)},
            "gc_off": vars(self.gc_off),
            "runs_gc_on_s": list(self.runs_gc_on_s),
            "traced_peak_bytes": self.traced_peak_bytes,
            "maxrss_delta_bytes": self.maxrss_delta_bytes,
            "tracked_each": self.tracked_each,
            "memory_note": (
                "traced_peak_bytes is tracemalloc's peak of Python allocations, the adopted "
                "registrations included; upb's parse arenas are C allocations it does not "
                "see (each is freed once its message is converted). maxrss_delta_bytes is "
                "the growth of ru_maxrss over the storms, the untimed first one included."
            ),
        }


def fleet(size: int) -> list[bytes]:
    """The `Register` bytes of `size` agents."""
    return [encode(samples.registration_for(number)) for number in range(size)]


def _adopt(datas: list[bytes], freezer: AdoptionFreezer | None = None) -> dict[str, Registration]:
    adopted: dict[str, Registration] = {}
    for data in datas:
        registration = decode(data, Registration)
        adopted[registration.node.id] = registration
        if freezer is not None:
            freezer.adopted()
    if freezer is not None:
        freezer.flush()
    return adopted


def _maxrss_bytes() -> int:
    # Linux reports kilobytes.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _CollectionClock:
    """Adds up the time spent in garbage collections, through `gc.callbacks`."""

    def __init__(self) -> None:
        self.total_ns = 0
        self.counts = [0, 0, 0]
        self._start = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.total_ns += time.perf_counter_ns() - self._start
            self.counts[info["generation"]] += 1


def _run(
    datas: list[bytes],
    *,
    collector: bool,
    thresholds: tuple[int, int, int] | None = None,
    freeze: bool = False,
) -> StormRun:
    gc.collect()
    clock = _CollectionClock()
    saved = gc.get_threshold()
    gc.callbacks.append(clock)
    if not collector:
        gc.disable()
    if thresholds is not None:
        gc.set_threshold(*thresholds)
    try:
        wall0, cpu0 = time.perf_counter_ns(), time.process_time_ns()
        adopted = _adopt(datas, AdoptionFreezer(FREEZE_EVERY) if freeze else None)
        elapsed, used = time.perf_counter_ns() - wall0, time.process_time_ns() - cpu0
    finally:
        gc.unfreeze()  # the next run starts from the same state
        gc.set_threshold(*saved)
        gc.enable()
        gc.callbacks.remove(clock)
    if len(adopted) != len(datas):
        raise AssertionError("every agent of the fleet has its own node id")
    del adopted
    counts = (clock.counts[0], clock.counts[1], clock.counts[2])
    return StormRun(elapsed / 1e9, used / 1e9, clock.total_ns / 1e9, counts)


def tracked_per_registration(datas: list[bytes]) -> float:
    """Objects the collector tracks per registration decoded and adopted, right after.

    Counted in `gc.get_objects()` with the collector off, before and after
    adopting `datas` (its first collection would untrack the tuples of
    strings and numbers, so this is the count a young collection walks).
    """
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        adopted = _adopt(datas)
        after = len(gc.get_objects())
    finally:
        gc.enable()
    del adopted
    return (after - before) / len(datas)


def _median(runs: list[StormRun]) -> StormRun:
    return sorted(runs, key=lambda run: run.wall_s)[len(runs) // 2]


def storm(datas: list[bytes], runs: int = 3) -> StormResult:
    """Decode and adopt every registration in `datas`: `runs` times each way, then for memory."""
    rss_before = _maxrss_bytes()
    on: list[StormRun] = []
    tuned: list[StormRun] = []
    frozen: list[StormRun] = []
    off: list[StormRun] = []
    ways: list[tuple[list[StormRun], Callable[[], StormRun]]] = [
        (on, lambda: _run(datas, collector=True)),
        (tuned, lambda: _run(datas, collector=True, thresholds=TUNED_THRESHOLDS)),
        (frozen, lambda: _run(datas, collector=True, freeze=True)),
        (off, lambda: _run(datas, collector=False)),
    ]
    # One untimed storm first: the process's first takes its memory from the
    # system (page faults on every new arena), which no later run pays.
    _run(datas, collector=False)
    for round_ in range(runs):
        # In an order rotated by one each round: no way always runs first, in
        # the process's state the one before it left (each starts with a
        # full collection; the untimed storm above is the first).
        for results, way in ways[round_ % 4 :] + ways[: round_ % 4]:
            results.append(way())
    rss_delta = _maxrss_bytes() - rss_before
    tracked = tracked_per_registration(datas[:1000])
    gc.collect()
    tracemalloc.start()
    try:
        adopted = _adopt(datas)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del adopted
    return StormResult(
        registrations=len(datas),
        bytes_each=round(statistics.mean(len(data) for data in datas)),
        gc_on=_median(on),
        gc_tuned=_median(tuned),
        gc_frozen=_median(frozen),
        gc_off=_median(off),
        runs_gc_on_s=tuple(run.wall_s for run in on),
        traced_peak_bytes=peak,
        maxrss_delta_bytes=rss_delta,
        tracked_each=tracked,
    )
