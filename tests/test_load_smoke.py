"""`make load` still runs: a handful of agents against every plane, nothing lost.

Its figures mean nothing at this size; what is checked is that every plane
answers every agent, that every agent has a connection of its own (or shares
one, when asked), and that the report and its JSON are complete.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
AGENTS = 6


def _load(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "load.json"
    run = subprocess.run(
        [
            sys.executable,
            "bench/load.py",
            *("--agents", str(AGENTS), "--processes", "2", "--rounds", "1"),
            *("--heartbeats", "3", "--timeout", "120", "--json", str(out), *args),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report


@pytest.mark.slow
def test_every_plane_serves_every_agent_on_a_connection_of_its_own(tmp_path: Path) -> None:
    planes = ("library", "raw", "raw+codec", "library-id-only", "library-direct")
    report = _load(tmp_path, "--planes", ",".join(planes))
    runs = report["runs"]
    assert {(r["plane"], r["heartbeats_each"]) for r in runs} == {
        (plane, beats) for plane in planes for beats in (0, 3)
    }
    for r in runs:
        assert r["problems"] == []
        assert r["connections"] == AGENTS
    summary = report["summary"]
    assert set(summary) == set(planes)
    for figures in summary.values():
        assert figures["cpu_s_per_1000_exchanges"] >= 0
        assert figures["peak_rss_mib_per_1000_agents"] >= 0
        assert "ratio_to_raw" in figures  # None when this few agents cost too little to tell
    assert report["target_met"] in (True, False, None)
    parts = report["codec_and_sessions"]  # None when this few agents cost too little to tell
    assert parts is None or (len(parts) == 2 and all(part > 0 for part in parts))


@pytest.mark.slow
def test_agents_can_share_their_process_s_connection(tmp_path: Path) -> None:
    report = _load(tmp_path, "--planes", "library", "--connections", "process")
    runs = report["runs"]
    for r in runs:
        assert r["problems"] == []
        assert r["connections"] == 2  # one per agent process
    assert report["target_met"] is None  # no raw floor in this run


def test_the_id_only_plane_builds_nothing_of_a_registration_but_its_node_id() -> None:
    # In a process of its own: the diagnostic changes that process's codec.
    script = """
import attrs
from bench.load import build_node_id_only, registration_for
from llmgw_wire.codec.envelope import AGENT_MESSAGE, decode_envelope, encode_envelope
sent = registration_for("node-7")
sent = attrs.evolve(sent, node=attrs.evolve(sent.node, gpus=sent.node.gpus[:1]))
build_node_id_only()
got = decode_envelope(encode_envelope(sent), AGENT_MESSAGE)
made = registration_for("node-7")
print(got.node.id, got.node == attrs.evolve(made.node, id=got.node.id), len(sent.node.gpus))
"""
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    node_id, as_made, gpus_sent = run.stdout.split()
    assert node_id == "node-7"  # read from the message
    assert (as_made, gpus_sent) == ("True", "1")  # the rest: the value made beforehand
