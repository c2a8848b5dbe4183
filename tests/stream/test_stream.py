"""Both ends of the agent stream, over real grpc.aio on loopback."""

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
from typing import TYPE_CHECKING

import attrs
import grpc
import grpc.aio
import pytest

from llmgw_wire import (
    GPU,
    Ack,
    Compute,
    EncodeError,
    Heartbeat,
    Node,
    Registration,
    ShardCommand,
    ShardReport,
    State,
    StopCommand,
)
from llmgw_wire.codec.envelope import AGENT_MESSAGE, decode_envelope, encode_envelope
from llmgw_wire.errors import DecodeError, StatusCode, UsageError
from llmgw_wire.stream import (
    AgentSession,
    Backoff,
    ControlPlane,
    ControlSession,
    MessageRejected,
    PeerUnavailable,
    PermissionDenied,
    RegistrationTimeout,
    StreamClosed,
    StreamError,
    Unauthenticated,
    connect,
    keep_connected,
    registration_from_inventory,
    start_server,
)
from llmgw_wire.stream._logs import FIRST_LINES_AT_MOST
from llmgw_wire.testing.sample import (
    sample_command,
    sample_inventory,
    sample_node,
    sample_registration,
)
from llmgw_wire.testing.stream import registration_of
from llmgw_wire.v1 import AgentMessage, Register
from tests.support import raw_agent, serving, target
from tests.support import run_async as run

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

pytestmark = pytest.mark.timeout(120)

LOGGER = "llmgw_wire.stream"
# Generous: a busy 2-core machine may take seconds for anything.
WAIT = 20.0
# Field 99 of an envelope, length-delimited, holding field 1 = 1: what a newer
# peer's new kind of message looks like to this version.
UNKNOWN_MEMBER = bytes([0x9A, 0x06, 0x02, 0x08, 0x01])

REPORT = ShardReport(
    "mistral-r8",
    "mistral-r8-s0",
    State.READY,
    compute=Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40),
)


class Recording(ControlPlane):
    """Runs `script` for each agent; keeps how it ended."""

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


# --- the exchange -----------------------------------------------------------------


def test_the_demo_exchange_end_to_end() -> None:
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        registration = await session.recv(timeout=WAIT)
        assert isinstance(registration, Registration)
        received.append(registration)
        assert session.node_id == "gpu-node-017"
        await session.send(Ack(registration.node.id, len(registration.shards), "adopted"))
        await session.send(sample_command())
        received.extend([value async for value in session])
        assert await session.recv(timeout=WAIT) is None  # the end, again

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as server, connect(target(server)) as session:
            await session.send(sample_registration())
            assert await session.recv(timeout=WAIT) == Ack("gpu-node-017", 2, "adopted")
            command = await session.recv(timeout=WAIT)
            assert command == sample_command()
            assert isinstance(command, ShardCommand)
            assert command.spec.api_key == "sk-llmgw-demo-0000"
            await session.send(attrs.evolve(REPORT, state=State.LOADING, compute=None))
            await session.send(REPORT)
            await session.close()
            await session.close()  # closing twice does nothing
            assert [v async for v in session] == []
            assert await session.recv(timeout=WAIT) is None
            assert await asyncio.wait_for(plane.ended, WAIT) == "returned"

    run(main)
    assert received == [
        sample_registration(),
        attrs.evolve(REPORT, state=State.LOADING, compute=None),
        REPORT,
    ]


def test_a_value_that_cannot_be_sent_leaves_the_stream_usable() -> None:
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            with pytest.raises(TypeError, match="AgentMessage carries Registration"):
                await session.send(Ack())  # type: ignore[arg-type]
            too_big = Registration(node=Node(id="n1", gpus=(GPU(memory_total_mb=2**31),)))
            with pytest.raises(EncodeError, match=r"at `\$\.node\.gpus\[0\]\.memory_total_mb`"):
                await session.send(too_big)
            await session.send(REPORT)
            await session.close()
            assert await session.recv(timeout=WAIT) is None

    run(main)
    assert received == [REPORT]


def test_a_receive_timeout_loses_nothing() -> None:
    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)  # the registration
        await session.recv(timeout=WAIT)  # the heartbeat, sent after the agent's timeout
        await session.send(Ack("n1", 0, "late"))

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.send(sample_registration())
            # Nothing can arrive: the control plane waits for the heartbeat.
            with pytest.raises(asyncio.TimeoutError):
                await session.recv(timeout=1)
            await session.send(Heartbeat("n1"))
            assert await session.recv(timeout=WAIT) == Ack("n1", 0, "late")
            assert await session.recv(timeout=WAIT) is None

    run(main)


def test_every_waiting_reader_sees_the_end() -> None:
    async def control_plane(session: ControlSession) -> None:
        first, second = await asyncio.gather(session.recv(WAIT), session.recv(WAIT))
        assert (first, second) == (None, None)

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as server, connect(target(server)) as session:
            assert str(session) == f"control plane 127.0.0.1:{server.port}"
            await session.close()
            assert await session.recv(timeout=WAIT) is None
            assert await asyncio.wait_for(plane.ended, WAIT) == "returned"

    run(main)


def test_sending_after_close_is_refused() -> None:
    async def control_plane(session: ControlSession) -> None:
        assert await session.recv(timeout=WAIT) is None

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.close()
            with pytest.raises(StreamClosed, match="is closed: nothing more can be sent"):
                await session.send(Heartbeat("n1"))

    run(main)


# --- how calls end ------------------------------------------------------------------


def test_a_status_from_the_control_plane_reaches_the_agent_after_what_it_sent() -> None:
    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        await session.send(Ack("n1", 0, ""))
        raise StreamError("node is cordoned", code="FAILED_PRECONDITION")

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.send(sample_registration())
            assert await session.recv(timeout=WAIT) == Ack("n1", 0, "")
            with pytest.raises(StreamError) as error:
                await session.recv(timeout=WAIT)
            assert (error.value.code, error.value.details) == (
                StatusCode.FAILED_PRECONDITION,
                "node is cordoned",
            )
            with pytest.raises(StreamError):  # and again: the end does not change
                await session.recv(timeout=WAIT)

    run(main)


def test_a_handler_that_fails_ends_the_call_with_internal_and_no_internals() -> None:
    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        raise KeyError("secret-internal-detail")

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.send(sample_registration())
            with pytest.raises(StreamError) as error:
                await session.recv(timeout=WAIT)
            assert (error.value.code, error.value.details) == (
                StatusCode.INTERNAL,
                "the control plane failed to serve",
            )

    run(main)


@pytest.mark.parametrize("reads", [True, False], ids=["reading", "leaving-unread"])
def test_a_graceful_stop_delivers_everything_then_unavailable(reads: bool) -> None:
    """Reading, the agent gets what was sent, then the stop; leaving unread, the stop still.

    An agent that never reads leaves a call that is over (or, if grpc has not
    told it yet, `leave` reads its end): either way `recv` then gives the
    stop's UNAVAILABLE, and again, not an OK end.
    """
    stopping: asyncio.Event

    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        await session.send(Ack("gpu-node-017", 2, "adopted"))
        await session.send(sample_command())
        await session.send(StopCommand("r", "s", dt.timedelta(seconds=30)))
        stopping.set()
        async for _ in session:
            pass

    async def main() -> None:
        nonlocal stopping
        stopping = asyncio.Event()
        plane = Recording(control_plane)
        server = await start_server(plane)
        async with connect(target(server)) as session:
            await session.send(sample_registration())
            await asyncio.wait_for(stopping.wait(), WAIT)
            await server.stop(grace=WAIT)
            if reads:
                got = [await session.recv(timeout=WAIT) for _ in range(3)]
                assert [type(v) for v in got] == [Ack, ShardCommand, StopCommand]
            else:
                await session.leave(WAIT)
            for _ in range(1 if reads else 2):
                with pytest.raises(PeerUnavailable, match="the control plane is stopping"):
                    await session.recv(timeout=WAIT)
        assert plane.ended.result() == "cancelled"

    for _ in range(5 if reads else 3):
        run(main)


class OverCall:
    """An agent's call that is over, with `status`, before anything of it was read."""

    def __init__(self, status: StreamError | None) -> None:
        self._status = status
        self.reads = 0

    async def read(self) -> bytes | None:
        self.reads += 1
        raise AssertionError("a call that is over is not read")

    async def write(self, data: bytes) -> None:
        raise AssertionError("nothing is sent")

    async def done_writing(self) -> None:
        raise StreamClosed("the call is over")

    def cancel(self) -> None:
        pass

    def done(self) -> bool:
        return True

    async def status(self) -> StreamError | None:
        return self._status


@pytest.mark.parametrize(
    "status", [None, PeerUnavailable("UNAVAILABLE: the control plane is stopping")]
)
def test_leaving_a_call_already_over_gives_its_own_end(status: StreamError | None) -> None:
    """The call is over before `leave`, its end never read: `recv` then gives that end."""

    async def main() -> None:
        call = OverCall(status)
        session = AgentSession(call, "127.0.0.1:1")
        await session.leave(WAIT)
        for _ in range(2):
            if status is None:
                assert await session.recv(timeout=WAIT) is None
            else:
                with pytest.raises(PeerUnavailable, match="the control plane is stopping"):
                    await session.recv(timeout=WAIT)
        assert call.reads == 0

    run(main)


def test_an_agent_that_disconnects_ends_its_handler() -> None:
    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        await session.send(sample_command())
        await session.recv()  # the agent never answers: only its going away ends this

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as server:
            async with connect(target(server)) as session:
                await session.send(sample_registration())
                assert isinstance(await session.recv(timeout=WAIT), ShardCommand)
            # Leaving the block cancels the call, and raises nothing; the
            # handler sees the end of the stream or is cancelled, whichever
            # grpc reports first.
            assert await asyncio.wait_for(plane.ended, WAIT) in ("cancelled", "returned")

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
    server = await start_server(Forever())
    print(server.port, flush=True)
    await server.wait_closed()

asyncio.run(main())
"""


@pytest.mark.subprocess
def test_a_control_plane_that_dies_ends_the_agents_stream() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", DYING_CONTROL_PLANE], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())

        async def main() -> None:
            async with connect(f"127.0.0.1:{port}") as session:
                await session.send(sample_registration())
                await session.send(Heartbeat("gpu-node-017"))
                process.kill()
                with pytest.raises(PeerUnavailable):
                    await session.recv(timeout=WAIT)

        run(main)
    finally:
        process.kill()
        process.wait(WAIT)


def test_an_agent_that_cannot_connect_gets_peer_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: nobody answers

        async def main() -> None:
            async with connect(f"127.0.0.1:{port}") as session:
                # The send may already fail, or only the read that follows.
                with contextlib.suppress(PeerUnavailable):
                    await session.send(sample_registration())
                with pytest.raises(PeerUnavailable, match="Connection refused"):
                    await session.recv(timeout=WAIT)

        run(main)


def test_a_taken_port_is_an_os_error() -> None:
    async def main() -> None:
        plane = Recording(lambda session: asyncio.sleep(0))
        with (
            socket.create_server(("127.0.0.1", 0)) as taken,
            pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1"),
        ):
            await start_server(plane, "127.0.0.1", taken.getsockname()[1])

    run(main)


# --- bad and unknown messages --------------------------------------------------------


def test_an_unknown_member_from_a_newer_agent_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])
        await session.send(Ack("gpu-node-017", 2, "still here"))

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, raw_agent(server) as call:
            await call.write(UNKNOWN_MEMBER)
            await call.write(encode_envelope(sample_registration()))
            await call.write(UNKNOWN_MEMBER)
            await call.write(encode_envelope(REPORT))
            await call.done_writing()
            assert [m async for m in call] == [
                encode_envelope(Ack("gpu-node-017", 2, "still here"))
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


def _unknown_member(field: int) -> bytes:
    """An envelope carrying only field `field` (a message holding field 1 = 1)."""
    tag, varint = (field << 3) | 2, bytearray()
    while tag > 0x7F:
        varint.append(tag & 0x7F | 0x80)
        tag >>= 7
    return bytes([*varint, tag, 0x02, 0x08, 0x01])


def test_a_peer_cannot_flood_the_log_with_made_up_members(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    received: list[object] = []
    members = FIRST_LINES_AT_MOST + 5

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, raw_agent(server) as call:
            await call.write(encode_envelope(sample_registration()))
            for field in range(100, 100 + members):
                await call.write(_unknown_member(field))
            await call.done_writing()
            assert [m async for m in call] == []

    run(main)
    assert received == [sample_registration()]
    levels = [r.levelno for r in caplog.records if r.getMessage().startswith("skipped")]
    # A warning for each of the first members, at debug level past them.
    assert levels == [logging.WARNING] * FIRST_LINES_AT_MOST + [logging.DEBUG] * 5


# A Register whose node id is not UTF-8.
BAD = bytes(AgentMessage(register=Register(node_id="x"))).replace(b"x", b"\xff")
BAD_REASON = (
    "Invalid `llmgw.v1.AgentMessage`: field 1 (`node_id`) at offset 2 is not valid UTF-8 "
    "(byte 4 is 0xff) - at `$.register.node_id`"
)


def test_a_bad_message_is_one_bad_message(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])
        assert session.bad_messages == 1

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, raw_agent(server) as call:
            await call.write(encode_envelope(sample_registration()))
            await call.write(BAD)
            await call.write(encode_envelope(REPORT))
            await call.done_writing()
            assert [m async for m in call] == []
            assert await call.code() == grpc.StatusCode.OK

    run(main)
    assert received == [sample_registration(), REPORT]
    bad = [r for r in caplog.records if "bad message" in r.getMessage()]
    (record,) = bad
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert "\n" not in record.getMessage()
    assert record.getMessage().endswith(BAD_REASON)


def test_a_bad_message_ends_the_call_when_the_policy_says_so() -> None:
    async def control_plane(session: ControlSession) -> None:
        async for _ in session:
            pass

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane, on_bad_message="end") as server, raw_agent(server) as call:
            await call.write(BAD)
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await call.read()
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert error.value.details() == BAD_REASON

    run(main)


def test_an_agent_sees_a_bad_message_refusal_as_message_rejected() -> None:
    async def control_plane(session: ControlSession) -> None:
        # Refused once it has arrived: ending the call before the agent's send
        # would make the send, not the receive, meet the status.
        await session.recv(timeout=WAIT)
        raise StreamError("that was not a registration", code="INVALID_ARGUMENT")

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.send(Heartbeat("n1"))
            with pytest.raises(MessageRejected, match="that was not a registration"):
                await session.recv(timeout=WAIT)

    run(main)


def test_a_message_over_the_limit_is_refused_with_resource_exhausted() -> None:
    big = Registration(node=Node(id="n1", gpus=tuple(GPU(index=i) for i in range(2000))))
    size = len(encode_envelope(big))

    async def control_plane(session: ControlSession) -> None:
        async for _ in session:
            pass

    async def main() -> None:
        limit = size // 2
        async with serving(Recording(control_plane), max_message_size=limit) as server:
            async with connect(target(server), max_message_size=size * 2) as session:
                await session.send(big)
                with pytest.raises(StreamError) as error:
                    await session.recv(timeout=WAIT)
                assert error.value.code is StatusCode.RESOURCE_EXHAUSTED
            # The agent's own limit holds too: nothing over it goes out, and
            # the stream goes on.
            async with connect(target(server), max_message_size=limit) as session:
                with pytest.raises(StreamError, match="is over the limit") as error:
                    await session.send(big)
                assert error.value.code is StatusCode.RESOURCE_EXHAUSTED
                await session.send(sample_registration())
                await session.close()
                assert await session.recv(timeout=WAIT) is None

    run(main)


def test_the_element_limit_of_decode_holds_on_every_envelope() -> None:
    many = Registration(node=Node(id="n1", gpus=tuple(GPU(index=i) for i in range(50))))

    async def control_plane(session: ControlSession) -> None:
        async for _ in session:
            pass

    async def main() -> None:
        plane = Recording(control_plane)
        async with (
            serving(plane, max_items=10, on_bad_message="end") as server,
            connect(target(server)) as session,
        ):
            await session.send(many)
            with pytest.raises(MessageRejected, match="is over the limit of 10"):
                await session.recv(timeout=WAIT)

    run(main)


@pytest.mark.parametrize("side", ["agent", "control plane", "both"])
def test_gzip_both_ways(side: str) -> None:
    async def control_plane(session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, Registration):
                await session.send(sample_command())

    async def main() -> None:
        plane_gzip = "gzip" if side != "agent" else None
        agent_gzip = "gzip" if side != "control plane" else None
        async with (
            serving(Recording(control_plane), compression=plane_gzip) as server,
            connect(target(server), compression=agent_gzip) as session,
        ):
            await session.send(sample_registration())
            assert await session.recv(timeout=WAIT) == sample_command()
            await session.close()
            assert await session.recv(timeout=WAIT) is None

    run(main)


def test_no_secret_reaches_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def control_plane(session: ControlSession) -> None:
        await session.send(sample_command())
        await session.recv(timeout=WAIT)

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            command = await session.recv(timeout=WAIT)
            assert isinstance(command, ShardCommand)
            await session.close()

    run(main)
    assert any(r.name == LOGGER for r in caplog.records)
    assert "sk-llmgw-demo-0000" not in caplog.text


# --- registrations -------------------------------------------------------------------


def test_an_agent_that_does_not_register_in_time_is_told_so() -> None:
    async def control_plane(session: ControlSession) -> None:
        async for _ in session:
            pass

    async def main() -> None:
        async with (
            serving(Recording(control_plane), registration_timeout=2) as server,
            connect(target(server)) as session,
        ):
            await session.send(Heartbeat("n1"))
            with pytest.raises(RegistrationTimeout, match="no registration within 2 s"):
                await session.recv(timeout=WAIT)

    run(main)


def test_a_second_registration_of_the_same_node_is_handed_over() -> None:
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])

    async def main() -> None:
        fewer = attrs.evolve(sample_registration(), shards=())
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.send(sample_registration())
            await session.send(fewer)
            await session.close()
            assert await session.recv(timeout=WAIT) is None
        assert received == [sample_registration(), fewer]

    run(main)


def test_a_registration_of_another_node_on_one_stream_ends_the_call() -> None:
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        async for value in session:
            received.append(value)  # noqa: PERF401 (kept as it comes: handle is cancelled)

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.send(sample_registration())
            await session.send(registration_of("someone-else"))
            with pytest.raises(MessageRejected, match="one stream carries one node"):
                await session.recv(timeout=WAIT)
        assert received == [sample_registration()]

    run(main)


def test_a_token_in_metadata_is_checked_before_handle() -> None:
    handled: list[str] = []

    async def control_plane(session: ControlSession) -> None:
        handled.append(session.metadata["authorization"])
        async for _ in session:
            pass

    async def authorize(session: ControlSession) -> None:
        if session.metadata.get("authorization") != "Bearer good":
            raise PermissionDenied("a valid bearer token is needed", code="UNAUTHENTICATED")

    async def main() -> None:
        async with serving(Recording(control_plane), authorize=authorize) as server:
            async with connect(target(server), metadata={"authorization": "Bearer bad"}) as s:
                # The refusal may already be there for the send to meet.
                with contextlib.suppress(Unauthenticated):
                    await s.send(sample_registration())
                with pytest.raises(Unauthenticated, match="a valid bearer token is needed"):
                    await s.recv(timeout=WAIT)
            async with connect(target(server), metadata={"authorization": "Bearer good"}) as s:
                await s.send(sample_registration())
                await s.close()
                assert await s.recv(timeout=WAIT) is None
        assert handled == ["Bearer good"]

    run(main)


def test_registration_from_inventory_is_what_the_control_plane_decodes() -> None:
    node = sample_node()
    spec = attrs.evolve(sample_command().spec, compute=REPORT.compute)
    registration = registration_from_inventory(
        node.id,
        node.hostname,
        node.mgmt_addr,
        node.agent_version,
        sample_inventory(),
        labels=node.labels,
        fabrics=node.fabrics,
        running=[(spec, State.READY)],
        cpu_count=node.cpu_count,
    )
    assert registration.node.id == node.id
    (shard,) = registration.shards
    assert (shard.shard_id, shard.state, shard.compute) == (
        spec.shard_id,
        State.READY,
        spec.compute,
    )
    assert shard.endpoint == f"http://{spec.leader_addr}:{spec.http_port}"
    assert decode_envelope(encode_envelope(registration), AGENT_MESSAGE) == registration


# --- reconnecting -------------------------------------------------------------------------


def test_backoff_grows_to_its_maximum_with_jitter() -> None:
    backoff = Backoff(initial=1, maximum=8, multiplier=2, jitter=0.5)
    for attempt, base in enumerate([1, 2, 4, 8, 8, 8]):
        delays = [backoff.delay(attempt) for _ in range(200)]
        assert all(base * 0.5 <= d <= base for d in delays)
        assert len(set(delays)) > 100  # jittered, not one value


def test_keep_connected_comes_back_to_a_restarted_control_plane() -> None:
    registered: list[str] = []

    async def control_plane(session: ControlSession) -> None:
        registration = await session.recv(timeout=WAIT)
        assert isinstance(registration, Registration)
        registered.append(f"{len(registration.shards)} shards")
        await session.send(Ack(registration.node.id, len(registration.shards)))
        async for _ in session:
            pass

    async def main() -> None:
        first = await start_server(Recording(control_plane))
        port = first.port
        runs = [sample_registration(), attrs.evolve(sample_registration(), shards=())]
        acks: list[Ack] = []
        acked = asyncio.Event()
        stop = asyncio.Event()

        async def serve(session: AgentSession) -> None:
            async for value in session:
                assert isinstance(value, Ack)
                acks.append(value)
                acked.set()

        async def acks_reach(count: int) -> None:
            while len(acks) < count:
                acked.clear()
                await asyncio.wait_for(acked.wait(), WAIT)

        agent = asyncio.ensure_future(
            keep_connected(
                f"127.0.0.1:{port}",
                lambda: runs[min(len(acks), 1)],
                serve,
                stop=stop,
                backoff=Backoff(initial=0.5, maximum=2),
            )
        )
        await acks_reach(1)
        await first.stop(grace=WAIT)
        second = await start_server(Recording(control_plane), port=port)
        try:
            await acks_reach(2)
        finally:
            stop.set()
            await asyncio.wait_for(agent, WAIT)
            await second.stop(grace=None)
        # Registered again with what it ran then.
        assert registered == ["2 shards", "0 shards"]

    run(main)


def test_the_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
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


def test_errors_are_one_family() -> None:
    for kind in (PeerUnavailable, PermissionDenied, MessageRejected, RegistrationTimeout):
        assert issubclass(kind, StreamError)
    assert StreamError.for_status("UNAVAILABLE", "x").__class__ is PeerUnavailable
    assert StreamError.for_status("UNAUTHENTICATED", "x").__class__ is Unauthenticated
    assert StreamError.for_status("ABORTED", "x").__class__ is StreamError
    cancelled = StreamError.for_status("CANCELLED", "x")
    assert (type(cancelled), cancelled.code) == (PeerUnavailable, StatusCode.CANCELLED)
    # Only the control plane's registration deadline is a RegistrationTimeout.
    assert StreamError.for_status("DEADLINE_EXCEEDED", "x").__class__ is StreamError
    timeout = StreamError.for_status(StatusCode.DEADLINE_EXCEEDED, "x", registration=True)
    assert timeout.__class__ is RegistrationTimeout
    assert StreamError("x", code=14).code is StatusCode.UNAVAILABLE
    assert PeerUnavailable("x").code is StatusCode.UNAVAILABLE
    assert (f"{StatusCode.UNAVAILABLE}", str(StatusCode.ABORTED)) == ("UNAVAILABLE", "ABORTED")
    assert str(PeerUnavailable("gone")) == "UNAVAILABLE: gone"
    with pytest.raises(ValueError, match="Expected a gRPC error status code, got 'OK'"):
        StreamError("fine", code="OK")
    with pytest.raises(ValueError, match="Expected a gRPC status code, got 'NOPE'"):
        StreamError("x", code="NOPE")
    assert not issubclass(DecodeError, StreamError)
    # Sending on a closed session is a programming error, not a status nor bad input.
    assert issubclass(StreamClosed, UsageError)
    assert issubclass(StreamClosed, RuntimeError)
    assert not issubclass(StreamClosed, (StreamError, ValueError))


def test_keep_connected_gives_up_on_permission_denied() -> None:
    async def control_plane(session: ControlSession) -> None:
        raise PermissionDenied("not this agent")

    async def main() -> None:
        async def serve(session: AgentSession) -> None:
            async for _ in session:
                pass

        async with serving(Recording(control_plane)) as server:
            with pytest.raises(PermissionDenied, match="not this agent"):
                await keep_connected(
                    target(server), sample_registration, serve, backoff=Backoff(initial=0.5)
                )

    run(main)


def test_a_large_registration_crosses_whole() -> None:
    # Over the size above which a session decodes in a thread, under the limits.
    gpus = tuple(
        GPU(index=i, uuid=f"GPU-{i:05d}", name="NVIDIA H100 80GB HBM3") for i in range(9000)
    )
    large = attrs.evolve(sample_registration(), node=attrs.evolve(sample_node(), gpus=gpus))
    assert len(encode_envelope(large)) > 256 * 1024
    received: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        received.extend([value async for value in session])

    async def main() -> None:
        async with serving(Recording(control_plane)) as server, connect(target(server)) as session:
            await session.send(large)
            await session.close()
            assert await session.recv(timeout=WAIT) is None

    run(main)
    assert received == [large]


def test_stopping_twice_does_nothing_more() -> None:
    async def main() -> None:
        async with await start_server(Recording(lambda session: asyncio.sleep(0))) as server:
            await server.stop(grace=WAIT)
        await server.stop(grace=None)

    run(main)


def test_the_stream_s_value_types_are_the_envelopes_members() -> None:
    """`FromAgent` and `FromControl` are written out for type checkers; the table is the fact."""
    import typing

    from llmgw_wire.mapping import ENVELOPES
    from llmgw_wire.stream import FromAgent, FromControl

    agent, control = ENVELOPES
    assert set(typing.get_args(FromAgent)) == {domain for _, domain in agent.members}
    assert set(typing.get_args(FromControl)) == {domain for _, domain in control.members}


class _FakeContext:
    """What a server call's write sees of grpc's context: whether the agent is gone."""

    def __init__(self, error: BaseException, *, cancelled: bool = False) -> None:
        self.error = error
        self._cancelled = cancelled

    async def write(self, data: bytes) -> None:
        raise self.error

    def cancelled(self) -> bool:
        return self._cancelled

    def code(self) -> grpc.StatusCode | None:
        return None


@pytest.mark.parametrize(
    ("error", "cancelled", "expected"),
    [
        # The agent cancelled its call, or its connection is gone: the peer is gone.
        (grpc.aio.UsageError("RPC already finished."), True, PeerUnavailable),
        (grpc.aio.InternalError("batch failed"), False, PeerUnavailable),
        # Anything else is not the peer's doing, and stays itself.
        (grpc.aio.UsageError("RPC already finished."), False, grpc.aio.UsageError),
        (MemoryError(), False, MemoryError),
        (TypeError("not bytes"), True, TypeError),
    ],
)
def test_only_a_peer_that_is_gone_makes_a_write_peer_unavailable(
    error: BaseException, cancelled: bool, expected: type[BaseException]
) -> None:
    from llmgw_wire.stream._server import _ServerCall

    call = _ServerCall(_FakeContext(error, cancelled=cancelled))
    with pytest.raises(expected):
        asyncio.run(call.write(b"x"))
