"""The mapping described as data, compared with a released one, and checked against a schema.

What only this library can report, because it knows the mapping:

* `describe_mapping`: the mapping as data, one entry per pair and per
  attribute, keyed on what each rule carries (its kind, `RuleKind`, its wire
  fields, its presence and range), never on Python class names, so that
  renaming a class is not a change of the mapping; `freeze_mapping` writes it
  beside a released schema's baseline (`make baseline`);
* `mapping_changes` / `compare_mappings`: what changed in the mapping itself
  since a released version (an attribute added, removed or renamed, a rule
  changed: presence, range, conversion), against the frozen description of
  that release (`llmgw_wire/schemas/llmgw_v1-<version>.mapping.json`). Such a
  change alters what services see even when the bytes stay compatible;
* `unmapped_fields`: a field of a paired wire message that no pair maps and
  that is not declared as not carried; both services drop it silently.

`llmgw-wire compat --mapping` prints these; the checker proper
(`llmgw_wire.compat`) reads descriptor sets and nothing else.
"""

from __future__ import annotations

import enum
import json
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from llmgw_wire import mapping
from llmgw_wire.compat import CompatError, Finding
from llmgw_wire.mapping import _rules
from llmgw_wire.mapping._table import mapped_fields

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from google.protobuf.descriptor_pb2 import (
        DescriptorProto,
        FieldDescriptorProto,
        FileDescriptorProto,
        FileDescriptorSet,
    )

    from llmgw_wire.mapping._table import Pair

__all__ = [
    "FIELD_NOT_MAPPED",
    "FORMAT",
    "MappingChange",
    "compare_mappings",
    "describe_mapping",
    "freeze_mapping",
    "mapping_changes",
    "unmapped_fields",
]

#: The rule name of the unmapped-field finding (the library's own, not buf's).
FIELD_NOT_MAPPED = "LLMGW_FIELD_NOT_MAPPED"

#: The version of the description's layout. Format 1 named each rule by its
#: Python class; format 2 by its kind (`RuleKind`).
FORMAT = 2


def _value(value: object) -> object:
    """A rule's field as JSON: classes by name, enum members by name, tuples as lists."""
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, tuple):
        return [_value(item) for item in value]
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return value


def _entry(rule: _rules.Rule) -> dict[str, object]:
    entry: dict[str, object] = {"attr": rule.attr, "rule": rule.rule_kind}
    for field in attrs.fields(type(rule)):
        if field.name != "attr":
            entry[field.name] = _value(getattr(rule, field.name))
    entry["describe"] = rule.describe()
    return entry


def describe_mapping(pairs: Sequence[Pair] | None = None) -> dict[str, Any]:
    """The mapping as data: per pair, its wire message and each attribute's rule.

    Args:
        pairs: the pairs to describe (default: `llmgw_wire.mapping.PAIRS`).
    """
    out = [
        {
            "domain": pair.domain.__name__,
            "wire": pair.wire,
            "embedded": bool(pair.embedded),
            "rules": [_entry(rule) for rule in pair.rules],
        }
        for pair in (mapping.PAIRS if pairs is None else pairs)
    ]
    return {"format": FORMAT, "pairs": out}


def freeze_mapping(path: str | Path, pairs: Sequence[Pair] | None = None) -> None:
    """Write `describe_mapping(pairs)` as JSON to `path` (what `make baseline` ships)."""
    text = json.dumps(describe_mapping(pairs), indent=1, sort_keys=True) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def _frozen(version: str) -> dict[str, Any]:
    name = f"llmgw_v1-{version}.mapping.json"
    entry = files("llmgw_wire").joinpath("schemas").joinpath(name)
    if not entry.is_file():
        raise CompatError(f"the package ships no mapping description of schema {version} ({name})")
    data: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
    return data


def _rule_classes() -> dict[str, type[_rules.Rule]]:
    """The rule classes by their name, as format 1 recorded them."""
    found: dict[str, type[_rules.Rule]] = {}
    todo = [_rules.Rule]
    while todo:
        for sub in todo.pop().__subclasses__():
            found[sub.__name__] = sub
            todo.append(sub)
    return found


def _upgraded(description: dict[str, Any]) -> dict[str, Any]:
    """A description in the current format: format 1's class names read as rule kinds.

    A field a rule has gained since keeps its default, so that it reads as
    unchanged. Format 1 gave every rule a `wire`; a rule not carried by a field
    of its own message now says what it meant under its own name (`source`,
    the enclosing message's field; `message`, the message without one), or
    nothing.
    """
    if description.get("format") != 1:
        return description
    classes = _rule_classes()
    pairs = []
    for pair in description["pairs"]:
        entries = []
        for old in pair["rules"]:
            cls = classes[old["rule"]]
            entry = {**old, "rule": cls.rule_kind}
            names = {field.name for field in attrs.fields(cls)}
            if "wire" in entry and "wire" not in names:
                wire = entry.pop("wire")
                meant = next((name for name in ("source", "message") if name in names), None)
                if meant is not None:
                    entry[meant] = wire
            for field in attrs.fields(cls):
                if field.name not in entry and field.default is not attrs.NOTHING:
                    entry[field.name] = _value(field.default)
            entries.append(entry)
        pairs.append({**pair, "rules": entries})
    return {"format": FORMAT, "pairs": pairs}


@attrs.frozen(order=True)
class MappingChange:
    """One change of the mapping between a released version and this code.

    Attributes:
        domain: the domain model, e.g. `GPU`.
        attr: its attribute, or "" for a change of the whole pair.
        change: `added`, `removed`, `renamed`, `moved` (now read through an
            embedded model, the same rule) or `changed`.
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
    return f"{entry['rule']} rule{wire} ({entry.get('describe', '')})"


def compare_mappings(old: dict[str, Any], new: dict[str, Any]) -> list[MappingChange]:
    """The changes from one mapping description (`describe_mapping`) to another."""
    old, new = _upgraded(old), _upgraded(new)
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
        # One that is now read through an embedded pair (`ShardCommand.replica_id`
        # from its `spec`), with the same rule, moved: it was not removed.
        for attr in list(gone):
            moved = next(
                (
                    (f"{embed['attr']}.{inner['attr']}", inner)
                    for embed in after["rules"]
                    if embed["rule"] == "embedded" and embed.get("domain") in new_pairs
                    for inner in new_pairs[embed["domain"]]["rules"]
                    if {k: v for k, v in inner.items() if k != "attr"}
                    == {k: v for k, v in old_rules[attr].items() if k != "attr"}
                ),
                None,
            )
            if moved is not None:
                gone.remove(attr)
                where, inner = moved
                detail = f"now read from {domain}.{where}, the same {_rule_text(inner)}"
                changes.append(MappingChange(domain, attr, "moved", detail))
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


def mapping_changes(version: str, pairs: Sequence[Pair] | None = None) -> list[MappingChange]:
    """What changed in the mapping since the released schema `version`.

    Raises:
        CompatError: the package ships no mapping description of `version`.
    """
    return compare_mappings(_frozen(version), describe_mapping(pairs))


def unmapped_fields(
    fds: FileDescriptorSet,
    pairs: Sequence[Pair] | None = None,
    not_carried: Iterable[str] | None = None,
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
    pairs = mapping.PAIRS if pairs is None else tuple(pairs)
    declared = set(mapping.NOT_CARRIED if not_carried is None else not_carried)
    covered: dict[str, set[str]] = {}
    for pair in pairs:
        covered.setdefault(pair.wire, set()).update(mapped_fields(pair, pairs))
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


def _fields(
    fds: FileDescriptorSet,
) -> Iterator[tuple[FileDescriptorProto, str, FieldDescriptorProto, tuple[int, ...]]]:
    """(file, message full name, field, source path) of every field, map entries left out."""

    def walk(
        file: FileDescriptorProto, message: DescriptorProto, name: str, path: tuple[int, ...]
    ) -> Iterator[tuple[FileDescriptorProto, str, FieldDescriptorProto, tuple[int, ...]]]:
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


def _span(file: FileDescriptorProto, path: tuple[int, ...]) -> tuple[int, int, int, int]:
    for location in file.source_code_info.location:
        if tuple(location.path) == path:
            span = list(location.span)
            end_line, end_column = (span[0], span[2]) if len(span) == 3 else (span[2], span[3])
            return span[0] + 1, span[1] + 1, end_line + 1, end_column + 1
    return 1, 1, 1, 1
