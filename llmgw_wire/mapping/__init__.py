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
* `llmgw_wire.mapping._explain`: the walks that say what and where, once the
  compiled code has refused a value;
* `llmgw_wire.mapping._description`: the mapping described as data, compared
  with a released one, and checked against a schema (`compat --mapping`).

The codec, the checks and the documentation are all built from the table:
there is no other description of the mapping to drift from.
"""

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
