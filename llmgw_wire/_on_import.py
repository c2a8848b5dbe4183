"""Calls that wait for a module of the library to be imported, for code it must not import.

`llmgw_wire.domain` and `llmgw_wire.v1` say, as their last statement, that
they have been imported. The testing kit waits for it to register its
hypothesis strategies for their classes (`llmgw_wire.testing._hook`):
so the runtime never imports the testing kit, and a process that imports
hypothesis, but neither of these, pays nothing for them. Nothing waits in a
process that has not imported hypothesis.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["imported", "when_imported"]

_LOCK = threading.Lock()
_IMPORTED: set[str] = set()
_WAITING: dict[str, list[Callable[[], None]]] = {}


def when_imported(module: str, call: Callable[[], None]) -> None:
    """Call `call` once `module` has been imported: now, if it has been."""
    with _LOCK:
        if module not in _IMPORTED:
            _WAITING.setdefault(module, []).append(call)
            return
    call()


def imported(module: str) -> None:
    """Say that `module` has been imported: the calls waiting for it run, in order."""
    with _LOCK:
        _IMPORTED.add(module)
        calls = _WAITING.pop(module, [])
    for call in calls:
        call()
