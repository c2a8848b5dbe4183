"""TLS and mutual TLS for both ends, and the identity in an agent's certificate.

Settings made from files follow the files: the control plane reads them
again at the next handshake after they changed, an agent at its next
connection, so that certificates rotate without a restart.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from attrs import field, frozen

from llmgw_wire.errors import Redacted, StreamError, Unauthenticated

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

__all__ = ["ClientTLS", "PeerCertificate", "ServerTLS", "node_ids_of", "status_error"]

logger = logging.getLogger("llmgw_wire.stream")


class _FromFile(bytes):
    """PEM bytes read from a file: they remember the file, and how it was when read."""

    path: Path
    stamp: tuple[int, int, int]


def _read(path: Path) -> _FromFile:
    stat = path.stat()
    pem = _FromFile(path.read_bytes())
    pem.path = path
    pem.stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return pem


def _pem(value: bytes | str | Path | None) -> bytes | None:
    """PEM bytes as given, or read from the file a `Path` or `str` names."""
    if value is None or isinstance(value, bytes):
        return value
    return _read(Path(value))


def _plain(value: bytes | None) -> bytes | None:
    """Plain bytes: grpc's C extension takes no subclass."""
    return None if value is None else bytes(value)


def _fresh(value: bytes | None) -> bytes | None:
    """`value`, or its file's new contents if the file changed since it was read."""
    if not isinstance(value, _FromFile):
        return value
    try:
        stat = value.path.stat()
        if (stat.st_mtime_ns, stat.st_size, stat.st_ino) == value.stamp:
            return value
        fresh = _read(value.path)
    except OSError as exc:
        # Between a delete and a rename, say: what was read still serves.
        logger.warning("cannot read %s again, keeping what was read: %s", value.path, exc)
        return value
    logger.info("read %s again: it changed", value.path)
    return fresh


def _no_secret(_value: object) -> str:
    # A private key is a secret: the library's one placeholder, as for api_key
    # (of bytes, whether read from a file or given).
    return repr(Redacted("bytes"))


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
        """The grpcio credentials; made from files, they follow the files at each handshake."""
        files = [self.private_key, self.certificate_chain, self.client_ca]
        if not any(isinstance(pem, _FromFile) for pem in files):
            return grpc.ssl_server_credentials(
                [(self.private_key, self.certificate_chain)],
                root_certificates=self.client_ca,
                require_client_auth=self.client_ca is not None,
            )

        def configuration() -> Any:
            key, chain, ca = map(_plain, files)
            return grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=ca)

        def fetch() -> Any:
            # grpc asks before each handshake: None keeps the configuration it has.
            fresh = [_fresh(pem) for pem in files]
            if all(new is old for new, old in zip(fresh, files, strict=True)):
                return None
            files[:] = fresh
            return configuration()

        return grpc.dynamic_ssl_server_credentials(
            configuration(), fetch, require_client_authentication=self.client_ca is not None
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
        """The grpcio credentials; made from files, with what the files hold now."""
        return grpc.ssl_channel_credentials(
            root_certificates=_plain(_fresh(self.ca)),
            private_key=_plain(_fresh(self.private_key)),
            certificate_chain=_plain(_fresh(self.certificate_chain)),
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


# What grpc says of a failed handshake, and what it means; the first that matches.
_VERIFY_FAILED = re.compile(r"CERTIFICATE_VERIFY_FAILED: ([^:]+)")
_HANDSHAKE_FAILURES = (
    (
        "Hostname Verification Check failed",
        "the control plane's certificate is not for the name connected to "
        "(give its name as ClientTLS.server_name, or an IP SAN for an address)",
    ),
    ("WRONG_VERSION_NUMBER", "the control plane does not speak TLS"),
    ("andshake failed", "the TLS handshake failed"),
)
# Mutual TLS: the control plane refuses an agent's certificate (none, expired,
# another CA's) after the agent's side of the handshake is done; grpc sees it
# as the connection closing before the call could start.
_CLOSED_IN_HANDSHAKE = "failed to connect to all addresses; last error: UNAVAILABLE"
_REFUSED_CERTIFICATE = (
    "the control plane closed the connection in the TLS handshake: it refused the "
    "agent's certificate (none, expired, or not signed by its CA), or it was stopping"
)


def _handshake_failure(details: str) -> str | None:
    """What was wrong, when `details` tells of a failed TLS handshake; None if not."""
    verify = _VERIFY_FAILED.search(details)
    if verify is not None:
        what = verify.group(1).strip()
        if what == "unable to get local issuer certificate":
            what = "it is signed by a CA the agent does not trust (unable to get local issuer)"
        return f"the control plane's certificate failed verification: {what}"
    for marker, reason in _HANDSHAKE_FAILURES:
        if marker in details:
            return reason
    if details.startswith(_CLOSED_IN_HANDSHAKE) and details.endswith("Socket closed"):
        return _REFUSED_CERTIFICATE
    return None


def status_error(code: str, details: str, *, tls: bool, registration: bool = False) -> StreamError:
    """The agent's error for a call that ended with `code`; `Unauthenticated` for a handshake.

    grpc reports a failed handshake as UNAVAILABLE, which would read as
    "connect again" with nothing said of the certificate.
    """
    if tls and code == "UNAVAILABLE":
        reason = _handshake_failure(details)
        if reason is not None:
            return Unauthenticated(details, reason=reason)
    return StreamError.for_status(code, details, registration=registration)
