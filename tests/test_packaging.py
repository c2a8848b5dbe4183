"""What a dependent project gets: requirements, install lines, the paths the repository quotes.

The wheel itself is built and installed by `tests/test_wheel.py` (`make dist`),
and at the floors and the newest of its requirements by `make resolutions`.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import llmgw_wire

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"


def _one_line(pattern: str) -> str:
    """The one install line matching `pattern`, the same in the README and the docs."""
    found: set[str] = {
        m for p in (README, GETTING_STARTED) for m in re.findall(pattern, p.read_text())
    }
    assert len(found) == 1, found
    return found.pop()


#: The docs' install line for the wheel that `make dist` builds.
WHEEL_LINE = _one_line(r"pip install dist/llmgw_wire-\S+\.whl")
#: The docs' requirement line for an index.
INDEX_LINE = _one_line(r"`(llmgw-wire>=[^`\[]+)`")


def _pyproject() -> str:
    return (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_install_lines_name_this_version() -> None:
    version = llmgw_wire.__version__
    assert f"pip install dist/llmgw_wire-{version}-py3-none-any.whl" == WHEEL_LINE
    requirement = Requirement(INDEX_LINE)
    assert requirement.name == "llmgw-wire"
    assert requirement.specifier.contains(version)
    # The range stops before the next minor: 0.x minors may break.
    major, minor = Version(version).release[:2]
    assert not requirement.specifier.contains(f"{major}.{minor + 1}.0")
    assert "git+" not in GETTING_STARTED.read_text() + README.read_text()


def _project() -> dict[str, Any]:
    # tomllib is Python 3.11's; the dev group installs its backport on 3.10.
    tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project: dict[str, Any] = tomllib.loads(_pyproject())["project"]
    return project


def _runtime_requirements() -> list[Requirement]:
    return [Requirement(r) for r in _project()["dependencies"]]


def test_every_runtime_requirement_is_a_floor_and_grpclib_is_an_extra() -> None:
    requirements = {r.name: r for r in _runtime_requirements()}
    assert set(requirements) == {
        "betterproto2",
        "grpcio",
        "attrs",
        "cattrs",
        "protobuf",
    }
    for requirement in requirements.values():
        # A floor; a cap; releases between floor and cap that fail the tests left out.
        operators = sorted({s.operator for s in requirement.specifier} - {"!="})
        assert operators in (([">="], ["<", ">="])), requirement
    # Caps only where upstream breaks compatibility: betterproto2's 0.x minor, protobuf's major.
    capped = {n for n, r in requirements.items() if any(s.operator == "<" for s in r.specifier)}
    assert capped == {"betterproto2", "protobuf"}
    assert '"grpclib>=' in _pyproject().split("[project.optional-dependencies]")[1]


def test_every_extra_s_requirement_is_a_floor() -> None:
    # What a dependent installs with an extra is no more pinned than the core:
    # only the dev group, never published, pins.
    for extra, lines in _project()["optional-dependencies"].items():
        for requirement in map(Requirement, lines):
            operators = [s.operator for s in requirement.specifier]
            assert operators == [">="], (extra, str(requirement))


@pytest.mark.subprocess
def test_the_core_imports_no_grpclib() -> None:
    """The wire classes come without grpclib stubs; only the `grpclib` extra's codec needs it."""
    code = (
        "import sys\n"
        "import llmgw_wire, llmgw_wire.codec, llmgw_wire.stream, llmgw_wire.v1, llmgw_wire.store\n"
        "for name in llmgw_wire.__all__: getattr(llmgw_wire, name)\n"
        "grpclib = {'grpclib', 'h2', 'hpack', 'hyperframe', 'multidict'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in grpclib))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"


def test_the_grpclib_codec_without_grpclib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grpclib.encoding.base", None)
    monkeypatch.delitem(sys.modules, "llmgw_wire.stream.grpclib_codec", raising=False)
    with pytest.raises(ImportError, match=re.escape("pip install 'llmgw-wire[grpclib]'")):
        importlib.import_module("llmgw_wire.stream.grpclib_codec")


# --- every path the repository quotes exists ---------------------------------------------

# A path into one of the repository's folders, as the Makefile, the docs and
# the messages quote it; one with a placeholder (`$(VERSION)`, `<version>`,
# `{name}`, `x.y.z`) names no one file and is left out.
PATH = re.compile(
    r"(?<![\w./-])((?:tests|scripts|llmgw_wire|docs|bench|proto|interop|\.ci)/[\w./*-]*[\w*])"
    r"(?![\w$<{(-])"
)
QUOTING = [
    ROOT / "Makefile",
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    ROOT / "mkdocs.yml",
    ROOT / ".ci" / "run",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "tests").rglob("*.md")),
    *sorted((ROOT / "scripts").glob("*.py")),
    *sorted((ROOT / "llmgw_wire").rglob("*.py")),
]
# Not in the checkout: `llmgw_wire/proto/` is the wheel's (mapped from proto/);
# `tests/test_laws.py` is a stale pointer of `llmgw_wire/testing/laws.py`'s
# docstring, to leave this set when that docstring is rewritten.
ELSEWHERE = {"llmgw_wire/proto", "tests/test_laws.py"}


def _quoted(path: Path) -> list[tuple[int, str]]:
    found = []
    fence = ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fence = "" if fence else line[3:].strip() or "text"
            continue
        # A configuration example names the files of a project that uses it.
        if fence in ("yaml", "toml"):
            continue
        found += [(number, m.group(1).rstrip(".")) for m in PATH.finditer(line)]
    return found


def test_every_quoted_path_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}:{number}: {quoted}"
        for path in QUOTING
        if "_gen" not in path.parts
        for number, quoted in _quoted(path)
        if "x.y.z" not in quoted
        and quoted not in ELSEWHERE
        and not (any(ROOT.glob(quoted)) if "*" in quoted else (ROOT / quoted).exists())
    ]
    assert not missing, "\n".join(missing)


def test_the_docs_say_what_fails_below_every_floor() -> None:
    # The floors table of docs/getting-started.md: one row per requirement,
    # runtime and extras alike, with the floor pyproject.toml states.
    rows = re.findall(
        r"^\| ([\w.-]+)(?: \([^)]*\))? \| ([\d.]+)[^|]* \| [^|]+\|$",
        GETTING_STARTED.read_text(),
        re.MULTILINE,
    )
    documented = {name.lower(): floor for name, floor in rows}
    requirements = _runtime_requirements() + [
        Requirement(line)
        for lines in _project()["optional-dependencies"].values()
        for line in lines
    ]
    for requirement in requirements:
        (floor,) = [s.version for s in requirement.specifier if s.operator == ">="]
        assert documented.get(requirement.name.lower()) == floor, requirement
