"""A representative run of the installed package: bytes, the stream, the store; then each extra.

Run by `scripts/resolutions.py` with the interpreter of a fresh environment
that has only the built wheel and what it requires, outside the checkout, so
that it exercises what a service gets from `pip install`. Without arguments,
the core package, with its runtime dependencies alone:

* `encode`/`decode` of a registration, and `decode` into a wire class;
* a stream exchange on loopback (127.0.0.1): the agent registers, the control
  plane acknowledges and sends a command, the agent reports it ready;
* the standard health service asked with the standard request bytes (the core
  installs no grpcio-health-checking: the library serves the service itself);
* a `ShardStore` save and load in a temporary folder;
* the behaviours that set the floors of `pyproject.toml`: upb refuses a length
  prefix over 5 bytes (protobuf), and a shard state this version does not know
  reads as FAILED (cattrs).

(grpcio's floor is held by a test of the suite that measures memory,
tests/stream/test_failover.py: a message over the receive limit is refused
before it is buffered; opentelemetry-api's by the `otel` smoke, whose
histogram takes the boundaries it is advised.)

`smoke.py EXTRA...` runs instead the smoke of each extra named (the table
`EXTRAS`, one smoke per extra of `pyproject.toml`), in an environment that
installed `llmgw-wire[EXTRA,...]`:

* `testing`: `st.from_type` of a domain model draws values that cross
  `encode`/`decode`, and a law of `llmgw_wire.testing.laws` holds for a few
  examples through the fuzzing engine;
* `otel`: the stream exchange with OpenTelemetry's API installed, the stream's
  instruments made on the global meter provider (the API's own, which records
  nothing: no SDK is part of the extra);
* `reflection`: a control plane started with `reflection=True`, and
  grpcio-reflection's client finding the agent stream's service through it;
* `grpclib`: a grpclib agent with `WireCodec` exchanging domain values with the
  library's control plane on loopback;
* `schema`: `llmgw-wire compat` compiling the package's own .proto files with
  grpcio-tools, configured by a `buf.yaml` (PyYAML), and a `pyproject.toml`
  configuration read (tomllib, or tomli on Python 3.10).

It prints one line per part and exits non-zero (with the traceback) on the first
failure. It imports nothing of the checkout's tests and nothing outside the
package and the requirements the environment installed.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llmgw_wire as wire
from llmgw_wire import v1
from llmgw_wire.codec import json as wire_json
from llmgw_wire.errors import DecodeError
from llmgw_wire.stream import CONNECT_ROUTE, ControlPlane, ControlSession, connect, start_server
from llmgw_wire.testing.sample import sample_command, sample_registration

if TYPE_CHECKING:
    from collections.abc import Callable

# Every wait of the exchange is bounded; generous, as a busy machine is slow.
TIMEOUT = 30.0
# Inputs per hypothesis search of the `testing` smoke: a few, not a fuzz run.
EXAMPLES = 10


def codec() -> None:
    registration = sample_registration()
    data = wire.encode(registration)
    assert wire.decode(data, wire.Registration) == registration
    register = wire.decode(data, v1.Register)
    assert wire.node_from_register(register) == registration.node
    print(f"smoke: encode/decode of a registration, {len(data)} bytes")


class _Plane(ControlPlane):
    def __init__(self) -> None:
        self.reports: list[object] = []

    async def handle(self, session: ControlSession) -> None:
        registration = await session.recv(timeout=TIMEOUT)
        assert isinstance(registration, wire.Registration)
        await session.send(wire.Ack(registration.node.id, len(registration.shards)))
        await session.send(sample_command())
        async for report in session:
            self.reports.append(report)


async def _exchange() -> None:
    plane = _Plane()
    server = await start_server(plane)
    try:
        async with connect(f"127.0.0.1:{server.port}") as session:
            await session.send(sample_registration())
            ack = await session.recv(timeout=TIMEOUT)
            assert isinstance(ack, wire.Ack), ack
            command = await session.recv(timeout=TIMEOUT)
            assert isinstance(command, wire.ShardCommand), command
            report = wire.ShardReport(command.replica_id, command.shard_id, wire.State.READY)
            await session.send(report)
            await session.close()
            assert await session.recv(timeout=TIMEOUT) is None
    finally:
        await server.stop(grace=TIMEOUT)
    assert plane.reports == [report], plane.reports


def stream() -> None:
    asyncio.run(asyncio.wait_for(_exchange(), 4 * TIMEOUT))
    print("smoke: a stream exchange on 127.0.0.1 (register, ack, command, report)")


def health() -> None:
    async def ask() -> list[bytes]:
        import grpc.aio

        server = await start_server(_Plane())
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                check = channel.unary_unary("/grpc.health.v1.Health/Check")
                # HealthCheckRequest: `service` (1, a string); the answer's `status`
                # is field 1, an enum: SERVING is 1, NOT_SERVING 2.
                answers = [await check(b"\x0a\x15llmgw.v1.AgentService", timeout=TIMEOUT)]
                await server.set_serving(False)
                answers.append(await check(b"", timeout=TIMEOUT))
                return answers
        finally:
            await server.stop(grace=None)

    answers = asyncio.run(asyncio.wait_for(ask(), 4 * TIMEOUT))
    assert answers == [b"\x08\x01", b"\x08\x02"], answers
    print("smoke: grpc.health.v1.Health/Check answers SERVING, then NOT_SERVING")


def store() -> None:
    spec = sample_command().spec
    with tempfile.TemporaryDirectory() as folder, wire.ShardStore(folder) as shards:
        shards.save(wire.SavedShard(spec, wire.State.READY))
        loaded = shards.load(spec.shard_id)
    assert loaded == wire.SavedShard(spec, wire.State.READY), loaded
    print("smoke: a shard store save and load")


def floors() -> None:
    # Field 1 (`node_id`, length-delimited) with a 6-byte length prefix.
    try:
        wire.decode(b"\x0a\x82\x80\x80\x80\x80\x00n1", v1.Register)
    except DecodeError:
        pass
    else:
        raise AssertionError("a length prefix over 5 bytes was read")
    report = wire_json.decode('{"state": "hibernating"}', wire.ShardReport)
    assert report.state is wire.State.FAILED, report
    print("smoke: a length over 5 bytes refused, an unknown shard state read as FAILED")


def core() -> None:
    """The core package, with its runtime dependencies alone."""
    codec()
    stream()
    health()
    store()
    floors()


def testing() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from llmgw_wire.testing import strategies as lst
    from llmgw_wire.testing.fuzz import fuzz
    from llmgw_wire.testing.laws import law_named

    lst.register_strategies()  # importing the module did; for st.from_type

    @settings(
        max_examples=EXAMPLES,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.from_type(wire.Registration))
    def crosses(registration: wire.Registration) -> None:
        assert wire.decode(wire.encode(registration), wire.Registration) == registration

    crosses()
    law = law_named("wire_domain_wire")
    run = fuzz([law], [wire.Registration, wire.ShardCommand], examples=EXAMPLES)
    assert not run.failures, run.failures
    print(
        f"smoke: testing: st.from_type(Registration) crosses encode/decode; "
        f"the law {law.name} held for {run.examples} examples"
    )


def otel() -> None:
    from opentelemetry import metrics

    class Noting(metrics.NoOpMeterProvider):
        """The API's provider that records nothing, noting the meters asked of it."""

        def __init__(self) -> None:
            self.meters: list[str] = []

        def get_meter(self, name: str, *args: Any, **kwargs: Any) -> metrics.Meter:
            self.meters.append(name)
            return super().get_meter(name, *args, **kwargs)

    provider = Noting()
    metrics.set_meter_provider(provider)
    # Setting it moved there the meters asked before, of the global proxy provider.
    before = len(provider.meters)
    asyncio.run(asyncio.wait_for(_exchange(), 4 * TIMEOUT))
    assert provider.meters[before:] == ["llmgw_wire.stream"], provider.meters
    print("smoke: otel: a stream exchange with its instruments on the global meter provider")


def reflection() -> None:
    import grpc
    from google.protobuf.descriptor_pool import DescriptorPool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    def describe(port: int) -> tuple[list[str], list[str]]:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            database = ProtoReflectionDescriptorDatabase(channel)
            service = DescriptorPool(database).FindServiceByName("llmgw.v1.AgentService")
            return sorted(database.get_services()), [m.name for m in service.methods]

    async def ask() -> tuple[list[str], list[str]]:
        server = await start_server(_Plane(), reflection=True)
        try:
            return await asyncio.to_thread(describe, server.port)
        finally:
            await server.stop(grace=None)

    services, methods = asyncio.run(asyncio.wait_for(ask(), 4 * TIMEOUT))
    assert "llmgw.v1.AgentService" in services, services
    assert methods == ["Connect"], methods
    print(f"smoke: reflection: a reflection client lists {', '.join(services)}")


def grpclib_codec() -> None:
    import grpclib.client
    import grpclib.const

    from llmgw_wire.stream.grpclib_codec import WireCodec

    async def exchange() -> None:
        plane = _Plane()
        server = await start_server(plane)
        channel = grpclib.client.Channel("127.0.0.1", server.port, codec=WireCodec())
        request: Any = channel.request(
            CONNECT_ROUTE,
            grpclib.const.Cardinality.STREAM_STREAM,
            v1.AgentMessage,
            v1.ControlMessage,
        )
        try:
            async with request as agent:
                await agent.send_message(sample_registration())
                ack = await agent.recv_message()
                assert isinstance(ack, wire.Ack), ack
                command = await agent.recv_message()
                assert isinstance(command, wire.ShardCommand), command
                report = wire.ShardReport(command.replica_id, command.shard_id, wire.State.READY)
                await agent.send_message(report)
                await agent.end()
                assert await agent.recv_message() is None
        finally:
            channel.close()
            await server.stop(grace=TIMEOUT)
        assert plane.reports == [report], plane.reports

    asyncio.run(asyncio.wait_for(exchange(), 4 * TIMEOUT))
    print("smoke: grpclib: a grpclib agent with WireCodec on 127.0.0.1 (register, ack, command)")


def schema() -> None:
    from llmgw_wire import compat

    with tempfile.TemporaryDirectory() as folder:
        top = Path(folder)
        with importlib.resources.as_file(importlib.resources.files(wire) / "proto") as proto:
            shutil.copytree(proto, top / "proto")
        (top / "buf.yaml").write_text("version: v2\nbreaking:\n  use: [WIRE]\n")
        command = Path(sys.executable).with_name("llmgw-wire")
        done = subprocess.run(
            [command, "compat", "--proto", top / "proto"],
            capture_output=True,
            text=True,
            check=False,
            cwd=top,
            timeout=4 * TIMEOUT,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        verdict = done.stderr.strip().splitlines()[-1]
        # The checker names the configuration it obeyed: the buf.yaml written here.
        assert verdict.endswith("(WIRE; config buf.yaml): compatible"), verdict
        (top / "pyproject.toml").write_text('[tool.llmgw-wire.compat]\nuse = ["WIRE"]\n')
        assert compat.load_config(top / "pyproject.toml").use == ("WIRE",)
    print(f"smoke: schema: {verdict.replace(folder, '.')}; a pyproject.toml configuration read")


#: The smoke of each extra of `pyproject.toml`, by the extra's name.
EXTRAS: dict[str, Callable[[], None]] = {
    "testing": testing,
    "otel": otel,
    "reflection": reflection,
    "grpclib": grpclib_codec,
    "schema": schema,
}


def main() -> int:
    """Run the core's smoke, or the smokes of the extras named; return the exit status."""
    extras = sys.argv[1:]
    missing = [name for name in extras if name not in EXTRAS]
    if missing:
        sys.exit(f"smoke: no smoke for the extra {', '.join(missing)}: add one to EXTRAS")
    for run in [EXTRAS[name] for name in extras] or [core]:
        run()
    what = f"the extras {', '.join(extras)}" if extras else "the core"
    python = sys.version.split()[0]
    print(f"smoke: {what} passed with llmgw-wire {wire.__version__} on Python {python}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
