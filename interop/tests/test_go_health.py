"""grpc-go's health client against the Python control plane's health service.

Most of the fleet asks `grpc.health.v1.Health` from Go: grpc-go agents,
Kubernetes probes written in Go, and grpc-go channels that check the health
of each address themselves (client-side health checking). The Go program
``health`` (``interop/go/health``) is grpc-go's generated health client and
that channel; it prints ``STATE <state>``, ``PEER <address>``, ``HEALTH <status>`` and
``STATUS <code> [<message>]`` lines (the docs page "Interop with grpc-go").
The Python end is a real `start_server` on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import pytest
from peers import BIN_DIR, GoPeer

from llmgw_wire.stream import (
    PeerUnavailable,
    Server,
    ServerLimits,
    connect,
    start_server,
)
from llmgw_wire.testing.sample import sample_registration
from tests.support import Holding, target

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine

WAIT = 60.0
AGENT_SERVICE = "llmgw.v1.AgentService"


@pytest.fixture(autouse=True)
def _health_binary() -> None:
    if not (BIN_DIR / "health").is_file():
        pytest.skip(
            f"the grpc-go health client is not built ({BIN_DIR / 'health'} missing); "
            "`make interop-go-build` builds it"
        )


@contextlib.asynccontextmanager
async def control_plane(
    *, serving: bool = True, limits: ServerLimits | None = None
) -> AsyncIterator[tuple[Server, Holding]]:
    """Start a control plane on 127.0.0.1; it stops, its plane released, at the end."""
    plane = Holding()
    server = await start_server(plane, serving=serving, limits=limits or ServerLimits())
    try:
        yield server, plane
    finally:
        plane.release.set()
        await server.stop(grace=WAIT)


@contextlib.asynccontextmanager
async def go_health(*args: str) -> AsyncIterator[GoPeer]:
    """Run the Go health client with `args`; it is stopped and reaped at the end."""
    client = GoPeer("health", [*args, "--timeout", f"{WAIT:g}s"])
    try:
        yield client
    finally:
        await asyncio.to_thread(client.stop, 10.0)


async def ran_to_its_end(client: GoPeer) -> list[str]:
    """Wait for the client to exit 0; give its lines."""
    code = await asyncio.to_thread(client.wait, WAIT + 30.0)
    assert code == 0, client.describe()
    return client.lines


#: The calls a health-checked channel makes in a test.
CALLS = 6


async def all_answered_by(address: str, *, over: list[str]) -> None:
    """A grpc-go channel checking health over the addresses `over` sends every call to `address`."""
    async with go_health(
        *(a for t in over for a in ("--target", t)),
        *("--mode", "balance", "--service", AGENT_SERVICE, "--calls", str(CALLS)),
    ) as client:
        lines = await ran_to_its_end(client)
    assert lines == [f"PEER {address}", "HEALTH SERVING", "STATUS OK"] * CALLS, client.describe()


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on a loop of its own, bounded as a whole too."""
    asyncio.run(asyncio.wait_for(main, 3 * WAIT))


def test_go_check_says_serving_and_not_found_as_grpc_go_reports_it() -> None:
    async def main() -> None:
        async with control_plane() as (server, _):
            address = target(server)
            services = ["", AGENT_SERVICE, "no.such.Service"]
            async with go_health(
                "--target", address, *(a for s in services for a in ("--service", s))
            ) as client:
                lines = await ran_to_its_end(client)
        assert lines == [
            "HEALTH SERVING",
            "STATUS OK",
            "HEALTH SERVING",
            "STATUS OK",
            "STATUS NOT_FOUND no service 'no.such.Service'",
        ], client.describe()

    run(main())


def test_go_watch_sees_each_change_and_the_not_serving_of_a_graceful_stop() -> None:
    async def main() -> None:
        async with control_plane() as (server, plane):
            address = target(server)
            async with go_health(
                "--target", address, "--mode", "watch", "--service", AGENT_SERVICE
            ) as client:

                async def nth_status(n: int) -> str:
                    return await client.wait_for_async("HEALTH", count=n, timeout=WAIT)

                assert await nth_status(1) == "HEALTH SERVING"
                await server.set_serving(False)
                assert await nth_status(2) == "HEALTH NOT_SERVING"
                await server.set_serving(True)
                assert await nth_status(3) == "HEALTH SERVING"
                async with connect(address) as agent:
                    await agent.send(sample_registration())
                    await asyncio.wait_for(plane.registered.wait(), WAIT)
                    # The agent's call is held open, so the stop stays in its grace period.
                    stopping = asyncio.ensure_future(server.stop(grace=WAIT))
                    assert await nth_status(4) == "HEALTH NOT_SERVING"
                    assert not stopping.done()
                    plane.release.set()
                    with pytest.raises(PeerUnavailable, match="the control plane is stopping"):
                        await agent.recv(timeout=WAIT)
                await stopping
                # Said NOT_SERVING, the Watch ended with OK: grpc-go saw the end of the stream.
                lines = await ran_to_its_end(client)
        assert lines == [
            "HEALTH SERVING",
            "HEALTH NOT_SERVING",
            "HEALTH SERVING",
            "HEALTH NOT_SERVING",
            "STATUS OK",
        ], client.describe()

    run(main())


def test_go_watch_of_an_unknown_service_says_service_unknown() -> None:
    async def main() -> None:
        async with control_plane() as (server, _):
            address = target(server)
            async with go_health(
                "--target",
                address,
                "--mode",
                "watch",
                "--service",
                "no.such.Service",
                "--count",
                "1",
            ) as client:
                lines = await ran_to_its_end(client)
        assert lines == ["HEALTH SERVICE_UNKNOWN"], client.describe()

    run(main())


def test_a_go_channel_checking_health_sends_its_calls_to_the_serving_address() -> None:
    # grpc-go's client-side health checking: round_robin over both addresses,
    # each watched for the agent stream's status; a NOT_SERVING one is avoided.
    # Without healthCheckConfig, round robin sends calls to both.
    async def main() -> None:
        async with control_plane(serving=False) as (standby, _), control_plane() as (leader, _):
            targets = [target(s) for s in (standby, leader)]
            await all_answered_by(targets[1], over=targets)

    run(main())


def test_a_go_channel_checking_health_avoids_an_address_that_refuses_its_watch() -> None:
    # grpc-go takes a Watch that fails (here refused with RESOURCE_EXHAUSTED,
    # the server's one side call held by another watcher) for a failed check:
    # the address is avoided though it says SERVING. What the operating
    # guide's advice for a fleet of health-checking agents rests on.
    async def main() -> None:
        one_watch = ServerLimits(max_side_calls=1)
        async with (
            control_plane(limits=one_watch) as (crowded, _),
            control_plane() as (other, _),
        ):
            targets = [target(crowded), target(other)]
            async with go_health(
                "--target", targets[0], "--mode", "watch", "--service", AGENT_SERVICE
            ) as holder:
                # Its Watch is open: it holds the crowded server's one side call.
                assert await holder.wait_for_async("HEALTH", timeout=WAIT) == "HEALTH SERVING"
                await all_answered_by(targets[1], over=targets)

    run(main())


#: A side call's lifetime short enough for a test to see a `Watch` end.
SHORT_LIFETIME = 2.0


def test_a_go_channel_checking_health_takes_the_end_of_its_watch_for_a_failed_check() -> None:
    # The server ends the channel's Watch with OK once its lifetime is over;
    # grpc-go takes that end for a failed check: its channel over that one
    # address leaves READY until its next Watch says SERVING. The other half
    # of the operating guide's advice (`side_call_lifetime=None`).
    async def main() -> None:
        short = ServerLimits(side_call_lifetime=SHORT_LIFETIME)
        async with (
            control_plane(limits=short) as (server, _),
            go_health(
                *("--target", target(server), "--mode", "states"),
                *("--service", AGENT_SERVICE, "--count", "1"),
            ) as client,
        ):
            lines = await ran_to_its_end(client)
        assert lines == ["STATE READY", "STATE LEFT_READY", "STATE READY"], client.describe()

    run(main())
