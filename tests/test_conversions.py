"""The reference's behaviours, one example each, through the named conversions."""

from __future__ import annotations

import datetime as dt

import attrs
import pytest

from llmgw_wire import (
    GPU,
    AdoptedShard,
    Compute,
    GPUFabric,
    MIGDevice,
    Node,
    NodeState,
    Registration,
    ShardSpec,
    State,
    adopted_from_register,
    command_from_start_shard,
    converter,
    decode,
    encode,
    node_from_register,
    register_from_inventory,
    register_from_node,
    running_shard_from_spec,
    shard_spec_from_start,
    start_shard_from_command,
    state_from_wire,
    state_to_wire,
    v1,
)
from llmgw_wire.testing.sample import (
    sample_command,
    sample_inventory,
    sample_node,
    sample_registration,
)

STATES = [
    (State.PENDING, v1.ShardStatusState.PENDING),
    (State.STARTING, v1.ShardStatusState.STARTING),
    (State.LOADING, v1.ShardStatusState.LOADING),
    (State.READY, v1.ShardStatusState.READY),
    (State.DRAINING, v1.ShardStatusState.DRAINING),
    (State.STOPPED, v1.ShardStatusState.STOPPED),
    (State.FAILED, v1.ShardStatusState.FAILED),
]


@pytest.mark.parametrize(("state", "wire"), STATES)
def test_every_state_both_ways(state: State, wire: v1.ShardStatusState) -> None:
    assert state_to_wire(state) is wire
    assert state_from_wire(wire) is state
    assert state_from_wire(int(wire)) is state


@pytest.mark.parametrize("number", [0, 8, 99, 2**31 - 1, -1, -(2**31)])
def test_unspecified_and_unknown_states_are_failed(number: int) -> None:
    assert state_from_wire(number) is State.FAILED
    # The state field (7) of the shard, appended as a varint the way a newer agent sends it.
    shard = bytes(v1.RunningShard(shard_id="s")) + b"\x38" + _varint(number)
    raw = b"\x0a\x01n" + b"\x8a\x01" + _varint(len(shard)) + shard
    assert [s.state for s in decode(raw, Registration).shards] == [State.FAILED]
    assert (
        adopted_from_register("n", v1.Register.parse(raw).running_shards)[0].state is State.FAILED
    )


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_a_registration_makes_a_node_ready() -> None:
    register = register_from_node(attrs.evolve(sample_node(), state=NodeState.OFFLINE))
    assert node_from_register(register).state is NodeState.READY


def test_mig_present_absent_and_from_an_agent_older_than_mig() -> None:
    node = sample_node()
    register = register_from_node(node)
    whole, sliced = register.gpus[0], register.gpus[-1]
    assert whole.mig is None
    assert sliced.mig is not None
    decoded = node_from_register(register)
    assert decoded.gpus[0].mig is None
    assert decoded.gpus[-1].mig == MIGDevice(
        parent_index=7,
        parent_uuid="GPU-3f2a07c4-8b1e-4d7a-9c2f-0e5b6a7d8c07",
        parent_memory_total_mb=81559,
        device=2,
        profile="1g.10gb",
        gpu_instance=13,
        compute_instance=0,
    )
    # An agent older than MIG support never sends field 22: bytes without it.
    old = v1.Register(node_id="n", gpus=[v1.Gpu(index=0, uuid="GPU-0")])
    assert node_from_register(v1.Register.parse(bytes(old))).gpus[0].mig is None


def test_an_empty_mig_message_is_present_not_absent() -> None:
    """Presence is never guessed from truthiness: an all-zero slice is still a slice."""
    register = v1.Register(gpus=[v1.Gpu(mig=v1.MigDevice())])
    assert node_from_register(register).gpus[0].mig == MIGDevice()
    assert decode(bytes(register), Node).gpus[0].mig == MIGDevice()


def test_fabric_is_absent_when_its_state_is_empty() -> None:
    gpu = v1.Gpu(fabric_state="", fabric_status="Success", cluster_uuid="c")
    assert converter.structure(gpu, GPU).fabric is None
    gpu = v1.Gpu(fabric_state="Completed", fabric_bandwidth="Full")
    assert converter.structure(gpu, GPU).fabric == GPUFabric(state="Completed", bandwidth="Full")


def test_endpoint_only_for_rank_0_with_a_leader_address() -> None:
    shards = [
        v1.RunningShard(shard_id="leader", rank=0, leader_addr="10.0.0.1", http_port=8000),
        v1.RunningShard(shard_id="follower", rank=1, leader_addr="10.0.0.1", http_port=8000),
        v1.RunningShard(shard_id="unknown-leader", rank=0, http_port=8000),
    ]
    adopted = adopted_from_register("n1", shards)
    assert [a.endpoint for a in adopted] == ["http://10.0.0.1:8000", None, None]
    assert {a.node_id for a in adopted} == {"n1"}


def test_compute_is_carried_on_adoption() -> None:
    compute = v1.Compute(backend="cuda", devices=["cuda:0"], layers_offloaded=40, layers_total=80)
    shards = [v1.RunningShard(shard_id="a", compute=compute), v1.RunningShard(shard_id="b")]
    adopted = adopted_from_register("n", shards)
    assert adopted[0].compute == Compute("cuda", ("cuda:0",), 40, 80)
    assert adopted[1].compute is None


def test_running_shard_from_spec_reports_compute_only_when_known() -> None:
    spec = sample_command().spec
    without = running_shard_from_spec(spec, State.READY)
    assert without.compute is None
    with_compute = running_shard_from_spec(
        attrs.evolve(spec, compute=Compute("cuda", ("cuda:4",), 60, 60)), State.READY
    )
    assert with_compute.compute == v1.Compute("cuda", ["cuda:4"], 60, 60)
    assert with_compute.state is v1.ShardStatusState.READY
    assert with_compute.leader_addr == spec.leader_addr
    assert with_compute.model == "mistral-small"
    assert with_compute.profile == "vllm-mistral-tp1"
    # What the agent reports, the control plane adopts, compute included.
    adopted = adopted_from_register("n", [with_compute])[0]
    assert adopted.compute == Compute("cuda", ("cuda:4",), 60, 60)
    assert adopted.endpoint == f"http://{spec.leader_addr}:{spec.http_port}"


def test_empty_repeated_fields_and_maps_are_empty() -> None:
    node = node_from_register(v1.Register(node_id="n"))
    assert node == Node(id="n")
    assert (node.gpus, node.labels, node.features, node.fabrics) == ((), {}, (), ())
    assert adopted_from_register("n", []) == []


def test_start_shard_and_back() -> None:
    command = sample_command()
    message = start_shard_from_command(command)
    assert message.startup_timeout_ms == 600_000
    assert message.api_key == "sk-llmgw-demo-0000"
    assert message.cpu_threads == 0
    assert message.profile is not None
    assert message.profile.adapters == [v1.LoraAdapter("support-tone", "/models/lora/support-tone")]
    spec, timeout = shard_spec_from_start(message)
    assert spec == command.spec
    assert timeout == dt.timedelta(minutes=10)
    assert command_from_start_shard(message) == command


def test_register_from_inventory() -> None:
    node, inventory = sample_node(), sample_inventory()
    running = [running_shard_from_spec(sample_command().spec, State.STARTING)]
    register = register_from_inventory(
        node.id,
        node.hostname,
        node.mgmt_addr,
        node.agent_version,
        node.labels,
        inventory,
        node.fabrics,
        running=running,
        features=node.features,
        engine_versions=node.engine_versions,
        engines_probed=True,
        cpu_count=node.cpu_count,
    )
    assert node_from_register(register) == node
    assert register.running_shards == running
    default_cpus = register_from_inventory("n", "h", "a", "1", {}, inventory).cpu_count
    assert default_cpus > 0


def test_register_from_node_is_the_inverse_of_both_decoders() -> None:
    registration = sample_registration()
    register = register_from_node(registration.node, registration.shards)
    assert node_from_register(register) == registration.node
    assert adopted_from_register(register.node_id, register.running_shards) == list(
        registration.shards
    )
    assert decode(encode(registration), Registration) == registration


def test_normalisation_a_followers_leader_address_is_not_kept() -> None:
    """Documented: an adopted shard has an endpoint only for a leader, so a
    follower's leader address does not survive wire -> domain -> wire."""
    shard = v1.RunningShard(shard_id="f", rank=1, leader_addr="10.0.0.1", http_port=8000)
    back = converter.unstructure(converter.structure(shard, AdoptedShard))
    assert back.leader_addr == ""
    assert converter.structure(back, AdoptedShard) == converter.structure(shard, AdoptedShard)


def test_api_key_never_in_a_repr() -> None:
    spec = ShardSpec(api_key="sk-secret-123")
    command = sample_command()
    for text in (repr(spec), str(spec), repr(command), repr(attrs.evolve(command, spec=spec))):
        assert "sk-secret-123" not in text
        assert "sk-llmgw-demo-0000" not in text
    assert "api_key=<secret str, not shown>" in repr(spec)
    assert "api_key=''" in repr(ShardSpec())


def test_a_heartbeat_stamped_now_crosses_the_wire() -> None:
    from llmgw_wire import Heartbeat

    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(milliseconds=1)
    beat = Heartbeat.now("n1")
    assert before <= beat.sent_at <= dt.datetime.now(dt.timezone.utc)
    assert beat.sent_at.microsecond % 1000 == 0
    assert decode(encode(beat), Heartbeat) == beat
