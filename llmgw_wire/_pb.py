"""Google's protobuf (upb) message classes for the schema, built from its descriptor set.

They are the strict, fast byte codec under `encode` and `decode`. They are
built at import from `_gen/llmgw_v1.binpb` in a private descriptor pool, so
that they need no generated `_pb2` modules and cannot clash with another copy
of the schema registered in the process's default pool.
"""

from __future__ import annotations

from importlib import resources

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["CLASSES", "descriptor_set"]


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """The schema the library was generated from, as a `FileDescriptorSet`."""
    data = resources.files("llmgw_wire._gen").joinpath("llmgw_v1.binpb").read_bytes()
    return descriptor_pb2.FileDescriptorSet.FromString(data)


def _classes() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    files = descriptor_set().file
    for file in files:
        pool.Add(file)
    return {
        f"{file.package}.{message.name}": message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{file.package}.{message.name}")
        )
        for file in files
        for message in file.message_type
    }


CLASSES: dict[str, type] = _classes()
