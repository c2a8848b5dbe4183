"""The laws of the mapping, for every pair, through the converter and through bytes.

The laws themselves live in `llmgw_wire.testing.laws`, shared with `llmgw-wire fuzz`:
one harness runs each law for each domain model it holds for, with the
model's strategy from `llmgw_wire.testing.strategies`.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import State, converter, decode, v1
from llmgw_wire.codec.schema import CLASSES
from llmgw_wire.domain import AdoptedShard, Registration
from llmgw_wire.mapping import PAIRS
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.laws import LAWS, MODELS, Law

CASES = [
    pytest.param(law, model, id=f"{law.name}-{model.__name__}")
    for law in LAWS
    for model in law.models
]


def test_every_wire_message_has_a_domain_partner() -> None:
    """Except the two envelopes, which the stream toolkit opens."""
    covered = {pair.wire for pair in PAIRS}
    assert set(CLASSES) - covered == {"llmgw.v1.AgentMessage", "llmgw.v1.ControlMessage"}


def test_every_model_is_under_every_round_trip_law() -> None:
    names = {law.name for law in LAWS}
    assert names == {
        "domain_wire_domain",
        "domain_bytes_domain",
        "backends_agree",
        "wire_domain_wire",
        "deterministic",
        "no_mutation",
        "unknown_states_failed",
    }
    for law in LAWS:
        if law.name != "unknown_states_failed":
            assert law.models == MODELS, law.name


@pytest.mark.parametrize(("law", "model"), CASES)
@given(data=st.data())
def test_law(law: Law, model: type, data: st.DataObject) -> None:
    law.check(model, data.draw(law.strategy(model)), converter)


@given(st.data())
def test_unknown_states_from_a_newer_agent_are_failed(data: st.DataObject) -> None:
    """Raw bytes of a Register, written by Google's runtime, with a state number we do not know."""
    number = data.draw(lst.unknown_state_numbers())
    register = CLASSES["llmgw.v1.Register"](node_id="n1")
    register.running_shards.add(replica_id="r", state=number)
    raw = register.SerializeToString()
    registration = decode(raw, Registration)
    assert [s.state for s in registration.shards] == [State.FAILED]
    wire = v1.Register.parse(raw)
    shard = converter.structure(wire.running_shards[0], AdoptedShard)
    assert shard.state is State.FAILED
