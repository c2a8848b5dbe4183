"""What a task tells of its cancellations, decided once for the Python that runs.

Python 3.11 counts a task's pending cancellations (`Task.cancelling`) and
takes one back (`Task.uncancel`), as `asyncio.timeout` does; 3.10 does
neither. The stream tells its own cancellations (a timeout, an end of the
call) from anyone else's with them; where 3.10 cannot tell, each caller
says what it does instead.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

__all__ = ["COUNTED", "cancelling", "uncancel"]

#: Whether this Python counts a task's cancellations (3.11+).
COUNTED: Final = hasattr(asyncio.Task, "uncancel")


def cancelling(task: asyncio.Task[Any] | None) -> bool:
    """Whether a cancellation of `task` is pending; False where it cannot be told (3.10)."""
    return COUNTED and task is not None and task.cancelling() > 0  # type: ignore[attr-defined,no-any-return,unused-ignore]


def uncancel(task: asyncio.Task[Any]) -> bool:
    """Take back one cancellation of `task`: whether no other is pending.

    True on Python 3.10, which does not count them: the caller's own is
    the only one it can know of.
    """
    return not COUNTED or task.uncancel() == 0  # type: ignore[attr-defined,no-any-return,unused-ignore]
