"""The agent's shard store: each shard it runs, kept on disk so that a restart finds it again.

An agent saves each shard it runs, its spec (with the compute placement the
engine reported) and its last state, and reads them all back when it starts,
to report them in its registration::

    store = ShardStore("/var/lib/llmgw/shards")
    store.save(SavedShard(spec, State.READY))
    ...
    loaded = store.load_all()
    running = [running_shard_from_spec(s.spec, s.state) for s in loaded.shards]

What it guarantees, since the shard ids come from the control plane over the
network and the files hold the engine's `api_key`:

* **Owner only.** The directory is created (or tightened to) mode 0o700, each
  file 0o600 from the moment it exists. A directory owned by another user is
  refused.
* **Safe names.** A shard's file name is made from its id, never the id
  itself: `shard-<readable part>.<hash>.json`, where the readable part keeps
  only `[a-z0-9_-]` of the lowered id (at most 32 characters) and the hash is
  the first 128 bits of the SHA-256 of the id's exact UTF-8. No id can name a
  path outside the directory (`../`, `/`, NUL), two ids differing only in
  case cannot collide on a case-insensitive filesystem, and every name is
  at most 76 characters. The file also holds the id, and loading checks it.
* **Atomic and durable saves.** A temporary file in the directory, written,
  `fsync`ed, renamed over the shard's file, and the directory `fsync`ed: a
  crash at any instant leaves the old file or the new one, never a mix.
* **Only what the wire can carry** is saved, and loaded: the spec goes through
  `llmgw_wire.encode` first (a rank of 2**40 or a lone surrogate is refused
  here rather than failing the agent's next registration).
* **Its own leftovers are removed at open**: temporary files of a crashed save
  (`.shard-*.json.<random>.tmp`), only those of its naming pattern, only
  regular files, never through a symbolic link, and never one that a live
  save holds (each save holds an `flock` on its temporary file).
* **Bounded, careful reads.** A file is opened without following a symbolic
  link, checked to be a regular file (`fstat`, before reading) no larger than
  `max_file_size`, and read with that bound: a link to `/dev/zero` or a
  multi-gigabyte file is refused, not read.
* **Only its own files.** A file is read only when the process's user owns
  it and neither its group nor others may write it, checked on the opened
  descriptor (`fstat`), not on the path: a file another user planted (before
  the directory was tightened, say), or one left mode 0o666 that a stranger
  may hold open for writing, is refused, and `load_all` reports it with the
  others it could not read. The store's own files are never such: each save
  writes a new file, mode 0o600 from its creation, and renames it into place.
* **Versioned.** Files carry a format number. This version writes format 2
  (`{"format": 2, "shard_id": ..., "spec": ..., "state": ...}`) and reads
  format 1 too (the format of `llmgw_wire.state` before it, without
  `shard_id`); a newer format is refused with a clear error.
* **One error.** Every failure, of the value, the file or the filesystem
  (a full disk included), is a `StoreError` that names the file and what
  is wrong (`StateFileInvalid` for a file's content, `StoreOSError` for
  the filesystem's refusal); never a bare `OSError` or `ValueError`, and
  never a `DecodeError`. `load_all` reports the
  files it could not read and still loads the others.

Secrets: the files hold `api_key` (an agent needs it to restart its engine);
nothing else the store produces, its errors included, shows it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from attrs import frozen

from llmgw_wire._files import LINK, FileRefusedError, read_regular
from llmgw_wire.codec import encode
from llmgw_wire.codec.json import make_json_converter, parse_json
from llmgw_wire.domain import Compute, ShardSpec, State
from llmgw_wire.errors import (
    EncodeError,
    JSONError,
    StateFileInvalid,
    StoreError,
    StoreOSError,
    shown,
)

if TYPE_CHECKING:
    from types import TracebackType

    from cattrs.preconf.json import JsonConverter

__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "FORMAT",
    "READS",
    "LoadedShards",
    "SavedShard",
    "ShardStore",
    "file_name",
]

#: The format this version writes.
FORMAT = 2
#: The formats this version reads.
READS = (1, 2)
#: The largest file the store reads, in bytes; a saved shard is a few kB.
DEFAULT_MAX_FILE_SIZE = 1 << 20

_READABLE = 32
_NAME = re.compile(r"shard-[a-z0-9_-]{0,32}\.[0-9a-f]{32}\.json")
_TEMPORARY = re.compile(r"\.shard-[a-z0-9_-]{0,32}\.[0-9a-f]{32}\.json\.[0-9a-f]{16}\.tmp")
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@frozen
class SavedShard:
    """A shard as its agent keeps it: its spec, compute placement included, and its last state."""

    spec: ShardSpec
    state: State


@frozen
class LoadedShards:
    """What `ShardStore.load_all` found.

    Attributes:
        shards: the shards read, ordered by file name.
        errors: one `StoreError` for each file that could not be read;
            the other files are loaded all the same.
    """

    shards: tuple[SavedShard, ...]
    errors: tuple[StoreError, ...]


@frozen
class _Header:
    # Read on its own first, so that a newer format is refused before its
    # content is mistaken for a mistyped one.
    format: int


@frozen
class _Format1:
    spec: ShardSpec
    state: State


@frozen
class _Format2:
    shard_id: str
    spec: ShardSpec
    state: State


_converter: JsonConverter = make_json_converter(include_secrets=True)


def file_name(shard_id: str) -> str:
    """The name of the file that holds the shard `shard_id`: safe for any id.

    `shard-<readable>.<hash>.json`: the readable part is the lowered id with
    every run of characters outside `[a-z0-9_-]` made one `_`, cut at 32
    characters; the hash is the first 32 hex digits of the SHA-256 of the id
    (UTF-8, a lone surrogate kept as its own bytes), so distinct ids never
    share a name, whatever their case.
    """
    if not isinstance(shard_id, str):
        raise TypeError(f"a shard id is a str, got {type(shard_id).__name__}")
    readable = re.sub(r"[^a-z0-9_-]+", "_", shard_id.lower())[:_READABLE]
    digest = hashlib.sha256(shard_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"shard-{readable}.{digest}.json"


class ShardStore:
    """The shards an agent runs, one file each in `directory`.

    Opening the store creates the directory (mode 0o700, its parents as
    needed), tightens an existing one to 0o700, and removes the temporary
    files that crashed saves left. The store holds the directory open, so
    that renaming or replacing its path afterwards cannot redirect it; close
    it (or use it as a context manager) when done.

    Args:
        directory: where the files are.
        max_file_size: the largest file read, in bytes.

    Raises:
        StoreError: the directory cannot be created or opened, is not a
            directory (a symbolic link is refused), or belongs to another user.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, max_file_size: int = DEFAULT_MAX_FILE_SIZE
    ) -> None:
        self.directory = Path(directory)
        self.max_file_size = max_file_size
        self._fd = _open_directory(self.directory)
        #: Names of the leftover temporary files removed at open.
        self.removed: tuple[str, ...] = self._remove_leftovers()

    def __repr__(self) -> str:
        return f"ShardStore({str(self.directory)!r})"

    def close(self) -> None:
        """Close the directory; the store cannot be used afterwards."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ShardStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def path_for(self, shard_id: str) -> Path:
        """The file that holds (or would hold) the shard `shard_id`."""
        return self.directory / file_name(shard_id)

    # --- saving ------------------------------------------------------------------

    def save(self, value: SavedShard) -> Path:
        """Save a shard, replacing what was saved for its id, atomically and durably.

        Returns:
            the file it is in.

        Raises:
            StoreError: a value the wire cannot carry (with the path of
                the offending attribute, `$.spec.rank`), or the file cannot be
                written (a full filesystem included); what was saved before is
                then left as it was.
            TypeError: `value` is not a `SavedShard`.
        """
        if not isinstance(value, SavedShard):
            raise TypeError(f"expected a SavedShard, got {type(value).__name__}")
        spec = value.spec
        if not isinstance(spec, ShardSpec):
            raise TypeError(f"expected a ShardSpec in the SavedShard, got {type(spec).__name__}")
        name = file_name(spec.shard_id) if isinstance(spec.shard_id, str) else "?"
        data = self._document(value, name)
        self._write(name, data)
        return self.directory / name

    def _document(self, value: SavedShard, name: str) -> bytes:
        file = str(self.directory / name)
        problem = _unsaveable(value)
        if problem is not None:
            raise StoreError(
                file,
                f"not saved: expected `{problem.expected}`, got {shown(problem.got)}",
                problem.path,
            )
        body = _converter.unstructure(value, SavedShard)
        document = {"format": FORMAT, "shard_id": value.spec.shard_id, **body}
        data = (json.dumps(document, indent=2) + "\n").encode("ascii")
        if len(data) > self.max_file_size:
            reason = f"not saved: {len(data)} bytes, more than the {self.max_file_size} it reads"
            raise StoreError(file, reason)
        return data

    def _write(self, name: str, data: bytes) -> None:
        file = str(self.directory / name)
        fd, temporary = self._create_temporary(name, file)
        failure: StoreError | None
        try:
            _write_all(fd, data)
            os.fsync(fd)
            os.rename(temporary, name, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=self._fd)
            failure = _os_error(file, "not saved", exc)
        else:
            failure = None
        finally:
            # Closing releases the lock that kept the temporary file from a cleaner.
            os.close(fd)
        if failure is not None:
            raise failure
        try:
            # The rename itself is durable only once the directory is.
            os.fsync(self._fd)
        except OSError as exc:
            raise _os_error(file, "saved, but the directory could not be synced", exc) from None

    def _create_temporary(self, name: str, file: str) -> tuple[int, str]:
        for _ in range(100):
            temporary = f".{name}.{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(temporary, _OPEN_NEW, 0o600, dir_fd=self._fd)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _os_error(file, "not saved", exc) from None
            try:
                os.fchmod(fd, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)
                # A store opening elsewhere may have removed the file between
                # its creation and the lock: then start again with another.
                if os.fstat(fd).st_nlink > 0:
                    return fd, temporary
            except OSError as exc:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=self._fd)
                raise _os_error(file, "not saved", exc) from None
            os.close(fd)
        raise StoreError(file, "not saved: no temporary file could be made")

    # --- loading -----------------------------------------------------------------

    def load(self, shard_id: str) -> SavedShard | None:
        """The shard saved for `shard_id`, or None when there is none.

        Raises:
            StoreError: its file cannot be read, is not a regular file, is
                another user's or writable by its group or others, is too
                large, is not a saved shard of a format this version reads,
                holds another shard's id, or holds a value the wire cannot carry.
        """
        name = file_name(shard_id)
        try:
            return self._load(name, shard_id)
        except FileNotFoundError:
            return None

    def load_all(self) -> LoadedShards:
        """Every shard saved, and an error for each file that could not be read.

        Only the store's own files are read (`shard-*.json`); anything else in
        the directory is left alone.
        """
        shards: list[SavedShard] = []
        errors: list[StoreError] = []
        for name in self._names(_NAME):
            try:
                shards.append(self._load(name, None))
            except FileNotFoundError:  # noqa: PERF203 - one file's failure is its own
                continue  # deleted since it was listed
            except StoreError as error:
                errors.append(error)
        return LoadedShards(tuple(shards), tuple(errors))

    def _load(self, name: str, shard_id: str | None) -> SavedShard:
        file = str(self.directory / name)
        data = self._read(name, file)
        failure: StoreError | None
        try:
            document = parse_json(data, "SavedShard")
            header = _converter.structure(document, _Header)
            if header.format not in READS:
                raise JSONError("SavedShard", _format_reason(header.format), ("format",))
            if header.format == 1:
                old: _Format1 = _converter.structure(document, _Format1)
                saved_id, value = old.spec.shard_id, SavedShard(old.spec, old.state)
            else:
                new: _Format2 = _converter.structure(document, _Format2)
                saved_id, value = new.shard_id, SavedShard(new.spec, new.state)
        except JSONError as exc:
            failure = StateFileInvalid(file, exc.reason, exc.path)
        else:
            failure = self._check(file, name, shard_id, saved_id, value)
            if failure is None:
                return value
        raise failure

    def _check(
        self, file: str, name: str, shard_id: str | None, saved_id: str, value: SavedShard
    ) -> StoreError | None:
        if saved_id != value.spec.shard_id:
            return StateFileInvalid(
                file, f"holds the id {shown(saved_id)} for a spec of {shown(value.spec.shard_id)}"
            )
        if file_name(saved_id) != name or (shard_id is not None and saved_id != shard_id):
            # Copied or renamed from another shard's file.
            return StateFileInvalid(
                file, f"holds the shard {shown(saved_id)}, not the one it names"
            )
        error = _not_carried(value.spec)
        if error is None:
            return None
        reason = f"expected `{error.expected}`, got {shown(error.got)} (the wire cannot carry it)"
        return StateFileInvalid(file, reason, ("spec", *error.path))

    def _read(self, name: str, file: str) -> bytes:
        def trusted(info: os.stat_result) -> None:
            distrust = _distrust(info)
            if distrust is not None:
                raise StateFileInvalid(file, distrust)

        try:
            data, _ = read_regular(
                name, self.max_file_size, follow_links=False, dir_fd=self._fd, check=trusted
            )
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _os_error(file, "cannot be read", exc) from None
        except FileRefusedError as exc:
            if exc.kind == LINK:
                reason = "is a symbolic link, which the store never follows"
            elif exc.kind is not None:
                # The store's messages have always called a FIFO a named pipe.
                kind = "a named pipe" if exc.kind == "a FIFO" else exc.kind
                reason = f"is not a regular file ({kind})"
            else:
                reason = self._too_large(exc.size)
            raise StateFileInvalid(file, reason) from None
        return data

    def _too_large(self, size: int) -> str:
        return f"is larger than the {self.max_file_size} bytes the store reads ({size} or more)"

    # --- deleting, listing, cleaning ---------------------------------------------

    def delete(self, shard_id: str) -> bool:
        """Remove the shard saved for `shard_id`; False when there was none.

        Raises:
            StoreError: the file cannot be removed.
        """
        name = file_name(shard_id)
        file = str(self.directory / name)
        try:
            os.unlink(name, dir_fd=self._fd)
            os.fsync(self._fd)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _os_error(file, "not deleted", exc) from None
        return True

    def _names(self, pattern: re.Pattern[str]) -> list[str]:
        try:
            names = os.listdir(self._fd)
        except OSError as exc:
            raise _os_error(str(self.directory), "cannot be listed", exc) from None
        return sorted(name for name in names if pattern.fullmatch(name))

    def _remove_leftovers(self) -> tuple[str, ...]:
        removed = []
        for name in self._names(_TEMPORARY):
            with contextlib.suppress(OSError):
                if self._remove_if_abandoned(name):
                    removed.append(name)
        if removed:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
        return tuple(removed)

    def _remove_if_abandoned(self, name: str) -> bool:
        # Never through a link (O_NOFOLLOW), never a device or a pipe
        # (O_NONBLOCK, then fstat), never one a live save holds (its flock).
        fd = os.open(name, _OPEN_READ, dir_fd=self._fd)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            now = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                return False
            os.unlink(name, dir_fd=self._fd)
            return True
        finally:
            os.close(fd)


def _unsaveable(value: SavedShard) -> EncodeError | None:
    """What makes `value` one the store refuses, with its path in the saved shard."""
    if not isinstance(value.state, State):
        return EncodeError("State", value.state, ("state",))
    if not value.spec.shard_id:
        return EncodeError("a non-empty shard id", value.spec.shard_id, ("spec", "shard_id"))
    error = _not_carried(value.spec)
    if error is not None:
        return EncodeError(error.expected, error.got, ("spec", *error.path), secret=error.secret)
    try:
        # And what JSON holds exactly (a string for a string, say).
        _converter.unstructure(value, SavedShard)
    except EncodeError as refused:
        return refused
    return None


def _not_carried(spec: ShardSpec) -> EncodeError | None:
    """What in `spec` the wire cannot carry, with its path in the spec; None if all of it can.

    The spec as the control plane sent it (a StartShard) and the compute
    placement the engine reported (a Compute, which the agent's registration
    carries): refused when saved rather than when the agent next registers.
    """
    compute = spec.compute
    try:
        encode(attrs.evolve(spec, compute=None))
    except EncodeError as error:
        return error
    if compute is None:
        return None
    if not isinstance(compute, Compute):
        return EncodeError("Compute or None", compute, ("compute",))
    try:
        encode(compute)
    except EncodeError as error:
        return EncodeError(error.expected, error.got, ("compute", *error.path))
    return None


def _open_directory(directory: Path) -> int:
    where = str(directory)
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        fd = os.open(directory, _OPEN_DIRECTORY)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            reason = "is not a directory (a symbolic link is not followed)"
            raise StoreError(where, reason) from None
        raise _os_error(where, "cannot be opened", exc) from None
    try:
        info = os.fstat(fd)
        foreign = _foreign(info)
        if foreign is not None:
            raise StoreError(where, foreign)
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    except OSError as exc:
        os.close(fd)
        raise _os_error(where, "cannot be made owner-only", exc) from None
    except StoreError:
        os.close(fd)
        raise
    return fd


def _distrust(info: os.stat_result) -> str | None:
    """Why a file the store opened is not its own to trust; None when it is.

    Checked on the open descriptor's `fstat`, not on the path, so that the
    bytes read are those of the file checked. A file another user owns, or
    one its group or others may write, may have been planted or may still be
    open for writing elsewhere: its spec (command, env such as LD_PRELOAD)
    would run as the agent's shard.
    """
    foreign = _foreign(info)
    if foreign is not None:
        return f"{foreign}: not read"
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by its group or others (mode {mode:04o}): not read"
    return None


def _foreign(info: os.stat_result) -> str | None:
    """Why the directory or file `fstat` describes is not this process's; None when it is."""
    if info.st_uid != os.geteuid():
        return f"belongs to user {info.st_uid}, not to this process's"
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _os_error(file: str, what: str, exc: OSError) -> StoreOSError:
    return StoreOSError(file, f"{what}: {_os_reason(exc)}", errno=exc.errno)


def _os_reason(exc: OSError) -> str:
    # The message without the file name, which the error names already.
    name = errno.errorcode.get(exc.errno or 0, "")
    return f"{exc.strerror or exc} ({name})" if name else str(exc.strerror or exc)


def _format_reason(found: int) -> str:
    if found > FORMAT:
        return f"format {found} is newer than this version of llmgw-wire reads ({FORMAT})"
    return f"unknown format {found} (this version reads formats {', '.join(map(str, READS))})"
