"""The stream's envelopes, `AgentMessage` and `ControlMessage`, as bytes and domain values.

Each envelope carries one domain value in one member of its oneof (the table
is `llmgw_wire.mapping.ENVELOPES`, the only place that says which).
`encode_envelope(value)` puts a value in its member and gives the bytes;
`decode_envelope(data, envelope)` gives the value back, or an `UnknownMember`
for an envelope with no member this version knows (what a newer peer's new
kind of message looks like). Both run on upb and the compiled mapping, the
path of `encode` and `decode`, and `decode_envelope` applies the same limits
as `decode` (size and elements) to every envelope.

    data = encode_envelope(registration)          # an AgentMessage
    value = decode_envelope(data, AGENT_MESSAGE)  # the Registration again
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Final

from attrs import frozen

from llmgw_wire.codec._binary import compiled_upb, parse
from llmgw_wire.codec._diagnose import field_numbers
from llmgw_wire.codec._guard import guarded_structure, guarded_unstructure, serializer
from llmgw_wire.codec._limits import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE
from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.mapping import ENVELOPES

if TYPE_CHECKING:
    from collections.abc import Callable

    from google.protobuf.descriptor import Descriptor
    from google.protobuf.message import Message

    from llmgw_wire.mapping._compiler import FillFunction, StructureFunction

__all__ = [
    "AGENT_MESSAGE",
    "CONTROL_MESSAGE",
    "EnvelopeCodec",
    "UnknownMember",
    "decode_envelope",
    "encode_envelope",
    "envelope_codec",
]

#: The proto name of the envelope an agent sends.
AGENT_MESSAGE: Final = "llmgw.v1.AgentMessage"
#: The proto name of the envelope the control plane sends.
CONTROL_MESSAGE: Final = "llmgw.v1.ControlMessage"


@frozen
class UnknownMember:
    """An envelope that carried no member this version knows.

    Attributes:
        envelope: the envelope's proto name, e.g. `llmgw.v1.AgentMessage`.
        fields: the numbers of the fields it did carry, none of them known here.
    """

    envelope: str
    fields: tuple[int, ...]

    @property
    def reason(self) -> str:
        """Why no value came out, for a log line."""
        numbers = self.fields
        what = "fields " + ", ".join(map(str, numbers)) if numbers else "no fields at all"
        return f"no member this version knows ({what})"


class EnvelopeCodec:
    """One envelope type: which domain value travels in which member, to bytes and back.

    Attributes:
        name: the envelope's proto name.
        members: domain model -> the member that carries it.
        domains: member -> the domain model it carries.
    """

    def __init__(self, name: str) -> None:
        (table,) = (envelope for envelope in ENVELOPES if envelope.wire == name)
        self.name = name
        self._oneof = table.oneof
        self.domains: dict[str, type] = dict(table.members)
        self.members: dict[type, str] = {domain: member for member, domain in table.members}
        upb_class: type[Message] = CLASSES[name]
        self._upb_class = upb_class
        compiled = compiled_upb()
        fields = upb_class.DESCRIPTOR.fields_by_name
        self._encode: dict[type, Callable[[object], bytes]] = {
            domain: self._encoder(
                member, domain, compiled.fill[domain], fields[member].message_type
            )
            for member, domain in table.members
        }
        self._structure: dict[str, StructureFunction] = {
            member: guarded_structure(compiled.structure[domain], domain)
            for member, domain in table.members
        }

    def _encoder(
        self, member: str, domain: type, fill: FillFunction, reach: Descriptor
    ) -> Callable[[object], bytes]:
        # As `encode` does: map entries sorted where the member can hold a map.
        serialize = serializer(self._upb_class, reach)
        upb_class = self._upb_class

        def fast(value: object) -> bytes:
            envelope = upb_class()
            # Filling a member sets it, and only it: a oneof holds one member.
            fill(value, getattr(envelope, member))
            return serialize(envelope)

        return guarded_unstructure(fast, domain)

    def __repr__(self) -> str:
        return f"<EnvelopeCodec {self.name}>"

    def member_of(self, value: object) -> str:
        """The member that carries `value`; `TypeError` for a value this envelope does not carry."""
        member = self.members.get(type(value))
        if member is None:
            raise self._not_carried(value)
        return member

    def _not_carried(self, value: object) -> TypeError:
        carried = ", ".join(domain.__name__ for domain in self.members)
        return TypeError(f"{self.name} carries {carried}, not {type(value).__name__}")

    def encode(self, value: object) -> bytes:
        """The envelope's bytes with `value` in its member, and only it.

        Raises:
            EncodeError: a value the wire cannot carry, with its path.
            TypeError: a value this envelope does not carry.
        """
        encoder = self._encode.get(type(value))
        if encoder is None:
            raise self._not_carried(value)
        return encoder(value)

    def decode(
        self,
        data: bytes | bytearray | memoryview,
        *,
        max_size: int = DEFAULT_MAX_SIZE,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> object:
        """The domain value in the envelope's member, or an `UnknownMember`.

        Raises:
            DecodeError: bytes that are not a valid envelope, over the limits,
                or whose member makes no domain value.
        """
        envelope = parse(data, self.name, max_size, max_items)
        member = envelope.WhichOneof(self._oneof)
        if member is None:
            # A bounded walk of the bytes, not an object per unknown field:
            # a hostile envelope can hold a million of them.
            return UnknownMember(self.name, field_numbers(bytes(data)))
        return self._structure[member](getattr(envelope, member))


@cache
def envelope_codec(name: str) -> EnvelopeCodec:
    """The codec of the envelope `name` (`AGENT_MESSAGE` or `CONTROL_MESSAGE`), made once.

    Raises:
        ValueError: `name` is not an envelope of the schema.
    """
    if name not in {envelope.wire for envelope in ENVELOPES}:
        known = ", ".join(envelope.wire for envelope in ENVELOPES)
        raise ValueError(f"{name!r} is not an envelope; the envelopes are {known}")
    return EnvelopeCodec(name)


def encode_envelope(value: object) -> bytes:
    """The bytes of the envelope that carries `value`: an `AgentMessage` or a `ControlMessage`.

    Raises:
        EncodeError: a value the wire cannot carry, with its path.
        TypeError: a value no envelope carries.
    """
    for envelope in ENVELOPES:
        codec = envelope_codec(envelope.wire)
        if type(value) in codec.members:
            return codec.encode(value)
    carried = ", ".join(domain.__name__ for e in ENVELOPES for _, domain in e.members)
    raise TypeError(f"the envelopes carry {carried}, not {type(value).__name__}")


def decode_envelope(
    data: bytes | bytearray | memoryview,
    envelope: str,
    *,
    max_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> object:
    """The domain value the envelope `envelope` in `data` carries, or an `UnknownMember`.

    Raises:
        DecodeError: bytes that are not a valid envelope, over the limits, or
            whose member makes no domain value.
        ValueError: `envelope` is not an envelope of the schema.
    """
    return envelope_codec(envelope).decode(data, max_size=max_size, max_items=max_items)
