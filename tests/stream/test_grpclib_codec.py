"""The grpclib codec: the stream's envelopes as domain values, in the betterproto2 bytes."""

from __future__ import annotations

import socket
from typing import Any

import grpclib.client
import grpclib.const
import grpclib.server
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import (
    GPU,
    Ack,
    DecodeError,
    EncodeError,
    Heartbeat,
    Node,
    Registration,
    ShardCommand,
    ShardReport,
    StopCommand,
    converter,
    decode,
    v1,
)
from llmgw_wire.mapping import ENVELOPES
from llmgw_wire.stream import ControlPlane, ControlSession, connect, start_server
from llmgw_wire.stream.grpclib_codec import UnknownMember, WireCodec
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.sample import sample_command, sample_registration
from llmgw_wire.v1 import AgentMessage, ControlMessage
from tests.support import run_async

pytestmark = pytest.mark.timeout(60)

CODEC = WireCodec()
WIRE = {"llmgw.v1.AgentMessage": AgentMessage, "llmgw.v1.ControlMessage": ControlMessage}
MEMBERS = [
    pytest.param(WIRE[envelope.wire], member, domain, id=f"{envelope.wire[9:]}.{member}")
    for envelope in ENVELOPES
    for member, domain in envelope.members
]
ROUTE = "/llmgw.v1.AgentService/Connect"


@pytest.mark.parametrize(("envelope", "member", "domain"), MEMBERS)
@given(data=st.data())
def test_each_member_crosses_as_betterproto2_would_carry_it(
    envelope: type, member: str, domain: type, data: Any
) -> None:
    value = data.draw(lst.domain_values(domain))
    raw = CODEC.encode(value, envelope)
    assert CODEC.decode(raw, envelope) == value
    # The bytes are betterproto2's envelope, with that member set.
    wire: Any = envelope
    typed = wire.parse(raw)
    assert converter.structure(getattr(typed, member), domain) == value
    # And betterproto2's bytes read back the same through the codec.
    written = bytes(wire(**{member: converter.unstructure(value)}))
    assert CODEC.decode(written, envelope) == value


def test_an_envelope_with_no_member_known_here() -> None:
    # Field 99, a message holding field 1 = 1: a newer peer's new kind of message.
    assert CODEC.decode(bytes([0x9A, 0x06, 0x02, 0x08, 0x01]), AgentMessage) == UnknownMember(
        "llmgw.v1.AgentMessage", (99,)
    )
    assert CODEC.decode(b"", ControlMessage) == UnknownMember("llmgw.v1.ControlMessage", ())


def test_the_last_member_on_the_wire_is_the_one_read() -> None:
    # Protobuf's rule for a oneof, which Google's runtime (and Go's) follow.
    report = ShardReport(replica_id="r1")
    raw = CODEC.encode(sample_registration(), AgentMessage) + CODEC.encode(report, AgentMessage)
    assert CODEC.decode(raw, AgentMessage) == report


def test_wire_messages_pass_through() -> None:
    envelope = ControlMessage(ack=v1.Ack(node_id="n1", adopted_shards=2))
    assert CODEC.encode(envelope, ControlMessage) == bytes(envelope)
    inner = AgentMessage.parse(CODEC.encode(sample_registration(), AgentMessage)).register
    assert inner is not None
    assert CODEC.decode(bytes(inner), v1.Register) == decode(bytes(inner), v1.Register)


def test_values_an_envelope_does_not_carry() -> None:
    with pytest.raises(TypeError, match="carries Registration, ShardReport, Heartbeat, not Ack"):
        CODEC.encode(Ack(), AgentMessage)
    with pytest.raises(TypeError, match="expected a Register, got Node"):
        CODEC.encode(Node(), v1.Register)


def test_a_value_the_wire_cannot_carry() -> None:
    value = Registration(node=Node(gpus=(GPU(memory_total_mb=2**31),)))
    with pytest.raises(EncodeError, match=r"at `\$\.node\.gpus\[0\]\.memory_total_mb`"):
        CODEC.encode(value, AgentMessage)


@pytest.mark.parametrize(
    "raw",
    [
        bytes(AgentMessage(register=v1.Register(node_id="n1")))[:-1],  # truncated
        bytes([0x0A, 0x02, 0x0A, 0x7F]),  # a length past the end
        bytes([0x0F]),  # wire type 7
        bytes([0x0A, 0x04, 0x0A, 0x02, 0xFF, 0xFE]),  # node_id not UTF-8
    ],
    ids=["truncated", "length past the end", "wire type 7", "invalid UTF-8"],
)
def test_hostile_bytes_are_a_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        CODEC.decode(raw, AgentMessage)


# --- over grpclib -----------------------------------------------------------------------


class _Adopting:
    """A control plane's Connect handler: an `Ack` for each registration, commands echoed."""

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        return {
            ROUTE: grpclib.const.Handler(
                self.connect, grpclib.const.Cardinality.STREAM_STREAM, AgentMessage, ControlMessage
            )
        }

    async def connect(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        async for value in stream:
            if isinstance(value, Registration):
                await stream.send_message(Ack(value.node.id, len(value.shards), "adopted"))
            elif isinstance(value, UnknownMember):
                await stream.send_message(Ack(detail=f"skipped fields {value.fields}"))
            else:
                await stream.send_message(StopCommand(replica_id=type(value).__name__))


async def _serve() -> tuple[grpclib.server.Server, int]:
    server = grpclib.server.Server([_Adopting()], codec=WireCodec())
    # A socket of the test's own: its port is known without the server's private parts.
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    port: int = listening.getsockname()[1]
    await server.start(sock=listening)
    return server, port


def test_domain_values_on_both_ends_of_a_stream() -> None:
    async def main() -> None:
        server, port = await _serve()
        channel = grpclib.client.Channel("127.0.0.1", port, codec=WireCodec())
        # The stream's declared types are the envelopes; with the codec it carries domain values.
        request: Any = channel.request(
            ROUTE, grpclib.const.Cardinality.STREAM_STREAM, AgentMessage, ControlMessage
        )
        try:
            async with request as stream:
                await stream.send_message(sample_registration())
                ack = await stream.recv_message()
                await stream.send_message(Heartbeat(node_id="gpu-node-017"))
                stop = await stream.recv_message()
                await stream.end()
        finally:
            channel.close()
            server.close()
            await server.wait_closed()
        assert ack == Ack("gpu-node-017", 2, "adopted")
        assert stop == StopCommand(replica_id="Heartbeat")

    run_async(main)


def test_a_peer_with_grpclibs_default_codec() -> None:
    """The bytes are betterproto2's: an agent without the codec talks to a plane with it."""

    async def main() -> None:
        server, port = await _serve()
        channel = grpclib.client.Channel("127.0.0.1", port)
        try:
            async with channel.request(
                ROUTE, grpclib.const.Cardinality.STREAM_STREAM, AgentMessage, ControlMessage
            ) as stream:
                register = converter.unstructure(sample_registration())
                await stream.send_message(AgentMessage(register=register))
                ack = await stream.recv_message()
                await stream.send_message(AgentMessage())
                skipped = await stream.recv_message()
                await stream.end()
        finally:
            channel.close()
            server.close()
            await server.wait_closed()
        assert ack == ControlMessage(
            ack=v1.Ack(node_id="gpu-node-017", adopted_shards=2, detail="adopted")
        )
        assert skipped == ControlMessage(ack=v1.Ack(detail="skipped fields ()"))

    run_async(main)


def test_sample_command_crosses() -> None:
    raw = CODEC.encode(sample_command(), ControlMessage)
    assert CODEC.decode(raw, ControlMessage) == sample_command()
    assert isinstance(CODEC.decode(raw, ControlMessage), ShardCommand)


# --- grpclib peers and the grpc.aio ends, both ways ----------------------------------


class _AioAdopting(ControlPlane):
    """The grpc.aio control plane: an `Ack` for each registration, commands echoed."""

    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, Registration):
                await session.send(Ack(value.node.id, len(value.shards), "adopted"))
            else:
                await session.send(StopCommand(replica_id=type(value).__name__))


@pytest.mark.parametrize("codec", [WireCodec, None], ids=["WireCodec", "default codec"])
def test_a_grpclib_agent_talks_to_the_grpc_aio_control_plane(codec: type[WireCodec] | None) -> None:
    async def main() -> None:
        server = await start_server(_AioAdopting())
        channel = grpclib.client.Channel(
            "127.0.0.1", server.port, codec=None if codec is None else codec()
        )
        try:
            request: Any = channel.request(
                ROUTE, grpclib.const.Cardinality.STREAM_STREAM, AgentMessage, ControlMessage
            )
            async with request as stream:
                if codec is None:
                    register = converter.unstructure(sample_registration())
                    await stream.send_message(AgentMessage(register=register))
                    beat = converter.unstructure(Heartbeat(node_id="gpu-node-017"))
                    await stream.send_message(AgentMessage(heartbeat=beat))
                else:
                    await stream.send_message(sample_registration())
                    await stream.send_message(Heartbeat(node_id="gpu-node-017"))
                await stream.end()
                got = [await stream.recv_message(), await stream.recv_message()]
                assert await stream.recv_message() is None
        finally:
            channel.close()
            await server.stop(10)
        if codec is None:
            got = [
                converter.structure(m.ack or m.stop_shard, type_)
                for m, type_ in zip(got, (Ack, StopCommand), strict=True)
            ]
        assert got == [Ack("gpu-node-017", 2, "adopted"), StopCommand(replica_id="Heartbeat")]

    run_async(main)


def test_the_grpc_aio_agent_talks_to_a_grpclib_control_plane() -> None:
    async def main() -> None:
        server, port = await _serve()
        try:
            async with connect(f"127.0.0.1:{port}") as session:
                await session.send(sample_registration())
                ack = await session.recv(10)
                await session.send(Heartbeat(node_id="gpu-node-017"))
                stop = await session.recv(10)
                await session.close()
                end = await session.recv(10)
        finally:
            server.close()
            await server.wait_closed()
        assert ack == Ack("gpu-node-017", 2, "adopted")
        assert stop == StopCommand(replica_id="Heartbeat")
        assert end is None

    run_async(main)
