"""The secret domain attributes, derived from the schema through the table.

A domain attribute is secret when the wire field its rule maps it to is one
the schema marks `[debug_redact = true]` (`llmgw_wire._schema`):
`ShardSpec.api_key`, because its rule maps it to `llmgw.v1.StartShard.api_key`.
This is the one place that says so; every surface asks it:

* the explaining walk (`llmgw_wire.mapping._explain`): an `EncodeError` about a
  secret attribute holds a `Redacted` stand-in and shows only its type;
* the JSON codec leaves secrets out of its default dumps;
* `llmgw-wire inspect` and the demo show them as every surface does, through
  the one renderer `llmgw_wire.errors.shown`: `<secret str, not shown>`;
* the domain models' `repr`: the domain cannot read the schema, so it marks
  its secrets itself (`secret()` in `llmgw_wire.domain`, whose repr is that
  same renderer); `marked_secret` reads those marks, and a test holds them
  equal to `SECRET_ATTRIBUTES`. Nothing is patched at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from llmgw_wire._schema import SECRET_FIELDS
from llmgw_wire.mapping._table import PAIRS

if TYPE_CHECKING:
    from collections.abc import Iterable

    from llmgw_wire.mapping._table import Pair

__all__ = [
    "SECRET_ATTRIBUTES",
    "SECRET_FIELDS",
    "is_secret",
    "marked_secret",
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
    return frozenset(
        (pair.domain, rule.attr)
        for pair in pairs
        for rule in pair.rules
        if any(f"{pair.wire}.{field}" in secrets for field in rule.made_of())
    )


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
