"""The fast path's guard: the same behaviour whatever the arguments of the function it guards."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from llmgw_wire.codec._guard import guarded
from llmgw_wire.mapping._rules import Invalid

if TYPE_CHECKING:
    from collections.abc import Callable


class _ExplainedError(Exception):
    pass


def _refuses(value: object, context: str = "") -> object:
    if value == "bad":
        raise Invalid(value)
    return (value, context)


def _refuses_one(value: object) -> object:
    if value == "bad":
        raise Invalid(value)
    return value


def _explain(value: object, context: str = "") -> Exception:
    return _ExplainedError(f"{value} {context}")


@pytest.mark.parametrize(
    ("fast", "args"),
    [(_refuses_one, ()), (_refuses, ()), (_refuses, ("ctx",))],
    ids=["one argument", "with a default", "two arguments"],
)
def test_a_refusal_is_explained_and_chained_to_nothing(
    fast: Callable[..., object], args: tuple[str, ...]
) -> None:
    guard: Callable[..., object] = guarded(fast, _explain, "structure_X")
    assert guard.__name__ == "structure_X"
    assert guard("good", *args) == fast("good", *args)
    with pytest.raises(_ExplainedError) as info:
        guard("bad", *args)
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    assert str(info.value) == f"bad {''.join(args)}"


def test_an_error_that_is_not_a_refusal_goes_through() -> None:
    def broken(value: object) -> object:
        raise KeyError(value)

    with pytest.raises(KeyError):
        guarded(broken, _explain)("x")
