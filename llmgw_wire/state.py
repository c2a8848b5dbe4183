"""A shard's state on disk: what an agent keeps so that a restart finds its shards again.

An agent saves each shard it runs, its spec (with the compute placement the
engine reported) and its last state, and reads them back when it starts, to
report them in its registration::

    save_shard_state(path, ShardState(spec, State.READY))
    ...
    saved = load_shard_state(path)
    running = running_shard_from_spec(saved.spec, saved.state)

The file is JSON (`llmgw_wire.codec.json`, secrets included) with a format
version::

    {"format": 1, "spec": {...}, "state": "ready"}

* It is written atomically: a temporary file beside it, flushed and synced,
  renamed over it, and the directory synced. A crash at any instant leaves the
  old file or the new one, never a mix; a crash may leave a temporary
  `.NAME.*.tmp` beside it, which `load_shard_state` never reads.
* It is readable by its owner only (mode 0o600) from the moment it is
  created: it holds the engine's `api_key`.
* A file written by a newer version with keys this one does not know loads
  (the keys are ignored); one written before `compute` was kept loads with
  `compute` None. A file of a newer format is refused with a clear error.
* A file that is truncated, not JSON, or mistyped raises `StateFileError`,
  which names the file and the place inside it; never a partial spec.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import TYPE_CHECKING

from attrs import frozen

from llmgw_wire.codec.json import make_json_converter, parse_json
from llmgw_wire.domain import ShardSpec, State
from llmgw_wire.errors import JSONError, StateFileError

if TYPE_CHECKING:
    from cattrs.preconf.json import JsonConverter

__all__ = ["FORMAT", "ShardState", "load_shard_state", "save_shard_state"]

#: The format version this library writes, and the newest it reads.
FORMAT = 1


@frozen
class ShardState:
    """A shard as its agent keeps it: its spec, compute placement included, and its last state."""

    spec: ShardSpec
    state: State


@frozen
class _Header:
    # Read on its own first, so that a newer format is refused before its
    # content is mistaken for a mistyped one.
    format: int


_converter: JsonConverter = make_json_converter(include_secrets=True)


def save_shard_state(path: str | os.PathLike[str], value: ShardState) -> None:
    """Write a shard's state to `path` atomically, readable by its owner only.

    Raises:
        EncodeError: a value the file cannot hold as it is, with its path.
        OSError: the directory cannot be written.
        TypeError: `value` is not a `ShardState`.
    """
    if not isinstance(value, ShardState):
        raise TypeError(f"expected a ShardState, got {type(value).__name__}")
    document = {"format": FORMAT, **_converter.unstructure(value, ShardState)}
    data = (json.dumps(document, indent=2) + "\n").encode("ascii")
    _write_atomically(os.fspath(path), data)


def _write_atomically(file: str, data: bytes) -> None:
    directory, name = os.path.split(os.path.abspath(file))
    # mkstemp creates the file with O_EXCL and mode 0o600: the key is never
    # readable by others, not even before a chmod could have run.
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, file)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    # The rename itself is durable only once the directory is.
    directory_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def load_shard_state(path: str | os.PathLike[str]) -> ShardState:
    """Read a shard's state saved by `save_shard_state`.

    Raises:
        StateFileError: the file is not JSON, of a format this version does
            not read, or not a shard's state; the message names the file and
            the path inside it (`$.spec.rank`).
        OSError: the file cannot be read (`FileNotFoundError` when there is none).
    """
    file = os.fspath(path)
    with open(file, "rb") as f:
        data = f.read()
    try:
        document = parse_json(data, "ShardState")
        header = _converter.structure(document, _Header)
        if header.format != FORMAT:
            raise JSONError("ShardState", _format_reason(header.format), ("format",))
        value: ShardState = _converter.structure(document, ShardState)
    except JSONError as exc:
        raise StateFileError(file, exc.reason, exc.path) from None
    return value


def _format_reason(found: int) -> str:
    if found > FORMAT:
        return f"format {found} is newer than this version of llmgw-wire reads ({FORMAT})"
    return f"unknown format {found} (this version reads format {FORMAT})"
