"""The JSON codec: exact round trips for every domain model, strict types, secrets kept out."""

from __future__ import annotations

import datetime as dt
import json
import pickle
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import llmgw_wire as wire
from llmgw_wire.codec import json as wire_json
from llmgw_wire.codec.json import json_converter, make_json_converter
from llmgw_wire.domain import (
    AdoptedShard,
    Compute,
    Heartbeat,
    Inventory,
    Node,
    NodeState,
    Profile,
    ShardCommand,
    ShardReport,
    ShardSpec,
    State,
    StopCommand,
)
from llmgw_wire.errors import DecodeError, EncodeError, JSONError
from llmgw_wire.mapping import PAIRS
from llmgw_wire.store import SavedShard
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.sample import sample_command, sample_registration

MODELS = [pair.domain for pair in PAIRS] + [Inventory]
KEY = "sk-llmgw-demo-0000"


def ids(cls: type) -> str:
    return cls.__name__


def shard_states() -> st.SearchStrategy[SavedShard]:
    return st.builds(SavedShard, lst.shard_specs(), st.sampled_from(State))


def without_secrets(value: Any) -> Any:
    """`value` with every secret attribute, however deep, back to its default."""
    if not attrs.has(type(value)):
        return value
    changes = {}
    for field in attrs.fields(type(value)):
        if field.metadata.get("secret"):
            changes[field.name] = field.default
        else:
            changes[field.name] = without_secrets(getattr(value, field.name))
    return attrs.evolve(value, **changes)


# --- round trips -----------------------------------------------------------------


def test_every_model_is_covered() -> None:
    assert len(set(MODELS)) == len(MODELS) == len(PAIRS) + 1


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_json_round_trip(cls: type, data: st.DataObject) -> None:
    """Exact with secrets; without them (the default), exact but for the secrets."""
    value = data.draw(lst.domain_values(cls))
    assert wire_json.decode(wire_json.encode(value, include_secrets=True), cls) == value
    assert wire_json.decode(wire_json.encode(value), cls) == without_secrets(value)


@given(lst.shard_specs())
def test_json_round_trip_of_specs_with_compute(spec: ShardSpec) -> None:
    assert wire_json.decode(wire_json.encode(spec, include_secrets=True), ShardSpec) == spec


@given(shard_states())
def test_json_round_trip_of_shard_states(value: SavedShard) -> None:
    assert wire_json.decode(wire_json.encode(value, include_secrets=True), SavedShard) == value


@given(lst.shard_specs(), st.text(min_size=1))
def test_the_default_dump_never_holds_the_key(spec: ShardSpec, key: str) -> None:
    spec = attrs.evolve(spec, api_key=key)
    assert "api_key" not in json.loads(wire_json.encode(spec))
    assert wire_json.decode(wire_json.encode(spec), ShardSpec) == attrs.evolve(spec, api_key="")


def test_the_key_is_left_out_of_default_dumps_and_kept_when_asked() -> None:
    command = sample_command()
    assert KEY not in wire_json.encode(command)
    assert "api_key" not in json.loads(wire_json.encode(command))["spec"]
    assert KEY not in json_converter.dumps(command)
    assert json.loads(wire_json.encode(command, include_secrets=True))["spec"]["api_key"] == KEY
    kept = make_json_converter(include_secrets=True).unstructure(command)
    assert kept["spec"]["api_key"] == KEY


def test_a_sample_registration_reads_as_expected() -> None:
    registration = sample_registration()
    document = json.loads(wire_json.encode(registration))
    assert document["node"]["state"] == "ready"
    assert document["node"]["gpus"][7]["fabric"] is None
    assert document["shards"][0]["state"] == "ready"
    assert wire_json.decode(wire_json.encode(registration), wire.Registration) == registration


def test_text_is_ascii_and_indented_on_request() -> None:
    text = wire_json.encode(Profile(name="mistral-✓"), indent=2)
    assert text.isascii()
    assert text.startswith('{\n  "name": "mistral-\\u2713",\n')
    assert wire_json.decode(text, Profile).name == "mistral-✓"


# --- the representation, value by value -------------------------------------------


def test_enums_are_their_values() -> None:
    assert json.loads(wire_json.encode(ShardReport(state=State.DRAINING)))["state"] == "draining"
    for state in NodeState:
        node = Node(state=state)
        assert json.loads(wire_json.encode(node))["state"] == state.value
        assert wire_json.decode(wire_json.encode(node), Node) == node


def test_an_unknown_shard_state_is_failed_as_on_the_wire() -> None:
    assert wire_json.decode('{"state": "hibernating"}', ShardReport).state is State.FAILED


def test_durations_are_whole_milliseconds() -> None:
    command = ShardCommand(startup_timeout=dt.timedelta(minutes=10))
    assert json.loads(wire_json.encode(command))["startup_timeout"] == 600_000
    stop = StopCommand(grace=dt.timedelta(milliseconds=-1500))
    assert json.loads(wire_json.encode(stop))["grace"] == -1500
    assert wire_json.decode(wire_json.encode(stop), StopCommand) == stop


def test_datetimes_are_iso_8601_with_their_offset() -> None:
    paris = dt.timezone(dt.timedelta(hours=2))
    sent = dt.datetime(2026, 10, 7, 13, 51, 40, 123456, tzinfo=paris)
    text = wire_json.encode(Heartbeat("n", sent))
    assert json.loads(text)["sent_at"] == "2026-10-07T13:51:40.123456+02:00"
    back = wire_json.decode(text, Heartbeat).sent_at
    assert back == sent
    assert back.utcoffset() == dt.timedelta(hours=2)
    zulu = wire_json.decode('{"sent_at": "2026-10-07T11:51:40Z"}', Heartbeat).sent_at
    assert zulu == dt.datetime(2026, 10, 7, 11, 51, 40, tzinfo=dt.timezone.utc)


def test_absent_optionals_are_null_and_missing_ones_none() -> None:
    document = json.loads(wire_json.encode(AdoptedShard()))
    assert document["compute"] is None
    assert document["endpoint"] is None
    assert wire_json.decode("{}", AdoptedShard) == AdoptedShard()
    assert wire_json.decode('{"compute": null}', ShardSpec).compute is None


def test_unknown_keys_are_ignored_and_missing_ones_take_their_default() -> None:
    text = '{"rank": 2, "compute": {"backend": "rocm", "layers_on_npu": 3}, "zone": "b"}'
    assert wire_json.decode(text, ShardSpec) == ShardSpec(rank=2, compute=Compute(backend="rocm"))


def test_a_list_of_models() -> None:
    shards = list(sample_registration().shards)
    text = json_converter.dumps(shards, list[AdoptedShard])
    assert json_converter.loads(text, list[AdoptedShard]) == shards
    assert wire_json.decode(wire_json.encode(shards), list[AdoptedShard]) == shards


# --- what is refused ------------------------------------------------------------

REFUSED = [
    ("", ShardSpec, "Invalid `ShardSpec`: not JSON: Expecting value at line 1, column 1"),
    ('{"rank": ', ShardSpec, "Invalid `ShardSpec`: not JSON: Expecting value at line 1, column 10"),
    ("[1]", ShardSpec, "Invalid `ShardSpec`: expected `object`, got an array"),
    ('{"rank": "a"}', ShardSpec, 'Invalid `ShardSpec`: expected `integer`, got "a" - at `$.rank`'),
    (
        '{"rank": "12"}',
        ShardSpec,
        'Invalid `ShardSpec`: expected `integer`, got "12" - at `$.rank`',
    ),
    ('{"rank": 1.0}', ShardSpec, "Invalid `ShardSpec`: expected `integer`, got 1.0 - at `$.rank`"),
    (
        '{"rank": true}',
        ShardSpec,
        "Invalid `ShardSpec`: expected `integer`, got true - at `$.rank`",
    ),
    ('{"pool": 7}', ShardSpec, "Invalid `ShardSpec`: expected `string`, got 7 - at `$.pool`"),
    (
        '{"gpu_indices": [4, 5, "6"]}',
        ShardSpec,
        'Invalid `ShardSpec`: expected `integer`, got "6" - at `$.gpu_indices[2]`',
    ),
    (
        '{"hcas": "mlx5_2"}',
        ShardSpec,
        'Invalid `ShardSpec`: expected `array`, got "mlx5_2" - at `$.hcas`',
    ),
    (
        '{"profile": []}',
        ShardSpec,
        "Invalid `ShardSpec`: expected `object`, got an array - at `$.profile`",
    ),
    (
        '{"profile": {"env": {"VLLM_USE_V1": 1}}}',
        ShardSpec,
        "Invalid `ShardSpec`: expected `string`, got 1 - at `$.profile.env.VLLM_USE_V1`",
    ),
    (
        '{"profile": {"kv_events": "yes"}}',
        ShardSpec,
        'Invalid `ShardSpec`: expected `boolean`, got "yes" - at `$.profile.kv_events`',
    ),
    (
        '{"profile": {"adapters": [{}, {"name": ["a"]}]}}',
        ShardSpec,
        "Invalid `ShardSpec`: expected `string`, got an array - at `$.profile.adapters[1].name`",
    ),
    (
        '{"compute": 3}',
        ShardSpec,
        "Invalid `ShardSpec`: expected `object | null`, got 3 - at `$.compute`",
    ),
    (
        '{"compute": {"devices": "cuda:0"}}',
        ShardSpec,
        'Invalid `ShardSpec`: expected `array`, got "cuda:0" - at `$.compute.devices`',
    ),
    (
        '{"args": "' + "x" * 80 + '"}',
        Profile,
        'Invalid `Profile`: expected `array`, got "' + "x" * 56 + "... - at `$.args`",
    ),
    (
        '{"endpoint": 8020}',
        AdoptedShard,
        "Invalid `AdoptedShard`: expected `string | null`, got 8020 - at `$.endpoint`",
    ),
    (
        '{"state": 4}',
        AdoptedShard,
        "Invalid `AdoptedShard`: expected `string` (a shard state), got 4 - at `$.state`",
    ),
    (
        '{"state": "gone"}',
        Node,
        'Invalid `Node`: expected `"ready" | "draining" | "offline"`, got "gone" - at `$.state`',
    ),
    (
        '{"startup_timeout": 1.5}',
        ShardCommand,
        "Invalid `ShardCommand`: expected `integer` (milliseconds), got 1.5"
        " - at `$.startup_timeout`",
    ),
    (
        '{"grace": 1000000000000000000}',
        StopCommand,
        "Invalid `StopCommand`: expected `integer` (milliseconds within a timedelta), "
        "got 1000000000000000000 - at `$.grace`",
    ),
    (
        '{"sent_at": "2026-10-07T11:51:40"}',
        Heartbeat,
        "Invalid `Heartbeat`: expected `string` (an ISO 8601 datetime with its UTC offset), "
        'got "2026-10-07T11:51:40" - at `$.sent_at`',
    ),
    (
        '[{}, {"gpus": [{"mig": {"device": "0"}}]}]',
        list[Node],
        'Invalid `list[Node]`: expected `integer`, got "0" - at `$[1].gpus[0].mig.device`',
    ),
]


@pytest.mark.parametrize(("text", "cls", "message"), REFUSED)
def test_what_is_refused_and_how_it_is_said(text: str, cls: type, message: str) -> None:
    with pytest.raises(JSONError) as caught:
        wire_json.decode(text, cls)
    assert str(caught.value) == message


def test_a_mistyped_secret_is_not_shown() -> None:
    with pytest.raises(JSONError) as caught:
        wire_json.decode('{"spec": {"api_key": 123456789}}', ShardCommand)
    assert str(caught.value) == (
        "Invalid `ShardCommand`: expected `string`, got <secret int, not shown>"
        " - at `$.spec.api_key`"
    )
    assert "123456789" not in repr(caught.value)


def test_the_converter_raises_the_same_errors() -> None:
    with pytest.raises(JSONError) as caught:
        json_converter.structure({"gpu_indices": [1, None]}, ShardSpec)
    assert str(caught.value) == (
        "Invalid `ShardSpec`: expected `integer`, got null - at `$.gpu_indices[1]`"
    )
    assert caught.value.path == ("gpu_indices", 1)
    assert caught.value.reason == "expected `integer`, got null"


def test_json_errors_are_decode_errors_and_pickle() -> None:
    with pytest.raises(JSONError) as caught:
        wire_json.decode('{"rank": "a"}', ShardSpec)
    error = caught.value
    assert isinstance(error, DecodeError)
    assert isinstance(error, ValueError)
    assert isinstance(error, wire.WireError)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is JSONError
    assert str(again) == str(error)


DUMP_REFUSED = [
    (
        ShardCommand(startup_timeout=dt.timedelta(microseconds=1500)),
        "Expected `a timedelta of whole milliseconds`, got datetime.timedelta(microseconds=1500)"
        " - at `$.startup_timeout`",
    ),
    (
        # The 0 of a default rank is the same object: the path is still the timeout's.
        ShardCommand(startup_timeout=0),  # type: ignore[arg-type]
        "Expected `a timedelta of whole milliseconds`, got 0 - at `$.startup_timeout`",
    ),
    (
        Heartbeat(sent_at=dt.datetime(2026, 10, 7, 11, 51, 40)),
        "Expected `an aware datetime`, got datetime.datetime(2026, 10, 7, 11, 51, 40)"
        " - at `$.sent_at`",
    ),
    (
        ShardSpec(gpu_indices=(4, "5")),  # type: ignore[arg-type]
        "Expected `integer`, got '5' - at `$.gpu_indices[1]`",
    ),
    (
        # More digits than Python's JSON writes: an EncodeError, not its bare ValueError.
        ShardSpec(gpu_indices=(4, 10**4300)),
        "Expected `integer of at most 4300 digits`, got an int of 14285 bits"
        " - at `$.gpu_indices[1]`",
    ),
    (
        # Written "1", it would come back as another map.
        Profile(env={1: "a"}),  # type: ignore[dict-item]
        "Expected `a string key`, got 1 - at `$.env`",
    ),
    (
        # JSON has no bytes: shown as Python spells them, not a crash of the renderer.
        Profile(args=(b"-v",)),  # type: ignore[arg-type]
        "Expected `string`, got b'-v' - at `$.args[0]`",
    ),
    (
        # Not a model where one is declared: cattrs' own AttributeError before.
        ShardSpec(profile=None),  # type: ignore[arg-type]
        "Expected `Profile`, got None - at `$.profile`",
    ),
    (
        [StopCommand(), StopCommand(grace=dt.timedelta(microseconds=1))],
        "Expected `a timedelta of whole milliseconds`, got datetime.timedelta(microseconds=1)"
        " - at `$[1].grace`",
    ),
]


def int_paths(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """The paths of every int (not a bool, not an enum) in a domain value."""
    if type(value) is int:
        return [path]
    cls: Any = type(value)
    if attrs.has(cls):
        return [
            found
            for field in attrs.fields(cls)
            for found in int_paths(getattr(value, field.name), (*path, field.name))
        ]
    if isinstance(value, tuple):
        return [found for i, item in enumerate(value) for found in int_paths(item, (*path, i))]
    return []


def replaced(value: Any, path: tuple[str | int, ...], new: object) -> Any:
    if not path:
        return new
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        return (*value[:step], replaced(value[step], rest, new), *value[step + 1 :])
    return attrs.evolve(value, **{step: replaced(getattr(value, step), rest, new)})


DIGITS = 4300  # Python's default sys.get_int_max_str_digits()
EXTREME_INTS = st.one_of(
    st.integers(),
    st.integers(min_value=10 ** (DIGITS - 2), max_value=10 ** (DIGITS + 2)),
    st.sampled_from([10**DIGITS - 1, 10**DIGITS, -(10**DIGITS), 2 ** (3 * DIGITS) + 1]),
    st.integers(min_value=0, max_value=2**64).map(lambda n: -(10 ** (DIGITS + 50)) - n),
)


@pytest.mark.parametrize("cls", MODELS, ids=ids)
@given(data=st.data())
def test_any_int_anywhere_dumps_and_loads_back_or_is_an_encode_error_at_its_path(
    cls: type, data: st.DataObject
) -> None:
    value = data.draw(lst.domain_values(cls))
    paths = int_paths(value)
    if not paths:
        return
    path = data.draw(st.sampled_from(paths))
    number = data.draw(EXTREME_INTS)
    value = replaced(value, path, number)
    if abs(number) >= 10**DIGITS:
        with pytest.raises(EncodeError) as caught:
            wire_json.encode(value, include_secrets=True)
        assert caught.value.path == path
        assert caught.value.expected == f"integer of at most {DIGITS} digits"
    else:
        text = wire_json.encode(value, include_secrets=True)
        assert wire_json.decode(text, cls, max_size=len(text)) == value


@pytest.mark.parametrize(("value", "message"), DUMP_REFUSED)
def test_what_a_dump_refuses_and_how_it_is_said(value: object, message: str) -> None:
    with pytest.raises(EncodeError) as caught:
        wire_json.encode(value, include_secrets=True)
    assert str(caught.value) == message


def test_a_dump_does_not_show_a_mistyped_secret() -> None:
    spec = ShardSpec(api_key=123456789)  # type: ignore[arg-type]
    with pytest.raises(EncodeError) as caught:
        wire_json.encode(spec, include_secrets=True)
    assert str(caught.value) == "Expected `string`, got <secret int, not shown> - at `$.api_key`"
    # Left out of the default dump, it is not checked there either.
    assert "api_key" not in wire_json.encode(spec)


def test_what_an_array_or_object_holds_is_never_shown() -> None:
    """A misplaced container may hold a key: only its kind is said."""
    with pytest.raises(JSONError) as caught:
        wire_json.decode('[{"api_key": "sk-llmgw-demo-0000"}]', ShardSpec)
    assert str(caught.value) == "Invalid `ShardSpec`: expected `object`, got an array"
    with pytest.raises(JSONError) as caught:
        wire_json.decode('{"hcas": {"api_key": "sk-llmgw-demo-0000"}}', ShardSpec)
    assert str(caught.value) == "Invalid `ShardSpec`: expected `array`, got an object - at `$.hcas`"
