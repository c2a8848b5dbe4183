"""`recv(timeout=...)`: one loop timer per session serves every wait, and no wait loses a value."""

from __future__ import annotations

import asyncio

import pytest

from llmgw_wire import Heartbeat, Registration
from llmgw_wire.codec.envelope import encode_envelope
from llmgw_wire.stream import ControlSession
from llmgw_wire.testing.sample import sample_registration
from tests.support import run_async as run

# Never reached in a test: a wait that ran to it would fail the test on its time bound.
LONG = 3600.0
SHORT = 0.05


class MemoryCall:
    """A call whose agent is the test: `put` hands the session one message's bytes."""

    def __init__(self) -> None:
        self._incoming: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.sent: list[bytes] = []

    def put(self, value: object) -> None:
        self._incoming.put_nowait(encode_envelope(value))

    async def read(self) -> bytes | None:
        return await self._incoming.get()

    async def write(self, data: bytes) -> None:
        self.sent.append(data)


def test_a_short_timeout_after_a_long_one_still_expires() -> None:
    async def main() -> None:
        call = MemoryCall()
        session = ControlSession(call, "memory")
        call.put(sample_registration())
        # Received well within its deadline: the session's timer stays armed for it.
        assert isinstance(await session.recv(timeout=LONG), Registration)
        with pytest.raises(asyncio.TimeoutError):
            await session.recv(timeout=SHORT)
        # The timeout lost nothing: what comes next is received.
        call.put(Heartbeat("n1"))
        assert await session.recv(timeout=LONG) == Heartbeat("n1")
        await session.stop_reading()

    run(main)


def test_waits_with_different_deadlines_each_end_at_their_own() -> None:
    async def main() -> None:
        call = MemoryCall()
        session = ControlSession(call, "memory")
        patient = asyncio.ensure_future(session.recv(timeout=LONG))
        hasty = asyncio.ensure_future(session.recv(timeout=SHORT))
        with pytest.raises(asyncio.TimeoutError):
            await hasty
        assert not patient.done()
        call.put(sample_registration())
        assert isinstance(await patient, Registration)
        await session.stop_reading()

    run(main)


def test_the_timer_runs_again_for_a_later_deadline() -> None:
    async def main() -> None:
        call = MemoryCall()
        session = ControlSession(call, "memory")
        # The first wait arms the timer for the nearer deadline; once it has
        # expired, the timer must still end the second wait, armed later.
        first = asyncio.ensure_future(session.recv(timeout=SHORT))
        second = asyncio.ensure_future(session.recv(timeout=4 * SHORT))
        with pytest.raises(asyncio.TimeoutError):
            await first
        with pytest.raises(asyncio.TimeoutError):
            await second
        await session.stop_reading()

    run(main)


def test_a_wait_with_a_deadline_cancelled_from_outside_is_cancelled_and_loses_nothing() -> None:
    async def main() -> None:
        call = MemoryCall()
        session = ControlSession(call, "memory")
        waiting = asyncio.ensure_future(session.recv(timeout=LONG))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        call.put(sample_registration())
        assert isinstance(await session.recv(timeout=LONG), Registration)
        await session.stop_reading()

    run(main)


def test_a_value_that_arrives_as_the_deadline_passes_is_received_or_kept() -> None:
    async def main() -> None:
        call = MemoryCall()
        session = ControlSession(call, "memory")
        session.start_reading()
        for _ in range(20):
            waiting = asyncio.ensure_future(session.recv(timeout=0))
            call.put(Heartbeat("n1"))
            try:
                assert await waiting == Heartbeat("n1")
            except asyncio.TimeoutError:
                # Timed out first: the value waits for the next `recv`.
                assert await session.recv(timeout=LONG) == Heartbeat("n1")
        await session.stop_reading()

    run(main)


def test_after_stop_reading_recv_gives_the_end_and_drops_what_was_not_taken() -> None:
    async def main() -> None:
        call = MemoryCall()
        session = ControlSession(call, "memory")
        call.put(sample_registration())
        call.put(Heartbeat("n1"))
        assert isinstance(await session.recv(timeout=LONG), Registration)
        await asyncio.sleep(0)
        assert session.received == 2  # the reader has read the heartbeat ahead
        await session.stop_reading()
        assert await session.recv(timeout=LONG) is None
        assert await session.recv() is None

    run(main)
