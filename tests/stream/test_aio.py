"""`send_message`: the private path on the installed grpcio, and the public fallback."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
import pytest

from llmgw_wire import Heartbeat
from llmgw_wire.stream import (
    ControlPlane,
    ControlSession,
    PermissionDenied,
    StreamError,
    _aio,
    connect,
    start_server,
)
from llmgw_wire.stream._aio import CallOver, send_message
from llmgw_wire.testing.sample import sample_registration
from tests.support import run_async as run

WAIT = 20.0


@pytest.fixture(autouse=True)
def _checked_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test checks the call's parts itself, and leaves no verdict behind."""
    monkeypatch.setattr(_aio, "_private", None)


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grpc.aio whose call lacks the private parts, as the check sees it."""
    monkeypatch.setattr(_aio, "_has_private_parts", lambda call: False)


class Refusing(ControlPlane):
    async def handle(self, session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        raise PermissionDenied("cordoned")


async def refused_while_sending() -> StreamError:
    """The error an agent that keeps sending meets once the control plane refused it."""
    server = await start_server(Refusing())
    try:
        async with connect(f"127.0.0.1:{server.port}") as session:
            await session.send(sample_registration())
            try:
                for _ in range(10_000):
                    await session.send(Heartbeat("gpu-node-017"))
            except StreamError as exc:
                return exc
    finally:
        await server.stop(grace=None)
    raise AssertionError("10,000 sends after the refusal")


def test_the_installed_grpcio_has_the_private_parts(caplog: pytest.LogCaptureFixture) -> None:
    """If a grpcio release renames them, this fails: the fallback would lose statuses."""
    caplog.set_level(logging.WARNING, logger="llmgw_wire.stream")
    errors: list[StreamError] = []

    async def main() -> None:
        errors.append(await refused_while_sending())

    run(main)
    assert _aio._private is True
    (error,) = errors
    assert (type(error), error.details) == (PermissionDenied, "cordoned")
    assert not [r for r in caplog.records if "grpcio" in r.getMessage()]


@pytest.mark.usefixtures("fallback")
def test_the_fallback_sends_and_says_once_which_grpcio_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="llmgw_wire.stream")
    errors: list[StreamError] = []

    async def main() -> None:
        errors.append(await refused_while_sending())
        errors.append(await refused_while_sending())

    run(main)
    assert _aio._private is False
    # The sends went out (the control plane read the registration and
    # refused it); the status may be lost to grpc.aio's INTERNAL.
    for error in errors:
        assert (error.code.name, error.details) in (
            ("PERMISSION_DENIED", "cordoned"),
            ("INTERNAL", "Internal error from Core"),
        ), error
    (warning,) = [r for r in caplog.records if "grpcio" in r.getMessage()]
    assert grpc.__version__ in warning.getMessage()


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


@pytest.mark.usefixtures("fallback")
def test_the_public_path_sends() -> None:
    call = PublicCall(over=False, half_closed=False)
    asyncio.run(send_message(call, b"x"))
    assert call.sent == [b"x"]


@pytest.mark.usefixtures("fallback")
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
