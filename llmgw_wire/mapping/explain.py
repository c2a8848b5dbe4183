"""The walks that explain a refused value, over the table of pairs.

The compiled functions only signal that a value cannot be converted; these
walks run afterwards, on the refused value alone, to say what and where
(``Expected `int32`, got 2147483648 - at `$.gpus[3].memory_total_mb` ``).
"""

from __future__ import annotations

from typing import Any

from llmgw_wire.errors import EncodeError, format_path
from llmgw_wire.mapping.rules import Invalid, LeaderEndpoint, Path, Rule, leader_addr
from llmgw_wire.mapping.table import pair_for

__all__ = ["explain_value", "explain_wire"]


class _TableWalk:
    """The explaining walk over `llmgw_wire.mapping.table`, as the rules call it."""

    def value(self, value: Any, path: Path) -> None:
        pair = pair_for(type(value))
        for rule in pair.rules:
            sub = getattr(value, rule.attr)
            rule.explain(sub, (*path, rule.attr), self)
            if isinstance(rule, LeaderEndpoint) and sub is not None:
                try:
                    leader_addr(value)
                except Invalid:
                    expected = "None, or `http://<leader_addr>:<http_port>` for rank 0"
                    raise EncodeError(expected, sub, (*path, rule.attr)) from None
        for claims in pair.shared_wire_fields().values():
            first, *others = claims
            want = _resolve(value, first)
            for attrs in others:
                got = _resolve(value, attrs)
                if got != want:
                    expected = (
                        f"{want!r} as at `{format_path((*path, *first))}` (both are one wire field)"
                    )
                    raise EncodeError(expected, got, (*path, *attrs))

    def wire(self, message: object, domain: type, path: Path, message_type: str) -> None:
        for rule in pair_for(domain).rules:
            sub_path = path if rule.embedded_in_parent else (*path, rule.wire)
            rule.explain_structure(message, sub_path, message_type, self)

    def rules(self, domain: type) -> tuple[Rule, ...]:
        return pair_for(domain).rules


_WALK = _TableWalk()


def explain_value(value: Any, path: Path = ()) -> None:
    """Raise the precise `EncodeError` for the first thing wrong in a domain value."""
    _WALK.value(value, path)


def explain_wire(message: object, domain: type, path: Path, message_type: str) -> None:
    """Raise the precise `DecodeError` for the first wire value with no domain value."""
    _WALK.wire(message, domain, path, message_type)


def _resolve(value: object, attrs: tuple[str, ...]) -> object:
    for attr in attrs:
        value = getattr(value, attr)
    return value
