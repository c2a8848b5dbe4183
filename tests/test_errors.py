"""Values the wire cannot carry: one error type, its message asserted exactly."""

from __future__ import annotations

import datetime as dt
import pickle
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from llmgw_wire import (
    GPU,
    AdoptedShard,
    DecodeError,
    EncodeError,
    GPUFabric,
    Heartbeat,
    LocalWeights,
    MIGDevice,
    Node,
    ShardCommand,
    ShardSpec,
    StopCommand,
    WireError,
    converter,
    decode,
    encode,
    v1,
)
from llmgw_wire.testing.sample import sample_command, sample_node

if TYPE_CHECKING:
    from tests.support import WireBackend

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _node_with_gpu(**gpu: Any) -> Node:
    return Node(gpus=(GPU(), GPU(), GPU(), GPU(**gpu)))


CASES = [
    (
        _node_with_gpu(memory_total_mb=INT32_MAX + 1),
        "Expected `int32`, got 2147483648 - at `$.gpus[3].memory_total_mb`",
    ),
    (
        _node_with_gpu(memory_total_mb=INT32_MIN - 1),
        "Expected `int32`, got -2147483649 - at `$.gpus[3].memory_total_mb`",
    ),
    (
        Node(memory_total_mb=INT64_MAX + 1),
        "Expected `int64`, got 9223372036854775808 - at `$.memory_total_mb`",
    ),
    (
        Node(memory_total_mb=INT64_MIN - 1),
        "Expected `int64`, got -9223372036854775809 - at `$.memory_total_mb`",
    ),
    (
        Node(weights=(LocalWeights(size_bytes=INT64_MAX + 1),)),
        "Expected `int64`, got 9223372036854775808 - at `$.weights[0].size_bytes`",
    ),
    (
        _node_with_gpu(nvlink_peers=(0, 1, INT32_MAX + 1)),
        "Expected `int32`, got 2147483648 - at `$.gpus[3].nvlink_peers[2]`",
    ),
    (
        _node_with_gpu(mig=MIGDevice(parent_memory_total_mb=INT32_MIN - 1)),
        "Expected `int32`, got -2147483649 - at `$.gpus[3].mig.parent_memory_total_mb`",
    ),
    (
        _node_with_gpu(fabric=GPUFabric(state="")),
        "Expected `a non-empty string, since an empty fabric_state means no fabric`, "
        "got '' - at `$.gpus[3].fabric.state`",
    ),
    (
        _node_with_gpu(uuid=7),
        "Expected `string`, got 7 - at `$.gpus[3].uuid`",
    ),
    (
        Node(id="\ud800"),
        "Expected `a string that is valid UTF-8 (no lone surrogates)`, got '\\ud800' - at `$.id`",
    ),
    (
        Node(labels={"zone": "dc1-\udcff"}),
        "Expected `a string that is valid UTF-8 (no lone surrogates)`, "
        "got 'dc1-\\udcff' - at `$.labels.zone`",
    ),
    (
        _node_with_gpu(index=True),
        "Expected `int32`, got True - at `$.gpus[3].index`",
    ),
    (
        Node(labels={"zone": 1}),  # type: ignore[dict-item]
        "Expected `string`, got 1 - at `$.labels.zone`",
    ),
    (
        Node(gpus=(GPU(), "gpu")),  # type: ignore[arg-type]
        "Expected `GPU`, got 'gpu' - at `$.gpus[1]`",
    ),
    (
        attrs.evolve(sample_command(), startup_timeout=dt.timedelta(microseconds=1500)),
        "Expected `a timedelta of whole milliseconds, within int64`, "
        "got datetime.timedelta(microseconds=1500) - at `$.startup_timeout`",
    ),
    (
        ShardCommand(spec=ShardSpec(threads=INT32_MAX + 1)),
        "Expected `int32`, got 2147483648 - at `$.spec.threads`",
    ),
    (
        AdoptedShard(rank=1, endpoint="http://10.0.0.1:8000"),
        "Expected `None, or `http://<leader_addr>:<http_port>` for rank 0`, "
        "got 'http://10.0.0.1:8000' - at `$.endpoint`",
    ),
    (
        Heartbeat(sent_at=dt.datetime(2026, 1, 1)),
        "Expected `an aware datetime of whole milliseconds`, "
        "got datetime.datetime(2026, 1, 1, 0, 0) - at `$.sent_at`",
    ),
]


@pytest.mark.parametrize(("value", "message"), CASES)
def test_encode_error_names_the_path_and_the_value(
    backend: WireBackend, value: object, message: str
) -> None:
    with pytest.raises(EncodeError) as excinfo:
        backend.encode(value)
    assert str(excinfo.value) == message


def test_int_bounds_themselves_are_carried() -> None:
    gpu = GPU(memory_total_mb=INT32_MAX, memory_used_mb=INT32_MIN)
    node = Node(memory_total_mb=INT64_MIN, gpus=(gpu,))
    assert decode(encode(node), Node) == node


def test_the_error_is_a_value_error_and_survives_pickling() -> None:
    with pytest.raises(EncodeError) as excinfo:
        encode(Node(cpu_count=2**40))
    error = excinfo.value
    assert isinstance(error, ValueError)
    assert isinstance(error, WireError)
    assert (error.expected, error.got, error.path) == ("int32", 2**40, ("cpu_count",))
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_a_spec_with_compute_cannot_ride_a_start_shard() -> None:
    """StartShard has no compute field: refusing beats silently dropping it."""
    from llmgw_wire import Compute

    spec = attrs.evolve(sample_command().spec, compute=Compute(backend="cuda"))
    with pytest.raises(EncodeError, match=r"at `\$\.compute`"):
        encode(spec)


def test_encoding_something_that_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="not a domain model carried by a wire message"):
        encode(GPUFabric(state="x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a domain model"):
        encode(object())  # type: ignore[arg-type]


def test_decode_error_names_the_message_type() -> None:
    with pytest.raises(DecodeError) as excinfo:
        decode(b"\x0a\x05ab", Node)
    assert excinfo.value.message_type == "llmgw.v1.Register"
    assert str(excinfo.value).startswith("Invalid `llmgw.v1.Register`: ")


def test_a_duration_beyond_timedelta_is_a_decode_error(backend: WireBackend) -> None:
    raw = bytes(v1.StopShard(replica_id="r", grace_period_ms=INT64_MAX))
    with pytest.raises(DecodeError) as excinfo:
        backend.decode(raw, StopCommand)
    assert str(excinfo.value) == (
        "Invalid `llmgw.v1.StopShard`: 9223372036854775807 ms does not fit a timedelta"
        " (from -86399999913600000 to 86399999999999999 ms) - at `$.grace_period_ms`"
    )


def test_structure_refuses_the_wrong_wire_class() -> None:
    with pytest.raises(DecodeError, match="expected a Gpu message, got MigDevice"):
        converter.structure(v1.MigDevice(), GPU)


def test_sample_values_encode() -> None:
    assert decode(encode(sample_node()), Node) == sample_node()


def test_a_fast_path_that_disagrees_with_the_explanation_is_an_internal_error() -> None:
    # The compiled function refuses a value the explaining walk accepts: a bug
    # in the library, reported as its own error, naming the type and the path,
    # with nothing chained that could quote the value.
    from llmgw_wire.codec._guard import guarded_unstructure
    from llmgw_wire.errors import InternalError

    def refuse(value: object) -> bytes:
        raise ValueError(f"upb refused {value!r}")

    encode_node = guarded_unstructure(refuse, Node)
    with pytest.raises(InternalError) as caught:
        encode_node(sample_node())
    assert str(caught.value) == (
        "Internal error: the fast path refused to encode a `Node` that the mapping's"
        " checks accept - at `$`; please report it"
    )
    assert caught.value.__context__ is None
    assert caught.value.__cause__ is None
    assert isinstance(caught.value, WireError)
    assert pickle.loads(pickle.dumps(caught.value)).path == ()
