"""Google's protobuf (upb) message classes for the schema, built from its descriptor set.

They are the strict, fast byte codec under `encode` and `decode`. They are
built at import from `_gen/llmgw_v1.binpb` in a private descriptor pool, so
that they need no generated `_pb2` modules and cannot clash with another copy
of the schema registered in the process's default pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from llmgw_wire.v1.redaction import descriptor_set

if TYPE_CHECKING:
    from collections.abc import Iterable

    from google.protobuf.message import Message

__all__ = ["CLASSES", "DECODE_CLASSES", "SKELETONS", "descriptor_set"]


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


_FILES = descriptor_set().file

#: The upb message class of every message of the schema, by full proto name.
CLASSES: dict[str, type[Message]] = _classes(_FILES)

#: The same messages with maps read as repeated entry messages: what `decode` parses.
DECODE_CLASSES: dict[str, type[Message]] = _classes(_entries(file) for file in _FILES)

#: The same messages with repeated message fields read as bytes, to count items cheaply.
SKELETONS: dict[str, type[Message]] = _classes(_skeleton(file) for file in _FILES)
