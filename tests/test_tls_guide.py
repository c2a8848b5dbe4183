"""The TLS guide's openssl commands make certificates an agent and a control plane accept.

Its Python examples run with every page's (`test_docs.py`); its shell block
runs here, where openssl and bash are installed.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import llmgw_wire as wire
from llmgw_wire.stream import (
    ClientTLS,
    ControlPlane,
    ControlSession,
    ServerTLS,
    connect,
    start_server,
)
from llmgw_wire.testing.sample import sample_registration

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "tls.md"

pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        shutil.which("openssl") is None or shutil.which("bash") is None,
        reason="needs openssl and bash",
    ),
]


class Adopting(ControlPlane):
    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, wire.Registration):
                await session.send(wire.Ack(value.node.id, len(value.shards), "adopted"))


def test_the_openssl_commands_make_working_certificates(tmp_path: Path) -> None:
    (commands,) = re.findall(r"^```sh\n(.*?)^```", GUIDE.read_text(), re.DOTALL | re.MULTILINE)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "control-plane.pem: OK" in done.stdout

    async def main() -> object:
        server = await start_server(
            Adopting(),
            tls=ServerTLS(
                tmp_path / "control-plane.pem",
                tmp_path / "control-plane.key",
                client_ca=tmp_path / "ca.pem",
            ),
            node_identity=True,
        )
        tls = ClientTLS(
            tmp_path / "ca.pem", tmp_path / "gpu-node-017.pem", tmp_path / "gpu-node-017.key"
        )
        try:
            async with connect(f"127.0.0.1:{server.port}", tls=tls) as session:
                await session.send(sample_registration())
                return await session.recv(timeout=20)
        finally:
            await server.stop(grace=None)

    assert asyncio.run(asyncio.wait_for(main(), 60)) == wire.Ack("gpu-node-017", 2, "adopted")
