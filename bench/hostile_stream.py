"""Hostile clients against a control plane in a process of its own, on loopback.

The control plane (`start_server` with its defaults; an echo plane: an Ack
for each registration and heartbeat) runs in a fresh process per scenario,
so that its peak resident set is that scenario's alone. While one hostile
client runs for `--seconds`, a well-behaved agent measures its own round
trip (a heartbeat, then its Ack) over and over; the idle scenario is the
same agent with no attacker. Per scenario: the server's peak RSS growth over
its size before the attack, the agent's median round trip and its ratio to
the idle one (same run), open descriptors of the server at the end, and what
the attacker got.

* `idle`: nobody attacks (the baseline).
* `big messages`: one connection, 8 calls writing 4 MiB registrations (9,000
  GPUs with long names) as fast as the server takes them.
* `gzip bombs`: 4 calls that never register, each writing gzip that inflates
  to 4 MiB of unknown fields (about 0.1 s of decoding each).
* `many calls`: one connection opening up to 5,000 calls that never register,
  held open.
* `idle connections`: 100 connections that open no call.
* `registered flood`: 3 connections x 16 calls, each registering, then
  writing gzip worst-case registrations (131,072 empty GPUs padded to 4 MiB:
  about 4 kB on the wire each) as fast as the server takes them.
* `slow handle`: the plane's `handle` sleeps 1 s per value (its Ack sent
  first); one connection, 2 calls writing gzip worst-case registrations.
* `waiting calls`: 17 connections x 16 calls that never register, reopened
  as they end; the agent connects from another address (127.0.0.2, through a
  loopback relay).
* `health watches`: 20 connections x 16 `Health/Watch` calls of an unknown
  service, held open.
* `log flood`: calls 32 at a time, each registering, then sending 16
  distinct unknown members and one malformed message.

Besides the round trips, the agent registers a real 2,048-GPU node (459 kB)
once the attack has built up, with the default 30 s deadline, and says how
long its Ack took (or why it failed); the plane logs at INFO to its stderr,
and the lines it wrote during the scenario are counted.

`--source DIR` runs the control plane from another checkout of the library
(say, the previous release, for a before/after table in one run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["SCENARIOS", "Result", "main", "run_scenario"]

ROOT = Path(__file__).resolve().parent.parent

SCENARIOS = (
    "idle",
    "big messages",
    "gzip bombs",
    "many calls",
    "idle connections",
    "registered flood",
    "slow handle",
    "waiting calls",
    "health watches",
    "log flood",
)

_PLANE = """
import asyncio, logging, sys
from llmgw_wire import Ack, Heartbeat, Registration
from llmgw_wire.stream import ControlPlane, start_server

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
SLOW = sys.argv[1] == "slow handle"

class Echo(ControlPlane):
    async def handle(self, session):
        async for value in session:
            if isinstance(value, Registration):
                await session.send(Ack(value.node.id))
            elif isinstance(value, Heartbeat):
                await session.send(Ack(value.node_id))
            if SLOW and isinstance(value, Registration) and value.node.id == "h":
                await asyncio.sleep(1.0)  # a database write per value, say

async def main():
    server = await start_server(Echo())
    print(server.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(grace=None)

asyncio.run(main())
"""

_ATTACK = """
import asyncio, gzip, sys, time
import grpc, grpc.aio
sys.path.insert(0, {tests!r})
from tests.support import ld, vi
from llmgw_wire.v1 import AgentMessage, Gpu, Register

TARGET, SCENARIO, SECONDS = sys.argv[1], sys.argv[2], float(sys.argv[3])
ROUTE = "/llmgw.v1.AgentService/Connect"
got = {{"sent": 0, "refused": 0, "open": 0}}
# A connection of its own per channel (grpc shares one between channels to a target).
OWN = [("grpc.use_local_subchannel_pool", 1)]

async def writer(channel, message, compression=None):
    call = channel.stream_stream(ROUTE)(compression=compression)
    try:
        while True:
            await call.write(message)
            got["sent"] += 1
    except Exception:
        got["refused"] += 1

def worst():
    # 131,072 empty GPUs, padded to 4 MiB with the hostname: the worst the defaults accept.
    gpus = [Gpu() for _ in range(131072)]
    size = len(bytes(AgentMessage(register=Register(node_id="h", gpus=gpus))))
    pad = 4 * 1024 * 1024 - 64 - size
    return bytes(AgentMessage(register=Register(node_id="h", hostname="x" * pad, gpus=gpus)))

async def registered_writer(channel, number, message):
    call = channel.stream_stream(ROUTE)(compression=grpc.Compression.Gzip)
    try:
        await call.write(bytes(AgentMessage(register=Register(node_id="h"))))
        while True:
            await call.write(message)
            got["sent"] += 1
    except Exception:
        got["refused"] += 1

async def silent(channel):
    while True:
        call = channel.stream_stream(ROUTE)()
        got["open"] += 1
        await call.code()
        got["open"] -= 1
        got["refused"] += 1

async def watch(channel):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    stub = health_pb2_grpc.HealthStub(channel)
    call = stub.Watch(health_pb2.HealthCheckRequest(service="no.such.Service"))
    try:
        await call.read()
        got["open"] += 1
        await call.code()
        got["open"] -= 1
    except Exception:
        pass
    got["refused"] += (await call.code()) == grpc.StatusCode.RESOURCE_EXHAUSTED

async def noisy(channel, number):
    call = channel.stream_stream(ROUTE)()
    try:
        await call.write(bytes(AgentMessage(register=Register(node_id=f"n{{number}}"))))
        for field in range(100, 116):
            await call.write(ld(field, vi(1, 1)))
        await call.write(bytes([10, 5, 1]))  # malformed
        await call.done_writing()
        async for _ in call:  # the Ack: the status comes after what was sent is read
            pass
        got["sent"] += 1
    except Exception:
        got["refused"] += 1

async def main():
    end = time.monotonic() + SECONDS
    tasks, channels = [], []
    if SCENARIO in ("registered flood", "slow handle"):
        message = worst()
        shape = (3, 16) if SCENARIO == "registered flood" else (1, 2)
        for _ in range(shape[0]):
            channel = grpc.aio.insecure_channel(TARGET, options=OWN)
            channels.append(channel)
            writers = [registered_writer(channel, n, message) for n in range(shape[1])]
            tasks += [asyncio.ensure_future(w) for w in writers]
    elif SCENARIO == "waiting calls":
        for _ in range(17):
            channel = grpc.aio.insecure_channel(TARGET, options=OWN)
            channels.append(channel)
            tasks += [asyncio.ensure_future(silent(channel)) for _ in range(16)]
    elif SCENARIO == "health watches":
        for _ in range(20):
            channel = grpc.aio.insecure_channel(TARGET, options=OWN)
            channels.append(channel)
            tasks += [asyncio.ensure_future(watch(channel)) for _ in range(16)]
    elif SCENARIO == "log flood":
        channels = [grpc.aio.insecure_channel(TARGET, options=OWN) for _ in range(4)]
        number = 0
        while time.monotonic() < end:
            batch = [noisy(channels[i % 4], number + i) for i in range(32)]
            number += 32
            try:
                await asyncio.wait_for(asyncio.gather(*batch), max(0.1, end - time.monotonic()))
            except asyncio.TimeoutError:
                break
    if SCENARIO == "big messages":
        gpus = [Gpu(index=i, name="N" * 440) for i in range(9000)]
        register = Register(node_id="hostile", gpus=gpus)
        message = bytes(AgentMessage(register=register))
        channel = grpc.aio.insecure_channel(TARGET, options=[("grpc.max_send_message_length", -1)])
        channels.append(channel)
        tasks = [asyncio.ensure_future(writer(channel, message)) for _ in range(8)]
    elif SCENARIO == "gzip bombs":
        message = vi(99, 1) * ((4 * 1024 * 1024 - 64) // 3)
        channel = grpc.aio.insecure_channel(TARGET)
        channels.append(channel)
        gz = grpc.Compression.Gzip
        tasks = [asyncio.ensure_future(writer(channel, message, gz)) for _ in range(4)]
    elif SCENARIO == "many calls":
        channel = grpc.aio.insecure_channel(TARGET)
        channels.append(channel)
        calls = [channel.stream_stream(ROUTE)() for _ in range(5000)]
        await asyncio.sleep(SECONDS)
        # Calls beyond the server's MAX_CONCURRENT_STREAMS wait in the client.
        got["open"] = sum(1 for call in calls if not call.done())
        got["refused"] = sum(1 for call in calls if call.done())
    elif SCENARIO == "idle connections":
        conns = [await asyncio.open_connection(*TARGET.rsplit(":", 1)) for _ in range(100)]
        preface = b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
        for _, w in conns:
            w.write(preface)
        await asyncio.sleep(SECONDS)
        for r, _ in conns:
            try:
                while await asyncio.wait_for(r.read(4096), 0.01):
                    pass
            except (asyncio.TimeoutError, OSError):
                pass
        got["open"] = sum(1 for r, _ in conns if not r.at_eof())
    remaining = end - time.monotonic()
    if tasks and remaining > 0:
        await asyncio.wait(tasks, timeout=remaining)
    for t in tasks:
        t.cancel()
    print(got, flush=True)
    import os
    os._exit(0)

asyncio.run(main())
"""


@dataclass(frozen=True)
class Result:
    """One scenario, measured."""

    scenario: str
    rss_before_mib: float
    rss_growth_mib: float
    rtt_median_ms: float
    rtt_samples: int
    agent_calls_lost: int
    server_fds: int
    attacker: str
    large_registration: str = ""
    log_lines: int = 0


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


async def _relay(port: int) -> Any:
    """A loopback relay to `port` whose connections come from 127.0.0.2: another peer."""
    import asyncio

    async def pipe(reader: Any, writer: Any) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def relay(reader: Any, writer: Any) -> None:
        up = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0))
        await asyncio.gather(pipe(reader, up[1]), pipe(up[0], writer))

    return await asyncio.start_server(relay, "127.0.0.1", 0)


def _large_registration(target: str, other_address: bool = False) -> str:
    """How long a real 2,048-GPU agent takes to be acked, with the default deadline."""
    import asyncio

    from llmgw_wire import Ack
    from llmgw_wire.stream import StreamError, connect
    from llmgw_wire.testing.sample import sample_large_registration

    async def register() -> str:
        address, relay = target, None
        if other_address:
            relay = await _relay(int(target.rsplit(":", 1)[1]))
            address = f"127.0.0.1:{relay.sockets[0].getsockname()[1]}"
        started = time.perf_counter()
        try:
            async with connect(address) as session:
                await session.send(sample_large_registration(2048))
                assert isinstance(await session.recv(timeout=60), Ack)
        except StreamError as exc:
            return f"{exc.code.name} after {time.perf_counter() - started:.1f} s"
        finally:
            if relay is not None:
                relay.close()
        return f"acked in {time.perf_counter() - started:.1f} s"

    return asyncio.run(register())


def _round_trips(
    target: str, seconds: float, other_address: bool = False
) -> tuple[list[float], int]:
    """A well-behaved agent's round trips (heartbeat -> Ack) in seconds, and its lost calls."""
    import asyncio

    from llmgw_wire import Ack, Heartbeat
    from llmgw_wire.stream import StreamError, connect
    from llmgw_wire.testing.sample import sample_registration

    async def one_call(times: list[float], end: float) -> bool:
        try:
            async with connect(target) as session:
                await session.send(sample_registration())
                assert isinstance(await session.recv(timeout=60), Ack)
                while time.monotonic() < end:
                    started = time.perf_counter()
                    await session.send(Heartbeat("gpu-node-017"))
                    await session.recv(timeout=60)
                    times.append(time.perf_counter() - started)
                    await asyncio.sleep(0.02)
        except (StreamError, asyncio.TimeoutError):
            return False  # the server dropped the agent's call: connect again
        return True

    async def probe() -> tuple[list[float], int]:
        nonlocal target
        relay = None
        if other_address:
            relay = await _relay(int(target.rsplit(":", 1)[1]))
            target = f"127.0.0.1:{relay.sockets[0].getsockname()[1]}"
        times: list[float] = []
        lost = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            lost += not await one_call(times, end)
        if relay is not None:
            relay.close()
        return times, lost

    return asyncio.run(probe())


def run_scenario(scenario: str, seconds: float, source: Path) -> Result:
    """One scenario against a fresh control plane run from `source`."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed with the plane, below)
    plane = subprocess.Popen(
        [sys.executable, "-c", _PLANE, scenario],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
        cwd=source,
    )
    try:
        assert plane.stdout is not None
        target = f"127.0.0.1:{int(plane.stdout.readline())}"
        _round_trips(target, 1.0)  # warm both ends up
        before = _status(plane.pid, "VmRSS")
        log.seek(0, os.SEEK_END)
        lines_before = log.tell()
        attacker = None
        if scenario != "idle":
            script = _ATTACK.format(tests=str(ROOT))
            attacker = subprocess.Popen(
                # It holds on a little longer than the agent measures.
                [sys.executable, "-c", script, target, scenario, str(seconds + 8)],
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            time.sleep(min(2.0, seconds / 4))  # let the attack build up
        elsewhere = scenario == "waiting calls"  # the agent is another peer than the attacker
        large = _large_registration(target, elsewhere) if scenario != "idle" else ""
        times, lost = _round_trips(target, seconds, other_address=elsewhere)
        # Measured while the attacker still holds what it opened.
        fds = len(os.listdir(f"/proc/{plane.pid}/fd"))
        peak = _status(plane.pid, "VmHWM")
        said = ""
        if attacker is not None:
            out, _ = attacker.communicate(timeout=seconds * 4 + 60)
            said = out.strip().splitlines()[-1] if out.strip() else f"exit {attacker.returncode}"
        log.seek(lines_before)
        log_lines = sum(1 for _ in log)
        return Result(
            scenario,
            before / 2**20,
            (peak - before) / 2**20,
            statistics.median(times) * 1000 if times else float("nan"),
            len(times),
            lost,
            fds,
            said,
            large,
            log_lines,
        )
    finally:
        log.close()
        if plane.stdin is not None:
            plane.stdin.close()
        try:
            plane.wait(30)
        except subprocess.TimeoutExpired:
            plane.kill()
            plane.wait(30)


def table(results: list[Result]) -> list[str]:
    """The results, with each round trip's ratio to the idle one."""
    idle = next((r.rtt_median_ms for r in results if r.scenario == "idle"), None)
    lines = [
        f"{'scenario':18} {'RSS before':>10} {'RSS peak +':>10} {'RTT ms':>8} {'x idle':>7} "
        f"{'fds':>5} {'lost':>4} {'log':>6}  attacker; a 2,048-GPU agent"
    ]
    for r in results:
        ratio = f"{r.rtt_median_ms / idle:7.1f}" if idle else "      -"
        lines.append(
            f"{r.scenario:18} {r.rss_before_mib:9.0f}M {r.rss_growth_mib:9.0f}M "
            f"{r.rtt_median_ms:8.2f} {ratio} {r.server_fds:5d} {r.agent_calls_lost:4d} "
            f"{r.log_lines:6d}  {r.attacker}; {r.large_registration}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run every scenario (or `--scenario` ones); print the table; `--json PATH` also writes it."""
    parser = argparse.ArgumentParser(prog="python -m bench.hostile_stream")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--source", type=Path, default=ROOT)
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = [run_scenario(s, args.seconds, args.source) for s in args.scenario or SCENARIOS]
    for line in table(results):
        print(line, flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
