"""`llmgw-wire compat`: the schema checker on the command line, with buf's habits.

`llmgw-wire compat [INPUT] [--against X]` checks INPUT (default `proto`: a
folder of `.proto` files, or a `.binpb`) against X: a folder, a `.binpb`, a
git revision (`git:REF`), buf's git input (`.git#branch=main`), a released
schema version shipped in the package (`1.0.0`), or by default the last
released one. Configuration comes from
`--config`, else from the nearest `buf.yaml` (v2, `breaking:`) or
`pyproject.toml` (`[tool.llmgw-wire.compat]`) that is the user's own; the
summary names the file that decided. Only the checker is imported;
the mapping reports (`--mapping`) import the mapping when asked for.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from google.protobuf.descriptor_pb2 import FileDescriptorSet

    from llmgw_wire.compat import Config, Finding
    from llmgw_wire.mapping._description import MappingChange

__all__ = ["add_arguments", "run"]

# Exit statuses: (compatible, breaking changes found, bad input), by --exit-codes.
_EXIT_CODES = {"llmgw": (0, 1, 2), "buf": (0, 100, 1)}
# compat.FORMATS, spelt out so that declaring the options imports nothing.
_FORMATS = ("text", "json", "msvs", "github-actions", "junit", "config-ignore-yaml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `llmgw-wire compat`."""
    parser.add_argument(
        "input",
        nargs="?",
        metavar="INPUT",
        help="the schema to check: a folder of .proto files (its proto root is found), "
        "or a .binpb; the same as --proto",
    )
    parser.add_argument(
        "--proto",
        default=None,
        metavar="DIR",
        help="the schema to check, as INPUT (default: proto)",
    )
    parser.add_argument(
        "--against",
        metavar="SCHEMA",
        help="the schema peers may still run: a folder of .proto files, a .binpb, a git "
        "revision (git:REF, or REF when no such path exists), buf's git input "
        "(.git#branch=main, #tag=, #ref=, with subdir= and depth=), or a released schema "
        "version shipped in the package (e.g. 1.0.0); default: the last released schema",
    )
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="PATH",
        help="report only findings in this file or folder (as named on the command line, "
        "or as the file is named in the schema); repeatable",
    )
    parser.add_argument(
        "--exclude-path",
        action="append",
        default=[],
        metavar="PATH",
        help="report no findings in this file or folder; repeatable",
    )
    parser.add_argument(
        "--category",
        choices=("WIRE", "WIRE_JSON"),
        default=None,
        help="buf's category of rules to apply (default: the configuration's `use`, "
        "else WIRE_JSON)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a buf.yaml (v2; its breaking: section) or a pyproject.toml "
        "([tool.llmgw-wire.compat]); default: the nearest one above INPUT, if any",
    )
    parser.add_argument(
        "--error-format",
        choices=_FORMATS,
        default="text",
        help="how findings are printed on standard output, as buf prints them "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--exit-codes",
        choices=tuple(_EXIT_CODES),
        default="llmgw",
        help="llmgw: 0 compatible, 1 breaking changes, 2 bad input; buf: 0, 100 and 1, "
        "as `buf breaking` (default: %(default)s)",
    )
    parser.add_argument(
        "--mapping",
        action="store_true",
        help="also report schema fields that no pair of llmgw_wire.mapping carries, and "
        "what changed in the mapping since the released version checked against",
    )


def _load(
    value: str, *, allow_git: bool, proto_root: Path | None
) -> tuple[FileDescriptorSet, str, Path | None]:
    """A schema named on the command line, how to print it, and its proto root if a folder."""
    from llmgw_wire import compat
    from llmgw_wire.compat import from_git_input, parse_git_input

    if value.startswith("git:") and allow_git:
        return compat.from_git(value.removeprefix("git:"), proto_root or "proto"), value, None
    if allow_git and parse_git_input(value) is not None:
        return from_git_input(value, _subdir(value, proto_root)), value, None
    path = Path(value)
    if path.is_dir():
        root = compat.find_proto_root(path)
        return compat.compile_protos(root), value, root
    if path.exists():
        return compat.read_descriptor_set(path), value, None
    if allow_git:
        version = value.removeprefix("v")
        if version in compat.baseline_versions():
            return compat.baseline(version), f"schema {version}", None
        if _is_revision(value):
            return compat.from_git(value, proto_root or "proto"), f"git:{value}", None
    what = (
        "a file, a folder, a released version or a git revision"
        if allow_git
        else "a file or a folder"
    )
    raise compat.CompatError(f"Expected {what}, got {value!r}")


def _subdir(value: str, proto_root: Path | None) -> str | None:
    """The checked schema's folder inside the repository of a local git input, if it is in it."""
    repository = Path(value.partition("#")[0])
    if proto_root is None or not repository.is_dir():
        return None
    top = (repository.parent if repository.name == ".git" else repository).resolve()
    try:
        return proto_root.resolve().relative_to(top).as_posix()
    except ValueError:
        return None


def _is_revision(ref: str) -> bool:
    import subprocess

    try:
        result = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        return False
    return result.returncode == 0


def _config(args: argparse.Namespace, root: Path | None) -> tuple[Config | None, str]:
    """The configuration, and how to name its file in the summary ("" for none)."""
    from llmgw_wire.compat import find_config, load_config

    if args.config is not None:
        return load_config(args.config, root), args.config
    found = find_config(root if root is not None else Path.cwd())
    if found is None:
        return None, ""
    try:
        shown = found.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        shown = found.as_posix()
    return load_config(found, root), shown


def _select(findings: list[Finding], root: Path | None, args: argparse.Namespace) -> list[Finding]:
    """The findings that --path and --exclude-path keep, as buf's options of those names."""
    from llmgw_wire.compat import path_under

    def names(finding: Finding) -> tuple[str, ...]:
        shown = (root / finding.path).as_posix() if root is not None else finding.path
        return (finding.path, shown)

    def prefixes(paths: list[str]) -> tuple[str, ...]:
        return tuple(Path(path).as_posix() for path in paths)

    keep, drop = prefixes(args.path), prefixes(args.exclude_path)
    return [
        f
        for f in findings
        if (not keep or any(path_under(name, keep) for name in names(f)))
        and not any(path_under(name, drop) for name in names(f))
    ]


def _display(findings: list[Finding], root: Path | None) -> list[Finding]:
    # Point into the folder the user named, so that editors and CI annotations open the file.
    if root is None:
        return findings
    import attrs

    return [attrs.evolve(f, path=(root / f.path).as_posix()) for f in findings]


def run(args: argparse.Namespace) -> int:
    """Run `llmgw-wire compat`: exit 0 when compatible, else as `--exit-codes` says."""
    from llmgw_wire import compat

    ok, broken, bad = _EXIT_CODES[args.exit_codes]
    if args.input is not None and args.proto is not None and args.input != args.proto:
        print(
            f"llmgw-wire compat: error: INPUT {args.input!r} and --proto {args.proto!r} "
            "name two schemas; give one",
            file=sys.stderr,
        )
        return bad
    source = args.input or args.proto or "proto"
    notes: list[MappingChange] = []
    try:
        new, _, root = _load(source, allow_git=False, proto_root=None)
        if args.against is None:
            version = compat.baseline_versions()[-1]
            old, against = compat.baseline(version), f"schema {version}"
        else:
            old, against, _ = _load(args.against, allow_git=True, proto_root=root)
        config, config_file = _config(args, root)
        category = args.category or "WIRE_JSON"
        if args.category is not None and config is not None:
            config = compat.Config(
                except_=config.except_,
                ignore=config.ignore,
                ignore_only=config.ignore_only,
                source=config.source,
            )
        findings = _select(compat.check(old, new, category=category, config=config), root, args)
        if args.mapping:
            from llmgw_wire.mapping import _description as description

            findings = sorted([*findings, *description.unmapped_fields(new)])
            released = against.removeprefix("schema ") if against.startswith("schema ") else None
            if released is not None:
                notes = description.mapping_changes(released)
    except compat.CompatError as exc:
        print(f"llmgw-wire compat: error: {_one_line(str(exc))}", file=sys.stderr)
        return bad
    shown = _display(findings, root)
    # A closed pipe shows here (BrokenPipeError), before the summary.
    _write_out(compat.render(shown, args.error_format))
    if notes:
        from llmgw_wire._cli.compat_mapping import render_changes

        # Notices, not findings: beside the findings for the machine-read
        # formats, on standard error where they would spoil a text or XML report.
        text = render_changes(notes, args.error_format)
        if args.error_format in ("json", "github-actions"):
            _write_out(text)
        else:
            sys.stderr.write(text)
    rules = ", ".join(config.use) if config is not None and config.use else category
    if config_file:
        # Which file decided, always: one found by searching may not be where one expects.
        rules += f"; config {config_file}"
    count = f"{len(findings)} breaking change{'' if len(findings) == 1 else 's'}"
    verdict = count if findings else "compatible"
    from llmgw_wire.compat import escape_text

    summary = escape_text(f"{source} against {against} ({rules})")
    print(f"compat: {summary}: {verdict}", file=sys.stderr)
    return broken if findings else ok


def _write_out(text: str) -> None:
    """Write `text` to standard output whole, or raise `BrokenPipeError`.

    With PYTHONUNBUFFERED set (as in many container images), `sys.stdout`
    writes straight to its file descriptor and drops what one `write(2)` did
    not take: a reader that left midway would cut the report short, with no
    error, and the command would end with the verdict's status, not 141.
    """
    stdout = sys.stdout
    raw = getattr(stdout, "buffer", None)
    if raw is None:  # a text-only stream (one a caller put in its place)
        stdout.write(text)
        stdout.flush()
        return
    stdout.flush()
    data = memoryview(text.encode(stdout.encoding or "utf-8", stdout.errors or "strict"))
    while data:
        written = raw.write(data)
        if written is None:  # a non-blocking descriptor that is full: wait until it is not
            import select

            select.select([], [raw], [])
            continue
        data = data[written:]
    raw.flush()


def _one_line(message: str) -> str:
    """An error as one line: its lines joined, control characters escaped."""
    from llmgw_wire.compat import escape_text

    text = ""
    for line in filter(None, (line.strip() for line in message.splitlines())):
        text += (" " if text.endswith(":") else "; " if text else "") + line
    return escape_text(text)
