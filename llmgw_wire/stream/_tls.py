"""TLS and mutual TLS for both ends, and the identity in an agent's certificate.

Settings made from files follow the files: the control plane reads them
again at the next handshake after they changed, an agent at its next
connection, so that certificates rotate without a restart. The files are
read as the shard store reads its own: regular files only (a link is
followed, but only into one), at most 1 MiB, opened without waiting and
checked before a byte is read, so that a FIFO or a link to /dev/zero is
refused rather than waited on or read to the end. What goes wrong with a
file is logged once per change, not at each handshake; a control plane
checks new files before grpc gets them, and a pair it cannot serve (a new
certificate with the old key) is a warning that names the certificate
still served.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import ssl
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from attrs import field, frozen

from llmgw_wire._files import FileRefusedError, read_regular
from llmgw_wire.errors import Redacted, StreamError, Unauthenticated

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator, Mapping, Sequence

    from llmgw_wire.stream._protocol import GrpcOption

__all__ = ["ClientTLS", "PeerCertificate", "ServerTLS", "node_ids_of", "status_error"]

logger = logging.getLogger("llmgw_wire.stream")


#: The largest certificate, key or CA file read, in bytes: a system's whole CA
#: bundle is about 220 kB, a certificate chain a few kB.
_MAX_FILE_BYTES = 1 << 20

Stamp = tuple[int, int, int]


class _NotReadError(ValueError):
    """A TLS file refused before being read: not a regular file, or too large."""


def _stamp(info: os.stat_result) -> Stamp:
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def _read_regular(path: Path) -> tuple[bytes, Stamp]:
    """The bytes of the regular file at `path` (a link followed), bounded, and its stamp.

    Links are followed (a Kubernetes secret volume is made of them), but only
    into a regular file.

    Raises:
        OSError: the file system refused (no such file, permissions).
        ValueError: it is not a regular file, or larger than `_MAX_FILE_BYTES`.
    """
    try:
        pem, info = read_regular(path, _MAX_FILE_BYTES)
    except FileRefusedError as exc:
        if exc.kind is not None:
            reason = f"is not a regular file ({exc.kind}); TLS files are read only from those"
        else:
            size = "" if exc.grew else f" ({exc.size} bytes)"
            reason = f"is larger than the {_MAX_FILE_BYTES} bytes a TLS file may hold{size}"
        raise _NotReadError(f"{path} {reason}") from None
    return pem, _stamp(info)


def _os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


class _Followed:
    """A PEM file followed: what was last read from it, and whether it can be read now.

    A file that cannot be read again (missing between a delete and a rename,
    a FIFO, too large) keeps what was read before; that is logged once per
    change of what is wrong, with the count of attempts when it changes,
    not at every handshake.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pem, self.stamp = _read_regular(path)
        self._lock = threading.Lock()
        self._trouble: str | None = None
        self._attempts = 0

    def __getstate__(self) -> dict[str, Any]:
        # Settings are pickled (to a worker process, say), the lock is not.
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def current(self) -> bytes:
        """What the file holds now, read again if it changed; what was read, if it cannot be."""
        with self._lock:
            try:
                if _stamp(self.path.stat()) == self.stamp:
                    self._readable()
                    return self.pem
                pem, stamp = _read_regular(self.path)
            except (OSError, ValueError) as exc:
                self._unreadable(str(exc) if isinstance(exc, _NotReadError) else _os_reason(exc))
                return self.pem
            self._readable()
            self.pem, self.stamp = pem, stamp
            logger.info("read %s again: it changed", self.path)
            return pem

    def _unreadable(self, trouble: str) -> None:
        if trouble == self._trouble:
            self._attempts += 1
            return
        before = (
            f", after {self._attempts} attempts that found: {self._trouble}"
            if self._trouble is not None
            else ""
        )
        self._trouble, self._attempts = trouble, 1
        logger.warning(
            "cannot read %s again, keeping what was read before (said again only when "
            "this changes): %s%s",
            self.path,
            trouble,
            before,
        )

    def _readable(self) -> None:
        if self._trouble is not None:
            logger.warning(
                "%s can be read again, after %d attempts that found: %s",
                self.path,
                self._attempts,
                self._trouble,
            )
            self._trouble, self._attempts = None, 0


class _FromFile(bytes):
    """PEM bytes read from a file: they remember the file, which goes on being followed."""

    followed: _Followed


def _pem(value: bytes | str | Path | None) -> bytes | None:
    """PEM bytes as given, or read from the file a `Path` or `str` names."""
    if value is None or isinstance(value, bytes):
        return value
    followed = _Followed(Path(value))
    pem = _FromFile(followed.pem)
    pem.followed = followed
    return pem


def _plain(value: bytes | None) -> bytes | None:
    """Plain bytes: grpc's C extension takes no subclass."""
    return None if value is None else bytes(value)


def _fresh(value: bytes | None) -> bytes | None:
    """`value`, or what its file holds now if it changed since it was read."""
    if not isinstance(value, _FromFile):
        return value
    return value.followed.current()


_PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----[^-]*-----END CERTIFICATE-----")


def _fingerprint(chain: bytes) -> str:
    """The SHA-256 fingerprint of the first certificate of `chain`, as openssl writes it."""
    first = _PEM_CERTIFICATE.search(chain)
    if first is None:
        return "unknown"
    try:
        der = ssl.PEM_cert_to_DER_cert(first.group().decode("ascii"))
    except ValueError:
        return "unknown"
    return ":".join(f"{byte:02X}" for byte in hashlib.sha256(der).digest())


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path to `data` in memory, for `ssl`'s loaders, which read only from paths."""
    fd = os.memfd_create("llmgw-tls", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _refusal(key: bytes | None, chain: bytes | None, ca: bytes | None) -> str | None:
    """Why a TLS library refuses these as a server's certificate, key and client CA; None if not.

    Checked with Python's `ssl` (OpenSSL) before grpc gets them: grpc refuses
    such a configuration too, but says so only on its own stderr and serves
    on with the one it had. Where the key and certificate cannot be put in
    memory files (no `memfd_create`, no /proc), only the CA is checked.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        if ca is not None:
            context.load_verify_locations(cadata=ca.decode("latin-1"))
        if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            with _memory_file(chain or b"") as chain_path, _memory_file(key or b"") as key_path:
                # An empty password: an encrypted key is refused, never prompted for.
                context.load_cert_chain(chain_path, key_path, password=b"")
    except ssl.SSLError as exc:
        return re.sub(r" \(_ssl\.c:\d+\)$", "", str(exc.args[-1]))
    except OSError as exc:
        return f"cannot check them: {exc.strerror}"
    return None


def _no_secret(_value: object) -> str:
    # A private key is a secret: the library's one placeholder, as for api_key
    # (of bytes, whether read from a file or given).
    return repr(Redacted("bytes"))


def _short(value: bytes | None) -> str:
    return "None" if value is None else f"<{len(value)} bytes of PEM>"


@frozen
class ServerTLS:
    """The control plane's TLS: its certificate and key; with `client_ca`, mutual TLS.

    Each of the three is PEM bytes, or the path of a PEM file (a regular
    file of at most 1 MiB, else `ValueError`), followed at each handshake.
    With `client_ca`, every agent must present a certificate signed by it,
    and the handshake refuses one that does not.

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

        def configuration(key: bytes | None, chain: bytes | None, ca: bytes | None) -> Any:
            key, chain, ca = map(_plain, (key, chain, ca))
            return grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=ca)

        served, refused = list(files), list(files)
        lock = threading.Lock()

        def fetch() -> Any:
            # grpc asks before each handshake: None keeps the configuration it has.
            with lock:
                fresh = [_fresh(pem) for pem in files]
                if fresh in (served, refused):
                    return None
                problem = _refusal(*fresh)
                if problem is not None:
                    # grpc would refuse it too, and go on serving what it has,
                    # with nothing said but on its own stderr.
                    refused[:] = fresh
                    logger.warning(
                        "not serving the TLS files as they are now (%s): %s; still serving "
                        "the certificate read before, of SHA-256 fingerprint %s (replace "
                        "the key and its certificate together, the key first)",
                        _names(self),
                        problem,
                        _fingerprint(served[1] or b""),
                    )
                    return None
                served[:] = fresh
                logger.info(
                    "serving the certificate of SHA-256 fingerprint %s (%s)",
                    _fingerprint(fresh[1] or b""),
                    _names(self),
                )
                return configuration(*fresh)

        return grpc.dynamic_ssl_server_credentials(
            configuration(*files), fetch, require_client_authentication=self.client_ca is not None
        )


def _names(tls: ServerTLS) -> str:
    """The files of `tls`, named for a log line."""
    roles = (
        ("certificate", tls.certificate_chain),
        ("key", tls.private_key),
        ("client CA", tls.client_ca),
    )
    return ", ".join(
        f"{role} {pem.followed.path}" if isinstance(pem, _FromFile) else f"{role} given as bytes"
        for role, pem in roles
        if pem is not None
    )


@frozen
class ClientTLS:
    """The agent's TLS: the CA it trusts and, for mutual TLS, its own certificate and key.

    Each is PEM bytes, or the path of a PEM file (a regular file of at most
    1 MiB, else `ValueError`), read again at each connection if it changed.

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

    def options(self) -> list[GrpcOption]:
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
