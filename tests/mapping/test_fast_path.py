"""The fast path (upb, behind `encode`/`decode`) is the betterproto2 path, only faster.

`llmgw_wire.testing.laws` already holds that both backends write bytes that read back
the same for every domain value (`backends_agree`). This adds what domain
values cannot reach:

* any wire message at all, not only those a domain value encodes to (fields
  the mapping normalises away, unknown state numbers, durations beyond
  `timedelta`): `decode(b, T)` gives what `converter.structure(v1.X.parse(b),
  T)` gives, or both refuse with the same `DecodeError`;
* any one field of a domain value made unencodable: `encode` and the
  converter refuse it with the same `EncodeError`;
* map order: equal values encode to equal bytes whatever order their dicts
  were filled in;
* hostile bytes: refused with `DecodeError` for a domain model and for its
  `llmgw_wire.v1` class alike.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping
from sys import getsizeof
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import given
from hypothesis import strategies as st

from llmgw_wire import (
    GPU,
    DecodeError,
    EncodeError,
    Node,
    Registration,
    ShardCommand,
    converter,
    decode,
    encode,
    v1,
)
from llmgw_wire.codec import wire_class
from llmgw_wire.codec._binary import compiled_upb
from llmgw_wire.codec._guard import reaches_map as _reaches_map
from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.mapping import pair_for
from llmgw_wire.mapping._compiler import INTERNED_MAX, _positional, _settable
from llmgw_wire.mapping._rules import Embedded, Message, Messages, Repeated, Scalar
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.laws import MODELS
from llmgw_wire.testing.sample import sample_command, sample_registration
from tests.support import LEN, ld, tag, varint, vi

if TYPE_CHECKING:
    from tests.support import WireBackend

REGISTER: Any = CLASSES["llmgw.v1.Register"]
START_SHARD: Any = CLASSES["llmgw.v1.StartShard"]


def ids(cls: type) -> str:
    return cls.__name__


# --- any wire message decodes the same both ways -------------------------------------

_INTS = {
    FieldDescriptor.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    # Open enums: the known states, and any int32 a newer peer may send.
    FieldDescriptor.TYPE_ENUM: st.one_of(
        st.integers(1, 7), st.integers(0, 9), st.integers(-(2**31), 2**31 - 1)
    ),
}


def _scalars(field: Any) -> st.SearchStrategy[Any]:
    if field.type in _INTS:
        return _INTS[field.type]
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    assert field.type == FieldDescriptor.TYPE_STRING, field.full_name
    return st.text(max_size=6)


def _is_map(field: Any) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _fields(descriptor: Any) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments for any message of `descriptor`: each field set or not."""
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if _is_map(field):
            optional[field.name] = st.dictionaries(
                st.text(max_size=4), st.text(max_size=4), max_size=3
            )
        elif field.message_type is not None:
            sub = _sub_fields(field.message_type)
            optional[field.name] = st.lists(sub, max_size=2) if field.is_repeated else sub
        elif field.is_repeated:
            optional[field.name] = st.lists(_scalars(field), max_size=3)
        else:
            optional[field.name] = _scalars(field)
    return st.fixed_dictionaries({}, optional=optional)


def _sub_fields(descriptor: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.deferred(lambda: _fields(descriptor))


def any_message_bytes(model: type) -> st.SearchStrategy[bytes]:
    """The bytes of any message of `model`'s wire type, as Google's runtime writes them."""
    cls: Any = CLASSES[pair_for(model).wire]
    return _fields(cls.DESCRIPTOR).map(lambda kwargs: cls(**kwargs).SerializeToString())


def _outcome(read: Any) -> object:
    try:
        return read()
    except DecodeError as error:
        return ("DecodeError", str(error))


@pytest.mark.parametrize("model", MODELS, ids=ids)
@given(data=st.data())
def test_any_wire_message_decodes_as_betterproto2_reads_it(model: type, data: Any) -> None:
    raw = data.draw(any_message_bytes(model))
    typed = wire_class(model)
    fast = _outcome(lambda: decode(raw, model))
    slow = _outcome(lambda: converter.structure(typed.parse(raw), model))
    assert fast == slow


# --- any unencodable field is refused the same both ways --------------------------------

BAD: dict[str, list[object]] = {
    "int32": [2**31, -(2**31) - 1, True, 1.5, "1", None],
    "int64": [2**63, -(2**63) - 1, False, 2.0, "1"],
    "string": [7, None, b"bytes", 1.5],
    "bool": [1, 0, None, "true"],
}


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], str]]:
    """Every scalar of a domain value, as (path, wire kind)."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    for rule in pair_for(type(value)).rules:
        sub = getattr(value, rule.attr)
        here = (*path, rule.attr)
        if isinstance(rule, Scalar):
            out.append((here, rule.kind))
        elif isinstance(rule, Repeated):
            out.extend(((*here, i), rule.kind) for i in range(len(sub)))
        elif isinstance(rule, (Message, Embedded)) and sub is not None:
            out.extend(leaves(sub, here))
        elif isinstance(rule, Messages):
            for i, item in enumerate(sub):
                out.extend(leaves(item, (*here, i)))
    return out


def replace(value: Any, path: tuple[str | int, ...], new: object) -> Any:
    head, *rest = path
    if isinstance(head, int):
        items = list(value)
        items[head] = replace(items[head], tuple(rest), new) if rest else new
        return tuple(items)
    inner = replace(getattr(value, head), tuple(rest), new) if rest else new
    return attrs.evolve(value, **{head: inner})


@pytest.mark.parametrize("model", MODELS, ids=ids)
@given(data=st.data())
def test_an_unencodable_field_is_refused_the_same_both_ways(model: type, data: Any) -> None:
    value = data.draw(lst.domain_values(model))
    scalars = leaves(value)
    if not scalars:
        return
    path, kind = data.draw(st.sampled_from(scalars))
    bad = replace(value, path, data.draw(st.sampled_from(BAD[kind])))
    with pytest.raises(EncodeError) as fast:
        encode(bad)
    with pytest.raises(EncodeError) as typed:
        converter.unstructure(bad)
    assert str(fast.value) == str(typed.value)
    assert fast.value.path[: len(path)] == path


# --- map order -----------------------------------------------------------------------


def _descriptor(model: type) -> Any:
    cls: Any = CLASSES[pair_for(model).wire]
    return cls.DESCRIPTOR


def _reversed_maps(value: Any) -> Any:
    """The same value with every dict filled in the opposite order."""
    changes: dict[str, object] = {}
    for field in attrs.fields(type(value)):
        sub = getattr(value, field.name)
        if isinstance(sub, Mapping):
            changes[field.name] = dict(reversed(list(sub.items())))
        elif attrs.has(type(sub)):
            changes[field.name] = _reversed_maps(sub)
        elif isinstance(sub, tuple) and sub and attrs.has(type(sub[0])):
            changes[field.name] = tuple(_reversed_maps(item) for item in sub)
    return attrs.evolve(value, **changes)


WITH_MAPS = [m for m in MODELS if _reaches_map(_descriptor(m))]


def test_the_models_with_maps() -> None:
    """Only these are serialised deterministically; the others have no order to fix."""
    assert {m.__name__ for m in WITH_MAPS} == {
        "GPU",
        "Node",
        "Registration",
        "Profile",
        "ShardSpec",
        "ShardCommand",
    }


@pytest.mark.parametrize("model", WITH_MAPS, ids=ids)
@given(data=st.data())
def test_map_order_does_not_change_the_bytes(model: type, data: Any) -> None:
    value = data.draw(lst.domain_values(model))
    assert encode(_reversed_maps(value)) == encode(value)


def test_map_entries_go_out_sorted_by_key() -> None:
    keys = [f"label-{c}" for c in "hgfedcba"]
    node = attrs.evolve(sample_registration().node, labels=dict.fromkeys(keys, "x"))
    raw = encode(node)
    offsets = [raw.index(key.encode()) for key in sorted(keys)]
    assert offsets == sorted(offsets)


# --- presence of required sub-messages ---------------------------------------------------


def test_a_required_sub_message_is_sent_even_when_empty() -> None:
    register = REGISTER.FromString(encode(Node()))
    assert register.HasField("host")
    assert register.HasField("imex")
    assert v1.Register.parse(encode(Node())).host == v1.Host()
    start = START_SHARD.FromString(encode(ShardCommand()))
    assert start.HasField("profile")


def test_an_absent_required_sub_message_decodes_as_an_immutable_zero_value(
    backend: WireBackend,
) -> None:
    """A shared default is safe only because nothing in it can be changed in place."""
    value = backend.decode(b"", ShardCommand)
    assert value.spec.profile.env == {}
    with pytest.raises(TypeError):
        value.spec.profile.env["changed"] = "yes"
    assert hash(value) == hash(backend.decode(b"", ShardCommand))


def test_domain_values_are_built_positionally_only_when_the_order_is_theirs() -> None:
    @attrs.frozen
    class Plain:
        a: int = 0
        b: str = ""

    @attrs.frozen
    class KeywordOnly:
        a: int = attrs.field(default=0, kw_only=True)

    assert _positional(Plain, ["a", "b"])
    assert not _positional(Plain, ["b", "a"])
    assert not _positional(KeywordOnly, ["a"])


# --- values built slot by slot -----------------------------------------------------------


def _rebuilt(value: Any) -> Any:
    """`value` built again through attrs' own `__init__`, all the way down."""
    if isinstance(value, tuple):
        return tuple(_rebuilt(item) for item in value)
    if not attrs.has(type(value)):
        return value
    fields = attrs.fields(type(value))
    return type(value)(*(_rebuilt(getattr(value, f.name)) for f in fields))


def _every_value(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, tuple):
        for item in value:
            yield from _every_value(item)
    elif attrs.has(type(value)):
        for f in attrs.fields(type(value)):
            yield from _every_value(getattr(value, f.name))


@pytest.mark.parametrize("model", MODELS, ids=ids)
@given(data=st.data())
def test_decoded_values_are_those_attrs_builds(model: type, data: Any) -> None:
    """The structure functions set slots directly: nothing may tell their values apart."""
    value = data.draw(lst.domain_values(model))
    both: tuple[Any, Any] = (
        decode(encode(value), model),
        converter.structure(converter.unstructure(value), model),
    )
    for decoded in both:
        built = _rebuilt(decoded)
        assert decoded == built
        assert built == decoded
        assert hash(decoded) == hash(built)
        assert repr(decoded) == repr(built)
        assert attrs.evolve(decoded) == built
        assert pickle.loads(pickle.dumps(decoded)) == built
        for part, same in zip(_every_value(decoded), _every_value(built), strict=True):
            assert type(part) is type(same)
            if attrs.has(type(part)):
                # Every slot set, none left empty: reading each attribute works.
                assert attrs.asdict(part, recurse=False) == attrs.asdict(same, recurse=False)


def test_only_plain_attrs_classes_are_built_slot_by_slot() -> None:
    """A validator, a hook or a cached hash keeps attrs' own `__init__`."""

    @attrs.frozen
    class Plain:
        a: int = 0

    @attrs.frozen
    class Validated:
        a: int = attrs.field(default=0, validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class Hooked:
        a: int = 0

        def __attrs_post_init__(self) -> None:
            pass

    @attrs.frozen(cache_hash=True)
    class CachedHash:
        a: int = 0

    @attrs.define(frozen=True, slots=False)
    class NoSlots:
        a: int = 0

    assert _settable(Plain)
    for cls in (Validated, Hooked, CachedHash, NoSlots):
        assert not _settable(cls), cls
    assert all(_settable(model) for model in MODELS)


# --- hostile bytes ---------------------------------------------------------------------


def _valid() -> bytes:
    return encode(sample_registration())


HOSTILE = {
    "truncated in a string": _valid()[: _valid().index(b"gpu-node-017") + 4],
    "truncated in a sub-message": _valid()[:-3],
    "wire type 7": _valid() + tag(1, 7),
    "a length past the end": _valid() + tag(2, LEN) + varint(1000) + b"short",
    "invalid UTF-8": ld(1, b"\xff\xfe"),
    "a varint of 11 bytes": vi(10, 1)[:1] + b"\xff" * 10 + b"\x01",
}


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_bytes_are_refused_for_the_domain_and_the_wire_class(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(raw, Registration)
    with pytest.raises(DecodeError):
        decode(raw, v1.Register)


def test_a_truncated_command_is_refused_both_ways() -> None:
    raw = encode(sample_command())[:-5]
    with pytest.raises(DecodeError):
        decode(raw, ShardCommand)
    with pytest.raises(DecodeError):
        decode(raw, v1.StartShard)


def test_every_generated_builder_has_a_file_name_of_its_own() -> None:
    # As cattrs does: a traceback names the one generated function, and shows its line.
    import linecache

    from llmgw_wire.codec._from_upb import _builders

    functions = [fn for pair in _builders().values() for fn in pair]
    names = {fn.__code__.co_filename for fn in functions}
    assert len(names) == len(functions)
    for fn in functions:
        assert linecache.getline(fn.__code__.co_filename, 1).startswith(f"def {fn.__name__}(m):")


def test_equal_fabrics_are_one_object_and_unequal_ones_are_not() -> None:
    """A GPU's fabric, the same for every GPU of an NVLink domain, is built once and shared."""
    value = sample_registration()
    gpus = value.node.gpus
    fabrics = [gpu.fabric for gpu in gpus if gpu.fabric is not None]
    assert len(fabrics) > 1
    assert len(set(fabrics)) == 1  # the sample's cards share one fabric
    other = attrs.evolve(fabrics[0], clique_id=fabrics[0].clique_id + "-other")
    gpus = (*gpus, attrs.evolve(gpus[0], index=len(gpus), fabric=other))
    value = attrs.evolve(value, node=attrs.evolve(value.node, gpus=gpus))
    for decoded in (
        decode(encode(value), Registration),
        converter.structure(converter.unstructure(value), Registration),
    ):
        assert decoded == value
        shared = [gpu.fabric for gpu in decoded.node.gpus if gpu.fabric == fabrics[0]]
        assert len(shared) == len(fabrics)
        assert all(fabric is shared[0] for fabric in shared)
        assert decoded.node.gpus[-1].fabric == other
        assert decoded.node.gpus[-1].fabric is not shared[0]


def test_the_table_of_shared_values_is_bounded() -> None:
    """Distinct fabrics, one per GPU, never hold more than `INTERNED_MAX` of them."""
    gpu = sample_registration().node.gpus[0]
    assert gpu.fabric is not None
    gpus = tuple(
        attrs.evolve(gpu, index=n, fabric=attrs.evolve(gpu.fabric, clique_id=str(n)))
        for n in range(INTERNED_MAX + 10)
    )
    value = attrs.evolve(
        sample_registration(), node=attrs.evolve(sample_registration().node, gpus=gpus)
    )
    assert decode(encode(value), Registration) == value
    table = compiled_upb().structure[GPU].__globals__["_interned_GPUFabric"]
    assert 0 < len(table) <= INTERNED_MAX


def test_the_table_of_shared_values_holds_little_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A peer's long fabric texts are not kept after their message: the table bounds its text."""
    from llmgw_wire.mapping import _compiler as compiler

    bound = 1 << 20  # a text over it still fits in a message
    monkeypatch.setattr(compiler, "INTERNED_BYTES", bound)
    gpu = sample_registration().node.gpus[0]
    assert gpu.fabric is not None
    table = compiled_upb().structure[GPU].__globals__["_interned_GPUFabric"]
    for size in (bound // 3, bound + 1):
        for n in range(4):
            fabric = attrs.evolve(gpu.fabric, cluster_uuid=f"{n}" * size)
            value = attrs.evolve(
                sample_registration(),
                node=attrs.evolve(
                    sample_registration().node, gpus=(attrs.evolve(gpu, fabric=fabric),)
                ),
            )
            assert decode(encode(value), Registration) == value
            texts = sum(getsizeof(part) for key in table for part in key if isinstance(part, str))
            assert texts <= table.held <= bound
    assert not any(len(part) > bound for key in table for part in key)


def test_a_value_with_a_secret_is_never_kept_in_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a fabric's field a secret, fabrics would be built afresh, never shared."""
    from llmgw_wire.codec._schema import CLASSES as UPB_CLASSES
    from llmgw_wire.domain import GPUFabric
    from llmgw_wire.mapping import SECRET_ATTRIBUTES, STATE_NUMBERS
    from llmgw_wire.mapping import _compiler as compiler

    secret = frozenset({*SECRET_ATTRIBUTES, (GPUFabric, "clique_id")})
    monkeypatch.setattr(compiler, "SECRET_ATTRIBUTES", secret)
    compiled = compiler.compile_backend(compiler.Upb(UPB_CLASSES, dict(STATE_NUMBERS)))
    assert "_interned_GPUFabric" not in compiled.structure[GPU].__globals__
    assert "_interned_GPUFabric" in compiled_upb().structure[GPU].__globals__
