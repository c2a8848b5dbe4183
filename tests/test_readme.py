"""The README's usage example runs as written; so do the package description's."""

from __future__ import annotations

import importlib
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
# What a package index shows (pyproject's `readme`).
DESCRIPTION = README.with_name("DESCRIPTION.md")
LINK = re.compile(r"\]\((?P<url>[^)]+)\)")


def test_the_usage_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README.md has no python example"
    exec(compile(blocks[0], str(README), "exec"), {})


@pytest.mark.subprocess
def test_the_inspect_command_it_shows_runs_on_a_file_the_checkout_has() -> None:
    import shlex
    import subprocess
    import sys

    docs = README.parent / "docs" / "getting-started.md"
    lines = [
        line
        for text in (README.read_text(), docs.read_text())
        for line in re.findall(r"llmgw-wire inspect [^`#\n|]+", text)
    ]
    assert len(lines) >= 2
    for line in lines:
        args = shlex.split(line)[1:]
        done = subprocess.run(
            [sys.executable, "-m", "llmgw_wire._cli", *args],
            cwd=README.parent,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, (line, done.stderr)
        assert '"spec"' in done.stdout or '"replica_id"' in done.stdout


def _project() -> dict[str, Any]:
    tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project: dict[str, Any] = tomllib.loads(README.with_name("pyproject.toml").read_text())[
        "project"
    ]
    return project


def test_the_index_shows_the_package_description() -> None:
    assert _project()["readme"] == DESCRIPTION.name


@pytest.mark.subprocess
def test_the_package_description_s_code_runs_as_written() -> None:
    import subprocess

    blocks = re.findall(r"```python\n(.*?)```", DESCRIPTION.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 2
    printed = []
    for block in blocks:
        # Each block alone, as a reader would paste it, outside the checkout.
        done = subprocess.run(
            [sys.executable, "-c", block],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=Path(tempfile.gettempdir()),
        )
        assert done.returncode == 0, (block, done.stderr)
        printed.append(done.stdout.strip())
    # What the text says the first prints.
    shown = re.search(r"`(Ack\(.*?\))`", DESCRIPTION.read_text())
    assert shown
    assert printed[0] == shown[1]


def test_the_package_description_links_are_absolute_to_this_release_s_files() -> None:
    from llmgw_wire import __version__

    urls = _project()["urls"]
    release = f"{urls['Source']}/blob/v{__version__}/"
    links = LINK.findall(DESCRIPTION.read_text())
    assert links
    for url in [*links, urls["Documentation"], urls["Changelog"]]:
        # A wheel has no docs/ folder: every link is absolute, to the release's tag.
        assert url.startswith(release), url
        assert (README.parent / url.removeprefix(release)).is_file(), url
