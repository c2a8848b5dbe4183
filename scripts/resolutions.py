"""Install the built wheel in fresh environments, at the floors and at the newest, and smoke it.

Four resolutions, each in a new virtual environment under `build/resolutions/`:

* `floors`: every runtime dependency at its declared floor, through a
  constraints file made from the wheel's own `Requires-Dist`
  (`build/resolutions/floors.txt`);
* `newest`: the newest releases the requirements allow, the extras' too;
* `extras-floors`: every extra's requirements at their floors
  (`build/resolutions/extras-floors.txt`), and everything else as pip
  resolves it: an extra's floor may need more than a runtime floor
  (grpcio-reflection 1.85.1 needs grpcio >= 1.85.1, above grpcio's 1.84), so
  the extras' floors are not tried together with the runtime floors;
* `service`: a service's environment with a pinned grpcio (`SERVICE_PINS`, a
  release older than the newest) installs `llmgw-wire[every extra]` in a
  second step, its pins passed to pip as constraints (as a lock file or
  `pip install -c` does): every floor must allow the pins, and they stay as
  they were. (Without its pins, pip takes the newest grpcio-reflection, which
  needs the newest grpcio, and upgrades grpcio: pip upgrades what nothing pins.)

protobuf 6.33.x is not among them: the library cannot run on it. Its upb
reads a length prefix over 5 bytes, which the codec must refuse
(tests/codec/test_hostile.py::test_a_length_over_five_bytes, and the smoke's
`floors`); protobuf's floor is 7.34.0, the first that refuses it.

The environments are made with the interpreter running the script, or the one
`--python` names: a requirement whose marker does not hold on that Python is
not installed (the `schema` extra's tomli, on Python 3.10 alone: `--python
python3.10` tries it).

`floors` and `newest` install the wheel alone: it must bring no grpclib, h2 or
hypothesis (the core package does not install them), and `scripts/smoke.py`
runs outside the checkout (encode/decode, a stream exchange on loopback, a
store save and load). `newest`, then, and `extras-floors` and `service` install
`llmgw-wire[every extra]` and run `scripts/smoke.py` with the extras' names:
each extra's own smoke (its table `EXTRAS`; an extra without one fails).

Usage: `python scripts/resolutions.py` builds the wheel into `build/resolutions/dist`
and runs all four; `--wheel PATH` takes a built one, `--only floors` runs one, and
`--python python3.10` makes the environments with that interpreter.
"""

from __future__ import annotations

import argparse
import email.parser
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if TYPE_CHECKING:
    from email.message import Message

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "resolutions"
SMOKE = ROOT / "scripts" / "smoke.py"
# Each resolution: the requirements it pins ("runtime" or "extras" at their
# floors, "service" at `SERVICE_PINS`, or none), what it installs and smokes in
# turn (the wheel alone, the wheel with every extra), and what it is, for the
# output. The wheel alone in
# `extras-floors` would be the same as in `newest`: no runtime requirement is pinned.
RESOLUTIONS = {
    "floors": ("runtime", ("core",), "every runtime requirement at its floor"),
    "newest": ("", ("core", "extras"), "every requirement, the extras' too, at the newest"),
    "extras-floors": (
        "extras",
        ("extras",),
        "every extra's requirements at their floors, the rest as pip resolves them "
        "(an extra's floor may need more than a runtime floor)",
    ),
    "service": (
        "service",
        ("extras",),
        "a service's pinned grpcio installed first, then every extra under that pin",
    ),
}
# What the `service` resolution installs first, as a service that pins them
# would have: a grpcio older than the newest, which no extra may upgrade.
SERVICE_PINS = {"grpcio": "1.84.2"}
# Installed by no runtime requirement of the core package.
ABSENT = ("grpclib", "h2", "hypothesis")


def build_wheel(out: Path) -> Path:
    """Build the wheel of the checkout into `out` and return its path."""
    if out.exists():
        shutil.rmtree(out)
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


def metadata(wheel: Path) -> Message:
    """The wheel's `METADATA`."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def requirements(wheel: Path, python: str, extra: str = "") -> list[Requirement]:
    """The wheel's `Requires-Dist` lines that hold on Python `python` (X.Y.Z) without an extra.

    With `extra`, those the extra adds: they hold with it and not without it.
    """
    found = [Requirement(line) for line in metadata(wheel).get_all("Requires-Dist") or []]
    version = {"python_full_version": python, "python_version": ".".join(python.split(".")[:2])}

    def holds(requirement: Requirement, with_extra: str) -> bool:
        marker = requirement.marker
        return marker is None or marker.evaluate({**version, "extra": with_extra})

    return [r for r in found if holds(r, extra) and not (extra and holds(r, ""))]


def floors(requirements: list[Requirement]) -> dict[str, str]:
    """Each requirement's floor (its `>=` version); a requirement without one is an error."""
    found: dict[str, str] = {}
    for requirement in requirements:
        lower = [s.version for s in requirement.specifier if s.operator == ">="]
        if len(lower) != 1:
            sys.exit(f"resolutions: {requirement} has no single `>=` floor")
        found[canonicalize_name(requirement.name)] = lower[0]
    return found


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(args, check=False, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        sys.exit(
            f"resolutions: `{' '.join(map(str, args))}` failed ({done.returncode}):\n"
            f"{done.stdout}{done.stderr}"
        )
    return done.stdout


def _install(python: Path, target: str, constraints: Path | None) -> dict[str, str]:
    """`pip install` `target` under `constraints`; every package installed, by version."""
    constrain = ["-c", str(constraints)] if constraints else []
    _run(
        python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *constrain, target
    )
    return {
        canonicalize_name(line.split("==")[0]): line.split("==")[1]
        for line in _run(python, "-m", "pip", "freeze", "--all").splitlines()
        if "==" in line
    }


def _smoke(name: str, env: Path, *extras: str) -> None:
    """Run `scripts/smoke.py` (with `extras`) outside the checkout, on the installed package."""
    python = env / "bin" / "python"
    with tempfile.TemporaryDirectory() as elsewhere:
        # Outside the checkout, so that `llmgw_wire` is the installed one.
        where = _run(
            python, "-c", "import llmgw_wire; print(llmgw_wire.__file__)", cwd=Path(elsewhere)
        )
        if not where.startswith(str(env)):
            sys.exit(f"resolutions: {name}: llmgw_wire came from {where.strip()}, not {env}")
        print(_run(python, SMOKE, *extras, cwd=Path(elsewhere)), end="", flush=True)


def resolve(
    name: str,
    wheel: Path,
    constraints: Path | None,
    steps: list[list[str]],
    interpreter: str,
    first: dict[str, str],
) -> dict[str, str]:
    """In a fresh environment, install the wheel with each step's extras and smoke them.

    `first` is installed before the wheel, each at its version, as a service
    would have it. A step without extras is the wheel alone, which must install
    nothing of `ABSENT`. Returns what is installed after the last step.
    """
    env = OUT / f"venv-{name}"
    if env.exists():
        shutil.rmtree(env)
    _run(interpreter, "-m", "venv", env)
    python = env / "bin" / "python"
    installed: dict[str, str] = {}
    for pinned, version in first.items():
        _install(python, f"{pinned}=={version}", None)
    for extras in steps:
        target = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
        installed = _install(python, target, constraints)
        present = [m for m in ABSENT if m in installed]
        if present and not extras:
            sys.exit(f"resolutions: {name}: the core package installed {', '.join(present)}")
        _smoke(name, env, *extras)
    return installed


def main() -> int:
    """Run the resolutions; return the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a built wheel (default: build one)")
    parser.add_argument("--only", choices=RESOLUTIONS, help="run one resolution")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter of the environments (default: this one's)",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    wheel = args.wheel or build_wheel(OUT / "dist")
    extras = metadata(wheel).get_all("Provides-Extra") or []
    python = _run(args.python, "-c", "import platform; print(platform.python_version())").strip()
    runtime = floors(requirements(wheel, python))
    extra_floors = floors([r for extra in extras for r in requirements(wheel, python, extra)])
    for name in [args.only] if args.only else RESOLUTIONS:
        started = time.monotonic()
        pins, installs, what = RESOLUTIONS[name]
        with_extras = "extras" in installs
        wanted = {"runtime": runtime, "extras": extra_floors, "service": SERVICE_PINS}.get(pins, {})
        constraints = None
        if wanted:
            constraints = OUT / f"{name}.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(wanted.items())))
        target = f"{wheel.name}[{','.join(extras)}]" if with_extras else wheel.name
        print(f"resolutions: {name}: {target} on Python {python}, {what}", flush=True)
        steps = [extras if step == "extras" else [] for step in installs]
        first = SERVICE_PINS if name == "service" else {}
        installed = resolve(name, wheel, constraints, steps, args.python, first)
        wrong = {
            n: installed.get(n)
            for n, v in wanted.items()
            if n not in installed or Version(installed[n]) != Version(v)
        }
        if wrong:
            sys.exit(f"resolutions: {name}: not as wanted: {wrong} (wanted {wanted})")
        shown = [*runtime, *(extra_floors if with_extras else ()), *first]
        versions = ", ".join(f"{n} {installed[n]}" for n in sorted(set(shown)))
        alone = f"; the wheel alone installed no {', '.join(ABSENT)}" if "core" in installs else ""
        seconds = time.monotonic() - started
        print(f"resolutions: {name}: passed in {seconds:.0f} s with {versions}{alone}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
