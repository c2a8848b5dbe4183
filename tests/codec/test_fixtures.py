"""The frozen wire fixtures: HEAD is current, every released version still reads.

Every fixture of every version (`tests/fixtures/HEAD/`, `tests/fixtures/v*/`)
must decode with the current code to the value it was written from, and
re-encode to the same bytes through both wire backends. HEAD must be what the
current code writes: `make fixtures` (`LLMGW_UPDATE_FIXTURES=1 pytest
tests/codec/test_fixtures.py`) regenerates it, and nothing else.
"""

from __future__ import annotations

import os
import shutil
import warnings
from functools import cache
from typing import TYPE_CHECKING, Any

import betterproto2
import pytest
from google.protobuf import descriptor_pb2, json_format

from llmgw_wire import decode
from llmgw_wire._gen.message_pool import default_message_pool
from llmgw_wire.codec._schema import descriptor_set
from llmgw_wire.mapping import PAIRS
from tests.support import (
    ENCODED_FROM,
    EXPECTED,
    FIXTURES,
    HEAD,
    PACKAGE,
    SCHEMA,
    UNSET_BY_DESIGN,
    UPDATE_SWITCH,
    digest,
    envelope_members,
    message_classes,
    message_of,
    read,
    render,
    versions,
    write_head,
)

if TYPE_CHECKING:
    from pathlib import Path

#: The digest of each released fixture directory. A released directory never
#: changes: on a release, copy HEAD to `tests/fixtures/v<version>/` and add
#: the digest this test prints for it.
FROZEN = {
    "v1.0.0": "11fbab4547c7a81d725e4609201e89f5b246547f159352ee7ca346009f673c11",
}

# Under the switch HEAD is rewritten before the cases below are collected, so
# that they read what was just written.
_REWRITTEN = write_head() if os.environ.get(UPDATE_SWITCH) == "1" else None

# The largest field number protobuf allows, which no schema will ever use: a
# stand-in for whatever a newer peer may add.
_UNKNOWN_FIELD = bytes.fromhex("faffffff0f") + b"\x05newer"

_BETTERPROTO2 = {
    url.rpartition("/")[2]: cls for url, cls in default_message_pool.url_to_type.items()
}


@cache
def _fixtures(version: str) -> dict[str, bytes]:
    return read(FIXTURES / version)


@cache
def _classes(version: str) -> dict[str, Any]:
    return message_classes(descriptor_pb2.FileDescriptorSet.FromString(_fixtures(version)[SCHEMA]))


@cache
def _current() -> dict[str, Any]:
    return message_classes(descriptor_set())


def _cases(*, head_only: bool = False) -> list[Any]:
    dirs = [HEAD] if head_only else [HEAD, *versions()]
    return [
        pytest.param(version, name.removesuffix(".binpb"), id=f"{version}/{name}")
        for version in dirs
        for name in _fixtures(version)
        if name.endswith(".binpb") and name != SCHEMA
    ]


def _models(message: str) -> list[type]:
    return [p.domain for p in PAIRS if not p.embedded and p.wire == f"{PACKAGE}.{message}"]


def _expected(version: str, message: str, model: type) -> object:
    """The value a fixture of `version` should decode to.

    HEAD's are the fixture values; a released version's are the same values
    as that version's schema carries them: HEAD's bytes read with it, the
    fields it did not have dropped.
    """
    if version == HEAD:
        return EXPECTED[model]
    old = _classes(version)[message].FromString(render()[f"{message}.binpb"])
    old.DiscardUnknownFields()
    return decode(old.SerializeToString(deterministic=True), model)


def test_head_is_fresh() -> None:
    if _REWRITTEN:
        warnings.warn(f"rewrote tests/fixtures/HEAD: {', '.join(_REWRITTEN)}", stacklevel=1)
    wanted, present = render(), read(FIXTURES / HEAD)
    stale = [
        *(
            f"changed: {n}"
            for n in sorted(wanted.keys() & present.keys())
            if wanted[n] != present[n]
        ),
        *(f"missing: {n}" for n in sorted(wanted.keys() - present.keys())),
        *(f"extra: {n}" for n in sorted(present.keys() - wanted.keys())),
    ]
    assert not stale, (
        f"tests/fixtures/HEAD is not what the current code writes ({'; '.join(stale)})."
        " If the schema, the mapping or tests/support.py changed on purpose,"
        f" regenerate it with `make fixtures` ({UPDATE_SWITCH}=1 pytest"
        " tests/codec/test_fixtures.py), review `git diff tests/fixtures/HEAD`, and commit"
        " it. Released versions (tests/fixtures/v*/) are never regenerated."
    )


def test_every_message_and_envelope_member_has_a_fixture() -> None:
    stems = {name.removesuffix(".binpb") for name in render() if name.endswith(".binpb")}
    for name, cls in _current().items():
        members = envelope_members(cls)
        assert members or name in stems, name
        assert {f"{name}.{member}" for member, _ in members} <= stems, name


def test_every_domain_model_has_an_expected_value() -> None:
    assert {p.domain for p in PAIRS if not p.embedded} == set(EXPECTED)
    assert {_models(name)[0] for name in ENCODED_FROM} <= set(EXPECTED)


def _unpopulated(message: Any) -> set[str]:
    """Fields left at their default in every occurrence of their message within `message`.

    Repeated fields and maps count as populated with two or more entries;
    oneof members are left out (an envelope sets exactly one).
    """
    seen: dict[str, tuple[Any, set[str]]] = {}

    def walk(m: Any) -> None:
        populated = seen.setdefault(m.DESCRIPTOR.full_name, (m.DESCRIPTOR, set()))[1]
        for field, value in m.ListFields():
            if not field.is_repeated:
                populated.add(field.full_name)
                if field.message_type is not None:
                    walk(value)
                continue
            if len(value) >= 2:
                populated.add(field.full_name)
            if field.message_type is None:
                continue
            if field.message_type.GetOptions().map_entry:
                if field.message_type.fields_by_name["value"].message_type is not None:
                    for item in value.values():
                        walk(item)
            else:
                for item in value:
                    walk(item)

    walk(message)
    return {
        field.full_name
        for descriptor, populated in seen.values()
        for field in descriptor.fields
        if field.containing_oneof is None and field.full_name not in populated
    }


@pytest.mark.parametrize(("version", "stem"), _cases(head_only=True))
def test_head_fixture_is_fully_populated(version: str, stem: str) -> None:
    message = message_of(stem)
    data = render()[f"{stem}.binpb"]
    unset = _unpopulated(_current()[message].FromString(data))
    assert unset == {field for (name, field) in UNSET_BY_DESIGN if name == stem}


@pytest.mark.parametrize(("version", "stem"), _cases())
def test_fixture_decodes_to_its_value(version: str, stem: str) -> None:
    message, _, member = stem.partition(".")
    data = _fixtures(version)[f"{stem}.binpb"]
    if member:
        # An envelope wraps exactly the fixture of its member's message.
        envelope = _current()[message].FromString(data)
        assert envelope.WhichOneof("msg") == member
        inner = getattr(envelope, member)
        wrapped = _fixtures(version)[f"{type(inner).DESCRIPTOR.name}.binpb"]
        assert inner.SerializeToString(deterministic=True) == wrapped
        typed = decode(data, _BETTERPROTO2[f"{PACKAGE}.{message}"])
        assert betterproto2.which_one_of(typed, "msg")[0] == member
        return
    models = _models(message)
    assert models, f"{message} has no domain model"
    for model in models:
        assert decode(data, model) == _expected(version, message, model), model.__name__


@pytest.mark.parametrize(("version", "stem"), _cases())
def test_fixture_reencodes_to_the_same_bytes(version: str, stem: str) -> None:
    message = message_of(stem)
    data = _fixtures(version)[f"{stem}.binpb"]
    typed = _BETTERPROTO2[f"{PACKAGE}.{message}"]
    assert bytes(decode(data, typed)) == data
    for classes in (_current(), _classes(version)):
        upb = classes[message]()
        upb.ParseFromString(data)
        assert upb.SerializeToString(deterministic=True) == data
    # A field from a newer peer is kept on the wire message, by both backends.
    newer = data + _UNKNOWN_FIELD
    assert bytes(decode(newer, typed)) == newer
    assert _current()[message].FromString(newer).SerializeToString(deterministic=True) == newer


@pytest.mark.parametrize(("version", "stem"), _cases())
def test_json_fixture_is_the_binary_one(version: str, stem: str) -> None:
    cls = _current()[message_of(stem)]
    text = _fixtures(version)[f"{stem}.json"].decode()
    assert text.endswith("}\n")
    parsed = json_format.Parse(text, cls())
    assert parsed == cls.FromString(_fixtures(version)[f"{stem}.binpb"])


def test_fixture_directories_are_head_or_released() -> None:
    dirs = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert dirs == {HEAD, *versions()}
    assert versions(), "no released version"


def test_released_fixtures_are_frozen() -> None:
    found = {version: digest(_fixtures(version)) for version in versions()}
    assert found == FROZEN, (
        "a released fixture directory differs from the digest it was frozen with;"
        " released fixtures never change (a new release copies HEAD to a new"
        f" directory and adds its digest to FROZEN): {found}"
    )


def test_the_switch_rewrites_head_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, root)
    head = root / HEAD
    (head / "Ack.binpb").write_bytes(b"stale")
    (head / "Retired.binpb").write_bytes(b"of a message since removed")
    # A released version that the current code would write differently
    # stays as it was released.
    released = root / versions()[0]
    (released / "Ack.binpb").write_bytes(b"as released")
    before = {version: read(root / version) for version in versions(root)}

    assert write_head(root) == ["Ack.binpb", "Retired.binpb"]
    assert read(head) == render()
    assert {version: read(root / version) for version in versions(root)} == before
    assert write_head(root) == []
