"""How soon `handle` sees an agent's clean leave: `python -m bench.half_close`.

An agent registers, then leaves (`AgentSession.close`: a half-close); the
time is from just before its half-close to the moment the control plane's
`async for` ends. Twenty leaves each way, interleaved, on loopback, in one
process: the library's end of stream (a second read, answered after any
cancellation), and the wait of `HALF_CLOSE_SETTLE` that Python 3.10 keeps
(forced here), side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from llmgw_wire.stream import ControlPlane, ControlSession, connect, start_server
from llmgw_wire.stream import _server as server_module
from llmgw_wire.testing.sample import sample_registration

__all__ = ["main"]


class _Timing(ControlPlane):
    def __init__(self) -> None:
        self.ended: asyncio.Queue[float] = asyncio.Queue()

    async def handle(self, session: ControlSession) -> None:
        async for _ in session:
            pass
        self.ended.put_nowait(time.perf_counter())


async def _settled(call: Any) -> None:
    """The wait Python 3.10 keeps: `HALF_CLOSE_SETTLE`, or until the call is lost."""
    loop = asyncio.get_running_loop()
    settling = call._settling = loop.create_future()
    timer = loop.call_later(server_module.HALF_CLOSE_SETTLE, server_module._set_done, settling)
    try:
        await settling
    finally:
        timer.cancel()
        call._settling = None


async def _leave_once(port: int, plane: _Timing) -> float:
    async with connect(f"127.0.0.1:{port}") as session:
        await session.send(sample_registration())
        await asyncio.sleep(0.05)  # registered and read: only the leave is timed
        started = time.perf_counter()
        await session.close()
        ended = await asyncio.wait_for(plane.ended.get(), 30)
    return ended - started


async def _run(rounds: int) -> dict[str, list[float]]:
    plane = _Timing()
    server = await start_server(plane)
    explained = server_module._ServerCall._explained
    times: dict[str, list[float]] = {"second read": [], "settle (3.10)": []}
    try:
        for _ in range(rounds):
            for way, seconds in times.items():
                wait: Any = explained if way == "second read" else _settled
                server_module._ServerCall._explained = wait  # type: ignore[method-assign]
                seconds.append(await _leave_once(server.port, plane))
    finally:
        server_module._ServerCall._explained = explained  # type: ignore[method-assign]
        await server.stop(grace=None)
    return times


def main(argv: list[str] | None = None) -> None:
    """Print the median and the longest time to see a leave, each way."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    times = asyncio.run(_run(args.rounds))
    print(f"a clean leave seen by handle, {args.rounds} leaves each way (ms):")
    for way, seconds in times.items():
        print(
            f"  {way:>14}: median {statistics.median(seconds) * 1e3:8.2f}"
            f"   max {max(seconds) * 1e3:8.2f}"
        )


if __name__ == "__main__":
    main()
