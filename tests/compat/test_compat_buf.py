"""The checker against buf: the same verdicts and findings on every case of the corpus.

`buf_cases.CORPUS` holds previous/current schema pairs. For each, and for
each category, the findings of `llmgw_wire.compat.check` and of
`buf breaking` (buf 1.75.0) must be the same (rule, file, line), except for
the deliberate deviations listed in `llmgw_wire/compat/deviations.json`,
each of which must still happen.

buf itself runs only in `make interop-buf`, which installs it into `.tools/`
and points `LLMGW_BUF` at it; there, its findings are also compared with the
record of them in `buf_verdicts.json`, which `LLMGW_UPDATE_BUF_VERDICTS=1`
rewrites (review the diff). Without buf, as in `make test`, the checker is
compared with that record.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from llmgw_wire import compat
from tests.compat.buf_cases import CORPUS

if TYPE_CHECKING:
    from tests.compat.buf_cases import Case

pytestmark = pytest.mark.subprocess

BUF = os.environ.get("LLMGW_BUF", "")
VERDICTS = Path(__file__).with_name("buf_verdicts.json")
BUF_YAML = "version: v2\nbreaking:\n  use:\n    - WIRE\n    - WIRE_JSON\n"
NAMES = [case[0] for case in CORPUS]
COLUMNS = json.loads(
    Path(compat.__file__).with_name("deviations.json").read_text(encoding="utf-8")
)["columns"]

# (rule, path, line, column)
Found = tuple[str, str, int, int]


def materialise(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "buf.yaml").write_text(BUF_YAML)
    return root


def case_dirs(base: Path, case: Case) -> tuple[Path, Path]:
    folder = base / f"case{NAMES.index(case[0]):03d}"
    return materialise(folder / "previous", case[1]), materialise(folder / "current", case[2])


def run_buf(previous: Path, current: Path, cache: Path) -> list[Found]:
    """buf's findings of both categories at once: one run per case."""
    result = subprocess.run(
        [BUF, "breaking", ".", "--against", "../previous", "--error-format", "json"],
        cwd=current,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "BUF_CACHE_DIR": str(cache), "NO_COLOR": "1"},
    )
    assert result.returncode in (0, 100), f"buf failed on {current}: {result.stderr}"
    found = []
    for line in result.stdout.splitlines():
        item = json.loads(line)
        found.append((item["type"], item["path"], item["start_line"], item["start_column"]))
    return sorted(found)


def ours(previous: Path, current: Path) -> dict[str, list[Found]]:
    old, new = compat.compile_protos(previous), compat.compile_protos(current)
    return {
        category: [
            (f.rule, f.path, f.line, f.column) for f in compat.check(old, new, category=category)
        ]
        for category in compat.CATEGORIES
    }


def in_category(found: list[Found], category: str) -> list[Found]:
    return sorted(f for f in found if category in compat.RULES[f[0]])


def disagreements(mine: list[Found], bufs: list[Found]) -> set[tuple[str, str, str, int]]:
    """(kind, rule, path, line) of each finding one side makes and the other does not."""
    a = Counter(f[:3] for f in mine)
    b = Counter(f[:3] for f in bufs)
    extra = {("extra", *f) for f in (a - b)}
    missing = {("missing", *f) for f in (b - a)}
    return extra | missing


def allowed(case: str, category: str) -> set[tuple[str, str, str, int]]:
    return {
        (d.kind, d.rule, d.path, d.line)
        for d in compat.deviations()
        if d.case == case and category in d.categories
    }


@pytest.fixture(scope="session")
def recorded() -> dict[str, list[Found]]:
    data = json.loads(VERDICTS.read_text())
    return {name: [tuple(f) for f in found] for name, found in data.items()}


@pytest.fixture(scope="session")
def corpus_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both tools on every case, two at a time (the machine has two cores)."""
    base = tmp_path_factory.mktemp("corpus")
    cache = tmp_path_factory.mktemp("buf-cache")

    def one(case: Case) -> tuple[str, dict[str, Any]]:
        previous, current = case_dirs(base, case)
        out: dict[str, Any] = {}
        try:  # one broken case fails its own tests, not the others
            out["ours"] = ours(previous, current)
            if BUF:
                out["buf"] = run_buf(previous, current, cache)
        except (compat.CompatError, AssertionError) as exc:
            out["error"] = exc
        return case[0], out

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(pool.map(one, CORPUS))
    if BUF and os.environ.get("LLMGW_UPDATE_BUF_VERDICTS"):
        record = {name: results[name]["buf"] for name in NAMES if "buf" in results[name]}
        VERDICTS.write_text(json.dumps(record, indent=1) + "\n")
    return results


@pytest.mark.parametrize("category", compat.CATEGORIES)
@pytest.mark.parametrize("name", NAMES)
def test_same_findings_as_buf(
    corpus_results: dict[str, Any], recorded: dict[str, list[Found]], name: str, category: str
) -> None:
    result = corpus_results[name]
    if "error" in result:
        raise result["error"]
    bufs = result["buf"] if BUF else recorded[name]
    if BUF:
        assert bufs == recorded[name], (
            "buf's findings differ from buf_verdicts.json; rerun with LLMGW_UPDATE_BUF_VERDICTS=1 "
            "and review the diff"
        )
    mine = result["ours"][category]
    assert disagreements(mine, in_category(bufs, category)) == allowed(name, category)
    # Where both make a finding, they put it at the same column too, but for
    # the rules whose columns deviations.json explains.
    # Several findings may share a line: compare the columns of each line's findings.
    columns = {entry["rule"] for entry in COLUMNS}
    bufs_at: dict[tuple[str, str, int], list[int]] = {}
    mine_at: dict[tuple[str, str, int], list[int]] = {}
    for found, at in ((in_category(bufs, category), bufs_at), (mine, mine_at)):
        for f in found:
            at.setdefault(f[:3], []).append(f[3])
    for key, mine_columns in mine_at.items():
        if key in bufs_at and key[0] not in columns and len(bufs_at[key]) == len(mine_columns):
            assert sorted(mine_columns) == sorted(bufs_at[key]), key
    # The same verdict, whatever the deviations.
    assert bool(mine) == bool(in_category(bufs, category)) or allowed(name, category)


def test_corpus_exercises_every_rule(recorded: dict[str, list[Found]]) -> None:
    rules = {f[0] for found in recorded.values() for f in found}
    assert rules == set(compat.RULES)
    for category in compat.CATEGORIES:
        safe = [name for name, found in recorded.items() if not in_category(found, category)]
        assert len(safe) >= 10, category
    assert set(recorded) == set(NAMES)


def test_every_deviation_names_a_case_of_the_corpus() -> None:
    for deviation in compat.deviations():
        assert deviation.case in NAMES, deviation.id
        assert deviation.rule in compat.RULES, deviation.id
        assert deviation.kind in ("extra", "missing"), deviation.id
        assert set(deviation.categories) <= set(compat.CATEGORIES), deviation.id
        assert deviation.reason.strip(), deviation.id
    ids = [d.id for d in compat.deviations()]
    assert len(ids) == len(set(ids))


@pytest.mark.skipif(not BUF, reason="buf is not installed: run `make interop-buf`")
def test_buf_is_the_pinned_version() -> None:
    result = subprocess.run(
        [BUF, "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "1.75.0"


@pytest.mark.skipif(not BUF, reason="buf is not installed: run `make interop-buf`")
def test_buf_accepts_every_finding_under_the_config_ignore_yaml_snippet(
    tmp_path: Path, recorded: dict[str, list[Found]]
) -> None:
    # `--error-format config-ignore-yaml` promises a section that, added to
    # the buf.yaml the check read, makes buf itself accept every finding.
    deviating = {d.case for d in compat.deviations()}
    name = max((n for n in NAMES if n not in deviating), key=lambda n: len(recorded[n]))
    previous, current = case_dirs(tmp_path, CORPUS[NAMES.index(name)])
    cache = tmp_path / "buf-cache"
    assert run_buf(previous, current, cache), name
    config = compat.load_config(current / "buf.yaml")
    findings = compat.check(
        compat.compile_protos(previous), compat.compile_protos(current), config=config
    )
    _, _, ignore_only = compat.render(findings, "config-ignore-yaml").partition("breaking:\n")
    (current / "buf.yaml").write_text(BUF_YAML + ignore_only)
    assert run_buf(previous, current, cache) == []
