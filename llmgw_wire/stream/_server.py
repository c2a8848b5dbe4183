"""The control plane's end on grpc.aio: `ControlPlane`, `start_server` and the running `Server`."""

from __future__ import annotations

import abc
import asyncio
import errno
import logging
from typing import TYPE_CHECKING, Any, Final

import grpc
import grpc.aio

from llmgw_wire.codec.limits import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.errors import PeerUnavailable, RegistrationTimeout, StreamError
from llmgw_wire.stream._health import HEALTH_SERVICE, Health
from llmgw_wire.stream._limits import ServerLimits
from llmgw_wire.stream._logs import Throttle
from llmgw_wire.stream._metrics import StreamMetrics, metrics_for
from llmgw_wire.stream._protocol import (
    CONNECT_ROUTE,
    FAILED_TO_SERVE,
    METHOD,
    NOT_SERVING,
    REGISTRATION_DEADLINE,
    SERVICE,
    STOPPING,
    TOO_MANY_WAITING,
    Keepalive,
    negotiated_compression,
)
from llmgw_wire.stream._reflection import serve_reflection
from llmgw_wire.stream._session import BadMessagePolicy, ControlSession
from llmgw_wire.stream._tls import PeerCertificate, ServerTLS, node_ids_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

__all__ = ["CONNECT_ROUTE", "ControlPlane", "Keepalive", "Server", "start_server"]

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


def _peer_address(peer: str | None) -> str:
    # grpc says "ipv4:127.0.0.1:5555" or "ipv6:[::1]:5555".
    if not peer:
        return "an unknown address"
    _, _, address = peer.partition(":")
    return address or peer


class Server:
    """A running control-plane server, from `start_server`.

    Attributes:
        port: the port it listens on.
        plane: the control plane it serves.
    """

    def __init__(
        self,
        plane: ControlPlane,
        *,
        tls: ServerTLS | None,
        node_identity: Callable[[PeerCertificate], Collection[str]] | None,
        authorize: Callable[[ControlSession], Awaitable[None]] | None,
        registration_timeout: float | None,
        on_bad_message: BadMessagePolicy,
        max_message_size: int,
        max_items: int,
        metrics: StreamMetrics,
        limits: ServerLimits = ServerLimits(),  # noqa: B008 (frozen)
    ) -> None:
        self.plane = plane
        self._metrics = metrics
        self._limits = limits
        # The sessions that have not registered yet: each leaves as it registers or ends.
        self._waiting: set[ControlSession] = set()
        # Calls over the cap come as fast as a client makes them: a line per interval.
        self._over_cap_log = Throttle()
        self.port = 0
        self._tls = tls
        self._node_identity = node_identity
        self._authorize = authorize
        self._registration_timeout = registration_timeout
        self._on_bad_message = on_bad_message
        self._max_message_size = max_message_size
        self._max_items = max_items
        self._enders: set[Callable[[StreamError], None]] = set()
        self._stopping = False
        self._server: grpc.aio.Server | None = None
        self._health = Health((SERVICE,))

    def __repr__(self) -> str:
        return f"<Server port={self.port} sessions={len(self._enders)}>"

    def handler(self) -> grpc.GenericRpcHandler:
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
        """Stop serving: gracefully, so that agents lose nothing that was sent.

        The health service says NOT_SERVING at once, before anything else;
        new calls are refused; every open call ends, after everything its
        `handle` sent, with status UNAVAILABLE "the control plane is
        stopping" (what an agent takes as "connect again"); the server then
        waits up to `grace` seconds for those ends to reach the agents.

        Args:
            grace: seconds to wait for open calls to end; None or 0 cuts
                them at once.
        """
        if self._server is None or self._stopping:
            # Stopping twice (an explicit stop, then `async with`'s) does nothing more.
            if self._server is not None:
                await self._server.wait_for_termination()
            return
        self._stopping = True
        await self._health.stopping()
        for end in list(self._enders):
            end(PeerUnavailable(STOPPING))
        if grace:
            # Let the sessions' ends reach their agents before the sockets close.
            deadline = asyncio.get_running_loop().time() + grace
            while self._enders and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
        await self._server.stop(grace)

    async def wait_closed(self) -> None:
        """Wait until the server has stopped."""
        if self._server is not None:
            await self._server.wait_for_termination()

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

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
        context: grpc.aio.ServicerContext[Any, Any],
        call: _ServerCall,
        end: Callable[[StreamError], None],
    ) -> ControlSession:
        metadata = {
            key: value
            for key, value in (context.invocation_metadata() or ())
            if isinstance(value, str)
        }
        certificate = (
            PeerCertificate.from_auth_context(context.auth_context()) if self._tls else None
        )
        session = ControlSession(
            call,
            _peer_address(context.peer()),
            metadata=metadata,
            check_node_id=self._check_node_id(certificate) if self._node_identity else None,
            end=end,
            on_bad_message=self._on_bad_message,
            max_message_size=self._max_message_size,
            max_items=self._max_items,
        )
        session.certificate = certificate
        session._metrics = self._metrics
        session._on_registered = self._waiting.discard
        return session

    async def _serve(self, _requests: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        loop = asyncio.get_running_loop()
        ending: asyncio.Future[StreamError] = loop.create_future()
        # `handle` runs in this task, grpc's own for the call: no task of its
        # own. Something that ends the call cancels it here, under the send lock.
        serving = _Handling(asyncio.current_task())

        def end(error: StreamError) -> None:
            if not ending.done():
                ending.set_result(error)
                serving.stop(session)

        call = _ServerCall(context)
        session = self._session(context, call, end)
        refusal = self._admission(session)
        if refusal is not None:
            _set_status(context, refusal)
            return
        self._enders.add(end)
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
                timer = loop.call_later(
                    self._registration_timeout, self._registration_late, session, end
                )
            error = await serving.run(self.plane.handle, session, ending)
            _set_status(context, self._outcome(session, error, ending))
        except asyncio.CancelledError:
            # The agent's call was cancelled, or its connection lost: no alarm.
            call.mark_lost()
            logger.info("stream with %s lost: the call was cancelled", session)
            raise
        finally:
            self._metrics.agents(-1)
            self._waiting.discard(session)
            self._enders.discard(end)
            if timer is not None:
                timer.cancel()
            await session._stop_reading()

    def _admission(self, session: ControlSession) -> StreamError | None:
        """Why a new call is refused before anything of it is read, or None."""
        if self._stopping or not self._health.serving:
            self._metrics.refused("stopping" if self._stopping else "not_serving")
            return PeerUnavailable(STOPPING if self._stopping else NOT_SERVING)
        if not self._room_to_register(session):
            allowed, held = self._over_cap_log.allow()
            if allowed:
                more = f" ({held} more since the last line)" if held else ""
                logger.warning("refused %s%s: %s", session, more, TOO_MANY_WAITING)
            self._metrics.refused("limit")
            return StreamError(TOO_MANY_WAITING, code="RESOURCE_EXHAUSTED")
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

    def _room_to_register(self, session: ControlSession) -> bool:
        """Whether `session` may wait for its registration; if so, it is counted."""
        if len(self._waiting) >= self._limits.max_unregistered_calls:
            return False
        self._waiting.add(session)
        return True

    @staticmethod
    def _outcome(
        session: ControlSession, error: BaseException | None, ending: asyncio.Future[StreamError]
    ) -> StreamError | None:
        """How the call ends: None for OK, else the error whose status it ends with.

        `error` is what `handle` raised (None: it returned); once something
        has ended the call, that wins.
        """
        if ending.done():
            return ending.result()
        if error is None:
            logger.info("call with %s ended: OK", session)
            return None
        if isinstance(error, StreamError):
            logger.info("call with %s ended: %s", session, error)
            return error
        logger.error("handling %s failed", session, exc_info=error)
        return StreamError(FAILED_TO_SERVE, code="INTERNAL")

    def _registration_late(
        self, session: ControlSession, end: Callable[[StreamError], None]
    ) -> None:
        """The registration deadline has passed: end the call unless the agent registered."""
        if session.registered.is_set():
            return
        timeout = self._registration_timeout
        logger.warning("%s sent no registration within %g s", session, timeout)
        self._metrics.refused("timeout")
        end(RegistrationTimeout(f"no registration within {timeout:g} s"))


class _Handling:
    """`handle` run in the call's own task, and its cancellation when something ends the call."""

    __slots__ = ("_cancelled", "_stopper", "_task", "running")

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self._task = task
        self.running = False
        # Whether the cancellation came from here (not from grpc: the agent lost).
        self._cancelled = False
        self._stopper: asyncio.Task[None] | None = None

    async def run(
        self,
        handle: Callable[[ControlSession], Awaitable[None]],
        session: ControlSession,
        ending: asyncio.Future[StreamError],
    ) -> BaseException | None:
        """Run `handle(session)` unless the call has ended; what it raised, or None."""
        if ending.done():
            return None
        self.running = True
        try:
            await handle(session)
        except asyncio.CancelledError:
            if not self._cancelled or not self._uncancel():
                raise  # grpc's: the agent is gone
        except Exception as exc:  # the status says so; the caller logs it
            return exc
        finally:
            self.running = False
        return None

    def _uncancel(self) -> bool:
        """Take back this cancellation; False if another one (grpc's) is pending too."""
        uncancel = getattr(self._task, "uncancel", None)  # Python 3.11+
        return uncancel is None or uncancel() == 0

    def stop(self, session: ControlSession) -> None:
        """Cancel `handle`, never in the middle of a send: what was sent arrives whole."""
        if self.running and self._stopper is None:
            self._stopper = asyncio.get_running_loop().create_task(self._stop(session))

    async def _stop(self, session: ControlSession) -> None:
        async with session._send_lock:
            if self.running and self._task is not None:
                self._cancelled = True
                self._task.cancel()


def _set_status(context: grpc.aio.ServicerContext[Any, Any], error: StreamError | None) -> None:
    if error is None:
        return
    context.set_code(grpc.StatusCode[error.code.name])
    context.set_details(error.details)
    if isinstance(error, RegistrationTimeout):
        # So that the agent tells this deadline from any other DEADLINE_EXCEEDED.
        context.set_trailing_metadata(((REGISTRATION_DEADLINE, "1"),))


# How long the end of an agent's messages must stay unexplained by a
# cancellation before it counts as the agent's half-close (see `_ServerCall.read`).
HALF_CLOSE_SETTLE: Final = 1.0

LOST: Final = "the agent's call was cancelled, or its connection lost"


class _ServerCall:
    """The server's call, as a session sees it: bytes in, bytes out."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._context = context
        #: Whether grpc cancelled the call: the agent cancelled it, or its connection was lost.
        self.lost = False
        # The wait of `read` for an end to be explained, while there is one.
        self._settling: asyncio.Future[None] | None = None

    def mark_lost(self) -> None:
        """Say that grpc cancelled the call (`Server._serve` learns it first)."""
        self.lost = True
        if self._settling is not None and not self._settling.done():
            self._settling.set_result(None)

    async def read(self) -> bytes | None:
        data = await self._context.read()
        if data is grpc.aio.EOF:
            # grpc.aio reads a cancelled call and a half-closed one alike as
            # EOF, and makes the cancellation known only later, by cancelling
            # the call's task (`Server._serve` then calls `mark_lost`); that
            # can come many loop turns after the EOF. The end counts as the
            # agent's half-close only once it has stayed unexplained for a while.
            if not self.lost:
                await self._settle()
            if self.lost or self._context.cancelled():
                raise PeerUnavailable(LOST)
            return None
        return data  # type: ignore[no-any-return]

    async def _settle(self) -> None:
        """Wait `HALF_CLOSE_SETTLE` seconds, or until the call is lost (a timer, no task)."""
        loop = asyncio.get_running_loop()
        settling = self._settling = loop.create_future()
        timer = loop.call_later(HALF_CLOSE_SETTLE, _set_done, settling)
        try:
            await settling
        finally:
            timer.cancel()
            self._settling = None

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
    max_message_size: int,
    keepalive: Keepalive | None,
    extra: list[tuple[str, Any]],
    limits: ServerLimits = ServerLimits(),  # noqa: B008 (frozen)
) -> list[tuple[str, Any]]:
    """The grpc options of a control plane's server (`extra` last: it wins)."""
    options: list[tuple[str, Any]] = [
        # Refused before it is buffered, by C-core, with RESOURCE_EXHAUSTED.
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", max_message_size),
        # One port per control plane: a second one on the same port is an error.
        ("grpc.so_reuseport", 0),
    ]
    if keepalive is not None:
        options += keepalive.server_options()
    return options + limits.server_options() + extra


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
    options: list[tuple[str, Any]] | None = None,
    health: bool = True,
    serving: bool = True,
    reflection: bool = False,
    meter_provider: Any = None,
) -> Server:
    """Serve `plane` on `host`:`port` over grpc.aio; the server says which port it got.

    Args:
        plane: the control plane.
        host: the address to listen on.
        port: the port; 0 picks a free one.
        tls: the server's certificate and key (and, for mutual TLS, the CA
            of the agents' certificates); None serves plain text.
        node_identity: bind each registration's node id to the agent's client
            certificate: True checks it against the certificate's DNS and URI
            SANs, else its CN (`node_ids_of`); a function of the
            `PeerCertificate` replaces that. A mismatch ends the call with
            PERMISSION_DENIED before `handle` sees the registration. Needs
            mutual TLS.
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
        compression: "gzip" compresses what the server sends to agents whose
            `grpc-accept-encoding` lists gzip (deflate for those that list
            only deflate; nothing for the rest); "deflate" prefers deflate.
            A compressed message from an agent is accepted.
        max_message_size: the largest message accepted or sent, in bytes;
            a larger one is refused before it is buffered (RESOURCE_EXHAUSTED).
        max_items: the element limit of `decode`, applied to every message.
        keepalive: HTTP/2 keepalive; None turns it off.
        limits: the resource bounds (`ServerLimits`): bytes buffered per
            call, calls per connection, unregistered calls per server,
            connection idle time and age, compressed input.
        options: more grpc server options, as (name, value) pairs; they
            override the ones the other arguments set.
        health: serve the standard health service, `grpc.health.v1.Health`,
            for "" and "llmgw.v1.AgentService": SERVING while it serves,
            NOT_SERVING once a stop has begun or `Server.set_serving(False)`.
        serving: False starts as a standby: NOT_SERVING, refusing agent
            streams until `Server.set_serving(True)`.
        reflection: serve gRPC server reflection of the agent stream and the
            health service (for grpcurl); needs the `reflection` extra.
        meter_provider: the OpenTelemetry `MeterProvider` of the stream's
            metrics (see the operating guide); None takes OpenTelemetry's
            global one when its API is installed, False records nothing.

    Stop the server with `await server.stop(grace)`.

    Raises:
        OSError: the address cannot be listened on (the port is taken, say).
        ValueError: node identity without mutual TLS; compression with
            compressed input refused; reflection without the
            grpcio-reflection package.
    """
    identity: Callable[[PeerCertificate], Collection[str]] | None
    if node_identity is True:
        identity = node_ids_of
    elif node_identity is False:
        identity = None
    else:
        identity = node_identity
    if compression is not None and not limits.accept_compressed:
        raise ValueError("compression needs limits.accept_compressed: grpc enables both at once")
    if identity is not None and (tls is None or not tls.mutual):
        raise ValueError("node identity needs mutual TLS: give tls=ServerTLS(..., client_ca=...)")
    server = Server(
        plane,
        tls=tls,
        node_identity=identity,
        authorize=authorize,
        registration_timeout=registration_timeout,
        on_bad_message=on_bad_message,
        max_message_size=max_message_size,
        max_items=max_items,
        metrics=metrics_for(meter_provider),
        limits=limits,
    )
    extra = negotiated_compression(compression) + list(options or ())
    grpc_server = grpc.aio.server(
        options=server_options(max_message_size, keepalive, extra, limits),
    )
    grpc_server.add_generic_rpc_handlers((server.handler(),))
    if health:
        server._health.add_to(grpc_server)
    if reflection:
        serve_reflection(grpc_server, (SERVICE, HEALTH_SERVICE) if health else (SERVICE,))
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
    await server._health.set_serving(serving)
    await grpc_server.start()
    server._server = grpc_server
    server.port = bound
    return server
