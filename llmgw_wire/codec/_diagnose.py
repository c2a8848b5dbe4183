"""Why upb refused bytes: the first problem, its offset, its field and what is wrong.

upb's own message is vague ("Wire format was corrupt"), so this walk reads the
bytes the way upb does (`llmgw_wire.codec._reader`) and names the first
problem. It runs only after upb refused the bytes (cold), stops at that
problem and allocates nothing but the small slices it checks, so a hostile
length prefix costs nothing. It costs far more per field than upb's parse, so
it stops after `EXPLAIN_FIELDS` fields and says so.

The depth and size rules are upb's: at most 100 levels of sub-messages and
groups, tags of at most 32 bits, field numbers 1 to 2**29 - 1, varints of at
most 10 bytes, lengths of at most 5.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

from llmgw_wire.codec._reader import (
    EGROUP,
    I32,
    I64,
    LEN,
    SGROUP,
    VARINT,
    Cut,
    Field,
    Problem,
    ProblemKind,
    VarintError,
    fields_of,
    varint,
)

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor

__all__ = ["EXPLAIN_FIELDS", "MAX_DEPTH", "diagnose", "field_numbers"]

#: upb's default recursion limit: sub-messages and groups, the top message excluded.
MAX_DEPTH = 100

#: The most fields `diagnose` walks to explain a refusal: about a tenth of a
#: second of pure Python, where upb took far less to refuse the bytes.
EXPLAIN_FIELDS = 50_000


class _Bad(Exception):  # noqa: N818 - private, turned into a Problem
    """The first problem; each enclosing field adds itself to `path` on the way out."""

    def __init__(self, offset: int, reason: str, kind: ProblemKind = ProblemKind.MALFORMED) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.kind = kind
        self.path: list[str | int] = []


def _describe(number: int, field: Field | None) -> str:
    return f"field {number} (`{field.name}`)" if field else f"unknown field {number}"


def _varint_problem(exc: VarintError, what: str, at: int) -> _Bad:
    if exc.last is not None:
        return _Bad(
            at,
            f"{what} at offset {at} carries more than 64 bits (its tenth byte is {exc.last:#04x})",
            ProblemKind.OVER_64_BITS,
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
        fields: dict[int, Field] | None,
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
                raise Cut(at, 0)
            self.budget -= 1
            number, wire_type, pos = self.tag(pos, end)
            if wire_type == EGROUP:
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
                tag, pos = varint(self.data, pos, end)
            except VarintError as exc:
                raise _varint_problem(exc, "a tag", at) from None
            if pos - at > 5 or tag > 0xFFFFFFFF:
                raise _Bad(at, f"the tag at offset {at} is larger than 32 bits")
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise _Bad(at, f"field number 0 in the tag at offset {at}")
        if wire_type > I32:
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
        field: Field | None,
        depth: int,
    ) -> int:
        """Scan one field's value, its tag read; return the offset after it."""
        known = field is not None and (
            wire_type == field.wire_type or (wire_type == LEN and field.packed)
        )
        if wire_type == VARINT:
            try:
                return varint(self.data, pos, end)[1]
            except VarintError as exc:
                what = f"the varint of {_describe(number, field)}"
                raise _varint_problem(exc, what, at) from None
        if wire_type in (I64, I32):
            size = 8 if wire_type == I64 else 4
            if end - pos < size:
                raise _Bad(
                    at,
                    f"{_describe(number, field)} at offset {at} needs {size} bytes, "
                    f"{end - pos} left",
                )
            return pos + size
        if wire_type == SGROUP:
            self.deeper(depth, at)
            return self.message(pos, end, None, depth + 1, group=(number, at))
        return self.length_delimited(pos, end, at, number, field if known else None, depth)

    def length_delimited(
        self, pos: int, end: int, at: int, number: int, field: Field | None, depth: int
    ) -> int:
        """Scan a length-delimited value; `field` is None unless it is read as that field."""
        data = self.data
        length = data[pos] if pos < end else 0x80
        if length < 0x80:
            pos += 1
        else:
            start = pos
            try:
                length, pos = varint(data, pos, end)
            except VarintError as exc:
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
            self.message(pos, stop, fields_of(field.message), depth + 1)
        elif field.packed:
            try:
                while pos < stop:
                    pos = varint(data, pos, stop)[1]
            except VarintError as exc:
                what = f"a packed varint of {_describe(number, field)}"
                raise _varint_problem(exc, what, pos) from None
        return stop

    def deeper(self, depth: int, at: int) -> None:
        if depth + 1 > MAX_DEPTH:
            raise _Bad(at, f"more than {MAX_DEPTH} nested messages and groups at offset {at}")


def diagnose(
    data: bytes, descriptor: Descriptor, budget: int | None = EXPLAIN_FIELDS
) -> Problem | None:
    """The first problem in `data` as a `descriptor` message, or None if it has none.

    Meant for bytes upb refused: it names what upb found wrong. None means the
    scanner agrees with no refusal, which the tests treat as a bug. The walk
    stops after `budget` fields (None: no limit), and the problem then says so.
    """
    try:
        _Scanner(data, budget=budget).message(0, len(data), fields_of(descriptor), 0)
    except _Bad as bad:
        return Problem(bad.offset, bad.reason, tuple(bad.path), bad.kind)
    except Cut as cut:
        return Problem(
            cut.offset,
            f"malformed bytes; the explanation stopped at offset {cut.offset}, after "
            f"{budget} fields, before it found what is wrong",
            (),
            ProblemKind.CUT,
        )
    return None


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
