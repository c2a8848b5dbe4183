"""The library's one exception hierarchy.

Every error says what was expected, what was found, and where: a path into
the value (`$.gpus[3].memory_total_mb`), the message type, or the file.
Messages are built here and nowhere else, so that they read alike.
"""

from __future__ import annotations

__all__ = ["DecodeError", "EncodeError", "JSONError", "StateFileError", "WireError"]


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
