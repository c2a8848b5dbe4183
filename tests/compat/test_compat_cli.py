"""The four cases the checker once got wrong, and the command's habits for CI.

Formats (json, github-actions, junit), buf's exit codes, a positional input,
configuration from `buf.yaml` and `pyproject.toml`, inputs that find their
proto root, released versions, and the hint in a shallow clone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from llmgw_wire import compat
from llmgw_wire._cli import main

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]


def schema(folder: Path, text: str, name: str = "t.proto") -> Path:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(text))
    return folder


@pytest.fixture
def compiled(tmp_path: Path) -> Callable[[str], object]:
    counter = iter(range(1000))

    def compile_text(text: str) -> object:
        return compat.compile_protos(schema(tmp_path / f"s{next(counter)}", text))

    return compile_text


def found(old: object, new: object, category: str = "WIRE_JSON") -> list[tuple[str, str]]:
    return [(f.rule, f.location) for f in compat.check(old, new, category=category)]


# ---------------------------------------------------------------- the four wrong cases

ALIASES = """\
    syntax = "proto3";
    package t.v1;

    enum State {
      option allow_alias = true;
      STATE_UNSPECIFIED = 0;
      STATE_DRAINING = 5;
      STATE_STOPPED = 6;
      STATE_HALTED = 6;
    }
    """


def test_adding_an_enum_alias_passes_and_removing_one_is_a_rename(
    compiled: Callable[[str], object],
) -> None:
    base = compiled(ALIASES)
    added = compiled(
        ALIASES.replace("STATE_DRAINING = 5;\n", "STATE_DRAINING = 5;\n  STATE_DRAIN = 5;\n")
    )
    removed = compiled(
        ALIASES.replace("      STATE_HALTED = 6;\n", "").replace(
            "      option allow_alias = true;\n", ""
        )
    )
    assert found(base, added) == []
    assert found(base, removed) == [("ENUM_VALUE_SAME_NAME", "t.proto:7:19")]
    assert found(base, removed, "WIRE") == []
    # And back: the alias added again is no break; the old side lacks it.
    assert found(removed, base) == []


EXTENSION = """\
    syntax = "proto2";
    package t.v1;

    import "google/protobuf/descriptor.proto";

    extend google.protobuf.FieldOptions {
      optional string tag = 50001;
      optional string other = 50002;
    }
    """


def test_extensions_are_checked_with_the_field_rules(compiled: Callable[[str], object]) -> None:
    base = compiled(EXTENSION)
    retyped = compiled(EXTENSION.replace("optional string tag", "optional int32 tag"))
    assert found(base, retyped, "WIRE") == [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:7:12")]
    findings = compat.check(base, retyped)
    assert [f.rule for f in findings] == ["FIELD_WIRE_JSON_COMPATIBLE_TYPE"]
    assert findings[0].message.startswith(
        'extension 50001 "t.v1.tag" of message google.protobuf.FieldOptions changed type '
        "from string to int32"
    )
    renamed = compiled(EXTENSION.replace("tag = 50001", "label = 50001"))
    assert found(base, renamed) == [("FIELD_SAME_NAME", "t.proto:7:19")]
    deleted = compiled(EXTENSION.replace("      optional string tag = 50001;\n", ""))
    assert found(base, deleted) == []  # buf's EXTENSION_NO_DELETE is in FILE, not WIRE


ONEOF = """\
    syntax = "proto3";
    package t.v1;

    message Register {
      string node_id = 1;
      oneof selector {
        string host = 2;
      }
    }
    """


def test_a_oneof_named_like_a_json_name_is_a_valid_schema(
    tmp_path: Path, compiled: Callable[[str], object], capsys: pytest.CaptureFixture[str]
) -> None:
    # The Python descriptor pool refuses it ("duplicate json_name"); protoc and buf do not.
    valid = ONEOF.replace("oneof selector", "oneof nodeId")
    assert found(compiled(valid), compiled(valid)) == []
    assert found(compiled(ONEOF), compiled(valid)) == [("FIELD_SAME_ONEOF", "t.proto:7:5")]
    schema(tmp_path / "old", ONEOF)
    schema(tmp_path / "new", valid)
    assert main(["compat", str(tmp_path / "new"), "--against", str(tmp_path / "old")]) == 1
    assert "FIELD_SAME_ONEOF" in capsys.readouterr().out


MAPS = """\
    syntax = "proto3";
    package t.v1;

    message Node {
      map<string, string> labels = 1;
    }
    """


def test_map_fields_as_buf_sees_them(compiled: Callable[[str], object]) -> None:
    base = compiled(MAPS)
    # Renaming a map field renames its hidden entry type: a type change.
    renamed = compiled(MAPS.replace("labels = 1", "marks = 1"))
    assert found(base, renamed, "WIRE") == [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:5:3")]
    # A hand-written entry message of the same name is the same type on the
    # wire; only JSON (an object, then a list) tells them apart.
    by_hand = compiled(
        MAPS.replace(
            "      map<string, string> labels = 1;\n",
            "      repeated LabelsEntry labels = 1;\n"
            "      message LabelsEntry {\n        string key = 1;\n        string value = 2;\n"
            "      }\n",
        )
    )
    assert found(base, by_hand, "WIRE") == []
    assert found(base, by_hand) == [("FIELD_WIRE_JSON_COMPATIBLE_CARDINALITY", "t.proto:5:3")]
    # A value type change is reported on the entry's field, at the map field.
    widened = compiled(MAPS.replace("map<string, string>", "map<string, bytes>"))
    assert found(base, widened) == [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:5:3")]


def test_deviations_are_data() -> None:
    deviations = compat.deviations()
    assert {d.id for d in deviations} == {
        "idempotency-removed-at-rpc",
        "idempotency-removed-not-at-line-1",
    }
    assert all(isinstance(d, compat.Deviation) and d.reason for d in deviations)


# ---------------------------------------------------------------- the command

PROTO = """\
    syntax = "proto3";
    package t.v1;

    message Gpu {
      int32 index = 1;
      string uuid = 2;
      int32 memory_total_mb = 3;
    }
    """
DELETED = PROTO.replace("      int32 memory_total_mb = 3;\n", "")


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    schema(tmp_path / "old", PROTO)
    schema(tmp_path / "new", DELETED)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_json_is_bufs_one_object_a_line(pair: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", "new", "--against", "old", "--error-format", "json"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [list(line) for line in lines] == [
        ["path", "start_line", "start_column", "end_line", "end_column", "type", "message"]
    ] * 2
    assert [(x["path"], x["start_line"], x["type"]) for x in lines] == [
        ("new/t.proto", 4, "FIELD_NO_DELETE_UNLESS_NAME_RESERVED"),
        ("new/t.proto", 4, "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED"),
    ]
    assert lines[0]["end_line"] == 7
    assert lines[0]["message"].startswith('field 3 "memory_total_mb" of message t.v1.Gpu')


def test_github_actions_annotations(pair: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", "new", "--against", "old", "--error-format", "github-actions"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "::error file=new/t.proto,line=4,col=1,endLine=7,endColumn=2,"
        "title=FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED::FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED: "
        'field 3 "memory_total_mb" of message t.v1.Gpu was deleted without reserving its '
        "number; older peers still send it."
    )
    assert len(out) == 2


def test_github_actions_escapes_what_would_end_a_property() -> None:
    finding = compat.Finding("a,b:c.proto", 1, 2, "RULE", "50% done\nnext")
    assert compat.render([finding], "github-actions") == (
        "::error file=a%2Cb%3Ac.proto,line=1,col=2,endLine=1,endColumn=2,title=RULE::"
        "RULE: 50%25 done%0Anext\n"
    )


def test_junit_is_one_failed_case_a_finding(pair: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", "new", "--against", "old", "--error-format", "junit"]) == 1
    root = ET.fromstring(capsys.readouterr().out)
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("new/t", "2", "2")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "FIELD_NO_DELETE_UNLESS_NAME_RESERVED_4_1",
        "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED_4_1",
    ]
    failure = cases[0].find("failure")
    assert failure is not None
    assert failure.get("type") == "FIELD_NO_DELETE_UNLESS_NAME_RESERVED"
    assert failure.get("message", "").startswith('new/t.proto:4:1:field 3 "memory_total_mb"')
    assert compat.render([], "junit") == "<testsuites>\n</testsuites>\n"


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["new", "--against", "old"], 100),
        (["old", "--against", "old"], 0),
        (["missing", "--against", "old"], 1),
    ],
)
def test_bufs_exit_codes(pair: Path, args: list[str], status: int) -> None:
    assert main(["compat", *args, "--exit-codes", "buf"]) == status


def test_input_is_positional_or_proto(pair: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", "--proto", "new", "--against", "old"]) == 1
    by_option = capsys.readouterr()
    assert main(["compat", "new", "--against", "old"]) == 1
    assert capsys.readouterr() == by_option
    assert main(["compat", "new", "--proto", "old", "--against", "old"]) == 2
    assert "name two schemas" in capsys.readouterr().err


BUF_YAML = """\
    version: v2
    modules:
      - path: new
    breaking:
      use:
        - WIRE_JSON
      except:
        - FIELD_NO_DELETE_UNLESS_NAME_RESERVED
      ignore:
        - new/legacy
    """


def test_buf_yaml_except_and_ignore_are_honoured(
    pair: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema(pair / "old", PROTO.replace("package t.v1;", "package t.legacy;"), "legacy/l.proto")
    schema(pair / "new", "syntax = 'proto3';\npackage t.legacy2;\n", "legacy/l.proto")
    schema(pair, BUF_YAML, "buf.yaml")
    assert main(["compat", "new", "--against", "old"]) == 1
    out, err = capsys.readouterr()
    # The name rule is excepted, the package change in legacy/ is ignored.
    assert [line.split(": ")[1] for line in out.splitlines()] == [
        "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED"
    ]
    assert err.endswith("(WIRE_JSON; config buf.yaml): 1 breaking change\n")
    # Without the file, all three are reported.
    assert main(["compat", "new", "--against", "old", "--config", str(pair / "none.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (pair / "buf.yaml").unlink()
    assert main(["compat", "new", "--against", "old"]) == 1
    rules = sorted(line.split(": ")[1] for line in capsys.readouterr().out.splitlines())
    assert rules == [
        "FIELD_NO_DELETE_UNLESS_NAME_RESERVED",
        "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED",
        "FILE_SAME_PACKAGE",
    ]


def test_pyproject_holds_the_same_keys(pair: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (pair / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.llmgw-wire.compat]\nuse = ["WIRE"]\n'
        'ignore_only = { FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED = ["new/t.proto"] }\n'
    )
    assert main(["compat", "new", "--against", "old"]) == 0
    assert capsys.readouterr().err.endswith("(WIRE; config pyproject.toml): compatible\n")
    config = compat.load_config(pair / "pyproject.toml", pair / "new")
    assert config.ignore_only == {"FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED": ("t.proto",)}
    assert config.rules("WIRE_JSON") == sorted(r for r, c in compat.RULES.items() if "WIRE" in c)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("version: v1beta1\n", "Expected a buf.yaml of version v2 or v1, got version 'v1beta1'"),
        ("version: v2\nbreaking:\n  use: [FILE]\n", "Expected a rule or a category of WIRE"),
        ("version: v2\nbreaking:\n  uses: [WIRE]\n", "Expected keys among use, except"),
        ("version: v2\nbreaking:\n  ignore: new\n", "ignore: Expected a list of strings"),
    ],
)
def test_a_bad_configuration_names_the_file_and_the_key(
    pair: Path, text: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (pair / "buf.yaml").write_text(text)
    assert main(["compat", "new", "--against", "old"]) == 2
    err = capsys.readouterr().err
    assert error in err
    assert "buf.yaml" in err


def test_a_v1_buf_yaml_in_the_module_is_read_too(
    pair: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (pair / "new" / "buf.yaml").write_text(
        "version: v1\nbreaking:\n  use: [WIRE]\n  ignore: [t.proto]\n"
    )
    assert main(["compat", "new", "--against", "old"]) == 0
    assert capsys.readouterr().err.endswith("(WIRE; config new/buf.yaml): compatible\n")


def test_category_on_the_command_line_wins_over_use(
    pair: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (pair / "buf.yaml").write_text("version: v2\nbreaking:\n  use: [WIRE]\n")
    assert main(["compat", "new", "--against", "old", "--category", "WIRE_JSON"]) == 1
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_against_a_released_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    version = compat.baseline_versions()[-1]
    assert main(["compat", "proto", "--against", version]) == 0
    assert main(["compat", "proto", "--against", f"v{version}"]) == 0


def test_a_folder_finds_its_proto_root_and_skips_environments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema(tmp_path / "proto", PROTO, "t/v1/gpu.proto")
    # What a repository root also holds: a virtual environment and node modules
    # with .proto files of their own, and a deeper test schema.
    schema(tmp_path / ".venv" / "lib", PROTO, "t/v1/gpu.proto")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("")
    schema(tmp_path / "env" / "lib", PROTO, "t/v1/gpu.proto")
    schema(tmp_path / "node_modules" / "x", PROTO, "t/v1/gpu.proto")
    schema(tmp_path / "tests" / "schemas" / "old", PROTO, "t/v1/gpu.proto")
    assert compat.find_proto_root(tmp_path) == tmp_path / "proto"
    assert main(["compat", str(tmp_path / "proto"), "--against", str(tmp_path)]) == 0
    schema(tmp_path / "other", PROTO, "t/v1/gpu.proto")
    with pytest.raises(compat.CompatError, match="holds several schemas"):
        compat.find_proto_root(tmp_path)


@pytest.mark.subprocess
def test_a_shallow_clone_gets_a_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    origin = tmp_path / "origin"
    schema(origin / "proto", PROTO)
    git = [
        "git",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "-c",
        "commit.gpgsign=false",
    ]
    for args in (["init", "-q"], ["add", "proto"], ["commit", "-q", "-m", "one"]):
        subprocess.run([*git, "-C", str(origin), *args], check=True, timeout=60)
    schema(origin / "proto", DELETED)
    subprocess.run([*git, "-C", str(origin), "commit", "-qam", "two"], check=True, timeout=60)
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(clone)],
        check=True,
        timeout=60,
    )
    monkeypatch.chdir(clone)
    with pytest.raises(compat.CompatError, match=r"shallow.*git fetch --deepen=1"):
        compat.from_git("HEAD~1", "proto")
    subprocess.run(["git", "fetch", "-q", "--deepen=1"], check=True, timeout=60)
    assert [
        f.rule
        for f in compat.check(
            compat.from_git("HEAD~1", "proto"), compat.compile_protos("proto"), category="WIRE"
        )
    ] == ["FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED"]


@pytest.mark.subprocess
def test_the_command_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from llmgw_wire._cli import main\n"
        "assert main(['compat', 'proto']) == 0\n"
        "heavy = sorted(m for m in ('betterproto2', 'cattrs', 'grpc', 'grpclib', "
        "'llmgw_wire.mapping', 'llmgw_wire.codec', 'llmgw_wire.domain', 'hypothesis') "
        "if m in sys.modules)\n"
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout == "[]\n"


@pytest.mark.subprocess
def test_compiling_changes_nothing_of_the_interpreter(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "path, hooks = list(sys.path), list(sys.meta_path)\n"
        "from llmgw_wire import compat\n"
        "assert compat.compile_protos('proto').file\n"
        "assert (sys.path, sys.meta_path) == (path, hooks)\n"
        "assert 'grpc_tools.protoc' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_the_shipped_mapping_against_its_baseline_says_nothing_was_removed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A command's ids, pool, fabric and fingerprint are read from its spec since
    # 1.0.0's description: the same wire fields, one model down, not gone.
    pytest.importorskip("grpc_tools")
    monkeypatch.chdir(REPO)
    assert main(["compat", "--mapping", "--against", "1.0.0"]) == 0
    notices = capsys.readouterr().err.splitlines()[:-1]
    assert not [line for line in notices if ": removed: " in line]
    assert (
        "mapping: ShardCommand.replica_id: moved: now read from ShardCommand.spec.replica_id, "
        "the same scalar rule from wire field 'replica_id' (string)"
    ) in notices
    from llmgw_wire.domain import ShardCommand, ShardSpec

    assert ShardCommand(ShardSpec(replica_id="r-1")).replica_id == "r-1"
