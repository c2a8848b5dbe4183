"""gRPC server reflection of a control plane, for grpcurl and friends (the `reflection` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2, descriptor_pool

from llmgw_wire.stream._health import HEALTH_FILE
from llmgw_wire.v1.redaction import descriptor_set

if TYPE_CHECKING:
    import grpc.aio

__all__ = ["serve_reflection"]


def serve_reflection(server: grpc.aio.Server, services: tuple[str, ...]) -> None:
    """Serve `grpc.reflection.v1alpha.ServerReflection` for `services` on `server`.

    The schema's descriptors come from the library's own descriptor set, in a
    pool of their own: nothing is registered in the process's default pool.

    Raises:
        ValueError: the grpcio-reflection package is not installed.
    """
    try:
        from grpc_reflection.v1alpha import reflection, reflection_pb2
    except ImportError:
        raise ValueError(
            "reflection needs the grpcio-reflection package: pip install 'llmgw-wire[reflection]'"
        ) from None
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_set().file:
        pool.Add(file)
    pool.Add(HEALTH_FILE)
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(reflection_pb2.DESCRIPTOR.serialized_pb))
    reflection.enable_server_reflection((*services, reflection.SERVICE_NAME), server, pool=pool)
