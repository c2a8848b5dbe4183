"""Hostile bytes: `decode` returns a value or raises `DecodeError`, and says what was wrong.

Never another exception, never a partial message, never a hang, never memory
out of proportion to the input. Google's parser (upb) decides; the library's
scanner (`llmgw_wire.codec.scan`) names the problem after upb refused.

A known field sent with the wrong wire type is, for Google's runtime, an
unknown field (conformant: a peer whose schema changed the field's type).
The library keeps that rule when it decodes into a domain model, which
ignores unknown fields, and refuses such bytes for a `llmgw_wire.v1` target,
where betterproto2 would store the value in the typed field.
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
from rawwire import (
    EGROUP,
    I64,
    SGROUP,
    group,
    ld,
    nested_groups,
    plain_bp2,
    plain_pb,
    tag,
    varint,
    vi,
)

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
from llmgw_wire.codec.scan import MAX_DEPTH
from llmgw_wire.codec.schema import CLASSES
from llmgw_wire.mapping import pair_for
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.laws import MODELS
from llmgw_wire.testing.sample import sample_registration

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
    assert DEFAULT_MAX_ITEMS == 10_000
    at_limit = EMPTY_GPU * DEFAULT_MAX_ITEMS
    assert len(decode(at_limit, Node).gpus) == DEFAULT_MAX_ITEMS
    assert len(decode(at_limit, v1.Register).gpus) == DEFAULT_MAX_ITEMS
    assert both_refuse(at_limit + EMPTY_GPU) == (
        "Invalid `llmgw.v1.Register`: 10001 elements of repeated fields is over the limit of 10000"
    )


def test_the_item_limit_is_configurable_and_counts_every_repeated_message_field() -> None:
    data = encode(sample_registration())
    # 10 GPUs, 2 weights, 2 storages, 2 fabrics, 2 shards, 3 labels, 3 engine versions.
    assert decode(data, Registration, max_items=24) == sample_registration()
    assert refusal(data, Registration, max_items=23) == (
        "Invalid `llmgw.v1.Register`: 24 elements of repeated fields is over the limit of 23"
    )


def test_the_item_limit_reaches_through_singular_sub_messages() -> None:
    adapters = ld(11, (tag(12, 2) + varint(0)) * 4)  # StartShard.profile.adapters
    assert len(decode(adapters, ShardCommand).spec.profile.adapters) == 4
    assert refusal(adapters, ShardCommand, max_items=3) == (
        "Invalid `llmgw.v1.StartShard`: 4 elements of repeated fields is over the limit of 3"
    )


def test_no_repeated_message_is_nested_in_another() -> None:
    """The item count does not look inside repeated elements: the schema must not need it.

    A map inside one (a GPU's `nic_paths`) is fine: its entries collapse onto
    distinct keys, which each cost bytes on the wire.
    """

    def repeated_messages(descriptor: Any, seen: frozenset[str] = frozenset()) -> list[str]:
        found = []
        for field in descriptor.fields:
            sub = field.message_type
            if sub is None or sub.full_name in seen or sub.GetOptions().map_entry:
                continue
            if field.is_repeated:
                found.append(f"{descriptor.full_name}.{field.name}")
            found += repeated_messages(sub, seen | {descriptor.full_name})
        return found

    for message in CLASSES.values():
        for field in message.DESCRIPTOR.fields:  # type: ignore[attr-defined]
            sub = field.message_type
            if field.is_repeated and sub is not None and not sub.GetOptions().map_entry:
                assert repeated_messages(sub) == [], field.full_name


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
        "        assert 'over the limit of 10000' in str(e), e\n"
        "    else:\n"
        "        raise AssertionError('accepted')\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    )
    assert int(done.stdout) < 128  # MiB of growth in the peak resident set


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


def test_a_string_sent_as_a_varint_is_refused_for_a_wire_class() -> None:
    assert refusal(vi(1, 5), v1.Register) == (
        "Invalid `llmgw.v1.Register`: field 1 (`node_id`) at offset 0 arrived as varint, "
        "not length-delimited; betterproto2 would store it in the field, where the official "
        "runtime keeps it as an unknown field (decoding into the domain model ignores it) "
        "- at `$.node_id`"
    )


def test_a_sub_message_sent_as_a_varint() -> None:
    data = vi(11, 3) + ld(14, vi(1, 2) + vi(22, 1))
    assert decode(data, Registration).node.host == decode(b"", Registration).node.host
    assert decode(data, Registration).node.gpus[0].mig is None
    assert refusal(data, v1.Register) == (
        "Invalid `llmgw.v1.Register`: field 11 (`host`) at offset 0 arrived as varint, "
        "not length-delimited; betterproto2 would store it in the field, where the official "
        "runtime keeps it as an unknown field (decoding into the domain model ignores it) "
        "- at `$.host`"
    )


def test_a_packed_run_is_the_right_wire_type_for_repeated_numbers() -> None:
    unpacked = ld(14, vi(12, 1) + vi(12, 2) + ld(12, varint(3) + varint(4)))
    assert decode(unpacked, Registration).node.gpus[0].nvlink_peers == (1, 2, 3, 4)
    assert list(decode(unpacked, v1.Register).gpus[0].nvlink_peers) == [1, 2, 3, 4]


def test_a_number_sent_as_a_string_is_an_unknown_field() -> None:
    # A singular int32 packs nothing: length-delimited is the wrong wire type.
    data = ld(10, varint(7))
    assert decode(data, Registration).node.cpu_count == 0
    assert "field 10 (`cpu_count`) at offset 0 arrived as length-delimited" in refusal(
        data, v1.Register
    )


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


def test_an_unknown_group_is_skipped_by_the_domain_and_refused_for_a_wire_class() -> None:
    data = group(30, vi(10, 5)) + ld(1, b"n1")
    registration = decode(data, Registration)
    assert registration.node.id == "n1"
    assert registration.node.cpu_count == 0  # the group's field is not the message's
    assert refusal(data, v1.Register) == (
        "Invalid `llmgw.v1.Register`: group 30 at offset 0; betterproto2 would read its "
        "contents as fields of the enclosing message, where the official runtime skips it "
        "(decoding into the domain model ignores it)"
    )


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
    message = CLASSES[pair_for(model).wire]()
    try:
        message.ParseFromString(data)
    except PbDecodeError:
        return None
    return message


@pytest.mark.parametrize("model", FUZZED, ids=lambda m: m.__name__)
@given(data=st.data())
def test_corrupted_messages_decode_as_the_official_runtime_reads_them(
    model: type, data: st.DataObject
) -> None:
    raw = data.draw(lst.mutated_bytes(model))
    official = _official(raw, model)
    event("the official runtime refuses" if official is None else "valid protobuf")
    try:
        value = decode(raw, model)
    except DecodeError:
        if official is None:
            with pytest.raises(DecodeError, match="at offset"):
                decode(raw, wire_class(model))
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
    assert plain_bp2(message, official.DESCRIPTOR) == plain_pb(official)


# --- the corpus ------------------------------------------------------------------------

CORPUS = Path(__file__).parent / "corpus"
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
    official = CLASSES[f"llmgw.v1.{'Register' if model is Registration else entry['model']}"]()
    targets = {"wire": wire_class(model) if model is Registration else model}
    if "domain" in entry:
        targets["domain"] = model
    for target, into in targets.items():
        assert _outcome(data, into) == entry[target], target
    if "ok" not in (entry.get("domain"), entry["wire"]):
        with pytest.raises(PbDecodeError):
            official.ParseFromString(data)
        return
    official.ParseFromString(data)
    if entry.get("domain") == "ok":
        assert decode(data, model) == decode(official.SerializeToString(), model)
    if entry["wire"] == "ok":
        assert plain_bp2(decode(data, targets["wire"]), official.DESCRIPTOR) == plain_pb(official)
