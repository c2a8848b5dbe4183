"""Shard lifecycle states, as the agent's supervisor tracks them."""

from __future__ import annotations

import enum

from attrs import frozen

from llmgw_wire.domain._engines import Compute

__all__ = ["ShardReport", "State"]


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
class ShardReport:
    """What an agent reports when a shard's state changes.

    `compute` is None until the engine has said what it computes on.
    """

    replica_id: str = ""
    shard_id: str = ""
    state: State = State.PENDING
    detail: str = ""
    compute: Compute | None = None
