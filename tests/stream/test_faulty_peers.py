"""Faulty and leaving peers, over real grpc.aio on loopback: a lost agent told
from a leaving one, a graceful leave, true statuses, a command not run made known."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
import pytest

from llmgw_wire import Ack, Heartbeat, Registration, ShardReport, State
from llmgw_wire.codec.envelope import encode_envelope
from llmgw_wire.errors import StatusCode
from llmgw_wire.stream import (
    REFUSED_COMMAND,
    AgentSession,
    Backoff,
    ControlPlane,
    ControlSession,
    MessageRejected,
    PeerUnavailable,
    PermissionDenied,
    StreamError,
    _server,
    add_to_server,
    connect,
    keep_connected,
    server_options,
)
from llmgw_wire.stream._agent import _Pace, own_fault
from llmgw_wire.stream._logs import BAD_MESSAGE_LOG_INTERVAL
from llmgw_wire.stream._protocol import (
    PEER_OVER_BUDGET,
    TOO_MANY_WAITING,
    TOO_MANY_WAITING_FROM_PEER,
)
from llmgw_wire.stream._targets import Targets
from llmgw_wire.testing.sample import sample_registration
from llmgw_wire.testing.stream import registration_of
from llmgw_wire.v1 import ControlMessage, StartShard
from tests.stream.test_stream import WAIT, Recording
from tests.support import (
    Adopting,
    ConnectInterceptor,
    lost_or_cancelled,
    raw_agent,
    serving,
    target,
)
from tests.support import run_async as run

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

pytestmark = pytest.mark.timeout(300)

# Repetitions of the cases that depend on how grpc interleaves events.
ROUNDS = 8


def test_an_agent_whose_call_is_cancelled_is_lost_not_leaving() -> None:
    """recv gives None only after a half-close: a cancelled call is never a clean end."""
    outcomes: list[str] = []

    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        with lost_or_cancelled(outcomes):
            # The agent cancels once the Ack has reached it: the cancellation
            # may find this end still in the send.
            await session.send(Ack("gpu-node-017"))
            outcomes.append("ended" if await session.recv(timeout=WAIT) is None else "value")

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as server, raw_agent(server) as call:
            await call.write(encode_envelope(sample_registration()))
            await call.read()
            call.cancel()
            await asyncio.wait_for(plane.ended, WAIT)

    for _ in range(ROUNDS):
        run(main)
    assert "ended" not in outcomes, outcomes
    assert len(outcomes) == ROUNDS


def test_an_agent_that_half_closes_is_a_clean_end() -> None:
    outcomes: list[object] = []

    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        outcomes.append(await session.recv(timeout=WAIT))

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as server, raw_agent(server) as call:
            await call.write(encode_envelope(sample_registration()))
            await call.done_writing()
            assert await call.code() == grpc.StatusCode.OK
            assert await asyncio.wait_for(plane.ended, WAIT) == "returned"

    run(main)
    assert outcomes == [None]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="seeing a half-close at once needs 3.11")
def test_a_half_close_is_seen_without_the_settling_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # The wait that bounds telling a leave from a cancellation, far over
    # WAIT: the end is seen only if grpc answers the second read at once.
    monkeypatch.setattr(_server, "HALF_CLOSE_SETTLE", 10 * WAIT)
    test_an_agent_that_half_closes_is_a_clean_end()


# --- the agent's graceful leave ------------------------------------------------------


class Ending(ControlPlane):
    """Acks each registration, then keeps how the agent's side of each call ended."""

    def __init__(self, first: Callable[[ControlSession], Awaitable[None]] | None = None) -> None:
        self.first = first
        self.calls = 0
        self.ends: list[str] = []
        self.received: list[object] = []
        self.changed = asyncio.Event()

    async def handle(self, session: ControlSession) -> None:
        self.calls += 1
        self.changed.set()
        try:
            with lost_or_cancelled(self.ends):
                registration = await session.recv(timeout=WAIT)
                assert isinstance(registration, Registration)
                await session.send(Ack(registration.node.id))
                if self.first is not None and self.calls == 1:
                    await self.first(session)
                async for value in session:
                    self.received.append(value)
                    self.changed.set()
                self.ends.append("ended")
        finally:
            self.changed.set()

    async def wait(self, done: Callable[[], bool]) -> None:
        while not done():
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), WAIT)


async def read_all(session: AgentSession) -> None:
    async for _ in session:
        pass


def test_leaving_connect_half_closes_and_the_plane_sees_a_clean_end() -> None:
    async def main() -> None:
        plane = Ending()
        async with serving(plane) as server:
            async with connect(target(server)) as session:
                await session.send(sample_registration())
                assert isinstance(await session.recv(timeout=WAIT), Ack)
            await plane.wait(lambda: bool(plane.ends))
        assert plane.ends == ["ended"]

    run(main)


def test_stopping_keep_connected_half_closes_and_the_plane_sees_a_clean_end() -> None:
    async def main() -> None:
        plane = Ending()
        stop = asyncio.Event()
        acked = asyncio.Event()

        async def serve(session: AgentSession) -> None:
            async for value in session:
                if isinstance(value, Ack):
                    acked.set()

        async with serving(plane) as server:
            agent = asyncio.ensure_future(
                keep_connected(target(server), sample_registration, serve, stop=stop)
            )
            await asyncio.wait_for(acked.wait(), WAIT)
            stop.set()
            await asyncio.wait_for(agent, WAIT)
            await plane.wait(lambda: bool(plane.ends))
        assert plane.ends == ["ended"]

    run(main)


def test_stop_is_honoured_while_connecting() -> None:
    """A control plane that accepts the connection and never speaks HTTP/2."""

    async def main() -> None:
        accepted = asyncio.Event()
        writers: list[asyncio.StreamWriter] = []

        async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            accepted.set()

        listener = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        stop = asyncio.Event()
        try:
            agent = asyncio.ensure_future(
                keep_connected(f"127.0.0.1:{port}", sample_registration, read_all, stop=stop)
            )
            await asyncio.wait_for(accepted.wait(), WAIT)
            stop.set()
            # grpc's own connection deadline is 20 s: far beyond this bound.
            await asyncio.wait_for(agent, 10)
        finally:
            for writer in writers:
                writer.close()
            listener.close()

    run(main)


class Contexts(ConnectInterceptor):
    """An application's interceptor that keeps the context of each agent stream, in order.

    What a `handle` writes through one reaches the agent as it is: bytes that
    no session would send.
    """

    def __init__(self) -> None:
        self.contexts: asyncio.Queue[grpc.aio.ServicerContext[bytes, bytes]] = asyncio.Queue()

    def context(self, context: grpc.aio.ServicerContext[bytes, bytes]) -> Any:
        self.contexts.put_nowait(context)
        return context


@contextlib.asynccontextmanager
async def serving_with(interceptor: Any, plane: ControlPlane) -> AsyncIterator[str]:
    """`plane` on a server of the test's own, with `interceptor`: the target."""
    server = grpc.aio.server(interceptors=[interceptor], options=server_options())
    service = add_to_server(plane, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await service.stop(grace=None)
        await server.stop(None)


# A StartShard that protobuf reads and the domain cannot hold: a timeout
# beyond what a timedelta holds.
BAD_START = bytes(
    ControlMessage(
        start_shard=StartShard(
            replica_id="rep-bad", shard_id="rep-bad-0", startup_timeout_ms=2**63 - 1
        )
    )
)


def test_a_bad_message_under_policy_end_ends_one_round_not_the_agent() -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.metrics")
    export = pytest.importorskip("opentelemetry.sdk.metrics.export")
    reader = export.InMemoryMetricReader()

    calls = Contexts()

    async def bad(session: ControlSession) -> None:
        context = calls.contexts.get_nowait()  # the first call's
        await context.write(BAD_START)

    async def main() -> None:
        plane = Ending(bad)
        stop = asyncio.Event()
        async with serving_with(calls, plane) as address:
            agent = asyncio.ensure_future(
                keep_connected(
                    address,
                    sample_registration,
                    read_all,
                    stop=stop,
                    backoff=Backoff(initial=0.1, maximum=0.5),
                    on_bad_message="end",
                    meter_provider=sdk.MeterProvider(metric_readers=[reader]),
                )
            )
            try:
                await plane.wait(lambda: plane.calls >= 2)
            finally:
                stop.set()
                await asyncio.wait_for(agent, WAIT)

    run(main)
    # The round that ended for the bad message is counted as that, not as a clean end.
    data = reader.get_metrics_data()
    reasons = {
        point.attributes["reason"]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "llmgw.stream.reconnects"
        for point in metric.data.data_points
    }
    assert reasons == {"decode"}


def test_a_start_shard_the_agent_cannot_decode_is_reported_failed() -> None:
    calls = Contexts()

    async def bad(session: ControlSession) -> None:
        context = calls.contexts.get_nowait()  # the one call's
        await context.write(BAD_START)

    async def main() -> None:
        plane = Ending(bad)
        async with serving_with(calls, plane) as address, connect(address) as session:
            await session.send(sample_registration())
            assert isinstance(await session.recv(timeout=WAIT), Ack)
            await plane.wait(lambda: bool(plane.received))
        (report,) = plane.received
        assert isinstance(report, ShardReport)
        assert (report.replica_id, report.shard_id, report.state) == (
            "rep-bad",
            "rep-bad-0",
            State.FAILED,
        )
        assert report.detail.startswith(REFUSED_COMMAND + ": ")
        assert "startup_timeout_ms" in report.detail

    run(main)


@pytest.mark.parametrize(
    ("code", "give_up"),
    [
        ("PERMISSION_DENIED", False),
        # Retried by default (a rotated certificate may fix it); given up when asked.
        ("UNAUTHENTICATED", True),
    ],
)
def test_keep_connected_gives_up_on_a_refusal_it_cannot_fix(code: str, give_up: bool) -> None:
    async def refuse(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        raise StreamError("refused for good", code=code)

    async def main() -> None:
        async with serving(Recording(refuse)) as server:
            with pytest.raises(StreamError, match="refused for good") as error:
                await keep_connected(
                    target(server),
                    sample_registration,
                    read_all,
                    backoff=Backoff(initial=0.1),
                    give_up_unauthenticated=give_up,
                )
            assert error.value.code.name == code

    run(main)


def test_keep_connected_retries_an_unauthenticated_refusal() -> None:
    async def main() -> None:
        calls = 0
        third = asyncio.Event()

        async def refuse(session: ControlSession) -> None:
            nonlocal calls
            await session.recv(timeout=WAIT)
            calls += 1
            if calls == 3:
                third.set()
            raise StreamError("not yet", code="UNAUTHENTICATED")

        stop = asyncio.Event()
        async with serving(Recording(refuse)) as server:
            agent = asyncio.ensure_future(
                keep_connected(
                    target(server),
                    sample_registration,
                    read_all,
                    stop=stop,
                    backoff=Backoff(initial=0.05, maximum=0.1),
                )
            )
            await asyncio.wait_for(third.wait(), WAIT)
            assert not agent.done()
            stop.set()
            await asyncio.wait_for(agent, WAIT)

    run(main)


# --- true statuses ---------------------------------------------------------------------


async def send_until_refused(session: AgentSession) -> StreamError:
    try:
        for _ in range(10_000):
            await session.send(Heartbeat("gpu-node-017"))
    except StreamError as exc:
        return exc
    raise AssertionError("the control plane took 10,000 heartbeats after it ended the call")


@pytest.mark.parametrize(
    ("refusal", "kind"),
    [
        (PermissionDenied("cordoned"), PermissionDenied),
        (MessageRejected("not a registration"), MessageRejected),
        (PeerUnavailable("the control plane is stopping"), PeerUnavailable),
    ],
)
def test_an_agent_that_is_sending_when_the_call_ends_sees_its_status(
    refusal: StreamError, kind: type[StreamError]
) -> None:
    """In every interleaving of the agent's sends with the end: the status sent, never INTERNAL."""

    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        raise refusal

    async def main() -> None:
        async with serving(Recording(control_plane)) as server:
            for _ in range(ROUNDS):
                async with connect(target(server)) as session:
                    await session.send(sample_registration())
                    sending = await send_until_refused(session)
                    with pytest.raises(StreamError) as receiving:
                        await read_all(session)
                for error in (sending, receiving.value):
                    assert type(error) is kind, error
                    assert (error.code, error.details) == (refusal.code, refusal.details)

    run(main)


# --- what a peer learns, what the logs say ---------------------------------------------


def test_an_authorize_hook_s_failure_reaches_the_client_as_a_generic_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def authorize(session: ControlSession) -> None:
        raise RuntimeError("token store at 10.1.2.3:5432 is down")

    async def main() -> None:
        async with serving(Recording(read_all_plane), authorize=authorize) as server:
            got, end = await agent_exchange(target(server))
        assert got == []
        assert end is not None
        assert (end.code.name, end.details) == ("INTERNAL", "the control plane failed to serve")

    run(main)
    (record,) = [r for r in caplog.records if "authorizing" in r.getMessage()]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None


def test_a_flood_of_bad_messages_is_a_few_lines_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="llmgw_wire.stream")
    flood = 2_000
    counted: list[int] = []

    async def control_plane(session: ControlSession) -> None:
        await read_all_plane(session)
        counted.append(session.bad_messages)

    async def main() -> None:
        plane = Recording(control_plane)
        async with serving(plane) as server, raw_agent(server) as call:
            # Registered first: before it, the first bad message ends the call.
            await call.write(encode_envelope(sample_registration()))
            for _ in range(flood):
                await call.write(b"\xff")
            await call.done_writing()
            await call.code()
            await asyncio.wait_for(plane.ended, WAIT)

    started = time.monotonic()
    run(main)
    intervals = (time.monotonic() - started) / BAD_MESSAGE_LOG_INTERVAL
    assert counted == [flood]
    lines = [r.getMessage() for r in caplog.records if "bad message" in r.getMessage()]
    # One line per interval at most, and one at the end with the count.
    assert len(lines) <= intervals + 2, lines
    assert lines[-1].endswith(f"({flood} in all)"), lines


def test_a_newline_from_a_peer_cannot_forge_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="llmgw_wire.stream")
    forged = "gpu-node-017\nCRITICAL llmgw_wire.stream: forged"

    async def control_plane(session: ControlSession) -> None:
        await session.recv(timeout=WAIT)
        raise StreamError(f"refused {forged}", code="FAILED_PRECONDITION")

    async def main() -> None:
        async with serving(Recording(control_plane)) as server:
            await agent_exchange(target(server), registration_of(forged))

    run(main)
    messages = [r.getMessage() for r in caplog.records]
    assert any("gpu-node-017\\nCRITICAL" in m for m in messages), messages
    assert not any("\n" in m for m in messages), messages


async def read_all_plane(session: ControlSession) -> None:
    async for _ in session:
        pass


async def agent_exchange(
    address: str, registration: Registration | None = None
) -> tuple[list[object], StreamError | None]:
    """Register, half-close, read until the end: what came back, how it ended."""
    got: list[object] = []
    try:
        async with connect(address) as session:
            await session.send(registration or sample_registration())
            await session.close()
            got.extend([value async for value in session])
    except StreamError as exc:
        return got, exc
    return got, None


def test_a_newline_in_a_failing_handlers_error_cannot_forge_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A control plane's `handle` fails with an error that quotes the peer: its
    # traceback is logged, and the quote must not start a line of its own.
    forged = "gpu-node-017\nCRITICAL llmgw_wire.stream: forged"

    async def control_plane(session: ControlSession) -> None:
        registration = await session.recv(timeout=WAIT)
        assert isinstance(registration, Registration)
        raise ValueError(f"cannot adopt {registration.node.id}")

    async def main() -> None:
        async with serving(Recording(control_plane)) as server:
            _, error = await agent_exchange(target(server), registration_of(forged))
            assert error is not None
            assert error.code is StatusCode.INTERNAL

    run(main)
    text = caplog.text
    assert "Traceback (most recent call last)" in text
    assert "ValueError: cannot adopt gpu-node-017\\nCRITICAL llmgw_wire.stream: forged" in text
    assert "\nCRITICAL llmgw_wire.stream: forged" not in text


# --- the pace of reconnecting ------------------------------------------------------------


def test_delays_grow_until_a_round_lasts() -> None:
    async def main() -> list[float]:
        targets = Targets(["a:1"], check_name=False)
        pace = _Pace(Backoff(initial=1.0, maximum=8.0, jitter=0.0), targets, None)
        lost = PeerUnavailable("lost")
        delays = [await pace.after("a:1", lost, answered=True, lasted=False) for _ in range(5)]
        # A round that lasted starts the delays over; one that answered and failed does not.
        delays.append(await pace.after("a:1", lost, answered=True, lasted=True))
        delays.append(await pace.after("a:1", lost, answered=True, lasted=False))
        return delays

    assert asyncio.run(main()) == [1.0, 2.0, 4.0, 8.0, 8.0, 1.0, 2.0]


def test_each_address_of_a_pass_is_tried_at_once_then_the_pass_waits() -> None:
    async def main() -> list[float]:
        targets = Targets(["a:1", "b:2"], check_name=False)
        pace = _Pace(Backoff(initial=1.0, maximum=8.0, jitter=0.0), targets, None)
        lost = PeerUnavailable("unreachable")
        delays = []
        for _ in range(6):
            address, _options = await targets.current()
            delays.append(await pace.after(address, lost, answered=False, lasted=False))
        return delays

    assert asyncio.run(main()) == [0.0, 1.0, 0.0, 2.0, 0.0, 4.0]


@pytest.mark.parametrize(
    ("error", "own"),
    [
        (MessageRejected("registration does not decode"), True),
        (StreamError("a message over the limit", code="RESOURCE_EXHAUSTED"), True),
        (StreamError(TOO_MANY_WAITING, code="RESOURCE_EXHAUSTED"), False),
        # Many agents behind one address, after a failover: load too.
        (StreamError(TOO_MANY_WAITING_FROM_PEER, code="RESOURCE_EXHAUSTED"), False),
        (StreamError(f"{PEER_OVER_BUDGET} (5 bytes held)", code="RESOURCE_EXHAUSTED"), False),
        (PeerUnavailable("lost"), False),
        (None, False),
    ],
)
def test_a_refusal_of_the_agent_s_own_message_is_told_from_load(
    error: StreamError | None, own: bool
) -> None:
    assert own_fault(error) is own


class AckThenFail(ControlPlane):
    """Acks each registration, then fails: a bug after the Ack, a crash loop behind a balancer."""

    def __init__(self) -> None:
        self.rounds = 0

    async def handle(self, session: ControlSession) -> None:
        value = await session.recv(timeout=WAIT)
        assert isinstance(value, Registration)
        self.rounds += 1
        await session.send(Ack(value.node.id, 0, "adopted"))
        raise RuntimeError("a bug after the Ack")


# Seconds of the run; the goal: at most this many rounds within them, with the
# default Backoff (1 s doubling, less up to half): 0, >=0.5, >=1.5, >=3.5, >=7.5, >=15.5 s.
ACK_THEN_FAIL_RUN = 15.0
ACK_THEN_FAIL_ROUNDS = 6


@pytest.mark.slow
def test_a_plane_that_acks_then_fails_sees_the_delays_grow() -> None:
    async def main() -> None:
        plane = AckThenFail()
        stop = asyncio.Event()
        async with serving(plane) as server:
            agent = asyncio.ensure_future(
                keep_connected(target(server), sample_registration, read_all, stop=stop)
            )
            await asyncio.sleep(ACK_THEN_FAIL_RUN)
            stop.set()
            await asyncio.wait_for(agent, WAIT)
        # A busy machine only makes fewer rounds; more would be a delay that started over.
        assert 1 <= plane.rounds <= ACK_THEN_FAIL_ROUNDS, plane.rounds

    run(main)


class Refusing(ControlPlane):
    """Ends each call at once with INVALID_ARGUMENT, as for a first message that does not decode."""

    def __init__(self) -> None:
        self.rounds = 0

    async def handle(self, session: ControlSession) -> None:
        self.rounds += 1
        raise StreamError("the first message does not decode", code="INVALID_ARGUMENT")


def test_a_refused_registration_waits_the_longest_delay_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        plane = Refusing()
        refusals: list[StreamError] = []

        async def on_refused(error: StreamError) -> bool:
            refusals.append(error)
            return len(refusals) < 2  # the second refusal gives up

        async with serving(plane) as server:
            with pytest.raises(MessageRejected, match="does not decode"):
                await keep_connected(
                    target(server),
                    sample_registration,
                    read_all,
                    # Not the first delay (0.01 s): the longest, jitter-free here.
                    backoff=Backoff(initial=0.01, maximum=0.5, jitter=0.0),
                    on_refused=on_refused,
                )
        assert plane.rounds == 2
        assert [(e.code, e.details) for e in refusals] == [
            (StatusCode.INVALID_ARGUMENT, "the first message does not decode")
        ] * 2

    with caplog.at_level(logging.INFO, logger="llmgw_wire.stream"):
        run(main)
    said = [r.getMessage() for r in caplog.records if "refused the agent's own" in r.message]
    # At ERROR once: the same reason again is at INFO.
    assert [r.levelno for r in caplog.records if "refused the agent's own" in r.message] == [
        logging.ERROR,
        logging.INFO,
    ]
    assert "does not decode" in said[0]
    waits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("connecting to")]
    assert waits
    assert all(wait.endswith("in 0.5 s") for wait in waits), waits


def test_a_registration_over_the_control_plane_s_limit_is_a_refusal() -> None:
    async def main() -> None:
        plane = Adopting()
        async with serving(plane, max_message_size=1024) as server:
            with pytest.raises(StreamError) as error:
                await keep_connected(
                    target(server),
                    sample_registration,
                    read_all,
                    backoff=Backoff(initial=0.01, maximum=0.05),
                    on_refused=lambda _: False,
                )
        assert error.value.code is StatusCode.RESOURCE_EXHAUSTED
        assert plane.registrations == 0

    run(main)
