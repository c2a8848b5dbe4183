"""The envelope codec: each value in its own member, to bytes and back, within the limits."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from llmgw_wire import GPU, Ack, Compute, Heartbeat, Node, Registration, ShardReport, State
from llmgw_wire import StopCommand as Stop
from llmgw_wire.codec.envelope import (
    AGENT_MESSAGE,
    CONTROL_MESSAGE,
    UnknownMember,
    decode_envelope,
    encode_envelope,
    envelope_codec,
)
from llmgw_wire.errors import DecodeError, EncodeError
from llmgw_wire.testing.sample import sample_command, sample_registration
from llmgw_wire.v1 import AgentMessage, ControlMessage

REPORT = ShardReport("r", "r-s0", State.READY, compute=Compute("cuda", ("cuda:0",), 1, 1))
FROM_AGENT = [
    sample_registration(),
    REPORT,
    Heartbeat("n1", dt.datetime(2025, 1, 2, tzinfo=dt.timezone.utc)),
]
FROM_CONTROL = [sample_command(), Stop("r", "s", dt.timedelta(seconds=30)), Ack("n1", 2, "ok")]


@pytest.mark.parametrize("value", FROM_AGENT, ids=lambda v: type(v).__name__)
def test_agent_values_travel_in_their_own_member(value: Any) -> None:
    data = encode_envelope(value)
    envelope = AgentMessage.parse(data)  # betterproto2 reads the same bytes
    members = [m for m in ("register", "shard_status", "heartbeat") if getattr(envelope, m)]
    assert members == [envelope_codec(AGENT_MESSAGE).member_of(value)]
    assert decode_envelope(data, AGENT_MESSAGE) == value


@pytest.mark.parametrize("value", FROM_CONTROL, ids=lambda v: type(v).__name__)
def test_control_values_travel_in_their_own_member(value: Any) -> None:
    data = encode_envelope(value)
    envelope = ControlMessage.parse(data)
    members = [m for m in ("start_shard", "stop_shard", "ack") if getattr(envelope, m)]
    assert members == [envelope_codec(CONTROL_MESSAGE).member_of(value)]
    assert decode_envelope(data, CONTROL_MESSAGE) == value


def test_an_empty_member_is_present() -> None:
    # Heartbeat() and Ack() encode as empty sub-messages, which are present.
    assert encode_envelope(Heartbeat()) == b"\x1a\x00"
    assert decode_envelope(b"\x1a\x00", AGENT_MESSAGE) == Heartbeat()
    assert decode_envelope(b"\x1a\x00", CONTROL_MESSAGE) == Ack()


def test_a_value_an_envelope_does_not_carry_is_refused() -> None:
    with pytest.raises(TypeError, match="AgentMessage carries Registration, ShardReport"):
        envelope_codec(AGENT_MESSAGE).encode(Ack())
    with pytest.raises(TypeError, match="the envelopes carry Registration"):
        encode_envelope(GPU())
    with pytest.raises(ValueError, match="is not an envelope"):
        envelope_codec("llmgw.v1.Register")


def test_a_value_the_wire_cannot_carry_says_where() -> None:
    too_big = Registration(node=Node(gpus=(GPU(memory_total_mb=2**31),)))
    with pytest.raises(EncodeError, match=r"at `\$\.node\.gpus\[0\]\.memory_total_mb`"):
        encode_envelope(too_big)


def test_an_unknown_member_is_reported_not_raised() -> None:
    unknown = bytes([0x9A, 0x06, 0x02, 0x08, 0x01])  # field 99
    assert decode_envelope(unknown, AGENT_MESSAGE) == UnknownMember(AGENT_MESSAGE, (99,))
    empty = decode_envelope(b"", CONTROL_MESSAGE)
    assert empty == UnknownMember(CONTROL_MESSAGE, ())
    assert isinstance(empty, UnknownMember)
    assert empty.reason == "no member this version knows (no fields at all)"


def test_the_limits_of_decode_apply() -> None:
    many = Registration(node=Node(gpus=tuple(GPU(index=i) for i in range(20))))
    data = encode_envelope(many)
    over = "20 elements of repeated fields and maps is over the limit of 5"
    with pytest.raises(DecodeError, match=over):
        decode_envelope(data, AGENT_MESSAGE, max_items=5)
    with pytest.raises(DecodeError, match=f"{len(data)} bytes is over the limit of 10"):
        decode_envelope(data, AGENT_MESSAGE, max_size=10)


def test_bytes_that_are_not_an_envelope_are_a_decode_error() -> None:
    with pytest.raises(DecodeError, match=r"Invalid `llmgw\.v1\.AgentMessage`"):
        decode_envelope(b"\x0a\x05ab", AGENT_MESSAGE)
