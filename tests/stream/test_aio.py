"""`send_message` on a grpc.aio call whose internals it does not know: the public path."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from llmgw_wire.stream._aio import CallOver, send_message


class PublicCall:
    """A call with only grpc.aio's public surface, as an unknown grpcio version has."""

    def __init__(self, *, over: bool, half_closed: bool) -> None:
        self.over = over
        self.half_closed = half_closed
        self.sent: list[bytes] = []

    async def write(self, data: bytes) -> None:
        if self.over or self.half_closed:
            raise asyncio.InvalidStateError("no more writes")
        self.sent.append(data)

    def done(self) -> bool:
        return self.over


def test_the_public_path_sends() -> None:
    call = PublicCall(over=False, half_closed=False)
    asyncio.run(send_message(call, b"x"))
    assert call.sent == [b"x"]


def test_the_public_path_tells_a_call_that_is_over_from_a_half_closed_side() -> None:
    # Over: the caller reads the status. Half-closed: no status is coming, the
    # caller must not wait for one.
    with pytest.raises(CallOver):
        asyncio.run(send_message(PublicCall(over=True, half_closed=False), b"x"))
    with pytest.raises(asyncio.InvalidStateError):
        asyncio.run(send_message(PublicCall(over=False, half_closed=True), b"x"))


def test_grpc_aio_ends_a_calls_reading_once_a_read_is_cancelled() -> None:
    """Why a session reads in a task of its own (docs/internals/stream-tasks.md).

    A `recv` that read the call itself would cancel grpc.aio's read when its
    timeout passed; after that, grpc.aio reads the call as ended although the
    agent has not half-closed. If a grpcio release stops doing so, this test
    fails, and the reader task may no longer be needed.
    """
    import grpc
    import grpc.aio

    seen: list[object] = []

    async def handler(_requests: object, context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        reading = asyncio.ensure_future(context.read())
        await asyncio.sleep(0)  # the read is under way: the agent has sent nothing yet
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        seen.append(await context.read())

    async def main() -> None:
        method = grpc.stream_stream_rpc_method_handler(handler)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("t.S", {"C": method}),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.stream_stream("/t.S/C")()
                await call.code()  # the handler returns once it has read; nothing was written
        finally:
            await server.stop(None)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert seen == [grpc.aio.EOF]
