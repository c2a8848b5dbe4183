"""Generate the wire layer from `proto/`, or check that the committed copy is current.

Two artefacts come from the schema, both into `llmgw_wire/_gen/`:

* the betterproto2 dataclasses, without service stubs (`llmgw/v1/__init__.py` and
  the compiler's `message_pool.py`), the typed wire API;
* `llmgw_v1.binpb`, the schema as a `FileDescriptorSet`, from which the strict
  byte codec builds its message classes at import time and against which the
  compatibility checker compares.

A third comes from grpc's `grpc/health/v1/health.proto`, copied unchanged into
`third_party/grpc-proto/` (it is not part of the schema): `grpc_health_v1.binpb`,
the file as a `FileDescriptorSet`, from which the health service builds its
messages.

Usage: `python scripts/gen.py` writes them; `python scripts/gen.py --check`
generates into a temporary folder and fails, listing the differences, when the
committed copy is not what the schema gives.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"
GEN = ROOT / "llmgw_wire" / "_gen"
DESCRIPTOR_SET = "llmgw_v1.binpb"
GRPC_PROTO = ROOT / "third_party" / "grpc-proto"
HEALTH_PROTO = "grpc/health/v1/health.proto"
HEALTH_SET = "grpc_health_v1.binpb"
# Messages only: no service stubs, so that the wire classes import no grpclib (the
# stream runs on grpc.aio; grpclib peers use `llmgw_wire.stream.grpclib_codec`).
PLUGIN_OPTIONS = "client_generation=none,server_generation=none"


def _protos() -> list[str]:
    return sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))


def generate(out: Path) -> None:
    """Write the generated wire layer into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    # The compiler formats its output with the ruff next to this interpreter.
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    plugin = shutil.which("protoc-gen-python_betterproto2", path=env["PATH"])
    if plugin is None:
        sys.exit("gen: protoc-gen-python_betterproto2 not found; run `make gen` (it installs it)")
    protoc = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}"]
    with tempfile.TemporaryDirectory() as scratch:
        # The plugin writes a stray file on failure; keep it out of the tree.
        subprocess.run(
            [
                *protoc,
                f"--plugin=protoc-gen-python_betterproto2={plugin}",
                f"--python_betterproto2_out={PLUGIN_OPTIONS}:{out}",
                *_protos(),
            ],
            check=True,
            cwd=scratch,
            env=env,
        )
    subprocess.run(
        [
            *protoc,
            "--include_imports",
            "--include_source_info",
            f"--descriptor_set_out={out / DESCRIPTOR_SET}",
            *_protos(),
        ],
        check=True,
        cwd=PROTO,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{GRPC_PROTO}",
            f"--descriptor_set_out={out / HEALTH_SET}",
            HEALTH_PROTO,
        ],
        check=True,
        cwd=GRPC_PROTO,
    )


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _differences(committed: Path, fresh: Path) -> list[str]:
    old, new = _files(committed), _files(fresh)
    return [
        f"{name}: " + ("missing" if name not in old else "stale" if name in new else "extra")
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    ]


def main() -> int:
    """Generate or check; return the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    if not args.check:
        if GEN.exists():
            shutil.rmtree(GEN)
        generate(GEN)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "_gen"
        generate(fresh)
        diffs = _differences(GEN, fresh)
    if diffs:
        print("gen-check: the committed wire layer is not what `proto/` and `third_party/` give:")
        for line in diffs:
            print(f"  llmgw_wire/_gen/{line}")
        print("Run `make gen` and commit the result.")
        return 1
    print("gen-check: llmgw_wire/_gen is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
