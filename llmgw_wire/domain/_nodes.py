"""The control plane's nodes and registrations (the reference's `inventory` package)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence

from attrs import field, frozen

from llmgw_wire.domain._discovery import GPU, IMEX, Host, Inventory, LocalWeights, Storage
from llmgw_wire.domain._reconciler import AdoptedShard
from llmgw_wire.domain._values import seq, str_map

__all__ = ["FabricAttachment", "Node", "NodeState", "Registration"]


class NodeState(enum.Enum):
    """Whether the control plane may place shards on a node."""

    READY = "ready"  # registered and connected
    DRAINING = "draining"  # connected, but no new shards go there
    OFFLINE = "offline"  # its agent's stream is gone


@frozen
class FabricAttachment:
    """A network fabric the node is attached to, through `hcas`, at `rate_gbps`."""

    fabric: str = ""
    hcas: Sequence[str] = seq()
    rate_gbps: int = 0


@frozen
class Node:
    """A GPU node as the control plane knows it (host memory in MiB)."""

    id: str = ""
    hostname: str = ""
    mgmt_addr: str = ""
    labels: Mapping[str, str] = str_map()
    state: NodeState = NodeState.READY
    agent_version: str = ""
    features: Sequence[str] = seq()
    engine_versions: Mapping[str, str] = str_map()
    engines_probed: bool = False
    memory_total_mb: int = 0
    cpu_count: int = 0
    host: Host = field(factory=Host)
    weights: Sequence[LocalWeights] = seq()
    storage: Sequence[Storage] = seq()
    gpus: Sequence[GPU] = seq()
    imex: IMEX = field(factory=IMEX)
    fabrics: Sequence[FabricAttachment] = seq()

    @classmethod
    def from_inventory(
        cls,
        inventory: Inventory,
        *,
        id: str,
        hostname: str,
        mgmt_addr: str,
        agent_version: str,
        cpu_count: int,
        labels: Mapping[str, str] | None = None,
        fabrics: Iterable[FabricAttachment] = (),
        features: Iterable[str] = (),
        engine_versions: Mapping[str, str] | None = None,
        engines_probed: bool = False,
    ) -> Node:
        """The node an agent describes when it registers what it discovered; READY."""
        return cls(
            id=id,
            hostname=hostname,
            mgmt_addr=mgmt_addr,
            labels=labels or {},
            state=NodeState.READY,
            agent_version=agent_version,
            features=tuple(features),
            engine_versions=engine_versions or {},
            engines_probed=engines_probed,
            memory_total_mb=inventory.memory_total_mb,
            cpu_count=cpu_count,
            host=inventory.host,
            weights=inventory.weights,
            storage=inventory.storage,
            gpus=inventory.gpus,
            imex=inventory.imex,
            fabrics=tuple(fabrics),
        )


@frozen
class Registration:
    """A whole registration: the node and the shards its agent already runs."""

    node: Node = field(factory=Node)
    shards: Sequence[AdoptedShard] = seq()
