"""Bounded reads of regular files, for every file the checker opens.

A schema folder, a git tree or a configuration may come from someone else:
a `.proto` that is a link to `/dev/zero`, a FIFO, or a file of gigabytes must
be refused quickly with a message, never read to the end or waited on.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from llmgw_wire._files import LINK, FileRefusedError, read_limited, read_regular
from llmgw_wire.compat._model import CompatError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DESCRIPTOR_SET_BYTES",
    "MAX_PROTO_BYTES",
    "read_at_most",
    "read_regular_file",
    "safe_relative",
]

#: The largest `.proto` file the checker reads (protoc's own inputs are far smaller).
MAX_PROTO_BYTES = 4 * 1024 * 1024
#: The largest descriptor set (`.binpb`) it reads.
MAX_DESCRIPTOR_SET_BYTES = 64 * 1024 * 1024
#: The largest configuration file (`buf.yaml`, `pyproject.toml`) it reads.
MAX_CONFIG_BYTES = 1024 * 1024


def read_at_most(stream: BinaryIO, limit: int) -> bytes:
    """At most `limit + 1` bytes of `stream`: one more than allowed tells an over-long input."""
    return read_limited(stream.read, limit)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def read_regular_file(
    path: str | os.PathLike[str], limit: int, *, follow_links: bool = True
) -> bytes:
    """The bytes of the regular file `path`, refused if larger than `limit`.

    The file is opened without blocking (a FIFO with no writer does not hang)
    and, unless `follow_links`, without following a symbolic link; anything but
    a regular file (a FIFO, a device, a socket) is refused.

    Raises:
        CompatError: the file cannot be opened, is a link (when not followed),
            is not a regular file, or is larger than `limit`.
    """
    shown = os.fspath(path)
    try:
        data, _ = read_regular(path, limit, follow_links=follow_links)
    except OSError as exc:
        raise CompatError(f"cannot read {shown}: {exc.strerror}") from None
    except FileRefusedError as exc:
        if exc.kind == LINK:
            reason = "is a symbolic link"
        elif exc.kind is not None:
            reason = "is not a regular file"
        else:
            raise CompatError(
                f"{shown} is larger than the checker's limit of {_mib(limit)}"
            ) from None
        raise CompatError(f"{shown} {reason}; the checker reads only regular files") from None
    return data


def safe_relative(path: str, what: str) -> str:
    """`path` if it is relative and stays inside its folder (no `..`, no absolute path).

    Raises:
        CompatError: `path` is absolute, empty, or climbs out with `..`.
    """
    parts = path.replace("\\", "/").split("/")
    if not path or path.startswith(("/", "\\")) or (len(parts[0]) == 2 and parts[0][1] == ":"):
        raise CompatError(f"{what}: Expected a relative path inside the folder, got {path!r}")
    if ".." in parts:
        raise CompatError(f"{what}: Expected a path that stays inside the folder, got {path!r}")
    return path
