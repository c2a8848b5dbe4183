"""Real streams on loopback for a service's own tests: its control plane, or its agent.

A service tests its `ControlPlane.handle` against real calls, through grpc
on 127.0.0.1, without ports or teardown of its own:

    async with loopback(OurPlane()) as stream:
        agent = await stream.agent()            # connected, registered with a sample node
        ack = await agent.expect(Ack)           # the next value, of that type
        await agent.send(ShardReport(...))
        assert await agent.end() is None        # the call ended with OK

and its agent's own code against a control plane it drives itself:

    async with control_plane() as plane:
        task = asyncio.create_task(our_agent.serve(plane.target))
        session = await plane.next_agent()     # a ControlSession
        registration = await session.recv(timeout=WAIT)
        await session.send(ShardCommand(...))

Leaving the block cancels every agent still connected, ends every call and
stops the server: nothing it started is left running. Every wait is bounded
(`WAIT` seconds by default), so a test that hangs fails instead.

The pytest plugin gives both as the fixture `llmgw_wire_stream`, with a
`run` that runs a test's coroutine in an event loop of its own and fails if
the test left a task running.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from llmgw_wire.errors import StreamError
from llmgw_wire.stream import ControlPlane, ControlSession, Server, connect, start_server
from llmgw_wire.testing.sample import sample_registration

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from llmgw_wire.domain import Registration
    from llmgw_wire.stream import AgentSession, FromAgent, FromControl

__all__ = [
    "WAIT",
    "ControlPlaneDouble",
    "Loopback",
    "LoopbackAgent",
    "StreamHarness",
    "control_plane",
    "loopback",
    "registration_of",
]

#: Seconds any one wait of the harness takes at most (a busy CI machine is slow).
WAIT: Final = 30.0

T = TypeVar("T")


def registration_of(node_id: str, registration: Registration | None = None) -> Registration:
    """`registration` (the sample one by default) for node `node_id`, its shards moved with it."""
    base = sample_registration() if registration is None else registration
    node = attrs.evolve(base.node, id=node_id)
    shards = tuple(attrs.evolve(shard, node_id=node_id) for shard in base.shards)
    return attrs.evolve(base, node=node, shards=shards)


class LoopbackAgent:
    """One agent's stream to the control plane under test: what it got, and how its call ended.

    Attributes:
        session: the agent's session itself.
        node_id: the node it registered as (None if it sent no registration).
        received: every value the control plane sent it so far, in order.
        status: how the call ended: None for OK (or not ended yet), else the
            `StreamError` of its status.
        ended: whether the call has ended.
    """

    def __init__(self, session: AgentSession, node_id: str | None) -> None:
        self.session = session
        self.node_id = node_id
        self.received: list[FromControl] = []
        self.status: StreamError | None = None
        self.ended = False

    def __repr__(self) -> str:
        return f"<LoopbackAgent node={self.node_id!r} received={len(self.received)}>"

    async def send(self, value: FromAgent) -> None:
        """Send a `Registration`, `ShardReport` or `Heartbeat` to the control plane."""
        await self.session.send(value)

    async def recv(self, timeout: float = WAIT) -> FromControl | None:
        """The next value from the control plane, or None once it ended the call with OK.

        Raises:
            StreamError: the call ended with an error status (also kept in `status`).
            asyncio.TimeoutError: nothing came within `timeout` seconds.
        """
        try:
            value = await self.session.recv(timeout=timeout)
        except StreamError as exc:
            self.ended, self.status = True, exc
            raise
        if value is None:
            self.ended = True
        else:
            self.received.append(value)
        return value

    async def expect(self, kind: type[T], timeout: float = WAIT) -> T:
        """The next value, which must be a `kind` (an `AssertionError` says what came instead)."""
        value = await self.recv(timeout)
        if not isinstance(value, kind):
            got = "the end of the call" if value is None else type(value).__name__
            raise AssertionError(f"expected a {kind.__name__} from the control plane, got {got}")
        return value

    async def end(self, timeout: float = WAIT) -> StreamError | None:
        """Read until the call ends (keeping what comes in `received`): its status, None for OK.

        Raises:
            asyncio.TimeoutError: nothing came for `timeout` seconds, and the call goes on.
        """
        while not self.ended:
            with contextlib.suppress(StreamError):
                await self.recv(timeout)
        return self.status

    async def leave(self, grace: float = WAIT) -> None:
        """Part cleanly: half-close, and wait up to `grace` seconds for the control plane's end."""
        await self.session.leave(grace)
        self.ended = True


class Loopback:
    """A control plane served on 127.0.0.1, and the agents connected to it (from `loopback`).

    Attributes:
        plane: the control plane under test.
        server: its running `Server`.
        target: its address, "127.0.0.1:port".
        agents: every agent connected so far.
    """

    def __init__(self, plane: ControlPlane, server: Server) -> None:
        self.plane = plane
        self.server = server
        self.target = f"127.0.0.1:{server.port}"
        self.agents: list[LoopbackAgent] = []
        self._stack = contextlib.AsyncExitStack()
        self._numbers = itertools.count(1)

    def __repr__(self) -> str:
        return f"<Loopback {self.target} agents={len(self.agents)}>"

    async def agent(
        self,
        registration: Registration | None = None,
        *,
        register: bool = True,
        **options: Any,
    ) -> LoopbackAgent:
        """Connect an agent and, unless `register` is False, send its registration.

        Args:
            registration: what it registers with; by default the sample node
                (`llmgw_wire.testing.sample`) under a node id of its own
                ("node-1", "node-2", ...), so that agents do not collide.
            register: False connects without sending anything.
            options: what `llmgw_wire.stream.connect` takes (metadata, tls, ...).
        """
        if registration is None:
            registration = registration_of(f"node-{next(self._numbers)}")
        session = await self._stack.enter_async_context(connect(self.target, **options))
        agent = LoopbackAgent(session, registration.node.id if register else None)
        self.agents.append(agent)
        if register:
            await agent.send(registration)
        return agent

    async def close(self) -> None:
        """Stop the server (which ends every call), then let each agent go: nothing is left."""
        await self.server.stop(grace=WAIT)
        await self._stack.aclose()


@contextlib.asynccontextmanager
async def loopback(plane: ControlPlane, **options: Any) -> AsyncIterator[Loopback]:
    """Serve `plane` on 127.0.0.1 (a free port) for the block; agents connect with `agent()`.

    Args:
        plane: the control plane under test.
        options: what `llmgw_wire.stream.start_server` takes besides the
            plane and the address (tls, node_identity, authorize, limits, ...).
    """
    server = await start_server(plane, "127.0.0.1", 0, **options)
    stream = Loopback(plane, server)
    try:
        yield stream
    finally:
        await stream.close()


class ControlPlaneDouble(ControlPlane):
    """A control plane the test drives itself, for an agent's own code (from `control_plane`).

    Each agent that connects is handed to the test by `next_agent`, as the
    `ControlSession` that `handle` would get; its call stays open until the
    test calls `end(session)` (or the block ends, or the agent leaves and
    the test has read its end).

    Attributes:
        target: the address agents connect to, "127.0.0.1:port".
        sessions: every session handed over so far.
    """

    def __init__(self) -> None:
        self.target = ""
        self.sessions: list[ControlSession] = []
        self._arrived: asyncio.Queue[ControlSession] = asyncio.Queue()
        self._ends: dict[ControlSession, asyncio.Future[StreamError | None]] = {}

    async def handle(self, session: ControlSession) -> None:
        """Hand `session` to the test and keep the call open until the test ends it."""
        ending = asyncio.get_running_loop().create_future()
        self._ends[session] = ending
        self.sessions.append(session)
        self._arrived.put_nowait(session)
        try:
            error = await ending
        finally:
            del self._ends[session]
        if error is not None:
            raise error

    async def next_agent(self, timeout: float = WAIT) -> ControlSession:
        """The session of the next agent that connects (in the order they came)."""
        return await asyncio.wait_for(self._arrived.get(), timeout)

    def end(self, session: ControlSession, error: StreamError | None = None) -> None:
        """End `session`'s call: with OK, or with `error`'s status."""
        ending = self._ends.get(session)
        if ending is not None and not ending.done():
            ending.set_result(error)


@contextlib.asynccontextmanager
async def control_plane(**options: Any) -> AsyncIterator[ControlPlaneDouble]:
    """A `ControlPlaneDouble` served on 127.0.0.1 for the block.

    Args:
        options: what `llmgw_wire.stream.start_server` takes besides the
            plane and the address.
    """
    double = ControlPlaneDouble()
    server = await start_server(double, "127.0.0.1", 0, **options)
    double.target = f"127.0.0.1:{server.port}"
    try:
        yield double
    finally:
        for session in list(double._ends):
            double.end(session)
        await server.stop(grace=WAIT)


class StreamHarness:
    """The pytest fixture `llmgw_wire_stream`: `loopback`, `control_plane` and a bounded `run`."""

    def __init__(self, timeout: float = 120.0) -> None:
        self.timeout = timeout

    def serve(
        self, plane: ControlPlane, **options: Any
    ) -> contextlib.AbstractAsyncContextManager[Loopback]:
        """`loopback(plane, **options)`: the control plane under test, on loopback."""
        return loopback(plane, **options)

    def control_plane(
        self, **options: Any
    ) -> contextlib.AbstractAsyncContextManager[ControlPlaneDouble]:
        """`control_plane(**options)`: a control plane the test drives, for an agent's code."""
        return control_plane(**options)

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """Run `main()` in an event loop of its own, at most `timeout` seconds.

        Raises:
            AssertionError: the test left tasks running (they are cancelled
                first, and named in the message).
        """

        async def bounded() -> T:
            result = await asyncio.wait_for(main(), self.timeout)
            current = asyncio.current_task()
            left = [task for task in asyncio.all_tasks() if task is not current]
            for task in left:
                task.cancel()
            if left:
                await asyncio.gather(*left, return_exceptions=True)
                names = ", ".join(sorted(repr(task.get_coro()) for task in left))
                raise AssertionError(f"the test left {len(left)} tasks running: {names}")
            return result

        return asyncio.run(bounded())
