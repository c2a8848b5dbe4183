"""Which strategy hypothesis draws for each of the library's types: the table, without them.

`llmgw_wire.testing.strategies` registers what it says with hypothesis, and
so does the hook hypothesis runs when it is imported
(`llmgw_wire.testing._hook`), which must not import the strategies: so the
table is here, and imports the library's modules only when it is read.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

__all__ = ["Drawn", "model_strategies", "registered", "with_resolver"]

#: The strategies of the envelopes, in the order of the mapping's `ENVELOPES`.
_ENVELOPE_STRATEGIES = ("agent_messages", "control_messages")


#: By domain model (its name in `llmgw_wire.domain`): the function of the
#: strategies module that draws it.
_MODEL_STRATEGIES = {
    "Host": "hosts",
    "GPUFabric": "gpu_fabrics",
    "GPUHealth": "gpu_healths",
    "MIGDevice": "mig_devices",
    "GPU": "gpus",
    "IMEX": "imexes",
    "LocalWeights": "local_weights",
    "Storage": "storages",
    "FabricAttachment": "fabric_attachments",
    "Inventory": "inventories",
    "Node": "nodes",
    "Compute": "computes",
    "AdoptedShard": "adopted_shards",
    "Registration": "registrations",
    "Adapter": "adapters",
    "Profile": "profiles",
    "ShardSpec": "_carried_shard_specs",
    "ShardCommand": "shard_commands",
    "StopCommand": "stop_commands",
    "ShardReport": "shard_reports",
    "Heartbeat": "heartbeats",
    "Ack": "acks",
}


@functools.cache
def model_strategies() -> dict[type, str]:
    """The strategy of every domain model: the name of its function in the strategies module.

    `domain_values(T, **options)` calls `llmgw_wire.testing.strategies.<name>(**options)`.
    """
    from llmgw_wire import domain

    return {getattr(domain, model): name for model, name in _MODEL_STRATEGIES.items()}


class Drawn(NamedTuple):
    """What hypothesis draws for a type: `strategies.<strategy>()`, or `(model)`."""

    strategy: str
    model: type | None = None


@functools.cache
def registered() -> dict[type, Drawn]:
    """Every type with a strategy registered with hypothesis, and what it draws.

    The domain models draw `domain_values(T)`, `State` draws `states()`, the
    `llmgw_wire.v1` class of a model `wire_messages(model)`, and the two
    envelopes `agent_messages()` and `control_messages()`. A message some
    models share (`GPU` with its parts, `Register` with `Node`, `StartShard`
    with `ShardSpec`) comes last in the mapping's pairs with the model that
    holds all of it, and draws that model's.
    """
    from llmgw_wire.codec._classes import betterproto2_classes
    from llmgw_wire.domain import State
    from llmgw_wire.mapping import ENVELOPES, PAIRS

    classes = betterproto2_classes()
    table = {model: Drawn("domain_values", model) for model in model_strategies()}
    table[State] = Drawn("states")
    table.update({classes[pair.wire]: Drawn("wire_messages", pair.domain) for pair in PAIRS})
    for envelope, name in zip(ENVELOPES, _ENVELOPE_STRATEGIES, strict=True):
        table[classes[envelope.wire]] = Drawn(name)
    return table


#: The types the hook (`_hook.register_resolvers`) has registered a resolver for. Importing
#: the strategies registers nothing once it has run, so that a strategy of a
#: project's own that replaced one of these stays registered.
with_resolver: set[type] = set()
