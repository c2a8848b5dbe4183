"""`make failover` still runs: a handful of agents move from a lost control plane to
its standby, nothing lost, duplicated or stripped of its compute.

Its figures mean nothing at this size; what is checked is that each run
completes and the report says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AGENTS = 4

pytestmark = [pytest.mark.build, pytest.mark.subprocess, pytest.mark.timeout(600)]


def test_a_handful_of_agents_fail_over_to_the_standby(tmp_path: Path) -> None:
    out = tmp_path / "failover.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "failover.py"),
            "--agents",
            str(AGENTS),
            "--processes",
            "2",
            "--initial",
            "0.2",
            "--maximum",
            "1",
            "--planes",
            "library",
            "--timeout",
            "120",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "B's CPU for the storm" in result.stdout
    outcomes = json.loads(out.read_text())
    assert [(o["plane"], o["how"]) for o in outcomes] == [
        ("library", "kill"),
        ("library", "graceful"),
    ]
    for outcome in outcomes:
        assert outcome["agents"] == AGENTS
        assert (outcome["lost"], outcome["duplicated"], outcome["compute_lost"]) == (0, 0, 0)
        assert outcome["last_adopted_s"] is not None
