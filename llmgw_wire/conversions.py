"""Named conversions: the Python twins of the reference's functions, and their inverses.

Each is a thin, typed door onto the converter (`llmgw_wire.codec._cattrs_converter`),
so they follow the mapping exactly and raise the library's errors.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from llmgw_wire.codec._cattrs_converter import (
    converter,
    structure_with_context,
    unstructure_with_context,
)
from llmgw_wire.domain import (
    AdoptedShard,
    FabricAttachment,
    Inventory,
    Node,
    Registration,
    ShardCommand,
    ShardSpec,
    State,
)
from llmgw_wire.mapping import STATE_NUMBERS, STATES_BY_NUMBER
from llmgw_wire.v1 import Register, RunningShard, ShardStatusState, StartShard

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Iterable, Mapping

__all__ = [
    "adopted_from_register",
    "command_from_start_shard",
    "node_from_register",
    "register_from_inventory",
    "register_from_node",
    "registration_from_inventory",
    "running_shard_from_spec",
    "shard_spec_from_start",
    "start_shard_from_command",
    "state_from_wire",
    "state_to_wire",
]


def state_to_wire(state: State) -> ShardStatusState:
    """The wire enum value of a shard state (`STATE_UNSPECIFIED` for none)."""
    number = STATE_NUMBERS.get(state)
    return ShardStatusState(number) if number is not None else ShardStatusState.UNSPECIFIED


def state_from_wire(value: int) -> State:
    """The shard state of a wire enum value.

    Unspecified, and any number this version does not know (a newer agent's),
    is `State.FAILED`: a state not understood must never pass for a healthy one.
    """
    return STATES_BY_NUMBER.get(value, State.FAILED)


def node_from_register(register: Register) -> Node:
    """The inventory node a registration describes; a registration makes it READY."""
    return converter.structure(register, Node)


def register_from_node(node: Node, shards: Iterable[AdoptedShard] = ()) -> Register:
    """The registration that decodes to `node` (and, given, its adopted shards).

    The exact inverse of `node_from_register` and `adopted_from_register`
    for every node whose state is READY and whose shards belong to it.
    """
    register: Register = converter.unstructure(Registration(node, tuple(shards)))
    return register


def adopted_from_register(node_id: str, shards: Iterable[RunningShard]) -> list[AdoptedShard]:
    """The reconciler's view of the shards an agent reported running on node `node_id`.

    A leader (rank 0) with a known address gets its `endpoint`; the compute
    placement is carried when the agent reported one.
    """
    return [structure_with_context(shard, AdoptedShard, node_id=node_id) for shard in shards]


def registration_from_inventory(
    node_id: str,
    hostname: str,
    mgmt_addr: str,
    agent_version: str,
    inventory: Inventory,
    *,
    labels: Mapping[str, str] | None = None,
    fabrics: Iterable[FabricAttachment] = (),
    running: Iterable[tuple[ShardSpec, State]] = (),
    features: Iterable[str] = (),
    engine_versions: Mapping[str, str] | None = None,
    engines_probed: bool = False,
    cpu_count: int | None = None,
) -> Registration:
    """The `Registration` an agent sends: what it discovered, and the shards it runs.

    Built from domain values alone. `running` gives each shard's spec and
    state, as the shard store keeps them (`[(s.spec, s.state) for s in
    states]`); each becomes the shard the control plane adopts, compute
    placement included. The result is what the control plane decodes from
    the same registration. `cpu_count` defaults to this host's
    (`os.cpu_count()`), as the reference uses the runtime's.
    """
    node = Node.from_inventory(
        inventory,
        id=node_id,
        hostname=hostname,
        mgmt_addr=mgmt_addr,
        agent_version=agent_version,
        cpu_count=os.cpu_count() or 0 if cpu_count is None else cpu_count,
        labels=labels,
        fabrics=fabrics,
        features=features,
        engine_versions=engine_versions,
        engines_probed=engines_probed,
    )
    shards = tuple(AdoptedShard.from_spec(spec, state, node_id) for spec, state in running)
    return Registration(node, shards)


def register_from_inventory(
    node_id: str,
    hostname: str,
    mgmt_addr: str,
    agent_version: str,
    labels: Mapping[str, str],
    inventory: Inventory,
    fabrics: Iterable[FabricAttachment] = (),
    *,
    running: Iterable[RunningShard] = (),
    features: Iterable[str] = (),
    engine_versions: Mapping[str, str] | None = None,
    engines_probed: bool = False,
    cpu_count: int | None = None,
) -> Register:
    """The wire registration an agent sends: what it discovered and what it runs.

    The reference's function: `registration_from_inventory` gives the same
    as domain values. Unlike the reference, the host description is sent.
    """
    node = registration_from_inventory(
        node_id,
        hostname,
        mgmt_addr,
        agent_version,
        inventory,
        labels=labels,
        fabrics=fabrics,
        features=features,
        engine_versions=engine_versions,
        engines_probed=engines_probed,
        cpu_count=cpu_count,
    ).node
    register: Register = converter.unstructure(node)
    register.running_shards = list(running)
    return register


def running_shard_from_spec(spec: ShardSpec, state: State) -> RunningShard:
    """What an agent reports, when it registers, for a shard it runs.

    The compute placement travels when the spec has one (and only then); the
    model is the name the engine serves, or its model path when it has none.
    """
    # Every rank reports its leader, not only the leader itself.
    shard = AdoptedShard.from_spec(spec, state)
    message: RunningShard = unstructure_with_context(shard, leader_addr=spec.leader_addr)
    return message


def start_shard_from_command(command: ShardCommand) -> StartShard:
    """The wire command for a reconciler's decision to start a shard."""
    message: StartShard = converter.unstructure(command)
    return message


def command_from_start_shard(message: StartShard) -> ShardCommand:
    """The reconciler's command a `StartShard` carries (inverse of `start_shard_from_command`)."""
    return converter.structure(message, ShardCommand)


def shard_spec_from_start(message: StartShard) -> tuple[ShardSpec, dt.timedelta]:
    """The engine's shard spec and the startup timeout a `StartShard` carries."""
    command = command_from_start_shard(message)
    return command.spec, command.startup_timeout
