"""The package as users get it: a wheel and an sdist, installed into a fresh environment."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.build, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # `make dist` has built them, and names its folder.
    if built := os.environ.get("LLMGW_DIST"):
        return Path(built)
    # A folder named dist/, as `make dist` writes and the docs' install line reads.
    out = tmp_path_factory.mktemp("checkout") / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return out


def _one(dist: Path, pattern: str) -> Path:
    (found,) = dist.glob(pattern)
    return found


def test_the_wheel_carries_the_package_and_nothing_else(dist: Path) -> None:
    from llmgw_wire import __version__

    wheel = _one(dist, f"llmgw_wire-{__version__}-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for needed in (
        "llmgw_wire/py.typed",
        "llmgw_wire/_gen/llmgw/v1/__init__.py",
        "llmgw_wire/_gen/message_pool.py",
        "llmgw_wire/_gen/llmgw_v1.binpb",
        "llmgw_wire/_gen/grpc_health_v1.binpb",
        "llmgw_wire/schemas/llmgw_v1-1.0.0.binpb",
        "llmgw_wire/schemas/llmgw_v1-1.0.0.mapping.json",
        "llmgw_wire/compat/deviations.json",
        "llmgw_wire/testing/sample.py",
    ):
        assert needed in names
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]


def test_the_sdist_carries_the_schema_and_the_tests(dist: Path) -> None:
    from llmgw_wire import __version__

    sdist = _one(dist, f"llmgw_wire-{__version__}.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"proto/llmgw/v1/node.proto", "pyproject.toml", "tests/testing/test_laws.py"} <= names


def test_the_wheel_installs_and_runs_in_a_fresh_environment(dist: Path, tmp_path: Path) -> None:
    from tests.test_packaging import INDEX_LINE, WHEEL_LINE

    wheel = _one(dist, "llmgw_wire-*.whl")
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    # The docs' install line, as written, from the folder that holds dist/.
    pip, install, where = shlex.split(WHEEL_LINE)
    subprocess.run(
        [python, "-m", pip, install, "--quiet", where],
        check=True,
        capture_output=True,
        cwd=dist.parent,
    )
    # The requirement line for an index picks this wheel.
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--find-links",
            dist,
            "--dest",
            tmp_path / "picked",
            INDEX_LINE,
        ],
        check=True,
        capture_output=True,
    )
    assert [p.name for p in (tmp_path / "picked").iterdir()] == [wheel.name]
    # Every module, the extras' included, and pytest for the pytest plugin
    # (which only pytest loads).
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", f"{wheel}[testing,grpclib]", "pytest"],
        check=True,
        capture_output=True,
    )
    # Every module of the installed package imports, outside this checkout.
    imports = (
        "import importlib, pkgutil, llmgw_wire\n"
        "names = [m.name for m in pkgutil.walk_packages(llmgw_wire.__path__, 'llmgw_wire.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(len(names), llmgw_wire.__file__)\n"
    )
    done = subprocess.run(
        [python, "-c", imports], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    count, location = done.stdout.split()
    assert int(count) > 10
    assert str(env) in location
    version = subprocess.run(
        [env / "bin" / "llmgw-wire", "--version"], check=True, capture_output=True, text=True
    )
    from llmgw_wire import __version__

    assert version.stdout.strip() == f"llmgw-wire {__version__}"
    stub = "import llmgw_wire.v1 as v; v.Register; v.AgentMessage; v.ControlMessage"
    subprocess.run([python, "-c", stub], check=True, cwd=tmp_path)
    # The .proto files, where the docs say they are.
    protos = (
        "import importlib.resources as r\n"
        "folder = r.files('llmgw_wire') / 'proto' / 'llmgw' / 'v1'\n"
        "print(*sorted(p.name for p in folder.iterdir()))"
    )
    shipped = subprocess.run(
        [python, "-c", protos], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert shipped.stdout.split() == sorted(
        p.name for p in (ROOT / "proto/llmgw/v1").glob("*.proto")
    )
