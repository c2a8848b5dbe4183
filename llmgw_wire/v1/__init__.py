"""The wire layer of schema `llmgw.v1`: betterproto2 message classes.

Generated from `proto/llmgw/v1/` by `make gen` into `llmgw_wire._gen` (the
compiler writes its own package layout) and re-exported here under the
schema's package name. Class names are the compiler's re-casing of the proto
names (`GPU` becomes `Gpu`, `MIGDevice` becomes `MigDevice`); the classes do
not keep the original spelling, which the schema has.

On import, the `repr` (and `str`) of every class with a field the schema
marks `[debug_redact = true]` is made to hide it (`llmgw_wire.v1.redaction`):
`StartShard(shard_id='s0', api_key=<secret str, not shown>)`. Serialisations
asked for on purpose (`bytes(message)`, `to_dict`, `to_json`) carry the value.

`FromString` and `parse` are betterproto2's own parser, lenient and quadratic
in unknown fields: bytes from a peer go through `llmgw_wire.decode(data,
v1.X)` (upb, within its limits), and a grpclib service takes
`llmgw_wire.stream.grpclib_codec.WireCodec`, which does.
"""

from llmgw_wire import _on_import
from llmgw_wire._gen.llmgw.v1 import *  # noqa: F403
from llmgw_wire._gen.llmgw.v1 import __all__ as __all__
from llmgw_wire._gen.message_pool import default_message_pool as _pool
from llmgw_wire.v1.redaction import SECRET_FIELDS as _SECRET_FIELDS
from llmgw_wire.v1.redaction import redact_reprs as _redact_reprs

_redact_reprs(
    {url.removeprefix("type.googleapis.com/"): cls for url, cls in _pool.url_to_type.items()},
    _SECRET_FIELDS,
)

_on_import.imported(__name__)
