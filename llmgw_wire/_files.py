"""Bounded reads of regular files: how the package reads a file it is pointed at.

A TLS file, a shard store's file or a schema may have become something else:
a link to `/dev/zero`, a FIFO no one writes, a device, a file of gigabytes.
Each is refused quickly, with what it is, rather than waited on or read to
the end. The callers turn `FileRefusedError` into their own errors and words
(the TLS settings, the store, the schema checker); this module depends on
nothing of the package.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LINK", "FileRefusedError", "read_limited", "read_regular"]

#: The `kind` of a symbolic link refused when links are not followed.
LINK = "a symbolic link"

# O_NONBLOCK so that opening a FIFO does not wait for a writer; getattr for
# the flags some platforms lack (Windows has no O_NONBLOCK, only it has O_BINARY).
_OPEN = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 1 << 16
_KINDS = (
    (stat.S_ISLNK, LINK),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefusedError(Exception):
    """A file not read: not a regular file, or larger than the limit.

    Attributes:
        path: the path as given.
        kind: what the file is when it is not a regular file ("a FIFO",
            "a symbolic link" when links are not followed, ...); None when it
            is too large.
        size: when too large, its size as `fstat` gave it, or the bytes read
            (`limit + 1`) when it grew past that while being read.
        limit: the largest size allowed, in bytes.
        grew: the file was found too large while being read, not by `fstat`.
    """

    def __init__(
        self,
        path: str,
        *,
        kind: str | None = None,
        size: int = 0,
        limit: int = 0,
        grew: bool = False,
    ) -> None:
        self.path, self.kind, self.size, self.limit, self.grew = path, kind, size, limit, grew
        if kind is not None:
            message = f"{path} is not a regular file ({kind})"
        else:
            more = " or more" if grew else ""
            message = f"{path} is larger than {limit} bytes ({size} bytes{more})"
        super().__init__(message)


def read_limited(read: Callable[[int], bytes], limit: int, *, chunk_size: int = _CHUNK) -> bytes:
    """At most `limit + 1` bytes from `read` (a stream's, a descriptor's) until it gives none.

    One byte more than allowed tells an over-long input from one exactly at
    the limit, without reading the rest of it. Each call of `read` asks for
    at most `chunk_size` bytes.
    """
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = read(min(chunk_size, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_regular(
    path: str | os.PathLike[str],
    limit: int,
    *,
    follow_links: bool = True,
    dir_fd: int | None = None,
    check: Callable[[os.stat_result], None] | None = None,
) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at `path`, at most `limit` of them, and its `fstat`.

    The path is looked at first, so that a device or a FIFO is refused
    without being opened; then the file is opened without blocking (and,
    unless `follow_links`, without following a symbolic link) and its
    descriptor checked again, since that is what is read. `check`, when
    given, sees the descriptor's `fstat` before its size is checked and a
    byte is read; what it raises goes through. `dir_fd` is as for `os.open`.

    Raises:
        FileRefusedError: it is not a regular file (a link, when not followed), or
            larger than `limit`.
        OSError: the file system refused (no such file, permissions, ...).
    """
    shown = os.fspath(path)
    try:
        _refuse_kind(shown, os.stat(path, dir_fd=dir_fd, follow_symlinks=follow_links))
        fd = os.open(path, _OPEN if follow_links else _OPEN | _NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        # A link where none is followed: O_NOFOLLOW's refusal (one put in place
        # since the path was looked at), or a loop of links on the way.
        if exc.errno == errno.ELOOP and not follow_links:
            raise FileRefusedError(shown, kind=LINK) from None
        raise
    try:
        info = os.fstat(fd)
        _refuse_kind(shown, info)
        if check is not None:
            check(info)
        if info.st_size > limit:
            raise FileRefusedError(shown, size=info.st_size, limit=limit)
        # A file as large as fstat says is read in one call, its end seen by the next.
        chunk_size = max(_CHUNK, info.st_size + 1)
        data = read_limited(functools.partial(os.read, fd), limit, chunk_size=chunk_size)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise FileRefusedError(shown, size=len(data), limit=limit, grew=True)
    return data, info


def _refuse_kind(shown: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "a file of another kind")
        raise FileRefusedError(shown, kind=kind)
