"""The agent's end on grpc.aio: `connect`, reconnecting with backoff, building a registration."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from typing import TYPE_CHECKING, Any, Final, TypeVar

import grpc
import grpc.aio
from attrs import frozen

from llmgw_wire.codec.limits import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.conversions import registration_from_inventory
from llmgw_wire.errors import (
    DecodeError,
    StatusCode,
    StreamClosed,
    StreamError,
    Unauthenticated,
)
from llmgw_wire.stream._aio import CallOver, send_message
from llmgw_wire.stream._logs import FirstLines
from llmgw_wire.stream._metrics import metrics_for
from llmgw_wire.stream._protocol import (
    CONNECT_ROUTE,
    REGISTRATION_DEADLINE,
    Keepalive,
    compression_of,
)
from llmgw_wire.stream._session import AgentSession, BadMessagePolicy
from llmgw_wire.stream._targets import Targets, moves_on, reason_of
from llmgw_wire.stream._tls import status_error

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

    from llmgw_wire.domain import Registration
    from llmgw_wire.stream._tls import ClientTLS

__all__ = ["Backoff", "connect", "keep_connected", "registration_from_inventory"]

logger = logging.getLogger("llmgw_wire.stream")

T = TypeVar("T")

#: Seconds an agent that leaves waits for the control plane to end the call.
LEAVE_GRACE: Final = 5.0


class _ClientCall:
    """The agent's call, as a session sees it: bytes in, bytes out, errors the library's own."""

    def __init__(self, call: grpc.aio.StreamStreamCall[bytes, bytes], *, tls: bool) -> None:
        self._call = call
        self._tls = tls

    def _error(
        self,
        code: grpc.StatusCode,
        details: str | None,
        trailers: Iterable[tuple[str, object]] | None,
    ) -> StreamError:
        """The library's error for a call that ended with `code`.

        DEADLINE_EXCEEDED is a `RegistrationTimeout` only when the control
        plane said, in the trailers, that its registration deadline passed.
        """
        registration = (REGISTRATION_DEADLINE, "1") in tuple(trailers or ())
        return status_error(code.name, details or "", tls=self._tls, registration=registration)

    async def _status(self) -> StreamError | None:
        code = await self._call.code()
        if code == grpc.StatusCode.OK:
            return None
        trailers = await self._call.trailing_metadata()
        return self._error(code, await self._call.details(), trailers)

    async def read(self) -> bytes | None:
        try:
            data = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc.code(), exc.details(), exc.trailing_metadata()) from None
        if data is grpc.aio.EOF:
            error = await self._status()
            if error is not None:
                raise error
            return None
        return bytes(data)

    async def write(self, data: bytes) -> None:
        try:
            await send_message(self._call, data)
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc.code(), exc.details(), exc.trailing_metadata()) from None
        except CallOver:
            # Whatever the interleaving, the status the control plane sent.
            error = await self._status()
            if error is not None:
                raise error from None
            raise StreamClosed("the call is over: the control plane ended it") from None
        except asyncio.InvalidStateError:
            raise StreamClosed("the call is half-closed: nothing more can be sent") from None

    async def done_writing(self) -> None:
        try:
            await self._call.done_writing()
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc.code(), exc.details(), exc.trailing_metadata()) from None
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
    keepalive: Keepalive | None = Keepalive(),
    on_bad_message: BadMessagePolicy = "skip",
    leave_grace: float = LEAVE_GRACE,
    options: Sequence[tuple[str, Any]] = (),
) -> AsyncIterator[AgentSession]:
    """Open the agent's stream to the control plane at `target` ("host:port") over grpc.aio.

    Leaving the block parts cleanly (`AgentSession.leave`): the agent
    half-closes and waits up to `leave_grace` seconds for the control plane
    to end the call, so that it sees an agent that left, not one that was
    lost; only then is the call cancelled. A task cancelled inside the block
    cancels the call at once. Leaving raises nothing of its own.

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
            decode and goes on (a StartShard whose shard it can name is
            answered with a `ShardReport` FAILED, see the agent guide);
            "end" makes `recv` raise its `DecodeError`.
        leave_grace: seconds to wait, on leaving the block, for the control
            plane to end the call after the agent's half-close.
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
        client_call = _ClientCall(call, tls=tls is not None)
        session = AgentSession(
            client_call,
            f"control plane {target}",
            on_bad_message=on_bad_message,
            max_message_size=max_message_size,
            max_items=max_items,
        )
        try:
            yield session
        except BaseException as exc:
            if isinstance(exc, Exception):
                await session.leave(leave_grace)
            else:
                # Cancelled (or interrupted): no waiting for anyone.
                await session._stop_reading()
                client_call.cancel()
            raise
        await session.leave(leave_grace)
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


#: The codes of a refusal `keep_connected` gives up on: connecting again with
#: the same credentials would be refused again. A failed handshake
#: (UNAUTHENTICATED) is not among them: a rotated certificate may fix it.
REFUSED_FOR_GOOD: Final = frozenset({StatusCode.PERMISSION_DENIED})


def _gives_up(error: StreamError, answered: bool) -> bool:
    """Whether `keep_connected` stops for `error` rather than connecting again."""
    if error.code in REFUSED_FOR_GOOD:
        return True
    # The registration itself refused as invalid: the same one would be again.
    return error.code is StatusCode.INVALID_ARGUMENT and not answered


def _answered(sessions: list[AgentSession]) -> bool:
    """Whether the control plane answered anything on the round's session."""
    return any(session.received > 0 for session in sessions)


async def _unless_stopped(stopped: asyncio.Event, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Run `work` unless `stopped` is set first (then cancel it): (done, its result)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if task.cancelled():
        return False, None
    return True, task.result()


async def _register(
    session: AgentSession, registration: Callable[[], Registration | Awaitable[Registration]]
) -> None:
    value = registration()
    if inspect.isawaitable(value):
        value = await value
    await session.send(value)


async def keep_connected(
    target: str | Sequence[str],
    registration: Callable[[], Registration | Awaitable[Registration]],
    serve: Callable[[AgentSession], Awaitable[None]],
    *,
    stop: asyncio.Event | None = None,
    backoff: Backoff = Backoff(),
    give_up_unauthenticated: bool = False,
    meter_provider: Any = None,
    **connect_options: Any,
) -> None:
    """Stay connected to the control plane: register, serve, and on any loss connect again.

    Each round connects, sends `registration()` (called each time, so that
    it says what the agent runs now: read it from the shard store), and runs
    `serve(session)` (typically `async for command in session: ...`). When
    the call ends, however it ends (a bad message under
    `on_bad_message="end"` included), the agent waits a `backoff` delay and
    connects again; the delays start over after a round in which the control
    plane answered.

    Setting `stop` ends the agent at any point, connecting included: `serve`
    is cancelled and the agent leaves gracefully (it half-closes and waits
    up to `leave_grace` seconds for the control plane's end, as leaving
    `connect` does), so the control plane sees a clean end; then this returns.

    `target` is one address ("host:port"), several (a standby control plane's
    too), or a `dns:` name ("dns:cp.example:7070"), which stands for every
    address it resolves to, looked up again at each pass. A round that ends
    unreachable, lost, stopping or not serving (UNAVAILABLE), or with a
    failed handshake, makes the next round try the next address, at once
    until each was tried, then after the backoff delay.

    A failed TLS handshake (`Unauthenticated`) is logged at ERROR once per
    distinct reason (the first 16 reasons; after that at INFO), and retried:
    a rotated certificate may fix it.

    Args:
        target: the control plane's address, or addresses.
        registration: makes the registration sent at each round.
        serve: serves one round's session.
        stop: set it to return.
        backoff: the delays between rounds.
        give_up_unauthenticated: raise `Unauthenticated` rather than retry it.
        meter_provider: the OpenTelemetry `MeterProvider` of
            `llmgw.stream.reconnects`; None takes the global one when
            OpenTelemetry's API is installed, False records nothing.
        connect_options: what `connect` takes besides its target.

    Raises:
        PermissionDenied: the control plane refused this agent
            (PERMISSION_DENIED): credentials that connecting again would
            not change.
        MessageRejected: the control plane refused the registration itself
            as invalid (INVALID_ARGUMENT before it answered anything): the
            same registration would be refused again.
        Unauthenticated: with `give_up_unauthenticated`, a failed handshake.
        EncodeError: the registration cannot be sent.
    """
    tls = connect_options.get("tls")
    targets = Targets(target, check_name=tls is not None and tls.server_name is None)
    metrics = metrics_for(meter_provider)
    extra_options = list(connect_options.pop("options", ()))
    logged = FirstLines()
    attempt = 0
    stopped = stop or asyncio.Event()
    while not stopped.is_set():
        # The round's session, once connected: whether the plane answered is its count.
        sessions: list[AgentSession] = []
        ended: StreamError | DecodeError | None = None
        address, options = await targets.current()
        try:
            async with connect(
                address, options=[*options, *extra_options], **connect_options
            ) as session:
                sessions.append(session)
                registered, _ = await _unless_stopped(stopped, _register(session, registration))
                if not registered:
                    # Nothing registered, nothing to leave: no waiting for the plane.
                    session._abandon()
                else:
                    await _unless_stopped(stopped, serve(session))
            logger.info("the call to %s ended", address)
        except Unauthenticated as exc:
            ended = exc
            # Said once at ERROR: the same reason every few seconds says nothing new.
            level = logging.ERROR if logged.first(exc.reason) else logging.INFO
            logger.log(level, "cannot authenticate with %s: %s", address, exc.reason)
            if give_up_unauthenticated:
                raise
        except StreamError as exc:
            if _gives_up(exc, answered=_answered(sessions)):
                raise
            ended = exc
            logger.warning("the stream to %s ended: %s", address, exc)
        except DecodeError as exc:
            ended = exc
            logger.warning("the stream to %s ended for a bad message: %s", address, exc)
        except StreamClosed as exc:
            # The registration met a call the control plane had just ended.
            logger.warning("the stream to %s ended: %s", address, exc)
        if stopped.is_set():
            break
        metrics.reconnect(reason_of(ended))
        attempt = 0 if _answered(sessions) else attempt + 1
        moved = moves_on(ended)
        if moved:
            targets.advance()
        # Each address of a pass is tried at once; a pass that failed whole waits.
        delay = 0.0 if moved and attempt % len(targets) else backoff.delay(attempt // len(targets))
        logger.info("connecting to %s in %.1f s", (await targets.current())[0], delay)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stopped.wait(), delay)
