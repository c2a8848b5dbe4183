"""Where schemas come from: descriptor sets, folders of `.proto` files, git, releases."""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError as _ProtobufDecodeError

from llmgw_wire.compat._model import CompatError

__all__ = [
    "baseline",
    "baseline_versions",
    "compile_protos",
    "find_proto_root",
    "from_git",
    "read_descriptor_set",
    "revision",
]

# Files are compiled with the protoc that grpcio-tools ships; a module name
# rather than a literal, so that a missing install can be simulated.
_PROTOC_MODULE = "grpc_tools"
_BASELINE_NAME = re.compile(r"llmgw_v1-(\d+)\.(\d+)\.(\d+)\.binpb")
# Folders that hold someone else's .proto files (virtual environments,
# installed packages, caches, node modules), never the schema of the project.
_SKIPPED_DIRS = frozenset({"node_modules", "site-packages", "dist-packages", "build", "dist"})
_PACKAGE = re.compile(rb"^\s*package\s+([\w.]+)\s*;", re.MULTILINE)


def parse(data: bytes, source: str) -> Any:
    """A `FileDescriptorSet` from bytes; `source` names them in errors."""
    fds = descriptor_pb2.FileDescriptorSet()
    try:
        fds.ParseFromString(data)
    except _ProtobufDecodeError as exc:
        raise CompatError(f"{source} is not a FileDescriptorSet: {exc}") from exc
    if not fds.file:
        raise CompatError(
            f"{source} holds no schema files; expected a FileDescriptorSet "
            "(protoc --descriptor_set_out)"
        )
    return fds


def read_descriptor_set(path: str | os.PathLike[str]) -> Any:
    """Read a `FileDescriptorSet` from a `.binpb` file.

    Raises:
        CompatError: the file cannot be read or holds no descriptor set.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CompatError(f"cannot read {os.fspath(path)}: {exc.strerror}") from exc
    return parse(data, os.fspath(path))


def _proto_files(folder: Path) -> list[Path]:
    """The `.proto` files under `folder`, outside hidden folders, environments and packages."""
    found: list[Path] = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED_DIRS
            and not (Path(top, d) / "pyvenv.cfg").exists()
        )
        found.extend(Path(top, name) for name in sorted(files) if name.endswith(".proto"))
    return found


def find_proto_root(folder: str | os.PathLike[str]) -> Path:
    """The import root of the schema in `folder`.

    A `.proto` file declaring `package a.b` that sits in `X/a/b/` has its
    import root at `X`. When the files under `folder` agree on one root,
    that is it; when they point at several (a repository holding `proto/`
    and test schemas, say), the shallowest one is taken if it is the only
    one at its depth; files whose folder does not follow their package put
    the root at `folder` itself.

    Raises:
        CompatError: `folder` has no `.proto` files, or several candidate
            roots are equally shallow.
    """
    base = Path(folder)
    files = _proto_files(base)
    if not files:
        raise CompatError(f"no .proto files under {os.fspath(folder)}")
    roots: set[Path] = set()
    for file in files:
        match = _PACKAGE.search(file.read_bytes()[:65536])
        parts = match.group(1).decode().split(".") if match else []
        directory = file.parent.relative_to(base).parts
        if not parts or tuple(directory[-len(parts) :]) != tuple(parts):
            return base
        roots.add(Path(*directory[: len(directory) - len(parts)]))
    depth = min(len(root.parts) for root in roots)
    shallowest = sorted(root for root in roots if len(root.parts) == depth)
    if len(shallowest) > 1:
        names = ", ".join((base / root).as_posix() for root in shallowest)
        raise CompatError(
            f"{os.fspath(folder)} holds several schemas ({names}); name the one to check"
        )
    return base / shallowest[0]


def compile_protos(root: str | os.PathLike[str]) -> Any:
    """Compile every `.proto` file under `root` into a `FileDescriptorSet`.

    `root` is the import root: a file at `root/llmgw/v1/node.proto` is named
    `llmgw/v1/node.proto`. The set includes imports and source info. It runs
    the protoc of grpcio-tools (the `schema` extra). Hidden folders (`.venv`,
    `.git`), virtual environments, `node_modules` and installed packages are
    not searched.

    Raises:
        CompatError: `root` has no `.proto` files, grpcio-tools is missing,
            or protoc rejects the files.
    """
    folder = Path(root)
    if not folder.is_dir():
        raise CompatError(f"{os.fspath(root)} is not a folder")
    names = [p.relative_to(folder).as_posix() for p in _proto_files(folder)]
    if not names:
        raise CompatError(f"no .proto files under {os.fspath(root)}")
    if importlib.util.find_spec(_PROTOC_MODULE) is None:
        raise CompatError(
            "compiling .proto files needs grpcio-tools; install the `schema` extra: "
            "pip install 'llmgw-wire[schema]'"
        )
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "schema.binpb"
        status, errors = _protoc(
            [
                f"--proto_path={folder.resolve()}",
                "--include_imports",
                "--include_source_info",
                f"--descriptor_set_out={out}",
                # Disk paths, so that protoc cannot mistake one for a file of
                # the current folder; it names them by their path under the root.
                *(str(folder.resolve() / name) for name in sorted(names)),
            ]
        )
        if status != 0:
            # grpcio-tools' protoc starts with a logging notice that says nothing of the files.
            prefix = f"{folder.resolve()}{os.sep}"
            lines = [
                line.replace(prefix, "") for line in errors.splitlines() if "absl::" not in line
            ]
            raise CompatError(f"protoc rejects {os.fspath(root)}:\n" + "\n".join(lines))
        return read_descriptor_set(out)


_PROTOC_LOCK = threading.Lock()


def _protoc(args: list[str]) -> tuple[int, str]:
    """Run grpcio-tools' protoc in this process: its exit status, and what it wrote as errors.

    In the process, a compilation takes milliseconds where a `python -m
    grpc_tools.protoc` subprocess takes a tenth of a second or more. protoc is
    C++ and writes its errors to file descriptor 2, which is pointed at a
    temporary file for the call; the lock keeps two calls from sharing it.
    """
    # The compiler itself, not `grpc_tools.protoc`: importing that module
    # appends to sys.path and installs import hooks for `_pb2` modules, which
    # a library must not do behind its user's back. `protoc.main` is only
    # this call with the arguments encoded.
    compiler = importlib.import_module(f"{_PROTOC_MODULE}._protoc_compiler")
    # What `python -m grpc_tools.protoc` adds itself: the well-known types.
    include = importlib.resources.files(_PROTOC_MODULE).joinpath("_proto")
    argv = [arg.encode() for arg in ["protoc", f"--proto_path={include}", *args]]
    with _PROTOC_LOCK, tempfile.TemporaryFile() as errors:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(errors.fileno(), 2)
            status = int(compiler.run_main(argv))
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        errors.seek(0)
        return status, errors.read().decode("utf-8", errors="replace")


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise CompatError("reading a schema from a git revision needs git") from exc


def revision(ref: str, cwd: Path) -> str | None:
    """The commit `ref` names in the repository at `cwd`, or None."""
    result = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd)
    return result.stdout.decode().strip() if result.returncode == 0 else None


def _not_a_revision(ref: str, toplevel: Path) -> CompatError:
    shallow = _git(["rev-parse", "--is-shallow-repository"], toplevel)
    if shallow.stdout.decode().strip() == "true":
        return CompatError(
            f"{ref!r} is not a git revision of this clone, which is shallow (it lacks "
            "older commits and other branches): fetch them first, e.g. `git fetch "
            "--deepen=1` for HEAD~1, `git fetch origin main` for origin/main, or set "
            "`fetch-depth: 0` on actions/checkout"
        )
    return CompatError(f"{ref!r} is not a git revision")


def from_git(ref: str, proto_dir: str | os.PathLike[str] = "proto") -> Any:
    """Compile the `.proto` files that `proto_dir` held at git revision `ref`.

    Args:
        ref: anything `git rev-parse` takes for a commit: a tag, a branch, `HEAD~1`.
        proto_dir: the folder of the schema in the working tree; it need not
            exist there now, but must lie inside the repository.

    Raises:
        CompatError: git is missing, `ref` is not a commit (with a hint in a
            shallow clone), or the folder had no `.proto` files at that revision.
    """
    folder = Path(proto_dir).resolve()
    cwd = folder if folder.is_dir() else Path.cwd()
    top = _git(["rev-parse", "--show-toplevel"], cwd)
    if top.returncode != 0:
        raise CompatError(f"{cwd} is not in a git repository")
    toplevel = Path(top.stdout.decode().strip()).resolve()
    try:
        prefix = folder.relative_to(toplevel).as_posix()
    except ValueError:
        raise CompatError(f"{os.fspath(proto_dir)} is not inside {toplevel}") from None
    commit = revision(ref, toplevel)
    if commit is None:
        raise _not_a_revision(ref, toplevel)
    listed = _git(["ls-tree", "-r", "-z", "--name-only", commit, "--", prefix], toplevel)
    paths = [p for p in listed.stdout.decode().split("\0") if p.endswith(".proto")]
    if not paths:
        raise CompatError(f"no .proto files under {prefix}/ at {ref}")
    with tempfile.TemporaryDirectory() as scratch:
        for path in paths:
            blob = _git(["show", f"{commit}:{path}"], toplevel)
            target = Path(scratch, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)
        return compile_protos(Path(scratch, prefix))


def _schemas() -> Any:
    return importlib.resources.files("llmgw_wire").joinpath("schemas")


def baseline_versions() -> list[str]:
    """The schema versions whose baselines ship in this package, oldest first."""
    found = []
    for entry in _schemas().iterdir():
        match = _BASELINE_NAME.fullmatch(entry.name)
        if match:
            found.append(tuple(int(part) for part in match.groups()))
    return [".".join(map(str, version)) for version in sorted(found)]


def baseline(version: str | None = None) -> Any:
    """The frozen `FileDescriptorSet` of a released schema version (default: the last).

    Raises:
        CompatError: no baseline of that version ships in this package.
    """
    versions = baseline_versions()
    if version is None and versions:
        version = versions[-1]
    if version not in versions:
        raise CompatError(
            f"Expected a schema version in {', '.join(versions) or '(none)'}, got {version!r}"
        )
    name = f"llmgw_v1-{version}.binpb"
    return parse(_schemas().joinpath(name).read_bytes(), name)
