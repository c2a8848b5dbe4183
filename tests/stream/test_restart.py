"""What a shard computes on survives the agent's and the control plane's restarts.

The story runs in real processes (`restart_roles.py`), each of which knows
only the files it is handed: the control plane's StartShard bytes, the
agent's shard store, the agent's Register bytes. The compute placement the
first agent learned must reach a control plane that never saw it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
import pytest

import llmgw_wire as wire
from llmgw_wire import v1
from llmgw_wire.codec import json as wire_json
from llmgw_wire.store import ShardStore
from llmgw_wire.testing.sample import sample_command

pytestmark = pytest.mark.subprocess

ROLES = Path(__file__).with_name("restart_roles.py")
TIMEOUT_S = 30

COMPUTE = wire.Compute("cuda", ("cuda:4", "cuda:5", "cuda:6"), 40, 40)


def run_role(role: str, *args: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(ROLES), role, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def restart_story(tmp_path: Path, compute: wire.Compute | None) -> list[wire.AdoptedShard]:
    start, state, register = tmp_path / "start.bin", tmp_path / "shards", tmp_path / "reg.bin"
    run_role("control-start", start, cwd=tmp_path)
    learned = () if compute is None else (wire_json.encode(compute),)
    run_role("agent-start", start, state, *learned, cwd=tmp_path)
    run_role("agent-register", state, register, cwd=tmp_path)
    adopted = run_role("control-adopt", register, cwd=tmp_path)
    shards: list[wire.AdoptedShard] = wire_json.json_converter.loads(
        adopted, list[wire.AdoptedShard]
    )
    return shards


def test_compute_survives_agent_and_control_plane_restarts(tmp_path: Path) -> None:
    (shard,) = restart_story(tmp_path, COMPUTE)
    spec = sample_command().spec
    assert shard == wire.AdoptedShard(
        node_id="gpu-node-017",
        replica_id=spec.replica_id,
        shard_id=spec.shard_id,
        rank=0,
        gpu_indices=(4, 5, 6),
        hcas=("mlx5_2",),
        http_port=8020,
        state=wire.State.READY,
        model="mistral-small",
        profile="vllm-mistral-tp1",
        pool="chat",
        fabric="ib-dc1-b",
        profile_fp="sha256:c0ffee42",
        compute=COMPUTE,
        endpoint="http://10.40.7.17:8020",
    )
    saved = ShardStore(tmp_path / "shards").load(spec.shard_id)
    assert saved is not None
    # The state file kept the key the engine needs; the wire did not carry it back.
    assert saved.spec.api_key == "sk-llmgw-demo-0000"
    assert b"sk-llmgw-demo-0000" not in (tmp_path / "reg.bin").read_bytes()


def test_a_shard_whose_placement_is_unknown_is_adopted_without_one(tmp_path: Path) -> None:
    (shard,) = restart_story(tmp_path, None)
    assert shard.compute is None
    assert shard.state is wire.State.READY
    register = v1.Register.parse((tmp_path / "reg.bin").read_bytes())
    assert register.running_shards[0].compute is None


# --- the wire's part, example by example ------------------------------------------


def test_a_spec_without_compute_reports_none_not_an_empty_one() -> None:
    spec = sample_command().spec
    message = wire.running_shard_from_spec(spec, wire.State.READY)
    assert message.compute is None
    again = v1.RunningShard.parse(bytes(message))
    assert again.compute is None
    assert wire.adopted_from_register("n", [again])[0].compute is None


def test_an_empty_placement_is_still_a_placement() -> None:
    spec = attrs.evolve(sample_command().spec, compute=wire.Compute())
    message = wire.running_shard_from_spec(spec, wire.State.LOADING)
    assert message.compute == v1.Compute()
    assert message.compute is not None
    again = v1.RunningShard.parse(bytes(message))
    assert wire.adopted_from_register("n", [again])[0].compute == wire.Compute()


def test_a_shard_report_carries_compute_both_ways() -> None:
    report = wire.ShardReport("r", "s", wire.State.READY, "loaded", COMPUTE)
    status = wire.converter.unstructure(report)
    assert status.compute == v1.Compute("cuda", ["cuda:4", "cuda:5", "cuda:6"], 40, 40)
    assert wire.converter.structure(status, wire.ShardReport) == report
    assert wire.decode(wire.encode(report), wire.ShardReport) == report


def test_a_shard_report_without_compute_has_none_on_the_wire() -> None:
    report = wire.ShardReport("r", "s", wire.State.STARTING)
    status = wire.converter.unstructure(report)
    assert status.compute is None
    assert wire.converter.structure(v1.ShardStatus.parse(bytes(status)), wire.ShardReport) == report
