"""The one reader of the wire format that both walks of raw bytes share.

Google's parser (upb) does the real work of `decode`. Two walks over the raw
bytes run beside it, each in its own module, both on this reader:

* `llmgw_wire.codec._diagnose`, cold: why upb refused the bytes, and where;
* `llmgw_wire.codec._varint64`, hot: whether bytes upb accepted hold a
  varint of more than 64 bits, which Go's runtime refuses.

Here: the wire types, the fields of a message as the walks need them, the
varint reader (lengths and tags are varints too), and the typed `Problem`
they report, whose `kind` is what the codec decides on.
"""

from __future__ import annotations

import enum
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from google.protobuf.descriptor import FieldDescriptor

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor

__all__ = [
    "EGROUP",
    "I32",
    "I64",
    "LEN",
    "SGROUP",
    "VARINT",
    "Cut",
    "Field",
    "Problem",
    "ProblemKind",
    "VarintError",
    "fields_of",
    "varint",
]

#: The wire types.
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5

VARINT_TYPES = frozenset(
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
I64_TYPES = frozenset(
    {FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_DOUBLE}
)
I32_TYPES = frozenset(
    {FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_FLOAT}
)


class ProblemKind(enum.Enum):
    """What kind of problem a `Problem` is: what the codec decides on, never the words."""

    #: Bytes that are not a well-formed message (upb refuses them).
    MALFORMED = "malformed"
    #: A varint that carries bits past the 64th (upb drops them; Go refuses them).
    OVER_64_BITS = "over-64-bits"
    #: The walk stopped at its budget before it could tell.
    CUT = "cut"


class Problem(NamedTuple):
    """The first thing wrong in a message's bytes.

    Attributes:
        offset: where, in bytes from the start of the whole message.
        reason: what is wrong, in words.
        path: the field it is in, as names and indices of repeated fields.
        kind: what kind of problem it is.
    """

    offset: int
    reason: str
    path: tuple[str | int, ...]
    kind: ProblemKind = ProblemKind.MALFORMED


class Field(NamedTuple):
    """A field of a message, as the walks read it."""

    name: str
    wire_type: int  # the one it is written with
    packed: bool  # a repeated number, which may also come packed
    utf8: bool
    message: Descriptor | None  # sub-message or map entry
    repeated: bool
    secret: bool  # marked `[debug_redact = true]`: no byte of it is shown


class VarintError(Exception):
    """No varint at the offset: cut short, longer than ten bytes, or past 64 bits."""

    def __init__(self, too_long: bool, last: int | None = None) -> None:
        self.too_long = too_long
        # The tenth byte, when it carries bits past the 64th.
        self.last = last


class Cut(Exception):  # noqa: N818 - a signal between the walks, turned into a Problem
    """The walk reached its budget of fields before it found the problem."""

    def __init__(self, offset: int, fields: int) -> None:
        super().__init__(offset)
        self.offset = offset
        self.fields = fields


def wire_type_of(field: FieldDescriptor) -> int:
    if field.type in VARINT_TYPES:
        return VARINT
    if field.type in I64_TYPES:
        return I64
    if field.type in I32_TYPES:
        return I32
    if field.type == FieldDescriptor.TYPE_GROUP:
        return SGROUP
    return LEN


@cache
def fields_of(descriptor: Descriptor) -> dict[int, Field]:
    """The fields of a message by number, made once per descriptor."""
    out = {}
    for field in descriptor.fields:
        wire_type = wire_type_of(field)
        out[field.number] = Field(
            name=field.name,
            wire_type=wire_type,
            packed=field.is_repeated and wire_type != LEN,
            utf8=field.type == FieldDescriptor.TYPE_STRING,
            message=field.message_type,
            repeated=field.is_repeated,
            secret=field.GetOptions().debug_redact,
        )
    return out


def varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at `pos` and the offset after it; `VarintError` if there is none."""
    result = shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if shift == 63 and byte > 1:
                # Bits past the 64th: Go's runtime refuses them, upb drops them.
                raise VarintError(too_long=False, last=byte)
            return result, pos
        shift += 7
        if shift >= 70:
            raise VarintError(too_long=True)
    raise VarintError(too_long=False)
