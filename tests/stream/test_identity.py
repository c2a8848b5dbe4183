"""Node identity on every message: a certificate for one node speaks for that node only."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from llmgw_wire import Ack, Heartbeat, Registration
from llmgw_wire.stream import StreamError, connect, start_server
from llmgw_wire.testing.stream import registration_of
from tests.stream.test_stream import REPORT
from tests.stream.test_stream_tls import NODE, PKI, WAIT, pki
from tests.support import Adopting
from tests.support import run_async as run

if TYPE_CHECKING:
    from llmgw_wire.stream import AgentSession

__all__ = ["pki"]

OTHER = "gpu-node-018"


async def exchange(port: int, pki: PKI, *values: object) -> tuple[list[object], StreamError | None]:
    """Send `values`, half-close, and read until the end: what came back, how it ended."""
    got: list[object] = []
    async with connect(f"127.0.0.1:{port}", tls=pki.client_tls()) as session:
        try:
            for value in values:
                await session.send(value)  # type: ignore[arg-type]
                if isinstance(value, Registration):
                    got.append(await session.recv(timeout=WAIT))
            await session.close()
            got.extend(await drain(session))
        except StreamError as exc:
            return got, exc
    return got, None


async def drain(session: AgentSession) -> list[object]:
    return [value async for value in session]


@pytest.mark.parametrize(
    ("values", "code"),
    [
        # A heartbeat for another node, before the registration and after it.
        ((Heartbeat(OTHER),), "PERMISSION_DENIED"),
        ((registration_of(NODE), Heartbeat(OTHER)), "PERMISSION_DENIED"),
        # Anything before the registration.
        ((REPORT,), "FAILED_PRECONDITION"),
        ((Heartbeat(NODE),), "FAILED_PRECONDITION"),
    ],
)
def test_with_node_identity_no_value_reaches_handle_unless_the_certificate_vouches(
    pki: PKI, values: tuple[object, ...], code: str
) -> None:
    async def main() -> None:
        plane = Adopting()
        server = await start_server(plane, tls=pki.server_tls(), node_identity=True)
        try:
            _, end = await asyncio.wait_for(exchange(server.port, pki, *values), WAIT)
        finally:
            await server.stop(grace=None)
        assert end is not None
        assert end.code.name == code
        assert all(isinstance(value, Registration) for value in plane.handed), plane.handed

    run(main)


def test_with_node_identity_the_node_s_own_values_are_handed_over(pki: PKI) -> None:
    registration = registration_of(NODE)

    async def main() -> None:
        plane = Adopting()
        server = await start_server(plane, tls=pki.server_tls(), node_identity=True)
        try:
            got, end = await asyncio.wait_for(
                exchange(server.port, pki, registration, Heartbeat(NODE), REPORT), WAIT
            )
        finally:
            await server.stop(grace=None)
        assert (got, end) == ([Ack(NODE, 2, "adopted")], None)
        assert plane.handed == [registration, Heartbeat(NODE), REPORT]

    run(main)
