"""`make failover` still runs: a handful of agents move from a lost control plane to
its standby, nothing lost, duplicated or stripped of its compute.

Its figures mean nothing at this size; what is checked is that each run
completes and the report says so (`tests.support.run_failover`). The same
with grpc-go's plane as the standby is in interop/tests, where Go is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support import run_failover

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.build, pytest.mark.subprocess, pytest.mark.timeout(600)]


def test_a_handful_of_agents_fail_over_to_the_standby(tmp_path: Path) -> None:
    run_failover(tmp_path, "library", agents=4)
