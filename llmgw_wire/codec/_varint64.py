"""Varints of more than 64 bits in bytes upb accepted: the hot check of `decode`.

upb drops the bits past the 64th of a ten-byte varint, where Go's runtime
refuses the message. A translation of every byte to its class, and a search,
rule such a varint out at C speed, negative numbers included; a regular
expression, then a walk over the bytes (on the reader of
`llmgw_wire.codec._reader`), decide only for bytes with a suspect run; once
it finds one, the explainer (`llmgw_wire.codec._diagnose`) names its field.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

from llmgw_wire.codec._diagnose import EXPLAIN_FIELDS, diagnose
from llmgw_wire.codec._reader import (
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

__all__ = ["WALK_STEPS", "over_64_bits", "suspect"]

#: The most fields `over_64_bits` looks at one by one (sub-messages, groups,
#: packed runs, long strings; runs of small fields cost none): at most about
#: 0.4 s, for the costliest fields (empty unknown groups).
WALK_STEPS = 150_000

# Exactly nine bytes with their continuation bit (a longer run is a varint of
# more than ten bytes, which upb refuses) and a tenth that carries bits past
# the 64th: every varint over 64 bits in bytes upb accepted is such a run, so
# bytes without one have none. A run inside a string is possible (three CJK
# characters, then ASCII); then the walk decides.
_OVER_64_BITS = re.compile(rb"(?<![\x80-\xff])[\x80-\xff]{9}[\x02-\x7f]")
# Each byte as its class: 1 with its high bit set (a continuation byte), 2 for
# a last byte that carries bits past the 64th in a tenth place (0x02-0x7f),
# 0 for the others (0x00 and 0x01). Nine continuation bytes and such a last
# byte in a row is what every varint over 64 bits looks like, and negative
# numbers (nine continuation bytes, then 0x01) do not.
_CLASS = bytes(1 if byte & 0x80 else 2 if byte > 1 else 0 for byte in range(256))
_SUSPECT = b"\x01" * 9 + b"\x02"
_CHUNK = 64 * 1024


def suspect(data: bytes) -> bool:
    """Whether `data` may hold a varint over 64 bits: False rules it out, at C speed.

    True for nine bytes with their high bit set followed by one of 0x02-0x7f,
    the shape of every varint over 64 bits (and of some strings); the
    regular expression and the walk then decide. `bytes.translate` and `in`
    run at C speed over every byte, whatever the input holds (a negative
    number's ten bytes end in 0x01, and pass); chunked, overlapping by nine
    bytes, so that the copy stays small.
    """
    if data.isascii():
        return False  # no byte with its high bit set: a shard report, a heartbeat
    if len(data) <= _CHUNK:
        return _SUSPECT in data.translate(_CLASS)
    return any(
        _SUSPECT in data[start : start + _CHUNK + 9].translate(_CLASS)
        for start in range(0, len(data), _CHUNK)
    )


def _tag_bytes(wire_type: int) -> bytes:
    """A character class of the first bytes of tags of `wire_type`, one-byte and longer."""
    one = bytes(b for b in range(8, 128) if b & 7 == wire_type)
    more = bytes(b for b in range(128, 256) if b & 7 == wire_type)
    return b"(?:[" + re.escape(one) + b"]|[" + re.escape(more) + rb"][\x80-\xff]{0,3}[\x00-\x7f])"


_SMALLLENGTHS = b"|".join(b"\\x%02x.{%d}" % (n, n) for n in range(128))


@cache
def _skipper(descriptor: Descriptor | None) -> re.Pattern[bytes]:
    """A run of fields with no varint over 64 bits that need no look inside, at C speed.

    Varint fields whose varint is at most 64 bits, fixed-size fields, and short
    length-delimited fields that hold no varint of this message (strings, and
    numbers no field of it has); anything else ends the run, and the walk
    looks at it in Python.
    """
    fields = fields_of(descriptor) if descriptor is not None else {}

    def opaque_number(n: int) -> bool:
        """No field of this message has `n`, or its field holds no varint of this message."""
        return n not in fields or (fields[n].message is None and not fields[n].packed)

    opaque = bytes(n << 3 | LEN for n in range(1, 16) if opaque_number(n))
    # Tags of two bytes or more whose number no field of this message has, or
    # a string's: grouped by the second byte (the number's bits above the 4th).
    top = max(fields, default=0) >> 4
    by_second = [
        b"["
        + re.escape(
            bytes(
                0x80 | (n & 0xF) << 3 | LEN
                for n in range(16 * hi, 16 * hi + 16)
                if opaque_number(n)
            )
        )
        + b"]"
        + re.escape(bytes([hi]))
        for hi in range(1, top + 1)
        if any(opaque_number(n) for n in range(16 * hi, 16 * hi + 16))
    ]
    longer = bytes(b for b in range(128, 256) if b & 7 == LEN)
    beyond = (
        b"[" + re.escape(longer) + b"](?:[" + re.escape(bytes(range(top + 1, 128))) + rb"]"
        rb"|[\x80-\xff]{1,3}[\x00-\x7f])"
    )
    unknown_long = b"|".join([*by_second, beyond])
    varint = rb"(?:[\x80-\xff]{0,8}[\x00-\x7f]|[\x80-\xff]{9}[\x00\x01])"
    alternatives = [
        _tag_bytes(VARINT) + varint,
        _tag_bytes(I64) + b".{8}",
        _tag_bytes(I32) + b".{4}",
        b"(?:[" + re.escape(opaque) + b"]|" + unknown_long + b")(?:" + _SMALLLENGTHS + b")",
    ]
    # At most a thousand fields a match: the engine keeps a backtracking
    # state per repetition, so one unbounded match over megabytes of small
    # fields would take memory in proportion (about 170 bytes a field).
    return re.compile(b"(?:" + b"|".join(alternatives) + b"){1,1000}", re.DOTALL)


def _walk_64_value(
    data: bytes, pos: int, end: int, at: int, field: Field | None, steps: list[int]
) -> tuple[int | None, int]:
    """`_walk_64` for one length-delimited value, its tag at `at` read."""
    length, pos = varint(data, pos, end)
    stop = pos + length
    if stop > end:  # only in bytes upb has not parsed: see `over_64_bits`
        raise VarintError(too_long=False)
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

    For bytes upb accepted: every tag, length and group is well formed, but
    for the entries of a map of strings, which upb keeps as bytes until they
    are read (`VarintError` for a truncated varint or a length past the end
    there). Inside a group (`descriptor` None), the walk ends after its
    end-group tag.
    """
    skip = _skipper(descriptor).match
    fields = fields_of(descriptor) if descriptor is not None else {}
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
            raise Cut(at, 0)
        key, pos = varint(data, pos, end)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            try:
                pos = varint(data, pos, end)[1]
            except VarintError:
                return at, pos
        elif wire_type in (I64, I32):
            pos += 8 if wire_type == I64 else 4
        elif wire_type == LEN:
            found, pos = _walk_64_value(data, pos, end, at, fields.get(number), steps)
            if found is not None:
                return found, pos
        elif wire_type == SGROUP:
            found, pos = _walk_64(data, pos, end, None, steps)
            if found is not None:
                return found, pos
        else:  # the end of the group this walk is in
            return None, pos
    return None, pos


def over_64_bits(data: bytes, descriptor: Descriptor) -> Problem | None:
    """A varint of more than 64 bits in bytes upb accepted, or None if there is none.

    upb drops the bits past the 64th of a ten-byte varint; Go's runtime (and
    the protobuf specification) refuses such a varint. `suspect`, which the
    caller asks first, rules out nearly every message at C speed (a negative
    number's ten bytes included); the rest are checked by a regular expression
    and walked,
    with runs of fields that need no look inside skipped by another regular
    expression, so that Python looks only at sub-messages, groups, packed
    runs and long strings.
    """
    first = _OVER_64_BITS.search(data)
    if first is None:
        return None
    try:
        at, _ = _walk_64(data, 0, len(data), descriptor, [WALK_STEPS])
    except VarintError:
        # A map entry upb kept as bytes is not well formed: the entry's own
        # parse refuses the message, and names the entry, when it is read.
        return None
    except Cut as cut:
        # Refused rather than accepted unchecked: accepting would risk
        # dropping the bits of a varint that Go's runtime refuses.
        return Problem(
            cut.offset,
            f"the bytes at offset {first.start()} may be a varint of more than 64 bits (which Go's "
            f"runtime refuses); refused, as the walk to tell stopped at offset {cut.offset}, "
            f"after {WALK_STEPS} fields it had to look at one by one",
            (),
            ProblemKind.OVER_64_BITS,
        )
    if at is None:
        return None
    # Found: the scanner names the field and its path, within its budget.
    problem = diagnose(data, descriptor, EXPLAIN_FIELDS)
    if problem is not None and problem.kind is ProblemKind.OVER_64_BITS:
        return problem
    reason = f"the field at offset {at} has a varint of more than 64 bits"
    return Problem(at, reason, (), ProblemKind.OVER_64_BITS)
