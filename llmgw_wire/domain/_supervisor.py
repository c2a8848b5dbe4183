"""Shard lifecycle states, as the agent's supervisor tracks them, and what a shard computes on."""

from __future__ import annotations

import enum
from collections.abc import Sequence

from attrs import frozen

from llmgw_wire.domain._values import seq

__all__ = ["Compute", "ShardReport", "State"]


class State(enum.Enum):
    """Where a shard is in its lifecycle."""

    PENDING = "pending"
    STARTING = "starting"
    LOADING = "loading"
    READY = "ready"
    DRAINING = "draining"
    STOPPED = "stopped"
    FAILED = "failed"


@frozen
class Compute:
    """What a shard computes on: `offloaded` of `total` layers on `devices`."""

    backend: str = ""
    devices: Sequence[str] = seq()
    offloaded: int = 0
    total: int = 0


@frozen
class ShardReport:
    """What an agent reports when a shard's state changes.

    `compute` is None until the engine has said what it computes on.
    """

    replica_id: str = ""
    shard_id: str = ""
    state: State = State.PENDING
    detail: str = ""
    compute: Compute | None = None
