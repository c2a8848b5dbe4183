"""`make load`'s grpc-go plane serves every agent, beside the Python planes.

`make load` puts a grpc-go control plane (the `serve` scenario, quiet)
beside the library's plane and grpc.aio's floor when the Go peers are built;
`make test` cannot run it (no Go there). Here a handful of agents go through
one round against each: nothing lost, and the report holds the Go plane's
figures and ratios. The figures themselves mean nothing at this size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.support import run_load

if TYPE_CHECKING:
    from pathlib import Path

PLANES = ("grpc-go", "raw", "library")
AGENTS = 6


def test_the_grpc_go_plane_serves_every_agent_beside_the_python_planes(tmp_path: Path) -> None:
    report = run_load(tmp_path, "--planes", ",".join(PLANES), agents=AGENTS)
    runs = report["runs"]
    assert {(r["plane"], r["heartbeats_each"]) for r in runs} == {
        (plane, beats) for plane in PLANES for beats in (0, 3)
    }
    for r in runs:
        assert r["problems"] == [], r["plane"]
        assert r["connections"] == AGENTS
    go = report["summary"]["grpc-go"]
    assert go["cpu_s_per_1000_exchanges"] >= 0
    assert "ratio_to_raw" in go  # None when this few agents cost too little to tell
