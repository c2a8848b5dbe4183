"""The library's one exception hierarchy.

    WireError
    +-- EncodeError            a domain value the wire cannot carry
    +-- DecodeError            bytes that do not make the value asked for
    |   +-- JSONError
    |       +-- StateFileError a shard store's file, or the store itself
    +-- InternalError          the library disagreeing with itself: a bug to report
    +-- StreamError            how a call of the agent stream ended, by status code
        +-- PeerUnavailable    UNAVAILABLE: unreachable, lost, or stopping; retry
        +-- PermissionDenied   PERMISSION_DENIED / UNAUTHENTICATED
        +-- MessageRejected    INVALID_ARGUMENT: the peer refused a message as invalid
        +-- RegistrationTimeout DEADLINE_EXCEEDED: no registration in time
        +-- StreamClosed       sending on a session whose call is over

Every error says what was expected, what was found, and where: a path into
the value (`$.gpus[3].memory_total_mb`), the message type, or the file.
Messages are built here and nowhere else, so that they read alike, and every
value an error shows goes through one function, `shown`, that knows secrets:
a value that is a secret (a field the schema marks `[debug_redact = true]`)
is shown only as what type it is, and an error keeps in its attributes a
`Redacted` stand-in, never the value.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Mapping

__all__ = [
    "DecodeError",
    "EncodeError",
    "InternalError",
    "JSONError",
    "MessageRejected",
    "PeerUnavailable",
    "PermissionDenied",
    "Redacted",
    "RegistrationTimeout",
    "StateFileError",
    "StreamClosed",
    "StreamError",
    "WireError",
    "format_path",
    "shown",
]

#: The longest a value is shown in an error, in characters; longer ones are cut short.
LONGEST_SHOWN = 60
# Ints shown in full up to this many bits (about 60 digits): beyond, only their
# size, since turning an int of more than 4300 digits into text raises.
_LONGEST_INT_BITS = 200


class Redacted:
    """Stands for a secret's value, in an error's attributes and wherever it is shown.

    It says only the type of what it replaces (`Redacted("bytes")`), which
    helps find a mistyped secret without showing it.
    """

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<secret {self.type_name}, not shown>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Redacted) and other.type_name == self.type_name

    def __hash__(self) -> int:
        return hash((Redacted, self.type_name))

    def __reduce__(self) -> tuple[type[Redacted], tuple[str]]:
        return type(self), (self.type_name,)


def _cut(text: str) -> str:
    return text if len(text) <= LONGEST_SHOWN else text[: LONGEST_SHOWN - 3] + "..."


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def shown(value: object, *, secret: bool = False, spelling: str = "python") -> str:
    """`value` as an error shows it to a human: the one renderer of the library.

    * A secret is never shown, only its type, in one placeholder for every
      surface (reprs, errors, command-line output): `<secret str, not shown>`.
    * Scalars (None, bool, int, float, str, bytes, enum members, dates and
      durations) as their `repr` (or as JSON spells them, with
      `spelling="json"`), cut short at `LONGEST_SHOWN` characters; an int of
      more than about 60 digits only by its size.
    * Anything else, a container or a model, only as what it is
      (`a list of 3 items`, `a ShardSpec`): what it holds may be a secret.

    Args:
        value: what to show.
        secret: whether `value` is a secret.
        spelling: "python" for values of the domain, "json" for values of a
            JSON document (`"a"`, `true`, `null`).
    """
    if isinstance(value, Redacted):
        return repr(value)
    if secret:
        return repr(Redacted(type(value).__name__))
    if isinstance(value, int) and value.bit_length() > _LONGEST_INT_BITS:
        return f"an int of {value.bit_length()} bits"
    if spelling == "json":
        return _json_kind(value) if isinstance(value, (list, dict)) else _cut(_json(value))
    return _python(value)


def _json(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: escaped, so that the message can be printed and logged.
        return json.dumps(value)
    return text


_SCALARS = (type(None), bool, int, float, str, bytes, enum.Enum, dt.date, dt.time, dt.timedelta)


def _python(value: object) -> str:
    if isinstance(value, _SCALARS):
        return _cut(repr(value))
    if isinstance(value, (list, tuple, set, frozenset, bytearray, Mapping)):
        count = len(value)
        return f"a {type(value).__name__} of {count} item{'' if count == 1 else 's'}"
    return f"a {type(value).__name__}"


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
        got: the offending value; for a secret, a `Redacted` stand-in.
        path: where it is, as attribute names and sequence indices.
        secret: whether the offending value is a secret.
    """

    def __init__(
        self,
        expected: str,
        got: object,
        path: tuple[str | int, ...] = (),
        *,
        secret: bool = False,
    ) -> None:
        if secret and not isinstance(got, Redacted):
            got = Redacted(type(got).__name__)
        self.expected = expected
        self.got = got
        self.path = path
        self.secret = secret or isinstance(got, Redacted)
        super().__init__(f"Expected `{expected}`, got {shown(got)} - at `{format_path(path)}`")

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


class InternalError(WireError):
    """The fast path refused a value that the mapping's explanation accepts.

    The compiled conversion functions and the explaining walk of the mapping
    are two readings of one table; this error says they disagree about a
    value, which is a bug in the library, not bad input. It names the type
    and the path of the value, never the value itself (it may hold a secret).

    Attributes:
        type_name: the domain model or message type refused.
        path: where the refused value is.
        direction: "encode" or "decode".
    """

    def __init__(
        self, type_name: str, path: tuple[str | int, ...] = (), direction: str = "encode"
    ) -> None:
        self.type_name = type_name
        self.path = path
        self.direction = direction
        super().__init__(
            f"Internal error: the fast path refused to {direction} a `{type_name}` that the"
            f" mapping's checks accept - at `{format_path(path)}`; please report it"
        )

    def __reduce__(self) -> tuple[type[InternalError], tuple[str, tuple[str | int, ...], str]]:
        return type(self), (self.type_name, self.path, self.direction)


class JSONError(DecodeError):
    """A JSON document that does not make the domain value asked for.

    `message_type` is the name of the type asked for (`ShardSpec`), and
    `path` points into the document (`$.gpu_indices[2]`).
    """


class StateFileError(JSONError):
    """A shard store's file that cannot be saved, loaded or deleted, or its directory.

    Raised by `llmgw_wire.store.ShardStore` for every failure: a file that is
    not JSON, of an unknown format, mistyped, too large or not a regular
    file; a value the wire cannot carry; a full filesystem or another
    `OSError`, whose reason it gives.

    Attributes:
        file: the file (or the store's directory).
        reason: what was wrong.
        path: where inside the document, when known.
    """

    def __init__(self, file: str, reason: str, path: tuple[str | int, ...] = ()) -> None:
        self.file = file
        self.message_type = "SavedShard"
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
