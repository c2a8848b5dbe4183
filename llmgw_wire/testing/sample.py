"""A realistic sample node, for the demo, the benchmarks and first experiments.

An 8-GPU H100 node: cards 0-6 whole and in one NVLink fabric, card 7 split
into MIG slices; IMEX up; two InfiniBand fabrics; two shards already running
(one of which has reported its compute placement). Everything here is
deterministic, so the sample encodes to the same bytes every time.
"""

from __future__ import annotations

import datetime as dt
import itertools

import attrs

from llmgw_wire.domain import (
    GPU,
    IMEX,
    Adapter,
    AdoptedShard,
    Compute,
    FabricAttachment,
    GPUFabric,
    GPUHealth,
    Host,
    Inventory,
    LocalWeights,
    MIGDevice,
    Node,
    Profile,
    Registration,
    ShardCommand,
    ShardSpec,
    State,
    Storage,
)

__all__ = [
    "sample_command",
    "sample_inventory",
    "sample_large_registration",
    "sample_node",
    "sample_registration",
]

NODE_ID = "gpu-node-017"
_H100_MB = 81559
_CLUSTER = "6c1d2e4f-93a8-4b7e-a0d5-2f9e8b1c7a33"


def _card(index: int) -> GPU:
    return GPU(
        index=index,
        uuid=f"GPU-3f2a{index:02d}c4-8b1e-4d7a-9c2f-0e5b6a7d8c{index:02d}",
        name="NVIDIA H100 80GB HBM3",
        memory_total_mb=_H100_MB,
        memory_used_mb=1024 * index,
        compute_capability="9.0",
        numa_node=0 if index < 4 else 1,
        pci_bus_id=f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        driver_version="570.86.15",
        utilization_percent=[92, 88, 95, 90, 0, 0, 3, 0][index],
        cuda_version="12.8",
        nvlink_peers=tuple(peer for peer in range(7) if peer != index),
        nic_paths={f"mlx5_{index // 2}": "PIX", f"mlx5_{(index // 2 + 2) % 4}": "SYS"},
        fabric=GPUFabric(
            state="Completed",
            status="Success",
            cluster_uuid=_CLUSTER,
            clique_id="7",
            bandwidth="Full",
        ),
        health=GPUHealth(ecc_errors=0, temperature_c=[61, 63, 64, 60, 38, 37, 41, 36][index]),
    )


def _mig_slice(device: int, profile: str, memory_mb: int) -> GPU:
    return GPU(
        index=7,
        uuid=f"MIG-9a7b5c3d-1e2f-4a6b-8c0d-2e4f6a8b0c{device:02d}",
        name=f"NVIDIA H100 80GB HBM3 MIG {profile}",
        memory_total_mb=memory_mb,
        compute_capability="9.0",
        numa_node=1,
        pci_bus_id="00000000:88:00.0",
        driver_version="570.86.15",
        cuda_version="12.8",
        health=GPUHealth(temperature_c=35, problems=("retired pages pending",) if device else ()),
        mig=MIGDevice(
            parent_index=7,
            parent_uuid="GPU-3f2a07c4-8b1e-4d7a-9c2f-0e5b6a7d8c07",
            parent_memory_total_mb=_H100_MB,
            device=device,
            profile=profile,
            gpu_instance=[1, 5, 13][device],
            compute_instance=0,
        ),
    )


def sample_node() -> Node:
    """The sample node, as the control plane knows it once registered."""
    return Node(
        id=NODE_ID,
        hostname="gpu-node-017.dc1.example.net",
        mgmt_addr="10.40.7.17",
        labels={"zone": "dc1-b", "rack": "r12", "gpu-class": "h100-80g"},
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
            nvidia_driver="570.86.15",
        ),
        weights=(
            LocalWeights("/models/meta-llama/Llama-3.1-70B-Instruct", 141_107_412_992, True),
            LocalWeights("/models/Qwen/Qwen2.5-7B-Instruct", 15_231_233_024, False),
        ),
        storage=(
            Storage("/models", 2_198_487_236_608, 7_681_491_058_688, True),
            Storage("/var/lib/llmgw", 812_347_318_272, 1_919_850_381_312, False),
        ),
        gpus=(
            *(_card(i) for i in range(7)),
            _mig_slice(0, "3g.40gb", 40192),
            _mig_slice(1, "2g.20gb", 19968),
            _mig_slice(2, "1g.10gb", 9856),
        ),
        imex=IMEX(state="UP", channels=2048),
        fabrics=(
            FabricAttachment("ib-dc1-a", ("mlx5_0", "mlx5_1"), 400),
            FabricAttachment("ib-dc1-b", ("mlx5_2", "mlx5_3"), 400),
        ),
    )


def sample_inventory() -> Inventory:
    """What the sample node's agent discovers on its host: its cards, memory, weights, ..."""
    node = sample_node()
    return Inventory(
        memory_total_mb=node.memory_total_mb,
        host=node.host,
        weights=node.weights,
        storage=node.storage,
        gpus=node.gpus,
        imex=node.imex,
    )


def sample_registration() -> Registration:
    """The sample node with the two shards its agent already runs."""
    return Registration(
        node=sample_node(),
        shards=(
            AdoptedShard(
                node_id=NODE_ID,
                replica_id="llama70b-r3",
                shard_id="llama70b-r3-s0",
                rank=0,
                gpu_indices=(0, 1, 2, 3),
                hcas=("mlx5_0", "mlx5_1"),
                http_port=8000,
                state=State.READY,
                model="meta-llama/Llama-3.1-70B-Instruct",
                profile="vllm-70b-tp4",
                pool="chat",
                fabric="ib-dc1-a",
                profile_fp="sha256:4be1c0de",
                compute=Compute(
                    backend="cuda",
                    devices=("cuda:0", "cuda:1", "cuda:2", "cuda:3"),
                    offloaded=80,
                    total=80,
                ),
                endpoint="http://10.40.7.17:8000",
            ),
            AdoptedShard(
                node_id=NODE_ID,
                replica_id="qwen7b-r1",
                shard_id="qwen7b-r1-s0",
                rank=0,
                gpu_indices=(7,),
                http_port=8010,
                state=State.LOADING,
                model="Qwen/Qwen2.5-7B-Instruct",
                profile="sglang-7b-mig",
                pool="batch",
                profile_fp="sha256:9d0f77aa",
            ),
        ),
    )


def sample_command() -> ShardCommand:
    """A command to start one more shard on the sample node (GPUs 4-6, with an API key)."""
    spec = ShardSpec(
        replica_id="mistral-r8",
        shard_id="mistral-r8-s0",
        rank=0,
        nnodes=1,
        leader_addr="10.40.7.17",
        leader_port=29500,
        gpu_indices=(4, 5, 6),
        hcas=("mlx5_2",),
        mgmt_interface="eth0",
        http_port=8020,
        pool="chat",
        fabric="ib-dc1-b",
        profile_fp="sha256:c0ffee42",
        api_key="sk-llmgw-demo-0000",
        threads=0,
        profile=Profile(
            name="vllm-mistral-tp1",
            engine="vllm",
            gpu_class="h100-80g",
            tp=1,
            pp=1,
            gpus_per_node=3,
            nodes=1,
            args=("--max-model-len", "32768", "--enable-prefix-caching"),
            env={"VLLM_USE_V1": "1"},
            model_path="/models/mistralai/Mistral-Small-24B-Instruct",
            served_model_name="mistral-small",
            adapters=(Adapter("support-tone", "/models/lora/support-tone"),),
            kv_events=True,
        ),
    )
    return ShardCommand(spec, startup_timeout=dt.timedelta(minutes=10))


def sample_large_registration(gpus: int) -> Registration:
    """The sample registration with `gpus` GPUs of full data: for sizing limits.

    The sample node's ten GPUs (whole cards with NVLink peers, NIC paths,
    fabric and health; MIG slices with their parent and problems) repeated
    with distinct UUIDs: about 224 bytes and 6.8 elements of repeated fields
    and maps per GPU on the wire (2,048 GPUs: 459 kB, 13,972 elements).
    """
    sample = sample_registration()
    cards = (
        attrs.evolve(gpu, uuid=f"{gpu.uuid[:-6]}{number:06d}")
        for number, gpu in zip(range(gpus), itertools.cycle(sample.node.gpus))
    )
    return attrs.evolve(sample, node=attrs.evolve(sample.node, gpus=tuple(cards)))
