"""The agent's shard store: round trips, modes, names for hostile ids, formats, refusals,
crashes (kill -9), concurrent processes, a full filesystem."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import pickle
import random
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import llmgw_wire
from llmgw_wire import (
    Compute,
    LoadedShards,
    SavedShard,
    ShardSpec,
    ShardStore,
    State,
    adopted_from_register,
    start_shard_from_command,
)
from llmgw_wire.errors import (
    DecodeError,
    StateFileError,
    StateFileInvalid,
    StoreError,
    StoreOSError,
)
from llmgw_wire.store import DEFAULT_MAX_FILE_SIZE, FORMAT, READS, file_name
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.sample import sample_command
from tests.store_roles import WRITER_STATES, concurrent_value

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.timeout(300)

ROLES = Path(__file__).with_name("store_roles.py")
OLD_FORMAT = Path(__file__).with_name("store_fixtures") / "format-1.json"
TIMEOUT_S = 30
KEY = "sk-llmgw-demo-0000"
SPEC = attrs.evolve(sample_command().spec, compute=Compute("cuda", ("cuda:4",), 61, 61))
SAVED = SavedShard(SPEC, State.READY)
ID = SPEC.shard_id


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "shards"


@pytest.fixture
def store(directory: Path) -> Iterator[ShardStore]:
    with ShardStore(directory) as opened:
        yield opened


def saved_document(store: ShardStore) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(store.save(SAVED).read_text())
    return document


def write_document(store: ShardStore, document: object, shard_id: str = ID) -> None:
    store.path_for(shard_id).write_text(json.dumps(document))


def refusal(store: ShardStore, shard_id: str = ID) -> str:
    with pytest.raises(StoreError) as caught:
        store.load(shard_id)
    return str(caught.value)


def temporaries(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".tmp"))


# --- round trips -----------------------------------------------------------------


@given(lst.shard_specs(), st.sampled_from(State))
def test_what_is_saved_loads_back_equal(spec: ShardSpec, state: State) -> None:
    spec = attrs.evolve(spec, shard_id=spec.shard_id or "s")
    with tempfile.TemporaryDirectory() as root, ShardStore(Path(root, "shards")) as store:
        store.save(SavedShard(spec, state))
        assert store.load(spec.shard_id) == SavedShard(spec, state)
        assert store.load_all() == LoadedShards((SavedShard(spec, state),), ())


def test_the_file_holds_the_format_the_id_the_spec_with_its_key_and_compute(
    store: ShardStore,
) -> None:
    document = saved_document(store)
    assert list(document) == ["format", "shard_id", "spec", "state"]
    assert document["format"] == FORMAT == 2
    assert document["shard_id"] == ID
    assert document["state"] == "ready"
    assert document["spec"]["api_key"] == KEY  # the store keeps it: the engine needs it
    assert document["spec"]["compute"] == {
        "backend": "cuda",
        "devices": ["cuda:4"],
        "offloaded": 61,
        "total": 61,
    }
    assert store.load(ID) == SAVED


def test_saving_again_replaces_the_shard(store: ShardStore, directory: Path) -> None:
    store.save(SAVED)
    draining = SavedShard(SPEC, State.DRAINING)
    assert store.save(draining) == store.path_for(ID)
    assert store.load(ID) == draining
    assert os.listdir(directory) == [file_name(ID)]


def test_a_shard_never_saved_loads_as_none(store: ShardStore) -> None:
    assert store.load(ID) is None
    assert store.load_all() == LoadedShards((), ())


def test_delete(store: ShardStore, directory: Path) -> None:
    store.save(SAVED)
    assert store.delete(ID) is True
    assert store.delete(ID) is False
    assert store.load(ID) is None
    assert os.listdir(directory) == []


def test_load_all_reads_every_shard_and_reports_the_files_it_could_not(
    store: ShardStore, directory: Path
) -> None:
    ids = ["a-s0", "b-s0", "c-s0", "d-s0"]
    for shard_id in ids:
        store.save(SavedShard(attrs.evolve(SPEC, shard_id=shard_id), State.READY))
    store.path_for("b-s0").write_text("{truncated")
    store.path_for("c-s0").unlink()
    store.path_for("c-s0").symlink_to("/dev/zero")
    (directory / "notes.txt").write_text("not the store's")
    (directory / "b-s0.json").write_text("an old guide's name: not the store's")
    found = store.load_all()
    assert [shard.spec.shard_id for shard in found.shards] == ["a-s0", "d-s0"]
    assert sorted(error.file for error in found.errors) == sorted(
        str(store.path_for(i)) for i in ("b-s0", "c-s0")
    )
    reasons = sorted(error.reason for error in found.errors)
    assert any(r.startswith("not JSON: ") for r in reasons)
    assert "is a symbolic link, which the store never follows" in reasons


def test_the_key_is_in_no_repr(store: ShardStore) -> None:
    store.save(SAVED)
    assert KEY not in repr(store.load(ID))
    assert KEY not in repr(store.load_all())


def test_the_store_is_exported_at_the_root() -> None:
    assert {"ShardStore", "SavedShard", "LoadedShards"} <= set(llmgw_wire.__all__)
    assert llmgw_wire.ShardStore is ShardStore
    with pytest.raises(ImportError):
        __import__("llmgw_wire.state")


# --- modes and how it writes -----------------------------------------------------


def test_the_directory_is_created_owner_only_with_its_parents(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with ShardStore(tmp_path / "a" / "b" / "shards") as store:
            path = store.save(SAVED)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "b" / "shards").stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_existing_directory_is_made_owner_only(directory: Path) -> None:
    directory.mkdir(mode=0o755)
    directory.chmod(0o777)
    ShardStore(directory).close()
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_directory_of_another_user_is_refused(directory: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory to another user")
    directory.mkdir(mode=0o700)
    os.chown(directory, 4242, 4242)
    with pytest.raises(StoreError) as caught:
        ShardStore(directory)
    assert str(caught.value) == f"{directory}: belongs to user 4242, not to this process's"


@pytest.mark.parametrize("kind", ["a file", "a symbolic link to a directory"])
def test_a_directory_that_is_not_one_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "shards"
    if kind == "a file":
        path.write_text("")
    else:
        (tmp_path / "elsewhere").mkdir()
        path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError) as caught:
        ShardStore(path)
    assert caught.value.file == str(path)
    assert "not a directory" in caught.value.reason


def test_a_file_is_synced_before_the_rename_and_the_directory_after(
    store: ShardStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, object]] = []
    fsync, rename = os.fsync, os.rename

    def recording_fsync(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        kind = "directory" if stat.S_ISDIR(mode) else "file"
        events.append((f"fsync {kind}", stat.S_IMODE(mode)))
        fsync(fd)

    def recording_rename(source: str, target: str, **fds: int) -> None:
        events.append(("rename", target == file_name(ID)))
        rename(source, target, **fds)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "rename", recording_rename)
    store.save(SAVED)
    assert events == [("fsync file", 0o600), ("rename", True), ("fsync directory", 0o700)]


def test_the_store_holds_its_directory_not_its_path(tmp_path: Path) -> None:
    with ShardStore(tmp_path / "shards") as store:
        (tmp_path / "shards").rename(tmp_path / "moved")
        (tmp_path / "shards").mkdir()
        store.save(SAVED)
    assert os.listdir(tmp_path / "moved") == [file_name(ID)]
    assert os.listdir(tmp_path / "shards") == []


# --- only what the wire can carry ------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            SavedShard(attrs.evolve(SPEC, rank=2**40), State.READY),
            "not saved: expected `int32`, got 1099511627776 - at `$.spec.rank`",
        ),
        (
            SavedShard(attrs.evolve(SPEC, pool="chat\udcff"), State.READY),
            "not saved: expected `a string that is valid UTF-8 (no lone surrogates)`,"
            " got 'chat\\udcff' - at `$.spec.pool`",
        ),
        (
            SavedShard(attrs.evolve(SPEC, api_key="sk-\udcff"), State.READY),
            "not saved: expected `a string that is valid UTF-8 (no lone surrogates)`,"
            " got <secret str, not shown> - at `$.spec.api_key`",
        ),
        (
            SavedShard(attrs.evolve(SPEC, rank="0"), State.READY),  # type: ignore[arg-type]
            "not saved: expected `int32`, got '0' - at `$.spec.rank`",
        ),
        (
            SavedShard(attrs.evolve(SPEC, compute=Compute(offloaded=2**31)), State.READY),
            "not saved: expected `int32`, got 2147483648 - at `$.spec.compute.offloaded`",
        ),
        (
            SavedShard(SPEC, "ready"),  # type: ignore[arg-type]
            "not saved: expected `State`, got 'ready' - at `$.state`",
        ),
    ],
)
def test_a_value_the_wire_cannot_carry_is_refused_and_nothing_written(
    store: ShardStore, directory: Path, value: SavedShard, message: str
) -> None:
    store.save(SAVED)
    with pytest.raises(StoreError) as caught:
        store.save(value)
    assert str(caught.value) == f"{store.path_for(ID)}: {message}"
    assert store.load(ID) == SAVED
    assert os.listdir(directory) == [file_name(ID)]


def test_an_empty_shard_id_is_refused(store: ShardStore) -> None:
    with pytest.raises(StoreError, match="expected `a non-empty shard id`"):
        store.save(SavedShard(attrs.evolve(SPEC, shard_id=""), State.READY))


def test_only_a_saved_shard_is_saved(store: ShardStore) -> None:
    with pytest.raises(TypeError, match="expected a SavedShard, got ShardSpec"):
        store.save(SPEC)  # type: ignore[arg-type]


def test_a_file_with_a_value_the_wire_cannot_carry_is_refused_when_loaded(
    store: ShardStore,
) -> None:
    document = saved_document(store)
    document["spec"]["rank"] = 2**40
    write_document(store, document)
    assert refusal(store) == (
        f"{store.path_for(ID)}: expected `int32`, got 1099511627776"
        " (the wire cannot carry it) - at `$.spec.rank`"
    )


# --- hostile shard ids -----------------------------------------------------------

HOSTILE_IDS = [
    "../escaped",
    "../../../../etc/passwd",
    "/etc/passwd",
    "a/b/c",
    "a\\b",
    ".",
    "..",
    "...",
    "\x00",
    "a\x00b",
    "shard\x00../../x",
    "\n",
    "line\nbreak",
    "tab\tid",
    " ",
    "-rf",
    "~root",
    "$HOME",
    "*",
    "?",
    ":",
    "C:\\Windows",
    "CON",
    "nul",
    "aux.txt",
    "A",
    "a",
    "Mistral-R8-S0",
    "mistral-r8-s0",
    "MISTRAL-R8-S0",
    "ß",
    "SS",
    "ss",
    "İ",
    "i̇",
    "é",
    unicodedata.normalize("NFD", "é"),
    "\u202egnp.exe",
    "😀",
    "%2e%2e%2f",
    "shard-a.559aead08264d5795d3909718cdd05ab.json",
    ".shard-a.559aead08264d5795d3909718cdd05ab.json.0123456789abcdef.tmp",
    "x" * 255,
    "x" * 256,
    "y" * 100_000,
    "\u00a0",
    "\ufeff",
]


def test_hostile_shard_ids_neither_escape_nor_collide(tmp_path: Path) -> None:
    directory = tmp_path / "shards"
    names = {shard_id: file_name(shard_id) for shard_id in HOSTILE_IDS}
    assert len(set(names.values())) == len(HOSTILE_IDS)
    # Lower case only: no two can collide on a case-insensitive filesystem either.
    assert len({name.casefold() for name in names.values()}) == len(HOSTILE_IDS)
    for name in names.values():
        assert name == name.lower()
        assert len(name) <= 76
        assert "/" not in name
        assert "\x00" not in name
        assert name.isascii()
        assert not name.startswith(".")
    with ShardStore(directory) as store:
        for shard_id in HOSTILE_IDS:
            store.save(SavedShard(attrs.evolve(SPEC, shard_id=shard_id), State.READY))
        for shard_id in HOSTILE_IDS:
            loaded = store.load(shard_id)
            assert loaded is not None
            assert loaded.spec.shard_id == shard_id
        found = store.load_all()
        assert found.errors == ()
        assert sorted(s.spec.shard_id for s in found.shards) == sorted(HOSTILE_IDS)
        assert sorted(os.listdir(directory)) == sorted(names.values())
        # Nothing was written anywhere but in the directory.
        assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]
        for shard_id in HOSTILE_IDS:
            assert store.delete(shard_id)
        assert os.listdir(directory) == []


def test_a_lone_surrogate_in_an_id_has_a_name_but_is_not_saved(store: ShardStore) -> None:
    assert file_name("s\udcff").startswith("shard-s_.")
    with pytest.raises(StoreError, match="valid UTF-8"):
        store.save(SavedShard(attrs.evolve(SPEC, shard_id="s\udcff"), State.READY))
    assert store.load("s\udcff") is None


def test_a_file_copied_to_another_shards_name_is_refused(store: ShardStore) -> None:
    store.save(SAVED)
    shutil.copy(store.path_for(ID), store.path_for("other-s0"))
    message = refusal(store, "other-s0")
    assert message == f"{store.path_for('other-s0')}: holds the shard '{ID}', not the one it names"
    found = store.load_all()
    assert [s.spec.shard_id for s in found.shards] == [ID]
    assert len(found.errors) == 1


def test_a_file_whose_id_and_spec_disagree_is_refused(store: ShardStore) -> None:
    document = saved_document(store)
    document["spec"]["shard_id"] = "other-s0"
    write_document(store, document)
    assert "holds the id 'mistral-r8-s0' for a spec of 'other-s0'" in refusal(store)


# --- what it refuses to read -----------------------------------------------------


def test_a_symbolic_link_is_never_followed(store: ShardStore, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"format": FORMAT}))
    store.path_for(ID).symlink_to("/dev/zero")
    assert refusal(store).endswith("is a symbolic link, which the store never follows")
    store.path_for(ID).unlink()
    store.path_for(ID).symlink_to(target)
    assert refusal(store).endswith("is a symbolic link, which the store never follows")


def test_a_file_others_may_write_is_refused_and_load_all_sets_it_aside(
    store: ShardStore,
) -> None:
    other = attrs.evolve(SPEC, shard_id="other-shard")
    store.save(SAVED)
    store.save(SavedShard(other, State.READY))
    store.path_for(ID).chmod(0o666)
    # A stranger opened it while it was writable: the descriptor outlives a chmod.
    with store.path_for(ID).open("r+b") as planter:
        assert refusal(store) == (
            f"{store.path_for(ID)}: is writable by its group or others (mode 0666): not read"
        )
        loaded = store.load_all()
        assert loaded.shards == (SavedShard(other, State.READY),)
        assert [error.file for error in loaded.errors] == [str(store.path_for(ID))]
        planter.write(b"{")
    store.path_for(ID).chmod(0o620)
    assert "writable by its group or others (mode 0620)" in refusal(store)
    # Saving again replaces it with a file of the store's own.
    store.save(SAVED)
    assert stat.S_IMODE(store.path_for(ID).stat().st_mode) == 0o600
    assert store.load(ID) == SAVED


def test_a_file_of_another_user_is_refused_and_load_all_sets_it_aside(
    store: ShardStore,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    nobody = 65534
    store.save(SAVED)
    # Planted with the agent's own spec, but another user's file, mode 0600.
    os.chown(store.path_for(ID), nobody, nobody)
    assert refusal(store) == (
        f"{store.path_for(ID)}: belongs to user {nobody}, not to this process's: not read"
    )
    loaded = store.load_all()
    assert loaded.shards == ()
    assert [error.reason for error in loaded.errors] == [
        f"belongs to user {nobody}, not to this process's: not read"
    ]


@pytest.mark.parametrize("kind", ["a named pipe", "a directory"])
def test_a_file_that_is_not_regular_is_refused_without_blocking(
    store: ShardStore, kind: str
) -> None:
    if kind == "a named pipe":
        os.mkfifo(store.path_for(ID))
    else:
        store.path_for(ID).mkdir()
    assert refusal(store) == f"{store.path_for(ID)}: is not a regular file ({kind})"


def test_a_file_over_the_bound_is_refused_before_it_is_read(directory: Path) -> None:
    with ShardStore(directory, max_file_size=4096) as store:
        store.save(SAVED)
        with store.path_for(ID).open("r+b") as f:
            f.truncate(10 * 2**30)  # 10 GiB, sparse: read, it would exhaust memory
        message = refusal(store)
    assert message == (
        f"{store.path_for(ID)}: is larger than the 4096 bytes the store reads (10737418240 or more)"
    )
    assert DEFAULT_MAX_FILE_SIZE == 2**20


def test_a_value_over_the_bound_is_not_saved(directory: Path) -> None:
    with ShardStore(directory, max_file_size=1024) as store:
        with pytest.raises(StoreError, match=r"not saved: \d+ bytes, more than the 1024"):
            store.save(SAVED)
        assert os.listdir(directory) == []


def test_an_integer_of_more_than_4300_digits_is_a_state_file_error(store: ShardStore) -> None:
    text = store.save(SAVED).read_text().replace('"rank": 0', '"rank": ' + "9" * 5000)
    store.path_for(ID).write_text(text)
    assert refusal(store) == (
        f"{store.path_for(ID)}: not JSON this reader accepts: an integer of more than 4300 digits"
    )


def test_a_file_the_store_may_not_read_is_a_state_file_error(store: ShardStore) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a file of mode 0")
    store.save(SAVED)
    store.path_for(ID).chmod(0)
    assert "cannot be read: Permission denied (EACCES)" in refusal(store)


# --- its leftovers ---------------------------------------------------------------


def test_leftovers_of_its_own_are_removed_at_open_and_nothing_else(
    directory: Path, tmp_path: Path
) -> None:
    with ShardStore(directory) as store:
        store.save(SAVED)
    own = f".{file_name(ID)}.0123456789abcdef.tmp"
    (directory / own).write_text("half a state")
    (directory / f".{file_name('b')}.fedcba9876543210.tmp").write_text("")
    # Not its own, or not a regular file: left alone.
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    kept = {
        f".{file_name('c')}.1111111111111111.tmp": "symlink",
        f".{file_name('d')}.2222222222222222.tmp": "directory",
        f".{file_name('e')}.3333333333333333.tmp": "fifo",
        ".shard.json.abcdef.tmp": "file",
        "notes.tmp": "file",
        f".{file_name('f')}.0123.tmp": "file",
    }
    for name, kind in kept.items():
        if kind == "symlink":
            (directory / name).symlink_to(outside)
        elif kind == "directory":
            (directory / name).mkdir()
        elif kind == "fifo":
            os.mkfifo(directory / name)
        else:
            (directory / name).write_text("")
    with ShardStore(directory) as store:
        assert sorted(store.removed) == sorted([own, f".{file_name('b')}.fedcba9876543210.tmp"])
        assert store.load(ID) == SAVED
    assert sorted(os.listdir(directory)) == sorted([file_name(ID), *kept])
    assert outside.read_text() == "keep me"


def test_a_temporary_file_a_live_save_holds_is_left_alone(directory: Path) -> None:
    with ShardStore(directory):
        pass
    held = directory / f".{file_name(ID)}.0123456789abcdef.tmp"
    with held.open("w") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        with ShardStore(directory) as store:
            assert store.removed == ()
        assert held.exists()
    with ShardStore(directory) as store:
        assert store.removed == (held.name,)


# --- the previous format, and others ---------------------------------------------


def test_the_previous_format_is_read_and_the_next_save_writes_the_current(
    store: ShardStore,
) -> None:
    assert json.loads(OLD_FORMAT.read_text())["format"] == 1
    assert READS == (1, 2)
    spec = attrs.evolve(
        sample_command().spec, compute=Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40)
    )
    shutil.copy(OLD_FORMAT, store.path_for(spec.shard_id))
    old = store.load(spec.shard_id)
    assert old == SavedShard(spec, State.READY)
    assert old.spec.api_key == KEY
    assert store.load_all() == LoadedShards((old,), ())
    store.save(old)
    document = json.loads(store.path_for(spec.shard_id).read_text())
    assert document["format"] == 2
    assert document["shard_id"] == spec.shard_id
    assert store.load(spec.shard_id) == old


def test_a_newer_agents_file_with_keys_unknown_here_loads(store: ShardStore) -> None:
    document = saved_document(store)
    document["written_by"] = "llmgw-agent 2.3.0"
    document["spec"]["numa_policy"] = "interleave"
    document["spec"]["compute"]["kv_cache_mb"] = 24576
    write_document(store, document)
    assert store.load(ID) == SAVED


def test_a_file_without_compute_loads_with_none(store: ShardStore) -> None:
    document = saved_document(store)
    del document["spec"]["compute"]
    write_document(store, document)
    assert store.load(ID) == SavedShard(attrs.evolve(SPEC, compute=None), State.READY)


def test_a_state_this_version_does_not_know_is_failed(store: ShardStore) -> None:
    document = saved_document(store)
    document["state"] = "hibernating"
    write_document(store, document)
    loaded = store.load(ID)
    assert loaded is not None
    assert loaded.state is State.FAILED


@pytest.mark.parametrize(
    ("found", "message"),
    [
        (3, "format 3 is newer than this version of llmgw-wire reads (2) - at `$.format`"),
        (0, "unknown format 0 (this version reads formats 1, 2) - at `$.format`"),
        ("2", 'expected `integer`, got "2" - at `$.format`'),
    ],
)
def test_a_format_this_version_does_not_read_is_refused(
    store: ShardStore, found: object, message: str
) -> None:
    document = saved_document(store)
    document["format"] = found
    document["spec"] = "whatever format 3 keeps here"
    write_document(store, document)
    assert refusal(store) == f"{store.path_for(ID)}: {message}"


def test_a_file_truncated_anywhere_is_refused(store: ShardStore) -> None:
    whole = store.save(SAVED).read_bytes()
    for end in range(len(whole.rstrip())):
        store.path_for(ID).write_bytes(whole[:end])
        assert refusal(store).startswith(f"{store.path_for(ID)}: not JSON: "), end


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["spec"].update(rank="a"), 'expected `integer`, got "a" - at `$.spec.rank`'),
        (
            lambda d: d["spec"]["compute"].update(devices="cuda:4"),
            'expected `array`, got "cuda:4" - at `$.spec.compute.devices`',
        ),
        (lambda d: d.pop("shard_id"), "required key missing - at `$.shard_id`"),
        (
            lambda d: d["spec"].update(api_key=["sk-llmgw-demo-0000"]),
            "expected `string`, got <secret list, not shown> - at `$.spec.api_key`",
        ),
    ],
)
def test_a_mistyped_file_is_refused_with_the_place(
    store: ShardStore, edit: Any, message: str
) -> None:
    document = saved_document(store)
    edit(document)
    write_document(store, document)
    assert refusal(store) == f"{store.path_for(ID)}: {message}"


def test_state_file_errors_say_where_and_pickle(store: ShardStore) -> None:
    store.path_for(ID).write_text('{"format": 2, "shard_id": "s", "spec": {"rank": "a"}}')
    with pytest.raises(StoreError) as caught:
        store.load(ID)
    error = caught.value
    assert (error.file, error.reason, error.path) == (
        str(store.path_for(ID)),
        'expected `integer`, got "a"',
        ("spec", "rank"),
    )
    assert isinstance(error, StateFileInvalid)
    # A store's failure is not bad bytes handed to the codec.
    assert not isinstance(error, DecodeError)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is StateFileInvalid
    assert str(again) == str(error)


# --- kill -9 during save, concurrent processes ------------------------------------

# Per disk: 40 kills in all, of which the slow disk lands many inside a save.
KILLS = 20


@pytest.mark.subprocess
@pytest.mark.parametrize("disk", ["fast", "slow"])
def test_a_writer_killed_at_random_points_leaves_the_old_or_the_new_never_a_torn_file(
    directory: Path, disk: str
) -> None:
    rng = random.Random(20261201)
    leftovers_seen = 0
    for _ in range(KILLS):
        writer = subprocess.Popen(
            [sys.executable, str(ROLES), "writer", str(directory), disk],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline() == "ready\n"
            # Somewhere in the loop: a large save takes some milliseconds.
            # The delay only picks the kill point; nothing depends on it.
            with contextlib.suppress(subprocess.TimeoutExpired):
                writer.wait(timeout=rng.uniform(0, 0.05))
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait(timeout=TIMEOUT_S)
            if writer.stdout is not None:
                writer.stdout.close()
        assert writer.returncode == -signal.SIGKILL
        leftovers = temporaries(directory)
        leftovers_seen += len(leftovers)
        with ShardStore(directory) as store:
            assert sorted(store.removed) == leftovers
            assert store.load(WRITER_STATES[0].spec.shard_id) in WRITER_STATES
        assert os.listdir(directory) == [file_name(WRITER_STATES[0].spec.shard_id)]
    print(f"{disk} disk: {KILLS} kills, {leftovers_seen} temporary files left and removed at open")


@pytest.mark.parametrize("failing", ["rename", "fsync"])
def test_a_crash_before_the_rename_leaves_the_old_state_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    old, new = WRITER_STATES
    store = ShardStore(tmp_path / "shards")
    store.save(old)

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(StateFileError, match="No space left on device"):
        store.save(new)
    monkeypatch.undo()
    assert store.load(old.spec.shard_id) == old
    assert os.listdir(tmp_path / "shards") == [store.path_for(old.spec.shard_id).name]


WRITERS = 4
SAVES = 150


@pytest.mark.subprocess
def test_concurrent_writers_and_openers_in_several_processes(directory: Path) -> None:
    ShardStore(directory).close()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    writers = [
        subprocess.Popen(
            [sys.executable, str(ROLES), "concurrent", str(directory), str(i), str(SAVES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(WRITERS)
    ]
    # Two processes that open the store (and so clean its leftovers) and load
    # it all, again and again, while the writers write: no save may fail, no
    # load may see a torn file.
    openers = [
        subprocess.Popen(
            [sys.executable, str(ROLES), "opener", str(directory), "8"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    results = []
    for process in writers + openers:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    opened = sum(r["opened"] for r in results[WRITERS:])
    assert opened > 0
    with ShardStore(directory) as store:
        found = store.load_all()
        assert found.errors == ()
        shared = store.load(WRITER_STATES[0].spec.shard_id)
        assert shared in [concurrent_value(i, SAVES - 1) for i in range(WRITERS)]
        for i in range(WRITERS):
            own = f"{WRITER_STATES[0].spec.shard_id}-own-{i}"
            assert store.load(own) == concurrent_value(i, SAVES - 1, own)
    assert temporaries(directory) == []
    assert len(os.listdir(directory)) == WRITERS + 1
    print(
        f"writers: {WRITERS} x {2 * SAVES} saves; openers: 2, {opened} opens,"
        f" {sum(r['loaded'] for r in results[WRITERS:])} shards loaded"
    )


# --- a full filesystem ------------------------------------------------------------


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_filesystem_refuses_the_save_and_keeps_the_old_state(
    small_filesystem: Path,
) -> None:
    directory = small_filesystem / "shards"
    with ShardStore(directory) as store:
        store.save(SAVED)
        # Fill what is left.
        filler = (small_filesystem / "filler").open("wb", buffering=0)
        with filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)
        large = SavedShard(
            attrs.evolve(SPEC, hcas=tuple(f"mlx5_{i}" for i in range(2000))), State.DRAINING
        )
        with pytest.raises(StoreOSError) as caught:
            store.save(large)
        assert caught.value.file == str(store.path_for(ID))
        assert caught.value.reason == "not saved: No space left on device (ENOSPC)"
        assert caught.value.errno == errno.ENOSPC
        assert not isinstance(caught.value, DecodeError)
        assert pickle.loads(pickle.dumps(caught.value)).errno == errno.ENOSPC
        assert store.load(ID) == SAVED
        assert temporaries(directory) == []
        (small_filesystem / "filler").unlink()
        store.save(large)
        assert store.load(ID) == large


_FSIZE = """
import resource, signal, sys
sys.path.insert(0, sys.argv[2])
import attrs
from llmgw_wire import SavedShard, ShardStore, State, StoreError
from tests.store_roles import SHARED
store = ShardStore(sys.argv[1])
store.save(SavedShard(SHARED, State.READY))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
large = attrs.evolve(SHARED, hcas=tuple(f"mlx5_{i}" for i in range(2000)))
try:
    store.save(SavedShard(large, State.DRAINING))
except StoreError as error:
    print(error.reason)
assert store.load(SHARED.shard_id) == SavedShard(SHARED, State.READY)
"""


@pytest.mark.subprocess
def test_a_file_size_limit_refuses_the_save_and_keeps_the_old_state(directory: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE, str(directory), str(Path(__file__).resolve().parent.parent)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "not saved: File too large (EFBIG)\n"
    assert temporaries(directory) == []
    assert resource.RLIMIT_FSIZE  # the limit exists on this platform


# --- the guide's example -----------------------------------------------------------


def test_the_guides_agent_code_persists_reports_and_adopts_old_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "guides" / "shard-state.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, "docs/guides/shard-state.md", "exec"), namespace)
    store: ShardStore = namespace["store"]
    assert store.directory == Path("shards")
    assert stat.S_IMODE((tmp_path / "shards").stat().st_mode) == 0o700

    message = start_shard_from_command(sample_command())
    spec = namespace["on_start_shard"](message)
    assert [shard.compute for shard in namespace["running_shards"]()] == [None]
    compute = Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40)
    namespace["on_engine_ready"](spec, compute)
    (running,) = namespace["running_shards"]()
    (adopted,) = adopted_from_register("gpu-node-017", [running])
    assert adopted.compute == compute
    assert adopted.state is State.READY
    namespace["on_shard_stopped"](spec)
    assert namespace["running_shards"]() == []

    # A file the guide's earlier version had agents write, format 1, taken over.
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(OLD_FORMAT, old / f"{ID}.json")
    (old / "elsewhere.json").symlink_to(OLD_FORMAT)
    namespace["adopt_old_files"](old, store)
    assert sorted(os.listdir(old)) == ["elsewhere.json"]
    taken = store.load(ID)
    assert taken is not None
    assert taken.spec.compute == compute
    assert json.loads(store.path_for(ID).read_text())["format"] == 2
    store.close()


def test_state_file_error_is_the_deprecated_name_of_store_error() -> None:
    assert StateFileError is StoreError
