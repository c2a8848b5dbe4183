"""What one control-plane server gives its peers at most: the bounds a grpc-go operator sets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attrs import field, frozen

if TYPE_CHECKING:
    from llmgw_wire.stream._protocol import GrpcOption

__all__ = ["ServerLimits"]


def _positive(instance: object, attribute: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} must be positive or None, got {value!r}")


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


@frozen
class ServerLimits:
    """The resource bounds of a control-plane server, each with grpc-go's name for it.

    Attributes:
        call_window: bytes an agent may send on one call ahead of what the
            session has read (the HTTP/2 stream window; grpc-go's
            `InitialWindowSize`). BDP probing, which would grow it, is off.
        max_calls_per_connection: calls one connection may hold open at once
            (HTTP/2 `MAX_CONCURRENT_STREAMS`; grpc-go's `MaxConcurrentStreams`);
            an agent needs one.
        max_unregistered_calls: calls on the whole server that have not
            registered yet; a call beyond it is refused at once with
            RESOURCE_EXHAUSTED. The registration timeout bounds how long each
            may wait; this bounds how many.
        max_unregistered_calls_per_peer: of those, the calls one peer may
            hold (a peer: the client's host address, or under mutual TLS its
            certificate's identity); a call beyond it is refused at once with
            RESOURCE_EXHAUSTED, and the rest of the budget stays for others.
            Agents behind one NAT or proxy share it.
        max_bytes_per_peer: bytes of one peer's messages the server holds at
            once, counted at their size after decompression from when their
            decoding may begin until `handle` asks for the value after them:
            read ahead, decoded, or the value `handle` has. A message read
            while it is full waits, within as many bytes again for the
            messages waiting; one past that ends its call with
            RESOURCE_EXHAUSTED. One message is let in whatever its size when
            the peer holds nothing.
        max_side_calls: calls of the health service's `Watch` and of server
            reflection open at once on the whole server; a call beyond it is
            refused with RESOURCE_EXHAUSTED.
        max_side_calls_per_peer: of those, the calls one peer may hold.
        side_call_lifetime: seconds such a call stays open at most (a
            `Watch` then ends with OK: its client watches again), so that a
            connection holding only them is still closed when idle; None
            keeps them open.
        connection_idle: seconds a connection with no call is kept
            (grpc-go's `MaxConnectionIdle`); None keeps it.
        connection_age: seconds after which a connection is asked to go away
            (GOAWAY: its agent connects again; grpc-go's `MaxConnectionAge`);
            None, the default, never.
        connection_age_grace: seconds the calls of a connection that is
            going away for its age keep running (`MaxConnectionAgeGrace`);
            None waits for them.
        send_timeout: seconds a `ControlSession.send` waits at most, for its
            turn and for the agent to take the message, unless the send gives
            its own timeout; None waits as long as it takes. An agent that
            reads nothing, while its connection still answers pings, stops a
            send once HTTP/2 flow control has filled its window (a few
            messages of a MiB); past this, the send raises
            `asyncio.TimeoutError` and, its message partly written, ends
            the call (DEADLINE_EXCEEDED). So such an agent holds a session
            (and its `handle`) at most this long; once the call is ended
            otherwise (a stop, say), at most one second more.
        accept_compressed: accept compressed messages from agents. False
            refuses them (UNIMPLEMENTED, before anything is decompressed) and
            turns the server's own compression off too: grpc enables an
            algorithm for both directions at once.
    """

    call_window: int = field(default=64 * 1024, validator=_positive)
    max_calls_per_connection: int = field(default=16, validator=_positive)
    max_unregistered_calls: int = field(default=256, validator=_positive)
    max_unregistered_calls_per_peer: int = field(default=32, validator=_positive)
    max_bytes_per_peer: int = field(default=5 * 1024 * 1024, validator=_positive)
    max_side_calls: int = field(default=64, validator=_positive)
    max_side_calls_per_peer: int = field(default=8, validator=_positive)
    side_call_lifetime: float | None = field(default=60.0, validator=_positive)
    connection_idle: float | None = field(default=300.0, validator=_positive)
    connection_age: float | None = field(default=None, validator=_positive)
    connection_age_grace: float | None = field(default=None, validator=_positive)
    accept_compressed: bool = True
    send_timeout: float | None = field(default=30.0, validator=_positive)

    def server_options(self) -> list[GrpcOption]:
        """The grpc server options that enforce these bounds."""
        options: list[GrpcOption] = [
            ("grpc.http2.bdp_probe", 0),
            ("grpc.http2.lookahead_bytes", self.call_window),
            ("grpc.max_concurrent_streams", self.max_calls_per_connection),
        ]
        if self.connection_idle is not None:
            options.append(("grpc.max_connection_idle_ms", _ms(self.connection_idle)))
        if self.connection_age is not None:
            options.append(("grpc.max_connection_age_ms", _ms(self.connection_age)))
        if self.connection_age_grace is not None:
            options.append(("grpc.max_connection_age_grace_ms", _ms(self.connection_age_grace)))
        if not self.accept_compressed:
            # Identity alone (bit 0): compressed input is refused by grpc.
            options.append(("grpc.compression_enabled_algorithms_bitset", 1))
        return options
