"""The hook hypothesis runs when it is imported: a resolver for each of the library's types.

Hypothesis runs `register_resolvers` each time it is imported, in every
process that has llmgw-wire installed (the package's `hypothesis` entry
point; pytest imports hypothesis in every run). So it imports nothing of
the library: once `llmgw_wire.domain` has been imported (or at once, if it
has been), it registers with hypothesis a resolver for each domain model
and `State`, and once `llmgw_wire.v1` has been, one for each message class.
The first time hypothesis is asked for one of these types (`st.from_type`,
`st.builds`, `@given` inferred from annotations), its resolver imports
`llmgw_wire.testing.strategies` (the converter, hundreds of strategies) and
answers with the strategy the table of `_registry` names. A process that
never asks pays for none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmgw_wire._on_import import when_imported
from llmgw_wire.testing import _registry

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hypothesis.strategies import SearchStrategy

__all__ = ["register_resolvers"]


class _Resolver:
    """Registered for one type: its strategy, importing the strategies on first use."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, asked: type) -> SearchStrategy[object]:
        # `asked` is the type hypothesis resolves: `cls`, or a base class of
        # it for `st.from_type(base)`; either way this is `cls`'s strategy.
        from llmgw_wire.testing.strategies import _registered_strategy

        return _registered_strategy(self.cls)

    def __repr__(self) -> str:
        return f"llmgw_wire's strategy for {self.cls.__qualname__}"


def register_resolvers() -> None:
    """Register with hypothesis a resolver for each type, once its module is imported.

    Hypothesis runs it when it is imported (entry point group `hypothesis`,
    unless `HYPOTHESIS_NO_PLUGINS` is set).
    """
    when_imported("llmgw_wire.domain", _domain_resolvers)
    when_imported("llmgw_wire.v1", _wire_resolvers)


def _domain_resolvers() -> None:
    # `llmgw_wire.domain` has just been imported: this imports nothing more.
    from llmgw_wire.domain import State

    _register([*_registry.model_strategies(), State])


def _wire_resolvers() -> None:
    # `llmgw_wire.v1` has just been imported, and with it the message pool;
    # the mapping may still be being imported (it imports `llmgw_wire.v1`),
    # so `registered()` is not read here. Every message of the schema has a
    # strategy (tests/testing/test_plugin.py holds it).
    from llmgw_wire._gen.message_pool import default_message_pool

    _register(default_message_pool.url_to_type.values())


def _register(types: Iterable[type]) -> None:
    from hypothesis import strategies as st

    for cls in types:
        st.register_type_strategy(cls, _Resolver(cls))
        _registry.with_resolver.add(cls)
