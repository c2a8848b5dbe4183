"""Turning a refusal of the fast path into an error that says what and where.

The compiled conversion functions do no bookkeeping: they raise one of
`REFUSED` (`llmgw_wire.codec._guard`) and nothing more. Only then does the
explaining walk of the mapping (`llmgw_wire.mapping._explain`) run, on the
refused value alone, to build the path and the reason. When the walk finds
nothing wrong, the two readings of the table disagree: that is the library's
`InternalError`, never a bare `AssertionError`.
"""

from __future__ import annotations

from llmgw_wire.errors import DecodeError, EncodeError, InternalError

__all__ = ["explain_decode", "explain_encode"]


def explain_encode(
    domain: type, value: object, *_: object, **__: object
) -> EncodeError | InternalError:
    """The error for `value`, a `domain` value that compiled code refused."""
    # The walks load with the first refusal: the codec's import needs none.
    from llmgw_wire.mapping._explain import explain_value

    if type(value) is not domain:
        return EncodeError(domain.__name__, value, ())
    try:
        explain_value(value, ())
    except EncodeError as error:
        # Neither the context (upb's error quotes the string it refused) nor
        # the frames (their locals hold the value) go with it.
        error.__context__ = error.__cause__ = None
        return error.with_traceback(None)
    return InternalError(domain.__name__, (), "encode")


def explain_decode(
    domain: type, message: object, *_: object, **__: object
) -> DecodeError | InternalError:
    """The error for `message`, refused while structuring it as `domain`."""
    from llmgw_wire.mapping import pair_for
    from llmgw_wire.mapping._explain import explain_wire

    name = pair_for(domain).wire
    try:
        explain_wire(message, domain, (), name)
    except DecodeError as error:
        error.__context__ = error.__cause__ = None
        return error.with_traceback(None)
    return InternalError(name, (), "decode")
