"""llmgw-wire: the typed wire layer of llmgw's agent stream.

The domain models (`Node`, `GPU`, `ShardSpec`, ...) are what services program
against; `llmgw_wire.v1` has the wire messages; the converter and the named
conversions map one to the other, and `encode`/`decode` go to and from bytes.

The names below are imported on first use, so that a tool that needs one
part of the library (the schema checker, say) does not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from llmgw_wire._version import __version__

if TYPE_CHECKING:
    from llmgw_wire.codec import (
        converter,
        decode,
        encode,
    )
    from llmgw_wire.conversions import (
        adopted_from_register,
        command_from_start_shard,
        node_from_register,
        register_from_inventory,
        register_from_node,
        running_shard_from_spec,
        shard_spec_from_start,
        start_shard_from_command,
        state_from_wire,
        state_to_wire,
    )
    from llmgw_wire.domain import (
        GPU,
        IMEX,
        Ack,
        Adapter,
        AdoptedShard,
        Compute,
        FabricAttachment,
        GPUFabric,
        GPUHealth,
        Heartbeat,
        Host,
        Inventory,
        LocalWeights,
        MIGDevice,
        Node,
        NodeState,
        Profile,
        Registration,
        ShardCommand,
        ShardReport,
        ShardSpec,
        State,
        StopCommand,
        Storage,
    )
    from llmgw_wire.errors import (
        DecodeError,
        EncodeError,
        JSONError,
        MessageRejected,
        PeerUnavailable,
        PermissionDenied,
        RegistrationTimeout,
        StateFileError,
        StateFileInvalid,
        StatusCode,
        StoreError,
        StoreOSError,
        StreamClosed,
        StreamError,
        Unauthenticated,
        UsageError,
        WireError,
    )
    from llmgw_wire.store import LoadedShards, SavedShard, ShardStore

__all__ = [
    "GPU",
    "IMEX",
    "Ack",
    "Adapter",
    "AdoptedShard",
    "Compute",
    "DecodeError",
    "EncodeError",
    "FabricAttachment",
    "GPUFabric",
    "GPUHealth",
    "Heartbeat",
    "Host",
    "Inventory",
    "JSONError",
    "LoadedShards",
    "LocalWeights",
    "MIGDevice",
    "MessageRejected",
    "Node",
    "NodeState",
    "PeerUnavailable",
    "PermissionDenied",
    "Profile",
    "Registration",
    "RegistrationTimeout",
    "SavedShard",
    "ShardCommand",
    "ShardReport",
    "ShardSpec",
    "ShardStore",
    "State",
    "StateFileError",
    "StateFileInvalid",
    "StatusCode",
    "StopCommand",
    "Storage",
    "StoreError",
    "StoreOSError",
    "StreamClosed",
    "StreamError",
    "Unauthenticated",
    "UsageError",
    "WireError",
    "__version__",
    "adopted_from_register",
    "command_from_start_shard",
    "converter",
    "decode",
    "encode",
    "node_from_register",
    "register_from_inventory",
    "register_from_node",
    "running_shard_from_spec",
    "shard_spec_from_start",
    "start_shard_from_command",
    "state_from_wire",
    "state_to_wire",
]

# The one table of the root's names: each, and the module it is imported from
# on first use. `__all__` and the imports for type checkers above hold the
# same names (a test checks it).
_HOMES: dict[str, str] = {
    "Ack": "llmgw_wire.domain",
    "Adapter": "llmgw_wire.domain",
    "AdoptedShard": "llmgw_wire.domain",
    "Compute": "llmgw_wire.domain",
    "FabricAttachment": "llmgw_wire.domain",
    "GPU": "llmgw_wire.domain",
    "GPUFabric": "llmgw_wire.domain",
    "GPUHealth": "llmgw_wire.domain",
    "Heartbeat": "llmgw_wire.domain",
    "Host": "llmgw_wire.domain",
    "IMEX": "llmgw_wire.domain",
    "Inventory": "llmgw_wire.domain",
    "LocalWeights": "llmgw_wire.domain",
    "MIGDevice": "llmgw_wire.domain",
    "Node": "llmgw_wire.domain",
    "NodeState": "llmgw_wire.domain",
    "Profile": "llmgw_wire.domain",
    "Registration": "llmgw_wire.domain",
    "ShardCommand": "llmgw_wire.domain",
    "ShardReport": "llmgw_wire.domain",
    "ShardSpec": "llmgw_wire.domain",
    "State": "llmgw_wire.domain",
    "StopCommand": "llmgw_wire.domain",
    "Storage": "llmgw_wire.domain",
    "converter": "llmgw_wire.codec",
    "decode": "llmgw_wire.codec",
    "encode": "llmgw_wire.codec",
    "adopted_from_register": "llmgw_wire.conversions",
    "command_from_start_shard": "llmgw_wire.conversions",
    "node_from_register": "llmgw_wire.conversions",
    "register_from_inventory": "llmgw_wire.conversions",
    "register_from_node": "llmgw_wire.conversions",
    "running_shard_from_spec": "llmgw_wire.conversions",
    "shard_spec_from_start": "llmgw_wire.conversions",
    "start_shard_from_command": "llmgw_wire.conversions",
    "state_from_wire": "llmgw_wire.conversions",
    "state_to_wire": "llmgw_wire.conversions",
    "DecodeError": "llmgw_wire.errors",
    "EncodeError": "llmgw_wire.errors",
    "JSONError": "llmgw_wire.errors",
    "StateFileError": "llmgw_wire.errors",
    "WireError": "llmgw_wire.errors",
    "MessageRejected": "llmgw_wire.errors",
    "PeerUnavailable": "llmgw_wire.errors",
    "PermissionDenied": "llmgw_wire.errors",
    "RegistrationTimeout": "llmgw_wire.errors",
    "StateFileInvalid": "llmgw_wire.errors",
    "StatusCode": "llmgw_wire.errors",
    "StoreError": "llmgw_wire.errors",
    "StoreOSError": "llmgw_wire.errors",
    "StreamClosed": "llmgw_wire.errors",
    "StreamError": "llmgw_wire.errors",
    "Unauthenticated": "llmgw_wire.errors",
    "UsageError": "llmgw_wire.errors",
    "LoadedShards": "llmgw_wire.store",
    "SavedShard": "llmgw_wire.store",
    "ShardStore": "llmgw_wire.store",
}


if not TYPE_CHECKING:
    # Hidden from type checkers, which see the imports above instead: a
    # module `__getattr__` would make every name, misspelt ones included, `Any`.

    def __getattr__(name: str) -> Any:
        if name == "v1":
            # The wire classes load on first use (the codec needs none), so
            # `llmgw_wire.v1` is imported when first reached, as here.
            return importlib.import_module("llmgw_wire.v1")
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later lookups skip this function
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
