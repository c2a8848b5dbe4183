"""The checker's deliberate deviations from buf, kept as data in `deviations.json`.

Each entry is one finding where the checker and buf 1.75.0 disagree on a
case of the differential corpus (`tests/compat/buf_cases.py`), with the
reason. The differential test fails on any disagreement this file does not
list, and on any entry that no longer happens.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files

import attrs

__all__ = ["Deviation", "deviations"]


@attrs.frozen
class Deviation:
    """One finding on which the checker deliberately differs from buf.

    Attributes:
        id: a short name for the deviation.
        case: the corpus case that shows it.
        categories: the categories it shows in (`WIRE`, `WIRE_JSON`).
        rule: buf's rule name of the finding.
        path: the file of the finding.
        line: its line.
        kind: `extra` (the checker reports it, buf does not) or `missing`
            (buf reports it, the checker does not).
        reason: why the checker is right to differ.
    """

    id: str
    case: str
    categories: tuple[str, ...]
    rule: str
    path: str
    line: int
    kind: str
    reason: str


@cache
def deviations() -> tuple[Deviation, ...]:
    """Every deliberate deviation from buf, as `deviations.json` lists it."""
    data = json.loads(files("llmgw_wire.compat").joinpath("deviations.json").read_text("utf-8"))
    return tuple(
        Deviation(
            id=entry["id"],
            case=entry["case"],
            categories=tuple(entry["categories"]),
            rule=entry["rule"],
            path=entry["path"],
            line=int(entry["line"]),
            kind=entry["kind"],
            reason=entry["reason"],
        )
        for entry in data["deviations"]
    )
