"""Install the built wheel in fresh environments, at the floors and at the newest, and smoke it.

Two resolutions of the runtime requirements, each in a new virtual environment
under `build/resolutions/`:

* `floors`: every runtime dependency at its declared floor, through a
  constraints file made from the wheel's own `Requires-Dist`
  (`build/resolutions/floors.txt`);
* `newest`: the newest releases the requirements allow.

In each, `scripts/smoke.py` runs outside the checkout (encode/decode, a stream
exchange on loopback, a store save and load), and the environment must hold no
grpclib: the core package does not install it (it is the `grpclib` extra).

Usage: `python scripts/resolutions.py` builds the wheel into `build/resolutions/dist`
and runs both; `--wheel PATH` takes a built one, and `--only floors` runs one.
"""

from __future__ import annotations

import argparse
import email.parser
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "resolutions"
SMOKE = ROOT / "scripts" / "smoke.py"
RESOLUTIONS = ("floors", "newest")
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


def runtime_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's `Requires-Dist` lines that hold without an extra."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


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


def resolve(name: str, wheel: Path, constraints: Path | None) -> dict[str, str]:
    """Install the wheel into a fresh environment, smoke it; return what was installed."""
    env = OUT / f"venv-{name}"
    if env.exists():
        shutil.rmtree(env)
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    constrain = ["-c", str(constraints)] if constraints else []
    _run(
        python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *constrain, wheel
    )
    installed: dict[str, str] = {
        canonicalize_name(line.split("==")[0]): line.split("==")[1]
        for line in _run(python, "-m", "pip", "freeze", "--all").splitlines()
        if "==" in line
    }
    present = [m for m in ABSENT if m in installed]
    if present:
        sys.exit(f"resolutions: {name}: the core package installed {', '.join(present)}")
    with tempfile.TemporaryDirectory() as elsewhere:
        # Outside the checkout, so that `llmgw_wire` is the installed one.
        where = _run(
            python, "-c", "import llmgw_wire; print(llmgw_wire.__file__)", cwd=Path(elsewhere)
        )
        if not where.startswith(str(env)):
            sys.exit(f"resolutions: {name}: llmgw_wire came from {where.strip()}, not {env}")
        print(_run(python, SMOKE, cwd=Path(elsewhere)), end="")
    return installed


def main() -> int:
    """Run the resolutions; return the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a built wheel (default: build one)")
    parser.add_argument("--only", choices=RESOLUTIONS, help="run one resolution")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    wheel = args.wheel or build_wheel(OUT / "dist")
    requirements = runtime_requirements(wheel)
    wanted = floors(requirements)
    constraints = OUT / "floors.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(wanted.items())))
    for name in [args.only] if args.only else RESOLUTIONS:
        print(f"resolutions: {name}: {wheel.name} in a fresh environment")
        installed = resolve(name, wheel, constraints if name == "floors" else None)
        if name == "floors":
            wrong = {n: installed.get(n) for n, v in wanted.items() if installed.get(n) != v}
            if wrong:
                sys.exit(f"resolutions: floors: not at the floor: {wrong} (wanted {wanted})")
        versions = ", ".join(f"{n} {installed[n]}" for n in sorted(wanted))
        print(f"resolutions: {name}: passed with {versions}; no {', '.join(ABSENT)} installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
