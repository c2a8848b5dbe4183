"""The performance page's charts: drawn from the committed JSON of `make bench` and `make load`."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import chart  # noqa: E402

REFERENCE = ROOT / "docs" / "reference"


def _texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_the_load_chart_has_every_plane_and_the_target() -> None:
    data = json.loads((REFERENCE / "load.json").read_text())
    texts = _texts(chart.load_svg(data))
    for plane in data["summary"]:
        assert plane in texts
    assert "target 1.25x raw" in texts


def test_the_benchmark_chart_has_every_contender_and_the_storm() -> None:
    data = json.loads((REFERENCE / "benchmarks.json").read_text())
    texts = _texts(chart.benchmarks_svg(data))
    assert {row["contender"] for row in data["results"]} <= set(texts)
    assert any(t.startswith("The registration storm") for t in texts)


def test_the_committed_charts_are_those_of_the_committed_json() -> None:
    for name, draw in (("load", chart.load_svg), ("benchmarks", chart.benchmarks_svg)):
        data = json.loads((REFERENCE / f"{name}.json").read_text())
        assert (REFERENCE / f"{name}.svg").read_text() == draw(data), (
            f"docs/reference/{name}.svg is stale: python -m bench.chart "
            f"docs/reference/{name}.json --out docs/reference"
        )
