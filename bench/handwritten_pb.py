"""The mapping written by hand over Google's protobuf classes: the best one can hand-roll.

The same mapping as the library (the same renames, presence rules, state and
endpoint rules, and the same range checks when encoding), over the same upb
message classes (`llmgw_wire.codec.schema`, which is what generated `_pb2` modules give
at run time), written as someone tuning it by hand would: checks inlined,
sub-messages filled in place (`parent.field.add()`, no copies), repeated
fields read by slicing, maps read key by key, domain values built with
positional arguments, and the range of an int left to upb, which refuses one
that does not fit its field (its type, which upb is lax about, is checked
here). Failures raise `ValueError`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from llmgw_wire.codec.schema import CLASSES
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


def _str_map(container: Any) -> dict[str, str]:
    return {key: container[key] for key in container}


# --- wire to domain ----------------------------------------------------------------


def _compute(m: Any) -> Compute:
    return Compute(m.backend, m.devices[:], m.layers_offloaded, m.layers_total)


def _gpu(m: Any) -> GPU:
    state = m.fabric_state
    fabric = (
        GPUFabric(state, m.fabric_status, m.cluster_uuid, m.clique_id, m.fabric_bandwidth)
        if state
        else None
    )
    if m.HasField("mig"):
        w = m.mig
        mig: MIGDevice | None = MIGDevice(
            w.parent_index,
            w.parent_uuid,
            w.parent_memory_total_mb,
            w.device,
            w.profile,
            w.gpu_instance,
            w.compute_instance,
        )
    else:
        mig = None
    return GPU(
        m.index,
        m.uuid,
        m.name,
        m.memory_total_mb,
        m.memory_used_mb,
        m.compute_capability,
        m.numa_node,
        m.pci_bus_id,
        m.driver_version,
        m.utilization_percent,
        m.cuda_version,
        m.nvlink_peers[:],
        _str_map(m.nic_paths),
        fabric,
        GPUHealth(m.ecc_errors, m.temperature_c, m.problems[:]),
        mig,
    )


def _shard(m: Any, node_id: str) -> AdoptedShard:
    rank = m.rank
    port = m.http_port
    addr = m.leader_addr
    return AdoptedShard(
        node_id,
        m.replica_id,
        m.shard_id,
        rank,
        m.gpu_indices[:],
        m.hcas[:],
        port,
        _STATE_FROM_WIRE.get(m.state, _FAILED),
        m.model,
        m.profile,
        m.pool,
        m.fabric,
        m.profile_fp,
        _compute(m.compute) if m.HasField("compute") else None,
        f"http://{addr}:{port}" if rank == 0 and addr else None,
    )


def registration_from_wire(m: Any) -> Registration:
    """A `Register` message as a registration."""
    if m.HasField("host"):
        h = m.host
        host = Host(h.os_id, h.os_version, h.os_codename, h.arch, h.cpu_flags[:], h.nvidia_driver)
    else:
        host = _NO_HOST
    imex = IMEX(m.imex.state, m.imex.channels) if m.HasField("imex") else _NO_IMEX
    node_id = m.node_id
    node = Node(
        node_id,
        m.hostname,
        m.mgmt_addr,
        _str_map(m.labels),
        _READY,
        m.agent_version,
        m.features[:],
        _str_map(m.engine_versions),
        m.engines_probed,
        m.memory_total_mb,
        m.cpu_count,
        host,
        tuple([LocalWeights(w.path, w.size_bytes, w.shared) for w in m.weights[:]]),
        tuple([Storage(s.path, s.free_bytes, s.total_bytes, s.shared) for s in m.storage[:]]),
        tuple([_gpu(g) for g in m.gpus[:]]),
        imex,
        tuple([FabricAttachment(f.fabric, f.hcas[:], f.rate_gbps) for f in m.fabrics[:]]),
    )
    return Registration(node, tuple([_shard(s, node_id) for s in m.running_shards[:]]))


def command_from_wire(m: Any) -> ShardCommand:
    """A `StartShard` message as a command."""
    if m.HasField("profile"):
        p = m.profile
        profile = Profile(
            p.name,
            p.engine,
            p.gpu_class,
            p.tp,
            p.pp,
            p.gpus_per_node,
            p.nodes,
            p.args[:],
            _str_map(p.env),
            p.model_path,
            p.served_model_name,
            tuple([Adapter(a.name, a.source) for a in p.adapters[:]]),
            p.kv_events,
        )
    else:
        profile = _NO_PROFILE
    replica_id = m.replica_id
    shard_id = m.shard_id
    pool = m.pool
    fabric = m.fabric
    profile_fp = m.profile_fp
    spec = ShardSpec(
        replica_id,
        shard_id,
        m.rank,
        m.nnodes,
        m.leader_addr,
        m.leader_port,
        m.gpu_indices[:],
        m.hcas[:],
        m.mgmt_interface,
        m.http_port,
        pool,
        fabric,
        profile_fp,
        m.api_key,
        m.cpu_threads,
        profile,
        None,
    )
    try:
        timeout = dt.timedelta(milliseconds=m.startup_timeout_ms)
    except OverflowError:
        raise ValueError("startup_timeout_ms does not fit a timedelta") from None
    return ShardCommand(spec, timeout)


def report_from_wire(m: Any) -> ShardReport:
    """A `ShardStatus` message as a shard report."""
    return ShardReport(
        m.replica_id,
        m.shard_id,
        _STATE_FROM_WIRE.get(m.state, _FAILED),
        m.detail,
        _compute(m.compute) if m.HasField("compute") else None,
    )


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
