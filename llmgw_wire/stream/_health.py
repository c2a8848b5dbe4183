"""The standard gRPC health service (`grpc.health.v1.Health`) of a control plane's server.

Probes (Kubernetes' gRPC probe, load balancers, `grpc_health_probe`: any
client of the standard service) ask it whether the server, "" , and the agent stream,
`llmgw.v1.AgentService`, are SERVING. A server says NOT_SERVING for both
from the moment a graceful stop begins, before its calls end, and whenever
the control plane says it should not be served (a standby that is not the
leader); while NOT_SERVING it also refuses new agent streams with
UNAVAILABLE, so that an agent moves on to its next address.

The service's messages are built here from grpc's own `health.proto`
(grpc-proto's `grpc/health/v1/health.proto`, which `make gen` compiles into
`_gen/grpc_health_v1.binpb`: `HEALTH_FILE`; the tests compare it with the
grpcio-health-checking package's), in a descriptor pool of their own, and
served through grpc's generic handlers: the same bytes on the wire as
grpcio-health-checking's servicer, without its generated code, which
demands the newest protobuf runtime of its release (7.35.1 for grpcio
1.84) and would force it on every service that depends on the library.
Anyone who can connect may ask, before any registration: each `Watch` is
a side call (`_sidecalls.SideCall`), counted against the server's side calls
(`ServerLimits.max_side_calls`, and a peer's share of them) and ended after
`ServerLimits.side_call_lifetime`, so that neither a flood of watches nor
one held forever keeps a connection from being closed when idle.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

import grpc
import grpc.aio
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from llmgw_wire.codec._guard import serializer
from llmgw_wire.stream._sidecalls import OVER, SideCall

if TYPE_CHECKING:
    from llmgw_wire.stream._peers import Shares

__all__ = [
    "HEALTH_FILE",
    "HEALTH_SERVICE",
    "Health",
    "health_messages",
]

#: The full name of the standard health service.
HEALTH_SERVICE: Final = "grpc.health.v1.Health"


def _health_file() -> descriptor_pb2.FileDescriptorProto:
    # grpc-proto's grpc/health/v1/health.proto, compiled by `make gen` (scripts/gen.py).
    data = resources.files("llmgw_wire._gen").joinpath("grpc_health_v1.binpb").read_bytes()
    (file,) = descriptor_pb2.FileDescriptorSet.FromString(data).file
    return file


#: grpc's `grpc/health/v1/health.proto`, as a descriptor: what the service
#: serves, and what server reflection describes it with.
HEALTH_FILE: Final = _health_file()


def health_messages() -> dict[str, Any]:
    """The service's message classes by name (`HealthCheckRequest`, ...), in a pool of their own.

    A pool of their own, so that they cannot clash with grpcio-health-checking's
    generated module, which a service may import too (it registers the same
    messages in the process's default pool).
    """
    pool = descriptor_pool.DescriptorPool()
    pool.Add(HEALTH_FILE)
    return {
        message.name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"grpc.health.v1.{message.name}")
        )
        for message in HEALTH_FILE.message_type
    }


_MESSAGES: Final = health_messages()
_REQUEST: Final = _MESSAGES["HealthCheckRequest"]
_RESPONSE: Final = _MESSAGES["HealthCheckResponse"]
_STATUS: Final = _RESPONSE.DESCRIPTOR.enum_types_by_name["ServingStatus"].values_by_name
_SERVING: Final = _STATUS["SERVING"].number
_NOT_SERVING: Final = _STATUS["NOT_SERVING"].number
_UNKNOWN: Final = _STATUS["SERVICE_UNKNOWN"].number


class Health:
    """The health statuses of one server: "" (the server) and its services.

    grpc's own servicer keeps each `Watch` open until the server ends it,
    which would hold every graceful stop for its whole grace period: here a
    `Watch` ends, with OK, once it has sent the NOT_SERVING of a stop, or
    once it has been open `lifetime` seconds. Each is counted in `calls`
    while it is open; one over its budget is refused with RESOURCE_EXHAUSTED.
    """

    def __init__(
        self,
        services: tuple[str, ...],
        *,
        serving: bool = True,
        calls: Shares[object] | None = None,
        lifetime: float | None = None,
    ) -> None:
        self._status = dict.fromkeys(("", *services), _SERVING if serving else _NOT_SERVING)
        self._changed = asyncio.Condition()
        self._stopping = False
        self._calls = calls
        self._lifetime = lifetime

    @property
    def serving(self) -> bool:
        """Whether the server is to be served (SERVING)."""
        return bool(self._status[""] == _SERVING)

    def add_to(self, server: grpc.aio.Server) -> None:
        """Serve the health service on `server`."""
        handlers = {
            "Check": grpc.unary_unary_rpc_method_handler(
                self.Check,
                request_deserializer=_REQUEST.FromString,
                response_serializer=serializer(_RESPONSE),
            ),
            "Watch": grpc.unary_stream_rpc_method_handler(
                self.Watch,
                request_deserializer=_REQUEST.FromString,
                response_serializer=serializer(_RESPONSE),
            ),
            "List": grpc.unary_unary_rpc_method_handler(
                self.List,
                request_deserializer=_MESSAGES["HealthListRequest"].FromString,
                response_serializer=serializer(_MESSAGES["HealthListResponse"]),
            ),
        }
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(HEALTH_SERVICE, handlers),)
        )

    async def _set(self, status: int) -> None:
        async with self._changed:
            self._status = dict.fromkeys(self._status, status)
            self._changed.notify_all()

    async def set_serving(self, serving: bool) -> None:
        """Say SERVING or NOT_SERVING; after `stopping`, it stays NOT_SERVING."""
        if not self._stopping:
            await self._set(_SERVING if serving else _NOT_SERVING)

    async def stopping(self) -> None:
        """Say NOT_SERVING for good: a graceful stop has begun."""
        self._stopping = True
        await self._set(_NOT_SERVING)

    async def Check(  # noqa: N802 (the service's method)
        self, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        """The status of `request.service`; NOT_FOUND for a service not served."""
        status = self._status.get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no service {request.service!r}")
        return _RESPONSE(status=status)

    async def List(  # noqa: N802 (the service's method)
        self, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        """The status of every service served, "" (the server) included."""
        statuses = {name: _RESPONSE(status=status) for name, status in self._status.items()}
        return _MESSAGES["HealthListResponse"](statuses=statuses)

    async def Watch(  # noqa: N802 (the service's method)
        self, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        """Each change of the status of `request.service`, until a stop has been said.

        It ends, with OK, after the lifetime of side calls: its client watches again.
        """
        async with SideCall(self._calls, context, self._lifetime) as call:
            await self._watch(request.service, context, call)

    async def _watch(
        self, service: str, context: grpc.aio.ServicerContext[Any, Any], call: SideCall
    ) -> None:
        sent = None

        def news() -> bool:
            return self._status.get(service, _UNKNOWN) != sent or self._stopping

        while True:
            async with self._changed:
                if await call.wait(lambda: self._changed.wait_for(news)) is OVER:
                    return
                status = self._status.get(service, _UNKNOWN)
            if status != sent:
                # Written outside the lock: a slow watcher holds up no one else.
                await context.write(_RESPONSE(status=status))
                sent = status
            if self._stopping:
                return
