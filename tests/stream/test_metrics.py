"""The stream's OpenTelemetry metrics, read with the SDK's in-memory reader."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import grpc
import grpc.aio
import pytest

from llmgw_wire import Ack, Registration, ShardCommand, ShardReport, State
from llmgw_wire.stream import (
    CONNECT_ROUTE,
    AgentSession,
    Backoff,
    ControlPlane,
    ControlSession,
    connect,
    keep_connected,
    start_server,
)
from llmgw_wire.testing.sample import sample_command, sample_registration
from tests.support import run_async as run

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

pytestmark = pytest.mark.timeout(120)
WAIT = 20.0
NOT_AN_ENVELOPE = b"\xff\xff\xff"


def points(reader: InMemoryMetricReader) -> dict[str, dict[tuple[tuple[str, str], ...], Any]]:
    """Each instrument's data points, by their attributes: a sum's value, a histogram's count."""
    out: dict[str, dict[tuple[tuple[str, str], ...], Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            assert scope.scope.name == "llmgw_wire.stream"
            for metric in scope.metrics:
                found = out.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    key = tuple(sorted((k, str(v)) for k, v in (point.attributes or {}).items()))
                    if isinstance(point, HistogramDataPoint):
                        found[key] = (point.count, point.sum)
                    else:
                        found[key] = getattr(point, "value", None)
    return out


class Commanding(ControlPlane):
    """Acks a registration and sends a command; keeps the reports."""

    def __init__(self) -> None:
        self.reports: asyncio.Queue[ShardReport] = asyncio.Queue()

    async def handle(self, session: ControlSession) -> None:
        async for value in session:
            if isinstance(value, Registration):
                await session.send(Ack(value.node.id, len(value.shards), "adopted"))
                await session.send(sample_command())
            elif isinstance(value, ShardReport):
                await self.reports.put(value)


async def until(reader: InMemoryMetricReader, name: str) -> dict[str, Any]:
    for _ in range(int(WAIT / 0.05)):
        found = points(reader)
        if name in found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {name} within {WAIT:g} s")


def test_a_registration_a_command_a_report_and_a_refused_message() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])

    async def main() -> None:
        plane = Commanding()
        server = await start_server(plane, meter_provider=provider)
        address = f"127.0.0.1:{server.port}"
        try:
            async with connect(address) as agent:
                await agent.send(sample_registration())
                assert isinstance(await agent.recv(timeout=WAIT), Ack)
                command = await agent.recv(timeout=WAIT)
                assert isinstance(command, ShardCommand)
                await agent.send(
                    ShardReport(command.replica_id, command.spec.shard_id, State.READY)
                )
                await asyncio.wait_for(plane.reports.get(), WAIT)
                assert points(reader)["llmgw.stream.agents"] == {(): 1}
                # A second agent's message that is no envelope at all.
                async with grpc.aio.insecure_channel(address) as channel:
                    call = channel.stream_stream(CONNECT_ROUTE)()
                    await call.write(NOT_AN_ENVELOPE)
                    await until(reader, "llmgw.stream.refused")
                    call.cancel()
                await agent.close()
                assert await agent.recv(timeout=WAIT) is None
        finally:
            await server.stop(grace=None)

        found = points(reader)
        assert found["llmgw.stream.agents"] == {(): 0}
        assert found["llmgw.stream.messages"] == {
            (("direction", "received"), ("member", "register")): 1,
            (("direction", "received"), ("member", "shard_status")): 1,
            (("direction", "sent"), ("member", "ack")): 1,
            (("direction", "sent"), ("member", "start_shard")): 1,
        }
        assert found["llmgw.stream.refused"] == {(("reason", "decode"),): 1}
        ((attributes, (count, seconds)),) = found["llmgw.stream.registration.duration"].items()
        assert attributes == ()
        assert count == 1
        assert 0 < seconds < WAIT
        assert "llmgw.stream.reconnects" not in found

    run(main)


def test_an_agent_counts_its_reconnections_by_reason() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])

    class Brief(ControlPlane):
        async def handle(self, session: ControlSession) -> None:
            await session.recv(timeout=WAIT)  # the registration; then the call ends OK

    async def main() -> None:
        server = await start_server(Brief(), meter_provider=False)
        stop = asyncio.Event()
        rounds = 0

        def registration() -> Registration:
            nonlocal rounds
            rounds += 1
            if rounds == 3:
                stop.set()
            return sample_registration()

        async def serve(session: AgentSession) -> None:
            async for _ in session:
                pass

        try:
            await keep_connected(
                f"127.0.0.1:{server.port}",
                registration,
                serve,
                stop=stop,
                backoff=Backoff(initial=0.01, maximum=0.05),
                meter_provider=provider,
            )
        finally:
            await server.stop(grace=None)
        assert points(reader) == {"llmgw.stream.reconnects": {(("reason", "ended"),): 2}}

    run(main)


def test_without_opentelemetry_the_stream_works_and_imports_nothing_of_it() -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
        from llmgw_wire import Ack, Registration
        from llmgw_wire.stream import ControlPlane, connect, start_server
        from llmgw_wire.testing.sample import sample_registration

        class Acking(ControlPlane):
            async def handle(self, session):
                async for value in session:
                    await session.send(Ack(value.node.id, 0, "adopted"))

        async def main():
            server = await start_server(Acking())
            async with connect(f"127.0.0.1:{server.port}") as agent:
                await agent.send(sample_registration())
                print(type(await agent.recv(timeout=20)).__name__)
            await server.stop(grace=None)

        asyncio.run(main())
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["Ack", "['opentelemetry']", ""]


def test_the_registration_duration_has_boundaries_in_seconds_without_a_view() -> None:
    from llmgw_wire.stream._metrics import metrics_for

    reader = InMemoryMetricReader()
    metrics = metrics_for(MeterProvider(metric_readers=[reader]))  # no View
    for seconds in (0.003, 0.04, 2.0, 45.0):
        metrics.registration(seconds)
    data = reader.get_metrics_data()
    assert data is not None
    (point,) = data.resource_metrics[0].scope_metrics[0].metrics[0].data.data_points
    assert isinstance(point, HistogramDataPoint)
    bounds = list(point.explicit_bounds)
    assert len(bounds) >= 8, bounds
    assert 0 < min(b for b in bounds if b > 0) <= 0.01, bounds
    assert max(bounds) >= 30, bounds  # a slow registration is not lumped with the rest
    # Each duration lands in a bucket of its own: a latency can be read.
    assert sorted(point.bucket_counts, reverse=True)[:5] == [1, 1, 1, 1, 0]


def test_the_operating_guide_lists_the_advised_boundaries() -> None:
    import re
    from pathlib import Path

    from llmgw_wire.stream._metrics import REGISTRATION_BOUNDARIES

    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "operating.md"
    found = re.search(
        r"boundaries, in seconds, so that\s+it reads without a View: ([^(]+)\(", guide.read_text()
    )
    assert found
    listed = [float(n) for n in re.findall(r"[\d.]+", found[1])]
    assert listed == list(REGISTRATION_BOUNDARIES)
