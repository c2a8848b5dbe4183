"""The stream harness of `llmgw_wire.testing.stream`, as a service's tests use it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from llmgw_wire import Ack, Heartbeat, Registration, ShardCommand
from llmgw_wire.errors import PeerUnavailable, PermissionDenied, StreamClosed, StreamError
from llmgw_wire.stream import ControlPlane, ControlSession, connect
from llmgw_wire.testing.sample import sample_command
from llmgw_wire.testing.stream import (
    WAIT,
    StreamHarness,
    control_plane,
    loopback,
    registration_of,
)
from tests.testing.test_plugin import _dependent

pytestmark = pytest.mark.timeout(180)

GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "testing-a-service.md"


class Placing(ControlPlane):
    """Acks each registration and sends one command; refuses node "intruder"."""

    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, Registration):
                if value.node.id == "intruder":
                    raise PermissionDenied("not one of ours")
                await session.send(Ack(value.node.id, len(value.shards), "adopted"))
                await session.send(sample_command())


def test_agents_get_what_the_plane_sends_and_the_status_it_ends_with() -> None:
    async def main() -> None:
        async with loopback(Placing()) as stream:
            first, second = await stream.agent(), await stream.agent()
            assert {first.node_id, second.node_id} == {"node-1", "node-2"}
            for agent in (first, second):
                assert (await agent.expect(Ack)).node_id == agent.node_id
                await agent.expect(ShardCommand)
            assert [type(value) for value in first.received] == [Ack, ShardCommand]
            intruder = await stream.agent(registration_of("intruder"))
            status = await intruder.end()
            assert isinstance(status, PermissionDenied)
            assert status.details == "not one of ours"
            with pytest.raises(AssertionError, match=r"expected a Heartbeat .* got Ack"):
                await (await stream.agent()).expect(Heartbeat)

    StreamHarness().run(main)


def test_leaving_the_block_leaves_nothing_running() -> None:
    async def main() -> None:
        async with loopback(Placing()) as stream:
            agents = [await stream.agent() for _ in range(3)]
            await agents[0].expect(Ack)
        # The server has stopped, with no agent's call left open on it...
        await asyncio.wait_for(stream.server.wait_closed(), WAIT)
        assert stream.server.service.calls == 0
        # ...and no agent's call goes on: nothing more can be sent on any.
        for agent in agents:
            with pytest.raises((StreamClosed, PeerUnavailable)):
                await agent.send(Heartbeat())

    # `run` fails if any task was left.
    StreamHarness().run(main)


def test_run_names_the_tasks_a_test_left_running() -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        asyncio.get_running_loop().create_task(forever())

    with pytest.raises(AssertionError, match=r"left 1 tasks running: .*forever"):
        StreamHarness().run(main)


def test_a_control_plane_the_test_drives_for_an_agent_s_code() -> None:
    async def main() -> None:
        async with control_plane() as plane, connect(plane.target) as agent:
            await agent.send(registration_of("node-7"))
            session = await plane.next_agent()
            registration = await session.recv(timeout=30)
            assert isinstance(registration, Registration)
            assert session.node_id == "node-7"
            await session.send(Ack("node-7", 2, "adopted"))
            assert isinstance(await agent.recv(timeout=30), Ack)
            plane.end(session, StreamError("go away", code="FAILED_PRECONDITION"))
            with pytest.raises(StreamError, match="go away"):
                await agent.recv(timeout=30)

    StreamHarness().run(main)


@pytest.mark.subprocess
def test_the_guide_s_service_tests_pass_in_a_project_of_their_own(tmp_path: Path) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(), flags=re.DOTALL | re.MULTILINE)
    files = {block.split("\n", 1)[0].removeprefix("# "): block for block in blocks}
    assert set(files) == {"test_our_plane.py", "test_our_agent.py"}
    # The control plane's test is what the guide promises: under 25 lines.
    assert len(files["test_our_plane.py"].strip().splitlines()) < 25
    done = _dependent(tmp_path, files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
