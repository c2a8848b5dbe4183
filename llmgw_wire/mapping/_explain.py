"""The walks that explain a refused value, over the table of pairs.

The compiled functions only signal that a value cannot be converted; these
walks run afterwards, on the refused value alone, to say what and where
(``Expected `int32`, got 2147483648 - at `$.gpus[3].memory_total_mb` ``).
"""

from __future__ import annotations

from llmgw_wire.errors import EncodeError, format_path, shown
from llmgw_wire.mapping._rules import FieldRule, Messages, Path, Rule
from llmgw_wire.mapping._table import flat_fields, pair_for
from llmgw_wire.mapping.secrets import is_secret

__all__ = ["explain_value", "explain_wire"]


class _TableWalk:
    """The explaining walk over `llmgw_wire.mapping._table`, as the rules call it."""

    def value(self, value: object, path: Path) -> None:
        pair = pair_for(type(value))
        for rule in pair.rules:
            sub = getattr(value, rule.attr)
            error = self._explain(rule, value, (*path, rule.attr))
            if error is not None:
                if is_secret(pair.domain, rule.attr):
                    # Only the attribute's path: a map's key, or an item's
                    # index, would tell something of the secret.
                    error = EncodeError(error.expected, sub, (*path, rule.attr), secret=True)
                raise error
        for rule in pair.rules:
            if isinstance(rule, Messages) and rule.context:
                self.context(value, rule, path)
        for claims in pair.shared_wire_fields().values():
            first, *others = claims
            secret = any(_is_secret_path(value, attrs) for attrs in claims)
            want = _resolve(value, first)
            for attrs in others:
                got = _resolve(value, attrs)
                if got != want:
                    where = (*path, *first)
                    why = "both are one wire field"
                    raise _disagreement(want, where, got, (*path, *attrs), why, secret=secret)

    def context(self, value: object, rule: Messages, path: Path) -> None:
        """Each item's attributes that the enclosing message carries must agree with it."""
        carried = dict(flat_fields(pair_for(type(value))))
        for attr, wire in rule.context:
            where = carried[wire]
            want = _resolve(value, where)
            secret = _is_secret_path(value, where)
            for i, item in enumerate(getattr(value, rule.attr)):
                got = getattr(item, attr)
                if got != want:
                    why = "the wire carries it once, in the enclosing message"
                    at = (*path, rule.attr, i, attr)
                    raise _disagreement(want, (*path, *where), got, at, why, secret=secret)

    def _explain(self, rule: Rule, value: object, path: Path) -> EncodeError | None:
        # The error, returned rather than raised, so that the caller can
        # replace it for a secret without it ever reaching a traceback.
        try:
            rule.explain_in(value, path, self)
        except EncodeError as error:
            error.__traceback__ = None
            return error
        return None

    def wire(self, message: object, domain: type, path: Path, message_type: str) -> None:
        for rule in pair_for(domain).rules:
            sub_path = (*path, rule.wire) if isinstance(rule, FieldRule) else path
            rule.explain_structure(message, sub_path, message_type, self)

    def rules(self, domain: type) -> tuple[Rule, ...]:
        return pair_for(domain).rules


_WALK = _TableWalk()


def explain_value(value: object, path: Path = ()) -> None:
    """Raise the precise `EncodeError` for the first thing wrong in a domain value."""
    _WALK.value(value, path)


def explain_wire(message: object, domain: type, path: Path, message_type: str) -> None:
    """Raise the precise `DecodeError` for the first wire value with no domain value."""
    _WALK.wire(message, domain, path, message_type)


def _disagreement(
    want: object, want_at: Path, got: object, got_at: Path, why: str, *, secret: bool
) -> EncodeError:
    """Two attributes that the wire carries as one value, and that disagree."""
    shown_want = "the value" if secret else shown(want)
    expected = f"{shown_want} as at `{format_path(want_at)}` ({why})"
    return EncodeError(expected, got, got_at, secret=secret)


def _is_secret_path(value: object, attrs: tuple[str, ...]) -> bool:
    for attr in attrs[:-1]:
        value = getattr(value, attr)
    return is_secret(type(value), attrs[-1])


def _resolve(value: object, attrs: tuple[str, ...]) -> object:
    for attr in attrs:
        value = getattr(value, attr)
    return value
