"""What every stream test starts with."""

from __future__ import annotations

import pytest

from llmgw_wire.stream._logs import LINE_BUDGET


@pytest.fixture(autouse=True)
def _full_line_budget() -> None:
    # The stream's log budget is the process's: one test's lines leave none of it to the next.
    LINE_BUDGET.reset()
