"""The mapping written by hand over the betterproto2 classes, as a service would write it.

Plain functions, one per message, doing what the library's converter does:
the same renames, presence rules (`is None`, never truthiness), state and
endpoint rules, and the same range checks when encoding. Failures raise
`ValueError` naming the field. This is the yardstick for the converter's own
cost (issue 3: within 1.25x of it).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from llmgw_wire import v1
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
    Storage,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "command_from_wire",
    "command_to_wire",
    "registration_from_wire",
    "registration_to_wire",
    "report_from_wire",
    "report_to_wire",
]

_STATES = {
    v1.ShardStatusState.PENDING: State.PENDING,
    v1.ShardStatusState.STARTING: State.STARTING,
    v1.ShardStatusState.LOADING: State.LOADING,
    v1.ShardStatusState.READY: State.READY,
    v1.ShardStatusState.DRAINING: State.DRAINING,
    v1.ShardStatusState.STOPPED: State.STOPPED,
    v1.ShardStatusState.FAILED: State.FAILED,
}
_WIRE_STATES = {state: number for number, state in _STATES.items()}
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_MS = dt.timedelta(milliseconds=1)


def _bad(field: str, value: object) -> ValueError:
    return ValueError(f"cannot encode {field}={value!r}")


def _str(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise _bad(field, value)
    return value


def _int32(field: str, value: object) -> int:
    if type(value) is not int or not _INT32[0] <= value <= _INT32[1]:
        raise _bad(field, value)
    return value


def _int64(field: str, value: object) -> int:
    if type(value) is not int or not _INT64[0] <= value <= _INT64[1]:
        raise _bad(field, value)
    return value


def _bool(field: str, value: object) -> bool:
    if type(value) is not bool:
        raise _bad(field, value)
    return value


def _strs(field: str, values: Sequence[str]) -> list[str]:
    return [_str(field, v) for v in values]


def _int32s(field: str, values: Sequence[int]) -> list[int]:
    return [_int32(field, v) for v in values]


def _str_map(field: str, values: Mapping[str, str]) -> dict[str, str]:
    return {_str(field, k): _str(field, v) for k, v in values.items()}


# --- wire to domain ----------------------------------------------------------------


def _compute(m: v1.Compute) -> Compute:
    return Compute(
        backend=m.backend,
        devices=tuple(m.devices),
        offloaded=m.layers_offloaded,
        total=m.layers_total,
    )


def _mig(m: v1.MigDevice) -> MIGDevice:
    return MIGDevice(
        parent_index=m.parent_index,
        parent_uuid=m.parent_uuid,
        parent_memory_total_mb=m.parent_memory_total_mb,
        device=m.device,
        profile=m.profile,
        gpu_instance=m.gpu_instance,
        compute_instance=m.compute_instance,
    )


def _gpu(m: v1.Gpu) -> GPU:
    fabric = None
    if m.fabric_state:
        fabric = GPUFabric(
            state=m.fabric_state,
            status=m.fabric_status,
            cluster_uuid=m.cluster_uuid,
            clique_id=m.clique_id,
            bandwidth=m.fabric_bandwidth,
        )
    return GPU(
        index=m.index,
        uuid=m.uuid,
        name=m.name,
        memory_total_mb=m.memory_total_mb,
        memory_used_mb=m.memory_used_mb,
        compute_capability=m.compute_capability,
        numa_node=m.numa_node,
        pci_bus_id=m.pci_bus_id,
        driver_version=m.driver_version,
        utilization_percent=m.utilization_percent,
        cuda_version=m.cuda_version,
        nvlink_peers=tuple(m.nvlink_peers),
        nic_paths=dict(m.nic_paths),
        fabric=fabric,
        health=GPUHealth(
            ecc_errors=m.ecc_errors, temperature_c=m.temperature_c, problems=tuple(m.problems)
        ),
        mig=None if m.mig is None else _mig(m.mig),
    )


def _endpoint(m: v1.RunningShard) -> str | None:
    if m.rank == 0 and m.leader_addr:
        return f"http://{m.leader_addr}:{m.http_port}"
    return None


def _shard(m: v1.RunningShard, node_id: str) -> AdoptedShard:
    return AdoptedShard(
        node_id=node_id,
        replica_id=m.replica_id,
        shard_id=m.shard_id,
        rank=m.rank,
        gpu_indices=tuple(m.gpu_indices),
        hcas=tuple(m.hcas),
        http_port=m.http_port,
        state=_STATES.get(m.state, State.FAILED),
        model=m.model,
        profile=m.profile,
        pool=m.pool,
        fabric=m.fabric,
        profile_fp=m.profile_fp,
        compute=None if m.compute is None else _compute(m.compute),
        endpoint=_endpoint(m),
    )


def _host(m: v1.Host | None) -> Host:
    if m is None:
        return Host()
    return Host(
        os_id=m.os_id,
        os_version=m.os_version,
        os_codename=m.os_codename,
        arch=m.arch,
        cpu_flags=tuple(m.cpu_flags),
        nvidia_driver=m.nvidia_driver,
    )


def registration_from_wire(m: v1.Register) -> Registration:
    """A `Register` message as a registration."""
    node = Node(
        id=m.node_id,
        hostname=m.hostname,
        mgmt_addr=m.mgmt_addr,
        labels=dict(m.labels),
        state=NodeState.READY,
        agent_version=m.agent_version,
        features=tuple(m.features),
        engine_versions=dict(m.engine_versions),
        engines_probed=m.engines_probed,
        memory_total_mb=m.memory_total_mb,
        cpu_count=m.cpu_count,
        host=_host(m.host),
        weights=tuple(
            LocalWeights(path=w.path, size_bytes=w.size_bytes, shared=w.shared) for w in m.weights
        ),
        storage=tuple(
            Storage(
                path=s.path, free_bytes=s.free_bytes, total_bytes=s.total_bytes, shared=s.shared
            )
            for s in m.storage
        ),
        gpus=tuple(_gpu(g) for g in m.gpus),
        imex=IMEX() if m.imex is None else IMEX(state=m.imex.state, channels=m.imex.channels),
        fabrics=tuple(
            FabricAttachment(fabric=f.fabric, hcas=tuple(f.hcas), rate_gbps=f.rate_gbps)
            for f in m.fabrics
        ),
    )
    return Registration(node=node, shards=tuple(_shard(s, m.node_id) for s in m.running_shards))


def _profile(m: v1.EngineProfile | None) -> Profile:
    if m is None:
        return Profile()
    return Profile(
        name=m.name,
        engine=m.engine,
        gpu_class=m.gpu_class,
        tp=m.tp,
        pp=m.pp,
        gpus_per_node=m.gpus_per_node,
        nodes=m.nodes,
        args=tuple(m.args),
        env=dict(m.env),
        model_path=m.model_path,
        served_model_name=m.served_model_name,
        adapters=tuple(Adapter(name=a.name, path=a.source) for a in m.adapters),
        kv_events=m.kv_events,
    )


def command_from_wire(m: v1.StartShard) -> ShardCommand:
    """A `StartShard` message as a command."""
    spec = ShardSpec(
        replica_id=m.replica_id,
        shard_id=m.shard_id,
        rank=m.rank,
        nnodes=m.nnodes,
        leader_addr=m.leader_addr,
        leader_port=m.leader_port,
        gpu_indices=tuple(m.gpu_indices),
        hcas=tuple(m.hcas),
        mgmt_interface=m.mgmt_interface,
        http_port=m.http_port,
        pool=m.pool,
        fabric=m.fabric,
        profile_fp=m.profile_fp,
        api_key=m.api_key,
        threads=m.cpu_threads,
        profile=_profile(m.profile),
        compute=None,
    )
    try:
        timeout = dt.timedelta(milliseconds=m.startup_timeout_ms)
    except OverflowError:
        raise ValueError("startup_timeout_ms does not fit a timedelta") from None
    return ShardCommand(spec=spec, startup_timeout=timeout)


def report_from_wire(m: v1.ShardStatus) -> ShardReport:
    """A `ShardStatus` message as a shard report."""
    return ShardReport(
        replica_id=m.replica_id,
        shard_id=m.shard_id,
        state=_STATES.get(m.state, State.FAILED),
        detail=m.detail,
        compute=None if m.compute is None else _compute(m.compute),
    )


# --- domain to wire ------------------------------------------------------------------


def _compute_to_wire(c: Compute) -> v1.Compute:
    return v1.Compute(
        backend=_str("backend", c.backend),
        devices=_strs("devices", c.devices),
        layers_offloaded=_int32("offloaded", c.offloaded),
        layers_total=_int32("total", c.total),
    )


def _mig_to_wire(d: MIGDevice) -> v1.MigDevice:
    return v1.MigDevice(
        parent_index=_int32("parent_index", d.parent_index),
        parent_uuid=_str("parent_uuid", d.parent_uuid),
        parent_memory_total_mb=_int32("parent_memory_total_mb", d.parent_memory_total_mb),
        device=_int32("device", d.device),
        profile=_str("profile", d.profile),
        gpu_instance=_int32("gpu_instance", d.gpu_instance),
        compute_instance=_int32("compute_instance", d.compute_instance),
    )


def _gpu_to_wire(g: GPU) -> v1.Gpu:
    f = g.fabric
    if f is not None and not f.state:
        raise _bad("fabric.state", f.state)
    return v1.Gpu(
        index=_int32("index", g.index),
        uuid=_str("uuid", g.uuid),
        name=_str("name", g.name),
        memory_total_mb=_int32("memory_total_mb", g.memory_total_mb),
        memory_used_mb=_int32("memory_used_mb", g.memory_used_mb),
        compute_capability=_str("compute_capability", g.compute_capability),
        numa_node=_int32("numa_node", g.numa_node),
        pci_bus_id=_str("pci_bus_id", g.pci_bus_id),
        driver_version=_str("driver_version", g.driver_version),
        utilization_percent=_int32("utilization_percent", g.utilization_percent),
        cuda_version=_str("cuda_version", g.cuda_version),
        nvlink_peers=_int32s("nvlink_peers", g.nvlink_peers),
        nic_paths=_str_map("nic_paths", g.nic_paths),
        fabric_state="" if f is None else _str("fabric.state", f.state),
        fabric_status="" if f is None else _str("fabric.status", f.status),
        cluster_uuid="" if f is None else _str("fabric.cluster_uuid", f.cluster_uuid),
        clique_id="" if f is None else _str("fabric.clique_id", f.clique_id),
        fabric_bandwidth="" if f is None else _str("fabric.bandwidth", f.bandwidth),
        ecc_errors=_int32("health.ecc_errors", g.health.ecc_errors),
        temperature_c=_int32("health.temperature_c", g.health.temperature_c),
        problems=_strs("health.problems", g.health.problems),
        mig=None if g.mig is None else _mig_to_wire(g.mig),
    )


def _leader_addr(s: AdoptedShard) -> str:
    endpoint = s.endpoint
    if endpoint is None:
        return ""
    if not isinstance(endpoint, str) or s.rank != 0 or not endpoint.startswith("http://"):
        raise _bad("endpoint", endpoint)
    addr = endpoint[7:].rpartition(":")[0]
    if not addr or endpoint != f"http://{addr}:{s.http_port}":
        raise _bad("endpoint", endpoint)
    return addr


def _shard_to_wire(s: AdoptedShard) -> v1.RunningShard:
    state = _WIRE_STATES.get(s.state)
    if state is None:
        raise _bad("state", s.state)
    return v1.RunningShard(
        replica_id=_str("replica_id", s.replica_id),
        shard_id=_str("shard_id", s.shard_id),
        rank=_int32("rank", s.rank),
        gpu_indices=_int32s("gpu_indices", s.gpu_indices),
        hcas=_strs("hcas", s.hcas),
        http_port=_int32("http_port", s.http_port),
        state=state,
        model=_str("model", s.model),
        profile=_str("profile", s.profile),
        pool=_str("pool", s.pool),
        fabric=_str("fabric", s.fabric),
        profile_fp=_str("profile_fp", s.profile_fp),
        compute=None if s.compute is None else _compute_to_wire(s.compute),
        leader_addr=_leader_addr(s),
    )


def registration_to_wire(r: Registration) -> v1.Register:
    """A registration as a `Register` message."""
    n = r.node
    h = n.host
    return v1.Register(
        node_id=_str("id", n.id),
        hostname=_str("hostname", n.hostname),
        mgmt_addr=_str("mgmt_addr", n.mgmt_addr),
        labels=_str_map("labels", n.labels),
        agent_version=_str("agent_version", n.agent_version),
        features=_strs("features", n.features),
        engine_versions=_str_map("engine_versions", n.engine_versions),
        engines_probed=_bool("engines_probed", n.engines_probed),
        memory_total_mb=_int64("memory_total_mb", n.memory_total_mb),
        cpu_count=_int32("cpu_count", n.cpu_count),
        host=v1.Host(
            os_id=_str("host.os_id", h.os_id),
            os_version=_str("host.os_version", h.os_version),
            os_codename=_str("host.os_codename", h.os_codename),
            arch=_str("host.arch", h.arch),
            cpu_flags=_strs("host.cpu_flags", h.cpu_flags),
            nvidia_driver=_str("host.nvidia_driver", h.nvidia_driver),
        ),
        weights=[
            v1.LocalWeights(
                path=_str("weights.path", w.path),
                size_bytes=_int64("weights.size_bytes", w.size_bytes),
                shared=_bool("weights.shared", w.shared),
            )
            for w in n.weights
        ],
        storage=[
            v1.Storage(
                path=_str("storage.path", s.path),
                free_bytes=_int64("storage.free_bytes", s.free_bytes),
                total_bytes=_int64("storage.total_bytes", s.total_bytes),
                shared=_bool("storage.shared", s.shared),
            )
            for s in n.storage
        ],
        gpus=[_gpu_to_wire(g) for g in n.gpus],
        imex=v1.Imex(
            state=_str("imex.state", n.imex.state),
            channels=_int32("imex.channels", n.imex.channels),
        ),
        fabrics=[
            v1.FabricAttachment(
                fabric=_str("fabrics.fabric", f.fabric),
                hcas=_strs("fabrics.hcas", f.hcas),
                rate_gbps=_int32("fabrics.rate_gbps", f.rate_gbps),
            )
            for f in n.fabrics
        ],
        running_shards=[_shard_to_wire(s) for s in r.shards],
    )


def _profile_to_wire(p: Profile) -> v1.EngineProfile:
    return v1.EngineProfile(
        name=_str("profile.name", p.name),
        engine=_str("profile.engine", p.engine),
        gpu_class=_str("profile.gpu_class", p.gpu_class),
        tp=_int32("profile.tp", p.tp),
        pp=_int32("profile.pp", p.pp),
        gpus_per_node=_int32("profile.gpus_per_node", p.gpus_per_node),
        nodes=_int32("profile.nodes", p.nodes),
        args=_strs("profile.args", p.args),
        env=_str_map("profile.env", p.env),
        model_path=_str("profile.model_path", p.model_path),
        served_model_name=_str("profile.served_model_name", p.served_model_name),
        adapters=[
            v1.LoraAdapter(name=_str("adapter.name", a.name), source=_str("adapter.path", a.path))
            for a in p.adapters
        ],
        kv_events=_bool("profile.kv_events", p.kv_events),
    )


def _millis(field: str, value: object) -> int:
    if type(value) is not dt.timedelta:
        raise _bad(field, value)
    ms, rest = divmod(value, _MS)
    if rest:
        raise _bad(field, value)
    return _int64(field, ms)


def command_to_wire(c: ShardCommand) -> v1.StartShard:
    """A command as a `StartShard` message."""
    spec = c.spec
    # The command and its spec each hold these; the wire has them once.
    for name in ("replica_id", "shard_id", "pool", "fabric", "profile_fp"):
        if getattr(spec, name) != _str(name, getattr(c, name)):
            raise _bad(f"spec.{name}", getattr(spec, name))
    if spec.compute is not None:
        raise _bad("spec.compute", spec.compute)
    return v1.StartShard(
        replica_id=c.replica_id,
        shard_id=c.shard_id,
        rank=_int32("spec.rank", spec.rank),
        nnodes=_int32("spec.nnodes", spec.nnodes),
        leader_addr=_str("spec.leader_addr", spec.leader_addr),
        leader_port=_int32("spec.leader_port", spec.leader_port),
        gpu_indices=_int32s("spec.gpu_indices", spec.gpu_indices),
        hcas=_strs("spec.hcas", spec.hcas),
        mgmt_interface=_str("spec.mgmt_interface", spec.mgmt_interface),
        http_port=_int32("spec.http_port", spec.http_port),
        profile=_profile_to_wire(spec.profile),
        startup_timeout_ms=_millis("startup_timeout", c.startup_timeout),
        pool=c.pool,
        fabric=c.fabric,
        profile_fp=c.profile_fp,
        api_key=_str("spec.api_key", spec.api_key),
        cpu_threads=_int32("spec.threads", spec.threads),
    )


def report_to_wire(r: ShardReport) -> v1.ShardStatus:
    """A shard report as a `ShardStatus` message."""
    state = _WIRE_STATES.get(r.state)
    if state is None:
        raise _bad("state", r.state)
    return v1.ShardStatus(
        replica_id=_str("replica_id", r.replica_id),
        shard_id=_str("shard_id", r.shard_id),
        state=state,
        detail=_str("detail", r.detail),
        compute=None if r.compute is None else _compute_to_wire(r.compute),
    )
