"""`llmgw-wire demo`: the exchange between two processes, and how it fails."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from llmgw_wire._cli.demo import render, run_demo
from llmgw_wire.stream import connect
from llmgw_wire.testing.sample import sample_registration

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(60)]

DEMO = [sys.executable, "-m", "llmgw_wire._cli", "demo"]
# As a fresh shell runs it: without a GRPC_VERBOSITY of this process's
# environment, which the demo's children would inherit.
DEMO_ENV = {key: value for key, value in os.environ.items() if key != "GRPC_VERBOSITY"}
SECRET = "sk-llmgw-demo-0000"


def test_the_demo_shows_the_whole_exchange_and_exits_cleanly() -> None:
    # Bounded by the timeout, a hang fails the test; how long it took is not a behaviour.
    result = subprocess.run(
        DEMO, capture_output=True, text=True, timeout=30, check=False, env=DEMO_ENV
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    for line in [
        r"control plane \| listening on 127\.0\.0\.1:\d+",
        r"agent         \| -> Register, \d+ bytes: node gpu-node-017, 10 GPUs "
        r"\(7 whole cards, 3 MIG slices\), 2 running shards",
        r"control plane \| <- Register from 127\.0\.0\.1:\d+: node gpu-node-017",
        r"control plane \|    adopted 2 running shards: llama70b-r3-s0 \(ready\), "
        r"qwen7b-r1-s0 \(loading\)",
        r"control plane \| -> Ack, \d+ bytes",
        r"control plane \| -> StartShard mistral-r8-s0, \d+ bytes: "
        r".* api_key=<secret str, not shown>",
        r"agent         \| <- StartShard mistral-r8-s0 -> ShardSpec: vllm mistral-small "
        r"on GPUs 4,5,6, port 8020, startup timeout 0:10:00",
        r"agent         \| -> ShardStatus mistral-r8-s0 ready, \d+ bytes, cuda 40/40 layers "
        r"on cuda:4,cuda:5,cuda:6",
        r"control plane \| <- ShardStatus mistral-r8-s0 ready, cuda 40/40 layers",
        r"agent         \|    the control plane ended the call: OK",
        r"both processes exited cleanly",
        # The table: the node's GPUs, the adopted shards and the new one.
        r"7 +1g\.10gb +0/9856 MiB .* retired pages pending",
        r"llama70b-r3-s0 +0 +ready +0,1,2,3 .* cuda 80/80 layers +http://10\.40\.7\.17:8000",
        r"mistral-r8-s0 +0 +ready +4,5,6 +mistral-small +cuda 40/40 layers "
        r"+http://10\.40\.7\.17:8020",
    ]:
        assert re.search(line, out), f"{line!r} not in:\n{out}"
    assert SECRET not in out


def test_a_taken_port_is_a_clear_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*DEMO, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=DEMO_ENV,
        )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: control plane: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(choose another port with --port, or 0 for a free one)\n"
    )


# Agents that misbehave. The demo's children are spawned, so these are found
# by module name in the child (pytest puts this directory on sys.path).


def agent_that_dies(conn: Connection, port: int, timeout: float) -> None:
    async def main() -> None:
        async with connect(f"127.0.0.1:{port}") as session:
            await session.send(sample_registration())
            await session.recv(timeout)
            os._exit(3)

    asyncio.run(main())


def agent_that_never_registers(conn: Connection, port: int, timeout: float) -> None:
    async def main() -> None:
        # The call is open once something is sent; nothing is. When the
        # control plane gives up and ends the call, this agent stays, so that
        # the demo reports the control plane's error and not the agent's exit.
        with contextlib.suppress(Exception):
            async with connect(f"127.0.0.1:{port}") as session:
                await session.recv(60)
        await asyncio.sleep(60)

    asyncio.run(main())


def agent_that_hangs(conn: Connection, port: int, timeout: float) -> None:
    time.sleep(60)


# Long enough for a child process to start on a busy machine: a peer that
# dies is seen at once whatever the timeout, and one that hangs only after it.
@pytest.mark.parametrize(
    ("agent", "timeout", "error"),
    [
        (agent_that_dies, 60, "error: agent: exited with code 3, saying nothing"),
        (
            agent_that_never_registers,
            5,
            "error: control plane: no registration from the agent within 5 s",
        ),
        (agent_that_hangs, 5, "error: control plane: no agent connected within 5 s"),
    ],
    ids=["dies", "never registers", "hangs"],
)
def test_a_peer_that_fails_stops_the_demo(agent: object, timeout: float, error: str) -> None:
    out: list[str] = []
    err: list[str] = []
    assert run_demo(timeout=timeout, agent=agent, out=out.append, err=err.append) == 1  # type: ignore[arg-type]
    # The error says which: a peer that dies is seen as dying, not as a timeout.
    assert err == [error]
    # Both children are stopped and reaped, whatever they were doing.
    assert multiprocessing.active_children() == []


def test_render_shows_the_node_its_gpus_and_its_shards() -> None:
    text = render(sample_registration())
    assert text.splitlines()[0] == (
        "node gpu-node-017 (gpu-node-017.dc1.example.net, 10.40.7.17) state=ready"
    )
    assert "IMEX UP (2048 channels); fabrics: ib-dc1-a 400 Gb/s via mlx5_0+mlx5_1" in text
    assert re.search(r"qwen7b-r1-s0 +0 +loading +7 +Qwen/Qwen2\.5-7B-Instruct +- +-", text)
