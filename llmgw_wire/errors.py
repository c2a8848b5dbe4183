"""The library's one exception tree: what a caller catches, and for what.

    WireError                      every error of the library's own
    +-- EncodeError (ValueError)   bad input: a value the wire cannot carry
    +-- DecodeError (ValueError)   bad input: bytes that do not make the value asked for
    |   +-- JSONError              a JSON document that does not
    +-- StoreError                 the shard store could not save, load or delete
    |   +-- StateFileInvalid       a file that is not a saved shard this version reads
    |   +-- StoreOSError           the filesystem refused: a full disk, permissions, ...
    +-- StreamError                a call of the agent stream ended with an error status (`code`)
    |   +-- PeerUnavailable        UNAVAILABLE, the connection lost, or the call cancelled
    |   |                          by the peer: the peer is gone; connect again, after a backoff
    |   +-- PermissionDenied       PERMISSION_DENIED: refused by the control plane; give up
    |   +-- Unauthenticated        UNAUTHENTICATED: the TLS handshake or a certificate failed
    |   |                          (`reason`); a rotated certificate may fix it
    |   +-- MessageRejected        INVALID_ARGUMENT: the peer refused a message as invalid
    |   +-- RegistrationTimeout    DEADLINE_EXCEEDED of the control plane's registration deadline
    +-- InternalError              the library disagreeing with itself: a bug to report
    +-- UsageError (RuntimeError)  a programming error: asked for what cannot be done now
    |   +-- StreamClosed           sending on a session whose side is closed, or whose call is over
    +-- CompatError                (`llmgw_wire.compat`) a schema the checker cannot read or find

So: bad bytes are `DecodeError`, a value the wire cannot carry is
`EncodeError`, the store's failures are `StoreError` (never a `DecodeError`: a
full disk is not bad input), the stream's ends are `StreamError` with a
`StatusCode`, and a programming error is a `UsageError`. Outside the tree
are Python's own errors for an argument that is not of the kind a function
takes (`TypeError`, `ValueError`), and an exception of the transport that
does not mean "the peer is gone", which propagates as itself.

Every error says what was expected, what was found, and where: a path into
the value (`$.gpus[3].memory_total_mb`), the message type, or the file.
Messages are built here and nowhere else, so that they read alike, and every
value an error shows goes through one function, `shown`, that knows secrets:
a value that is a secret (a field the schema marks `[debug_redact = true]`)
is shown only as what type it is, and an error keeps in its attributes a
`Redacted` stand-in, never the value.

`StateFileError`, the store's error before it had a tree of its own, is a
deprecated alias of `StoreError`.
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
    "StateFileInvalid",
    "StatusCode",
    "StoreError",
    "StoreOSError",
    "StreamClosed",
    "StreamError",
    "Unauthenticated",
    "UsageError",
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
    """Base class of the library's own errors; its branches say which kind."""


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


class StoreError(WireError):
    """The shard store (`llmgw_wire.store.ShardStore`) could not save, load or delete.

    Raised by the store for every failure, as itself or a subclass: a value
    it cannot save (the wire cannot carry it, or its file would be too
    large), its directory not a directory or not this process's, and:

    * `StateFileInvalid`: a file that is not a saved shard this version
      reads (not JSON, an unknown format, mistyped, too large, another
      shard's, or not a regular file);
    * `StoreOSError`: the filesystem refused (a full disk, permissions, ...).

    Attributes:
        file: the file (or the store's directory).
        reason: what was wrong.
        path: where inside the document, when known.
    """

    #: Kept from when the store's errors were decode errors.
    message_type = "SavedShard"

    def __init__(self, file: str, reason: str, path: tuple[str | int, ...] = ()) -> None:
        self.file = file
        self.reason = reason
        self.path = path
        where = f" - at `{format_path(path)}`" if path else ""
        # Led by the file rather than the message type: that is what an operator looks for.
        super().__init__(f"{file}: {reason}{where}")

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.file, self.reason, self.path)


class StateFileInvalid(StoreError):  # noqa: N818 (says what the file is, as httpx names its)
    """A file in the store that is not a saved shard this version reads."""


class StoreOSError(StoreError):
    """The filesystem refused what the store asked of it: a full disk, permissions, ...

    Attributes:
        errno: the `OSError`'s errno (`errno.ENOSPC` for a full disk), when it had one.
    """

    def __init__(
        self,
        file: str,
        reason: str,
        path: tuple[str | int, ...] = (),
        *,
        errno: int | None = None,
    ) -> None:
        super().__init__(file, reason, path)
        self.errno = errno

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_os_error, (self.file, self.reason, self.path, self.errno)


def _rebuild_os_error(
    file: str, reason: str, path: tuple[str | int, ...], errno: int | None
) -> StoreOSError:
    return StoreOSError(file, reason, path, errno=errno)


#: Deprecated alias of `StoreError`, the store's error before it had a tree of its own.
StateFileError = StoreError


class StatusCode(enum.IntEnum):
    """The gRPC status codes, with gRPC's numbers, as `StreamError.code` holds them.

    A code reads as its name (`f"{code}"` is "UNAVAILABLE") and compares as
    its number; `grpc.StatusCode[code.name]` is grpc's own.
    """

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


def _status_code(code: StatusCode | str | int) -> StatusCode:
    """`code` as a `StatusCode`: a member, its name, or its number."""
    try:
        if isinstance(code, str):
            return StatusCode[code]
        return StatusCode(code)
    except (KeyError, ValueError):
        raise ValueError(f"Expected a gRPC status code, got {code!r}") from None


class StreamError(WireError):
    """A call of the agent stream that ended, or must end, with an error status.

    The agent's session raises it (or a subclass) when the control plane ends
    the call with an error status, or the connection fails; a control plane's
    `handle` raises it to end the call with `code` and `details`.

    Attributes:
        code: the gRPC status code, a `StatusCode` (`StatusCode.FAILED_PRECONDITION`).
        details: the status message, as the peer sees it.
    """

    default_code = StatusCode.UNKNOWN

    def __init__(self, details: str, *, code: StatusCode | str | int | None = None) -> None:
        status = self.default_code if code is None else _status_code(code)
        if status is StatusCode.OK:
            raise ValueError(f"Expected a gRPC error status code, got {code!r}")
        self.code: StatusCode = status
        self.details = details
        super().__init__(f"{status.name}: {details}" if details else status.name)

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_stream_error, (type(self), self.details, self.code)

    @staticmethod
    def for_status(
        code: StatusCode | str | int, details: str, *, registration: bool = False
    ) -> StreamError:
        """The most specific error for a call that ended with `code`.

        Args:
            code: the status code (a `StatusCode`, its name or its number).
            details: the status message.
            registration: whether the control plane said the call ended for
                its registration deadline; only then is DEADLINE_EXCEEDED a
                `RegistrationTimeout`.
        """
        status = _status_code(code)
        kind = _BY_CODE.get(status, StreamError)
        if registration and status is StatusCode.DEADLINE_EXCEEDED:
            kind = RegistrationTimeout
        return kind(details, code=status)


def _rebuild_stream_error(kind: type[StreamError], details: str, code: StatusCode) -> StreamError:
    return kind(details, code=code)


class PeerUnavailable(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The peer is gone: it cannot be reached, the connection was lost, or it is stopping.

    Raised for UNAVAILABLE, for a connection that is lost, and for a call the
    peer cancelled (CANCELLED; `code` says which), and for nothing else. What
    to do is the same in every case: connect again, after a backoff.
    """

    default_code = StatusCode.UNAVAILABLE


class PermissionDenied(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The control plane refused this agent: a certificate or token that does not fit."""

    default_code = StatusCode.PERMISSION_DENIED


class Unauthenticated(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The TLS handshake or a certificate failed: unknown CA, expired, wrong name, none given.

    What grpc reports as UNAVAILABLE for a handshake that failed, the agent
    sees as this error, with `reason` saying what was wrong; a rotated
    certificate may fix it, so `keep_connected` retries it.

    Attributes:
        reason: what was wrong, in a few words (e.g. "the certificate is
            signed by an unknown CA").
    """

    default_code = StatusCode.UNAUTHENTICATED

    def __init__(
        self, details: str, *, code: StatusCode | str | int | None = None, reason: str = ""
    ) -> None:
        super().__init__(details, code=code)
        self.reason = reason or details
        if self.reason != details:
            # What was wrong first; grpc's own words after it.
            Exception.__init__(self, f"{self.code}: {self.reason} ({details})")

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_unauthenticated, (self.details, self.code, self.reason)


def _rebuild_unauthenticated(details: str, code: StatusCode, reason: str) -> Unauthenticated:
    return Unauthenticated(details, code=code, reason=reason)


class MessageRejected(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The peer refused a message as invalid, and ended the call (INVALID_ARGUMENT)."""

    default_code = StatusCode.INVALID_ARGUMENT


class RegistrationTimeout(StreamError):  # noqa: N818 (named for the status, as httpx names its)
    """The agent did not register within the control plane's registration timeout.

    Only the control plane's registration deadline is this error; any other
    DEADLINE_EXCEEDED is a plain `StreamError`.
    """

    default_code = StatusCode.DEADLINE_EXCEEDED


class UsageError(WireError, RuntimeError):
    """The library was asked for something it cannot do in this state: a programming error."""


class StreamClosed(UsageError):  # noqa: N818 (named for the state, as httpx names its)
    """Sending on a session whose side is closed, or whose call is over.

    A programming error, not a status of the call: how the call ended, the
    session's `recv` raises.
    """


_BY_CODE: dict[StatusCode, type[StreamError]] = {
    StatusCode.UNAVAILABLE: PeerUnavailable,
    # A call that ends CANCELLED was cancelled by the peer (or a proxy
    # between): an end of its own, not of this side's doing.
    StatusCode.CANCELLED: PeerUnavailable,
    StatusCode.PERMISSION_DENIED: PermissionDenied,
    StatusCode.UNAUTHENTICATED: Unauthenticated,
    StatusCode.INVALID_ARGUMENT: MessageRejected,
}
