"""Hostile clients against the control plane's bounds, on loopback, bounded in count and time."""

from __future__ import annotations

import asyncio
import collections
import gc
import gzip
import logging
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
from llmgw_wire.stream._logs import BAD_MESSAGE_LOG_INTERVAL, Throttle
from llmgw_wire.testing.sample import sample_registration
from tests.stream.test_stream import WAIT, serving, target
from tests.support import ld, vi
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
            serving(Acking()) as server,
            serving(Acking(), registration_timeout=0.01) as hurried,
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


class Acking(ControlPlane):
    """Acks each registration; reads to the end."""

    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, Registration):
                await session.send(Ack(value.node.id))


async def _drained(server: Server) -> None:
    """Wait until no call of `server` is open (each one's end has run)."""
    for _ in range(2000):
        if server.service.calls == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{server.service.calls} calls still open")
