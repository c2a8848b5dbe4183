"""The control plane's addresses an agent goes through in turn: given, or a `dns:` name's."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING

from llmgw_wire.errors import (
    DecodeError,
    PeerUnavailable,
    PermissionDenied,
    StreamError,
    Unauthenticated,
)
from llmgw_wire.stream._protocol import STOPPING, GrpcOption

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Targets", "moves_on", "reason_of"]

logger = logging.getLogger("llmgw_wire.stream")


def _split_dns(target: str) -> tuple[str, int]:
    """The host and port of "dns:host:port", "dns:///host:port" or "dns://server/host:port"."""
    rest = target.removeprefix("dns:")
    if rest.startswith("//"):
        rest = rest[2:].partition("/")[2]
    if rest.startswith("["):
        host, _, port = rest[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = rest.rpartition(":") if rest.count(":") == 1 else (rest, "", "")
    if not host:
        raise ValueError(f"Expected dns:host:port, got {target!r}")
    try:
        return host, int(port or 443)
    except ValueError:
        raise ValueError(f"Expected dns:host:port with a numeric port, got {target!r}") from None


class Targets:
    """The addresses of the control plane, in the order given; a `dns:` name stands for its own.

    A `dns:` name is looked up at the start of each pass, so that a control
    plane that moved is found; each address it gives is tried in turn,
    connected to by IP with the name as the authority (and, with TLS, as the
    name its certificate is checked against).
    """

    def __init__(self, target: str | Sequence[str], *, check_name: bool) -> None:
        names = [target] if isinstance(target, str) else list(target)
        if not names or not all(isinstance(name, str) and name for name in names):
            raise ValueError(f"Expected one or more control-plane addresses, got {target!r}")
        for name in names:
            if name.startswith("dns:"):
                _split_dns(name)
        self._names = names
        self._check_name = check_name
        self._pass: list[tuple[str, list[GrpcOption]]] = []
        self._index = 0

    def __len__(self) -> int:
        """How many addresses one pass goes through (each name's, as last looked up)."""
        return max(len(self._pass), len(self._names))

    async def current(self) -> tuple[str, list[GrpcOption]]:
        """The address to connect to now, and the channel options it needs."""
        if not self._pass:
            self._pass = [entry for name in self._names for entry in await self._expand(name)]
            self._index = 0
        return self._pass[self._index]

    def advance(self) -> bool:
        """Go on to the next address; past the last, the next pass looks names up again.

        Returns:
            Whether the pass is over: every address of it was tried.
        """
        self._index += 1
        if self._index >= len(self._pass):
            self._pass = []
            return True
        return False

    async def _expand(self, name: str) -> list[tuple[str, list[GrpcOption]]]:
        if not name.startswith("dns:"):
            return [(name, [])]
        host, port = _split_dns(name)
        try:
            found = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            logger.warning("cannot look up %s: %s", name, exc)
            # grpc looks it up again, and reports what it finds.
            return [(name, [])]
        options: list[GrpcOption] = [("grpc.default_authority", f"{host}:{port}")]
        if self._check_name:
            options.append(("grpc.ssl_target_name_override", host))
        addresses = []
        for family, _, _, _, sockaddr in found:
            ip = str(sockaddr[0])
            address = f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}"
            if address not in addresses:
                addresses.append(address)
        return [(address, options) for address in addresses]


def moves_on(error: BaseException | None, *, answered: bool) -> bool:
    """Whether a round that ended with `error` goes on to the next address.

    Unreachable, lost, stopping or not serving (UNAVAILABLE), a failed
    handshake and a refusal of this agent (PERMISSION_DENIED) do, and so
    does any error before the control plane `answered` anything: what
    answered may be no control plane at all (an HTTP server's 403, 404 or
    500 read as a status, another gRPC service's UNIMPLEMENTED, or silence
    past the first-answer deadline). A call a control plane that answered
    ended otherwise (OK, FAILED_PRECONDITION, ...) stays with its address.
    """
    if isinstance(error, (PeerUnavailable, Unauthenticated, PermissionDenied)):
        return True
    return isinstance(error, StreamError) and not answered


def reason_of(error: BaseException | None) -> str:
    """The `reason` attribute of `llmgw.stream.reconnects` for how a round ended."""
    if error is None:
        return "ended"
    if isinstance(error, Unauthenticated):
        return "unauthenticated"
    if isinstance(error, PeerUnavailable):
        return "stopping" if error.details == STOPPING else "unavailable"
    if isinstance(error, StreamError):
        return error.code.name.lower()
    if isinstance(error, DecodeError):
        return "decode"
    return "error"
