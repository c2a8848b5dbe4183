"""The grpc-go peers as real processes, for interop tests of the stream.

`make interop-go` builds two programs from the schema on grpc-go and
protobuf-go (``interop/go/``): a control plane and an agent. This module
starts them, reads what they print and stops them. Each prints one event per
line on stdout, a keyword and its arguments:

``LISTENING <port>``
    the control plane is bound (printed once, first)
``ENCODING <name>``
    the ``grpc-encoding`` the other side sent on a call (``identity`` for none)
``RECV <json>`` / ``SENT <json>``
    a message received or sent, as protojson with the schema's field names;
    int64 values are JSON strings, as protojson writes them, and a
    StartShard's ``api_key`` is ``"sha256:<hex>"`` of the key
    (:func:`key_digest`), never the key
``UNSENT <json>``
    (agent) a message the already ended call did not take
``STATUS <code> [<message>]``
    (agent) how the call ended, the code as grpcio's ``StatusCode`` names it
``END <code> [<message>]``
    (control plane) how the handler ended a call
``DONE``
    (control plane) the server stopped cleanly

Every wait here has a generous timeout (a process start on a loaded 2-core
machine can take seconds), and a failure says what the peer printed on
stdout and stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

__all__ = [
    "BIN_DIR",
    "CALL_TIMEOUT",
    "CONTROL_PLANE_API_KEY",
    "STARTUP_TIMEOUT",
    "AgentRun",
    "ControlPlanePeer",
    "GoPeer",
    "PeerError",
    "Peers",
    "TLSFiles",
    "binaries_missing",
    "key_digest",
    "kinds",
    "make_tls_files",
    "run_agent",
    "start_agent",
    "start_control_plane",
]

ROOT = Path(__file__).resolve().parents[2]

#: Where `make interop-go` puts the binaries; ``LLMGW_INTEROP_BIN`` overrides.
BIN_DIR = Path(os.environ.get("LLMGW_INTEROP_BIN") or ROOT / "build" / "interop" / "bin")

#: Seconds a control plane may take to print ``LISTENING``.
STARTUP_TIMEOUT = 60.0

#: The agent's deadline for its whole call, in seconds (its ``--timeout``).
CALL_TIMEOUT = 60.0

#: The api_key of every StartShard the Go control plane sends.
CONTROL_PLANE_API_KEY = "interop-api-key-0123456789"


class PeerError(AssertionError):
    """A Go peer did not do what the test waited for; says what it printed."""


def binaries_missing() -> str | None:
    """Say why the Go peers cannot run here, or ``None`` when they can."""
    missing = [n for n in ("agent", "agent-nogzip", "controlplane") if not (BIN_DIR / n).is_file()]
    if missing:
        return (
            f"the grpc-go peers are not built ({', '.join(missing)} missing in {BIN_DIR}); "
            "`make interop-go` builds them and runs these tests"
        )
    return None


def key_digest(key: str) -> str:
    """Give an api_key as the Go peers print it: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def kinds(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Give the oneof member of each logged envelope, e.g. ``["ack", "start_shard"]``."""
    return [next(iter(m), "") for m in messages]


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for TLS tests: a CA, a server and a client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def server_args(self, *, mutual: bool = True) -> list[str]:
        """Give the control plane's flags: TLS, and mutual TLS when `mutual`."""
        args = ["--tls-cert", str(self.server_cert), "--tls-key", str(self.server_key)]
        return [*args, "--tls-ca", str(self.ca)] if mutual else args

    def client_args(self, *, client_cert: bool = True) -> list[str]:
        """Give the agent's flags: the CA, and the client certificate when asked."""
        args = ["--tls-ca", str(self.ca)]
        if client_cert:
            args += ["--tls-cert", str(self.client_cert), "--tls-key", str(self.client_key)]
        return args


def make_tls_files(
    directory: Path,
    *,
    server_names: Sequence[str] = ("127.0.0.1", "localhost", "::1"),
    client_identity: str = "go-agent-1",
) -> TLSFiles:
    """Write a fresh CA and certificates into `directory` (needs ``trustme``).

    The server certificate is for `server_names` (IP addresses become IP
    SANs); the client certificate has `client_identity` as its DNS SAN and
    common name, the identity a control plane binds a node id to.
    """
    import trustme

    ca = trustme.CA()
    server = ca.issue_cert(*server_names)
    client = ca.issue_cert(client_identity, common_name=client_identity)
    files = TLSFiles(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    server.private_key_pem.write_to_path(str(files.server_key))
    client.private_key_pem.write_to_path(str(files.client_key))
    files.server_cert.write_bytes(b"".join(b.bytes() for b in server.cert_chain_pems))
    files.client_cert.write_bytes(b"".join(b.bytes() for b in client.cert_chain_pems))
    return files


class GoPeer:
    """One Go peer process; threads collect its stdout lines and its stderr.

    Its stdin is a pipe: closing it (:meth:`stop`) asks a control plane to
    stop gracefully.
    """

    def __init__(self, name: str, args: Sequence[str]) -> None:
        self.name = name
        self.args = [str(BIN_DIR / name), *args]
        self._cond = threading.Condition()
        self._lines: list[str] = []
        self._stderr: list[str] = []
        self._eof = False
        self.process = subprocess.Popen(
            self.args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_stdout, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self.process.stderr,), daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read_stdout(self, stream: Any) -> None:
        for line in stream:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_stderr(self, stream: Any) -> None:
        for line in stream:
            with self._cond:
                self._stderr.append(line)

    @property
    def lines(self) -> list[str]:
        """Give the stdout lines printed so far."""
        with self._cond:
            return list(self._lines)

    @property
    def stderr(self) -> str:
        """Give what the peer wrote on stderr so far (diagnostics, panics)."""
        with self._cond:
            return "".join(self._stderr)

    @property
    def pid(self) -> int:
        """Give the process id."""
        return self.process.pid

    def describe(self) -> str:
        """Give the command, its exit code and its output, for failure messages."""
        out = "\n".join(f"  {line[:400]}" for line in self.lines)
        return (
            f"{' '.join(self.args)}\n exit code: {self.process.poll()}\n"
            f" stdout:\n{out}\n stderr:\n{self.stderr}"
        )

    def wait_for(self, keyword: str, *, count: int = 1, timeout: float = 30.0) -> str:
        """Wait until `count` lines start with `keyword`; give the last of them.

        Raises:
            PeerError: the peer exited, or `timeout` seconds passed, first.
        """
        return self.wait_until(
            lambda lines: _nth(lines, keyword, count), f"{count} x {keyword}", timeout=timeout
        )

    def wait_until(
        self, found: Callable[[list[str]], str | None], what: str, *, timeout: float = 30.0
    ) -> str:
        """Wait until `found` gives a line for the lines so far; give it.

        Raises:
            PeerError: the peer closed its stdout, or `timeout` seconds passed, first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                line = found(self._lines)
                if line is not None:
                    return line
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    break
                self._cond.wait(left)
        why = "exited" if self._eof else f"gave nothing in {timeout:g} s"
        raise PeerError(f"{self.name} {why} while the test waited for {what}:\n{self.describe()}")

    async def wait_for_async(self, keyword: str, *, count: int = 1, timeout: float = 30.0) -> str:
        """Do :meth:`wait_for` without blocking the event loop."""
        return await asyncio.to_thread(self.wait_for, keyword, count=count, timeout=timeout)

    def _payloads(self, keyword: str) -> list[str]:
        prefix = keyword + " "
        return [line[len(prefix) :] for line in self.lines if line.startswith(prefix)]

    def recv(self) -> list[dict[str, Any]]:
        """Give every message received so far (``RECV`` lines), parsed."""
        return [json.loads(p) for p in self._payloads("RECV")]

    def sent(self) -> list[dict[str, Any]]:
        """Give every message sent so far (``SENT`` lines), parsed."""
        return [json.loads(p) for p in self._payloads("SENT")]

    def unsent(self) -> list[dict[str, Any]]:
        """Give every message the ended call did not take (``UNSENT`` lines)."""
        return [json.loads(p) for p in self._payloads("UNSENT")]

    def status(self) -> tuple[str, str] | None:
        """Give how the agent's call ended so far (the last ``STATUS`` line): (code, message)."""
        statuses = self._payloads("STATUS")
        return _code_and_message(statuses[-1]) if statuses else None

    def encodings(self) -> list[str]:
        """Give the ``grpc-encoding`` the other side sent, one per call."""
        return self._payloads("ENCODING")

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit; give its exit code.

        Raises:
            PeerError: it is still running after `timeout` seconds.
        """
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise PeerError(
                f"{self.name} still running after {timeout:g} s:\n{self.describe()}"
            ) from None
        for t in self._readers:
            t.join(timeout)
        return code

    def close_stdin(self) -> None:
        """Close the peer's stdin: a control plane then stops gracefully."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            # a peer that already exited leaves a broken pipe; it is closed all the same
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()

    def terminate(self) -> None:
        """Send SIGTERM: a control plane stops gracefully."""
        if self.process.poll() is None:
            self.process.terminate()

    def kill(self) -> None:
        """Send SIGKILL: the peer dies at once, its connections reset."""
        if self.process.poll() is None:
            self.process.kill()

    def stop(self, timeout: float = 30.0) -> int:
        """Stop the peer, gracefully first; give its exit code.

        Its stdin closes; after `timeout` seconds it gets SIGTERM, then SIGKILL.
        """
        self.close_stdin()
        for signal_it in (None, self.terminate, self.kill):
            if signal_it is not None:
                signal_it()
            try:
                code = self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                continue
            for t in self._readers:
                t.join(timeout)
            return code
        return self.process.wait()

    def __enter__(self) -> GoPeer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ControlPlanePeer(GoPeer):
    """The Go control plane, bound: :attr:`port` and :attr:`target` are known."""

    port: int

    @property
    def target(self) -> str:
        """Give ``127.0.0.1:<port>``, what an agent dials."""
        return f"127.0.0.1:{self.port}"

    def ends(self) -> list[tuple[str, str]]:
        """Give how each call ended on the server (``END`` lines): (code, message)."""
        return [_code_and_message(p) for p in self._payloads("END")]


@dataclass(frozen=True)
class AgentRun:
    """What a Go agent did, once it exited."""

    returncode: int
    lines: list[str]
    recv: list[dict[str, Any]]
    sent: list[dict[str, Any]]
    unsent: list[dict[str, Any]]
    status: tuple[str, str] | None
    stderr: str
    description: str


def start_control_plane(
    scenario: str = "serve",
    *,
    gzip: bool = False,
    tls: TLSFiles | None = None,
    mutual_tls: bool = True,
    listen: str = "127.0.0.1:0",
    start_padding: int = 0,
    extra_args: Sequence[str] = (),
    startup_timeout: float = STARTUP_TIMEOUT,
) -> ControlPlanePeer:
    """Start the Go control plane and wait until it listens.

    `scenario` is ``graceful``, ``status``, ``serve`` or ``bad-then-good``
    (see the docs page "Interop with grpc-go"); `gzip` compresses every
    message it sends; `tls` serves TLS, mutual unless `mutual_tls` is false;
    `start_padding` adds that many bytes to every StartShard.

    Raises:
        PeerError: it exited, or did not listen within `startup_timeout` seconds.
    """
    args = ["--listen", listen, "--scenario", scenario, *extra_args]
    if start_padding:
        args += ["--start-padding", str(start_padding)]
    if gzip:
        args.append("--gzip")
    if tls is not None:
        args += tls.server_args(mutual=mutual_tls)
    peer = ControlPlanePeer("controlplane", args)
    try:
        line = peer.wait_for("LISTENING", timeout=startup_timeout)
    except PeerError:
        peer.stop(timeout=5.0)
        raise
    peer.port = int(line.split()[1])
    return peer


def start_agent(
    target: str,
    *,
    scenario: str = "register",
    node_id: str = "go-agent-1",
    gzip: bool = False,
    tls: TLSFiles | None = None,
    client_cert: bool = True,
    ready: bool = False,
    close_after: int = 0,
    cancel_after: int = 0,
    extra_gpus: int = 0,
    timeout: float = CALL_TIMEOUT,
    extra_args: Sequence[str] = (),
    binary: str = "agent",
) -> GoPeer:
    """Start the Go agent against `target`; it runs on its own.

    `scenario` is ``register`` or ``bad-then-good``; `ready` answers every
    StartShard with a ShardStatus READY; `close_after` half-closes after that
    many ControlMessages; `cancel_after` cancels the call (no half-close) and
    exits after that many; `extra_gpus` adds whole cards to the Register;
    `timeout` is the deadline of its call; `binary` is ``agent`` or
    ``agent-nogzip`` (built without the gzip encoding).
    """
    args = [
        "--target",
        target,
        "--scenario",
        scenario,
        "--node-id",
        node_id,
        "--timeout",
        f"{timeout:g}s",
        *extra_args,
    ]
    if gzip:
        args.append("--gzip")
    if ready:
        args.append("--ready")
    if close_after:
        args += ["--close-after", str(close_after)]
    if cancel_after:
        args += ["--cancel-after", str(cancel_after)]
    if extra_gpus:
        args += ["--extra-gpus", str(extra_gpus)]
    if tls is not None:
        args += tls.client_args(client_cert=client_cert)
    return GoPeer(binary, args)


def run_agent(target: str, **options: Any) -> AgentRun:
    """Run the Go agent to its end (as :func:`start_agent` takes options).

    Raises:
        PeerError: it did not exit within its call deadline plus 30 s.
    """
    peer = start_agent(target, **options)
    timeout = float(options.get("timeout", CALL_TIMEOUT)) + 30.0
    try:
        code = peer.wait(timeout)
    finally:
        peer.stop(timeout=5.0)
    return AgentRun(
        returncode=code,
        lines=peer.lines,
        recv=peer.recv(),
        sent=peer.sent(),
        unsent=peer.unsent(),
        status=peer.status(),
        stderr=peer.stderr,
        description=peer.describe(),
    )


class Peers:
    """Every peer a test started, stopped when the test ends (the `peers` fixture)."""

    def __init__(self) -> None:
        self._started: list[GoPeer] = []

    def control_plane(self, scenario: str = "serve", **options: Any) -> ControlPlanePeer:
        """Do :func:`start_control_plane`, stopping it at the end of the test."""
        peer = start_control_plane(scenario, **options)
        self._started.append(peer)
        return peer

    def agent(self, target: str, **options: Any) -> GoPeer:
        """Do :func:`start_agent`, stopping it at the end of the test."""
        peer = start_agent(target, **options)
        self._started.append(peer)
        return peer

    def close(self) -> None:
        """Stop every peer still running, the last started first."""
        while self._started:
            self._started.pop().stop(timeout=10.0)


def _nth(lines: list[str], keyword: str, count: int) -> str | None:
    seen = 0
    for line in lines:
        if line == keyword or line.startswith(keyword + " "):
            seen += 1
            if seen == count:
                return line
    return None


def _code_and_message(payload: str) -> tuple[str, str]:
    code, _, message = payload.partition(" ")
    return code, message
