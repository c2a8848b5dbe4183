"""The control plane's view of shards: adopted ones and commands (the reference's `reconciler`)."""

from __future__ import annotations

import datetime as dt

from attrs import field, frozen

from llmgw_wire.domain._values import seq
from llmgw_wire.domain.engines import Compute, ShardSpec
from llmgw_wire.domain.supervisor import State

__all__ = ["AdoptedShard", "Compute", "ShardCommand", "StopCommand"]


@frozen
class AdoptedShard:
    """A shard an agent was already running when it registered.

    `endpoint` is `http://{leader_addr}:{http_port}` for the leader (rank 0)
    when its address is known, and None otherwise.
    """

    node_id: str = ""
    replica_id: str = ""
    shard_id: str = ""
    rank: int = 0
    gpu_indices: tuple[int, ...] = seq()
    hcas: tuple[str, ...] = seq()
    http_port: int = 0
    state: State = State.PENDING
    model: str = ""
    profile: str = ""
    pool: str = ""
    fabric: str = ""
    profile_fp: str = ""
    compute: Compute | None = None
    endpoint: str | None = None


@frozen
class ShardCommand:
    """The control plane's decision to start one shard.

    On the wire the command's `replica_id`, `shard_id`, `pool`, `fabric` and
    `profile_fp` are the ones sent; the spec's copies of them are not.
    `startup_timeout` travels as whole milliseconds.
    """

    replica_id: str = ""
    shard_id: str = ""
    spec: ShardSpec = field(factory=ShardSpec)
    startup_timeout: dt.timedelta = dt.timedelta(0)
    pool: str = ""
    fabric: str = ""
    profile_fp: str = ""


@frozen
class StopCommand:
    """The control plane's decision to stop one shard, draining it for `grace` first."""

    replica_id: str = ""
    shard_id: str = ""
    grace: dt.timedelta = dt.timedelta(0)
