"""The standard health service of a control plane, asked by grpc's own health client."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from llmgw_wire.stream import (
    PeerUnavailable,
    ServerLimits,
    connect,
    start_server,
)
from llmgw_wire.testing.sample import sample_registration
from tests.support import Holding, loopback_relay
from tests.support import run_async as run

pytestmark = pytest.mark.timeout(120)
WAIT = 20.0
SERVICES = ("", "llmgw.v1.AgentService")
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def check(stub: health_pb2_grpc.HealthStub, service: str) -> int:
    answer = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=WAIT)
    return int(answer.status)


def test_serving_then_not_serving_once_a_graceful_stop_begins() -> None:
    async def main() -> None:
        plane = Holding()
        server = await start_server(plane)
        target = f"127.0.0.1:{server.port}"
        async with grpc.aio.insecure_channel(target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            assert [await check(stub, s) for s in SERVICES] == [SERVING, SERVING]
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await check(stub, "no.such.Service")
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND

            watch = stub.Watch(health_pb2.HealthCheckRequest(service="llmgw.v1.AgentService"))
            assert (await asyncio.wait_for(watch.read(), WAIT)).status == SERVING
            async with connect(target) as agent:
                await agent.send(sample_registration())
                await asyncio.wait_for(plane.registered.wait(), WAIT)
                # The agent's call is held open, so the stop stays in its grace period.
                stopping = asyncio.ensure_future(server.stop(grace=60))
                assert (await asyncio.wait_for(watch.read(), WAIT)).status == NOT_SERVING
                assert not stopping.done()
                assert [await check(stub, s) for s in SERVICES] == [NOT_SERVING, NOT_SERVING]
                # Once stopping, the control plane cannot say SERVING again.
                await server.set_serving(True)
                assert await check(stub, "") == NOT_SERVING
                plane.release.set()
                with pytest.raises(PeerUnavailable, match="the control plane is stopping"):
                    await agent.recv(timeout=WAIT)
            await stopping
            # Said NOT_SERVING, the Watch ended: it held the stop no longer.
            assert await watch.read() is grpc.aio.EOF
            assert await watch.code() == grpc.StatusCode.OK

    run(main)


def test_a_standby_says_not_serving_and_refuses_new_agents() -> None:
    async def main() -> None:
        plane = Holding()
        plane.release.set()
        server = await start_server(plane)
        target = f"127.0.0.1:{server.port}"
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                await server.set_serving(False)
                assert [await check(stub, s) for s in SERVICES] == [NOT_SERVING, NOT_SERVING]
                async with connect(target) as agent:
                    with contextlib.suppress(PeerUnavailable):
                        await agent.send(sample_registration())
                    with pytest.raises(PeerUnavailable, match="the control plane is not serving"):
                        await agent.recv(timeout=WAIT)
                await server.set_serving(True)
                assert await check(stub, "llmgw.v1.AgentService") == SERVING
                async with connect(target) as agent:
                    await agent.send(sample_registration())
                    await asyncio.wait_for(plane.registered.wait(), WAIT)
        finally:
            await server.stop(grace=None)

    run(main)


def test_the_health_service_can_be_left_out() -> None:
    async def main() -> None:
        server = await start_server(Holding(), health=False)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    await check(health_pb2_grpc.HealthStub(channel), "")
                assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
        finally:
            await server.stop(grace=None)

    run(main)


def test_reflection_describes_the_agent_stream_to_a_reflection_client() -> None:
    pytest.importorskip("grpc_reflection")
    from google.protobuf.descriptor_pool import DescriptorPool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    async def main() -> None:
        server = await start_server(Holding(), reflection=True)
        try:

            def describe() -> tuple[list[str], list[str]]:
                with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                    database = ProtoReflectionDescriptorDatabase(channel)
                    pool = DescriptorPool(database)
                    service = pool.FindServiceByName("llmgw.v1.AgentService")
                    return sorted(database.get_services()), [m.name for m in service.methods]

            services, methods = await asyncio.to_thread(describe)
        finally:
            await server.stop(grace=None)
        assert services == [
            "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection",
            "llmgw.v1.AgentService",
        ]
        assert methods == ["Connect"]

    run(main)


def test_the_served_health_proto_is_grpc_s() -> None:
    # The library compiles grpc-proto's health.proto itself (`make gen`);
    # grpcio-health-checking ships grpc's own compiled copy of the same file
    # (under another file name), which grpc's health client uses.
    from google.protobuf import descriptor_pb2

    from llmgw_wire.stream._health import HEALTH_FILE

    grpcs = descriptor_pb2.FileDescriptorProto.FromString(health_pb2.DESCRIPTOR.serialized_pb)
    assert grpcs.name == "grpc_health/v1/health.proto"
    grpcs.name = HEALTH_FILE.name
    ours = descriptor_pb2.FileDescriptorProto()
    ours.CopyFrom(HEALTH_FILE)
    # protoc's descriptor sets name each field's JSON name; grpc's module leaves
    # it out, for the runtime to derive: the same name either way.
    pending = [(ours.package, message) for message in ours.message_type]
    while pending:
        prefix, message = pending.pop()
        full = f"{prefix}.{message.name}"
        pending += [(full, nested) for nested in message.nested_type]
        derived = health_pb2.DESCRIPTOR.pool.FindMessageTypeByName(full).fields_by_name
        for field in message.field:
            assert field.json_name == derived[field.name].json_name, (full, field.name)
            field.ClearField("json_name")
    assert ours == grpcs, ours


def test_the_standard_request_bytes_are_answered_with_the_standard_response_bytes() -> None:
    # What any client of the standard service sends, as bytes: `service` is field 1
    # (a string), `status` field 1 (an enum: SERVING is 1, NOT_SERVING 2).
    async def main() -> None:
        server = await start_server(Holding())
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                check = channel.unary_unary("/grpc.health.v1.Health/Check")
                answers = [await check(b"", timeout=WAIT)]
                answers.append(await check(b"\x0a\x15llmgw.v1.AgentService", timeout=WAIT))
                await server.set_serving(False)
                answers.append(await check(b"", timeout=WAIT))
        finally:
            await server.stop(grace=None)
        assert answers == [b"\x08\x01", b"\x08\x01", b"\x08\x02"]

    run(main)


def test_list_gives_every_status() -> None:
    async def main() -> None:
        server = await start_server(Holding())
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                await server.set_serving(False)
                listed = await stub.List(health_pb2.HealthListRequest(), timeout=WAIT)
        finally:
            await server.stop(grace=None)
        assert {name: answer.status for name, answer in listed.statuses.items()} == dict.fromkeys(
            SERVICES, NOT_SERVING
        )


@pytest.mark.slow
def test_watches_are_counted_per_peer_and_server_and_end_after_their_lifetime() -> None:
    """Anyone may watch before registering: a few at a time, for a while, then the door shuts."""
    # A lifetime long enough that the first watches are still open when the next are refused.
    limits = ServerLimits(
        max_side_calls=3, max_side_calls_per_peer=2, side_call_lifetime=5.0, connection_idle=1.0
    )
    request = health_pb2.HealthCheckRequest(service="no.such.Service")

    async def main() -> None:
        server = await start_server(Holding(), limits=limits)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                watches = [stub.Watch(request) for _ in range(2)]
                for watch in watches:
                    answer = await asyncio.wait_for(watch.read(), WAIT)
                    assert answer.status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
                over = stub.Watch(request)
                assert await over.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "from this peer" in await over.details()
                # From another address: another peer, with a share of its own.
                async with (
                    loopback_relay(server.port, source="127.0.0.2") as relay,
                    grpc.aio.insecure_channel(relay) as other,
                ):
                    other_stub = health_pb2_grpc.HealthStub(other)
                    third = other_stub.Watch(request)
                    assert (await asyncio.wait_for(third.read(), WAIT)).status
                    over = other_stub.Watch(request)
                    assert await over.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert "on this server" in await over.details()
                    # Each ends, with OK, after its lifetime: its client may watch again.
                    for watch in (*watches, third):
                        assert await asyncio.wait_for(watch.code(), WAIT) == grpc.StatusCode.OK
                    assert await check(stub, "") == SERVING  # Check is answered at once
                    # Holding nothing now, the connection is closed once idle.
                    state = channel.get_state()
                    while state is not grpc.ChannelConnectivity.IDLE:
                        await asyncio.wait_for(channel.wait_for_state_change(state), WAIT)
                        state = channel.get_state()
        finally:
            await server.stop(grace=None)

    run(main)


@pytest.mark.slow
def test_reflection_calls_are_counted_and_end_after_their_lifetime() -> None:
    pytest.importorskip("grpc_reflection")
    route = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    list_services = b"\x3a\x00"  # ServerReflectionRequest.list_services = ""
    limits = ServerLimits(max_side_calls_per_peer=1, side_call_lifetime=5.0)

    async def main() -> None:
        server = await start_server(Holding(), reflection=True, limits=limits)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                first = channel.stream_stream(route)()
                await first.write(list_services)
                assert await asyncio.wait_for(first.read(), WAIT)  # the services, listed
                second = channel.stream_stream(route)()
                assert await second.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "from this peer" in await second.details()
                # Its lifetime over, the first ends with OK, though its client goes on.
                assert await asyncio.wait_for(first.code(), WAIT) == grpc.StatusCode.OK
        finally:
            await server.stop(grace=None)

    run(main)
