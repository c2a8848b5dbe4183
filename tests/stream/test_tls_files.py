"""TLS files are read as the store reads its own: regular files only, bounded, trouble said once.

Each case runs a real grpc server on loopback whose certificate files change
under it, and agents that connect after the change.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import pickle
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from llmgw_wire import Ack
from llmgw_wire.stream import ClientTLS, ServerTLS, start_server
from llmgw_wire.stream._tls import _fresh
from tests.stream.test_tls_rotation import register, replace, write_cert
from tests.support import Adopting
from tests.support import run_async as run

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(120)
WAIT = 20.0
LOGGER = "llmgw_wire.stream"


def served_fingerprint(port: int, ca: Any) -> str:
    """The SHA-256 fingerprint of the certificate the server at `port` presents now."""
    context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode("ascii"))
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ":".join(f"{byte:02X}" for byte in hashlib.sha256(der).digest())


def fingerprint(cert: Any) -> str:
    der = ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode("ascii"))
    return ":".join(f"{byte:02X}" for byte in hashlib.sha256(der).digest())


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == LOGGER and record.levelno == logging.WARNING
    ]


def release(fifo: Path) -> None:
    """Let a reader waiting on `fifo` go: a writer that opens and closes it."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_certificate_that_becomes_a_fifo_blocks_no_handshake(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = trustme.CA()
    chain, key = write_cert(tmp_path, "server", ca.issue_cert("127.0.0.1"))
    agent = ClientTLS(ca.cert_pem.bytes())

    async def main() -> None:
        server = await start_server(Adopting(), tls=ServerTLS(chain, key))
        try:
            assert isinstance(await register(server.port, agent), Ack)
            # A misdirected mount: the certificate's path is now a FIFO no one writes.
            fifo = tmp_path / "fifo"
            os.mkfifo(fifo)
            os.replace(fifo, chain)
            # A reader that does wait on the FIFO is let go after a while (it
            # holds grpc's thread, the agent's too), so that the test fails
            # rather than hangs.
            watchdog = threading.Timer(WAIT, release, (chain,))
            watchdog.start()
            try:
                for _ in range(3):
                    assert isinstance(await register(server.port, agent), Ack)
            finally:
                watchdog.cancel()
                release(chain)
        finally:
            await server.stop(grace=None)

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(main)
    (warning,) = warnings_of(caplog)
    assert f"cannot read {chain} again" in warning
    assert "is not a regular file (a FIFO)" in warning


def test_a_refused_rotation_is_a_warning_that_says_which_certificate_is_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = trustme.CA()
    first = ca.issue_cert("127.0.0.1")
    chain, key = write_cert(tmp_path, "server", first)
    agent = ClientTLS(ca.cert_pem.bytes())

    seen: list[str] = []

    async def main() -> None:
        server = await start_server(Adopting(), tls=ServerTLS(chain, key))
        try:
            seen.append(await asyncio.to_thread(served_fingerprint, server.port, ca))
            # A new certificate, its key not yet in place: grpc cannot serve the pair.
            second = ca.issue_cert("127.0.0.1")
            replace(chain, second.cert_chain_pems[0].bytes())
            for _ in range(3):
                assert isinstance(await register(server.port, agent), Ack)
            seen.append(await asyncio.to_thread(served_fingerprint, server.port, ca))
            # Its key arrives: the next handshake serves the new certificate.
            replace(key, second.private_key_pem.bytes())
            seen.append(await asyncio.to_thread(served_fingerprint, server.port, ca))
            seen.append(fingerprint(second))
        finally:
            await server.stop(grace=None)

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(main)
    before, during, after, second = seen
    assert before == during == fingerprint(first)
    assert after == second
    (warning,) = warnings_of(caplog)
    assert f"certificate {chain}, key {key}" in warning
    assert "KEY_VALUES_MISMATCH" in warning
    assert f"still serving the certificate read before, of SHA-256 fingerprint {before}" in warning
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(f"serving the certificate of SHA-256 fingerprint {second}" in m for m in infos)


def test_a_missing_file_is_said_once_with_a_count_when_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca, agents = trustme.CA(), trustme.CA()
    chain, key = write_cert(tmp_path, "server", ca.issue_cert("127.0.0.1"))
    client_ca = tmp_path / "agents-ca.pem"
    replace(client_ca, agents.cert_pem.bytes())
    cert = agents.issue_cert("n")
    agent = ClientTLS(
        ca.cert_pem.bytes(), cert.cert_chain_pems[0].bytes(), cert.private_key_pem.bytes()
    )
    handshakes = 5

    async def main() -> None:
        server = await start_server(Adopting(), tls=ServerTLS(chain, key, client_ca))
        try:
            client_ca.unlink()
            for _ in range(handshakes):
                assert isinstance(await register(server.port, agent), Ack)
            replace(client_ca, agents.cert_pem.bytes())
            assert isinstance(await register(server.port, agent), Ack)
        finally:
            await server.stop(grace=None)

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(main)
    gone, back = warnings_of(caplog)
    assert f"cannot read {client_ca} again" in gone
    assert "No such file or directory" in gone
    assert back.startswith(f"{client_ca} can be read again, after ")
    # grpc asks at least once per handshake.
    attempts = int(back.split("after ")[1].split(" ")[0])
    assert attempts >= handshakes


def test_a_file_that_is_not_regular_or_too_large_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"ca\.pem is not a regular file \(a FIFO\)"):
        ClientTLS(fifo)
    large = tmp_path / "bundle.pem"
    with large.open("wb") as out:
        out.truncate((1 << 20) + 1)
    with pytest.raises(ValueError, match=r"larger than the 1048576 bytes a TLS file may hold"):
        ClientTLS(large)
    with pytest.raises(ValueError, match=r"is not a regular file \(a directory\)"):
        ClientTLS(tmp_path)


# In a process of its own with its data segment bounded, so that a reader that
# does read /dev/zero to the end fails there with MemoryError, not the machine.
_DEV_ZERO = """
import asyncio, json, logging, os, resource, sys
resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30))
from pathlib import Path
from llmgw_wire import Ack
from llmgw_wire.stream import ClientTLS, ServerTLS, start_server
from llmgw_wire.stream._tls import _fresh
from tests.stream.test_tls_rotation import register, write_cert
from tests.support import Adopting
import trustme

folder = Path(sys.argv[1])
warnings = []
class Kept(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())
logging.getLogger("llmgw_wire.stream").addHandler(Kept())
ca = trustme.CA()
chain, key = write_cert(folder, "server", ca.issue_cert("127.0.0.1"))
agent = ClientTLS(ca.cert_pem.bytes())
try:
    ClientTLS(folder / "zero")
    refused = None
except ValueError as exc:
    refused = str(exc)

async def main():
    server = await start_server(Adopting(), tls=ServerTLS(chain, key))
    try:
        first = await register(server.port, agent)
        os.replace(folder / "zero", chain)
        second = await register(server.port, agent)
    finally:
        await server.stop(grace=None)
    return [isinstance(first, Ack), isinstance(second, Ack)]

acks = asyncio.run(asyncio.wait_for(main(), 60))
print(json.dumps({"acks": acks, "refused": refused, "warnings": warnings}))
"""


@pytest.mark.subprocess
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_link_to_dev_zero_is_refused_not_read(tmp_path: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_DEV_ZERO), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert "zero is not a regular file (a character device)" in result["refused"]
    assert result["acks"] == [True, True]
    (warning,) = result["warnings"]
    assert "is not a regular file (a character device)" in warning


def test_settings_from_files_pickle_and_go_on_following_their_files(tmp_path: Path) -> None:
    ca = trustme.CA()
    chain, key = write_cert(tmp_path, "server", ca.issue_cert("127.0.0.1"))
    tls = ServerTLS(chain, key)
    copy = pickle.loads(pickle.dumps(tls))
    assert copy == tls
    assert copy.credentials() is not None
    agent = ClientTLS(chain)
    replace(chain, b"changed")
    assert _fresh(pickle.loads(pickle.dumps(agent)).ca) == b"changed"
