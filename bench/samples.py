"""The messages the benchmarks time, built from domain values.

The registration is what one agent sends when the control plane fails over:
an 8-GPU node (six whole H100 cards and one card split into two MIG slices,
all in one NVLink fabric) with four shards already running, each with its
compute placement. It encodes to about 3.5 kB.
"""

from __future__ import annotations

import attrs

from llmgw_wire.domain import (
    GPU,
    IMEX,
    AdoptedShard,
    Compute,
    FabricAttachment,
    GPUFabric,
    GPUHealth,
    Host,
    LocalWeights,
    MIGDevice,
    Node,
    Registration,
    ShardCommand,
    ShardReport,
    State,
    Storage,
)
from llmgw_wire.sample import sample_command

__all__ = ["command", "registration", "registration_for", "report"]

_NODE_ID = "gpu-node-042"
_ADDR = "10.40.9.42"
_H100_MB = 81559
_CLUSTER = "6c1d2e4f-93a8-4b7e-a0d5-2f9e8b1c7a33"
_DRIVER = "570.86.15"


def _fabric() -> GPUFabric:
    return GPUFabric(
        state="Completed", status="Success", cluster_uuid=_CLUSTER, clique_id="7", bandwidth="Full"
    )


def _nic_path(gpu: int, nic: int) -> str:
    if nic == gpu // 2:
        return "PIX"
    return "NODE" if (nic < 2) == (gpu < 4) else "SYS"


def _card(index: int) -> GPU:
    return GPU(
        index=index,
        uuid=f"GPU-3f2a{index:02d}c4-8b1e-4d7a-9c2f-0e5b6a7d8c{index:02d}",
        name="NVIDIA H100 80GB HBM3",
        memory_total_mb=_H100_MB,
        memory_used_mb=[79_872, 79_872, 79_872, 79_872, 71_680, 71_680][index],
        compute_capability="9.0",
        numa_node=0 if index < 4 else 1,
        pci_bus_id=f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        driver_version=_DRIVER,
        utilization_percent=[92, 88, 95, 90, 71, 69][index],
        cuda_version="12.8",
        nvlink_peers=tuple(peer for peer in range(7) if peer != index),
        nic_paths={f"mlx5_{nic}": _nic_path(index, nic) for nic in range(4)},
        fabric=_fabric(),
        health=GPUHealth(ecc_errors=0, temperature_c=[61, 63, 64, 60, 55, 54][index]),
    )


def _mig_slice(device: int, profile: str, memory_mb: int) -> GPU:
    return GPU(
        index=6,
        uuid=f"MIG-9a7b5c3d-1e2f-4a6b-8c0d-2e4f6a8b0c{device:02d}",
        name=f"NVIDIA H100 80GB HBM3 MIG {profile}",
        memory_total_mb=memory_mb,
        memory_used_mb=memory_mb - 512,
        compute_capability="9.0",
        numa_node=1,
        pci_bus_id="00000000:78:00.0",
        driver_version=_DRIVER,
        utilization_percent=40,
        cuda_version="12.8",
        nic_paths={"mlx5_3": "PIX"},
        fabric=_fabric(),
        health=GPUHealth(temperature_c=48, problems=("retired pages pending",) if device else ()),
        mig=MIGDevice(
            parent_index=6,
            parent_uuid="GPU-3f2a06c4-8b1e-4d7a-9c2f-0e5b6a7d8c06",
            parent_memory_total_mb=_H100_MB,
            device=device,
            profile=profile,
            gpu_instance=[1, 5][device],
            compute_instance=0,
        ),
    )


def _shard(
    replica: str, rank: int, gpus: tuple[int, ...], port: int, model: str, profile: str
) -> AdoptedShard:
    return AdoptedShard(
        node_id=_NODE_ID,
        replica_id=replica,
        shard_id=f"{replica}-s{rank}",
        rank=rank,
        gpu_indices=gpus,
        hcas=("mlx5_0", "mlx5_1") if gpus[0] < 4 else ("mlx5_2",),
        http_port=port,
        state=State.READY,
        model=model,
        profile=profile,
        pool="chat",
        fabric="ib-dc1-a",
        profile_fp=f"sha256:{port:08x}",
        compute=Compute(
            backend="cuda",
            devices=tuple(f"cuda:{i}" for i in range(len(gpus))),
            offloaded=80,
            total=80,
        ),
        endpoint=f"http://{_ADDR}:{port}" if rank == 0 else None,
    )


def registration() -> Registration:
    """The 8-GPU node with four running shards."""
    node = Node(
        id=_NODE_ID,
        hostname=f"{_NODE_ID}.dc1.example.net",
        mgmt_addr=_ADDR,
        labels={"zone": "dc1-b", "rack": "r14", "gpu-class": "h100-80g"},
        agent_version="0.14.2",
        features=("mig", "compute-report", "kv-events"),
        engine_versions={"vllm": "0.11.0", "sglang": "0.5.3", "llamacpp": "b6500"},
        engines_probed=True,
        memory_total_mb=2_063_731,
        cpu_count=224,
        host=Host(
            os_id="ubuntu",
            os_version="24.04",
            os_codename="noble",
            arch="x86_64",
            cpu_flags=("avx2", "avx512f", "avx512_bf16", "amx_tile"),
            nvidia_driver=_DRIVER,
        ),
        weights=(
            LocalWeights("/models/meta-llama/Llama-3.1-70B-Instruct", 141_107_412_992, True),
            LocalWeights("/models/Qwen/Qwen2.5-32B-Instruct", 65_535_182_848, True),
            LocalWeights("/models/Qwen/Qwen2.5-7B-Instruct", 15_231_233_024, False),
        ),
        storage=(
            Storage("/models", 2_198_487_236_608, 7_681_491_058_688, True),
            Storage("/var/lib/llmgw", 812_347_318_272, 1_919_850_381_312, False),
        ),
        gpus=(
            *(_card(i) for i in range(6)),
            _mig_slice(0, "3g.40gb", 40192),
            _mig_slice(1, "2g.20gb", 19968),
        ),
        imex=IMEX(state="UP", channels=2048),
        fabrics=(
            FabricAttachment("ib-dc1-a", ("mlx5_0", "mlx5_1"), 400),
            FabricAttachment("ib-dc1-b", ("mlx5_2", "mlx5_3"), 400),
        ),
    )
    return Registration(
        node=node,
        shards=(
            _shard("llama70b-r3", 0, (0, 1, 2, 3), 8000, "meta-llama/Llama-3.1-70B", "vllm-70b"),
            _shard("qwen32b-r1", 0, (4, 5), 8010, "Qwen/Qwen2.5-32B-Instruct", "vllm-32b-tp2"),
            _shard("qwen7b-r2", 0, (6,), 8020, "Qwen/Qwen2.5-7B-Instruct", "sglang-7b-mig"),
            _shard("qwen7b-r3", 0, (6,), 8021, "Qwen/Qwen2.5-7B-Instruct", "sglang-7b-mig"),
        ),
    )  # fmt: skip


def registration_for(number: int) -> Registration:
    """The registration as agent `number` of a fleet sends it: same shape, its own names."""
    reg = registration()
    node_id = f"gpu-node-{number:05d}"
    node = attrs.evolve(reg.node, id=node_id, hostname=f"{node_id}.dc1.example.net")
    shards = tuple(attrs.evolve(shard, node_id=node_id) for shard in reg.shards)
    return Registration(node=node, shards=shards)


def command() -> ShardCommand:
    """A command to start one shard: the library's sample command."""
    return sample_command()


def report() -> ShardReport:
    """A shard reporting that it is ready, with its compute placement."""
    return ShardReport(
        replica_id="llama70b-r3",
        shard_id="llama70b-r3-s0",
        state=State.READY,
        detail="engine healthy; 80/80 layers on GPU",
        compute=Compute(
            backend="cuda", devices=("cuda:0", "cuda:1", "cuda:2", "cuda:3"), offloaded=80, total=80
        ),
    )
