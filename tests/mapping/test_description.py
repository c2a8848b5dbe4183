"""The reports only this library can make: unmapped schema fields, and mapping changes.

Both run on real edits: of the repository's schema (a field added to
`llmgw.v1.GPU` that no pair carries), and of the mapping table (a copy of
`PAIRS` with an attribute renamed, one removed, a presence and a range rule
changed), against the frozen description of a release.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest

from llmgw_wire import compat
from llmgw_wire._cli import main
from llmgw_wire.mapping import PAIRS
from llmgw_wire.mapping import _description as description

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def edited_schema(tmp_path: Path) -> Path:
    proto = tmp_path / "proto"
    shutil.copytree(REPO / "proto", proto)
    node = proto / "llmgw" / "v1" / "node.proto"
    text = node.read_text()
    assert text.count("message GPU {") == 1
    node.write_text(text.replace("message GPU {", "message GPU {\n  int32 power_watts = 99;", 1))
    return proto


def test_the_repository_schema_is_fully_mapped() -> None:
    assert description.unmapped_fields(compat.compile_protos(REPO / "proto")) == []


def test_a_field_no_pair_carries_is_a_finding(edited_schema: Path) -> None:
    fds = compat.compile_protos(edited_schema)
    [finding] = description.unmapped_fields(fds)
    assert (finding.path, finding.rule) == ("llmgw/v1/node.proto", "LLMGW_FIELD_NOT_MAPPED")
    line = (edited_schema / finding.path).read_text().splitlines()[finding.line - 1]
    assert line.strip() == "int32 power_watts = 99;"
    assert finding.message == (
        "field 99 'power_watts' of message llmgw.v1.GPU is mapped by no pair of "
        "llmgw_wire.mapping and not declared as not carried; both services drop it silently."
    )
    # Declared as not carried, it is no finding; nor is it a break for buf's rules.
    assert description.unmapped_fields(fds, not_carried=["llmgw.v1.GPU.power_watts"]) == []
    assert compat.check(compat.baseline(), fds) == []


def test_the_command_reports_it_with_mapping(
    edited_schema: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compat", str(edited_schema)]) == 0
    capsys.readouterr()
    assert main(["compat", str(edited_schema), "--mapping"]) == 1
    out = capsys.readouterr().out
    assert "node.proto:" in out
    assert ": LLMGW_FIELD_NOT_MAPPED: field 99 'power_watts'" in out


def edited_pairs() -> tuple[Any, ...]:
    out = []
    for pair in PAIRS:
        rules: list[Any] = list(pair.rules)
        if pair.domain.__name__ == "GPU":
            # index renamed to idx (same wire field, same rule); numa_node removed;
            # mig no longer optional (presence rule changed).
            rules = [
                attrs.evolve(r, attr="idx") if r.attr == "index" else r
                for r in rules
                if r.attr != "numa_node"
            ]
            rules = [attrs.evolve(r, optional=False) if r.attr == "mig" else r for r in rules]
        if pair.domain.__name__ == "Storage":
            # free_bytes read as int32: a range rule changed.
            rules = [attrs.evolve(r, kind="int32") if r.attr == "free_bytes" else r for r in rules]
        out.append(attrs.evolve(pair, rules=tuple(rules)))
    return tuple(out)


def test_a_changed_table_is_reported_against_the_description() -> None:
    before = description.describe_mapping(PAIRS)
    after = description.describe_mapping(edited_pairs())
    changes = description.compare_mappings(before, after)
    assert [str(c) for c in changes] == [
        "mapping: GPU.idx: renamed: was GPU.index, same rule",
        "mapping: GPU.mig: changed: optional True -> False",
        "mapping: GPU.numa_node: removed: was scalar rule from wire field 'numa_node' "
        "(int32; an int outside [-2147483648, 2147483647] is an error)",
        "mapping: Storage.free_bytes: changed: kind 'int64' -> 'int32'",
    ]
    assert description.compare_mappings(before, before) == []


def test_the_description_is_json_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    description.freeze_mapping(path)
    data = json.loads(path.read_text())
    assert data == json.loads(json.dumps(description.describe_mapping()))
    gpu = next(pair for pair in data["pairs"] if pair["domain"] == "GPU")
    assert gpu["wire"] == "llmgw.v1.GPU"
    assert {"attr": "mig", "rule": "message", "wire": "mig", "domain": "MIGDevice"}.items() <= (
        next(rule for rule in gpu["rules"] if rule["attr"] == "mig").items()
    )


def test_changes_since_a_release_come_from_its_frozen_description() -> None:
    version = compat.baseline_versions()[-1]
    frozen = json.loads(
        (REPO / "llmgw_wire" / "schemas" / f"llmgw_v1-{version}.mapping.json").read_text()
    )
    assert description.mapping_changes(version) == description.compare_mappings(
        frozen, description.describe_mapping()
    )
    with pytest.raises(compat.CompatError, match=r"ships no mapping description of schema 0\.1\.0"):
        description.mapping_changes("0.1.0")


def test_the_command_lists_mapping_changes_as_notices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("llmgw_wire.mapping.PAIRS", edited_pairs())
    monkeypatch.chdir(REPO)
    # numa_node no longer mapped is a finding; the changes are notices.
    assert main(["compat", "--mapping"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        line for line in out.splitlines() if "LLMGW_FIELD_NOT_MAPPED: field 7 'numa_node'" in line
    ]
    assert len(out.splitlines()) == 1
    assert "mapping: GPU.idx: renamed: was GPU.index, same rule\n" in err
    assert main(["compat", "--mapping", "--error-format", "json"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {
        "type": "LLMGW_MAPPING_CHANGED",
        "domain": "Storage",
        "attr": "free_bytes",
        "change": "changed",
        "detail": "kind 'int64' -> 'int32'",
    } in lines
    assert main(["compat", "--mapping", "--error-format", "github-actions"]) == 1
    assert (
        "::notice title=LLMGW_MAPPING_CHANGED::mapping: GPU.mig: changed: optional True -> False\n"
        in capsys.readouterr().out
    )
