"""Both ends of the agent stream, over real grpclib on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import grpclib.client
import grpclib.const
import grpclib.server
import pytest
from grpclib.encoding.base import CodecBase
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError, StreamTerminatedError

from llmgw_wire import (
    GPU,
    Ack,
    Compute,
    DecodeError,
    EncodeError,
    Heartbeat,
    Node,
    Registration,
    ShardCommand,
    ShardReport,
    State,
    StopCommand,
)
from llmgw_wire.stream import (
    CONNECT_ROUTE,
    AgentSession,
    ControlPlane,
    ControlSession,
    agent_message,
    connect,
    control_message,
    start_server,
    value_from_agent_message,
    value_from_control_message,
)
from llmgw_wire.stream.grpclib_codec import WireCodec
from llmgw_wire.testing.sample import sample_command, sample_registration
from llmgw_wire.v1 import AgentMessage, AgentServiceBase, ControlMessage, Register

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine

pytestmark = pytest.mark.timeout(30)

LOGGER = "llmgw_wire.stream"
# Field 99 of an envelope, length-delimited, holding field 1 = 1: what a newer
# peer's new kind of message looks like to this version.
UNKNOWN_MEMBER = bytes([0x9A, 0x06, 0x02, 0x08, 0x01])

REPORT = ShardReport(
    "mistral-r8",
    "mistral-r8-s0",
    State.READY,
    compute=Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40),
)


def run(main: Callable[[], Coroutine[Any, Any, None]], timeout: float = 10) -> None:
    """Run one async test, bounded: a hang fails the test instead of the run."""
    asyncio.run(asyncio.wait_for(main(), timeout))


@contextlib.asynccontextmanager
async def serving(plane: AgentServiceBase, codec: CodecBase | None = None) -> AsyncIterator[int]:
    """`plane` on a free port: `start_server`'s server, or one with `codec`."""
    if codec is None:
        server, port = await start_server(plane)
    else:
        server = grpclib.server.Server([plane], codec=codec)
        sock = socket.create_server(("127.0.0.1", 0))
        await server.start(sock=sock)
        port = sock.getsockname()[1]
    try:
        yield port
    finally:
        server.close()
        await asyncio.wait_for(server.wait_closed(), 5)


@contextlib.asynccontextmanager
async def agent(port: int, codec: CodecBase | None = None) -> AsyncIterator[AgentSession]:
    """An agent's session, over a channel with `codec` (a `WireCodec` unless told)."""
    codec = WireCodec() if codec is None else codec
    async with (
        grpclib.client.Channel("127.0.0.1", port, codec=codec) as channel,
        connect(channel) as session,
    ):
        yield session


# The codecs an end of the stream may have: the same bytes either way.
CODECS = {"WireCodec": WireCodec, "default codec": ProtoCodec}


class Recording(ControlPlane):
    """Runs `script` for each agent; keeps what it received and how it ended."""

    def __init__(self, script: Callable[[ControlSession], Awaitable[None]]) -> None:
        self.script = script
        self.ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def handle(self, session: ControlSession) -> None:
        outcome = "cancelled"
        try:
            await self.script(session)
            outcome = "returned"
        finally:
            if not self.ended.done():
                self.ended.set_result(outcome)


# --- envelopes --------------------------------------------------------------------

FROM_AGENT = [
    sample_registration(),
    REPORT,
    Heartbeat("n1", dt.datetime(2025, 1, 2, tzinfo=dt.timezone.utc)),
]
FROM_CONTROL = [
    sample_command(),
    StopCommand("r", "s", dt.timedelta(seconds=30)),
    Ack("n1", 2, "ok"),
]


@pytest.mark.parametrize("value", FROM_AGENT, ids=lambda v: type(v).__name__)
def test_agent_values_travel_in_their_own_member(value: Any) -> None:
    envelope = agent_message(value)
    members = [
        name for name in ("register", "shard_status", "heartbeat") if getattr(envelope, name)
    ]
    assert len(members) == 1
    assert value_from_agent_message(AgentMessage.parse(bytes(envelope))) == value


@pytest.mark.parametrize("value", FROM_CONTROL, ids=lambda v: type(v).__name__)
def test_control_values_travel_in_their_own_member(value: Any) -> None:
    envelope = control_message(value)
    members = [name for name in ("start_shard", "stop_shard", "ack") if getattr(envelope, name)]
    assert len(members) == 1
    assert value_from_control_message(ControlMessage.parse(bytes(envelope))) == value


def test_an_empty_member_is_present() -> None:
    # Heartbeat() and Ack() encode as empty sub-messages, which are falsy.
    assert bytes(agent_message(Heartbeat())) == b"\x1a\x00"
    assert value_from_agent_message(AgentMessage.parse(b"\x1a\x00")) == Heartbeat()
    assert value_from_control_message(ControlMessage.parse(b"\x1a\x00")) == Ack()


def test_a_value_the_other_end_sends_is_refused() -> None:
    with pytest.raises(TypeError, match="AgentMessage carries Registration, ShardReport"):
        agent_message(Ack())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ControlMessage carries ShardCommand, StopCommand, Ack"):
        control_message(sample_registration())  # type: ignore[arg-type]


def test_an_unknown_member_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    assert value_from_agent_message(AgentMessage.parse(UNKNOWN_MEMBER)) is None
    assert value_from_control_message(ControlMessage.parse(b"")) is None
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            logging.WARNING,
            "skipped a llmgw.v1.AgentMessage: no member this version knows (fields 99)",
        ),
        (
            logging.WARNING,
            "skipped a llmgw.v1.ControlMessage: no member this version knows (no fields at all)",
        ),
    ]


def test_two_members_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    both = bytes(agent_message(Heartbeat("n1"))) + bytes(agent_message(REPORT))
    assert value_from_agent_message(AgentMessage.parse(both)) is None
    assert caplog.messages == [
        "skipped a llmgw.v1.AgentMessage: more than one member set (shard_status, heartbeat)"
    ]


# --- the exchange -----------------------------------------------------------------


def test_the_demo_exchange_end_to_end() -> None:
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        registration = await session.recv(timeout=5)
        assert isinstance(registration, Registration)
        received.append(registration)
        assert session.node_id == "gpu-node-017"
        await session.send(Ack(registration.node.id, len(registration.shards), "adopted"))
        await session.send(sample_command())
        received.extend([value async for value in session])
        assert await session.recv(timeout=1) is None  # the end, again

    async def main() -> None:
        plane = Recording(control_plane)
        server, port = await start_server(plane)
        try:
            async with agent(port) as session:
                await session.send(sample_registration())
                ack = await session.recv(timeout=5)
                assert ack == Ack("gpu-node-017", 2, "adopted")
                command = await session.recv(timeout=5)
                assert isinstance(command, ShardCommand)
                assert command == sample_command()
                assert command.spec.api_key == "sk-llmgw-demo-0000"
                await session.send(attrs.evolve(REPORT, state=State.LOADING, compute=None))
                await session.send(REPORT)
                await session.close()
                await session.close()  # closing twice does nothing
                assert [v async for v in session] == []
                assert await session.recv(timeout=1) is None
            assert await asyncio.wait_for(plane.ended, 5) == "returned"
        finally:
            server.close()
            await server.wait_closed()

    run(main)
    registration, loading, ready = received
    assert registration == sample_registration()
    assert loading == attrs.evolve(REPORT, state=State.LOADING, compute=None)
    assert ready == REPORT


class Noting(CodecBase):
    """Notes the type of each message its codec encodes or decodes: which path a session took."""

    noted: list[str]

    def encode(self, message: Any, message_type: Any) -> bytes:
        self.noted.append(f"sent {type(message).__name__}")
        return super().encode(message, message_type)  # type: ignore[safe-super]

    def decode(self, data: bytes, message_type: Any) -> Any:
        message = super().decode(data, message_type)  # type: ignore[safe-super]
        self.noted.append(f"received {type(message).__name__}")
        return message


class NotingWireCodec(Noting, WireCodec):
    def __init__(self) -> None:
        super().__init__()
        self.noted = []


class NotingProtoCodec(Noting, ProtoCodec):
    def __init__(self) -> None:
        self.noted = []


@pytest.mark.parametrize(
    ("agent_codec", "plane_codec"),
    [(NotingWireCodec, NotingProtoCodec), (NotingProtoCodec, NotingWireCodec)],
    ids=["WireCodec agent, default codec control plane", "default codec agent, WireCodec plane"],
)
def test_a_wire_codec_end_talks_to_a_default_codec_end(
    agent_codec: type[NotingWireCodec | NotingProtoCodec],
    plane_codec: type[NotingWireCodec | NotingProtoCodec],
) -> None:
    agent_side, plane_side = agent_codec(), plane_codec()
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.append(await session.recv(timeout=5))
        await session.send(Ack("gpu-node-017", 2, "adopted"))
        await session.send(sample_command())
        received.extend([value async for value in session])

    async def main() -> None:
        async with (
            serving(Recording(control_plane), plane_side) as port,
            agent(port, agent_side) as session,
        ):
            await session.send(sample_registration())
            assert await session.recv(timeout=5) == Ack("gpu-node-017", 2, "adopted")
            assert await session.recv(timeout=5) == sample_command()
            await session.send(REPORT)
            await session.close()
            assert await session.recv(timeout=5) is None

    run(main)
    assert received == [sample_registration(), REPORT]
    # Each end took its own codec's path: domain values through WireCodec,
    # betterproto2 envelopes through grpclib's default codec.
    by_agent = {
        NotingWireCodec: [
            "sent Registration",
            "received Ack",
            "received ShardCommand",
            "sent ShardReport",
        ],
        NotingProtoCodec: [
            "sent AgentMessage",
            "received ControlMessage",
            "received ControlMessage",
            "sent AgentMessage",
        ],
    }
    by_plane = {
        NotingWireCodec: [
            "received Registration",
            "sent Ack",
            "sent ShardCommand",
            "received ShardReport",
        ],
        NotingProtoCodec: [
            "received AgentMessage",
            "sent ControlMessage",
            "sent ControlMessage",
            "received AgentMessage",
        ],
    }
    assert agent_side.noted == by_agent[agent_codec]
    assert plane_side.noted == by_plane[plane_codec]


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_a_value_that_cannot_be_sent_leaves_the_stream_usable(codec: type[CodecBase]) -> None:
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])

    async def main() -> None:
        async with serving(Recording(control_plane)) as port, agent(port, codec()) as session:
            with pytest.raises(TypeError, match="AgentMessage carries Registration"):
                await session.send(Ack())  # type: ignore[arg-type]
            too_big = Registration(node=Node(gpus=(GPU(memory_total_mb=2**31),)))
            with pytest.raises(EncodeError, match=r"at `\$\.node\.gpus\[0\]\.memory_total_mb`"):
                await session.send(too_big)
            await session.send(REPORT)
            await session.close()
            assert await session.recv(timeout=5) is None

    run(main)
    assert received == [REPORT]


def test_a_receive_timeout_loses_nothing() -> None:
    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=5)
        await asyncio.sleep(0.2)
        await session.send(Ack("n1", 0, "late"))

    async def main() -> None:
        async with serving(Recording(control_plane)) as port, agent(port) as session:
            await session.send(sample_registration())
            with pytest.raises(asyncio.TimeoutError):
                await session.recv(timeout=0.05)
            assert await session.recv(timeout=5) == Ack("n1", 0, "late")
            assert await session.recv(timeout=5) is None

    run(main)


def test_every_waiting_reader_sees_the_end() -> None:
    async def control_plane(session: ControlSession) -> None:
        first, second = await asyncio.gather(session.recv(timeout=5), session.recv(timeout=5))
        assert (first, second) == (None, None)

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as port, agent(port) as session:
            assert str(session) == f"control plane 127.0.0.1:{port}"
            await asyncio.sleep(0.1)
            await session.close()
            assert await session.recv(timeout=5) is None
        assert await asyncio.wait_for(plane.ended, 5) == "returned"

    run(main)


def test_sending_after_close_is_refused() -> None:
    async def control_plane(session: ControlSession) -> None:
        assert await session.recv(timeout=5) is None

    async def main() -> None:
        async with serving(Recording(control_plane)) as port, agent(port) as session:
            await session.close()
            with pytest.raises(RuntimeError, match="is closed: nothing more can be sent"):
                await session.send(Heartbeat("n1"))

    run(main)


# --- a peer that goes away ----------------------------------------------------------


def test_an_agent_that_disconnects_mid_stream_ends_its_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)

    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=5)
        await session.send(sample_command())
        await session.recv()  # the agent never answers: only its going away ends this

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as port:
            channel = grpclib.client.Channel("127.0.0.1", port)
            async with connect(channel) as session:
                await session.send(sample_registration())
                assert isinstance(await session.recv(timeout=5), ShardCommand)
                channel.close()
                with pytest.raises(StreamTerminatedError, match="Connection lost"):
                    await session.recv(timeout=5)
            assert await asyncio.wait_for(plane.ended, 5) == "cancelled"

    run(main)
    assert any(
        r.levelno == logging.WARNING
        and r.getMessage().startswith("stream with agent of node gpu-node-017 at 127.0.0.1:")
        and r.getMessage().endswith(" lost: connection closed or server closing")
        for r in caplog.records
    )


def test_a_control_plane_that_fails_mid_stream_ends_the_agents_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=5)
        await session.send(Ack("n1", 0, ""))
        await session.recv(timeout=5)  # the agent has the Ack
        raise GRPCError(grpclib.const.Status.UNAVAILABLE, "shutting down for maintenance")

    async def main() -> None:
        async with serving(Recording(control_plane)) as port, agent(port) as session:
            await session.send(sample_registration())
            assert await session.recv(timeout=5) == Ack("n1", 0, "")
            await session.send(Heartbeat("n1"))
            with pytest.raises(GRPCError) as error:
                await session.recv(timeout=5)
            assert error.value.status is grpclib.const.Status.UNAVAILABLE
            assert error.value.message == "shutting down for maintenance"
            with pytest.raises(GRPCError):  # and again: the end does not change
                await session.recv(timeout=5)

    run(main)
    assert caplog.messages[-1].endswith(
        " failed: status UNAVAILABLE: shutting down for maintenance"
    )


def test_a_closing_control_plane_tells_its_agents() -> None:
    async def control_plane(session: ControlSession) -> None:
        async for _ in session:
            pass

    async def main() -> None:
        plane = Recording(control_plane)
        server, port = await start_server(plane)
        async with agent(port) as session:
            await session.send(sample_registration())
            await asyncio.sleep(0.1)
            server.close()
            with pytest.raises(GRPCError) as error:
                await session.recv(timeout=5)
            assert error.value.status is grpclib.const.Status.UNAVAILABLE
            assert error.value.message == "the control plane is closing"
        await asyncio.wait_for(server.wait_closed(), 5)
        assert plane.ended.result() == "cancelled"

    run(main)


# A control plane in a process of its own, which says its port and then
# serves until it is killed.
DYING_CONTROL_PLANE = """
import asyncio
from llmgw_wire.stream import ControlPlane, start_server

class Forever(ControlPlane):
    async def handle(self, session):
        async for _ in session:
            pass

async def main():
    server, port = await start_server(Forever())
    print(port, flush=True)
    await server.wait_closed()

asyncio.run(main())
"""


def test_a_control_plane_that_dies_ends_the_agents_stream() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", DYING_CONTROL_PLANE], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())

        async def main() -> None:
            async with agent(port) as session:
                await session.send(sample_registration())
                await session.send(Heartbeat("gpu-node-017"))
                process.kill()
                with pytest.raises(StreamTerminatedError, match="Connection lost"):
                    await session.recv(timeout=5)

        run(main)
    finally:
        process.kill()
        process.wait(5)


def test_an_agent_that_cannot_connect_gets_an_os_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: nobody answers

        async def main() -> None:
            async with grpclib.client.Channel("127.0.0.1", port) as channel:
                with pytest.raises(ConnectionRefusedError):
                    async with connect(channel):
                        pass

        run(main)


def test_a_taken_port_is_an_os_error() -> None:
    async def main() -> None:
        plane = Recording(lambda session: asyncio.sleep(0))
        with (
            socket.create_server(("127.0.0.1", 0)) as taken,
            pytest.raises(OSError, match="in use"),
        ):
            await start_server(plane, "127.0.0.1", taken.getsockname()[1])

    run(main)


# --- a peer that speaks differently -------------------------------------------------


class RawBytes:
    """A request type whose bytes are whatever the test says (grpclib's codec calls these)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:
        return self.data

    @classmethod
    def FromString(cls, data: bytes) -> RawBytes:
        return cls(data)


@contextlib.asynccontextmanager
async def raw_agent(port: int) -> AsyncIterator[grpclib.client.Stream[RawBytes, ControlMessage]]:
    async with grpclib.client.Channel("127.0.0.1", port) as channel:
        stream = channel.request(
            CONNECT_ROUTE, grpclib.const.Cardinality.STREAM_STREAM, RawBytes, ControlMessage
        )
        async with stream:
            await stream.send_request()
            yield stream


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_an_unknown_member_from_a_newer_agent_is_skipped(
    caplog: pytest.LogCaptureFixture, codec: type[CodecBase]
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])
        await session.send(Ack("gpu-node-017", 2, "still here"))

    async def main() -> None:
        async with serving(Recording(control_plane), codec()) as port, raw_agent(port) as stream:
            await stream.send_message(RawBytes(UNKNOWN_MEMBER))
            await stream.send_message(RawBytes(bytes(agent_message(sample_registration()))))
            await stream.send_message(RawBytes(UNKNOWN_MEMBER))
            await stream.send_message(RawBytes(bytes(agent_message(REPORT))))
            await stream.end()
            assert [m async for m in stream] == [
                control_message(Ack("gpu-node-017", 2, "still here"))
            ]

    run(main)
    assert received == [sample_registration(), REPORT]
    skipped = [
        (r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith("skipped")
    ]
    # Said once as a warning, then only at debug level.
    assert [level for level, _ in skipped] == [logging.WARNING, logging.DEBUG]
    assert re.fullmatch(
        r"skipped a llmgw\.v1\.AgentMessage from agent (of node gpu-node-017 )?"
        r"at 127\.0\.0\.1:\d+: no member this version knows \(fields 99\)",
        skipped[0][1],
    )


class RawControlPlane(AgentServiceBase):
    """A control plane that sends whatever envelopes the test gives it, as bytes."""

    def __init__(self, messages: list[bytes]) -> None:
        self.messages = messages

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        return {
            CONNECT_ROUTE: grpclib.const.Handler(
                self._connect, grpclib.const.Cardinality.STREAM_STREAM, AgentMessage, RawBytes
            )
        }

    async def _connect(self, stream: grpclib.server.Stream[AgentMessage, RawBytes]) -> None:
        for data in self.messages:
            await stream.send_message(RawBytes(data))
        async for _ in stream:
            pass


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_an_unknown_member_from_a_newer_control_plane_is_skipped(
    caplog: pytest.LogCaptureFixture, codec: type[CodecBase]
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    # Not a ControlPlane: `start_server` gives it grpclib's default codec.
    plane = RawControlPlane([UNKNOWN_MEMBER, bytes(control_message(sample_command()))])

    async def main() -> None:
        async with serving(plane) as port, agent(port, codec()) as session:
            assert await session.recv(timeout=5) == sample_command()
            await session.close()
            assert await session.recv(timeout=5) is None

    run(main)
    (message,) = caplog.messages
    assert message.startswith("skipped a llmgw.v1.ControlMessage from control plane 127.0.0.1:")
    assert message.endswith(": no member this version knows (fields 99)")


@pytest.mark.parametrize(
    ("codec", "reason"),
    [
        (
            WireCodec,
            "field 1 (`node_id`) at offset 2 is not valid UTF-8 (byte 4 is 0xff)"
            " - at `$.register.node_id`",
        ),
        (ProtoCodec, "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff"),
    ],
    ids=CODECS.keys(),
)
def test_bytes_that_are_not_a_message_end_the_stream_with_a_decode_error(
    codec: type[CodecBase], reason: str
) -> None:
    errors: list[BaseException] = []
    # A Register whose node id is not UTF-8.
    bad = bytes(AgentMessage(register=Register(node_id="x"))).replace(b"x", b"\xff")

    async def control_plane(session: ControlSession) -> None:
        try:
            await session.recv(timeout=5)
        except DecodeError as exc:
            errors.append(exc)

    async def main() -> None:
        async with serving(Recording(control_plane), codec()) as port, raw_agent(port) as stream:
            await stream.send_message(RawBytes(bad))
            await stream.end()
            assert [m async for m in stream] == []

    run(main)
    (error,) = errors
    assert str(error).startswith(f"Invalid `llmgw.v1.AgentMessage`: {reason}")


def test_no_secret_reaches_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def control_plane(session: ControlSession) -> None:
        await session.send(sample_command())
        await session.recv(timeout=5)

    async def main() -> None:
        async with serving(Recording(control_plane)) as port, agent(port) as session:
            command = await session.recv(timeout=5)
            assert isinstance(command, ShardCommand)
            await session.close()

    run(main)
    assert any(r.name == LOGGER for r in caplog.records)
    assert "sk-llmgw-demo-0000" not in caplog.text


def test_the_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    (block,) = [
        b
        for b in re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
        if "llmgw_wire.stream" in b
    ]
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == (
        "ShardReport(replica_id='mistral-r8', shard_id='mistral-r8-s0', "
        "state=<State.READY: 'ready'>, detail='', compute=None)\n"
    )
