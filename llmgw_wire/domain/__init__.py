"""The domain models: plain attrs values that know nothing of the wire.

They are grouped like the reference's Go packages: `discovery` (what an agent
finds on its host), `inventory` (the control plane's nodes), `reconciler`
(adopted shards and commands), `engines` (shard specs and profiles),
`supervisor` (shard states) and `keepalive` (what keeps the stream going).
`FrozenMap` is the immutable mapping that holds their maps.
"""

from llmgw_wire import _on_import
from llmgw_wire.domain._discovery import (
    GPU,
    IMEX,
    GPUFabric,
    GPUHealth,
    Host,
    Inventory,
    LocalWeights,
    MIGDevice,
    Storage,
)
from llmgw_wire.domain._engines import Adapter, Compute, Profile, ShardSpec
from llmgw_wire.domain._keepalive import Ack, Heartbeat
from llmgw_wire.domain._nodes import FabricAttachment, Node, NodeState, Registration
from llmgw_wire.domain._reconciler import AdoptedShard, ShardCommand, StopCommand
from llmgw_wire.domain._supervisor import ShardReport, State
from llmgw_wire.domain._values import FrozenMap

__all__ = [
    "GPU",
    "IMEX",
    "Ack",
    "Adapter",
    "AdoptedShard",
    "Compute",
    "FabricAttachment",
    "FrozenMap",
    "GPUFabric",
    "GPUHealth",
    "Heartbeat",
    "Host",
    "Inventory",
    "LocalWeights",
    "MIGDevice",
    "Node",
    "NodeState",
    "Profile",
    "Registration",
    "ShardCommand",
    "ShardReport",
    "ShardSpec",
    "State",
    "StopCommand",
    "Storage",
]

_on_import.imported(__name__)
