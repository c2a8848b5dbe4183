"""The coverage-guided fuzz targets (`fuzz/`): every seed holds the property, and a short run.

The targets are `make fuzz`'s; here every seed input (the hostile corpus of
`tests/corpus`, the wire fixtures, the sample values) goes through each
target in this process, and each target runs under atheris for a bounded
number of inputs, not a time, so that the targets cannot rot.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fuzz"))
# fuzz/ is scripts, not a package: imported by name, as fuzz/run.py does.
targets: Any = importlib.import_module("targets")


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_every_seed_holds_the_property(name: str) -> None:
    seeds = targets.seeds(name)
    assert seeds
    for data in seeds:
        targets.TARGETS[name](data)


def test_the_seeds_reach_every_kind_of_input() -> None:
    # Every domain model and wire class has a seed of its own message.
    picked = {data[0] for data in targets.seeds("decode")}
    assert len(picked) == 2 * len(targets.PAIRS)
    assert {data[0] for data in targets.seeds("envelope")} == {0, 1}


@pytest.mark.subprocess
@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris not installed")
def test_a_short_coverage_guided_run_of_every_target(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "run.py"), "--runs", "300", "--work", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines] == list(targets.TARGETS)
    for line in lines:
        # The seeds count among the 300, and a target's code is reached.
        _, _, inputs, _, _, edges, *_ = line.replace(",", "").split()
        assert (int(inputs), int(edges) > 100) == (300, True), line
