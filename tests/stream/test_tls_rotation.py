"""Certificates rotate without a restart: settings made from files follow the files."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import pytest

from llmgw_wire import Ack
from llmgw_wire.stream import (
    ClientTLS,
    ServerTLS,
    StreamError,
    Unauthenticated,
    connect,
    start_server,
)
from llmgw_wire.testing.sample import sample_registration
from tests.support import Adopting
from tests.support import run_async as run

if TYPE_CHECKING:
    from pathlib import Path

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(120)
WAIT = 20.0


def replace(path: Path, pem: bytes) -> None:
    """Replace a file whole, as cert-manager and kubelet do: write aside, then rename."""
    aside = path.with_suffix(".new")
    aside.write_bytes(pem)
    os.replace(aside, path)


def write_cert(directory: Path, name: str, cert: Any) -> tuple[Path, Path]:
    chain, key = directory / f"{name}.pem", directory / f"{name}.key"
    replace(chain, b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    replace(key, cert.private_key_pem.bytes())
    return chain, key


async def register(port: int, tls: ClientTLS) -> object:
    async with connect(f"127.0.0.1:{port}", tls=tls) as session:
        with contextlib.suppress(StreamError):
            await session.send(sample_registration())
        return await session.recv(timeout=WAIT)


def client_tls(ca: Any, cert: Any) -> ClientTLS:
    chain = b"".join(pem.bytes() for pem in cert.cert_chain_pems)
    return ClientTLS(ca.cert_pem.bytes(), chain, cert.private_key_pem.bytes())


def test_a_control_plane_serves_its_replaced_certificate_and_ca_to_the_next_agent(
    tmp_path: Path,
) -> None:
    old, new = trustme.CA(), trustme.CA()
    chain, key = write_cert(tmp_path, "server", old.issue_cert("127.0.0.1"))
    ca = tmp_path / "agents-ca.pem"
    replace(ca, old.cert_pem.bytes())

    async def main() -> None:
        server = await start_server(Adopting(), tls=ServerTLS(chain, key, ca))
        try:
            assert isinstance(
                await register(server.port, client_tls(old, old.issue_cert("n"))), Ack
            )
            # Rotated while it runs: a certificate of another CA, and that CA for agents.
            write_cert(tmp_path, "server", new.issue_cert("127.0.0.1"))
            replace(ca, new.cert_pem.bytes())
            assert isinstance(
                await register(server.port, client_tls(new, new.issue_cert("n"))), Ack
            )
            with pytest.raises(Unauthenticated, match="does not trust"):
                await register(server.port, client_tls(old, old.issue_cert("n")))
        finally:
            await server.stop(grace=None)

    run(main)


def test_an_agent_uses_its_replaced_certificate_at_its_next_connection(tmp_path: Path) -> None:
    authority = trustme.CA()
    server_cert = authority.issue_cert("127.0.0.1")
    ca = tmp_path / "ca.pem"
    replace(ca, authority.cert_pem.bytes())
    chain, key = write_cert(tmp_path, "agent", authority.issue_cert("node-a"))
    tls = ClientTLS(ca, chain, key)

    async def main() -> None:
        plane = Adopting()
        server = await start_server(
            plane,
            tls=ServerTLS(
                server_cert.cert_chain_pems[0].bytes(),
                server_cert.private_key_pem.bytes(),
                authority.cert_pem.bytes(),
            ),
        )
        try:
            assert isinstance(await register(server.port, tls), Ack)
            write_cert(tmp_path, "agent", authority.issue_cert("node-b"))
            assert isinstance(await register(server.port, tls), Ack)
        finally:
            await server.stop(grace=None)
        assert [c.dns_names if c else None for c in plane.certificates] == [
            ("node-a",),
            ("node-b",),
        ]

    run(main)


def test_a_file_that_is_gone_keeps_what_was_read(tmp_path: Path) -> None:
    authority = trustme.CA()
    ca = tmp_path / "ca.pem"
    replace(ca, authority.cert_pem.bytes())
    tls = ClientTLS(ca)
    ca.unlink()
    assert tls.credentials() is not None
    assert tls.ca == authority.cert_pem.bytes()
