"""A grpclib codec for the agent stream: domain values in and out, upb for the bytes.

The stream's own transport is grpc.aio (`llmgw_wire.stream`); this codec is
for services and peers that speak grpclib, and needs the `grpclib` extra
(`pip install 'llmgw-wire[grpclib]'`): the core package installs no grpclib,
and its wire classes come without grpclib service stubs. A grpclib service
maps the route `llmgw_wire.stream.CONNECT_ROUTE` to a stream-stream
`grpclib.const.Handler` of `AgentMessage` in and `ControlMessage` out; a
grpclib client opens `channel.request(CONNECT_ROUTE, Cardinality.STREAM_STREAM,
AgentMessage, ControlMessage)`. grpclib's default codec hands a
stream betterproto2 envelopes, parsed and written by betterproto2: about a
millisecond for an 8-GPU registration. `WireCodec` reads and writes the
envelopes with the library's envelope codec (`llmgw_wire.codec.envelope`:
upb and the compiled mapping, with `decode`'s limits) and gives the stream
the domain values themselves::

    server = grpclib.server.Server([service], codec=WireCodec())
    channel = grpclib.client.Channel(host, port, codec=WireCodec())

On a stream with this codec, `send_message` takes a domain value that the
envelope carries (`Registration`, `ShardReport` or `Heartbeat` for an
`AgentMessage`; `ShardCommand`, `StopCommand` or `Ack` for a
`ControlMessage`) and `recv_message` gives one, or an `UnknownMember` for an
envelope with no member this version knows (a newer peer's new kind of
message). A `llmgw_wire.v1` message is still sent as it is, and a message
type other than the two envelopes is decoded as `decode(data, v1.X)` does.

The bytes are the ones the betterproto2 classes read and write (content
subtype `proto`), so either end may use grpclib's default codec, and either
may be a grpc.aio end of `llmgw_wire.stream`.
"""

from __future__ import annotations

from typing import Any

try:
    from grpclib.encoding.base import CodecBase
except ImportError as exc:  # the core package installs no grpclib
    raise ImportError(
        "llmgw_wire.stream.grpclib_codec needs grpclib: pip install 'llmgw-wire[grpclib]'"
    ) from exc

from llmgw_wire.codec import decode as _decode
from llmgw_wire.codec.envelope import (
    AGENT_MESSAGE,
    CONTROL_MESSAGE,
    EnvelopeCodec,
    UnknownMember,
    envelope_codec,
)
from llmgw_wire.v1 import AgentMessage, ControlMessage

__all__ = ["UnknownMember", "WireCodec"]


class WireCodec(CodecBase):
    """Reads and writes the stream's envelopes as domain values, with upb.

    Raises, from `encode`: `TypeError` for a value the envelope does not
    carry, `EncodeError` for one the wire cannot carry. From `decode`:
    `DecodeError` for bytes that are not a valid envelope, or whose member
    makes no domain value.
    """

    __content_subtype__ = "proto"

    def __init__(self) -> None:
        self._envelopes: dict[type, EnvelopeCodec] = {
            AgentMessage: envelope_codec(AGENT_MESSAGE),
            ControlMessage: envelope_codec(CONTROL_MESSAGE),
        }

    def encode(self, message: Any, message_type: Any) -> bytes:
        """The bytes of `message`: a domain value for an envelope, or a `message_type` message."""
        if isinstance(message, message_type):
            return bytes(message)
        envelope = self._envelopes.get(message_type)
        if envelope is None:
            raise TypeError(f"expected a {message_type.__name__}, got {type(message).__name__}")
        return envelope.encode(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        """For an envelope, the domain value it carries, or an `UnknownMember`; else the message."""
        envelope = self._envelopes.get(message_type)
        if envelope is None:
            return _decode(data, message_type)
        return envelope.decode(data)
