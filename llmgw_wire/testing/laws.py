"""The round-trip laws of the mapping, as data: one place for the tests and `llmgw-wire fuzz`.

Each `Law` says which domain models it holds for, how to draw its input (a
hypothesis strategy from `llmgw_wire.testing.strategies`) and how to check one input,
raising `AssertionError` when the law is broken. In a project's own pytest,
the plugin `llmgw_wire.testing.pytest_plugin` runs every law for every model
(the fixture `llmgw_wire_law`); `llmgw-wire fuzz` runs the same laws outside
pytest, long, for CI. Both take the converter to check, so that a service
can fuzz its own copy with extra hooks (`make_converter()`).

The laws, for every domain value `d` the strategies build and every wire
message `w` with known states:

* `domain_wire_domain`: `structure(unstructure(d)) == d`;
* `domain_bytes_domain`: `decode(encode(d)) == d`;
* `backends_agree`: upb and betterproto2 write bytes that read back the same;
* `wire_domain_wire`: `unstructure(structure(w))` encodes to `w`'s bytes;
* `deterministic`: the same value always encodes to the same bytes;
* `no_mutation`: conversions neither change their input nor share mutable
  state with it;
* `unknown_states_failed`: a state number this version does not know, from a
  newer agent, decodes as `State.FAILED`, through bytes and the converter;
* `encoded_decodes_equal`: every value `encode` accepts, extremes included
  (`strategies.extreme_values`), `decode` gives back equal; what `encode`
  refuses it refuses with an `EncodeError`, never a wrapped value.

A law that does not hold says where the two values it compared first differ:
the path of the attribute, item or key, and the two values there, a secret
shown only by its type.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import cattrs
from attrs import frozen
from hypothesis.strategies import SearchStrategy

from llmgw_wire.codec import decode, encode, wire_class
from llmgw_wire.codec._classes import betterproto2_classes
from llmgw_wire.domain import Registration, State
from llmgw_wire.errors import EncodeError, Redacted
from llmgw_wire.mapping import MODELS_WITH_MESSAGE, SECRET_FIELDS, STATE_MODELS, is_secret
from llmgw_wire.testing import strategies as lst

if TYPE_CHECKING:
    import betterproto2

    from llmgw_wire.mapping._table import ModelWithMessage

__all__ = ["LAWS", "MODELS", "Law", "law_named", "model_named", "redacted"]

#: Every domain model with a wire message of its own, in the mapping's order.
MODELS: tuple[type, ...] = MODELS_WITH_MESSAGE

_WITH_STATES: tuple[type, ...] = STATE_MODELS

T = TypeVar("T")


@frozen
class Law:
    """One law of the mapping.

    Attributes:
        name: how the tests and `llmgw-wire fuzz --law` call it.
        summary: the law in one line.
        models: the domain models it holds for.
        strategy: the inputs for a model: `strategy(model)`.
        check: `check(model, value, converter)`; raises `AssertionError` when
            the law does not hold for `value`.
    """

    name: str
    summary: str
    models: tuple[type, ...]
    strategy: Callable[[type], SearchStrategy[Any]]
    check: Callable[[type, Any, cattrs.Converter], None]


def redacted(value: T) -> T:
    """`value` to show in a failure: itself, since every repr now hides secrets.

    Domain models and the wire classes of `llmgw_wire.v1` both show a field
    the schema marks `[debug_redact = true]` as `<secret str, not shown>`.
    """
    return value


#: The most characters of a value a failure shows.
_LONGEST_SHOWN = 300


@frozen
class _Difference:
    """Where two values first differ, and what each holds there.

    Attributes:
        path: where, from the values compared: `$.spec.pool`, `$.gpus[2]`,
            `$.labels['zone']`; `$` for the values themselves.
        got: what the first holds there (a `Redacted` stand-in for a secret).
        want: what the second holds there (likewise).
    """

    path: str
    got: object
    want: object


_MISSING = object()


def _shown(value: object) -> str:
    if value is _MISSING:
        return "(nothing)"
    text = repr(value)
    return text if len(text) <= _LONGEST_SHOWN else text[: _LONGEST_SHOWN - 3] + "..."


def _secret_field(value: object, name: str) -> bool:
    """Whether the attribute or field `name` of `value` (a model or a wire message) is secret."""
    cls = type(value)
    if attrs.has(cls):
        return is_secret(cls, name)
    return f"{_WIRE_NAMES.get(cls)}.{name}" in SECRET_FIELDS


_WIRE_NAMES: dict[type, str] = {cls: name for name, cls in betterproto2_classes().items()}


def _fields(value: object) -> list[str] | None:
    """The fields of a model or a wire message, in order; None for any other value."""
    cls = type(value)
    if attrs.has(cls):
        return [field.name for field in attrs.fields(cls)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [field.name for field in dataclasses.fields(value)]
    return None


def _difference(got: object, want: object, path: str = "$") -> _Difference | None:
    """Where `got` and `want` first differ, walking models, wire messages, sequences and maps.

    None when the walk finds no difference (the two may still differ, in a
    way the walk does not read: unknown fields of a wire message).
    """
    if type(got) is not type(want):
        return _Difference(path, got, want)
    if _fields(got) is not None:
        return _in_fields(got, want, path)
    # Of one type, so each test holds for `want` as for `got`.
    sequences = (list, tuple, bytes, bytearray)
    if isinstance(got, sequences) and isinstance(want, sequences):
        return _in_items(got, want, path)
    if isinstance(got, Mapping) and isinstance(want, Mapping):
        return _in_map(got, want, path)
    return None if got == want else _Difference(path, got, want)


def _in_fields(got: object, want: object, path: str) -> _Difference | None:
    for name in _fields(got) or ():
        a, b = getattr(got, name), getattr(want, name)
        found = _difference(a, b, f"{path}.{name}")
        if found is not None and _secret_field(got, name):
            # Nothing of a secret is shown, not even where in it the two differ.
            hidden = Redacted(type(a).__name__), Redacted(type(b).__name__)
            return _Difference(f"{path}.{name}", *hidden)
        if found is not None:
            return found
    return None


def _in_items(got: Sequence[object], want: Sequence[object], path: str) -> _Difference | None:
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        found = _difference(a, b, f"{path}[{i}]")
        if found is not None:
            return found
    if len(got) == len(want):
        return None
    n = min(len(got), len(want))
    return _Difference(
        f"{path}[{n}]",
        got[n] if n < len(got) else _MISSING,
        want[n] if n < len(want) else _MISSING,
    )


def _in_map(
    got: Mapping[object, object], want: Mapping[object, object], path: str
) -> _Difference | None:
    for key in [*got, *(k for k in want if k not in got)]:
        found = _difference(got.get(key, _MISSING), want.get(key, _MISSING), f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


def _expect(ok: bool, what: str, got: object, want: object) -> None:
    if ok:
        return
    found = _difference(got, want)
    if found is None:
        # Equal as far as the walk reads: the whole values, as they are.
        found = _Difference("$", redacted(got), redacted(want))
    where = "" if found.path == "$" else f" at {found.path}"
    raise AssertionError(
        f"{what} differs{where}:\n  got:  {_shown(found.got)}\n  want: {_shown(found.want)}"
    )


def _domain_wire_domain(cls: type, value: ModelWithMessage, conv: cattrs.Converter) -> None:
    wire = conv.unstructure(value)
    _expect(
        isinstance(wire, wire_class(cls)), "the type unstructure gave", type(wire), wire_class(cls)
    )
    back: object = conv.structure(wire, cls)
    _expect(back == value, "structure(unstructure(d))", back, value)


def _domain_bytes_domain(cls: type, value: ModelWithMessage, conv: cattrs.Converter) -> None:
    back: object = decode(encode(value), cls)
    _expect(back == value, "decode(encode(d))", back, value)


def _backends_agree(cls: type, value: ModelWithMessage, conv: cattrs.Converter) -> None:
    wire = wire_class(cls)
    fast = encode(value)
    typed = bytes(conv.unstructure(value))
    _expect(
        wire.parse(fast) == wire.parse(typed),
        "upb's bytes and betterproto2's read back differently",
        wire.parse(typed),
        wire.parse(fast),
    )
    from_typed: object = decode(typed, cls)
    _expect(from_typed == value, "decode(betterproto2's bytes)", from_typed, value)
    from_fast: object = conv.structure(wire.parse(fast), cls)
    _expect(from_fast == value, "structure(betterproto2's parse of upb's bytes)", from_fast, value)


def _wire_domain_wire(cls: type, message: betterproto2.Message, conv: cattrs.Converter) -> None:
    again = conv.unstructure(conv.structure(message, cls))
    _expect(bytes(again) == bytes(message), "unstructure(structure(w))", again, message)


def _deterministic(cls: type, value: ModelWithMessage, conv: cattrs.Converter) -> None:
    first = encode(value)
    _expect(encode(copy.deepcopy(value)) == first, "encode(a copy)", encode(value), first)
    again = encode(decode(first, cls))
    _expect(again == first, "encode(decode(encode(d)))", again, first)


def _scramble(message: object) -> None:
    """Change every list, map and sub-message of a betterproto2 message in place."""
    for field in vars(message).values():
        if isinstance(field, list):
            field.clear()
        elif isinstance(field, dict):
            field["scrambled"] = "yes"
        elif hasattr(field, "__dataclass_fields__"):
            _scramble(field)


def _no_mutation(cls: type, value: ModelWithMessage, conv: cattrs.Converter) -> None:
    before = copy.deepcopy(value)
    wire = conv.unstructure(value)
    _expect(value == before, "the value after unstructure", value, before)
    wire_before = copy.deepcopy(wire)
    back: object = conv.structure(wire, cls)
    _expect(wire == wire_before, "the message after structure", wire, wire_before)
    # Changing the wire message afterwards leaves the domain value alone.
    _scramble(wire)
    _expect(back == before, "the structured value after its message changed", back, before)


def _states(value: Any) -> list[State]:
    if isinstance(value, Registration):
        return [shard.state for shard in value.shards]
    return [value.state]


def _unknown_states_failed(
    cls: type, message: betterproto2.Message, conv: cattrs.Converter
) -> None:
    raw = bytes(message)
    from_bytes = _states(decode(raw, cls))
    _expect(set(from_bytes) <= {State.FAILED}, "states decoded from bytes", from_bytes, "FAILED")
    structured = _states(conv.structure(message, cls))
    _expect(set(structured) <= {State.FAILED}, "states structured", structured, "FAILED")
    # The typed wire message keeps the number itself, for whoever forwards it.
    kept = decode(raw, wire_class(cls))
    _expect(kept == message, "decode(bytes, wire class)", kept, message)


def _encoded_decodes_equal(cls: type, value: ModelWithMessage, conv: cattrs.Converter) -> None:
    try:
        data = encode(value)
    except EncodeError:
        return  # refused, saying why: never carried changed
    back: object = decode(data, cls)
    _expect(back == value, "decode(encode(d)) of a value encode accepted", back, value)


#: Every law, in the order the tests and `llmgw-wire fuzz` run them.
LAWS: tuple[Law, ...] = (
    Law(
        "domain_wire_domain",
        "structure(unstructure(d)) == d, through the converter",
        MODELS,
        lst.domain_values,
        _domain_wire_domain,
    ),
    Law(
        "domain_bytes_domain",
        "decode(encode(d)) == d, through bytes",
        MODELS,
        lst.domain_values,
        _domain_bytes_domain,
    ),
    Law(
        "backends_agree",
        "upb and betterproto2 write bytes that read back the same",
        MODELS,
        lst.domain_values,
        _backends_agree,
    ),
    Law(
        "wire_domain_wire",
        "unstructure(structure(w)) encodes to the bytes of w",
        MODELS,
        lst.wire_messages,
        _wire_domain_wire,
    ),
    Law(
        "deterministic",
        "the same value always encodes to the same bytes",
        MODELS,
        lst.domain_values,
        _deterministic,
    ),
    Law(
        "no_mutation",
        "conversions neither change their input nor share mutable state with it",
        MODELS,
        lst.domain_values,
        _no_mutation,
    ),
    Law(
        "unknown_states_failed",
        "a state number this version does not know decodes as FAILED",
        _WITH_STATES,
        lambda cls: lst.wire_messages(cls, unknown_states=True),
        _unknown_states_failed,
    ),
    Law(
        "encoded_decodes_equal",
        "every value encode accepts, extremes included, decode gives back equal",
        MODELS,
        lst.extreme_values,
        _encoded_decodes_equal,
    ),
)

_LAWS_BY_NAME = {law.name: law for law in LAWS}
_MODELS_BY_NAME = {model.__name__: model for model in MODELS}


def law_named(name: str) -> Law:
    """The law called `name`.

    Raises:
        KeyError: no law has that name; the message lists those that do.
    """
    try:
        return _LAWS_BY_NAME[name]
    except KeyError:
        raise KeyError(f"no law {name!r}; the laws are {', '.join(_LAWS_BY_NAME)}") from None


def model_named(name: str) -> type:
    """The domain model with a wire message called `name` (`"GPU"`, `"Registration"`).

    Raises:
        KeyError: no such model; the message lists those there are.
    """
    try:
        return _MODELS_BY_NAME[name]
    except KeyError:
        raise KeyError(f"no model {name!r}; the models are {', '.join(_MODELS_BY_NAME)}") from None
