"""The schema checker against buf, side by side on the same inputs (part of `make bench`).

Each contender is a whole command, as a pipeline runs it: `llmgw-wire compat
INPUT --against X` and `buf breaking INPUT --against X` (buf 1.75.0, from
`.tools/`, which `make interop-buf` installs; or `LLMGW_BUF`). The runs are
interleaved and the median wall time per run is kept. Two inputs: the
repository's `proto/` against the shipped baseline of the last release
(compatible), and `proto/` with a field deleted against `proto/` (breaking).
Without buf, only the checker is timed, and the report says buf was skipped.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CompatBench", "compat_bench", "find_buf"]

ROOT = Path(__file__).resolve().parent.parent
BUF_YAML = "version: v2\nbreaking:\n  use:\n    - WIRE_JSON\n"


def find_buf() -> str | None:
    """buf: `LLMGW_BUF`, else the pinned one in `.tools/`, else none."""
    candidates = [os.environ.get("LLMGW_BUF", ""), str(ROOT / ".tools/node_modules/.bin/buf")]
    return next((c for c in candidates if c and Path(c).is_file()), None)


@dataclass
class CompatBench:
    """Median wall seconds per run, by input and tool; `buf` is None when it was skipped."""

    runs: int
    buf: str | None
    medians: dict[str, dict[str, float]] = field(default_factory=dict)
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [
            f"Schema checker against buf: median wall time of a whole run, {self.runs} runs each"
        ]
        if self.buf is None:
            out.append(
                "  buf is not installed (make interop-buf installs it into .tools/): "
                "buf skipped, the checker alone timed"
            )
        for name, tools in self.medians.items():
            ours = tools["llmgw-wire compat"]
            line = f"  {name}: llmgw-wire compat {ours * 1e3:.0f} ms"
            if "buf breaking" in tools:
                theirs = tools["buf breaking"]
                line += f", buf breaking {theirs * 1e3:.0f} ms ({ours / theirs:.2f}x buf's time)"
            out.append(line)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The results as JSON."""
        return {
            "runs": self.runs,
            "buf": self.buf,
            "median_s": self.medians,
            "exit_status": self.statuses,
        }


def _inputs(scratch: Path) -> dict[str, tuple[Path, Path]]:
    from llmgw_wire import compat

    current = scratch / "current"
    shutil.copytree(ROOT / "proto", current)
    baseline = scratch / "baseline.binpb"
    baseline.write_bytes(compat.baseline().SerializeToString())
    broken = scratch / "broken"
    shutil.copytree(ROOT / "proto", broken)
    shard = broken / "llmgw" / "v1" / "shard.proto"
    lines = shard.read_text().splitlines(keepends=True)
    # Delete one field: the first numbered field of the file's last message.
    index = max(i for i, line in enumerate(lines) if line.strip().endswith(";") and "=" in line)
    del lines[index]
    shard.write_text("".join(lines))
    for folder in (current, broken):
        (folder / "buf.yaml").write_text(BUF_YAML)
    return {
        "proto/ against the last release (compatible)": (current, baseline),
        "proto/ with a field deleted against proto/ (breaking)": (broken, current),
    }


def compat_bench(runs: int = 11) -> CompatBench:
    """Time both tools on both inputs, interleaved."""
    buf = find_buf()
    command = [str(Path(sys.executable).with_name("llmgw-wire")), "compat"]
    result = CompatBench(runs, buf)
    with tempfile.TemporaryDirectory() as scratch:
        for name, (new, old) in _inputs(Path(scratch)).items():
            tools = {"llmgw-wire compat": [*command, str(new), "--against", str(old)]}
            if buf is not None:
                tools["buf breaking"] = [buf, "breaking", str(new), "--against", str(old)]
            samples: dict[str, list[float]] = {tool: [] for tool in tools}
            statuses: dict[str, int] = {}
            for _ in range(runs):
                for tool, argv in tools.items():
                    start = time.perf_counter()
                    done = subprocess.run(argv, capture_output=True, check=False, timeout=120)
                    samples[tool].append(time.perf_counter() - start)
                    statuses[tool] = done.returncode
            result.medians[name] = {tool: statistics.median(s) for tool, s in samples.items()}
            result.statuses[name] = statuses
    return result


if __name__ == "__main__":
    bench = compat_bench(int(sys.argv[1]) if len(sys.argv) > 1 else 11)
    print("\n".join(bench.lines()))
    print(bench.statuses)
