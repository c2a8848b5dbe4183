"""What an agent discovers on its host (the reference's `discovery` package)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import field, frozen

from llmgw_wire.domain._values import seq, str_map

__all__ = [
    "GPU",
    "IMEX",
    "GPUFabric",
    "GPUHealth",
    "Host",
    "Inventory",
    "LocalWeights",
    "MIGDevice",
    "Storage",
]


@frozen
class Host:
    """The operating system and driver stack of a node."""

    os_id: str = ""
    os_version: str = ""
    os_codename: str = ""
    arch: str = ""
    cpu_flags: Sequence[str] = seq()
    nvidia_driver: str = ""


@frozen
class GPUFabric:
    """A GPU's NVLink fabric membership, as the driver reports it.

    On the wire an empty `state` means "no fabric", so a `GPUFabric` must have
    a non-empty `state` to be encoded.
    """

    state: str = ""
    status: str = ""
    cluster_uuid: str = ""
    clique_id: str = ""
    bandwidth: str = ""


@frozen
class GPUHealth:
    """A GPU's health readings."""

    ecc_errors: int = 0
    temperature_c: int = 0
    problems: Sequence[str] = seq()


@frozen
class MIGDevice:
    """Where a MIG slice lives on its parent card."""

    parent_index: int = 0
    parent_uuid: str = ""
    parent_memory_total_mb: int = 0
    device: int = 0
    profile: str = ""
    gpu_instance: int = 0
    compute_instance: int = 0


@frozen
class GPU:
    """One GPU: a whole card (`mig` is None) or a MIG slice of one.

    Memory is in MiB. `fabric` is None when the card is in no NVLink fabric.
    """

    index: int = 0
    uuid: str = ""
    name: str = ""
    memory_total_mb: int = 0
    memory_used_mb: int = 0
    compute_capability: str = ""
    numa_node: int = 0
    pci_bus_id: str = ""
    driver_version: str = ""
    utilization_percent: int = 0
    cuda_version: str = ""
    nvlink_peers: Sequence[int] = seq()
    nic_paths: Mapping[str, str] = str_map()
    fabric: GPUFabric | None = None
    health: GPUHealth = field(factory=GPUHealth)
    mig: MIGDevice | None = None


@frozen
class IMEX:
    """The node's NVIDIA IMEX daemon."""

    state: str = ""
    channels: int = 0


@frozen
class LocalWeights:
    """Model weights already on the node's disks (size in bytes)."""

    path: str = ""
    size_bytes: int = 0
    shared: bool = False


@frozen
class Storage:
    """A filesystem the agent may place weights on (sizes in bytes)."""

    path: str = ""
    free_bytes: int = 0
    total_bytes: int = 0
    shared: bool = False


@frozen
class Inventory:
    """Everything an agent discovered on its host (host memory in MiB)."""

    memory_total_mb: int = 0
    host: Host = field(factory=Host)
    weights: Sequence[LocalWeights] = seq()
    storage: Sequence[Storage] = seq()
    gpus: Sequence[GPU] = seq()
    imex: IMEX = field(factory=IMEX)
