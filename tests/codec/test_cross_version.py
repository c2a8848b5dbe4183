"""Peers on other versions of the schema: older agents, newer agents and control planes.

Agents and control planes are upgraded one at a time, so for months each side
talks to peers on older and newer schemas. The peers here are real schemas,
compiled at test time from `tests/schemas/` with grpcio-tools' protoc:

* `older`: before MIG support and compute reporting (no `GPU.mig`, no
  `MIGDevice`, no `Compute`, no `RunningShard.compute` or
  `ShardStatus.compute`);
* `newer`: this schema plus fields in several messages (`GPU.power_watts`,
  `Register.rack`, `Compute.kv_cache_bytes`, `StartShard.priority`), a shard
  state (`STATE_HIBERNATING = 8`) and an envelope member of a new message in
  each direction (`AgentMessage.metrics`, `ControlMessage.drain_node`);

and the schema of every released version, kept with its frozen fixtures.
The messages they send are this version's fixtures (`tests/fixtures/HEAD/`) as
the peer's schema carries them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import betterproto2
import pytest
from google.protobuf import descriptor_pb2, json_format
from hypothesis import given

from llmgw_wire import (
    Node,
    Registration,
    ShardCommand,
    ShardReport,
    ShardSpec,
    State,
    converter,
    decode,
    encode,
    v1,
)
from llmgw_wire.codec._schema import descriptor_set
from llmgw_wire.testing import strategies as lst
from tests.support import (
    COMMAND,
    FIXTURES,
    NODE,
    REGISTRATION,
    REPORT,
    SCHEMA,
    SPEC,
    compile_schema,
    message_classes,
    message_of,
    read,
    render,
    shared_field_differences,
    versions,
)

if TYPE_CHECKING:
    from collections.abc import Collection

SCHEMAS = Path(__file__).parents[1] / "schemas"

#: The messages of this schema that the older one does not have.
NEWER_THAN_OLDER = {"Compute", "MIGDevice"}


@cache
def _current() -> dict[str, Any]:
    return message_classes(descriptor_set())


@cache
def _head() -> dict[str, bytes]:
    return render()


def _stems(exclude: Collection[str] = ()) -> list[str]:
    return [
        name.removesuffix(".binpb")
        for name in _head()
        if name.endswith(".binpb") and name != SCHEMA and message_of(name) not in exclude
    ]


@pytest.fixture(scope="module")
def older(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("schemas") / "older.binpb"
    return message_classes(compile_schema(SCHEMAS / "older", out))


@pytest.fixture(scope="module")
def newer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("schemas") / "newer.binpb"
    return message_classes(compile_schema(SCHEMAS / "newer", out))


def _from_head(classes: dict[str, Any], stem: str) -> Any:
    """A HEAD fixture as a peer on `classes` builds it: what its schema has of it."""
    cls = classes[message_of(stem)]
    return json_format.Parse(_head()[f"{stem}.json"], cls(), ignore_unknown_fields=True)


def _state_number(classes: dict[str, Any], name: str) -> int:
    enum = classes["ShardStatus"].DESCRIPTOR.enum_types_by_name["State"]
    return enum.values_by_name[name].number  # type: ignore[no-any-return]


def _fields(classes: dict[str, Any], message: str) -> dict[str, tuple[int, int]]:
    descriptor = classes[message].DESCRIPTOR
    return {f.name: (f.number, f.type) for f in descriptor.fields}


def test_the_peer_schemas_differ_as_described(older: dict[str, Any], newer: dict[str, Any]) -> None:
    current = _current()
    # A message added to proto/ is one more the older schema lacks.
    assert set(current) - set(older) == NEWER_THAN_OLDER
    assert "mig" not in _fields(older, "GPU")
    assert "compute" not in _fields(older, "RunningShard")
    assert "compute" not in _fields(older, "ShardStatus")
    for name in older:
        # Every field the older schema has, this one has alike.
        mine = _fields(current, name)
        assert {k: mine[k] for k in _fields(older, name)} == _fields(older, name), name
    # The newer schema is this one plus what it adds: when proto/ changes,
    # newer/ follows.
    assert set(newer) - set(current) == {"Metrics", "DrainNode"}
    added = {
        "GPU": {"power_watts"},
        "Register": {"rack"},
        "Compute": {"kv_cache_bytes"},
        "StartShard": {"priority"},
        "AgentMessage": {"metrics"},
        "ControlMessage": {"drain_node"},
    }
    for name in current:
        theirs = _fields(newer, name)
        assert theirs.keys() - _fields(current, name).keys() == added.get(name, set()), name
        assert {k: theirs[k] for k in _fields(current, name)} == _fields(current, name), name
    assert _state_number(newer, "STATE_HIBERNATING") == 8
    assert 8 not in {s.value for s in v1.ShardStatusState}


# --- an older agent talks to this control plane -------------------------------


def test_registration_from_an_agent_before_mig_and_compute(older: dict[str, Any]) -> None:
    data = _from_head(older, "Register").SerializeToString(deterministic=True)
    expected = attrs.evolve(
        REGISTRATION,
        node=attrs.evolve(NODE, gpus=tuple(attrs.evolve(g, mig=None) for g in NODE.gpus)),
        shards=tuple(attrs.evolve(s, compute=None) for s in REGISTRATION.shards),
    )
    registration = decode(data, Registration)
    assert [gpu.mig for gpu in registration.node.gpus] == [None, None]
    assert [shard.compute for shard in registration.shards] == [None, None]
    assert registration == expected
    assert decode(data, Node) == expected.node
    typed = decode(data, v1.Register)
    assert converter.structure(typed, Registration) == expected
    assert bytes(typed) == data


def test_shard_report_from_an_agent_before_compute(older: dict[str, Any]) -> None:
    expected = attrs.evolve(REPORT, compute=None)
    data = _from_head(older, "ShardStatus").SerializeToString(deterministic=True)
    assert decode(data, ShardReport) == expected
    envelope = _from_head(older, "AgentMessage.shard_status").SerializeToString(deterministic=True)
    name, member = betterproto2.which_one_of(decode(envelope, v1.AgentMessage), "msg")
    assert name == "shard_status"
    assert converter.structure(member, ShardReport) == expected


@given(lst.domain_values(Registration))
def test_any_registration_as_an_agent_before_mig_sends_it(
    older: dict[str, Any], registration: Registration
) -> None:
    message = older["Register"].FromString(encode(registration))
    message.DiscardUnknownFields()
    expected = attrs.evolve(
        registration,
        node=attrs.evolve(
            registration.node,
            gpus=tuple(attrs.evolve(g, mig=None) for g in registration.node.gpus),
        ),
        shards=tuple(attrs.evolve(s, compute=None) for s in registration.shards),
    )
    assert decode(message.SerializeToString(deterministic=True), Registration) == expected


# --- this version talks to older and newer peers ------------------------------


def _read_by_peer(peer: dict[str, Any], stem: str) -> None:
    """The peer reads the fields it shares with this version alike, and keeps the others."""
    message = message_of(stem)
    data = _head()[f"{stem}.binpb"]
    mine = _current()[message].FromString(data)
    theirs = peer[message].FromString(data)
    assert shared_field_differences(theirs, mine) == []
    assert shared_field_differences(mine, theirs) == []
    # A peer that stores or forwards the message loses nothing it did not know.
    assert _current()[message].FromString(theirs.SerializeToString(deterministic=True)) == mine


@pytest.mark.parametrize("stem", _stems(exclude=NEWER_THAN_OLDER))
def test_this_version_read_by_an_older_peer(older: dict[str, Any], stem: str) -> None:
    _read_by_peer(older, stem)


@pytest.mark.parametrize("stem", _stems())
def test_this_version_read_by_a_newer_peer(newer: dict[str, Any], stem: str) -> None:
    _read_by_peer(newer, stem)
    data = _head()[f"{stem}.binpb"]
    # Nothing of it is new to the newer peer, so it writes the same bytes back.
    theirs = newer[message_of(stem)].FromString(data)
    assert theirs.SerializeToString(deterministic=True) == data


def _released_cases() -> list[Any]:
    cases: list[Any] = []
    for version in versions():
        schema = descriptor_pb2.FileDescriptorSet.FromString(read(FIXTURES / version)[SCHEMA])
        known = set(message_classes(schema))
        cases.extend(
            pytest.param(version, stem, id=f"{version}/{stem}")
            for stem in _stems()
            if message_of(stem) in known
        )
    return cases


@pytest.mark.parametrize(("version", "stem"), _released_cases())
def test_this_version_read_by_every_released_version(version: str, stem: str) -> None:
    schema = descriptor_pb2.FileDescriptorSet.FromString(read(FIXTURES / version)[SCHEMA])
    _read_by_peer(message_classes(schema), stem)


@given(lst.domain_values(Registration))
def test_any_registration_read_by_an_older_control_plane(
    older: dict[str, Any], registration: Registration
) -> None:
    data = encode(registration)
    mine = _current()["Register"].FromString(data)
    theirs = older["Register"].FromString(data)
    assert shared_field_differences(theirs, mine) == []
    assert _current()["Register"].FromString(theirs.SerializeToString()) == mine


# --- a newer agent or control plane talks to this version -----------------------


def _kept(newer_message: Any, *encoded: bytes) -> None:
    """Each re-encoding of a newer peer's message still holds all it had."""
    for data in encoded:
        assert type(newer_message).FromString(data) == newer_message


def test_registration_from_a_newer_agent(newer: dict[str, Any]) -> None:
    message = _from_head(newer, "Register")
    message.rack = "r07-u12"
    for i, gpu in enumerate(message.gpus):
        gpu.power_watts = 980 + i
    message.running_shards[0].compute.kv_cache_bytes = 34_359_738_368
    message.running_shards[1].state = _state_number(newer, "STATE_HIBERNATING")
    data = message.SerializeToString(deterministic=True)

    expected = attrs.evolve(
        REGISTRATION,
        shards=(REGISTRATION.shards[0], attrs.evolve(REGISTRATION.shards[1], state=State.FAILED)),
    )
    assert decode(data, Registration) == expected
    assert decode(data, Node) == NODE
    typed = decode(data, v1.Register)
    assert converter.structure(typed, Registration) == expected
    assert converter.structure(v1.Register.parse(data), Registration) == expected
    # The wire messages keep the state number and the fields they do not know.
    assert typed.running_shards[1].state == 8
    upb = _current()["Register"].FromString(data)
    assert upb.running_shards[1].state == 8
    _kept(message, bytes(typed), upb.SerializeToString(deterministic=True))


def test_shard_report_from_a_newer_agent(newer: dict[str, Any]) -> None:
    message = _from_head(newer, "ShardStatus")
    message.state = _state_number(newer, "STATE_HIBERNATING")
    message.compute.kv_cache_bytes = 34_359_738_368
    data = message.SerializeToString(deterministic=True)

    assert decode(data, ShardReport) == attrs.evolve(REPORT, state=State.FAILED)
    typed = decode(data, v1.ShardStatus)
    assert typed.state == 8
    upb = _current()["ShardStatus"].FromString(data)
    _kept(message, bytes(typed), upb.SerializeToString(deterministic=True))


def test_command_from_a_newer_control_plane(newer: dict[str, Any]) -> None:
    message = _from_head(newer, "StartShard")
    message.priority = 10
    data = message.SerializeToString(deterministic=True)

    assert decode(data, ShardCommand) == COMMAND
    assert decode(data, ShardSpec) == SPEC
    typed = decode(data, v1.StartShard)
    assert converter.structure(typed, ShardCommand) == COMMAND
    upb = _current()["StartShard"].FromString(data)
    _kept(message, bytes(typed), upb.SerializeToString(deterministic=True))


@pytest.mark.parametrize(
    ("envelope", "member", "values"),
    [
        (
            "AgentMessage",
            "metrics",
            {"node_id": NODE.id, "gpu_power_watts": {"GPU-a": 980, "GPU-b": 975}},
        ),
        ("ControlMessage", "drain_node", {"node_id": NODE.id, "reason": "firmware update"}),
    ],
)
def test_envelope_member_from_a_newer_peer_is_skipped(
    newer: dict[str, Any], envelope: str, member: str, values: dict[str, Any]
) -> None:
    message = newer[envelope]()
    json_format.ParseDict(values, getattr(message, member))
    assert message.WhichOneof("msg") == member
    data = message.SerializeToString(deterministic=True)

    # No member this version knows is set: the receiver skips the message.
    typed = decode(data, getattr(v1, envelope))
    assert betterproto2.which_one_of(typed, "msg") == ("", None)
    upb = _current()[envelope].FromString(data)
    assert upb.WhichOneof("msg") is None
    _kept(message, bytes(typed), upb.SerializeToString(deterministic=True))
