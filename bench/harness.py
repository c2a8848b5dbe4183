"""Interleaved timing: every contender of a group, round-robin, many repetitions.

Each repetition times one batch of calls per contender, in an order rotated by
one each repetition, so that drift in the machine (frequency, other load)
spreads evenly over the contenders instead of landing on whichever ran last,
and reversed every other repetition, so that each contender runs right after
each other one as often as before it: a batch of a few large calls is timed
with what the previous contender left in the caches, and a rotation alone
would always put the same contender after the lightest one and another after
the one that warms the caches for it.
The figure reported is the median over repetitions of the time per call. The
garbage collector is off while timing (and run between repetitions), so a
collection triggered by one contender's garbage is not charged to another.

Each batch is timed twice: wall time (`perf_counter_ns`, the figure reported)
and the thread's CPU time (`thread_time_ns`). On a quiet machine the two
agree; on a shared one the CPU time shows what the wall time would have been
without the other load, and their ratio shows how much there was.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Contender", "Group", "Timing", "run"]


@dataclass(frozen=True)
class Contender:
    """One way of doing the group's operation, as a call with no arguments."""

    name: str
    call: Callable[[], object]


@dataclass
class Group:
    """The contenders for one operation on one message; the first is the library's path."""

    message: str
    operation: str
    contenders: list[Contender]


@dataclass
class Timing:
    """Per-call times (ns) of one contender, one per repetition."""

    group: Group
    contender: Contender
    number: int = 1
    samples: list[float] = field(default_factory=list)
    cpu_samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """The median time per call, in nanoseconds."""
        return statistics.median(self.samples)

    @property
    def cpu_median(self) -> float:
        """The median CPU time per call, in nanoseconds."""
        return statistics.median(self.cpu_samples)

    @property
    def spread(self) -> float:
        """The interquartile range relative to the median (0.02 is +-1%)."""
        if len(self.samples) < 4:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4)
        return (q3 - q1) / self.median


def _batch(call: Callable[[], object], number: int) -> tuple[int, int]:
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    cpu_start = cpu_clock()
    start = clock()
    for _ in range(number):
        call()
    end = clock()
    return end - start, cpu_clock() - cpu_start


def _calibrate(call: Callable[[], object], batch_ns: int) -> int:
    """How many calls make a batch of about `batch_ns`."""
    _batch(call, 3)  # warm caches and lazy initialisation
    number = 1
    while True:
        elapsed, _ = _batch(call, number)
        if elapsed * 4 >= batch_ns or number >= 1 << 20:
            return max(1, round(number * batch_ns / max(elapsed, 1)))
        number *= 4


def run(groups: list[Group], repetitions: int, batch_ns: int) -> list[Timing]:
    """Time every contender of every group, interleaved; return one `Timing` per contender."""
    timings = [[Timing(group, contender) for contender in group.contenders] for group in groups]
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for row in timings:
            for timing in row:
                timing.number = _calibrate(timing.contender.call, batch_ns)
        for rep in range(repetitions):
            gc.collect()
            for row in timings:
                shift = rep % len(row)
                order = row[shift:] + row[:shift]
                if rep % 2:
                    order.reverse()
                for timing in order:
                    # One call untimed first: the batch starts with the caches
                    # as this contender leaves them, not as the collection or
                    # the contender before it left them.
                    timing.contender.call()
                    elapsed, cpu = _batch(timing.contender.call, timing.number)
                    timing.samples.append(elapsed / timing.number)
                    timing.cpu_samples.append(cpu / timing.number)
    finally:
        if was_enabled:
            gc.enable()
    return [timing for row in timings for timing in row]
