"""Hypothesis strategies for every domain model and wire message (the `testing` extra).

Two rules shape every value:

* **values span the wire**: ints cover their whole int32 or int64 range,
  strings any Unicode that UTF-8 carries, durations and times any whole
  millisecond the domain types hold; so a handler meets the extremes a peer
  may really send;
* **shapes are realistic**: a node has 0 to 8 cards indexed from 0, NVLink
  peers among its own cards (all of them, pairs, or none), some cards split
  into MIG slices that name their parent, a few shards per node on the node's
  own GPUs, commands consistent with their spec.

Options say what a test needs, with the same meaning everywhere: `mig`,
`fabric` and `compute` take True (always present), False (never: what an
older agent sends) or None (either, the default); `unknown_states` puts shard
state numbers this version does not know into wire messages, as a newer
agent may send them.

A service fuzzes its own handlers with them (the examples below assume these
two imports)::

    from hypothesis import given
    from llmgw_wire.testing import strategies as lst

    @given(lst.registrations())
    def test_my_control_plane_adopts_every_shard(registration):
        node, shards = my_service.handle(registration)
        assert len(shards) == len(registration.shards)

`domain_values(T, **options)` gives the strategy for any domain model `T`,
`wire_messages(T, **options)` the `llmgw_wire.v1` messages that decode to it,
and `mutated_bytes(T)` corrupted bytes for what reads from the network.

`st.from_type` of the library's types draws these strategies without this
module being imported first: hypothesis registers them when it is imported,
and imports this module the first time one is asked for
(`register_strategies`).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from hypothesis import strategies as st

from llmgw_wire.codec import converter, encode, wire_class
from llmgw_wire.codec._classes import betterproto2_classes
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
from llmgw_wire.errors import Redacted
from llmgw_wire.mapping import (
    ENVELOPES,
    STATE_MODELS,
    STATE_NUMBERS,
    Envelope,
    is_secret,
    pair_for,
)
from llmgw_wire.mapping._rules import (
    EPOCH,
    INT_RANGES,
    EpochMillis,
    Messages,
    Millis,
    Repeated,
    Rule,
    Scalar,
    StateEnum,
)
from llmgw_wire.testing import _registry

if TYPE_CHECKING:
    from collections.abc import Callable

    import betterproto2
    from hypothesis.strategies import SearchStrategy
    from hypothesis.vendor.pretty import RepresentationPrinter

    from llmgw_wire import v1

__all__ = [
    "KNOWN_STATE_NUMBERS",
    "acks",
    "adapters",
    "adopted_shards",
    "agent_messages",
    "computes",
    "control_messages",
    "domain_values",
    "extreme_values",
    "fabric_attachments",
    "gpu_fabrics",
    "gpu_healths",
    "gpus",
    "heartbeats",
    "hosts",
    "imexes",
    "int32s",
    "int64s",
    "inventories",
    "local_weights",
    "mig_devices",
    "mutated_bytes",
    "nodes",
    "profiles",
    "register_strategies",
    "registrations",
    "shard_commands",
    "shard_reports",
    "shard_specs",
    "states",
    "stop_commands",
    "storages",
    "texts",
    "unknown_state_numbers",
    "wire_messages",
]

T = TypeVar("T")
M = TypeVar("M", bound="betterproto2.Message")
F = TypeVar("F", bound="Callable[..., SearchStrategy[object]]")


def _cached(fn: F) -> F:
    """Build each strategy once per arguments: composites draw from them in loops.

    Only plain arguments (options, sizes, classes) make a key; a call given a
    strategy (`adopted_shards(st.just(...))`) builds a new one each time.
    """
    memo: dict[object, SearchStrategy[object]] = {}

    @functools.wraps(fn)
    def cached(*args: object, **kwargs: object) -> SearchStrategy[object]:
        values = (*args, *kwargs.values())
        if not all(v is None or isinstance(v, (bool, int, str, type)) for v in values):
            return fn(*args, **kwargs)
        key = (args, tuple(sorted(kwargs.items())))
        if key not in memo:
            memo[key] = fn(*args, **kwargs)
        return memo[key]

    return cached  # type: ignore[return-value]


#: The wire numbers of `ShardStatus.State` this version knows (STATE_PENDING..STATE_FAILED).
KNOWN_STATE_NUMBERS = frozenset(STATE_NUMBERS.values())

#: Most MIG slices one card is split into (7 on an A100 or H100).
_MAX_SLICES = 7


# --- scalars ----------------------------------------------------------------------


@_cached
def texts(max_size: int = 24) -> SearchStrategy[str]:
    """Strings the wire carries: any Unicode that encodes to UTF-8 (no lone surrogates).

    Example::

        from llmgw_wire import Ack, decode, encode

        @given(lst.texts())
        def test_any_detail_crosses_the_wire(detail):
            assert decode(encode(Ack(detail=detail)), Ack).detail == detail
    """
    return st.text(st.characters(exclude_categories=["Cs"]), max_size=max_size)


@_cached
def int32s() -> SearchStrategy[int]:
    """Any int an int32 wire field carries, extremes included.

    Example::

        from llmgw_wire import Ack, decode, encode

        @given(lst.int32s())
        def test_any_int32_crosses_the_wire(n):
            assert decode(encode(Ack(adopted_shards=n)), Ack).adopted_shards == n
    """
    lo, hi = INT_RANGES["int32"]
    return st.integers(lo, hi)


@_cached
def int64s() -> SearchStrategy[int]:
    """Any int an int64 wire field carries, extremes included.

    Example::

        from llmgw_wire import LocalWeights, decode, encode

        @given(lst.int64s())
        def test_any_size_crosses_the_wire(size):
            weights = LocalWeights(path="/models/x", size_bytes=size)
            assert decode(encode(weights), LocalWeights) == weights
    """
    lo, hi = INT_RANGES["int64"]
    return st.integers(lo, hi)


@_cached
def unknown_state_numbers() -> SearchStrategy[int]:
    """Wire state numbers this version does not know: 0 (unspecified) and any int32 beyond 1..7.

    Every one of them decodes as `State.FAILED`.

    Example::

        from llmgw_wire import State, state_from_wire

        @given(lst.unknown_state_numbers())
        def test_an_unknown_state_is_never_healthy(number):
            assert state_from_wire(number) is State.FAILED
    """
    return int32s().filter(lambda n: n not in KNOWN_STATE_NUMBERS)


@_cached
def states() -> SearchStrategy[State]:
    """Shard states.

    Example::

        from llmgw_wire import state_from_wire, state_to_wire

        @given(lst.states())
        def test_every_state_has_a_wire_number(state):
            assert state_from_wire(state_to_wire(state)) is state
    """
    return st.sampled_from(State)


def _small_list(strategy: SearchStrategy[T], max_size: int = 4) -> SearchStrategy[tuple[T, ...]]:
    return st.lists(strategy, max_size=max_size).map(tuple)


def _str_maps(max_size: int = 4) -> SearchStrategy[dict[str, str]]:
    return st.dictionaries(texts(12), texts(), max_size=max_size)


def _millis_deltas() -> SearchStrategy[dt.timedelta]:
    # Whole milliseconds, within both int64 and timedelta's own range.
    ms = dt.timedelta(milliseconds=1)
    return st.integers(dt.timedelta.min // ms, dt.timedelta.max // ms).map(
        lambda n: dt.timedelta(milliseconds=n)
    )


def _epoch_datetimes() -> SearchStrategy[dt.datetime]:
    ms = dt.timedelta(milliseconds=1)
    lo = (dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc) - EPOCH) // ms
    hi = (dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc) - EPOCH) // ms
    return st.integers(lo, hi).map(lambda n: EPOCH + dt.timedelta(milliseconds=n))


def _optional(flag: bool | None, strategy: SearchStrategy[T]) -> SearchStrategy[T | None]:
    """`strategy` or None, as the tri-state options say: True always, False never."""
    if flag is None:
        return st.none() | strategy
    return strategy if flag else st.none()


def _build(cls: type[T], **overrides: SearchStrategy[object]) -> SearchStrategy[T]:
    """`cls` with every attribute drawn: from `overrides`, else by its mapping rule or type.

    The mapping's rule says what the wire carries (an int64's range, whole
    milliseconds), so a new field is drawn in its real range without a
    change here.
    """
    try:
        rules = {rule.attr: rule for rule in pair_for(cls).rules}
    except KeyError:  # a model with no pair of its own, such as Inventory
        rules = {}
    fields: dict[str, SearchStrategy[Any]] = {}  # each of its attribute's type
    for field in attrs.fields(attrs.resolve_types(cls)):  # type: ignore[type-var,arg-type]
        if field.name in overrides:
            fields[field.name] = overrides[field.name]
        else:
            by_rule = _by_rule(rules.get(field.name))
            fields[field.name] = by_rule if by_rule is not None else _by_annotation(field.type)
            if is_secret(cls, field.name):
                fields[field.name] = _secret_texts(fields[field.name])
    return st.builds(cls, **fields)


@st.composite
def _secret_texts(draw: st.DrawFn, texts: SearchStrategy[str]) -> str:
    """Strings from `texts`, for a secret: hypothesis's failure report never shows one.

    That report ("Falsifying example", "Failing test case") prints how a value
    was built, argument by argument, with its own printer rather than the
    model's repr. Each secret drawn is registered with that printer as
    `<secret str, not shown>`; the value stays a plain `str`.
    """
    text = draw(texts)
    try:
        from hypothesis.control import current_build_context
        from hypothesis.vendor.pretty import IDKey

        printers = current_build_context().known_object_printers
    except (ImportError, AttributeError):  # a hypothesis without the printer's registry
        return text
    printers[IDKey(text)].append(_print_secret)
    return text


def _print_secret(value: object, printer: RepresentationPrinter, cycle: bool) -> None:
    printer.text(repr(Redacted("str")))


def _by_rule(rule: Rule | None) -> SearchStrategy[object] | None:
    """What the wire can carry for an attribute of `rule`, where the type alone does not say."""
    if isinstance(rule, Scalar) and rule.kind in INT_RANGES:
        return int64s() if rule.kind == "int64" else int32s()
    if isinstance(rule, Repeated) and rule.kind in INT_RANGES:
        return _small_list(int64s() if rule.kind == "int64" else int32s(), 8)
    if isinstance(rule, Millis):
        return _millis_deltas()
    if isinstance(rule, EpochMillis):
        return _epoch_datetimes()
    return None


def _by_annotation(annotation: object) -> SearchStrategy[object]:
    return _annotation_strategies()[annotation]


@functools.cache
def _annotation_strategies() -> dict[object, SearchStrategy[object]]:
    return {
        str: texts(),
        int: int32s(),
        bool: st.booleans(),
        Sequence[str]: _small_list(texts()),
        Sequence[int]: _small_list(int32s(), 8),
        Mapping[str, str]: _str_maps(),
    }


# --- discovery ----------------------------------------------------------------------


@_cached
def hosts() -> SearchStrategy[Host]:
    """Hosts, with a handful of CPU flags.

    Example::

        from llmgw_wire import Host, decode, encode

        @given(lst.hosts())
        def test_hosts_cross_the_wire(host):
            assert decode(encode(host), Host) == host
    """
    return _build(Host)


@_cached
def gpu_fabrics() -> SearchStrategy[GPUFabric]:
    """NVLink fabric memberships; `state` is never empty (empty means no fabric).

    Example::

        @given(lst.gpu_fabrics())
        def test_every_fabric_has_a_state(fabric):
            assert fabric.state
    """
    return _build(GPUFabric, state=texts().filter(bool))


@_cached
def gpu_healths() -> SearchStrategy[GPUHealth]:
    """GPU health readings: ECC errors, temperature, problems found.

    Example::

        from llmgw_wire import GPU, decode, encode

        @given(lst.gpu_healths())
        def test_health_travels_with_its_gpu(health):
            assert decode(encode(GPU(health=health)), GPU).health == health
    """
    return _build(GPUHealth)


@_cached
def mig_devices() -> SearchStrategy[MIGDevice]:
    """MIG slices' parentage, any values (see `nodes` for slices consistent with a node).

    Example::

        from llmgw_wire import GPU, decode, encode

        @given(lst.mig_devices())
        def test_a_slice_stays_a_slice(mig):
            assert decode(encode(GPU(mig=mig)), GPU).mig == mig
    """
    return _build(MIGDevice)


@_cached
def gpus(*, mig: bool | None = None, fabric: bool | None = None) -> SearchStrategy[GPU]:
    """GPUs, on their own: a whole card, or a MIG slice when `mig` is set.

    `mig` and `fabric` force the slice or fabric present (True) or absent
    (False); `mig=False` is what an agent older than MIG support sends. NVLink
    peers are card indices 0..7; see `nodes` for GPUs consistent with a node.

    Example::

        from llmgw_wire import GPU, decode, encode

        @given(lst.gpus(mig=False))
        def test_a_whole_card_stays_whole(gpu):
            assert decode(encode(gpu), GPU).mig is None
    """
    return _build(
        GPU,
        nvlink_peers=_small_list(st.integers(0, 7), 7),
        health=gpu_healths(),
        fabric=_optional(fabric, gpu_fabrics()),
        mig=_optional(mig, mig_devices()),
    )


@_cached
def imexes() -> SearchStrategy[IMEX]:
    """IMEX daemon states.

    Example::

        from llmgw_wire import IMEX, decode, encode

        @given(lst.imexes())
        def test_imex_crosses_the_wire(imex):
            assert decode(encode(imex), IMEX) == imex
    """
    return _build(IMEX)


@_cached
def local_weights() -> SearchStrategy[LocalWeights]:
    """Weights on disk, sizes in bytes over the whole int64 range.

    Example::

        from llmgw_wire import LocalWeights, decode, encode

        @given(lst.local_weights())
        def test_weights_cross_the_wire(weights):
            assert decode(encode(weights), LocalWeights) == weights
    """
    return _build(LocalWeights)


@_cached
def storages() -> SearchStrategy[Storage]:
    """Filesystems, sizes in bytes over the whole int64 range.

    Example::

        from llmgw_wire import Storage, decode, encode

        @given(lst.storages())
        def test_storage_crosses_the_wire(storage):
            assert decode(encode(storage), Storage) == storage
    """
    return _build(Storage)


@_cached
def fabric_attachments() -> SearchStrategy[FabricAttachment]:
    """Network fabric attachments (InfiniBand, RoCE) with their HCAs.

    Example::

        from llmgw_wire import FabricAttachment, decode, encode

        @given(lst.fabric_attachments())
        def test_attachments_cross_the_wire(attachment):
            assert decode(encode(attachment), FabricAttachment) == attachment
    """
    return _build(FabricAttachment)


@st.composite
def _node_gpus(
    draw: st.DrawFn, max_gpus: int, mig: bool | None, fabric: bool | None
) -> tuple[GPU, ...]:
    # Lists rather than a count, so that sizes lean small and shrink well.
    cards = draw(
        st.lists(gpus(mig=False, fabric=fabric), min_size=1 if mig else 0, max_size=max_gpus)
    )
    split: set[int] = set()
    if cards and (mig or (mig is None and draw(st.booleans()))):
        # One or two cards split, so a node stays a few dozen GPUs at most.
        indices = st.integers(0, len(cards) - 1)
        split = set(draw(st.lists(indices, min_size=1, max_size=2)))
    whole = [i for i in range(len(cards)) if i not in split]
    # NVLink islands: every card with every other (HGX), pairs (bridges), or none.
    island = draw(st.sampled_from([len(whole), 2, 1])) or 1
    out: list[GPU] = []
    for index, card in enumerate(cards):
        if index in split:
            slices = draw(st.lists(mig_devices(), min_size=1, max_size=_MAX_SLICES))
            for device, mig_device in enumerate(slices):
                parent = attrs.evolve(
                    mig_device,
                    parent_index=index,
                    parent_uuid=card.uuid,
                    parent_memory_total_mb=card.memory_total_mb,
                    device=device,
                )
                uuid = f"MIG-{device}-{card.uuid}"
                out.append(
                    attrs.evolve(
                        card, index=index, uuid=uuid, nvlink_peers=(), fabric=None, mig=parent
                    )
                )
        else:
            position = whole.index(index)
            first = position - position % island
            peers = tuple(i for i in whole[first : first + island] if i != index)
            out.append(attrs.evolve(card, index=index, nvlink_peers=peers))
    return tuple(out)


def _check_max_gpus(max_gpus: int, mig: bool | None) -> None:
    if max_gpus < (1 if mig else 0):
        raise ValueError(f"max_gpus={max_gpus} leaves no card to split into MIG slices")


@_cached
def nodes(
    *, max_gpus: int = 8, mig: bool | None = None, fabric: bool | None = None
) -> SearchStrategy[Node]:
    """Nodes as a registration makes them: READY, with 0 to `max_gpus` cards.

    Cards are indexed from 0; NVLink peers are cards of the same node, all of
    them, pairs or none; up to two cards are split into 1 to 7 MIG slices that
    carry their card's index and parent. `mig=True` splits at least one card,
    `mig=False` none (an agent older than MIG support); `fabric` is passed on
    to the whole cards.

    Example::

        @given(lst.nodes(mig=False))
        def test_an_old_agents_cards_are_whole_and_numbered(node):
            assert [gpu.index for gpu in node.gpus] == list(range(len(node.gpus)))
            assert all(gpu.mig is None for gpu in node.gpus)
    """
    _check_max_gpus(max_gpus, mig)
    return _build(
        Node,
        state=st.just(NodeState.READY),
        host=hosts(),
        weights=_small_list(local_weights(), 3),
        storage=_small_list(storages(), 3),
        gpus=_node_gpus(max_gpus, mig, fabric),
        imex=imexes(),
        fabrics=_small_list(fabric_attachments(), 3),
    )


@_cached
def inventories(
    *, max_gpus: int = 8, mig: bool | None = None, fabric: bool | None = None
) -> SearchStrategy[Inventory]:
    """What an agent discovers on its host; GPUs laid out as in `nodes`.

    Example::

        from llmgw_wire import node_from_register, register_from_inventory

        @given(lst.inventories())
        def test_an_agent_registers_every_gpu(inventory):
            register = register_from_inventory("node-1", "host-1", "10.0.0.1", "1.0", {}, inventory)
            assert node_from_register(register).gpus == inventory.gpus
    """
    _check_max_gpus(max_gpus, mig)
    return _build(
        Inventory,
        memory_total_mb=int64s(),
        host=hosts(),
        weights=_small_list(local_weights(), 3),
        storage=_small_list(storages(), 3),
        gpus=_node_gpus(max_gpus, mig, fabric),
        imex=imexes(),
    )


# --- shards -------------------------------------------------------------------------


@_cached
def computes() -> SearchStrategy[Compute]:
    """Compute placements: a backend, devices, layers offloaded of total.

    Example::

        from llmgw_wire import Compute, decode, encode

        @given(lst.computes())
        def test_compute_crosses_the_wire(compute):
            assert decode(encode(compute), Compute) == compute
    """
    return _build(Compute)


@functools.cache
def _shards(compute: bool | None) -> SearchStrategy[AdoptedShard]:
    """Adopted shards but for their node and GPUs, which `_adopted` draws."""
    return _build(
        AdoptedShard,
        node_id=st.just(""),
        rank=st.sampled_from([0, 0, 1, 2]) | int32s(),
        gpu_indices=st.just(()),
        state=states(),
        compute=_optional(compute, computes()),
        endpoint=st.none(),
    )


@st.composite
def _adopted(
    draw: st.DrawFn,
    node_id: SearchStrategy[str],
    compute: bool | None,
    gpu_indices: SearchStrategy[tuple[int, ...]],
) -> AdoptedShard:
    shard = draw(_shards(compute))
    shard = attrs.evolve(shard, node_id=draw(node_id), gpu_indices=draw(gpu_indices))
    if shard.rank == 0 and draw(st.booleans()):
        leader = draw(texts().filter(bool))
        shard = attrs.evolve(shard, endpoint=f"http://{leader}:{shard.http_port}")
    return shard


@_cached
def adopted_shards(
    node_id: SearchStrategy[str] | None = None, *, compute: bool | None = None
) -> SearchStrategy[AdoptedShard]:
    """Adopted shards; leaders (rank 0) sometimes with an endpoint.

    `node_id` defaults to "", what a shard decoded on its own (outside a
    registration) has. `compute=False` is an agent older than compute
    reporting, or one whose engine has not said yet.

    Example::

        @given(lst.adopted_shards())
        def test_only_leaders_have_an_endpoint(shard):
            assert shard.endpoint is None or shard.rank == 0
    """
    return _adopted(
        st.just("") if node_id is None else node_id,
        compute,
        _small_list(st.integers(0, 7), 8),
    )


@st.composite
def _registrations(
    draw: st.DrawFn,
    max_gpus: int,
    max_shards: int,
    mig: bool | None,
    fabric: bool | None,
    compute: bool | None,
) -> Registration:
    node = draw(nodes(max_gpus=max_gpus, mig=mig, fabric=fabric))
    cards = sorted({gpu.index for gpu in node.gpus})
    on_node = (
        st.lists(st.sampled_from(cards), unique=True).map(lambda xs: tuple(sorted(xs)))
        if cards
        else st.just(())
    )
    shard = _adopted(st.just(node.id), compute, on_node)
    return Registration(node, draw(_small_list(shard, max_shards)))


@_cached
def registrations(
    *,
    max_gpus: int = 8,
    max_shards: int = 4,
    mig: bool | None = None,
    fabric: bool | None = None,
    compute: bool | None = None,
) -> SearchStrategy[Registration]:
    """Whole registrations: a node (as `nodes`) and up to `max_shards` shards on its GPUs.

    Each shard belongs to the node and runs on some of its cards. The oldest
    agents send `registrations(mig=False, compute=False)`.

    Example::

        from llmgw_wire import Registration, decode, encode

        @given(lst.registrations(mig=False, compute=False))
        def test_an_old_agents_registration_crosses_the_wire(registration):
            assert decode(encode(registration), Registration) == registration
    """
    _check_max_gpus(max_gpus, mig)
    return _registrations(max_gpus, max_shards, mig, fabric, compute)


@_cached
def adapters() -> SearchStrategy[Adapter]:
    """LoRA adapters.

    Example::

        from llmgw_wire import Adapter, decode, encode

        @given(lst.adapters())
        def test_adapters_cross_the_wire(adapter):
            assert decode(encode(adapter), Adapter) == adapter
    """
    return _build(Adapter)


@_cached
def profiles() -> SearchStrategy[Profile]:
    """Engine profiles, with up to 3 adapters.

    Example::

        from llmgw_wire import Profile, decode, encode

        @given(lst.profiles())
        def test_profiles_cross_the_wire(profile):
            assert decode(encode(profile), Profile) == profile
    """
    return _build(Profile, adapters=_small_list(adapters(), 3))


@_cached
def shard_specs(*, compute: bool | None = None) -> SearchStrategy[ShardSpec]:
    """Shard specs; `compute=False` for those a `StartShard` carries (it has no compute).

    Example::

        @given(lst.shard_specs(compute=False))
        def test_the_api_key_stays_out_of_the_repr(spec):
            assert "api_key=<secret str, not shown>" in repr(spec) or not spec.api_key
    """
    return _build(
        ShardSpec,
        gpu_indices=_small_list(st.integers(0, 7), 8),
        profile=profiles(),
        compute=_optional(compute, computes()),
    )


def _carried_shard_specs(*, compute: bool | None = False) -> SearchStrategy[ShardSpec]:
    """`shard_specs`, by default those a `StartShard` can carry: `domain_values(ShardSpec)`."""
    return shard_specs(compute=compute)


@st.composite
def _commands(draw: st.DrawFn) -> ShardCommand:
    spec = draw(shard_specs(compute=False))
    return ShardCommand(spec, startup_timeout=draw(_millis_deltas()))


@_cached
def shard_commands() -> SearchStrategy[ShardCommand]:
    """Start commands, consistent with their spec (one wire field holds both copies).

    Example::

        from llmgw_wire import shard_spec_from_start, start_shard_from_command

        @given(lst.shard_commands())
        def test_an_agent_gets_the_spec_it_was_sent(command):
            spec, timeout = shard_spec_from_start(start_shard_from_command(command))
            assert (spec, timeout) == (command.spec, command.startup_timeout)
    """
    return _commands()


@_cached
def stop_commands() -> SearchStrategy[StopCommand]:
    """Stop commands, grace periods of any whole millisecond (negative ones too).

    Example::

        from llmgw_wire import StopCommand, decode, encode

        @given(lst.stop_commands())
        def test_stop_commands_cross_the_wire(command):
            assert decode(encode(command), StopCommand) == command
    """
    return _build(StopCommand)


@_cached
def shard_reports(*, compute: bool | None = None) -> SearchStrategy[ShardReport]:
    """Shard state reports; `compute` as in `adopted_shards`.

    Example::

        from llmgw_wire import ShardReport, decode, encode

        @given(lst.shard_reports(compute=False))
        def test_a_report_without_compute_has_none(report):
            assert decode(encode(report), ShardReport).compute is None
    """
    return _build(ShardReport, state=states(), compute=_optional(compute, computes()))


@_cached
def heartbeats() -> SearchStrategy[Heartbeat]:
    """Heartbeats, timestamps in UTC to the millisecond, years 1 to 9999.

    Example::

        import datetime as dt

        @given(lst.heartbeats())
        def test_heartbeats_are_in_utc(heartbeat):
            assert heartbeat.sent_at.utcoffset() == dt.timedelta(0)
    """
    return _build(Heartbeat)


@_cached
def acks() -> SearchStrategy[Ack]:
    """Acknowledgements of registrations.

    Example::

        from llmgw_wire import Ack, decode, encode

        @given(lst.acks())
        def test_acks_cross_the_wire(ack):
            assert decode(encode(ack), Ack) == ack
    """
    return _build(Ack)


# --- by type, and on the wire ---------------------------------------------------------------

# Which function draws which model is `_registry`'s table, which hypothesis reads
# without importing this module.
_BY_TYPE: dict[type, Callable[..., SearchStrategy[Any]]] = {  # cls -> SearchStrategy[cls]
    model: globals()[name] for model, name in _registry.model_strategies().items()
}


def domain_values(cls: type[T], **options: object) -> SearchStrategy[T]:
    """The strategy for the domain model `cls`, with that strategy's `options`.

    `domain_values(GPU, mig=False)` is `gpus(mig=False)`. For `ShardSpec` the
    default is specs a `StartShard` can carry (`compute=False`).

    Raises:
        KeyError: `cls` is not a domain model of this library.
        TypeError: an option that `cls`'s strategy does not take.

    Example::

        from llmgw_wire import Registration, decode, encode

        @given(lst.domain_values(Registration, compute=False))
        def test_registrations_cross_the_wire(registration):
            assert decode(encode(registration), Registration) == registration
    """
    return _BY_TYPE[cls](**options)


def _any_deltas() -> SearchStrategy[dt.timedelta]:
    # Every timedelta, its extremes and fractions of a millisecond included.
    return st.timedeltas() | st.sampled_from([dt.timedelta.min, dt.timedelta.max])


def _any_aware_datetimes() -> SearchStrategy[dt.datetime]:
    # Any offset, up to the edges of the datetime range, where the instant in
    # UTC can fall outside what a datetime holds.
    offsets = st.integers(-1439, 1439).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
    edges = st.sampled_from([dt.datetime.min, dt.datetime.max, dt.datetime(9999, 12, 31, 23, 59)])
    naive = st.datetimes() | edges | edges.map(lambda d: d.replace(microsecond=0))
    return st.builds(lambda d, tz: d.replace(tzinfo=tz), naive, offsets)


@st.composite
def _registration_with_a_shard_of_another_node(draw: st.DrawFn) -> Registration:
    registration = draw(registrations(max_gpus=2, max_shards=2))
    if not registration.shards:
        return registration
    other = draw(texts(12))
    shards = (attrs.evolve(registration.shards[0], node_id=other), *registration.shards[1:])
    return attrs.evolve(registration, shards=shards)


@_cached
def extreme_values(cls: type[T]) -> SearchStrategy[T]:
    """Domain values at and past the edges of what the wire and the domain hold.

    `encode` may refuse some (with an `EncodeError`: a timedelta or a
    datetime beyond the limits, a fraction of a millisecond, a shard whose
    node id is not its node's); what it accepts, `decode` must give back
    equal. `domain_values` draws only values that cross the wire.

    Example::

        from llmgw_wire import EncodeError, Heartbeat, decode, encode

        @given(lst.extreme_values(Heartbeat))
        def test_what_encode_accepts_decodes_equal(heartbeat):
            try:
                data = encode(heartbeat)
            except EncodeError:
                return
            assert decode(data, Heartbeat) == heartbeat
    """
    base: SearchStrategy[Any] = domain_values(cls)
    extreme: SearchStrategy[Any] = base
    if cls is Heartbeat:
        extreme = st.builds(Heartbeat, texts(12), _any_aware_datetimes())
    elif cls is ShardCommand:
        extreme = st.builds(attrs.evolve, base, startup_timeout=_any_deltas())
    elif cls is StopCommand:
        extreme = st.builds(attrs.evolve, base, grace=_any_deltas())
    elif cls is Registration:
        extreme = _registration_with_a_shard_of_another_node()
    return base | extreme


def _state_field(model: type) -> str:
    """Where the shard states of `model`'s message are: "" in the message itself, or a field."""
    rules = pair_for(model).rules
    if any(isinstance(rule, StateEnum) for rule in rules):
        return ""
    return next(rule.wire for rule in rules if isinstance(rule, Messages))


# The models whose messages carry a shard state, and where it is in them.
_STATE_FIELDS: dict[type, str] = {model: _state_field(model) for model in STATE_MODELS}


@st.composite
def _with_states(
    draw: st.DrawFn, messages: SearchStrategy[M], field: str, unknown: bool | None
) -> M:
    from llmgw_wire.v1 import ShardStatusState

    message = draw(messages)
    items: Sequence[Any] = getattr(message, field) if field else [message]
    for item in items:
        if unknown or (unknown is None and draw(st.booleans())):
            item.state = ShardStatusState(draw(unknown_state_numbers()))
    return message


@_cached
def wire_messages(
    cls: type, *, unknown_states: bool | None = False, **options: object
) -> SearchStrategy[betterproto2.Message]:
    """`llmgw_wire.v1` messages that decode to values of the domain model `cls`.

    `options` go to `cls`'s strategy (`wire_messages(Registration,
    compute=False)` is an older agent's `Register`). `unknown_states=True`
    gives every shard state in the message a number this version does not
    know (a newer agent's), and None a mix; each decodes as `State.FAILED`.

    Raises:
        ValueError: `unknown_states` for a message that carries no shard state.

    Example::

        from llmgw_wire import Registration, State, converter

        @given(lst.wire_messages(Registration, unknown_states=True))
        def test_a_newer_agents_states_are_failed(register):
            registration = converter.structure(register, Registration)
            assert all(s.state is State.FAILED for s in registration.shards)
    """
    messages = domain_values(cls, **options).map(converter.unstructure)
    if unknown_states is False:
        return messages
    if cls not in _STATE_FIELDS:
        raise ValueError(f"{cls.__name__}'s wire message carries no shard state")
    return _with_states(messages, _STATE_FIELDS[cls], unknown_states)


@_cached
def agent_messages() -> SearchStrategy[v1.AgentMessage]:
    """`v1.AgentMessage` envelopes: a registration, a shard report or a heartbeat.

    Sometimes none of them, which is what a newer agent's new kind of message
    looks like to this version: a receiver skips it.

    Example::

        from llmgw_wire import Registration, converter

        @given(lst.agent_messages())
        def test_a_registration_opens_as_a_domain_value(envelope):
            if envelope.register is not None:
                registration = converter.structure(envelope.register, Registration)
                assert registration.node.id == envelope.register.node_id
    """
    return _envelopes(ENVELOPES[0], none_weight=1)


@_cached
def control_messages() -> SearchStrategy[v1.ControlMessage]:
    """`v1.ControlMessage` envelopes: a start or stop command or an ack, or (rarely) none.

    Example::

        from llmgw_wire import v1, decode

        @given(lst.control_messages())
        def test_envelopes_cross_the_wire(envelope):
            assert decode(bytes(envelope), v1.ControlMessage) == envelope
    """
    return _envelopes(ENVELOPES[1], none_weight=1)


def _envelopes(envelope: Envelope, none_weight: int) -> SearchStrategy[Any]:
    """Envelopes with each member of `envelope` in turn, and with none (a newer peer's)."""
    wire = betterproto2_classes()[envelope.wire]

    def wrap(member: str) -> Callable[[betterproto2.Message], betterproto2.Message]:
        return lambda message: wire(**{member: message})

    members = [wire_messages(domain).map(wrap(member)) for member, domain in envelope.members]
    return st.one_of(*members, *[st.builds(wire)] * none_weight)


# --- corrupted bytes -----------------------------------------------------------------


@st.composite
def _mutated(draw: st.DrawFn, valid: SearchStrategy[bytes], max_mutations: int) -> bytes:
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(1, max_mutations))):
        kind = draw(st.sampled_from(["flip", "truncate", "splice", "duplicate", "insert"]))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[at:]
        elif kind == "splice":
            other = draw(valid)
            start = draw(st.integers(0, len(other)))
            data[at:] = other[start:]
        elif kind == "duplicate":
            end = draw(st.integers(at, len(data)))
            data[at:at] = data[at:end]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
    return bytes(data)


@_cached
def mutated_bytes(cls: type, *, max_mutations: int = 3) -> SearchStrategy[bytes]:
    """Bytes that start as a valid wire message for `cls` and are then corrupted.

    Each draw applies 1 to `max_mutations` of: a bit flip, a truncation, a
    splice with another valid message, a duplicated run, inserted random
    bytes. Many stay valid messages (protobuf is forgiving), many do not: a
    reader must either decode them or raise `DecodeError`, never anything
    else.

    Example::

        from llmgw_wire import DecodeError, Registration, decode

        @given(lst.mutated_bytes(Registration))
        def test_garbage_decodes_or_raises_decode_error(data):
            try:
                registration = decode(data, Registration)
            except DecodeError:
                return
            assert isinstance(registration, Registration)
    """
    wire_class(cls)  # a TypeError now rather than at draw time
    return _mutated(domain_values(cls).map(encode), max_mutations)


# --- registered with hypothesis ----------------------------------------------------


def register_strategies() -> None:
    """Make these strategies hypothesis's own for the library's types, for `st.from_type`.

    `st.from_type(T)` (and `st.builds` of a class with `T` attributes, and
    `@given(x=...)` inferred from annotations) draws `domain_values(T)` for
    every domain model `T`, `states()` for `State`, `wire_messages(T)` for
    the `llmgw_wire.v1` class of `T`, and `agent_messages()` /
    `control_messages()` for the envelopes: only values that cross the wire.

    There is seldom a need to call it: hypothesis registers the same
    strategies when it is imported (the library's `hypothesis` entry point),
    each resolved, and this module imported, the first time hypothesis is
    asked for its type. Calling it registers them all at once, over any
    other strategy registered for these types (a project's own included);
    running it again changes nothing. Where hypothesis's plugins are turned
    off (`HYPOTHESIS_NO_PLUGINS`), importing this module runs it.

    Example::

        from hypothesis import strategies as st
        import llmgw_wire as wire

        @given(st.from_type(wire.Compute))
        def test_computes_cross_the_wire(compute):
            assert wire.decode(wire.encode(compute), wire.Compute) == compute
    """
    for cls in _registry.registered():
        st.register_type_strategy(cls, _registered_strategy(cls))


@functools.cache
def _registered_strategy(cls: type) -> SearchStrategy[object]:
    """The strategy hypothesis draws for `cls`, one of the types of `_registry.registered()`."""
    drawn = _registry.registered()[cls]
    make = globals()[drawn.strategy]
    return make() if drawn.model is None else make(drawn.model)  # type: ignore[no-any-return]


# Hypothesis registered a resolver for each of these types when it was imported
# (`_registry`), unless its plugins are turned off: then they are registered here.
if not _registry.with_resolver:
    register_strategies()
