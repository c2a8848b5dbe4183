"""The harness proven on its own: the Go agent against the Go control plane.

What a Python end must match is what two grpc-go ends do with each other:
a graceful stop delivers every command sent before it and ends the call OK,
a status sent just before the server stops arrives, gzip works both ways,
TLS and mutual TLS. Repetitions make a flaky harness visible before it is
used to judge the Python stream.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from peers import (
    CONTROL_PLANE_API_KEY,
    key_digest,
    kinds,
    run_agent,
    start_control_plane,
)

if TYPE_CHECKING:
    from peers import Peers, TLSFiles

# Repetitions of the stop cases; LLMGW_INTEROP_RUNS raises them for a soak.
RUNS = int(os.environ.get("LLMGW_INTEROP_RUNS", "20"))

STATUS_MESSAGE = "node is cordoned: registration refused by the control plane"


def test_graceful_stop_delivers_everything_then_ok() -> None:
    failures = []
    for run in range(RUNS):
        cp = start_control_plane("graceful")
        try:
            agent = run_agent(cp.target, node_id=f"node-{run}")
            cp_code = cp.wait()
        finally:
            cp.stop()
        got = (kinds(agent.recv), agent.status, agent.returncode, cp_code, cp.lines[-1:])
        want = (["ack", "start_shard", "stop_shard"], ("OK", ""), 0, 0, ["DONE"])
        if got != want:
            failures.append(f"run {run}: {got}\n{agent.description}\n{cp.describe()}")
    assert failures == [], f"{len(failures)} of {RUNS} runs lost something:\n" + "\n".join(failures)


def test_status_sent_just_before_stop_arrives() -> None:
    failures = []
    for run in range(RUNS):
        cp = start_control_plane("status")
        try:
            agent = run_agent(cp.target, node_id=f"node-{run}")
            cp_code = cp.wait()
        finally:
            cp.stop()
        got = (kinds(agent.recv), agent.status, agent.returncode, cp_code)
        want = (["ack"], ("FAILED_PRECONDITION", STATUS_MESSAGE), 0, 0)
        if got != want:
            failures.append(f"run {run}: {got}\n{agent.description}\n{cp.describe()}")
    assert failures == [], f"{len(failures)} of {RUNS} runs lost the status:\n" + "\n".join(
        failures
    )


def test_every_field_arrives_as_sent(peers: Peers) -> None:
    cp = peers.control_plane("graceful")
    agent = run_agent(cp.target, node_id="node-fields", extra_gpus=50)
    assert cp.wait() == 0
    # protojson spaces its output at random; the parsed values are what count
    assert agent.sent == cp.recv()
    assert cp.sent() == agent.recv
    register = agent.sent[0]["register"]
    assert len(register["gpus"]) == 52
    assert register["gpus"][1]["mig"]["profile"] == "1g.10gb"
    assert "mig" not in register["gpus"][0]
    assert register["gpus"][0]["fabric_state"] == "Completed"
    assert "compute" in register["running_shards"][0]
    assert "compute" not in register["running_shards"][1]
    start = agent.recv[1]["start_shard"]
    assert start["api_key"] == key_digest(CONTROL_PLANE_API_KEY)
    assert start["profile"]["adapters"] == [{"name": "sql", "source": "/adapters/sql"}]
    assert agent.recv[0]["ack"]["adopted_shards"] == 2


def test_no_api_key_in_any_output(peers: Peers) -> None:
    cp = peers.control_plane("graceful")
    agent = run_agent(cp.target)
    assert cp.wait() == 0
    for text in ("\n".join(agent.lines), agent.stderr, "\n".join(cp.lines), cp.stderr):
        assert CONTROL_PLANE_API_KEY not in text


def test_gzip_from_the_agent(peers: Peers) -> None:
    cp = peers.control_plane("serve")
    agent = run_agent(cp.target, gzip=True, close_after=2)
    assert (agent.returncode, agent.status) == (0, ("OK", ""))
    assert cp.encodings() == ["gzip"]
    assert kinds(cp.recv()) == ["register"]
    assert cp.recv() == agent.sent
    assert kinds(agent.recv) == ["ack", "start_shard"]


def test_gzip_from_the_control_plane(peers: Peers) -> None:
    cp = peers.control_plane("serve", gzip=True)
    agent = run_agent(cp.target, close_after=2)
    assert (agent.returncode, agent.status) == (0, ("OK", ""))
    assert "ENCODING gzip" in agent.lines
    assert cp.encodings() == ["identity"]
    assert agent.recv == cp.sent()


def test_serve_answers_each_registration_and_ends_ok_on_stop(peers: Peers) -> None:
    cp = peers.control_plane("serve")
    first = run_agent(cp.target, node_id="node-a", ready=True, close_after=2)
    # the same node again: what an agent does when it reconnects
    second = run_agent(cp.target, node_id="node-a", ready=True, close_after=2)
    for agent in (first, second):
        assert (agent.returncode, agent.status) == (0, ("OK", ""))
        assert kinds(agent.recv) == ["ack", "start_shard"]
        assert kinds(agent.sent) == ["register", "shard_status"]
    statuses = [m["shard_status"] for m in cp.recv() if "shard_status" in m]
    assert [(s["shard_id"], s["state"]) for s in statuses] == [("node-a-s0", "STATE_READY")] * 2
    assert cp.stop() == 0
    assert cp.lines[-1] == "DONE"
    assert cp.ends() == [("OK", ""), ("OK", "")]


def test_serve_ends_an_open_call_ok_when_stopped(peers: Peers) -> None:
    cp = peers.control_plane("serve")
    agent = peers.agent(cp.target)
    agent.wait_for("RECV", count=2)
    cp.terminate()
    assert agent.wait() == 0
    assert agent.status() == ("OK", "")
    assert cp.wait() == 0
    assert cp.lines[-1] == "DONE"


def test_bad_then_good_reaches_a_go_control_plane(peers: Peers) -> None:
    # Go holds what the Python domain may not: the harness sends it as sent
    cp = peers.control_plane("serve")
    agent = run_agent(cp.target, scenario="bad-then-good")
    assert (agent.returncode, agent.status) == (0, ("OK", ""))
    assert kinds(agent.sent) == ["register", "heartbeat", "shard_status"]
    assert kinds(cp.recv()) == ["register", "heartbeat", "shard_status"]
    assert cp.recv()[1]["heartbeat"]["sent_at_unix_ms"] == "253402300800000"


def test_mutual_tls(peers: Peers, tls_files: TLSFiles) -> None:
    cp = peers.control_plane("serve", tls=tls_files)
    agent = run_agent(cp.target, tls=tls_files, close_after=2)
    assert (agent.returncode, agent.status) == (0, ("OK", ""))
    assert kinds(agent.recv) == ["ack", "start_shard"]


def test_mutual_tls_refuses_an_agent_without_a_certificate(
    peers: Peers, tls_files: TLSFiles
) -> None:
    cp = peers.control_plane("serve", tls=tls_files)
    agent = run_agent(cp.target, tls=tls_files, client_cert=False, close_after=2)
    assert agent.returncode == 0
    assert agent.status is not None
    assert agent.status[0] == "UNAVAILABLE"
    assert agent.recv == []
    assert cp.recv() == []


def test_server_only_tls(peers: Peers, tls_files: TLSFiles) -> None:
    cp = peers.control_plane("serve", tls=tls_files, mutual_tls=False)
    agent = run_agent(cp.target, tls=tls_files, client_cert=False, close_after=2)
    assert (agent.returncode, agent.status) == (0, ("OK", ""))


def test_stop_cases_over_mutual_tls(tls_files: TLSFiles) -> None:
    # over TLS the control plane reads its frames above the TLS layer
    for scenario, want in (
        ("graceful", (["ack", "start_shard", "stop_shard"], ("OK", ""))),
        ("status", (["ack"], ("FAILED_PRECONDITION", STATUS_MESSAGE))),
    ):
        cp = start_control_plane(scenario, tls=tls_files)
        try:
            agent = run_agent(cp.target, tls=tls_files)
            assert cp.wait() == 0, cp.describe()
        finally:
            cp.stop()
        assert (kinds(agent.recv), agent.status) == want, agent.description
        assert cp.lines[-1] == "DONE"


def test_bad_then_good_from_a_go_control_plane(peers: Peers) -> None:
    # what a Python agent must refuse, then go on reading: the StopShard behind it
    cp = peers.control_plane("bad-then-good")
    agent = run_agent(cp.target, close_after=4)
    assert (agent.returncode, agent.status) == (0, ("OK", ""))
    assert kinds(agent.recv) == ["ack", "start_shard", "stop_shard", "start_shard"]
    bad = agent.recv[1]["start_shard"]
    assert (bad["shard_id"], bad["startup_timeout_ms"]) == ("go-agent-1-bad", str(2**63 - 1))
    assert agent.recv[3]["start_shard"]["startup_timeout_ms"] == "600000"
    assert agent.recv == cp.sent()


def test_a_start_over_the_receivers_limit(peers: Peers) -> None:
    # grpc-go's own 4 MiB receive limit refuses it: the padding really is on the wire
    cp = peers.control_plane("serve", start_padding=5 * 2**20)
    agent = run_agent(cp.target, close_after=2)
    assert agent.returncode == 0
    assert agent.status is not None
    assert agent.status[0] == "RESOURCE_EXHAUSTED", agent.description
    assert kinds(agent.recv) == ["ack"]


def test_a_killed_control_plane_comes_back_on_its_port(peers: Peers) -> None:
    # the kill -9 failover: the agent's call breaks, a new control plane takes the port
    first = peers.control_plane("serve")
    agent = peers.agent(first.target)
    agent.wait_for("RECV", count=2)
    first.kill()
    assert agent.wait() == 0
    status = agent.status()
    assert status is not None
    assert status[0] == "UNAVAILABLE", agent.describe()
    second = peers.control_plane("serve", listen=first.target)
    assert second.port == first.port
    again = run_agent(second.target, close_after=2)
    assert (again.returncode, again.status) == (0, ("OK", ""))
    assert kinds(again.recv) == ["ack", "start_shard"]
