"""How a shard is run: its spec and engine profile (the reference's `engines`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import field, frozen

# `Compute` names the type of `ShardSpec.compute`, for those that resolve the annotations.
from llmgw_wire.domain._supervisor import Compute
from llmgw_wire.domain._values import secret, seq, str_map

__all__ = ["Adapter", "Profile", "ShardSpec"]


@frozen
class Adapter:
    """A LoRA adapter: the name requests select it by, and where it loads from."""

    name: str = ""
    path: str = ""


@frozen
class Profile:
    """An engine profile: which engine, its parallelism, and how it is invoked."""

    name: str = ""
    engine: str = ""
    gpu_class: str = ""
    tp: int = 0
    pp: int = 0
    gpus_per_node: int = 0
    nodes: int = 0
    args: Sequence[str] = seq()
    env: Mapping[str, str] = str_map()
    model_path: str = ""
    served_model_name: str = ""
    adapters: Sequence[Adapter] = seq()
    kv_events: bool = False


@frozen
class ShardSpec:
    """Everything an agent needs to run one shard, and what it keeps of it on disk.

    `api_key` is a secret: it never appears in a repr. `compute` is None until
    the engine has reported its placement.
    """

    replica_id: str = ""
    shard_id: str = ""
    rank: int = 0
    nnodes: int = 0
    leader_addr: str = ""
    leader_port: int = 0
    gpu_indices: Sequence[int] = seq()
    hcas: Sequence[str] = seq()
    mgmt_interface: str = ""
    http_port: int = 0
    pool: str = ""
    fabric: str = ""
    profile_fp: str = ""
    api_key: str = secret()
    threads: int = 0
    profile: Profile = field(factory=Profile)
    compute: Compute | None = None
