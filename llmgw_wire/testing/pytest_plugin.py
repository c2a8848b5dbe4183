"""The pytest plugin: the laws of the mapping, run in a dependent's own pytest.

pytest loads it by itself wherever llmgw-wire is installed (entry point
`pytest11`, name `llmgw_wire`); its laws need the `testing` extra
(hypothesis), and without it do nothing. `-p no:llmgw_wire` turns it off. Loading it
imports neither hypothesis nor the strategies, so a run pays for them only
when a test uses them (`st.from_type` of the library's types draws its
strategies without the plugin: hypothesis registers them itself, see
`llmgw_wire.testing.strategies.register_strategies`). It gives:

* the fixture **`llmgw_wire_law`**: a test that takes it runs once per law
  and domain model (`test_laws[domain_bytes_domain-GPU]`, ...), each a
  `LawCase` whose `run(converter)` checks the law with hypothesis, under
  the hypothesis profile the project loaded;
* the fixture **`llmgw_wire_converter`**: the converter the laws check. The
  library's, unless the project's `conftest.py` overrides the fixture, or
  pytest is given `--llmgw-wire-converter MODULE:ATTRIBUTE` (a converter, or
  a function returning one, as `llmgw-wire fuzz --converter` takes);
* **`check_laws(value, converter)`**: every law that takes a domain value,
  for one value of the project's own (from its fixtures, or its own
  strategy under `@given`);
* the fixture **`llmgw_wire_stream`**: the project's control plane (or its
  agent) over real streams on loopback (`llmgw_wire.testing.stream`; needs
  no extra): `docs/guides/testing-a-service.md`.

A project checks its converter with one test::

    def test_the_wire_laws_hold_for_our_converter(llmgw_wire_law, llmgw_wire_converter):
        llmgw_wire_law.run(llmgw_wire_converter)

and its own values with another::

    from llmgw_wire.testing.pytest_plugin import check_laws

    @pytest.mark.parametrize("value", OUR_REGISTRATIONS)
    def test_our_registrations_cross_the_wire(value, llmgw_wire_converter):
        check_laws(value, llmgw_wire_converter)

`docs/guides/fuzzing.md` has the whole recipe.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import cattrs
    from hypothesis.strategies import SearchStrategy

    from llmgw_wire.testing.laws import Law
    from llmgw_wire.testing.stream import StreamHarness

__all__ = [
    "LawCase",
    "check_laws",
    "law_cases",
    "llmgw_wire_converter",
    "llmgw_wire_stream",
]

_OPTION = "--llmgw-wire-converter"


def _have_hypothesis() -> bool:
    return importlib.util.find_spec("hypothesis") is not None


@dataclasses.dataclass(frozen=True)
class LawCase:
    """One law of `llmgw_wire.testing.laws`, for one domain model.

    Attributes:
        law: the law.
        model: the domain model it is checked for.
    """

    law: Law
    model: type

    @property
    def id(self) -> str:
        """How the test is named: `law-Model`."""
        return f"{self.law.name}-{self.model.__name__}"

    def run(
        self,
        converter: cattrs.Converter | None = None,
        *,
        values: SearchStrategy[object] | None = None,
        max_examples: int | None = None,
    ) -> None:
        """Check the law with hypothesis: raise its failure report if it does not hold.

        Args:
            converter: the converter to check (default: the library's).
            values: draw the inputs from this strategy instead of the law's own
                (inputs of the kind the law takes: domain values, or wire
                messages for `wire_domain_wire` and `unknown_states_failed`).
            max_examples: inputs to try (default: the loaded profile's).
        """
        from hypothesis import HealthCheck, given, settings

        from llmgw_wire.codec import converter as library_converter

        conv = library_converter if converter is None else converter
        strategy = self.law.strategy(self.model) if values is None else values
        law, model = self.law, self.model

        def law_holds(value: object) -> None:
            law.check(model, value, conv)

        # Named after the case, so that hypothesis's example database keeps
        # each case's failures apart.
        law_holds.__name__ = law_holds.__qualname__ = f"law_{self.id.replace('-', '_')}"
        options: dict[str, Any] = {  # hypothesis.settings' keywords
            "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
        }
        if max_examples is not None:
            options["max_examples"] = max_examples
        settings(**options)(given(strategy)(law_holds))()

    def check(self, value: object, converter: cattrs.Converter | None = None) -> None:
        """Check the law for one input; `AssertionError` when it does not hold."""
        from llmgw_wire.codec import converter as library_converter

        self.law.check(self.model, value, library_converter if converter is None else converter)


def law_cases(model: type | None = None) -> list[LawCase]:
    """Every law for every model it holds for, or only those for `model`."""
    from llmgw_wire.testing.laws import LAWS

    return [
        LawCase(law, each) for law in LAWS for each in law.models if model is None or each is model
    ]


def check_laws(value: object, converter: cattrs.Converter | None = None) -> None:
    """Check every law that takes a domain value, for `value` (a domain value of yours).

    Raises:
        AssertionError: a law does not hold; the message names it.
        TypeError: `value` is not a domain model with a wire message of its own.
    """
    from llmgw_wire.testing import strategies as lst

    cases = [
        case
        for case in law_cases(type(value))
        if case.law.strategy in (lst.domain_values, lst.extreme_values)
    ]
    if not cases:
        raise TypeError(f"no law takes a {type(value).__name__}: not a domain model with a message")
    for case in cases:
        _check_named(case, value, converter)


def _check_named(case: LawCase, value: object, converter: cattrs.Converter | None) -> None:
    try:
        case.check(value, converter)
    except AssertionError as exc:
        raise AssertionError(f"the law {case.law.name} does not hold: {exc}") from None


def pytest_addoption(parser: pytest.Parser) -> None:
    """The option `--llmgw-wire-converter MODULE:ATTRIBUTE`."""
    parser.getgroup("llmgw_wire").addoption(
        _OPTION,
        metavar="MODULE:ATTRIBUTE",
        default=None,
        help="the cattrs converter the llmgw_wire laws check (default: the library's)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run a test that takes `llmgw_wire_law` once per law and model."""
    if "llmgw_wire_law" not in metafunc.fixturenames:
        return
    if not _have_hypothesis():
        raise pytest.UsageError(
            "llmgw_wire_law needs hypothesis: pip install 'llmgw-wire[testing]'"
        )
    cases = law_cases()
    metafunc.parametrize("llmgw_wire_law", cases, ids=[case.id for case in cases])


@pytest.fixture
def llmgw_wire_converter(request: pytest.FixtureRequest) -> cattrs.Converter:
    """The converter the laws check: `--llmgw-wire-converter`'s, else the library's.

    Override this fixture in a `conftest.py` to check the project's own.
    """
    ref = request.config.getoption(_OPTION)
    if ref:
        from llmgw_wire.testing.fuzz import load_converter

        return load_converter(ref)
    from llmgw_wire.codec import converter

    return converter


@pytest.fixture
def llmgw_wire_stream() -> StreamHarness:
    """Real streams on loopback for the project's own tests (`llmgw_wire.testing.stream`).

    `serve(plane)` serves the project's control plane to agents the test
    connects; `control_plane()` serves one the test drives, for the
    project's agent; `run(main)` runs the test's coroutine, bounded, and
    fails if it left a task running. Needs no extra.
    """
    from llmgw_wire.testing.stream import StreamHarness

    return StreamHarness()
