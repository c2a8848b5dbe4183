"""The rules: buf's WIRE and WIRE_JSON breaking rules, each registered where it is defined.

A rule is a function of one pair of elements of its kind (the same file,
message, field, enum or RPC in the old and the new schema) that yields what
it finds. `@rule(NAME, categories, kind)` registers it under buf's name;
`RULES` is the registry, by name. Fields include extensions, which buf pairs
by extended message and number and checks with the same field rules.
"""

from __future__ import annotations

import codecs
import math
import struct
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs
from google.protobuf import descriptor_pb2

from llmgw_wire.compat._model import EXPLICIT, IMPLICIT, MAP, REPEATED, Schema, SchemaElement

if TYPE_CHECKING:
    from collections.abc import Mapping

    from google.protobuf.message import Message

__all__ = ["CATEGORIES", "RULES", "BreakingRule", "ElementPair", "Hit", "rule"]

#: The categories the checker knows, strictest last.
CATEGORIES = ("WIRE", "WIRE_JSON")

_D = descriptor_pb2
_FDP = _D.FieldDescriptorProto

# Where things are inside a descriptor, as source_code_info paths.
_FILE_PACKAGE = (_D.FileDescriptorProto.PACKAGE_FIELD_NUMBER,)
_FIELD_NAME = (_FDP.NAME_FIELD_NUMBER,)
_FIELD_TYPE = (_FDP.TYPE_FIELD_NUMBER,)
_FIELD_TYPE_NAME = (_FDP.TYPE_NAME_FIELD_NUMBER,)
_FIELD_DEFAULT = (_FDP.DEFAULT_VALUE_FIELD_NUMBER,)
_FIELD_JSON_NAME = (_FDP.JSON_NAME_FIELD_NUMBER,)
_VALUE_NUMBER = (_D.EnumValueDescriptorProto.NUMBER_FIELD_NUMBER,)
_METHOD_INPUT = (_D.MethodDescriptorProto.INPUT_TYPE_FIELD_NUMBER,)
_METHOD_OUTPUT = (_D.MethodDescriptorProto.OUTPUT_TYPE_FIELD_NUMBER,)
_METHOD_IDEMPOTENCY = (
    _D.MethodDescriptorProto.OPTIONS_FIELD_NUMBER,
    _D.MethodOptions.IDEMPOTENCY_LEVEL_FIELD_NUMBER,
)
_MESSAGE_JSON_FORMAT = (
    _D.DescriptorProto.OPTIONS_FIELD_NUMBER,
    _D.MessageOptions.FEATURES_FIELD_NUMBER,
    _D.FeatureSet.JSON_FORMAT_FIELD_NUMBER,
)
_ENUM_JSON_FORMAT = (
    _D.EnumDescriptorProto.OPTIONS_FIELD_NUMBER,
    _D.EnumOptions.FEATURES_FIELD_NUMBER,
    _D.FeatureSet.JSON_FORMAT_FIELD_NUMBER,
)

# The largest field number and enum value, for "10 to max" in messages.
_MAX_FIELD_NUMBER = 536_870_911
_MAX_ENUM_VALUE = 2_147_483_647

# Protobuf's "Updating a message type" rules: a field may change between the
# types of one group and stay readable on the wire. string and bytes are kept
# apart because a bytes value need not be UTF-8; string to bytes alone is
# allowed (in the rule below), as buf allows it.
_WIRE_TYPE_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"int32", "uint32", "int64", "uint64", "bool"}),
    frozenset({"sint32", "sint64"}),
    frozenset({"fixed32", "sfixed32"}),
    frozenset({"fixed64", "sfixed64"}),
)
# The changes that stay readable both on the wire and in JSON, where 64-bit
# integers are strings and bool is not a number.
_WIRE_JSON_TYPE_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"int32", "uint32"}),
    frozenset({"int64", "uint64"}),
    frozenset({"fixed32", "sfixed32"}),
    frozenset({"fixed64", "sfixed64"}),
)
# Presence does not change the encoding of a present value; a repeated field
# and a map are the same records on the wire but not in JSON.
_WIRE_CARDINALITY_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({EXPLICIT, IMPLICIT}),
    frozenset({REPEATED, MAP}),
)
_WIRE_JSON_CARDINALITY_GROUPS: tuple[frozenset[str], ...] = (frozenset({EXPLICIT, IMPLICIT}),)


@attrs.frozen
class ElementPair:
    """The same element in the old and the new schema (not the mapping's `Pair`)."""

    old: SchemaElement
    new: SchemaElement
    old_schema: Schema
    new_schema: Schema


@attrs.frozen
class Hit:
    """A problem a rule found: the sentence, and where it is in the new schema."""

    node: SchemaElement
    text: str
    where: tuple[int, ...] = ()  # a path below node


@attrs.frozen
class BreakingRule:
    """A registered breaking rule: buf's name, its categories, what it pairs, the check."""

    name: str
    categories: frozenset[str]
    kind: str  # "file", "message", "field", "enum" or "method"
    check: Callable[[ElementPair], Iterator[Hit]]


_REGISTRY: dict[str, BreakingRule] = {}
_BOTH = CATEGORIES
_WIRE = ("WIRE",)
_JSON = ("WIRE_JSON",)


def rule(
    name: str, categories: tuple[str, ...], kind: str
) -> Callable[[Callable[[ElementPair], Iterator[Hit]]], Callable[[ElementPair], Iterator[Hit]]]:
    """Register the decorated function as buf's rule `name` in `categories`."""

    def register(
        check: Callable[[ElementPair], Iterator[Hit]],
    ) -> Callable[[ElementPair], Iterator[Hit]]:
        assert name not in _REGISTRY, name
        _REGISTRY[name] = BreakingRule(name, frozenset(categories), kind, check)
        return check

    return register


# ---------------------------------------------------------------- helpers


def _q(text: str) -> str:
    return f'"{text}"'


def _field_label(field: SchemaElement) -> str:
    if field.extension:
        return f"extension {field.proto.number} {_q(field.name)} of message {field.extendee}"
    return f"field {field.proto.number} {_q(field.proto.name)} of message {field.parent}"


def _same_group(groups: tuple[frozenset[str], ...], old: str, new: str) -> bool:
    return old == new or any(old in group and new in group for group in groups)


def _describe_type(field: SchemaElement, schema: Schema) -> str:
    kind = schema.field_kind(field)
    if kind in ("message", "group", "enum"):
        return f"{kind} {schema.type_name(field)}"
    return kind


def _enum_values(schema: Schema, name: str) -> set[tuple[str, int]]:
    return {(value.name, value.number) for value in schema.enum_values(name)}


def _type_changed(p: ElementPair, groups: tuple[frozenset[str], ...]) -> bool:
    old_kind, new_kind = p.old_schema.field_kind(p.old), p.new_schema.field_kind(p.new)
    if not _same_group(groups, old_kind, new_kind):
        # A string is valid bytes; the reverse holds only for UTF-8.
        return not (groups is _WIRE_TYPE_GROUPS and (old_kind, new_kind) == ("string", "bytes"))
    old_type, new_type = p.old_schema.type_name(p.old), p.new_schema.type_name(p.new)
    if old_kind in ("message", "group"):
        # Map entries included: renaming a map field renames its entry type,
        # which buf reports as a type change.
        return old_type != new_type
    if old_kind == "enum" and old_type != new_type:
        # buf accepts another enum of the same short name that keeps every
        # value (a move between packages, say); anything else is a new type.
        return old_type.rsplit(".", 1)[-1] != new_type.rsplit(".", 1)[-1] or not _enum_values(
            p.old_schema, old_type
        ) <= _enum_values(p.new_schema, new_type)
    return False


def _oneof(field: SchemaElement, schema: Schema) -> str | None:
    # proto3 `optional` fields sit in a synthetic oneof, which is presence, not a oneof.
    if field.extension or not field.proto.HasField("oneof_index") or field.proto.proto3_optional:
        return None
    message = schema.elements["message"][field.parent]
    return str(message.proto.oneof_decl[field.proto.oneof_index].name)


def _uncovered(start: int, end: int, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [start, end] that no range in `ranges` covers (all inclusive)."""
    missing = []
    for low, high in sorted(ranges):
        if high < start:
            continue
        if low > end:
            break
        if low > start:
            missing.append((start, low - 1))
        start = max(start, high + 1)
        if start > end:
            return missing
    return [*missing, (start, end)]


def _ranges_text(ranges: list[tuple[int, int]], maximum: int) -> str:
    parts = []
    for low, high in ranges:
        if low == high:
            parts.append(str(low))
        else:
            parts.append(f"{low} to {'max' if high == maximum else high}")
    return ", ".join(parts)


def _reserved_ranges(node: SchemaElement, kind: str) -> list[tuple[int, int]]:
    # A message's reserved ranges end exclusively, an enum's inclusively.
    shift = 1 if kind == "message" else 0
    return [(r.start, r.end - shift) for r in node.proto.reserved_range]


def _values_by_number(
    proto: Message,
) -> dict[int, list[tuple[int, descriptor_pb2.EnumValueDescriptorProto]]]:
    values: dict[int, list[tuple[int, descriptor_pb2.EnumValueDescriptorProto]]] = {}
    for i, value in enumerate(proto.value):
        values.setdefault(value.number, []).append((i, value))
    return values


def _names(values: list[tuple[int, descriptor_pb2.EnumValueDescriptorProto]]) -> str:
    return ", ".join(_q(value.name) for _, value in values)


# ---------------------------------------------------------------- files


@rule("FILE_SAME_PACKAGE", _BOTH, "file")
def _file_same_package(p: ElementPair) -> Iterator[Hit]:
    old, new = p.old.proto.package, p.new.proto.package
    if old != new:
        yield Hit(
            p.new,
            f"file {p.new.file} moved from package {_q(old)} to {_q(new)}; every message, "
            "enum and service in it has a new full name, so RPC paths and type URLs "
            "no longer match older peers'.",
            _FILE_PACKAGE,
        )


# ---------------------------------------------------------------- messages


def _field_deleted(
    p: ElementPair,
    reserved: Callable[[descriptor_pb2.FieldDescriptorProto], bool],
    what: str,
    why: str,
) -> Iterator[Hit]:
    kept = {field.number for field in p.new.proto.field}
    for field in p.old.proto.field:
        if field.number not in kept and not reserved(field):
            yield Hit(
                p.new,
                f"field {field.number} {_q(field.name)} of message {p.new.name} was deleted "
                f"without reserving its {what}; {why}",
            )


@rule("FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED", _BOTH, "message")
def _field_no_delete_unless_number_reserved(p: ElementPair) -> Iterator[Hit]:
    ranges = _reserved_ranges(p.new, "message")
    return _field_deleted(
        p,
        lambda field: any(low <= field.number <= high for low, high in ranges),
        "number",
        "older peers still send it.",
    )


@rule("FIELD_NO_DELETE_UNLESS_NAME_RESERVED", _JSON, "message")
def _field_no_delete_unless_name_reserved(p: ElementPair) -> Iterator[Hit]:
    reserved = set(p.new.proto.reserved_name)
    return _field_deleted(
        p,
        lambda field: field.name in reserved,
        "name",
        "older peers still use it as a JSON key.",
    )


@rule("MESSAGE_SAME_REQUIRED_FIELDS", _BOTH, "message")
def _message_same_required_fields(p: ElementPair) -> Iterator[Hit]:
    # As buf: the `required` label of the descriptor, which an editions field
    # with features.field_presence = LEGACY_REQUIRED does not carry (its
    # cardinality, which the cardinality rules compare, is still required).
    def required(
        node: SchemaElement, schema: Schema
    ) -> dict[int, descriptor_pb2.FieldDescriptorProto]:
        del schema
        return {f.number: f for f in node.proto.field if f.label == _FDP.LABEL_REQUIRED}

    old, new = required(p.old, p.old_schema), required(p.new, p.new_schema)
    for number in sorted(old.keys() - new.keys()):
        yield Hit(
            p.new,
            f"message {p.new.name} no longer requires field {number} {_q(old[number].name)}; "
            "older peers reject messages that lack it.",
        )
    fields = p.new_schema.elements["field"]
    for number in sorted(new.keys() - old.keys()):
        yield Hit(
            fields[p.new.name, number],
            f"message {p.new.name} now requires field {number} {_q(new[number].name)}; "
            "older peers do not send it, so their messages are rejected.",
        )


def _reserved_no_delete(p: ElementPair, kind: str) -> Iterator[Hit]:
    maximum = _MAX_FIELD_NUMBER if kind == "message" else _MAX_ENUM_VALUE
    ranges = _reserved_ranges(p.new, kind)
    for low, high in _reserved_ranges(p.old, kind):
        missing = _uncovered(low, high, ranges)
        if missing:
            what = "field number" if kind == "message" else "number"
            plural = "s" if len(missing) > 1 or missing[0][0] != missing[0][1] else ""
            yield Hit(
                p.new,
                f"{kind} {p.new.name} no longer reserves {what}{plural} "
                f"{_ranges_text(missing, maximum)}; a new declaration could reuse a number "
                "that older peers give another meaning.",
            )
    kept = set(p.new.proto.reserved_name)
    for name in p.old.proto.reserved_name:
        if name not in kept:
            yield Hit(
                p.new,
                f"{kind} {p.new.name} no longer reserves the name {_q(name)}; a new "
                "declaration could reuse a name that older peers give another meaning in JSON.",
            )


@rule("RESERVED_MESSAGE_NO_DELETE", _BOTH, "message")
def _reserved_message_no_delete(p: ElementPair) -> Iterator[Hit]:
    return _reserved_no_delete(p, "message")


@rule("RESERVED_ENUM_NO_DELETE", _BOTH, "enum")
def _reserved_enum_no_delete(p: ElementPair) -> Iterator[Hit]:
    return _reserved_no_delete(p, "enum")


def _same_json_format(p: ElementPair, kind: str, where: tuple[int, ...]) -> Iterator[Hit]:
    old, new = p.old_schema.json_format(p.old), p.new_schema.json_format(p.new)
    if old == _D.FeatureSet.ALLOW and new != old:
        yield Hit(
            p.new,
            f"{kind} {p.new.name} changed its JSON format from ALLOW to "
            f"{_D.FeatureSet.JsonFormat.Name(new)}; its JSON form is no longer guaranteed.",
            where,
        )


@rule("MESSAGE_SAME_JSON_FORMAT", _JSON, "message")
def _message_same_json_format(p: ElementPair) -> Iterator[Hit]:
    return _same_json_format(p, "message", _MESSAGE_JSON_FORMAT)


@rule("ENUM_SAME_JSON_FORMAT", _JSON, "enum")
def _enum_same_json_format(p: ElementPair) -> Iterator[Hit]:
    return _same_json_format(p, "enum", _ENUM_JSON_FORMAT)


# ---------------------------------------------------------------- fields and extensions


@rule("FIELD_SAME_NAME", _JSON, "field")
def _field_same_name(p: ElementPair) -> Iterator[Hit]:
    # An extension is known by its full name, a field by its name in the message.
    old, new = (p.old.name, p.new.name) if p.new.extension else (p.old.proto.name, p.new.proto.name)
    if old != new:
        what = (
            f"extension {p.new.proto.number} of message {p.new.extendee}"
            if p.new.extension
            else f"field {p.new.proto.number} of message {p.new.parent}"
        )
        yield Hit(
            p.new,
            f"{what} was renamed from {_q(old)} to {_q(new)}; JSON and text readers "
            "no longer accept the old name.",
            _FIELD_NAME,
        )


@rule("FIELD_SAME_JSON_NAME", _JSON, "field")
def _field_same_json_name(p: ElementPair) -> Iterator[Hit]:
    # An extension's JSON key is its full name in brackets, which FIELD_SAME_NAME covers.
    if p.new.extension:
        return
    old, new = p.old_schema.json_name(p.old), p.new_schema.json_name(p.new)
    if old != new:
        yield Hit(
            p.new,
            f"{_field_label(p.new)} changed its JSON name from {_q(old)} to {_q(new)}; "
            "peers on the other version write and look for the other key.",
            _FIELD_JSON_NAME,
        )


@rule("FIELD_SAME_ONEOF", _BOTH, "field")
def _field_same_oneof(p: ElementPair) -> Iterator[Hit]:
    old, new = _oneof(p.old, p.old_schema), _oneof(p.new, p.new_schema)
    if old == new:
        return
    if old is None:
        change = f"moved into oneof {_q(new or '')}"
    elif new is None:
        change = f"moved out of oneof {_q(old)}"
    else:
        change = f"moved from oneof {_q(old)} to oneof {_q(new)}"
    yield Hit(
        p.new,
        f"{_field_label(p.new)} {change}; setting a oneof member clears the others, "
        "so peers on the two versions disagree on which fields are set.",
    )


def _field_type(p: ElementPair, groups: tuple[frozenset[str], ...], where: str) -> Iterator[Hit]:
    if not _type_changed(p, groups):
        return
    old_kind, new_kind = p.old_schema.field_kind(p.old), p.new_schema.field_kind(p.new)
    if (old_kind, new_kind) == ("bytes", "string"):
        note = "a bytes value need not be valid UTF-8, which a string must be"
    else:
        note = f"a change {where} does not allow"
    scalar = new_kind not in ("message", "group", "enum")
    yield Hit(
        p.new,
        f"{_field_label(p.new)} changed type from {_describe_type(p.old, p.old_schema)} to "
        f"{_describe_type(p.new, p.new_schema)}, {note}; peers on the two versions misread it.",
        _FIELD_TYPE if scalar else _FIELD_TYPE_NAME,
    )


@rule("FIELD_WIRE_COMPATIBLE_TYPE", _WIRE, "field")
def _field_wire_compatible_type(p: ElementPair) -> Iterator[Hit]:
    return _field_type(p, _WIRE_TYPE_GROUPS, "the wire format")


@rule("FIELD_WIRE_JSON_COMPATIBLE_TYPE", _JSON, "field")
def _field_wire_json_compatible_type(p: ElementPair) -> Iterator[Hit]:
    return _field_type(p, _WIRE_JSON_TYPE_GROUPS, "the wire format or JSON")


def _field_cardinality(
    p: ElementPair, groups: tuple[frozenset[str], ...], where: str
) -> Iterator[Hit]:
    old, new = p.old_schema.cardinality(p.old), p.new_schema.cardinality(p.new)
    if not _same_group(groups, old, new):
        yield Hit(
            p.new,
            f"{_field_label(p.new)} changed from {old} to {new}, a change {where} does not "
            "allow; peers on the two versions misread it.",
        )


@rule("FIELD_WIRE_COMPATIBLE_CARDINALITY", _WIRE, "field")
def _field_wire_compatible_cardinality(p: ElementPair) -> Iterator[Hit]:
    return _field_cardinality(p, _WIRE_CARDINALITY_GROUPS, "the wire format")


@rule("FIELD_WIRE_JSON_COMPATIBLE_CARDINALITY", _JSON, "field")
def _field_wire_json_compatible_cardinality(p: ElementPair) -> Iterator[Hit]:
    return _field_cardinality(p, _WIRE_JSON_CARDINALITY_GROUPS, "the wire format or JSON")


_INTEGERS = frozenset(
    {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64"}
    | {"sfixed32", "sfixed64"}
)


def _default(field: SchemaElement, schema: Schema) -> tuple[bytes | float, str] | None:  # noqa: PLR0911 - one per kind
    """A field's default as a comparable value and as text, if it can have one."""
    proto = field.proto
    kind = schema.field_kind(field)
    if proto.label == _FDP.LABEL_REPEATED or kind in ("message", "group"):
        return None
    text: str | None = proto.default_value if proto.HasField("default_value") else None
    if kind == "enum":
        values = schema.enum_values(schema.type_name(field))
        if text is None:
            return (values[0].number, values[0].name) if values else (0, "0")
        number = next((v.number for v in values if v.name == text), 0)
        return number, text
    if kind in ("string", "bytes"):
        if text is None:
            return b"", '""'
        raw = codecs.escape_decode(text)[0] if kind == "bytes" else text.encode()
        return raw, _q(text)
    if kind == "bool":
        value = text == "true"
        return value, repr(value)
    if kind in _INTEGERS:
        number = int(text, 0) if text is not None else 0
        return number, str(number)
    value_f = float(text) if text is not None else 0.0
    # buf compares a float's default at float precision.
    return (_float32(value_f) if kind == "float" else value_f), repr(value_f)


def _float32(value: float) -> float:
    """`value` at float precision, as a `float` field holds it (infinite when out of range)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _defaults_equal(old: bytes | float, new: bytes | float, kinds: set[str]) -> bool:
    # As buf: strings and bytes compare as bytes, and differ from any number
    # (a type change the type rules report too); numbers, bools and enums by
    # value, exactly; a float against a double at float precision.
    if isinstance(old, bytes) or isinstance(new, bytes):
        return bool(old == new)
    if isinstance(old, float) and isinstance(new, float) and math.isnan(old) and math.isnan(new):
        return True
    if kinds == {"float", "double"}:
        return _float32(old) == _float32(new)
    return bool(old == new)


@rule("FIELD_SAME_DEFAULT", _BOTH, "field")
def _field_same_default(p: ElementPair) -> Iterator[Hit]:
    old, new = _default(p.old, p.old_schema), _default(p.new, p.new_schema)
    if old is None or new is None or (not old[0] and not new[0]):
        return
    kinds = {p.old_schema.field_kind(p.old), p.new_schema.field_kind(p.new)}
    if not _defaults_equal(old[0], new[0], kinds):
        yield Hit(
            p.new,
            f"{_field_label(p.new)} changed its default from {old[1]} to {new[1]}; "
            "peers on the two versions read an unset field differently.",
            _FIELD_DEFAULT,
        )


# ---------------------------------------------------------------- enums


def _enum_value_deleted(
    p: ElementPair,
    reserved: Callable[[int, list[tuple[int, descriptor_pb2.EnumValueDescriptorProto]]], bool],
    what: str,
    why: str,
) -> Iterator[Hit]:
    new = _values_by_number(p.new.proto)
    for number, values in sorted(_values_by_number(p.old.proto).items()):
        if number not in new and not reserved(number, values):
            yield Hit(
                p.new,
                f"value {number} ({_names(values)}) of enum {p.new.name} was deleted "
                f"without reserving its {what}; {why}",
            )


@rule("ENUM_VALUE_NO_DELETE_UNLESS_NUMBER_RESERVED", _BOTH, "enum")
def _enum_value_no_delete_unless_number_reserved(p: ElementPair) -> Iterator[Hit]:
    ranges = _reserved_ranges(p.new, "enum")
    return _enum_value_deleted(
        p,
        lambda number, _: any(low <= number <= high for low, high in ranges),
        "number",
        "older peers still send it.",
    )


@rule("ENUM_VALUE_NO_DELETE_UNLESS_NAME_RESERVED", _JSON, "enum")
def _enum_value_no_delete_unless_name_reserved(p: ElementPair) -> Iterator[Hit]:
    reserved = set(p.new.proto.reserved_name)
    return _enum_value_deleted(
        p,
        lambda _, values: all(value.name in reserved for _, value in values),
        "name",
        "older peers still send it by name in JSON.",
    )


@rule("ENUM_VALUE_SAME_NAME", _JSON, "enum")
def _enum_value_same_name(p: ElementPair) -> Iterator[Hit]:
    old = _values_by_number(p.old.proto)
    for number, values in sorted(_values_by_number(p.new.proto).items()):
        if number not in old:
            continue
        # An alias may be added: a JSON reader on the old version does not
        # know the new name, but every name it writes is still read. Every
        # name the number had must stay, or old writers are not understood.
        if {v.name for _, v in old[number]} <= {v.name for _, v in values}:
            continue
        # As buf: one finding at each value that now has the number.
        for i, _ in values:
            yield Hit(
                p.new,
                f"value {number} of enum {p.new.name} was renamed from {_names(old[number])} "
                f"to {_names(values)}; JSON carries enum values by name, so peers on the "
                "two versions do not understand each other's.",
                (_D.EnumDescriptorProto.VALUE_FIELD_NUMBER, i, *_VALUE_NUMBER),
            )


# ---------------------------------------------------------------- RPCs


def _method_label(method: SchemaElement) -> str:
    return f"RPC {method.name}"


def _rpc_same_type(
    p: ElementPair, attribute: str, what: str, where: tuple[int, ...]
) -> Iterator[Hit]:
    old = getattr(p.old.proto, attribute).lstrip(".")
    new = getattr(p.new.proto, attribute).lstrip(".")
    if old != new:
        yield Hit(
            p.new,
            f"{_method_label(p.new)} changed its {what} type from {old} to {new}; "
            f"peers on the two versions decode each other's {what}s as the wrong message.",
            where,
        )


@rule("RPC_SAME_REQUEST_TYPE", _BOTH, "method")
def _rpc_same_request_type(p: ElementPair) -> Iterator[Hit]:
    return _rpc_same_type(p, "input_type", "request", _METHOD_INPUT)


@rule("RPC_SAME_RESPONSE_TYPE", _BOTH, "method")
def _rpc_same_response_type(p: ElementPair) -> Iterator[Hit]:
    return _rpc_same_type(p, "output_type", "response", _METHOD_OUTPUT)


def _rpc_same_streaming(p: ElementPair, side: str) -> Iterator[Hit]:
    attribute = f"{side}_streaming"
    old, new = getattr(p.old.proto, attribute), getattr(p.new.proto, attribute)
    if old != new:
        what = "requests" if side == "client" else "responses"
        change = f"now streams its {what}" if new else f"no longer streams its {what}"
        yield Hit(
            p.new,
            f"{_method_label(p.new)} {change}; calls between peers on the two versions fail.",
        )


@rule("RPC_SAME_CLIENT_STREAMING", _BOTH, "method")
def _rpc_same_client_streaming(p: ElementPair) -> Iterator[Hit]:
    return _rpc_same_streaming(p, "client")


@rule("RPC_SAME_SERVER_STREAMING", _BOTH, "method")
def _rpc_same_server_streaming(p: ElementPair) -> Iterator[Hit]:
    return _rpc_same_streaming(p, "server")


@rule("RPC_SAME_IDEMPOTENCY_LEVEL", _BOTH, "method")
def _rpc_same_idempotency_level(p: ElementPair) -> Iterator[Hit]:
    old, new = p.old.proto.options.idempotency_level, p.new.proto.options.idempotency_level
    if old != new:
        name = _D.MethodOptions.IdempotencyLevel.Name
        yield Hit(
            p.new,
            f"{_method_label(p.new)} changed its idempotency level from {name(old)} to "
            f"{name(new)}; clients and servers on the two versions disagree on whether "
            "a call may be retried or sent as an HTTP GET.",
            _METHOD_IDEMPOTENCY,
        )


#: Every rule the checker applies, by buf's name (sorted), with the categories it belongs to.
RULES: Mapping[str, frozenset[str]] = MappingProxyType(
    {name: _REGISTRY[name].categories for name in sorted(_REGISTRY)}
)

#: The registered rules, by name (sorted).
REGISTRY: Mapping[str, BreakingRule] = MappingProxyType({name: _REGISTRY[name] for name in RULES})
