"""`make load` still runs: a handful of agents against every plane, nothing lost.

Its figures mean nothing at this size; what is checked is that every plane
answers every agent, that every agent has a connection of its own (or shares
one, when asked), and that the report and its JSON are complete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import pytest

from bench.load import build_node_id_only, paired, registration_for, summarise
from llmgw_wire.codec.envelope import AGENT_MESSAGE, EnvelopeCodec
from tests.support import run_load

if TYPE_CHECKING:
    from pathlib import Path

AGENTS = 6


@pytest.mark.slow
def test_every_plane_serves_every_agent_on_a_connection_of_its_own(tmp_path: Path) -> None:
    planes = (
        "library",
        "raw",
        "raw+codec",
        "library-id-only",
        "library-direct",
        "library-2p",
        "raw+reader",
    )
    report = run_load(tmp_path, "--planes", ",".join(planes), agents=AGENTS)
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
    # Each target whose planes ran, unless this few agents cost too little to tell.
    for target in report["targets"]:
        assert target["met"] == (target["median"] <= target["at_most"])
        assert target["range"][0] <= target["median"] <= target["range"][1]
    parts = report["codec_and_sessions"]  # None when this few agents cost too little to tell
    assert parts is None or (len(parts) == 2 and all(part > 0 for part in parts))


@pytest.mark.slow
def test_agents_can_share_their_process_s_connection(tmp_path: Path) -> None:
    report = run_load(tmp_path, "--planes", "library", "--connections", "process", agents=AGENTS)
    runs = report["runs"]
    for r in runs:
        assert r["problems"] == []
        assert r["connections"] == 2  # one per agent process
    assert report["target_met"] is None  # no raw floor in this run


def test_the_id_only_plane_builds_nothing_of_a_registration_but_its_node_id() -> None:
    codec = EnvelopeCodec(AGENT_MESSAGE)  # a codec of its own, not the one decoding uses
    build_node_id_only(codec)
    sent = registration_for("node-7")
    sent = attrs.evolve(sent, node=attrs.evolve(sent.node, gpus=sent.node.gpus[:1]))
    got = codec.decode(codec.encode(sent))
    assert isinstance(got, type(sent))
    assert got.node.id == "node-7"  # read from the message
    made = registration_for("node-7").node
    assert got.node == made != sent.node  # the rest: the value made beforehand


def test_a_plane_s_rounds_are_paired_with_the_same_rounds_of_the_other() -> None:
    # The library's round 1 is missing (a run that failed): its rounds 0 and 2
    # still go with raw+codec's rounds 0 and 2, not with the first two.
    def run(plane: str, rnd: int, heartbeats: int, cpu_rest_s: float) -> dict[str, object]:
        return {
            "plane": plane,
            "round": rnd,
            "heartbeats_each": heartbeats,
            "agents": 10,
            "cpu_exchange_s": 1.0,
            "cpu_rest_s": cpu_rest_s,
            "peak_rss_kib": 2048,
            "rss_before_kib": 1024,
            "wall_rest_s": cpu_rest_s,
        }

    runs = [
        run(plane, rnd, beats, 1.0 + beats * rest)
        for plane, rnd, rest in (
            ("raw+codec", 0, 0.1),
            ("raw+codec", 1, 5.0),
            ("raw+codec", 2, 0.1),
            ("library", 0, 0.2),
            ("library", 2, 0.2),
        )
        for beats in (0, 2)
    ]
    summary = summarise(runs, ["library", "raw+codec"])
    assert summary["library"]["heartbeat_rounds"] == [0, 2]
    assert paired(summary, "library", "raw+codec") == {
        "exchange": (1.0, 1.0, 1.0),
        "heartbeat": (2.0, 2.0, 2.0),
    }
