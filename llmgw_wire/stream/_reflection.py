"""gRPC server reflection of a control plane, for grpcurl and friends (the `reflection` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2, descriptor_pool

from llmgw_wire.stream._health import HEALTH_FILE
from llmgw_wire.stream._sidecalls import OVER, SideCall
from llmgw_wire.v1.redaction import descriptor_set

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import grpc.aio

    from llmgw_wire.stream._peers import Shares

__all__ = ["serve_reflection"]


def serve_reflection(
    server: grpc.aio.Server,
    services: tuple[str, ...],
    *,
    calls: Shares[object] | None = None,
    lifetime: float | None = None,
) -> None:
    """Serve `grpc.reflection.v1alpha.ServerReflection` for `services` on `server`.

    The schema's descriptors come from the library's own descriptor set, in a
    pool of their own: nothing is registered in the process's default pool.
    Each call is counted in `calls` while it is open (one over its budget is
    refused with RESOURCE_EXHAUSTED) and ends, with OK, after `lifetime`
    seconds.

    Raises:
        ValueError: the grpcio-reflection package is not installed.
    """
    try:
        from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
    except ImportError:
        raise ValueError(
            "reflection needs the grpcio-reflection package: pip install 'llmgw-wire[reflection]'"
        ) from None
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_set().file:
        pool.Add(file)
    pool.Add(HEALTH_FILE)
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(reflection_pb2.DESCRIPTOR.serialized_pb))

    class Counted(reflection.aio.ReflectionServicer):  # type: ignore[misc]
        async def ServerReflectionInfo(  # noqa: N802 (the service's method)
            self, requests: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async with SideCall(calls, context, lifetime) as call:
                answers = super().ServerReflectionInfo(requests, context)
                try:
                    while (answer := await call.wait(answers.__anext__)) is not OVER:
                        yield answer
                except StopAsyncIteration:
                    return
                finally:
                    await answers.aclose()

    servicer = Counted((*services, reflection.SERVICE_NAME), pool=pool)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
