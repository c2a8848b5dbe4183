"""Several control-plane addresses: an agent finds the one that serves, and moves when it stops."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from typing import TYPE_CHECKING, Any

import pytest

from llmgw_wire import Ack
from llmgw_wire.errors import PermissionDenied
from llmgw_wire.stream import (
    AgentSession,
    Backoff,
    keep_connected,
    start_server,
)
from llmgw_wire.stream._targets import Targets, _split_dns
from llmgw_wire.testing.sample import sample_registration
from tests.stream.fake_peers import http2_fake, other_grpc_service
from tests.stream.test_failover import WAIT, Role, roles, start
from tests.support import Adopting

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(300)
__all__ = ["roles"]  # the fixture of the role processes, shared with the failover tests


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("how", ["graceful stop", "kill -9"])
def test_an_agent_registers_with_the_second_address_and_moves_back_when_it_stops(
    roles: list[Role], tmp_path: Path, how: str
) -> None:
    first_port = free_port()
    second = start(roles, "control-plane", "0")
    (second_port,) = second.expect("LISTENING")
    agent = start(
        roles, "agent", f"127.0.0.1:{first_port},127.0.0.1:{second_port}", str(tmp_path), "n0"
    )
    # Nothing listens on the first address: the agent registers with the second.
    assert second.expect("REGISTERED") == ["n0", "[]"]
    assert second.expect("READY") == ["n0", "n0-s0"]
    assert agent.expect("STARTED") == ["n0-s0"]

    first = start(roles, "control-plane", str(first_port))
    assert first.expect("LISTENING") == [str(first_port)]
    if how == "graceful stop":
        second.process.send_signal(signal.SIGTERM)
        second.expect("STOPPED")
    else:
        second.process.send_signal(signal.SIGKILL)
    second.process.wait(WAIT)

    node, shards = first.expect("REGISTERED")
    assert node == "n0"
    assert [shard["shard_id"] for shard in json.loads(shards)] == ["n0-s0"]


async def until_acked(target: str | list[str], **options: Any) -> None:
    """Keep connected to `target` until a control plane acks the registration."""
    stop = asyncio.Event()

    async def serve(session: AgentSession) -> None:
        async for value in session:
            if isinstance(value, Ack):
                stop.set()

    await keep_connected(
        target,
        sample_registration,
        serve,
        stop=stop,
        backoff=Backoff(initial=0.01, maximum=0.05),
        **options,
    )


def test_an_agent_goes_past_a_standby_that_is_not_serving() -> None:
    async def main() -> None:
        standby, leader = Adopting(), Adopting()
        first = await start_server(standby, serving=False)
        second = await start_server(leader)
        try:
            await until_acked([f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"])
        finally:
            await first.stop(grace=None)
            await second.stop(grace=None)
        assert (standby.registrations, leader.registrations) == (0, 1)

    asyncio.run(asyncio.wait_for(main(), 90))


# --- what answered: an address that is no control plane -------------------------------


async def standby_after(first: str, **options: Any) -> Adopting:
    """Keep connected to [first, a real control plane] until acked; the control plane."""
    standby = Adopting()
    server = await start_server(standby)
    try:
        await until_acked([first, f"127.0.0.1:{server.port}"], **options)
    finally:
        await server.stop(grace=None)
    return standby


@pytest.mark.parametrize(
    "status",
    [
        403,  # PERMISSION_DENIED to grpc: an ingress's deny rule
        404,  # UNIMPLEMENTED: an old IP reused by another HTTP/2 service
        500,  # UNKNOWN
        # No gRPC status at all: grpc reads the body as a message and waits
        # for trailers that never come, so the first-answer deadline ends it.
        pytest.param(200, marks=pytest.mark.slow),
        # No answer at all: the address is left after the first-answer timeout.
        pytest.param(None, marks=pytest.mark.slow, id="never-answers"),
    ],
)
def test_an_http_answer_or_none_moves_the_agent_on_to_the_standby(status: int | None) -> None:
    async def main() -> None:
        async with http2_fake(status) as fake:
            standby = await standby_after(fake.target, first_answer_timeout=2.0)
        assert fake.requests >= 1, "the agent never tried the first address"
        assert standby.registrations == 1

    asyncio.run(asyncio.wait_for(main(), 90))


def test_another_grpc_service_moves_the_agent_on_to_the_standby() -> None:
    async def main() -> None:
        async with other_grpc_service() as (address, counting):
            standby = await standby_after(address)
        assert counting.calls >= 1, "the agent never tried the first address"
        assert standby.registrations == 1

    asyncio.run(asyncio.wait_for(main(), 90))


def test_stop_is_honoured_while_an_address_holds_the_call_unanswered() -> None:
    async def main() -> None:
        async with http2_fake(None) as fake:
            stop = asyncio.Event()
            agent = asyncio.ensure_future(
                keep_connected(fake.target, sample_registration, read_nothing, stop=stop)
            )
            await asyncio.wait_for(fake.requested.wait(), WAIT)
            stop.set()
            # Within the leave grace (5 s), far from the first-answer deadline (30 s).
            await asyncio.wait_for(agent, 20)

    asyncio.run(asyncio.wait_for(main(), 90))


async def read_nothing(session: AgentSession) -> None:
    async for _ in session:
        pass


def test_a_refusal_from_each_address_ends_the_agent() -> None:
    async def main() -> None:
        async with http2_fake(403) as first, http2_fake(403) as second:
            with pytest.raises(PermissionDenied):
                await until_acked([first.target, second.target])
        assert (first.requests, second.requests) == (1, 1)

    asyncio.run(asyncio.wait_for(main(), 90))


def test_a_dns_name_stands_for_each_of_its_addresses() -> None:
    async def main() -> None:
        # "localhost" may resolve to ::1 first, where nothing listens: the agent goes on.
        plane = Adopting()
        server = await start_server(plane)
        try:
            await until_acked(f"dns:localhost:{server.port}")
        finally:
            await server.stop(grace=None)
        assert plane.registrations == 1

    asyncio.run(asyncio.wait_for(main(), 90))


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("dns:cp.example:7070", ("cp.example", 7070)),
        ("dns:///cp.example:7070", ("cp.example", 7070)),
        ("dns://8.8.8.8/cp.example:7070", ("cp.example", 7070)),
        ("dns:cp.example", ("cp.example", 443)),
        ("dns:[::1]:7070", ("::1", 7070)),
    ],
)
def test_dns_names_are_read_as_grpc_reads_them(target: str, expected: tuple[str, int]) -> None:
    assert _split_dns(target) == expected


@pytest.mark.parametrize("target", [[], "", ["a:1", ""], "dns:", "dns:host:port"])
def test_bad_targets_are_refused_up_front(target: Any) -> None:
    with pytest.raises(ValueError, match="Expected"):
        Targets(target, check_name=False)


def test_addresses_are_tried_in_turn() -> None:
    async def main() -> list[str]:
        targets = Targets(["a:1", "b:2"], check_name=False)
        seen = []
        for _ in range(5):
            seen.append((await targets.current())[0])
            targets.advance()
        return seen

    assert asyncio.run(main()) == ["a:1", "b:2", "a:1", "b:2", "a:1"]
