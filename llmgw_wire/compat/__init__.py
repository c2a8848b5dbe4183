"""The schema breaking-change checker, after buf's WIRE and WIRE_JSON rules.

Agents and control planes are upgraded one at a time, so for months a new
control plane talks to old agents and the reverse. `check` compares two
versions of the schema, each a `FileDescriptorSet`, and reports every change
that would make the two sides misread each other: on the wire (category
`WIRE`), or on the wire and in JSON (`WIRE_JSON`, the default).

Rule names, what each rule looks at and which category holds it are buf's
(`buf breaking`, configuration v2), so that a finding can be looked up in
buf's documentation. Elements are paired the way buf pairs them: files by
path, messages (map entries included), enums and services by full name,
fields by number, extensions by extended message and number, enum values by
number, RPCs by name. Every finding points into the new schema, at the
element that changed or, for a deletion, at the message, enum or file it was
deleted from. Where the checker deliberately differs from buf, `deviations()`
says so, as data.

The checker reads descriptor sets only: it needs neither the domain models
nor the mapping (`llmgw-wire compat --mapping` adds the reports that do, from
the command line's side).
"""

from __future__ import annotations

from llmgw_wire.compat._check import check
from llmgw_wire.compat._config import Config, find_config, load_config, path_under
from llmgw_wire.compat._deviations import Deviation, deviations
from llmgw_wire.compat._files import read_at_most
from llmgw_wire.compat._formats import FORMATS, render
from llmgw_wire.compat._model import CompatError, Finding, escape_text
from llmgw_wire.compat._rules import CATEGORIES, RULES
from llmgw_wire.compat._sources import (
    baseline,
    baseline_versions,
    compile_protos,
    find_proto_root,
    from_git,
    from_git_input,
    parse_git_input,
    read_descriptor_set,
)

__all__ = [
    "CATEGORIES",
    "FORMATS",
    "RULES",
    "CompatError",
    "Config",
    "Deviation",
    "Finding",
    "baseline",
    "baseline_versions",
    "check",
    "compile_protos",
    "deviations",
    "escape_text",
    "find_config",
    "find_proto_root",
    "from_git",
    "from_git_input",
    "load_config",
    "parse_git_input",
    "path_under",
    "read_at_most",
    "read_descriptor_set",
    "render",
]
