"""The public strategies: every model covered, each value as documented, every example runs."""

from __future__ import annotations

import inspect
import textwrap
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import llmgw_wire.domain
from llmgw_wire import (
    GPU,
    Ack,
    AdoptedShard,
    GPUFabric,
    NodeState,
    Registration,
    ShardReport,
    ShardSpec,
    State,
    converter,
    encode,
    state_from_wire,
    v1,
)
from llmgw_wire.mapping._rules import INT_RANGES
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.laws import MODELS

if TYPE_CHECKING:
    from collections.abc import Sequence

DOMAIN_MODELS = [
    getattr(llmgw_wire.domain, name)
    for name in llmgw_wire.domain.__all__
    if attrs.has(getattr(llmgw_wire.domain, name))
]
PUBLIC = [getattr(lst, name) for name in lst.__all__ if inspect.isfunction(getattr(lst, name))]


def _example(fn: Any) -> str:
    """The code block after `Example::` in `fn`'s docstring."""
    doc = inspect.getdoc(fn) or ""
    _, found, block = doc.partition("Example::\n")
    assert found, f"{fn.__name__} has no example"
    lines = []
    for line in block.splitlines():
        if line and not line.startswith(" "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


def test_every_domain_model_has_a_strategy() -> None:
    for model in DOMAIN_MODELS:
        lst.domain_values(model)


# The laws draw every model with a wire message of its own; these have none.
NOT_UNDER_LAWS = [model for model in DOMAIN_MODELS if model not in MODELS]


@pytest.mark.parametrize("model", NOT_UNDER_LAWS, ids=lambda m: m.__name__)
@given(data=st.data())
def test_models_without_a_wire_message_of_their_own(model: type, data: st.DataObject) -> None:
    assert isinstance(data.draw(lst.domain_values(model)), model)


def test_the_public_strategies_are_all_exported() -> None:
    assert lst.__all__ == sorted(lst.__all__)
    defined = {
        name
        for name, fn in vars(lst).items()
        if inspect.isfunction(fn) and fn.__module__ == lst.__name__ and not name.startswith("_")
    }
    assert defined <= set(lst.__all__)


@pytest.mark.parametrize("fn", PUBLIC, ids=lambda fn: fn.__name__)
def test_every_public_strategy_has_an_example_that_runs(fn: Any) -> None:
    """Pasted into a test module with the two imports of the module docstring, it passes."""
    namespace: dict[str, Any] = {"given": given, "lst": lst}
    exec(compile(_example(fn), f"<example of {fn.__name__}>", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0]()


# --- scalars --------------------------------------------------------------------------


@given(lst.texts(), lst.int32s(), lst.int64s())
def test_scalars_are_what_the_wire_carries(text: str, n32: int, n64: int) -> None:
    text.encode("utf-8")
    assert INT_RANGES["int32"][0] <= n32 <= INT_RANGES["int32"][1]
    assert INT_RANGES["int64"][0] <= n64 <= INT_RANGES["int64"][1]


@given(lst.unknown_state_numbers())
def test_unknown_state_numbers_are_not_known(number: int) -> None:
    assert number not in lst.KNOWN_STATE_NUMBERS
    assert INT_RANGES["int32"][0] <= number <= INT_RANGES["int32"][1]
    assert state_from_wire(number) is State.FAILED


def test_the_known_state_numbers_are_the_schemas() -> None:
    numbers = {int(value) for value in v1.ShardStatusState} - {0}
    assert numbers == lst.KNOWN_STATE_NUMBERS


# --- GPUs and nodes -------------------------------------------------------------------


@given(st.data())
def test_gpu_options(data: st.DataObject) -> None:
    assert data.draw(lst.gpus(mig=True)).mig is not None
    assert data.draw(lst.gpus(mig=False)).mig is None
    fabric = data.draw(lst.gpus(fabric=True)).fabric
    assert fabric is not None
    assert fabric.state
    assert data.draw(lst.gpus(fabric=False)).fabric is None
    assert data.draw(lst.gpu_fabrics()).state


def _check_layout(gpus: Sequence[GPU], max_gpus: int) -> None:
    """Cards indexed from 0; peers within the node, both ways; slices that name their card."""
    cards = sorted({gpu.index for gpu in gpus})
    assert cards == list(range(len(cards)))
    assert len(cards) <= max_gpus
    whole = {gpu.index: gpu for gpu in gpus if gpu.mig is None}
    for gpu in whole.values():
        assert list(gpu.nvlink_peers) == sorted(gpu.nvlink_peers)
        for peer in gpu.nvlink_peers:
            assert peer != gpu.index
            assert gpu.index in whole[peer].nvlink_peers
    for index in set(cards) - set(whole):
        slices = [gpu for gpu in gpus if gpu.index == index]
        migs = [gpu.mig for gpu in slices if gpu.mig is not None]
        assert len(migs) == len(slices) <= 7
        assert [mig.device for mig in migs] == list(range(len(migs)))
        assert {mig.parent_index for mig in migs} == {index}
        assert len({mig.parent_uuid for mig in migs}) == 1
        assert len({gpu.uuid for gpu in slices}) == len(slices)
        assert all(gpu.fabric is None and not gpu.nvlink_peers for gpu in slices)


@given(st.data())
def test_nodes_have_realistic_gpu_layouts(data: st.DataObject) -> None:
    node = data.draw(lst.nodes())
    assert node.state is NodeState.READY
    _check_layout(node.gpus, 8)
    inventory = data.draw(lst.inventories(max_gpus=3))
    _check_layout(inventory.gpus, 3)


@given(st.data())
def test_node_options(data: st.DataObject) -> None:
    assert any(gpu.mig for gpu in data.draw(lst.nodes(max_gpus=2, mig=True)).gpus)
    assert not any(gpu.mig for gpu in data.draw(lst.inventories(max_gpus=2, mig=False)).gpus)
    cards = data.draw(lst.nodes(max_gpus=2, fabric=True, mig=False)).gpus
    assert all(gpu.fabric is not None for gpu in cards)
    assert len(data.draw(lst.nodes(max_gpus=0)).gpus) == 0


@given(lst.registrations(max_gpus=2, mig=False, compute=False))
def test_an_old_agents_registration(registration: Registration) -> None:
    assert not any(gpu.mig for gpu in registration.node.gpus)
    assert all(shard.compute is None for shard in registration.shards)


def test_mig_needs_a_card() -> None:
    with pytest.raises(ValueError, match="max_gpus=0 leaves no card to split into MIG slices"):
        lst.nodes(max_gpus=0, mig=True)


# --- shards ---------------------------------------------------------------------------


def _check_endpoint(shard: AdoptedShard) -> None:
    if shard.endpoint is not None:
        assert shard.rank == 0
        assert shard.endpoint.startswith("http://")
        assert shard.endpoint.endswith(f":{shard.http_port}")


@pytest.mark.slow
@given(lst.registrations(max_shards=3))
def test_registered_shards_belong_to_their_node(registration: Registration) -> None:
    cards = {gpu.index for gpu in registration.node.gpus}
    assert len(registration.shards) <= 3
    for shard in registration.shards:
        assert shard.node_id == registration.node.id
        assert set(shard.gpu_indices) <= cards
        assert list(shard.gpu_indices) == sorted(set(shard.gpu_indices))
        _check_endpoint(shard)


@pytest.mark.slow
@given(st.data())
def test_compute_options(data: st.DataObject) -> None:
    assert data.draw(lst.adopted_shards(compute=True)).compute is not None
    assert data.draw(lst.adopted_shards(compute=False)).compute is None
    assert data.draw(lst.shard_reports(compute=True)).compute is not None
    assert data.draw(lst.shard_reports(compute=False)).compute is None
    assert data.draw(lst.shard_specs(compute=True)).compute is not None
    assert data.draw(lst.domain_values(ShardSpec)).compute is None  # what StartShard carries
    registration = data.draw(lst.registrations(max_gpus=1, compute=True))
    assert all(shard.compute is not None for shard in registration.shards)


@given(lst.adopted_shards(st.just("node-9")))
def test_adopted_shards(shard: AdoptedShard) -> None:
    assert shard.node_id == "node-9"
    _check_endpoint(shard)


@given(lst.shard_commands())
def test_commands_agree_with_their_spec(command: Any) -> None:
    spec = command.spec
    assert (command.replica_id, command.shard_id, command.pool) == (
        spec.replica_id,
        spec.shard_id,
        spec.pool,
    )
    assert (command.fabric, command.profile_fp) == (spec.fabric, spec.profile_fp)
    assert spec.compute is None
    encode(command)  # one wire field holds both copies: they must agree to encode


@given(lst.heartbeats(), lst.stop_commands())
def test_times_are_whole_milliseconds(heartbeat: Any, command: Any) -> None:
    assert heartbeat.sent_at.microsecond % 1000 == 0
    assert heartbeat.sent_at.utcoffset() is not None
    assert command.grace.microseconds % 1000 == 0


# --- wire messages ---------------------------------------------------------------------


def _wire_states(message: Any) -> list[int]:
    shards = message.running_shards if isinstance(message, v1.Register) else [message]
    return [int(shard.state) for shard in shards]


WITH_STATES = [Registration, AdoptedShard, ShardReport]


@pytest.mark.slow
@pytest.mark.parametrize("model", WITH_STATES, ids=lambda m: m.__name__)
@given(data=st.data())
def test_unknown_states_in_wire_messages(model: type, data: st.DataObject) -> None:
    # Every law draws wire messages of every model; these are the state options.
    options: dict[str, Any] = {"max_gpus": 1} if model is Registration else {}
    known = data.draw(lst.wire_messages(model, **options))
    assert set(_wire_states(known)) <= lst.KNOWN_STATE_NUMBERS
    unknown = data.draw(lst.wire_messages(model, unknown_states=True, **options))
    assert not set(_wire_states(unknown)) & lst.KNOWN_STATE_NUMBERS
    mixed = data.draw(lst.wire_messages(model, unknown_states=None, compute=False, **options))
    assert isinstance(converter.structure(mixed, model), model)


def test_unknown_states_need_a_message_with_states() -> None:
    with pytest.raises(ValueError, match="Ack's wire message carries no shard state"):
        lst.wire_messages(Ack, unknown_states=True)


def test_options_a_strategy_does_not_take() -> None:
    with pytest.raises(TypeError):
        lst.domain_values(Ack, mig=False)


@given(lst.agent_messages(), lst.control_messages())
def test_envelopes_carry_at_most_one_member(agent: Any, control: Any) -> None:
    assert sum(m is not None for m in (agent.register, agent.shard_status, agent.heartbeat)) <= 1
    members = (control.start_shard, control.stop_shard, control.ack)
    assert sum(m is not None for m in members) <= 1


@given(lst.mutated_bytes(Ack))
def test_mutated_bytes_are_bytes(data: bytes) -> None:
    assert isinstance(data, bytes)


def test_mutated_bytes_need_a_wire_message() -> None:
    with pytest.raises(TypeError, match="not a domain model carried by a wire message of its own"):
        lst.mutated_bytes(GPUFabric)
