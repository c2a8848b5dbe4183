"""`check`: every rule of the chosen categories over every pair of elements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmgw_wire.compat._config import Config
from llmgw_wire.compat._model import CompatError, Finding, index
from llmgw_wire.compat._rules import CATEGORIES, REGISTRY, ElementPair

if TYPE_CHECKING:
    from google.protobuf.descriptor_pb2 import FileDescriptorSet

__all__ = ["check"]


def check(
    old: FileDescriptorSet,
    new: FileDescriptorSet,
    *,
    category: str = "WIRE_JSON",
    config: Config | None = None,
) -> list[Finding]:
    """Compare two versions of a schema and list the changes that break peers.

    Args:
        old: the schema peers may still run, as a `FileDescriptorSet`.
        new: the schema being checked, as a `FileDescriptorSet` built with
            source info (else every finding points at line 1 of its file).
        category: `"WIRE"` or `"WIRE_JSON"`, the rules applied when `config`
            names none (`use`).
        config: which rules apply, and which findings are accepted
            (`use`, `except`, `ignore`, `ignore_only`, as in buf's `breaking:`).

    Returns:
        The findings, sorted by file, line, column and rule; empty when the
        new schema is compatible.

    Raises:
        CompatError: `category` is not one of `CATEGORIES`, or a descriptor
            set lacks a file that another imports.
    """
    if category not in CATEGORIES:
        raise CompatError(f"Expected a category in {', '.join(CATEGORIES)}, got {category!r}")
    config = config or Config()
    old_schema = index(old.file, "the old schema")
    new_schema = index(new.file, "the new schema")
    findings = []
    for name in config.rules(category):
        rule = REGISTRY[name]
        new_elements = new_schema.elements[rule.kind]
        for key, old_node in old_schema.elements[rule.kind].items():
            new_node = new_elements.get(key)
            if new_node is None:
                continue
            for hit in rule.check(ElementPair(old_node, new_node, old_schema, new_schema)):
                line, column, end_line, end_column = new_schema.locate(hit.node, hit.where)
                finding = Finding(
                    hit.node.file,
                    line,
                    column,
                    rule.name,
                    hit.text,
                    end_line=end_line,
                    end_column=end_column,
                )
                if not config.ignores(finding):
                    findings.append(finding)
    return sorted(findings)
