"""The load run (`make load`): one control plane and 1,000 agents speaking the stream on loopback.

The control plane runs in a process of its own; the agents are spread over a
few more processes, each running its share as concurrent asyncio clients,
each with a connection of its own. Every agent registers a copy of the sample
node under a node id of its own, waits for the control plane's `Ack` and its
`StartShard`, reports the new shard READY and ends its stream.

The same run is made twice, once per transport: grpc.aio (the stream's own,
`llmgw_wire.stream`) and grpclib (the same sessions over grpclib, with a
codec that passes the envelopes' bytes through), so that the figures stand
side by side. The sessions, and so the encoding and decoding, are the same
code on both.

The control plane counts registrations and READY reports per node id; each
agent process counts the acks and commands it received. The run fails (exit
status 1) if any registration was not adopted exactly once, any command not
answered, anything lost or duplicated, or the whole takes longer than
`--timeout`. It reports the wall time (from the moment every agent process
is ready to the last agent done), the registrations per second, the time of
one agent's exchange, the control plane's CPU seconds (user + system, from
`getrusage`) and its peak memory (`ru_maxrss`), also per 1,000 agents.

    python bench/load.py [--agents 1000] [--processes 4] [--timeout 300]
                         [--transport grpc.aio|grpclib|both]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import multiprocessing
import resource
import statistics
import sys
import time
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

import attrs
import grpclib.client
import grpclib.const
import grpclib.server
from grpclib.encoding.base import CodecBase

from llmgw_wire import Ack, Registration, ShardCommand, ShardReport, State
from llmgw_wire.domain import Compute
from llmgw_wire.stream import (
    CONNECT_ROUTE,
    AgentSession,
    ControlPlane,
    ControlSession,
    connect,
    start_server,
)
from llmgw_wire.testing.sample import sample_command, sample_registration

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from multiprocessing.connection import Connection

HOST = "127.0.0.1"
# Seconds one agent may wait for any one message before it counts as lost.
STEP_TIMEOUT = 120.0


def node_id(process: int, agent: int) -> str:
    return f"load-{process}-{agent:04d}"


def command_for(node: str) -> ShardCommand:
    """The sample command, for a shard id of the node's own."""
    command = sample_command()
    shard_id = f"{node}-new"
    return attrs.evolve(command, spec=attrs.evolve(command.spec, shard_id=shard_id))


def registration_for(node: str) -> Registration:
    """The sample registration, as node `node`."""
    sample = sample_registration()
    return Registration(
        attrs.evolve(sample.node, id=node),
        tuple(attrs.evolve(shard, node_id=node) for shard in sample.shards),
    )


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


TRANSPORTS = ("grpc.aio", "grpclib")


# --- the same sessions over grpclib -------------------------------------------------


class RawCodec(CodecBase):
    """grpclib's codec for bytes that the sessions encode and decode themselves."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return message  # type: ignore[no-any-return]

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


class GrpclibServerCall:
    def __init__(self, stream: grpclib.server.Stream[bytes, bytes]) -> None:
        self._stream = stream

    async def read(self) -> bytes | None:
        return await self._stream.recv_message()

    async def write(self, data: bytes) -> None:
        await self._stream.send_message(data)


class GrpclibClientCall:
    def __init__(self, stream: grpclib.client.Stream[bytes, bytes]) -> None:
        self._stream = stream
        self._done = False

    async def read(self) -> bytes | None:
        data = await self._stream.recv_message()
        if data is None:
            await self._stream.recv_trailing_metadata()
            self._done = True
        return data

    async def write(self, data: bytes) -> None:
        await self._stream.send_message(data)

    async def done_writing(self) -> None:
        await self._stream.end()

    def cancel(self) -> None:
        self._done = True

    def done(self) -> bool:
        return self._done


class GrpclibService:
    """`AgentService.Connect` on grpclib, handing each call to the plane as a session."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        return {
            CONNECT_ROUTE: grpclib.const.Handler(
                self._connect, grpclib.const.Cardinality.STREAM_STREAM, bytes, bytes
            )
        }

    async def _connect(self, stream: grpclib.server.Stream[bytes, bytes]) -> None:
        session = ControlSession(GrpclibServerCall(stream), "agent")
        await self.plane.handle(session)
        await session._stop_reading()


# --- the control plane ------------------------------------------------------------


class CountingControlPlane(ControlPlane):
    def __init__(self) -> None:
        self.registrations: collections.Counter[str] = collections.Counter()
        self.adopted = 0
        self.ready: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []

    async def handle(self, session: ControlSession) -> None:
        try:
            registration = await session.recv(STEP_TIMEOUT)
            if not isinstance(registration, Registration):
                raise ValueError(f"expected a registration, got {registration!r}")
            node = registration.node.id
            self.registrations[node] += 1
            self.adopted += len(registration.shards)
            await session.send(Ack(node, len(registration.shards), "adopted"))
            command = command_for(node)
            await session.send(command)
            report = await session.recv(STEP_TIMEOUT)
            if not (
                isinstance(report, ShardReport)
                and report.shard_id == command.shard_id
                and report.state is State.READY
            ):
                raise ValueError(f"expected {command.shard_id} READY, got {report!r}")
            self.ready[node] += 1
            end = await session.recv(STEP_TIMEOUT)
            if end is not None:
                raise ValueError(f"expected the end of the stream, got {end!r}")
        except Exception as exc:
            self.errors.append(f"{session}: {type(exc).__name__}: {exc}")


async def serve(conn: Connection, transport: str) -> None:
    # One socket per agent, and then some.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    plane = CountingControlPlane()
    if transport == "grpc.aio":
        server = await start_server(plane, HOST, 0)
        port = server.port
    else:
        grpclib_server = grpclib.server.Server([GrpclibService(plane)], codec=RawCodec())
        await grpclib_server.start(HOST, 0, backlog=4096)
        listening: Any = grpclib_server._server
        port = listening.sockets[0].getsockname()[1]
    # The CPU the exchanges cost, start-up and imports left out.
    cpu_started = cpu_seconds()
    conn.send(("listening", port, peak_rss_mib()))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_reader(conn.fileno(), stop.set)
    await stop.wait()
    loop.remove_reader(conn.fileno())
    conn.recv()
    cpu = cpu_seconds() - cpu_started
    if transport == "grpc.aio":
        await server.stop(grace=None)
    else:
        grpclib_server.close()
        await grpclib_server.wait_closed()
    conn.send(
        (
            "counts",
            dict(plane.registrations),
            plane.adopted,
            dict(plane.ready),
            plane.errors,
            peak_rss_mib(),
            cpu,
        )
    )


def control_plane_process(conn: Connection, transport: str, profile: str = "") -> None:
    if not profile:
        asyncio.run(serve(conn, transport))
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        asyncio.run(serve(conn, transport))
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


# --- the agents -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def session_to(port: int, transport: str) -> AsyncIterator[AgentSession]:
    if transport == "grpc.aio":
        async with connect(f"{HOST}:{port}") as session:
            yield session
        return
    channel = grpclib.client.Channel(HOST, port, codec=RawCodec())
    try:
        stream = channel.request(
            CONNECT_ROUTE, grpclib.const.Cardinality.STREAM_STREAM, bytes, bytes
        )
        async with stream:
            await stream.send_request()
            session = AgentSession(GrpclibClientCall(stream), "control plane")
            try:
                yield session
            finally:
                await session._stop_reading()
    finally:
        channel.close()


async def one_agent(port: int, node: str, stats: dict[str, Any], transport: str) -> None:
    started = time.perf_counter()
    registration = registration_for(node)
    expected = command_for(node)
    try:
        async with session_to(port, transport) as session:
            await session.send(registration)
            ack = await session.recv(STEP_TIMEOUT)
            if ack != Ack(node, len(registration.shards), "adopted"):
                raise ValueError(f"expected the Ack for {node}, got {ack!r}")
            stats["acks"] += 1
            command = await session.recv(STEP_TIMEOUT)
            if command != expected:
                raise ValueError(f"expected the command for {node}, got {command!r}")
            stats["commands"] += 1
            compute = Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40)
            await session.send(
                ShardReport(expected.replica_id, expected.shard_id, State.READY, compute=compute)
            )
            await session.close()
            end = await session.recv(STEP_TIMEOUT)
            if end is not None:
                raise ValueError(f"expected the end of the call, got {end!r}")
            stats["done"] += 1
            stats["times"].append(time.perf_counter() - started)
    except Exception as exc:
        stats["errors"].append(f"{node}: {type(exc).__name__}: {exc}")


async def agents(conn: Connection, index: int, count: int, transport: str) -> None:
    port: int = conn.recv()
    stats: dict[str, Any] = {"acks": 0, "commands": 0, "done": 0, "times": [], "errors": []}
    await asyncio.gather(
        *(one_agent(port, node_id(index, i), stats, transport) for i in range(count))
    )
    conn.send(stats)


def agent_process(conn: Connection, index: int, count: int, transport: str) -> None:
    # Imports done and ready to go: the clock starts when every process is.
    conn.send("ready")
    asyncio.run(agents(conn, index, count, transport))


# --- the run ----------------------------------------------------------------------


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


@attrs.frozen
class Outcome:
    """What a run measured and counted."""

    shares: list[int]
    wall: float
    results: list[dict[str, Any]]
    registrations: dict[str, int]
    adopted: int
    ready: dict[str, int]
    plane_errors: list[str]
    rss_before: float
    rss_peak: float
    cpu: float
    transport: str


def start(ctx: Any, target: Any, args: tuple[Any, ...], name: str) -> tuple[Any, Connection]:
    conn, child = ctx.Pipe()
    process = ctx.Process(target=target, args=(child, *args), name=name, daemon=True)
    process.start()
    return process, conn


def run(
    agents: int,
    shares: list[int],
    deadline: float,
    processes: list[Any],
    transport: str,
    profile: str = "",
) -> Outcome:
    """Start the processes (into `processes`, for the caller to stop) and run the exchange."""
    # Spawned, never forked: a forked child of a process with live grpc objects can hang.
    ctx = multiprocessing.get_context("spawn")
    plane, plane_conn = start(ctx, control_plane_process, (transport, profile), "control plane")
    processes.append(plane)
    ((_, port, rss_before),) = receive([plane_conn], deadline)
    conns = []
    for index, share in enumerate(shares):
        process, conn = start(ctx, agent_process, (index, share, transport), f"agents {index}")
        processes.append(process)
        conns.append(conn)
    receive(conns, deadline)
    print(
        f"load ({transport}): {agents} agents in {len(shares)} processes "
        f"({', '.join(map(str, shares))}), control plane on {HOST}:{port}"
    )
    started = time.perf_counter()
    for conn in conns:
        conn.send(port)
    results = receive(conns, deadline)
    wall = time.perf_counter() - started
    plane_conn.send("stop")
    ((_, registrations, adopted, ready, errors, rss_peak, cpu),) = receive([plane_conn], deadline)
    if profile:
        plane.join(60)  # let it write its profile
        import pstats

        print(f"--- the control plane's profile ({transport}), by own time ---")
        pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(14)
    return Outcome(
        shares,
        wall,
        results,
        registrations,
        adopted,
        ready,
        errors,
        rss_before,
        rss_peak,
        cpu,
        transport,
    )


def problems(outcome: Outcome) -> list[str]:
    """Everything lost, duplicated or failed; empty when the run is clean."""
    expected = {node_id(p, i) for p, share in enumerate(outcome.shares) for i in range(share)}
    registered = set(outcome.registrations)
    found = []
    if registered != expected:
        found.append(
            f"registrations: {len(expected - registered)} missing, "
            f"{len(registered - expected)} unexpected"
        )
    duplicated = sorted(n for n, c in outcome.registrations.items() if c != 1)
    if duplicated:
        found.append(f"registrations seen more than once: {duplicated[:5]}")
    if outcome.adopted != 2 * len(expected):
        found.append(f"adopted {outcome.adopted} running shards, expected {2 * len(expected)}")
    if set(outcome.ready) != expected or any(c != 1 for c in outcome.ready.values()):
        found.append(f"READY reports from {len(outcome.ready)} nodes, expected {len(expected)}")
    for name in ("acks", "commands", "done"):
        count = sum(r[name] for r in outcome.results)
        if count != len(expected):
            found.append(f"{name}: {count}, expected {len(expected)}")
    errors = [e for r in outcome.results for e in r["errors"]] + outcome.plane_errors
    return found + errors[:10]


def report(outcome: Outcome) -> None:
    done = sum(r["done"] for r in outcome.results)
    print(
        f"registered, adopted, commanded and READY: {done}/{sum(outcome.shares)} agents "
        f"in {outcome.wall:.2f} s"
    )
    print(
        f"throughput: {len(outcome.registrations) / outcome.wall:.0f} registrations/s, "
        "each with its Ack, StartShard and READY"
    )
    times = sorted(t for r in outcome.results for t in r["times"])
    if times:
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
        print(
            "one agent's exchange, connect to end of call: "
            f"median {statistics.median(times) * 1000:.0f} ms, "
            f"99th percentile {p99 * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms"
        )
    per_1000 = 1000 / max(sum(outcome.shares), 1)
    print(
        f"control plane CPU: {outcome.cpu:.2f} s, {outcome.cpu * per_1000:.2f} s per 1,000 agents"
    )
    print(
        f"control plane peak memory (ru_maxrss): {outcome.rss_peak:.1f} MiB "
        f"({outcome.rss_before:.1f} MiB before the agents; "
        f"{(outcome.rss_peak - outcome.rss_before) * per_1000:.1f} MiB more per 1,000 agents)"
    )


def side_by_side(outcomes: list[Outcome]) -> None:
    print("")
    print(
        f"{'transport':<10} {'registrations/s':>16} {'CPU s/1,000':>12} {'peak MiB':>9} "
        f"{'MiB/1,000':>10}"
    )
    for o in outcomes:
        per_1000 = 1000 / max(sum(o.shares), 1)
        print(
            f"{o.transport:<10} {len(o.registrations) / o.wall:>16.0f} "
            f"{o.cpu * per_1000:>12.2f} {o.rss_peak:>9.1f} "
            f"{(o.rss_peak - o.rss_before) * per_1000:>10.1f}"
        )
    # The figure for a grpc-go control plane on this kind of machine.
    go = (0.6, 0.74)
    for o in outcomes:
        per_1000 = o.cpu * 1000 / max(sum(o.shares), 1)
        print(
            f"{o.transport}: {per_1000 / go[1]:.1f}x to {per_1000 / go[0]:.1f}x the CPU of a "
            f"grpc-go control plane ({go[0]}-{go[1]} s per 1,000)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4, help="agent processes")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for each run")
    parser.add_argument(
        "--transport", choices=(*TRANSPORTS, "both"), default="both", help="default: both"
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        default="",
        help="profile the control plane into FILE and show the top (slows it down)",
    )
    args = parser.parse_args(argv)
    base, extra = divmod(args.agents, args.processes)
    shares = [base + (i < extra) for i in range(args.processes)]
    transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    outcomes = []
    failed = False
    for transport in transports:
        deadline = time.monotonic() + args.timeout
        processes: list[Any] = []
        try:
            outcome = run(args.agents, shares, deadline, processes, transport, args.profile)
        except (TimeoutError, RuntimeError) as exc:
            print(f"error ({transport}): {exc} (timeout {args.timeout:g} s)", file=sys.stderr)
            return 1
        finally:
            for process in processes:
                if process.is_alive():
                    process.terminate()
                process.join(5)
                if process.is_alive():
                    process.kill()
                    process.join()
        report(outcome)
        found = problems(outcome)
        if found:
            print(f"FAILED ({transport}):", *found, sep="\n  ", file=sys.stderr)
            failed = True
        else:
            print("every registration adopted exactly once, every command answered, nothing lost")
        print("")
        outcomes.append(outcome)
    side_by_side(outcomes)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
