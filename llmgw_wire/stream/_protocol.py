"""What both ends of the agent stream agree on: route, trailers, status texts, options.

The agent's end and the control plane's import these from here, and nothing
of each other.
"""

from __future__ import annotations

from typing import Final, TypeAlias

import grpc
from attrs import frozen

__all__ = [
    "CONNECT_ROUTE",
    "FAILED_TO_SERVE",
    "METHOD",
    "NOT_SERVING",
    "PEER_OVER_BUDGET",
    "REGISTRATION_DEADLINE",
    "SERVICE",
    "SHEDDING",
    "STOPPING",
    "TOO_MANY_WAITING",
    "TOO_MANY_WAITING_FROM_PEER",
    "GrpcOption",
    "Keepalive",
    "compression_of",
    "negotiated_compression",
]

GrpcOption: TypeAlias = tuple[str, int | str]
"""A grpc channel or server option: its name and its value (a number or a text)."""

#: The trailer with which a call ends for the registration deadline, so that
#: the agent tells that deadline from any other DEADLINE_EXCEEDED.
REGISTRATION_DEADLINE: Final = "llmgw-registration-deadline"

#: The stream's gRPC service and method.
SERVICE: Final = "llmgw.v1.AgentService"
METHOD: Final = "Connect"
#: The gRPC method path of `AgentService.Connect`.
CONNECT_ROUTE: Final = f"/{SERVICE}/{METHOD}"

# What an agent sees when `handle`, or `authorize`, failed with an exception
# that is not a StreamError: nothing of the exception itself.
FAILED_TO_SERVE: Final = "the control plane failed to serve"

# What a call beyond `ServerLimits.max_unregistered_calls` is told.
TOO_MANY_WAITING: Final = "too many calls waiting to register: connect again later"
# What a call beyond its peer's share of them is told
# (`ServerLimits.max_unregistered_calls_per_peer`).
TOO_MANY_WAITING_FROM_PEER: Final = (
    "too many calls from this peer waiting to register: connect again later"
)
# How the details begin of a call ended because its peer's messages, held and
# waiting, fill both its budgets of bytes (`ServerLimits.max_bytes_per_peer`).
PEER_OVER_BUDGET: Final = "too many bytes of messages from this peer waiting to be read"
# The RESOURCE_EXHAUSTED refusals that say the control plane is busy (many
# agents behind one address register at once after a failover), not that the
# agent's own message is wrong: an agent connects again at its usual pace.
SHEDDING: Final = (TOO_MANY_WAITING, TOO_MANY_WAITING_FROM_PEER, PEER_OVER_BUDGET)

# What an agent sees when the control plane stops with its call open.
STOPPING: Final = "the control plane is stopping"
# What an agent sees when the control plane is not to be served (a standby).
NOT_SERVING: Final = "the control plane is not serving"


@frozen
class Keepalive:
    """HTTP/2 keepalive: pings that find a dead connection without waiting for TCP.

    Attributes:
        time: seconds of silence before a ping.
        timeout: seconds to wait for the ping's answer before the connection
            counts as lost.
        permit_without_calls: ping even with no call open.
    """

    time: float = 30.0
    timeout: float = 10.0
    permit_without_calls: bool = True

    def client_options(self) -> list[GrpcOption]:
        """The channel options of an agent."""
        return [
            ("grpc.keepalive_time_ms", int(self.time * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.timeout * 1000)),
            ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
            ("grpc.http2.max_pings_without_data", 0),
        ]

    def server_options(self) -> list[GrpcOption]:
        """The server options of a control plane: its own pings, and which pings it allows."""
        return [
            ("grpc.keepalive_time_ms", int(self.time * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.timeout * 1000)),
            ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
            ("grpc.http2.max_pings_without_data", 0),
            # Agents ping as often as this keepalive: allow it, or the server
            # answers them with GOAWAY "too many pings".
            ("grpc.http2.min_ping_interval_without_data_ms", int(self.time * 1000 / 2)),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", int(self.time * 1000 / 2)),
        ]


_COMPRESSION = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate, None: None}


def compression_of(name: str | None) -> grpc.Compression | None:
    """The grpc compression for a name: "gzip", "deflate" or None."""
    if name not in _COMPRESSION:
        raise ValueError(f"Expected 'gzip', 'deflate' or None, got {name!r}")
    return _COMPRESSION[name]


# C-core chooses the algorithm of a compression *level* per call, among those
# the agent's grpc-accept-encoding lists (gzip ranks before deflate): the
# server compresses only toward an agent that can read it, as grpc-go's
# server does. A fixed algorithm would be used whatever the agent reads.
_COMPRESSION_LEVEL: Final = {"gzip": 1, "deflate": 3}  # LOW: gzip first; HIGH: deflate first


def negotiated_compression(name: str | None) -> list[GrpcOption]:
    """The server options that compress with `name` toward agents that accept it."""
    compression_of(name)  # the same names, the same error
    if name is None:
        return []
    return [("grpc.default_compression_level", _COMPRESSION_LEVEL[name])]
