"""The agent's end on grpc.aio: `connect`, reconnecting with backoff, building a registration."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import random
from typing import TYPE_CHECKING, Any

from attrs import frozen

from llmgw_wire.codec.limits import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.conversions import registration_from_inventory
from llmgw_wire.errors import PermissionDenied, StreamClosed, StreamError
from llmgw_wire.stream._server import CONNECT_ROUTE, Keepalive, compression_of
from llmgw_wire.stream._session import AgentSession, BadMessagePolicy

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc
import grpc.aio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from llmgw_wire.domain import Registration
    from llmgw_wire.stream._tls import ClientTLS

__all__ = ["Backoff", "connect", "keep_connected", "registration_from_inventory"]

logger = logging.getLogger("llmgw_wire.stream")


class _ClientCall:
    """The agent's call, as a session sees it: bytes in, bytes out, errors the library's own."""

    def __init__(self, call: grpc.aio.StreamStreamCall[bytes, bytes]) -> None:
        self._call = call

    async def _status(self) -> StreamError | None:
        code = await self._call.code()
        if code == grpc.StatusCode.OK:
            return None
        return StreamError.for_status(code.name, await self._call.details() or "")

    async def read(self) -> bytes | None:
        try:
            data = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise StreamError.for_status(exc.code().name, exc.details() or "") from None
        if data is grpc.aio.EOF:
            error = await self._status()
            if error is not None:
                raise error
            return None
        return bytes(data)

    async def write(self, data: bytes) -> None:
        try:
            await self._call.write(data)
        except grpc.aio.AioRpcError as exc:
            raise StreamError.for_status(exc.code().name, exc.details() or "") from None
        except asyncio.InvalidStateError:
            error = await self._status() if self._call.done() else None
            raise StreamClosed(f"the call is over{f' ({error})' if error else ''}") from None

    async def done_writing(self) -> None:
        try:
            await self._call.done_writing()
        except grpc.aio.AioRpcError as exc:
            raise StreamError.for_status(exc.code().name, exc.details() or "") from None
        except asyncio.InvalidStateError:
            raise StreamClosed("the call is over") from None

    def cancel(self) -> None:
        self._call.cancel()

    def done(self) -> bool:
        return bool(self._call.done())


def channel_options(
    max_message_size: int,
    keepalive: Keepalive | None,
    tls: ClientTLS | None,
    extra: Sequence[tuple[str, Any]],
) -> list[tuple[str, Any]]:
    """The grpc options of an agent's channel."""
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", max_message_size),
    ]
    if keepalive is not None:
        options += keepalive.client_options()
    if tls is not None:
        options += tls.options()
    return options + list(extra)


@contextlib.asynccontextmanager
async def connect(
    target: str,
    *,
    tls: ClientTLS | None = None,
    metadata: Mapping[str, str] | None = None,
    compression: str | None = None,
    max_message_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
    keepalive: Keepalive | None = Keepalive(),  # noqa: B008 (frozen)
    on_bad_message: BadMessagePolicy = "skip",
    options: Sequence[tuple[str, Any]] = (),
) -> AsyncIterator[AgentSession]:
    """Open the agent's stream to the control plane at `target` ("host:port") over grpc.aio.

    Leaving the block cancels the call if the control plane has not ended it
    (and raises nothing of its own); to part cleanly, `close()` the session
    and read until the end.

    Args:
        target: the control plane, "host:port".
        tls: the CA to trust and, for mutual TLS, the agent's certificate;
            None connects in plain text.
        metadata: gRPC metadata sent with the call (a bearer token, say).
        compression: "gzip" compresses what the agent sends.
        max_message_size: the largest message accepted or sent, in bytes.
        max_items: the element limit of `decode`, applied to every message.
        keepalive: HTTP/2 keepalive; None turns it off.
        on_bad_message: "skip" (the default) logs a message that does not
            decode and goes on; "end" makes `recv` raise its `DecodeError`.
        options: more grpc channel options, as (name, value) pairs.

    A control plane that cannot be reached shows as `PeerUnavailable` from
    the first `send` or `recv`.
    """
    channel_opts = channel_options(max_message_size, keepalive, tls, options)
    if tls is None:
        channel = grpc.aio.insecure_channel(target, options=channel_opts)
    else:
        channel = grpc.aio.secure_channel(target, tls.credentials(), options=channel_opts)
    try:
        method = channel.stream_stream(CONNECT_ROUTE)
        call = method(
            metadata=tuple((metadata or {}).items()) or None,
            compression=compression_of(compression),
        )
        client_call = _ClientCall(call)
        session = AgentSession(
            client_call,
            f"control plane {target}",
            on_bad_message=on_bad_message,
            max_message_size=max_message_size,
            max_items=max_items,
        )
        try:
            yield session
        finally:
            await session._stop_reading()
            if not client_call.done():
                client_call.cancel()
    finally:
        await channel.close(grace=None)


@frozen
class Backoff:
    """Exponential backoff with jitter, between an agent's attempts to connect.

    The n-th delay (from 0) is `min(maximum, initial * multiplier**n)`, less
    up to `jitter` of itself at random, so that agents that lost the same
    control plane do not all come back at the same instant.

    Attributes:
        initial: seconds of the first delay.
        maximum: the longest delay.
        multiplier: how much each delay grows.
        jitter: the fraction (0 to 1) of a delay taken off at random.
    """

    initial: float = 1.0
    maximum: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt `attempt` + 1."""
        base = min(self.maximum, self.initial * self.multiplier ** min(attempt, 64))
        draw = (rng or random).random()
        return float(base * (1 - self.jitter * draw))


async def keep_connected(
    target: str,
    registration: Callable[[], Registration | Awaitable[Registration]],
    serve: Callable[[AgentSession], Awaitable[None]],
    *,
    stop: asyncio.Event | None = None,
    backoff: Backoff = Backoff(),
    **connect_options: Any,
) -> None:
    """Stay connected to the control plane: register, serve, and on any loss connect again.

    Each round connects, sends `registration()` (called each time, so that
    it says what the agent runs now: read it from the shard store), and runs
    `serve(session)` (typically `async for command in session: ...`). When
    the call ends, however it ends, the agent waits a `backoff` delay and
    connects again; the delays start over after a round in which the control
    plane answered. Returns once `stop` is set.

    Raises:
        PermissionDenied: the control plane refused this agent; trying again
            would not help.
        EncodeError: the registration cannot be sent.
    """
    attempt = 0
    stopped = stop or asyncio.Event()
    while not stopped.is_set():
        current: AgentSession | None = None
        try:
            async with connect(target, **connect_options) as session:
                current = session
                value = registration()
                if inspect.isawaitable(value):
                    value = await value
                await session.send(value)
                serving = asyncio.ensure_future(serve(session))
                stopping = asyncio.ensure_future(stopped.wait())
                try:
                    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopping.cancel()
                    if not serving.done():
                        serving.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await serving
                if serving.done() and not serving.cancelled():
                    serving.result()
            logger.info("the call to %s ended", target)
        except PermissionDenied:
            raise
        except StreamError as exc:
            logger.warning("the stream to %s ended: %s", target, exc)
        if stopped.is_set():
            break
        answered = current is not None and current.received > 0
        attempt = 0 if answered else attempt + 1
        delay = backoff.delay(attempt)
        logger.info("connecting to %s again in %.1f s", target, delay)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stopped.wait(), delay)
