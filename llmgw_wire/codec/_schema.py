"""Google's protobuf (upb) message classes for the schema, built from its descriptor set.

They are the strict, fast byte codec under `encode` and `decode`. They are
built at import from `_gen/llmgw_v1.binpb` in a private descriptor pool, so
that they need no generated `_pb2` modules and cannot clash with another copy
of the schema registered in the process's default pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from llmgw_wire._schema import descriptor_set

if TYPE_CHECKING:
    from collections.abc import Iterable

    from google.protobuf.message import Message

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


def _classes(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> dict[str, type[Message]]:
    pool = descriptor_pool.DescriptorPool()
    files = list(files)
    for file in files:
        pool.Add(file)
    return {
        f"{file.package}.{message.name}": message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{file.package}.{message.name}")
        )
        for file in files
        for message in file.message_type
    }


def _skeleton(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    # The schema with every repeated message field (maps included) read as
    # repeated bytes: upb then keeps each element as a 16-byte view instead of
    # a message, so that a large input can be counted before it is parsed.
    out = descriptor_pb2.FileDescriptorProto()
    out.CopyFrom(file)
    out.ClearField("source_code_info")
    messages = list(out.message_type)
    while messages:
        message = messages.pop()
        messages.extend(message.nested_type)
        for field in message.field:
            if field.label == field.LABEL_REPEATED and field.type == field.TYPE_MESSAGE:
                field.type = field.TYPE_BYTES
                field.ClearField("type_name")
    return out


def _folded(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    # The schema with every map read as repeated bytes (its entries, counted
    # by their number) and every other repeated message field read as one
    # message of its type: upb merges the occurrences of a singular message
    # field, so the elements of a repeated field are parsed as their merge
    # (repeated fields joined) in place, in the parse of the whole input, with
    # no copy of their bytes.
    out = descriptor_pb2.FileDescriptorProto()
    out.CopyFrom(file)
    out.ClearField("source_code_info")
    entries = set()
    messages = []
    pending = [(f".{out.package}", message) for message in out.message_type]
    while pending:
        scope, message = pending.pop()
        messages.append(message)
        pending.extend((f"{scope}.{message.name}", nested) for nested in message.nested_type)
        if message.options.map_entry:
            entries.add(f"{scope}.{message.name}")
    for message in messages:
        for field in message.field:
            if field.label == field.LABEL_REPEATED and field.type == field.TYPE_MESSAGE:
                if field.type_name in entries:
                    field.type = field.TYPE_BYTES
                    field.ClearField("type_name")
                else:
                    field.label = field.LABEL_OPTIONAL
    return out


def _counted(
    files: list[descriptor_pb2.FileDescriptorProto],
) -> list[descriptor_pb2.FileDescriptorProto]:
    # The skeletons with only the fields that hold elements or lead to them
    # (and every member of a oneof, so that none is left empty): what the
    # element count parses the merged elements of a repeated field as. A field
    # left out is an unknown field there, skipped without a look at its value
    # (no UTF-8 check of a string): half the parse of a GPU's.
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}
    pending = [(f".{file.package}", message) for file in files for message in file.message_type]
    while pending:
        scope, message = pending.pop()
        messages[f"{scope}.{message.name}"] = message
        pending.extend((f"{scope}.{message.name}", nested) for nested in message.nested_type)

    def leads(name: str, seen: frozenset[str] = frozenset()) -> bool:
        return name not in seen and any(
            keeps(field, seen | {name}) for field in messages[name].field
        )

    def keeps(field: descriptor_pb2.FieldDescriptorProto, seen: frozenset[str]) -> bool:
        return (
            field.label == field.LABEL_REPEATED
            or field.HasField("oneof_index")
            or (field.type == field.TYPE_MESSAGE and leads(field.type_name, seen))
        )

    out = []
    for file in files:
        copy = descriptor_pb2.FileDescriptorProto()
        copy.CopyFrom(file)
        pending = [(f".{copy.package}", message) for message in copy.message_type]
        while pending:
            scope, message = pending.pop()
            pending.extend((f"{scope}.{message.name}", nested) for nested in message.nested_type)
            if message.options.map_entry:
                continue  # a map's entry stays whole: a map entry is its key and value
            kept = [field for field in message.field if keeps(field, frozenset())]
            del message.field[:]
            message.field.extend(kept)
        out.append(copy)
    return out


def _entries(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    # The schema with every map read as a repeated message of its entry type.
    # upb's Python runtime keeps a map entry that carries an unknown field as
    # an unknown field of the parent, so its key is lost; Go's runtime reads
    # the entry as the message it is on the wire and skips the unknown field.
    # Read as plain messages, the entries give Go's answer on every path.
    out = descriptor_pb2.FileDescriptorProto()
    out.CopyFrom(file)
    out.ClearField("source_code_info")
    messages = list(out.message_type)
    while messages:
        message = messages.pop()
        messages.extend(message.nested_type)
        if message.options.map_entry:
            message.options.map_entry = False
    return out


def _str_entries_as_bytes(
    file: descriptor_pb2.FileDescriptorProto,
) -> descriptor_pb2.FileDescriptorProto:
    # `_entries`, with every map of strings to strings read as repeated bytes:
    # each element the bytes of one entry. The domain's structure functions
    # share equal maps by those bytes (a GPU's NIC paths, a fleet's labels),
    # and parse an entry (`STR_ENTRY`) only for a map not seen before.
    out = _entries(file)
    pending = [(f".{out.package}", message) for message in out.message_type]
    while pending:
        scope, message = pending.pop()
        name = f"{scope}.{message.name}"
        pending.extend((name, nested) for nested in message.nested_type)
        strings = {
            f"{name}.{nested.name}"
            for nested in message.nested_type
            if [f.name for f in nested.field] == ["key", "value"]
            and all(f.type == f.TYPE_STRING for f in nested.field)
            and nested.name.endswith("Entry")
        }
        for field in message.field:
            if field.type == field.TYPE_MESSAGE and field.type_name in strings:
                field.type = field.TYPE_BYTES
                field.ClearField("type_name")
    return out


_FILES = descriptor_set().file

#: The upb message class of every message of the schema, by full proto name.
CLASSES: dict[str, type[Message]] = _classes(_FILES)

#: The same messages with maps read as repeated entry messages: what `decode` parses.
DECODE_CLASSES: dict[str, type[Message]] = _classes(_entries(file) for file in _FILES)

#: `DECODE_CLASSES` with each map of strings read as its entries' bytes: what
#: `decode` parses for a domain value.
DOMAIN_CLASSES: dict[str, type[Message]] = _classes(_str_entries_as_bytes(f) for f in _FILES)

#: The entry of a map of strings to strings, as a plain message: an entry's
#: bytes in `DOMAIN_CLASSES` parse as this (an unknown field in it skipped).
STR_ENTRY: type[Message] = message_factory.GetMessageClass(
    DECODE_CLASSES["llmgw.v1.Register"].DESCRIPTOR.fields_by_name["labels"].message_type
)

#: The same messages with repeated message fields read as bytes, to count items cheaply.
SKELETONS: dict[str, type[Message]] = _classes(_skeleton(file) for file in _FILES)

#: The skeletons with only the fields that hold elements or lead to them: what
#: the count parses a repeated field's elements as, joined.
COUNTED: dict[str, type[Message]] = _classes(_counted([_skeleton(file) for file in _FILES]))

#: The messages with only the fields that hold elements or lead to them, each
#: repeated message field (not a map) read as one message, the merge of its
#: elements: what the count parses an input as, once its skeleton's own
#: elements are counted.
FOLDED: dict[str, type[Message]] = _classes(_counted([_folded(file) for file in _FILES]))
