"""The processes of the failover story, one role per run: `python failover_roles.py ROLE ARGS...`.

    control-plane PORT      a control plane on 127.0.0.1:PORT (0: a free one);
                            prints LISTENING <port>, then REGISTERED <node> <json>
                            for each registration (the shards it adopts),
                            READY <node> <shard> for each shard reported ready;
                            starts one shard on a node that runs none; on
                            SIGTERM stops gracefully and prints STOPPED
    agent TARGETS DIR NODE [INITIAL,MAXIMUM]
                            an agent that stays connected (`keep_connected`) to
                            TARGETS, one address or several with commas,
                            keeps its shards' states in DIR, registers with
                            them, and starts what it is told; prints
                            ACK <adopted> for each Ack and STARTED <shard>;
                            its Backoff is INITIAL,MAXIMUM seconds (0.5,2)
    scenario-plane NAME     a control plane on a free port that, on the first
                            registration, sends Ack, StartShard and StopShard
                            and stops gracefully (NAME graceful), or sends an
                            Ack, ends the call FAILED_PRECONDITION and stops
                            (NAME status); prints LISTENING <port>, STOPPED
    memory-plane            a control plane on a free port that prints
                            LISTENING <port>, then its peak RSS in KiB
                            (RSS <kib>) for each line on stdin

Every line is flushed at once: the test reads them as they come.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import resource
import signal
import sys

import attrs

from llmgw_wire import (
    Ack,
    Compute,
    Registration,
    ShardCommand,
    ShardReport,
    State,
    StopCommand,
)
from llmgw_wire.codec import json as wire_json
from llmgw_wire.store import SavedShard, ShardStore
from llmgw_wire.stream import (
    AgentSession,
    Backoff,
    ControlPlane,
    ControlSession,
    Server,
    StreamError,
    keep_connected,
    registration_from_inventory,
    start_server,
)
from llmgw_wire.testing.sample import sample_command, sample_inventory, sample_node


def say(*words: object) -> None:
    print(*words, flush=True)


class Adopting(ControlPlane):
    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, Registration):
                node = value.node.id
                say("REGISTERED", node, wire_json.json_converter.dumps(list(value.shards)))
                await session.send(Ack(node, len(value.shards), "adopted"))
                if not value.shards:
                    command = sample_command()
                    shard = f"{node}-s0"
                    spec = attrs.evolve(command.spec, shard_id=shard)
                    await session.send(attrs.evolve(command, spec=spec))
            elif isinstance(value, ShardReport) and value.state is State.READY:
                say("READY", session.node_id, value.shard_id)


async def control_plane(port: int) -> None:
    server = await start_server(Adopting(), port=port)
    say("LISTENING", server.port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(grace=20)
    say("STOPPED")


# What the engine reports once it has loaded the model.
PLACEMENT = Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40)


async def agent(target: str, directory: str, node_id: str, backoff: str = "0.5,2") -> None:
    store = ShardStore(directory)
    node = sample_node()

    def registration() -> Registration:
        states = store.load_all().shards
        inventory = sample_inventory()
        return registration_from_inventory(
            node_id,
            node.hostname,
            node.mgmt_addr,
            node.agent_version,
            inventory,
            labels=node.labels,
            fabrics=node.fabrics,
            running=[(s.spec, s.state) for s in states],
            cpu_count=node.cpu_count,
        )

    async def serve(session: AgentSession) -> None:
        async for value in session:
            if isinstance(value, Ack):
                say("ACK", value.adopted_shards)
            elif isinstance(value, ShardCommand):
                spec = attrs.evolve(value.spec, compute=PLACEMENT)
                store.save(SavedShard(spec, State.READY))
                say("STARTED", spec.shard_id)
                await session.send(
                    ShardReport(spec.replica_id, spec.shard_id, State.READY, compute=PLACEMENT)
                )
            elif isinstance(value, StopCommand):
                pass

    initial, maximum = (float(seconds) for seconds in backoff.split(","))
    await keep_connected(target.split(","), registration, serve, backoff=Backoff(initial, maximum))


CORDONED = "node is cordoned: registration refused by the control plane"


class Scenario(ControlPlane):
    def __init__(self, name: str) -> None:
        self.name = name
        self.server: Server | None = None
        self.stopped = asyncio.Event()

    def stop_soon(self) -> None:
        assert self.server is not None
        task = asyncio.get_running_loop().create_task(self.server.stop(grace=20))
        task.add_done_callback(lambda _: self.stopped.set())

    async def handle(self, session: ControlSession) -> None:
        value = await session.recv(timeout=60)
        assert isinstance(value, Registration)
        node = value.node.id
        await session.send(Ack(node, len(value.shards), "adopted"))
        if self.name == "status":
            self.stop_soon()
            raise StreamError(CORDONED, code="FAILED_PRECONDITION")
        command = sample_command()
        await session.send(command)
        await session.send(
            StopCommand(command.replica_id, command.shard_id, dt.timedelta(seconds=30))
        )
        self.stop_soon()
        async for _ in session:
            pass


async def scenario_plane(name: str) -> None:
    plane = Scenario(name)
    plane.server = await start_server(plane)
    say("LISTENING", plane.server.port)
    await plane.stopped.wait()
    say("STOPPED")


class Idle(ControlPlane):
    async def handle(self, session: ControlSession) -> None:
        async for _ in session:
            pass


async def memory_plane() -> None:
    server = await start_server(Idle())
    say("LISTENING", server.port)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        say("RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    await server.stop(grace=None)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "control-plane":
        asyncio.run(control_plane(int(args[0])))
    elif role == "agent":
        asyncio.run(agent(*args))
    elif role == "scenario-plane":
        asyncio.run(scenario_plane(args[0]))
    elif role == "memory-plane":
        asyncio.run(memory_plane())
    else:
        raise SystemExit(f"unknown role {role!r}")
