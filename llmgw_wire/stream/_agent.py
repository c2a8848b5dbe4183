"""The agent's end on grpc.aio: `connect`, reconnecting with backoff, building a registration."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypedDict

import grpc
import grpc.aio
from attrs import frozen

from llmgw_wire.codec import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.conversions import registration_from_inventory
from llmgw_wire.errors import (
    DecodeError,
    PermissionDenied,
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
    SHEDDING,
    GrpcOption,
    Keepalive,
    compression_of,
)
from llmgw_wire.stream._session import AgentSession, BadMessagePolicy
from llmgw_wire.stream._targets import Targets, moves_on, reason_of
from llmgw_wire.stream._tls import status_error

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

    # Only for type checkers (typeshed has it): nothing imports it at run time.
    from typing_extensions import Unpack

    from llmgw_wire.domain import Registration
    from llmgw_wire.stream._tls import ClientTLS

__all__ = ["Backoff", "ConnectOptions", "connect", "keep_connected", "registration_from_inventory"]

logger = logging.getLogger("llmgw_wire.stream")

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

    async def status(self) -> StreamError | None:
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
            error = await self.status()
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
            error = await self.status()
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


#: A channel's own subchannel, so its own connection and connect backoff, for
#: each round of `keep_connected`: from grpc's global pool, a new channel to a
#: target inherits the backoff an earlier channel's failures left (up to 120
#: s), and fails at once with the old error until it expires; the agent's own
#: `Backoff` would not be its pace.
OWN_SUBCHANNEL: Final = ("grpc.use_local_subchannel_pool", 1)


def channel_options(
    max_message_size: int,
    keepalive: Keepalive | None,
    tls: ClientTLS | None,
    extra: Sequence[GrpcOption],
) -> list[GrpcOption]:
    """The grpc options of an agent's channel."""
    options: list[GrpcOption] = [
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", max_message_size),
    ]
    if keepalive is not None:
        options += keepalive.client_options()
    if tls is not None:
        options += tls.options()
    return options + list(extra)


class ConnectOptions(TypedDict, total=False):
    """What `connect` takes besides its target: the keyword arguments `keep_connected` passes on.

    Each means what `connect`'s argument of the same name means, with the
    same default; a type checker refuses a name that is not one of them.
    """

    tls: ClientTLS | None
    metadata: Mapping[str, str] | None
    compression: str | None
    max_message_size: int
    max_items: int
    keepalive: Keepalive | None
    on_bad_message: BadMessagePolicy
    leave_grace: float
    options: Sequence[GrpcOption]


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
    options: Sequence[GrpcOption] = (),
) -> AsyncIterator[AgentSession]:
    """Open the agent's stream to the control plane at `target` ("host:port") over grpc.aio.

    Leaving the block parts cleanly (`AgentSession.leave`): the agent
    half-closes and waits up to `leave_grace` seconds for the control plane
    to end the call, so that it sees an agent that left, not one that was
    lost; only then is the call cancelled. A task cancelled inside the block
    cancels the call at once. Leaving raises nothing of its own.

    Channels of one process to one target share grpc's subchannel, and so
    its connection and its connect backoff (up to 120 s after failures). A
    loop of its own that connects again should pass
    `options=[("grpc.use_local_subchannel_pool", 1)]`, as `keep_connected`
    does, so that its own delays are its pace.

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
        options: more grpc channel options, as (name, value) pairs; they
            come last, so they override the library's own.

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
                await session.stop_reading()
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

    `keep_connected` starts the delays over only after a round that lasted:
    the control plane answered and the call stayed up at least `maximum`
    seconds. A control plane that answers and then fails at once sees its
    agents come back ever more slowly, as grpc's own reconnect backoff does.

    Attributes:
        initial: seconds of the first delay.
        maximum: the longest delay, and how long a round must last for the
            delays to start over.
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


def _longest(backoff: Backoff) -> float:
    """A delay at `backoff.maximum`, less the jitter: the wait after a refusal."""
    return float(backoff.maximum * (1 - backoff.jitter * random.random()))  # noqa: S311 (jitter, not a secret)


def _reconnect_options(backoff: Backoff) -> list[GrpcOption]:
    """The options that pace grpc's own reconnect backoff, within one channel, as `backoff`."""
    return [
        ("grpc.initial_reconnect_backoff_ms", max(1, round(backoff.initial * 1000))),
        ("grpc.max_reconnect_backoff_ms", max(1, round(backoff.maximum * 1000))),
    ]


#: Seconds within which a control plane must answer a registration (see
#: `keep_connected`'s `first_answer_timeout`): the control plane's own
#: registration deadline, the other way round.
FIRST_ANSWER_TIMEOUT: Final = 30.0

RefusalHook: TypeAlias = "Callable[[StreamError], bool | Awaitable[bool]]"
"""Called with a refusal of the agent's own message; False gives up (see `keep_connected`)."""


def own_fault(error: BaseException | None) -> bool:
    """Whether `error` refuses the agent's own message: what connecting again cannot fix.

    INVALID_ARGUMENT (`MessageRejected`), and RESOURCE_EXHAUSTED for a
    message over a limit; a control plane that sheds load (RESOURCE_EXHAUSTED
    with one of the `SHEDDING` texts: too many calls waiting to register, on
    the server or from this address, or too many bytes from this address)
    is busy, not refusing the agent's message.
    """
    if not isinstance(error, StreamError):
        return False
    if error.code is StatusCode.INVALID_ARGUMENT:
        return True
    return error.code is StatusCode.RESOURCE_EXHAUSTED and not error.details.startswith(SHEDDING)


async def _register(
    session: AgentSession, registration: Callable[[], Registration | Awaitable[Registration]]
) -> None:
    value = registration()
    if inspect.isawaitable(value):
        value = await value
    await session.send(value)


async def _serve_round(
    session: AgentSession,
    registration: Callable[[], Registration | Awaitable[Registration]],
    serve: Callable[[AgentSession], Awaitable[None]],
    stopped: asyncio.Event,
    first_answer_timeout: float | None,
) -> None:
    """Register and serve one round, until the call ends or `stopped` is set.

    Returns when stopped (the caller's `connect` then leaves cleanly, or
    nothing was registered and the call is cancelled); raises what ended
    the call, and a DEADLINE_EXCEEDED `StreamError` when nothing came
    back within `first_answer_timeout` seconds of connecting.
    """
    registered = False

    async def work() -> None:
        nonlocal registered
        await _register(session, registration)
        registered = True
        session.start_reading()  # what arrives counts as an answer, whoever reads it
        await serve(session)

    task = asyncio.ensure_future(work())
    stopping = asyncio.ensure_future(stopped.wait())
    # The first answer, watched only when it has a deadline.
    heard: asyncio.Future[None] | None = None
    deadline = 0.0
    if first_answer_timeout is not None:
        heard = asyncio.ensure_future(session.answered())
        deadline = asyncio.get_running_loop().time() + first_answer_timeout
    timed_out = False
    try:
        while not (task.done() or stopping.done()):
            waiting: set[asyncio.Future[Any]] = {task, stopping}
            timeout = None
            if heard is not None and not heard.done():
                waiting.add(heard)
                timeout = max(deadline - asyncio.get_running_loop().time(), 0.0)
            done, _ = await asyncio.wait(
                waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                timed_out = True
                break
    finally:
        for watcher in (stopping, heard):
            if watcher is not None:
                watcher.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if not task.cancelled():
        task.result()  # its error, if any, ends the round
        return
    if registered and not timed_out:
        return  # stopped: left cleanly by the caller's `connect`
    # Nothing registered (nothing to leave), or nothing heard: no waiting for the plane.
    session._abandon()
    if timed_out:
        raise StreamError(
            f"no answer from the control plane within {first_answer_timeout:g} s",
            code=StatusCode.DEADLINE_EXCEEDED,
        )


async def _carries_on(hook: RefusalHook | None, error: StreamError) -> bool:
    """Whether the agent connects again after a refusal of its own message."""
    if hook is None:
        return True
    verdict = hook(error)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return bool(verdict)


async def keep_connected(
    target: str | Sequence[str],
    registration: Callable[[], Registration | Awaitable[Registration]],
    serve: Callable[[AgentSession], Awaitable[None]],
    *,
    stop: asyncio.Event | None = None,
    backoff: Backoff = Backoff(),
    first_answer_timeout: float | None = FIRST_ANSWER_TIMEOUT,
    on_refused: RefusalHook | None = None,
    give_up_unauthenticated: bool = False,
    meter_provider: Any = None,
    **connect_options: Unpack[ConnectOptions],
) -> None:
    """Stay connected to the control plane: register, serve, and on any loss connect again.

    Each round connects, sends `registration()` (called each time, so that
    it says what the agent runs now: read it from the shard store), and runs
    `serve(session)` (typically `async for command in session: ...`). When
    the call ends, however it ends (a bad message under
    `on_bad_message="end"` included), the agent waits a `backoff` delay and
    connects again. The delays grow from round to round, and start over
    only after a round that lasted: the control plane answered and the call
    stayed up `backoff.maximum` seconds. Each round's connection is new,
    paced by `backoff` alone (no connect backoff grpc kept from an earlier
    round).

    Setting `stop` ends the agent at any point, connecting included: `serve`
    is cancelled and the agent leaves gracefully (it half-closes and waits
    up to `leave_grace` seconds for the control plane's end, as leaving
    `connect` does), so the control plane sees a clean end; then this returns.

    `target` is one address ("host:port"), several (a standby control plane's
    too), or a `dns:` name ("dns:cp.example:7070"), which stands for every
    address it resolves to, looked up again at each pass. The next round
    tries the next address when a round ended unreachable, lost, stopping
    or not serving (UNAVAILABLE), with a failed handshake, refused
    (PERMISSION_DENIED), or with any error before the control plane answered
    anything: an address that answers plain HTTP (a 403, 404 or 500 from an
    ingress), another gRPC service (UNIMPLEMENTED), or nothing at all within
    `first_answer_timeout`. Each address of a pass is tried at once; after a
    whole pass the agent waits the backoff delay.

    A refusal of the agent's own message (INVALID_ARGUMENT, or
    RESOURCE_EXHAUSTED for a message over a limit) is not retried at once:
    it is logged at ERROR with the control plane's reason (once per reason,
    then at INFO), `on_refused(error)` is called, and the agent waits a
    delay at `backoff.maximum` (less the jitter) before it connects again,
    with a registration made afresh; `on_refused` returning False gives up.

    A failed TLS handshake (`Unauthenticated`) is logged at ERROR once per
    distinct reason (the first 16 reasons; after that at INFO), and retried:
    a rotated certificate may fix it.

    Args:
        target: the control plane's address, or addresses.
        registration: makes the registration sent at each round.
        serve: serves one round's session.
        stop: set it to return.
        backoff: the delays between rounds.
        first_answer_timeout: seconds within which, from connecting, the
            control plane must send something (its Ack, say) or end the
            call; past it the round ends as DEADLINE_EXCEEDED and the next
            address is tried. None waits as long as it takes.
        on_refused: called (a function or a coroutine function) with the
            `StreamError` of a refusal of the agent's own message; False
            gives up (this raises the error), True or None connects again
            after the longest delay. None: always connect again.
        give_up_unauthenticated: raise `Unauthenticated` rather than retry it.
        meter_provider: the OpenTelemetry `MeterProvider` of
            `llmgw.stream.reconnects`; None takes the global one when
            OpenTelemetry's API is installed, False records nothing.
        connect_options: what `connect` takes besides its target
            (`ConnectOptions`).

    Raises:
        PermissionDenied: every address of a pass refused this agent
            (PERMISSION_DENIED): credentials that connecting again would
            not change.
        MessageRejected: `on_refused` gave up on a registration refused as
            invalid (and `StreamError` RESOURCE_EXHAUSTED on one over a limit).
        Unauthenticated: with `give_up_unauthenticated`, a failed handshake.
        EncodeError: the registration cannot be sent.
    """
    if first_answer_timeout is not None and not first_answer_timeout > 0:
        raise ValueError(f"Expected first_answer_timeout > 0 or None, got {first_answer_timeout!r}")
    unknown = connect_options.keys() - ConnectOptions.__optional_keys__
    if unknown:
        raise TypeError(
            f"keep_connected() got unexpected keyword arguments {sorted(unknown)}; besides its "
            f"own, it takes connect()'s: {sorted(ConnectOptions.__optional_keys__)}"
        )
    tls = connect_options.get("tls")
    targets = Targets(target, check_name=tls is not None and tls.server_name is None)
    metrics = metrics_for(meter_provider)
    # Each round's own: grpc's subchannel and reconnect pace are the agent's.
    own_options = [
        OWN_SUBCHANNEL,
        *_reconnect_options(backoff),
        *connect_options.get("options", ()),
    ]
    pace = _Pace(backoff, targets, on_refused)
    loop = asyncio.get_running_loop()
    stopped = stop or asyncio.Event()
    while not stopped.is_set():
        address, options = await targets.current()
        started = loop.time()
        # The round's session, once connected: whether the plane answered is its count
        # of values (a plain HTTP body read as a message is none).
        sessions: list[AgentSession] = []
        try:
            round_options: ConnectOptions = {**connect_options, "options": [*options, *own_options]}
            async with connect(address, **round_options) as session:
                sessions.append(session)
                await _serve_round(session, registration, serve, stopped, first_answer_timeout)
            logger.info("the call to %s ended", address)
            ended: StreamError | DecodeError | None = None
        except (StreamError, DecodeError, StreamClosed) as exc:
            if give_up_unauthenticated and isinstance(exc, Unauthenticated):
                pace.log(address, exc)
                raise
            ended = None if isinstance(exc, StreamClosed) else exc
            pace.log(address, exc)
        if stopped.is_set():
            break
        metrics.reconnect(reason_of(ended))
        answered = any(session.received > 0 for session in sessions)
        lasted = answered and loop.time() - started >= backoff.maximum
        delay = await pace.after(address, ended, answered=answered, lasted=lasted)
        logger.info("connecting to %s in %.1f s", (await targets.current())[0], delay)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stopped.wait(), delay)


class _Pace:
    """How `keep_connected` goes on after a round: which address, how soon, or not at all."""

    def __init__(self, backoff: Backoff, targets: Targets, on_refused: RefusalHook | None) -> None:
        self._backoff = backoff
        self._targets = targets
        self._on_refused = on_refused
        self._logged = FirstLines()
        # Delays waited since the last round that lasted.
        self._streak = 0
        # The addresses that refused this agent (PERMISSION_DENIED) in a row.
        self._denied: set[str] = set()

    def log(self, address: str, error: StreamError | DecodeError | StreamClosed) -> None:
        """Say how the round with `address` ended: once per reason what repeats."""
        if isinstance(error, Unauthenticated):
            # Said once at ERROR: the same reason every few seconds says nothing new.
            level = logging.ERROR if self._logged.first(error.reason) else logging.INFO
            logger.log(level, "cannot authenticate with %s: %s", address, error.reason)
        elif own_fault(error):
            assert isinstance(error, StreamError)
            level = logging.ERROR if self._logged.first(error.details) else logging.INFO
            logger.log(
                level,
                "the control plane at %s refused the agent's own message (%s): connecting"
                " again only after the longest delay (%g s); fix what it names",
                address,
                error,
                self._backoff.maximum,
            )
        elif isinstance(error, DecodeError):
            logger.warning("the stream to %s ended for a bad message: %s", address, error)
        else:
            # StreamClosed: the registration met a call the control plane had just ended.
            logger.warning("the stream to %s ended: %s", address, error)

    async def after(
        self, address: str, ended: StreamError | DecodeError | None, *, answered: bool, lasted: bool
    ) -> float:
        """Seconds to wait before the next round (its address chosen); raises to give up."""
        if isinstance(ended, PermissionDenied):
            self._denied.add(address)
            if len(self._denied) >= len(self._targets):
                raise ended
        else:
            self._denied.clear()
        refused = own_fault(ended)
        if refused:
            assert isinstance(ended, StreamError)
            if not await _carries_on(self._on_refused, ended):
                raise ended
        if lasted:
            self._streak = 0
        # Each address of a pass is tried at once; a pass that failed whole waits.
        if moves_on(ended, answered=answered) and not self._targets.advance():
            return 0.0
        if refused:
            return _longest(self._backoff)
        delay = self._backoff.delay(self._streak)
        self._streak += 1
        return delay
