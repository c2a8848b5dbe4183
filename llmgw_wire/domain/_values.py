"""Field helpers shared by the domain models.

Sequences are stored as tuples and maps as fresh dicts, so that a value never
shares mutable state with what it was built from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping


def _str_map(values: Mapping[str, str]) -> dict[str, str]:
    return dict(values)


def seq() -> Any:
    """A tuple attribute, empty by default; any iterable is accepted and copied."""
    return attrs.field(factory=tuple, converter=tuple)


def str_map() -> Any:
    """A `dict[str, str]` attribute, empty by default, copied from the mapping given."""
    return attrs.field(factory=dict, converter=_str_map)


def _redacted(value: str) -> str:
    return "'<redacted>'" if value else "''"


def secret() -> Any:
    """A string attribute whose value never appears in a repr, only whether it is set.

    Its metadata says `{"secret": True}`, which is how dumps know to leave it out.
    """
    return attrs.field(default="", repr=_redacted, metadata={"secret": True})
