"""The load run (`make load`): what one control-plane process costs for a fleet of agents.

The same agents (the library's `connect`, spread over a few processes of
their own, each agent on a connection of its own by default) talk to several
control planes in turn, each in a process of its own:

- `library`: the library's plane, `start_server` with a counting `ControlPlane`;
- `raw`: a grpc.aio raw-bytes handler that decodes nothing and answers with
  bytes encoded once: grpc.aio's own floor, under which no Python control
  plane on grpc.aio can go;
- `raw+codec`: the same handler calling the envelope codec inline
  (`decode_envelope`, `encode_envelope`) on every message;
- `grpc-go`: the grpc-go control plane of interop/go (`--scenario serve
  --quiet`), when `make interop-go-build` has built it;
- `library-id-only`: the library's plane again, but with no Python value
  built of a registration beyond its node id (upb still parses it, within
  the limits; the rest of the value is one made beforehand): the least any
  way of decoding registrations (lazily, say) could cost this plane, and so
  what the stream's sessions cost with the registration's decode taken out;
- `library-direct`: the library's plane again, with `recv` reading the call
  itself instead of the session's reader task: not safe (a `recv` that timed
  out would lose the call, which is why the library has the reader), and
  here only to show what that guarantee costs;
- `library-2p`: two processes of the library's plane on one port
  (`start_server(options=[("grpc.so_reuseport", 1)])`): the kernel spreads
  the agents' connections over them; CPU, memory and sockets are the two
  processes' together, and heartbeats per second what both carried.

Each run has two phases. The exchange: every agent connects, registers (a
copy of the sample node, 3.3 kB, under a node id of its own), receives the
plane's `Ack` and `StartShard` and reports the shard READY; the agents wait
until all of them are connected (the plane's resident set is read then:
memory per connected agent). Then the steady state: every agent sends
`--heartbeats` heartbeats, as fast as the stream takes them, and ends its
stream. A run with no heartbeats gives the exchange's cost (both phases:
register to the end of the stream); the heartbeats' cost is what a run with
heartbeats takes in its second phase over the same phase without.

The plane's CPU time (user + system, the kernel's counters that `getrusage`
reports, read from /proc for every plane alike) and its resident set are read
by this process between the phases. Rounds are interleaved: each round runs
every plane once each way, in an order rotated by one each round, so that
a change in the machine's load falls on every plane; the figures are the
medians over rounds, and only ratios between planes of one run mean
anything on a shared machine.

The run fails (exit status 1) if anything was lost or duplicated (every
registration adopted once, every command answered, every heartbeat counted
by the Python planes) or a run takes longer than `--timeout`; with
`--check`, also if the library's plane costs more than 1.25x the raw floor
per exchange.

    python bench/load.py [--agents 1000] [--rounds 3] [--heartbeats 20]
                         [--connections agent|process] [--planes ...]
                         [--check] [--json FILE] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from multiprocessing.connection import wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs
import grpc

from llmgw_wire import Ack, Heartbeat, Registration, ShardCommand, ShardReport, State
from llmgw_wire.codec.envelope import (
    AGENT_MESSAGE,
    EnvelopeCodec,
    decode_envelope,
    encode_envelope,
    envelope_codec,
)
from llmgw_wire.domain import Compute
from llmgw_wire.stream import (
    CONNECT_ROUTE,
    AgentSession,
    ControlPlane,
    ControlSession,
    ServerLimits,
    connect,
    server_options,
    start_server,
)
from llmgw_wire.stream._session import _Session
from llmgw_wire.testing.sample import sample_command
from llmgw_wire.testing.stream import registration_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from multiprocessing.connection import Connection

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
GO_PLANE = ROOT / "build" / "interop" / "bin" / "controlplane"
ID_ONLY = "library-id-only"
DIRECT = "library-direct"
SHARED_PORT = "library-2p"
READER = "raw+reader"
PLANES = ("library", "raw", "raw+codec", "grpc-go", ID_ONLY, DIRECT, SHARED_PORT, READER)
# How many values the raw+reader plane reads ahead: as many as a session does.
READ_AHEAD = 8
# The processes of the SHARED_PORT plane, and what lets them share the port.
SHARING = 2
REUSE_PORT = [("grpc.so_reuseport", 1)]
# Seconds one agent may wait for any one message before it counts as lost.
STEP_TIMEOUT = 300.0
# The node id in the raw plane's Ack, encoded once: it reads no registration.
RAW_NODE = "raw-floor"
# The targets: a plane at most so many times another, per exchange or per
# heartbeat, as the median of the rounds' ratios (see `paired`).
TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("library", "raw+codec", "exchange", 1.10),
    ("raw+codec", "raw", "exchange", 1.45),
    ("library", "raw+codec", "heartbeat", 1.25),
)
# Every agent here comes from 127.0.0.1, one peer to the plane, as a fleet
# behind one NAT would: its share of the calls waiting to register is the
# server's whole budget (the limits guide says to raise it so).
ONE_ADDRESS = ServerLimits(max_unregistered_calls_per_peer=ServerLimits().max_unregistered_calls)
# A connection of its own for every channel: grpc shares one connection
# between the channels of a process to the same target unless told not to.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def node_id(process: int, agent: int) -> str:
    return f"load-{process}-{agent:04d}"


@functools.cache
def _template() -> ShardCommand:
    return sample_command()


def command_for(node: str) -> ShardCommand:
    """The sample command, for a shard id of the node's own.

    Made from one template, as a control plane makes its commands from what
    it holds: the planes' figures are the stream's and the codec's, not the
    sample's construction.
    """
    command = _template()
    return attrs.evolve(command, spec=attrs.evolve(command.spec, shard_id=f"{node}-new"))


def registration_for(node: str) -> Registration:
    """The sample registration, as node `node`."""
    return registration_of(node)


# --- a plane's process, seen from outside ------------------------------------------


def proc_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system, every thread) the processes `pids` have used, together."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def proc_memory(pids: list[int]) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of the processes `pids`, added up, in KiB."""
    found = dict.fromkeys(("VmRSS", "VmHWM"), 0)
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in found:
                found[name] += int(value.split()[0])
    return found


def proc_sockets(pids: list[int]) -> int:
    """How many sockets the processes `pids` hold open (a connection each, and the listeners)."""
    count = 0
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                count += os.readlink(fd).startswith("socket:")
    return count


# --- the Python planes -------------------------------------------------------------


@attrs.define
class Counts:
    """What a Python plane saw; checked against what the agents sent."""

    registrations: collections.Counter[str] = attrs.field(factory=collections.Counter)
    ready: collections.Counter[str] = attrs.field(factory=collections.Counter)
    heartbeats: int = 0
    messages: int = 0
    errors: list[str] = attrs.field(factory=list)

    def adopt(self, registration: object) -> tuple[Ack, ShardCommand]:
        """A plane's answer to `registration`, counted: its Ack, and the command for its node."""
        if not isinstance(registration, Registration):
            raise ValueError(f"expected a registration, got {registration!r}")
        node = registration.node.id
        self.registrations[node] += 1
        return Ack(node, len(registration.shards), "adopted"), command_for(node)

    def count_ready(self, ack: Ack, command: ShardCommand, report: object) -> None:
        """Count `report`, the agent's answer to `ack` and `command`: its shard READY."""
        if not (
            isinstance(report, ShardReport)
            and report.shard_id == command.shard_id
            and report.state is State.READY
        ):
            raise ValueError(f"expected {command.shard_id} READY, got {report!r}")
        self.ready[ack.node_id] += 1
        self.messages += 2


class CountingControlPlane(ControlPlane):
    """The library's plane: adopts, commands, and counts every heartbeat until the end."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts

    async def handle(self, session: ControlSession) -> None:
        counts = self.counts
        try:
            ack, command = counts.adopt(await session.recv(STEP_TIMEOUT))
            await session.send(ack)
            await session.send(command)
            counts.count_ready(ack, command, await session.recv(STEP_TIMEOUT))
            while (message := await session.recv(STEP_TIMEOUT)) is not None:
                if not isinstance(message, Heartbeat):
                    raise ValueError(f"expected a heartbeat, got {message!r}")
                counts.heartbeats += 1
                counts.messages += 1
        except Exception as exc:
            counts.errors.append(f"{session}: {type(exc).__name__}: {exc}")


def merged(counts: list[dict[str, Any]]) -> dict[str, Any]:
    """What the processes of one plane saw, together."""
    together = Counts()
    for each in counts:
        together.registrations.update(each["registrations"])
        together.ready.update(each["ready"])
        together.heartbeats += each["heartbeats"]
        together.messages += each["messages"]
        together.errors += each["errors"]
    return attrs.asdict(together, recurse=False)


Handler: TypeAlias = "Callable[[object, grpc.aio.ServicerContext[Any, Any]], Awaitable[None]]"


def floor_handler(counts: Counts) -> Handler:
    """The raw plane: bytes read and answered with bytes encoded once, nothing decoded."""
    ack = encode_envelope(Ack(RAW_NODE, 2, "adopted"))
    start = encode_envelope(command_for(RAW_NODE))

    async def floor(_requests: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        data = await context.read()
        if data is grpc.aio.EOF:
            counts.errors.append("a call ended before its registration")
            return
        await context.write(ack)
        await context.write(start)
        messages = 1
        while await context.read() is not grpc.aio.EOF:
            messages += 1
        counts.messages += messages

    return floor


def codec_handler(counts: Counts) -> Handler:
    """The raw+codec plane: the envelope codec called inline on every message."""

    async def with_codec(_requests: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        try:
            ack, command = counts.adopt(decode_envelope(await context.read(), AGENT_MESSAGE))
            await context.write(encode_envelope(ack))
            await context.write(encode_envelope(command))
            counts.count_ready(ack, command, decode_envelope(await context.read(), AGENT_MESSAGE))
            while (data := await context.read()) is not grpc.aio.EOF:
                if not isinstance(decode_envelope(data, AGENT_MESSAGE), Heartbeat):
                    raise ValueError("expected a heartbeat")
                counts.heartbeats += 1
                counts.messages += 1
        except Exception as exc:
            counts.errors.append(f"raw+codec: {type(exc).__name__}: {exc}")

    return with_codec


def reader_handler(counts: Counts) -> Handler:
    """The raw+reader plane: raw+codec's work, its values read ahead as a session reads them.

    A task of the call's own reads and decodes each message into an
    `asyncio.Queue` of `READ_AHEAD` values, from which the handler takes
    them: the least a plane that keeps a reader task on asyncio's queue costs,
    with none of the session's checks, budgets or timeouts.
    """

    async def with_reader(_requests: object, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        inbox: asyncio.Queue[Any] = asyncio.Queue(READ_AHEAD)

        async def read_all() -> None:
            while (data := await context.read()) is not grpc.aio.EOF:
                value = decode_envelope(data, AGENT_MESSAGE)
                if inbox.qsize() < READ_AHEAD:
                    inbox.put_nowait(value)
                else:
                    await inbox.put(value)
            await inbox.put(None)

        reader = asyncio.ensure_future(read_all())
        try:
            ack, command = counts.adopt(await inbox.get())
            await context.write(encode_envelope(ack))
            await context.write(encode_envelope(command))
            counts.count_ready(ack, command, await inbox.get())
            while (message := await inbox.get()) is not None:
                if not isinstance(message, Heartbeat):
                    raise ValueError("expected a heartbeat")
                counts.heartbeats += 1
                counts.messages += 1
        except Exception as exc:
            counts.errors.append(f"{READER}: {type(exc).__name__}: {exc}")
        finally:
            reader.cancel()

    return with_reader


# How each plane that is a bare grpc.aio handler handles `Connect`.
RAW_HANDLERS: dict[str, Callable[[Counts], Handler]] = {
    "raw": floor_handler,
    "raw+codec": codec_handler,
    READER: reader_handler,
}


def raw_handler(counts: Counts, plane: str) -> grpc.GenericRpcHandler:
    """`Connect` as a bare grpc.aio handler of bytes, for one of `RAW_HANDLERS`' planes."""
    method = grpc.stream_stream_rpc_method_handler(RAW_HANDLERS[plane](counts))
    service, name = CONNECT_ROUTE.strip("/").split("/")
    return grpc.method_handlers_generic_handler(service, {name: method})


def build_node_id_only(codec: EnvelopeCodec) -> None:
    """Make `codec` decode a registration into a value of which only the node id is read.

    For the `library-id-only` plane, given the codec its sessions use, in its
    own process: upb still parses the registration and the limits still
    apply; then, instead of the registration's Python values, one made
    beforehand comes out under the message's node id (all this plane reads
    of it, with the shard count).
    """
    made = registration_for(RAW_NODE)

    def node_id_only(message: Any) -> Registration:
        return attrs.evolve(made, node=attrs.evolve(made.node, id=message.node_id))

    # The codec's private table of how each member becomes a domain value.
    codec._structure[codec.members[Registration]] = node_id_only


def read_without_reader() -> None:
    """Make this process's sessions read the call in `recv`, with no reader task.

    For the `library-direct` plane, in its own process: what the reader task
    (a timeout or a cancellation that leaves the session usable) costs is the
    difference from the library's plane. `recv` then ignores its timeout: a
    timeout would cancel grpc.aio's read and end the call's reading.
    """

    async def recv(self: Any, timeout: float | None = None) -> Any:
        while (data := await self._call.read()) is not None:
            self._check_decodable(data)
            value = self._accept(self._decode_only(data))
            if value is not None:
                return value
        return None

    # The session's private reading, changed in this plane's process only.
    _Session.recv = recv  # type: ignore[method-assign]
    _Session.start_reading = lambda self: None  # type: ignore[method-assign]


async def serve(conn: Connection, plane: str, port: int) -> None:
    counts = Counts()
    if plane == ID_ONLY:
        build_node_id_only(envelope_codec(AGENT_MESSAGE))
    if plane == DIRECT:
        read_without_reader()
    if plane in ("library", ID_ONLY, DIRECT, SHARED_PORT):
        options = REUSE_PORT if plane == SHARED_PORT else None
        server = await start_server(
            CountingControlPlane(counts), HOST, port, options=options, limits=ONE_ADDRESS
        )
        port = server.port
        stop = server.stop
    else:
        # The library's server options (limits, keepalive): only the handler differs.
        raw = grpc.aio.server(options=server_options())
        raw.add_generic_rpc_handlers((raw_handler(counts, plane),))
        port = raw.add_insecure_port(f"{HOST}:0")
        await raw.start()
        stop = raw.stop
    conn.send(("listening", port))
    await asyncio.to_thread(conn.recv)
    await stop(None)
    conn.send(("counts", attrs.asdict(counts, recurse=False)))


def python_plane(conn: Connection, plane: str, profile: str, port: int = 0) -> None:
    # One socket per agent, and then some.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if not profile:
        asyncio.run(serve(conn, plane, port))
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        asyncio.run(serve(conn, plane, port))
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


class GoPlane:
    """The grpc-go control plane of interop/go, its output read by a thread of its own."""

    def __init__(self, deadline: float) -> None:
        self.process = subprocess.Popen(
            [str(GO_PLANE), "--scenario", "serve", "--quiet"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._listening = threading.Event()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        if not self._listening.wait(max(deadline - time.monotonic(), 0)):
            raise TimeoutError("the grpc-go control plane did not listen in time")
        self.port = int(
            next(line for line in self.lines if line.startswith("LISTENING")).split()[1]
        )

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())
            if line.startswith("LISTENING"):
                self._listening.set()

    def stop(self, deadline: float) -> list[str]:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(max(deadline - time.monotonic(), 1))
        self._drainer.join(5)  # its last lines, DONE among them
        return [] if "DONE" in self.lines else ["the grpc-go control plane did not stop cleanly"]


# --- the agents -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def session_to(port: int, own_connection: bool) -> AsyncIterator[AgentSession]:
    options = OWN_CONNECTION if own_connection else []
    async with connect(f"{HOST}:{port}", options=options) as session:
        yield session


@attrs.define
class AgentStats:
    acks: int = 0
    commands: int = 0
    connected: int = 0
    heartbeats: int = 0
    done: int = 0
    times: list[float] = attrs.field(factory=list)
    errors: list[str] = attrs.field(factory=list)


async def one_agent(
    port: int,
    node: str,
    stats: AgentStats,
    arrived: asyncio.Queue[None],
    go: asyncio.Event,
    heartbeats: int,
    own_connection: bool,
) -> None:
    started = time.perf_counter()
    registration = registration_for(node)
    at_barrier = False
    try:
        async with session_to(port, own_connection) as session:
            await session.send(registration)
            ack = await session.recv(STEP_TIMEOUT)
            if not (isinstance(ack, Ack) and ack.node_id in (node, RAW_NODE)):
                raise ValueError(f"expected the Ack for {node}, got {ack!r}")
            stats.acks += 1
            command = await session.recv(STEP_TIMEOUT)
            if not isinstance(command, ShardCommand):
                raise ValueError(f"expected a command for {node}, got {command!r}")
            stats.commands += 1
            compute = Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40)
            await session.send(
                ShardReport(command.replica_id, command.shard_id, State.READY, compute=compute)
            )
            stats.times.append(time.perf_counter() - started)
            stats.connected += 1
            at_barrier = True
            arrived.put_nowait(None)
            await go.wait()
            beat = Heartbeat.now(node)
            for _ in range(heartbeats):
                await session.send(beat)
                stats.heartbeats += 1
            await session.close()
            end = await session.recv(STEP_TIMEOUT)
            if end is not None:
                raise ValueError(f"expected the end of the call, got {end!r}")
            stats.done += 1
    except Exception as exc:
        stats.errors.append(f"{node}: {type(exc).__name__}: {exc}")
    finally:
        if not at_barrier:
            arrived.put_nowait(None)


async def agents(conn: Connection, index: int, count: int, heartbeats: int, own: bool) -> None:
    port: int = await asyncio.to_thread(conn.recv)
    stats = AgentStats()
    arrived: asyncio.Queue[None] = asyncio.Queue()
    go = asyncio.Event()
    tasks = [
        asyncio.create_task(one_agent(port, node_id(index, i), stats, arrived, go, heartbeats, own))
        for i in range(count)
    ]
    for _ in range(count):
        await arrived.get()
    conn.send(("connected", attrs.asdict(stats)))
    await asyncio.to_thread(conn.recv)
    go.set()
    await asyncio.gather(*tasks)
    conn.send(("done", attrs.asdict(stats)))


def agent_process(conn: Connection, index: int, count: int, heartbeats: int, own: bool) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # Imports done and ready to go: the clock starts when every process is.
    conn.send("ready")
    asyncio.run(agents(conn, index, count, heartbeats, own))


# --- one run ----------------------------------------------------------------------


def receive(conns: list[Connection], deadline: float) -> list[Any]:
    """One message from each of `conns`, before `deadline` (monotonic)."""
    got: dict[int, Any] = {}
    while len(got) < len(conns):
        remaining = deadline - time.monotonic()
        waiting = [c for i, c in enumerate(conns) if i not in got]
        if remaining <= 0 or not wait(waiting, remaining):
            raise TimeoutError(f"{len(waiting)} of {len(conns)} processes did not answer in time")
        for i, c in enumerate(conns):
            if i not in got and c.poll():
                try:
                    got[i] = c.recv()
                except EOFError:
                    raise RuntimeError(f"process {i} exited before answering") from None
    return [got[i] for i in range(len(conns))]


def start(ctx: Any, target: Any, args: tuple[Any, ...], name: str) -> tuple[Any, Connection]:
    conn, child = ctx.Pipe()
    process = ctx.Process(target=target, args=(child, *args), name=name, daemon=True)
    process.start()
    return process, conn


def problems(
    plane: str, shares: list[int], heartbeats: int, agents: list[dict[str, Any]], counts: Any
) -> list[str]:
    """Everything lost, duplicated or failed; empty when the run is clean."""
    expected = {node_id(p, i) for p, share in enumerate(shares) for i in range(share)}
    found = []
    errors: list[str] = []
    for name in ("acks", "commands", "connected", "done"):
        got = sum(a[name] for a in agents)
        if got != len(expected):
            found.append(f"{name}: {got}, expected {len(expected)}")
    if counts is not None:
        messages = len(expected) * (2 + heartbeats)
        if counts["messages"] != messages:
            found.append(f"the plane read {counts['messages']} messages, expected {messages}")
        if plane != "raw":
            for name in ("registrations", "ready"):
                seen = counts[name]
                if set(seen) != expected or any(c != 1 for c in seen.values()):
                    found.append(
                        f"{name}: {len(seen)} nodes, expected each of {len(expected)} once"
                    )
        errors = counts["errors"]
    return found + [e for a in agents for e in a["errors"]][:5] + errors[:5]


def show_profile(process: Any, path: str, title: str) -> None:
    process.join(60)  # let it write its profile
    import pstats

    print(f"--- the profile of {title}, by own time ---")
    pstats.Stats(path, stream=sys.stdout).sort_stats("tottime").print_stats(14)


def end(go: GoPlane | None, processes: list[Any]) -> None:
    """Stop whatever of a run is still running."""
    if go is not None and go.process.poll() is None:
        go.process.kill()
        go.process.wait()
    for process in processes:
        if process.is_alive():
            process.terminate()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


def run(
    plane: str, shares: list[int], heartbeats: int, own: bool, timeout: float, profile: str = ""
) -> dict[str, Any]:
    """One plane, one run: the exchange, then `heartbeats` per agent and the end."""
    deadline = time.monotonic() + timeout
    # Spawned, never forked: a forked child of a process with live grpc objects can hang.
    ctx = multiprocessing.get_context("spawn")
    processes: list[Any] = []
    go: GoPlane | None = None
    try:
        plane_conns: list[Connection] = []
        if plane == "grpc-go":
            go = GoPlane(deadline)
            pids, port = [go.process.pid], go.port
        else:
            pids, port = [], 0
            for _ in range(SHARING if plane == SHARED_PORT else 1):
                # The first binds a free port; the others, the same one.
                process, plane_conn = start(
                    ctx, python_plane, (plane, profile, port), f"plane {plane}"
                )
                processes.append(process)
                plane_conns.append(plane_conn)
                ((_, port),) = receive([plane_conn], deadline)
                pids.append(process.pid)
        conns = []
        for index, share in enumerate(shares):
            process, conn = start(
                ctx, agent_process, (index, share, heartbeats, own), f"agents {index}"
            )
            processes.append(process)
            conns.append(conn)
        receive(conns, deadline)
        sockets0 = proc_sockets(pids)
        memory0, cpu0, wall0 = proc_memory(pids), proc_cpu(pids), time.perf_counter()
        for conn in conns:
            conn.send(port)
        receive(conns, deadline)
        memory1, cpu1, wall1 = proc_memory(pids), proc_cpu(pids), time.perf_counter()
        connections = proc_sockets(pids) - sockets0
        for conn in conns:
            conn.send("go")
        agent_stats = [stats for _, stats in receive(conns, deadline)]
        memory2, cpu2, wall2 = proc_memory(pids), proc_cpu(pids), time.perf_counter()
        if go is not None:
            counts = None
            found = go.stop(deadline)
        else:
            for plane_conn in plane_conns:
                plane_conn.send("stop")
            counts = merged([c for _, c in receive(plane_conns, deadline)])
            found = []
            if profile:
                show_profile(processes[0], profile, f"{plane}, {heartbeats} heartbeats each")
    finally:
        end(go, processes)
    times = sorted(t for a in agent_stats for t in a["times"])
    return {
        "plane": plane,
        "agents": sum(shares),
        "heartbeats_each": heartbeats,
        "cpu_exchange_s": cpu1 - cpu0,
        "cpu_rest_s": cpu2 - cpu1,
        "wall_exchange_s": wall1 - wall0,
        "wall_rest_s": wall2 - wall1,
        "rss_before_kib": memory0["VmRSS"],
        "rss_connected_kib": memory1["VmRSS"],
        "peak_rss_kib": memory2["VmHWM"],
        "connections": connections,
        "exchange_median_ms": 1000 * statistics.median(times) if times else None,
        "problems": found + problems(plane, shares, heartbeats, agent_stats, counts),
    }


# --- the rounds and the report ----------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is unknown or b is not above 0 (a run too small to tell)."""
    return None if a is None or b is None or b <= 0 else a / b


def summarise(runs: list[dict[str, Any]], planes: list[str]) -> dict[str, dict[str, Any]]:
    """Per plane, the median over rounds of each figure (and each round's ratio to raw)."""
    by_round: dict[int, dict[tuple[str, int], dict[str, Any]]] = collections.defaultdict(dict)
    for r in runs:
        by_round[r["round"]][r["plane"], r["heartbeats_each"]] = r
    summary: dict[str, dict[str, Any]] = {}
    for plane in planes:
        exchange, rss, beat_cpu, beat_rate = [], [], [], []
        # The rounds each figure of `exchange` and of `beat_cpu` comes from (see `_paired`).
        exchange_rounds, beat_rounds = [], []
        for number, rnd in by_round.items():
            quiet, busy = rnd.get((plane, 0)), rnd.get((plane, max(k[1] for k in rnd)))
            if quiet is None:
                continue
            n = quiet["agents"]
            exchange.append((quiet["cpu_exchange_s"] + quiet["cpu_rest_s"]) * 1000 / n)
            exchange_rounds.append(number)
            rss.append((quiet["peak_rss_kib"] - quiet["rss_before_kib"]) / 1024 * 1000 / n)
            if busy is not None and busy is not quiet:
                beats = n * busy["heartbeats_each"]
                beat_cpu.append((busy["cpu_rest_s"] - quiet["cpu_rest_s"]) / beats)
                beat_rounds.append(number)
                # The phase's wall time less the same phase's without heartbeats
                # (the ends of the streams), as for the CPU.
                beating = busy["wall_rest_s"] - quiet["wall_rest_s"]
                if beating > 0:
                    beat_rate.append(beats / beating)
        if not exchange:
            continue
        summary[plane] = {
            "cpu_s_per_1000_exchanges": statistics.median(exchange),
            "cpu_s_per_1000_exchanges_rounds": exchange,
            "exchange_rounds": exchange_rounds,
            "peak_rss_mib_per_1000_agents": statistics.median(rss),
            "cpu_us_per_heartbeat": 1e6 * statistics.median(beat_cpu) if beat_cpu else None,
            "cpu_us_per_heartbeat_rounds": [1e6 * b for b in beat_cpu],
            "heartbeat_rounds": beat_rounds,
            "heartbeats_per_s": statistics.median(beat_rate) if beat_rate else None,
        }
    raw = summary.get("raw")
    for figures in summary.values():
        if raw is None:
            break
        figures["ratio_to_raw"] = _ratio(
            figures["cpu_s_per_1000_exchanges"], raw["cpu_s_per_1000_exchanges"]
        )
        figures["ratio_to_raw_rounds"] = _paired(figures, raw, "exchange")
        figures["rss_ratio_to_raw"] = _ratio(
            figures["peak_rss_mib_per_1000_agents"], raw["peak_rss_mib_per_1000_agents"]
        )
        figures["heartbeat_ratio_to_raw"] = _ratio(
            figures["cpu_us_per_heartbeat"], raw["cpu_us_per_heartbeat"]
        )
    for figures in summary.values():
        beat = figures["cpu_us_per_heartbeat"]
        if beat is not None and beat > 0:
            # One core's worth of CPU, each agent beating every 10 s.
            figures["agents_per_core_at_10s"] = 10 / (beat / 1e6)
    return summary


# Per exchange or per heartbeat: a plane's figures, one per round, and the rounds they come from.
_PER_ROUND = {
    "exchange": ("cpu_s_per_1000_exchanges_rounds", "exchange_rounds"),
    "heartbeat": ("cpu_us_per_heartbeat_rounds", "heartbeat_rounds"),
}


def _paired(a: dict[str, Any], b: dict[str, Any], per: str) -> list[float]:
    """Plane `a`'s figures over plane `b`'s, per exchange or per heartbeat, in rounds of both."""
    values, rounds = _PER_ROUND[per]
    of_b = dict(zip(b[rounds], b[values], strict=True))
    return [
        x / of_b[number]
        for number, x in zip(a[rounds], a[values], strict=True)
        if of_b.get(number, 0) > 0
    ]


def paired(
    summary: dict[str, dict[str, Any]], plane: str, base: str
) -> dict[str, tuple[float, float, float]]:
    """`plane` over `base`, round by round: per exchange and per heartbeat, (median, min, max).

    Each round's ratio compares two runs of that round, side by side; the
    median of those is steadier on a shared machine than a ratio of medians.
    """
    found: dict[str, tuple[float, float, float]] = {}
    a, b = summary.get(plane), summary.get(base)
    if a is None or b is None:
        return found
    for per in _PER_ROUND:
        ratios = _paired(a, b, per)
        if ratios:
            found[per] = (statistics.median(ratios), min(ratios), max(ratios))
    return found


def decomposition(summary: dict[str, dict[str, Any]]) -> tuple[float, float] | None:
    """The library's ratio to the floor as the codec's part times the sessions' part.

    The codec's: the floor with the codec inline over the floor; the
    sessions': the library's plane over the floor with the codec inline
    (what the stream's sessions, tasks and checks add to the same decoding).
    """
    figures = {plane: summary.get(plane, {}).get("ratio_to_raw") for plane in PLANES}
    library, codec = figures["library"], figures["raw+codec"]
    if library is None or not codec:
        return None
    return codec, library / codec


def print_summary(summary: dict[str, dict[str, Any]], settings: dict[str, Any]) -> None:
    print()
    print(
        f"{settings['agents']} agents ({settings['connections']}), {settings['rounds']} "
        f"interleaved rounds, medians; {settings['heartbeats']} heartbeats per agent in the "
        f"steady state; load average before: {settings['load_average']}"
    )
    width = max(map(len, ["plane", *summary]))
    print(
        f"{'plane':<{width}} {'CPU s/1,000 exch.':>18} {'x raw':>6} {'rounds x raw':>17} "
        f"{'MiB/1,000 agents':>17} {'x raw':>6} {'us/heartbeat':>13} {'x raw':>6} "
        f"{'heartbeats/s':>13} {'agents/core@10s':>16}"
    )

    def opt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    for plane, f in summary.items():
        rounds = f.get("ratio_to_raw_rounds", [])
        spread = f"{min(rounds):.2f}-{max(rounds):.2f}" if rounds else "-"
        print(
            f"{plane:<{width}} {f['cpu_s_per_1000_exchanges']:>18.2f} "
            f"{opt(f.get('ratio_to_raw'), '.2f'):>6} {spread:>17} "
            f"{f['peak_rss_mib_per_1000_agents']:>17.1f} "
            f"{opt(f.get('rss_ratio_to_raw'), '.2f'):>6} "
            f"{opt(f['cpu_us_per_heartbeat'], '.1f'):>13} "
            f"{opt(f.get('heartbeat_ratio_to_raw'), '.2f'):>6} "
            f"{opt(f['heartbeats_per_s'], ',.0f'):>13} "
            f"{opt(f.get('agents_per_core_at_10s'), ',.0f'):>16}"
        )
    print(
        "CPU: the plane process's user + system time; exchange: register, Ack, StartShard, "
        "READY, end of stream.\nMiB: growth of the plane's peak resident set. us/heartbeat: "
        "the steady state's CPU over the same phase without heartbeats.\nheartbeats/s: what "
        "the agents, on the same machine, got through, over the steady state's wall time less "
        "the same phase's without heartbeats; agents/core@10s: 10 s / CPU per heartbeat."
    )


# The planes that tell where the library's cost over raw+codec goes, and what each shows.
EXPLAINING = (
    (READER, "a reader task on asyncio's queue, and nothing else of the sessions"),
    (DIRECT, "the sessions without their reader task: what a timeout that leaves it usable costs"),
    (ID_ONLY, "the sessions with no registration's values built"),
)


def targets(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each of `TARGETS` whose planes ran: the rounds' ratios, and whether it was met."""
    found = []
    for plane, base, per, at_most in TARGETS:
        ratios = paired(summary, plane, base).get(per)
        if ratios is None:
            continue
        median, low, high = ratios
        found.append(
            {
                "plane": plane,
                "over": base,
                "per": per,
                "at_most": at_most,
                "median": median,
                "range": [low, high],
                "met": median <= at_most,
            }
        )
    return found


def print_verdict(summary: dict[str, dict[str, Any]]) -> bool | None:
    """Print each target and whether it was met, and why; whether all were (None: none ran)."""
    met = targets(summary)
    for t in met:
        low, high = t["range"]
        print(
            f"target: {t['plane']} at most {t['at_most']:.2f}x {t['over']} per {t['per']}: "
            f"{t['median']:.2f}x (rounds {low:.2f}-{high:.2f}), "
            f"{'met' if t['met'] else 'MISSED'}"
        )
    for plane, what in EXPLAINING:
        against = paired(summary, plane, "raw+codec")
        if against:
            print(
                f"  {plane} over raw+codec ({what}): "
                + "; ".join(
                    f"per {per} {m:.2f}x ({lo:.2f}-{hi:.2f})"
                    for per, (m, lo, hi) in against.items()
                )
            )
    shared, alone = summary.get(SHARED_PORT, {}), summary.get("library", {})
    rate = _ratio(shared.get("heartbeats_per_s"), alone.get("heartbeats_per_s"))
    if rate is not None:
        print(
            f"{SHARING} processes of the library's plane on one port ({SHARED_PORT}): "
            f"{shared['heartbeats_per_s']:,.0f} heartbeats/s, {rate:.2f}x one process's"
        )
    return all(t["met"] for t in met) if met else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4, help="agent processes")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument(
        "--heartbeats", type=int, default=20, help="per agent in the steady state (0: none)"
    )
    parser.add_argument(
        "--connections",
        choices=("agent", "process"),
        default="agent",
        help="one connection per agent (default), or one per agent process, shared",
    )
    parser.add_argument(
        "--planes",
        default=",".join(PLANES),
        help="comma-separated, of " + ", ".join(PLANES) + " (grpc-go when built)",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds for each run")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 unless every target (TARGETS) that ran was met",
    )
    parser.add_argument("--json", metavar="FILE", help="also write every run and the medians")
    parser.add_argument(
        "--profile",
        metavar="FILE",
        default="",
        help="profile each Python plane into FILE and show the top (slows it down)",
    )
    args = parser.parse_args(argv)
    planes = [p for p in args.planes.split(",") if p]
    unknown = set(planes) - set(PLANES)
    if unknown:
        parser.error(f"--planes: unknown {sorted(unknown)}; expected some of {PLANES}")
    if "grpc-go" in planes and not GO_PLANE.exists():
        print(f"grpc-go: not built ({GO_PLANE}); `make interop-go-build` builds it")
        planes.remove("grpc-go")
    base, extra = divmod(args.agents, args.processes)
    shares = [base + (i < extra) for i in range(args.processes)]
    own = args.connections == "agent"
    kinds = sorted({0, args.heartbeats})
    settings = {
        "agents": args.agents,
        "processes": args.processes,
        "rounds": args.rounds,
        "heartbeats": args.heartbeats,
        "connections": "one connection per agent" if own else "one connection per process",
        "planes": planes,
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "grpc": grpc.__version__,
        "command": " ".join(["python", "bench/load.py", *(argv or sys.argv[1:])]),
    }
    runs = []
    failed = False
    for rnd in range(args.rounds):
        shift = rnd % len(planes)
        for plane in planes[shift:] + planes[:shift]:
            for heartbeats in kinds:
                try:
                    outcome = run(plane, shares, heartbeats, own, args.timeout, args.profile)
                except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"error ({plane}): {exc} (timeout {args.timeout:g} s)", file=sys.stderr)
                    return 1
                outcome["round"] = rnd
                runs.append(outcome)
                n = outcome["agents"]
                print(
                    f"round {rnd + 1} {plane:<10} heartbeats {heartbeats:>3}: CPU "
                    f"{outcome['cpu_exchange_s']:.2f} + {outcome['cpu_rest_s']:.2f} s, wall "
                    f"{outcome['wall_exchange_s']:.2f} + {outcome['wall_rest_s']:.2f} s, "
                    f"{outcome['connections']} connections, peak RSS "
                    f"+{(outcome['peak_rss_kib'] - outcome['rss_before_kib']) / 1024:.1f} MiB "
                    f"for {n} agents",
                    flush=True,
                )
                if outcome["problems"]:
                    failed = True
                    print(f"FAILED ({plane}):", *outcome["problems"], sep="\n  ", file=sys.stderr)
    summary = summarise(runs, planes)
    print_summary(summary, settings)
    verdict = print_verdict(summary)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "settings": settings,
                    "runs": runs,
                    "summary": summary,
                    "target_met": verdict,
                    "targets": targets(summary),
                    "codec_and_sessions": decomposition(summary),
                },
                indent=1,
            )
            + "\n"
        )
    if failed:
        return 1
    if args.check and verdict is not True:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
