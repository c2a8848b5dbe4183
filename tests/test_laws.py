"""The laws of the mapping, for every pair, through the converter and through bytes.

One harness for every domain model with a wire message of its own; each law
is a property over the model's strategy (`llmgw_wire.strategies`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import State, converter, decode, encode, v1
from llmgw_wire import strategies as lst
from llmgw_wire._pb import CLASSES
from llmgw_wire.codec import wire_class
from llmgw_wire.domain import AdoptedShard, Registration
from llmgw_wire.mapping import PAIRS

MODELS = [pair.domain for pair in PAIRS if not pair.embedded]
WIRE = {cls: wire_class(cls) for cls in MODELS}


def ids(cls: type) -> str:
    return cls.__name__


@pytest.fixture(params=MODELS, ids=ids)
def model(request: pytest.FixtureRequest) -> type:
    return request.param  # type: ignore[no-any-return]


def test_every_wire_message_has_a_domain_partner() -> None:
    """Except the two envelopes, which the stream toolkit opens."""
    covered = {pair.wire for pair in PAIRS}
    assert set(CLASSES) - covered == {"llmgw.v1.AgentMessage", "llmgw.v1.ControlMessage"}


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_domain_to_wire_to_domain(cls: type, data: st.DataObject) -> None:
    value = data.draw(lst.domain_values(cls))
    wire = converter.unstructure(value)
    assert isinstance(wire, WIRE[cls])
    assert converter.structure(wire, cls) == value


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_domain_to_bytes_to_domain(cls: type, data: st.DataObject) -> None:
    value = data.draw(lst.domain_values(cls))
    assert decode(encode(value), cls) == value


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_both_backends_agree(cls: type, data: st.DataObject) -> None:
    """The upb path and the betterproto2 path read and write the same bytes."""
    value = data.draw(lst.domain_values(cls))
    fast = encode(value)
    typed = bytes(converter.unstructure(value))
    assert WIRE[cls].parse(fast) == WIRE[cls].parse(typed)
    assert decode(typed, cls) == value
    assert converter.structure(WIRE[cls].parse(fast), cls) == value


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_wire_to_domain_to_wire(cls: type, data: st.DataObject) -> None:
    wire = data.draw(lst.wire_messages(cls))
    again = converter.unstructure(converter.structure(wire, cls))
    assert bytes(again) == bytes(wire)


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_encoding_is_deterministic(cls: type, data: st.DataObject) -> None:
    value = data.draw(lst.domain_values(cls))
    first = encode(value)
    assert encode(copy.deepcopy(value)) == first
    assert encode(decode(first, cls)) == first


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_conversions_neither_mutate_nor_share(cls: type, data: st.DataObject) -> None:
    value = data.draw(lst.domain_values(cls))
    before = copy.deepcopy(value)
    wire = converter.unstructure(value)
    assert value == before
    wire_before = copy.deepcopy(wire)
    back: object = converter.structure(wire, cls)
    assert wire == wire_before
    # Changing the wire message afterwards leaves the domain value alone.
    _scramble(wire)
    assert back == before


def _scramble(message: Any) -> None:
    for name, field in vars(message).items():
        if isinstance(field, list):
            field.clear()
        elif isinstance(field, dict):
            field["scrambled"] = "yes"
        elif hasattr(field, "__dataclass_fields__"):
            _scramble(field)
        del name


@given(st.data())
def test_unknown_states_from_a_newer_agent_are_failed(data: st.DataObject) -> None:
    """Raw bytes of a Register whose running shard has a state number we do not know."""
    number = data.draw(lst.unknown_state_numbers())
    register = CLASSES["llmgw.v1.Register"](node_id="n1")
    register.running_shards.add(replica_id="r", state=number)
    raw = register.SerializeToString()
    registration = decode(raw, Registration)
    assert [s.state for s in registration.shards] == [State.FAILED]
    wire = v1.Register.parse(raw)
    shard = converter.structure(wire.running_shards[0], AdoptedShard)
    assert shard.state is State.FAILED
