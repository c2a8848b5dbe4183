"""TLS, mutual TLS and node identity on the agent stream, with certificates made at test time."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from llmgw_wire import Ack
from llmgw_wire.errors import StatusCode
from llmgw_wire.stream import (
    ClientTLS,
    PeerCertificate,
    PeerUnavailable,
    PermissionDenied,
    ServerTLS,
    Unauthenticated,
    connect,
    start_server,
)
from llmgw_wire.testing.stream import registration_of
from tests.support import Adopting
from tests.support import run_async as run

if TYPE_CHECKING:
    from collections.abc import Collection
    from pathlib import Path

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(120)
WAIT = 20.0
NODE = "gpu-node-017"


@attrs.frozen
class PKI:
    ca: Any
    server: Any
    client: Any

    def server_tls(self, *, mutual: bool = True) -> ServerTLS:
        return ServerTLS(
            self.server.cert_chain_pems[0].bytes(),
            self.server.private_key_pem.bytes(),
            self.ca.cert_pem.bytes() if mutual else None,
        )

    def client_tls(self, *, certificate: bool = True) -> ClientTLS:
        if not certificate:
            return ClientTLS(self.ca.cert_pem.bytes())
        chain = b"".join(pem.bytes() for pem in self.client.cert_chain_pems)
        return ClientTLS(self.ca.cert_pem.bytes(), chain, self.client.private_key_pem.bytes())


@pytest.fixture(scope="module")
def pki() -> PKI:
    ca = trustme.CA()
    return PKI(
        ca,
        ca.issue_cert("127.0.0.1", "localhost"),
        ca.issue_cert(NODE, common_name="agent-cn-017"),
    )


async def exchange(port: int, tls: ClientTLS | None, node_id: str = NODE) -> object:
    registration = registration_of(node_id)
    async with connect(f"127.0.0.1:{port}", tls=tls) as session:
        with contextlib.suppress(PeerUnavailable):
            await session.send(registration)
        answer = await session.recv(timeout=WAIT)
        await session.close()
        assert await session.recv(timeout=WAIT) is None
        return answer


def test_tls_both_ends(pki: PKI) -> None:
    async def main() -> None:
        plane = Adopting()
        server = await start_server(plane, tls=pki.server_tls(mutual=False))
        try:
            assert await exchange(server.port, pki.client_tls(certificate=False)) == Ack(
                NODE, 2, "adopted"
            )
            # Plain text to a TLS port does not get through.
            with pytest.raises(PeerUnavailable):
                await exchange(server.port, None)
        finally:
            await server.stop(grace=None)
        assert plane.certificates == [None]

    run(main)


def test_mutual_tls_with_the_node_id_the_certificate_vouches_for(pki: PKI) -> None:
    async def main() -> None:
        plane = Adopting()
        server = await start_server(plane, tls=pki.server_tls(), node_identity=True)
        try:
            assert await exchange(server.port, pki.client_tls()) == Ack(NODE, 2, "adopted")
        finally:
            await server.stop(grace=None)
        (certificate,) = plane.certificates
        assert certificate == PeerCertificate(
            common_name="agent-cn-017", dns_names=(NODE,), subject_alt_names=(NODE,)
        )

    run(main)


def test_a_node_id_the_certificate_does_not_vouch_for_is_refused(pki: PKI) -> None:
    async def main() -> None:
        plane = Adopting()
        server = await start_server(plane, tls=pki.server_tls(), node_identity=True)
        try:
            with pytest.raises(PermissionDenied) as error:
                await exchange(server.port, pki.client_tls(), node_id="gpu-node-999")
        finally:
            await server.stop(grace=None)
        assert error.value.code is StatusCode.PERMISSION_DENIED
        assert error.value.details == (
            "node 'gpu-node-999': the client certificate is for gpu-node-017"
        )
        # Refused before the control plane saw it, so no command was sent for it.
        assert plane.handed == []

    run(main)


def test_an_agent_without_a_client_certificate_is_refused_by_the_handshake(pki: PKI) -> None:
    async def main() -> None:
        plane = Adopting()
        server = await start_server(plane, tls=pki.server_tls(), node_identity=True)
        try:
            with pytest.raises(Unauthenticated, match="refused the agent's certificate"):
                await exchange(server.port, pki.client_tls(certificate=False))
        finally:
            await server.stop(grace=None)
        assert plane.certificates == []

    run(main)


def test_the_identity_function_is_replaceable(pki: PKI) -> None:
    def by_common_name(certificate: PeerCertificate) -> Collection[str]:
        return {certificate.common_name or ""}

    async def main() -> None:
        server = await start_server(Adopting(), tls=pki.server_tls(), node_identity=by_common_name)
        try:
            assert await exchange(server.port, pki.client_tls(), node_id="agent-cn-017") == Ack(
                "agent-cn-017", 2, "adopted"
            )
            with pytest.raises(PermissionDenied, match="the client certificate is for agent-cn"):
                await exchange(server.port, pki.client_tls())
        finally:
            await server.stop(grace=None)

    run(main)


def test_node_identity_needs_mutual_tls(pki: PKI) -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="node identity needs mutual TLS"):
            await start_server(Adopting(), tls=pki.server_tls(mutual=False), node_identity=True)

    run(main)


def test_tls_settings_read_files_and_keep_keys_out_of_reprs(pki: PKI, tmp_path: Path) -> None:
    pki.server.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    pki.server.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))
    tls = ServerTLS(tmp_path / "server.pem", tmp_path / "server.key")
    assert tls.private_key == pki.server.private_key_pem.bytes()
    assert "PRIVATE" not in repr(tls)
    assert "<secret bytes, not shown>" in repr(tls)
    assert "PRIVATE" not in repr(pki.client_tls())
    with pytest.raises(ValueError, match="needs its key"):
        ClientTLS(certificate_chain=b"x")
