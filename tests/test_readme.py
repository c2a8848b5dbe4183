"""The README's usage example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


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
