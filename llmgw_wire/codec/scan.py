"""A small pure-Python wire scanner: why bytes were refused, and varints over 64 bits.

Google's parser (upb) does the real work of `decode`; this module runs only
after it, on two paths:

* upb refused the bytes (`diagnose`). Its own message is vague ("Wire format
  was corrupt"), so the scanner walks the bytes the way upb does and names the
  first problem: its offset, the field and what is wrong with it. It stops at
  that problem and allocates nothing but the small slices it checks, so a
  hostile length prefix costs nothing. The walk costs far more per field than
  upb's parse, so it stops after `EXPLAIN_FIELDS` fields and says so.
* upb accepted the bytes (`over_64_bits`). upb drops the bits past the 64th
  of a ten-byte varint, where Go's runtime refuses the message; a regular
  expression rules such a varint out at C speed, and the walk decides only
  for bytes with a suspect run.

The depth and size rules are upb's: at most 100 levels of sub-messages and
groups, tags of at most 32 bits, field numbers 1 to 2**29 - 1, varints of at
most 10 bytes, lengths of at most 5.
"""

from __future__ import annotations

import codecs
import re
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from google.protobuf.descriptor import FieldDescriptor

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor

__all__ = [
    "EXPLAIN_FIELDS",
    "MAX_DEPTH",
    "WALK_STEPS",
    "Problem",
    "diagnose",
    "field_numbers",
    "over_64_bits",
]

#: upb's default recursion limit: sub-messages and groups, the top message excluded.
MAX_DEPTH = 100

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5

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
    def __init__(self, too_long: bool, last: int | None = None) -> None:
        self.too_long = too_long
        # The tenth byte, when it carries bits past the 64th.
        self.last = last


class _Cut(Exception):  # noqa: N818 - private, turned into a Problem
    """The walk reached its budget of fields before it found the problem."""

    def __init__(self, offset: int, fields: int) -> None:
        super().__init__(offset)
        self.offset = offset
        self.fields = fields


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
            if shift == 63 and byte > 1:
                # Bits past the 64th: Go's runtime refuses them, upb drops them.
                raise _VarintError(too_long=False, last=byte)
            return result, pos
        shift += 7
        if shift >= 70:
            raise _VarintError(too_long=True)
    raise _VarintError(too_long=False)


def _varint_problem(exc: _VarintError, what: str, at: int) -> _Bad:
    if exc.last is not None:
        return _Bad(
            at,
            f"{what} at offset {at} carries more than 64 bits (its tenth byte is {exc.last:#04x})",
        )
    if exc.too_long:
        return _Bad(at, f"{what} at offset {at} is longer than 10 bytes")
    return _Bad(at, f"the bytes end inside {what} at offset {at}")


class _Scanner:
    """Walks one message's bytes as upb does; raises `_Bad` at the first problem.

    The happy path builds no strings and no paths: the loop runs over every
    field of a message upb refused, possibly megabytes of them.
    """

    def __init__(self, data: bytes, *, budget: int | None = None) -> None:
        self.data = data
        # Fields left to walk before giving up: the walk costs far more per
        # byte than upb's parse, so the explanation of a refusal is bounded.
        self.budget = budget if budget is not None else -1

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
            if not self.budget:
                raise _Cut(at, 0)
            self.budget -= 1
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


def _scan(data: bytes, descriptor: Descriptor, budget: int | None = None) -> Problem | None:
    try:
        _Scanner(data, budget=budget).message(0, len(data), _fields(descriptor), 0)
    except _Bad as bad:
        return Problem(bad.offset, bad.reason, tuple(bad.path))
    except _Cut as cut:
        return Problem(
            cut.offset,
            f"malformed bytes; the explanation stopped at offset {cut.offset}, after "
            f"{budget} fields, before it found what is wrong",
            (),
        )
    return None


#: The most fields `over_64_bits` looks at one by one (sub-messages, groups,
#: packed runs, long strings; runs of small fields cost none): at most about
#: 0.4 s, for the costliest fields (empty unknown groups).
WALK_STEPS = 150_000

#: The most fields `diagnose` walks to explain a refusal: about a tenth of a
#: second of pure Python, where upb took far less to refuse the bytes.
EXPLAIN_FIELDS = 50_000

# Exactly nine bytes with their continuation bit (a longer run is a varint of
# more than ten bytes, which upb refuses) and a tenth that carries bits past
# the 64th: every varint over 64 bits in bytes upb accepted is such a run, so
# bytes without one have none. A run inside a string is possible (three CJK
# characters, then ASCII); then the walk decides.
_OVER_64_BITS = re.compile(rb"(?<![\x80-\xff])[\x80-\xff]{9}[\x02-\x7f]")
# Each byte as 1 when its high bit is set, else 0; and nine such in a row.
_HIGH_BIT = bytes(1 if byte & 0x80 else 0 for byte in range(256))
_NINE_HIGH = b"\x01" * 9
_CHUNK = 64 * 1024


def _nine_high_bytes(data: bytes) -> bool:
    """Whether nine bytes in a row have the high bit set, as a varint of over 64 bits needs.

    `bytes.translate` and `in` run at C speed, much faster than the regular
    expression, which then runs only on the rare input that passes; chunked,
    overlapping by eight bytes, so that the copy stays small.
    """
    return any(
        _NINE_HIGH in data[start : start + _CHUNK + 8].translate(_HIGH_BIT)
        for start in range(0, len(data), _CHUNK)
    )


def _tag_bytes(wire_type: int) -> bytes:
    """A character class of the first bytes of tags of `wire_type`, one-byte and longer."""
    one = bytes(b for b in range(8, 128) if b & 7 == wire_type)
    more = bytes(b for b in range(128, 256) if b & 7 == wire_type)
    return b"(?:[" + re.escape(one) + b"]|[" + re.escape(more) + rb"][\x80-\xff]{0,3}[\x00-\x7f])"


_SMALL_LENGTHS = b"|".join(b"\\x%02x.{%d}" % (n, n) for n in range(128))


@cache
def _skipper(descriptor: Descriptor | None) -> re.Pattern[bytes]:
    """A run of fields with no varint over 64 bits that need no look inside, at C speed.

    Varint fields whose varint is at most 64 bits, fixed-size fields, and short
    length-delimited fields that hold no varint of this message (strings, and
    numbers no field of it has); anything else ends the run, and the walk
    looks at it in Python.
    """
    fields = _fields(descriptor) if descriptor is not None else {}
    opaque = bytes(
        n << 3 | _LEN
        for n in range(1, 16)
        if n not in fields or (fields[n].message is None and not fields[n].packed)
    )

    # Tags of two bytes or more whose number no field of this message has, or
    # a string's: grouped by the second byte (the number's bits above the 4th).
    def opaque_number(n: int) -> bool:
        return n not in fields or (fields[n].message is None and not fields[n].packed)

    top = max(fields, default=0) >> 4
    by_second = [
        b"["
        + re.escape(
            bytes(
                0x80 | (n & 0xF) << 3 | _LEN
                for n in range(16 * hi, 16 * hi + 16)
                if opaque_number(n)
            )
        )
        + b"]"
        + re.escape(bytes([hi]))
        for hi in range(1, top + 1)
        if any(opaque_number(n) for n in range(16 * hi, 16 * hi + 16))
    ]
    longer = bytes(b for b in range(128, 256) if b & 7 == _LEN)
    beyond = (
        b"[" + re.escape(longer) + b"](?:[" + re.escape(bytes(range(top + 1, 128))) + rb"]"
        rb"|[\x80-\xff]{1,3}[\x00-\x7f])"
    )
    unknown_long = b"|".join([*by_second, beyond])
    varint = rb"(?:[\x80-\xff]{0,8}[\x00-\x7f]|[\x80-\xff]{9}[\x00\x01])"
    alternatives = [
        _tag_bytes(_VARINT) + varint,
        _tag_bytes(_I64) + b".{8}",
        _tag_bytes(_I32) + b".{4}",
        b"(?:[" + re.escape(opaque) + b"]|" + unknown_long + b")(?:" + _SMALL_LENGTHS + b")",
    ]
    # At most a thousand fields a match: the engine keeps a backtracking
    # state per repetition, so one unbounded match over megabytes of small
    # fields would take memory in proportion (about 170 bytes a field).
    return re.compile(b"(?:" + b"|".join(alternatives) + b"){1,1000}", re.DOTALL)


def _walk_64_value(
    data: bytes, pos: int, end: int, at: int, field: _Field | None, steps: list[int]
) -> tuple[int | None, int]:
    """`_walk_64` for one length-delimited value, its tag at `at` read."""
    length, pos = _varint(data, pos, end)
    stop = pos + length
    if field is not None and field.message is not None:
        found, _ = _walk_64(data, pos, stop, field.message, steps)
        return found, stop
    if field is not None and field.packed and _OVER_64_BITS.search(data, pos, stop):
        # A packed run is nothing but varints: the run is one of them.
        return at, stop
    return None, stop


def _walk_64(
    data: bytes, pos: int, end: int, descriptor: Descriptor | None, steps: list[int]
) -> tuple[int | None, int]:
    """The offset of the first field with a varint over 64 bits, and where the walk ended.

    For bytes upb accepted: every tag, length and group is well formed. Inside
    a group (`descriptor` None), the walk ends after its end-group tag.
    """
    skip = _skipper(descriptor).match
    fields = _fields(descriptor) if descriptor is not None else {}
    while pos < end:
        run = skip(data, pos, end)
        if run is not None:
            pos = run.end()
            if pos >= end:
                break
        at = pos
        # Each field the walk looks at in Python spends one step.
        steps[0] -= 1
        if steps[0] < 0:
            raise _Cut(at, 0)
        key, pos = _varint(data, pos, end)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            try:
                pos = _varint(data, pos, end)[1]
            except _VarintError:
                return at, pos
        elif wire_type in (_I64, _I32):
            pos += 8 if wire_type == _I64 else 4
        elif wire_type == _LEN:
            found, pos = _walk_64_value(data, pos, end, at, fields.get(number), steps)
            if found is not None:
                return found, pos
        elif wire_type == _SGROUP:
            found, pos = _walk_64(data, pos, end, None, steps)
            if found is not None:
                return found, pos
        else:  # the end of the group this walk is in
            return None, pos
    return None, pos


def diagnose(
    data: bytes, descriptor: Descriptor, budget: int | None = EXPLAIN_FIELDS
) -> Problem | None:
    """The first problem in `data` as a `descriptor` message, or None if it has none.

    Meant for bytes upb refused: it names what upb found wrong. None means the
    scanner agrees with no refusal, which the tests treat as a bug. The walk
    stops after `budget` fields (None: no limit), and the problem then says so.
    """
    return _scan(data, descriptor, budget)


def over_64_bits(data: bytes, descriptor: Descriptor) -> Problem | None:
    """A varint of more than 64 bits in bytes upb accepted, or None if there is none.

    upb drops the bits past the 64th of a ten-byte varint; Go's runtime (and
    the protobuf specification) refuses such a varint. A regular expression
    rules out nearly every message at C speed; bytes with a suspect run are
    walked, with runs of fields that need no look inside skipped by another
    regular expression, so that Python looks only at sub-messages, groups,
    packed runs and long strings.
    """
    if not _nine_high_bytes(data) or _OVER_64_BITS.search(data) is None:
        return None
    try:
        at, _ = _walk_64(data, 0, len(data), descriptor, [WALK_STEPS])
    except _Cut as cut:
        # Refused rather than accepted unchecked: accepting would risk
        # dropping the bits of a varint that Go's runtime refuses.
        suspect = _OVER_64_BITS.search(data)
        where = suspect.start() if suspect else cut.offset
        return Problem(
            cut.offset,
            f"the bytes at offset {where} may be a varint of more than 64 bits (which Go's "
            f"runtime refuses); refused, as the walk to tell stopped at offset {cut.offset}, "
            f"after {WALK_STEPS} fields it had to look at one by one",
            (),
        )
    if at is None:
        return None
    # Found: the scanner names the field and its path, within its budget.
    problem = _scan(data, descriptor, EXPLAIN_FIELDS)
    if problem is not None and "more than 64 bits" in problem.reason:
        return problem
    return Problem(at, f"the field at offset {at} has a varint of more than 64 bits", ())


def field_numbers(data: bytes, budget: int = EXPLAIN_FIELDS) -> tuple[int, ...]:
    """The numbers of the top-level fields of bytes upb accepted, among the first `budget`.

    For naming what a message carries that this version does not know (an
    envelope's newer member) without building an object per unknown field.
    """
    scanner = _Scanner(data)
    numbers: set[int] = set()
    pos, end = 0, len(data)
    try:
        for _ in range(budget):
            if pos >= end:
                break
            at = pos
            number, wire_type, pos = scanner.tag(pos, end)
            numbers.add(number)
            pos = scanner.value(pos, end, at, number, wire_type, None, 0)
    except _Bad:
        pass  # not for bytes upb refused; what was read so far is the answer
    return tuple(sorted(numbers))
