"""The mapping written by hand over Google's protobuf classes: the best one can hand-roll.

The same mapping as the library (the same renames, presence rules, state and
endpoint rules, and the same range checks when encoding), over the same upb
message classes (`llmgw_wire.codec._schema`, which is what generated `_pb2`
modules give at run time), written as someone tuning it by hand would.

Decoding builds each domain value as attrs' `__init__` leaves it, without its
cost: `object.__new__`, then each slot set through its descriptor; tuples
and dicts built once, the dicts owned by their `FrozenMap`; no check beyond
upb's own. Encoding inlines its checks and fills sub-messages in place
(`parent.field.add()`, no copies), and leaves an int's range to upb, which
refuses one that does not fit its field (its type, which upb is lax about,
is checked here). Failures raise `ValueError`.

A test holds that it builds the values `llmgw_wire.decode` builds.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.domain import (
    GPU,
    IMEX,
    Adapter,
    AdoptedShard,
    Compute,
    FabricAttachment,
    FrozenMap,
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

__all__ = [
    "command_from_wire",
    "command_to_wire",
    "registration_from_wire",
    "registration_to_wire",
    "report_from_wire",
    "report_to_wire",
]

Register = CLASSES["llmgw.v1.Register"]
StartShard = CLASSES["llmgw.v1.StartShard"]
ShardStatus = CLASSES["llmgw.v1.ShardStatus"]

_STATE_FROM_WIRE = {
    1: State.PENDING,
    2: State.STARTING,
    3: State.LOADING,
    4: State.READY,
    5: State.DRAINING,
    6: State.STOPPED,
    7: State.FAILED,
}
_STATE_TO_WIRE = {state: number for number, state in _STATE_FROM_WIRE.items()}
_FAILED = State.FAILED
_READY = NodeState.READY
_NO_HOST = Host()
_NO_IMEX = IMEX()
_NO_PROFILE = Profile()
_MS = dt.timedelta(milliseconds=1)


def _bad(field: str, value: object) -> ValueError:
    return ValueError(f"cannot encode {field}={value!r}")


# --- wire to domain ----------------------------------------------------------------
#
# Each value is built as attrs' own `__init__` would leave it, without its
# cost: a bare object (`object.__new__`), each slot set through its
# descriptor (no lookup of `object.__setattr__` by name), each tuple and
# dict built once and handed over (attrs' converters would copy them again),
# the dicts owned by their `FrozenMap`. upb has checked everything the wire
# can get wrong; nothing else is checked.

_new = object.__new__
_owning = FrozenMap._owning
_NO_MAP = FrozenMap()


def _slot(cls: type, name: str) -> Any:
    """The setter of the slot `name` of the attrs class `cls`: its member descriptor's `__set__`."""
    return vars(cls)[name].__set__


def _str_map(container: Any) -> FrozenMap:
    if not container:
        return _NO_MAP
    items = {}
    for key in container:
        items[key] = container[key]
    return _owning(items)


_compute_backend = _slot(Compute, "backend")
_compute_devices = _slot(Compute, "devices")
_compute_offloaded = _slot(Compute, "offloaded")
_compute_total = _slot(Compute, "total")


def _compute(m: Any) -> Compute:
    o = _new(Compute)
    _compute_backend(o, m.backend)
    _compute_devices(o, tuple(m.devices[:]))
    _compute_offloaded(o, m.layers_offloaded)
    _compute_total(o, m.layers_total)
    return o


_gpu_index = _slot(GPU, "index")
_gpu_uuid = _slot(GPU, "uuid")
_gpu_name = _slot(GPU, "name")
_gpu_memory_total_mb = _slot(GPU, "memory_total_mb")
_gpu_memory_used_mb = _slot(GPU, "memory_used_mb")
_gpu_compute_capability = _slot(GPU, "compute_capability")
_gpu_numa_node = _slot(GPU, "numa_node")
_gpu_pci_bus_id = _slot(GPU, "pci_bus_id")
_gpu_driver_version = _slot(GPU, "driver_version")
_gpu_utilization_percent = _slot(GPU, "utilization_percent")
_gpu_cuda_version = _slot(GPU, "cuda_version")
_gpu_nvlink_peers = _slot(GPU, "nvlink_peers")
_gpu_nic_paths = _slot(GPU, "nic_paths")
_gpu_fabric = _slot(GPU, "fabric")
_gpu_health = _slot(GPU, "health")
_gpu_mig = _slot(GPU, "mig")
_fabric_state = _slot(GPUFabric, "state")
_fabric_status = _slot(GPUFabric, "status")
_fabric_cluster_uuid = _slot(GPUFabric, "cluster_uuid")
_fabric_clique_id = _slot(GPUFabric, "clique_id")
_fabric_bandwidth = _slot(GPUFabric, "bandwidth")
_health_ecc_errors = _slot(GPUHealth, "ecc_errors")
_health_temperature_c = _slot(GPUHealth, "temperature_c")
_health_problems = _slot(GPUHealth, "problems")
_mig_parent_index = _slot(MIGDevice, "parent_index")
_mig_parent_uuid = _slot(MIGDevice, "parent_uuid")
_mig_parent_memory_total_mb = _slot(MIGDevice, "parent_memory_total_mb")
_mig_device = _slot(MIGDevice, "device")
_mig_profile = _slot(MIGDevice, "profile")
_mig_gpu_instance = _slot(MIGDevice, "gpu_instance")
_mig_compute_instance = _slot(MIGDevice, "compute_instance")


def _gpu(m: Any) -> GPU:
    o = _new(GPU)
    _gpu_index(o, m.index)
    _gpu_uuid(o, m.uuid)
    _gpu_name(o, m.name)
    _gpu_memory_total_mb(o, m.memory_total_mb)
    _gpu_memory_used_mb(o, m.memory_used_mb)
    _gpu_compute_capability(o, m.compute_capability)
    _gpu_numa_node(o, m.numa_node)
    _gpu_pci_bus_id(o, m.pci_bus_id)
    _gpu_driver_version(o, m.driver_version)
    _gpu_utilization_percent(o, m.utilization_percent)
    _gpu_cuda_version(o, m.cuda_version)
    _gpu_nvlink_peers(o, tuple(m.nvlink_peers[:]))
    _gpu_nic_paths(o, _str_map(m.nic_paths))
    if state := m.fabric_state:
        fabric = _new(GPUFabric)
        _fabric_state(fabric, state)
        _fabric_status(fabric, m.fabric_status)
        _fabric_cluster_uuid(fabric, m.cluster_uuid)
        _fabric_clique_id(fabric, m.clique_id)
        _fabric_bandwidth(fabric, m.fabric_bandwidth)
        _gpu_fabric(o, fabric)
    else:
        _gpu_fabric(o, None)
    health = _new(GPUHealth)
    _health_ecc_errors(health, m.ecc_errors)
    _health_temperature_c(health, m.temperature_c)
    _health_problems(health, tuple(m.problems[:]))
    _gpu_health(o, health)
    if m.HasField("mig"):
        w = m.mig
        mig = _new(MIGDevice)
        _mig_parent_index(mig, w.parent_index)
        _mig_parent_uuid(mig, w.parent_uuid)
        _mig_parent_memory_total_mb(mig, w.parent_memory_total_mb)
        _mig_device(mig, w.device)
        _mig_profile(mig, w.profile)
        _mig_gpu_instance(mig, w.gpu_instance)
        _mig_compute_instance(mig, w.compute_instance)
        _gpu_mig(o, mig)
    else:
        _gpu_mig(o, None)
    return o


_shard_node_id = _slot(AdoptedShard, "node_id")
_shard_replica_id = _slot(AdoptedShard, "replica_id")
_shard_shard_id = _slot(AdoptedShard, "shard_id")
_shard_rank = _slot(AdoptedShard, "rank")
_shard_gpu_indices = _slot(AdoptedShard, "gpu_indices")
_shard_hcas = _slot(AdoptedShard, "hcas")
_shard_http_port = _slot(AdoptedShard, "http_port")
_shard_state = _slot(AdoptedShard, "state")
_shard_model = _slot(AdoptedShard, "model")
_shard_profile = _slot(AdoptedShard, "profile")
_shard_pool = _slot(AdoptedShard, "pool")
_shard_fabric = _slot(AdoptedShard, "fabric")
_shard_profile_fp = _slot(AdoptedShard, "profile_fp")
_shard_compute = _slot(AdoptedShard, "compute")
_shard_endpoint = _slot(AdoptedShard, "endpoint")


def _shard(m: Any, node_id: str) -> AdoptedShard:
    o = _new(AdoptedShard)
    rank = m.rank
    port = m.http_port
    _shard_node_id(o, node_id)
    _shard_replica_id(o, m.replica_id)
    _shard_shard_id(o, m.shard_id)
    _shard_rank(o, rank)
    _shard_gpu_indices(o, tuple(m.gpu_indices[:]))
    _shard_hcas(o, tuple(m.hcas[:]))
    _shard_http_port(o, port)
    _shard_state(o, _STATE_FROM_WIRE.get(m.state, _FAILED))
    _shard_model(o, m.model)
    _shard_profile(o, m.profile)
    _shard_pool(o, m.pool)
    _shard_fabric(o, m.fabric)
    _shard_profile_fp(o, m.profile_fp)
    _shard_compute(o, _compute(m.compute) if m.HasField("compute") else None)
    addr = m.leader_addr
    _shard_endpoint(o, f"http://{addr}:{port}" if rank == 0 and addr else None)
    return o


_host_os_id = _slot(Host, "os_id")
_host_os_version = _slot(Host, "os_version")
_host_os_codename = _slot(Host, "os_codename")
_host_arch = _slot(Host, "arch")
_host_cpu_flags = _slot(Host, "cpu_flags")
_host_nvidia_driver = _slot(Host, "nvidia_driver")
_imex_state = _slot(IMEX, "state")
_imex_channels = _slot(IMEX, "channels")
_weights_path = _slot(LocalWeights, "path")
_weights_size_bytes = _slot(LocalWeights, "size_bytes")
_weights_shared = _slot(LocalWeights, "shared")
_storage_path = _slot(Storage, "path")
_storage_free_bytes = _slot(Storage, "free_bytes")
_storage_total_bytes = _slot(Storage, "total_bytes")
_storage_shared = _slot(Storage, "shared")
_attachment_fabric = _slot(FabricAttachment, "fabric")
_attachment_hcas = _slot(FabricAttachment, "hcas")
_attachment_rate_gbps = _slot(FabricAttachment, "rate_gbps")
_node_id = _slot(Node, "id")
_node_hostname = _slot(Node, "hostname")
_node_mgmt_addr = _slot(Node, "mgmt_addr")
_node_labels = _slot(Node, "labels")
_node_state = _slot(Node, "state")
_node_agent_version = _slot(Node, "agent_version")
_node_features = _slot(Node, "features")
_node_engine_versions = _slot(Node, "engine_versions")
_node_engines_probed = _slot(Node, "engines_probed")
_node_memory_total_mb = _slot(Node, "memory_total_mb")
_node_cpu_count = _slot(Node, "cpu_count")
_node_host = _slot(Node, "host")
_node_weights = _slot(Node, "weights")
_node_storage = _slot(Node, "storage")
_node_gpus = _slot(Node, "gpus")
_node_imex = _slot(Node, "imex")
_node_fabrics = _slot(Node, "fabrics")
_registration_node = _slot(Registration, "node")
_registration_shards = _slot(Registration, "shards")


def _host(h: Any) -> Host:
    o = _new(Host)
    _host_os_id(o, h.os_id)
    _host_os_version(o, h.os_version)
    _host_os_codename(o, h.os_codename)
    _host_arch(o, h.arch)
    _host_cpu_flags(o, tuple(h.cpu_flags[:]))
    _host_nvidia_driver(o, h.nvidia_driver)
    return o


def _imex(w: Any) -> IMEX:
    o = _new(IMEX)
    _imex_state(o, w.state)
    _imex_channels(o, w.channels)
    return o


def _weights(w: Any) -> LocalWeights:
    o = _new(LocalWeights)
    _weights_path(o, w.path)
    _weights_size_bytes(o, w.size_bytes)
    _weights_shared(o, w.shared)
    return o


def _storage(s: Any) -> Storage:
    o = _new(Storage)
    _storage_path(o, s.path)
    _storage_free_bytes(o, s.free_bytes)
    _storage_total_bytes(o, s.total_bytes)
    _storage_shared(o, s.shared)
    return o


def _attachment(f: Any) -> FabricAttachment:
    o = _new(FabricAttachment)
    _attachment_fabric(o, f.fabric)
    _attachment_hcas(o, tuple(f.hcas[:]))
    _attachment_rate_gbps(o, f.rate_gbps)
    return o


def registration_from_wire(m: Any) -> Registration:
    """A `Register` message as a registration."""
    node_id = m.node_id
    n = _new(Node)
    _node_id(n, node_id)
    _node_hostname(n, m.hostname)
    _node_mgmt_addr(n, m.mgmt_addr)
    _node_labels(n, _str_map(m.labels))
    _node_state(n, _READY)
    _node_agent_version(n, m.agent_version)
    _node_features(n, tuple(m.features[:]))
    _node_engine_versions(n, _str_map(m.engine_versions))
    _node_engines_probed(n, m.engines_probed)
    _node_memory_total_mb(n, m.memory_total_mb)
    _node_cpu_count(n, m.cpu_count)
    _node_host(n, _host(m.host) if m.HasField("host") else _NO_HOST)
    _node_weights(n, tuple(map(_weights, m.weights[:])))
    _node_storage(n, tuple(map(_storage, m.storage[:])))
    _node_gpus(n, tuple(map(_gpu, m.gpus[:])))
    _node_imex(n, _imex(m.imex) if m.HasField("imex") else _NO_IMEX)
    _node_fabrics(n, tuple(map(_attachment, m.fabrics[:])))
    o = _new(Registration)
    _registration_node(o, n)
    _registration_shards(o, tuple([_shard(s, node_id) for s in m.running_shards[:]]))
    return o


_profile_name = _slot(Profile, "name")
_profile_engine = _slot(Profile, "engine")
_profile_gpu_class = _slot(Profile, "gpu_class")
_profile_tp = _slot(Profile, "tp")
_profile_pp = _slot(Profile, "pp")
_profile_gpus_per_node = _slot(Profile, "gpus_per_node")
_profile_nodes = _slot(Profile, "nodes")
_profile_args = _slot(Profile, "args")
_profile_env = _slot(Profile, "env")
_profile_model_path = _slot(Profile, "model_path")
_profile_served_model_name = _slot(Profile, "served_model_name")
_profile_adapters = _slot(Profile, "adapters")
_profile_kv_events = _slot(Profile, "kv_events")
_adapter_name = _slot(Adapter, "name")
_adapter_path = _slot(Adapter, "path")
_spec_replica_id = _slot(ShardSpec, "replica_id")
_spec_shard_id = _slot(ShardSpec, "shard_id")
_spec_rank = _slot(ShardSpec, "rank")
_spec_nnodes = _slot(ShardSpec, "nnodes")
_spec_leader_addr = _slot(ShardSpec, "leader_addr")
_spec_leader_port = _slot(ShardSpec, "leader_port")
_spec_gpu_indices = _slot(ShardSpec, "gpu_indices")
_spec_hcas = _slot(ShardSpec, "hcas")
_spec_mgmt_interface = _slot(ShardSpec, "mgmt_interface")
_spec_http_port = _slot(ShardSpec, "http_port")
_spec_pool = _slot(ShardSpec, "pool")
_spec_fabric = _slot(ShardSpec, "fabric")
_spec_profile_fp = _slot(ShardSpec, "profile_fp")
_spec_api_key = _slot(ShardSpec, "api_key")
_spec_threads = _slot(ShardSpec, "threads")
_spec_profile = _slot(ShardSpec, "profile")
_spec_compute = _slot(ShardSpec, "compute")
_command_spec = _slot(ShardCommand, "spec")
_command_startup_timeout = _slot(ShardCommand, "startup_timeout")


def _adapter(a: Any) -> Adapter:
    o = _new(Adapter)
    _adapter_name(o, a.name)
    _adapter_path(o, a.source)
    return o


def _profile(p: Any) -> Profile:
    o = _new(Profile)
    _profile_name(o, p.name)
    _profile_engine(o, p.engine)
    _profile_gpu_class(o, p.gpu_class)
    _profile_tp(o, p.tp)
    _profile_pp(o, p.pp)
    _profile_gpus_per_node(o, p.gpus_per_node)
    _profile_nodes(o, p.nodes)
    _profile_args(o, tuple(p.args[:]))
    _profile_env(o, _str_map(p.env))
    _profile_model_path(o, p.model_path)
    _profile_served_model_name(o, p.served_model_name)
    _profile_adapters(o, tuple(map(_adapter, p.adapters[:])))
    _profile_kv_events(o, p.kv_events)
    return o


def command_from_wire(m: Any) -> ShardCommand:
    """A `StartShard` message as a command."""
    spec = _new(ShardSpec)
    _spec_replica_id(spec, m.replica_id)
    _spec_shard_id(spec, m.shard_id)
    _spec_rank(spec, m.rank)
    _spec_nnodes(spec, m.nnodes)
    _spec_leader_addr(spec, m.leader_addr)
    _spec_leader_port(spec, m.leader_port)
    _spec_gpu_indices(spec, tuple(m.gpu_indices[:]))
    _spec_hcas(spec, tuple(m.hcas[:]))
    _spec_mgmt_interface(spec, m.mgmt_interface)
    _spec_http_port(spec, m.http_port)
    _spec_pool(spec, m.pool)
    _spec_fabric(spec, m.fabric)
    _spec_profile_fp(spec, m.profile_fp)
    _spec_api_key(spec, m.api_key)
    _spec_threads(spec, m.cpu_threads)
    _spec_profile(spec, _profile(m.profile) if m.HasField("profile") else _NO_PROFILE)
    _spec_compute(spec, None)
    try:
        timeout = dt.timedelta(milliseconds=m.startup_timeout_ms)
    except OverflowError:
        raise ValueError("startup_timeout_ms does not fit a timedelta") from None
    o = _new(ShardCommand)
    _command_spec(o, spec)
    _command_startup_timeout(o, timeout)
    return o


_report_replica_id = _slot(ShardReport, "replica_id")
_report_shard_id = _slot(ShardReport, "shard_id")
_report_state = _slot(ShardReport, "state")
_report_detail = _slot(ShardReport, "detail")
_report_compute = _slot(ShardReport, "compute")


def report_from_wire(m: Any) -> ShardReport:
    """A `ShardStatus` message as a shard report."""
    o = _new(ShardReport)
    _report_replica_id(o, m.replica_id)
    _report_shard_id(o, m.shard_id)
    _report_state(o, _STATE_FROM_WIRE.get(m.state, _FAILED))
    _report_detail(o, m.detail)
    _report_compute(o, _compute(m.compute) if m.HasField("compute") else None)
    return o


# --- domain to wire ------------------------------------------------------------------


def _compute_into(m: Any, c: Compute) -> None:
    x: Any  # each field in turn
    i: Any
    if not isinstance(x := c.backend, str):
        raise _bad("backend", x)
    m.backend = x
    for i in (x := c.devices):
        if not isinstance(i, str):
            raise _bad("devices", x)
    if x:
        m.devices.extend(x)
    if type(x := c.offloaded) is not int:
        raise _bad("offloaded", x)
    m.layers_offloaded = x
    if type(x := c.total) is not int:
        raise _bad("total", x)
    m.layers_total = x


def _gpu_into(m: Any, g: GPU) -> None:  # noqa: PLR0912, PLR0915 - one check per field
    x: Any  # each field in turn
    i: Any
    if type(x := g.index) is not int:
        raise _bad("index", x)
    m.index = x
    if not isinstance(x := g.uuid, str):
        raise _bad("uuid", x)
    m.uuid = x
    if not isinstance(x := g.name, str):
        raise _bad("name", x)
    m.name = x
    if type(x := g.memory_total_mb) is not int:
        raise _bad("memory_total_mb", x)
    m.memory_total_mb = x
    if type(x := g.memory_used_mb) is not int:
        raise _bad("memory_used_mb", x)
    m.memory_used_mb = x
    if not isinstance(x := g.compute_capability, str):
        raise _bad("compute_capability", x)
    m.compute_capability = x
    if type(x := g.numa_node) is not int:
        raise _bad("numa_node", x)
    m.numa_node = x
    if not isinstance(x := g.pci_bus_id, str):
        raise _bad("pci_bus_id", x)
    m.pci_bus_id = x
    if not isinstance(x := g.driver_version, str):
        raise _bad("driver_version", x)
    m.driver_version = x
    if type(x := g.utilization_percent) is not int:
        raise _bad("utilization_percent", x)
    m.utilization_percent = x
    if not isinstance(x := g.cuda_version, str):
        raise _bad("cuda_version", x)
    m.cuda_version = x
    for i in (x := g.nvlink_peers):
        if type(i) is not int:
            raise _bad("nvlink_peers", x)
    if x:
        m.nvlink_peers.extend(x)
    if x := g.nic_paths:
        paths = m.nic_paths
        for k, v in x.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise _bad("nic_paths", x)
            paths[k] = v
    if (f := g.fabric) is not None:
        if not isinstance(x := f.state, str) or not x:
            raise _bad("fabric.state", x)
        m.fabric_state = x
        if not isinstance(x := f.status, str):
            raise _bad("fabric.status", x)
        m.fabric_status = x
        if not isinstance(x := f.cluster_uuid, str):
            raise _bad("fabric.cluster_uuid", x)
        m.cluster_uuid = x
        if not isinstance(x := f.clique_id, str):
            raise _bad("fabric.clique_id", x)
        m.clique_id = x
        if not isinstance(x := f.bandwidth, str):
            raise _bad("fabric.bandwidth", x)
        m.fabric_bandwidth = x
    h = g.health
    if type(x := h.ecc_errors) is not int:
        raise _bad("health.ecc_errors", x)
    m.ecc_errors = x
    if type(x := h.temperature_c) is not int:
        raise _bad("health.temperature_c", x)
    m.temperature_c = x
    for i in (x := h.problems):
        if not isinstance(i, str):
            raise _bad("health.problems", x)
    if x:
        m.problems.extend(x)
    if (d := g.mig) is not None:
        w = m.mig
        if type(x := d.parent_index) is not int:
            raise _bad("mig.parent_index", x)
        w.parent_index = x
        if not isinstance(x := d.parent_uuid, str):
            raise _bad("mig.parent_uuid", x)
        w.parent_uuid = x
        if type(x := d.parent_memory_total_mb) is not int:
            raise _bad("mig.parent_memory_total_mb", x)
        w.parent_memory_total_mb = x
        if type(x := d.device) is not int:
            raise _bad("mig.device", x)
        w.device = x
        if not isinstance(x := d.profile, str):
            raise _bad("mig.profile", x)
        w.profile = x
        if type(x := d.gpu_instance) is not int:
            raise _bad("mig.gpu_instance", x)
        w.gpu_instance = x
        if type(x := d.compute_instance) is not int:
            raise _bad("mig.compute_instance", x)
        w.compute_instance = x


def _shard_into(m: Any, s: AdoptedShard) -> None:  # noqa: PLR0912 - one check per field
    x: Any  # each field in turn
    i: Any
    if not isinstance(x := s.replica_id, str):
        raise _bad("replica_id", x)
    m.replica_id = x
    if not isinstance(x := s.shard_id, str):
        raise _bad("shard_id", x)
    m.shard_id = x
    if type(rank := s.rank) is not int:
        raise _bad("rank", rank)
    m.rank = rank
    for i in (x := s.gpu_indices):
        if type(i) is not int:
            raise _bad("gpu_indices", x)
    if x:
        m.gpu_indices.extend(x)
    for i in (x := s.hcas):
        if not isinstance(i, str):
            raise _bad("hcas", x)
    if x:
        m.hcas.extend(x)
    if type(port := s.http_port) is not int:
        raise _bad("http_port", port)
    m.http_port = port
    if (number := _STATE_TO_WIRE.get(s.state)) is None:
        raise _bad("state", s.state)
    m.state = number
    if not isinstance(x := s.model, str):
        raise _bad("model", x)
    m.model = x
    if not isinstance(x := s.profile, str):
        raise _bad("profile", x)
    m.profile = x
    if not isinstance(x := s.pool, str):
        raise _bad("pool", x)
    m.pool = x
    if not isinstance(x := s.fabric, str):
        raise _bad("fabric", x)
    m.fabric = x
    if not isinstance(x := s.profile_fp, str):
        raise _bad("profile_fp", x)
    m.profile_fp = x
    if (c := s.compute) is not None:
        _compute_into(m.compute, c)
    if (endpoint := s.endpoint) is not None:
        # The endpoint is derived from the leader address: recover it, exactly.
        if not isinstance(endpoint, str) or rank != 0 or not endpoint.startswith("http://"):
            raise _bad("endpoint", endpoint)
        addr = endpoint[7:].rpartition(":")[0]
        if not addr or endpoint != f"http://{addr}:{port}":
            raise _bad("endpoint", endpoint)
        m.leader_addr = addr


def registration_to_wire(r: Registration) -> Any:  # noqa: PLR0912, PLR0915
    """A registration as a `Register` message."""
    x: Any  # each field in turn
    i: Any
    m = Register()
    n = r.node
    if not isinstance(node_id := n.id, str):
        raise _bad("id", node_id)
    m.node_id = node_id
    if not isinstance(x := n.hostname, str):
        raise _bad("hostname", x)
    m.hostname = x
    if not isinstance(x := n.mgmt_addr, str):
        raise _bad("mgmt_addr", x)
    m.mgmt_addr = x
    if x := n.labels:
        labels = m.labels
        for k, v in x.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise _bad("labels", x)
            labels[k] = v
    if not isinstance(x := n.agent_version, str):
        raise _bad("agent_version", x)
    m.agent_version = x
    for i in (x := n.features):
        if not isinstance(i, str):
            raise _bad("features", x)
    if x:
        m.features.extend(x)
    if x := n.engine_versions:
        versions = m.engine_versions
        for k, v in x.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise _bad("engine_versions", x)
            versions[k] = v
    if type(x := n.engines_probed) is not bool:
        raise _bad("engines_probed", x)
    m.engines_probed = x
    if type(x := n.memory_total_mb) is not int:
        raise _bad("memory_total_mb", x)
    m.memory_total_mb = x
    if type(x := n.cpu_count) is not int:
        raise _bad("cpu_count", x)
    m.cpu_count = x
    h = n.host
    w = m.host
    w.SetInParent()
    if not isinstance(x := h.os_id, str):
        raise _bad("host.os_id", x)
    w.os_id = x
    if not isinstance(x := h.os_version, str):
        raise _bad("host.os_version", x)
    w.os_version = x
    if not isinstance(x := h.os_codename, str):
        raise _bad("host.os_codename", x)
    w.os_codename = x
    if not isinstance(x := h.arch, str):
        raise _bad("host.arch", x)
    w.arch = x
    for i in (x := h.cpu_flags):
        if not isinstance(i, str):
            raise _bad("host.cpu_flags", x)
    if x:
        w.cpu_flags.extend(x)
    if not isinstance(x := h.nvidia_driver, str):
        raise _bad("host.nvidia_driver", x)
    w.nvidia_driver = x
    add = m.weights.add
    for lw in n.weights:
        w = add()
        if not isinstance(x := lw.path, str):
            raise _bad("weights.path", x)
        w.path = x
        if type(x := lw.size_bytes) is not int:
            raise _bad("weights.size_bytes", x)
        w.size_bytes = x
        if type(x := lw.shared) is not bool:
            raise _bad("weights.shared", x)
        w.shared = x
    add = m.storage.add
    for st in n.storage:
        w = add()
        if not isinstance(x := st.path, str):
            raise _bad("storage.path", x)
        w.path = x
        if type(x := st.free_bytes) is not int:
            raise _bad("storage.free_bytes", x)
        w.free_bytes = x
        if type(x := st.total_bytes) is not int:
            raise _bad("storage.total_bytes", x)
        w.total_bytes = x
        if type(x := st.shared) is not bool:
            raise _bad("storage.shared", x)
        w.shared = x
    add = m.gpus.add
    for g in n.gpus:
        _gpu_into(add(), g)
    imex = n.imex
    w = m.imex
    w.SetInParent()
    if not isinstance(x := imex.state, str):
        raise _bad("imex.state", x)
    w.state = x
    if type(x := imex.channels) is not int:
        raise _bad("imex.channels", x)
    w.channels = x
    add = m.fabrics.add
    for fa in n.fabrics:
        w = add()
        if not isinstance(x := fa.fabric, str):
            raise _bad("fabrics.fabric", x)
        w.fabric = x
        for i in (x := fa.hcas):
            if not isinstance(i, str):
                raise _bad("fabrics.hcas", x)
        if x:
            w.hcas.extend(x)
        if type(x := fa.rate_gbps) is not int:
            raise _bad("fabrics.rate_gbps", x)
        w.rate_gbps = x
    add = m.running_shards.add
    for s in r.shards:
        _shard_into(add(), s)
    return m


def command_to_wire(c: ShardCommand) -> Any:  # noqa: PLR0912, PLR0915
    """A command as a `StartShard` message."""
    x: Any  # each field in turn
    i: Any
    m = StartShard()
    spec = c.spec
    # The command and its spec each hold these; the wire has them once.
    if not isinstance(x := c.replica_id, str) or spec.replica_id != x:
        raise _bad("replica_id", x)
    m.replica_id = x
    if not isinstance(x := c.shard_id, str) or spec.shard_id != x:
        raise _bad("shard_id", x)
    m.shard_id = x
    if not isinstance(x := c.pool, str) or spec.pool != x:
        raise _bad("pool", x)
    m.pool = x
    if not isinstance(x := c.fabric, str) or spec.fabric != x:
        raise _bad("fabric", x)
    m.fabric = x
    if not isinstance(x := c.profile_fp, str) or spec.profile_fp != x:
        raise _bad("profile_fp", x)
    m.profile_fp = x
    if type(x := spec.rank) is not int:
        raise _bad("spec.rank", x)
    m.rank = x
    if type(x := spec.nnodes) is not int:
        raise _bad("spec.nnodes", x)
    m.nnodes = x
    if not isinstance(x := spec.leader_addr, str):
        raise _bad("spec.leader_addr", x)
    m.leader_addr = x
    if type(x := spec.leader_port) is not int:
        raise _bad("spec.leader_port", x)
    m.leader_port = x
    for i in (x := spec.gpu_indices):
        if type(i) is not int:
            raise _bad("spec.gpu_indices", x)
    if x:
        m.gpu_indices.extend(x)
    for i in (x := spec.hcas):
        if not isinstance(i, str):
            raise _bad("spec.hcas", x)
    if x:
        m.hcas.extend(x)
    if not isinstance(x := spec.mgmt_interface, str):
        raise _bad("spec.mgmt_interface", x)
    m.mgmt_interface = x
    if type(x := spec.http_port) is not int:
        raise _bad("spec.http_port", x)
    m.http_port = x
    if not isinstance(x := spec.api_key, str):
        raise _bad("spec.api_key", "<redacted>")
    m.api_key = x
    if type(x := spec.threads) is not int:
        raise _bad("spec.threads", x)
    m.cpu_threads = x
    if spec.compute is not None:
        raise _bad("spec.compute", spec.compute)
    p = spec.profile
    w = m.profile
    w.SetInParent()
    if not isinstance(x := p.name, str):
        raise _bad("profile.name", x)
    w.name = x
    if not isinstance(x := p.engine, str):
        raise _bad("profile.engine", x)
    w.engine = x
    if not isinstance(x := p.gpu_class, str):
        raise _bad("profile.gpu_class", x)
    w.gpu_class = x
    if type(x := p.tp) is not int:
        raise _bad("profile.tp", x)
    w.tp = x
    if type(x := p.pp) is not int:
        raise _bad("profile.pp", x)
    w.pp = x
    if type(x := p.gpus_per_node) is not int:
        raise _bad("profile.gpus_per_node", x)
    w.gpus_per_node = x
    if type(x := p.nodes) is not int:
        raise _bad("profile.nodes", x)
    w.nodes = x
    for i in (x := p.args):
        if not isinstance(i, str):
            raise _bad("profile.args", x)
    if x:
        w.args.extend(x)
    if x := p.env:
        env = w.env
        for k, v in x.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise _bad("profile.env", x)
            env[k] = v
    if not isinstance(x := p.model_path, str):
        raise _bad("profile.model_path", x)
    w.model_path = x
    if not isinstance(x := p.served_model_name, str):
        raise _bad("profile.served_model_name", x)
    w.served_model_name = x
    add = w.adapters.add
    for a in p.adapters:
        if not isinstance(name := a.name, str) or not isinstance(path := a.path, str):
            raise _bad("profile.adapters", a)
        add(name=name, source=path)
    if type(x := p.kv_events) is not bool:
        raise _bad("profile.kv_events", x)
    w.kv_events = x
    timeout = c.startup_timeout
    if type(timeout) is not dt.timedelta:
        raise _bad("startup_timeout", timeout)
    ms, rest = divmod(timeout, _MS)
    if rest:
        raise _bad("startup_timeout", timeout)
    m.startup_timeout_ms = ms
    return m


def report_to_wire(r: ShardReport) -> Any:
    """A shard report as a `ShardStatus` message."""
    x: Any  # each field in turn
    m = ShardStatus()
    if not isinstance(x := r.replica_id, str):
        raise _bad("replica_id", x)
    m.replica_id = x
    if not isinstance(x := r.shard_id, str):
        raise _bad("shard_id", x)
    m.shard_id = x
    if (number := _STATE_TO_WIRE.get(r.state)) is None:
        raise _bad("state", r.state)
    m.state = number
    if not isinstance(x := r.detail, str):
        raise _bad("detail", x)
    m.detail = x
    if (c := r.compute) is not None:
        _compute_into(m.compute, c)
    return m
