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
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import cattrs
from attrs import frozen
from hypothesis.strategies import SearchStrategy

from llmgw_wire.codec import decode, encode, wire_class
from llmgw_wire.domain import Registration, State
from llmgw_wire.errors import EncodeError
from llmgw_wire.mapping import MODELS_WITH_MESSAGE, STATE_MODELS
from llmgw_wire.testing import strategies as lst

__all__ = ["LAWS", "MODELS", "Law", "law_named", "model_named", "redacted"]

#: Every domain model with a wire message of its own, in the mapping's order.
MODELS: tuple[type, ...] = MODELS_WITH_MESSAGE

_WITH_STATES: tuple[type, ...] = STATE_MODELS


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


def redacted(value: Any) -> Any:
    """`value` to show in a failure: itself, since every repr now hides secrets.

    Domain models and the wire classes of `llmgw_wire.v1` both show a field
    the schema marks `[debug_redact = true]` as `<secret str, not shown>`.
    """
    return value


def _expect(ok: bool, what: str, got: object, want: object) -> None:
    if not ok:
        raise AssertionError(f"{what}:\n  got:  {redacted(got)!r}\n  want: {redacted(want)!r}")


def _domain_wire_domain(cls: type, value: Any, conv: cattrs.Converter) -> None:
    wire = conv.unstructure(value)
    _expect(isinstance(wire, wire_class(cls)), "unstructure gave", type(wire), wire_class(cls))
    back: object = conv.structure(wire, cls)
    _expect(back == value, "structure(unstructure(d))", back, value)


def _domain_bytes_domain(cls: type, value: Any, conv: cattrs.Converter) -> None:
    back: object = decode(encode(value), cls)
    _expect(back == value, "decode(encode(d))", back, value)


def _backends_agree(cls: type, value: Any, conv: cattrs.Converter) -> None:
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


def _wire_domain_wire(cls: type, message: Any, conv: cattrs.Converter) -> None:
    again = conv.unstructure(conv.structure(message, cls))
    _expect(bytes(again) == bytes(message), "unstructure(structure(w))", again, message)


def _deterministic(cls: type, value: Any, conv: cattrs.Converter) -> None:
    first = encode(value)
    _expect(encode(copy.deepcopy(value)) == first, "encode(a copy)", encode(value), first)
    again = encode(decode(first, cls))
    _expect(again == first, "encode(decode(encode(d)))", again, first)


def _scramble(message: Any) -> None:
    """Change every list, map and sub-message of a betterproto2 message in place."""
    for field in vars(message).values():
        if isinstance(field, list):
            field.clear()
        elif isinstance(field, dict):
            field["scrambled"] = "yes"
        elif hasattr(field, "__dataclass_fields__"):
            _scramble(field)


def _no_mutation(cls: type, value: Any, conv: cattrs.Converter) -> None:
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


def _unknown_states_failed(cls: type, message: Any, conv: cattrs.Converter) -> None:
    raw = bytes(message)
    from_bytes = _states(decode(raw, cls))
    _expect(set(from_bytes) <= {State.FAILED}, "states decoded from bytes", from_bytes, "FAILED")
    structured = _states(conv.structure(message, cls))
    _expect(set(structured) <= {State.FAILED}, "states structured", structured, "FAILED")
    # The typed wire message keeps the number itself, for whoever forwards it.
    kept = decode(raw, wire_class(cls))
    _expect(kept == message, "decode(bytes, wire class)", kept, message)


def _encoded_decodes_equal(cls: type, value: Any, conv: cattrs.Converter) -> None:
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
