"""The schema breaking-change checker: each rule, the safe changes, the inputs and the command."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from llmgw_wire import compat
from llmgw_wire._cli import main
from llmgw_wire.compat import _sources
from llmgw_wire.errors import WireError

if TYPE_CHECKING:
    from collections.abc import Callable

from tests.compat.compat_cases import CASES, PROTO3, edit

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def compile_schema(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    """Compile one `t.proto` text with protoc, once per distinct text."""
    cache: dict[str, Any] = {}
    counter = itertools.count()

    def compile_text(text: str) -> Any:
        if text not in cache:
            root = tmp_path_factory.mktemp(f"schema{next(counter)}")
            (root / "t.proto").write_text(text)
            cache[text] = compat.compile_protos(root)
        return cache[text]

    return compile_text


def found(
    compile_schema: Callable[[str], Any], old: str, new: str, category: str
) -> list[tuple[str, str]]:
    findings = compat.check(compile_schema(old), compile_schema(new), category=category)
    return [(f.rule, f.location) for f in findings]


# Each case: an edit of the base schema, and what WIRE and WIRE_JSON find in it.


@pytest.mark.parametrize("category", compat.CATEGORIES)
@pytest.mark.parametrize(
    ("old", "new", "wire", "wire_json"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_rule(
    compile_schema: Callable[[str], Any],
    category: str,
    old: str,
    new: str,
    wire: list[tuple[str, str]],
    wire_json: list[tuple[str, str]],
) -> None:
    expected = wire if category == "WIRE" else wire_json
    assert found(compile_schema, old, new, category) == expected


DELETED = edit(PROTO3, ("  int32 memory_total_mb = 3;\n", "\n"))
DELETED_NAME = (
    'FIELD_NO_DELETE_UNLESS_NAME_RESERVED: field 3 "memory_total_mb" of message t.v1.Gpu '
    "was deleted without reserving its name; older peers still use it as a JSON key."
)
DELETED_NUMBER = (
    'FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED: field 3 "memory_total_mb" of message t.v1.Gpu '
    "was deleted without reserving its number; older peers still send it."
)


def test_findings_read_as_sentences(compile_schema: Callable[[str], Any]) -> None:
    changed = edit(
        DELETED,
        ("int32 index = 1", "string idx = 1"),
        ("KIND_SLICE = 2", "KIND_MIG = 2"),
        ("rpc Watch(stream Req)", "rpc Watch(Req)"),
    )
    findings = compat.check(compile_schema(PROTO3), compile_schema(changed))
    assert [str(f) for f in findings] == [
        f"t.proto:4:1: {DELETED_NAME}",
        f"t.proto:4:1: {DELETED_NUMBER}",
        't.proto:5:3: FIELD_SAME_JSON_NAME: field 1 "idx" of message t.v1.Gpu changed its JSON '
        'name from "index" to "idx"; peers on the other version write and look for the other key.',
        't.proto:5:3: FIELD_WIRE_JSON_COMPATIBLE_TYPE: field 1 "idx" of message t.v1.Gpu changed '
        "type from int32 to string, a change the wire format or JSON does not allow; peers on "
        "the two versions misread it.",
        't.proto:5:10: FIELD_SAME_NAME: field 1 of message t.v1.Gpu was renamed from "index" to '
        '"idx"; JSON and text readers no longer accept the old name.',
        "t.proto:28:14: ENUM_VALUE_SAME_NAME: value 2 of enum t.v1.Kind was renamed from "
        '"KIND_SLICE" to "KIND_MIG"; JSON carries enum values by name, so peers on the two '
        "versions do not understand each other's.",
        "t.proto:39:3: RPC_SAME_CLIENT_STREAMING: RPC t.v1.Svc.Watch no longer streams its "
        "requests; calls between peers on the two versions fail.",
    ]
    assert findings == sorted(findings)
    assert findings[0] == compat.Finding(
        "t.proto", 4, 1, "FIELD_NO_DELETE_UNLESS_NAME_RESERVED", DELETED_NAME.split(": ", 1)[1]
    )


def test_messages_name_what_changed(compile_schema: Callable[[str], Any]) -> None:
    changed = edit(
        PROTO3,
        ("reserved 20 to 22, 30;", "reserved 21;"),
        ("map<string, string> labels", "map<string, bytes> labels"),
        ("  KIND_SLICE = 2;\n", "\n"),
    )
    messages = [f.message for f in compat.check(compile_schema(PROTO3), compile_schema(changed))]
    assert messages == [
        "message t.v1.Gpu no longer reserves field number 30; a new declaration could reuse "
        "a number that older peers give another meaning.",
        "message t.v1.Gpu no longer reserves field numbers 20, 22; a new declaration could "
        "reuse a number that older peers give another meaning.",
        'field 2 "value" of message t.v1.Gpu.LabelsEntry changed type from string to bytes, '
        "a change the wire format or JSON does not allow; peers on the two versions misread it.",
        'value 2 ("KIND_SLICE") of enum t.v1.Kind was deleted without reserving its name; '
        "older peers still send it by name in JSON.",
        'value 2 ("KIND_SLICE") of enum t.v1.Kind was deleted without reserving its number; '
        "older peers still send it.",
    ]


def test_rules_are_bufs_wire_and_wire_json() -> None:
    both = {
        "ENUM_VALUE_NO_DELETE_UNLESS_NUMBER_RESERVED",
        "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED",
        "FIELD_SAME_DEFAULT",
        "FIELD_SAME_ONEOF",
        "FILE_SAME_PACKAGE",
        "MESSAGE_SAME_REQUIRED_FIELDS",
        "RESERVED_ENUM_NO_DELETE",
        "RESERVED_MESSAGE_NO_DELETE",
        "RPC_SAME_CLIENT_STREAMING",
        "RPC_SAME_IDEMPOTENCY_LEVEL",
        "RPC_SAME_REQUEST_TYPE",
        "RPC_SAME_RESPONSE_TYPE",
        "RPC_SAME_SERVER_STREAMING",
    }
    wire_only = {"FIELD_WIRE_COMPATIBLE_CARDINALITY", "FIELD_WIRE_COMPATIBLE_TYPE"}
    wire_json_only = {
        "ENUM_SAME_JSON_FORMAT",
        "ENUM_VALUE_NO_DELETE_UNLESS_NAME_RESERVED",
        "ENUM_VALUE_SAME_NAME",
        "FIELD_NO_DELETE_UNLESS_NAME_RESERVED",
        "FIELD_SAME_JSON_NAME",
        "FIELD_SAME_NAME",
        "FIELD_WIRE_JSON_COMPATIBLE_CARDINALITY",
        "FIELD_WIRE_JSON_COMPATIBLE_TYPE",
        "MESSAGE_SAME_JSON_FORMAT",
    }
    assert {name for name, cats in compat.RULES.items() if "WIRE" in cats} == both | wire_only
    assert {name for name, cats in compat.RULES.items() if "WIRE_JSON" in cats} == (
        both | wire_json_only
    )
    assert list(compat.RULES) == sorted(compat.RULES)


def test_repository_schema_keeps_to_the_baseline() -> None:
    assert "1.0.0" in compat.baseline_versions()
    assert compat.check(compat.baseline(), compat.compile_protos(REPO / "proto")) == []
    assert compat.baseline("1.0.0") == compat.baseline()


def test_bad_arguments_raise_compat_error(tmp_path: Path) -> None:
    assert issubclass(compat.CompatError, WireError)
    with pytest.raises(compat.CompatError, match=r"Expected a schema version in .*, got '0.1.0'"):
        compat.baseline("0.1.0")
    with pytest.raises(compat.CompatError, match=r"Expected a category in WIRE, WIRE_JSON"):
        compat.check(compat.baseline(), compat.baseline(), category="FILE")
    with pytest.raises(compat.CompatError, match="not a folder"):
        compat.compile_protos(tmp_path / "missing")
    with pytest.raises(compat.CompatError, match="cannot read"):
        compat.read_descriptor_set(tmp_path / "missing.binpb")


# ---------------------------------------------------------------- the command


def write_schema(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.proto").write_text(text)
    return folder


def test_command_passes_on_the_repository(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    assert main(["compat"]) == 0
    out, err = capsys.readouterr()
    version = compat.baseline_versions()[-1]
    assert (out, err) == ("", f"compat: proto against schema {version} (WIRE_JSON): compatible\n")


def test_command_reports_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_schema(tmp_path / "old", PROTO3)
    write_schema(tmp_path / "new", DELETED)
    monkeypatch.chdir(tmp_path)
    assert main(["compat", "--proto", "new", "--against", "old"]) == 1
    out, err = capsys.readouterr()
    assert out == f"new/t.proto:4:1: {DELETED_NAME}\nnew/t.proto:4:1: {DELETED_NUMBER}\n"
    assert err == "compat: new against old (WIRE_JSON): 2 breaking changes\n"

    assert main(["compat", "--proto", "new", "--against", "old", "--category", "WIRE"]) == 1
    out, err = capsys.readouterr()
    assert out == f"new/t.proto:4:1: {DELETED_NUMBER}\n"
    assert err == "compat: new against old (WIRE): 1 breaking change\n"

    assert main(["compat", "--proto", "old", "--against", "new", "--category", "WIRE"]) == 0


def test_command_reads_descriptor_sets(
    tmp_path: Path, compile_schema: Callable[[str], Any], capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old.binpb", tmp_path / "new.binpb"
    old.write_bytes(compile_schema(PROTO3).SerializeToString())
    new.write_bytes(compile_schema(DELETED).SerializeToString())
    assert main(["compat", "--proto", str(new), "--against", str(old), "--category", "WIRE"]) == 1
    assert capsys.readouterr().out == f"t.proto:4:1: {DELETED_NUMBER}\n"
    folder = write_schema(tmp_path / "proto", DELETED)
    assert main(["compat", "--proto", str(folder), "--against", str(old)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{folder.as_posix()}/t.proto:4:1: {DELETED_NAME}",
        f"{folder.as_posix()}/t.proto:4:1: {DELETED_NUMBER}",
    ]


@pytest.fixture
def git_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    write_schema(repo / "proto", PROTO3)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "proto"], ["commit", "-q", "-m", "v1"], ["tag", "v1"]):
        subprocess.run([*git, "-c", "commit.gpgsign=false", *args], check=True)
    write_schema(repo / "proto", DELETED)
    monkeypatch.chdir(repo)
    return repo


@pytest.mark.parametrize("against", ["git:HEAD", "HEAD", "v1", "git:v1"])
def test_command_compares_with_a_git_revision(
    git_repo: Path, against: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compat", "--against", against]) == 1
    out, err = capsys.readouterr()
    assert out == f"proto/t.proto:4:1: {DELETED_NAME}\nproto/t.proto:4:1: {DELETED_NUMBER}\n"
    revision = against.removeprefix("git:")
    assert err == f"compat: proto against git:{revision} (WIRE_JSON): 2 breaking changes\n"


def test_from_git_finds_the_folder_in_the_repository(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo / "proto")
    assert compat.check(
        compat.from_git("v1", "."), compat.compile_protos("."), category="WIRE"
    ) == [
        compat.Finding(
            "t.proto",
            4,
            1,
            "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED",
            DELETED_NUMBER.split(": ", 1)[1],
        )
    ]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--against", "nowhere"],
            "Expected a file, a folder, a released version or a git revision, got 'nowhere'",
        ),
        (["--against", "git:nowhere"], "'nowhere' is not a git revision"),
        (["--against", "garbage.binpb"], "garbage.binpb is not a FileDescriptorSet"),
        (["--against", "empty.binpb"], "empty.binpb holds no schema files"),
        (["--against", "empty"], "no .proto files under empty"),
        (["--against", "broken"], "protoc rejects broken: t.proto:2:9: Expected message name.\n"),
        (["--proto", "git:HEAD"], "Expected a file or a folder, got 'git:HEAD'"),
    ],
)
def test_command_rejects_bad_input(
    git_repo: Path, args: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (git_repo / "garbage.binpb").write_bytes(b"\xff\xff\xff")
    (git_repo / "empty.binpb").write_bytes(b"")
    (git_repo / "empty").mkdir()
    write_schema(git_repo / "broken", 'syntax = "proto3";\nmessage {')
    assert main(["compat", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"llmgw-wire compat: error: {error}")


def test_command_rejects_an_unknown_category(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compat", "--category", "FILE"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'FILE'" in capsys.readouterr().err


def test_compiling_needs_the_schema_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_sources, "_PROTOC_MODULE", "llmgw_wire_no_protoc_here")
    folder = write_schema(tmp_path / "proto", PROTO3)
    assert main(["compat", "--proto", str(folder)]) == 2
    assert "install the `schema` extra: pip install 'llmgw-wire[schema]'" in capsys.readouterr().err
