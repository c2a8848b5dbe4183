"""The `llmgw-wire` command.

Each subcommand lives in the module that implements it and exposes two
functions, `add_arguments(parser)` and `run(args) -> int`; this table is the
only place that lists them, and a module is imported only when its command
runs (so that, say, `fuzz` needs the `testing` extra and `compat` does not).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import TYPE_CHECKING

from llmgw_wire._version import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "COMMANDS",
    "main",
]

# name -> (module, one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("llmgw_wire._cli.demo", "run a control plane and an agent speaking the stream"),
    "inspect": ("llmgw_wire._cli.inspect", "show a binary wire message as its domain value"),
    "compat": (
        "llmgw_wire._cli.compat",
        "check the schema for changes that break older or newer peers",
    ),
    "fuzz": ("llmgw_wire._cli.fuzz", "check every round-trip law with generated inputs, for CI"),
}


# A command's missing dependency -> the extra that installs it.
_EXTRAS: dict[str, str] = {"hypothesis": "testing"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmgw-wire", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_line) in COMMANDS.items():
        sub.add_parser(name, help=help_line, description=help_line, add_help=False)
        del module
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: `sys.argv[1:]`); return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        # Unknown command, --help or --version: argparse says what is wrong.
        _parser().parse_args(args)
        return 2
    name, rest = args[0], args[1:]
    module_name, help_line = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        # One line, for --help too: what to install, not a traceback.
        print(
            f"llmgw-wire {name}: needs {exc.name}, which is not installed: "
            f"pip install 'llmgw-wire[{extra}]'",
            file=sys.stderr,
        )
        return 2
    parser = argparse.ArgumentParser(prog=f"llmgw-wire {name}", description=help_line)
    module.add_arguments(parser)
    try:
        status = int(module.run(parser.parse_args(rest)))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        return 128 + 2  # as a shell reports SIGINT
    except (OSError, MemoryError, RecursionError) as exc:
        # A failure is one line, as from any Unix tool, never a traceback.
        what = getattr(exc, "strerror", None) or type(exc).__name__
        print(f"llmgw-wire {name}: error: {what}", file=sys.stderr)
        return 2
    return status


# A reader that closed the pipe (`llmgw-wire ... | head -1`) is no failure: the
# command ends quietly with the status a shell gives a process killed by SIGPIPE.
_SIGPIPE_STATUS = 128 + 13


def _closed_pipe() -> int:
    try:
        # Whatever is still buffered would fail again when Python flushes at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # stdout is no file descriptor (captured): nothing will be flushed to it
    return _SIGPIPE_STATUS
