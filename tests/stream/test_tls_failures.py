"""TLS that says what is wrong: each handshake failure reaches the agent as `Unauthenticated`."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from llmgw_wire.stream import (
    AgentSession,
    Backoff,
    ClientTLS,
    ControlPlane,
    ControlSession,
    ServerTLS,
    StreamError,
    Unauthenticated,
    connect,
    keep_connected,
    start_server,
)
from llmgw_wire.testing.sample import sample_registration
from tests.support import run_async as run

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(120)
WAIT = 20.0
NODE = "gpu-node-017"
PAST = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)


class Idle(ControlPlane):
    async def handle(self, session: ControlSession) -> None:
        async for _ in session:
            pass


def server_tls(ca: Any, *, expired: bool = False, mutual: bool = True) -> ServerTLS:
    if expired:
        cert = ca.issue_cert("127.0.0.1", not_before=PAST - dt.timedelta(days=1), not_after=PAST)
    else:
        cert = ca.issue_cert("127.0.0.1", "localhost")
    return ServerTLS(
        cert.cert_chain_pems[0].bytes(),
        cert.private_key_pem.bytes(),
        ca.cert_pem.bytes() if mutual else None,
    )


def client_tls(trusted: Any, issuer: Any | None, server_name: str | None = None) -> ClientTLS:
    if issuer is None:
        return ClientTLS(trusted.cert_pem.bytes(), server_name=server_name)
    cert = issuer.issue_cert(NODE)
    chain = b"".join(pem.bytes() for pem in cert.cert_chain_pems)
    return ClientTLS(trusted.cert_pem.bytes(), chain, cert.private_key_pem.bytes(), server_name)


async def first_error(port: int, tls: ClientTLS) -> StreamError:
    """The error of one connection attempt."""
    async with connect(f"127.0.0.1:{port}", tls=tls) as session:
        with contextlib.suppress(StreamError):
            await session.send(sample_registration())
        with pytest.raises(StreamError) as error:
            await session.recv(timeout=WAIT)
    return error.value


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("server certificate from another CA", "signed by a CA the agent does not trust"),
        ("expired server certificate", "certificate has expired"),
        ("wrong server_name", "not for the name connected to"),
        ("client certificate from another CA", "refused the agent's certificate"),
        ("no client certificate", "refused the agent's certificate"),
    ],
)
def test_a_failed_handshake_is_unauthenticated_with_its_reason(case: str, reason: str) -> None:
    ca, other = trustme.CA(), trustme.CA()
    tls = {
        "server certificate from another CA": client_tls(other, ca),
        "expired server certificate": client_tls(ca, ca),
        "wrong server_name": client_tls(ca, ca, server_name="elsewhere.example"),
        "client certificate from another CA": client_tls(ca, other),
        "no client certificate": client_tls(ca, None),
    }[case]

    async def main() -> None:
        server = await start_server(Idle(), tls=server_tls(ca, expired=case.startswith("expired")))
        try:
            error = await first_error(server.port, tls)
        finally:
            await server.stop(grace=None)
        assert type(error) is Unauthenticated
        assert error.code.name == "UNAUTHENTICATED"
        assert reason in error.reason
        assert str(error).startswith(f"UNAUTHENTICATED: {error.reason} (")

    run(main)


def test_keep_connected_says_it_at_error_once_and_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.metrics")
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

    reader = InMemoryMetricReader()
    ca, other = trustme.CA(), trustme.CA()
    rounds = 3

    async def main() -> None:
        server = await start_server(Idle(), tls=server_tls(ca))
        stop = asyncio.Event()
        seen: list[logging.LogRecord] = []

        class Counting(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage().startswith("cannot authenticate"):
                    seen.append(record)
                    if len(seen) >= rounds:
                        stop.set()

        async def serve(session: AgentSession) -> None:
            async for _ in session:
                pass

        handler = Counting()
        logging.getLogger("llmgw_wire.stream").addHandler(handler)
        try:
            await keep_connected(
                f"127.0.0.1:{server.port}",
                sample_registration,
                serve,
                stop=stop,
                backoff=Backoff(initial=0.01, maximum=0.05),
                tls=client_tls(other, ca),
                meter_provider=sdk.MeterProvider(metric_readers=[reader]),
            )
            # Told to give up, it raises the error instead.
            with pytest.raises(Unauthenticated, match="does not trust"):
                await keep_connected(
                    f"127.0.0.1:{server.port}",
                    sample_registration,
                    serve,
                    give_up_unauthenticated=True,
                    tls=client_tls(other, ca),
                )
        finally:
            logging.getLogger("llmgw_wire.stream").removeHandler(handler)
            await server.stop(grace=None)
        levels = [record.levelno for record in seen]
        assert levels[:rounds] == [logging.ERROR] + [logging.INFO] * (rounds - 1)
        assert "signed by a CA the agent does not trust" in seen[0].getMessage()
        data = reader.get_metrics_data()
        assert data is not None
        ((metric,),) = [scope.metrics for scope in data.resource_metrics[0].scope_metrics]
        assert metric.name == "llmgw.stream.reconnects"
        (point,) = metric.data.data_points
        assert isinstance(point, NumberDataPoint)
        assert dict(point.attributes or {}) == {"reason": "unauthenticated"}
        # Every round but the one the stop ended.
        assert point.value >= rounds - 1

    with caplog.at_level(logging.INFO, logger="llmgw_wire.stream"):
        run(main)


@pytest.mark.subprocess
@pytest.mark.parametrize("verbosity", ["ERROR", None])
def test_a_failed_handshake_is_the_agents_error_with_grpc_logs_as_the_application_set_them(
    verbosity: str | None,
) -> None:
    # In a process of its own, where grpc is first imported by the library:
    # the C core's verbosity is the application's choice, and the library
    # sets nothing of it. Unset, the core writes its INFO lines (the stream
    # guide says so): one per failed handshake.
    script = textwrap.dedent(
        """
        import asyncio
        from llmgw_wire.stream import Unauthenticated
        import tests.stream.test_tls_failures as here

        ca, other = here.trustme.CA(), here.trustme.CA()

        async def main():
            server = await here.start_server(here.Idle(), tls=here.server_tls(ca))
            try:
                error = await here.first_error(server.port, here.client_tls(other, ca))
            finally:
                await server.stop(grace=None)
            assert isinstance(error, Unauthenticated), error

        asyncio.run(main())
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    if verbosity is not None:
        env["GRPC_VERBOSITY"] = verbosity
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert ("andshake" in done.stderr) is (verbosity is None)
