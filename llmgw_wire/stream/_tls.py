"""TLS and mutual TLS for both ends, and the identity in an agent's certificate."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from attrs import field, frozen

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

__all__ = ["ClientTLS", "PeerCertificate", "ServerTLS", "node_ids_of"]


def _pem(value: bytes | str | Path | None) -> bytes | None:
    """PEM bytes as given, or read from the file a `Path` or `str` names."""
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


def _no_secret(_value: object) -> str:
    return "<redacted>"


def _short(value: bytes | None) -> str:
    return "None" if value is None else f"<{len(value)} bytes of PEM>"


@frozen
class ServerTLS:
    """The control plane's TLS: its certificate and key; with `client_ca`, mutual TLS.

    Each of the three is PEM bytes, or the path of a PEM file. With
    `client_ca`, every agent must present a certificate signed by it, and the
    handshake refuses one that does not.

    Attributes:
        certificate_chain: the server's certificate (and intermediates).
        private_key: the server's key (never shown in a repr).
        client_ca: the CA that signs agents' certificates; None for TLS only.
    """

    certificate_chain: bytes = field(converter=_pem, repr=_short)
    private_key: bytes = field(converter=_pem, repr=_no_secret)
    client_ca: bytes | None = field(default=None, converter=_pem, repr=_short)

    @property
    def mutual(self) -> bool:
        """Whether agents must present a certificate."""
        return self.client_ca is not None

    def credentials(self) -> grpc.ServerCredentials:
        """The grpcio credentials for these files."""
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


@frozen
class ClientTLS:
    """The agent's TLS: the CA it trusts and, for mutual TLS, its own certificate and key.

    Each is PEM bytes, or the path of a PEM file.

    Attributes:
        ca: the CA that signs the control plane's certificate; None trusts
            the system's roots.
        certificate_chain: the agent's certificate, for mutual TLS.
        private_key: the agent's key (never shown in a repr).
        server_name: the name to check the server's certificate against, when
            it is not the host connected to.
    """

    ca: bytes | None = field(default=None, converter=_pem, repr=_short)
    certificate_chain: bytes | None = field(default=None, converter=_pem, repr=_short)
    private_key: bytes | None = field(default=None, converter=_pem, repr=_no_secret)
    server_name: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")

    def credentials(self) -> grpc.ChannelCredentials:
        """The grpcio credentials for these files."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )

    def options(self) -> list[tuple[str, Any]]:
        """Channel options these settings need."""
        if self.server_name is None:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]


@frozen
class PeerCertificate:
    """What an agent's verified client certificate says about who it is.

    Attributes:
        common_name: the subject's CN, if any.
        dns_names: the DNS names among its subject alternative names.
        uris: the URIs among its subject alternative names.
        subject_alt_names: every subject alternative name, as grpc reports them.
    """

    common_name: str | None = None
    dns_names: tuple[str, ...] = ()
    uris: tuple[str, ...] = ()
    subject_alt_names: tuple[str, ...] = ()

    @classmethod
    def from_auth_context(cls, context: Mapping[str, Sequence[bytes]]) -> PeerCertificate | None:
        """The certificate in a grpc auth context; None when the peer presented none."""

        def texts(key: str) -> tuple[str, ...]:
            return tuple(value.decode("utf-8", "replace") for value in context.get(key, ()))

        if not context.get("x509_pem_cert") and not context.get("x509_common_name"):
            return None
        names = texts("x509_common_name")
        return cls(
            common_name=names[0] if names else None,
            dns_names=texts("peer_dns"),
            uris=texts("peer_uri"),
            subject_alt_names=texts("x509_subject_alternative_name"),
        )


def node_ids_of(certificate: PeerCertificate) -> Collection[str]:
    """The node ids a client certificate vouches for: its DNS and URI SANs, else its CN.

    The default identity function of `start_server(node_identity=...)`.
    """
    names = {*certificate.dns_names, *certificate.uris}
    if not names and certificate.common_name:
        names.add(certificate.common_name)
    return names
