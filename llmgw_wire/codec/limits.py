"""The limits `decode` applies to untrusted bytes, and the element count behind them.

A message's size in memory can be far out of proportion to its bytes (an
empty element of a repeated field is two bytes on the wire and a whole object
in memory), so `decode` bounds both the input's size and its elements.
"""

from __future__ import annotations

from typing import Any

from llmgw_wire.codec.schema import CLASSES, SKELETONS
from llmgw_wire.errors import DecodeError

__all__ = [
    "COUNT_FIRST_ABOVE",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_SIZE",
    "check_items",
    "item_count",
]

#: The largest message `decode` accepts by default: gRPC's default limit.
DEFAULT_MAX_SIZE = 4 * 1024 * 1024

#: The most elements of repeated message and map fields (GPUs, shards, labels,
#: ...) `decode` accepts by default in one message. An empty element is two
#: bytes on the wire but a whole object in memory, so the size limit alone
#: would let 4 MiB of input take gigabytes; this keeps memory in proportion.
DEFAULT_MAX_ITEMS = 10_000

#: Inputs larger than this are counted on a skeleton parse (repeated messages
#: as bytes) before the real parse, which alone costs upb ~130 bytes of memory
#: per input byte of empty elements. Below it, that cost is small and the
#: count runs on the parsed message.
COUNT_FIRST_ABOVE = 64 * 1024


def _counted_fields(descriptor: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Repeated message fields of a message type, and singular ones that lead to some.

    Decided on the real schema, and used for its skeleton too (where the
    repeated fields are bytes).
    """
    repeated = tuple(
        f.name for f in descriptor.fields if f.message_type is not None and _is_repeated(f)
    )
    singular = tuple(
        f.name
        for f in descriptor.fields
        if f.message_type is not None and not _is_repeated(f) and _leads_to_items(f.message_type)
    )
    return repeated, singular


def _is_repeated(field: Any) -> bool:
    return field.is_repeated  # type: ignore[no-any-return]


def _leads_to_items(descriptor: Any, seen: frozenset[str] = frozenset()) -> bool:
    if descriptor.full_name in seen:
        return False
    return any(
        f.message_type is not None
        and (_is_repeated(f) or _leads_to_items(f.message_type, seen | {descriptor.full_name}))
        for f in descriptor.fields
    )


def item_count(message: Any) -> int:
    """Elements of repeated message and map fields, outside other repeated fields.

    These are what can make a message's decoded size out of proportion to its
    bytes (an empty element is 2 bytes on the wire and a whole object in
    memory). The count runs on a message of either `CLASSES` or `SKELETONS`
    (`llmgw_wire.codec.schema`): on a skeleton the elements are bytes, so
    counting them costs no message.
    """
    repeated, singular = _COUNTED[message.DESCRIPTOR]
    count = sum(len(getattr(message, name)) for name in repeated)
    for name in singular:
        if message.HasField(name):
            count += item_count(getattr(message, name))
    return count


def check_items(message: Any, name: str, max_items: int) -> None:
    """Raise `DecodeError` when `message` has more than `max_items` counted elements."""
    items = item_count(message)
    if items > max_items:
        reason = f"{items} elements of repeated fields is over the limit of {max_items}"
        raise DecodeError(name, reason)


# By descriptor, real and skeleton alike: the fields `item_count` reads.
_COUNTED: dict[Any, tuple[tuple[str, ...], tuple[str, ...]]] = {
    classes[name].DESCRIPTOR: _counted_fields(real.DESCRIPTOR)  # type: ignore[attr-defined]
    for name, real in CLASSES.items()
    for classes in (CLASSES, SKELETONS)
}
