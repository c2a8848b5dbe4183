"""The schema model: one side of a comparison, indexed the way buf pairs elements.

Everything is read from the `FileDescriptorProto`s themselves, never through
a descriptor pool: the pool refuses valid schemas that protoc and buf accept
(a oneof named like another field's JSON name is "duplicate json_name" to
it), and building one costs more than the comparison.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import attrs
from google.protobuf import descriptor_pb2
from google.protobuf.message import Message

from llmgw_wire.errors import WireError

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["CompatError", "Finding", "Schema", "SchemaElement", "escape_text", "index"]

_D = descriptor_pb2
_FDP = _D.FieldDescriptorProto
_FS = _D.FeatureSet

# source_code_info paths use descriptor.proto's field numbers.
_FILE_MESSAGE = _D.FileDescriptorProto.MESSAGE_TYPE_FIELD_NUMBER
_FILE_ENUM = _D.FileDescriptorProto.ENUM_TYPE_FIELD_NUMBER
_FILE_SERVICE = _D.FileDescriptorProto.SERVICE_FIELD_NUMBER
_FILE_EXTENSION = _D.FileDescriptorProto.EXTENSION_FIELD_NUMBER
_MESSAGE_FIELD = _D.DescriptorProto.FIELD_FIELD_NUMBER
_MESSAGE_NESTED = _D.DescriptorProto.NESTED_TYPE_FIELD_NUMBER
_MESSAGE_ENUM = _D.DescriptorProto.ENUM_TYPE_FIELD_NUMBER
_MESSAGE_EXTENSION = _D.DescriptorProto.EXTENSION_FIELD_NUMBER
_SERVICE_METHOD = _D.ServiceDescriptorProto.METHOD_FIELD_NUMBER
_FIELD_TYPE_NAME = _FDP.TYPE_NAME_FIELD_NUMBER


# C0 and C1 controls (a newline, ANSI's ESC and CSI), DEL, and the backslash
# that escapes them; a file name or message may hold any of them. Lone
# surrogates too: a file name that is not UTF-8 holds them (Python's
# surrogateescape), and no stream can write them as text.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\\\u2028\u2029\ud800-\udfff]")


def _escaped(char: str) -> str:
    if "\udc80" <= char <= "\udcff":
        return f"\\x{ord(char) - 0xDC00:02x}"  # the byte it stands for
    return char.encode("unicode_escape", "backslashreplace").decode("ascii")


def escape_text(text: str) -> str:
    """`text` with every control character written as a backslash escape.

    A `.proto` file may be named with a newline, so that a raw line could
    forge a CI command (`::error ...`) or paint the terminal with ANSI
    escapes; escaped, each finding stays one line of plain text.
    """
    return _CONTROLS.sub(lambda m: _escaped(m.group()), text)


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
        end_line: 1-based line where the element ends (as buf's JSON reports it).
        end_column: 1-based column just past the element's end.
    """

    path: str
    line: int
    column: int
    rule: str
    message: str
    end_line: int = attrs.field(default=0, eq=False, order=False, kw_only=True)
    end_column: int = attrs.field(default=0, eq=False, order=False, kw_only=True)

    @property
    def location(self) -> str:
        """`path:line:column`."""
        return f"{self.path}:{self.line}:{self.column}"

    def __str__(self) -> str:
        """`path:line:column: RULE: sentence`, control characters escaped (`escape_text`)."""
        return f"{escape_text(self.location)}: {self.rule}: {escape_text(self.message)}"


@attrs.frozen
class SchemaElement:
    """A file, message, field, extension, enum or RPC of one schema, with its place.

    Not the domain's `Node` (a machine): an element of a schema.
    """

    name: str  # full name; the path for a file
    file: str
    path: tuple[int, ...]
    proto: Message  # the *DescriptorProto
    parent: str = ""  # the enclosing message's full name, "" at file level
    extendee: str = ""  # an extension's extended message, "" for anything else

    @property
    def extension(self) -> bool:
        """Whether this is an extension field."""
        return bool(self.extendee)


# A span: start line, start column, end line, end column (all 1-based).
Span = tuple[int, int, int, int]


@attrs.frozen
class Schema:
    """One side of a comparison.

    Attributes:
        elements: by kind ("file", "message", "field", "enum", "method"), the
            nodes keyed as buf pairs them; fields by (message, number),
            extensions by ("extend", extendee, number).
        types: every message and enum by full name, imports included.
        spans: source locations by (file, source path).
        anchors: for each map-entry message, where its map field names it; a
            map entry has no source of its own, so buf points at the field.
    """

    elements: dict[str, dict[object, SchemaElement]]
    types: dict[str, SchemaElement]
    spans: dict[tuple[str, tuple[int, ...]], Span]
    anchors: dict[str, tuple[str, tuple[int, ...]]]
    files: dict[str, descriptor_pb2.FileDescriptorProto]

    def locate(self, node: SchemaElement, sub: tuple[int, ...] = ()) -> Span:
        """Where `node` (or its part `sub`) is, or else what encloses it."""
        entry = node.name if self.is_map_entry(node.name) else node.parent
        if self.is_map_entry(entry):
            file, path = self.anchors[entry]
        else:
            file, path = node.file, node.path + sub
        while (span := self.spans.get((file, path))) is None and path:
            path = path[:-1]
        return span or (1, 1, 1, 1)

    def is_map_entry(self, name: str) -> bool:
        """Whether `name` is a map field's synthetic entry message."""
        node = self.types.get(name)
        return bool(
            node is not None
            and isinstance(node.proto, _D.DescriptorProto)
            and node.proto.options.map_entry
        )

    # ---------------------------------------------------------- features

    def syntax(self, file: str) -> str:
        """`proto2`, `proto3` or `editions`."""
        return str(self.files[file].syntax or "proto2")

    def feature(self, node: SchemaElement, name: str) -> int:
        """An editions feature of `node`, resolved through what encloses it."""
        current: SchemaElement | None = node
        while current is not None:
            features = current.proto.options.features
            if features.HasField(name):
                return int(getattr(features, name))
            current = self.types.get(current.parent) if current.parent else None
        features = self.files[node.file].options.features
        if features.HasField(name):
            return int(getattr(features, name))
        return _EDITION_DEFAULTS[name]

    def json_format(self, node: SchemaElement) -> int:
        """The `json_format` feature of a message or enum, as every syntax has it."""
        syntax = self.syntax(node.file)
        if syntax == "proto2":
            return int(_FS.LEGACY_BEST_EFFORT)
        if syntax == "proto3":
            return int(_FS.ALLOW)
        return self.feature(node, "json_format")

    # ---------------------------------------------------------- fields

    def field_kind(self, field: SchemaElement) -> str:
        """`int32`, `string`, `message`, `group`, `enum`, ..."""
        kind = _TYPE_NAMES[field.proto.type]
        if (
            kind == "message"
            and self.syntax(field.file) == "editions"
            and self.feature(field, "message_encoding") == _FS.DELIMITED
        ):
            return "group"
        return kind

    def type_name(self, field: SchemaElement) -> str:
        """The full name of a message or enum field's type, without the leading dot."""
        return str(field.proto.type_name).lstrip(".")

    def is_map(self, field: SchemaElement) -> bool:
        """Whether `field` is a map field."""
        return bool(
            field.proto.label == _FDP.LABEL_REPEATED
            and field.proto.type == _FDP.TYPE_MESSAGE
            and self.is_map_entry(self.type_name(field))
        )

    def cardinality(self, field: SchemaElement) -> str:  # noqa: PLR0911 - one per syntax and label
        """Buf's words for a field's cardinality."""
        proto = field.proto
        if proto.label == _FDP.LABEL_REPEATED:
            return MAP if self.is_map(field) else REPEATED
        if proto.label == _FDP.LABEL_REQUIRED:
            return REQUIRED
        syntax = self.syntax(field.file)
        if field.extension or proto.HasField("oneof_index"):
            return EXPLICIT
        if syntax == "proto2":
            return EXPLICIT
        if syntax == "proto3":
            if proto.proto3_optional or proto.type in (_FDP.TYPE_MESSAGE, _FDP.TYPE_GROUP):
                return EXPLICIT
            return IMPLICIT
        if proto.type in (_FDP.TYPE_MESSAGE, _FDP.TYPE_GROUP):
            return EXPLICIT
        presence = self.feature(field, "field_presence")
        if presence == _FS.LEGACY_REQUIRED:
            return REQUIRED
        return IMPLICIT if presence == _FS.IMPLICIT else EXPLICIT

    def json_name(self, field: SchemaElement) -> str:
        """The field's JSON name: its `json_name`, or protoc's lowerCamelCase of its name."""
        if field.proto.HasField("json_name"):
            return str(field.proto.json_name)
        return json_name_of(field.proto.name)

    def enum_values(self, enum_name: str) -> list[descriptor_pb2.EnumValueDescriptorProto]:
        """The values of the enum `enum_name` (empty when it is not in the set)."""
        node = self.types.get(enum_name)
        return list(node.proto.value) if node is not None else []


def json_name_of(name: str) -> str:
    """Protoc's default JSON name: underscores dropped, the letter after each capitalised."""
    out, upper = [], False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


EXPLICIT = "optional with explicit presence"
IMPLICIT = "optional with implicit presence"
REQUIRED = "required"
REPEATED = "repeated"
MAP = "map"

_TYPE_NAMES: dict[int, str] = {
    number: name.removeprefix("TYPE_").lower() for name, number in _FDP.Type.items()
}

# The defaults of editions 2023 and 2024 for the features the rules read.
_EDITION_DEFAULTS = {
    "field_presence": int(_FS.EXPLICIT),
    "json_format": int(_FS.ALLOW),
    "message_encoding": int(_FS.LENGTH_PREFIXED),
    "enum_type": int(_FS.OPEN),
}


def index(files: Iterable[descriptor_pb2.FileDescriptorProto], what: str) -> Schema:  # noqa: PLR0912 - one walk of a file
    """Index the files of one `FileDescriptorSet` (`what` names it in errors)."""
    elements: dict[str, dict[object, SchemaElement]] = {
        kind: {} for kind in ("file", "message", "field", "enum", "method")
    }
    types: dict[str, SchemaElement] = {}
    spans: dict[tuple[str, tuple[int, ...]], Span] = {}
    anchors: dict[str, tuple[str, tuple[int, ...]]] = {}
    by_name: dict[str, descriptor_pb2.FileDescriptorProto] = {}

    def extension(
        file: descriptor_pb2.FileDescriptorProto,
        proto: descriptor_pb2.FieldDescriptorProto,
        path: tuple[int, ...],
        scope: str,
        parent: str,
    ) -> None:
        extendee = proto.extendee.lstrip(".")
        elements["field"]["extend", extendee, proto.number] = SchemaElement(
            scope + proto.name, file.name, path, proto, parent, extendee
        )

    def enum(
        file: descriptor_pb2.FileDescriptorProto,
        proto: descriptor_pb2.EnumDescriptorProto,
        name: str,
        path: tuple[int, ...],
        parent: str,
    ) -> None:
        node = SchemaElement(name, file.name, path, proto, parent)
        elements["enum"][name] = types[name] = node

    def message(
        file: descriptor_pb2.FileDescriptorProto,
        proto: descriptor_pb2.DescriptorProto,
        name: str,
        path: tuple[int, ...],
        parent: str,
    ) -> None:
        node = SchemaElement(name, file.name, path, proto, parent)
        elements["message"][name] = types[name] = node
        for i, field in enumerate(proto.field):
            field_path = (*path, _MESSAGE_FIELD, i)
            elements["field"][name, field.number] = SchemaElement(
                f"{name}.{field.name}", file.name, field_path, field, name
            )
            if field.label == _FDP.LABEL_REPEATED and field.type == _FDP.TYPE_MESSAGE:
                anchors.setdefault(
                    field.type_name.lstrip("."), (file.name, (*field_path, _FIELD_TYPE_NAME))
                )
        for i, nested in enumerate(proto.nested_type):
            nested_path = (*path, _MESSAGE_NESTED, i)
            message(file, nested, f"{name}.{nested.name}", nested_path, name)
        for i, nested_enum in enumerate(proto.enum_type):
            enum_path = (*path, _MESSAGE_ENUM, i)
            enum(file, nested_enum, f"{name}.{nested_enum.name}", enum_path, name)
        for i, ext in enumerate(proto.extension):
            extension(file, ext, (*path, _MESSAGE_EXTENSION, i), f"{name}.", name)

    for file in files:
        if file.name in by_name:
            raise CompatError(f"{what}: the descriptor set holds {file.name} twice")
        by_name[file.name] = file
        elements["file"][file.name] = SchemaElement(file.name, file.name, (), file)
        for location in file.source_code_info.location:
            span = list(location.span)
            if len(span) == 3:
                span = [span[0], span[1], span[0], span[2]]
            if len(span) == 4:
                spans.setdefault(
                    (file.name, tuple(location.path)),
                    (span[0] + 1, span[1] + 1, span[2] + 1, span[3] + 1),
                )
        scope = f"{file.package}." if file.package else ""
        for i, proto in enumerate(file.message_type):
            message(file, proto, scope + proto.name, (_FILE_MESSAGE, i), "")
        for i, proto in enumerate(file.enum_type):
            enum(file, proto, scope + proto.name, (_FILE_ENUM, i), "")
        for i, proto in enumerate(file.extension):
            extension(file, proto, (_FILE_EXTENSION, i), scope, "")
        for i, service in enumerate(file.service):
            for j, method in enumerate(service.method):
                name = f"{scope}{service.name}.{method.name}"
                elements["method"][name] = SchemaElement(
                    name, file.name, (_FILE_SERVICE, i, _SERVICE_METHOD, j), method
                )
    for name, file in by_name.items():
        for dependency in file.dependency:
            if dependency not in by_name:
                raise CompatError(
                    f"{what}: the descriptor set lacks {dependency}, which {name} imports"
                )
    return Schema(elements, types, spans, anchors, by_name)
