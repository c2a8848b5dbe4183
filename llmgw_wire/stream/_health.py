"""The standard gRPC health service (`grpc.health.v1.Health`) of a control plane's server.

Probes (Kubernetes' gRPC probe, load balancers, `grpc_health_probe`: any
client of the standard service) ask it whether the server, "" , and the agent stream,
`llmgw.v1.AgentService`, are SERVING. A server says NOT_SERVING for both
from the moment a graceful stop begins, before its calls end, and whenever
the control plane says it should not be served (a standby that is not the
leader); while NOT_SERVING it also refuses new agent streams with
UNAVAILABLE, so that an agent moves on to its next address.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

__all__ = ["HEALTH_SERVICE", "Health"]

#: The full name of the standard health service.
HEALTH_SERVICE: Final = "grpc.health.v1.Health"

_SERVING: Final = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING: Final = health_pb2.HealthCheckResponse.NOT_SERVING
_UNKNOWN: Final = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class Health(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
    """The health statuses of one server: "" (the server) and its services.

    grpc's own servicer keeps each `Watch` open until the server ends it,
    which would hold every graceful stop for its whole grace period: here a
    `Watch` ends, with OK, once it has sent the NOT_SERVING of a stop.
    """

    def __init__(self, services: tuple[str, ...], *, serving: bool = True) -> None:
        self._status = dict.fromkeys(("", *services), _SERVING if serving else _NOT_SERVING)
        self._changed = asyncio.Condition()
        self._stopping = False

    @property
    def serving(self) -> bool:
        """Whether the server is to be served (SERVING)."""
        return bool(self._status[""] == _SERVING)

    def add_to(self, server: grpc.aio.Server) -> None:
        """Serve the health service on `server`."""
        health_pb2_grpc.add_HealthServicer_to_server(self, server)

    async def _set(self, status: Any) -> None:
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
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(  # noqa: N802 (the service's method)
        self, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        """Each change of the status of `request.service`, until a stop has been said."""
        sent = None

        def news() -> bool:
            return self._status.get(request.service, _UNKNOWN) != sent or self._stopping

        while True:
            async with self._changed:
                await self._changed.wait_for(news)
                status = self._status.get(request.service, _UNKNOWN)
            if status != sent:
                # Written outside the lock: a slow watcher holds up no one else.
                await context.write(health_pb2.HealthCheckResponse(status=status))
                sent = status
            if self._stopping:
                return
