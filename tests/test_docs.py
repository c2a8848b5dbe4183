"""The documentation site builds without warnings, its examples run, its references are whole.

Every name a public module exports has a docstring, as the API reference reads
it: classes and functions their own, constants a `#:` comment on the line
above them (Sphinx's convention, which griffe-sphinx reads for mkdocstrings).
"""

from __future__ import annotations

import html
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

try:
    import griffe
except ImportError:
    if sys.version_info >= (3, 11):
        raise  # the `docs` dependency group, which `dev` includes, is missing
    pytest.skip("the documentation tools need Python 3.11 or newer", allow_module_level=True)

import llmgw_wire
from llmgw_wire.mapping import PAIRS, pair_for
from llmgw_wire.mapping._rules import Embedded, FieldRule, Rule
from tests.test_public_api import PUBLIC_MODULES

if TYPE_CHECKING:
    from llmgw_wire.mapping import Pair

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
# Generated from the schema and documented by it; its page is a summary.
GENERATED = ("llmgw_wire.v1",)


def public_modules() -> list[str]:
    """The public modules, as `tests/test_public_api.py` lists them."""
    return PUBLIC_MODULES


def exported(module: str) -> list[str]:
    return list(getattr(importlib.import_module(module), "__all__", []))


# --- the site ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # `make docs` has built it, and names its folder.
    if built := os.environ.get("LLMGW_SITE"):
        return Path(built)
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.build
def test_the_site_builds_strictly_without_a_warning(site: Path) -> None:
    # `--strict` fails on warnings; this also catches anything logged above INFO.
    assert (site / "index.html").is_file()
    assert (site / "reference" / "mapping" / "index.html").is_file()


def read_page(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text()


def sections(page: str) -> dict[str, str]:
    """The HTML of each `<h2>` section of a page, by its id."""
    parts = re.split(r'<h2 id="([^"]+)"', page)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def codes(fragment: str) -> set[str]:
    return {html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", fragment)}


def expected_rows(pair: Pair, prefix: tuple[str, ...] = ()) -> list[tuple[str, str | None]]:
    """Every domain attribute path of a pair and the wire field it comes from, embedded included."""
    rows: list[tuple[str, str | None]] = []
    for rule in pair.rules:
        path = (*prefix, rule.attr)
        rows.append((".".join(path), rule.wire if isinstance(rule, FieldRule) else None))
        if isinstance(rule, Embedded):
            rows += expected_rows(pair_for(rule.domain), path)
    return rows


@pytest.mark.build
def test_the_mapping_reference_shows_every_pair_and_attribute(site: Path) -> None:
    found = sections(read_page(site, "reference/mapping"))
    for pair in PAIRS:
        anchor = pair.domain.__name__.lower()
        assert anchor in found, f"no section for {pair.domain.__name__}"
        section = found[anchor]
        heading = section.split("</h2>", 1)[0]
        assert {pair.domain.__name__, pair.wire} <= codes(heading)
        shown = codes(section)
        for attr, wire in expected_rows(pair):
            assert attr in shown, f"{pair.domain.__name__}: no row for {attr}"
            if wire is not None:
                assert wire in shown, f"{pair.domain.__name__}.{attr}: no wire field {wire}"


@pytest.mark.build
def test_the_mapping_reference_reads_embedded_pairs_as_paths(site: Path) -> None:
    section = sections(read_page(site, "reference/mapping"))["gpu"]
    row = re.search(r"<tr>\s*<td[^>]*>14</td>(.*?)</tr>", section, flags=re.DOTALL)
    assert row is not None
    assert re.findall(r"<code>(.*?)</code>", row.group(1))[:2] == ["fabric_state", "fabric.state"]


def describes(rule: Rule) -> str:
    return html.escape(rule.describe(), quote=False)


@pytest.mark.build
def test_the_mapping_reference_says_each_rule_as_the_code_describes_it(site: Path) -> None:
    page = read_page(site, "reference/mapping")
    text = re.sub(r"<[^>]+>", "", page)
    for pair in PAIRS:
        for rule in pair.rules:
            plain = re.sub(r"`", "", rule.describe())
            assert html.escape(plain, quote=False) in text, (pair.domain.__name__, rule.attr)


@pytest.mark.build
def test_the_api_summary_names_every_export(site: Path) -> None:
    shown = codes(read_page(site, "api"))
    missing = [name for name in llmgw_wire.__all__ if name not in shown]
    assert not missing


@pytest.mark.build
def test_the_shard_states_table_has_the_fallback(site: Path) -> None:
    page = read_page(site, "reference/mapping")
    row = re.search(r"a newer peer.*?</tr>", page, flags=re.DOTALL)
    assert row is not None
    assert "State.FAILED" in row.group(0)


# --- the examples -----------------------------------------------------------------------


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if python_blocks(p)],
    ids=lambda p: str(p.relative_to(DOCS)),
)
def test_every_example_runs_as_written(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One namespace per page, in order: later blocks build on earlier ones.
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for block in python_blocks(page):
        # A pseudo file name: since Python 3.12, inspect would read the page
        # itself as Python source when hypothesis keys its example database.
        exec(compile(block, f"<{page.relative_to(DOCS)}>", "exec"), namespace)
    # A page's example tests are run too, as pytest would run them; those that
    # take fixtures are run by a pytest of their own (tests/testing/test_plugin.py).
    for name, obj in namespace.items():
        ours = name.startswith("test_") and getattr(obj, "__module__", None) == "__docs__"
        if ours and not _takes_fixtures(obj):
            obj()


def _takes_fixtures(function: Any) -> bool:
    parameters = inspect.signature(function).parameters.values()
    return any(p.default is inspect.Parameter.empty for p in parameters)


# --- the API reference ----------------------------------------------------------------------


def rendered_modules() -> set[str]:
    found = set()
    for page in (DOCS / "api").glob("*.md"):
        found |= set(re.findall(r"^::: (\S+)", page.read_text(), flags=re.MULTILINE))
    return found


def test_every_public_module_has_an_api_page() -> None:
    rendered = rendered_modules()
    for module in public_modules():
        if module in rendered:
            continue
        # A submodule is documented by its package when the package re-exports it all.
        package = module.rsplit(".", 1)[0]
        assert package in rendered, f"no API page renders {module}"
        assert set(exported(module)) <= set(exported(package)), module


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    # As the API reference sees it: `#:` comments document constants.
    loaded = griffe.load(
        "llmgw_wire",
        search_paths=[str(ROOT)],
        docstring_parser="google",
        extensions=griffe.load_extensions("griffe_sphinx"),
    )
    assert isinstance(loaded, griffe.Module)
    return loaded


def has_docstring(obj: griffe.Object | griffe.Alias) -> bool:
    return obj.docstring is not None and bool(obj.docstring.value.strip())


@pytest.mark.parametrize("module", public_modules())
def test_every_public_name_has_a_docstring(package: griffe.Module, module: str) -> None:
    node = package if module == "llmgw_wire" else package[module.removeprefix("llmgw_wire.")]
    assert has_docstring(node), f"{module} has no module docstring"
    undocumented = []
    for name in exported(module):
        obj = node[name]
        if not has_docstring(obj):
            undocumented.append(name)
        if obj.is_class:
            for member_name, member in obj.members.items():
                public = not member_name.startswith("_") and not member.is_alias
                if public and member.is_function and not has_docstring(member):
                    undocumented.append(f"{name}.{member_name}")
    assert not undocumented, f"{module}: no docstring for {', '.join(undocumented)}"


def test_every_public_module_says_what_it_exports() -> None:
    without = [m for m in public_modules() if not hasattr(importlib.import_module(m), "__all__")]
    assert without == []


@pytest.mark.subprocess
def test_every_example_type_checks_under_mypy_strict(tmp_path: Path) -> None:
    """The examples are what services copy: they must pass `mypy --strict` as written.

    A page's blocks build on each other, so each page is checked as one file.
    """
    pages = [p for p in [*PAGES, ROOT / "README.md"] if python_blocks(p)]
    files = []
    for page in pages:
        name = re.sub(r"\W", "_", str(page.relative_to(ROOT)).removesuffix(".md"))
        file = tmp_path / f"{name}.py"
        # A session transcript (`>>>`) shows output; it is not a program.
        blocks = [b for b in python_blocks(page) if not b.startswith(">>>")]
        file.write_text("\n\n".join(blocks))
        files.append(file)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.stdout.replace(str(tmp_path) + "/", "") == ""
