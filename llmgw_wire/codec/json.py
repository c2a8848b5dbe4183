"""A JSON codec for the domain models, beside the wire one.

The verbs are the binary codec's: `encode(value)` gives JSON text and
`decode(text, into)` the domain value back; `json_converter` is the cattrs
JSON converter (`cattrs.preconf.json`) between every domain model and plain
JSON values, and `make_json_converter` makes another.

The format is strict where JSON is loose and lenient where versions differ:

* attributes by name; an unknown key (a newer writer's) is ignored, and a
  missing one takes the attribute's default (an older writer's: a shard spec
  saved without `compute` loads with `compute` None);
* an int, a string or a boolean must be one: `"12"` and `1.0` are not ints,
  `"abc"` is not an array of strings;
* enums by value (`"ready"`); a shard `State` this version does not know (a
  newer agent's) loads as `State.FAILED`, as on the wire, so that it never
  passes for a healthy shard;
* a `timedelta` as whole milliseconds (an int), as on the wire; a fraction of
  a millisecond is refused rather than rounded;
* a `datetime` as ISO 8601 with its UTC offset
  (`"2026-10-07T11:51:40.123000+00:00"`), exact to the microsecond; a naive
  one is refused;
* tuples as arrays, `None` as null.

So every value a dump accepts loads back equal to itself. A dump is checked by
loading it: a value of the wrong type (a string `rank`) is refused when it is
written, not when it is read back.

Secrets, the attributes whose wire field the schema marks
`[debug_redact = true]` (`ShardSpec.api_key`; `llmgw_wire.mapping.SECRET_ATTRIBUTES`),
are left out of dumps unless asked for with `include_secrets=True`, and an
error about one shows only its type. A dump without them loads with the secret empty, never
with a placeholder that could pass for a key.

Errors are the library's: `JSONError` (a `DecodeError`) with the path inside
the document, and `EncodeError` for a value JSON cannot hold exactly.
"""

from __future__ import annotations

from typing import TypeVar

from llmgw_wire.codec._json import (
    decode,
    encode,
    json_converter,
    make_json_converter,
    parse_json,
)

__all__ = [
    "decode",
    "encode",
    "json_converter",
    "make_json_converter",
    "parse_json",
]

T = TypeVar("T")
