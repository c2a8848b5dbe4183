"""Run the test suite on every supported Python (3.10 to 3.13), each in its own venv.

Interpreters are found as `python3.X` on PATH, else through pyenv. Each gets
`.venv-matrix/3.X` with the `dev` dependency group installed, then runs pytest. Prints a
line per version and exits non-zero when any version fails or is missing; with
`--if-present`, a version this machine has no interpreter for is said so and
does not fail the run.

Usage: `python scripts/matrix.py [--if-present] [3.10 3.12 ...] [-- pytest args]`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("3.10", "3.11", "3.12", "3.13")
MISSING = "MISSING"
# pytest's last line: "N passed, M skipped in S s" (with -ra, the reasons come before it).
SUMMARY = re.compile(r"\d+ (passed|failed)|no tests ran")


def _works(python: str) -> bool:
    try:
        return (
            subprocess.run([python, "--version"], check=False, capture_output=True).returncode == 0
        )
    except OSError:
        return False


def find_python(version: str) -> str | None:
    """The path of an interpreter for `version`, or None."""
    on_path = shutil.which(f"python{version}")
    if on_path and _works(on_path):
        return on_path
    pyenv = shutil.which("pyenv")
    if pyenv:
        listed = subprocess.run(
            [pyenv, "versions", "--bare"], check=False, capture_output=True, text=True
        )
        for name in reversed(listed.stdout.split()):
            if name == version or name.startswith(f"{version}."):
                prefix = subprocess.run(
                    [pyenv, "prefix", name], check=False, capture_output=True, text=True
                )
                candidate = Path(prefix.stdout.strip()) / "bin" / "python"
                if candidate.exists() and _works(str(candidate)):
                    return str(candidate)
    return None


def run(version: str, pytest_args: list[str]) -> str:
    """Set up and test one version; return its result line."""
    python = find_python(version)
    if python is None:
        return f"{version}: {MISSING} (no python{version} on PATH or in pyenv)"
    env_dir = ROOT / ".venv-matrix" / version
    started = time.monotonic()
    if not (env_dir / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(env_dir)], check=True)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    # `--group` needs pip >= 25.1.
    subprocess.run([*pip, "--upgrade", "pip>=25.1"], check=True)
    subprocess.run([*pip, "-e", str(ROOT), "--group", f"{ROOT / 'pyproject.toml'}:dev"], check=True)
    tests = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *pytest_args,
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = tests.stdout.strip().splitlines()
    summary = next((line for line in reversed(lines) if SUMMARY.search(line)), "(no summary)")
    status = "ok" if tests.returncode == 0 else f"FAILED (exit {tests.returncode})"
    if tests.returncode:
        print(tests.stdout[-4000:], tests.stderr[-2000:], sep="\n")
    return f"{version}: {status} in {time.monotonic() - started:.0f} s - {summary}"


def main() -> int:
    """Run the matrix; return the exit status."""
    args = sys.argv[1:]
    pytest_args: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, pytest_args = args[:split], args[split + 1 :]
    if_present = "--if-present" in args
    versions = [arg for arg in args if arg != "--if-present"] or list(VERSIONS)
    results = [run(version, pytest_args) for version in versions]
    print("\n".join(["", "matrix:", *results]))
    allowed = [line for line in results if if_present and f": {MISSING} " in line]
    return 0 if all(": ok " in line or line in allowed for line in results) else 1


if __name__ == "__main__":
    sys.exit(main())
