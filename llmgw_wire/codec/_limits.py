"""The limits `decode` applies to untrusted bytes, and the element count behind them.

A message's size in memory can be far out of proportion to its bytes (an
empty element of a repeated field is two bytes on the wire and a whole object
in memory), so `decode` bounds both the input's size and its elements: every
element of every repeated field (messages, strings and numbers, packed or
not) and every map entry, at any depth, counts against one budget, checked
before the real parse of an input that could be over it (which alone costs
upb ~130 bytes of memory per input byte of empty elements), on a skeleton
parse that reads repeated messages as bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from google.protobuf import message_factory

from llmgw_wire.codec._schema import (
    CLASSES,
    COUNTED,
    DECODE_CLASSES,
    DOMAIN_CLASSES,
    FOLDED,
    SKELETONS,
)
from llmgw_wire.errors import DecodeError
from llmgw_wire.mapping._runtime import exec_generated

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from llmgw_wire.codec._typing import MessageDescriptorLike, UpbMessage

    #: A count of a message within a budget and a size (`k_` and `n_` functions).
    _Count = Callable[[UpbMessage, int, int], int]

__all__ = [
    "BYTES_PER_ITEM",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_SIZE",
    "ITEMS_ANY_SIZE",
    "check_items",
    "item_budget",
    "item_count",
    "over_budget",
]

#: The largest message `decode` accepts by default: gRPC's default limit.
DEFAULT_MAX_SIZE = 4 * 1024 * 1024

# The wire bytes per element of a realistic registration, rounded down: GPUs
# with full NVLink, NIC paths, fabric, health and MIG data (the shape of
# `llmgw_wire.testing.sample`) take 32.9 bytes per element.
_REALISTIC_BYTES_PER_ITEM = 32

#: The most elements of repeated fields and maps (GPUs, shards, labels, NIC
#: paths, NVLink peers, CPU flags, ...), at any depth, `decode` accepts by
#: default in one message: 131,072, derived from the size limit, so that a
#: realistic registration as large as the size limit (18,600 full GPUs in
#: 4 MiB, 126,516 elements), which a grpc-go peer accepts, is accepted too.
#: Besides it, a message has at most `ITEMS_ANY_SIZE` elements plus one per
#: `BYTES_PER_ITEM` of its bytes (`item_budget`).
DEFAULT_MAX_ITEMS = DEFAULT_MAX_SIZE // _REALISTIC_BYTES_PER_ITEM

#: The elements a message may have whatever its size.
ITEMS_ANY_SIZE = 10_000

#: Beyond `ITEMS_ANY_SIZE`, a message may have one element per this many of
#: its bytes. An empty element is one or two bytes on the wire but an object
#: in memory (an empty GPU about 1.2 kB of resident memory and 14 us of CPU to
#: decode, the costliest), so memory and time stay in proportion to the
#: input: 256 KiB of empty GPUs are refused, not 150 MiB and seconds of work.
#: Realistic messages have at least twice as many bytes per element.
BYTES_PER_ITEM = 16

#: The most bytes of elements that the count of a skeleton parses as one (their
#: merge): a registration of 1,000 GPUs at once, a larger input a chunk at a
#: time, so that what the count holds besides the skeleton stays bounded.
MERGE_BYTES = 256 * 1024


class _Plan:
    """What `item_count` reads of one message type.

    Attributes:
        repeated: every repeated field and map, by name: each element counts.
        nested: the repeated message fields whose elements hold repeated
            fields of their own, with the element type's full name.
        singular: the singular message fields that lead to repeated fields.
    """

    __slots__ = ("nested", "repeated", "singular")

    def __init__(self, descriptor: MessageDescriptorLike) -> None:
        fields = descriptor.fields
        self.repeated = tuple(f.name for f in fields if f.is_repeated)
        self.nested = tuple(
            (f.name, f.message_type.full_name)
            for f in fields
            if f.is_repeated and f.message_type is not None and _leads_to_items(f.message_type)
        )
        self.singular = tuple(
            f.name
            for f in fields
            if f.message_type is not None and not f.is_repeated and _leads_to_items(f.message_type)
        )


def _leads_to_items(descriptor: MessageDescriptorLike, seen: frozenset[str] = frozenset()) -> bool:
    if descriptor.full_name in seen:
        return False
    return any(
        f.is_repeated
        or (
            f.message_type is not None
            and _leads_to_items(f.message_type, seen | {descriptor.full_name})
        )
        for f in descriptor.fields
    )


def item_count(message: UpbMessage, stop_above: int | None = None) -> int:
    """Elements of every repeated field and map of `message`, at any depth.

    The count runs on a message of either `CLASSES` or `SKELETONS`
    (`llmgw_wire.codec._schema`). On a skeleton, repeated messages are bytes:
    the elements that hold repeated fields of their own are parsed one by one
    as skeletons, so that no more than one of them is in memory at a time.
    With `stop_above`, counting stops as soon as the count is over it: the
    elements looked into are then bounded by the budget, not by the input.
    """
    return _count(message, stop_above)[0]


def _count(message: UpbMessage, stop_above: int | None) -> tuple[int, bool]:
    """The count, and whether it is complete (False: stopped once over `stop_above`)."""
    limit = stop_above if stop_above is not None else float("inf")
    count = 0
    # Depth first, and an element of a skeleton parsed only when its turn comes.
    # A message, or an element's bytes with the skeleton class to parse them as.
    pending: list[tuple[UpbMessage, None] | tuple[bytes, type[UpbMessage]]] = [(message, None)]
    while pending and count <= limit:
        entry = pending.pop()
        if entry[1] is None:
            current = entry[0]
        else:
            current = entry[1]()
            current.ParseFromString(entry[0])
        plan = _PLANS[current.DESCRIPTOR.full_name]
        for name in plan.repeated:
            count += len(getattr(current, name))
        if count > limit:
            # Complete only when nothing was left to look into.
            more = any(getattr(current, name) for name, _ in plan.nested) or any(
                current.HasField(name) for name in plan.singular
            )
            return count, not pending and not more
        # The elements looked into were counted above: at most `limit` of them.
        for name, element_type in plan.nested:
            skeleton = _SKELETON_BY_NAME[element_type]
            pending.extend(
                (element, skeleton) if isinstance(element, bytes) else (element, None)
                for element in getattr(current, name)
            )
        pending.extend(
            (getattr(current, name), None) for name in plan.singular if current.HasField(name)
        )
    return count, not pending


def item_budget(size: int, max_items: int) -> int:
    """The most elements a message of `size` bytes may have, with `max_items` the most of any.

    `ITEMS_ANY_SIZE`, and one more per `BYTES_PER_ITEM` bytes of the message,
    up to `max_items`.
    """
    return min(max_items, ITEMS_ANY_SIZE + size // BYTES_PER_ITEM)


def check_items(
    message: UpbMessage,
    name: str,
    max_items: int,
    size: int | None = None,
    raw: bytes | None = None,
) -> None:
    """Raise `DecodeError` when `message` has more counted elements than its budget.

    The budget is `max_items`, or with the message's `size` in bytes,
    `item_budget(size, max_items)`. With `raw`, the bytes `message` (a
    skeleton) was parsed from, at most `MERGE_BYTES` of them, the elements
    below its own are counted on `raw` parsed as `FOLDED` when its type
    allows (`_folded_count_source`): one parse, no copy of the elements.
    """
    budget = max_items if size is None else item_budget(size, max_items)
    if raw is not None and len(raw) <= MERGE_BYTES:
        folded = _FOLDED_COUNTS.get(type(message))
        if folded is not None and folded(message, raw, budget) <= budget:
            return
    quick = _QUICK_COUNTS.get(type(message))
    at_most = DEFAULT_MAX_SIZE if size is None else size  # bytes, for a skeleton's count
    if quick is not None and quick(message, budget, at_most) <= budget:
        return
    items, complete = _count(message, budget)
    if items <= budget:
        return
    # Counting stopped once over: what was counted is then a lower bound.
    counted = f"{items}" if complete else f"at least {items}"
    what = "repeated fields and maps"
    raise DecodeError(name, over_budget(counted, what, budget, max_items, size))


def over_budget(counted: str, what: str, budget: int, max_items: int, size: int | None) -> str:
    """Why a message with `counted` elements of `what` is refused: its budget, and whence."""
    reason = f"{counted} elements of {what} is over the limit of {budget}"
    if budget < max_items:
        reason += (
            f" for {size} bytes ({ITEMS_ANY_SIZE}, and one more per {BYTES_PER_ITEM} bytes,"
            f" up to {max_items})"
        )
    return reason


def _all_descriptors(descriptors: Iterable[MessageDescriptorLike]) -> list[MessageDescriptorLike]:
    out: list[MessageDescriptorLike] = []
    stack = list(descriptors)
    while stack:
        descriptor = stack.pop()
        out.append(descriptor)
        stack.extend(descriptor.nested_types)
    return out


_REAL = _all_descriptors(cls.DESCRIPTOR for cls in CLASSES.values())

# By full name, the same for a real message and its skeleton: the fields to read.
_PLANS: dict[str, _Plan] = {d.full_name: _Plan(d) for d in _REAL}

_SKELETON_BY_NAME: dict[str, type[UpbMessage]] = {
    d.full_name: message_factory.GetMessageClass(d)
    for d in _all_descriptors(cls.DESCRIPTOR for cls in SKELETONS.values())
}


def _quick_count_source(descriptor: MessageDescriptorLike) -> str:
    """`n_<Message>(m)`: the elements of a parsed (not skeleton) message, unrolled.

    What `_count` does with its plan, as one expression per message type, so
    that a message under its budget (every message `decode` accepts) is
    counted at the cost of a `len` per repeated field; the early stop and
    the words of a refusal stay `_count`'s.
    """
    plan = _PLANS[descriptor.full_name]
    terms = [f"len(m.{name})" for name in plan.repeated]
    terms += [f"sum(map({_quick_name(element)}, m.{name}))" for name, element in plan.nested]
    terms += [
        f"({_quick_name(_message_type(descriptor, name).full_name)}(m.{name})"
        f" if m.HasField({name!r}) else 0)"
        for name in plan.singular
    ]
    return f"def {_quick_name(descriptor.full_name)}(m):\n    return {' + '.join(terms) or '0'}\n"


def _message_type(descriptor: MessageDescriptorLike, name: str) -> MessageDescriptorLike:
    """The message type of the field `name` of `descriptor`, a message field of its plan."""
    sub = descriptor.fields_by_name[name].message_type
    assert sub is not None, name  # a plan's nested and singular fields are message fields
    return sub


def _quick_name(full_name: str) -> str:
    return "n_" + full_name.replace(".", "_")


def _recursive(descriptor: MessageDescriptorLike, seen: frozenset[str] = frozenset()) -> bool:
    if descriptor.full_name in seen:
        return True
    inner = seen | {descriptor.full_name}
    return any(
        f.message_type is not None and _recursive(f.message_type, inner) for f in descriptor.fields
    )


def _mergeable(descriptor: MessageDescriptorLike) -> bool:
    """Whether the elements of a repeated field of this type count the same when parsed as one.

    The bytes of several messages, one after the other, parse as their merge:
    repeated fields and maps joined, singular sub-messages merged in turn, so
    the merge holds the elements of every one of them. A oneof keeps one
    member of the merge: where a member can hold elements, the elements are
    parsed and counted one by one instead (`_count`).
    """
    for field in descriptor.fields:
        sub = field.message_type
        if sub is None or not _leads_to_items(sub):
            continue
        if field.containing_oneof is not None or not _mergeable(sub):
            return False
    return True


def _skeleton_count_source(descriptor: MessageDescriptorLike) -> str | None:
    """`k_<Message>(m, budget, size)`: the elements of a skeleton of at most `size` bytes.

    A repeated message field of a skeleton holds its elements' bytes: they
    are counted on their merge (`_merged`), in one parse for the whole field
    rather than one per element. The count stops once over `budget`: a
    field's elements are looked into only while the count so far is within
    it, so that an input of many elements is refused on its outer count
    alone. None for a message with a oneof member that holds elements, in a
    merged element or nested deeper.
    """
    plan = _PLANS[descriptor.full_name]
    singular = [(name, _message_type(descriptor, name)) for name in plan.singular]
    if not all(_mergeable(_DESCRIPTORS[element]) for _, element in plan.nested) or not all(
        _mergeable(sub) for _, sub in singular
    ):
        return None
    own = " + ".join(f"len(m.{name})" for name in plan.repeated) or "0"
    lines = [f"def {_skeleton_name(descriptor.full_name)}(m, budget, size):", f"    n = {own}"]
    inner = [
        (
            f"m.{name}",
            f"_merged({_skeleton_name(element)}, _parse_{_quick_name(element)}, m.{name},"
            " budget - n, size)",
        )
        for name, element in plan.nested
    ]
    inner += [
        (f"m.HasField({name!r})", f"{_skeleton_name(sub.full_name)}(m.{name}, budget - n, size)")
        for name, sub in singular
    ]
    for present, count in inner:
        lines += [
            "    if n > budget:",
            "        return n",
            f"    if {present}:",
            f"        n += {count}",
        ]
    lines.append("    return n")
    return "\n".join(lines) + "\n"


def _merged(
    count: _Count,
    parse: Callable[[bytes], UpbMessage],
    elements: Sequence[bytes],
    budget: int,
    size: int,
) -> int:
    """`count` of `elements`, the bytes of a skeleton's messages of one type, on their merge.

    Joined and parsed as one message: all at once when the skeleton's `size`
    is at most `MERGE_BYTES`, else a chunk of about that many bytes at a
    time, stopping once over `budget`, so that what the merge holds stays
    bounded and an input over its budget is not read to its end.
    """
    if size <= MERGE_BYTES:
        data = b"".join(elements[:])
        return count(parse(data), budget, len(data))
    n = held = 0
    chunk: list[bytes] = []
    for element in elements:
        chunk.append(element)
        held += len(element)
        if held >= MERGE_BYTES:
            n += count(parse(b"".join(chunk)), budget - n, held)
            if n > budget:
                return n
            chunk, held = [], 0
    if chunk:
        n += count(parse(b"".join(chunk)), budget - n, held)
    return n


def _flat(descriptor: MessageDescriptorLike, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a message of this type counts the same parsed as `FOLDED`.

    So it does when it holds no repeated message field, maps aside (read as
    their entries' bytes, each an element, when the entry itself holds none),
    at any depth of its sub-messages: a repeated message field is one
    message there, the merge of its elements, whose number is lost.
    """
    if descriptor.full_name in seen:
        return False
    inner = seen | {descriptor.full_name}
    for field in descriptor.fields:
        sub = field.message_type
        if sub is None:
            continue
        if field.is_repeated:
            if not sub.GetOptions().map_entry or _leads_to_items(sub):
                return False
        elif _leads_to_items(sub) and not _flat(sub, inner):
            return False
    return True


def _folded_count_source(descriptor: MessageDescriptorLike) -> str | None:
    """`j_<Message>(m, raw, budget)`: the elements of the skeleton `m` parsed from `raw`.

    Its own elements on the skeleton (a repeated message field's are its
    elements' bytes, one each), and if within `budget`, those below them on
    `raw` parsed as `FOLDED`, where each repeated message field is the merge
    of its elements (what `_merged` parses, joined), in place. None when an
    element or a sub-message holds a repeated message field of its own
    (`_flat`), or its elements cannot be merged (`_mergeable`).
    """
    plan = _PLANS[descriptor.full_name]
    nested = [_DESCRIPTORS[element] for _, element in plan.nested]
    singular = [_message_type(descriptor, name) for name in plan.singular]
    if not (nested or singular):
        return None  # nothing below its own elements: the skeleton's count is all
    if not all(_mergeable(sub) and _flat(sub) for sub in nested) or not all(
        _flat(sub) for sub in singular
    ):
        return None
    own = " + ".join(f"len(m.{name})" for name in plan.repeated) or "0"
    below = [
        f"({_quick_name(sub.full_name)}(f.{name}) if f.HasField({name!r}) else 0)"
        for name, sub in [
            *((name, _DESCRIPTORS[element]) for name, element in plan.nested),
            *zip(plan.singular, singular, strict=True),
        ]
    ]
    lines = [
        f"def {_folded_name(descriptor.full_name)}(m, raw, budget):",
        f"    n = {own}",
        "    if n > budget:",
        "        return n",
        f"    f = _parse_folded_{_quick_name(descriptor.full_name)}(raw)",
        f"    return n + {' + '.join(below)}",
    ]
    return "\n".join(lines) + "\n"


def _folded_name(full_name: str) -> str:
    return "j_" + _quick_name(full_name)


def _skeleton_name(full_name: str) -> str:
    return "k_" + _quick_name(full_name)


def _quick_counts() -> dict[type, _Count]:
    """By parsed message class (`CLASSES`, `DECODE_CLASSES`, `DOMAIN_CLASSES`, `SKELETONS`).

    Its unrolled count.
    """
    if any(_recursive(d) for d in _REAL):
        return {}  # a message that holds itself: `_count` alone, with its stop
    # A field's elements, joined, are parsed as the skeleton's message with
    # only the fields that hold elements (`COUNTED`): the rest are skipped.
    counted = _all_descriptors(cls.DESCRIPTOR for cls in COUNTED.values())
    namespace: dict[str, Any] = {  # what the generated code defines
        f"_parse_{_quick_name(d.full_name)}": message_factory.GetMessageClass(d).FromString
        for d in counted
    }
    namespace["_merged"] = _merged
    namespace.update(
        {f"_parse_folded_{_quick_name(name)}": cls.FromString for name, cls in FOLDED.items()}
    )
    sources = {f"<llmgw_wire generated count {d.full_name}>": _quick_count_source(d) for d in _REAL}
    for d in _REAL:
        source = _skeleton_count_source(d)
        if source is not None:
            sources[f"<llmgw_wire generated skeleton count {d.full_name}>"] = source
    for name in SKELETONS:
        source = _folded_count_source(_DESCRIPTORS[name])
        if source is not None:
            sources[f"<llmgw_wire generated folded count {name}>"] = source
    exec_generated(sources, namespace)
    _FOLDED_COUNTS.update(
        {
            cls: namespace[_folded_name(name)]
            for name, cls in SKELETONS.items()
            if _folded_name(name) in namespace
        }
    )
    out: dict[type, _Count] = {}
    for name, cls in SKELETONS.items():
        # Every count a `k_` calls is written too: its types are all `_mergeable`.
        if _skeleton_name(name) in namespace:
            out[cls] = namespace[_skeleton_name(name)]
    for classes in (CLASSES, DECODE_CLASSES, DOMAIN_CLASSES):
        for name, cls in classes.items():
            out[cls] = _ignoring_budget(namespace[_quick_name(name)])
    return out


def _ignoring_budget(count: Callable[[UpbMessage], int]) -> _Count:
    # A parsed message is counted whole: upb has already spent what it holds.
    return lambda message, _budget, _size: count(message)


_DESCRIPTORS = {d.full_name: d for d in _REAL}
# By skeleton class: its count on the input parsed as `FOLDED` (`j_<Message>`).
_FOLDED_COUNTS: dict[type, Callable[[UpbMessage, bytes, int], int]] = {}
_QUICK_COUNTS = _quick_counts()
