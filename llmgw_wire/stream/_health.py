"""The standard gRPC health service (`grpc.health.v1.Health`) of a control plane's server.

Probes (Kubernetes' gRPC probe, load balancers, `grpc_health_probe`: any
client of the standard service) ask it whether the server, "" , and the agent stream,
`llmgw.v1.AgentService`, are SERVING. A server says NOT_SERVING for both
from the moment a graceful stop begins, before its calls end, and whenever
the control plane says it should not be served (a standby that is not the
leader); while NOT_SERVING it also refuses new agent streams with
UNAVAILABLE, so that an agent moves on to its next address.

Anyone who can connect may ask, before any registration: each `Watch` is
counted against the server's side calls (`ServerLimits.max_side_calls`, and
a peer's share of them) and ends after `ServerLimits.side_call_lifetime`,
so that neither a flood of watches nor one held forever keeps a connection
from being closed when idle.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from llmgw_wire.stream._peers import Shares, peer_of_call

__all__ = ["HEALTH_SERVICE", "TOO_MANY_SIDE_CALLS", "Health", "admit_side_call"]

#: The full name of the standard health service.
HEALTH_SERVICE: Final = "grpc.health.v1.Health"

#: The details of a side call (a health `Watch`, reflection) refused for the
#: server's budget of them, or its peer's share.
TOO_MANY_SIDE_CALLS: Final = {
    "server": "too many health and reflection calls open on this server",
    "peer": "too many health and reflection calls open from this peer",
}


async def admit_side_call(
    calls: Shares[object] | None, context: grpc.aio.ServicerContext[Any, Any]
) -> None:
    """Count the call of `context` against `calls`, or end it with RESOURCE_EXHAUSTED."""
    if calls is None:
        return
    over = calls.enter(context, peer_of_call(context))
    if over is not None:
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, TOO_MANY_SIDE_CALLS[over])


_SERVING: Final = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING: Final = health_pb2.HealthCheckResponse.NOT_SERVING
_UNKNOWN: Final = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class Health(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
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
        """Each change of the status of `request.service`, until a stop has been said.

        It ends, with OK, after the lifetime of side calls: its client watches again.
        """
        await admit_side_call(self._calls, context)
        try:
            await self._watch(request.service, context)
        finally:
            if self._calls is not None:
                self._calls.leave(context)

    async def _watch(self, service: str, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        loop = asyncio.get_running_loop()
        until = None if self._lifetime is None else loop.time() + self._lifetime
        sent = None

        def news() -> bool:
            return self._status.get(service, _UNKNOWN) != sent or self._stopping

        while True:
            async with self._changed:
                try:
                    left = None if until is None else max(0.0, until - loop.time())
                    await asyncio.wait_for(self._changed.wait_for(news), left)
                except asyncio.TimeoutError:
                    return
                status = self._status.get(service, _UNKNOWN)
            if status != sent:
                # Written outside the lock: a slow watcher holds up no one else.
                await context.write(health_pb2.HealthCheckResponse(status=status))
                sent = status
            if self._stopping:
                return
