"""The mapping between wire messages and domain models, as data, and its compiler.

* `llmgw_wire.mapping._table`: one `Pair` per domain model, saying which wire
  message carries it and, attribute by attribute, how; and the other tables
  of facts (the envelopes, the models with a message of their own, the shard
  state numbers);
* `llmgw_wire.mapping._rules`: the vocabulary the table is written in;
* `llmgw_wire.mapping._compiler`: the table compiled into plain conversion
  functions, once per wire backend (upb and betterproto2);
* `llmgw_wire.mapping.secrets`: the secret attributes, derived from the
  schema's `debug_redact` fields through the table;
* `llmgw_wire.mapping._runtime`: what the compiled functions need when they
  run, all that importing the codec loads of the mapping (the rest is loaded
  on first use);
* `llmgw_wire.mapping._explain`: the walks that say what and where, once the
  compiled code has refused a value;
* `llmgw_wire.mapping._description`: the mapping described as data, compared
  with a released one, and checked against a schema (`compat --mapping`).

The codec, the checks and the documentation are all built from the table:
there is no other description of the mapping to drift from.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmgw_wire.mapping._table import (
        ENVELOPES,
        MODELS_WITH_MESSAGE,
        NOT_CARRIED,
        PAIRS,
        PAIRS_WITH_MESSAGE,
        STATE_MODELS,
        STATE_NUMBERS,
        STATES_BY_NUMBER,
        Envelope,
        ModelWithMessage,
        Pair,
        pair_for,
    )
    from llmgw_wire.mapping.secrets import SECRET_ATTRIBUTES, SECRET_FIELDS, is_secret

__all__ = [
    "ENVELOPES",
    "MODELS_WITH_MESSAGE",
    "NOT_CARRIED",
    "PAIRS",
    "PAIRS_WITH_MESSAGE",
    "SECRET_ATTRIBUTES",
    "SECRET_FIELDS",
    "STATES_BY_NUMBER",
    "STATE_MODELS",
    "STATE_NUMBERS",
    "Envelope",
    "ModelWithMessage",
    "Pair",
    "is_secret",
    "pair_for",
]

# The table is loaded on first use, not when the codec is imported: decoding
# needs it only for its first value. Each name, and the module it is in.
_SECRETS = {"SECRET_ATTRIBUTES", "SECRET_FIELDS", "is_secret"}

if not TYPE_CHECKING:
    # Hidden from type checkers, which see the imports above instead.

    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        home = "llmgw_wire.mapping.secrets" if name in _SECRETS else "llmgw_wire.mapping._table"
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later lookups skip this function
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
