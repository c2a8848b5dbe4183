"""`answered()`: a session's wait for the peer's first value, or its end, with no polling."""

from __future__ import annotations

import asyncio

import pytest

from llmgw_wire import Ack, Registration
from llmgw_wire.errors import StreamError
from llmgw_wire.stream import connect
from llmgw_wire.testing.stream import WAIT, StreamHarness, control_plane, registration_of

pytestmark = pytest.mark.timeout(120)


def test_answered_returns_at_the_first_value_and_not_before() -> None:
    async def main() -> None:
        async with control_plane() as plane, connect(plane.target) as agent:
            await agent.send(registration_of("node-1"))
            agent.start_reading()
            waiting = asyncio.ensure_future(agent.answered())
            session = await plane.next_agent()
            assert isinstance(await session.recv(timeout=WAIT), Registration)
            # The plane has read the registration and sent nothing: no answer yet.
            for _ in range(20):
                await asyncio.sleep(0)
            assert not waiting.done()
            await session.send(Ack("node-1", 2, "adopted"))
            await asyncio.wait_for(waiting, WAIT)
            assert agent.received == 1
            await agent.answered()  # answered once, answered for good

    StreamHarness().run(main)


def test_answered_returns_when_the_call_ends_with_nothing_sent() -> None:
    async def main() -> None:
        async with control_plane() as plane, connect(plane.target) as agent:
            await agent.send(registration_of("node-1"))
            agent.start_reading()
            session = await plane.next_agent()
            plane.end(session, StreamError("go away", code="FAILED_PRECONDITION"))
            await asyncio.wait_for(agent.answered(), WAIT)
            assert agent.received == 0

    StreamHarness().run(main)
