"""The mapping between wire messages and domain models, as data.

One `Pair` per domain model says which wire message carries it and, attribute
by attribute, how (`llmgw_wire.mapping._rules` has the vocabulary: renames, flat wire
fields grouped into a nested value, presence, range checks). The codec
compiles each pair into fast conversion functions for both wire backends, the
checks explain refused values from it, and the documentation renders it: there
is no other description of the mapping to drift from.
"""

from __future__ import annotations

from functools import cache
from typing import TypeAlias

from attrs import frozen

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
from llmgw_wire.mapping._rules import (
    Constant,
    Embedded,
    EpochMillis,
    FieldRule,
    FromContext,
    LeaderEndpoint,
    Message,
    Messages,
    Millis,
    NotCarried,
    Repeated,
    Rule,
    Scalar,
    StateEnum,
    StrMap,
)

__all__ = [
    "ENVELOPES",
    "MODELS_WITH_MESSAGE",
    "NOT_CARRIED",
    "PAIRS",
    "PAIRS_WITH_MESSAGE",
    "STATES_BY_NUMBER",
    "STATE_MODELS",
    "STATE_NUMBERS",
    "Envelope",
    "ModelWithMessage",
    "Pair",
    "flat_fields",
    "mapped_fields",
    "pair_for",
]


@frozen
class Pair:
    """How the domain model `domain` is carried by the wire message `wire`.

    Attributes:
        domain: the attrs class.
        wire: the full proto name of the message, e.g. `llmgw.v1.GPU`.
        rules: one rule per domain attribute, in the attribute order.
        embedded: True for a domain value kept in fields of another message
            (a GPU's fabric); such a pair has no wire message of its own.
    """

    domain: type
    wire: str
    rules: tuple[Rule, ...]
    embedded: bool = False

    def shared_wire_fields(self) -> dict[str, list[tuple[str, ...]]]:
        """Wire fields that more than one attribute maps to, with the attribute paths.

        A command and its spec both hold a replica id, for instance; the wire
        has one, so the two must agree to be encoded.
        """
        return _shared_wire_fields(self)


@cache
def _shared_wire_fields(pair: Pair) -> dict[str, list[tuple[str, ...]]]:
    claims: dict[str, list[tuple[str, ...]]] = {}
    for wire, attrs in _flat_fields(pair):
        claims.setdefault(wire, []).append(attrs)
    return {wire: paths for wire, paths in claims.items() if len(paths) > 1}


def flat_fields(pair: Pair) -> list[tuple[str, tuple[str, ...]]]:
    """The scalar wire fields of a pair's message, each with the attribute path it comes from."""
    return _flat_fields(pair)


def _flat_fields(pair: Pair) -> list[tuple[str, tuple[str, ...]]]:
    out: list[tuple[str, tuple[str, ...]]] = []
    for rule in pair.rules:
        if isinstance(rule, Embedded):
            if not rule.present_if:
                inner = pair_for(rule.domain)
                out.extend((w, (rule.attr, *a)) for w, a in _flat_fields(inner))
        elif isinstance(rule, FieldRule) and rule.flat:
            out.append((rule.wire, (rule.attr,)))
    return out


def mapped_fields(pair: Pair, pairs: tuple[Pair, ...] | None = None) -> set[str]:
    """The wire fields of its message that `pair` reads, embedded pairs included.

    Args:
        pair: the pair.
        pairs: the table its embedded pairs are looked up in (default: `PAIRS`).
    """
    by_domain = _BY_DOMAIN if pairs is None else {p.domain: p for p in pairs}
    fields: set[str] = set()
    for rule in pair.rules:
        if isinstance(rule, Embedded):
            inner = by_domain.get(rule.domain)
            if inner is not None:
                fields |= mapped_fields(inner, pairs)
            if rule.present_if:
                fields.add(rule.present_if)
        else:
            fields.update(rule.made_of())
    return fields


# Shorthands that keep the table below one line per attribute. Without
# `wire`, the wire field has the attribute's name.


def _string(attr: str, wire: str = "") -> Scalar:
    return Scalar(attr, wire or attr, "string")


def _int32(attr: str, wire: str = "") -> Scalar:
    return Scalar(attr, wire or attr, "int32")


def _int64(attr: str, wire: str = "") -> Scalar:
    return Scalar(attr, wire or attr, "int64")


def _bool(attr: str, wire: str = "") -> Scalar:
    return Scalar(attr, wire or attr, "bool")


def _strings(attr: str, wire: str = "") -> Repeated:
    return Repeated(attr, wire or attr, "string")


def _int32s(attr: str, wire: str = "") -> Repeated:
    return Repeated(attr, wire or attr, "int32")


def _map(attr: str, wire: str = "") -> StrMap:
    return StrMap(attr, wire or attr)


def _one(attr: str, domain: type, wire: str = "") -> Message:
    return Message(attr, wire or attr, domain, optional=False)


def _maybe(attr: str, domain: type, wire: str = "") -> Message:
    return Message(attr, wire or attr, domain, optional=True)


def _many(attr: str, domain: type, wire: str = "") -> Messages:
    return Messages(attr, wire or attr, domain)


#: The whole mapping: one pair per domain model, each nested model before those holding it.
PAIRS: tuple[Pair, ...] = (
    Pair(Host, "llmgw.v1.Host", (
        _string("os_id"),
        _string("os_version"),
        _string("os_codename"),
        _string("arch"),
        _strings("cpu_flags"),
        _string("nvidia_driver"),
    )),
    Pair(GPUFabric, "llmgw.v1.GPU", (
        _string("state", "fabric_state"),
        _string("status", "fabric_status"),
        _string("cluster_uuid"),
        _string("clique_id"),
        _string("bandwidth", "fabric_bandwidth"),
    ), embedded=True),
    Pair(GPUHealth, "llmgw.v1.GPU", (
        _int32("ecc_errors"),
        _int32("temperature_c"),
        _strings("problems"),
    ), embedded=True),
    Pair(MIGDevice, "llmgw.v1.MIGDevice", (
        _int32("parent_index"),
        _string("parent_uuid"),
        _int32("parent_memory_total_mb"),
        _int32("device"),
        _string("profile"),
        _int32("gpu_instance"),
        _int32("compute_instance"),
    )),
    Pair(GPU, "llmgw.v1.GPU", (
        _int32("index"),
        _string("uuid"),
        _string("name"),
        _int32("memory_total_mb"),
        _int32("memory_used_mb"),
        _string("compute_capability"),
        _int32("numa_node"),
        _string("pci_bus_id"),
        _string("driver_version"),
        _int32("utilization_percent"),
        _string("cuda_version"),
        _int32s("nvlink_peers"),
        _map("nic_paths"),
        Embedded("fabric", GPUFabric, present_if="fabric_state"),
        Embedded("health", GPUHealth),
        _maybe("mig", MIGDevice),
    )),
    Pair(IMEX, "llmgw.v1.IMEX", (
        _string("state"),
        _int32("channels"),
    )),
    Pair(LocalWeights, "llmgw.v1.LocalWeights", (
        _string("path"),
        _int64("size_bytes"),
        _bool("shared"),
    )),
    Pair(Storage, "llmgw.v1.Storage", (
        _string("path"),
        _int64("free_bytes"),
        _int64("total_bytes"),
        _bool("shared"),
    )),
    Pair(FabricAttachment, "llmgw.v1.FabricAttachment", (
        _string("fabric"),
        _strings("hcas"),
        _int32("rate_gbps"),
    )),
    Pair(Node, "llmgw.v1.Register", (
        _string("id", "node_id"),
        _string("hostname"),
        _string("mgmt_addr"),
        _map("labels"),
        Constant("state", NodeState.READY),
        _string("agent_version"),
        _strings("features"),
        _map("engine_versions"),
        _bool("engines_probed"),
        _int64("memory_total_mb"),
        _int32("cpu_count"),
        _one("host", Host),
        _many("weights", LocalWeights),
        _many("storage", Storage),
        _many("gpus", GPU),
        _one("imex", IMEX),
        _many("fabrics", FabricAttachment),
    )),
    Pair(Compute, "llmgw.v1.Compute", (
        _string("backend"),
        _strings("devices"),
        _int32("offloaded", "layers_offloaded"),
        _int32("total", "layers_total"),
    )),
    Pair(AdoptedShard, "llmgw.v1.RunningShard", (
        FromContext("node_id", source="node_id"),
        _string("replica_id"),
        _string("shard_id"),
        _int32("rank"),
        _int32s("gpu_indices"),
        _strings("hcas"),
        _int32("http_port"),
        StateEnum("state", "state"),
        _string("model"),
        _string("profile"),
        _string("pool"),
        _string("fabric"),
        _string("profile_fp"),
        _maybe("compute", Compute),
        LeaderEndpoint("endpoint", "leader_addr"),
    )),
    Pair(Registration, "llmgw.v1.Register", (
        Embedded("node", Node),
        Messages("shards", "running_shards", AdoptedShard, context=(("node_id", "node_id"),)),
    )),
    Pair(Adapter, "llmgw.v1.LoraAdapter", (
        _string("name"),
        _string("path", "source"),
    )),
    Pair(Profile, "llmgw.v1.EngineProfile", (
        _string("name"),
        _string("engine"),
        _string("gpu_class"),
        _int32("tp"),
        _int32("pp"),
        _int32("gpus_per_node"),
        _int32("nodes"),
        _strings("args"),
        _map("env"),
        _string("model_path"),
        _string("served_model_name"),
        _many("adapters", Adapter),
        _bool("kv_events"),
    )),
    Pair(ShardSpec, "llmgw.v1.StartShard", (
        _string("replica_id"),
        _string("shard_id"),
        _int32("rank"),
        _int32("nnodes"),
        _string("leader_addr"),
        _int32("leader_port"),
        _int32s("gpu_indices"),
        _strings("hcas"),
        _string("mgmt_interface"),
        _int32("http_port"),
        _string("pool"),
        _string("fabric"),
        _string("profile_fp"),
        _string("api_key"),
        _int32("threads", "cpu_threads"),
        _one("profile", Profile),
        NotCarried("compute", message="StartShard"),
    )),
    Pair(ShardCommand, "llmgw.v1.StartShard", (
        Embedded("spec", ShardSpec),
        Millis("startup_timeout", "startup_timeout_ms"),
    )),
    Pair(StopCommand, "llmgw.v1.StopShard", (
        _string("replica_id"),
        _string("shard_id"),
        Millis("grace", "grace_period_ms"),
    )),
    Pair(ShardReport, "llmgw.v1.ShardStatus", (
        _string("replica_id"),
        _string("shard_id"),
        StateEnum("state", "state"),
        _string("detail"),
        _maybe("compute", Compute),
    )),
    Pair(Heartbeat, "llmgw.v1.Heartbeat", (
        _string("node_id"),
        EpochMillis("sent_at", "sent_at_unix_ms"),
    )),
    Pair(Ack, "llmgw.v1.Ack", (
        _string("node_id"),
        _int32("adopted_shards"),
        _string("detail"),
    )),
)  # fmt: skip

_BY_DOMAIN = {pair.domain: pair for pair in PAIRS}


def pair_for(domain: type) -> Pair:
    """The pair that carries the domain model `domain`.

    Raises:
        KeyError: `domain` is not a domain model of this library.
    """
    return _BY_DOMAIN[domain]


#: The pairs whose domain model has a wire message of its own (not embedded in
#: another's fields): what `encode`, `decode` and the converter take.
PAIRS_WITH_MESSAGE: tuple[Pair, ...] = tuple(pair for pair in PAIRS if not pair.embedded)

#: The domain models of `PAIRS_WITH_MESSAGE`, in table order.
MODELS_WITH_MESSAGE: tuple[type, ...] = tuple(pair.domain for pair in PAIRS_WITH_MESSAGE)

#: A value of a domain model with a message of its own: what `encode` takes.
#: The models of `MODELS_WITH_MESSAGE`, in the same order, written out for
#: type checkers, which cannot read the table (a test holds the two equal).
ModelWithMessage: TypeAlias = (
    Host
    | MIGDevice
    | GPU
    | IMEX
    | LocalWeights
    | Storage
    | FabricAttachment
    | Node
    | Compute
    | AdoptedShard
    | Registration
    | Adapter
    | Profile
    | ShardSpec
    | ShardCommand
    | StopCommand
    | ShardReport
    | Heartbeat
    | Ack
)

#: The domain models that carry a shard state, directly or in a nested value.
STATE_MODELS: tuple[type, ...] = tuple(
    pair.domain
    for pair in PAIRS_WITH_MESSAGE
    if any(isinstance(rule, StateEnum) for rule in pair.rules)
    or any(
        isinstance(rule, (Messages, Message, Embedded))
        and any(isinstance(r, StateEnum) for r in pair_for(rule.domain).rules)
        for rule in pair.rules
    )
)

#: Wire numbers of the shard states (`ShardStatus.State`); a number not here decodes as FAILED.
STATE_NUMBERS: dict[State, int] = {
    State.PENDING: 1,
    State.STARTING: 2,
    State.LOADING: 3,
    State.READY: 4,
    State.DRAINING: 5,
    State.STOPPED: 6,
    State.FAILED: 7,
}

#: The other way round; a number missing here decodes as FAILED.
STATES_BY_NUMBER: dict[int, State] = {n: s for s, n in STATE_NUMBERS.items()}


@frozen
class Envelope:
    """A message of the stream that carries one domain value in a member of its oneof.

    Attributes:
        wire: the full proto name of the envelope, e.g. `llmgw.v1.AgentMessage`.
        oneof: the name of its oneof.
        members: (member field, domain model) for each member, in field order.
    """

    wire: str
    oneof: str
    members: tuple[tuple[str, type], ...]

    def member_for(self, domain: type) -> str | None:
        """The member that carries `domain`, or None."""
        return next((member for member, model in self.members if model is domain), None)


#: The stream's two envelopes: what an agent sends, and what the control plane sends.
ENVELOPES: tuple[Envelope, Envelope] = (
    Envelope(
        "llmgw.v1.AgentMessage",
        "msg",
        (("register", Registration), ("shard_status", ShardReport), ("heartbeat", Heartbeat)),
    ),
    Envelope(
        "llmgw.v1.ControlMessage",
        "msg",
        (("start_shard", ShardCommand), ("stop_shard", StopCommand), ("ack", Ack)),
    ),
)


#: Wire fields, by full name (`llmgw.v1.GPU.power_watts`), that no pair maps
#: on purpose. Every other field of the schema must be mapped by a pair:
#: `llmgw-wire compat --mapping` reports one that is neither
#: (`LLMGW_FIELD_NOT_MAPPED`). There are none today.
NOT_CARRIED: tuple[str, ...] = ()
