"""The control plane's end on grpc.aio: `ControlPlane`, `start_server` and the running `Server`."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import errno
import logging
import weakref
from typing import TYPE_CHECKING, Any, Final

import grpc
import grpc.aio

from llmgw_wire.codec import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.errors import PeerUnavailable, RegistrationTimeout, StreamError
from llmgw_wire.stream._cancel import COUNTED, cancelling, uncancel
from llmgw_wire.stream._health import HEALTH_SERVICE, Health
from llmgw_wire.stream._limits import ServerLimits
from llmgw_wire.stream._logs import Throttle, current_peer
from llmgw_wire.stream._metrics import StreamMetrics, metrics_for
from llmgw_wire.stream._peers import PeerBytes, Shares, address_of, peer_of
from llmgw_wire.stream._protocol import (
    FAILED_TO_SERVE,
    METHOD,
    NOT_SERVING,
    REGISTRATION_DEADLINE,
    SERVICE,
    STOPPING,
    TOO_MANY_WAITING,
    TOO_MANY_WAITING_FROM_PEER,
    GrpcOption,
    Keepalive,
    negotiated_compression,
)
from llmgw_wire.stream._reflection import serve_reflection
from llmgw_wire.stream._session import BadMessagePolicy, ControlSession
from llmgw_wire.stream._tls import PeerCertificate, ServerTLS, node_ids_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Sequence

__all__ = [
    "AgentService",
    "ControlPlane",
    "Server",
    "add_to_server",
    "server_options",
    "start_server",
]

logger = logging.getLogger("llmgw_wire.stream")


class ControlPlane(abc.ABC):
    """Base class of a control plane: `handle` runs once per connected agent.

    Serve an instance with `start_server`. When an agent's connection is
    lost, or the server stops, its `handle` is cancelled: put what must happen
    then, such as marking the node offline, in a `finally`.
    """

    @abc.abstractmethod
    async def handle(self, session: ControlSession) -> None:
        """Serve one agent's stream; the call ends, with status OK, when this returns.

        Raise `StreamError(details, code=...)` to end the call with that
        status (e.g. "FAILED_PRECONDITION"); any other exception ends it with
        INTERNAL and a message that says nothing of the exception, which is
        logged.
        """


class AgentService:
    """`AgentService.Connect` on a grpc.aio server, from `add_to_server`: its calls and its health.

    The server is the application's: its options, interceptors, ports and
    other services. This is what the stream adds to it, and the handle of a
    graceful stop of the stream: `await service.stop(grace)` before the
    server's own `stop`.

    Attributes:
        plane: the control plane it serves.
    """

    def __init__(
        self,
        plane: ControlPlane,
        *,
        node_identity: Callable[[PeerCertificate], Collection[str]] | None,
        authorize: Callable[[ControlSession], Awaitable[None]] | None,
        registration_timeout: float | None,
        on_bad_message: BadMessagePolicy,
        max_message_size: int,
        max_items: int,
        metrics: StreamMetrics,
        limits: ServerLimits,
        serving: bool,
    ) -> None:
        self.plane = plane
        self._metrics = metrics
        self._limits = limits
        # The sessions that have not registered yet, per peer: each leaves as it registers or ends.
        self._waiting: Shares[ControlSession] = Shares(
            limits.max_unregistered_calls, limits.max_unregistered_calls_per_peer
        )
        # Each peer's bytes held, shared by its sessions while it has any.
        self._held: weakref.WeakValueDictionary[str, PeerBytes] = weakref.WeakValueDictionary()
        # Calls over the cap come as fast as a client makes them: a line per interval.
        self._over_cap_log = Throttle()
        self._node_identity = node_identity
        self._authorize = authorize
        self._registration_timeout = registration_timeout
        self._on_bad_message = on_bad_message
        self._max_message_size = max_message_size
        self._max_items = max_items
        # The open calls' sessions; a stop ends each, and waits for the set to empty.
        self._open: set[ControlSession] = set()
        self._drained = asyncio.Event()
        self._drained.set()
        self._stopping = False
        # The side doors (health's Watch, reflection) share one budget of calls.
        self._side_calls: Shares[object] = Shares(
            limits.max_side_calls, limits.max_side_calls_per_peer
        )
        self._health = Health(
            (SERVICE,),
            serving=serving,
            calls=self._side_calls,
            lifetime=limits.side_call_lifetime,
        )

    def __repr__(self) -> str:
        return f"<AgentService calls={len(self._open)}>"

    @property
    def calls(self) -> int:
        """The agent streams open now."""
        return len(self._open)

    async def wait_idle(self) -> None:
        """Return once no agent stream is open: each call's end has run (at once if none is).

        After `stop`, it returns once every call has ended; while serving,
        at a moment with no agent connected (another may connect next).
        """
        await self._drained.wait()

    def _handler(self) -> grpc.GenericRpcHandler:
        """The generic grpc handler of `AgentService.Connect` (raw bytes both ways)."""
        method = grpc.stream_stream_rpc_method_handler(self._serve)
        return grpc.method_handlers_generic_handler(SERVICE, {METHOD: method})

    async def set_serving(self, serving: bool) -> None:
        """Say whether this control plane is to be served (a standby that is not the leader: no).

        Not serving, the health service says NOT_SERVING and new agent
        streams are refused with UNAVAILABLE "the control plane is not
        serving", so that agents move on to their next address; the streams
        already open go on. Once a stop has begun, it stays NOT_SERVING.
        """
        await self._health.set_serving(serving)

    async def stop(self, grace: float | None = 10.0) -> None:
        """Stop the stream gracefully, so that agents lose nothing that was sent.

        The health service says NOT_SERVING at once, before anything else;
        new agent streams are refused; every open one ends, after everything
        its `handle` sent, with status UNAVAILABLE "the control plane is
        stopping" (what an agent takes as "connect again"); this returns once
        every call has ended, or after `grace` seconds. The server itself
        goes on: stop it next (`await server.stop(grace)`), which sends those
        ends to the agents before its sockets close. Stopping twice does
        nothing more.

        Args:
            grace: seconds to wait for open calls to end; None or 0 does not wait.
        """
        if not self._stopping:
            self._stopping = True
            await self._health.stopping()
            for session in list(self._open):
                session.end(PeerUnavailable(STOPPING))
        if grace:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._drained.wait(), grace)

    def _check_node_id(self, certificate: PeerCertificate | None) -> Callable[[str], str | None]:
        identity = self._node_identity
        assert identity is not None

        def check(node_id: str) -> str | None:
            if certificate is None:
                return f"node {node_id!r}: no client certificate to vouch for it"
            allowed = identity(certificate)
            if node_id in allowed:
                return None
            names = ", ".join(sorted(allowed)) or "nothing"
            return f"node {node_id!r}: the client certificate is for {names}"

        return check

    def _session(
        self,
        context: grpc.aio.ServicerContext[bytes, bytes],
        call: _ServerCall,
        end: Callable[[ControlSession, StreamError], None],
    ) -> tuple[ControlSession, str]:
        """The call's session, and its peer (who it is from, for the budgets)."""
        metadata = {
            key: value
            for key, value in (context.invocation_metadata() or ())
            if isinstance(value, str)
        }
        # From the call, whoever configured the port: None on plain text or without one.
        certificate = PeerCertificate.from_auth_context(context.auth_context())
        address = address_of(context.peer())
        key = peer_of(address, certificate)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = PeerBytes(key, self._limits.max_bytes_per_peer)
        session = ControlSession(
            call,
            address,
            metadata=metadata,
            certificate=certificate,
            check_node_id=self._check_node_id(certificate) if self._node_identity else None,
            end=end,
            on_registered=self._waiting.leave,
            on_bad_message=self._on_bad_message,
            max_message_size=self._max_message_size,
            max_items=self._max_items,
            peer_bytes=held,
            metrics=self._metrics,
            send_timeout=self._limits.send_timeout,
        )
        return session, key

    async def _serve(
        self, _requests: object, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        """The call's handler: an async generator, though the session writes through `context`.

        Interceptors that wrap a stream's handler (OpenTelemetry's, among
        others) iterate it; grpc.aio serves a generator and a coroutine alike.
        """
        await self._call(context)
        return
        yield  # pragma: no cover (what makes this a generator)

    async def _call(self, context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        # `handle` runs in this task, grpc's own for the call: no task of its
        # own. Something that ends the call cancels it here, between sends.
        # The session holds `serving.end`, and `serving` holds no session:
        # nothing of the call is in a reference cycle once this task is done.
        task = asyncio.current_task()
        serving = _Handling(task)
        call = _ServerCall(context, task)
        session, peer = self._session(context, call, serving.end)
        # Every line of this call's tasks counts against its peer's share of the log.
        current_peer.set(peer)
        refusal = self._admission(session, peer)
        if refusal is not None:
            _set_status(context, refusal)
            return
        open_calls = self._open
        open_calls.add(session)
        self._drained.clear()
        self._metrics.agents(1)
        logger.info("%s connected", session)
        timer: asyncio.TimerHandle | None = None
        try:
            refusal = await self._authorized(session)
            if refusal is not None:
                self._metrics.refused("authorize")
                _set_status(context, refusal)
                return
            session.start_reading()
            if self._registration_timeout is not None:
                # A timer, not a task: nothing runs unless the deadline passes.
                timer = asyncio.get_running_loop().call_later(
                    self._registration_timeout, self._registration_late, session
                )
            error = await serving.run(self.plane.handle, session)
            _set_status(context, self._outcome(session, error, serving.ending))
        except asyncio.CancelledError:
            # The agent's call was cancelled, or its connection lost: no alarm.
            call.mark_lost()
            logger.info("stream with %s lost: the call was cancelled", session)
            raise
        finally:
            self._metrics.agents(-1)
            self._waiting.leave(session)
            if timer is not None:
                timer.cancel()
            await session.stop_reading()
            open_calls.discard(session)
            if not open_calls:
                self._drained.set()

    def _admission(self, session: ControlSession, peer: str) -> StreamError | None:
        """Why a new call is refused before anything of it is read, or None."""
        if self._stopping or not self._health.serving:
            self._metrics.refused("stopping" if self._stopping else "not_serving")
            return PeerUnavailable(STOPPING if self._stopping else NOT_SERVING)
        over = self._waiting.enter(session, peer)
        if over is not None:
            why = TOO_MANY_WAITING if over == "server" else TOO_MANY_WAITING_FROM_PEER
            allowed, held = self._over_cap_log.allow()
            if allowed:
                more = f" ({held} more since the last line)" if held else ""
                logger.warning("refused %s%s: %s", session, more, why)
            self._metrics.refused("limit")
            return StreamError(why, code="RESOURCE_EXHAUSTED")
        return None

    async def _authorized(self, session: ControlSession) -> StreamError | None:
        """Run the `authorize` hook: the error its refusal ends the call with, or None."""
        if self._authorize is None:
            return None
        try:
            await self._authorize(session)
        except StreamError as exc:
            logger.warning("refused %s: %s", session, exc)
            return exc
        except Exception:
            # Its text is for the operator, not for a client no one has vouched for.
            logger.exception("authorizing %s failed", session)
            return StreamError(FAILED_TO_SERVE, code="INTERNAL")
        return None

    @staticmethod
    def _outcome(
        session: ControlSession, error: BaseException | None, ending: StreamError | None
    ) -> StreamError | None:
        """How the call ends: None for OK, else the error whose status it ends with.

        `error` is what `handle` raised (None: it returned); `ending`, what
        ended the call, if something did, wins.
        """
        if ending is not None:
            return ending
        if error is None:
            logger.info("call with %s ended: OK", session)
            return None
        if isinstance(error, StreamError):
            logger.info("call with %s ended: %s", session, error)
            return error
        logger.error("handling %s failed", session, exc_info=error)
        return StreamError(FAILED_TO_SERVE, code="INTERNAL")

    def _registration_late(self, session: ControlSession) -> None:
        """The registration deadline has passed: end the call unless the agent registered.

        A registration whose bytes arrived in time is decoded first (it may
        wait for its turn at the decode slot).
        """
        if not session.registered.is_set():
            session.registration_due(self._unregistered)

    def _unregistered(self, session: ControlSession) -> None:
        if session.registered.is_set():
            return
        timeout = self._registration_timeout
        logger.warning("%s sent no registration within %g s", session, timeout)
        self._metrics.refused("timeout")
        session.end(RegistrationTimeout(f"no registration within {timeout:g} s"))


#: Seconds a send being written (one with a timeout) may still take once its
#: call has been ended, by a stop or a refusal: an agent that takes messages
#: takes one in far less.
SEND_AFTER_END: Final = 1.0


class _Handling:
    """`handle` run in the call's own task, and its cancellation when something ends the call."""

    __slots__ = ("_cancelled", "_stopper", "_task", "ending", "running")

    def __init__(self, task: asyncio.Task[object] | None) -> None:
        self._task = task
        self.running = False
        #: What ended the call, once something has: its status wins.
        self.ending: StreamError | None = None
        # Whether the cancellation came from here (not from grpc: the agent lost).
        self._cancelled = False
        self._stopper: asyncio.Task[None] | None = None

    async def run(
        self, handle: Callable[[ControlSession], Awaitable[None]], session: ControlSession
    ) -> BaseException | None:
        """Run `handle(session)` unless the call has ended; what it raised, or None."""
        if self.ending is not None:
            return None
        self.running = True
        try:
            await handle(session)
        except asyncio.CancelledError:
            if not self._cancelled or self._task is None or not uncancel(self._task):
                raise  # grpc's: the agent is gone
        except Exception as exc:  # the status says so; the caller logs it
            return exc
        finally:
            self.running = False
        return None

    def end(self, session: ControlSession, error: StreamError) -> None:
        """End the call with `error` (the first end wins): cancel `handle`, never mid-send.

        A send being written gets at most `SEND_AFTER_END` seconds more: an
        agent that reads nothing must not hold the end of its call.
        """
        if self.ending is not None:
            return
        self.ending = error
        if self.running and self._stopper is None:
            self._stopper = asyncio.get_running_loop().create_task(self._stop(session))

    async def _stop(self, session: ControlSession) -> None:
        async with session.sends_held(SEND_AFTER_END):
            if self.running and self._task is not None:
                self._cancelled = True
                self._task.cancel()


def _set_status(context: grpc.aio.ServicerContext[bytes, bytes], error: StreamError | None) -> None:
    if error is None:
        return
    context.set_code(grpc.StatusCode[error.code.name])
    context.set_details(error.details)
    if isinstance(error, RegistrationTimeout):
        # So that the agent tells this deadline from any other DEADLINE_EXCEEDED.
        context.set_trailing_metadata(((REGISTRATION_DEADLINE, "1"),))


# The longest the end of an agent's messages waits to be explained: the
# bound of the second read that tells a half-close from a cancellation (see
# `_ServerCall.read`), and all of the wait where that cannot be told.
HALF_CLOSE_SETTLE: Final = 1.0

LOST: Final = "the agent's call was cancelled, or its connection lost"
_EOF: Final = grpc.aio.EOF


class _ServerCall:
    """The server's call, as a session sees it: bytes in, bytes out.

    Made in the call's own task (grpc.aio's, which runs `handle`): grpc
    cancels that task when the agent cancels its call or its connection is lost.
    """

    # One per call, alive as long as the call: no dict of its own for the collector to walk.
    __slots__ = ("_context", "_settling", "_task", "lost")

    def __init__(
        self,
        context: grpc.aio.ServicerContext[bytes, bytes],
        task: asyncio.Task[Any] | None = None,
    ) -> None:
        self._context = context
        # The call's task, which grpc cancels (None: no call's task to watch).
        self._task = task
        #: Whether grpc cancelled the call: the agent cancelled it, or its connection was lost.
        self.lost = False
        # The wait of `read` for an end to be explained, while there is one.
        self._settling: asyncio.Future[None] | None = None

    def mark_lost(self) -> None:
        """Say that grpc cancelled the call (`Server._serve` learns it first)."""
        self.lost = True
        if self._settling is not None and not self._settling.done():
            self._settling.set_result(None)

    def _cancelled(self) -> bool:
        """Whether grpc has cancelled the call, though its task may not have seen it yet."""
        return self.lost or self._context.cancelled() or cancelling(self._task)

    async def read(self) -> bytes | None:
        data = await self._context.read()
        if data is _EOF:
            # grpc.aio reads a cancelled call and a half-closed one alike as
            # EOF, and makes the cancellation known only later, by cancelling
            # the call's task (when C-core's "close on server" completes).
            if not self._cancelled():
                await self._explained()
            if self._cancelled():
                raise PeerUnavailable(LOST)
            return None
        return data  # type: ignore[no-any-return]

    async def _explained(self) -> None:
        """Wait until an EOF is explained: a second read, answered after any cancellation.

        C-core answers a read after the end of a half-closed call at once,
        and one of a cancelled call only after the call's "close on server"
        has completed, which is what cancels the call's task: once the
        second read is answered, the task's pending cancellation
        (`Task.cancelling`) says which it was. On Python 3.10, which cannot
        see a pending cancellation, the end waits `HALF_CLOSE_SETTLE`
        seconds to be explained instead. Either way, `mark_lost` ends the
        wait early, and `HALF_CLOSE_SETTLE` bounds it.
        """
        loop = asyncio.get_running_loop()
        settling = self._settling = loop.create_future()
        timer = loop.call_later(HALF_CLOSE_SETTLE, _set_done, settling)
        second: asyncio.Future[Any] | None = None
        if COUNTED:
            second = asyncio.ensure_future(self._context.read())
            second.add_done_callback(lambda _: _set_done(settling))
        try:
            await settling
        finally:
            timer.cancel()
            self._settling = None
            if second is not None and not second.done():
                second.cancel()
            elif second is not None and not second.cancelled():
                # Whatever it says (EOF, or the error of a call that is over),
                # the task's cancellation tells: retrieved, not raised.
                second.exception()
        # The cancellation rides on the same completion as the read's answer:
        # let the task that grpc resumes with it run first.
        await asyncio.sleep(0)

    async def write(self, data: bytes) -> None:
        try:
            await self._context.write(data)
        except grpc.aio.BaseError as exc:
            # Only what says the agent is gone: its call cancelled or its
            # connection lost (C-core's batch failed), or the call ended
            # UNAVAILABLE (the control plane stopping). Anything else is not
            # the peer's doing and propagates as itself.
            gone = self._context.cancelled() or isinstance(exc, grpc.aio.InternalError)
            if gone or self._context.code() == grpc.StatusCode.UNAVAILABLE:
                raise PeerUnavailable(f"the call is over: {type(exc).__name__}") from exc
            raise


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def server_options(
    *,
    limits: ServerLimits = ServerLimits(),  # noqa: B008 (frozen)
    keepalive: Keepalive | None = Keepalive(),
    max_message_size: int = DEFAULT_MAX_SIZE,
    compression: str | None = None,
    options: Iterable[GrpcOption] = (),
) -> list[GrpcOption]:
    """The grpc server options of a control plane: pass them to `grpc.aio.server(options=...)`.

    What belongs to the server, not to the stream: message sizes, keepalive,
    the bounds of `ServerLimits` (call window, calls per connection,
    connection idle and age, compressed input), and compression. Each option
    appears once; where `options` names one of them, its value wins.

    Args:
        limits: the resource bounds.
        keepalive: HTTP/2 keepalive; None turns it off.
        max_message_size: the largest message accepted or sent, in bytes; a
            larger one is refused by grpc before it is buffered
            (RESOURCE_EXHAUSTED).
        compression: "gzip" or "deflate": compress what the server sends
            toward agents that accept it; None sends uncompressed.
        options: the service's own grpc options, which override these.

    Raises:
        ValueError: an unknown compression, or compression with
            `limits.accept_compressed` off (grpc enables both at once).
    """
    if compression is not None and not limits.accept_compressed:
        raise ValueError("compression needs limits.accept_compressed: grpc enables both at once")
    chosen: dict[str, Any] = {
        # Refused before it is buffered, by C-core, with RESOURCE_EXHAUSTED.
        "grpc.max_receive_message_length": max_message_size,
        "grpc.max_send_message_length": max_message_size,
        # One port per control plane, unless the service asks for more.
        "grpc.so_reuseport": 0,
    }
    chosen.update(keepalive.server_options() if keepalive is not None else ())
    chosen.update(limits.server_options())
    chosen.update(negotiated_compression(compression))
    # grpc reads the first of two values of one option: each name once, the caller's last.
    chosen.update(options)
    return list(chosen.items())


def add_to_server(
    plane: ControlPlane,
    server: grpc.aio.Server,
    *,
    node_identity: bool | Callable[[PeerCertificate], Collection[str]] = False,
    authorize: Callable[[ControlSession], Awaitable[None]] | None = None,
    registration_timeout: float | None = 30.0,
    on_bad_message: BadMessagePolicy = "skip",
    max_message_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
    limits: ServerLimits = ServerLimits(),  # noqa: B008 (frozen)
    health: bool = True,
    serving: bool = True,
    reflection: bool = False,
    meter_provider: Any = None,
) -> AgentService:
    """Serve `plane` on a grpc.aio server the application made, beside its own services.

    As grpc's generated `add_XServicer_to_server`: the application owns the
    server (its options, interceptors, ports, credentials and other
    services); this adds the stream's handler to it, and the health
    service's when asked. Call it before `server.start()`, and stop the
    stream before the server::

        server = grpc.aio.server(interceptors=[...], options=server_options())
        service = add_to_server(MyPlane(), server)
        server.add_insecure_port("0.0.0.0:7070")  # or add_secure_port(..., tls.credentials())
        await server.start()
        ...
        await service.stop(grace=10)
        await server.stop(grace=10)

    The server's options are the application's: `server_options()` gives
    those that the stream's bounds need (message size, keepalive,
    `ServerLimits`), with the application's own on top.

    Args:
        plane: the control plane.
        server: the application's grpc.aio server, not yet started.
        node_identity: bind each registration's node id to the agent's client
            certificate (the port must ask for one: mutual TLS): True checks
            it against the certificate's DNS and URI SANs, else its CN
            (`node_ids_of`); a function of the `PeerCertificate` replaces
            that. A mismatch, or a call with no certificate, ends the call
            with PERMISSION_DENIED before `handle` sees the registration.
        authorize: called with each new session before `handle` (its
            `metadata` holds, say, a bearer token; its `certificate` the
            client's); raise `PermissionDenied` to refuse the call. Any
            other exception is logged and ends the call with INTERNAL "the
            control plane failed to serve", nothing of it told to the client.
        registration_timeout: seconds an agent has to register before its
            call ends with DEADLINE_EXCEEDED; None waits forever.
        on_bad_message: "skip" (the default) logs a message that does not
            decode in one line and goes on; "end" ends the call with
            INVALID_ARGUMENT and the `DecodeError`'s text.
        max_message_size: the largest message the sessions decode or send,
            in bytes (the server's own limit is `server_options`').
        max_items: the element limit of `decode`, applied to every message.
        limits: the resource bounds the stream keeps itself (unregistered
            calls); the rest are server options (`server_options`).
        health: serve the standard health service, `grpc.health.v1.Health`,
            for "" and "llmgw.v1.AgentService": SERVING while the stream
            serves, NOT_SERVING once a stop has begun or
            `AgentService.set_serving(False)`. False if the application
            serves its own.
        serving: False starts as a standby: NOT_SERVING, refusing agent
            streams until `AgentService.set_serving(True)`.
        reflection: serve gRPC server reflection of the agent stream and the
            health service (for grpcurl); needs the `reflection` extra.
        meter_provider: the OpenTelemetry `MeterProvider` of the stream's
            metrics (see the operating guide); None takes OpenTelemetry's
            global one when its API is installed, False records nothing.

    Raises:
        ValueError: reflection without the grpcio-reflection package.
    """
    identity: Callable[[PeerCertificate], Collection[str]] | None
    if node_identity is True:
        identity = node_ids_of
    elif node_identity is False:
        identity = None
    else:
        identity = node_identity
    service = AgentService(
        plane,
        node_identity=identity,
        authorize=authorize,
        registration_timeout=registration_timeout,
        on_bad_message=on_bad_message,
        max_message_size=max_message_size,
        max_items=max_items,
        metrics=metrics_for(meter_provider),
        limits=limits,
        serving=serving,
    )
    server.add_generic_rpc_handlers((service._handler(),))
    if health:
        service._health.add_to(server)
    if reflection:
        serve_reflection(
            server,
            (SERVICE, HEALTH_SERVICE) if health else (SERVICE,),
            calls=service._side_calls,
            lifetime=limits.side_call_lifetime,
        )
    return service


class Server:
    """A running control-plane server of its own, from `start_server`.

    Attributes:
        port: the port it listens on.
        service: the stream on it (`AgentService`).
    """

    def __init__(self, service: AgentService, server: grpc.aio.Server, port: int) -> None:
        self.service = service
        self.port = port
        self._server = server
        self._stopping = False

    def __repr__(self) -> str:
        return f"<Server port={self.port} calls={self.service.calls}>"

    @property
    def plane(self) -> ControlPlane:
        """The control plane it serves."""
        return self.service.plane

    async def set_serving(self, serving: bool) -> None:
        """Say whether this control plane is to be served: `AgentService.set_serving`."""
        await self.service.set_serving(serving)

    async def stop(self, grace: float | None = 10.0) -> None:
        """Stop serving: gracefully, so that agents lose nothing that was sent.

        The stream stops first (`AgentService.stop`: NOT_SERVING, new calls
        refused, each open call ended with UNAVAILABLE "the control plane is
        stopping" after what its `handle` sent), then the server, which
        sends those ends before its sockets close; `grace` bounds each.
        Stopping twice does nothing more.

        Args:
            grace: seconds to wait for open calls to end; None or 0 cuts
                them at once.
        """
        if self._stopping:
            # Stopping twice (an explicit stop, then `async with`'s) does nothing more.
            await self._server.wait_for_termination()
            return
        self._stopping = True
        await self.service.stop(grace)
        await self._server.stop(grace)

    async def wait_closed(self) -> None:
        """Wait until the server has stopped."""
        await self._server.wait_for_termination()

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


async def start_server(
    plane: ControlPlane,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    tls: ServerTLS | None = None,
    node_identity: bool | Callable[[PeerCertificate], Collection[str]] = False,
    authorize: Callable[[ControlSession], Awaitable[None]] | None = None,
    registration_timeout: float | None = 30.0,
    on_bad_message: BadMessagePolicy = "skip",
    compression: str | None = None,
    max_message_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
    keepalive: Keepalive | None = Keepalive(),
    limits: ServerLimits = ServerLimits(),  # noqa: B008 (frozen)
    options: Sequence[GrpcOption] | None = None,
    health: bool = True,
    serving: bool = True,
    reflection: bool = False,
    meter_provider: Any = None,
) -> Server:
    """Serve `plane` on `host`:`port` on a grpc.aio server of its own; it says which port it got.

    The convenience over `add_to_server` for a control plane that serves
    nothing else: it makes the server with `server_options`, adds the
    stream, listens and starts. A service with its own server, interceptors
    or other services uses `add_to_server`.

    Args:
        plane: the control plane.
        host: the address to listen on.
        port: the port; 0 picks a free one.
        tls: the server's certificate and key (and, for mutual TLS, the CA
            of the agents' certificates); None serves plain text.
        node_identity: as `add_to_server`'s; needs mutual TLS.
        authorize: as `add_to_server`'s.
        registration_timeout: as `add_to_server`'s.
        on_bad_message: as `add_to_server`'s.
        compression: as `server_options`'.
        max_message_size: the largest message accepted or sent, in bytes;
            a larger one is refused before it is buffered (RESOURCE_EXHAUSTED).
        max_items: the element limit of `decode`, applied to every message.
        keepalive: HTTP/2 keepalive; None turns it off.
        limits: the resource bounds (`ServerLimits`): bytes buffered per
            call, calls per connection, unregistered calls per server,
            connection idle time and age, compressed input.
        options: more grpc server options, as (name, value) pairs; where
            they name an option the other arguments set, their value wins
            (`("grpc.so_reuseport", 1)` lets several processes share a port).
        health: as `add_to_server`'s.
        serving: as `add_to_server`'s.
        reflection: as `add_to_server`'s.
        meter_provider: as `add_to_server`'s.

    Stop the server with `await server.stop(grace)`.

    Raises:
        OSError: the address cannot be listened on (the port is taken, say).
        ValueError: node identity without mutual TLS; compression with
            compressed input refused; reflection without the
            grpcio-reflection package.
    """
    if node_identity is not False and (tls is None or not tls.mutual):
        raise ValueError("node identity needs mutual TLS: give tls=ServerTLS(..., client_ca=...)")
    grpc_server = grpc.aio.server(
        options=server_options(
            limits=limits,
            keepalive=keepalive,
            max_message_size=max_message_size,
            compression=compression,
            options=options or (),
        )
    )
    service = add_to_server(
        plane,
        grpc_server,
        node_identity=node_identity,
        authorize=authorize,
        registration_timeout=registration_timeout,
        on_bad_message=on_bad_message,
        max_message_size=max_message_size,
        max_items=max_items,
        limits=limits,
        health=health,
        serving=serving,
        reflection=reflection,
        meter_provider=meter_provider,
    )
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls is None:
            bound = grpc_server.add_insecure_port(address)
        else:
            bound = grpc_server.add_secure_port(address, tls.credentials())
    except RuntimeError as exc:
        raise OSError(errno.EADDRINUSE, f"cannot listen on {address}: {exc}") from None
    if bound == 0:
        raise OSError(errno.EADDRINUSE, f"cannot listen on {address}")
    await grpc_server.start()
    return Server(service, grpc_server, bound)
