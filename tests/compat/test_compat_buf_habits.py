"""buf's habits that users type: git inputs, --path, --exclude-path, msvs, config-ignore-yaml.

And the ready-made CI steps of the repository: the composite GitHub Action,
whose run steps are executed here as the script they are, and the pre-commit
hook definition.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmgw_wire import compat
from llmgw_wire._cli import main

pytestmark = pytest.mark.timeout(120)
yaml: Any = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
PROTO = """\
syntax = "proto3";
package t.v1;

message Gpu {
  int32 index = 1;
  string uuid = 2;
}
"""
DELETED = PROTO.replace("  string uuid = 2;\n", "")
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose main (tag v1) has PROTO; the working tree deletes a field."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    (root / "proto").mkdir(parents=True)
    (root / "proto" / "gpu.proto").write_text(PROTO)
    (root / "proto" / "other.proto").write_text(PROTO.replace("Gpu", "Cpu"))
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "proto"],
        ["commit", "-q", "-m", "v1"],
        ["tag", "v1"],
    ):
        subprocess.run([*GIT, "-C", str(root), *args], check=True, timeout=60)
    (root / "proto" / "gpu.proto").write_text(DELETED)
    monkeypatch.chdir(root)
    return root


def rules(out: str) -> list[str]:
    return [line.split(": ")[1] for line in out.splitlines()]


@pytest.mark.parametrize(
    "against",
    [
        ".git#branch=main",
        ".git#tag=v1",
        ".git#ref=HEAD",
        ".git#ref=HEAD,subdir=proto",
        ".git#branch=main,depth=50,recurse_submodules=true",
    ],
)
def test_bufs_git_input(repo: Path, against: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", "proto", "--against", against, "--category", "WIRE"]) == 1
    out, err = capsys.readouterr()
    assert out == (
        'proto/gpu.proto:4:1: FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED: field 2 "uuid" of '
        "message t.v1.Gpu was deleted without reserving its number; older peers still send it.\n"
    )
    assert err == f"compat: proto against {against} (WIRE): 1 breaking change\n"


def test_a_git_input_that_must_be_cloned(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"file://{repo}/.git#branch=main,depth=1,subdir=proto"
    assert main(["compat", "proto", "--against", url, "--category", "WIRE"]) == 1
    assert rules(capsys.readouterr().out) == ["FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED"]
    assert main(["compat", "proto", "--against", f"file://{repo}/.git#branch=nope"]) == 2
    assert "cannot clone" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("against", "error"),
    [
        (".git#branch=main,tag=v1", "Expected at most one of branch=, tag= and ref="),
        (".git#colour=blue", "Expected options among branch=, tag=, ref=, subdir=, depth="),
        (".git#subdir=../elsewhere", "subdir: Expected a path that stays inside the folder"),
        (".git#depth=deep", "depth: Expected a positive number"),
        (".git#branch=nope", "'.git#branch=nope' is not a git revision"),
    ],
)
def test_a_bad_git_input_says_why(
    repo: Path, against: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compat", "proto", "--against", against]) == 2
    assert error in capsys.readouterr().err


def test_path_and_exclude_path(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "proto" / "other.proto").write_text(DELETED.replace("Gpu", "Cpu"))
    base = ["compat", "proto", "--against", "git:v1", "--category", "WIRE"]
    assert main(base) == 1
    assert len(capsys.readouterr().out.splitlines()) == 2
    for args in (
        ["--path", "proto/gpu.proto"],
        ["--path", "gpu.proto"],
        ["--exclude-path", "proto/other.proto"],
    ):
        assert main([*base, *args]) == 1
        assert capsys.readouterr().out.startswith("proto/gpu.proto:4:1: ")
    assert main([*base, "--exclude-path", "proto"]) == 0
    assert capsys.readouterr().out == ""


def test_msvs_is_visual_studios_line(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["compat", "proto", "--against", "git:v1", "--category", "WIRE", "--error-format"]
    assert main([*args, "msvs"]) == 1
    assert capsys.readouterr().out == (
        "proto/gpu.proto(4,1) : error FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED : field 2 "
        '"uuid" of message t.v1.Gpu was deleted without reserving its number; older peers '
        "still send it.\n"
    )


def test_config_ignore_yaml_accepts_every_finding(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["compat", "proto", "--against", "git:v1", "--error-format", "config-ignore-yaml"]
    assert main(args) == 1
    snippet = capsys.readouterr().out
    assert snippet == (
        "version: v2\nbreaking:\n  ignore_only:\n"
        "    FIELD_NO_DELETE_UNLESS_NAME_RESERVED:\n      - proto/gpu.proto\n"
        "    FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED:\n      - proto/gpu.proto\n"
    )
    # Written as buf.yaml, it accepts them all.
    (repo / "buf.yaml").write_text(snippet)
    assert main(["compat", "proto", "--against", "git:v1", "--exit-codes", "buf"]) == 0
    assert compat.render([], "config-ignore-yaml") == ""


def test_every_format_is_offered_on_the_command_line() -> None:
    from llmgw_wire._cli.compat import _FORMATS

    assert set(_FORMATS) == set(compat.FORMATS)


# ---------------------------------------------------------------- CI steps

ACTION = REPO / ".github" / "actions" / "llmgw-wire-compat" / "action.yml"


def action_script(inputs: dict[str, str]) -> str:
    """The action's run steps as one bash script, its `${{ inputs.X }}` filled in."""
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    declared = action["inputs"]
    values = {name: inputs.get(name, spec.get("default", "")) for name, spec in declared.items()}
    script = []
    for step in action["runs"]["steps"]:
        if "run" not in step:
            continue
        assert step.get("shell") == "bash"
        env = step.get("env", {})
        lines = [f"export {key}={_expand(str(value), values)!r}" for key, value in env.items()]
        script.append("(\n" + "\n".join(lines) + "\n" + _expand(step["run"], values) + "\n)")
    return "set -euo pipefail\n" + "\n".join(script) + "\n"


def _expand(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace(f"${{{{ inputs.{name} }}}}", value)
    assert "${{" not in text, text
    return text


def run_action(repo: Path, inputs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The package is installed here already (install: false), as a job may have it.
    inputs = {"install": "false", **inputs}
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", action_script(inputs)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_the_github_action_runs_its_steps(repo: Path) -> None:
    failed = run_action(repo, {"input": "proto", "against": ".git#tag=v1", "category": "WIRE"})
    assert failed.returncode == 1, failed.stderr
    assert failed.stdout.startswith(
        "::error file=proto/gpu.proto,line=4,col=1,endLine=6,endColumn=2,"
        "title=FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED::"
    )
    (repo / "proto" / "gpu.proto").write_text(PROTO)
    passed = run_action(repo, {"input": "proto", "against": ".git#tag=v1"})
    assert (passed.returncode, passed.stdout) == (0, ""), passed.stderr


def test_the_pre_commit_hook_runs_the_command() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "llmgw-wire-compat")
    assert hook["entry"].split()[:2] == ["llmgw-wire", "compat"]
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    assert hook["files"] == r"\.proto$"
