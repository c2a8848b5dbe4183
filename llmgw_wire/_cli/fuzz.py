"""`llmgw-wire fuzz`: every round-trip law with generated inputs, for CI.

The engine is `llmgw_wire.testing.fuzz`; this is its command line.
"""

from __future__ import annotations

import secrets
import sys
from typing import TYPE_CHECKING, TextIO

from llmgw_wire.testing.fuzz import DEFAULT_EXAMPLES, fuzz, load_converter
from llmgw_wire.testing.laws import LAWS, law_named, model_named, redacted

if TYPE_CHECKING:
    import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `llmgw-wire fuzz`."""
    parser.add_argument(
        "--examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        metavar="N",
        help=f"inputs per law and model, per round with --seconds (default {DEFAULT_EXAMPLES})",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        metavar="S",
        help="run rounds until S seconds have passed (the last round runs to its end)",
    )
    parser.add_argument("--seed", type=int, help="the run seed (default: a random one, printed)")
    parser.add_argument("--law", action="append", metavar="NAME", help="only this law (repeatable)")
    parser.add_argument(
        "--model", action="append", metavar="NAME", help="only this domain model (repeatable)"
    )
    parser.add_argument(
        "--converter",
        metavar="MODULE:ATTR",
        help="check this cattrs converter (or a function returning one) instead of the library's",
    )
    parser.add_argument("--list", action="store_true", help="list the laws and models, and exit")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run `llmgw-wire fuzz`; 0 when every law held, 1 on a failure, 2 on bad arguments."""
    out = sys.stdout if out is None else out
    if args.list:
        for law in LAWS:
            names = ", ".join(model.__name__ for model in law.models)
            print(f"{law.name}: {law.summary}\n    {names}", file=out)
        return 0
    try:
        laws = [law_named(name) for name in args.law] if args.law else list(LAWS)
        models = [model_named(name) for name in args.model] if args.model else None
        conv = load_converter(args.converter) if args.converter else None
    except (KeyError, ValueError, TypeError, ImportError, AttributeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else exc
        print(f"llmgw-wire fuzz: {message}", file=sys.stderr)
        return 2
    if args.examples < 1 or (args.seconds is not None and args.seconds < 0):
        print(
            "llmgw-wire fuzz: --examples must be at least 1, --seconds at least 0", file=sys.stderr
        )
        return 2
    seed = secrets.randbelow(2**32) if args.seed is None else args.seed
    budget = f"{args.seconds:g} s" if args.seconds is not None else "one round"
    print(f"fuzz: seed {seed}, {args.examples} examples per law and model, {budget}", file=out)
    result = fuzz(
        laws,
        models,
        examples=args.examples,
        seconds=args.seconds,
        seed=seed,
        converter=conv,
        out=out,
    )
    print(
        f"fuzz: {result.runs} runs, {result.examples} examples, "
        f"{len(result.failures)} failed, {result.seconds:.1f} s (seed {seed})",
        file=out,
    )
    for failure in result.failures:
        print(
            f"\nFAILED {failure.law} for {failure.model}; the minimal input:\n"
            f"  {redacted(failure.value)!r}\n"
            f"{type(failure.error).__name__}: {failure.error}\n"
            f"reproduce with:\n  {failure.command(args.converter)}",
            file=out,
        )
    return 1 if result.failures else 0
