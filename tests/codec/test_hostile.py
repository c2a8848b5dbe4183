"""Hostile bytes: `decode` returns a value or raises `DecodeError`, and says what was wrong.

Never another exception, never a partial message, never a hang, never memory
out of proportion to the input. Google's parser (upb) decides; the library's
explainer (`llmgw_wire.codec._diagnose`) names the problem after upb refused.

A known field sent with the wrong wire type is, for Google's runtime, an
unknown field (conformant: a peer whose schema changed the field's type).
The library keeps that rule on every path: a `llmgw_wire.v1` target is built
from what upb read, never parsed by betterproto2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import DecodeError as PbDecodeError
from hypothesis import event, given
from hypothesis import strategies as st

import llmgw_wire
from llmgw_wire import (
    GPU,
    Ack,
    DecodeError,
    Heartbeat,
    Node,
    Registration,
    ShardCommand,
    ShardReport,
    State,
    converter,
    decode,
    encode,
    v1,
)
from llmgw_wire.codec import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE, wire_class
from llmgw_wire.codec import json as wire_json
from llmgw_wire.codec._diagnose import EXPLAIN_FIELDS, MAX_DEPTH
from llmgw_wire.codec._limits import item_budget, item_count
from llmgw_wire.codec._schema import CLASSES, DECODE_CLASSES
from llmgw_wire.codec._varint64 import over_64_bits
from llmgw_wire.codec.envelope import AGENT_MESSAGE, decode_envelope, encode_envelope
from llmgw_wire.mapping import pair_for
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.laws import MODELS
from llmgw_wire.testing.sample import sample_large_registration, sample_registration
from tests.support import (
    EGROUP,
    I64,
    SGROUP,
    as_go_reads,
    group,
    ld,
    nested_groups,
    plain_bp2,
    plain_pb,
    tag,
    varint,
    vi,
)

REGISTER: Any = CLASSES["llmgw.v1.Register"]


def refusal(data: bytes, into: type = Registration, **kwargs: Any) -> str:
    """The message of the `DecodeError` that decoding `data` raises."""
    with pytest.raises(DecodeError) as info:
        decode(data, into, **kwargs)
    return str(info.value)


def both_refuse(data: bytes) -> str:
    """The one message both targets, domain model and wire class, refuse `data` with."""
    message = refusal(data)
    assert refusal(data, v1.Register) == message
    return message


# --- empty, truncated, too long -----------------------------------------------------


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_empty_input_is_an_empty_message(model: type) -> None:
    assert decode(b"", model) == converter.structure(wire_class(model)(), model)
    assert decode(b"", wire_class(model)) == wire_class(model)()


def test_empty_input_decodes_to_the_defaults() -> None:
    assert decode(b"", Registration) == Registration()
    assert decode(b"", Ack) == Ack()
    # The wire's zero state is STATE_UNSPECIFIED, which is never a healthy shard.
    assert decode(b"", ShardReport) == ShardReport(state=State.FAILED)


def _field_boundaries(data: bytes) -> set[int]:
    """Where the top-level fields of `data` end, rebuilt field by field with Google's runtime.

    A message cut exactly there is itself a valid, shorter message: protobuf
    has no end marker (gRPC's length prefix is what catches such a cut).
    """
    whole = REGISTER()
    whole.ParseFromString(data)
    partial = REGISTER()
    ends = {0}
    for field in sorted(whole.DESCRIPTOR.fields, key=lambda f: f.number):
        value = getattr(whole, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key in sorted(value):
                getattr(partial, field.name)[key] = value[key]
                ends.add(partial.ByteSize())
        elif field.message_type is not None and field.is_repeated:
            for item in value:
                getattr(partial, field.name).add().CopyFrom(item)
                ends.add(partial.ByteSize())
        elif field.is_repeated and not field.is_packed:
            for item in value:
                getattr(partial, field.name).append(item)
                ends.add(partial.ByteSize())
        elif field.is_repeated:
            getattr(partial, field.name).extend(value)
        elif field.message_type is not None:
            if whole.HasField(field.name):
                getattr(partial, field.name).CopyFrom(value)
        else:
            setattr(partial, field.name, value)
        ends.add(partial.ByteSize())
    assert partial.SerializeToString(deterministic=True) == data
    return ends


@pytest.mark.slow
def test_truncation_at_every_offset_of_a_registration() -> None:
    data = encode(sample_registration())
    boundaries = _field_boundaries(data)
    accepted = set()
    for cut in range(len(data)):
        prefix = data[:cut]
        try:
            registration = decode(prefix, Registration)
        except DecodeError:
            # Every refusal is diagnosed, never upb's bare "Wire format was corrupt".
            with pytest.raises(DecodeError, match="at offset"):
                decode(prefix, v1.Register)
            continue
        accepted.add(cut)
        official = REGISTER()
        official.ParseFromString(prefix)
        assert registration == decode(official.SerializeToString(), Registration)
        assert plain_bp2(decode(prefix, v1.Register), REGISTER.DESCRIPTOR) == plain_pb(official)
    assert accepted == boundaries - {len(data)}


def test_a_string_cut_short() -> None:
    data = ld(1, b"gpu-node-017")[:-4]
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: field 1 (`node_id`) at offset 0 claims 12 bytes, "
        "8 left - at `$.node_id`"
    )


def test_a_length_past_the_end_of_a_sub_message() -> None:
    gpu = ld(2, b"GPU-0") + tag(3, 2) + varint(40) + b"NVIDIA"
    data = vi(10, 224) + ld(14, b"") + ld(14, gpu)
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: field 3 (`name`) at offset 14 claims 40 bytes, "
        "6 left - at `$.gpus[1].name`"
    )


TWO_GIB_CLAIM = tag(14, 2) + varint(2**31 - 1) + b"GPU-"


def test_ten_bytes_claiming_two_gib() -> None:
    assert len(TWO_GIB_CLAIM) == 10
    assert both_refuse(TWO_GIB_CLAIM) == (
        "Invalid `llmgw.v1.Register`: field 14 (`gpus`) at offset 0 claims 2147483647 bytes, "
        "4 left - at `$.gpus[0]`"
    )


@pytest.mark.parametrize("into", [Registration, v1.Register], ids=["domain", "wire"])
def test_ten_bytes_claiming_two_gib_allocate_nothing_large(into: type) -> None:
    decode(b"", into)  # warm up: caches and compiled functions are not the input's doing
    tracemalloc.start()
    try:
        for _ in range(10):
            with pytest.raises(DecodeError):
                decode(TWO_GIB_CLAIM, into)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_the_size_limit_is_grpcs_by_default() -> None:
    assert DEFAULT_MAX_SIZE == 4 * 1024 * 1024
    # A valid message one byte over the limit: refused before it is parsed.
    detail = b"x" * (DEFAULT_MAX_SIZE + 1 - 5)
    data = ld(3, detail)
    assert len(data) == DEFAULT_MAX_SIZE + 1
    assert refusal(data, Ack) == (
        "Invalid `llmgw.v1.Ack`: 4194305 bytes is over the limit of 4194304"
    )
    exact = ld(3, detail[:-1])
    assert len(exact) == DEFAULT_MAX_SIZE
    assert decode(exact, Ack).detail == detail[:-1].decode()


def test_the_size_limit_is_configurable() -> None:
    data = encode(Ack(node_id="n1", detail="adopted"))
    assert decode(data, Ack, max_size=len(data)) == Ack(node_id="n1", detail="adopted")
    assert refusal(data, Ack, max_size=len(data) - 1) == (
        f"Invalid `llmgw.v1.Ack`: {len(data)} bytes is over the limit of {len(data) - 1}"
    )
    assert refusal(data, v1.Ack, max_size=4) == (
        f"Invalid `llmgw.v1.Ack`: {len(data)} bytes is over the limit of 4"
    )


# --- memory in proportion to the input ---------------------------------------------

EMPTY_GPU = tag(14, 2) + varint(0)


def test_the_item_limit() -> None:
    # Derived from the size limit: one element per 32 bytes of the largest message.
    assert DEFAULT_MAX_ITEMS == DEFAULT_MAX_SIZE // 32 == 131_072
    # And 10,000 elements, plus one per 16 bytes of the message.
    assert item_budget(0, DEFAULT_MAX_ITEMS) == 10_000
    assert item_budget(160_000, DEFAULT_MAX_ITEMS) == 20_000
    assert item_budget(DEFAULT_MAX_SIZE, DEFAULT_MAX_ITEMS) == DEFAULT_MAX_ITEMS
    dense = EMPTY_GPU * 11_428  # 22,856 bytes: 10,000 + 1,428
    assert len(decode(dense, Node).gpus) == len(decode(dense, v1.Register).gpus) == 11_428
    # Over the budget already, the GPUs' own repeated fields are not looked into.
    assert both_refuse(dense + EMPTY_GPU) == (
        "Invalid `llmgw.v1.Register`: at least 11429 elements of repeated fields and maps is "
        "over the limit of 11428 for 22858 bytes (10000, and one more per 16 bytes, up to 131072)"
    )
    at_limit = padded(EMPTY_GPU * DEFAULT_MAX_ITEMS)
    assert len(decode(at_limit, Node).gpus) == DEFAULT_MAX_ITEMS
    assert len(decode(at_limit, v1.Register).gpus) == DEFAULT_MAX_ITEMS
    assert both_refuse(padded(EMPTY_GPU * (DEFAULT_MAX_ITEMS + 1))) == (
        "Invalid `llmgw.v1.Register`: at least 131073 elements of repeated fields and maps is "
        "over the limit of 131072"
    )


def padded(data: bytes) -> bytes:
    """`data` with an unknown field that brings it to 2 MiB, so that its budget is the most."""
    return data + ld(99, b"x" * (2 * 1024 * 1024 - len(data) - 4))


def traced_peak(call: Any) -> int:
    """The peak of Python's allocations during `call()`, the result's included."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("gpus", "size", "elements"),
    [(2048, 458_965, 13_972), (4000, 895_617, 27_236), (18_600, 4_161_637, 126_516)],
)
@pytest.mark.slow
def test_registrations_a_go_peer_accepts_decode_with_the_defaults(
    gpus: int, size: int, elements: int
) -> None:
    """Thousands of GPUs with full NVLink, NIC, fabric and MIG data, up to the size limit."""
    registration = sample_large_registration(gpus)
    data = encode(registration)
    google = CLASSES["llmgw.v1.Register"]()
    google.ParseFromString(data)  # as grpc-go would: within 4 MiB, no element budget
    assert (len(data), item_count(google)) == (size, elements)
    assert decode(data, Registration) == registration
    assert decode(bytes(decode(data, v1.Register)), Registration) == registration
    assert decode_envelope(encode_envelope(registration), AGENT_MESSAGE) == registration
    # Memory in proportion: Python's objects at most 8 times the input (6.8 measured).
    assert traced_peak(lambda: decode(data, Registration)) < 8 * len(data)


@pytest.mark.slow
def test_memory_at_the_element_budget_is_bounded_by_the_size_limit() -> None:
    """The costliest element, an empty GPU, as many as the budget lets in."""
    at_limit = padded(EMPTY_GPU * DEFAULT_MAX_ITEMS)
    decode(b"", Registration)
    # The domain value: about 260 bytes of Python objects each (8.3 x the
    # input); the wire classes 15.5 x, 20.8 x on Python 3.10 (limits.md).
    for into, times in ((Registration, 10), (v1.Register, 24)):
        assert traced_peak(lambda into=into: decode(at_limit, into)) < times * DEFAULT_MAX_SIZE


def test_the_item_limit_is_configurable_and_counts_every_element() -> None:
    data = encode(sample_registration())
    # Every element of every repeated field and map, at any depth: GPUs and
    # their NVLink peers, NIC paths and problems, labels, CPU flags, ...
    assert decode(data, Registration, max_items=104) == sample_registration()
    assert refusal(data, Registration, max_items=103) == (
        "Invalid `llmgw.v1.Register`: 104 elements of repeated fields and maps is over the "
        "limit of 103"
    )
    assert refusal(data, v1.Register, max_items=103) == refusal(data, Registration, max_items=103)


def test_the_item_limit_reaches_through_singular_sub_messages() -> None:
    adapters = ld(11, (tag(12, 2) + varint(0)) * 4)  # StartShard.profile.adapters
    assert len(decode(adapters, ShardCommand).spec.profile.adapters) == 4
    assert refusal(adapters, ShardCommand, max_items=3) == (
        "Invalid `llmgw.v1.StartShard`: 4 elements of repeated fields and maps is over the "
        "limit of 3"
    )


def _nic_paths_in_gpus(gpus: int, per_gpu: int) -> bytes:
    """`gpus` GPUs, each with `per_gpu` distinct NIC paths: a map inside a repeated message."""
    return b"".join(
        ld(14, b"".join(ld(13, ld(1, b"%06x" % (g * per_gpu + n))) for n in range(per_gpu)))
        for g in range(gpus)
    )


@pytest.mark.parametrize("into", [Registration, v1.Register], ids=["domain", "wire"])
@pytest.mark.parametrize(
    ("data", "elements"),
    [
        # A map inside a repeated message, small and large (the skeleton count).
        (_nic_paths_in_gpus(4, 2501), "10008"),
        (_nic_paths_in_gpus(8, 10_000), "more than 10000"),
        # Repeated numbers, packed and not, and repeated strings, at every depth.
        (ld(14, ld(12, b"\x01" * 10_001)), "10002"),
        (ld(14, vi(12, 1) * 10_001), "10002"),
        (ld(14, vi(12, 1) * 500_000), "500001"),
        (ld(6, b"") * 10_001, "10001"),
        (ld(11, ld(5, b"avx") * 10_001), "10001"),
        (ld(17, ld(14, ld(2, b"cuda:0") * 10_001)), "10002"),
    ],
    ids=[
        "nic-paths",
        "nic-paths-large",
        "packed",
        "unpacked",
        "unpacked-large",
        "features",
        "cpu-flags",
        "compute-devices",
    ],
)
def test_the_item_limit_counts_every_element_at_any_depth(
    into: type, data: bytes, elements: str
) -> None:
    message = refusal(data, into, max_items=10_000)
    if elements.startswith("more than"):
        assert message.startswith("Invalid `llmgw.v1.Register`: at least ")
        assert message.endswith(" elements of repeated fields and maps is over the limit of 10000")
    else:
        assert message == (
            f"Invalid `llmgw.v1.Register`: {elements} elements of repeated fields and maps is "
            "over the limit of 10000"
        )


def test_the_item_limit_stops_counting_once_over() -> None:
    """The elements looked into are bounded by the budget, not by the input."""
    data = _nic_paths_in_gpus(200, 20) * 80  # 16,000 GPUs of 20 NIC paths each, 3 MiB
    assert len(data) > item_budget(len(data), 10_000)  # counted, on a skeleton
    assert refusal(data, Registration, max_items=10_000) == (
        "Invalid `llmgw.v1.Register`: at least 16000 elements of repeated fields and maps is "
        "over the limit of 10000"
    )


@pytest.mark.subprocess
def test_four_mib_of_empty_elements_take_little_memory() -> None:
    """Without the limit, upb alone takes ~530 MiB for this input and the domain gigabytes."""
    script = (
        "import resource, llmgw_wire as w\n"
        "data = b'\\x72\\x00' * (2 * 1024 * 1024 - 8)\n"
        "w.decode(b'', w.Registration)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "for into in (w.Registration, w.v1.Register):\n"
        "    try:\n"
        "        w.decode(data, into)\n"
        "    except w.DecodeError as e:\n"
        f"        assert 'is over the limit of {DEFAULT_MAX_ITEMS}' in str(e), e\n"
        "    else:\n"
        "        raise AssertionError('accepted')\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    )
    assert int(done.stdout) < 128  # MiB of growth in the peak resident set


_SHAPES = {
    "unknown varints": "vi(99, 1) * (4 * 1024 * 1024 // 3)",
    "unknown empty strings": "ld(99, b'') * (4 * 1024 * 1024 // 3)",
    "unknown groups": "group(99, b'') * (4 * 1024 * 1024 // 4)",
    "unknown fields in GPUs": "ld(14, vi(99, 1) * 50) * 9000",
}
# The bytes of the elements' own objects, allowed besides: about 2 kB a GPU.
_ELEMENTS = {"unknown fields in GPUs": 2_000 * 9000}


@pytest.mark.subprocess
@pytest.mark.parametrize("shape", list(_SHAPES))
def test_four_mib_of_unknown_fields_decode_in_proportion(shape: str) -> None:
    """betterproto2's parser took minutes on this; nothing parses the bytes but upb now.

    grpclib's `WireCodec` included. In a process of its own, with a
    generous timeout: CPU time as a ratio to one pure-Python pass over the
    same bytes in the same process (so the machine's speed and load cancel
    out), then the peak of Python's allocations (tracemalloc, which slows
    them) per input byte, besides the objects of the elements (bounded by
    the element budget).
    """
    script = (
        "import sys, time, tracemalloc\n"
        f"sys.path.insert(0, {str(Path(__file__).parents[2])!r})\n"
        "from tests.support import group, ld, vi\n"
        "import llmgw_wire as w\n"
        "from llmgw_wire import v1\n"
        f"data = {_SHAPES[shape]}\n"
        "from llmgw_wire.stream.grpclib_codec import WireCodec\n"
        "paths = [(w.Registration, w.decode), (v1.Register, w.decode),\n"
        "         (v1.Register, WireCodec().decode)]\n"
        "start = time.process_time()\n"
        "for _ in data:\n"
        "    pass\n"
        "one_pass = time.process_time() - start\n"
        "for into, read in paths:\n"
        "    read(b'', into)\n"
        "    start = time.process_time()\n"
        "    value = read(data, into)\n"
        "    ratio = (time.process_time() - start) / one_pass\n"
        "    del value\n"
        "    tracemalloc.start()\n"
        "    value = read(data, into)\n"
        f"    peak = (tracemalloc.get_traced_memory()[1] - {_ELEMENTS.get(shape, 0)}) / len(data)\n"
        "    tracemalloc.stop()\n"
        "    print(into.__name__, ratio, peak)\n"
        "    if into is v1.Register:\n"
        "        assert bytes(value) == data or len(bytes(value)) == len(data)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=120
    )
    for line in done.stdout.splitlines():
        _target, ratio, peak = line.split()
        # Minutes before, thousands of passes; at most 8 measured (GPUs of unknown fields).
        assert float(ratio) < 100, line
        assert float(peak) < 4, line  # times the input, besides upb's own arena


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_any_bytes_like_input(kind: type) -> None:
    data = encode(sample_registration())
    assert decode(kind(data), Registration) == sample_registration()
    assert decode(kind(data), v1.Register) == decode(data, v1.Register)


def test_text_is_not_bytes() -> None:
    with pytest.raises(TypeError, match="expected bytes, got str"):
        decode("\x0a\x02n1", Registration)  # type: ignore[call-overload]


# --- malformed tags and varints -----------------------------------------------------


@pytest.mark.parametrize("wire_type", [6, 7])
def test_invalid_wire_types(wire_type: int) -> None:
    assert both_refuse(tag(1, wire_type) + b"\x00") == (
        f"Invalid `llmgw.v1.Register`: invalid wire type {wire_type} in the tag of field 1 "
        "at offset 0"
    )


def test_an_invalid_wire_type_inside_a_gpu() -> None:
    data = ld(14, vi(1, 0)) + ld(14, vi(1, 1) + tag(19, 7))
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: invalid wire type 7 in the tag of field 19 at offset 8 "
        "- at `$.gpus[1]`"
    )


def test_field_number_zero() -> None:
    assert both_refuse(ld(1, b"n1") + tag(0, 0) + b"\x01") == (
        "Invalid `llmgw.v1.Register`: field number 0 in the tag at offset 4"
    )


def test_a_tag_over_32_bits() -> None:
    assert both_refuse(b"\xf8\xff\xff\xff\x10\x01") == (
        "Invalid `llmgw.v1.Register`: the tag at offset 0 is larger than 32 bits"
    )


def test_the_largest_field_number_is_an_unknown_field() -> None:
    assert decode(vi(2**29 - 1, 1), Registration) == Registration()


def test_a_varint_longer_than_ten_bytes() -> None:
    data = tag(10, 0) + b"\xff" * 10 + b"\x01"
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: the varint of field 10 (`cpu_count`) at offset 0 "
        "is longer than 10 bytes - at `$.cpu_count`"
    )


def test_a_ten_byte_varint_is_a_negative_int32() -> None:
    assert len(vi(10, -5)) == 11
    assert decode(vi(10, -5), Registration).node.cpu_count == -5


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (tag(10, 0) + b"\xff" * 9 + b"\x7f", "the varint of field 10 (`cpu_count`) at offset 0"),
        (
            tag(9, 0) + b"\x80" * 9 + b"\x02",
            "the varint of field 9 (`memory_total_mb`) at offset 0",
        ),
        (
            vi(1, 1)[:0] + tag(99, 0) + b"\x80" * 9 + b"\x02",
            "the varint of unknown field 99 at offset 0",
        ),
    ],
    ids=["int32", "int64", "unknown"],
)
def test_a_ten_byte_varint_over_64_bits_is_refused_as_go_does(data: bytes, where: str) -> None:
    """upb drops the bits past the 64th; Go's runtime (and the specification) refuse them."""
    REGISTER().ParseFromString(data)  # the official Python runtime accepts it
    tenth = f"{data[-1]:#04x}"
    path = " - at `$.cpu_count`" if "cpu_count" in where else ""
    path = " - at `$.memory_total_mb`" if "memory_total_mb" in where else path
    assert both_refuse(data) == (
        f"Invalid `llmgw.v1.Register`: {where} carries more than 64 bits "
        f"(its tenth byte is {tenth}){path}"
    )


def test_a_packed_varint_over_64_bits_is_refused() -> None:
    data = ld(14, ld(12, b"\x01" + b"\x80" * 9 + b"\x03"))
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: a packed varint of field 12 (`nvlink_peers`) at offset 5 "
        "carries more than 64 bits (its tenth byte is 0x03) - at `$.gpus[0].nvlink_peers`"
    )


def test_a_ten_byte_varint_of_64_bits_and_a_suspect_run_in_a_string_are_accepted() -> None:
    assert decode(tag(10, 0) + b"\x80" * 9 + b"\x01", Registration).node.cpu_count == 0
    name = "数据中心A"  # nine bytes over 0x7f, then one under: the same run as an overlong varint
    assert decode(ld(1, name.encode()), Registration).node.id == name


def test_the_explanation_of_a_refusal_is_cut_short_on_a_large_input() -> None:
    """A registration cut at its last byte: upb refuses it at once; the walk stops early."""
    data = (vi(10, 1) * (DEFAULT_MAX_SIZE // 2 - 4) + ld(1, b"abc"))[:-1]
    assert both_refuse(data) == (
        f"Invalid `llmgw.v1.Register`: malformed bytes; the explanation stopped at offset "
        f"{2 * EXPLAIN_FIELDS}, after {EXPLAIN_FIELDS} fields, before it found what is wrong"
    )
    # Within the budget, the same cut is explained.
    assert both_refuse((vi(10, 1) * 1000 + ld(1, b"abc"))[:-1]) == (
        "Invalid `llmgw.v1.Register`: field 1 (`node_id`) at offset 2000 claims 3 bytes, "
        "2 left - at `$.node_id`"
    )


def test_the_bytes_end_inside_a_varint() -> None:
    assert both_refuse(vi(8, 1) + tag(10, 0) + b"\xff") == (
        "Invalid `llmgw.v1.Register`: the bytes end inside the varint of field 10 "
        "(`cpu_count`) at offset 2 - at `$.cpu_count`"
    )


def test_the_bytes_end_inside_a_tag() -> None:
    assert both_refuse(b"\x88") == (
        "Invalid `llmgw.v1.Register`: the bytes end inside a tag at offset 0"
    )


def test_a_packed_run_cut_inside_a_varint() -> None:
    data = ld(14, ld(12, b"\x01\x02\x80"))
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: the bytes end inside a packed varint of field 12 "
        "(`nvlink_peers`) at offset 6 - at `$.gpus[0].nvlink_peers`"
    )


def test_a_fixed64_unknown_field_cut_short() -> None:
    assert both_refuse(tag(99, I64) + b"\x00" * 5) == (
        "Invalid `llmgw.v1.Register`: unknown field 99 at offset 0 needs 8 bytes, 5 left"
    )


def test_a_length_over_five_bytes() -> None:
    data = tag(1, 2) + b"\x82\x80\x80\x80\x80\x00" + b"n1"
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: the length of field 1 (`node_id`) at offset 0 "
        "is over 5 bytes - at `$.node_id`"
    )


# --- the wrong wire type for a known field --------------------------------------------


def test_a_string_sent_as_a_varint_is_an_unknown_field_to_the_domain() -> None:
    data = vi(1, 5) + ld(2, b"host-1")
    registration = decode(data, Registration)
    assert registration.node.id == ""
    assert registration.node.hostname == "host-1"


def test_a_string_sent_as_a_varint_is_an_unknown_field_to_a_wire_class_too() -> None:
    # The betterproto2 message is built from what upb read, never from the bytes.
    register = decode(vi(1, 5), v1.Register)
    assert register.node_id == ""
    assert bytes(register) == vi(1, 5)  # kept as an unknown field of the message


def test_a_sub_message_sent_as_a_varint() -> None:
    data = vi(11, 3) + ld(14, vi(1, 2) + vi(22, 1))
    assert decode(data, Registration).node.host == decode(b"", Registration).node.host
    assert decode(data, Registration).node.gpus[0].mig is None
    register = decode(data, v1.Register)
    assert register.host is None
    assert register.gpus[0].mig is None


def test_a_packed_run_is_the_right_wire_type_for_repeated_numbers() -> None:
    unpacked = ld(14, vi(12, 1) + vi(12, 2) + ld(12, varint(3) + varint(4)))
    assert decode(unpacked, Registration).node.gpus[0].nvlink_peers == (1, 2, 3, 4)
    assert list(decode(unpacked, v1.Register).gpus[0].nvlink_peers) == [1, 2, 3, 4]


def test_a_number_sent_as_a_string_is_an_unknown_field() -> None:
    # A singular int32 packs nothing: length-delimited is the wrong wire type.
    data = ld(10, varint(7))
    assert decode(data, Registration).node.cpu_count == 0
    assert decode(data, v1.Register).cpu_count == 0


# --- UTF-8 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            ld(1, b"n\xff1"),
            "field 1 (`node_id`) at offset 0 is not valid UTF-8 (byte 3 is 0xff) - at `$.node_id`",
        ),
        (
            ld(6, b"mig") + ld(6, b"\xc0\x80"),
            "field 6 (`features`) at offset 5 is not valid UTF-8 (byte 7 is 0xc0) "
            "- at `$.features[1]`",
        ),
        (
            ld(4, ld(1, "\ud800".encode("utf-8", "surrogatepass")) + ld(2, b"v")),
            "field 1 (`key`) at offset 2 is not valid UTF-8 (byte 4 is 0xed) "
            "- at `$.labels[0].key`",
        ),
        (
            ld(14, ld(22, ld(5, b"1g.\xf5gb"))),
            "field 5 (`profile`) at offset 5 is not valid UTF-8 (byte 10 is 0xf5) "
            "- at `$.gpus[0].mig.profile`",
        ),
    ],
    ids=["string", "repeated", "map-key-surrogate", "nested"],
)
def test_invalid_utf8(data: bytes, reason: str) -> None:
    assert both_refuse(data) == f"Invalid `llmgw.v1.Register`: {reason}"


def test_invalid_utf8_in_an_unknown_field_is_not_checked() -> None:
    assert decode(ld(99, b"\xff"), Registration) == Registration()


# --- groups and depth ----------------------------------------------------------------


def test_groups_nested_to_the_limit_are_skipped() -> None:
    data = vi(10, 8) + nested_groups(30, MAX_DEPTH)
    assert decode(data, Registration).node.cpu_count == 8


def test_groups_nested_past_the_limit() -> None:
    assert both_refuse(nested_groups(30, MAX_DEPTH + 1)) == (
        "Invalid `llmgw.v1.Register`: more than 100 nested messages and groups at offset 200"
    )


def test_the_limit_counts_sub_messages_too() -> None:
    # A GPU is one level, its MIG slice another: 98 groups more reach 100.
    assert decode(ld(14, ld(22, nested_groups(30, 98))), Registration).node.gpus[0].mig
    assert both_refuse(ld(14, ld(22, nested_groups(30, 99)))) == (
        "Invalid `llmgw.v1.Register`: more than 100 nested messages and groups at offset 203 "
        "- at `$.gpus[0].mig`"
    )


def test_the_limit_counts_from_where_a_map_entry_sits() -> None:
    # `decode` reads a map of strings as its entries' bytes and parses an
    # entry on its own; its unknown groups still nest from where it sits: a
    # GPU is one level, its NIC paths' entry another, 98 groups more reach 100.
    entry = ld(1, b"eth0") + ld(2, b"mlx5_0")
    gpu = decode(ld(14, ld(13, entry + nested_groups(30, 98))), Registration).node.gpus[0]
    assert gpu.nic_paths == {"eth0": "mlx5_0"}
    assert both_refuse(ld(14, ld(13, entry + nested_groups(30, 99)))).startswith(
        "Invalid `llmgw.v1.Register`: more than 100 nested messages and groups at offset "
    )


def test_a_hundred_thousand_nested_groups_fail_fast() -> None:
    data = tag(30, SGROUP) * 100_000
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: more than 100 nested messages and groups at offset 200"
    )


def test_an_end_group_with_no_group_open() -> None:
    assert both_refuse(vi(10, 1) + tag(30, EGROUP)) == (
        "Invalid `llmgw.v1.Register`: an end-group tag for field 30 at offset 2, "
        "but no group is open"
    )


def test_a_group_never_closed() -> None:
    assert both_refuse(vi(10, 1) + tag(30, SGROUP) + vi(1, 1)) == (
        "Invalid `llmgw.v1.Register`: group 30 opened at offset 2 is never closed"
    )


def test_a_group_closed_by_another_field() -> None:
    assert both_refuse(tag(30, SGROUP) + tag(31, EGROUP)) == (
        "Invalid `llmgw.v1.Register`: an end-group tag for field 31 at offset 2, "
        "but group 30 is open"
    )


def test_a_group_cannot_end_outside_its_sub_message() -> None:
    data = ld(14, tag(30, SGROUP)) + tag(30, EGROUP)
    assert both_refuse(data) == (
        "Invalid `llmgw.v1.Register`: group 30 opened at offset 2 is never closed - at `$.gpus[0]`"
    )


def test_an_unknown_group_is_skipped_on_every_path() -> None:
    data = group(30, vi(10, 5)) + ld(1, b"n1")
    registration = decode(data, Registration)
    assert registration.node.id == "n1"
    assert registration.node.cpu_count == 0  # the group's field is not the message's
    register = decode(data, v1.Register)
    assert (register.node_id, register.cpu_count) == ("n1", 0)


# --- large and repeated input ----------------------------------------------------------


def test_four_thousand_small_gpus() -> None:
    gpus = tuple(GPU(index=i % 8, uuid=f"GPU-{i:05d}", memory_total_mb=81559) for i in range(4000))
    registration = Registration(Node(id="n1", gpus=gpus))
    data = encode(registration)
    assert len(data) > 70_000
    assert decode(data, Registration) == registration
    register = decode(data, v1.Register)
    assert len(register.gpus) == 4000
    assert register.gpus[3999].uuid == "GPU-03999"


# --- any corruption of a valid message ---------------------------------------------------


FUZZED = [Registration, ShardCommand, ShardReport, Heartbeat, GPU]


def _official(data: bytes, model: type) -> Any | None:
    # Read as Go reads a map entry with an unknown field: the key is kept.
    name = pair_for(model).wire
    try:
        return as_go_reads(CLASSES[name], DECODE_CLASSES[name], data)
    except PbDecodeError:
        return None


@pytest.mark.slow
@pytest.mark.parametrize("model", FUZZED, ids=lambda m: m.__name__)
@given(data=st.data())
def test_corrupted_messages_decode_as_the_official_runtime_reads_them(
    model: type, data: st.DataObject
) -> None:
    raw = data.draw(lst.mutated_bytes(model))
    official = _official(raw, model)
    event("the official runtime refuses" if official is None else "valid protobuf")
    try:
        value: object = decode(raw, model)
    except DecodeError:
        if official is None:
            with pytest.raises(DecodeError, match="at offset"):
                decode(raw, wire_class(model))
        elif over_64_bits(raw, official.DESCRIPTOR) is not None:
            event("a varint over 64 bits, which Go refuses")
        else:
            # Valid bytes that make no domain value (a time beyond year 9999).
            with pytest.raises(DecodeError):
                decode(official.SerializeToString(), model)
    else:
        assert official is not None, "the library accepted what the official runtime refuses"
        assert isinstance(value, model)
        assert value == decode(official.SerializeToString(), model)
    try:
        message = decode(raw, wire_class(model))
    except DecodeError:
        if official is not None:
            event("valid, but refused for betterproto2")
        return
    assert official is not None
    assert over_64_bits(raw, official.DESCRIPTOR) is None
    assert plain_bp2(message, official.DESCRIPTOR) == plain_pb(official)


# --- the corpus ------------------------------------------------------------------------

CORPUS = Path(__file__).parents[1] / "corpus"
CORPUS_INDEX: dict[str, dict[str, str]] = json.loads((CORPUS / "index.json").read_text())


def test_the_corpus_index_lists_every_file() -> None:
    assert sorted(CORPUS_INDEX) == sorted(path.name for path in CORPUS.glob("*.bin"))


def _outcome(data: bytes, into: type) -> str:
    try:
        decode(data, into)
    except DecodeError as error:
        return str(error)
    return "ok"


@pytest.mark.parametrize("name", sorted(CORPUS_INDEX))
def test_the_corpus(name: str) -> None:
    entry = CORPUS_INDEX[name]
    data = (CORPUS / name).read_bytes()
    model = getattr(llmgw_wire, entry["model"], None) or getattr(v1, entry["model"])
    proto = f"llmgw.v1.{'Register' if model is Registration else entry['model']}"
    if hasattr(llmgw_wire, entry["model"]):
        proto = pair_for(model).wire
    targets = {"wire": wire_class(model) if hasattr(llmgw_wire, entry["model"]) else model}
    if "domain" in entry:
        targets["domain"] = model
    for target, into in targets.items():
        assert _outcome(data, into) == entry[target], target
    if "ok" not in (entry.get("domain"), entry["wire"]):
        if over_64_bits(data, CLASSES[proto].DESCRIPTOR) is not None:
            return  # the official Python runtime accepts these; Go refuses them, as we do
        with pytest.raises(PbDecodeError):
            CLASSES[proto]().ParseFromString(data)
        return
    # Compared with what Go reads: a map entry with an unknown field keeps its key.
    official = as_go_reads(CLASSES[proto], DECODE_CLASSES[proto], data)
    if entry.get("domain") == "ok":
        assert decode(data, model) == decode(official.SerializeToString(), model)
    if entry["wire"] == "ok":
        assert plain_bp2(decode(data, targets["wire"]), official.DESCRIPTOR) == plain_pb(official)


# --- every path: inspect and the stream's codec ------------------------------------------


@pytest.mark.subprocess
def test_inspect_of_a_mib_envelope_of_unknown_fields(tmp_path: Path) -> None:
    """16.6 s before (betterproto2 walked the unknown fields); a bounded walk names them now."""
    path = tmp_path / "newer.bin"
    path.write_bytes(vi(99, 1) * (1024 * 1024 // 3))
    done = subprocess.run(
        [sys.executable, "-m", "llmgw_wire._cli", "inspect", "-t", "AgentMessage", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (
        1,
        f"error: {path}: Invalid `llmgw.v1.AgentMessage`: no member this version knows "
        "(fields 99)\n",
    )


def test_the_wire_codec_names_the_fields_of_a_newer_member_without_an_object_each() -> None:
    from llmgw_wire.stream.grpclib_codec import UnknownMember, WireCodec

    data = vi(99, 1) * (DEFAULT_MAX_SIZE // 3 - 1) + ld(98, b"x")
    decode(b"", Registration)
    tracemalloc.start()
    try:
        value = WireCodec().decode(data, v1.AgentMessage)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Only the first EXPLAIN_FIELDS fields are looked at: field 98 comes after them.
    assert value == UnknownMember("llmgw.v1.AgentMessage", (99,))
    assert peak < 2 * len(data)
    assert WireCodec().decode(vi(99, 1) + ld(98, b"x"), v1.AgentMessage) == UnknownMember(
        "llmgw.v1.AgentMessage", (98, 99)
    )


# --- the same values on every path -------------------------------------------------------

LABEL_WITH_AN_UNKNOWN_FIELD = ld(4, ld(1, b"k") + ld(2, b"v") + vi(3, 1))


def test_a_map_entry_with_an_unknown_field_keeps_its_key_on_every_path() -> None:
    """As Go reads it; Google's Python runtime alone loses the key."""
    from llmgw_wire.stream.grpclib_codec import WireCodec

    official = REGISTER()
    official.ParseFromString(LABEL_WITH_AN_UNKNOWN_FIELD)
    assert dict(official.labels) == {}
    assert decode(LABEL_WITH_AN_UNKNOWN_FIELD, Registration).node.labels == {"k": "v"}
    assert decode(LABEL_WITH_AN_UNKNOWN_FIELD, Node).labels == {"k": "v"}
    assert decode(LABEL_WITH_AN_UNKNOWN_FIELD, v1.Register).labels == {"k": "v"}
    envelope = ld(1, LABEL_WITH_AN_UNKNOWN_FIELD)
    registration = WireCodec().decode(envelope, v1.AgentMessage)
    assert isinstance(registration, Registration)
    assert registration.node.labels == {"k": "v"}
    # A later entry for the same key wins, as in a map.
    later = LABEL_WITH_AN_UNKNOWN_FIELD + ld(4, ld(1, b"k") + ld(2, b"w"))
    assert decode(later, Registration).node.labels == {"k": "w"}
    assert decode(later, v1.Register).labels == {"k": "w"}


def test_two_oneof_members_on_the_wire_the_last_wins_on_every_path() -> None:
    from llmgw_wire.stream.grpclib_codec import WireCodec

    heartbeat_last = ld(1, ld(1, b"n1")) + ld(3, ld(1, b"n1"))
    assert decode(heartbeat_last, v1.AgentMessage) == v1.AgentMessage(
        heartbeat=v1.Heartbeat(node_id="n1")
    )
    assert WireCodec().decode(heartbeat_last, v1.AgentMessage) == Heartbeat("n1")
    register_last = ld(3, ld(1, b"n1")) + ld(1, ld(1, b"n1"))
    assert WireCodec().decode(register_last, v1.AgentMessage) == Registration(Node(id="n1"))


# --- what encode accepts, decode gives back; what it refuses, it says why -----------------


def test_a_heartbeat_whose_instant_in_utc_is_before_year_1_is_refused_by_encode() -> None:
    import datetime as dt

    from llmgw_wire import EncodeError

    early = dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5)))
    with pytest.raises(EncodeError) as info:
        encode(Heartbeat("n1", early))
    message = str(info.value)
    assert message.startswith(
        "Expected `an aware datetime from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z in "
        "UTC`, got datetime.datetime(1, 1, 1, 0, 0, tzinfo="
    )
    assert message.endswith(" - at `$.sent_at`")
    latest = dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=dt.timezone.utc)
    assert decode(encode(Heartbeat("n1", latest)), Heartbeat) == Heartbeat("n1", latest)


@pytest.mark.parametrize(
    ("data", "into", "reason"),
    [
        (
            vi(2, 253_402_300_800_000),  # 10000-01-01T00:00:00Z, which Go sends
            Heartbeat,
            "Invalid `llmgw.v1.Heartbeat`: 253402300800000 ms since the epoch does not fit a "
            "datetime (from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z: -62135596800000 "
            "to 253402300799999 ms) - at `$.sent_at_unix_ms`",
        ),
        (
            vi(12, 2**63 - 1),
            ShardCommand,
            "Invalid `llmgw.v1.StartShard`: 9223372036854775807 ms does not fit a timedelta "
            "(from -86399999913600000 to 86399999999999999 ms) - at `$.startup_timeout_ms`",
        ),
        (
            vi(12, 10**17),
            ShardCommand,
            "Invalid `llmgw.v1.StartShard`: 100000000000000000 ms does not fit a timedelta "
            "(from -86399999913600000 to 86399999999999999 ms) - at `$.startup_timeout_ms`",
        ),
    ],
    ids=["year-10000", "int64-max", "1e17"],
)
def test_int64_milliseconds_the_domain_cannot_hold_say_the_limit(
    data: bytes, into: type, reason: str
) -> None:
    assert refusal(data, into) == reason


def test_the_largest_durations_cross_the_wire() -> None:
    import datetime as dt

    from llmgw_wire.mapping._rules import MILLIS_RANGE

    for ms in MILLIS_RANGE:
        command = ShardCommand(startup_timeout=dt.timedelta(milliseconds=ms))
        assert decode(encode(command), ShardCommand) == command


def test_a_shard_of_another_node_is_refused_by_encode() -> None:
    """The wire carries the node id once: decoding would silently give the node's."""
    from llmgw_wire import AdoptedShard, EncodeError
    from llmgw_wire.stream.grpclib_codec import WireCodec

    registration = Registration(Node(id="n1"), shards=(AdoptedShard(node_id="n2"),))
    expected = (
        "Expected `'n1' as at `$.node.id` (the wire carries it once, in the enclosing "
        "message)`, got 'n2' - at `$.shards[0].node_id`"
    )
    for write in (encode, converter.unstructure, lambda r: WireCodec().encode(r, v1.AgentMessage)):
        with pytest.raises(EncodeError) as info:
            write(registration)
        assert str(info.value) == expected
    same = Registration(Node(id="n1"), shards=(AdoptedShard(node_id="n1"),))
    assert decode(encode(same), Registration) == same


# --- the JSON codec ----------------------------------------------------------------------


def test_json_has_the_same_limits() -> None:
    from llmgw_wire import JSONError

    over = 20_001
    features = '{"node": {"features": [' + ",".join(['""'] * over) + "]}}"
    assert item_budget(len(features), DEFAULT_MAX_ITEMS) == 10_000 + 60_028 // 16 == 13_751
    with pytest.raises(JSONError) as info:
        wire_json.decode(features, Registration)
    assert str(info.value) == (
        "Invalid `Registration`: at least 20001 elements of arrays and maps is over the limit "
        "of 13751 for 60028 bytes (10000, and one more per 16 bytes, up to 131072)"
    )
    limit = "elements of arrays and maps is over the limit of"
    labels = '{"node": {"labels": {' + ",".join(f'"k{i}": ""' for i in range(3 * over)) + "}}}"
    with pytest.raises(JSONError, match=limit):
        wire_json.decode(labels, Registration)
    unknown = "{" + ",".join(f'"k{i}": 0' for i in range(3 * over)) + "}"
    with pytest.raises(JSONError, match=limit):
        wire_json.decode(unknown, Registration)
    with pytest.raises(JSONError, match="is over the limit of 4194304"):
        wire_json.decode(" " * (DEFAULT_MAX_SIZE + 1), Registration)
    # A newer peer's few keys are fine.
    assert wire_json.decode('{"node": {"id": "n1", "rack": "r7"}}', Registration).node.id == "n1"


@pytest.mark.parametrize("features", [0, 1, 3, 40])
def test_json_counts_whatever_its_length_against_a_small_limit(features: int) -> None:
    """Counting is skipped only for a text of at most its budget in characters."""
    from llmgw_wire import JSONError

    text = '{"node": {"features": [' + ",".join(['""'] * features) + "]}}"
    assert wire_json.decode(text, Registration, max_items=features).node.features == (
        ("",) * features
    )
    if features:
        with pytest.raises(JSONError, match=f"{features} elements of arrays and maps"):
            wire_json.decode(text, Registration, max_items=features - 1)


_SUSPECT = b"\x80" * 9


@st.composite
def _with_suspect_runs(draw: st.DrawFn) -> bytes:
    """A valid registration with fields spliced in that do or do not carry a varint over 64 bits."""
    pieces = [encode(draw(lst.registrations(max_gpus=3, max_shards=2)))]
    for _ in range(draw(st.integers(1, 4))):
        run = _SUSPECT + bytes([draw(st.integers(0, 127))])
        number = draw(st.sampled_from([1, 6, 9, 10, 17, 20, 99, 3000]))
        piece = draw(
            st.sampled_from(
                [
                    tag(number, 0) + run,
                    tag(number, 0) + b"\xff" * 9 + b"\x01",
                    ld(1 if number in (17,) else number, "中文字A".encode()),
                    ld(14, tag(draw(st.sampled_from([1, 4, 13, 20, 99])), 0) + run),
                    ld(14, ld(3, "中文字".encode() + run[-1:].replace(b"\x00", b"\x02"))),
                    ld(14, ld(12, b"\x01" + run + b"\x02")),
                    group(99, tag(5, 0) + run),
                    ld(4, ld(1, b"k") + tag(3, 0) + run),
                ]
            )
        )
        pieces.insert(draw(st.integers(0, len(pieces))), piece)
    return b"".join(pieces)


@given(_with_suspect_runs())
def test_the_fast_walk_for_varints_over_64_bits_agrees_with_the_scanner(raw: bytes) -> None:
    from llmgw_wire.codec._diagnose import diagnose  # the full walk: the reference here

    try:
        REGISTER().ParseFromString(raw)
    except PbDecodeError:
        return
    full = diagnose(raw, REGISTER.DESCRIPTOR, None)
    assert (over_64_bits(raw, REGISTER.DESCRIPTOR) is not None) == (
        full is not None and "more than 64 bits" in full.reason
    )


def test_the_varint_walk_takes_memory_in_proportion() -> None:
    """One regular-expression match over megabytes kept ~170 bytes of state a field."""
    data = vi(10, 1) * (DEFAULT_MAX_SIZE // 2 - 8) + ld(1, "中文字A".encode())
    over_64_bits(b"", REGISTER.DESCRIPTOR)
    tracemalloc.start()
    try:
        assert over_64_bits(data, REGISTER.DESCRIPTOR) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(data) // 4  # a constant: the state of one match, not of the input


def test_the_varint_walk_is_bounded_and_refuses_what_it_could_not_tell() -> None:
    """Empty unknown groups are each a step in Python: past the budget, refused, saying why."""
    from llmgw_wire.codec._varint64 import WALK_STEPS

    suspect = ld(1, "中文字A".encode())
    within = group(99, b"") * (WALK_STEPS // 4) + suspect
    assert decode(within, Registration).node.id == "中文字A"
    beyond = group(99, b"") * WALK_STEPS + suspect
    assert both_refuse(beyond) == (
        f"Invalid `llmgw.v1.Register`: the bytes at offset {len(beyond) - 10} may be a varint "
        "of more than 64 bits (which Go's runtime refuses); refused, as the walk to tell "
        f"stopped at offset {2 * WALK_STEPS}, after {WALK_STEPS} fields it had to look at one "
        "by one"
    )


def test_grpclib_s_wire_codec_reads_through_the_strict_decoder() -> None:
    """betterproto2's parser truncates a string whose length runs past the end; `decode` refuses.

    `WireCodec` is the strict grpclib codec; the wire classes' own `FromString`
    and `parse`, which grpclib's default codec calls, stay betterproto2's.
    """
    from grpclib.encoding.proto import ProtoCodec

    from llmgw_wire.stream.grpclib_codec import WireCodec

    data = encode(sample_registration())
    assert WireCodec().decode(data, v1.Register) == decode(data, v1.Register)
    with pytest.raises(DecodeError, match=r"claims 5 bytes, 2 left - at `\$\.node_id`"):
        WireCodec().decode(b"\x0a\x05ab", v1.Register)
    lenient = ProtoCodec().decode(b"\x0a\x05ab", v1.Register)
    assert isinstance(lenient, v1.Register)
    assert lenient.node_id == "ab"
    assert v1.Register.parse(b"\x0a\x05ab").node_id == "ab"
