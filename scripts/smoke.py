"""A representative run of the installed package: bytes, the stream, the store.

Run by `scripts/resolutions.py` with the interpreter of a fresh environment
that has only the built wheel and its runtime dependencies, outside the
checkout, so that it exercises what a service gets from `pip install`:

* `encode`/`decode` of a registration, and `decode` into a wire class;
* a stream exchange on loopback (127.0.0.1): the agent registers, the control
  plane acknowledges and sends a command, the agent reports it ready;
* a `ShardStore` save and load in a temporary folder;
* the behaviours that set the floors of `pyproject.toml`: upb refuses a length
  prefix over 5 bytes (protobuf), and a shard state this version does not know
  reads as FAILED (cattrs).

It prints one line per part and exits non-zero (with the traceback) on the first
failure. It imports nothing of the checkout's tests and nothing outside the
package's runtime dependencies.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

import llmgw_wire as wire
from llmgw_wire import v1
from llmgw_wire.codec import json as wire_json
from llmgw_wire.errors import DecodeError
from llmgw_wire.stream import ControlPlane, ControlSession, connect, start_server
from llmgw_wire.testing.sample import sample_command, sample_registration

# Every wait of the exchange is bounded; generous, as a busy machine is slow.
TIMEOUT = 30.0


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


def main() -> int:
    """Run the parts; return the process exit status."""
    codec()
    stream()
    store()
    floors()
    print(f"smoke: passed with llmgw-wire {wire.__version__} on Python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
