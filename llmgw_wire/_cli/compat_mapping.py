"""Printing what `llmgw_wire.mapping._description` finds, for `llmgw-wire compat --mapping`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from llmgw_wire.mapping._description import MappingChange

__all__ = ["render_changes"]


def render_changes(changes: Sequence[MappingChange], error_format: str) -> str:
    """The mapping changes as notices: text lines, JSON lines, or GitHub notices."""
    if error_format == "json":
        return "".join(
            json.dumps(
                {"type": "LLMGW_MAPPING_CHANGED", **attrs.asdict(change)}, separators=(",", ":")
            )
            + "\n"
            for change in changes
        )
    if error_format == "github-actions":
        return "".join(
            f"::notice title=LLMGW_MAPPING_CHANGED::{str(change).replace('%', '%25')}\n"
            for change in changes
        )
    return "".join(f"{change}\n" for change in changes)
