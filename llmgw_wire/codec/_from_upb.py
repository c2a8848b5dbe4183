"""betterproto2 messages built from upb messages, so that betterproto2 never parses bytes.

betterproto2's own parser is pure Python, costs several microseconds a field
and is quadratic in unknown fields (each one is appended to a bytes object):
4 MiB of them took minutes. `decode(data, v1.X)` therefore parses with upb,
within the limits, and builds the betterproto2 objects from upb's message with
one generated function per message type: a keyword per field, read straight
from upb, so the cost is that of the objects themselves.

What the built message holds is what upb read: a sub-message seen twice is
merged, the last of two oneof members wins, a known field sent with another
wire type is an unknown field, not a misread value. Unknown fields are
kept, each in the message it came in (`bytes(message)` writes them back, and
an envelope's newer member is seen).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from google.protobuf.descriptor import FieldDescriptor

from llmgw_wire.codec._classes import betterproto2_classes
from llmgw_wire.codec._guard import serializer
from llmgw_wire.mapping._runtime import exec_generated

if TYPE_CHECKING:
    from collections.abc import Callable

    import betterproto2

    from llmgw_wire.codec._typing import UpbMessage

    #: Builds the betterproto2 message of one proto type from upb's.
    _Build = Callable[[UpbMessage], betterproto2.Message]

__all__ = ["build", "top_level_unknown"]


def _fn_name(full_name: str, prefix: str = "b") -> str:
    return f"{prefix}_{full_name.replace('.', '_')}"


def _value(field: FieldDescriptor, source: str, names: dict[str, object], prefix: str) -> str:
    """Source: the betterproto2 value of one non-repeated upb value `source` of `field`."""
    if field.message_type is not None:
        return f"{_fn_name(field.message_type.full_name, prefix)}({source})"
    if field.enum_type is not None:
        enum = f"E_{field.enum_type.full_name.replace('.', '_')}"
        names[enum] = _enum_class(field.enum_type.full_name)
        return f"{enum}({source})"
    return source


def _enum_class(full_name: str) -> type:
    # betterproto2 names a nested enum after its message: ShardStatus.State -> ShardStatusState.
    from llmgw_wire import v1

    enum: type = getattr(v1, full_name.removeprefix("llmgw.v1.").replace(".", ""))
    return enum


def _upb_string_order(item: tuple[str, object]) -> bytes:
    # upb compares the common prefix, then puts the longer key first; 0xff
    # never occurs in UTF-8, so it sorts after every byte a key can hold.
    return item[0].encode() + b"\xff"


def _field_source(field: FieldDescriptor, names: dict[str, object], prefix: str) -> str:
    get = f"m.{field.name}"
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        value = message.fields_by_name["value"]
        # In the order of upb's deterministic bytes (and so of `encode`), so
        # that the message re-encodes to the same bytes.
        key = message.fields_by_name["key"]
        order = ", key=_upb_string_order" if key.type == FieldDescriptor.TYPE_STRING else ""
        names["_upb_string_order"] = _upb_string_order
        # `decode` reads a map as its entries (`DECODE_CLASSES`): the last
        # entry for a key wins, as in a map.
        items = f"sorted({{e.key: e.value for e in {get}}}.items(){order})"
        if value.message_type is None and value.enum_type is None:
            return f"dict({items})"
        return f"{{k: {_value(value, 'v', names, prefix)} for k, v in {items}}}"
    if field.is_repeated:
        if message is None and field.enum_type is None:
            return f"list({get})"
        return f"[{_value(field, 'x', names, prefix)} for x in {get}]"
    if message is not None:
        return f"{_value(field, get, names, prefix)} if m.HasField({field.name!r}) else None"
    return _value(field, get, names, prefix)


@cache
def _builders() -> dict[str, tuple[_Build, _Build]]:
    """By proto full name: the two functions that build its betterproto2 message from upb's.

    The first drops unknown fields; the second keeps each message's own.
    """
    from llmgw_wire.codec._schema import CLASSES

    classes = betterproto2_classes()
    names: dict[str, object] = {"_unknown": top_level_unknown}
    sources: dict[str, str] = {}
    for full_name, upb_class in CLASSES.items():
        cls = classes[full_name]
        class_name = f"C_{full_name.replace('.', '_')}"
        names[class_name] = cls
        by_number = cls._betterproto.field_name_by_number  # type: ignore[attr-defined]
        for prefix in ("b", "k"):
            lines: list[str] = []
            lines.append(f"def {_fn_name(full_name, prefix)}(m):")
            lines.append(f"    o = {class_name}(")
            lines.extend(
                f"        {by_number[field.number]}={_field_source(field, names, prefix)},"
                for field in upb_class.DESCRIPTOR.fields
            )
            lines.append("    )")
            if prefix == "k":
                lines.append("    u = _unknown(m)")
                lines.append("    if u:")
                lines.append("        o._unknown_fields = u")
            lines.append("    return o")
            name = _fn_name(full_name, prefix)
            sources[f"<llmgw_wire generated upb->betterproto2 {name}>"] = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = dict(names)  # and what the generated code defines
    # One file name per function: tracebacks and debuggers show its source.
    exec_generated(sources, namespace)
    return {
        full_name: (namespace[_fn_name(full_name, "b")], namespace[_fn_name(full_name, "k")])
        for full_name in CLASSES
    }


def build(message: UpbMessage, full_name: str) -> Any:  # the class `full_name` names
    """The betterproto2 message `full_name` with what the upb `message` holds, unknown fields too.

    Whether there are unknown fields at all is one C-speed copy away; only
    then is each message's own looked for, message by message.
    """
    plain, keeping = _builders()[full_name]
    stripped = type(message)()
    stripped.CopyFrom(message)
    stripped.DiscardUnknownFields()
    if stripped.ByteSize() == message.ByteSize():
        return plain(message)
    return keeping(message)


def top_level_unknown(message: UpbMessage) -> bytes:
    """The unknown fields of the upb `message` itself (not of its sub-messages), as bytes.

    upb writes a message's unknown fields after its known ones, so they are
    the tail of its bytes past the known fields (sub-messages whole).
    """
    known = type(message)()
    for field, value in message.ListFields():
        if field.message_type is not None:
            getattr(known, field.name).MergeFrom(value)
        elif field.is_repeated:
            getattr(known, field.name).extend(value)
        else:
            setattr(known, field.name, value)
    size = known.ByteSize()
    if size == message.ByteSize():
        return b""
    return serializer(type(message))(message)[size:]
