"""Hypothesis strategies for every domain model and wire message (the `testing` extra).

Values stay inside what the wire can carry (int32 and int64 ranges, UTF-8
text, whole milliseconds) and take realistic shapes: nodes of up to 8 GPUs
with NVLink peers, MIG slices and fabrics, a few shards per node. A service
can fuzz its own handlers with them::

    from hypothesis import given
    from llmgw_wire import strategies as lst

    @given(lst.registrations())
    def test_my_control_plane_adopts_every_shard(registration):
        node, shards = my_service.handle(registration)
        assert len(shards) == len(registration.shards)

`domain_values(T)` gives the strategy for any domain model `T`, and
`wire_messages(T)` the `llmgw_wire.v1` messages that decode to it.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from hypothesis import strategies as st

from llmgw_wire._rules import EPOCH, INT_RANGES
from llmgw_wire.codec import converter
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
    Inventory,
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

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "adopted_shards",
    "domain_values",
    "gpus",
    "int32s",
    "int64s",
    "nodes",
    "registrations",
    "shard_commands",
    "shard_specs",
    "texts",
    "unknown_state_numbers",
    "wire_messages",
]

T = TypeVar("T")

KNOWN_STATE_NUMBERS = frozenset(range(1, 8))


def texts(max_size: int = 24) -> SearchStrategy[str]:
    """Strings the wire carries: any Unicode but lone surrogates (not valid UTF-8)."""
    return st.text(st.characters(exclude_categories=("Cs",)), max_size=max_size)


def int32s() -> SearchStrategy[int]:
    """Any int an int32 wire field carries."""
    lo, hi = INT_RANGES["int32"]
    return st.integers(lo, hi)


def int64s() -> SearchStrategy[int]:
    """Any int an int64 wire field carries."""
    lo, hi = INT_RANGES["int64"]
    return st.integers(lo, hi)


def unknown_state_numbers() -> SearchStrategy[int]:
    """Wire state numbers this version does not know: 0 (unspecified) and any beyond 1..7.

    Every one of them must decode as `State.FAILED`.
    """
    return int32s().filter(lambda n: n not in KNOWN_STATE_NUMBERS)


def _small_list(strategy: SearchStrategy[T], max_size: int = 4) -> SearchStrategy[tuple[T, ...]]:
    return st.lists(strategy, max_size=max_size).map(tuple)


def _str_maps(max_size: int = 4) -> SearchStrategy[dict[str, str]]:
    return st.dictionaries(texts(12), texts(), max_size=max_size)


def _millis_deltas() -> SearchStrategy[dt.timedelta]:
    # Whole milliseconds, within both int64 and timedelta's own range.
    ms = dt.timedelta(milliseconds=1)
    return st.integers(dt.timedelta.min // ms, dt.timedelta.max // ms).map(
        lambda ms: dt.timedelta(milliseconds=ms)
    )


def _epoch_datetimes() -> SearchStrategy[dt.datetime]:
    lo = (dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc) - EPOCH) // dt.timedelta(milliseconds=1)
    hi = (dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc) - EPOCH) // dt.timedelta(milliseconds=1)
    return st.integers(lo, hi).map(lambda ms: EPOCH + dt.timedelta(milliseconds=ms))


def _build(cls: type[T], **overrides: SearchStrategy[Any]) -> SearchStrategy[T]:
    """`cls` with every attribute drawn: from `overrides`, else by its type."""
    fields = {}
    for field in attrs.fields(attrs.resolve_types(cls)):  # type: ignore[type-var,arg-type]
        if field.name in overrides:
            fields[field.name] = overrides[field.name]
        else:
            fields[field.name] = _by_annotation(field.type)
    return st.builds(cls, **fields)


def _by_annotation(annotation: object) -> SearchStrategy[Any]:
    by_type: dict[object, SearchStrategy[Any]] = {
        str: texts(),
        int: int32s(),
        bool: st.booleans(),
        tuple[str, ...]: _small_list(texts()),
        tuple[int, ...]: _small_list(int32s(), 8),
        dict[str, str]: _str_maps(),
    }
    return by_type[annotation]


def hosts() -> SearchStrategy[Host]:
    """Hosts, with a handful of CPU flags."""
    return _build(Host)


def gpu_fabrics() -> SearchStrategy[GPUFabric]:
    """NVLink fabric memberships; `state` is never empty (empty means no fabric)."""
    return _build(GPUFabric, state=texts().filter(bool))


def mig_devices() -> SearchStrategy[MIGDevice]:
    """MIG slices."""
    return _build(MIGDevice)


def gpus(*, mig: bool | None = None, fabric: bool | None = None) -> SearchStrategy[GPU]:
    """GPUs; `mig` and `fabric` force the slice or fabric present (True) or absent (False).

    `mig=False` is what an agent older than MIG support sends.
    """

    def optional(flag: bool | None, strategy: SearchStrategy[T]) -> SearchStrategy[T | None]:
        if flag is None:
            return st.none() | strategy
        return strategy if flag else st.none()

    return _build(
        GPU,
        nvlink_peers=_small_list(st.integers(0, 7), 7),
        health=_build(GPUHealth),
        fabric=optional(fabric, gpu_fabrics()),
        mig=optional(mig, mig_devices()),
    )


def imexes() -> SearchStrategy[IMEX]:
    """IMEX daemon states."""
    return _build(IMEX)


def local_weights() -> SearchStrategy[LocalWeights]:
    """Weights on disk, sizes in bytes up to int64."""
    return _build(LocalWeights, size_bytes=int64s())


def storages() -> SearchStrategy[Storage]:
    """Filesystems, sizes in bytes up to int64."""
    return _build(Storage, free_bytes=int64s(), total_bytes=int64s())


def fabric_attachments() -> SearchStrategy[FabricAttachment]:
    """Network fabric attachments."""
    return _build(FabricAttachment)


def nodes(*, max_gpus: int = 8) -> SearchStrategy[Node]:
    """Nodes as a registration makes them: READY, with up to `max_gpus` GPUs."""
    return _build(
        Node,
        state=st.just(NodeState.READY),
        memory_total_mb=int64s(),
        host=hosts(),
        weights=_small_list(local_weights(), 3),
        storage=_small_list(storages(), 3),
        gpus=_small_list(gpus(), max_gpus),
        imex=imexes(),
        fabrics=_small_list(fabric_attachments(), 3),
    )


def inventories() -> SearchStrategy[Inventory]:
    """What an agent discovers on its host."""
    return _build(
        Inventory,
        memory_total_mb=int64s(),
        host=hosts(),
        weights=_small_list(local_weights(), 3),
        storage=_small_list(storages(), 3),
        gpus=_small_list(gpus(), 8),
        imex=imexes(),
    )


def computes() -> SearchStrategy[Compute]:
    """Compute placements."""
    return _build(Compute)


def states() -> SearchStrategy[State]:
    """Shard states."""
    return st.sampled_from(State)


@st.composite
def _adopted(draw: st.DrawFn, node_id: SearchStrategy[str], compute: bool | None) -> AdoptedShard:
    shard = draw(
        _build(
            AdoptedShard,
            node_id=node_id,
            rank=st.sampled_from([0, 0, 1, 2]) | int32s(),
            gpu_indices=_small_list(st.integers(0, 7), 8),
            state=states(),
            compute=st.none() | computes()
            if compute is None
            else computes()
            if compute
            else st.none(),
            endpoint=st.none(),
        )
    )
    if shard.rank == 0 and draw(st.booleans()):
        leader = draw(texts().filter(bool))
        shard = attrs.evolve(shard, endpoint=f"http://{leader}:{shard.http_port}")
    return shard


def adopted_shards(
    node_id: SearchStrategy[str] | None = None, *, compute: bool | None = None
) -> SearchStrategy[AdoptedShard]:
    """Adopted shards; leaders (rank 0) sometimes with an endpoint.

    `node_id` defaults to "", what a shard decoded on its own (outside a
    registration) has. `compute=False` is an agent older than compute reporting.
    """
    return _adopted(st.just("") if node_id is None else node_id, compute)


@st.composite
def _registrations(draw: st.DrawFn, max_shards: int, compute: bool | None) -> Registration:
    node = draw(nodes())
    shards = draw(_small_list(adopted_shards(st.just(node.id), compute=compute), max_shards))
    return Registration(node, shards)


def registrations(
    *, max_shards: int = 4, compute: bool | None = None
) -> SearchStrategy[Registration]:
    """Whole registrations: a node and up to `max_shards` shards its agent runs."""
    return _registrations(max_shards, compute)


def adapters() -> SearchStrategy[Adapter]:
    """LoRA adapters."""
    return _build(Adapter)


def profiles() -> SearchStrategy[Profile]:
    """Engine profiles."""
    return _build(Profile, adapters=_small_list(adapters(), 3))


def shard_specs(*, compute: bool | None = None) -> SearchStrategy[ShardSpec]:
    """Shard specs; `compute=False` for those a `StartShard` carries (it has no compute)."""
    return _build(
        ShardSpec,
        gpu_indices=_small_list(st.integers(0, 7), 8),
        profile=profiles(),
        compute=st.none() | computes() if compute is None else computes() if compute else st.none(),
    )


@st.composite
def _commands(draw: st.DrawFn) -> ShardCommand:
    spec = draw(shard_specs(compute=False))
    return ShardCommand(
        replica_id=spec.replica_id,
        shard_id=spec.shard_id,
        spec=spec,
        startup_timeout=draw(_millis_deltas()),
        pool=spec.pool,
        fabric=spec.fabric,
        profile_fp=spec.profile_fp,
    )


def shard_commands() -> SearchStrategy[ShardCommand]:
    """Start commands, consistent with their spec (one wire field holds both copies)."""
    return _commands()


def stop_commands() -> SearchStrategy[StopCommand]:
    """Stop commands."""
    return _build(StopCommand, grace=_millis_deltas())


def shard_reports() -> SearchStrategy[ShardReport]:
    """Shard state reports."""
    return _build(ShardReport, state=states(), compute=st.none() | computes())


def heartbeats() -> SearchStrategy[Heartbeat]:
    """Heartbeats, timestamps in UTC to the millisecond."""
    return _build(Heartbeat, sent_at=_epoch_datetimes())


def acks() -> SearchStrategy[Ack]:
    """Acknowledgements of registrations."""
    return _build(Ack)


_BY_TYPE: dict[type, Any] = {
    Host: hosts,
    GPUFabric: gpu_fabrics,
    GPUHealth: lambda: _build(GPUHealth),
    MIGDevice: mig_devices,
    GPU: gpus,
    IMEX: imexes,
    LocalWeights: local_weights,
    Storage: storages,
    FabricAttachment: fabric_attachments,
    Inventory: inventories,
    Node: nodes,
    Compute: computes,
    AdoptedShard: adopted_shards,
    Registration: registrations,
    Adapter: adapters,
    Profile: profiles,
    ShardSpec: lambda: shard_specs(compute=False),
    ShardCommand: shard_commands,
    StopCommand: stop_commands,
    ShardReport: shard_reports,
    Heartbeat: heartbeats,
    Ack: acks,
}


def domain_values(cls: type[T]) -> SearchStrategy[T]:
    """The strategy for the domain model `cls`, with its defaults.

    For `ShardSpec` these are specs a `StartShard` can carry (no compute);
    ask `shard_specs()` for the others.
    """
    return _BY_TYPE[cls]()  # type: ignore[no-any-return]


def wire_messages(cls: type[Any]) -> SearchStrategy[Any]:
    """`llmgw_wire.v1` messages that decode to values of the domain model `cls`."""
    return domain_values(cls).map(converter.unstructure)
