"""Charts of the benchmarks' JSON, as small hand-written SVG files (no plotting library).

    python -m bench.chart docs/reference/benchmarks.json docs/reference/load.json \\
        --out docs/reference

writes `benchmarks.svg` (every timed group: each contender's median time as a
multiple of the library's path, on a log scale, and the registration storm)
from the JSON of `make bench`, and `load.svg` (CPU per 1,000 exchanges and
per heartbeat of every control plane, each round's figure marked) from the
JSON of `make load`. A file that is not given is not drawn.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

__all__ = ["benchmarks_svg", "load_svg", "main"]

ROW = 18  # pixels per bar
LABEL = 300  # width of the labels' column
PLOT = 420  # width of the bars' area
TEXT = 170  # width of the values' column
WIDTH = LABEL + PLOT + TEXT
FONT = 'font-family="sans-serif" font-size="12"'
LIBRARY, OTHER, FLOOR = "#1f6feb", "#9aa4ae", "#2da44e"


@dataclass(frozen=True)
class Bar:
    """One bar: its label, its length in plot units (0 to 1), its text and colour."""

    label: str
    length: float
    text: str
    colour: str = OTHER
    marks: tuple[float, ...] = ()  # more positions on the bar's row (a round's figure)


@dataclass(frozen=True)
class Block:
    """A titled group of bars, with vertical rules (a target, the 1x line) at plot units."""

    title: str
    bars: list[Bar]
    rules: tuple[tuple[float, str], ...] = ()


def _svg(blocks: list[Block], caption: str) -> str:
    out: list[str] = []
    y = 24
    out.append(f'<text x="8" y="{y - 6}" {FONT} font-weight="bold">{escape(caption)}</text>')
    for block in blocks:
        y += 10
        out.append(
            f'<text x="8" y="{y + 12}" {FONT} font-weight="bold">{escape(block.title)}</text>'
        )
        y += ROW
        top = y
        for bar in block.bars:
            width = max(bar.length, 0.002) * PLOT
            out.append(
                f'<text x="{LABEL - 6}" y="{y + 13}" {FONT} text-anchor="end">'
                f"{escape(bar.label)}</text>"
            )
            out.append(
                f'<rect x="{LABEL}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" '
                f'fill="{bar.colour}"/>'
            )
            for mark in bar.marks:
                x = LABEL + mark * PLOT
                out.append(
                    f'<line x1="{x:.1f}" y1="{y + 1}" x2="{x:.1f}" y2="{y + ROW - 1}" '
                    'stroke="black" stroke-width="1.5"/>'
                )
            out.append(
                f'<text x="{LABEL + PLOT + 6}" y="{y + 13}" {FONT}>{escape(bar.text)}</text>'
            )
            y += ROW
        for at, name in block.rules:
            x = LABEL + at * PLOT
            out.append(
                f'<line x1="{x:.1f}" y1="{top - 2}" x2="{x:.1f}" y2="{y + 3}" stroke="#cf222e" '
                'stroke-dasharray="4 3"/>'
            )
            out.append(
                f'<text x="{x + 3:.1f}" y="{y + 12}" {FONT} fill="#cf222e">{escape(name)}</text>'
            )
        if block.rules:
            y += 14  # the rules' names, under the bars
    height = y + 12
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}">\n<rect width="100%" height="100%" fill="white"/>\n'
        + "\n".join(out)
        + "\n</svg>\n"
    )


# Ratios to the library's path, from 1/64x to 64x, on a log scale.
_LOG_SPAN = 6


def _log_position(ratio: float) -> float:
    return (math.log2(max(ratio, 2.0**-_LOG_SPAN)) + _LOG_SPAN) / (2 * _LOG_SPAN)


def benchmarks_svg(data: dict[str, Any]) -> str:
    """Every group of `make bench`'s JSON as bars of time relative to its first contender."""
    blocks: list[Block] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in data["results"]:
        groups.setdefault((row["message"], row["operation"]), []).append(row)
    for (message, operation), rows in groups.items():
        size = data["sizes"].get(message)
        title = f"{message}: {operation}" + (f" ({size} bytes)" if size else "")
        bars = [
            Bar(
                row["contender"],
                _log_position(row["ratio_to_first"]),
                f"{row['ratio_to_first']:.2f}x  ({row['median_ns'] / 1000:.1f} µs)",
                LIBRARY if index == 0 else OTHER,
            )
            for index, row in enumerate(rows)
        ]
        blocks.append(Block(title, bars, ((0.5, "1x"),)))
    storm = data.get("storm")
    if storm:
        runs = [
            (key, label)
            for key, label in (
                ("gc_on", "gc on, default"),
                ("gc_tuned", "gc on, thresholds (700, 10, 100)"),
                ("gc_frozen", "gc on, llmgw_wire.gc.AdoptionFreezer"),
                ("gc_off", "gc off"),
            )
            if key in storm
        ]
        longest = max(storm[key]["cpu_s"] for key, _ in runs)
        off = storm["gc_off"]["cpu_s"]
        bars = [
            Bar(
                label,
                storm[key]["cpu_s"] / longest,
                f"{storm[key]['cpu_s']:.2f} s CPU ({storm[key]['cpu_s'] / off:.2f}x off)",
                OTHER if key == "gc_off" else LIBRARY,
            )
            for key, label in runs
        ]
        title = f"The registration storm: {storm['registrations']} registrations, CPU seconds"
        blocks.append(Block(title, bars, ((1.3 * off / longest, "1.3x gc off"),)))
    env = data["environment"]
    caption = (
        f"make bench, {env.get('date', '')}: time relative to the first (the library's) "
        "path of each group, log scale; the medians of one interleaved run"
    )
    return _svg(blocks, caption)


def load_svg(data: dict[str, Any]) -> str:
    """The control planes of `make load`'s JSON: CPU per 1,000 exchanges and per heartbeat."""
    summary, settings = data["summary"], data["settings"]
    blocks = []
    for key, rounds_key, title, unit in (
        (
            "cpu_s_per_1000_exchanges",
            "cpu_s_per_1000_exchanges_rounds",
            "CPU seconds per 1,000 exchanges (register, Ack, StartShard, READY, end)",
            "s",
        ),
        ("cpu_us_per_heartbeat", None, "CPU µs per heartbeat, steady state", "µs"),
        (
            "peak_rss_mib_per_1000_agents",
            None,
            "Peak resident MiB per 1,000 connected agents",
            "MiB",
        ),
    ):
        values = {plane: f[key] for plane, f in summary.items() if f.get(key) is not None}
        if not values:
            continue
        longest = max(values.values()) * 1.1
        raw = values.get("raw")
        bars = []
        for plane, value in values.items():
            ratio = f" ({value / raw:.2f}x raw)" if raw else ""
            marks = tuple(r / longest for r in summary[plane][rounds_key]) if rounds_key else ()
            colour = LIBRARY if plane == "library" else FLOOR if plane == "raw" else OTHER
            bars.append(Bar(plane, value / longest, f"{value:.2f} {unit}{ratio}", colour, marks))
        rules = ((1.25 * raw / longest, "target 1.25x raw"),) if raw and rounds_key else ()
        blocks.append(Block(title, bars, rules))
    caption = (
        f"make load: {settings['agents']} agents, {settings['connections']}, medians of "
        f"{settings['rounds']} interleaved rounds (a tick: one round)"
    )
    return _svg(blocks, caption)


def main(argv: list[str] | None = None) -> int:
    """Write the charts of the JSON files given."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.chart", description=__doc__.split("\n")[0]
    )
    parser.add_argument("inputs", nargs="+", type=Path, help="JSON of make bench or make load")
    parser.add_argument("--out", type=Path, default=Path("."), help="directory of the SVG files")
    args = parser.parse_args(argv)
    for path in args.inputs:
        data = json.loads(path.read_text())
        if "summary" in data:
            name, svg = "load.svg", load_svg(data)
        else:
            name, svg = "benchmarks.svg", benchmarks_svg(data)
        (args.out / name).write_text(svg)
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
