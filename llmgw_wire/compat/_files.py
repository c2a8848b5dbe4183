"""Bounded reads of regular files, for every file the checker opens.

A schema folder, a git tree or a configuration may come from someone else:
a `.proto` that is a link to `/dev/zero`, a FIFO, or a file of gigabytes must
be refused quickly with a message, never read to the end or waited on.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

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

_CHUNK = 1 << 16


def read_at_most(stream: BinaryIO, limit: int) -> bytes:
    """At most `limit + 1` bytes of `stream`: one more than allowed tells an over-long input."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = stream.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


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
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise CompatError(
                f"{shown} is a symbolic link; the checker reads only regular files"
            ) from None
        raise CompatError(f"cannot read {shown}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as stream:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise CompatError(
                f"{shown} is not a regular file; the checker reads only regular files"
            )
        data = read_at_most(stream, limit)
    if len(data) > limit:
        raise CompatError(f"{shown} is larger than the checker's limit of {_mib(limit)}")
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
