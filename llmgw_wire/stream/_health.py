"""The standard gRPC health service (`grpc.health.v1.Health`) of a control plane's server.

Probes (Kubernetes' gRPC probe, load balancers, `grpc_health_probe`, grpc-go
clients) ask it whether the server, "" , and the agent stream,
`llmgw.v1.AgentService`, are SERVING. A server says NOT_SERVING for both
from the moment a graceful stop begins, before its calls end, and whenever
the control plane says it should not be served (a standby that is not the
leader); while NOT_SERVING it also refuses new agent streams with
UNAVAILABLE, so that an agent moves on to its next address.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from grpc_health.v1 import health, health_pb2, health_pb2_grpc

if TYPE_CHECKING:
    import grpc.aio

__all__ = ["HEALTH_SERVICE", "Health"]

#: The full name of the standard health service.
HEALTH_SERVICE: Final = "grpc.health.v1.Health"


class Health:
    """The health statuses of one server: "" (the server) and its services."""

    def __init__(self, services: tuple[str, ...]) -> None:
        self._services = ("", *services)
        self._servicer = health.aio.HealthServicer()
        self.serving = True
        self._stopping = False

    def add_to(self, server: grpc.aio.Server) -> None:
        """Serve the health service on `server`."""
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, server)

    async def start(self) -> None:
        """Say SERVING for every service."""
        for service in self._services:
            await self._servicer.set(service, health_pb2.HealthCheckResponse.SERVING)

    async def set_serving(self, serving: bool) -> None:
        """Say SERVING or NOT_SERVING; after `stopping`, it stays NOT_SERVING."""
        if self._stopping:
            return
        self.serving = serving
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for service in self._services:
            await self._servicer.set(service, status)

    async def stopping(self) -> None:
        """Say NOT_SERVING for good: a graceful stop has begun."""
        self.serving = False
        self._stopping = True
        await self._servicer.enter_graceful_shutdown()
