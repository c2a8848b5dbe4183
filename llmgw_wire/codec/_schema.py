"""Google's protobuf (upb) message classes for the schema, built from its descriptor set.

They are the strict, fast byte codec under `encode` and `decode`. They are
built at import from `_gen/llmgw_v1.binpb` (parsed once, `llmgw_wire._schema`)
in private descriptor pools, so that they need no generated `_pb2` modules
and cannot clash with another copy of the schema registered in the process's
default pool. Each set of classes but `CLASSES` reads the schema with some of
its fields changed, edited in a copy of its files message by message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
)

from llmgw_wire._schema import FILES, descriptor_set, messages

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from google.protobuf.message import Message

    #: An edit of one message of a copy of the schema.
    _Edit = Callable[[DescriptorProto], None]

__all__ = [
    "CLASSES",
    "COUNTED",
    "DECODE_CLASSES",
    "DOMAIN_CLASSES",
    "FOLDED",
    "SKELETONS",
    "STR_ENTRY",
    "descriptor_set",
]

#: The schema's map entries by full name, as protobuf defines them (`options.map_entry`).
_MAP_ENTRIES = {name: message for name, message in messages(FILES) if message.options.map_entry}

#: The entries of its maps of strings to strings, in the order of the schema.
_STR_ENTRIES = tuple(
    name
    for name, entry in _MAP_ENTRIES.items()
    if all(field.type == FieldDescriptorProto.TYPE_STRING for field in entry.field)
)


def _message_type(field: FieldDescriptorProto) -> str:
    # The full name of the message a field holds ("" if none): protoc writes
    # it with a leading dot (`.llmgw.v1.Node.NicPathsEntry`).
    name: str = field.type_name
    return name[1:]


def _classes(
    files: Sequence[FileDescriptorProto],
    pool: descriptor_pool.DescriptorPool | None = None,
) -> dict[str, type[Message]]:
    # The classes of the top-level messages, by full name, in the order of the
    # schema, from `files` added to `pool` (a new one if None).
    if pool is None:
        pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return {
        message.full_name: message_factory.GetMessageClass(message)
        for file in files
        for message in pool.FindFileByName(file.name).message_types_by_name.values()
    }


def _edited(files: Iterable[FileDescriptorProto], edit: _Edit) -> list[FileDescriptorProto]:
    """Copies of `files`, with `edit` made to each of their messages, nested ones included."""
    copies = []
    for file in files:
        copy = FileDescriptorProto()
        copy.CopyFrom(file)
        copies.append(copy)
    for _, message in messages(copies):
        edit(message)
    return copies


def _repeated_message(field: FieldDescriptorProto) -> bool:
    repeated: bool = field.label == FieldDescriptorProto.LABEL_REPEATED
    return repeated and field.type == FieldDescriptorProto.TYPE_MESSAGE


def _as_bytes(field: FieldDescriptorProto) -> None:
    field.type = FieldDescriptorProto.TYPE_BYTES
    field.ClearField("type_name")


def _skeleton(message: DescriptorProto) -> None:
    # Every repeated message field (maps included) read as repeated bytes:
    # upb then keeps each element as a 16-byte view instead of a message, so
    # that a large input can be counted before it is parsed.
    for field in message.field:
        if _repeated_message(field):
            _as_bytes(field)


def _folded(message: DescriptorProto) -> None:
    # Every map read as repeated bytes (its entries, counted by their number)
    # and every other repeated message field read as one message of its type:
    # upb merges the occurrences of a singular message field, so the elements
    # of a repeated field are parsed as their merge (repeated fields joined)
    # in place, in the parse of the whole input, with no copy of their bytes.
    for field in message.field:
        if _repeated_message(field):
            if _message_type(field) in _MAP_ENTRIES:
                _as_bytes(field)
            else:
                field.label = FieldDescriptorProto.LABEL_OPTIONAL


def _entries(message: DescriptorProto) -> None:
    # Every map read as a repeated message of its entry type. upb's Python
    # runtime keeps a map entry that carries an unknown field as an unknown
    # field of the parent, so its key is lost; Go's runtime reads the entry as
    # the message it is on the wire and skips the unknown field. Read as plain
    # messages, the entries give Go's answer on every path.
    if message.options.map_entry:
        message.options.map_entry = False


def _str_maps_as_bytes(message: DescriptorProto) -> None:
    # Every map of strings to strings read as repeated bytes: each element the
    # bytes of one entry. The domain's structure functions share equal maps by
    # those bytes (a GPU's NIC paths, a fleet's labels), and parse an entry
    # (`STR_ENTRY`) only for a map not seen before.
    for field in message.field:
        if _message_type(field) in _STR_ENTRIES:
            _as_bytes(field)


def _counted(
    files: Sequence[FileDescriptorProto],
) -> list[FileDescriptorProto]:
    # `files` with only the fields that hold elements or lead to them (and
    # every member of a oneof, so that none is left empty): what the element
    # count parses the merged elements of a repeated field as. A field left
    # out is an unknown field there, skipped without a look at its value (no
    # UTF-8 check of a string): half the parse of a GPU's.
    found = dict(messages(files))

    def leads(name: str, seen: frozenset[str] = frozenset()) -> bool:
        return name not in seen and any(keeps(field, seen | {name}) for field in found[name].field)

    def keeps(field: FieldDescriptorProto, seen: frozenset[str]) -> bool:
        return (
            field.label == FieldDescriptorProto.LABEL_REPEATED
            or field.HasField("oneof_index")
            or (
                field.type == FieldDescriptorProto.TYPE_MESSAGE
                and leads(_message_type(field), seen)
            )
        )

    def only_counted(message: DescriptorProto) -> None:
        if message.options.map_entry:
            return  # a map's entry stays whole: a map entry is its key and value
        kept = [field for field in message.field if keeps(field, frozenset())]
        del message.field[:]
        message.field.extend(kept)

    return _edited(files, only_counted)


_DECODE_FILES = _edited(FILES, _entries)
_DECODE_POOL = descriptor_pool.DescriptorPool()
_SKELETON_FILES = _edited(FILES, _skeleton)

#: The upb message class of every message of the schema, by full proto name.
CLASSES: dict[str, type[Message]] = _classes(FILES)

#: The same messages with maps read as repeated entry messages: what `decode` parses.
DECODE_CLASSES: dict[str, type[Message]] = _classes(_DECODE_FILES, _DECODE_POOL)

#: `DECODE_CLASSES` with each map of strings read as its entries' bytes: what
#: `decode` parses for a domain value.
DOMAIN_CLASSES: dict[str, type[Message]] = _classes(_edited(_DECODE_FILES, _str_maps_as_bytes))

#: The entry of a map of strings to strings, as a plain message: an entry's
#: bytes in `DOMAIN_CLASSES` parse as this (an unknown field in it skipped).
#: Any such entry of the schema parses any other's bytes: protobuf defines
#: each as `string key = 1; string value = 2;`. None if the schema has none.
STR_ENTRY: type[Message] | None = (
    message_factory.GetMessageClass(_DECODE_POOL.FindMessageTypeByName(_STR_ENTRIES[0]))
    if _STR_ENTRIES
    else None
)

#: The same messages with repeated message fields read as bytes, to count items cheaply.
SKELETONS: dict[str, type[Message]] = _classes(_SKELETON_FILES)

#: The skeletons with only the fields that hold elements or lead to them: what
#: the count parses a repeated field's elements as, joined.
COUNTED: dict[str, type[Message]] = _classes(_counted(_SKELETON_FILES))

#: The messages with only the fields that hold elements or lead to them, each
#: repeated message field (not a map) read as one message, the merge of its
#: elements: what the count parses an input as, once its skeleton's own
#: elements are counted.
FOLDED: dict[str, type[Message]] = _classes(_counted(_edited(FILES, _folded)))
