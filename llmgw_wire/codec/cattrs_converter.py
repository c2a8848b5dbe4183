"""The cattrs converter between the `llmgw_wire.v1` messages and the domain models.

Its hooks are compiled from the mapping (`llmgw_wire.mapping`) for the
betterproto2 backend: `converter.structure(wire_gpu, GPU)` and
`converter.unstructure(gpu)` work for every pair, nested ones included.
Values the wire cannot carry raise `EncodeError` with their path; wire
messages the domain cannot hold raise `DecodeError`.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import cattrs

from llmgw_wire.codec._guard import guarded_structure, guarded_unstructure
from llmgw_wire.codec.classes import betterproto2_classes, not_top_level, top_level, wire_class
from llmgw_wire.errors import DecodeError
from llmgw_wire.mapping import MODELS_WITH_MESSAGE, STATE_NUMBERS, pair_for
from llmgw_wire.mapping.compiler import Betterproto2, Compiled, compile_backend

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = [
    "betterproto2_classes",
    "compiled_betterproto2",
    "converter",
    "make_converter",
    "not_top_level",
    "structure_with_context",
    "top_level",
    "unstructure_with_context",
    "wire_class",
]

T = TypeVar("T")


@cache
def compiled_betterproto2() -> Compiled:
    """The mapping compiled for betterproto2, once per process."""
    from llmgw_wire.v1 import ShardStatusState

    states = {state: ShardStatusState(n) for state, n in STATE_NUMBERS.items()}
    return compile_backend(Betterproto2(betterproto2_classes(), dict(states)))


def _checked_structure(fn: Callable[..., T], domain: type) -> Callable[..., T]:
    wire_name = pair_for(domain).wire
    wire_class = betterproto2_classes()[wire_name]
    guarded = guarded_structure(fn, domain)

    def structure(message: Any, _: Any = None, **context: str) -> T:
        if not isinstance(message, wire_class):
            raise DecodeError(
                wire_name, f"expected a {wire_class.__name__} message, got {type(message).__name__}"
            )
        return guarded(message, **context)

    structure.__name__ = f"structure_{domain.__name__}"
    return structure


@cache
def _hooks() -> tuple[dict[type, Callable[..., Any]], dict[type, Callable[[Any], Any]]]:
    """The guarded structure and unstructure hooks of every pair, made once per process."""
    compiled = compiled_betterproto2()
    models = MODELS_WITH_MESSAGE
    structure = {m: _checked_structure(compiled.structure[m], m) for m in models}
    unstructure = {
        m: guarded_unstructure(compiled.unstructure[m], m, "unstructure") for m in models
    }
    return structure, unstructure


def make_converter() -> cattrs.Converter:
    """A new cattrs converter between the `llmgw_wire.v1` messages and the domain models.

    It holds a structure and an unstructure hook for every pair of the mapping,
    nested ones included: `structure(msg, GPU)` takes a `v1.Gpu` and gives a
    `GPU`; `unstructure(gpu)` gives the `v1.Gpu` back. Values the wire cannot
    carry raise `EncodeError`. A converter is cheap to make (the conversion
    functions are compiled once per process); add hooks to your own copy
    rather than to the shared `converter`.
    """
    conv = cattrs.Converter()
    structure, unstructure = _hooks()
    for model, hook in structure.items():
        conv.register_structure_hook(model, hook)
    for model, hook in unstructure.items():
        conv.register_unstructure_hook(model, hook)
    return conv


#: The converter the library's named conversions use. Treat it as read-only.
converter: cattrs.Converter = make_converter()


def structure_with_context(message: Any, domain: type[T], **context: str) -> T:
    """Like `converter.structure`, with the values a message takes from its enclosing one.

    An adopted shard's `node_id`, for instance, is the registration's.
    """
    value: T = _hooks()[0][domain](message, domain, **context)
    return value


def unstructure_with_context(value: object, **wire: object) -> Any:
    """Like `converter.unstructure`, with wire fields a domain value does not hold.

    An agent reports its leader's address for a shard of every rank
    (`leader_addr`), where the domain holds it for rank 0 only, in its endpoint.
    """
    return _hooks()[1][type(value)](value, **wire)
