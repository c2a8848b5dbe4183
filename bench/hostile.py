"""The worst shapes of input found, on every decode path: time and peak memory per MiB.

Each shape is built at about `size` bytes (4 MiB, gRPC's limit, by default)
and decoded once on each path, in a fresh process of its own, so that the
resident-set growth is that input's alone:

* `domain`: `decode(data, Registration)` (upb, the compiled mapping);
* `v1`: `decode(data, v1.Register)` (upb, then betterproto2 objects);
* `wire-codec`: `WireCodec().decode(envelope, AgentMessage)`, the stream's codec;
* `inspect`: `llmgw-wire inspect --type AgentMessage` of the envelope, output discarded;
* `json`: the JSON codec's `decode(text, Registration)`, for the JSON shapes.

Per cell: CPU seconds per MiB of input; the peak of Python's allocations
(tracemalloc, measured on a second run: it slows allocation) per MiB; the
growth of the peak resident set (upb's arenas included) per MiB; and what
happened: decoded, or refused and by which bound.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["JSON_SHAPES", "QUICK_SHAPES", "SHAPES", "Cell", "run_all", "table"]

ROOT = Path(__file__).resolve().parent.parent

#: Each shape: what it is, and the Python expression that builds it at `size` bytes
#: (evaluated with the helpers of tests/support.py in scope).
SHAPES: dict[str, tuple[str, str]] = {
    "unknown fields": (
        "valid unknown varint fields, 3 bytes each",
        "vi(99, 1) * (size // 3)",
    ),
    "unknown fields in GPUs": (
        "9,000 GPUs (under the element budget), each filled with unknown fields",
        "ld(14, vi(99, 1) * max(1, (size // 9000 - 3) // 3)) * 9000",
    ),
    "deep groups": (
        "unknown groups nested 100 deep (upb's limit), over and over",
        "nested_groups(99, 100) * (size // 400)",
    ),
    "full GPUs": (
        "GPUs with every scalar field set, short strings, as many as the size and budget allow",
        "gpu(80) * min(budget, size // len(gpu(80)))",
    ),
    "empty GPUs at the budget": (
        "as many empty GPUs as the element budget lets in (the costliest element),"
        " padded to the size with an unknown field",
        "(lambda g: g + ld(99, b'x' * (size - len(g) - 4)))(ld(14, b'') * budget)",
    ),
    "dense empty GPUs": (
        "empty GPUs, 2 bytes each, over the budget for their size",
        "ld(14, b'') * (size // 2)",
    ),
    "realistic registration": (
        "GPUs with full NVLink, NIC, fabric, health and MIG data, up to the size (Go accepts it)",
        "w.encode(sample_large_registration(size // 224))",
    ),
    "many tiny elements": (
        "empty `features` strings, 2 bytes each",
        "ld(6, b'') * (size // 2)",
    ),
    "deep maps": (
        "distinct NIC paths in the maps inside GPUs",
        "b''.join(ld(14, b''.join(ld(13, ld(1, b'%06x' % (g * 1000 + n))) for n in range(1000)))"
        " for g in range(size // 11_000))",
    ),
    "cut at the end": (
        "small valid fields, the last one cut at its last byte",
        "(vi(10, 1) * (size // 2 - 4) + ld(1, b'abc'))[:-1]",
    ),
    "suspect varint run": (
        "small fields and one string whose bytes look like a varint over 64 bits",
        "vi(10, 1) * (size // 2 - 8) + ld(1, '中文字A'.encode())",
    ),
    "suspect run, unknown groups": (
        "empty unknown groups and one such string: each group is a step in Python",
        "group(99, b'') * (size // 4 - 4) + ld(1, '中文字A'.encode())",
    ),
}

JSON_SHAPES: dict[str, tuple[str, str]] = {
    "json: many tiny elements": (
        "empty strings in `features`",
        "'{\"node\": {\"features\": [' + ','.join(['\"\"'] * (size // 3)) + ']}}'",
    ),
    "json: unknown keys": (
        "keys no domain model has",
        "'{' + ','.join(f'\"k{i}\": 0' for i in range(size // 14)) + '}'",
    ),
    "json: deep nesting": (
        "arrays nested a hundred thousand deep",
        "'[' * 100_000 + ']' * 100_000",
    ),
}

#: The shapes `--quick` runs: one accepted, one refused by each bound.
QUICK_SHAPES = ("unknown fields", "many tiny elements", "cut at the end", "json: unknown keys")

_PROLOGUE = """
import contextlib, io, os, sys, time, tracemalloc
sys.path.insert(0, {root!r})
from tests.support import group, ld, nested_groups, tag, varint, vi
import llmgw_wire as w
from llmgw_wire.codec import json as wire_json
from llmgw_wire import v1, Registration
from llmgw_wire.stream.grpclib_codec import WireCodec
from llmgw_wire._cli import main as cli
from llmgw_wire.codec import DEFAULT_MAX_ITEMS as budget
from llmgw_wire.testing.sample import sample_large_registration

def gpu(size):
    text = b'x' * max(1, (size - 60) // 13)
    strings = b''.join(ld(n, text) for n in (2, 3, 6, 8, 9, 11, 14, 15, 16, 17, 18))
    ints = b''.join(vi(n, 2**31 - 1) for n in (1, 4, 5, 7, 10, 19, 20))
    return ld(14, ints + strings)

size = {size}
"""

# The input is built in a process of its own and read back by the one that
# decodes it: building some shapes takes more memory than decoding them, and
# the growth of the decoding process's peak would hide behind it.
_BUILD = """
data = {expr}
with open(os.environ['BENCH_DATA'], 'wb') as f:
    f.write(data if isinstance(data, bytes) else b'T' + data.encode())
"""

_READ = """
with open(os.environ['BENCH_DATA'], 'rb') as f:
    data = f.read()
if data[:1] == b'T':
    data = data[1:].decode()
"""

_PATHS = {
    "domain": "w.decode(data, Registration)",
    "v1": "w.decode(data, v1.Register)",
    "wire-codec": "WireCodec().decode(envelope, v1.AgentMessage)",
    "inspect": "inspect(envelope)",
    "json": "wire_json.decode(data, Registration)",
}

_BODY = """
envelope = ld(1, data) if isinstance(data, bytes) else b''
path = os.environ['BENCH_FILE']
with open(path, 'wb') as f:
    f.write(envelope)

def inspect(_):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(['inspect', '--type', 'AgentMessage', path])
    if code:
        raise w.DecodeError('llmgw.v1.AgentMessage', err.getvalue().strip())

def once():
    try:
        {call}
    except w.DecodeError as e:
        return str(e)
    return 'ok'

def peak_kib():
    # This process's own peak (VmHWM): `ru_maxrss` starts at the peak of the
    # process that forked it, which would hide the growth under a large parent.
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmHWM:'))

w.decode(b'', Registration); w.decode(b'', v1.Register)
before = peak_kib()
start = time.process_time()
outcome = once()
seconds = time.process_time() - start
rss = (peak_kib() - before) * 1024
tracemalloc.start()
once()
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(repr((len(data), seconds, peak, rss, outcome)))
"""


@dataclass
class Cell:
    """One shape on one path."""

    shape: str
    path: str
    size: int
    cpu_s: float
    traced_peak: int
    rss_growth: int
    outcome: str

    @property
    def mib(self) -> float:
        return self.size / 2**20

    def as_dict(self) -> dict[str, object]:
        return {
            "shape": self.shape,
            "path": self.path,
            "bytes": self.size,
            "cpu_s_per_mib": self.cpu_s / self.mib,
            "traced_peak_per_mib": self.traced_peak / self.mib,
            "rss_growth_per_mib": self.rss_growth / self.mib,
            "outcome": self.outcome,
        }


def _bound(outcome: str) -> str:
    """Which bound an outcome reached, in a word."""
    if outcome == "ok":
        return "decoded"
    for needle, bound in (
        ("elements of", "element budget"),
        ("is over the limit of", "size limit"),
        ("explanation stopped", "explanation budget"),
        ("nested too deeply", "nesting limit"),
        ("more than 100 nested", "nesting limit"),
        ("more than 64 bits", "64-bit varints"),
    ):
        if needle in outcome:
            return f"refused: {bound}"
    return f"refused: {outcome[:60]}"


def _one(shape: str, expr: str, path: str, size: int, tmp: Path) -> Cell:
    prologue = _PROLOGUE.format(root=str(ROOT), size=size)
    env = {**_env(), "BENCH_FILE": str(tmp / "envelope.bin"), "BENCH_DATA": str(tmp / "data.bin")}
    run = functools.partial(
        subprocess.run, capture_output=True, text=True, timeout=600, check=True, cwd=ROOT, env=env
    )
    run([sys.executable, "-c", prologue + _BUILD.format(expr=expr)])
    done = run([sys.executable, "-c", prologue + _READ + _BODY.replace("{call}", _PATHS[path])])
    # The child prints a tuple of plain values: read back as a literal.
    last = done.stdout.strip().splitlines()[-1]
    length, seconds, peak, rss, outcome = ast.literal_eval(last)
    return Cell(shape, path, length, seconds, peak, rss, outcome)


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def run_all(size: int, tmp: Path, shapes: Sequence[str] | None = None) -> list[Cell]:
    """Every shape on every path it applies to, each in a process of its own."""
    cells = []
    for shape, (_, expr) in SHAPES.items():
        if shapes is None or shape in shapes:
            cells += [
                _one(shape, expr, p, size, tmp) for p in ("domain", "v1", "wire-codec", "inspect")
            ]
    for shape, (_, expr) in JSON_SHAPES.items():
        if shapes is None or shape in shapes:
            cells.append(_one(shape, expr, "json", size, tmp))
    return cells


def table(cells: list[Cell]) -> list[str]:
    """The worst-shape table: per shape and path, CPU s/MiB, peak memory per MiB, the bound."""
    lines = [
        f"{'shape':26} {'path':10} {'MiB':>5} {'CPU s/MiB':>9} {'traced/MiB':>10} "
        f"{'RSS+/MiB':>9}  outcome",
    ]
    lines.extend(
        f"{c.shape:26} {c.path:10} {c.mib:5.2f} {c.cpu_s / c.mib:9.3f} "
        f"{c.traced_peak / c.mib / 2**20:9.2f}M {c.rss_growth / c.mib / 2**20:8.2f}M  "
        f"{_bound(c.outcome)}"
        for c in cells
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the worst-shape table; `--size` in bytes, `--json PATH` also writes it."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m bench.hostile")
    parser.add_argument("--size", type=int, default=4 * 1024 * 1024 - 64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cells = run_all(args.size, Path(tmp))
    for line in table(cells):
        print(line)
    if args.json:
        args.json.write_text(json.dumps([c.as_dict() for c in cells], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
