"""The fast path's one guard, and the one choice of serializer.

Every codec runs a compiled conversion function (the fast path) and, only if
it refuses a value, the explaining walk of the mapping that says what and
where. `guarded` is the one place that does this, for every codec (bytes,
envelopes, the cattrs hooks), because of what the refusal can hold: upb's own
error may quote the string it refused, a secret's included. The explanation
is therefore built and raised outside the `except` clause, so that no error
the library raises has the refusal as its context, or its frames (whose
locals hold the value) in its traceback.

`serializer` is the one place that decides how a upb message becomes bytes.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, ParamSpec, TypeVar, cast

from llmgw_wire.codec._explain import explain_decode, explain_encode
from llmgw_wire.mapping._runtime import Invalid

if TYPE_CHECKING:
    from collections.abc import Callable

    from google.protobuf.descriptor import Descriptor
    from google.protobuf.message import Message

__all__ = [
    "REFUSED",
    "guarded",
    "guarded_structure",
    "guarded_unstructure",
    "reaches_map",
    "serializer",
]

P = ParamSpec("P")
R = TypeVar("R")

#: Exceptions a compiled function lets through for a value it cannot convert;
#: the explaining walk then says which attribute and why.
REFUSED = (Invalid, TypeError, ValueError, AttributeError, UnicodeError, OverflowError)


def guarded(
    fast: Callable[P, R],
    explain: Callable[P, Exception],
    name: str | None = None,
) -> Callable[P, R]:
    """`fast`, such that a refusal raises `explain(*args)` and nothing chained to it.

    Args:
        fast: the compiled conversion.
        explain: builds the library's error for the same arguments, once
            `fast` has refused them; it runs outside the exception handler.
        name: the guarded function's `__name__`, for tracebacks.
    """

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fast(*args, **kwargs)
        except REFUSED:
            pass
        # Here, not in the handler: the refusal is no longer being handled, so
        # the error raised is chained to nothing.
        raise explain(*args, **kwargs)

    fast_one = cast("Callable[[object], R]", fast)
    explain_one = cast("Callable[[object], Exception]", explain)

    def call_one(value: object) -> R:
        # The same for a function of one argument (a message, a value), as
        # `decode` and `encode` call it: no packing of arguments, a third of
        # the cost of the call above.
        try:
            return fast_one(value)
        except REFUSED:
            pass
        raise explain_one(value)

    guard = cast("Callable[P, R]", call_one) if _takes_one(fast) else call
    guard.__name__ = name or str(getattr(fast, "__name__", "guarded"))
    return guard


def _takes_one(function: object) -> bool:
    """Whether `function` is a Python function of exactly one argument, positional."""
    code = getattr(function, "__code__", None)
    if (
        code is None
        or getattr(function, "__defaults__", None)
        or getattr(function, "__kwdefaults__", None)
    ):
        return False
    varargs = 0x04 | 0x08  # CO_VARARGS, CO_VARKEYWORDS
    return code.co_argcount == 1 and not code.co_kwonlyargcount and not code.co_flags & varargs


def guarded_unstructure(fast: Callable[P, R], domain: type, verb: str = "encode") -> Callable[P, R]:
    """`fast`, a compiled conversion of a `domain` value, guarded: a refusal is an `EncodeError`."""
    return guarded(fast, partial(explain_encode, domain), f"{verb}_{domain.__name__}")


def guarded_structure(fast: Callable[P, R], domain: type) -> Callable[P, R]:
    """`fast`, a compiled conversion of a wire message into `domain`, guarded.

    A refusal is a `DecodeError`.
    """
    return guarded(fast, partial(explain_decode, domain), f"structure_{domain.__name__}")


def serializer(
    message_class: type[Message], reach: Descriptor | None = None
) -> Callable[[Message], bytes]:
    """How a message of the upb class `message_class` becomes bytes.

    Deterministic serialisation only orders map entries, and its keyword alone
    doubles upb's cost on a small message: it is asked for only where a map
    can occur, in `reach` (the descriptor of what the message can hold; the
    class's own by default).
    """
    serialize: Callable[..., bytes] = message_class.SerializeToString
    if reaches_map(message_class.DESCRIPTOR if reach is None else reach):
        return partial(serialize, deterministic=True)
    return serialize


def reaches_map(descriptor: Descriptor, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a message of `descriptor` can hold a map, at any depth."""
    for field in descriptor.fields:
        sub = field.message_type
        if sub is None or sub.full_name in seen:
            continue
        if sub.GetOptions().map_entry or reaches_map(sub, seen | {descriptor.full_name}):
            return True
    return False
