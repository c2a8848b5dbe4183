"""Turning a refusal of the fast path into an error that says what and where.

The compiled conversion functions do no bookkeeping: they raise one of
`REFUSED` and nothing more. Only then does the explaining walk of the mapping
(`llmgw_wire.mapping.rules`) run, to build the path and the reason.
"""

from __future__ import annotations

from typing import Any

from llmgw_wire.errors import DecodeError, EncodeError
from llmgw_wire.mapping import pair_for
from llmgw_wire.mapping.explain import explain_value, explain_wire
from llmgw_wire.mapping.rules import Invalid

__all__ = ["REFUSED", "explain_decode", "explain_encode"]

#: Exceptions a compiled function lets through for a value it cannot convert;
#: the explaining walk then says which attribute and why.
REFUSED = (Invalid, TypeError, ValueError, AttributeError, UnicodeError, OverflowError)


def explain_encode(value: object, domain: type, exc: BaseException) -> EncodeError:
    """The `EncodeError` for `value`, a `domain` value that compiled code refused with `exc`."""
    if type(value) is not domain:
        return EncodeError(domain.__name__, value, ())
    try:
        explain_value(value, ())
    except EncodeError as error:
        # Neither the context (upb's error quotes the string it refused) nor
        # the frames (their locals hold the value) go with it.
        error.__context__ = error.__cause__ = None
        return error.with_traceback(None)
    # The fast path refused what the checks accept: a bug here, not bad input.
    raise AssertionError(f"{domain.__name__} refused but not explained") from exc


def explain_decode(message: Any, domain: type, exc: BaseException) -> DecodeError:
    """The `DecodeError` for `message`, refused with `exc` while structuring it as `domain`."""
    name = pair_for(domain).wire
    try:
        explain_wire(message, domain, (), name)
    except DecodeError as error:
        return error
    return DecodeError(name, f"{type(exc).__name__}: {exc}")
