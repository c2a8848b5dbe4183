"""The frozen wire fixtures: how they are made, read, and compared across schemas.

`tests/fixtures/HEAD/` holds what the current code writes for every message of
the schema: `<Message>.binpb` (deterministic binary), `<Message>.json` (proto
JSON), one per envelope member for the envelopes
(`AgentMessage.register.binpb`, ...), and `schema.binpb`, the schema they were
written with. `make fixtures` (`LLMGW_UPDATE_FIXTURES=1 pytest
tests/codec/test_fixtures.py`) regenerates HEAD and nothing else. On each schema
release HEAD is copied to `tests/fixtures/v<version>/`, which never changes
again.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from fixture_values import ENCODED_FROM
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from llmgw_wire import encode
from llmgw_wire.codec.schema import descriptor_set

__all__ = [
    "FIXTURES",
    "HEAD",
    "PACKAGE",
    "SCHEMA",
    "UPDATE_SWITCH",
    "compile_schema",
    "digest",
    "envelope_members",
    "message_classes",
    "message_of",
    "read",
    "render",
    "shared_field_differences",
    "to_json",
    "versions",
    "write_head",
]

FIXTURES = Path(__file__).parent / "fixtures"
HEAD = "HEAD"
SCHEMA = "schema.binpb"
PACKAGE = "llmgw.v1"
UPDATE_SWITCH = "LLMGW_UPDATE_FIXTURES"
_VERSION = re.compile(r"v(\d+)\.(\d+)\.(\d+)")


def message_classes(fds: descriptor_pb2.FileDescriptorSet) -> dict[str, Any]:
    """Message classes for every top-level message of `fds`, by short name.

    They live in a private descriptor pool, so that several versions of the
    same package can be loaded side by side.
    """
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    return {
        message.name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{file.package}.{message.name}")
        )
        for file in fds.file
        for message in file.message_type
    }


def compile_schema(root: Path, out: Path) -> descriptor_pb2.FileDescriptorSet:
    """Compile every `.proto` file under `root` with grpcio-tools' protoc.

    Raises:
        RuntimeError: protoc refused the files; its diagnostics are included.
    """
    protos = sorted(str(p.relative_to(root)) for p in root.rglob("*.proto"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{root}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            *protos,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"protoc failed on {root}:\n{done.stderr}")
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _current_schema() -> descriptor_pb2.FileDescriptorSet:
    fds = descriptor_set()
    # Comments are no part of the wire format: a reworded comment must not
    # make the fixtures stale.
    for file in fds.file:
        file.ClearField("source_code_info")
    return fds


def to_json(message: Any) -> bytes:
    """The proto JSON of `message`, with stable options: sorted keys, indented, newline."""
    text: str = json_format.MessageToJson(message, indent=2, sort_keys=True)
    return (text + "\n").encode()


def message_of(stem: str) -> str:
    """The message a fixture is of: `AgentMessage` for `AgentMessage.register`."""
    return stem.partition(".")[0]


def envelope_members(cls: Any) -> list[tuple[str, str]]:
    """`(member, message name)` for each member of a message's oneofs; empty if it has none."""
    return [
        (field.name, field.message_type.name)
        for oneof in cls.DESCRIPTOR.oneofs
        for field in oneof.fields
    ]


def render() -> dict[str, bytes]:
    """Every file of HEAD, by name, as the current code writes it.

    Raises:
        LookupError: a message of the schema has no fixture value.
    """
    classes = message_classes(_current_schema())
    binary: dict[str, bytes] = {}
    for name, cls in sorted(classes.items()):
        if name in ENCODED_FROM:
            binary[name] = encode(ENCODED_FROM[name])
        elif not envelope_members(cls):
            raise LookupError(
                f"no fixture value for {PACKAGE}.{name}: add one to tests/fixture_values.py"
            )
    for name, cls in sorted(classes.items()):
        for member, member_type in envelope_members(cls):
            envelope = cls()
            getattr(envelope, member).MergeFromString(binary[member_type])
            binary[f"{name}.{member}"] = envelope.SerializeToString(deterministic=True)
    files = {SCHEMA: _current_schema().SerializeToString(deterministic=True)}
    for stem, data in binary.items():
        files[f"{stem}.binpb"] = data
        files[f"{stem}.json"] = to_json(classes[message_of(stem)].FromString(data))
    return files


def read(directory: Path) -> dict[str, bytes]:
    """The files of one fixture directory, by name."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def write_head(root: Path = FIXTURES) -> list[str]:
    """Rewrite `root/HEAD` as the current code writes it; return the names that changed.

    Only HEAD is written: the released versions beside it are never touched.
    """
    head = root / HEAD
    head.mkdir(parents=True, exist_ok=True)
    wanted = render()
    present = read(head)
    changed = []
    for name in sorted(present.keys() - wanted.keys()):
        (head / name).unlink()
        changed.append(name)
    for name, data in wanted.items():
        if present.get(name) != data:
            (head / name).write_bytes(data)
            changed.append(name)
    return sorted(changed)


def versions(root: Path = FIXTURES) -> list[str]:
    """The released fixture directories under `root` (`v1.0.0`, ...), oldest first."""
    found = [p.name for p in root.iterdir() if p.is_dir() and _VERSION.fullmatch(p.name)]
    return sorted(found, key=lambda name: tuple(map(int, _VERSION.fullmatch(name).groups())))  # type: ignore[union-attr]


def digest(files: dict[str, bytes]) -> str:
    """A SHA-256 over the names and contents of a fixture directory's files."""
    hasher = hashlib.sha256()
    for name, data in sorted(files.items()):
        hasher.update(f"{name}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()


def shared_field_differences(a: Any, b: Any, path: str = "$") -> list[str]:
    """Where two messages of two versions of one type disagree on the fields both know.

    Fields are paired by number, as on the wire; a field only one side knows
    is skipped. Enum values compare by number.
    """
    out: list[str] = []
    theirs = b.DESCRIPTOR.fields_by_number
    for field in a.DESCRIPTOR.fields:
        other = theirs.get(field.number)
        if other is None:
            continue
        where = f"{path}.{field.name}"
        mine, their = getattr(a, field.name), getattr(b, other.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out.extend(_map_differences(field, mine, their, where))
        elif field.is_repeated:
            out.extend(_list_differences(field, mine, their, where))
        elif field.message_type is not None:
            if a.HasField(field.name) != b.HasField(other.name):
                out.append(f"{where}: present on one side only")
            elif a.HasField(field.name):
                out.extend(shared_field_differences(mine, their, where))
        elif mine != their:
            out.append(f"{where}: {mine!r} != {their!r}")
    return out


def _map_differences(field: Any, mine: Any, their: Any, where: str) -> list[str]:
    if mine.keys() != their.keys():
        return [f"{where}: keys {sorted(mine)} != {sorted(their)}"]
    if field.message_type.fields_by_name["value"].message_type is not None:
        return [
            d for k in mine for d in shared_field_differences(mine[k], their[k], f"{where}[{k!r}]")
        ]
    return [f"{where}[{k!r}]: {mine[k]!r} != {their[k]!r}" for k in mine if mine[k] != their[k]]


def _list_differences(field: Any, mine: Any, their: Any, where: str) -> list[str]:
    if len(mine) != len(their):
        return [f"{where}: {len(mine)} items != {len(their)}"]
    if field.message_type is not None:
        pairs = enumerate(zip(mine, their, strict=True))
        return [d for i, (x, y) in pairs for d in shared_field_differences(x, y, f"{where}[{i}]")]
    if list(mine) != list(their):
        return [f"{where}: {list(mine)} != {list(their)}"]
    return []
