"""Addresses that are no control plane, on loopback: an HTTP/2 server that answers
plain HTTP, one that accepts the call and never answers, and another gRPC service.

Each counts the calls it was sent, so that a test can tell it was tried.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import grpc
import grpc.aio
import h2.config
import h2.connection
import h2.events

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

HOST = "127.0.0.1"
# The most connections a fake serves at once: a test's agent opens one at a time.
MAX_CONNECTIONS = 16


class Http2Fake:
    """An HTTP/2 server that answers every request with `status` (None: never answers).

    A status of 200 comes without `grpc-status`: a plain HTTP answer, no
    gRPC at all. Pings are answered (h2 does it), so keepalive finds
    nothing wrong with a silent one.
    """

    def __init__(self, status: int | None) -> None:
        self.status = status
        self.requests = 0
        #: Set once a request has come.
        self.requested = asyncio.Event()
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    @property
    def target(self) -> str:
        return f"{HOST}:{self.port}"

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._writers.append(writer)
        connection = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        connection.initiate_connection()
        writer.write(connection.data_to_send())
        with contextlib.suppress(ConnectionError, h2.exceptions.ProtocolError):
            while data := await reader.read(65536):
                for event in connection.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        self.requests += 1
                        self.requested.set()
                        self._answer(connection, event.stream_id)
                    elif isinstance(event, h2.events.DataReceived) and self.status is not None:
                        connection.acknowledge_received_data(
                            event.flow_controlled_length, event.stream_id
                        )
                writer.write(connection.data_to_send())
                await writer.drain()
        writer.close()

    def _answer(self, connection: h2.connection.H2Connection, stream_id: int) -> None:
        if self.status is None:
            return  # accepted, never answered
        body = b"<html>not here</html>"
        connection.send_headers(
            stream_id,
            [
                (":status", str(self.status)),
                ("content-type", "text/html"),
                ("content-length", str(len(body))),
            ],
        )
        connection.send_data(stream_id, body, end_stream=True)


@contextlib.asynccontextmanager
async def http2_fake(status: int | None) -> AsyncIterator[Http2Fake]:
    fake = Http2Fake(status)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


class _Counting(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.calls = 0

    async def intercept_service(self, continuation, details):  # type: ignore[no-untyped-def]
        self.calls += 1
        return await continuation(details)


@contextlib.asynccontextmanager
async def other_grpc_service() -> AsyncIterator[tuple[str, _Counting]]:
    """A gRPC server with no AgentService: it answers UNIMPLEMENTED."""
    counting = _Counting()
    server = grpc.aio.server(interceptors=[counting])
    port = server.add_insecure_port(f"{HOST}:0")
    await server.start()
    try:
        yield f"{HOST}:{port}", counting
    finally:
        await server.stop(grace=None)
