"""Repositories, folders and configurations that fight back.

A tree with `..` entries or links, a `.proto` that is a link to /dev/zero or a
FIFO, YAML aliases that expand to gigabytes, values of the wrong type, a file
name that forges a CI command: each is refused quickly, with one bounded line
and exit 2, and nothing is written outside the scratch folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmgw_wire import compat
from llmgw_wire._cli import main
from llmgw_wire.compat._files import MAX_PROTO_BYTES

pytestmark = pytest.mark.timeout(120)

PROTO = 'syntax = "proto3";\npackage t.v1;\n\nmessage Gpu {\n  int32 index = 1;\n}\n'
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]


def needs_git() -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(
        [*GIT, "-C", str(repo), *args], input=stdin, capture_output=True, check=True, timeout=60
    )
    return result.stdout.decode().strip()


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("llmgw-wire compat: error: ")
    assert len(lines[0]) < 400
    return lines[0]


# ---------------------------------------------------------------- git trees


def commit_tree(repo: Path, entries: list[tuple[str, str, str, str]]) -> str:
    """A commit of a hand-made tree: (mode, type, object, name) entries, nested by tuple."""
    lines = "".join(f"{mode} {kind} {obj}\t{name}\n" for mode, kind, obj, name in entries)
    tree = git(repo, "mktree", "--missing", stdin=lines.encode())
    return git(repo, "commit-tree", tree, "-m", "hostile")


@pytest.fixture
def hostile_repo(tmp_path: Path) -> Path:
    needs_git()
    repo = tmp_path / "work" / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    return repo


def blob(repo: Path, data: bytes) -> str:
    return git(repo, "hash-object", "-w", "--stdin", stdin=data)


def test_a_tree_with_dot_dot_entries_writes_nothing_outside(
    hostile_repo: Path, tmp_path: Path
) -> None:
    good = blob(hostile_repo, PROTO.encode())
    # proto/../../../evil.proto: git mktree takes `..` as a name.
    inner = git(hostile_repo, "mktree", stdin=f"100644 blob {good}\tevil.proto\n".encode())
    for _ in range(3):
        inner = git(
            hostile_repo, "mktree", "--missing", stdin=f"040000 tree {inner}\t..\n".encode()
        )
    proto = git(
        hostile_repo,
        "mktree",
        "--missing",
        stdin=f"100644 blob {good}\tgpu.proto\n040000 tree {inner}\t..\n".encode(),
    )
    commit = commit_tree(hostile_repo, [("040000", "tree", proto, "proto")])
    (hostile_repo / "proto").mkdir()
    with pytest.raises(compat.CompatError, match=r"stays inside the folder, got 'proto/\.\./"):
        compat.from_git(commit, hostile_repo / "proto")
    assert not list(tmp_path.rglob("evil.proto"))


def test_a_link_in_a_tree_is_refused(hostile_repo: Path) -> None:
    target = blob(hostile_repo, b"/dev/zero")
    proto = git(hostile_repo, "mktree", stdin=f"120000 blob {target}\tgpu.proto\n".encode())
    commit = commit_tree(hostile_repo, [("040000", "tree", proto, "proto")])
    (hostile_repo / "proto").mkdir()
    with pytest.raises(compat.CompatError, match=r"'proto/gpu\.proto' is a symbolic link"):
        compat.from_git(commit, hostile_repo / "proto")


def test_a_tree_with_a_name_that_is_not_utf8_is_refused(hostile_repo: Path) -> None:
    good = blob(hostile_repo, PROTO.encode())
    proto = git(hostile_repo, "mktree", stdin=f"100644 blob {good}\t".encode() + b"bad\xff.proto\n")
    commit = commit_tree(hostile_repo, [("040000", "tree", proto, "proto")])
    (hostile_repo / "proto").mkdir()
    with pytest.raises(compat.CompatError, match=r"whose name is not UTF-8") as error:
        compat.from_git(commit, hostile_repo / "proto")
    assert compat.escape_text(str(error.value)).startswith("proto/bad\\xff.proto at ")


# ---------------------------------------------------------------- folders


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "gpu.proto").write_text(PROTO)
    shutil.copytree(tmp_path / "old", tmp_path / "new")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_proto_link_to_dev_zero_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "new" / "zero.proto").symlink_to("/dev/zero")
    assert main(["compat", "new", "--against", "old"]) == 2
    assert "zero.proto is a symbolic link" in one_error_line(capsys)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_proto_is_refused_without_waiting(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(folder / "new" / "pipe.proto")
    assert main(["compat", "new", "--against", "old"]) == 2
    assert "pipe.proto is not a regular file" in one_error_line(capsys)


def test_a_huge_proto_is_refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with (folder / "new" / "big.proto").open("wb") as big:
        big.truncate(MAX_PROTO_BYTES + 1)
    assert main(["compat", "new", "--against", "old"]) == 2
    assert "big.proto is larger than the checker's limit of 4 MiB" in one_error_line(capsys)


def test_a_proto_whose_name_is_not_utf8_is_bad_input_in_one_escaped_line(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = os.fsdecode(b"bad\xff\x1b.proto")
    try:
        (folder / "new" / name).write_text(PROTO.replace("Gpu", "Cpu"))
    except OSError:
        pytest.skip("the file system takes only UTF-8 names")
    assert main(["compat", "new", "--against", "old"]) == 2
    line = one_error_line(capsys)
    assert line.endswith(
        "new/bad\\xff\\x1b.proto is a .proto file whose name is not UTF-8; "
        "protobuf names files in UTF-8"
    )
    assert line.isascii()


def test_a_link_to_a_config_file_is_read_but_a_fifo_is_not(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs FIFOs")
    os.mkfifo(folder / "buf.yaml")
    assert main(["compat", "new", "--against", "old", "--config", "buf.yaml"]) == 2
    assert "buf.yaml is not a regular file" in one_error_line(capsys)


# ---------------------------------------------------------------- configuration

BOMB = "version: v2\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)
)


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        (
            "buf.yaml",
            "version: v2\nmodules: [1]\n",
            "modules[0]: Expected a mapping, got an integer",
        ),
        (
            "buf.yaml",
            "version: v2\nmodules: abc\n",
            "modules: Expected a list of modules, got 'abc'",
        ),
        (
            "buf.yaml",
            "version: v2\nmodules:\n  - path: ../..\n",
            "modules[0]: path: Expected a path that stays inside the folder, got '../..'",
        ),
        (
            "buf.yaml",
            "version: v2\nmodules:\n  - path: /etc\n",
            "modules[0]: path: Expected a relative path inside the folder, got '/etc'",
        ),
        (
            "buf.yaml",
            "version: v2\nbreaking:\n  ignore: [../outside]\n",
            "ignore[0]: Expected a path that stays inside the folder",
        ),
        (
            "buf.yaml",
            "version: v2\nbreaking:\n  use: [sk-live-0123456789abcdef0123456789abcdef]\n",
            "got a string of 40 characters",
        ),
        ("buf.yaml", BOMB, "aliases (*name) are not allowed here"),
        ("buf.yaml", "version: v2\nx: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        (
            "pyproject.toml",
            "[tool]\nllmgw-wire = 5\n",
            "[tool.llmgw-wire]: Expected a table, got an integer",
        ),
        ("pyproject.toml", "tool = 5\n", "[tool]: Expected a table, got an integer"),
        ("pyproject.toml", "x = " + "[" * 50000 + "]" * 50000 + "\n", "nested too deeply"),
        (
            "pyproject.toml",
            '[tool.llmgw-wire.compat]\nuse = "WIRE"\n',
            "use: Expected a list of strings, got 'WIRE'",
        ),
        (
            "pyproject.toml",
            "[tool.llmgw-wire.compat]\nuse = [1]\n",
            "use[0]: Expected a string, got an integer",
        ),
    ],
)
def test_bad_configuration_is_one_bounded_line_and_exit_2(
    folder: Path, name: str, text: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / name).write_text(text)
    assert main(["compat", "new", "--against", "old", "--config", name]) == 2
    line = one_error_line(capsys)
    assert error in line
    assert "sk-live" not in line


def test_the_alias_bomb_is_refused_before_it_expands() -> None:
    # 446 bytes that PyYAML's safe_load would expand to 9**10 strings.
    assert len(BOMB) < 600
    with pytest.raises(compat.CompatError, match="aliases"):
        compat.load_config(_write(BOMB))


def _write(text: str) -> Path:
    import tempfile

    handle = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)  # noqa: SIM115
    with handle:
        handle.write(text)
    return Path(handle.name)


# ---------------------------------------------------------------- escaping


@pytest.mark.parametrize("error_format", ["text", "msvs"])
def test_a_file_name_cannot_forge_a_ci_command_or_paint_the_terminal(error_format: str) -> None:
    finding = compat.Finding(
        "a.proto\n::error file=x.proto::forged\x1b[31m.proto", 1, 1, "RULE", "bad\r\nline\x9b2J"
    )
    out = compat.render([finding], error_format)
    assert out.count("\n") == 1
    assert "\x1b" not in out
    assert "\x9b" not in out
    assert "\r" not in out
    assert "\\n::error file=x.proto::forged\\x1b[31m.proto" in out


def test_github_actions_annotations_cannot_paint_the_log() -> None:
    finding = compat.Finding("a\x1b[31m.proto", 1, 1, "RULE", "bad\r\nline\x9b2J\x07")
    out = compat.render([finding], "github-actions")
    assert out.count("\n") == 1
    assert out.startswith("::error file=a\\x1b[31m.proto,")
    assert out.endswith("::RULE: bad%0D%0Aline\\x9b2J\\x07\n")


def test_a_proto_named_with_a_newline_stays_one_line(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = "a\n::error ::forged.proto"
    (folder / "old" / forged).write_text(PROTO.replace("Gpu", "Cpu"))
    (folder / "new" / forged).write_text(
        PROTO.replace("Gpu", "Cpu").replace("  int32 index = 1;\n", "")
    )
    assert main(["compat", "new", "--against", "old", "--category", "WIRE"]) == 1
    out, _ = capsys.readouterr()
    assert not any(line.startswith("::error") for line in out.splitlines())
    assert out.startswith("new/a\\n::error ::forged.proto:4:1: ")


# ---------------------------------------------------------------- pipes


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "gpu.proto").write_text(PROTO.replace("  int32 index = 1;\n", ""))
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "gpu.proto").write_text(PROTO)
    process = subprocess.Popen(
        [sys.executable, "-m", "llmgw_wire._cli", "compat", "new", "--against", "old"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the command writes
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (141, b"")


@pytest.mark.subprocess
@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_reader_that_leaves_midway_ends_the_command_quietly(
    tmp_path: Path, unbuffered: str
) -> None:
    # A report larger than any pipe holds (over 1 MiB), so that the command is
    # in the middle of writing it when the reader leaves. With PYTHONUNBUFFERED,
    # Python's own stdout would drop the rest of a short write without an error.
    fields = "".join(f"  int32 f{i} = {i};\n" for i in range(1, 6001))
    for side, kind in (("old", "int32"), ("new", "string")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "t.proto").write_text(
            f'syntax = "proto3";\npackage t.v1;\nmessage M {{\n{fields.replace("int32", kind)}}}\n'
        )
    process = subprocess.Popen(
        [sys.executable, "-m", "llmgw_wire._cli", "compat", "new", "--against", "old"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": unbuffered},
    )
    assert process.stdout is not None
    assert process.stdout.read(100).startswith(b"new/t.proto:")
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (141, b"")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_descriptor_set_must_be_a_regular_file(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "zero.binpb").symlink_to("/dev/zero")
    assert main(["compat", "new", "--against", "zero.binpb"]) == 2
    assert "zero.binpb is not a regular file" in one_error_line(capsys)


def test_junit_stays_valid_xml_whatever_the_names() -> None:
    import xml.etree.ElementTree as ET

    finding = compat.Finding("a\x1b[31m\x00.proto", 1, 1, "RULE", "bad\x07message")
    root = ET.fromstring(compat.render([finding], "junit"))
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("name") == "a\\x1b[31m\\x00"


# ---------------------------------------------------------------- the configuration found

# What another user could leave in a shared folder above someone's schema.
IGNORE_ALL = "version: v2\nbreaking:\n  ignore: [.]\n"


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder like /tmp, holding a schema outside any git repository, that breaks one field."""
    work = tmp_path / "shared" / "work"
    for side, kind in (("old", "int32"), ("new", "string")):
        (work / side).mkdir(parents=True)
        (work / side / "gpu.proto").write_text(PROTO.replace("int32", kind))
    monkeypatch.chdir(work)
    return tmp_path / "shared"


def test_a_configuration_others_may_write_is_not_obeyed(
    shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compat", "new", "--against", "old"]) == 1
    assert capsys.readouterr().err.endswith("(WIRE_JSON): 1 breaking change\n")
    planted = shared / "buf.yaml"
    planted.write_text(IGNORE_ALL)
    planted.chmod(0o666)
    assert main(["compat", "new", "--against", "old"]) == 2
    line = one_error_line(capsys)
    assert f"{planted} may be written by any user" in line
    assert "name the one to use with --config" in line
    # Named, it is the user's choice; the summary says which file decided.
    assert main(["compat", "new", "--against", "old", "--config", str(planted)]) == 0
    assert capsys.readouterr().err.endswith(f"(WIRE_JSON; config {planted}): compatible\n")
    # The user's own, found by searching: obeyed, and named.
    planted.chmod(0o644)
    assert main(["compat", "new", "--against", "old"]) == 0
    assert capsys.readouterr().err.endswith(f"(WIRE_JSON; config {planted}): compatible\n")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root"
)
def test_a_configuration_of_another_user_is_not_obeyed(
    shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = shared / "buf.yaml"
    planted.write_text(IGNORE_ALL)
    os.chown(planted, 65534, 65534)
    assert main(["compat", "new", "--against", "old"]) == 2
    assert f"{planted} is owned by another user (uid 65534)" in one_error_line(capsys)
    # A link of another user's, to a file of the user's own, is not obeyed either.
    mine = shared / "mine.yaml"
    mine.write_text(IGNORE_ALL)
    planted.unlink()
    planted.symlink_to(mine)
    os.chown(planted, 65534, 65534, follow_symlinks=False)
    assert main(["compat", "new", "--against", "old"]) == 2
    assert "is owned by another user (uid 65534)" in one_error_line(capsys)
    # Inside a git repository its files are the project's, whoever owns the
    # checkout (a container's root, a CI runner).
    needs_git()
    git(shared, "init", "-q")
    assert main(["compat", "new", "--against", "old"]) == 0
    assert capsys.readouterr().err.endswith(f"(WIRE_JSON; config {planted}): compatible\n")
