"""The wire layer of schema `llmgw.v1`: betterproto2 message classes and grpclib stubs.

Generated from `proto/llmgw/v1/` by `make gen` into `llmgw_wire._gen` (the
compiler writes its own package layout) and re-exported here under the
schema's package name. Class names are the compiler's re-casing of the proto
names (`GPU` becomes `Gpu`, `MIGDevice` becomes `MigDevice`); the classes do
not keep the original spelling, which the schema has.
"""

from llmgw_wire._gen.llmgw.v1 import *  # noqa: F403
from llmgw_wire._gen.llmgw.v1 import __all__ as __all__
