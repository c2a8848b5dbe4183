"""Field helpers shared by the domain models.

Sequences are stored as tuples and maps as fresh dicts, so that a value never
shares mutable state with what it was built from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from llmgw_wire.errors import shown

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


def _redacted(value: object) -> str:
    # Only the type of a value that is set: `<secret str, not shown>`.
    return shown(value, secret=True) if value or not isinstance(value, str) else "''"


def secret() -> Any:
    """A string attribute whose value never appears in a repr, only whether it is set.

    Its metadata says `{"secret": True}`. Which attributes are secret is the
    schema's to say (`[debug_redact = true]`); the domain cannot read it, so
    it repeats it here, and a test holds the two equal
    (`llmgw_wire.mapping.SECRET_ATTRIBUTES`).
    """
    return attrs.field(default="", repr=_redacted, metadata={"secret": True})
