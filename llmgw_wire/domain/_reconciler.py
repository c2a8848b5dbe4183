"""The control plane's view of shards: the ones an agent adopts (the reference's `reconciler`).

Its commands, to start and stop shards, are in `llmgw_wire.domain._commands`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from attrs import frozen

from llmgw_wire.domain._supervisor import Compute, State
from llmgw_wire.domain._values import seq

if TYPE_CHECKING:
    from llmgw_wire.domain._engines import ShardSpec

__all__ = ["AdoptedShard", "Compute", "leader_endpoint"]


def leader_endpoint(leader_addr: str, rank: int, http_port: int) -> str | None:
    """A shard's endpoint, by the reference's rule.

    `http://{leader_addr}:{http_port}` for the leader (rank 0) whose address
    is known; None for every other shard.
    """
    return f"http://{leader_addr}:{http_port}" if rank == 0 and leader_addr else None


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
    gpu_indices: Sequence[int] = seq()
    hcas: Sequence[str] = seq()
    http_port: int = 0
    state: State = State.PENDING
    model: str = ""
    profile: str = ""
    pool: str = ""
    fabric: str = ""
    profile_fp: str = ""
    compute: Compute | None = None
    endpoint: str | None = None

    @classmethod
    def from_spec(cls, spec: ShardSpec, state: State, node_id: str = "") -> AdoptedShard:
        """The shard an agent running `spec` in `state` reports, as the control plane adopts it.

        The model is the name the engine serves, or its model path when it
        has none; the compute placement is the spec's, when it has one.
        """
        return cls(
            node_id=node_id,
            replica_id=spec.replica_id,
            shard_id=spec.shard_id,
            rank=spec.rank,
            gpu_indices=spec.gpu_indices,
            hcas=spec.hcas,
            http_port=spec.http_port,
            state=state,
            model=spec.profile.served_model_name or spec.profile.model_path,
            profile=spec.profile.name,
            pool=spec.pool,
            fabric=spec.fabric,
            profile_fp=spec.profile_fp,
            compute=spec.compute,
            endpoint=leader_endpoint(spec.leader_addr, spec.rank, spec.http_port),
        )
