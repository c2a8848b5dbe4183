"""The reports only this library can make, because it knows the mapping.

The checker proper (`llmgw_wire.compat`) reads descriptor sets and nothing
else (an import-linter contract holds it). This module sits beside the
command line, above both, is imported only by `llmgw-wire compat --mapping`,
and brings in the mapping (`llmgw_wire.mapping.PAIRS`):

* `unmapped_fields`: a field of a wire message that a pair carries, which no
  pair maps and which is not declared as not carried. Such a field is
  silently dropped by both services, whatever the wire says.
* `mapping_changes`: what changed in the mapping itself since a released
  version (an attribute added, removed or renamed, a rule changed: presence,
  range, conversion), against the frozen description of that release's
  mapping shipped beside its baseline (`llmgw_wire/schemas/llmgw_v1-<version>.mapping.json`).
  Such a change alters what services see even when the bytes stay compatible.

The description is data made from `PAIRS` by `describe_mapping`, one entry
per pair and per attribute; `make baseline` freezes it with the schema.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import attrs

from llmgw_wire.compat import CompatError, Finding

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from pathlib import Path

__all__ = [
    "FIELD_NOT_MAPPED",
    "MappingChange",
    "describe_mapping",
    "freeze_mapping",
    "mapping_changes",
    "render_changes",
    "unmapped_fields",
]

#: The rule name of the unmapped-field finding (the library's own, not buf's).
FIELD_NOT_MAPPED = "LLMGW_FIELD_NOT_MAPPED"

# Rule kinds (class names of the mapping's vocabulary) that name no wire field
# of their pair's message.
_NO_WIRE_FIELD = frozenset({"FromContext", "NotCarried", "Constant"})


def _pairs(pairs: Sequence[Any] | None) -> Sequence[Any]:
    if pairs is not None:
        return pairs
    from llmgw_wire.mapping import PAIRS

    return PAIRS


def _value(value: object) -> object:
    """A rule's field as JSON: classes by name, enums by name, tuples as lists."""
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, tuple):
        return [_value(item) for item in value]
    name = getattr(value, "name", None)
    if isinstance(name, str) and type(value).__module__ != "builtins":
        return f"{type(value).__name__}.{name}"
    return value


def describe_mapping(pairs: Sequence[Any] | None = None) -> dict[str, Any]:
    """The mapping as data: per pair, its wire message and each attribute's rule.

    Args:
        pairs: the pairs to describe (default: `llmgw_wire.mapping.PAIRS`).
    """
    out = []
    for pair in _pairs(pairs):
        rules = []
        for rule in pair.rules:
            entry: dict[str, object] = {"attr": rule.attr, "rule": type(rule).__name__}
            for field in attrs.fields(type(rule)):
                if field.name != "attr":
                    entry[field.name] = _value(getattr(rule, field.name))
            entry["describe"] = rule.describe()
            rules.append(entry)
        out.append(
            {
                "domain": pair.domain.__name__,
                "wire": pair.wire,
                "embedded": bool(pair.embedded),
                "rules": rules,
            }
        )
    return {"format": 1, "pairs": out}


def freeze_mapping(path: str | Path, pairs: Sequence[Any] | None = None) -> None:
    """Write `describe_mapping(pairs)` as JSON to `path` (what `make baseline` ships)."""
    from pathlib import Path as _Path

    text = json.dumps(describe_mapping(pairs), indent=1, sort_keys=True) + "\n"
    _Path(path).write_text(text, encoding="utf-8")


def _frozen(version: str) -> dict[str, Any]:
    name = f"llmgw_v1-{version}.mapping.json"
    entry = files("llmgw_wire").joinpath("schemas").joinpath(name)
    if not entry.is_file():
        raise CompatError(f"the package ships no mapping description of schema {version} ({name})")
    data: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
    return data


@attrs.frozen(order=True)
class MappingChange:
    """One change of the mapping between a released version and this code.

    Attributes:
        domain: the domain model, e.g. `GPU`.
        attr: its attribute, or "" for a change of the whole pair.
        change: `added`, `removed`, `renamed` or `changed`.
        detail: what changed, as a sentence.
    """

    domain: str
    attr: str
    change: str
    detail: str

    def __str__(self) -> str:
        """`mapping: Domain.attr: change: detail`."""
        where = f"{self.domain}.{self.attr}" if self.attr else self.domain
        return f"mapping: {where}: {self.change}: {self.detail}"


def _rule_text(entry: dict[str, Any]) -> str:
    wire = f" from wire field {entry['wire']!r}" if entry.get("wire") else ""
    return f"{entry['rule']}{wire} ({entry.get('describe', '')})"


def compare_mappings(old: dict[str, Any], new: dict[str, Any]) -> list[MappingChange]:
    """The changes from one mapping description (`describe_mapping`) to another."""
    changes: list[MappingChange] = []
    old_pairs = {pair["domain"]: pair for pair in old["pairs"]}
    new_pairs = {pair["domain"]: pair for pair in new["pairs"]}
    for domain in sorted(old_pairs.keys() - new_pairs.keys()):
        wire = old_pairs[domain]["wire"]
        changes.append(MappingChange(domain, "", "removed", f"no longer carried by {wire}"))
    for domain in sorted(new_pairs.keys() - old_pairs.keys()):
        wire = new_pairs[domain]["wire"]
        changes.append(MappingChange(domain, "", "added", f"now carried by {wire}"))
    for domain in sorted(old_pairs.keys() & new_pairs.keys()):
        before, after = old_pairs[domain], new_pairs[domain]
        if before["wire"] != after["wire"]:
            changes.append(
                MappingChange(
                    domain, "", "changed", f"carried by {after['wire']}, was {before['wire']}"
                )
            )
        old_rules = {rule["attr"]: rule for rule in before["rules"]}
        new_rules = {rule["attr"]: rule for rule in after["rules"]}
        gone = sorted(old_rules.keys() - new_rules.keys())
        came = sorted(new_rules.keys() - old_rules.keys())
        # An attribute that vanished while another appeared on the same wire
        # field with the same rule is a rename.
        for attr in list(gone):
            twin = next(
                (
                    other
                    for other in came
                    if {k: v for k, v in new_rules[other].items() if k != "attr"}
                    == {k: v for k, v in old_rules[attr].items() if k != "attr"}
                ),
                None,
            )
            if twin is not None:
                gone.remove(attr)
                came.remove(twin)
                changes.append(
                    MappingChange(domain, twin, "renamed", f"was {domain}.{attr}, same rule")
                )
        changes.extend(
            MappingChange(domain, attr, "removed", f"was {_rule_text(old_rules[attr])}")
            for attr in gone
        )
        changes.extend(
            MappingChange(domain, attr, "added", _rule_text(new_rules[attr])) for attr in came
        )
        for attr in sorted(old_rules.keys() & new_rules.keys()):
            if old_rules[attr] != new_rules[attr]:
                keys = sorted(
                    key
                    for key in old_rules[attr].keys() | new_rules[attr].keys()
                    if key != "describe" and old_rules[attr].get(key) != new_rules[attr].get(key)
                )
                what = ", ".join(
                    f"{key} {old_rules[attr].get(key)!r} -> {new_rules[attr].get(key)!r}"
                    for key in keys
                ) or (f"{old_rules[attr]['describe']!r} -> {new_rules[attr]['describe']!r}")
                changes.append(MappingChange(domain, attr, "changed", what))
    return sorted(changes)


def mapping_changes(version: str, pairs: Sequence[Any] | None = None) -> list[MappingChange]:
    """What changed in the mapping since the released schema `version`.

    Raises:
        CompatError: the package ships no mapping description of `version`.
    """
    return compare_mappings(_frozen(version), describe_mapping(pairs))


def _wire_fields(pair: Any, by_domain: dict[type, Any]) -> set[str]:
    """The wire fields of its message that `pair` maps, nested embedded pairs included."""
    fields: set[str] = set()
    for rule in pair.rules:
        kind = type(rule).__name__
        if kind == "Embedded":
            inner = by_domain.get(rule.domain)
            if inner is not None:
                fields |= _wire_fields(inner, by_domain)
            if getattr(rule, "present_if", ""):
                fields.add(rule.present_if)
        elif kind not in _NO_WIRE_FIELD and rule.wire:
            fields.add(rule.wire)
    return fields


def unmapped_fields(
    fds: Any, pairs: Sequence[Any] | None = None, not_carried: Iterable[str] | None = None
) -> list[Finding]:
    """The fields of paired wire messages that no pair maps and none declares not carried.

    A message counts as paired when a pair names it as its wire message;
    the others (the stream's envelopes, whose members are paired messages)
    are not looked at.

    Args:
        fds: the schema, a `FileDescriptorSet` with source info.
        pairs: the mapping (default: `llmgw_wire.mapping.PAIRS`).
        not_carried: full names of wire fields (`llmgw.v1.GPU.power_watts`)
            deliberately not carried (default: the mapping's `NOT_CARRIED`).

    Returns:
        One `LLMGW_FIELD_NOT_MAPPED` finding per such field, at the field.
    """
    pairs = _pairs(pairs)
    if not_carried is None:
        from llmgw_wire.mapping import NOT_CARRIED

        not_carried = NOT_CARRIED
    declared = set(not_carried)
    by_domain = {pair.domain: pair for pair in pairs}
    covered: dict[str, set[str]] = {}
    for pair in pairs:
        covered.setdefault(pair.wire, set()).update(_wire_fields(pair, by_domain))
    findings = []
    for file, message, field, path in _fields(fds):
        if message not in covered or f"{message}.{field.name}" in declared:
            continue
        if field.name not in covered[message]:
            line, column, end_line, end_column = _span(file, path)
            findings.append(
                Finding(
                    file.name,
                    line,
                    column,
                    FIELD_NOT_MAPPED,
                    f"field {field.number} {field.name!r} of message {message} is "
                    "mapped by no pair of llmgw_wire.mapping and not declared as not carried; "
                    "both services drop it silently.",
                    end_line=end_line,
                    end_column=end_column,
                )
            )
    return sorted(findings)


# descriptor.proto's field numbers, for source paths.
_FILE_MESSAGE, _MESSAGE_FIELD, _MESSAGE_NESTED = 4, 2, 3


def _fields(fds: Any) -> Iterator[tuple[Any, str, Any, tuple[int, ...]]]:
    """(file, message full name, field, source path) of every field, map entries left out."""

    def walk(file: Any, message: Any, name: str, path: tuple[int, ...]) -> Iterator[Any]:
        if message.options.map_entry:
            return
        for i, field in enumerate(message.field):
            yield file, name, field, (*path, _MESSAGE_FIELD, i)
        for i, nested in enumerate(message.nested_type):
            yield from walk(file, nested, f"{name}.{nested.name}", (*path, _MESSAGE_NESTED, i))

    for file in fds.file:
        scope = f"{file.package}." if file.package else ""
        for i, message in enumerate(file.message_type):
            yield from walk(file, message, scope + message.name, (_FILE_MESSAGE, i))


def _span(file: Any, path: tuple[int, ...]) -> tuple[int, int, int, int]:
    for location in file.source_code_info.location:
        if tuple(location.path) == path:
            span = list(location.span)
            end_line, end_column = (span[0], span[2]) if len(span) == 3 else (span[2], span[3])
            return span[0] + 1, span[1] + 1, end_line + 1, end_column + 1
    return 1, 1, 1, 1


def render_changes(changes: Sequence[MappingChange], error_format: str) -> str:
    """The mapping changes as notices: text lines, JSON lines, or GitHub notices."""
    if error_format == "json":
        return "".join(
            json.dumps(
                {"type": "LLMGW_MAPPING_CHANGED", **attrs.asdict(change)}, separators=(",", ":")
            )
            + "\n"
            for change in changes
        )
    if error_format == "github-actions":
        return "".join(
            f"::notice title=LLMGW_MAPPING_CHANGED::{str(change).replace('%', '%25')}\n"
            for change in changes
        )
    return "".join(f"{change}\n" for change in changes)
