"""The schema breaking-change checker, after buf's WIRE and WIRE_JSON rules.

Agents and control planes are upgraded one at a time, so for months a new
control plane talks to old agents and the reverse. `check` compares two
versions of the schema, each a `FileDescriptorSet`, and reports every change
that would make the two sides misread each other: on the wire (category
`WIRE`), or on the wire and in JSON (`WIRE_JSON`, the default).

Rule names, what each rule looks at and which category holds it are buf's
(`buf breaking`, configuration v2), so that a finding can be looked up in
buf's documentation. Elements are paired the way buf pairs them: files by
path, messages, enums and services by full name, fields by number, enum
values by number, RPCs by name. Every finding points into the new schema,
at the element that changed or, for a deletion, at the message, enum or file
it was deleted from.

The `llmgw-wire compat` command runs the check on the working `proto/`
against the baseline of the last released schema shipped in this package.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError as _ProtobufDecodeError

from llmgw_wire.errors import WireError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

__all__ = [
    "CATEGORIES",
    "RULES",
    "CompatError",
    "Finding",
    "add_arguments",
    "baseline",
    "baseline_versions",
    "check",
    "compile_protos",
    "from_git",
    "read_descriptor_set",
    "run",
]

#: The categories `check` knows, strictest last.
CATEGORIES = ("WIRE", "WIRE_JSON")

_D = descriptor_pb2
_FDP = _D.FieldDescriptorProto

# Where things are inside a descriptor, as source_code_info paths (the field
# numbers of descriptor.proto). A path with no recorded location falls back
# to its nearest enclosing element.
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

_EXPLICIT = "optional with explicit presence"
_IMPLICIT = "optional with implicit presence"
_REQUIRED = "required"
_REPEATED = "repeated"
_MAP = "map"
# Presence does not change the encoding of a present value; a repeated field
# and a map are the same records on the wire but not in JSON.
_WIRE_CARDINALITY_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({_EXPLICIT, _IMPLICIT}),
    frozenset({_REPEATED, _MAP}),
)
_WIRE_JSON_CARDINALITY_GROUPS: tuple[frozenset[str], ...] = (frozenset({_EXPLICIT, _IMPLICIT}),)

_TYPE_NAMES: dict[int, str] = {
    number: name.removeprefix("TYPE_").lower() for name, number in _FDP.Type.items()
}

# Files are compiled with the protoc that grpcio-tools ships; a module name
# rather than a literal, so that a missing install can be simulated.
_PROTOC_MODULE = "grpc_tools"
_BASELINE_NAME = re.compile(r"llmgw_v1-(\d+)\.(\d+)\.(\d+)\.binpb")


class CompatError(WireError):
    """A schema that cannot be read, compiled or found, or a bad argument to the checker."""


@attrs.frozen(order=True)
class Finding:
    """One breaking change, located in the new schema.

    Findings sort by place, then rule, which is the order `check` returns
    them in. `str(finding)` is the line the command prints, in the
    `file:line:column: RULE: sentence` form that editors and CI annotate.

    Attributes:
        path: the file's name in the descriptor set, e.g. `llmgw/v1/node.proto`.
        line: 1-based line in that file.
        column: 1-based column in that file.
        rule: buf's name of the rule broken, e.g. `FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED`.
        message: what changed and why a peer on the other version suffers from it.
    """

    path: str
    line: int
    column: int
    rule: str
    message: str

    @property
    def location(self) -> str:
        """`path:line:column`."""
        return f"{self.path}:{self.line}:{self.column}"

    def __str__(self) -> str:
        """`path:line:column: RULE: sentence`."""
        return f"{self.location}: {self.rule}: {self.message}"


# ---------------------------------------------------------------- the index


@attrs.frozen
class _Node:
    """A file, message, field, enum or RPC of one schema, with its place in the source."""

    name: str  # full name; the path for a file
    file: str
    path: tuple[int, ...]
    proto: Any  # the *DescriptorProto
    resolved: Any = None  # the descriptor pool's view, which resolves editions features
    parent: str = ""  # the enclosing message's full name, "" at file level


@attrs.frozen
class _Schema:
    """One side of a comparison, indexed the way buf pairs elements."""

    elements: dict[str, dict[object, _Node]]
    spans: dict[tuple[str, tuple[int, ...]], tuple[int, int]]
    syntax: dict[str, str]

    def locate(self, node: _Node, sub: tuple[int, ...] = ()) -> tuple[int, int]:
        """Line and column of `node` (or of its part `sub`), or of what encloses it."""
        path = node.path + sub
        while (span := self.spans.get((node.file, path))) is None and path:
            path = path[:-1]
        return span or (1, 1)


def _pool(files: Mapping[str, Any]) -> Any:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added:
            return
        added.add(name)
        file = files.get(name)
        if file is None:
            raise CompatError(f"the descriptor set lacks {name}, which another file imports")
        for dependency in file.dependency:
            add(dependency)
        pool.Add(file)

    for name in files:
        add(name)
    return pool


def _index(fds: Any, what: str) -> _Schema:
    files = {file.name: file for file in fds.file}
    try:
        pool = _pool(files)
    except CompatError:
        raise
    except Exception as exc:  # the pool raises TypeError, KeyError, ... on a bad set
        raise CompatError(f"{what}: the descriptor set does not resolve: {exc}") from exc
    elements: dict[str, dict[object, _Node]] = {
        kind: {} for kind in ("file", "message", "field", "enum", "method")
    }
    spans: dict[tuple[str, tuple[int, ...]], tuple[int, int]] = {}
    syntax: dict[str, str] = {}

    def enum(file: Any, proto: Any, name: str, path: tuple[int, ...], parent: str) -> None:
        elements["enum"][name] = _Node(
            name, file.name, path, proto, pool.FindEnumTypeByName(name), parent
        )

    def message(file: Any, proto: Any, name: str, path: tuple[int, ...], parent: str) -> None:
        # Map entries are compared through the map field that declares them
        # (by key and value types), so renaming a map field is not a change
        # of its type.
        if proto.options.map_entry:
            return
        resolved = pool.FindMessageTypeByName(name)
        elements["message"][name] = _Node(name, file.name, path, proto, resolved, parent)
        for i, field in enumerate(proto.field):
            elements["field"][name, field.number] = _Node(
                f"{name}.{field.name}",
                file.name,
                (*path, _D.DescriptorProto.FIELD_FIELD_NUMBER, i),
                field,
                resolved.fields_by_number[field.number],
                name,
            )
        for i, nested in enumerate(proto.nested_type):
            nested_path = (*path, _D.DescriptorProto.NESTED_TYPE_FIELD_NUMBER, i)
            message(file, nested, f"{name}.{nested.name}", nested_path, name)
        for i, nested_enum in enumerate(proto.enum_type):
            enum_path = (*path, _D.DescriptorProto.ENUM_TYPE_FIELD_NUMBER, i)
            enum(file, nested_enum, f"{name}.{nested_enum.name}", enum_path, name)

    for file in fds.file:
        syntax[file.name] = file.syntax or "proto2"
        elements["file"][file.name] = _Node(file.name, file.name, (), file)
        for location in file.source_code_info.location:
            spans.setdefault(
                (file.name, tuple(location.path)), (location.span[0] + 1, location.span[1] + 1)
            )
        scope = f"{file.package}." if file.package else ""
        for i, proto in enumerate(file.message_type):
            path = (_D.FileDescriptorProto.MESSAGE_TYPE_FIELD_NUMBER, i)
            message(file, proto, scope + proto.name, path, "")
        for i, proto in enumerate(file.enum_type):
            path = (_D.FileDescriptorProto.ENUM_TYPE_FIELD_NUMBER, i)
            enum(file, proto, scope + proto.name, path, "")
        for i, service in enumerate(file.service):
            service_path = (_D.FileDescriptorProto.SERVICE_FIELD_NUMBER, i)
            for j, method in enumerate(service.method):
                name = f"{scope}{service.name}.{method.name}"
                elements["method"][name] = _Node(
                    name,
                    file.name,
                    (*service_path, _D.ServiceDescriptorProto.METHOD_FIELD_NUMBER, j),
                    method,
                )
    return _Schema(elements, spans, syntax)


@attrs.frozen
class _Pair:
    """The same element in the old and the new schema."""

    old: _Node
    new: _Node
    old_schema: _Schema
    new_schema: _Schema


@attrs.frozen
class _Hit:
    """A problem a rule found: the sentence, and where it is in the new schema."""

    node: _Node
    text: str
    where: tuple[int, ...] = ()  # a path below node


# ---------------------------------------------------------------- helpers


def _q(text: str) -> str:
    return f'"{text}"'


def _field_label(field: _Node) -> str:
    return f"field {field.proto.number} {_q(field.proto.name)} of message {field.parent}"


def _same_group(groups: tuple[frozenset[str], ...], old: str, new: str) -> bool:
    return old == new or any(old in group and new in group for group in groups)


def _is_map(resolved: Any) -> bool:
    return bool(
        resolved.is_repeated
        and resolved.message_type is not None
        and resolved.message_type.GetOptions().map_entry
    )


def _kind(resolved: Any) -> str:
    return _MAP if _is_map(resolved) else _TYPE_NAMES[resolved.type]


def _describe_type(resolved: Any) -> str:
    kind = _kind(resolved)
    if kind == _MAP:
        key, value = (
            resolved.message_type.fields_by_number[1],
            resolved.message_type.fields_by_number[2],
        )
        return f"map<{_describe_type(key)}, {_describe_type(value)}>"
    if kind in ("message", "group"):
        return f"{kind} {resolved.message_type.full_name}"
    if kind == "enum":
        return f"enum {resolved.enum_type.full_name}"
    return kind


def _enum_values(resolved_enum: Any) -> set[tuple[str, int]]:
    return {(value.name, value.number) for value in resolved_enum.values}


def _type_changed(old: Any, new: Any, groups: tuple[frozenset[str], ...]) -> bool:
    old_kind, new_kind = _kind(old), _kind(new)
    if old_kind == _MAP and new_kind == _MAP:
        return any(
            _type_changed(
                old.message_type.fields_by_number[n], new.message_type.fields_by_number[n], groups
            )
            for n in (1, 2)
        )
    if not _same_group(groups, old_kind, new_kind):
        # A string is valid bytes; the reverse holds only for UTF-8.
        return not (groups is _WIRE_TYPE_GROUPS and (old_kind, new_kind) == ("string", "bytes"))
    if old_kind in ("message", "group"):
        return bool(old.message_type.full_name != new.message_type.full_name)
    if old_kind == "enum" and old.enum_type.full_name != new.enum_type.full_name:
        # buf accepts another enum of the same short name that keeps every
        # value (a move between packages, say); anything else is a new type.
        return old.enum_type.name != new.enum_type.name or not _enum_values(
            old.enum_type
        ) <= _enum_values(new.enum_type)
    return False


def _cardinality(resolved: Any) -> str:
    if resolved.is_repeated:
        return _MAP if _is_map(resolved) else _REPEATED
    if resolved.is_required:
        return _REQUIRED
    return _EXPLICIT if resolved.has_presence else _IMPLICIT


def _oneof(field: _Node, schema: _Schema) -> str | None:
    # proto3 `optional` fields sit in a synthetic oneof, which is presence, not a oneof.
    if not field.proto.HasField("oneof_index") or field.proto.proto3_optional:
        return None
    message = schema.elements["message"][field.parent]
    return str(message.proto.oneof_decl[field.proto.oneof_index].name)


def _json_format(node: _Node, schema: _Schema) -> int:
    """The resolved `json_format` feature of a message or enum."""
    syntax = schema.syntax[node.file]
    if syntax == "proto2":
        return int(_D.FeatureSet.LEGACY_BEST_EFFORT)
    if syntax == "editions":
        current: _Node | None = node
        while current is not None:
            if current.proto.options.features.HasField("json_format"):
                return int(current.proto.options.features.json_format)
            current = schema.elements["message"].get(current.parent) if current.parent else None
        file = schema.elements["file"][node.file].proto
        if file.options.features.HasField("json_format"):
            return int(file.options.features.json_format)
    return int(_D.FeatureSet.ALLOW)


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


def _reserved_ranges(node: _Node, kind: str) -> list[tuple[int, int]]:
    # A message's reserved ranges end exclusively, an enum's inclusively.
    shift = 1 if kind == "message" else 0
    return [(r.start, r.end - shift) for r in node.proto.reserved_range]


def _values_by_number(proto: Any) -> dict[int, list[tuple[int, Any]]]:
    values: dict[int, list[tuple[int, Any]]] = {}
    for i, value in enumerate(proto.value):
        values.setdefault(value.number, []).append((i, value))
    return values


def _names(values: list[tuple[int, Any]]) -> str:
    return ", ".join(_q(value.name) for _, value in values)


# ---------------------------------------------------------------- the rules
# Each rule takes one pair of elements of its kind and yields what it finds.


def _file_same_package(p: _Pair) -> Iterator[_Hit]:
    old, new = p.old.proto.package, p.new.proto.package
    if old != new:
        yield _Hit(
            p.new,
            f"file {p.new.file} moved from package {_q(old)} to {_q(new)}; every message, "
            "enum and service in it has a new full name, so RPC paths and type URLs "
            "no longer match older peers'.",
            _FILE_PACKAGE,
        )


def _field_deleted(
    p: _Pair, reserved: Callable[[Any], bool], what: str, why: str
) -> Iterator[_Hit]:
    kept = {field.number for field in p.new.proto.field}
    for field in p.old.proto.field:
        if field.number not in kept and not reserved(field):
            yield _Hit(
                p.new,
                f"field {field.number} {_q(field.name)} of message {p.new.name} was deleted "
                f"without reserving its {what}; {why}",
            )


def _field_no_delete_unless_number_reserved(p: _Pair) -> Iterator[_Hit]:
    ranges = _reserved_ranges(p.new, "message")
    return _field_deleted(
        p,
        lambda field: any(low <= field.number <= high for low, high in ranges),
        "number",
        "older peers still send it.",
    )


def _field_no_delete_unless_name_reserved(p: _Pair) -> Iterator[_Hit]:
    reserved = set(p.new.proto.reserved_name)
    return _field_deleted(
        p,
        lambda field: field.name in reserved,
        "name",
        "older peers still use it as a JSON key.",
    )


def _message_same_required_fields(p: _Pair) -> Iterator[_Hit]:
    def required(node: _Node) -> dict[int, Any]:
        return {f.number: f for f in node.resolved.fields if f.is_required}

    old, new = required(p.old), required(p.new)
    for number in sorted(old.keys() - new.keys()):
        yield _Hit(
            p.new,
            f"message {p.new.name} no longer requires field {number} {_q(old[number].name)}; "
            "older peers reject messages that lack it.",
        )
    fields = p.new_schema.elements["field"]
    for number in sorted(new.keys() - old.keys()):
        yield _Hit(
            fields[p.new.name, number],
            f"message {p.new.name} now requires field {number} {_q(new[number].name)}; "
            "older peers do not send it, so their messages are rejected.",
        )


def _reserved_no_delete(p: _Pair, kind: str) -> Iterator[_Hit]:
    maximum = _MAX_FIELD_NUMBER if kind == "message" else _MAX_ENUM_VALUE
    ranges = _reserved_ranges(p.new, kind)
    for low, high in _reserved_ranges(p.old, kind):
        missing = _uncovered(low, high, ranges)
        if missing:
            what = "field number" if kind == "message" else "number"
            plural = "s" if len(missing) > 1 or missing[0][0] != missing[0][1] else ""
            yield _Hit(
                p.new,
                f"{kind} {p.new.name} no longer reserves {what}{plural} "
                f"{_ranges_text(missing, maximum)}; a new declaration could reuse a number "
                "that older peers give another meaning.",
            )
    kept = set(p.new.proto.reserved_name)
    for name in p.old.proto.reserved_name:
        if name not in kept:
            yield _Hit(
                p.new,
                f"{kind} {p.new.name} no longer reserves the name {_q(name)}; a new "
                "declaration could reuse a name that older peers give another meaning in JSON.",
            )


def _reserved_message_no_delete(p: _Pair) -> Iterator[_Hit]:
    return _reserved_no_delete(p, "message")


def _reserved_enum_no_delete(p: _Pair) -> Iterator[_Hit]:
    return _reserved_no_delete(p, "enum")


def _message_same_json_format(p: _Pair) -> Iterator[_Hit]:
    return _same_json_format(p, "message", _MESSAGE_JSON_FORMAT)


def _enum_same_json_format(p: _Pair) -> Iterator[_Hit]:
    return _same_json_format(p, "enum", _ENUM_JSON_FORMAT)


def _same_json_format(p: _Pair, kind: str, where: tuple[int, ...]) -> Iterator[_Hit]:
    old, new = _json_format(p.old, p.old_schema), _json_format(p.new, p.new_schema)
    if old == _D.FeatureSet.ALLOW and new != old:
        yield _Hit(
            p.new,
            f"{kind} {p.new.name} changed its JSON format from ALLOW to "
            f"{_D.FeatureSet.JsonFormat.Name(new)}; its JSON form is no longer guaranteed.",
            where,
        )


def _field_same_name(p: _Pair) -> Iterator[_Hit]:
    if p.old.proto.name != p.new.proto.name:
        yield _Hit(
            p.new,
            f"field {p.new.proto.number} of message {p.new.parent} was renamed from "
            f"{_q(p.old.proto.name)} to {_q(p.new.proto.name)}; JSON and text readers "
            "no longer accept the old name.",
            _FIELD_NAME,
        )


def _field_same_json_name(p: _Pair) -> Iterator[_Hit]:
    old, new = p.old.resolved.json_name, p.new.resolved.json_name
    if old != new:
        yield _Hit(
            p.new,
            f"{_field_label(p.new)} changed its JSON name from {_q(old)} to {_q(new)}; "
            "peers on the other version write and look for the other key.",
            _FIELD_JSON_NAME,
        )


def _field_same_oneof(p: _Pair) -> Iterator[_Hit]:
    old, new = _oneof(p.old, p.old_schema), _oneof(p.new, p.new_schema)
    if old == new:
        return
    if old is None:
        change = f"moved into oneof {_q(new or '')}"
    elif new is None:
        change = f"moved out of oneof {_q(old)}"
    else:
        change = f"moved from oneof {_q(old)} to oneof {_q(new)}"
    yield _Hit(
        p.new,
        f"{_field_label(p.new)} {change}; setting a oneof member clears the others, "
        "so peers on the two versions disagree on which fields are set.",
    )


def _field_type(p: _Pair, groups: tuple[frozenset[str], ...], where: str) -> Iterator[_Hit]:
    old, new = p.old.resolved, p.new.resolved
    if not _type_changed(old, new, groups):
        return
    if (_kind(old), _kind(new)) == ("bytes", "string"):
        note = "a bytes value need not be valid UTF-8, which a string must be"
    else:
        note = f"a change {where} does not allow"
    scalar = _kind(new) not in (_MAP, "message", "group", "enum")
    yield _Hit(
        p.new,
        f"{_field_label(p.new)} changed type from {_describe_type(old)} to "
        f"{_describe_type(new)}, {note}; peers on the two versions misread it.",
        _FIELD_TYPE if scalar else _FIELD_TYPE_NAME,
    )


def _field_wire_compatible_type(p: _Pair) -> Iterator[_Hit]:
    return _field_type(p, _WIRE_TYPE_GROUPS, "the wire format")


def _field_wire_json_compatible_type(p: _Pair) -> Iterator[_Hit]:
    return _field_type(p, _WIRE_JSON_TYPE_GROUPS, "the wire format or JSON")


def _field_cardinality(p: _Pair, groups: tuple[frozenset[str], ...], where: str) -> Iterator[_Hit]:
    old, new = _cardinality(p.old.resolved), _cardinality(p.new.resolved)
    if not _same_group(groups, old, new):
        yield _Hit(
            p.new,
            f"{_field_label(p.new)} changed from {old} to {new}, a change {where} does not "
            "allow; peers on the two versions misread it.",
        )


def _field_wire_compatible_cardinality(p: _Pair) -> Iterator[_Hit]:
    return _field_cardinality(p, _WIRE_CARDINALITY_GROUPS, "the wire format")


def _field_wire_json_compatible_cardinality(p: _Pair) -> Iterator[_Hit]:
    return _field_cardinality(p, _WIRE_JSON_CARDINALITY_GROUPS, "the wire format or JSON")


def _default(resolved: Any) -> tuple[Any, str] | None:
    """A field's default as a comparable value and as text, if it can have one."""
    if resolved.is_repeated or resolved.type in (_FDP.TYPE_MESSAGE, _FDP.TYPE_GROUP):
        return None
    value = resolved.default_value
    if resolved.type == _FDP.TYPE_ENUM:
        return value, resolved.enum_type.values_by_number[value].name
    if isinstance(value, str):
        return value.encode(), _q(value)
    return value, repr(value)


def _defaults_equal(old: Any, new: Any, types: set[int]) -> bool:
    if isinstance(old, bytes) or isinstance(new, bytes):
        return bool(old == new)
    if isinstance(old, float) and isinstance(new, float) and math.isnan(old) and math.isnan(new):
        return True
    if types == {_FDP.TYPE_FLOAT, _FDP.TYPE_DOUBLE}:
        # A float default widened to double is the same value only at float precision.
        return bool(struct.pack("<f", old) == struct.pack("<f", new))
    return bool(old == new)


def _field_same_default(p: _Pair) -> Iterator[_Hit]:
    old, new = _default(p.old.resolved), _default(p.new.resolved)
    if old is None or new is None or (not old[0] and not new[0]):
        return
    types = {p.old.resolved.type, p.new.resolved.type}
    if not _defaults_equal(old[0], new[0], types):
        yield _Hit(
            p.new,
            f"{_field_label(p.new)} changed its default from {old[1]} to {new[1]}; "
            "peers on the two versions read an unset field differently.",
            _FIELD_DEFAULT,
        )


def _enum_value_deleted(
    p: _Pair, reserved: Callable[[int, list[tuple[int, Any]]], bool], what: str, why: str
) -> Iterator[_Hit]:
    new = _values_by_number(p.new.proto)
    for number, values in sorted(_values_by_number(p.old.proto).items()):
        if number not in new and not reserved(number, values):
            yield _Hit(
                p.new,
                f"value {number} ({_names(values)}) of enum {p.new.name} was deleted "
                f"without reserving its {what}; {why}",
            )


def _enum_value_no_delete_unless_number_reserved(p: _Pair) -> Iterator[_Hit]:
    ranges = _reserved_ranges(p.new, "enum")
    return _enum_value_deleted(
        p,
        lambda number, _: any(low <= number <= high for low, high in ranges),
        "number",
        "older peers still send it.",
    )


def _enum_value_no_delete_unless_name_reserved(p: _Pair) -> Iterator[_Hit]:
    reserved = set(p.new.proto.reserved_name)
    return _enum_value_deleted(
        p,
        lambda _, values: all(value.name in reserved for _, value in values),
        "name",
        "older peers still send it by name in JSON.",
    )


def _enum_value_same_name(p: _Pair) -> Iterator[_Hit]:
    old = _values_by_number(p.old.proto)
    for number, values in sorted(_values_by_number(p.new.proto).items()):
        if number not in old:
            continue
        # Aliases may be added; every name the number has now must be an old one.
        if {v.name for _, v in values} <= {v.name for _, v in old[number]}:
            continue
        for i, _ in values:
            yield _Hit(
                p.new,
                f"value {number} of enum {p.new.name} was renamed from {_names(old[number])} "
                f"to {_names(values)}; JSON carries enum values by name, so peers on the "
                "two versions do not understand each other's.",
                (_D.EnumDescriptorProto.VALUE_FIELD_NUMBER, i, *_VALUE_NUMBER),
            )


def _method_label(method: _Node) -> str:
    return f"RPC {method.name}"


def _rpc_same_type(p: _Pair, attribute: str, what: str, where: tuple[int, ...]) -> Iterator[_Hit]:
    old = getattr(p.old.proto, attribute).lstrip(".")
    new = getattr(p.new.proto, attribute).lstrip(".")
    if old != new:
        yield _Hit(
            p.new,
            f"{_method_label(p.new)} changed its {what} type from {old} to {new}; "
            f"peers on the two versions decode each other's {what}s as the wrong message.",
            where,
        )


def _rpc_same_request_type(p: _Pair) -> Iterator[_Hit]:
    return _rpc_same_type(p, "input_type", "request", _METHOD_INPUT)


def _rpc_same_response_type(p: _Pair) -> Iterator[_Hit]:
    return _rpc_same_type(p, "output_type", "response", _METHOD_OUTPUT)


def _rpc_same_streaming(p: _Pair, side: str) -> Iterator[_Hit]:
    attribute = f"{side}_streaming"
    old, new = getattr(p.old.proto, attribute), getattr(p.new.proto, attribute)
    if old != new:
        what = "requests" if side == "client" else "responses"
        change = f"now streams its {what}" if new else f"no longer streams its {what}"
        yield _Hit(
            p.new,
            f"{_method_label(p.new)} {change}; calls between peers on the two versions fail.",
        )


def _rpc_same_client_streaming(p: _Pair) -> Iterator[_Hit]:
    return _rpc_same_streaming(p, "client")


def _rpc_same_server_streaming(p: _Pair) -> Iterator[_Hit]:
    return _rpc_same_streaming(p, "server")


def _rpc_same_idempotency_level(p: _Pair) -> Iterator[_Hit]:
    old, new = p.old.proto.options.idempotency_level, p.new.proto.options.idempotency_level
    if old != new:
        name = _D.MethodOptions.IdempotencyLevel.Name
        yield _Hit(
            p.new,
            f"{_method_label(p.new)} changed its idempotency level from {name(old)} to "
            f"{name(new)}; clients and servers on the two versions disagree on whether "
            "a call may be retried or sent as an HTTP GET.",
            _METHOD_IDEMPOTENCY,
        )


@attrs.frozen
class _Rule:
    name: str
    categories: frozenset[str]
    kind: str  # what it pairs: "file", "message", "field", "enum" or "method"
    check: Callable[[_Pair], Iterator[_Hit]]


_BOTH = frozenset(CATEGORIES)
_WIRE = frozenset({"WIRE"})
_JSON = frozenset({"WIRE_JSON"})

# buf's breaking rules (configuration v2) that belong to WIRE or WIRE_JSON.
# WIRE_JSON swaps WIRE's type and cardinality rules for stricter ones.
_RULES: tuple[_Rule, ...] = (
    _Rule("ENUM_SAME_JSON_FORMAT", _JSON, "enum", _enum_same_json_format),
    _Rule(
        "ENUM_VALUE_NO_DELETE_UNLESS_NAME_RESERVED",
        _JSON,
        "enum",
        _enum_value_no_delete_unless_name_reserved,
    ),
    _Rule(
        "ENUM_VALUE_NO_DELETE_UNLESS_NUMBER_RESERVED",
        _BOTH,
        "enum",
        _enum_value_no_delete_unless_number_reserved,
    ),
    _Rule("ENUM_VALUE_SAME_NAME", _JSON, "enum", _enum_value_same_name),
    _Rule(
        "FIELD_NO_DELETE_UNLESS_NAME_RESERVED",
        _JSON,
        "message",
        _field_no_delete_unless_name_reserved,
    ),
    _Rule(
        "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED",
        _BOTH,
        "message",
        _field_no_delete_unless_number_reserved,
    ),
    _Rule("FIELD_SAME_DEFAULT", _BOTH, "field", _field_same_default),
    _Rule("FIELD_SAME_JSON_NAME", _JSON, "field", _field_same_json_name),
    _Rule("FIELD_SAME_NAME", _JSON, "field", _field_same_name),
    _Rule("FIELD_SAME_ONEOF", _BOTH, "field", _field_same_oneof),
    _Rule("FIELD_WIRE_COMPATIBLE_CARDINALITY", _WIRE, "field", _field_wire_compatible_cardinality),
    _Rule("FIELD_WIRE_COMPATIBLE_TYPE", _WIRE, "field", _field_wire_compatible_type),
    _Rule(
        "FIELD_WIRE_JSON_COMPATIBLE_CARDINALITY",
        _JSON,
        "field",
        _field_wire_json_compatible_cardinality,
    ),
    _Rule("FIELD_WIRE_JSON_COMPATIBLE_TYPE", _JSON, "field", _field_wire_json_compatible_type),
    _Rule("FILE_SAME_PACKAGE", _BOTH, "file", _file_same_package),
    _Rule("MESSAGE_SAME_JSON_FORMAT", _JSON, "message", _message_same_json_format),
    _Rule("MESSAGE_SAME_REQUIRED_FIELDS", _BOTH, "message", _message_same_required_fields),
    _Rule("RESERVED_ENUM_NO_DELETE", _BOTH, "enum", _reserved_enum_no_delete),
    _Rule("RESERVED_MESSAGE_NO_DELETE", _BOTH, "message", _reserved_message_no_delete),
    _Rule("RPC_SAME_CLIENT_STREAMING", _BOTH, "method", _rpc_same_client_streaming),
    _Rule("RPC_SAME_IDEMPOTENCY_LEVEL", _BOTH, "method", _rpc_same_idempotency_level),
    _Rule("RPC_SAME_REQUEST_TYPE", _BOTH, "method", _rpc_same_request_type),
    _Rule("RPC_SAME_RESPONSE_TYPE", _BOTH, "method", _rpc_same_response_type),
    _Rule("RPC_SAME_SERVER_STREAMING", _BOTH, "method", _rpc_same_server_streaming),
)

#: Every rule `check` applies, by buf's name, with the categories it belongs to.
RULES: Mapping[str, frozenset[str]] = MappingProxyType(
    {rule.name: rule.categories for rule in _RULES}
)


# ---------------------------------------------------------------- the API


def check(old: Any, new: Any, *, category: str = "WIRE_JSON") -> list[Finding]:
    """Compare two versions of a schema and list the changes that break peers.

    Args:
        old: the schema peers may still run, as a `FileDescriptorSet`.
        new: the schema being checked, as a `FileDescriptorSet` built with
            source info (else every finding points at line 1 of its file).
        category: `"WIRE"` or `"WIRE_JSON"`.

    Returns:
        The findings, sorted by file, line, column and rule; empty when the
        new schema is compatible.

    Raises:
        CompatError: `category` is not one of `CATEGORIES`, or a descriptor
            set does not resolve.
    """
    if category not in CATEGORIES:
        raise CompatError(f"Expected a category in {', '.join(CATEGORIES)}, got {category!r}")
    old_schema, new_schema = _index(old, "the old schema"), _index(new, "the new schema")
    findings = []
    for rule in _RULES:
        if category not in rule.categories:
            continue
        new_elements = new_schema.elements[rule.kind]
        for key, old_node in old_schema.elements[rule.kind].items():
            new_node = new_elements.get(key)
            if new_node is None:
                continue
            for hit in rule.check(_Pair(old_node, new_node, old_schema, new_schema)):
                line, column = new_schema.locate(hit.node, hit.where)
                findings.append(Finding(hit.node.file, line, column, rule.name, hit.text))
    return sorted(findings)


def _parse(data: bytes, source: str) -> Any:
    fds = _D.FileDescriptorSet()
    try:
        fds.ParseFromString(data)
    except _ProtobufDecodeError as exc:
        raise CompatError(f"{source} is not a FileDescriptorSet: {exc}") from exc
    if not fds.file:
        raise CompatError(
            f"{source} holds no schema files; expected a FileDescriptorSet "
            "(protoc --descriptor_set_out)"
        )
    return fds


def read_descriptor_set(path: str | os.PathLike[str]) -> Any:
    """Read a `FileDescriptorSet` from a `.binpb` file.

    Raises:
        CompatError: the file cannot be read or holds no descriptor set.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CompatError(f"cannot read {os.fspath(path)}: {exc.strerror}") from exc
    return _parse(data, os.fspath(path))


def compile_protos(root: str | os.PathLike[str]) -> Any:
    """Compile every `.proto` file under `root` into a `FileDescriptorSet`.

    `root` is the import root: a file at `root/llmgw/v1/node.proto` is named
    `llmgw/v1/node.proto`. The set includes imports and source info. It runs
    the protoc of grpcio-tools (the `schema` extra).

    Raises:
        CompatError: `root` has no `.proto` files, grpcio-tools is missing,
            or protoc rejects the files.
    """
    folder = Path(root)
    if not folder.is_dir():
        raise CompatError(f"{os.fspath(root)} is not a folder")
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.proto"))
    if not names:
        raise CompatError(f"no .proto files under {os.fspath(root)}")
    if importlib.util.find_spec(_PROTOC_MODULE) is None:
        raise CompatError(
            "compiling .proto files needs grpcio-tools; install the `schema` extra: "
            "pip install 'llmgw-wire[schema]'"
        )
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "schema.binpb"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                f"{_PROTOC_MODULE}.protoc",
                "--proto_path=.",
                "--include_imports",
                "--include_source_info",
                f"--descriptor_set_out={out}",
                *names,
            ],
            cwd=folder,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            # grpcio-tools' protoc starts with a logging notice that says nothing of the files.
            lines = [line for line in result.stderr.splitlines() if "absl::" not in line]
            raise CompatError(f"protoc rejects {os.fspath(root)}:\n" + "\n".join(lines))
        return read_descriptor_set(out)


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise CompatError("reading a schema from a git revision needs git") from exc


def _revision(ref: str, cwd: Path) -> str | None:
    result = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd)
    return result.stdout.decode().strip() if result.returncode == 0 else None


def from_git(ref: str, proto_dir: str | os.PathLike[str] = "proto") -> Any:
    """Compile the `.proto` files that `proto_dir` held at git revision `ref`.

    Args:
        ref: anything `git rev-parse` takes for a commit: a tag, a branch, `HEAD~1`.
        proto_dir: the folder of the schema in the working tree; it need not
            exist there now, but must lie inside the repository.

    Raises:
        CompatError: git is missing, `ref` is not a commit, or the folder had
            no `.proto` files at that revision.
    """
    folder = Path(proto_dir).resolve()
    cwd = folder if folder.is_dir() else Path.cwd()
    top = _git(["rev-parse", "--show-toplevel"], cwd)
    if top.returncode != 0:
        raise CompatError(f"{cwd} is not in a git repository")
    toplevel = Path(top.stdout.decode().strip()).resolve()
    try:
        prefix = folder.relative_to(toplevel).as_posix()
    except ValueError:
        raise CompatError(f"{os.fspath(proto_dir)} is not inside {toplevel}") from None
    commit = _revision(ref, toplevel)
    if commit is None:
        raise CompatError(f"{ref!r} is not a git revision")
    listed = _git(["ls-tree", "-r", "-z", "--name-only", commit, "--", prefix], toplevel)
    paths = [p for p in listed.stdout.decode().split("\0") if p.endswith(".proto")]
    if not paths:
        raise CompatError(f"no .proto files under {prefix}/ at {ref}")
    with tempfile.TemporaryDirectory() as scratch:
        for path in paths:
            blob = _git(["show", f"{commit}:{path}"], toplevel)
            target = Path(scratch, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)
        return compile_protos(Path(scratch, prefix))


def baseline_versions() -> list[str]:
    """The schema versions whose baselines ship in this package, oldest first."""
    found = []
    for entry in importlib.resources.files("llmgw_wire").joinpath("schemas").iterdir():
        match = _BASELINE_NAME.fullmatch(entry.name)
        if match:
            found.append(tuple(int(part) for part in match.groups()))
    return [".".join(map(str, version)) for version in sorted(found)]


def baseline(version: str | None = None) -> Any:
    """The frozen `FileDescriptorSet` of a released schema version (default: the last).

    Raises:
        CompatError: no baseline of that version ships in this package.
    """
    versions = baseline_versions()
    if version is None and versions:
        version = versions[-1]
    if version not in versions:
        raise CompatError(
            f"Expected a schema version in {', '.join(versions) or '(none)'}, got {version!r}"
        )
    name = f"llmgw_v1-{version}.binpb"
    data = importlib.resources.files("llmgw_wire").joinpath("schemas").joinpath(name).read_bytes()
    return _parse(data, name)


# ---------------------------------------------------------------- the command


def _load(value: str, proto_dir: Path, *, allow_git: bool) -> tuple[Any, str]:
    """A schema named on the command line, and how to print where it came from."""
    if value.startswith("git:") and allow_git:
        return from_git(value.removeprefix("git:"), proto_dir), value
    path = Path(value)
    if path.is_dir():
        return compile_protos(path), value
    if path.exists():
        return read_descriptor_set(path), value
    if allow_git and _revision(value, Path.cwd()) is not None:
        return from_git(value, proto_dir), f"git:{value}"
    what = "a file, a folder or a git revision" if allow_git else "a file or a folder"
    raise CompatError(f"Expected {what}, got {value!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `llmgw-wire compat`."""
    parser.add_argument(
        "--proto",
        default="proto",
        metavar="DIR",
        help="the schema to check: a folder of .proto files, or a .binpb (default: %(default)s)",
    )
    parser.add_argument(
        "--against",
        metavar="SCHEMA",
        help="the schema peers may still run: a .binpb, a folder of .proto files, or a git "
        "revision (git:REF, or REF when no such path exists); default: the baseline of the "
        "last released schema, shipped in the package",
    )
    parser.add_argument(
        "--category",
        choices=CATEGORIES,
        default="WIRE_JSON",
        help="buf's category of rules to apply (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    """Run `llmgw-wire compat`: 0 when compatible, 1 with findings, 2 on bad input."""
    proto = Path(args.proto)
    try:
        new, _ = _load(args.proto, proto, allow_git=False)
        if args.against is None:
            old, against = baseline(), f"schema {baseline_versions()[-1]}"
        else:
            old, against = _load(args.against, proto, allow_git=True)
        findings = check(old, new, category=args.category)
    except CompatError as exc:
        print(f"llmgw-wire compat: error: {exc}", file=sys.stderr)
        return 2
    # Point into the folder the user named, so that editors can open the file.
    for finding in findings:
        path = (proto / finding.path).as_posix() if proto.is_dir() else finding.path
        print(attrs.evolve(finding, path=path))
    count = f"{len(findings)} breaking change{'' if len(findings) == 1 else 's'}"
    verdict = count if findings else "compatible"
    print(f"compat: {args.proto} against {against} ({args.category}): {verdict}", file=sys.stderr)
    return 1 if findings else 0
