"""Both ends of the agent stream, `AgentService.Connect`, in domain values, on grpc.aio.

An agent sends `Registration`, `ShardReport` and `Heartbeat` values; the
control plane sends `ShardCommand`, `StopCommand` and `Ack` values. The
sessions put each value in its envelope and take it out again with the
library's envelope codec (`llmgw_wire.codec.envelope`, upb), and hand raw
bytes to grpcio's asyncio API (the official C core), which moves them:

* the agent opens the stream with `connect(target)` and gets an
  `AgentSession`; `keep_connected` reconnects it with backoff and jitter and
  registers again each time, with what the agent runs then;
* the control plane subclasses `ControlPlane`, whose `handle(session)` runs
  once per connected agent with a `ControlSession`; `start_server` serves it
  and gives a `Server` (its `port`, `await stop(grace)`), with the standard
  health service beside the stream and, when OpenTelemetry's API is
  installed, its metrics.

Both sessions have `send(value)`, `recv(timeout=...)`, `async for value in
session`; the agent's also `close()`. A receive timeout leaves the session
usable: messages are read by a task of the session's own.

The errors a service handles are the library's own (`llmgw_wire.errors`,
re-exported here), never grpc's:

* `EncodeError` from `send`: a value the wire cannot carry (nothing is sent);
* `StreamError` from `recv`, when the call ended with an error status, with
  `code` (a `StatusCode`) and `details`; its subclasses `PeerUnavailable`
  (the peer is gone: unreachable, the connection lost, the call cancelled by
  the peer, or the control plane stopping: connect again), `PermissionDenied`,
  `Unauthenticated` (a failed TLS handshake, with its `reason`),
  `MessageRejected` (INVALID_ARGUMENT) and `RegistrationTimeout` (the control
  plane's registration deadline only);
* `StreamClosed` from `send` on a session whose side is closed or whose call
  is over: a programming error (`UsageError`, a `RuntimeError`), not a
  `StreamError`;
* `DecodeError`, only with `on_bad_message="end"`; by default a message that
  does not decode is logged in one line and skipped.

An envelope with no member this version knows, which is what a newer peer's
new kind of message looks like, is skipped and logged on the
`llmgw_wire.stream` logger (a warning the first time a session sees it, for
16 such members at most);
it never ends the stream. Nothing here logs a value's fields, so secrets such
as `ShardSpec.api_key` stay out of the logs.

An agent, in full::

    async with connect("10.0.0.1:7070") as session:
        await session.send(registration)
        async for command in session:  # ShardCommand, StopCommand or Ack
            ...

grpc's C core logs to stderr by itself; how much is the application's
choice, made before grpc is first imported: `GRPC_VERBOSITY` (`ERROR`,
`NONE`, ...) and `GRPC_TRACE` in the environment. The library sets neither
(`docs/guides/stream.md` shows how).

grpclib stays usable beside it, with the `grpclib` extra:
`llmgw_wire.stream.grpclib_codec.WireCodec` reads through the library's codec,
and grpclib peers talk to these ends both ways.
"""

from __future__ import annotations

from llmgw_wire.errors import (
    MessageRejected,
    PeerUnavailable,
    PermissionDenied,
    RegistrationTimeout,
    StreamClosed,
    StreamError,
    Unauthenticated,
)
from llmgw_wire.stream._agent import (
    Backoff,
    ConnectOptions,
    connect,
    keep_connected,
    registration_from_inventory,
)
from llmgw_wire.stream._limits import ServerLimits
from llmgw_wire.stream._protocol import CONNECT_ROUTE, GrpcOption, Keepalive
from llmgw_wire.stream._server import (
    AgentService,
    ControlPlane,
    Server,
    add_to_server,
    server_options,
    start_server,
)
from llmgw_wire.stream._session import (
    REFUSED_COMMAND,
    AgentSession,
    ControlSession,
    FromAgent,
    FromControl,
)
from llmgw_wire.stream._tls import ClientTLS, PeerCertificate, ServerTLS, node_ids_of

__all__ = [
    "CONNECT_ROUTE",
    "REFUSED_COMMAND",
    "AgentService",
    "AgentSession",
    "Backoff",
    "ClientTLS",
    "ConnectOptions",
    "ControlPlane",
    "ControlSession",
    "FromAgent",
    "FromControl",
    "GrpcOption",
    "Keepalive",
    "MessageRejected",
    "PeerCertificate",
    "PeerUnavailable",
    "PermissionDenied",
    "RegistrationTimeout",
    "Server",
    "ServerLimits",
    "ServerTLS",
    "StreamClosed",
    "StreamError",
    "Unauthenticated",
    "add_to_server",
    "connect",
    "keep_connected",
    "node_ids_of",
    "registration_from_inventory",
    "server_options",
    "start_server",
]
