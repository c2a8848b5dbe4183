"""Bytes: `encode` and `decode` on Google's protobuf runtime (upb).

The mapping is compiled for the upb backend, so that a domain value goes to
bytes and back with no betterproto2 object in between. Parsing is strict:
upb refuses malformed bytes, the explainer (`llmgw_wire.codec._diagnose`) says what
and where, and the limits (`llmgw_wire.codec._limits`) bound what an input can
cost.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, TypeVar, overload

from google.protobuf.message import DecodeError as _PbDecodeError

from llmgw_wire.codec._classes import betterproto2_classes, not_top_level
from llmgw_wire.codec._diagnose import diagnose
from llmgw_wire.codec._from_upb import build
from llmgw_wire.codec._guard import guarded_structure, guarded_unstructure, serializer
from llmgw_wire.codec._limits import (
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_SIZE,
    ITEMS_ANY_SIZE,
    check_items,
    item_budget,
)
from llmgw_wire.codec._schema import CLASSES, DECODE_CLASSES, DOMAIN_CLASSES, SKELETONS, STR_ENTRY
from llmgw_wire.codec._varint64 import over_64_bits, suspect
from llmgw_wire.errors import DecodeError

if TYPE_CHECKING:
    from collections.abc import Callable

    import betterproto2
    from google.protobuf.message import Message

    from llmgw_wire.mapping._compiler import Compiled, FillFunction, StructureFunction
    from llmgw_wire.mapping._table import ModelWithMessage

__all__ = ["compiled_upb", "decode", "encode", "parse"]

T = TypeVar("T")
#: A `llmgw_wire.v1` message class: `decode(data, v1.Register)` is a `v1.Register`.
M = TypeVar("M", bound="betterproto2.Message")


@cache
def compiled_upb() -> Compiled:
    """The mapping compiled for upb, once per process."""
    # The mapping's table and compiler load here, on first use, not at import.
    from llmgw_wire.mapping import STATE_NUMBERS
    from llmgw_wire.mapping._compiler import Upb, compile_backend

    return compile_backend(Upb(CLASSES, dict(STATE_NUMBERS), STR_ENTRY))


def encode(value: ModelWithMessage) -> bytes:
    """Serialise a domain value as its wire message.

    `value` is a value of a domain model with a wire message of its own
    (`Node`, `Registration`, `ShardCommand`, ...: `ModelWithMessage`); a type
    checker refuses any other. A `llmgw_wire.v1` message is already its bytes:
    `bytes(message)`.

    The bytes are deterministic (map entries sorted), so the same value always
    gives the same bytes.

    Raises:
        EncodeError: a value the wire cannot carry, with its path.
        TypeError: `value` is not a domain model with a wire message of its own.
    """
    encoder = _ENCODERS.get(type(value)) or _upb_encoder(type(value))
    return encoder(value)


# By domain model: its whole path to bytes, made on first use (when the upb
# backend is compiled) so that encode() is one lookup and one call.
_ENCODERS: dict[type, Callable[[ModelWithMessage], bytes]] = {}


def _upb_encoder(domain: type) -> Callable[[ModelWithMessage], bytes]:
    from llmgw_wire.mapping import pair_for

    if not _ENCODERS:
        encoders = {}
        for model, fill in compiled_upb().fill.items():
            encoders[model] = _make_encoder(model, fill, CLASSES[pair_for(model).wire])
        # All at once (one C call under the GIL): another thread never sees half a table.
        _ENCODERS.update(encoders)
    return _ENCODERS.get(domain) or not_top_level(domain)


def _make_encoder(
    domain: type, fill: FillFunction, message_class: type[Message]
) -> Callable[[ModelWithMessage], bytes]:
    serialize = serializer(message_class)

    def fast(value: ModelWithMessage) -> bytes:
        message = message_class()
        fill(value, message)
        return serialize(message)

    return guarded_unstructure(fast, domain)


def parse(
    data: bytes | bytearray | memoryview,
    name: str,
    max_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
    classes: dict[str, type[Message]] = DECODE_CLASSES,
) -> Message:
    """Parse `data` strictly as the upb message `name`, within the limits; `DecodeError` if not.

    As a message of `classes`: `DECODE_CLASSES`, or `DOMAIN_CLASSES`, whose
    maps of strings are their entries' bytes, parsed (and refused) only by
    the structure functions (`decode` then parses again, to say why).
    """
    if type(data) is bytes:  # the usual input, as it is: no copy
        raw = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    else:
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    size = len(raw)
    if size > max_size:
        raise DecodeError(name, f"{size} bytes is over the limit of {max_size}")
    # Every element of a repeated field or map takes at least one byte of the
    # input, so an input of at most its budget in bytes cannot be over it (and
    # none of at most `ITEMS_ANY_SIZE` or `max_items` bytes, the budget's floor).
    counted = (size > ITEMS_ANY_SIZE or size > max_items) and size > item_budget(size, max_items)
    if counted:
        # Before the real parse builds the elements, and cheaper than a count
        # of them once built. The skeleton's count is the parsed message's:
        # once done, not again.
        counted = not _counted_first(raw, name, max_items)
    message = _parse_as(classes[name], raw, name)
    if counted:
        check_items(message, name, max_items, size)
    if raw.isascii() or not suspect(raw):  # isascii inline: no call for a heartbeat
        return message  # no varint over 64 bits: nearly every input, ruled out at C speed
    problem = over_64_bits(raw, CLASSES[name].DESCRIPTOR)
    if problem is not None:
        raise DecodeError(name, problem.reason, problem.path)
    return message


def _counted_first(raw: bytes, name: str, max_items: int) -> bool:
    """Count the elements of `raw` on a skeleton, before the real parse; False if it could not.

    The skeleton reads repeated messages as bytes, and the count parses them
    as it goes (`llmgw_wire.codec._limits.check_items`); bytes that upb cannot
    read are left to the real parse, which refuses them and says where.
    """
    skeleton = _parse_as(SKELETONS[name], raw, name)
    try:
        check_items(skeleton, name, max_items, len(raw), raw)
    except _PbDecodeError:
        return False
    return True


def _parse_as(message_class: type[Message], raw: bytes, name: str) -> Message:
    try:
        message = message_class.FromString(raw)
    except _PbDecodeError as exc:
        # upb says only that something is wrong; the scanner says what and where.
        problem = diagnose(raw, CLASSES[name].DESCRIPTOR)
        if problem is None:
            raise DecodeError(name, str(exc) or "malformed bytes") from None
        raise DecodeError(name, problem.reason, problem.path) from None
    return message


@overload
def decode(
    data: bytes | bytearray | memoryview,
    into: type[M],
    *,
    max_size: int = ...,
    max_items: int = ...,
) -> M: ...
@overload
def decode(
    data: bytes | bytearray | memoryview,
    into: type[T],
    *,
    max_size: int = ...,
    max_items: int = ...,
) -> T: ...
def decode(
    data: bytes | bytearray | memoryview,
    into: type[T],
    *,
    max_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> T:
    """Parse the wire message for `into` from `data` and return it as a domain value.

    `into` is a domain model (`Node`, `Registration`, `ShardCommand`, ...) or
    a `llmgw_wire.v1` message class. Parsing is strict: malformed bytes,
    invalid UTF-8, messages over `max_size` bytes and messages with more than
    `max_items` elements of repeated fields and maps (at any depth, numbers
    and strings included) raise `DecodeError`, so memory stays in proportion
    to the input. `docs/guides/limits.md` lists every limit.

    Raises:
        DecodeError: the bytes are not a valid message of that type.
        TypeError: `into` is neither a domain model with a wire message of its
            own nor a `llmgw_wire.v1` message class.
    """
    decoder = _DECODERS.get(into) or _upb_decoder(into)
    if decoder is None:
        wire_name = _wire_names().get(into) or not_top_level(into)
        # Parsed by upb, within the limits; betterproto2's parser never sees the bytes.
        wire: T = build(parse(data, wire_name, max_size, max_items), wire_name)
        return wire
    name, structure = decoder
    message = parse(data, name, max_size, max_items, DOMAIN_CLASSES)
    try:
        value: T = structure(message)
    except _PbDecodeError:
        # A map entry's bytes refused, or with unknown fields (whose depth
        # counts from where the entry sits): the parse with every map in
        # place says what and where, or reads it as Go's runtime does.
        value = structure(parse(data, name, max_size, max_items))
    return value


@cache
def _wire_names() -> dict[type, str]:
    """By `llmgw_wire.v1` class: its proto name (the classes loaded on first use)."""
    return {cls: name for name, cls in betterproto2_classes().items()}


# By domain model with a wire message of its own: its name and the upb
# structure function, made on first use (when the upb backend is compiled) so
# that decode() is one lookup.
_DECODERS: dict[type, tuple[str, StructureFunction]] = {}


def _upb_decoder(into: type) -> tuple[str, StructureFunction] | None:
    """`_DECODERS[into]`, the table filled first if empty; None for another type."""
    if not _DECODERS:
        from llmgw_wire.mapping import PAIRS_WITH_MESSAGE

        structure = compiled_upb().structure
        decoders = {
            p.domain: (p.wire, guarded_structure(structure[p.domain], p.domain))
            for p in PAIRS_WITH_MESSAGE
        }
        # All at once (one C call under the GIL): another thread never sees half a table.
        _DECODERS.update(decoders)
    return _DECODERS.get(into)
