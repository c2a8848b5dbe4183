"""The schema the wire layer was generated from, and which of its fields are secret.

Read from the descriptor set `make gen` writes beside the generated classes
(`_gen/llmgw_v1.binpb`), with Google's protobuf alone: the codec builds its
upb classes from it and the mapping its secret attributes, neither loading
the betterproto2 classes of `llmgw_wire.v1` (which `llmgw_wire.v1.redaction`
re-exports these for, and whose reprs it redacts).

A field is secret when the schema marks it with protobuf's standard option
`[debug_redact = true]` (`string api_key = 16 [debug_redact = true];`).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["FILES", "SECRET_FIELDS", "descriptor_set", "messages", "secret_fields"]


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """The schema the wire layer was generated from, as a `FileDescriptorSet`.

    Comments included; each call reads a copy of its own, which the caller may edit.
    """
    data = resources.files("llmgw_wire._gen").joinpath("llmgw_v1.binpb").read_bytes()
    return descriptor_pb2.FileDescriptorSet.FromString(data)


def _without_comments() -> tuple[descriptor_pb2.FileDescriptorProto, ...]:
    # Two thirds of the files' bytes are comments (`source_code_info`): the
    # codec's classes and the secret fields need none, and every copy of a
    # file and every descriptor pool would carry them.
    files = descriptor_set().file
    for file in files:
        file.ClearField("source_code_info")
    return tuple(files)


#: The schema's files without their comments, read once at import and shared
#: (the secret fields, the codec's classes): read them, never edit them (edit
#: a copy, or the files of `descriptor_set()`).
FILES: tuple[descriptor_pb2.FileDescriptorProto, ...] = _without_comments()


def messages(
    files: Iterable[descriptor_pb2.FileDescriptorProto],
) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    """Every message of `files` with its full name, nested messages included.

    The full name is protobuf's (`llmgw.v1.Node`, `llmgw.v1.Node.NicPathsEntry`:
    the package, the enclosing messages, the name; no leading dot). A map's
    entry is a nested message, flagged `options.map_entry`. A message comes
    before the messages nested in it, each file's in the order of its text.
    """
    for file in files:
        yield from _nested(file.package, file.message_type)


def _nested(
    scope: str, protos: Iterable[descriptor_pb2.DescriptorProto]
) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    for message in protos:
        name = f"{scope}.{message.name}" if scope else message.name
        yield name, message
        yield from _nested(name, message.nested_type)


def secret_fields(files: descriptor_pb2.FileDescriptorSet) -> frozenset[str]:
    """The full names (`llmgw.v1.StartShard.api_key`) of the fields marked `debug_redact`.

    Nested messages are included; a map's entry message is a nested message,
    so a secret map is a field of its parent like any other.
    """
    return _secrets(files.file)


def _secrets(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> frozenset[str]:
    return frozenset(
        f"{name}.{field.name}"
        for name, message in messages(files)
        for field in message.field
        if field.options.debug_redact
    )


#: The secret fields of the library's schema, by full proto name.
SECRET_FIELDS: frozenset[str] = _secrets(FILES)
