"""`make failover` with grpc-go's control plane as the standby B.

A handful of agents lose the library's control plane A (killed, then stopped
gracefully) and register on grpc-go's: nothing lost, duplicated or stripped
of its compute (`tests.support.run_failover`). The figures mean nothing at
this size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.support import run_failover

if TYPE_CHECKING:
    from pathlib import Path


def test_agents_fail_over_to_a_grpc_go_standby(tmp_path: Path) -> None:
    run_failover(tmp_path, "grpc-go", agents=4)
