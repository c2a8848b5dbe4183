"""The fleet failover run (`make failover`): a control plane lost under N agents, and its standby.

N agents (`keep_connected` to two addresses, A then B, each keeping its
shards in a `ShardStore` of its own), spread over a few processes, register
with control plane A, which starts one shard on each; the agents save the
shard with its compute placement and report it READY. Then standby B starts,
and A ends: killed (SIGKILL), or, in a second run, stopped gracefully
(SIGTERM, `server.stop`). Every agent moves on to B and registers there with
the shard it runs, which B adopts.

For each B (the library's control plane, and grpc-go's from interop/go when
`make interop-go-build` has built it) and each way A ends, side by side:

- the time from A's end to the last agent registered and adopted on B (its
  Ack from B adopting its one shard), in seconds and as a multiple of the
  agents' `Backoff.maximum`;
- registrations lost (agents never registered on B) and duplicated (an
  agent registered on B more than once);
- shards whose compute was lost (a registration on B whose shard has no
  compute placement, or another one than the agent saved);
- B's CPU time (user + system, from /proc) from A's end to the last adoption.

Every process stamps its lines with the system's monotonic clock, which all
processes share. The run fails (exit status 1) if anything was lost or
duplicated. Only the figures of one run, side by side, mean anything on a
shared machine.

    python bench/failover.py [--agents 1000] [--processes 4] [--initial 1] [--maximum 5]
                             [--how kill,graceful] [--planes library,grpc-go]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
GO_PLANE = ROOT / "build" / "interop" / "bin" / "controlplane"
PLANES = ("library", "grpc-go")
HOWS = ("kill", "graceful")
# Seconds a graceful stop of A waits for its calls' ends to reach the agents.
GRACE = 10.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def say(*words: object) -> None:
    print(*words, flush=True)


def node_id(index: int) -> str:
    return f"fo-{index:05d}"


# --- the roles, each in a process of its own ------------------------------------------


def plane_role(port: int) -> None:
    """The library's control plane: adopts what each agent runs, starts a shard on an empty node."""
    from llmgw_wire import Ack, Registration, ShardReport, State
    from llmgw_wire.stream import ControlPlane, ControlSession, start_server
    from llmgw_wire.testing.sample import sample_command

    command = sample_command()

    class Adopting(ControlPlane):
        async def handle(self, session: ControlSession) -> None:
            async for value in session:
                if isinstance(value, Registration):
                    node = value.node.id
                    placed = sum(
                        shard.compute is not None and shard.compute.devices == PLACED
                        for shard in value.shards
                    )
                    say("REGISTERED", time.monotonic(), node, len(value.shards), placed)
                    await session.send(Ack(node, len(value.shards), "adopted"))
                    if not value.shards:
                        spec = attrs.evolve(command.spec, shard_id=f"{node}-s0")
                        await session.send(attrs.evolve(command, spec=spec))
                elif isinstance(value, ShardReport) and value.state is State.READY:
                    say("READY", time.monotonic(), session.node_id)

    async def main() -> None:
        server = await start_server(Adopting(), host=HOST, port=port)
        say("LISTENING", server.port)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        say("STOPPING", time.monotonic())
        await server.stop(grace=GRACE)
        say("STOPPED", time.monotonic())

    asyncio.run(main())


# The devices the engine reports once it has loaded the model.
PLACED = ("cuda:4", "cuda:5", "cuda:6")


def agents_role(first: int, count: int, targets: str, directory: str, pace: str) -> None:
    """`count` agents, each `keep_connected` to `targets` with a shard store of its own."""
    from llmgw_wire import Ack, Compute, Registration, ShardCommand, ShardReport, State
    from llmgw_wire.store import SavedShard, ShardStore
    from llmgw_wire.stream import AgentSession, Backoff, keep_connected, registration_from_inventory
    from llmgw_wire.testing.sample import sample_inventory, sample_node

    # A directory descriptor per store and a connection per agent.
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    placement = Compute("cuda", PLACED, 40, 40)
    initial, maximum = (float(seconds) for seconds in pace.split(","))
    node, inventory = sample_node(), sample_inventory()

    async def one(index: int) -> None:
        name = node_id(index)
        store = ShardStore(Path(directory) / name)

        def registration() -> Registration:
            shards = store.load_all().shards
            return registration_from_inventory(
                name,
                node.hostname,
                node.mgmt_addr,
                node.agent_version,
                inventory,
                running=[(s.spec, s.state) for s in shards],
                cpu_count=node.cpu_count,
            )

        async def serve(session: AgentSession) -> None:
            port = session.peer.rpartition(":")[2]
            async for value in session:
                if isinstance(value, Ack):
                    say("ACK", time.monotonic(), name, port, value.adopted_shards)
                elif isinstance(value, ShardCommand) and not store.load_all().shards:
                    spec = attrs.evolve(value.spec, compute=placement)
                    store.save(SavedShard(spec, State.READY))
                    await session.send(
                        ShardReport(spec.replica_id, spec.shard_id, State.READY, compute=placement)
                    )

        await keep_connected(
            targets.split(","), registration, serve, backoff=Backoff(initial, maximum)
        )

    async def main() -> None:
        await asyncio.gather(*(one(first + i) for i in range(count)))

    asyncio.run(main())


# --- the run ------------------------------------------------------------------------


class Process:
    """A child process and its stdout lines, read as they come by a thread of its own."""

    def __init__(self, args: list[str], on_line: Callable[[list[str]], None]) -> None:
        env = {**os.environ, "GRPC_VERBOSITY": "NONE", "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self._on_line = on_line
        self.listening = threading.Event()
        self.port = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            words = line.split()
            if words[:1] == ["LISTENING"]:
                self.port = int(words[1])
                self.listening.set()
            elif words:
                self._on_line(words)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime

    def wait_listening(self, timeout: float) -> int:
        if not self.listening.wait(timeout):
            raise TimeoutError(f"process {self.process.pid} did not listen within {timeout:g} s")
        return self.port

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        self._reader.join(5)


def role(*args: object) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--role", *map(str, args)]


@attrs.define
class Tally:
    """What the lines of one run said, under a lock: the processes' threads write it."""

    lock: threading.Lock = attrs.field(factory=threading.Lock)
    ready_on_a: set[str] = attrs.field(factory=set)
    adopted_on_b: dict[str, float] = attrs.field(factory=dict)
    registered_on_b: dict[str, int] = attrs.field(factory=dict)
    compute_lost: set[str] = attrs.field(factory=set)
    a_port: str = ""
    b_port: str = ""
    changed: threading.Condition = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def on_a(self, words: list[str]) -> None:
        if words[0] == "READY":
            with self.lock:
                self.ready_on_a.add(words[2])
                self.changed.notify_all()

    def on_b(self, words: list[str]) -> None:
        if words[0] == "REGISTERED":
            _, _, node, shards, placed = words
            self._registered(node, int(shards) == 1 and int(placed) == 1)

    def on_go(self, words: list[str]) -> None:
        # grpc-go's plane prints each AgentMessage it receives as protojson.
        if words[0] != "RECV":
            return
        register = json.loads(" ".join(words[1:])).get("register")
        if register is None:
            return
        shards = register.get("running_shards", [])  # proto names: UseProtoNames
        devices = [tuple(s.get("compute", {}).get("devices", ())) for s in shards]
        self._registered(register["node_id"], devices == [PLACED])

    def _registered(self, node: str, compute_kept: bool) -> None:
        with self.lock:
            self.registered_on_b[node] = self.registered_on_b.get(node, 0) + 1
            if not compute_kept:
                self.compute_lost.add(node)

    def on_agent(self, words: list[str]) -> None:
        if words[0] == "ACK":
            _, at, node, port, adopted = words
            if port == self.b_port and adopted == "1":
                with self.lock:
                    self.adopted_on_b.setdefault(node, float(at))
                    self.changed.notify_all()

    def wait(self, done: Callable[[], bool], timeout: float) -> bool:
        with self.lock:
            return self.changed.wait_for(done, timeout)


@attrs.frozen
class Outcome:
    plane: str
    how: str
    agents: int
    last_adopted_s: float | None
    lost: int
    duplicated: int
    compute_lost: int
    b_cpu_s: float


def run(plane: str, how: str, args: argparse.Namespace) -> Outcome:
    tally = Tally()
    processes: list[Process] = []
    try:
        with tempfile.TemporaryDirectory(prefix="failover-") as directory:
            a = Process(role("plane", 0), tally.on_a)
            processes.append(a)
            tally.a_port = str(a.wait_listening(args.timeout))
            # B's port is fixed before the agents start: a free one, bound by B later.
            b_port = free_port()
            tally.b_port = str(b_port)
            targets = f"{HOST}:{tally.a_port},{HOST}:{b_port}"
            pace = f"{args.initial},{args.maximum}"
            share = -(-args.agents // args.processes)
            for first in range(0, args.agents, share):
                count = min(share, args.agents - first)
                processes.append(
                    Process(role("agents", first, count, targets, directory, pace), tally.on_agent)
                )
            if not tally.wait(lambda: len(tally.ready_on_a) == args.agents, args.timeout):
                raise TimeoutError(f"only {len(tally.ready_on_a)} agents ready on A")
            b = start_b_on(plane, tally, b_port)
            processes.append(b)
            b.wait_listening(args.timeout)
            cpu_before = b.cpu_seconds()
            ended = time.monotonic()
            a.process.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
            all_in = tally.wait(lambda: len(tally.adopted_on_b) == args.agents, args.timeout)
            cpu = b.cpu_seconds() - cpu_before
            # A little longer, for a registration that comes twice.
            time.sleep(2 * args.maximum)
            with tally.lock:
                last = max(tally.adopted_on_b.values()) - ended if all_in else None
                return Outcome(
                    plane,
                    how,
                    args.agents,
                    last,
                    lost=args.agents - len(tally.registered_on_b),
                    duplicated=sum(n - 1 for n in tally.registered_on_b.values()),
                    compute_lost=len(tally.compute_lost),
                    b_cpu_s=cpu,
                )
    finally:
        for process in reversed(processes):
            process.end()


def start_b_on(plane: str, tally: Tally, port: int) -> Process:
    if plane == "grpc-go":
        listen = f"{HOST}:{port}"
        return Process([str(GO_PLANE), "--scenario", "serve", "--listen", listen], tally.on_go)
    return Process(role("plane", port), tally.on_b)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def report(outcomes: list[Outcome], maximum: float) -> str:
    def cell(value: object) -> str:
        return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)

    rows: list[tuple[str, Callable[[Outcome], object]]] = [
        ("agents", lambda o: o.agents),
        ("A's end to the last adopted on B (s)", lambda o: o.last_adopted_s),
        (
            f"  as a multiple of Backoff.maximum ({maximum:g} s)",
            lambda o: None if o.last_adopted_s is None else o.last_adopted_s / maximum,
        ),
        ("registrations lost", lambda o: o.lost),
        ("registrations duplicated", lambda o: o.duplicated),
        ("shards whose compute was lost", lambda o: o.compute_lost),
        ("B's CPU for the storm (s)", lambda o: o.b_cpu_s),
    ]
    heads = [f"{o.plane} B, A {o.how}" for o in outcomes]
    width = max(len(label) for label, _ in rows)
    columns = [max(len(head), 8) for head in heads]
    lines = ["  ".join([" " * width, *(h.rjust(w) for h, w in zip(heads, columns, strict=True))])]
    for label, value in rows:
        cells = [cell(value(o)).rjust(w) for o, w in zip(outcomes, columns, strict=True)]
        lines.append("  ".join([label.ljust(width), *cells]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4, help="agent processes")
    parser.add_argument("--initial", type=float, default=1.0, help="Backoff.initial (s)")
    parser.add_argument("--maximum", type=float, default=5.0, help="Backoff.maximum (s)")
    parser.add_argument("--how", default=",".join(HOWS), help="how A ends: kill, graceful")
    parser.add_argument("--planes", default=",".join(PLANES), help="B: library, grpc-go")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for each phase")
    parser.add_argument("--json", metavar="FILE", help="also write the outcomes")
    parser.add_argument("--role", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        name, *rest = args.role
        if name == "plane":
            plane_role(int(rest[0]))
        else:
            agents_role(int(rest[0]), int(rest[1]), *rest[2:])
        return 0
    planes = [p for p in args.planes.split(",") if p]
    if "grpc-go" in planes and not GO_PLANE.exists():
        print(f"grpc-go: not built ({GO_PLANE}); `make interop-go-build` builds it")
        planes.remove("grpc-go")
    outcomes = [run(plane, how, args) for plane in planes for how in args.how.split(",")]
    print(report(outcomes, args.maximum))
    if args.json:
        Path(args.json).write_text(json.dumps([attrs.asdict(o) for o in outcomes], indent=2))
    failed = [o for o in outcomes if o.lost or o.duplicated or o.compute_lost]
    failed += [o for o in outcomes if o.last_adopted_s is None]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
