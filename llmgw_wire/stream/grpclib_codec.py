"""A grpclib codec for the agent stream: domain values in and out, upb for the bytes.

grpclib's default codec hands a stream betterproto2 envelopes, parsed and
written by betterproto2: about a millisecond for an 8-GPU registration, which
makes a control plane's failover (every agent registering at once) a matter
of seconds of parsing. `WireCodec` parses and writes the envelopes with
Google's runtime (upb) and the library's compiled mapping instead, the path of
`encode` and `decode`, and gives the stream the domain values themselves::

    server = grpclib.server.Server([plane], codec=WireCodec())
    channel = grpclib.client.Channel(host, port, codec=WireCodec())

On a stream with this codec, `send_message` takes a domain value that the
envelope carries (`Registration`, `ShardReport` or `Heartbeat` for an
`AgentMessage`; `ShardCommand`, `StopCommand` or `Ack` for a
`ControlMessage`) and `recv_message` gives one, or an `UnknownMember` for an
envelope with no member this version knows (a newer peer's new kind of
message). A `llmgw_wire.v1` message is still sent as it is, and a message
type other than the two envelopes is decoded as `decode(data, v1.X)` does.

The bytes are the ones the betterproto2 classes read and write (content
subtype `proto`), so either end may use grpclib's default codec.

The stream toolkit, `llmgw_wire.stream`, runs over this codec wherever the
stream's end has it: `start_server` gives it to a control plane's server, and
an agent gives it to the channel it hands to `connect`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attrs import frozen
from google.protobuf import unknown_fields
from grpclib.encoding.base import CodecBase

from llmgw_wire.codec.binary import compiled_upb, parse, reaches_map
from llmgw_wire.codec.binary import decode as _decode
from llmgw_wire.codec.explain import REFUSED, explain_decode, explain_encode
from llmgw_wire.codec.limits import DEFAULT_MAX_SIZE
from llmgw_wire.codec.schema import CLASSES
from llmgw_wire.mapping import ENVELOPES as _ENVELOPE_TABLE
from llmgw_wire.v1 import AgentMessage, ControlMessage

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ENVELOPES", "UnknownMember", "WireCodec"]

#: What each envelope's members carry: the domain model of each member.
ENVELOPES: dict[type, dict[str, type]] = {
    wire: dict(envelope.members)
    for wire, envelope in zip((AgentMessage, ControlMessage), _ENVELOPE_TABLE, strict=True)
}

_ONEOF = _ENVELOPE_TABLE[0].oneof


@frozen
class UnknownMember:
    """An envelope that carried no member this version knows.

    Attributes:
        envelope: the envelope's proto name, e.g. `llmgw.v1.AgentMessage`.
        fields: the numbers of the fields it did carry, none of them known here.
    """

    envelope: str
    fields: tuple[int, ...]


class _Envelope:
    """One envelope type, with the upb functions for each of its members."""

    def __init__(self, envelope: type, members: dict[str, type]) -> None:
        self.name = f"llmgw.v1.{envelope.__name__}"
        upb_class: Any = CLASSES[self.name]
        self.upb_class = upb_class
        compiled = compiled_upb()
        self.fill: dict[type, tuple[str, Callable[[Any, Any], None]]] = {
            domain: (member, compiled.fill[domain]) for member, domain in members.items()
        }
        self.structure: dict[str, tuple[type, Callable[[Any], Any]]] = {
            member: (domain, compiled.structure[domain]) for member, domain in members.items()
        }
        # As `encode` does: map entries sorted, where a member can hold a map.
        fields = upb_class.DESCRIPTOR.fields_by_name
        self.sort = {
            domain: reaches_map(fields[member].message_type) for member, domain in members.items()
        }

    def encode(self, value: object) -> bytes:
        domain = type(value)
        try:
            member, fill = self.fill[domain]
        except KeyError:
            carried = ", ".join(d.__name__ for d in self.fill)
            raise TypeError(f"{self.name} carries {carried}, not {domain.__name__}") from None
        envelope = self.upb_class()
        try:
            # Filling a member sets it, and only it: a oneof holds one member.
            fill(value, getattr(envelope, member))
        except REFUSED as exc:
            raise explain_encode(value, domain, exc) from None
        if self.sort[domain]:
            return envelope.SerializeToString(deterministic=True)  # type: ignore[no-any-return]
        return envelope.SerializeToString()  # type: ignore[no-any-return]

    def decode(self, data: bytes) -> object:
        envelope = parse(data, self.name, DEFAULT_MAX_SIZE)
        member = envelope.WhichOneof(_ONEOF)
        if member is None:
            numbers = sorted(
                {field.field_number for field in unknown_fields.UnknownFieldSet(envelope)}
            )
            return UnknownMember(self.name, tuple(numbers))
        domain, structure = self.structure[member]
        wire = getattr(envelope, member)
        try:
            return structure(wire)
        except REFUSED as exc:
            raise explain_decode(wire, domain, exc) from None


class WireCodec(CodecBase):
    """Reads and writes the stream's envelopes as domain values, with upb.

    Raises, from `encode`: `TypeError` for a value the envelope does not
    carry, `EncodeError` for one the wire cannot carry. From `decode`:
    `DecodeError` for bytes that are not a valid envelope, or whose member
    makes no domain value.
    """

    __content_subtype__ = "proto"

    def __init__(self) -> None:
        self._envelopes = {wire: _Envelope(wire, members) for wire, members in ENVELOPES.items()}

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
