"""The codec: domain values to wire messages and bytes, and back.

* `encode` and `decode` (`llmgw_wire.codec._binary`): domain values to bytes
  and back on Google's protobuf runtime (upb), strict and fast;
* `converter` and `make_converter` (`llmgw_wire.codec._cattrs_converter`): the cattrs
  converter between the betterproto2 classes of `llmgw_wire.v1` and the
  domain models;
* `llmgw_wire.codec.json`: the JSON codec, with the same verbs, `encode`
  and `decode`;
* the limits `decode` applies (`llmgw_wire.codec._limits`).

Both directions raise the library's errors: `EncodeError` with the path of the
first value the wire cannot carry, `DecodeError` with the message type and
what was wrong.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from llmgw_wire.codec._binary import decode, encode
from llmgw_wire.codec._classes import wire_class
from llmgw_wire.codec._limits import DEFAULT_MAX_ITEMS, DEFAULT_MAX_SIZE

if TYPE_CHECKING:
    from llmgw_wire.codec._cattrs_converter import converter, make_converter

__all__ = [
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_SIZE",
    "converter",
    "decode",
    "encode",
    "make_converter",
    "wire_class",
]

# The converter is built on first use: `decode` and `encode` need no cattrs.
_LAZY = {"converter", "make_converter"}

if not TYPE_CHECKING:
    # Hidden from type checkers, which see the import above instead.

    def __getattr__(name: str) -> Any:
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module("llmgw_wire.codec._cattrs_converter"), name)
        globals()[name] = value  # later lookups skip this function
        return value
