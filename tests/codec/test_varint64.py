"""The C-speed check for varints over 64 bits against the exact one.

`suspect` decides, for every input, whether the exact check (a regular
expression, then a walk) runs at all: it must never say False where the
exact check could find something, and it must let negative numbers through.
"""

from __future__ import annotations

import re

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import Registration, decode, encode
from llmgw_wire.codec.schema import CLASSES
from llmgw_wire.codec.varint64 import _OVER_64_BITS, over_64_bits, suspect
from llmgw_wire.testing.sample import sample_registration

REGISTER = CLASSES["llmgw.v1.Register"]
# The shape `suspect` looks for, spelled the slow way: the reference here.
_SHAPE = re.compile(rb"[\x80-\xff]{9}[\x02-\x7f]")

# Bytes that matter to the check, and how often the adversarial draws use them.
_EDGES = st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0x81, 0xFE, 0xFF])


@st.composite
def _adversarial(draw: st.DrawFn) -> bytes:
    """Runs of high bytes of every length near nine, each ended by an edge byte."""
    out = bytearray(draw(st.binary(max_size=20)))
    for _ in range(draw(st.integers(1, 6))):
        high = draw(st.lists(st.integers(0x80, 0xFF), min_size=7, max_size=12))
        out += bytes(high) + bytes([draw(_EDGES)])
        out += draw(st.binary(max_size=4))
    return bytes(out)


@given(st.one_of(st.binary(max_size=300), _adversarial()))
def test_suspect_is_the_shape_and_covers_the_exact_check(data: bytes) -> None:
    assert suspect(data) == (_SHAPE.search(data) is not None)
    if _OVER_64_BITS.search(data) is not None:
        assert suspect(data)


@pytest.mark.parametrize("at", [0, 1, 65_536 - 10, 65_536 - 9, 65_536 - 5, 65_536, 65_537])
def test_suspect_sees_a_run_across_the_chunks(at: int) -> None:
    run = b"\xff" * 9 + b"\x02"
    data = b"\x00" * at + run + b"\x00" * 100
    assert suspect(data)
    assert not suspect(data.replace(b"\x02", b"\x01"))


def test_negative_numbers_are_not_suspect() -> None:
    """numa_node -1, as the reference sends for a GPU without NUMA affinity: ten bytes."""
    value = sample_registration()
    gpus = tuple(attrs.evolve(gpu, numa_node=-1) for gpu in value.node.gpus)
    negative = attrs.evolve(value, node=attrs.evolve(value.node, gpus=gpus))
    data = encode(negative)
    assert b"\xff" * 9 + b"\x01" in data
    assert not suspect(data)
    assert over_64_bits(data, REGISTER.DESCRIPTOR) is None
    assert decode(data, Registration) == negative
