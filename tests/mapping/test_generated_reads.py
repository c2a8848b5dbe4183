"""What the structure functions read, and how they call each other, per element.

A field of a wire message is read through its runtime (a C call for upb), so
a generated function reads each field once, however many rules ask for it; a
repeated message whose items take what the enclosing message supplies (an
adopted shard's node id) reads it once and calls each item's function
positionally, unless a hook stands for that function; the leader endpoint,
written inline, is the domain's `leader_endpoint` exactly.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import Registration, converter, decode, encode, v1
from llmgw_wire.codec._binary import compiled_upb
from llmgw_wire.codec._cattrs_converter import compiled_betterproto2
from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.domain import AdoptedShard
from llmgw_wire.domain._reconciler import leader_endpoint
from llmgw_wire.mapping import STATE_NUMBERS
from llmgw_wire.mapping._compiler import Compiled, Hooks, Upb, compile_backend
from llmgw_wire.testing.sample import sample_registration

_INT32 = st.integers(-(2**31), 2**31 - 1)


def _structure_sources(compiled: Compiled) -> dict[str, str]:
    """The source of every `s_<Model>`, by its name."""
    out = {}
    for source in compiled.sources.values():
        for chunk in source.split("\n\n\n"):
            for function in re.split(r"\n(?=def )", chunk.strip()):
                if function.startswith("def s_"):
                    out[function.split("(", 1)[0][4:]] = function
    return out


@pytest.mark.parametrize("backend", ["upb", "betterproto2"])
def test_every_structure_function_reads_each_field_of_its_message_once(backend: str) -> None:
    compiled = compiled_upb() if backend == "upb" else compiled_betterproto2()
    sources = _structure_sources(compiled)
    assert "s_AdoptedShard" in sources
    assert "s_GPU" in sources
    for name, source in sources.items():
        reads = re.findall(r"\bm\.(\w+)", source)
        twice = {field for field in reads if field != "HasField" and reads.count(field) > 1}
        assert not twice, f"{name} reads {sorted(twice)} more than once:\n{source}"


def test_a_field_read_by_two_rules_is_read_once_into_a_local() -> None:
    # The shard's rank and port make its endpoint too; a GPU's fabric state
    # says whether it has a fabric, and is the fabric's state.
    sources = _structure_sources(compiled_upb())
    shard, gpu = sources["s_AdoptedShard"], sources["s_GPU"]
    for field in ("rank", "http_port", "leader_addr"):
        assert f"    _m_{field} = m.{field}\n" in shard
    assert "    _m_fabric_state = m.fabric_state\n" in gpu
    assert "if _m_fabric_state:" in gpu


def test_the_shards_of_a_registration_take_its_node_id_read_once_positionally() -> None:
    source = _structure_sources(compiled_upb())["s_Registration"]
    assert "map(s_AdoptedShard, m.running_shards[:], _repeat(_m_node_id))" in source
    value = sample_registration()
    assert len(value.shards) > 1
    assert decode(encode(value), Registration) == value


def test_a_hook_for_the_items_takes_the_context_by_keyword() -> None:
    seen: list[str] = []
    default = compiled_upb().structure[AdoptedShard]

    def hook(message: Any, *, node_id: str) -> AdoptedShard:
        seen.append(node_id)
        return default(message, node_id=node_id)  # type: ignore[no-any-return]

    from llmgw_wire.codec._schema import DOMAIN_CLASSES, STR_ENTRY

    upb = Upb(DOMAIN_CLASSES, dict(STATE_NUMBERS), STR_ENTRY)
    hooked = compile_backend(upb, hooks=Hooks(structure={AdoptedShard: hook}))
    source = _structure_sources(hooked)["s_Registration"]
    assert "s_AdoptedShard(_x, node_id=_m_node_id)" in source
    value = sample_registration()
    message = DOMAIN_CLASSES["llmgw.v1.Register"].FromString(encode(value))
    assert hooked.structure[Registration](message) == value
    assert seen == [value.node.id] * len(value.shards)


@given(
    addr=st.text(st.characters(exclude_categories=["Cs"]), max_size=20), rank=_INT32, port=_INT32
)
def test_the_leader_endpoint_decodes_by_the_domain_s_rule(addr: str, rank: int, port: int) -> None:
    expected = leader_endpoint(addr, rank, port)
    upb: Any = CLASSES["llmgw.v1.RunningShard"](leader_addr=addr, rank=rank, http_port=port)
    assert compiled_upb().structure[AdoptedShard](upb).endpoint == expected
    betterproto2 = v1.RunningShard(leader_addr=addr, rank=rank, http_port=port)
    assert converter.structure(betterproto2, AdoptedShard).endpoint == expected
