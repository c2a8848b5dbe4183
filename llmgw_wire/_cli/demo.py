"""`llmgw-wire demo`: an agent and a control plane speaking the stream, each in its own process.

The control plane listens on a loopback port; the agent connects and
registers the sample node (`llmgw_wire.testing.sample`); the control plane adopts its
running shards, answers with an `Ack` and sends a `StartShard`; the agent
turns it into a `ShardSpec`, reports the shard loading and then ready, with
its compute placement, and ends its side of the stream; the control plane
prints what it now knows of the node and ends the call. Both sides program
against domain values only, through `llmgw_wire.stream`.

The demo's own process only starts the two others, prints what they say and
stops them: every wait is bounded by `--timeout`, so a taken port or a peer
that dies gives an error and a non-zero exit status, never a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import multiprocessing
import os
import sys
import time
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from llmgw_wire.codec.envelope import encode_envelope
from llmgw_wire.conversions import adopted_from_register, running_shard_from_spec
from llmgw_wire.domain import (
    Ack,
    AdoptedShard,
    Compute,
    Heartbeat,
    Registration,
    ShardCommand,
    ShardReport,
    State,
)
from llmgw_wire.errors import shown
from llmgw_wire.stream import (
    AgentSession,
    ControlPlane,
    ControlSession,
    PeerUnavailable,
    StreamError,
    connect,
    start_server,
)
from llmgw_wire.testing.sample import sample_command, sample_registration

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable, Coroutine, Sequence
    from multiprocessing.connection import Connection
    from multiprocessing.context import SpawnContext, SpawnProcess

__all__ = [
    "DEFAULT_TIMEOUT",
    "add_arguments",
    "agent_process",
    "control_plane_process",
    "render",
    "run",
    "run_demo",
]

#: Seconds any one step of the demo may take before it gives up.
DEFAULT_TIMEOUT = 5.0
_HOST = "127.0.0.1"

T = TypeVar("T")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options: the control plane's port and the timeout of every step."""
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help=f"the control plane's port on {_HOST} (default: a free one)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long any one step may take (default: {DEFAULT_TIMEOUT:g})",
    )


def run(args: argparse.Namespace) -> int:
    """Run the demo; 0 when the whole exchange went through and both processes exited cleanly."""
    # The command is the application, so this is its choice, not the
    # library's: C-core's own log lines are noise here (the children say what
    # went wrong). The spawned children read it when they first import grpc.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    return run_demo(port=args.port, timeout=args.timeout)


# --- the text ---------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    lines = [headers, ["-" * w for w in widths], *rows]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _compute(compute: Compute | None) -> str:
    if compute is None:
        return "-"
    return f"{compute.backend} {compute.offloaded}/{compute.total} layers"


def render(registration: Registration) -> str:
    """A registration as text: the node, a table of its GPUs, a table of its shards."""
    node = registration.node
    out = [
        f"node {node.id} ({node.hostname}, {node.mgmt_addr}) state={node.state.value}",
        f"  agent {node.agent_version}, {node.cpu_count} CPUs, "
        f"{node.memory_total_mb // 1024} GiB, {node.host.os_id} {node.host.os_version}",
        (
            f"  IMEX {node.imex.state or '-'} ({node.imex.channels} channels); fabrics: "
            + ", ".join(
                f"{f.fabric} {f.rate_gbps} Gb/s via {'+'.join(f.hcas)}" for f in node.fabrics
            )
        ),
        "",
    ]
    gpu_rows = [
        [
            str(g.index),
            g.mig.profile if g.mig else "whole",
            f"{g.memory_used_mb}/{g.memory_total_mb} MiB",
            f"{g.utilization_percent}%",
            f"{g.health.temperature_c} C",
            f"{g.fabric.state} clique {g.fabric.clique_id}" if g.fabric else "-",
            ",".join(map(str, g.nvlink_peers)) or "-",
            "; ".join(g.health.problems) or "ok",
        ]
        for g in node.gpus
    ]
    headers = ["gpu", "slice", "memory", "util", "temp", "fabric", "nvlink", "health"]
    out += [_table(headers, gpu_rows), ""]
    shard_rows = [
        [
            s.shard_id,
            str(s.rank),
            s.state.value,
            ",".join(map(str, s.gpu_indices)),
            s.model,
            _compute(s.compute),
            s.endpoint or "-",
        ]
        for s in registration.shards
    ]
    headers = ["shard", "rank", "state", "gpus", "model", "compute", "endpoint"]
    out.append(_table(headers, shard_rows))
    return "\n".join(out)


def _gpus(registration: Registration) -> str:
    gpus = registration.node.gpus
    slices = sum(1 for g in gpus if g.mig is not None)
    return f"{len(gpus)} GPUs ({len(gpus) - slices} whole cards, {slices} MIG slices)"


def _placed(status: ShardReport) -> str:
    compute = status.compute
    if compute is None:
        return "no compute reported yet"
    return f"{_compute(compute)} on {','.join(compute.devices)}"


def _key(api_key: str) -> str:
    # Whether there is one, never what it is.
    return f"api_key={shown(api_key, secret=True)}" if api_key else "no api_key"


def _shards(shards: Sequence[AdoptedShard]) -> str:
    return ", ".join(f"{s.shard_id} ({s.state.value})" for s in shards) or "none"


# --- the two processes ------------------------------------------------------------


class _DemoError(Exception):
    """A step of the demo that did not go as it should; the message says which."""


class _Reporter:
    """A child process's line to the demo's process."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def say(self, text: str) -> None:
        # Stamped with the system-wide monotonic clock, so that the demo's
        # process can put both children's lines in the order they happened.
        self._conn.send(("say", (time.monotonic(), text)))

    def send(self, kind: str, value: object) -> None:
        self._conn.send((kind, value))


async def _expect(
    session: AgentSession | ControlSession, kind: type[T], what: str, timeout: float
) -> T:
    """The next value from `session`, which must be a `kind` (heartbeats aside)."""
    while True:
        try:
            value = await session.recv(timeout)
        except asyncio.TimeoutError:
            raise _DemoError(f"no {what} from the {_other(session)} within {timeout:g} s") from None
        except PeerUnavailable as exc:
            raise _DemoError(
                f"the stream with the {_other(session)} was lost before {what}: {exc.details}"
            ) from None
        if value is None:
            raise _DemoError(f"the {_other(session)} ended the stream before sending {what}")
        if isinstance(value, kind):
            return value
        if not isinstance(value, Heartbeat):
            raise _DemoError(f"expected {what} from the {_other(session)}, got {value!r}")


async def _bounded(step: Awaitable[None], what: str, timeout: float) -> None:
    try:
        await asyncio.wait_for(step, timeout)
    except asyncio.TimeoutError:
        raise _DemoError(f"{what} took longer than {timeout:g} s") from None


def _other(session: AgentSession | ControlSession) -> str:
    return "agent" if isinstance(session, ControlSession) else "control plane"


class _DemoControlPlane(ControlPlane):
    """Serves one agent: adopts its shards, starts one more, waits for it to be ready."""

    def __init__(self, report: _Reporter, timeout: float) -> None:
        self.report = report
        self.timeout = timeout
        self.nodes: dict[str, Registration] = {}
        self.connected = asyncio.Event()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handle(self, session: ControlSession) -> None:
        self.connected.set()
        try:
            await self._exchange(session)
        except _DemoError as exc:
            self._finish(exc)
            raise StreamError(str(exc), code="ABORTED") from None
        except asyncio.CancelledError:
            self._finish(_DemoError(f"the stream with the {session} was lost before it ended"))
            raise
        except Exception as exc:
            self._finish(_DemoError(f"{type(exc).__name__}: {exc}"))
            raise StreamError(f"{type(exc).__name__}: {exc}", code="INTERNAL") from None
        self._finish(None)

    def _finish(self, error: Exception | None) -> None:
        if not self.done.done():
            if error is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(error)

    async def _exchange(self, session: ControlSession) -> None:
        say, timeout = self.report.say, self.timeout
        registration = await _expect(session, Registration, "registration", timeout)
        node = registration.node
        say(f"<- Register from {session.peer}: node {node.id}, {_gpus(registration)}")
        self.nodes[node.id] = registration
        say(f"   adopted {len(registration.shards)} running shards: {_shards(registration.shards)}")

        ack = Ack(node.id, len(registration.shards), "registered; running shards adopted")
        say(f"-> Ack, {len(encode_envelope(ack))} bytes: {ack.detail}")
        await _bounded(session.send(ack), "sending the Ack", timeout)
        command = sample_command()
        spec = command.spec
        say(
            f"-> StartShard {command.shard_id}, {len(encode_envelope(command))} bytes: "
            f"{spec.profile.engine} profile {spec.profile.name} on GPUs "
            f"{','.join(map(str, spec.gpu_indices))}, {_key(spec.api_key)}"
        )
        await _bounded(session.send(command), "sending the command", timeout)

        while True:
            status = await _expect(session, ShardReport, f"status of {command.shard_id}", timeout)
            say(f"<- ShardStatus {status.shard_id} {status.state.value}, {_placed(status)}")
            if status.shard_id != command.shard_id:
                continue
            if status.state is State.FAILED:
                raise _DemoError(f"the agent could not start {status.shard_id}: {status.detail}")
            if status.state is State.READY:
                break
        # The control plane's view of the new shard, from what it asked for and
        # what the agent reported, through the named conversions.
        running = running_shard_from_spec(attrs.evolve(spec, compute=status.compute), status.state)
        (shard,) = adopted_from_register(node.id, [running])
        self.nodes[node.id] = attrs.evolve(registration, shards=(*registration.shards, shard))
        say(f"   {shard.shard_id} is serving {shard.model} at {shard.endpoint}")

        try:
            value = await session.recv(timeout)
        except asyncio.TimeoutError:
            raise _DemoError(f"the agent did not end its stream within {timeout:g} s") from None
        if value is not None:
            raise _DemoError(f"expected the end of the agent's stream, got {value!r}")
        say("   the agent ended its stream; ending the call")


async def _control_plane(report: _Reporter, port: int, timeout: float) -> None:
    plane = _DemoControlPlane(report, timeout)
    try:
        server = await start_server(plane, _HOST, port)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason += " (choose another port with --port, or 0 for a free one)"
        raise _DemoError(f"cannot listen on {_HOST}:{port}: {reason}") from None
    bound = server.port
    try:
        report.send("listening", bound)
        report.say(f"listening on {_HOST}:{bound}")
        try:
            await asyncio.wait_for(plane.connected.wait(), timeout)
        except asyncio.TimeoutError:
            raise _DemoError(f"no agent connected within {timeout:g} s") from None
        # Each step of the exchange has its own timeout; this one only bounds
        # the whole in case a step never starts.
        try:
            await asyncio.wait_for(asyncio.shield(plane.done), 4 * timeout)
        except asyncio.TimeoutError:
            raise _DemoError(f"the exchange took longer than {4 * timeout:g} s") from None
        report.send("result", "\n\n".join(render(node) for node in plane.nodes.values()))
    except BaseException:
        # The error says what went wrong; a peer that keeps its connection
        # open must not turn it into a timeout while the server stops.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(server.stop(grace=None), timeout)
        raise
    await _bounded(server.stop(grace=timeout), "stopping the server", timeout + 1)


async def _agent(report: _Reporter, port: int, timeout: float) -> None:
    try:
        async with connect(f"{_HOST}:{port}") as session:
            # Each step has its own timeout; this one bounds the whole.
            await asyncio.wait_for(_agent_exchange(session, report, timeout), 4 * timeout)
    except PeerUnavailable as exc:
        raise _DemoError(
            f"cannot reach the control plane at {_HOST}:{port}: {exc.details}"
        ) from None
    except asyncio.TimeoutError:
        raise _DemoError(f"the exchange took longer than {4 * timeout:g} s") from None


async def _agent_exchange(session: AgentSession, report: _Reporter, timeout: float) -> None:
    say = report.say
    registration = sample_registration()
    say(
        f"-> Register, {len(encode_envelope(registration))} bytes: node "
        f"{registration.node.id}, {_gpus(registration)}, "
        f"{len(registration.shards)} running shards"
    )
    await _bounded(session.send(registration), "sending the registration", timeout)
    ack = await _expect(session, Ack, "answer to the registration", timeout)
    say(f"<- Ack: {ack.adopted_shards} shards adopted ({ack.detail})")

    command = await _expect(session, ShardCommand, "command", timeout)
    spec, startup_timeout = command.spec, command.startup_timeout
    say(
        f"<- StartShard {command.shard_id} -> ShardSpec: {spec.profile.engine} "
        f"{spec.profile.served_model_name} on GPUs {','.join(map(str, spec.gpu_indices))}, "
        f"port {spec.http_port}, startup timeout {startup_timeout}, {_key(spec.api_key)}"
    )
    for status in (
        ShardReport(spec.replica_id, spec.shard_id, State.LOADING),
        ShardReport(
            spec.replica_id,
            spec.shard_id,
            State.READY,
            compute=Compute("cuda", tuple(f"cuda:{i}" for i in spec.gpu_indices), 40, 40),
        ),
    ):
        say(
            f"-> ShardStatus {status.shard_id} {status.state.value}, "
            f"{len(encode_envelope(status))} bytes, {_placed(status)}"
        )
        await _bounded(session.send(status), "sending a status", timeout)

    await _bounded(session.close(), "ending the stream", timeout)
    say("   ended its side of the stream")
    try:
        value = await session.recv(timeout)
    except asyncio.TimeoutError:
        raise _DemoError(f"the control plane did not end the call within {timeout:g} s") from None
    if value is not None:
        raise _DemoError(f"expected the end of the call, got {value!r}")
    say("   the control plane ended the call: OK")


class _LogLines(logging.Handler):
    """Warnings logged in a child (the library's, grpclib's) as lines of the demo."""

    def __init__(self, report: _Reporter) -> None:
        super().__init__(logging.WARNING)
        self.report = report

    def emit(self, record: logging.LogRecord) -> None:
        self.report.say(f"   [{record.levelname.lower()} {record.name}] {record.getMessage()}")


def _child(
    conn: Connection,
    main: Callable[..., Coroutine[object, object, object]],
    port: int,
    timeout: float,
) -> None:
    """Run `main` in this child process; say why and exit 1 if it fails."""
    report = _Reporter(conn)
    logging.getLogger().addHandler(_LogLines(report))
    try:
        asyncio.run(main(report, port, timeout))
    except _DemoError as exc:
        report.send("failed", str(exc))
        sys.exit(1)
    except StreamError as exc:
        report.send("failed", f"the call ended with {exc.code}: {exc.details}")
        sys.exit(1)
    except Exception as exc:  # whatever it is, the demo's process must hear of it
        report.send("failed", f"{type(exc).__name__}: {exc}")
        sys.exit(1)
    finally:
        conn.close()


def control_plane_process(conn: Connection, port: int, timeout: float) -> None:
    """The control plane's process: serve one agent on `port` (0: a free one)."""
    _child(conn, _control_plane, port, timeout)


def agent_process(conn: Connection, port: int, timeout: float) -> None:
    """The agent's process: connect to the control plane on `port` and run the exchange."""
    _child(conn, _agent, port, timeout)


# --- the demo's own process -------------------------------------------------------


class _Child:
    """A child process and the pipe it reports on."""

    def __init__(self, ctx: SpawnContext, name: str, target: Callable[..., None], *args: object):
        self.name = name
        self.conn, child_end = ctx.Pipe(duplex=False)
        self.process: SpawnProcess = ctx.Process(
            target=target, args=(child_end, *args), name=name, daemon=True
        )
        self.process.start()
        child_end.close()
        self.events: list[tuple[str, Any]] = []
        self.failure: str | None = None
        self.code: int | None = None

    def drain(self) -> list[tuple[float, str, str]]:
        """What the child has said so far: (when, who, what) lines."""
        lines: list[tuple[float, str, str]] = []
        while not self.conn.closed:
            try:
                if not self.conn.poll():
                    break
                kind, value = self.conn.recv()
            except (EOFError, OSError):
                self.conn.close()
                break
            if kind == "say":
                when, text = value
                lines.append((when, self.name, text))
            elif kind == "failed":
                self.failure = value
            else:
                self.events.append((kind, value))
        return lines

    def event(self, kind: str) -> Any:
        return next((value for k, value in self.events if k == kind), None)

    def check(self) -> None:
        """Note whether the child has exited; fail if it has, unsuccessfully."""
        self.code = self.process.exitcode
        if self.code not in (None, 0):
            raise _DemoError(
                f"{self.name}: {self.failure or f'exited with code {self.code}, saying nothing'}"
            )

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(1)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def _pump(
    children: list[_Child],
    done: Callable[[], bool],
    what: str,
    patience: float,
    out: Callable[[str], None],
    started: float,
) -> None:
    """Print what the children say until `done()`; fail when one fails or all fall silent."""
    silent = False
    while True:
        for when, name, text in sorted(line for c in children for line in c.drain()):
            out(f"{when - started:5.2f} s  {name:<13} | {text}")
        for child in children:
            child.check()
        if done():
            return
        if silent:
            names = " and ".join(c.name for c in children if c.process.exitcode is None)
            raise _DemoError(f"no word from the {names} in {patience:g} s, waiting for {what}")
        handles: list[Connection | int] = [c.conn for c in children if not c.conn.closed]
        handles += [c.process.sentinel for c in children if c.code is None]
        ready = wait(handles, patience)
        for child in children:
            if child.process.sentinel in ready:
                # The sentinel says it is exiting; wait until it has, for its status.
                child.process.join(patience)
        # One more round after a silence, so that a child that failed just
        # then is reported for what it says rather than as silent.
        silent = not ready


def run_demo(
    port: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    agent: Callable[[Connection, int, float], None] = agent_process,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> int:
    """Run the control plane and the agent, each in its own process, and show the exchange.

    Args:
        port: the control plane's port on 127.0.0.1; 0 picks a free one.
        timeout: seconds any one step may take.
        agent: the agent process's function (tests give a failing one).
        out: where the exchange goes, line by line.
        err: where the reason of a failure goes.

    Returns:
        0 when the exchange went through and both processes exited cleanly,
        1 otherwise, after saying why and stopping both processes.
    """
    started = time.monotonic()
    # Spawned, never forked: a forked child of a process with live grpc
    # objects can hang.
    ctx = multiprocessing.get_context("spawn")
    children: list[_Child] = []
    # The children report their own timeouts; the demo's process waits a
    # little longer so that theirs, which say more, come first.
    patience = 2 * timeout + 1
    try:
        plane = _Child(ctx, "control plane", control_plane_process, port, timeout)
        children.append(plane)
        listening = lambda: plane.event("listening") is not None  # noqa: E731
        _pump(children, listening, "the port", patience, out, started)
        bound = plane.event("listening")
        children.append(_Child(ctx, "agent", agent, bound, timeout))

        def finished() -> bool:
            return all(c.code == 0 and c.conn.closed for c in children)

        _pump(children, finished, "the exchange to finish", patience, out, started)
    except _DemoError as exc:
        err(f"error: {exc}")
        return 1
    finally:
        for child in children:
            child.stop()
    out("")
    out(f"{time.monotonic() - started:5.2f} s  both processes exited cleanly")
    out("")
    out("what the control plane knows now:")
    out("")
    out(plane.event("result"))
    return 0
