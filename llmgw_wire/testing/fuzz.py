"""`llmgw-wire fuzz`: every round-trip law of the mapping, outside pytest, for CI.

It runs each law of `llmgw_wire.testing.laws` for each of its domain models with
hypothesis, for `--examples` inputs per law and model, or round after round
until `--seconds` have passed. A failure is shrunk to a minimal input, which
is printed with the exact command that runs that search again (law, model,
seed and converter); the exit status is then 1.

Runs are reproducible: a run's `--seed` (printed when it was not given)
fixes every input of every law, model and round.

A service that adds hooks to its own converter (`make_converter()`) fuzzes
that copy with `--converter my_service.wire:converter`.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

import cattrs
import hypothesis
from attrs import frozen
from hypothesis import HealthCheck, Phase, Verbosity, given, settings

from llmgw_wire.codec import converter as _library_converter
from llmgw_wire.testing.laws import LAWS

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import ModuleType

    from llmgw_wire.testing.laws import Law

__all__ = ["DEFAULT_EXAMPLES", "Failure", "Run", "fuzz", "law_seed", "load_converter"]

#: Inputs per law and model, and per round of a `--seconds` run, when not given.
DEFAULT_EXAMPLES = 100


@frozen
class Failure:
    """A law that did not hold, with the shrunk input that shows it.

    Attributes:
        law: the law's name.
        model: the domain model's name.
        seed: the run seed that finds it again (`--seed`).
        examples: the examples that search ran (`--examples`).
        value: the minimal failing input hypothesis shrank to.
        error: what the law raised for it.
    """

    law: str
    model: str
    seed: int
    examples: int
    value: object
    error: BaseException

    def command(self, converter_ref: str | None = None) -> str:
        """The command line that runs the search that found this failure again."""
        extra = f" --converter {converter_ref}" if converter_ref else ""
        return (
            f"llmgw-wire fuzz --law {self.law} --model {self.model} "
            f"--seed {self.seed} --examples {self.examples}{extra}"
        )


@frozen
class Run:
    """What a fuzz run did.

    Attributes:
        seed: the run seed.
        runs: law-and-model searches run.
        examples: inputs checked, over all of them.
        seconds: how long it took.
        failures: the laws that did not hold.
    """

    seed: int
    runs: int
    examples: int
    seconds: float
    failures: tuple[Failure, ...]


def law_seed(seed: int, law: str, model: str) -> int:
    """The hypothesis seed of one law and model in a run seeded `seed`.

    Stable across processes and Python versions (unlike `hash`), so a
    printed seed finds the same inputs anywhere.
    """
    digest = hashlib.sha256(f"{seed}:{law}:{model}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _search(
    law: Law, model: type, *, examples: int, seed: int, conv: cattrs.Converter
) -> tuple[int, Failure | None]:
    """Run one law for one model; the examples it checked, and its failure if any."""
    calls = 0
    last_failure: list[Any] = []  # the value, then what it raised

    def check(value: object) -> None:
        nonlocal calls
        calls += 1
        try:
            law.check(model, value, conv)
        except Exception as exc:
            # Hypothesis runs the shrunk example last: this keeps the minimal one.
            last_failure[:] = [value, exc]
            raise

    test = settings(
        max_examples=examples,
        database=None,
        derandomize=False,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        verbosity=Verbosity.quiet,
        print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )(given(law.strategy(model))(check))
    test = hypothesis.seed(law_seed(seed, law.name, model.__name__))(test)
    try:
        test()
    except Exception:
        if not last_failure:
            raise  # hypothesis itself failed, not the law
        value, error = last_failure
        return calls, Failure(law.name, model.__name__, seed, examples, value, error)
    return calls, None


def fuzz(
    laws: Iterable[Law] = LAWS,
    models: Iterable[type] | None = None,
    *,
    examples: int = DEFAULT_EXAMPLES,
    seconds: float | None = None,
    seed: int = 0,
    converter: cattrs.Converter | None = None,
    out: TextIO | None = None,
) -> Run:
    """Check `laws` for `models` with hypothesis; the programmatic `llmgw-wire fuzz`.

    Args:
        laws: the laws to check (default: all of them).
        models: the domain models to check them for (default: each law's own).
        examples: inputs per law and model; per round when `seconds` is given.
        seconds: keep running rounds, each with a fresh seed (`seed`, then
            `seed + 1`, ...), until this much time has passed. The last round
            runs to its end, so a run takes somewhat longer.
        seed: the run seed: the same seed checks the same inputs.
        converter: the converter to check (default: the library's).
        out: where progress lines go (default: none).

    Returns:
        What ran, and every failure, each shrunk to a minimal input. A round
        runs every law for every model; no round starts after one that failed.
    """
    conv = _library_converter if converter is None else converter
    wanted = None if models is None else set(models)
    pairs = [
        (law, model) for law in laws for model in law.models if wanted is None or model in wanted
    ]
    started = time.monotonic()
    runs = checked = 0
    failures: list[Failure] = []
    round_ = 0
    while not failures:
        round_seed = seed + round_
        for law, model in pairs:
            began = time.monotonic()
            count, failure = _search(law, model, examples=examples, seed=round_seed, conv=conv)
            runs += 1
            checked += count
            status = "FAILED" if failure else "ok"
            if out is not None:
                label = f"round {round_ + 1} " if seconds is not None else ""
                print(
                    f"{label}{law.name:<22} {model.__name__:<16} {count:>6} examples "
                    f"{status:<6} {time.monotonic() - began:6.1f} s",
                    file=out,
                    flush=True,
                )
            if failure is not None:
                failures.append(failure)
        round_ += 1
        if seconds is None or time.monotonic() - started >= seconds:
            break
    return Run(seed, runs, checked, time.monotonic() - started, tuple(failures))


def load_converter(ref: str) -> cattrs.Converter:
    """The cattrs converter at `MODULE:ATTRIBUTE`, or returned by the function there.

    A module that is not found on `sys.path` is looked for in the current
    directory too, as `python -m` would (the directory is then put first on
    `sys.path`), so that `--converter my_service.wire:converter` works from
    the project's root without setting `PYTHONPATH`.

    Raises:
        ValueError: `ref` is not of that form.
        TypeError: what is there is not a converter.
        ImportError, AttributeError: there is nothing there.
    """
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--converter takes MODULE:ATTRIBUTE, got {ref!r}")
    found = getattr(_import_here(module_name), attr)
    if not isinstance(found, cattrs.Converter) and callable(found):
        found = found()
    if not isinstance(found, cattrs.Converter):
        raise TypeError(f"{ref} is a {type(found).__name__}, not a cattrs converter")
    return found


def _import_here(module_name: str) -> ModuleType:
    """`module_name`, imported from `sys.path` or else from the current directory."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = module_name.partition(".")[0]
        if exc.name != top or here in sys.path or "" in sys.path:
            raise
        sys.path.insert(0, here)
        return importlib.import_module(module_name)
