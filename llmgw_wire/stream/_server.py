"""The control plane's end on grpc.aio: `ControlPlane`, `start_server` and the running `Server`."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import errno
import logging
from typing import TYPE_CHECKING, Any, Final

import grpc
import grpc.aio
from attrs import frozen

from llmgw_wire.codec.limits import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.errors import DecodeError, PeerUnavailable, RegistrationTimeout, StreamError
from llmgw_wire.stream._session import BadMessagePolicy, ControlSession
from llmgw_wire.stream._tls import PeerCertificate, ServerTLS, node_ids_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

__all__ = ["CONNECT_ROUTE", "ControlPlane", "Keepalive", "Server", "start_server"]

#: The trailer with which a call ends for the registration deadline (see `_set_status`).
REGISTRATION_DEADLINE: Final = "llmgw-registration-deadline"

logger = logging.getLogger("llmgw_wire.stream")

_SERVICE: Final = "llmgw.v1.AgentService"
_METHOD: Final = "Connect"
#: The gRPC method path of `AgentService.Connect`.
CONNECT_ROUTE: Final = f"/{_SERVICE}/{_METHOD}"

# What an agent sees when the control plane stops with its call open.
STOPPING: Final = "the control plane is stopping"


@frozen
class Keepalive:
    """HTTP/2 keepalive: pings that find a dead connection without waiting for TCP.

    Attributes:
        time: seconds of silence before a ping.
        timeout: seconds to wait for the ping's answer before the connection
            counts as lost.
        permit_without_calls: ping even with no call open.
    """

    time: float = 30.0
    timeout: float = 10.0
    permit_without_calls: bool = True

    def client_options(self) -> list[tuple[str, Any]]:
        """The channel options of an agent."""
        return [
            ("grpc.keepalive_time_ms", int(self.time * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.timeout * 1000)),
            ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
            ("grpc.http2.max_pings_without_data", 0),
        ]

    def server_options(self) -> list[tuple[str, Any]]:
        """The server options of a control plane: its own pings, and which pings it allows."""
        return [
            ("grpc.keepalive_time_ms", int(self.time * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.timeout * 1000)),
            ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
            ("grpc.http2.max_pings_without_data", 0),
            # Agents ping as often as this keepalive: allow it, or the server
            # answers them with GOAWAY "too many pings".
            ("grpc.http2.min_ping_interval_without_data_ms", int(self.time * 1000 / 2)),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", int(self.time * 1000 / 2)),
        ]


_COMPRESSION = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate, None: None}


def compression_of(name: str | None) -> grpc.Compression | None:
    """The grpc compression for a name: "gzip", "deflate" or None."""
    if name not in _COMPRESSION:
        raise ValueError(f"Expected 'gzip', 'deflate' or None, got {name!r}")
    return _COMPRESSION[name]


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
    ) -> None:
        self.plane = plane
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

    def __repr__(self) -> str:
        return f"<Server port={self.port} sessions={len(self._enders)}>"

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic grpc handler of `AgentService.Connect` (raw bytes both ways)."""
        method = grpc.stream_stream_rpc_method_handler(self._serve)
        return grpc.method_handlers_generic_handler(_SERVICE, {_METHOD: method})

    async def stop(self, grace: float | None = 10.0) -> None:
        """Stop serving: gracefully, so that agents lose nothing that was sent.

        New calls are refused; every open call ends, after everything its
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
        self, context: grpc.aio.ServicerContext[Any, Any], end: Callable[[StreamError], None]
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
            _ServerCall(context),
            _peer_address(context.peer()),
            metadata=metadata,
            check_node_id=self._check_node_id(certificate) if self._node_identity else None,
            end=end,
            on_bad_message=self._on_bad_message,
            max_message_size=self._max_message_size,
            max_items=self._max_items,
        )
        session.certificate = certificate
        return session

    async def _serve(self, _requests: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        loop = asyncio.get_running_loop()
        ending: asyncio.Future[StreamError] = loop.create_future()

        def end(error: StreamError) -> None:
            if not ending.done():
                ending.set_result(error)

        session = self._session(context, end)
        if self._stopping:
            _set_status(context, PeerUnavailable(STOPPING))
            return
        self._enders.add(end)
        logger.info("%s connected", session)
        handler: asyncio.Task[None] | None = None
        timer: asyncio.Task[None] | None = None
        try:
            if self._authorize is not None:
                try:
                    await self._authorize(session)
                except StreamError as exc:
                    logger.warning("refused %s: %s", session, exc)
                    _set_status(context, exc)
                    return
            session.start_reading()
            if self._registration_timeout is not None:
                timer = loop.create_task(self._registration_timer(session, end))
            handler = loop.create_task(self.plane.handle(session))
            await asyncio.wait((handler, ending), return_when=asyncio.FIRST_COMPLETED)
            _set_status(context, await self._outcome(session, handler, ending))
        except asyncio.CancelledError:
            # An agent that leaves, or reconnects, cancels its call: no alarm.
            logger.info("stream with %s lost: the call was cancelled", session)
            if handler is not None and not handler.done():
                handler.cancel()
                with contextlib.suppress(BaseException):
                    await handler
            raise
        finally:
            self._enders.discard(end)
            if timer is not None:
                timer.cancel()
            await session._stop_reading()

    @staticmethod
    async def _outcome(
        session: ControlSession, handler: asyncio.Task[None], ending: asyncio.Future[StreamError]
    ) -> StreamError | None:
        """How the call ends: None for OK, else the error whose status it ends with."""
        if not handler.done():
            # Never in the middle of a send: what was sent, arrives whole.
            async with session._send_lock:
                handler.cancel()
            with contextlib.suppress(BaseException):
                await handler
            return ending.result()
        error = handler.exception()
        if error is None:
            logger.info("call with %s ended: OK", session)
            return None
        if isinstance(error, StreamError):
            logger.info("call with %s ended: %s", session, error)
            return error
        if isinstance(error, DecodeError) and ending.done():
            return ending.result()
        logger.error("handling %s failed", session, exc_info=error)
        return StreamError("the control plane failed to serve", code="INTERNAL")

    async def _registration_timer(
        self, session: ControlSession, end: Callable[[StreamError], None]
    ) -> None:
        timeout = self._registration_timeout
        try:
            await asyncio.wait_for(session.registered.wait(), timeout)
        except asyncio.TimeoutError:
            logger.warning("%s sent no registration within %g s", session, timeout)
            end(RegistrationTimeout(f"no registration within {timeout:g} s"))


def _set_status(context: grpc.aio.ServicerContext[Any, Any], error: StreamError | None) -> None:
    if error is None:
        return
    context.set_code(grpc.StatusCode[error.code.name])
    context.set_details(error.details)
    if isinstance(error, RegistrationTimeout):
        # So that the agent tells this deadline from any other DEADLINE_EXCEEDED.
        context.set_trailing_metadata(((REGISTRATION_DEADLINE, "1"),))


class _ServerCall:
    """The server's call, as a session sees it: bytes in, bytes out."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._context = context

    async def read(self) -> bytes | None:
        data = await self._context.read()
        if data is grpc.aio.EOF:
            if self._context.cancelled():
                # Not the agent ending its side: its call, or connection, is gone.
                raise PeerUnavailable("the agent's call was cancelled, or its connection lost")
            return None
        return data  # type: ignore[no-any-return]

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


def server_options(
    max_message_size: int, keepalive: Keepalive | None, extra: list[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """The grpc options of a control plane's server."""
    options: list[tuple[str, Any]] = [
        # Refused before it is buffered, by C-core, with RESOURCE_EXHAUSTED.
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", max_message_size),
        # One port per control plane: a second one on the same port is an error.
        ("grpc.so_reuseport", 0),
    ]
    if keepalive is not None:
        options += keepalive.server_options()
    return options + extra


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
    options: list[tuple[str, Any]] | None = None,
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
            client's); raise `PermissionDenied` to refuse the call.
        registration_timeout: seconds an agent has to register before its
            call ends with DEADLINE_EXCEEDED; None waits forever.
        on_bad_message: "skip" (the default) logs a message that does not
            decode in one line and goes on; "end" ends the call with
            INVALID_ARGUMENT and the `DecodeError`'s text.
        compression: "gzip" compresses what the server sends; a compressed
            message from an agent is always accepted.
        max_message_size: the largest message accepted or sent, in bytes;
            a larger one is refused before it is buffered (RESOURCE_EXHAUSTED).
        max_items: the element limit of `decode`, applied to every message.
        keepalive: HTTP/2 keepalive; None turns it off.
        options: more grpc server options, as (name, value) pairs.

    Stop the server with `await server.stop(grace)`.

    Raises:
        OSError: the address cannot be listened on (the port is taken, say).
        ValueError: node identity without mutual TLS.
    """
    identity: Callable[[PeerCertificate], Collection[str]] | None
    if node_identity is True:
        identity = node_ids_of
    elif node_identity is False:
        identity = None
    else:
        identity = node_identity
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
    )
    grpc_server = grpc.aio.server(
        options=server_options(max_message_size, keepalive, list(options or ())),
        compression=compression_of(compression),
    )
    grpc_server.add_generic_rpc_handlers((server.handler(),))
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
    server._server = grpc_server
    server.port = bound
    return server
