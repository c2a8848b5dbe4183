"""`make bench` still runs, and its hand-written peers still do the library's work.

The benchmark runs whole, with tiny repetitions and a small storm: its
figures then mean nothing; what is checked is that every contender still
computes the same thing (the benchmark refuses to time contenders that
disagree), and that the report and its JSON are complete.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import (
    EncodeError,
    Registration,
    ShardCommand,
    ShardReport,
    converter,
    decode,
    encode,
)
from llmgw_wire.codec import wire_class
from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.mapping import pair_for
from llmgw_wire.testing import strategies as lst
from tests.mapping.test_fast_path import BAD, leaves, replace

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.build
def test_the_benchmark_runs_and_reports_everything(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    for heading in (
        "Register (",
        "StartShard (",
        "ShardStatus (",
        "Storm: ",
        "Import, fresh interpreters",
        "Schema checker against buf: ",
        "Targets",
        "Hostile input",
    ):
        assert heading in run.stdout

    report = json.loads(out.read_text())
    groups = {(r["message"], r["operation"]) for r in report["results"]}
    assert groups == {
        (message, operation)
        for message in ("Register", "StartShard", "ShardStatus")
        for operation in ("bytes -> domain", "domain -> bytes", "wire -> domain", "domain -> wire")
    } | {
        ("AgentMessage(register)", "bytes -> domain"),
        ("Register (numa_node -1)", "bytes -> domain"),
        ("Register (1 GPU)", "bytes -> domain"),
        ("Register (64 GPUs)", "bytes -> domain"),
        ("Register (512 GPUs)", "bytes -> domain"),
        ("Register (a fleet, each its own)", "bytes -> domain"),
        ("ControlMessage(start_shard)", "domain -> bytes"),
    }
    for result in report["results"]:
        assert result["median_ns"] > 0
        assert len(result["samples_ns"]) == report["settings"]["repetitions"]
    assert report["storm"]["registrations"] == 200
    assert report["storm"]["gc_on"]["wall_s"] > 0
    assert report["storm"]["gc_frozen"]["freeze_every"] == 100
    for tools in report["compat"]["median_s"].values():
        assert tools["llmgw-wire compat"] > 0
    assert 3000 < report["sizes"]["Register"] < 4000
    assert report["storm"]["tracked_each"] > 0
    assert report["import"]["library_s"] > report["import"]["bare_s"] > 0
    assert len(report["targets"]) == 21
    # Every decode row has decode without its limits beside it, and its target says what that is.
    decode_rows = {r["message"] for r in report["results"] if r["contender"] == "llmgw decode"}
    assert decode_rows == {
        r["message"]
        for r in report["results"]
        if r["contender"] == "llmgw decode without its limits (internal)"
    }
    assert "Register (64 GPUs)" in decode_rows
    decode_targets = [
        t for t in report["targets"] if "decode vs protobuf + hand-written" in t["name"]
    ]
    assert len(decode_targets) == 5
    assert all("without its limits: " in t["context"] for t in decode_targets)
    assert all(isinstance(target["met"], bool) for target in report["targets"])


# The hand-written peers are only a fair yardstick if they do the library's work:
# the same values out, and the same values refused.

sys.path.insert(0, str(ROOT))
from bench import handwritten_bp2, handwritten_pb, samples  # noqa: E402

HAND_WRITTEN: dict[type, tuple[Callable[[Any], Any], ...]] = {
    Registration: (
        handwritten_bp2.registration_from_wire,
        handwritten_bp2.registration_to_wire,
        handwritten_pb.registration_from_wire,
        handwritten_pb.registration_to_wire,
    ),
    ShardCommand: (
        handwritten_bp2.command_from_wire,
        handwritten_bp2.command_to_wire,
        handwritten_pb.command_from_wire,
        handwritten_pb.command_to_wire,
    ),
    ShardReport: (
        handwritten_bp2.report_from_wire,
        handwritten_bp2.report_to_wire,
        handwritten_pb.report_from_wire,
        handwritten_pb.report_to_wire,
    ),
}


@pytest.mark.parametrize("model", HAND_WRITTEN, ids=lambda m: m.__name__)
@given(data=st.data())
def test_the_hand_written_mappings_map_as_the_library_does(model: type, data: Any) -> None:
    bp2_in, bp2_out, pb_in, pb_out = HAND_WRITTEN[model]
    value = data.draw(lst.domain_values(model))
    raw = encode(value)
    assert bp2_out(value) == converter.unstructure(value)
    assert pb_out(value).SerializeToString(deterministic=True) == raw
    assert bp2_in(wire_class(model).parse(raw)) == value
    official: Any = CLASSES[pair_for(model).wire]
    assert pb_in(official.FromString(raw)) == decode(raw, model)


@pytest.mark.parametrize("model", HAND_WRITTEN, ids=lambda m: m.__name__)
@given(data=st.data())
def test_the_hand_written_mappings_refuse_what_the_library_refuses(model: type, data: Any) -> None:
    _, bp2_out, _, pb_out = HAND_WRITTEN[model]
    value = data.draw(lst.domain_values(model))
    path, kind = data.draw(st.sampled_from(leaves(value)))
    bad = replace(value, path, data.draw(st.sampled_from(BAD[kind])))
    with pytest.raises(EncodeError):
        encode(bad)
    with pytest.raises(ValueError, match="cannot encode"):
        bp2_out(bad)
    # Out of range, upb's own ValueError; anything else, the mapping's.
    with pytest.raises(ValueError, match=r"cannot encode|out of range"):
        pb_out(bad)


def _same_types(left: object, right: object, path: str = "value") -> None:
    """`left` and `right` are of the same types throughout (a dict equals a FrozenMap)."""
    assert type(left) is type(right), f"{path}: {type(left).__name__} vs {type(right).__name__}"
    cls: Any = type(left)
    if attrs.has(cls):
        for field in attrs.fields(cls):
            _same_types(
                getattr(left, field.name), getattr(right, field.name), f"{path}.{field.name}"
            )
    elif isinstance(left, tuple):
        for n, (a, b) in enumerate(zip(left, cast("tuple[object, ...]", right), strict=True)):
            _same_types(a, b, f"{path}[{n}]")


@pytest.mark.parametrize(
    "value",
    [
        samples.registration(),
        samples.registration_negative(),
        *(samples.registration_with_gpus(count) for count in (1, 64, 512)),
        samples.command(),
        samples.report(),
    ],
    ids=["sample", "negative", "1-gpu", "64-gpus", "512-gpus", "command", "report"],
)
def test_the_tuned_hand_written_decoding_builds_what_decode_builds(value: Any) -> None:
    # The baseline of every decode figure of `make bench`: the same values, of the same types.
    model = type(value)
    raw = encode(value)
    from_wire = HAND_WRITTEN[model][2]
    official: Any = CLASSES[pair_for(model).wire]
    built = from_wire(official.FromString(raw))
    assert built == decode(raw, model) == value
    _same_types(built, decode(raw, model))


def test_the_fleet_s_registrations_are_each_its_own() -> None:
    """What makes the fleet row differ from the sample's: nothing of a node repeats in another."""
    first, second = samples.registration_of_its_own(1), samples.registration_of_its_own(2)
    assert first.node.id != second.node.id
    assert not {gpu.uuid for gpu in first.node.gpus} & {gpu.uuid for gpu in second.node.gpus}
    assert len({gpu.uuid for gpu in first.node.gpus}) == len(first.node.gpus)
    assert first.node.storage != second.node.storage
    assert [g.index for g in first.node.gpus] == [g.index for g in second.node.gpus]
