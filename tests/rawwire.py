"""Hand-made wire bytes, and the fields of a message as plain data, for the wire tests.

A tiny encoder, independent of both runtimes, so that a test can write what a
careless or hostile peer sends (fields out of order, a length past the end,
wire type 7), and a reader that turns an official (upb) or a betterproto2
message into plain dicts and lists, compared field by field.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5


def varint(n: int) -> bytes:
    """`n` as a varint; a negative number takes 10 bytes, as int32 and int64 do."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if not n:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def ld(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes, a sub-message or a packed run."""
    return tag(number, LEN) + varint(len(payload)) + payload


def vi(number: int, value: int) -> bytes:
    """A varint field."""
    return tag(number, VARINT) + varint(value)


def group(number: int, payload: bytes) -> bytes:
    """A group: start tag, its fields, end tag."""
    return tag(number, SGROUP) + payload + tag(number, EGROUP)


def nested_groups(number: int, depth: int) -> bytes:
    """`depth` groups, each inside the one before."""
    return tag(number, SGROUP) * depth + tag(number, EGROUP) * depth


# --- a message's fields as plain data ---------------------------------------------


def plain_pb(message: Any) -> dict[str, Any]:
    """Every field of an official message: scalars, lists, dicts, None for an unset message."""
    return _plain(message, message.DESCRIPTOR, getattr, _pb_has)


def plain_bp2(message: Any, descriptor: Any) -> dict[str, Any]:
    """Every field of a betterproto2 message, read with the official `descriptor`."""
    return _plain(message, descriptor, _bp2_get, lambda m, name: getattr(m, name) is not None)


def _pb_has(message: Any, name: str) -> bool:
    return bool(message.HasField(name))


def _bp2_get(message: Any, name: str) -> Any:
    value = getattr(message, name)
    return int(value) if hasattr(value, "proto_name") else value


def _plain(message: Any, descriptor: Any, get: Any, has: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in descriptor.fields:
        sub = field.message_type
        if sub is not None and sub.GetOptions().map_entry:
            out[field.name] = dict(get(message, field.name))
        elif sub is not None and field.is_repeated:
            out[field.name] = [_plain(x, sub, get, has) for x in get(message, field.name)]
        elif sub is not None:
            present = has(message, field.name)
            out[field.name] = _plain(get(message, field.name), sub, get, has) if present else None
        elif field.is_repeated:
            out[field.name] = [_scalar(field, x) for x in get(message, field.name)]
        else:
            out[field.name] = _scalar(field, get(message, field.name))
    return out


def _scalar(field: Any, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return int(value)
    return value


def as_go_reads(message_class: Any, entries_class: Any, data: bytes) -> Any:
    """`data` parsed by the official runtime, with map entries read as Go's runtime reads them.

    `entries_class` is the same message with maps as repeated entry messages
    (`llmgw_wire.codec.schema.DECODE_CLASSES`): an entry that carries an
    unknown field keeps its key there, where the official Python runtime
    keeps the whole entry as an unknown field of the parent. Unknown fields
    are dropped (the field-by-field comparisons do not see them). Raises the
    official runtime's `DecodeError` for bytes it refuses.
    """
    entries = entries_class()
    entries.ParseFromString(data)
    entries.DiscardUnknownFields()
    message = message_class()
    message.ParseFromString(entries.SerializeToString())
    return message
