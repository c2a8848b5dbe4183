"""Faulty and leaving peers, the Python stream against grpc-go: a cancelled Go
agent is lost, not leaving; a Go agent without gzip is never sent gzip; a
Python agent that stops half-closes, and the Go control plane ends with OK."""

from __future__ import annotations

import asyncio
import os

from peers import kinds, run_agent, start_control_plane
from test_python_vs_go import WAIT

from llmgw_wire import Ack, Registration
from llmgw_wire.stream import (
    REFUSED_COMMAND,
    ControlPlane,
    ControlSession,
    Server,
    connect,
    keep_connected,
    start_server,
)
from llmgw_wire.testing.sample import sample_command
from llmgw_wire.testing.stream import registration_of
from tests.support import lost_or_cancelled

RUNS = int(os.environ.get("LLMGW_INTEROP_RUNS", "10"))


class Outcomes(ControlPlane):
    """Acks and sends one command; keeps how each agent's side ended."""

    def __init__(self) -> None:
        self.ends: list[str] = []

    async def handle(self, session: ControlSession) -> None:
        with lost_or_cancelled(self.ends):
            first = await session.recv(timeout=WAIT)
            assert isinstance(first, Registration)
            await session.send(Ack(first.node.id, len(first.shards)))
            await session.send(sample_command())
            async for _ in session:
                pass
            self.ends.append("ended")


async def served(plane: ControlPlane, **options: object) -> Server:
    return await start_server(plane, **options)  # type: ignore[arg-type]


def test_a_cancelled_go_agent_is_lost_not_leaving() -> None:
    async def main() -> list[str]:
        plane = Outcomes()
        server = await served(plane)
        try:
            for run in range(RUNS):
                agent = await asyncio.to_thread(
                    run_agent, f"127.0.0.1:{server.port}", node_id=f"node-{run}", cancel_after=1
                )
                assert "CANCELLED" in agent.lines, agent.description
                while len(plane.ends) <= run:
                    await asyncio.sleep(0.05)
        finally:
            await server.stop(grace=None)
        return plane.ends

    ends = asyncio.run(asyncio.wait_for(main(), WAIT * RUNS))
    assert "ended" not in ends, ends


def test_a_go_agent_without_gzip_talks_to_a_plane_that_compresses() -> None:
    async def main() -> None:
        plane = Outcomes()
        server = await served(plane, compression="gzip")
        try:
            agent = await asyncio.to_thread(
                run_agent,
                f"127.0.0.1:{server.port}",
                binary="agent-nogzip",
                close_after=2,
            )
        finally:
            await server.stop(grace=None)
        assert kinds(agent.recv) == ["ack", "start_shard"], agent.description
        assert agent.status == ("OK", ""), agent.description
        assert plane.ends == ["ended"]

    asyncio.run(asyncio.wait_for(main(), WAIT))


def test_a_go_agent_with_gzip_is_sent_gzip() -> None:
    async def main() -> None:
        server = await served(Outcomes(), compression="gzip")
        try:
            agent = await asyncio.to_thread(
                run_agent, f"127.0.0.1:{server.port}", gzip=True, close_after=2
            )
        finally:
            await server.stop(grace=None)
        assert kinds(agent.recv) == ["ack", "start_shard"], agent.description
        assert "ENCODING gzip" in agent.lines, agent.description

    asyncio.run(asyncio.wait_for(main(), WAIT))


def test_a_python_agent_that_stops_leaves_and_the_go_plane_sees_ok() -> None:
    for run in range(RUNS):
        cp = start_control_plane("serve")
        try:

            async def main(target: str, node_id: str) -> None:
                stop = asyncio.Event()

                async def serve(session: object) -> None:
                    async for value in session:  # type: ignore[attr-defined]
                        if not isinstance(value, Ack):
                            stop.set()  # the StartShard after the Ack: leave now

                await asyncio.wait_for(
                    keep_connected(target, lambda: registration_of(node_id), serve, stop=stop),
                    WAIT,
                )

            asyncio.run(main(cp.target, f"py-{run}"))
            cp.wait_for("END", timeout=WAIT)
        finally:
            cp.stop()
        assert cp.ends() == [("OK", "")], cp.describe()


def test_a_command_a_python_agent_cannot_decode_is_reported_failed_to_the_go_plane() -> None:
    cp = start_control_plane("bad-then-good")
    try:

        async def main() -> list[object]:
            got: list[object] = []
            async with connect(cp.target) as session:
                await session.send(registration_of("py-bad"))
                # The Ack, the StopShard and the good StartShard: the bad one is skipped.
                got.extend([await session.recv(timeout=WAIT) for _ in range(3)])
            return got

        got = asyncio.run(main())
        cp.wait_for("END", timeout=WAIT)
    finally:
        cp.stop()
    assert [type(value).__name__ for value in got] == ["Ack", "StopCommand", "ShardCommand"]
    statuses = [m["shard_status"] for m in cp.recv() if "shard_status" in m]
    (status,) = statuses
    assert (status["shard_id"], status["state"]) == ("py-bad-bad", "STATE_FAILED"), cp.describe()
    assert status["detail"].startswith(REFUSED_COMMAND + ": "), status
    assert cp.ends() == [("OK", "")], cp.describe()
