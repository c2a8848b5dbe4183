"""`make fuzz`'s coverage-guided stage: every target of `fuzz/targets.py` under atheris.

    python fuzz/run.py --seconds 600            # the time shared among the targets
    python fuzz/run.py --runs 2000 --target decode
    python fuzz/run.py --target json --one tests/corpus/x.json   # one input, to reproduce

Each target runs in a process of its own (libFuzzer ends its process), the
library's modules instrumented for coverage, from a seed corpus written from
`fuzz/targets.seeds` and the inputs earlier runs found (`build/fuzz/<target>/`).
A run is bounded by time (`--seconds`) or by count (`--runs`). At the end it
prints, per target, how many inputs it ran and the coverage it reached
(libFuzzer's `cov`: edges of the library's code seen; `ft`: features), and
any finding: an input that broke the property, saved as
`build/fuzz/<target>/crash-*` with the exception. A finding, once fixed, is
kept: its bytes in `tests/corpus` with an `index.json` entry, read by
`tests/codec/test_hostile.py`. The exit status is 1 when a target found one.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the seeds, the inputs found and the findings go, a folder per target.
WORK = ROOT / "build" / "fuzz"
NAMES = ("decode", "envelope", "json", "store", "inspect")
# Inputs longer than this are not made by mutation: the entry points' costly
# shapes are the hostile tests' and the benchmark's, at megabytes.
MAX_LEN = 8192


@dataclass(frozen=True)
class Result:
    """What one target's run reached."""

    target: str
    inputs: int
    coverage: int
    features: int
    corpus: int
    findings: tuple[Path, ...]
    status: int


def _child(target: str, libfuzzer_args: list[str]) -> None:
    """In the child: instrument the library, then hand the target to libFuzzer."""
    import atheris  # type: ignore[import-untyped]

    with atheris.instrument_imports(include=["llmgw_wire"]):
        sys.path.insert(0, str(Path(__file__).parent))
        import targets

    function = targets.TARGETS[target]
    atheris.Setup([sys.argv[0], *libfuzzer_args], function)
    atheris.Fuzz()


def _seed(target: str, work: Path) -> Path:
    sys.path.insert(0, str(Path(__file__).parent))
    import targets

    directory = work / target / "seeds"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    for number, data in enumerate(targets.seeds(target)):
        (directory / f"seed-{number:04d}").write_bytes(data)
    return directory


_DONE = re.compile(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)")
_LAST = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)")
_UNITS = re.compile(r"stat::number_of_executed_units: (\d+)")


def run_target(
    target: str, *, seconds: float | None, runs: int | None, work: Path = WORK
) -> Result:
    """One target in a process of its own, bounded by `seconds` or by `runs`."""
    seeds = _seed(target, work)
    found = work / target / "corpus"
    found.mkdir(parents=True, exist_ok=True)
    before = set((work / target).glob("crash-*"))
    bound = (
        [f"-runs={runs}"] if runs is not None else [f"-max_total_time={max(1, int(seconds or 1))}"]
    )
    args = [
        *bound,
        f"-max_len={MAX_LEN}",
        "-timeout=60",
        "-rss_limit_mb=4096",
        "-print_final_stats=1",
        f"-artifact_prefix={work / target}/",
        str(found),
        str(seeds),
    ]
    done = subprocess.run(
        [sys.executable, __file__, "--child", target, "--", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    log = done.stderr
    (work / target / "last.log").write_text(log)
    matches = _DONE.findall(log) or _LAST.findall(log)
    inputs, coverage, features, corpus = (int(x) for x in matches[-1]) if matches else (0,) * 4
    units = _UNITS.findall(log)
    if units:
        inputs = int(units[-1])
    findings = tuple(sorted(set((work / target).glob("crash-*")) - before))
    return Result(target, inputs, coverage, features, corpus, findings, done.returncode)


def main(argv: list[str] | None = None) -> int:
    """Run the targets; print inputs, coverage and findings; 1 when any target found one."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[3:])
        return 0
    parser = argparse.ArgumentParser(prog="python fuzz/run.py", description=__doc__.split("\n")[0])
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument("--seconds", type=float, default=60.0, help="shared among the targets")
    bound.add_argument("--runs", type=int, help="inputs per target, instead of a time")
    parser.add_argument("--target", action="append", choices=NAMES, help="only these")
    parser.add_argument("--work", type=Path, default=WORK, help="default: build/fuzz")
    args = parser.parse_args(argv)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("fuzz: atheris is not installed (pip install 'llmgw-wire[dev]' on Linux x86-64,")
        print("      Python 3.11 or newer): the coverage-guided targets did not run")
        return 0
    names = args.target or list(NAMES)
    share = None if args.runs is not None else args.seconds / len(names)
    failed = False
    for name in names:
        result = run_target(name, seconds=share, runs=args.runs, work=args.work)
        line = (
            f"fuzz: {name:9} {result.inputs:>9,} inputs, coverage {result.coverage:,} edges "
            f"({result.features:,} features), corpus {result.corpus:,}"
        )
        if result.findings:
            failed = True
            line += f", FINDINGS: {', '.join(str(p) for p in result.findings)}"
        elif result.status != 0 or result.inputs == 0:
            failed = True
            line += f", FAILED to run (status {result.status}; {args.work / name}/last.log)"
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
