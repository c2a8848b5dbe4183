"""A shard's state on disk: round trips, the file's mode, its format, and what is refused."""

from __future__ import annotations

import json
import os
import pickle
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import adopted_from_register, start_shard_from_command
from llmgw_wire.domain import Compute, ShardSpec, State
from llmgw_wire.errors import DecodeError, EncodeError, JSONError, StateFileError
from llmgw_wire.state import FORMAT, ShardState, load_shard_state, save_shard_state
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.sample import sample_command

KEY = "sk-llmgw-demo-0000"
SPEC = attrs.evolve(sample_command().spec, compute=Compute("cuda", ("cuda:4",), 61, 61))
SAVED = ShardState(SPEC, State.READY)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "mistral-r8-s0.json"


def saved_document(path: Path) -> dict[str, Any]:
    save_shard_state(path, SAVED)
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def write_document(path: Path, document: object) -> None:
    path.write_text(json.dumps(document))


def refusal(path: Path) -> str:
    with pytest.raises(StateFileError) as caught:
        load_shard_state(path)
    return str(caught.value)


# --- round trips -----------------------------------------------------------------


@given(lst.shard_specs(), st.sampled_from(State))
def test_what_is_saved_loads_back_equal(spec: ShardSpec, state: State) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "shard.json")
        save_shard_state(path, ShardState(spec, state))
        assert load_shard_state(path) == ShardState(spec, state)


def test_the_file_holds_the_format_the_spec_with_its_key_and_compute(path: Path) -> None:
    document = saved_document(path)
    assert list(document) == ["format", "spec", "state"]
    assert document["format"] == FORMAT == 1
    assert document["state"] == "ready"
    assert document["spec"]["api_key"] == KEY
    assert document["spec"]["compute"] == {
        "backend": "cuda",
        "devices": ["cuda:4"],
        "offloaded": 61,
        "total": 61,
    }
    assert load_shard_state(path) == SAVED
    assert load_shard_state(str(path)) == SAVED


def test_saving_again_replaces_the_state(path: Path) -> None:
    save_shard_state(path, SAVED)
    draining = ShardState(SPEC, State.DRAINING)
    save_shard_state(path, draining)
    assert load_shard_state(path) == draining
    assert os.listdir(path.parent) == [path.name]


def test_the_key_is_in_no_repr(path: Path) -> None:
    save_shard_state(path, SAVED)
    assert KEY not in repr(load_shard_state(path))


# --- the file's mode and how it is written ----------------------------------------


def test_the_file_is_readable_by_its_owner_only(path: Path) -> None:
    old = os.umask(0)
    try:
        save_shard_state(path, SAVED)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_open_file_is_made_owner_only_by_the_next_save(path: Path) -> None:
    path.write_text("{}")
    path.chmod(0o644)
    save_shard_state(path, SAVED)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_key_is_never_written_to_a_file_others_may_read(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file is 0o600 when its data is synced, and the directory is synced after the rename."""
    events: list[tuple[str, object]] = []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            events.append(("fsync directory", None))
        else:
            events.append(("fsync file", stat.S_IMODE(mode)))
        fsync(fd)

    def recording_replace(source: str, target: str) -> None:
        events.append(("replace", Path(target) == path))
        replace(source, target)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    save_shard_state(path, SAVED)
    assert events == [("fsync file", 0o600), ("replace", True), ("fsync directory", None)]


def test_a_value_the_file_cannot_hold_is_refused_and_nothing_written(path: Path) -> None:
    save_shard_state(path, SAVED)
    mistyped = ShardState(attrs.evolve(SPEC, rank="0"), State.READY)  # type: ignore[arg-type]
    with pytest.raises(EncodeError) as caught:
        save_shard_state(path, mistyped)
    assert str(caught.value) == "Expected `integer`, got '0' - at `$.spec.rank`"
    assert load_shard_state(path) == SAVED
    assert os.listdir(path.parent) == [path.name]


def test_only_a_shard_state_is_saved(path: Path) -> None:
    with pytest.raises(TypeError, match="expected a ShardState, got ShardSpec"):
        save_shard_state(path, SPEC)  # type: ignore[arg-type]
    assert not path.exists()


def test_a_missing_file_is_not_found(path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_shard_state(path)


# --- other versions ---------------------------------------------------------------


def test_a_newer_agents_file_with_keys_unknown_here_loads(path: Path) -> None:
    document = saved_document(path)
    document["written_by"] = "llmgw-agent 2.3.0"
    document["spec"]["numa_policy"] = "interleave"
    document["spec"]["compute"]["kv_cache_mb"] = 24576
    document["spec"]["profile"]["quantization"] = "fp8"
    write_document(path, document)
    assert load_shard_state(path) == SAVED


def test_an_older_agents_file_without_compute_loads_with_none(path: Path) -> None:
    document = saved_document(path)
    del document["spec"]["compute"]
    write_document(path, document)
    assert load_shard_state(path) == ShardState(attrs.evolve(SPEC, compute=None), State.READY)


def test_a_state_this_version_does_not_know_is_failed(path: Path) -> None:
    document = saved_document(path)
    document["state"] = "hibernating"
    write_document(path, document)
    assert load_shard_state(path).state is State.FAILED


@pytest.mark.parametrize(
    ("found", "message"),
    [
        (2, "format 2 is newer than this version of llmgw-wire reads (1) - at `$.format`"),
        (0, "unknown format 0 (this version reads format 1) - at `$.format`"),
        ("1", 'expected `integer`, got "1" - at `$.format`'),
    ],
)
def test_a_format_this_version_does_not_read_is_refused(
    path: Path, found: object, message: str
) -> None:
    document = saved_document(path)
    document["format"] = found
    # A newer format is refused before its content is read, however it looks.
    document["spec"] = "whatever format 2 keeps here"
    write_document(path, document)
    assert refusal(path) == f"{path}: {message}"


def test_a_file_without_a_format_is_refused(path: Path) -> None:
    document = saved_document(path)
    del document["format"]
    write_document(path, document)
    assert refusal(path) == f"{path}: required key missing - at `$.format`"


# --- broken files ----------------------------------------------------------------


def test_a_file_truncated_anywhere_is_refused(path: Path) -> None:
    save_shard_state(path, SAVED)
    whole = path.read_bytes()
    for end in range(len(whole.rstrip())):
        path.write_bytes(whole[:end])
        message = refusal(path)
        assert message.startswith(f"{path}: not JSON: "), (end, message)


@pytest.mark.parametrize(
    ("end", "reason"),
    [
        (0, "Expecting value at line 1, column 1"),
        (1, "Expecting property name enclosed in double quotes at line 1, column 2"),
        (12, "Expecting ':' delimiter at line 2, column 11"),
        (36, "Unterminated string starting at line 4, column 5"),
        (45, "Expecting ':' delimiter at line 4, column 17"),
    ],
)
def test_what_a_truncated_file_is_refused_with(path: Path, end: int, reason: str) -> None:
    save_shard_state(path, SAVED)
    path.write_bytes(path.read_bytes()[:end])
    assert refusal(path) == f"{path}: not JSON: {reason}"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"ready", "not JSON: Expecting value at line 1, column 1"),
        (b'{"a": "\xff"}', "not UTF-8 text: invalid start byte at byte 7"),
        (b'{"format": 1}{}', "not JSON: Extra data at line 1, column 14"),
        (b"[]", "expected `object`, got an array"),
        (b"null", "expected `object`, got null"),
    ],
)
def test_a_file_that_is_not_a_shard_state_is_refused(path: Path, data: bytes, reason: str) -> None:
    path.write_bytes(data)
    assert refusal(path) == f"{path}: {reason}"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["spec"].update(rank="a"), 'expected `integer`, got "a" - at `$.spec.rank`'),
        (
            lambda d: d["spec"].update(gpu_indices=[4, 5, 6.0]),
            "expected `integer`, got 6.0 - at `$.spec.gpu_indices[2]`",
        ),
        (
            lambda d: d["spec"]["compute"].update(devices="cuda:4"),
            'expected `array`, got "cuda:4" - at `$.spec.compute.devices`',
        ),
        (
            lambda d: d["spec"]["profile"].update(env=["VLLM_USE_V1=1"]),
            "expected `object`, got an array - at `$.spec.profile.env`",
        ),
        (
            lambda d: d.update(state=4),
            "expected `string` (a shard state), got 4 - at `$.state`",
        ),
        (lambda d: d.pop("spec"), "required key missing - at `$.spec`"),
        (lambda d: d.pop("state"), "required key missing - at `$.state`"),
        (
            lambda d: d["spec"].update(api_key=["sk-llmgw-demo-0000"]),
            "expected `string`, got an array (a secret, not shown) - at `$.spec.api_key`",
        ),
    ],
)
def test_a_mistyped_file_is_refused_with_the_place(path: Path, edit: Any, message: str) -> None:
    document = saved_document(path)
    edit(document)
    write_document(path, document)
    assert refusal(path) == f"{path}: {message}"


def test_state_file_errors_say_where_and_pickle(path: Path) -> None:
    path.write_text('{"format": 1, "spec": {"rank": "a"}, "state": "ready"}')
    with pytest.raises(StateFileError) as caught:
        load_shard_state(path)
    error = caught.value
    assert (error.file, error.reason, error.path) == (
        str(path),
        'expected `integer`, got "a"',
        ("spec", "rank"),
    )
    assert isinstance(error, JSONError)
    assert isinstance(error, DecodeError)
    assert isinstance(error, ValueError)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is StateFileError
    assert str(again) == str(error)


# --- the documentation's example --------------------------------------------------


def test_the_documented_agent_code_persists_and_reports_compute(tmp_path: Path) -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "guides" / "shard-state.md"
    code = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/guides/shard-state.md", "exec"), namespace)
    namespace["state_dir"] = tmp_path

    message = start_shard_from_command(sample_command())
    spec = namespace["on_start_shard"](message)
    assert [shard.compute for shard in namespace["running_shards"]()] == [None]
    compute = Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40)
    namespace["on_engine_ready"](spec, compute)
    (running,) = namespace["running_shards"]()
    (adopted,) = adopted_from_register("gpu-node-017", [running])
    assert adopted.compute == compute
    assert adopted.state is State.READY
    assert os.listdir(tmp_path) == ["mistral-r8-s0.json"]
