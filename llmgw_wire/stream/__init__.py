"""Both ends of the agent stream, `AgentService.Connect`, in domain values.

An agent sends `Registration`, `ShardReport` and `Heartbeat` values; the
control plane sends `ShardCommand`, `StopCommand` and `Ack` values. This module
puts each value in its envelope member (`AgentMessage`, `ControlMessage`),
takes it out again on the other side, and runs the stream over grpclib:

* the agent opens the stream with `connect(channel)` and gets an
  `AgentSession`;
* the control plane subclasses `ControlPlane`, whose `handle(session)` runs
  once per connected agent with a `ControlSession`, and serves it with
  grpclib (`start_server` binds it and says which port it got).

Both sessions have `send(value)`, `recv(timeout=...)` and `async for value in
session`. A receive timeout leaves the session usable: messages are read by a
task of the session's own, never cut in half.

The envelopes' bytes are read and written by `WireCodec`
(`llmgw_wire.stream.grpclib_codec`: upb and the compiled mapping, the path of `encode`
and `decode`) wherever the stream's grpclib end has it: `start_server` gives
it to its server, and an agent gives it to its channel. An end with another
codec, such as grpclib's default, gets betterproto2 envelopes from grpclib,
and the session puts values in them and takes them out through the library's
converter instead, much more slowly; the bytes are the same, so either end
may use either codec.

An envelope with no member this version knows, which is what a newer peer's
new kind of message looks like, is skipped and logged on the
`llmgw_wire.stream` logger (a warning the first time a session sees a member
number, debug after that); it never ends the stream. Nothing here logs a
value's fields, so secrets such as `ShardSpec.api_key` stay out of the logs.

An agent, in full::

    async with grpclib.client.Channel("10.0.0.1", 7070, codec=WireCodec()) as channel:
        async with connect(channel) as session:
            await session.send(registration)
            async for command in session:  # ShardCommand, StopCommand or Ack
                ...
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import socket
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar

import betterproto2
import grpclib.client
import grpclib.const
import grpclib.server
from grpclib.exceptions import GRPCError, StreamTerminatedError

from llmgw_wire.codec import converter
from llmgw_wire.domain import Ack, Heartbeat, Registration, ShardCommand, ShardReport, StopCommand
from llmgw_wire.errors import DecodeError
from llmgw_wire.stream.grpclib_codec import ENVELOPES, UnknownMember, WireCodec
from llmgw_wire.v1 import AgentMessage, AgentServiceBase, ControlMessage

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from grpclib.metadata import _MetadataLike
    from grpclib.protocol import Peer

__all__ = [
    "CONNECT_ROUTE",
    "AgentSession",
    "ControlPlane",
    "ControlSession",
    "FromAgent",
    "FromControl",
    "agent_message",
    "connect",
    "control_message",
    "start_server",
    "value_from_agent_message",
    "value_from_control_message",
]

logger = logging.getLogger(__name__)

FromAgent: TypeAlias = Registration | ShardReport | Heartbeat
"""What an agent sends on the stream."""

FromControl: TypeAlias = ShardCommand | StopCommand | Ack
"""What the control plane sends on the stream."""

CONNECT_ROUTE: Final[str] = next(iter(AgentServiceBase().__mapping__()))
"""The gRPC method path of `AgentService.Connect`, as the generated service has it."""

_ONEOF = "msg"
# How many received values a session holds before it stops reading (and
# HTTP/2 flow control makes the peer wait).
_READ_AHEAD = 8

# Seconds a closing control plane spends telling a connected agent so.
_GOODBYE_TIMEOUT = 1.0

E = TypeVar("E", AgentMessage, ControlMessage)
V = TypeVar("V")
S = TypeVar("S")
R = TypeVar("R")


class Skipped:
    """Why an envelope carried no value this version can hand over."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class EnvelopeType(Generic[E, V]):
    """One envelope message: which domain value travels in which member.

    This is the only place that touches the envelopes, whichever codec the
    stream has: `WireCodec` fills and opens them itself, and gives values (or
    an `UnknownMember`); any other codec gives betterproto2 envelopes, which
    this class fills and opens through the converter.
    """

    def __init__(self, wire: type[E]) -> None:
        self.wire: type[E] = wire
        self.name = f"llmgw.v1.{wire.__name__}"
        self.domains: dict[str, type[Any]] = dict(ENVELOPES[wire])
        self.members = {domain: member for member, domain in self.domains.items()}

    def outgoing(self, value: V, *, wire_codec: bool) -> V | E:
        """What a stream sends for `value`: itself through `WireCodec`, else its envelope."""
        if wire_codec:
            # Refused here rather than by the codec, so that nothing is sent.
            self._member(value)
            return value
        return self.wrap(value)

    def incoming(self, message: object) -> V | Skipped:
        """The value in what a stream's codec gave: a value, an envelope or an unknown member."""
        if isinstance(message, self.wire):
            return self.open(message)
        if isinstance(message, UnknownMember):
            return Skipped(_no_known_member(message.fields))
        return message  # type: ignore[return-value]

    def _member(self, value: V) -> str:
        member = self.members.get(type(value))
        if member is None:
            carried = ", ".join(domain.__name__ for domain in self.members)
            raise TypeError(f"{self.wire.__name__} carries {carried}, not {type(value).__name__}")
        return member

    def wrap(self, value: V) -> E:
        member = self._member(value)
        envelope: E = self.wire()
        # A fresh envelope and exactly one member: two set would both be encoded.
        setattr(envelope, member, converter.unstructure(value))
        return envelope

    def open(self, envelope: E) -> V | Skipped:
        try:
            chosen: tuple[str, Any] = betterproto2.which_one_of(envelope, _ONEOF)
        except RuntimeError:
            both = [name for name in self.domains if getattr(envelope, name) is not None]
            return Skipped(f"more than one member set ({', '.join(both)})")
        member, wire = chosen
        # An empty member is falsy but present: only None means absent.
        if wire is None:
            unknown = getattr(envelope, "_unknown_fields", b"")
            numbers = sorted({field.number for field in betterproto2.parse_fields(unknown)})
            return Skipped(_no_known_member(numbers))
        return converter.structure(wire, self.domains[member])  # type: ignore[no-any-return]


def _no_known_member(numbers: Sequence[int]) -> str:
    what = "fields " + ", ".join(map(str, numbers)) if numbers else "no fields at all"
    return f"no member this version knows ({what})"


AGENT_ENVELOPE: Final = EnvelopeType[AgentMessage, FromAgent](AgentMessage)
CONTROL_ENVELOPE: Final = EnvelopeType[ControlMessage, FromControl](ControlMessage)


def agent_message(value: FromAgent) -> AgentMessage:
    """The `AgentMessage` envelope that carries `value`, with only its member set.

    Raises:
        EncodeError: a value the wire cannot carry, with its path.
        TypeError: `value` is not something an agent sends.
    """
    return AGENT_ENVELOPE.wrap(value)


def control_message(value: FromControl) -> ControlMessage:
    """The `ControlMessage` envelope that carries `value`, with only its member set.

    Raises:
        EncodeError: a value the wire cannot carry, with its path.
        TypeError: `value` is not something the control plane sends.
    """
    return CONTROL_ENVELOPE.wrap(value)


def value_from_agent_message(envelope: AgentMessage) -> FromAgent | None:
    """The domain value an `AgentMessage` carries.

    None, with a warning on the `llmgw_wire.stream` logger, when no member this
    version knows is set (a newer agent's message) or when more than one is.

    Raises:
        DecodeError: the member does not make a valid domain value.
    """
    return _open_logged(AGENT_ENVELOPE, envelope)


def value_from_control_message(envelope: ControlMessage) -> FromControl | None:
    """The domain value a `ControlMessage` carries.

    None, with a warning on the `llmgw_wire.stream` logger, when no member this
    version knows is set (a newer control plane's message) or when more than
    one is.

    Raises:
        DecodeError: the member does not make a valid domain value.
    """
    return _open_logged(CONTROL_ENVELOPE, envelope)


def _open_logged(envelope_type: EnvelopeType[E, V], envelope: E) -> V | None:
    value = envelope_type.open(envelope)
    if isinstance(value, Skipped):
        logger.warning("skipped a %s: %s", envelope_type.name, value.reason)
        return None
    return value


def _address(peer: Peer | None) -> str:
    address = peer.addr() if peer is not None else None
    return f"{address[0]}:{address[1]}" if address else "an unknown address"


def _describe(error: BaseException) -> str:
    if isinstance(error, GRPCError):
        return f"status {error.status.name}: {error.message or 'no message'}"
    return f"{type(error).__name__}: {error}"


class _End:
    """The end of what a peer sends: cleanly (`error` None) or not."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Session(Generic[S, R]):
    """What both ends share: sending, and reading in a task of the session's own."""

    _outbound: EnvelopeType[Any, S]
    _inbound: EnvelopeType[Any, R]

    def __init__(self, stream: Any, peer: str) -> None:
        self._stream = stream
        self.peer = peer
        self._inbox: asyncio.Queue[R | _End] = asyncio.Queue(maxsize=_READ_AHEAD)
        self._end: _End | None = None
        self._reader: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()
        self._warned: set[str] = set()
        # grpclib keeps a stream's codec to itself, under this name.
        self._wire_codec = isinstance(getattr(stream, "_codec", None), WireCodec)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"

    def __str__(self) -> str:
        return self.peer

    async def send(self, value: S) -> None:
        """Send `value` to the peer, in its envelope.

        Raises:
            EncodeError: a value the wire cannot carry, with its path.
            TypeError: a value this end does not send.
            grpclib.exceptions.StreamTerminatedError: the connection is gone.
        """
        message = self._outbound.outgoing(value, wire_codec=self._wire_codec)
        async with self._send_lock:
            await self._send_message(message)
        logger.debug("sent %s to %s", type(value).__name__, self)

    async def _send_message(self, message: Any) -> None:
        await self._stream.send_message(message)

    async def recv(self, timeout: float | None = None) -> R | None:
        """The next value from the peer, or None once the peer has ended its side.

        Envelopes with no member this version knows are skipped (and logged).
        After the end, every call gives the same answer again.

        Args:
            timeout: seconds to wait at most; None waits as long as it takes.
                A timeout loses nothing: the session stays usable.

        Raises:
            asyncio.TimeoutError: nothing arrived within `timeout` (the
                built-in `TimeoutError` from Python 3.11).
            DecodeError: the peer sent bytes that are not a valid message.
            grpclib.exceptions.StreamTerminatedError: the connection was lost.
            grpclib.exceptions.GRPCError: the call ended with an error status.
        """
        if self._end is None:
            if self._reader is None:
                self._reader = asyncio.get_running_loop().create_task(self._read())
            item = await asyncio.wait_for(self._inbox.get(), timeout)
            if not isinstance(item, _End):
                return item
            # Left for any other task waiting in `recv`.
            self._inbox.put_nowait(item)
            self._end = item
        if self._end.error is not None:
            raise self._end.error
        return None

    def __aiter__(self) -> AsyncIterator[R]:
        return self

    async def __anext__(self) -> R:
        value = await self.recv()
        if value is None:
            raise StopAsyncIteration
        return value

    async def _read(self) -> None:
        error: BaseException | None = None
        try:
            while True:
                try:
                    message = await self._stream.recv_message()
                except DecodeError:
                    raise  # from WireCodec, which says where
                except (EOFError, ValueError, IndexError) as exc:
                    # betterproto2's parser, inside grpclib's default codec.
                    raise DecodeError(self._inbound.name, f"{type(exc).__name__}: {exc}") from exc
                if message is None:
                    await self._inbound_ended()
                    logger.info("%s ended its side of the stream", self)
                    break
                value = self._inbound.incoming(message)
                if isinstance(value, Skipped):
                    self._skipped(value)
                    continue
                self._received(value)
                await self._inbox.put(value)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to whoever reads the session
            error = self._explain(exc)
            logger.warning("stream with %s failed: %s", self, _describe(error))
        await self._inbox.put(_End(error))

    def _skipped(self, skipped: Skipped) -> None:
        # A newer peer may send its new kind of message often: say so once.
        level = logging.DEBUG if skipped.reason in self._warned else logging.WARNING
        self._warned.add(skipped.reason)
        logger.log(level, "skipped a %s from %s: %s", self._inbound.name, self, skipped.reason)

    def _received(self, value: R) -> None:
        logger.debug("received %s from %s", type(value).__name__, self)

    async def _inbound_ended(self) -> None:
        """What to do once the peer has ended its side."""

    def _explain(self, error: Exception) -> Exception:
        """The error that says best why reading stopped."""
        return error

    async def _stop_reading(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._end is None:
            self._end = _End(None)


class AgentSession(_Session[FromAgent, FromControl]):
    """The agent's end of the stream, opened by `connect`.

    `send` takes a `Registration`, a `ShardReport` or a `Heartbeat`; `recv`
    and `async for` give `ShardCommand`, `StopCommand` and `Ack` values until
    the control plane ends the call. An error status from the control plane
    is raised as `grpclib.exceptions.GRPCError`; as grpclib resets the stream
    after an error status, values sent just before it may be lost with it.

    Attributes:
        peer: the control plane's address, for messages.
    """

    _outbound = AGENT_ENVELOPE
    _inbound = CONTROL_ENVELOPE

    def __init__(self, stream: grpclib.client.Stream[AgentMessage, ControlMessage], peer: str):
        super().__init__(stream, peer)
        self._client_stream = stream
        self._closed = False
        self._finished = False

    async def _send_message(self, message: Any) -> None:
        if self._closed:
            raise RuntimeError(f"the stream to {self} is closed: nothing more can be sent")
        await self._client_stream.send_message(message)

    async def close(self) -> None:
        """End the agent's side of the stream: it sends nothing more.

        The control plane sees the end of its `async for`; what it still sends
        can be read until it ends the call. Closing twice does nothing.
        """
        async with self._send_lock:
            if not self._closed:
                self._closed = True
                await self._client_stream.end()

    async def _inbound_ended(self) -> None:
        # The call is over once the control plane has ended its side; the
        # trailers say how.
        await self.close()
        self._finished = True
        await self._client_stream.recv_trailing_metadata()

    def _explain(self, error: Exception) -> Exception:
        if isinstance(error, StreamTerminatedError):
            # A control plane that fails sends its status, then resets the
            # stream; the status says why (grpclib does the same on exit).
            try:
                self._client_stream._maybe_raise()
            except GRPCError as status:
                return status
        return error

    async def _finish(self) -> None:
        await self._stop_reading()
        if not self._finished:
            # Leaving while the call is still open cancels it rather than
            # waiting for a control plane that may never end it.
            with contextlib.suppress(Exception):
                await self._client_stream.cancel()


@contextlib.asynccontextmanager
async def connect(
    channel: grpclib.client.Channel, *, metadata: _MetadataLike | None = None
) -> AsyncIterator[AgentSession]:
    """Open the agent's stream to the control plane on `channel`.

    Leaving the block cancels the call if the control plane has not ended it;
    to part cleanly, `close()` the session and read until the end.

    Args:
        channel: a grpclib channel to the control plane; give it
            `codec=WireCodec()` to have the envelopes read and written with
            upb (any other codec works too, through betterproto2).
        metadata: gRPC metadata sent with the call.

    Raises:
        OSError: the control plane cannot be reached (`ConnectionRefusedError`...).
    """
    stream = channel.request(
        CONNECT_ROUTE,
        grpclib.const.Cardinality.STREAM_STREAM,
        AgentMessage,
        ControlMessage,
        metadata=metadata,
    )
    async with stream:
        await stream.send_request()
        session = AgentSession(stream, f"control plane {_address(stream.peer)}")
        try:
            yield session
        finally:
            await session._finish()


class ControlSession(_Session[FromControl, FromAgent]):
    """The control plane's end of one agent's stream, given to `ControlPlane.handle`.

    `send` takes a `ShardCommand`, a `StopCommand` or an `Ack`; `recv` and
    `async for` give `Registration`, `ShardReport` and `Heartbeat` values
    until the agent ends its side. The call ends when `handle` returns.

    Attributes:
        peer: the agent's address, for messages.
        node_id: the node id of the last registration received; None before.
    """

    _outbound = CONTROL_ENVELOPE
    _inbound = AGENT_ENVELOPE

    def __init__(self, stream: grpclib.server.Stream[AgentMessage, ControlMessage], peer: str):
        super().__init__(stream, peer)
        self.node_id: str | None = None

    def __str__(self) -> str:
        if self.node_id is None:
            return f"agent at {self.peer}"
        return f"agent of node {self.node_id} at {self.peer}"

    def _received(self, value: FromAgent) -> None:
        if isinstance(value, Registration):
            self.node_id = value.node.id
        super()._received(value)


class ControlPlane(AgentServiceBase):
    """Base class of a control-plane server: `handle` runs once per connected agent.

    Serve an instance with grpclib (`grpclib.server.Server([plane],
    codec=WireCodec())`, or `start_server`; grpclib's default codec works
    too, through betterproto2). When an agent's connection is lost, or the server
    closes, its `handle` is cancelled (grpclib's way): put what must happen
    then, such as marking the node offline, in a `finally`. A closing server
    ends the calls of the agents still connected with status UNAVAILABLE.
    """

    @abc.abstractmethod
    async def handle(self, session: ControlSession) -> None:
        """Serve one agent's stream; the call ends, with status OK, when this returns.

        An exception ends the call with an error status that the agent sees;
        raise `grpclib.GRPCError` to choose the status.
        """

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        # The generated route and message types, with a handler that gets the
        # whole bidirectional stream rather than a request iterator.
        return {
            route: grpclib.const.Handler(
                self._serve, handler.cardinality, handler.request_type, handler.reply_type
            )
            for route, handler in super().__mapping__().items()
        }

    async def _serve(self, stream: grpclib.server.Stream[AgentMessage, ControlMessage]) -> None:
        session = ControlSession(stream, _address(stream.peer))
        logger.info("%s connected", session)
        try:
            await self.handle(session)
        except asyncio.CancelledError:
            logger.warning("stream with %s lost: connection closed or server closing", session)
            # grpclib sends nothing for a cancelled handler: an agent still
            # connected to a closing server would wait for the call's end in vain.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    stream.send_trailing_metadata(
                        status=grpclib.const.Status.UNAVAILABLE,
                        status_message="the control plane is closing",
                    ),
                    _GOODBYE_TIMEOUT,
                )
            raise
        finally:
            await session._stop_reading()


async def start_server(
    plane: AgentServiceBase, host: str = "127.0.0.1", port: int = 0, *, backlog: int = 100
) -> tuple[grpclib.server.Server, int]:
    """Start a grpclib server for `plane` on `host`:`port`; return it and the port it got.

    For a `ControlPlane`, the server reads and writes the envelopes with
    `WireCodec`; any other implementation gets grpclib's default codec, and
    the betterproto2 messages its handlers expect.

    Args:
        plane: a `ControlPlane`, or any other implementation of the service.
        host: the address to listen on.
        port: the port; 0 picks a free one.
        backlog: connections the system queues before they are accepted
            (grpclib's default); raise it for many agents connecting at once,
            as after a restart of the control plane.

    Stop the server with `close()` and `await wait_closed()`.

    Raises:
        OSError: the address cannot be listened on (the port is taken, say).
    """
    sock = socket.create_server((host, port), backlog=backlog)
    codec = WireCodec() if isinstance(plane, ControlPlane) else None
    server = grpclib.server.Server([plane], codec=codec)
    try:
        await server.start(sock=sock, backlog=backlog)
    except BaseException:
        sock.close()
        raise
    return server, int(sock.getsockname()[1])
