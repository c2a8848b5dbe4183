"""The secret domain attributes, derived from the schema through the table.

A domain attribute is secret when the wire field its rule maps it to is one
the schema marks `[debug_redact = true]` (`llmgw_wire.v1.redaction`):
`ShardSpec.api_key`, because its rule maps it to `llmgw.v1.StartShard.api_key`.
This is the one place that says so; every surface asks it:

* the explaining walk (`llmgw_wire.mapping.explain`): an `EncodeError` about a
  secret attribute holds a `Redacted` stand-in and shows only its type;
* the JSON codec leaves secrets out of its default dumps;
* `llmgw-wire inspect` shows them as `<redacted>`;
* the domain models' `repr`: the domain cannot read the schema, so it marks
  its secrets itself (`secret()` in `llmgw_wire.domain`); a test holds those
  marks equal to `SECRET_ATTRIBUTES`, and should the two ever differ at
  import (a schema marked but a model not yet), `redact_domain_reprs` makes
  the schema win.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from llmgw_wire.errors import shown
from llmgw_wire.mapping.rules import Embedded, LeaderEndpoint
from llmgw_wire.mapping.table import PAIRS
from llmgw_wire.v1.redaction import SECRET_FIELDS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from llmgw_wire.mapping.table import Pair

__all__ = [
    "SECRET_ATTRIBUTES",
    "SECRET_FIELDS",
    "is_secret",
    "marked_secret",
    "redact_domain_reprs",
    "secret_attributes",
]


def secret_attributes(
    secrets: frozenset[str], pairs: Iterable[Pair] = PAIRS
) -> frozenset[tuple[type, str]]:
    """(domain model, attribute) for every attribute carried by a secret wire field.

    Args:
        secrets: full names of the secret wire fields (`llmgw.v1.StartShard.api_key`).
        pairs: the mapping table.

    An attribute derived from a secret field is secret too (an adopted shard's
    `endpoint` holds its `leader_addr`).
    """
    out: set[tuple[type, str]] = set()
    for pair in pairs:
        for rule in pair.rules:
            if isinstance(rule, Embedded) or not rule.wire:
                continue
            # An adopted shard's `endpoint` is made of its `leader_addr`.
            field = "leader_addr" if isinstance(rule, LeaderEndpoint) else rule.wire
            if f"{pair.wire}.{field}" in secrets:
                out.add((pair.domain, rule.attr))
    return frozenset(out)


#: The secret attributes of the domain models, from the library's schema.
SECRET_ATTRIBUTES: frozenset[tuple[type, str]] = secret_attributes(SECRET_FIELDS)


def is_secret(domain: type, attr: str) -> bool:
    """Whether the attribute `attr` of the domain model `domain` is a secret."""
    return (domain, attr) in SECRET_ATTRIBUTES


def marked_secret(models: Iterable[type]) -> frozenset[tuple[type, str]]:
    """The attributes that the domain models mark secret themselves (`secret()`)."""
    return frozenset(
        (model, field.name)
        for model in models
        for field in attrs.fields(model)
        if field.metadata.get("secret")
    )


def redact_domain_reprs(secrets: frozenset[tuple[type, str]] = SECRET_ATTRIBUTES) -> None:
    """Make the `repr` of each domain model with a secret it does not mark hide it."""
    by_model: dict[type, set[str]] = {}
    for model, attr in secrets - marked_secret({model for model, _ in secrets}):
        by_model.setdefault(model, set()).add(attr)
    for model, names in by_model.items():
        setattr(model, "__repr__", _redacting_repr(model, frozenset(names)))  # noqa: B010


def _redacting_repr(model: type, names: frozenset[str]) -> Callable[[Any], str]:
    fields = [field for field in attrs.fields(model) if field.repr]

    def __repr__(self: Any) -> str:  # noqa: N807 - it is the model's __repr__
        parts = []
        for field in fields:
            value = getattr(self, field.name)
            empty = isinstance(value, (str, bytes, tuple, Mapping)) and not value
            hidden = field.name in names and not empty
            if hidden:
                text = shown(value, secret=True)
            else:
                text = field.repr(value) if callable(field.repr) else repr(value)
            parts.append(f"{field.name}={text}")
        return f"{model.__name__}({', '.join(parts)})"

    __repr__.__qualname__ = f"{model.__qualname__}.__repr__"
    return __repr__


redact_domain_reprs()
