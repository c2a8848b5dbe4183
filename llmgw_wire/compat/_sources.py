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
from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError as _ProtobufDecodeError

from llmgw_wire.compat._files import (
    MAX_DESCRIPTOR_SET_BYTES,
    MAX_PROTO_BYTES,
    read_regular_file,
    safe_relative,
)
from llmgw_wire.compat._model import CompatError

if TYPE_CHECKING:
    from importlib.abc import Traversable  # importlib.resources.abc from Python 3.11

__all__ = [
    "baseline",
    "baseline_versions",
    "compile_protos",
    "find_proto_root",
    "from_git",
    "from_git_input",
    "parse_git_input",
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


def parse(data: bytes, source: str) -> descriptor_pb2.FileDescriptorSet:
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


def read_descriptor_set(path: str | os.PathLike[str]) -> descriptor_pb2.FileDescriptorSet:
    """Read a `FileDescriptorSet` from a `.binpb` file.

    Raises:
        CompatError: the file cannot be read or holds no descriptor set.
    """
    return parse(read_regular_file(path, MAX_DESCRIPTOR_SET_BYTES), os.fspath(path))


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


def _read_proto(file: Path) -> bytes:
    # A link could point anywhere (/dev/zero, a file outside the repository):
    # only regular files, each bounded, as protoc itself is then handed copies.
    return read_regular_file(file, MAX_PROTO_BYTES, follow_links=False)


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
        match = _PACKAGE.search(_read_proto(file)[:65536])
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


def compile_protos(root: str | os.PathLike[str]) -> descriptor_pb2.FileDescriptorSet:
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
    for name in names:
        _utf8_name(name, os.fspath(folder / name))
    if importlib.util.find_spec(_PROTOC_MODULE) is None:
        raise CompatError(
            "compiling .proto files needs grpcio-tools; install the `schema` extra: "
            "pip install 'llmgw-wire[schema]'"
        )
    include = _include_dir()
    with tempfile.TemporaryDirectory() as scratch:
        # protoc reads copies: only regular files, each bounded, so that a
        # link or a FIFO in the folder is refused here rather than followed.
        sources = Path(scratch, "src")
        inputs = []
        for name in sorted(names):
            data = _read_proto(folder / name)
            if include.joinpath(name).is_file():
                # A well-known file (google/protobuf/cpp_features.proto, say)
                # that grpcio-tools ships too: fed twice, protoc refuses it as
                # "shadowed"; its own copy serves the imports, as buf's does.
                continue
            target = sources / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            inputs.append(str(target))
        if not inputs:
            raise CompatError(f"no .proto files under {os.fspath(root)} but well-known ones")
        out = Path(scratch) / "schema.binpb"
        status, errors = _protoc(
            [
                f"--proto_path={sources}",
                "--include_imports",
                "--include_source_info",
                f"--descriptor_set_out={out}",
                # Disk paths, so that protoc cannot mistake one for a file of
                # the current folder; it names them by their path under the root.
                *inputs,
            ]
        )
        if status != 0:
            # grpcio-tools' protoc starts with a logging notice that says nothing of the files.
            prefix = f"{sources}{os.sep}"
            lines = [
                line.replace(prefix, "") for line in errors.splitlines() if "absl::" not in line
            ]
            raise CompatError(f"protoc rejects {os.fspath(root)}:\n" + "\n".join(lines))
        return read_descriptor_set(out)


def _utf8_name(name: str, shown: str) -> None:
    """Refuse a file name that is not UTF-8 (`shown` says where): a schema names files in UTF-8."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise CompatError(
            f"{shown} is a .proto file whose name is not UTF-8; protobuf names files in UTF-8"
        ) from None


def _include_dir() -> Traversable:
    """Where grpcio-tools keeps the well-known `.proto` files (`google/protobuf/...`)."""
    return importlib.resources.files(_PROTOC_MODULE).joinpath("_proto")


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
    include = _include_dir()
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


def from_git(
    ref: str, proto_dir: str | os.PathLike[str] = "proto"
) -> descriptor_pb2.FileDescriptorSet:
    """Compile the `.proto` files that `proto_dir` held at git revision `ref`.

    Args:
        ref: anything `git rev-parse` takes for a commit: a tag, a branch, `HEAD~1`.
        proto_dir: the folder of the schema in the working tree; it need not
            exist there now, but must lie inside the repository.

    Raises:
        CompatError: git is missing, `ref` is not a commit (with a hint in a
            shallow clone), the folder had no `.proto` files at that revision,
            or the tree holds a path that would leave it (see `from_git_input`).
    """
    folder = Path(proto_dir).resolve()
    cwd = folder if folder.is_dir() else Path.cwd()
    toplevel = _toplevel(cwd)
    try:
        prefix = folder.relative_to(toplevel).as_posix()
    except ValueError:
        raise CompatError(f"{os.fspath(proto_dir)} is not inside {toplevel}") from None
    commit = revision(ref, toplevel)
    if commit is None:
        raise _not_a_revision(ref, toplevel)
    with tempfile.TemporaryDirectory() as scratch:
        _extract(toplevel, commit, prefix, Path(scratch), ref)
        return compile_protos(Path(scratch, prefix))


def _toplevel(cwd: Path) -> Path:
    top = _git(["rev-parse", "--show-toplevel"], cwd)
    if top.returncode != 0:
        raise CompatError(f"{cwd} is not in a git repository")
    return Path(top.stdout.decode().strip()).resolve()


def _extract(repo: Path, commit: str, prefix: str, scratch: Path, shown: str) -> None:
    """Write the `.proto` files under `prefix` at `commit` into `scratch`, refusing escapes.

    A tree is data someone else made: `git mktree` accepts entries named
    `..`, and a link can point anywhere, so every path is checked to stay
    inside `scratch`, links are refused, and each blob is bounded in size.
    """
    listed = _git(["ls-tree", "-r", "-z", "-l", "--full-tree", commit, "--", prefix], repo)
    if listed.returncode != 0:
        reason = listed.stderr.decode(errors="replace").strip().splitlines()[:1]
        raise CompatError(f"cannot list {prefix} at {shown}: {' '.join(reason)}")
    found = 0
    for entry in listed.stdout.split(b"\0"):
        meta, _, raw = entry.partition(b"\t")
        path = raw.decode("utf-8", errors="surrogateescape")
        if not path.endswith(".proto"):
            continue
        _utf8_name(path, f"{path} at {shown}")
        mode, kind, blob, size = meta.split()
        safe_relative(path, f"the tree of {shown}")
        if mode == b"120000":
            raise CompatError(
                f"{path!r} is a symbolic link at {shown}; the checker reads only regular files"
            )
        if kind != b"blob":
            continue  # a submodule's commit
        if int(size) > MAX_PROTO_BYTES:
            raise CompatError(f"{path!r} at {shown} is larger than the checker's limit of 4 MiB")
        target = scratch.joinpath(*path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_git(["cat-file", "blob", blob.decode()], repo).stdout)
        found += 1
    if not found:
        raise CompatError(f"no .proto files under {prefix}/ at {shown}")


#: The keys of buf's git input (`.git#branch=main,subdir=proto`) that the checker reads.
GIT_INPUT_KEYS = ("branch", "tag", "ref", "subdir", "depth")
_IGNORED_GIT_KEYS = ("recurse_submodules",)


def parse_git_input(value: str) -> dict[str, str] | None:
    """The parts of buf's git input, split into its parts, or None when `value` is not one.

    `value` is a repository (a folder ending in `.git`, or a URL ending in
    `.git`) with options after `#`: `branch=`, `tag=`, `ref=`, `subdir=`,
    `depth=`, separated by commas. The repository is under the key `""`.

    Raises:
        CompatError: an option is unknown or malformed, or names two revisions.
    """
    repository, hash_sign, options = value.partition("#")
    del hash_sign
    if not repository.rstrip("/").endswith(".git"):
        return None
    parts: dict[str, str] = {"": repository.rstrip("/")}
    for option in filter(None, options.split(",")):
        key, equals, setting = option.partition("=")
        if key in _IGNORED_GIT_KEYS:
            continue
        if key not in GIT_INPUT_KEYS or not equals or not setting:
            raise CompatError(
                f"{value!r}: Expected options among {', '.join(k + '=' for k in GIT_INPUT_KEYS)} "
                f"after '#', got {option[:60]!r}"
            )
        parts[key] = setting
    if sum(key in parts for key in ("branch", "tag", "ref")) > 1:
        raise CompatError(f"{value!r}: Expected at most one of branch=, tag= and ref=")
    if "depth" in parts and not parts["depth"].isdigit():
        raise CompatError(f"{value!r}: depth: Expected a positive number, got {parts['depth']!r}")
    if "subdir" in parts:
        safe_relative(parts["subdir"], f"{value!r}: subdir")
    return parts


def from_git_input(value: str, subdir: str | None = None) -> descriptor_pb2.FileDescriptorSet:
    """Compile the schema that buf's git input `value` names (`.git#branch=main`).

    The repository is a local one (its `.git` folder, or a folder ending in
    `.git`) or anything else `git clone` takes, which is then cloned (with
    `depth=`, default 50 as buf's) into a temporary folder. `branch=B` is the
    local branch `B`, else `origin/B` (as in a CI checkout); `tag=T` a tag;
    `ref=R` anything `git rev-parse` takes; none of them: `HEAD`. The schema
    is in `subdir=` (default: `subdir`, else the repository's top), whose
    proto root is found as for a folder.

    Raises:
        CompatError: as `from_git`, or the input is malformed, or the clone fails.
    """
    parts = parse_git_input(value)
    if parts is None:
        raise CompatError(f"Expected a git input such as '.git#branch=main', got {value!r}")
    folder = parts.get("subdir", subdir if subdir is not None else ".")
    safe_relative(folder, f"{value!r}: subdir")
    with tempfile.TemporaryDirectory() as scratch:
        local = Path(parts[""])
        if local.is_dir():
            repo = local
        else:
            repo = Path(scratch, "clone")
            _clone(parts, repo, value)
        commit = _resolve(parts, repo, value)
        tree = Path(scratch, "tree")
        _extract(repo, commit, folder, tree, value)
        return compile_protos(find_proto_root(tree.joinpath(*folder.split("/"))))


def _clone(parts: dict[str, str], repo: Path, value: str) -> None:
    args = ["clone", "--quiet", "--no-checkout", f"--depth={parts.get('depth', '50')}"]
    if "branch" in parts or "tag" in parts:
        args.append(f"--branch={parts.get('branch') or parts['tag']}")
    result = _git([*args, "--", parts[""], str(repo)], Path.cwd())
    if result.returncode != 0:
        reason = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise CompatError(f"cannot clone {value!r}: {' '.join(reason)}")


def _resolve(parts: dict[str, str], repo: Path, value: str) -> str:
    if "branch" in parts:
        candidates = [f"refs/heads/{parts['branch']}", f"refs/remotes/origin/{parts['branch']}"]
    elif "tag" in parts:
        candidates = [f"refs/tags/{parts['tag']}"]
    else:
        candidates = [parts.get("ref", "HEAD")]
    for candidate in candidates:
        commit = revision(candidate, repo)
        if commit is not None:
            return commit
    raise _not_a_revision(value, repo)


def _schemas() -> Traversable:
    return importlib.resources.files("llmgw_wire").joinpath("schemas")


def baseline_versions() -> list[str]:
    """The schema versions whose baselines ship in this package, oldest first."""
    found = []
    for entry in _schemas().iterdir():
        match = _BASELINE_NAME.fullmatch(entry.name)
        if match:
            found.append(tuple(int(part) for part in match.groups()))
    return [".".join(map(str, version)) for version in sorted(found)]


def baseline(version: str | None = None) -> descriptor_pb2.FileDescriptorSet:
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
