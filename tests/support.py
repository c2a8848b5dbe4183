"""The tests' one support module: what more than one test module uses.

* hand-made wire bytes, and the fields of a message as plain data (`varint`,
  `tag`, `ld`, `group`, `plain_pb`, `plain_bp2`, ...);
* the values the frozen wire fixtures are encoded from (`NODE`, `SPEC`,
  `ENCODED_FROM`, `EXPECTED`, ...);
* the frozen wire fixtures: how they are made, read and compared across
  schemas (`FIXTURES`, `HEAD`, `read`, `write_head`, ...);
* the two wire backends (`WireBackend`, `BACKENDS`) and a bounded runner of
  async tests (`run_async`);
* the stream on loopback: a control plane served (`serving`, `target`), a raw
  agent call (`raw_agent`), a control plane that acks and keeps what it got
  (`Adopting`), an agent lost told from a `handle` cancelled
  (`lost_or_cancelled`), an application's interceptor of the agent calls
  (`ConnectInterceptor`) and a relay in the middle (`loopback_relay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import grpc
import grpc.aio
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor

from llmgw_wire import converter, decode, encode
from llmgw_wire.codec import wire_class
from llmgw_wire.codec._schema import descriptor_set
from llmgw_wire.domain import (
    GPU,
    IMEX,
    Ack,
    Adapter,
    AdoptedShard,
    Compute,
    FabricAttachment,
    GPUFabric,
    GPUHealth,
    Heartbeat,
    Host,
    LocalWeights,
    MIGDevice,
    Node,
    NodeState,
    Profile,
    Registration,
    ShardCommand,
    ShardReport,
    ShardSpec,
    State,
    StopCommand,
    Storage,
)
from llmgw_wire.stream import CONNECT_ROUTE, ControlPlane, PeerUnavailable, start_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator

    from llmgw_wire.mapping._table import ModelWithMessage
    from llmgw_wire.stream import ControlSession, PeerCertificate, Server

# --- hand-made wire bytes ----------------------------------------------------

# Hand-made wire bytes, and the fields of a message as plain data, for the wire tests.
#
# A tiny encoder, independent of both runtimes, so that a test can write what a
# careless or hostile peer sends (fields out of order, a length past the end,
# wire type 7), and a reader that turns an official (upb) or a betterproto2
# message into plain dicts and lists, compared field by field.

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5


def varint(n: int) -> bytes:
    """`n` as a varint; a negative number takes 10 bytes, as int32 and int64 do."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if not n:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def ld(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes, a sub-message or a packed run."""
    return tag(number, LEN) + varint(len(payload)) + payload


def vi(number: int, value: int) -> bytes:
    """A varint field."""
    return tag(number, VARINT) + varint(value)


def group(number: int, payload: bytes) -> bytes:
    """A group: start tag, its fields, end tag."""
    return tag(number, SGROUP) + payload + tag(number, EGROUP)


def nested_groups(number: int, depth: int) -> bytes:
    """`depth` groups, each inside the one before."""
    return tag(number, SGROUP) * depth + tag(number, EGROUP) * depth


# --- a message's fields as plain data ---------------------------------------------


def plain_pb(message: Any) -> dict[str, Any]:
    """Every field of an official message: scalars, lists, dicts, None for an unset message."""
    return _plain(message, message.DESCRIPTOR, getattr, _pb_has)


def plain_bp2(message: Any, descriptor: Any) -> dict[str, Any]:
    """Every field of a betterproto2 message, read with the official `descriptor`."""
    return _plain(message, descriptor, _bp2_get, lambda m, name: getattr(m, name) is not None)


def _pb_has(message: Any, name: str) -> bool:
    return bool(message.HasField(name))


def _bp2_get(message: Any, name: str) -> Any:
    value = getattr(message, name)
    return int(value) if hasattr(value, "proto_name") else value


def _plain(message: Any, descriptor: Any, get: Any, has: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in descriptor.fields:
        sub = field.message_type
        if sub is not None and sub.GetOptions().map_entry:
            out[field.name] = dict(get(message, field.name))
        elif sub is not None and field.is_repeated:
            out[field.name] = [_plain(x, sub, get, has) for x in get(message, field.name)]
        elif sub is not None:
            present = has(message, field.name)
            out[field.name] = _plain(get(message, field.name), sub, get, has) if present else None
        elif field.is_repeated:
            out[field.name] = [_scalar(field, x) for x in get(message, field.name)]
        else:
            out[field.name] = _scalar(field, get(message, field.name))
    return out


def _scalar(field: Any, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return int(value)
    return value


def as_go_reads(message_class: Any, entries_class: Any, data: bytes) -> Any:
    """`data` parsed by the official runtime, with map entries read as Go's runtime reads them.

    `entries_class` is the same message with maps as repeated entry messages
    (`llmgw_wire.codec._schema.DECODE_CLASSES`): an entry that carries an
    unknown field keeps its key there, where the official Python runtime
    keeps the whole entry as an unknown field of the parent. Unknown fields
    are dropped (the field-by-field comparisons do not see them). Raises the
    official runtime's `DecodeError` for bytes it refuses.
    """
    entries = entries_class()
    entries.ParseFromString(data)
    entries.DiscardUnknownFields()
    message = message_class()
    message.ParseFromString(entries.SerializeToString())
    return message


# --- the values of the frozen fixtures ---------------------------------------

# The values the frozen wire fixtures are encoded from.
#
# One GB200 NVL72 compute tray (four cards, one of them split into MIG slices),
# its agent's running shards and the commands of the control plane. Every field
# of every message is set to a value other than its default (repeated fields and
# maps with two or more entries, optional sub-messages present), so that a
# fixture exercises the whole wire form of its message; `tests/codec/test_fixtures.py`
# checks it.
#
# The values are written out here rather than taken from `llmgw_wire.testing.sample`:
# the sample may change for the demo, and these must not. Once a schema version
# is released its fixtures are frozen (`tests/fixtures/v<version>/`), and each
# of them must still decode to these values, minus the fields that version did
# not have: change a value only for a field added since the last release.


NODE_ID = "gb200-r07-t03"
_GB200_MB = 189_471
_CARD_1 = "GPU-8e41c2b7-5d3a-4f19-b6e0-7a2c9d1f4e01"

HOST = Host(
    os_id="ubuntu",
    os_version="24.04",
    os_codename="noble",
    arch="aarch64",
    cpu_flags=("asimd", "sve2", "bf16"),
    nvidia_driver="575.57.08",
)

FABRIC = GPUFabric(
    state="Completed",
    status="Success",
    cluster_uuid="0b7f3c2e-9d14-4a8e-b5c6-3e1f7a9d2c40",
    clique_id="32766",
    bandwidth="Full",
)

MIG = MIGDevice(
    parent_index=1,
    parent_uuid=_CARD_1,
    parent_memory_total_mb=_GB200_MB,
    device=2,
    profile="3g.93gb",
    gpu_instance=2,
    compute_instance=1,
)

CARD = GPU(
    index=0,
    uuid="GPU-8e41c2b7-5d3a-4f19-b6e0-7a2c9d1f4e00",
    name="NVIDIA GB200",
    memory_total_mb=_GB200_MB,
    memory_used_mb=151_552,
    compute_capability="10.0",
    numa_node=-1,  # unknown; a negative int32 takes ten bytes on the wire
    pci_bus_id="00000008:01:00.0",
    driver_version="575.57.08",
    utilization_percent=91,
    cuda_version="12.9",
    nvlink_peers=(1, 2, 3),
    nic_paths={"mlx5_0": "PIX", "mlx5_1": "NODE"},
    fabric=FABRIC,
    health=GPUHealth(ecc_errors=0, temperature_c=66),
)

MIG_SLICE = GPU(
    index=1,
    uuid="MIG-2c9e7a41-0f3b-4d58-a1e6-9b7c3d5f8a22",
    name="NVIDIA GB200 MIG 3g.93gb",
    memory_total_mb=94_208,
    memory_used_mb=40_960,
    compute_capability="10.0",
    numa_node=1,
    pci_bus_id="00000009:01:00.0",
    driver_version="575.57.08",
    utilization_percent=47,
    cuda_version="12.9",
    nvlink_peers=(0, 2),
    nic_paths={"mlx5_2": "PIX", "mlx5_3": "SYS"},
    fabric=FABRIC,
    health=GPUHealth(
        ecc_errors=2,
        temperature_c=58,
        problems=("2 uncorrected ECC errors since boot", "retired pages pending"),
    ),
    mig=MIG,
)

IMEX_DAEMON = IMEX(state="UP", channels=2048)

WEIGHTS = (
    LocalWeights("/models/meta-llama/Llama-3.1-70B-Instruct", 141_107_412_992, True),
    LocalWeights("/var/lib/llmgw/weights/Qwen2.5-7B-Instruct", 15_231_233_024, False),
)

STORAGE = (
    Storage("/models", 2_198_487_236_608, 7_681_491_058_688, True),
    Storage("/var/lib/llmgw", 812_347_318_272, 1_919_850_381_312, False),
)

FABRICS = (
    FabricAttachment("ib-east", ("mlx5_0", "mlx5_1"), 400),
    FabricAttachment("ib-west", ("mlx5_2", "mlx5_3"), 200),
)

COMPUTE = Compute(backend="cuda", devices=("cuda:0", "cuda:1"), offloaded=80, total=81)

# An adopted shard's `node_id` is the registration's, so it is empty on its own.
LEADER = AdoptedShard(
    replica_id="llama70b-r2",
    shard_id="llama70b-r2-s0",
    rank=0,
    gpu_indices=(0, 1),
    hcas=("mlx5_0", "mlx5_1"),
    http_port=8000,
    state=State.READY,
    model="meta-llama/Llama-3.1-70B-Instruct",
    profile="vllm-70b-tp2-pp2",
    pool="chat",
    fabric="ib-east",
    profile_fp="sha256:4be1c0de",
    compute=COMPUTE,
    endpoint="http://10.52.7.3:8000",
)

# Only a leader carries its address, so the follower is where `rank` is set.
FOLLOWER = AdoptedShard(
    replica_id="qwen7b-r5",
    shard_id="qwen7b-r5-s1",
    rank=1,
    gpu_indices=(2, 3),
    hcas=("mlx5_2",),
    http_port=8010,
    state=State.LOADING,
    model="Qwen/Qwen2.5-7B-Instruct",
    profile="sglang-7b-tp2",
    pool="batch",
    fabric="ib-west",
    profile_fp="sha256:9d0f77aa",
)

NODE = Node(
    id=NODE_ID,
    hostname="gb200-r07-t03.east.example.net",
    mgmt_addr="10.52.7.3",
    labels={"rack": "r07", "zone": "east-2"},
    state=NodeState.READY,
    agent_version="0.15.0",
    features=("mig", "compute-report"),
    engine_versions={"sglang": "0.5.3", "vllm": "0.11.0"},
    engines_probed=True,
    memory_total_mb=884_736,
    cpu_count=144,
    host=HOST,
    weights=WEIGHTS,
    storage=STORAGE,
    gpus=(CARD, MIG_SLICE),
    imex=IMEX_DAEMON,
    fabrics=FABRICS,
)

REGISTRATION = Registration(
    node=NODE,
    shards=(attrs.evolve(LEADER, node_id=NODE_ID), attrs.evolve(FOLLOWER, node_id=NODE_ID)),
)

PROFILE = Profile(
    name="vllm-70b-tp2-pp2",
    engine="vllm",
    gpu_class="gb200",
    tp=2,
    pp=2,
    gpus_per_node=2,
    nodes=2,
    args=("--max-model-len", "65536", "--enable-prefix-caching"),
    env={"NCCL_IB_HCA": "mlx5_0,mlx5_1", "VLLM_USE_V1": "1"},
    model_path="/models/meta-llama/Llama-3.1-70B-Instruct",
    served_model_name="llama-70b",
    adapters=(
        Adapter("support-tone", "/models/lora/support-tone"),
        Adapter("sql-assist", "acme/llama70b-sql-lora"),
    ),
    kv_events=True,
)

SPEC = ShardSpec(
    replica_id="llama70b-r3",
    shard_id="llama70b-r3-s1",
    rank=1,
    nnodes=2,
    leader_addr="10.52.7.2",
    leader_port=29500,
    gpu_indices=(2, 3),
    hcas=("mlx5_2", "mlx5_3"),
    mgmt_interface="enP5p1s0f0",
    http_port=8020,
    pool="chat",
    fabric="ib-east",
    profile_fp="sha256:c0ffee42",
    api_key="sk-llmgw-fixture-0001",
    threads=72,
    profile=PROFILE,
)

COMMAND = ShardCommand(SPEC, startup_timeout=dt.timedelta(minutes=15))

STOP = StopCommand(replica_id="qwen7b-r5", shard_id="qwen7b-r5-s1", grace=dt.timedelta(seconds=90))

REPORT = ShardReport(
    replica_id=LEADER.replica_id,
    shard_id=LEADER.shard_id,
    state=State.DRAINING,
    detail="draining for node maintenance",
    compute=COMPUTE,
)

HEARTBEAT = Heartbeat(
    node_id=NODE_ID,
    sent_at=dt.datetime(2025, 11, 3, 14, 7, 31, 250_000, tzinfo=dt.timezone.utc),
)

ACK = Ack(node_id=NODE_ID, adopted_shards=2, detail="adopted 2 running shards")

#: The domain value each wire message's fixture is encoded from, by message
#: name. A message carried by two domain models is encoded from the one that
#: fills it entirely (a `Register` from a `Registration`, not a `Node`). The
#: envelopes have no domain model: their fixtures wrap these ones.
ENCODED_FROM: dict[str, ModelWithMessage] = {
    "Ack": ACK,
    "Compute": COMPUTE,
    "EngineProfile": PROFILE,
    "FabricAttachment": FABRICS[0],
    "GPU": MIG_SLICE,
    "Heartbeat": HEARTBEAT,
    "Host": HOST,
    "IMEX": IMEX_DAEMON,
    "LocalWeights": WEIGHTS[0],
    "LoraAdapter": PROFILE.adapters[0],
    "MIGDevice": MIG,
    "Register": REGISTRATION,
    "RunningShard": LEADER,
    "ShardStatus": REPORT,
    "StartShard": COMMAND,
    "StopShard": STOP,
    "Storage": STORAGE[0],
}

#: What decoding a fixture gives, for every domain model with a wire message.
EXPECTED: dict[type, object] = {
    **{type(value): value for value in ENCODED_FROM.values()},
    Node: NODE,
    ShardSpec: SPEC,
}

#: Fields a fixture leaves at their default because the mapping cannot carry
#: both, by (fixture, field), with the reason.
UNSET_BY_DESIGN: dict[tuple[str, str], str] = {
    ("RunningShard", "llmgw.v1.RunningShard.rank"): (
        "a running shard's leader address travels only for the leader, rank 0"
    ),
}

# --- the frozen fixtures -----------------------------------------------------

# The frozen wire fixtures: how they are made, read, and compared across schemas.
#
# `tests/fixtures/HEAD/` holds what the current code writes for every message of
# the schema: `<Message>.binpb` (deterministic binary), `<Message>.json` (proto
# JSON), one per envelope member for the envelopes
# (`AgentMessage.register.binpb`, ...), and `schema.binpb`, the schema they were
# written with. `make fixtures` (`LLMGW_UPDATE_FIXTURES=1 pytest
# tests/codec/test_fixtures.py`) regenerates HEAD and nothing else. On each schema
# release HEAD is copied to `tests/fixtures/v<version>/`, which never changes
# again.


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
            raise LookupError(f"no fixture value for {PACKAGE}.{name}: add one to tests/support.py")
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


# --- the backends, and async tests --------------------------------------------


class WireBackend(NamedTuple):
    """One of the two wire backends the mapping is compiled for, as bytes in and out."""

    name: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes, type], Any]


def _betterproto2_encode(value: Any) -> bytes:
    return bytes(converter.unstructure(value))


def _betterproto2_decode(data: bytes, model: type) -> Any:
    return converter.structure(wire_class(model).parse(data), model)


BACKENDS = (
    WireBackend("upb", encode, decode),
    WireBackend("betterproto2", _betterproto2_encode, _betterproto2_decode),
)


def mypy_as_dependent(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """`mypy --strict` on `source` as user.py, in a folder of its own: as a dependent sees us."""
    (tmp_path / "user.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", os.devnull, "user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def run_async(main: Callable[[], Coroutine[Any, Any, None]], timeout: float = 90) -> None:
    """Run one async test, bounded: a hang fails the test instead of the run."""
    asyncio.run(asyncio.wait_for(main(), timeout))


# --- the stream on loopback --------------------------------------------------


@contextlib.asynccontextmanager
async def serving(plane: ControlPlane, **options: Any) -> AsyncIterator[Server]:
    """`plane` served on 127.0.0.1 for the block (`start_server`'s `options`); stopped at once."""
    server = await start_server(plane, **options)
    try:
        yield server
    finally:
        await server.stop(grace=None)


def target(server: Server) -> str:
    """The address agents connect to `server` at."""
    return f"127.0.0.1:{server.port}"


@contextlib.asynccontextmanager
async def raw_agent(server: Server) -> AsyncIterator[grpc.aio.StreamStreamCall[bytes, bytes]]:
    """An agent call to `server` that sends whatever bytes the test writes."""
    async with grpc.aio.insecure_channel(target(server)) as channel:
        yield channel.stream_stream(CONNECT_ROUTE)()


class Holding(ControlPlane):
    """Keeps its agent's call until `release` is set, even when told to end it."""

    def __init__(self) -> None:
        self.registered = asyncio.Event()
        self.release = asyncio.Event()

    async def handle(self, session: ControlSession) -> None:
        try:
            async for _ in session:
                self.registered.set()
        finally:
            await self.release.wait()


class Adopting(ControlPlane):
    """Acks each registration, its shards adopted; keeps what each call brought.

    Attributes:
        registrations: how many registrations it acked.
        handed: every value it was handed, in order.
        certificates: each call's client certificate (None without one), in order.
    """

    def __init__(self) -> None:
        self.registrations = 0
        self.handed: list[object] = []
        self.certificates: list[PeerCertificate | None] = []

    async def handle(self, session: ControlSession) -> None:
        self.certificates.append(session.certificate)
        async for value in session:
            self.handed.append(value)
            if isinstance(value, Registration):
                self.registrations += 1
                await session.send(Ack(value.node.id, len(value.shards), "adopted"))


@contextlib.contextmanager
def lost_or_cancelled(ends: list[str]) -> Iterator[None]:
    """Keep in `ends` whether the block, in a `handle`, ended with its agent lost or cancelled.

    "lost": `PeerUnavailable`, taken here (the call then ends as the stream
    ends it); "cancelled": the `handle` was cancelled, which goes on. A block
    that runs through says itself how it ended ("ended", ...).
    """
    try:
        yield
    except PeerUnavailable:
        ends.append("lost")
    except asyncio.CancelledError:
        ends.append("cancelled")
        raise


class ConnectInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """An application's interceptor that sees the context of each agent stream first.

    `context` is given each call's context as the call starts, and returns
    the context the stream's handler gets in its place: the same one, kept
    by the test, or one of the test's own around it. Other calls pass as
    they are.
    """

    def context(self, context: grpc.aio.ServicerContext[bytes, bytes]) -> Any:
        return context

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if details.method != CONNECT_ROUTE:
            return handler

        async def serve(requests: object, context: Any) -> AsyncIterator[bytes]:
            async for response in handler.stream_stream(requests, self.context(context)):
                yield response

        return grpc.stream_stream_rpc_method_handler(serve)


@contextlib.asynccontextmanager
async def loopback_relay(
    port: int, *, source: str = "127.0.0.1", replace: tuple[bytes, bytes] | None = None
) -> AsyncIterator[str]:
    """A relay on 127.0.0.1 to the server at `port`, for the block: its address.

    Its connections to the server come from `source` (127.0.0.2: another
    peer). With `replace=(old, new)`, `new` as long as `old`, what clients
    send reaches the server with each `old` made `new`, across reads: bytes
    no client sent, from a peer in the middle.
    """
    if replace is not None:
        assert len(replace[0]) == len(replace[1])

    async def pipe(
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        swap: tuple[bytes, bytes] | None,
    ) -> None:
        kept = b""  # the end of what was read, if `old` may go on from it
        try:
            while data := await reader.read(65536):
                if swap is not None:
                    old, new = swap
                    data = (kept + data).replace(old, new)
                    # The longest end of `data` that begins `old` waits for the next read.
                    begun = next(n for n in range(len(old) - 1, -1, -1) if data.endswith(old[:n]))
                    data, kept = data[: len(data) - begun], data[len(data) - begun :]
                writer.write(data)
                await writer.drain()
            writer.write(kept)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(
            "127.0.0.1", port, local_addr=(source, 0)
        )
        await asyncio.gather(pipe(reader, up_writer, replace), pipe(up_reader, writer, None))

    relay = await asyncio.start_server(connection, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{relay.sockets[0].getsockname()[1]}"
    finally:
        relay.close()


# --- the load run ------------------------------------------------------------


def run_load(tmp_path: Path, *args: str, agents: int) -> dict[str, Any]:
    """Run `bench/load.py` small (one round, three heartbeats each): its JSON report.

    The figures mean nothing at this size; what a caller checks is that every
    plane answered every agent and that the report is complete.
    """
    out = tmp_path / "load.json"
    run = subprocess.run(
        [
            sys.executable,
            "bench/load.py",
            *("--agents", str(agents), "--processes", "2", "--rounds", "1"),
            *("--heartbeats", "3", "--timeout", "120", "--json", str(out), *args),
        ],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report


# --- the failover run --------------------------------------------------------


def run_failover(tmp_path: Path, plane: str, *, agents: int) -> list[dict[str, Any]]:
    """Run `bench/failover.py` small, with B on `plane`: its outcomes, checked clean.

    Each run (A killed, then A stopped gracefully) must move every agent to B
    with nothing lost, duplicated or stripped of its compute; the figures
    mean nothing at this size.
    """
    out = tmp_path / "failover.json"
    done = subprocess.run(
        [
            sys.executable,
            "bench/failover.py",
            *("--agents", str(agents), "--processes", "2", "--initial", "0.2"),
            *("--maximum", "1", "--planes", plane, "--timeout", "120", "--json", str(out)),
        ],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "B's CPU for the storm" in done.stdout
    outcomes: list[dict[str, Any]] = json.loads(out.read_text())
    assert [(o["plane"], o["how"]) for o in outcomes] == [(plane, "kill"), (plane, "graceful")]
    for outcome in outcomes:
        assert outcome["agents"] == agents
        assert (outcome["lost"], outcome["duplicated"], outcome["compute_lost"]) == (0, 0, 0)
        assert outcome["last_adopted_s"] is not None
    return outcomes
