"""Fixtures of the interop tests: real grpc-go peers as processes.

These tests are outside the default collection (``testpaths`` is
``tests/``): `make interop-go` builds the peers and runs them. Without the
binaries every test here skips, saying how to build them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from peers import Peers, TLSFiles, binaries_missing, make_tls_files

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture(autouse=True)
def _go_binaries() -> None:
    reason = binaries_missing()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def peers() -> Iterator[Peers]:
    """Start Go peers (``peers.control_plane(...)``, ``peers.agent(...)``); all stop at the end."""
    started = Peers()
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def tls_files(tmp_path: Path) -> TLSFiles:
    """Give a fresh CA, server certificate (127.0.0.1) and client certificate (go-agent-1)."""
    pytest.importorskip("trustme", reason="TLS tests need trustme (the dev dependency group)")
    return make_tls_files(tmp_path)
