"""Differential tests against Google's protobuf runtime, what the Go side of llmgw uses.

Bytes the library writes (`encode`, and betterproto2's `bytes(message)`) read
back field for field with the official runtime, and bytes the official
runtime writes, or merely accepts, read back field for field with the
library (`decode(data, Model)` and `decode(data, v1.X)`). Inputs are
hypothesis messages of every type, built from the schema's descriptors, and
re-encoded in the non-canonical ways a conformant peer may use: fields out of
order, repeated numbers unpacked or split, a scalar seen twice (the last
wins), a sub-message split in two (merged), map entries without key or value,
a oneof member set over another, unknown fields.

Where betterproto2 on its own reads bytes differently from the official
runtime, a test named after the case pins both what betterproto2 does and
what the library does instead.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import (
    DecodeError,
    Registration,
    State,
    converter,
    decode,
    encode,
    v1,
)
from llmgw_wire.codec import wire_class
from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.mapping import pair_for
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.laws import MODELS
from tests.support import (
    EGROUP,
    I32,
    I64,
    LEN,
    SGROUP,
    VARINT,
    group,
    ld,
    nested_groups,
    plain_bp2,
    plain_pb,
    tag,
    varint,
    vi,
)

#: The official class of each proto message name, and its betterproto2 twin.
OFFICIAL: dict[str, Any] = dict(CLASSES)
TYPED: dict[str, Any] = {pair_for(m).wire: wire_class(m) for m in MODELS}
TYPED["llmgw.v1.AgentMessage"] = v1.AgentMessage
TYPED["llmgw.v1.ControlMessage"] = v1.ControlMessage
DOMAIN: dict[str, type] = {pair_for(m).wire: m for m in MODELS}
ENVELOPES: dict[Any, str] = {
    v1.AgentMessage: "llmgw.v1.AgentMessage",
    v1.ControlMessage: "llmgw.v1.ControlMessage",
}
NAMES = sorted(OFFICIAL)
REGISTER = OFFICIAL["llmgw.v1.Register"]


def test_every_message_type_is_compared() -> None:
    assert set(TYPED) == set(OFFICIAL)


# --- official messages of every type, from the descriptors ---------------------------------

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
}


def _scalars(field: Any) -> st.SearchStrategy[Any]:
    if field.type in _INT_RANGES:
        return st.integers(*_INT_RANGES[field.type])
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_STRING:
        return lst.texts()
    if field.type == FieldDescriptor.TYPE_ENUM:
        # Open enums: numbers a newer peer may send, and the known ones.
        known = [value.number for value in field.enum_type.values]
        return st.sampled_from(known) | lst.int32s()
    raise NotImplementedError(field.type)


@st.composite
def official_messages(draw: st.DrawFn, descriptor: Any) -> Any:
    """A message of the official class for `descriptor`, any field set or not."""
    return _fill(draw, descriptor, OFFICIAL[descriptor.full_name](), 0)


def _fill(draw: st.DrawFn, descriptor: Any, message: Any, depth: int) -> Any:
    oneof_chosen = {
        oneof.name: draw(st.sampled_from([None, *oneof.fields])) for oneof in descriptor.oneofs
    }
    for field in descriptor.fields:
        if field.containing_oneof is not None:
            if oneof_chosen[field.containing_oneof.name] is not field:
                continue
        elif not draw(st.booleans()):
            continue
        sub = field.message_type
        target = getattr(message, field.name)
        if sub is not None and sub.GetOptions().map_entry:
            target.update(draw(st.dictionaries(lst.texts(8), lst.texts(), max_size=3)))
        elif sub is not None and field.is_repeated:
            for _ in range(draw(st.integers(0, 2 if depth < 2 else 0))):
                _fill(draw, sub, target.add(), depth + 1)
        elif sub is not None:
            target.SetInParent()
            _fill(draw, sub, target, depth + 1)
        elif field.is_repeated:
            target.extend(draw(st.lists(_scalars(field), max_size=4)))
        else:
            setattr(message, field.name, draw(_scalars(field)))
    return message


# --- re-encoding a message the way any conformant peer may ----------------------------------


def _scalar_bytes(field: Any, value: Any) -> tuple[int, bytes]:
    if field.type == FieldDescriptor.TYPE_STRING:
        data = value.encode()
        return LEN, varint(len(data)) + data
    return VARINT, varint(int(value))


@st.composite
def reencoded(draw: st.DrawFn, message: Any) -> bytes:
    """`message`'s bytes as a conformant peer may write them, meaning the same."""
    return _encode(draw, message)


def _encode(draw: st.DrawFn, message: Any) -> bytes:
    per_field: list[list[bytes]] = []
    for field, value in message.ListFields():
        chunks: list[bytes] = []
        number = field.number
        sub = field.message_type
        if sub is not None and sub.GetOptions().map_entry:
            for key, item in value.items():
                chunks.extend(_map_entry(draw, number, key, item))
        elif sub is not None and field.is_repeated:
            chunks.extend(ld(number, _encode(draw, item)) for item in value)
        elif sub is not None:
            chunks.extend(_sub_message(draw, number, value))
        elif field.is_repeated and field.type != FieldDescriptor.TYPE_STRING:
            chunks.extend(_numbers(draw, number, list(value)))
        elif field.is_repeated:
            chunks.extend(ld(number, item.encode()) for item in value)
        else:
            wire_type, payload = _scalar_bytes(field, value)
            if draw(st.booleans()):
                # A decoy first: the last value seen is the one that counts.
                decoy_type, decoy = _scalar_bytes(field, draw(_scalars(field)))
                chunks.append(tag(number, decoy_type) + decoy)
            chunks.append(tag(number, wire_type) + payload)
        if field.containing_oneof is not None and draw(st.booleans()):
            # Another member of the oneof first: setting this one clears it.
            others = [f for f in field.containing_oneof.fields if f is not field]
            chunks.insert(0, ld(draw(st.sampled_from(others)).number, b""))
        per_field.append(chunks)
    if draw(st.booleans()):
        per_field.append([_unknown_field(draw)])
    return b"".join(_interleave(draw, per_field))


def _map_entry(draw: st.DrawFn, number: int, key: str, item: str) -> list[bytes]:
    out = []
    if draw(st.booleans()):
        out.append(ld(number, ld(1, key.encode()) + ld(2, b"decoy")))
    fields = []
    if key or draw(st.booleans()):  # an empty key may be left out
        fields.append(ld(1, key.encode()))
    if item or draw(st.booleans()):  # so may an empty value
        fields.append(ld(2, item.encode()))
    if draw(st.booleans()):
        fields.reverse()
    out.append(ld(number, b"".join(fields)))
    return out


def _sub_message(draw: st.DrawFn, number: int, value: Any) -> list[bytes]:
    """A singular sub-message, sometimes split over two occurrences that merge."""
    body = _encode(draw, value)
    if not draw(st.booleans()):
        return [ld(number, body)]
    # Split between fields: each occurrence is a valid message on its own.
    cuts = _field_ends(body)
    cut = draw(st.sampled_from(cuts))
    return [ld(number, body[:cut]), ld(number, body[cut:])]


def _field_ends(body: bytes) -> list[int]:
    """Offsets in `body` between its top-level fields (it has no groups)."""
    ends, pos = [0], 0
    while pos < len(body):
        key, pos = _read_varint(body, pos)
        if key & 7 == VARINT:
            pos = _read_varint(body, pos)[1]
        elif key & 7 == LEN:
            length, pos = _read_varint(body, pos)
            pos += length
        else:
            pos += 8 if key & 7 == I64 else 4
        ends.append(pos)
    return ends


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _numbers(draw: st.DrawFn, number: int, values: list[int]) -> list[bytes]:
    """Repeated numbers: packed, unpacked, or a mix of runs."""
    out: list[bytes] = []
    while values:
        run = draw(st.integers(1, len(values)))
        head, values = values[:run], values[run:]
        if draw(st.booleans()):
            out.append(ld(number, b"".join(varint(v) for v in head)))
        else:
            out.extend(vi(number, v) for v in head)
    return out


def _unknown_field(draw: st.DrawFn) -> bytes:
    number = draw(st.integers(1000, 2**29 - 1))
    wire_type = draw(st.sampled_from([VARINT, I64, LEN, I32]))
    if wire_type == VARINT:
        return vi(number, draw(st.integers(0, 2**64 - 1)))
    if wire_type == LEN:
        return ld(number, draw(st.binary(max_size=8)))
    return tag(number, wire_type) + bytes(8 if wire_type == I64 else 4)


def _interleave(draw: st.DrawFn, lists: list[list[bytes]]) -> list[bytes]:
    """All chunks, each list's in its own order, the lists shuffled together."""
    queues = [list(chunks) for chunks in lists if chunks]
    out = []
    while queues:
        queue = draw(st.sampled_from(queues))
        out.append(queue.pop(0))
        if not queue:
            queues.remove(queue)
    return out


# --- the differential properties -------------------------------------------------------------


def _domain(data: bytes, name: str) -> Any:
    """The domain value of `data`, or the DecodeError type if it makes none."""
    try:
        return decode(data, DOMAIN[name])
    except DecodeError:
        return DecodeError


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_official_bytes_decode_to_the_same_fields(name: str, data: st.DataObject) -> None:
    official = data.draw(official_messages(OFFICIAL[name].DESCRIPTOR))
    raw = official.SerializeToString()
    typed = decode(raw, TYPED[name])
    assert plain_bp2(typed, official.DESCRIPTOR) == plain_pb(official)
    assert bytes(typed) == official.SerializeToString(deterministic=True)
    if name in DOMAIN:
        # Both backends make the same domain value of them.
        structured: Any
        try:
            structured = converter.structure(typed, DOMAIN[name])
        except DecodeError:
            structured = DecodeError
        assert _domain(raw, name) == structured


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_what_a_conformant_peer_may_write_decodes_as_the_official_runtime_reads_it(
    name: str, data: st.DataObject
) -> None:
    official = data.draw(official_messages(OFFICIAL[name].DESCRIPTOR))
    raw = data.draw(reencoded(official))
    # The re-encoding means the same to the official runtime...
    reread = OFFICIAL[name]()
    reread.ParseFromString(raw)
    assert plain_pb(reread) == plain_pb(official)
    # ... and to the library, through either target.
    assert plain_bp2(decode(raw, TYPED[name]), official.DESCRIPTOR) == plain_pb(official)
    if name in DOMAIN:
        assert _domain(raw, name) == _domain(official.SerializeToString(), name)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@given(data=st.data())
def test_library_bytes_decode_with_the_official_runtime(model: type, data: st.DataObject) -> None:
    value = data.draw(lst.domain_values(model))
    typed = converter.unstructure(value)
    for raw in (encode(value), bytes(typed)):
        official = OFFICIAL[pair_for(model).wire]()
        official.ParseFromString(raw)
        assert plain_pb(official) == plain_bp2(typed, official.DESCRIPTOR)


@pytest.mark.parametrize(
    "envelopes", [lst.agent_messages(), lst.control_messages()], ids=["agent", "control"]
)
@given(data=st.data())
def test_envelopes_decode_with_the_official_runtime(
    envelopes: st.SearchStrategy[Any], data: st.DataObject
) -> None:
    envelope = data.draw(envelopes)
    official = OFFICIAL[ENVELOPES[type(envelope)]]()
    official.ParseFromString(bytes(envelope))
    assert plain_pb(official) == plain_bp2(envelope, official.DESCRIPTOR)
    assert decode(official.SerializeToString(), type(envelope)) == envelope


# --- what the official runtime accepts, case by case -----------------------------------------


def official(data: bytes, name: str = "llmgw.v1.Register") -> dict[str, Any]:
    message = OFFICIAL[name]()
    message.ParseFromString(data)
    return plain_pb(message)


def test_unpacked_repeated_numbers() -> None:
    data = ld(14, vi(12, 1) + vi(12, 2) + vi(12, 3))
    assert official(data)["gpus"][0]["nvlink_peers"] == [1, 2, 3]
    assert decode(data, Registration).node.gpus[0].nvlink_peers == (1, 2, 3)
    assert v1.Register.parse(data).gpus[0].nvlink_peers == [1, 2, 3]


def test_fields_out_of_order() -> None:
    data = vi(10, 64) + ld(2, b"host-1") + ld(1, b"n1")
    node = decode(data, Registration).node
    assert (node.id, node.hostname, node.cpu_count) == ("n1", "host-1", 64)
    assert v1.Register.parse(data) == decode(data, v1.Register)


def test_a_scalar_seen_twice_the_last_wins() -> None:
    data = ld(1, b"old") + vi(10, 8) + ld(1, b"new") + vi(10, 16)
    assert official(data)["node_id"] == "new"
    assert decode(data, Registration).node.id == "new"
    assert decode(data, Registration).node.cpu_count == 16
    assert v1.Register.parse(data).node_id == "new"


def test_map_entries_without_key_or_value() -> None:
    data = ld(4, ld(2, b"no-key")) + ld(4, ld(1, b"no-value")) + ld(4, b"")
    assert official(data)["labels"] == {"": "", "no-value": ""}
    assert decode(data, Registration).node.labels == {"": "", "no-value": ""}
    assert decode(data, v1.Register).labels == {"": "", "no-value": ""}


def test_a_map_entry_value_first_and_a_key_seen_twice() -> None:
    data = ld(4, ld(2, b"v1") + ld(1, b"k")) + ld(4, ld(1, b"k") + ld(2, b"v2"))
    assert official(data)["labels"] == {"k": "v2"}
    assert decode(data, Registration).node.labels == {"k": "v2"}


def test_negative_int32s_take_ten_bytes() -> None:
    register = REGISTER(cpu_count=-1)
    raw = register.SerializeToString()
    assert raw == b"\x50" + b"\xff" * 9 + b"\x01"
    assert decode(raw, Registration).node.cpu_count == -1
    assert raw in encode(decode(raw, Registration))
    assert bytes(decode(raw, v1.Register)) == raw


def test_an_int32_written_in_five_bytes_or_with_high_bits_is_cut_to_32_bits() -> None:
    # Older encoders wrote negative int32s in 5 bytes; upb keeps the low 32 bits.
    five = tag(10, VARINT) + b"\xfb\xff\xff\xff\x0f"
    assert official(five)["cpu_count"] == -5
    assert decode(five, Registration).node.cpu_count == -5
    wide = vi(10, 2**40 + 7)
    assert decode(wide, Registration).node.cpu_count == 7
    assert decode(wide, v1.Register).cpu_count == 7


def test_a_bool_is_any_non_zero_varint() -> None:
    data = vi(8, 2**40)
    assert official(data)["engines_probed"] is True
    assert decode(data, Registration).node.engines_probed is True


def test_an_unknown_state_number_survives_a_wire_class_and_fails_in_the_domain() -> None:
    data = ld(17, ld(1, b"r1") + vi(7, 99))
    assert official(data)["running_shards"][0]["state"] == 99
    assert decode(data, Registration).shards[0].state is State.FAILED
    assert int(decode(data, v1.Register).running_shards[0].state) == 99


def test_unknown_fields_are_kept_by_a_wire_class() -> None:
    data = ld(1, b"n1") + ld(99, b"newer") + vi(1000, 5)
    typed = decode(data, v1.Register)
    assert bytes(typed) == data
    assert decode(data, Registration).node.id == "n1"


# --- where betterproto2 disagrees with the official runtime ---------------------------------


def test_betterproto2_replaces_a_sub_message_seen_twice_the_library_merges() -> None:
    data = ld(11, ld(1, b"ubuntu")) + ld(11, ld(2, b"24.04"))
    assert official(data)["host"] == plain_pb(
        OFFICIAL["llmgw.v1.Host"](os_id="ubuntu", os_version="24.04")
    )
    assert v1.Register.parse(data).host == v1.Host(os_version="24.04")
    assert decode(data, v1.Register).host == v1.Host(os_id="ubuntu", os_version="24.04")
    host = decode(data, Registration).node.host
    assert (host.os_id, host.os_version) == ("ubuntu", "24.04")


def test_betterproto2_replaces_a_nested_sub_message_seen_twice_the_library_merges() -> None:
    data = ld(14, ld(22, vi(1, 7)) + ld(22, ld(5, b"1g.10gb")))
    assert official(data)["gpus"][0]["mig"]["parent_index"] == 7
    assert v1.Register.parse(data).gpus[0].mig == v1.MigDevice(profile="1g.10gb")
    assert decode(data, v1.Register).gpus[0].mig == v1.MigDevice(parent_index=7, profile="1g.10gb")
    mig = decode(data, Registration).node.gpus[0].mig
    assert mig is not None
    assert (mig.parent_index, mig.profile) == (7, "1g.10gb")


def test_betterproto2_keeps_two_members_of_a_oneof_the_library_keeps_the_last() -> None:
    data = ld(1, ld(1, b"n1")) + ld(3, ld(1, b"n1"))
    assert set(official(data, "llmgw.v1.AgentMessage")) == {"register", "shard_status", "heartbeat"}
    assert official(data, "llmgw.v1.AgentMessage")["register"] is None
    both = v1.AgentMessage.parse(data)
    assert both.register is not None
    assert both.heartbeat is not None
    assert decode(data, v1.AgentMessage) == v1.AgentMessage(heartbeat=v1.Heartbeat(node_id="n1"))


def test_betterproto2_replaces_a_oneof_member_seen_twice_the_library_merges() -> None:
    data = ld(1, ld(1, b"n1")) + ld(1, ld(2, b"host-1"))
    assert v1.AgentMessage.parse(data).register == v1.Register(hostname="host-1")
    merged = v1.Register(node_id="n1", hostname="host-1")
    assert decode(data, v1.AgentMessage) == v1.AgentMessage(register=merged)


def test_betterproto2_puts_a_number_in_a_string_field_the_library_does_not() -> None:
    data = vi(1, 5)
    assert official(data)["node_id"] == ""  # an unknown field to the official runtime
    misread: Any = v1.Register.parse(data)
    assert misread.node_id == 5
    assert decode(data, Registration).node.id == ""
    assert decode(data, v1.Register).node_id == ""


def test_betterproto2_puts_a_list_in_an_int_field_the_library_does_not() -> None:
    data = ld(10, varint(7))
    assert official(data)["cpu_count"] == 0
    misread: Any = v1.Register.parse(data)
    assert misread.cpu_count == [7]
    assert decode(data, Registration).node.cpu_count == 0
    assert decode(data, v1.Register).cpu_count == 0


def test_betterproto2_reads_a_groups_fields_as_its_own_the_library_skips_the_group() -> None:
    data = group(30, vi(10, 5))
    assert official(data)["cpu_count"] == 0
    assert v1.Register.parse(data).cpu_count == 5
    assert decode(data, Registration).node.cpu_count == 0
    assert decode(data, v1.Register).cpu_count == 0


def test_betterproto2_puts_none_in_a_string_field_on_wire_type_7_the_library_refuses() -> None:
    data = tag(1, 7) + bytes(10)
    assert v1.Register.parse(data).node_id is None
    with pytest.raises(DecodeError, match="invalid wire type 7"):
        decode(data, v1.Register)


# Malformed bytes betterproto2 accepts, each as what it makes of them.
ACCEPTED_BY_BETTERPROTO2 = {
    "a string cut short": (ld(1, b"abcdef")[:-2], v1.Register(node_id="abcd")),
    "a sub-message cut short": (
        ld(14, ld(2, b"GPU-0")[:-2]),
        v1.Register(gpus=[v1.Gpu(uuid="GPU")]),
    ),
    "a tag cut short": (b"\x88", v1.Register()),
    "field number 0": (tag(0, VARINT) + b"\x01", v1.Register()),
    "an end-group with no group open": (vi(10, 1) + tag(30, EGROUP), v1.Register(cpu_count=1)),
    "a group never closed": (tag(30, SGROUP) + vi(10, 1), v1.Register(cpu_count=1)),
    "100,000 nested groups": (nested_groups(30, 100_000), v1.Register()),
    "a fixed64 cut short": (tag(99, I64) + bytes(5), v1.Register()),
    "a tag over 32 bits": (b"\xf8\xff\xff\xff\x10\x01", v1.Register()),
    "a length over 5 bytes": (
        tag(1, LEN) + b"\x82\x80\x80\x80\x80\x00n1",
        v1.Register(node_id="n1"),
    ),
}


@pytest.mark.parametrize(
    ("data", "misread"), ACCEPTED_BY_BETTERPROTO2.values(), ids=list(ACCEPTED_BY_BETTERPROTO2)
)
def test_betterproto2_accepts_malformed_bytes_the_library_refuses(
    data: bytes, misread: Any
) -> None:
    with pytest.raises(Exception, match="Error parsing message"):
        REGISTER().ParseFromString(data)
    assert v1.Register.parse(data) == misread
    with pytest.raises(DecodeError, match="at offset"):
        decode(data, v1.Register)
    with pytest.raises(DecodeError, match="at offset"):
        decode(data, Registration)


# Malformed bytes on which betterproto2 raises something other than one error type.
RAISED_BY_BETTERPROTO2 = {
    "a varint cut short": (vi(8, 1) + tag(10, VARINT) + b"\xff", EOFError),
    "a packed run cut short": (ld(14, ld(12, b"\x01\x02\x80")), EOFError),
    "invalid UTF-8": (ld(1, b"\xff"), UnicodeDecodeError),
    "a varint over 10 bytes": (tag(10, VARINT) + b"\xff" * 10 + b"\x01", ValueError),
    "a length past the end": (tag(14, LEN) + varint(2**31 - 1) + b"GPU-", KeyError),
}


@pytest.mark.parametrize(
    ("data", "raised"), RAISED_BY_BETTERPROTO2.values(), ids=list(RAISED_BY_BETTERPROTO2)
)
def test_betterproto2_raises_assorted_errors_the_library_raises_decode_error(
    data: bytes, raised: type[BaseException]
) -> None:
    with pytest.raises(raised):
        v1.Register.parse(data)
    with pytest.raises(DecodeError, match="at offset"):
        decode(data, v1.Register)
