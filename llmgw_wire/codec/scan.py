"""A small pure-Python wire scanner: why bytes were refused, and what betterproto2 misreads.

Google's parser (upb) does the real work of `decode`; this module runs only
after it, on two paths:

* upb refused the bytes (`diagnose`). Its own message is vague ("Wire format
  was corrupt"), so the scanner walks the bytes the way upb does and names the
  first problem: its offset, the field and what is wrong with it. It stops at
  that problem and allocates nothing but the small slices it checks, so a
  hostile length prefix costs nothing.
* upb accepted the bytes and they are handed to betterproto2
  (`canonical_for_betterproto2`). upb keeps a known field sent with the wrong
  wire type, and groups, as unknown fields, which is conformant; betterproto2
  would put the wrong-typed value into the typed field (a number in a string
  field) and read a group's contents as fields of the enclosing message. Such
  bytes are refused for a `llmgw_wire.v1` target.

The depth and size rules are upb's: at most 100 levels of sub-messages and
groups, tags of at most 32 bits, field numbers 1 to 2**29 - 1, varints of at
most 10 bytes, lengths of at most 5.
"""

from __future__ import annotations

import codecs
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor

from llmgw_wire.errors import DecodeError

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor

__all__ = ["MAX_DEPTH", "Problem", "canonical_for_betterproto2", "diagnose"]

#: upb's default recursion limit: sub-messages and groups, the top message excluded.
MAX_DEPTH = 100

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5
_WIRE_NAMES = {
    _VARINT: "varint",
    _I64: "fixed64",
    _LEN: "length-delimited",
    _SGROUP: "start-group",
    _EGROUP: "end-group",
    _I32: "fixed32",
}

_VARINT_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_BOOL,
        FieldDescriptor.TYPE_ENUM,
    }
)
_I64_TYPES = frozenset(
    {FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_DOUBLE}
)
_I32_TYPES = frozenset(
    {FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_FLOAT}
)


class Problem(NamedTuple):
    """The first thing wrong in a message's bytes.

    Attributes:
        offset: where, in bytes from the start of the whole message.
        reason: what is wrong, in words.
        path: the field it is in, as names and indices of repeated fields.
    """

    offset: int
    reason: str
    path: tuple[str | int, ...]


class _Field(NamedTuple):
    name: str
    wire_type: int  # the one it is written with
    packed: bool  # a repeated number, which may also come packed
    utf8: bool
    message: Descriptor | None  # sub-message or map entry
    repeated: bool
    secret: bool  # marked `[debug_redact = true]`: no byte of it is shown


class _Bad(Exception):  # noqa: N818 - private, turned into a Problem
    """The first problem; each enclosing field adds itself to `path` on the way out."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.path: list[str | int] = []


class _VarintError(Exception):
    def __init__(self, too_long: bool) -> None:
        self.too_long = too_long


def _wire_type_of(field: FieldDescriptor) -> int:
    if field.type in _VARINT_TYPES:
        return _VARINT
    if field.type in _I64_TYPES:
        return _I64
    if field.type in _I32_TYPES:
        return _I32
    if field.type == FieldDescriptor.TYPE_GROUP:
        return _SGROUP
    return _LEN


@cache
def _fields(descriptor: Descriptor) -> dict[int, _Field]:
    out = {}
    for field in descriptor.fields:
        wire_type = _wire_type_of(field)
        out[field.number] = _Field(
            name=field.name,
            wire_type=wire_type,
            packed=field.is_repeated and wire_type != _LEN,
            utf8=field.type == FieldDescriptor.TYPE_STRING,
            message=field.message_type,
            repeated=field.is_repeated,
            secret=field.GetOptions().debug_redact,
        )
    return out


def _describe(number: int, field: _Field | None) -> str:
    return f"field {number} (`{field.name}`)" if field else f"unknown field {number}"


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at `pos` and the offset after it; `_VarintError` if there is none."""
    result = shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _VarintError(too_long=True)
    raise _VarintError(too_long=False)


def _varint_problem(exc: _VarintError, what: str, at: int) -> _Bad:
    if exc.too_long:
        return _Bad(at, f"{what} at offset {at} is longer than 10 bytes")
    return _Bad(at, f"the bytes end inside {what} at offset {at}")


class _Scanner:
    """Walks one message's bytes as upb does; raises `_Bad` at the first problem.

    The happy path builds no strings and no paths: the loop runs over every
    field of a message upb refused, possibly megabytes of them.
    """

    def __init__(self, data: bytes, *, betterproto2: bool) -> None:
        self.data = data
        # Also refuse what is valid but betterproto2 would misread.
        self.betterproto2 = betterproto2

    def message(
        self,
        pos: int,
        end: int,
        fields: dict[int, _Field] | None,
        depth: int,
        group: tuple[int, int] | None = None,
    ) -> int:
        """Scan fields from `pos` to `end`; inside a group, up to its end tag.

        `group` is the open group's (field number, offset of its start tag).
        Returns the offset after the last byte read.
        """
        seen: dict[int, int] = {}
        while pos < end:
            at = pos
            number, wire_type, pos = self.tag(pos, end)
            if wire_type == _EGROUP:
                if group is not None and number == group[0]:
                    return pos
                opened = f"group {group[0]} is open" if group else "no group is open"
                raise _Bad(at, f"an end-group tag for field {number} at offset {at}, but {opened}")
            field = fields.get(number) if fields else None
            try:
                pos = self.value(pos, end, at, number, wire_type, field, depth)
            except _Bad as bad:
                if field is not None:
                    # Indices name the elements of repeated strings and messages;
                    # a packed run of numbers holds many, so it gets none.
                    if field.repeated and not field.packed:
                        bad.path.insert(0, seen.get(number, 0))
                    bad.path.insert(0, field.name)
                raise
            if field is not None and field.repeated:
                seen[number] = seen.get(number, 0) + 1
        if group is not None:
            raise _Bad(group[1], f"group {group[0]} opened at offset {group[1]} is never closed")
        return pos

    def tag(self, pos: int, end: int) -> tuple[int, int, int]:
        """The field number and wire type of the tag at `pos`, and the offset after it."""
        at = pos
        tag = self.data[pos]
        if tag < 0x80:
            pos += 1
        else:
            try:
                tag, pos = _varint(self.data, pos, end)
            except _VarintError as exc:
                raise _varint_problem(exc, "a tag", at) from None
            if pos - at > 5 or tag > 0xFFFFFFFF:
                raise _Bad(at, f"the tag at offset {at} is larger than 32 bits")
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise _Bad(at, f"field number 0 in the tag at offset {at}")
        if wire_type > _I32:
            raise _Bad(
                at, f"invalid wire type {wire_type} in the tag of field {number} at offset {at}"
            )
        return number, wire_type, pos

    def value(
        self,
        pos: int,
        end: int,
        at: int,
        number: int,
        wire_type: int,
        field: _Field | None,
        depth: int,
    ) -> int:
        """Scan one field's value, its tag read; return the offset after it."""
        known = field is not None and (
            wire_type == field.wire_type or (wire_type == _LEN and field.packed)
        )
        if self.betterproto2 and field is not None and not known:
            raise _Bad(
                at,
                f"{_describe(number, field)} at offset {at} arrived as "
                f"{_WIRE_NAMES[wire_type]}, not {_WIRE_NAMES[field.wire_type]}; betterproto2 "
                "would store it in the field, where the official runtime keeps it as an "
                "unknown field (decoding into the domain model ignores it)",
            )
        if wire_type == _VARINT:
            try:
                return _varint(self.data, pos, end)[1]
            except _VarintError as exc:
                what = f"the varint of {_describe(number, field)}"
                raise _varint_problem(exc, what, at) from None
        if wire_type in (_I64, _I32):
            size = 8 if wire_type == _I64 else 4
            if end - pos < size:
                raise _Bad(
                    at,
                    f"{_describe(number, field)} at offset {at} needs {size} bytes, "
                    f"{end - pos} left",
                )
            return pos + size
        if wire_type == _SGROUP:
            if self.betterproto2:
                raise _Bad(
                    at,
                    f"group {number} at offset {at}; betterproto2 would read its contents as "
                    "fields of the enclosing message, where the official runtime skips it "
                    "(decoding into the domain model ignores it)",
                )
            self.deeper(depth, at)
            return self.message(pos, end, None, depth + 1, group=(number, at))
        return self.length_delimited(pos, end, at, number, field if known else None, depth)

    def length_delimited(
        self, pos: int, end: int, at: int, number: int, field: _Field | None, depth: int
    ) -> int:
        """Scan a length-delimited value; `field` is None unless it is read as that field."""
        data = self.data
        length = data[pos] if pos < end else 0x80
        if length < 0x80:
            pos += 1
        else:
            start = pos
            try:
                length, pos = _varint(data, pos, end)
            except _VarintError as exc:
                what = f"the length of {_describe(number, field)}"
                raise _varint_problem(exc, what, at) from None
            if pos - start > 5:
                what = f"the length of {_describe(number, field)}"
                raise _Bad(at, f"{what} at offset {at} is over 5 bytes")
        if length > end - pos:
            raise _Bad(
                at,
                f"{_describe(number, field)} at offset {at} claims {length} bytes, "
                f"{end - pos} left",
            )
        stop = pos + length
        if field is None or not length:
            return stop
        if field.utf8:
            try:
                codecs.utf_8_decode(data[pos:stop], "strict", True)
            except UnicodeDecodeError as exc:
                shown = (
                    "a secret: its bytes are not shown"
                    if field.secret
                    else f"byte {pos + exc.start} is {data[pos + exc.start]:#04x}"
                )
                raise _Bad(
                    at, f"{_describe(number, field)} at offset {at} is not valid UTF-8 ({shown})"
                ) from None
        elif field.message is not None:
            self.deeper(depth, at)
            self.message(pos, stop, _fields(field.message), depth + 1)
        elif field.packed:
            try:
                while pos < stop:
                    pos = _varint(data, pos, stop)[1]
            except _VarintError as exc:
                what = f"a packed varint of {_describe(number, field)}"
                raise _varint_problem(exc, what, pos) from None
        return stop

    def deeper(self, depth: int, at: int) -> None:
        if depth + 1 > MAX_DEPTH:
            raise _Bad(at, f"more than {MAX_DEPTH} nested messages and groups at offset {at}")


def _scan(data: bytes, descriptor: Descriptor, *, betterproto2: bool) -> Problem | None:
    try:
        _Scanner(data, betterproto2=betterproto2).message(0, len(data), _fields(descriptor), 0)
    except _Bad as bad:
        return Problem(bad.offset, bad.reason, tuple(bad.path))
    return None


def diagnose(data: bytes, descriptor: Descriptor) -> Problem | None:
    """The first problem in `data` as a `descriptor` message, or None if it has none.

    Meant for bytes upb refused: it names what upb found wrong. None means the
    scanner agrees with no refusal, which the tests treat as a bug.
    """
    return _scan(data, descriptor, betterproto2=False)


def canonical_for_betterproto2(
    message: Any, data: bytes | bytearray | memoryview, name: str
) -> bytes:
    """The canonical bytes of `message`, parsed by upb from `data`, for betterproto2 to parse.

    upb's re-serialisation merges what betterproto2 gets wrong (a sub-message
    seen twice, two members of a oneof). What it cannot fix is an unknown
    field betterproto2 would misread: a known field sent with the wrong wire
    type, or a group. Those are refused. The scan runs only when the message
    has unknown fields at all, which upb tells cheaply.

    Raises:
        DecodeError: the message holds an unknown field betterproto2 misreads.
    """
    # Deterministic, so that map entries keep `encode`'s sorted order rather
    # than upb's hash order, and the message re-encodes to the same bytes.
    canonical: bytes = message.SerializeToString(deterministic=True)
    # Dropping the unknown fields changes the size exactly when there are some.
    message.DiscardUnknownFields()
    if message.ByteSize() != len(canonical):
        problem = _scan(bytes(data), message.DESCRIPTOR, betterproto2=True)
        if problem is not None:
            raise DecodeError(name, problem.reason, problem.path)
    return canonical
