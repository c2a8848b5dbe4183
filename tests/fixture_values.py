"""The values the frozen wire fixtures are encoded from.

One GB200 NVL72 compute tray (four cards, one of them split into MIG slices),
its agent's running shards and the commands of the control plane. Every field
of every message is set to a value other than its default (repeated fields and
maps with two or more entries, optional sub-messages present), so that a
fixture exercises the whole wire form of its message; `tests/codec/test_fixtures.py`
checks it.

The values are written out here rather than taken from `llmgw_wire.testing.sample`:
the sample may change for the demo, and these must not. Once a schema version
is released its fixtures are frozen (`tests/fixtures/v<version>/`), and each
of them must still decode to these values, minus the fields that version did
not have: change a value only for a field added since the last release.
"""

from __future__ import annotations

import datetime as dt

import attrs

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

__all__ = ["ENCODED_FROM", "EXPECTED", "UNSET_BY_DESIGN"]

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
ENCODED_FROM: dict[str, object] = {
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
