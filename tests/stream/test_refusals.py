"""Refusals that say why at once, sends that cannot hang, and a leave seen as a leave.

Over real grpc.aio on loopback; peers that misbehave are raw grpc.aio calls
in the test's own process. No outcome depends on a time: each wait is
bounded by `WAIT`, far beyond what the behaviour needs, and far below the
registration timeout (600 s) a wrong behaviour would fall back to.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

import attrs
import grpc
import grpc.aio
import pytest

from llmgw_wire import GPU, DecodeError, Heartbeat, Node, Registration, ShardCommand
from llmgw_wire.codec.envelope import AGENT_MESSAGE, decode_envelope, encode_envelope
from llmgw_wire.stream import (
    CONNECT_ROUTE,
    ControlPlane,
    ControlSession,
    MessageRejected,
    PeerUnavailable,
    ServerLimits,
    StreamClosed,
    StreamError,
    add_to_server,
    connect,
    keep_connected,
    server_options,
)
from llmgw_wire.stream._session import UNREADABLE_BEFORE_REGISTRATION
from llmgw_wire.testing.sample import sample_command, sample_registration
from llmgw_wire.v1 import AgentMessage, Register
from tests.support import ConnectInterceptor, loopback_relay, raw_agent, target
from tests.support import run_async as run
from tests.support import serving as serving_on_loopback

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    from llmgw_wire.stream import Server

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0
# Far beyond any test's bound: a refusal that came from it would fail the test.
NEVER = 600.0
# A Register whose node id is not UTF-8.
BAD = bytes(AgentMessage(register=Register(node_id="x"))).replace(b"x", b"\xff")
BAD_REASON = (
    "Invalid `llmgw.v1.AgentMessage`: field 1 (`node_id`) at offset 2 is not valid UTF-8 "
    "(byte 4 is 0xff) - at `$.register.node_id`"
)
# A command of about 1 MiB: a few fill an agent's window when it reads nothing.
_COMMAND = sample_command()
BIG_COMMAND = attrs.evolve(
    _COMMAND,
    spec=attrs.evolve(_COMMAND.spec, hcas=tuple(f"h{i:05d}" + "x" * 1000 for i in range(1000))),
)


class Plane(ControlPlane):
    """Runs `script` for each agent; keeps how each call's `handle` ended."""

    def __init__(self, script: Callable[[ControlSession], Awaitable[str]]) -> None:
        self.script = script
        self.ends: asyncio.Queue[str] = asyncio.Queue()
        # Each call's session, as its `handle` starts.
        self.sessions: asyncio.Queue[ControlSession] = asyncio.Queue()

    async def registered(self) -> None:
        """Wait until the next call's `handle` has started and its agent has registered."""
        session = await asyncio.wait_for(self.sessions.get(), WAIT)
        await asyncio.wait_for(session.registered.wait(), WAIT)

    async def handle(self, session: ControlSession) -> None:
        self.sessions.put_nowait(session)
        outcome = "cancelled"
        try:
            outcome = await self.script(session)
        except PeerUnavailable:
            outcome = "lost"
        finally:
            self.ends.put_nowait(outcome)


async def read_to_the_end(session: ControlSession) -> str:
    async for _ in session:
        pass
    return "half-closed"


def serving(plane: ControlPlane, **options: Any) -> AbstractAsyncContextManager[Server]:
    """`plane` served on loopback, with a registration timeout no test waits for."""
    return serving_on_loopback(plane, registration_timeout=NEVER, **options)


# --- a refusal the agent can act on -------------------------------------------------------


def test_a_first_message_that_does_not_decode_is_refused_at_once_with_the_reason() -> None:
    async def main() -> None:
        plane = Plane(read_to_the_end)
        async with serving(plane) as server, raw_agent(server) as call:
            await call.write(BAD)
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await asyncio.wait_for(call.read(), WAIT)
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert error.value.details() == f"{UNREADABLE_BEFORE_REGISTRATION}: {BAD_REASON}"
            # `handle` never saw the agent as registered, and was ended.
            assert await asyncio.wait_for(plane.ends.get(), WAIT) == "cancelled"

    run(main)


def test_an_agent_sees_its_unreadable_registration_as_message_rejected() -> None:
    registration = Registration(node=Node(id="unreadable-node"))
    # Its node id, with a last byte that is not UTF-8.
    old, new = b"unreadable-node", b"unreadable-nod\xff"
    with pytest.raises(DecodeError) as unreadable:
        decode_envelope(encode_envelope(registration).replace(old, new), AGENT_MESSAGE)

    async def main() -> None:
        async with serving(Plane(read_to_the_end)) as server:
            # A peer in the middle: the session sends its registration whole, and the
            # control plane gets bytes no session would send.
            relay = loopback_relay(server.port, replace=(old, new))
            async with relay as address, connect(address) as session:
                await session.send(registration)
                with pytest.raises(MessageRejected) as error:
                    await session.recv(timeout=WAIT)
            assert error.value.details == f"{UNREADABLE_BEFORE_REGISTRATION}: {unreadable.value}"

    run(main)


def test_a_registration_over_the_item_limit_is_refused_at_once_naming_the_limit() -> None:
    many = Registration(node=Node(id="n1", gpus=tuple(GPU(index=i) for i in range(200))))

    async def main() -> None:
        plane = Plane(read_to_the_end)
        async with serving(plane, max_items=50) as server, connect(target(server)) as session:
            await session.send(many)
            with pytest.raises(MessageRejected) as error:
                await session.recv(timeout=WAIT)
        assert error.value.details.startswith(UNREADABLE_BEFORE_REGISTRATION)
        assert "over the limit of 50" in error.value.details

    run(main)


def test_keep_connected_can_give_up_on_a_registration_the_control_plane_cannot_read() -> None:
    many = Registration(node=Node(id="n1", gpus=tuple(GPU(index=i) for i in range(200))))
    served: list[object] = []

    async def serve(session: Any) -> None:
        served.append(await session.recv())

    async def main() -> None:
        async with serving(Plane(read_to_the_end), max_items=50) as server:
            refused: list[StreamError] = []

            def give_up(error: StreamError) -> bool:
                refused.append(error)
                return False

            agent = keep_connected(target(server), lambda: many, serve, on_refused=give_up)
            with pytest.raises(MessageRejected, match="over the limit of 50"):
                await asyncio.wait_for(agent, WAIT)
            assert [type(error) for error in refused] == [MessageRejected]

    run(main)
    assert served == []


def test_after_the_registration_a_bad_message_is_still_skipped() -> None:
    async def main() -> None:
        async with serving(Plane(read_to_the_end)) as server, raw_agent(server) as call:
            await call.write(encode_envelope(sample_registration()))
            await call.write(BAD)
            await call.write(encode_envelope(Heartbeat("gpu-node-017")))
            await call.done_writing()
            assert await asyncio.wait_for(call.code(), WAIT) == grpc.StatusCode.OK

    run(main)


# --- send(timeout=...) --------------------------------------------------------------------


def test_a_send_to_an_agent_that_reads_nothing_times_out_and_ends_the_call() -> None:
    seen: list[object] = []

    async def stuck(session: ControlSession) -> str:
        await session.recv(timeout=WAIT)
        # The first fits in the windows whatever the load; the rest fill them.
        await session.send(BIG_COMMAND, timeout=WAIT)
        sent = 1
        try:
            for _ in range(1000):
                await session.send(BIG_COMMAND, timeout=1)
                sent += 1
        except asyncio.TimeoutError:
            seen.append(sent)
        with pytest.raises(StreamClosed, match="timed out"):
            await session.send(BIG_COMMAND, timeout=1)
        seen.append("closed")
        await asyncio.sleep(NEVER)  # the end of the call cancels it
        return "returned"

    async def main() -> None:
        plane = Plane(stuck)
        options = [("grpc.max_receive_message_length", 64 << 20)]
        async with (
            serving(plane, max_message_size=8 << 20) as server,
            grpc.aio.insecure_channel(target(server), options=options) as channel,
        ):
            call = channel.stream_stream(CONNECT_ROUTE)()
            await call.write(encode_envelope(sample_registration()))
            # It reads nothing; its connection still answers.
            assert await asyncio.wait_for(plane.ends.get(), WAIT) == "cancelled"
            assert server.service.calls == 0
            call.cancel()

    run(main)
    sent, closed = seen
    assert isinstance(sent, int)
    assert 0 < sent < 1000
    assert closed == "closed"


# The send being written has no timeout, or one of its own, longer.
@pytest.mark.parametrize("first_timeout", [None, WAIT])
def test_a_send_waiting_for_its_turn_times_out_with_nothing_sent(
    first_timeout: float | None,
) -> None:
    async def main() -> None:
        release = asyncio.Event()

        class Blocked:
            async def read(self) -> bytes | None:
                await release.wait()
                return None

            async def write(self, data: bytes) -> None:
                await release.wait()

        session = ControlSession(Blocked(), "memory")
        first = asyncio.ensure_future(session.send(sample_command(), timeout=first_timeout))
        await asyncio.sleep(0)
        with pytest.raises(asyncio.TimeoutError):
            await session.send(sample_command(), timeout=0.01)
        # It never started writing: the session is as it was, and so is the first send.
        release.set()
        await first
        await session.send(sample_command(), timeout=WAIT)

    run(main)


class FullWindows(ConnectInterceptor):
    """An application's interceptor that makes every agent's windows full after one message.

    The call's first write goes to the agent; every later one does not
    complete (until it is cancelled), as when an agent reads nothing, and
    sets `stuck` as it begins: the test knows a send is stuck without a
    wait of its own.
    """

    def __init__(self) -> None:
        self.stuck = asyncio.Event()

    def context(self, context: grpc.aio.ServicerContext[bytes, bytes]) -> Any:
        stuck = self.stuck

        class Context:
            """The call's context, whose writes stick after the first."""

            def __init__(self) -> None:
                self._written = 0

            def __getattr__(self, name: str) -> Any:
                return getattr(context, name)

            async def write(self, data: bytes) -> None:
                if self._written:
                    stuck.set()
                    await asyncio.Event().wait()  # the agent takes nothing more
                self._written += 1
                await context.write(data)

        return Context()


def test_the_server_bounds_a_send_that_gives_no_timeout_and_a_stop_does_not_wait_for_it() -> None:
    raised: list[BaseException] = []

    async def sending(session: ControlSession) -> str:
        await session.recv(timeout=WAIT)
        try:
            while True:
                await session.send(BIG_COMMAND)
        except BaseException as exc:
            raised.append(exc)
            raise

    async def main() -> None:
        plane, windows = Plane(sending), FullWindows()
        # A send timeout no test waits for: the stop's end of the call cuts it short.
        limits = ServerLimits(send_timeout=NEVER)
        server = grpc.aio.server(
            interceptors=[windows], options=server_options(max_message_size=8 << 20)
        )
        service = add_to_server(
            plane, server, registration_timeout=NEVER, limits=limits, max_message_size=8 << 20
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.stream_stream(CONNECT_ROUTE)()
                await call.write(encode_envelope(sample_registration()))
                # A send is stuck: then a stop with a grace no test waits for.
                await asyncio.wait_for(windows.stuck.wait(), WAIT)
                await asyncio.wait_for(service.stop(grace=NEVER), WAIT)
                assert service.calls == 0
                call.cancel()
        finally:
            await server.stop(grace=None)

    run(main)
    # The stuck send was cut short: it timed out, though it gave no timeout.
    assert [type(exc) for exc in raised] == [asyncio.TimeoutError]


def test_an_agents_send_to_a_plane_that_reads_nothing_times_out_and_cancels_the_call() -> None:
    big = Registration(
        node=Node(id="n1", gpus=tuple(GPU(index=i, name="g" * 1000) for i in range(1000)))
    )

    async def main() -> None:
        done = asyncio.Event()

        async def never_reads(_requests: object, context: Any) -> None:
            await done.wait()

        server = grpc.aio.server()
        method = grpc.stream_stream_rpc_method_handler(never_reads)
        service, name = CONNECT_ROUTE.strip("/").split("/")
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {name: method}),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with connect(f"127.0.0.1:{port}", max_message_size=8 << 20) as session:
                with pytest.raises(asyncio.TimeoutError):  # noqa: PT012 (the send that sticks)
                    for _ in range(1000):
                        await session.send(big, timeout=1)
                with pytest.raises(StreamClosed):
                    await session.send(Heartbeat("n1"), timeout=1)
                with pytest.raises(PeerUnavailable):
                    await session.recv(timeout=WAIT)
        finally:
            done.set()
            await server.stop(grace=None)

    run(main)


# --- a leave seen as a leave, a cancellation as a loss ------------------------------------


def test_a_half_close_is_a_half_close_and_a_cancellation_is_not() -> None:
    async def main() -> None:
        plane = Plane(read_to_the_end)
        async with serving(plane) as server:
            for _ in range(5):
                async with connect(target(server)) as session:
                    await session.send(sample_registration())
                    await plane.registered()
                assert await asyncio.wait_for(plane.ends.get(), WAIT) == "half-closed"
            for _ in range(5):
                async with raw_agent(server) as call:
                    await call.write(encode_envelope(sample_registration()))
                    await call.write(encode_envelope(Heartbeat("gpu-node-017")))
                    # Cancelled mid-stream: once `handle` has the call and its registration.
                    await plane.registered()
                    call.cancel()
                assert await asyncio.wait_for(plane.ends.get(), WAIT) in ("lost", "cancelled")

    run(main)


# On Python 3.10 a session learns of a cancellation from `handle`'s task only
# (no `Task.cancelling`): a `handle` that swallows it, as this one does, hides it.
@pytest.mark.skipif(sys.version_info < (3, 11), reason="needs Task.cancelling (Python 3.11)")
def test_a_session_reading_when_its_agent_cancels_ends_with_peer_unavailable() -> None:
    async def reader_sees(session: ControlSession) -> str:
        # `recv` in a task of its own, so that grpc's cancellation of `handle`
        # does not stop it: what does the session itself say?
        seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def read() -> None:
            try:
                async for _ in session:
                    pass
                seen.set_result("half-closed")
            except PeerUnavailable:
                seen.set_result("lost")

        task = asyncio.ensure_future(read())
        try:
            return await asyncio.shield(seen)
        except asyncio.CancelledError:
            return await asyncio.wait_for(asyncio.shield(seen), WAIT)
        finally:
            task.cancel()

    async def main() -> None:
        plane = Plane(reader_sees)
        async with serving(plane) as server:
            for _ in range(5):
                async with raw_agent(server) as call:
                    await call.write(encode_envelope(sample_registration()))
                    await plane.registered()
                    call.cancel()
                assert await asyncio.wait_for(plane.ends.get(), WAIT) == "lost"

    run(main)


def test_a_command_is_sent_whole_before_the_leave_is_seen() -> None:
    async def plane_script(session: ControlSession) -> str:
        await session.recv(timeout=WAIT)
        await session.send(_COMMAND, timeout=WAIT)
        return await read_to_the_end(session)

    async def main() -> None:
        plane = Plane(plane_script)
        async with serving(plane) as server:
            async with connect(target(server)) as session:
                await session.send(sample_registration())
                assert isinstance(await session.recv(timeout=WAIT), ShardCommand)
            assert await asyncio.wait_for(plane.ends.get(), WAIT) == "half-closed"

    run(main)
