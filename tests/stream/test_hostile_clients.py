"""Hostile clients against the control plane's bounds, on loopback, bounded in count and time."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import gzip
import logging
import sys
import time
import types
from typing import Any

import grpc
import grpc.aio
import pytest

from llmgw_wire import Ack, Heartbeat, Registration
from llmgw_wire.codec.envelope import encode_envelope
from llmgw_wire.stream import (
    CONNECT_ROUTE,
    ControlPlane,
    ControlSession,
    Server,
    ServerLimits,
    StreamError,
    connect,
    start_server,
)
from llmgw_wire.stream._logs import (
    BAD_MESSAGE_LOG_INTERVAL,
    LINE_BUDGET,
    LINES_PER_MINUTE_PER_PEER,
    Throttle,
)
from llmgw_wire.stream._peers import DecodeTurns, decode_turns
from llmgw_wire.stream._protocol import PEER_OVER_BUDGET
from llmgw_wire.testing.sample import sample_large_registration, sample_registration
from llmgw_wire.testing.stream import registration_of
from tests.stream.test_stream import WAIT
from tests.support import Adopting, ld, loopback_relay, serving, target, vi
from tests.support import run_async as run

pytestmark = pytest.mark.timeout(300)


class Counting(ControlPlane):
    """Counts the calls `handle` was started for; reads each to its end."""

    def __init__(self) -> None:
        self.started = 0
        self.values: list[object] = []
        self.changed = asyncio.Event()

    async def handle(self, session: ControlSession) -> None:
        self.started += 1
        self.changed.set()
        async for value in session:
            self.values.append(value)
            self.changed.set()

    async def wait(self, count: int) -> None:
        while self.started < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), WAIT)


def test_calls_over_the_cap_are_a_few_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="llmgw_wire.stream")
    now = [0.0]

    async def main() -> None:
        plane = Counting()
        async with serving(plane, limits=ServerLimits(max_unregistered_calls=1)) as server:
            # The throttle's clock is the test's: the outcome is the count, not the timing.
            server.service._over_cap_log = Throttle(clock=lambda: now[0])
            channel = grpc.aio.insecure_channel(target(server))
            try:
                waiting = channel.stream_stream(CONNECT_ROUTE)()
                await plane.wait(1)
                for turn in range(4):
                    if turn == 3:
                        now[0] += 2 * BAD_MESSAGE_LOG_INTERVAL
                    call = channel.stream_stream(CONNECT_ROUTE)()
                    assert await call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                waiting.cancel()
            finally:
                await channel.close(grace=None)

    run(main)
    lines = [r.getMessage() for r in caplog.records if "waiting to register" in r.getMessage()]
    assert len(lines) == 2
    assert "(2 more since the last line)" in lines[1]


def test_calls_waiting_to_register_are_bounded_per_server() -> None:
    async def main() -> None:
        plane = Counting()
        limits = ServerLimits(max_unregistered_calls=4)
        async with serving(plane, limits=limits) as server:
            channels = [grpc.aio.insecure_channel(target(server)) for _ in range(6)]
            try:
                # A call begins when it is made: the first four wait to register.
                calls = [channel.stream_stream(CONNECT_ROUTE)() for channel in channels[:4]]
                await plane.wait(4)
                calls.append(channels[4].stream_stream(CONNECT_ROUTE)())
                assert await calls[4].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "waiting to register" in await calls[4].details()
                # One registers: room for one more.
                await calls[0].write(encode_envelope(sample_registration()))
                while len(plane.values) < 1:
                    plane.changed.clear()
                    await asyncio.wait_for(plane.changed.wait(), WAIT)
                calls.append(channels[5].stream_stream(CONNECT_ROUTE)())
                await plane.wait(5)
                assert plane.started == 5
            finally:
                for channel in channels:
                    await channel.close(grace=None)

    run(main)


def test_an_idle_connection_is_closed() -> None:
    """A client that opens a connection, says the HTTP/2 preface, and never calls."""

    async def main() -> None:
        limits = ServerLimits(connection_idle=1.0)
        async with serving(Counting(), limits=limits) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(9)[:3] + b"\x04\x00" + bytes(4)
            )
            await writer.drain()
            try:
                # The server's SETTINGS, a GOAWAY once idle, then the end of the connection.
                while await asyncio.wait_for(reader.read(4096), WAIT):
                    pass
            finally:
                writer.close()

    run(main)


def test_compressed_input_can_be_refused_altogether() -> None:
    async def main() -> None:
        plane = Counting()
        limits = ServerLimits(accept_compressed=False)
        async with serving(plane, limits=limits) as server:
            with pytest.raises(StreamError) as error:
                await register_and_read(target(server), compression="gzip")
            assert error.value.code.name == "UNIMPLEMENTED"
        assert plane.values == []

    run(main)


async def register_and_read(address: str, **options: Any) -> list[object]:
    async with connect(address, **options) as session:
        await session.send(sample_registration())
        return [value async for value in session]


def test_decompressed_size_counts_against_the_message_limit() -> None:
    """A few kB of gzip that inflate past the limit are refused, never handed over."""
    bomb = bytes(5 * 1024 * 1024)
    assert len(gzip.compress(bomb)) < 10 * 1024

    async def main() -> None:
        plane = Counting()
        async with serving(plane) as server, grpc.aio.insecure_channel(target(server)) as channel:
            call = channel.stream_stream(CONNECT_ROUTE)(compression=grpc.Compression.Gzip)
            await call.write(bomb)
            assert await call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert plane.values == []

    run(main)


@pytest.mark.slow
def test_calls_per_connection_are_bounded() -> None:
    async def main() -> None:
        plane = Counting()
        limits = ServerLimits(max_calls_per_connection=2)
        async with (
            serving(plane, limits=limits) as server,
            grpc.aio.insecure_channel(target(server)) as channel,
        ):
            method = channel.stream_stream(CONNECT_ROUTE)
            first, second = method(), method()
            await first.write(b"")
            await second.write(b"")
            await plane.wait(2)
            # The third waits for a free stream, never reaching the server.
            third = method(timeout=3)
            assert await third.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert plane.started == 2

    run(main)


def test_compression_with_compressed_input_refused_is_an_error() -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="accept_compressed"):
            await start_server(
                Counting(), compression="gzip", limits=ServerLimits(accept_compressed=False)
            )

    run(main)


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_unregistered_calls must be positive"):
        ServerLimits(max_unregistered_calls=0)


def test_before_registering_a_large_message_is_decoded_only_if_it_is_a_registration() -> None:
    """A gzip bomb of unknown fields before the registration costs no decoding."""
    bomb = vi(99, 1) * (1024 * 1024 // 3)
    assert len(gzip.compress(bomb)) < 10 * 1024

    async def main() -> None:
        plane = Counting()
        async with serving(plane) as server, grpc.aio.insecure_channel(target(server)) as channel:
            method = channel.stream_stream(CONNECT_ROUTE)
            bombed = method(compression=grpc.Compression.Gzip)
            await bombed.write(bomb)
            assert await bombed.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert (await bombed.details()).startswith("register first")
            # Once registered, the same bytes are decoded: an unknown member, skipped.
            registered = method(compression=grpc.Compression.Gzip)
            await registered.write(encode_envelope(sample_registration()))
            await registered.write(bomb)
            await registered.done_writing()
            assert await registered.code() == grpc.StatusCode.OK
        assert plane.values == [sample_registration()]

    run(main)


@pytest.mark.slow
def test_what_a_call_buffers_is_bounded_by_its_window_and_the_read_ahead() -> None:
    """A client that writes faster than `handle` reads gets blocked by flow control."""
    heartbeat = encode_envelope(Heartbeat("gpu-node-017"))
    # A heartbeat of 32 KiB: an unknown field in it, as a newer agent might send.
    padded = ld(3, ld(99, bytes(32 * 1024)) + heartbeat[2:])
    attempts = 40

    class Stuck(ControlPlane):
        async def handle(self, session: ControlSession) -> None:
            await asyncio.sleep(WAIT * 10)  # reads nothing: the session reads ahead 8

    async def main() -> int:
        async with (
            serving(Stuck()) as server,
            grpc.aio.insecure_channel(target(server)) as channel,
        ):
            call = channel.stream_stream(CONNECT_ROUTE)()
            await call.write(encode_envelope(sample_registration()))
            for written in range(attempts):
                # A write the server's flow control holds back does not end in
                # seconds; one it takes does (the window would let 2 through).
                done, _ = await asyncio.wait({asyncio.ensure_future(call.write(padded))}, timeout=3)
                if not done:
                    call.cancel()
                    return written
            call.cancel()
            return attempts

    written = asyncio.run(asyncio.wait_for(main(), 300))
    # 8 values read ahead, a 64 KiB window (BDP probing grew it to megabytes).
    assert written <= 8 + 4, written


def _ours(thing: object) -> bool:
    """Whether `thing` is the stream's: the library's objects, asyncio's, a coroutine or frame."""
    module = type(thing).__module__ or ""
    return (
        module.startswith(("llmgw_wire", "asyncio", "_asyncio"))
        or isinstance(thing, (types.CoroutineType, types.FrameType, types.TracebackType))
        or (isinstance(thing, BaseException) and module == "builtins")
    )


# On Python 3.10 a cancelled task's exception keeps its traceback's frames,
# which hold the session: cycles the collector frees, not reference counting.
@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10's cancellations keep cycles")
@pytest.mark.slow
def test_ended_streams_leave_nothing_for_the_cyclic_collector() -> None:
    """Each ended stream is freed by reference counting: nothing of it waits for `gc.collect`.

    Streams end every way a call ends: the agent leaves, the agent cancels,
    the registration deadline passes.
    """
    streams = 60  # of each kind

    async def left(address: str) -> None:
        async with connect(address) as session:
            await session.send(sample_registration())

    async def cancelled(channel: grpc.aio.Channel) -> None:
        call = channel.stream_stream(CONNECT_ROUTE)()
        await call.write(encode_envelope(sample_registration()))
        await call.read()  # the Ack: the server has the registration
        call.cancel()

    async def late(channel: grpc.aio.Channel) -> None:
        call = channel.stream_stream(CONNECT_ROUTE)()
        assert await call.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    async def main() -> list[object]:
        # The deadline's own server: an agent of the other registers in time whatever the load.
        async with (
            serving(Adopting()) as server,
            serving(Adopting(), registration_timeout=0.01) as hurried,
            grpc.aio.insecure_channel(target(server)) as channel,
            grpc.aio.insecure_channel(target(hurried)) as silent,
        ):
            address = target(server)

            async def each(count: int) -> None:
                await asyncio.gather(
                    *(left(address) for _ in range(count)),
                    *(cancelled(channel) for _ in range(count)),
                    *(late(silent) for _ in range(count)),
                )
                await _drained(server)
                await _drained(hurried)

            await each(5)  # what is made once (grpc's, the codec's) is made now
            gc.collect()
            gc.disable()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                for _ in range(streams // 10):  # within a connection's 16 calls
                    await each(10)
                gc.collect()
                return [thing for thing in gc.garbage if _ours(thing)]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()

    cyclic: list[object] = []

    def record() -> None:
        cyclic.extend(asyncio.run(asyncio.wait_for(main(), 240)))

    record()
    kinds = collections.Counter(type(thing).__qualname__ for thing in cyclic)
    assert not cyclic, kinds.most_common(10)


async def _drained(server: Server) -> None:
    """Wait until no call of `server` is open (each one's end has run)."""
    try:
        await asyncio.wait_for(server.service.wait_idle(), 20)
    except asyncio.TimeoutError:
        raise AssertionError(f"{server.service.calls} calls still open") from None


def test_one_peer_holds_only_its_share_of_the_calls_waiting_to_register() -> None:
    """One address fills its share with silent calls; an agent from another still registers."""
    limits = ServerLimits(max_unregistered_calls=8, max_unregistered_calls_per_peer=4)

    async def main() -> None:
        plane = Adopting()
        async with serving(plane, limits=limits) as server:
            channels = [grpc.aio.insecure_channel(target(server)) for _ in range(2)]
            try:
                # 2 connections x 6 silent calls: the share holds 4, the rest are refused.
                calls = [
                    channel.stream_stream(CONNECT_ROUTE)() for channel in channels for _ in range(6)
                ]
                ended = await _ended(calls, 8)
                codes = [await call.code() for call in ended]
                assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 8
                assert "from this peer" in await ended[0].details()
                # From another address: another peer.
                async with loopback_relay(server.port, source="127.0.0.2") as relay:
                    assert await register_and_ack(relay) == "gpu-node-017"
            finally:
                for channel in channels:
                    await channel.close(grace=None)

    run(main)


async def register_and_ack(address: str) -> str:
    async with connect(address) as session:
        await session.send(sample_registration())
        ack = await session.recv(timeout=WAIT)
        assert isinstance(ack, Ack)
        return ack.node_id


async def _ended(calls: list[Any], count: int) -> list[Any]:
    """Wait until `count` of `calls` have ended (the others stay open): those."""
    waits = {asyncio.ensure_future(call.code()): call for call in calls}
    ended: list[Any] = []
    pending = set(waits)
    while len(ended) < count:
        done, pending = await asyncio.wait(pending, timeout=WAIT, return_when="FIRST_COMPLETED")
        assert done, f"{len(ended)} of {count} calls ended"
        ended.extend(waits[wait] for wait in done)
    for wait in pending:
        wait.cancel()
    return ended


def test_the_large_message_slot_goes_to_peers_in_turn() -> None:
    """A peer with one message waiting decodes after at most one of a flood's queued before it."""
    order: list[str] = []

    async def main() -> None:
        turns = DecodeTurns()
        await turns.acquire("flood")  # the flood decodes one now...

        async def decode(peer: str) -> None:
            await turns.acquire(peer)
            order.append(peer)
            turns.release()

        flood = [asyncio.ensure_future(decode("flood")) for _ in range(5)]  # ...and queues 5
        await asyncio.sleep(0)
        agent = asyncio.ensure_future(decode("agent"))
        await asyncio.sleep(0)
        turns.release()
        await asyncio.gather(*flood, agent)

    run(main)
    assert order.index("agent") <= 1, order


@pytest.mark.slow
def test_a_registration_that_arrived_keeps_its_deadline_while_it_waits_to_be_decoded() -> None:
    """Another peer's flood holds the decode slot past the deadline: the agent still registers."""
    large = sample_large_registration(2048)  # 459 kB: decoded in the slot
    # A deadline the registration's bytes arrive well within, even on a busy machine.
    deadline = 4.0

    class Watching(Adopting):
        """Acks each registration; hands over each session as its `handle` starts."""

        def __init__(self) -> None:
            super().__init__()
            self.sessions: asyncio.Queue[ControlSession] = asyncio.Queue()

        async def handle(self, session: ControlSession) -> None:
            self.sessions.put_nowait(session)
            await super().handle(session)

    async def main() -> None:
        plane = Watching()
        async with serving(plane, registration_timeout=deadline) as server:
            turns = decode_turns()
            await turns.acquire("a flood")  # another peer's decode, holding the slot
            try:
                agent = asyncio.ensure_future(_registered(target(server), large))
                # `handle` starts once the deadline's timer is armed: the deadline
                # has passed `deadline` seconds after this, at the latest.
                session = await asyncio.wait_for(plane.sessions.get(), WAIT)
                await asyncio.sleep(deadline)
                # Its registration waits for the slot still, and the call is not over.
                assert not session.registered.is_set()
                assert not agent.done()
            finally:
                turns.release()
            assert await asyncio.wait_for(agent, WAIT) == large.node.id
            assert session.registered.is_set()

    run(main)


async def _registered(address: str, registration: Registration) -> str:
    async with connect(address) as session:
        await session.send(registration)
        ack = await session.recv(timeout=WAIT)
        assert isinstance(ack, Ack)
        return ack.node_id


@pytest.mark.slow
def test_a_peer_s_messages_held_are_bounded_in_bytes_whatever_its_calls_and_handle() -> None:
    """Two calls of 400 kB registrations, a `handle` that awaits something per value."""
    registration = sample_large_registration(1800)
    size = len(encode_envelope(registration))
    budget = 1024 * 1024
    per_call = 10
    held: list[int] = []

    class Slow(ControlPlane):
        def __init__(self) -> None:
            self.sessions: list[ControlSession] = []
            self.taken = 0  # the values the `handle`s have taken
            self.holding = 0  # the `handle`s that have a value now

        async def handle(self, session: ControlSession) -> None:
            self.sessions.append(session)
            async for _ in session:
                self.taken += 1
                self.holding += 1
                # What the peer's calls hold now: the values received and not
                # yet taken (read ahead), and those `handle` has.
                ahead = sum(s.received for s in self.sessions) - self.taken
                held.append((ahead + self.holding) * size)
                await asyncio.sleep(0.2)  # a database write, say
                await session.send(Ack(registration.node.id))
                self.holding -= 1

    async def main() -> None:
        limits = ServerLimits(max_bytes_per_peer=budget)
        async with (
            serving(Slow(), limits=limits) as server,
            grpc.aio.insecure_channel(target(server)) as channel,
        ):
            calls = [channel.stream_stream(CONNECT_ROUTE)() for _ in range(2)]
            data = encode_envelope(registration)

            async def flood(call: Any) -> None:
                for _ in range(per_call):
                    await call.write(data)
                for _ in range(per_call):
                    await call.read()
                await call.done_writing()

            await asyncio.gather(*(flood(call) for call in calls))

    run(main, timeout=240)
    assert len(held) == 2 * per_call
    assert max(held) <= budget, (max(held), budget)


@pytest.mark.slow
def test_a_client_s_log_lines_are_bounded_whatever_its_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Calls 32 at a time, each with 16 unknown members and a malformed message."""
    caplog.set_level(logging.INFO, logger="llmgw_wire.stream")
    # The budget's clock stands still: what it lets through is its capacity, not a rate.
    LINE_BUDGET._clock = lambda: 0.0
    LINE_BUDGET.reset()
    unknown = [ld(100 + number, vi(1, 1)) for number in range(16)]
    malformed = b"\x0a\x05\x01"

    async def one(method: Any) -> None:
        call = method()
        # grpc may refuse a call the connection cannot take yet: the attack goes on.
        with contextlib.suppress(grpc.aio.AioRpcError):
            await call.write(encode_envelope(sample_registration()))
            for member in unknown:
                await call.write(member)
            await call.write(malformed)
            await call.done_writing()
        await call.code()

    async def main() -> None:
        async with serving(Counting()) as server:
            # 32 at a time, well within each connection's calls.
            channels = [grpc.aio.insecure_channel(target(server)) for _ in range(4)]
            try:
                methods = [channel.stream_stream(CONNECT_ROUTE) for channel in channels]
                for _ in range(4):
                    await asyncio.gather(*(one(method) for method in methods for _ in range(8)))
            finally:
                for channel in channels:
                    await channel.close(grace=None)

    try:
        run(main)
    finally:
        LINE_BUDGET._clock = time.monotonic
        LINE_BUDGET.reset()
    lines = [r for r in caplog.records if r.name == "llmgw_wire.stream"]
    # 128 calls of 18 lines or more each; one peer's share of a minute, and a line saying so.
    seen = collections.Counter((r.levelname, r.getMessage()[:60]) for r in lines)
    assert len(lines) <= LINES_PER_MINUTE_PER_PEER + 1, seen.most_common(20)


def test_a_peer_s_messages_waiting_to_be_read_are_bounded_too_whatever_its_calls() -> None:
    """8 calls each send a 400 kB registration to a `handle` that takes nothing."""
    registration = sample_large_registration(1800)
    budget = 1024 * 1024
    calls = 8

    class Taking(ControlPlane):
        async def handle(self, session: ControlSession) -> None:
            await asyncio.sleep(WAIT * 10)  # takes nothing: everything waits

    async def main() -> list[tuple[Any, str]]:
        limits = ServerLimits(max_bytes_per_peer=budget)
        async with (
            serving(Taking(), limits=limits) as server,
            grpc.aio.insecure_channel(target(server)) as channel,
        ):
            method = channel.stream_stream(CONNECT_ROUTE)
            opened = [method() for _ in range(calls)]
            for number, call in enumerate(opened):
                await call.write(encode_envelope(registration_of(f"node-{number}", registration)))
            # 2 fit the budget, 2 wait in hand for room, the rest are refused.
            ended = await _ended(opened, calls - 4)
            return [(await call.code(), await call.details()) for call in ended]

    ended = asyncio.run(asyncio.wait_for(main(), 120))
    assert {code for code, _ in ended} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert all(details.startswith(PEER_OVER_BUDGET) for _, details in ended)
