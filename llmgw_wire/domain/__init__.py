"""The domain models: plain attrs values that know nothing of the wire.

They are grouped like the reference's Go packages: `discovery` (what an agent
finds on its host), `inventory` (the control plane's nodes), `reconciler`
(adopted shards and commands), `engines` (shard specs and profiles),
`supervisor` (shard states) and `keepalive` (what keeps the stream going).
The models that make up a registration are created when the package is
imported, the others on first use.
`FrozenMap` is the immutable mapping that holds their maps.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
from llmgw_wire.domain._nodes import FabricAttachment, Node, NodeState, Registration
from llmgw_wire.domain._reconciler import AdoptedShard
from llmgw_wire.domain._supervisor import Compute, ShardReport, State
from llmgw_wire.domain._values import FrozenMap

if TYPE_CHECKING:
    from llmgw_wire.domain._commands import ShardCommand, StopCommand
    from llmgw_wire.domain._engines import Adapter, Profile, ShardSpec
    from llmgw_wire.domain._keepalive import Ack, Heartbeat

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

# The models a registration is made of are loaded with the package; the
# others (the shard spec and its commands, the keepalive messages) on first
# use: the import is cheaper, and the first conversion (whose mapping names
# every model) creates them.
_LATER = {
    "Adapter": "llmgw_wire.domain._engines",
    "Profile": "llmgw_wire.domain._engines",
    "ShardSpec": "llmgw_wire.domain._engines",
    "ShardCommand": "llmgw_wire.domain._commands",
    "StopCommand": "llmgw_wire.domain._commands",
    "Ack": "llmgw_wire.domain._keepalive",
    "Heartbeat": "llmgw_wire.domain._keepalive",
}

if not TYPE_CHECKING:
    # Hidden from type checkers, which see the imports above instead.

    def __getattr__(name: str) -> Any:
        home = _LATER.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later lookups skip this function
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_on_import.imported(__name__)
