"""The library's one exception hierarchy.

    WireError
    +-- EncodeError            a domain value the wire cannot carry
    +-- DecodeError            bytes that do not make the value asked for
    |   +-- JSONError
    |       +-- StateFileError
    +-- StreamError            how a call of the agent stream ended, by status code
        +-- PeerUnavailable    UNAVAILABLE: unreachable, lost, or stopping; retry
        +-- PermissionDenied   PERMISSION_DENIED / UNAUTHENTICATED
        +-- MessageRejected    INVALID_ARGUMENT: the peer refused a message as invalid
        +-- RegistrationTimeout DEADLINE_EXCEEDED: no registration in time
        +-- StreamClosed       sending on a session whose call is over

Every error says what was expected, what was found, and where: a path into
the value (`$.gpus[3].memory_total_mb`), the message type, or the file.
Messages are built here and nowhere else, so that they read alike.
"""

from __future__ import annotations

__all__ = [
    "DecodeError",
    "EncodeError",
    "JSONError",
    "MessageRejected",
    "PeerUnavailable",
    "PermissionDenied",
    "RegistrationTimeout",
    "StateFileError",
    "StreamClosed",
    "StreamError",
    "WireError",
]


class WireError(Exception):
    """Base class of every error the library raises on bad input."""


def format_path(path: tuple[str | int, ...]) -> str:
    """A path as errors show it: `$.gpus[3].memory_total_mb`."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class EncodeError(WireError, ValueError):
    """A domain value that cannot be put on the wire as it is.

    Attributes:
        expected: what the wire field takes, e.g. "int32".
        got: the offending value.
        path: where it is, as attribute names and sequence indices.
    """

    def __init__(self, expected: str, got: object, path: tuple[str | int, ...] = ()) -> None:
        self.expected = expected
        self.got = got
        self.path = path
        super().__init__(f"Expected `{expected}`, got {got!r} - at `{format_path(path)}`")

    def __reduce__(self) -> tuple[type[EncodeError], tuple[str, object, tuple[str | int, ...]]]:
        return type(self), (self.expected, self.got, self.path)


class DecodeError(WireError, ValueError):
    """Bytes, or a wire message, that do not make the value asked for.

    Attributes:
        message_type: the full proto name of the message being decoded.
        reason: what was wrong.
        path: where inside the message, when known.
    """

    def __init__(self, message_type: str, reason: str, path: tuple[str | int, ...] = ()) -> None:
        self.message_type = message_type
        self.reason = reason
        self.path = path
        where = f" - at `{format_path(path)}`" if path else ""
        super().__init__(f"Invalid `{message_type}`: {reason}{where}")

    def __reduce__(self) -> tuple[type[DecodeError], tuple[str, str, tuple[str | int, ...]]]:
        return type(self), (self.message_type, self.reason, self.path)


class JSONError(DecodeError):
    """A JSON document that does not make the domain value asked for.

    `message_type` is the name of the type asked for (`ShardSpec`), and
    `path` points into the document (`$.gpu_indices[2]`).
    """


class StateFileError(JSONError):
    """A shard's state file that cannot be loaded: not JSON, of an unknown format, or mistyped.

    Attributes:
        file: the file, as it was given.
        reason: what was wrong.
        path: where inside the document, when known.
    """

    def __init__(self, file: str, reason: str, path: tuple[str | int, ...] = ()) -> None:
        self.file = file
        self.message_type = "ShardState"
        self.reason = reason
        self.path = path
        where = f" - at `{format_path(path)}`" if path else ""
        # Led by the file rather than the message type: that is what an operator looks for.
        Exception.__init__(self, f"{file}: {reason}{where}")

    def __reduce__(self) -> tuple[type[StateFileError], tuple[str, str, tuple[str | int, ...]]]:
        return type(self), (self.file, self.reason, self.path)


#: The gRPC status codes, by name, as `StreamError.code` holds them.
STATUS_CODES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)


class StreamError(WireError):
    """A call of the agent stream that ended, or must end, with an error status.

    The agent's session raises it (or a subclass) when the control plane ends
    the call with an error status, or the connection fails; a control plane's
    `handle` raises it to end the call with `code` and `details`.

    Attributes:
        code: the gRPC status code's name, e.g. "FAILED_PRECONDITION".
        details: the status message, as the peer sees it.
    """

    default_code = "UNKNOWN"

    def __init__(self, details: str, *, code: str | None = None) -> None:
        code = self.default_code if code is None else code
        if code not in STATUS_CODES or code == "OK":
            raise ValueError(f"Expected a gRPC error status code, got {code!r}")
        self.code = code
        self.details = details
        super().__init__(f"{code}: {details}" if details else code)

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_stream_error, (type(self), self.details, self.code)

    @staticmethod
    def for_status(code: str, details: str) -> StreamError:
        """The most specific error for a call that ended with `code`."""
        kind = _BY_CODE.get(code, StreamError)
        return kind(details, code=code)


def _rebuild_stream_error(kind: type[StreamError], details: str, code: str) -> StreamError:
    return kind(details, code=code)


class PeerUnavailable(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The peer cannot be reached, the connection was lost, or the peer is stopping.

    What to do is the same in every case: connect again, after a backoff.
    """

    default_code = "UNAVAILABLE"


class PermissionDenied(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The control plane refused this agent: a certificate or token that does not fit."""

    default_code = "PERMISSION_DENIED"


class MessageRejected(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The peer refused a message as invalid, and ended the call (INVALID_ARGUMENT)."""

    default_code = "INVALID_ARGUMENT"


class RegistrationTimeout(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The agent did not register within the control plane's registration timeout."""

    default_code = "DEADLINE_EXCEEDED"


class StreamClosed(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """Sending on a session whose side is closed, or whose call is over."""

    default_code = "CANCELLED"


_BY_CODE: dict[str, type[StreamError]] = {
    "UNAVAILABLE": PeerUnavailable,
    "PERMISSION_DENIED": PermissionDenied,
    "UNAUTHENTICATED": PermissionDenied,
    "INVALID_ARGUMENT": MessageRejected,
    "DEADLINE_EXCEEDED": RegistrationTimeout,
}
