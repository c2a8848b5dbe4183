"""Processes that use one shard store at once: `python store_roles.py ROLE ARGS...`.

writer DIR [slow]          saves a small and a large state of one shard in
                           turn until killed (prints "ready" first); with
                           `slow`, as on a disk whose fsync takes 5 ms
concurrent DIR INDEX N     saves N values of a shared shard and of its own,
                           then prints what it saved last, as JSON
opener DIR SECONDS         opens the store (which cleans leftovers) and loads
                           every shard, again and again; fails on any error
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import attrs

import llmgw_wire as wire
from llmgw_wire.store import SavedShard, ShardStore
from llmgw_wire.testing.sample import sample_command

if TYPE_CHECKING:
    from collections.abc import Callable

SHARED = sample_command().spec
#: The writer's two states: the small one, and one of about 300 kB (a long
#: argument list), so that a kill lands inside a write as often as between.
WRITER_STATES = (
    SavedShard(SHARED, wire.State.STARTING),
    SavedShard(
        attrs.evolve(
            SHARED,
            compute=wire.Compute("cuda", ("cuda:4", "cuda:5"), 61, 61),
            profile=attrs.evolve(
                SHARED.profile, args=tuple(f"--arg-{i:06d}" for i in range(20_000))
            ),
        ),
        wire.State.READY,
    ),
)

# A writer nobody kills must not outlive its test run.
_LIFETIME_S = 60.0


def concurrent_value(index: int, n: int, shard_id: str = SHARED.shard_id) -> SavedShard:
    """The `n`th value writer `index` saves for `shard_id`."""
    spec = attrs.evolve(SHARED, shard_id=shard_id, profile_fp=f"w{index}-{n}")
    return SavedShard(spec, wire.State.READY)


def writer(directory: str, disk: str = "fast") -> None:
    if disk == "slow":
        # A slow disk (a loaded one, or network storage): the time between the
        # temporary file's creation and its rename grows, and with it the
        # chance that a kill lands inside a save.
        fsync = os.fsync

        def slow_fsync(fd: Any) -> None:
            time.sleep(0.005)
            fsync(fd)

        os.fsync = slow_fsync
    store = ShardStore(directory)
    store.save(WRITER_STATES[0])
    print("ready", flush=True)
    deadline = time.monotonic() + _LIFETIME_S
    while time.monotonic() < deadline:
        for value in WRITER_STATES[::-1]:
            store.save(value)


def concurrent(directory: str, index: str, count: str) -> None:
    store = ShardStore(directory)
    own = f"{SHARED.shard_id}-own-{index}"
    for n in range(int(count)):
        store.save(concurrent_value(int(index), n))
        store.save(concurrent_value(int(index), n, own))
    print(json.dumps({"index": int(index), "last": int(count) - 1}))


def opener(directory: str, seconds: str) -> None:
    deadline = time.monotonic() + float(seconds)
    opened = loaded = 0
    while time.monotonic() < deadline:
        with ShardStore(directory) as store:
            found = store.load_all()
        assert not found.errors, found.errors
        opened += 1
        loaded += len(found.shards)
    print(json.dumps({"opened": opened, "loaded": loaded}))


ROLES: dict[str, Callable[..., None]] = {
    "writer": writer,
    "concurrent": concurrent,
    "opener": opener,
}

if __name__ == "__main__":
    ROLES[sys.argv[1]](*sys.argv[2:])
