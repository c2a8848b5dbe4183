"""The Python stream (grpc.aio) against the grpc-go peers, both ways.

What two grpc-go ends do with each other (`test_go_peers.py`) is what a
Python end must do with a Go one: a graceful stop delivers every command
sent before it, a status sent just before a stop arrives, gzip works both
ways, a bad message is one bad message, mutual TLS binds the node id.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from peers import CONTROL_PLANE_API_KEY, kinds, run_agent, start_control_plane

from llmgw_wire import Ack, Registration, ShardCommand, ShardReport, State, StopCommand
from llmgw_wire.stream import (
    ClientTLS,
    ControlPlane,
    ControlSession,
    Server,
    ServerTLS,
    StreamError,
    connect,
    keep_connected,
    start_server,
)
from llmgw_wire.testing.sample import sample_command
from llmgw_wire.testing.stream import registration_of

if TYPE_CHECKING:
    from peers import AgentRun, TLSFiles

    from llmgw_wire.stream import AgentSession

RUNS = int(os.environ.get("LLMGW_INTEROP_RUNS", "20"))
WAIT = 60.0
STOPPING = ("UNAVAILABLE", "the control plane is stopping")
CORDONED = "node is cordoned: registration refused by the control plane"


#: The node the Python agent registers as.
AGENT = "py-agent-1"


# --- a Python agent, a Go control plane ------------------------------------------------


async def agent_run(target: str, **options: Any) -> tuple[list[object], StreamError | None]:
    """Register, then read until the call ends: what arrived and how it ended."""
    got: list[object] = []
    async with connect(target, **options) as session:
        await session.send(registration_of(AGENT))
        try:
            async for value in session:
                got.append(value)  # noqa: PERF401 (kept as it comes, up to an error)
        except StreamError as exc:
            return got, exc
    return got, None


def test_a_go_graceful_stop_delivers_everything_to_a_python_agent() -> None:
    failures = []
    for run in range(RUNS):
        cp = start_control_plane("graceful")
        try:
            got, end = asyncio.run(asyncio.wait_for(agent_run(cp.target), WAIT))
            code = cp.wait()
        finally:
            cp.stop()
        outcome = ([type(v).__name__ for v in got], end, code)
        if outcome != (["Ack", "ShardCommand", "StopCommand"], None, 0):
            failures.append(f"run {run}: {outcome}\n{cp.describe()}")
    assert failures == [], f"{len(failures)} of {RUNS} runs lost something:\n" + "\n".join(failures)


def test_every_field_of_a_go_command_arrives() -> None:
    cp = start_control_plane("graceful")
    try:
        got, _ = asyncio.run(asyncio.wait_for(agent_run(cp.target), WAIT))
    finally:
        cp.stop()
    ack, start, stop = got
    assert isinstance(ack, Ack)
    assert ack == Ack("py-agent-1", 2, ack.detail)
    assert isinstance(start, ShardCommand)
    assert start.spec.api_key == CONTROL_PLANE_API_KEY
    assert start.shard_id == "py-agent-1-s0"
    assert start.startup_timeout == dt.timedelta(minutes=10)
    assert stop == StopCommand("rep-go", "py-agent-1-s0", dt.timedelta(seconds=30))


def test_a_go_status_before_stop_reaches_a_python_agent() -> None:
    failures = []
    for run in range(RUNS):
        cp = start_control_plane("status")
        try:
            got, end = asyncio.run(asyncio.wait_for(agent_run(cp.target), WAIT))
            cp.wait()
        finally:
            cp.stop()
        outcome = (
            [type(v).__name__ for v in got],
            None if end is None else (end.code.name, end.details),
        )
        if outcome != (["Ack"], ("FAILED_PRECONDITION", CORDONED)):
            failures.append(f"run {run}: {outcome}\n{cp.describe()}")
    assert failures == [], f"{len(failures)} of {RUNS} runs lost the status:\n" + "\n".join(
        failures
    )


async def register_and_leave(target: str, **options: Any) -> list[object]:
    got: list[object] = []
    async with connect(target, **options) as session:
        await session.send(registration_of(AGENT))
        got.append(await session.recv(timeout=WAIT))
        got.append(await session.recv(timeout=WAIT))
        await session.close()
        assert await session.recv(timeout=WAIT) is None
    return got


@pytest.mark.parametrize("side", ["python agent", "go control plane"])
def test_gzip_with_a_go_control_plane(side: str) -> None:
    cp = start_control_plane("serve", gzip=side == "go control plane")
    try:
        compression = "gzip" if side == "python agent" else None
        got = asyncio.run(
            asyncio.wait_for(register_and_leave(cp.target, compression=compression), WAIT)
        )
        assert [type(v) for v in got] == [Ack, ShardCommand]
    finally:
        assert cp.stop() == 0
    assert cp.encodings() == (["gzip"] if side == "python agent" else ["identity"])
    assert kinds(cp.recv()) == ["register"]


def test_mutual_tls_with_a_go_control_plane(tls_files: TLSFiles) -> None:
    cp = start_control_plane("serve", tls=tls_files)
    try:
        tls = ClientTLS(tls_files.ca, tls_files.client_cert, tls_files.client_key)
        got = asyncio.run(asyncio.wait_for(register_and_leave(cp.target, tls=tls), WAIT))
        assert [type(v) for v in got] == [Ack, ShardCommand]
    finally:
        cp.stop()


def test_a_python_agent_comes_back_to_a_go_control_plane_after_kill_9() -> None:
    first = start_control_plane("serve")
    port = first.port
    acks: list[Ack] = []

    async def main() -> None:
        stop = asyncio.Event()

        async def serve(session: AgentSession) -> None:
            async for value in session:
                if isinstance(value, Ack):
                    acks.append(value)  # noqa: PERF401 (watched as it comes)

        agent = asyncio.ensure_future(
            keep_connected(first.target, lambda: registration_of(AGENT), serve, stop=stop)
        )
        while not acks:
            await asyncio.sleep(0.1)
        first.kill()
        second = await asyncio.to_thread(start_control_plane, "serve", listen=f"127.0.0.1:{port}")
        try:
            while len(acks) < 2:
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            await asyncio.wait_for(agent, WAIT)
            second.stop()
        assert kinds(second.recv())[:1] == ["register"]

    try:
        asyncio.run(asyncio.wait_for(main(), 2 * WAIT))
    finally:
        first.stop()
    assert [a.node_id for a in acks] == ["py-agent-1", "py-agent-1"]


# --- a Go agent, a Python control plane ------------------------------------------------


class Scripted(ControlPlane):
    """The Go control plane's scenarios, in Python."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.server: Server | None = None
        self.received: list[object] = []
        self.stopped = asyncio.get_running_loop().create_future()

    def stop_soon(self) -> None:
        assert self.server is not None
        task = asyncio.get_running_loop().create_task(self.server.stop(grace=WAIT))
        task.add_done_callback(lambda _: self.stopped.set_result(None))

    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            self.received.append(value)
            if not isinstance(value, Registration):
                continue
            node = value.node.id
            await session.send(Ack(node, len(value.shards), "adopted"))
            if self.scenario == "status":
                self.stop_soon()
                raise StreamError(CORDONED, code="FAILED_PRECONDITION")
            if self.scenario in ("graceful", "serve"):
                command = sample_command()
                shard = f"{node}-s0"
                spec = attrs.evolve(command.spec, replica_id="rep-py", shard_id=shard)
                await session.send(attrs.evolve(command, spec=spec))
            if self.scenario == "graceful":
                await session.send(StopCommand("rep-py", f"{node}-s0", dt.timedelta(seconds=30)))
                self.stop_soon()


async def serve_go_agent(
    scenario: str, agent_options: dict[str, Any], **server_options: Any
) -> tuple[AgentRun, Scripted]:
    plane = Scripted(scenario)
    server = await start_server(plane, **server_options)
    plane.server = server
    try:
        agent = await asyncio.to_thread(run_agent, f"127.0.0.1:{server.port}", **agent_options)
        if scenario in ("graceful", "status"):
            await asyncio.wait_for(plane.stopped, WAIT)
    finally:
        await server.stop(grace=None)
    return agent, plane


def test_a_python_graceful_stop_delivers_everything_to_a_go_agent() -> None:
    failures = []
    for run in range(RUNS):
        agent, _ = asyncio.run(serve_go_agent("graceful", {"node_id": f"node-{run}"}))
        outcome = (kinds(agent.recv), agent.status, agent.returncode)
        if outcome != (["ack", "start_shard", "stop_shard"], STOPPING, 0):
            failures.append(f"run {run}: {outcome}\n{agent.description}")
    assert failures == [], f"{len(failures)} of {RUNS} runs lost something:\n" + "\n".join(failures)


def test_a_python_status_before_stop_reaches_a_go_agent() -> None:
    failures = []
    for run in range(RUNS):
        agent, _ = asyncio.run(serve_go_agent("status", {"node_id": f"node-{run}"}))
        outcome = (kinds(agent.recv), agent.status)
        if outcome != (["ack"], ("FAILED_PRECONDITION", CORDONED)):
            failures.append(f"run {run}: {outcome}\n{agent.description}")
    assert failures == [], f"{len(failures)} of {RUNS} runs lost the status:\n" + "\n".join(
        failures
    )


@pytest.mark.parametrize("side", ["go agent", "python control plane"])
def test_gzip_with_a_go_agent(side: str) -> None:
    agent, plane = asyncio.run(
        serve_go_agent(
            "serve",
            # grpc-go 1.33 lists gzip in grpc-accept-encoding only on a call it
            # compresses itself: toward any other, the Python plane sends plain.
            {"gzip": True, "close_after": 2},
            compression="gzip" if side == "python control plane" else None,
        )
    )
    assert (agent.returncode, agent.status) == (0, ("OK", ""))
    assert kinds(agent.recv) == ["ack", "start_shard"]
    assert [type(v) for v in plane.received] == [Registration]
    if side == "python control plane":
        assert "ENCODING gzip" in agent.lines


def test_a_bad_message_from_a_go_agent_is_one_bad_message() -> None:
    agent, plane = asyncio.run(serve_go_agent("ack", {"scenario": "bad-then-good"}))
    # The heartbeat of year 10000 cannot be a Python datetime: skipped, and
    # the shard status behind it is read.
    assert (agent.returncode, agent.status) == (0, ("OK", ""))
    assert kinds(agent.sent) == ["register", "heartbeat", "shard_status"]
    registration, report = plane.received
    assert isinstance(registration, Registration)
    assert isinstance(report, ShardReport)
    assert (report.shard_id, report.state) == ("rep-a-0", State.READY)


def test_a_bad_message_ends_the_call_when_the_policy_says_so() -> None:
    agent, _ = asyncio.run(
        serve_go_agent("ack", {"scenario": "bad-then-good"}, on_bad_message="end")
    )
    assert agent.status is not None
    code, message = agent.status
    assert code == "INVALID_ARGUMENT"
    assert message.startswith("Invalid `llmgw.v1.Heartbeat`")
    assert "Traceback" not in message


def test_a_go_agents_registration_over_the_limit_is_refused() -> None:
    agent, plane = asyncio.run(serve_go_agent("serve", {"extra_gpus": 45000}))
    assert agent.status is not None
    assert agent.status[0] == "RESOURCE_EXHAUSTED"
    assert plane.received == []


def test_mutual_tls_binds_a_go_agents_node_id(tls_files: TLSFiles) -> None:
    tls = ServerTLS(tls_files.server_cert, tls_files.server_key, tls_files.ca)
    good, plane = asyncio.run(
        serve_go_agent(
            "serve",
            {"tls": tls_files, "close_after": 2, "node_id": "go-agent-1"},
            tls=tls,
            node_identity=True,
        )
    )
    assert (good.status, kinds(good.recv)) == (("OK", ""), ["ack", "start_shard"])
    bad, plane = asyncio.run(
        serve_go_agent(
            "serve", {"tls": tls_files, "node_id": "go-agent-2"}, tls=tls, node_identity=True
        )
    )
    assert bad.status == (
        "PERMISSION_DENIED",
        "node 'go-agent-2': the client certificate is for go-agent-1",
    )
    assert bad.recv == []
    assert plane.received == []
