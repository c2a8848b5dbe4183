"""The quick checks of `decode` against the exact ones they stand in for.

`suspect` decides, for every input, whether the exact check for varints over
64 bits (a regular expression, then a walk) runs at all: it must never say
False where the exact check could find something, and it must let negative
numbers through. The unrolled element count must be the count.
"""

from __future__ import annotations

import re

import attrs
import pytest
from google.protobuf.message import DecodeError as PbDecodeError
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import Compute, DecodeError, Registration, decode, encode
from llmgw_wire.codec import _limits as limits
from llmgw_wire.codec._limits import (
    _FOLDED_COUNTS,
    _QUICK_COUNTS,
    DEFAULT_MAX_ITEMS,
    MERGE_BYTES,
    item_budget,
    item_count,
)
from llmgw_wire.codec._reader import ProblemKind
from llmgw_wire.codec._schema import CLASSES, DECODE_CLASSES, SKELETONS
from llmgw_wire.codec._varint64 import _OVER_64_BITS, WALK_STEPS, over_64_bits, suspect
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.sample import sample_registration
from tests.support import LEN, group, ld, tag, varint, vi

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


@given(lst.registrations(max_gpus=3, max_shards=2), st.binary(max_size=40))
def test_the_quick_count_is_the_count(value: Registration, tail: bytes) -> None:
    """The unrolled count under the budget's check agrees with the walk of its plan."""
    data = encode(value) + tail
    for classes in (CLASSES, DECODE_CLASSES):
        message = classes["llmgw.v1.Register"]()
        try:
            message.ParseFromString(data)
        except PbDecodeError:
            return
        assert _QUICK_COUNTS[type(message)](message, 0, len(data)) == item_count(message)


@given(lst.registrations(max_gpus=3, max_shards=2), st.binary(max_size=40))
def test_the_skeleton_count_is_the_count(value: Registration, tail: bytes) -> None:
    """`decode` counts a large input once, on its skeleton: the same count as on the message."""
    data = encode(value) + tail
    skeleton, message = SKELETONS["llmgw.v1.Register"](), DECODE_CLASSES["llmgw.v1.Register"]()
    try:
        message.ParseFromString(data)
    except PbDecodeError:
        return
    skeleton.ParseFromString(data)
    count = item_count(message)
    assert item_count(skeleton) == count
    quick = _QUICK_COUNTS[type(skeleton)]
    # The elements' merge parsed at once, and a chunk at a time (of a byte, or a few elements).
    for merge_bytes in (MERGE_BYTES, 1, 64):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(limits, "MERGE_BYTES", merge_bytes)
            assert quick(skeleton, count, len(data)) == count
            for budget in range(count):
                # Over the budget or not, as the walk says; the words are then the walk's.
                assert quick(skeleton, budget, len(data)) > budget


@given(lst.registrations(max_gpus=3, max_shards=2), st.binary(max_size=40))
def test_the_folded_count_is_the_count(value: Registration, tail: bytes) -> None:
    """A skeleton's own elements, and those below on the input parsed as `FOLDED`: the count."""
    data = encode(value) + tail
    skeleton, message = SKELETONS["llmgw.v1.Register"](), DECODE_CLASSES["llmgw.v1.Register"]()
    try:
        message.ParseFromString(data)
    except PbDecodeError:
        return
    skeleton.ParseFromString(data)
    count = item_count(message)
    folded = _FOLDED_COUNTS[type(skeleton)]
    assert folded(skeleton, data, count) == count
    for budget in range(count):
        assert folded(skeleton, data, budget) > budget


def test_the_folded_count_is_for_messages_whose_elements_hold_no_repeated_message() -> None:
    """An envelope, whose registration holds GPUs, is counted on its skeleton as before."""
    folded = {name for name, cls in SKELETONS.items() if cls in _FOLDED_COUNTS}
    assert folded == {"llmgw.v1.Register", "llmgw.v1.RunningShard", "llmgw.v1.ShardStatus"}


def test_an_element_upb_cannot_read_in_a_large_input_is_a_decode_error() -> None:
    gpus = CLASSES["llmgw.v1.Register"].DESCRIPTOR.fields_by_name["gpus"].number
    value = sample_registration()
    many = attrs.evolve(value, node=attrs.evolve(value.node, gpus=tuple(value.node.gpus) * 80))
    data = encode(many) + ld(gpus, b"\x0a\x05ab")
    assert len(data) > item_budget(len(data), DEFAULT_MAX_ITEMS)  # counted, on a skeleton
    with pytest.raises(DecodeError) as info:
        decode(data, Registration)
    assert info.value.message_type == "llmgw.v1.Register"


def test_a_walk_that_reaches_its_budget_refuses_rather_than_accepts() -> None:
    """Past `WALK_STEPS` fields looked at one by one, a suspect run is refused, and says so."""
    run = b"\x80" * 9 + b"\x02"  # the shape, inside a string: not a varint at all
    data = group(99, b"") * (WALK_STEPS // 2 + 1) + ld(99, run)
    assert suspect(data)
    problem = over_64_bits(data, REGISTER.DESCRIPTOR)
    assert problem is not None
    assert problem.kind is ProblemKind.OVER_64_BITS
    where = len(data) - len(run)
    assert problem.reason.startswith(
        f"the bytes at offset {where} may be a varint of more than 64 bits"
    )
    assert f"after {WALK_STEPS} fields" in problem.reason
    with pytest.raises(DecodeError, match=f"offset {where} may be a varint"):
        decode(data, Registration)
    # Within the budget, the walk tells the string from a varint.
    assert over_64_bits(group(99, b"") * 10 + ld(99, run), REGISTER.DESCRIPTOR) is None


def _with_elements(where: str, copies: int) -> Registration:
    """The sample registration, its GPUs `copies` times, with 300 more elements at one depth."""
    value = sample_registration()
    node = value.node
    gpus = tuple(attrs.evolve(gpu, index=n) for n, gpu in enumerate(tuple(node.gpus) * copies))
    shards = value.shards
    if where == "features":  # the registration's own
        node = attrs.evolve(node, features=tuple(f"feature-{n}" for n in range(300)))
    elif where == "nic paths":  # a map in every GPU, the GPUs a repeated field
        paths = {f"mlx5_{n}": "PIX" for n in range(300 // len(gpus) + 1)}
        gpus = tuple(attrs.evolve(gpu, nic_paths=paths) for gpu in gpus)
    elif where == "compute devices":  # in each shard's compute, a sub-message of an element
        devices = tuple(f"cuda:{n}" for n in range(300 // len(shards) + 1))
        compute = Compute("cuda", devices, 1, 1)
        shards = tuple(attrs.evolve(shard, compute=compute) for shard in shards)
    return Registration(attrs.evolve(node, gpus=gpus), shards)


@pytest.mark.parametrize("copies", [8, 150], ids=["64 GPUs", "1200 GPUs, in chunks"])
@pytest.mark.parametrize("where", ["features", "nic paths", "compute devices"])
def test_the_element_limit_holds_to_the_element_at_every_depth(where: str, copies: int) -> None:
    """Counted before the real parse: the count at the limit is accepted, one less refused."""
    value = _with_elements(where, copies)
    data = encode(value)
    count = item_count(DECODE_CLASSES["llmgw.v1.Register"].FromString(data))
    assert len(data) > item_budget(len(data), count)  # counted, on a skeleton
    assert (len(data) > MERGE_BYTES) == (copies > 8)
    assert decode(data, Registration, max_items=count) == value
    with pytest.raises(DecodeError) as info:
        decode(data, Registration, max_items=count - 1)
    assert info.value.reason.endswith(
        f"elements of repeated fields and maps is over the limit of {count - 1}"
    )


@pytest.mark.parametrize("more", [b"", vi(12, 1) * 8], ids=["within", "over when joined"])
def test_an_element_cut_short_is_refused_as_the_real_parse_refuses_it(more: bytes) -> None:
    """Joined to the next, a GPU cut short reads as whole to the count; never to `decode`.

    The count parses the GPUs' bytes joined, as one message: a length that
    runs past the end of its GPU takes the next GPU's first bytes, and what
    follows them reads as fields (here, with `more`, NVLink peers that the
    next GPU holds as part of its name). Within the budget or over it when
    joined, the words are those of the real parse's refusal.
    """
    cut = vi(1, 3) + tag(2, LEN) + varint(10)  # a uuid of 10 bytes, and none follow
    whole = ld(3, b"abcdefgh" + more)  # its first 10 bytes end the uuid
    data = ld(14, cut) + ld(14, whole)
    assert len(data) > item_budget(len(data), 2)  # counted, with a budget of 2
    assert len(data) <= item_budget(len(data), DEFAULT_MAX_ITEMS)  # not counted
    assert refusal(data, max_items=2) == refusal(data)
    assert refusal(data).endswith("at `$.gpus[0].uuid`")


def refusal(data: bytes, **kwargs: int) -> str:
    with pytest.raises(DecodeError) as info:
        decode(data, Registration, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("budget", [5, 4], ids=["within", "over"])
def test_a_string_that_is_not_utf8_is_refused_in_the_same_words_when_counted(budget: int) -> None:
    """The count skips a GPU's strings unread; the real parse does not.

    Within the budget, the words are the real parse's, as for the input
    uncounted. Over it (two GPUs and the second's three NVLink peers, over a
    budget of four), the count refuses it first, in its own words: both are
    true of these bytes.
    """
    data = ld(14, vi(1, 1) + ld(3, b"\xff\xfe")) + ld(14, vi(1, 2) + ld(12, b"\x01\x02\x03"))
    assert len(data) > item_budget(len(data), budget)  # counted
    if budget == 5:
        assert refusal(data, max_items=budget) == refusal(data)
        assert refusal(data).endswith("at `$.gpus[0].name`")
    else:
        assert refusal(data, max_items=budget).endswith(
            "elements of repeated fields and maps is over the limit of 4"
        )
