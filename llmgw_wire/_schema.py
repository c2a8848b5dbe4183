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
    from collections.abc import Iterable

__all__ = ["SECRET_FIELDS", "descriptor_set", "secret_fields"]


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """The schema the wire layer was generated from, as a `FileDescriptorSet`."""
    data = resources.files("llmgw_wire._gen").joinpath("llmgw_v1.binpb").read_bytes()
    return descriptor_pb2.FileDescriptorSet.FromString(data)


def _messages(
    prefix: str, messages: Iterable[descriptor_pb2.DescriptorProto]
) -> Iterable[tuple[str, descriptor_pb2.DescriptorProto]]:
    for message in messages:
        name = f"{prefix}.{message.name}"
        yield name, message
        yield from _messages(name, message.nested_type)


def secret_fields(files: descriptor_pb2.FileDescriptorSet) -> frozenset[str]:
    """The full names (`llmgw.v1.StartShard.api_key`) of the fields marked `debug_redact`.

    Nested messages are included; a map's entry message is a nested message,
    so a secret map is a field of its parent like any other.
    """
    return frozenset(
        f"{name}.{field.name}"
        for file in files.file
        for name, message in _messages(file.package, file.message_type)
        for field in message.field
        if field.options.debug_redact
    )


#: The secret fields of the library's schema, by full proto name.
SECRET_FIELDS: frozenset[str] = secret_fields(descriptor_set())
