"""The stream on a grpc.aio server the service made: its interceptors and services, one port."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from llmgw_wire import Ack, Registration
from llmgw_wire.stream import (
    CONNECT_ROUTE,
    AgentService,
    ControlPlane,
    ControlSession,
    PeerUnavailable,
    StreamError,
    add_to_server,
    connect,
    server_options,
    start_server,
)
from llmgw_wire.stream._protocol import STOPPING
from llmgw_wire.testing.sample import sample_registration
from tests.support import run_async as run

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0
ECHO = "/example.Admin/Echo"


class Acking(ControlPlane):
    """Acks each registration; keeps the session open until the agent leaves."""

    def __init__(self) -> None:
        self.registered = asyncio.Event()

    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, Registration):
                await session.send(Ack(value.node.id, len(value.shards), "adopted"))
                self.registered.set()


class Seen(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A service's own interceptor: keeps the method of every call it sees."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        self.methods.append(details.method)
        return await continuation(details)


def echo_service() -> grpc.GenericRpcHandler:
    """A unary service of the application's own, raw bytes both ways."""

    async def echo(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return request

    return grpc.method_handlers_generic_handler(
        "example.Admin", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )


@contextlib.asynccontextmanager
async def own_server(
    plane: ControlPlane, interceptors: list[Any], **stream: Any
) -> AsyncIterator[tuple[AgentService, str]]:
    """The application's server: its interceptors, its service, the stream, one port."""
    server = grpc.aio.server(interceptors=interceptors, options=server_options())
    server.add_generic_rpc_handlers((echo_service(),))
    service = add_to_server(plane, server, **stream)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield service, f"127.0.0.1:{port}"
    finally:
        await service.stop(grace=None)
        await server.stop(None)


def test_the_stream_beside_a_service_of_its_own_with_its_interceptor() -> None:
    async def main() -> None:
        plane, seen = Acking(), Seen()
        async with own_server(plane, [seen]) as (service, target):
            async with connect(target) as agent:
                await agent.send(sample_registration())
                ack = await agent.recv(timeout=WAIT)
                assert isinstance(ack, Ack)
                assert ack.detail == "adopted"
                async with grpc.aio.insecure_channel(target) as channel:
                    answer = await channel.unary_unary(ECHO)(b"ping", timeout=WAIT)
                    assert answer == b"ping"
                    health = health_pb2_grpc.HealthStub(channel)
                    check = health_pb2.HealthCheckRequest(service="llmgw.v1.AgentService")
                    status = (await health.Check(check, timeout=WAIT)).status
                    assert status == health_pb2.HealthCheckResponse.SERVING
                assert CONNECT_ROUTE in seen.methods
                assert ECHO in seen.methods
                assert service.calls == 1
                idle = asyncio.ensure_future(service.wait_idle())
                await asyncio.sleep(0)
                assert not idle.done()  # a call is open
                # A graceful stop of the stream: NOT_SERVING, the open call
                # ended with "stopping", and the stop returns once it has.
                await asyncio.wait_for(service.stop(grace=WAIT), WAIT)
                assert service.calls == 0
                await asyncio.wait_for(idle, WAIT)
                with pytest.raises(PeerUnavailable) as ended:
                    await agent.recv(timeout=WAIT)
                assert ended.value.details == STOPPING
            # The server goes on serving the application's own service.
            async with grpc.aio.insecure_channel(target) as channel:
                assert await channel.unary_unary(ECHO)(b"still", timeout=WAIT) == b"still"

    run(main)


def test_a_stopped_stream_refuses_new_agents_and_its_health_says_so() -> None:
    async def main() -> None:
        async with own_server(Acking(), []) as (service, target):
            await service.stop(grace=WAIT)
            async with grpc.aio.insecure_channel(target) as channel:
                health = health_pb2_grpc.HealthStub(channel)
                check = health_pb2.HealthCheckRequest(service="")
                status = (await health.Check(check, timeout=WAIT)).status
                assert status == health_pb2.HealthCheckResponse.NOT_SERVING
            async with connect(target) as agent:
                # The refusal may meet the send (the call already over) or the recv.
                with contextlib.suppress(PeerUnavailable):
                    await agent.send(sample_registration())
                with pytest.raises(PeerUnavailable) as refused:
                    await agent.recv(timeout=WAIT)
                assert refused.value.details == STOPPING

    run(main)


def test_every_call_is_served_under_opentelemetry_grpc_instrumentation() -> None:
    from opentelemetry.instrumentation.grpc import aio_server_interceptor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def main() -> None:
        plane = Acking()
        interceptor = aio_server_interceptor(tracer_provider=provider)  # type: ignore[no-untyped-call]
        async with own_server(plane, [interceptor]) as (_, target):
            for _ in range(3):
                async with connect(target) as agent:
                    await agent.send(sample_registration())
                    assert isinstance(await agent.recv(timeout=WAIT), Ack)
                    await agent.leave(WAIT)
            async with grpc.aio.insecure_channel(target) as channel:
                assert await channel.unary_unary(ECHO)(b"x", timeout=WAIT) == b"x"
        # A call's span ends with its handler, before grpc sends its status
        # (which each `leave` waited for); the server has stopped besides.
        names = [span.name for span in exporter.get_finished_spans()]
        assert names.count(CONNECT_ROUTE) == 3
        assert ECHO in names

    run(main)


# --- the server's options: the caller's value wins ---------------------------


def test_each_option_appears_once_and_the_callers_value_wins() -> None:
    options = server_options(
        options=[("grpc.so_reuseport", 1), ("grpc.max_receive_message_length", 1000)]
    )
    names = [name for name, _ in options]
    assert len(names) == len(set(names))
    assert dict(options)["grpc.so_reuseport"] == 1
    assert dict(options)["grpc.max_receive_message_length"] == 1000


def test_a_callers_message_size_is_what_grpc_enforces() -> None:
    async def main() -> None:
        plane = Acking()
        small = [("grpc.max_receive_message_length", 1000)]
        server = await start_server(plane, options=small)
        try:
            async with connect(f"127.0.0.1:{server.port}") as agent:
                await agent.send(sample_registration())  # about 3.3 kB
                with pytest.raises(StreamError) as refused:
                    await agent.recv(timeout=WAIT)
                assert refused.value.code.name == "RESOURCE_EXHAUSTED"
        finally:
            await server.stop(None)
        assert not plane.registered.is_set()

    run(main)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_so_reuseport_from_the_caller_lets_two_servers_share_a_port() -> None:
    async def main() -> None:
        port = _free_port()
        reuse = [("grpc.so_reuseport", 1)]
        first = await start_server(Acking(), port=port, options=reuse)
        try:
            second = await start_server(Acking(), port=port, options=reuse)
            await second.stop(None)
            # Without it, the library's default: one control plane per port.
            with pytest.raises(OSError, match="cannot listen"):
                await start_server(Acking(), port=port)
        finally:
            await first.stop(None)

    run(main)
