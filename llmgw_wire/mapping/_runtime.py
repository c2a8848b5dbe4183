"""What the compiled conversion functions need when they run, and nothing else.

The codec imports this at import time (its limits compile their counting
functions then, and its guard names the refusal); the table, the rules and
the compiler load on the first conversion. So this module stays small: the
signal the generated code raises, and the one place that runs generated code.
"""

from __future__ import annotations

import linecache
from typing import Any

__all__ = ["Invalid", "exec_generated"]


class Invalid(Exception):  # noqa: N818 - a signal inside the library, never seen by users
    """Raised by generated code; the codec re-walks the value to explain it."""


def exec_generated(sources: dict[str, str], namespace: dict[str, Any]) -> None:
    """Compile and run each generated source into `namespace`, under its own file name.

    The one place that runs generated code. Each file name (`<llmgw_wire
    generated ...>`) is registered with `linecache`, so that a traceback or a
    debugger shows the generated line, as cattrs does for its hooks.
    """
    for filename, source in sources.items():
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
