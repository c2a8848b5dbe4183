"""The processes of the restart story, one role per run: `python restart_roles.py ROLE ARGS...`.

Each role is what one service does at one moment, and talks to the others
only through the files it is given: the bytes of a wire message, or the
agent's shard store (a directory).

    control-start OUT               the control plane sends a StartShard
    agent-start IN STORE [COMPUTE]  an agent starts the shard, learns its compute
                                    placement (JSON), saves it in its store, and exits
    agent-register STORE OUT        a new agent loads its store and registers
    control-adopt IN                a new control plane adopts what the agent
                                    runs, and prints the adopted shards as JSON
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

import llmgw_wire as wire
from llmgw_wire import v1
from llmgw_wire.codec import json as wire_json
from llmgw_wire.store import SavedShard, ShardStore
from llmgw_wire.testing.sample import sample_command, sample_inventory, sample_node

if TYPE_CHECKING:
    from collections.abc import Callable


def control_start(out: str) -> None:
    Path(out).write_bytes(wire.encode(sample_command()))


def agent_start(message: str, state: str, compute: str | None = None) -> None:
    start = wire.decode(Path(message).read_bytes(), v1.StartShard)
    spec, _timeout = wire.shard_spec_from_start(start)
    if compute is not None:
        # What the engine reported once it had loaded the model.
        spec = attrs.evolve(spec, compute=wire_json.decode(compute, wire.Compute))
    with ShardStore(state) as store:
        store.save(SavedShard(spec, wire.State.READY))


def agent_register(state: str, out: str) -> None:
    with ShardStore(state) as store:
        loaded = store.load_all()
    assert not loaded.errors, loaded.errors
    node, inventory = sample_node(), sample_inventory()
    register = wire.register_from_inventory(
        node.id,
        node.hostname,
        node.mgmt_addr,
        node.agent_version,
        node.labels,
        inventory,
        node.fabrics,
        running=[wire.running_shard_from_spec(s.spec, s.state) for s in loaded.shards],
    )
    Path(out).write_bytes(bytes(register))


def control_adopt(message: str) -> None:
    register = wire.decode(Path(message).read_bytes(), v1.Register)
    node = wire.node_from_register(register)
    shards = wire.adopted_from_register(node.id, register.running_shards)
    sys.stdout.write(wire_json.json_converter.dumps(shards, list[wire.AdoptedShard]))


ROLES: dict[str, Callable[..., None]] = {
    "control-start": control_start,
    "agent-start": agent_start,
    "agent-register": agent_register,
    "control-adopt": control_adopt,
}

if __name__ == "__main__":
    ROLES[sys.argv[1]](*sys.argv[2:])
