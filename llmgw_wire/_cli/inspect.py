"""`llmgw-wire inspect`: a binary wire message, shown as the domain value it decodes to.

`--type` names what the bytes are: a message of the schema by its proto name
(`Register`, `StartShard`, `ShardStatus`, ..., or in full, `llmgw.v1.Register`)
or a domain model by its name (`Registration`, `Node`, `ShardCommand`,
`ShardSpec`, ...). A message that carries more than one domain model decodes
to the whole one: `Register` to a `Registration` (the node and its shards),
`StartShard` to a `ShardCommand` (the spec and its startup timeout). The
stream's envelopes, `AgentMessage` and `ControlMessage`, show the member they
carry, keyed by its name as in protobuf's JSON.

The value is printed as JSON (the library's JSON codec, `--format json`, the
default) or as an indented tree (`--format tree`). Secrets (the fields the
schema marks `[debug_redact = true]`, such as `api_key`) are left out of JSON
and shown as `<secret str, not shown>` in a tree, unless `--show-secrets`.

Exit status: 0 when the bytes decode; 1 when they are not a message of that
type (or cannot be read, or are longer than the 4 MiB a message may be: at
most one byte past that is read, so `/dev/zero` or an endless pipe is refused),
with a message naming the type and the problem; 2 for a usage error, such as a
type this version does not know. A reader that closes the pipe early
(`| head -1`) ends the command quietly with status 141, as SIGPIPE would.
"""

from __future__ import annotations

import argparse
import datetime as dt
import enum
import json
import sys
from collections.abc import Mapping
from typing import Any

import attrs

from llmgw_wire.codec import DEFAULT_MAX_SIZE, decode
from llmgw_wire.codec._schema import CLASSES
from llmgw_wire.codec.envelope import UnknownMember, envelope_codec
from llmgw_wire.codec.json import make_json_converter
from llmgw_wire.compat import read_at_most
from llmgw_wire.domain import Registration, ShardCommand
from llmgw_wire.errors import DecodeError, EncodeError, shown
from llmgw_wire.mapping import ENVELOPES, PAIRS_WITH_MESSAGE, is_secret

__all__ = ["TYPES", "add_arguments", "render_tree", "run"]

_PACKAGE = "llmgw.v1."
# The whole domain value of a message that carries more than one.
_WHOLE = {"Register": Registration, "StartShard": ShardCommand}
# The stream's envelopes, by their short names.
_ENVELOPES: tuple[str, ...] = tuple(e.wire.removeprefix(_PACKAGE) for e in ENVELOPES)


def _types() -> dict[str, tuple[str, type | None]]:
    """Every name `--type` takes -> (the proto name of its message, its domain model).

    The domain model is None for an envelope.
    """
    by_message: dict[str, list[type]] = {}
    for pair in PAIRS_WITH_MESSAGE:
        by_message.setdefault(pair.wire.removeprefix(_PACKAGE), []).append(pair.domain)
    names: dict[str, tuple[str, type | None]] = {}
    for message, domains in by_message.items():
        whole = domains[0] if len(domains) == 1 else _WHOLE[message]
        names[message] = names[_PACKAGE + message] = (message, whole)
        for domain in domains:
            names.setdefault(domain.__name__, (message, domain))
    for envelope in _ENVELOPES:
        names[envelope] = names[_PACKAGE + envelope] = (envelope, None)
    return names


#: The names `--type` takes: (proto name of the message, domain model or None for an envelope).
TYPES: dict[str, tuple[str, type | None]] = _types()


def _type_list() -> str:
    messages = sorted({message for message, _ in TYPES.values()})
    domains = sorted({d.__name__ for _, d in TYPES.values() if d is not None} - set(messages))
    return f"messages: {', '.join(messages)}; domain models: {', '.join(domains)}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments: the input, its type, the format and whether to show secrets."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "TYPE is one of the " + _type_list()
    parser.add_argument("file", metavar="FILE", help="the binary message; - reads stdin")
    parser.add_argument(
        "--type", "-t", required=True, metavar="TYPE", help="what the bytes are (see below)"
    )
    parser.add_argument(
        "--format",
        "-f",
        choices=("json", "tree"),
        default="json",
        help="JSON (the default) or an indented tree",
    )
    parser.add_argument(
        "--show-secrets", action="store_true", help="show api_key and other secrets as they are"
    )


class _TooLargeError(Exception):
    """The input is longer than the codec would accept."""


def _read(file: str) -> bytes:
    # At most one byte more than decode accepts: /dev/zero or an endless pipe
    # is refused once over the limit, not read into memory.
    if file == "-":
        data = read_at_most(sys.stdin.buffer, DEFAULT_MAX_SIZE)
    else:
        with open(file, "rb") as stream:
            data = read_at_most(stream, DEFAULT_MAX_SIZE)
    if len(data) > DEFAULT_MAX_SIZE:
        raise _TooLargeError
    return data


def _has_unknown_fields(data: bytes, message: str) -> bool:
    # Dropping unknown fields, at any depth, changes the size exactly when
    # there are some.
    parsed = CLASSES[_PACKAGE + message]()
    parsed.ParseFromString(data)
    size = parsed.ByteSize()
    parsed.DiscardUnknownFields()
    return bool(parsed.ByteSize() != size)


def run(args: argparse.Namespace) -> int:
    """Decode the file as the named type and print it; see the module's documentation."""
    if args.type not in TYPES:
        print(f"error: unknown type {args.type!r}; use one of the {_type_list()}", file=sys.stderr)
        return 2
    message, domain = TYPES[args.type]
    source = "stdin" if args.file == "-" else args.file
    try:
        data = _read(args.file)
    except OSError as exc:
        print(f"error: cannot read {source}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except _TooLargeError:
        limit = DEFAULT_MAX_SIZE // (1024 * 1024)
        print(f"error: {source} is larger than the {limit} MiB a message may be", file=sys.stderr)
        return 1
    try:
        opened = _decode(data, message, domain)
        text = _show(opened, args.format, show_secrets=args.show_secrets)
    except (DecodeError, EncodeError) as exc:
        print(f"error: {source}: {exc}", file=sys.stderr)
        return 1
    print(text)
    if _has_unknown_fields(data, message):
        print(
            f"note: {source} has fields that {_PACKAGE}{message} does not define "
            "(a newer peer's, or bytes of another type); they are not shown",
            file=sys.stderr,
        )
    return 0


def _decode(data: bytes, message: str, domain: type | None) -> object:
    if domain is not None:
        return decode(data, domain)
    codec = envelope_codec(_PACKAGE + message)
    value = codec.decode(data)
    if isinstance(value, UnknownMember):
        raise DecodeError(codec.name, value.reason)
    return _Opened(message, codec.member_of(value), value)


@attrs.frozen
class _Opened:
    """An envelope, its member's name and the domain value it carries."""

    message: str
    member: str
    value: object


def _show(opened: object, form: str, *, show_secrets: bool) -> str:
    if form == "tree":
        if isinstance(opened, _Opened):
            inner = render_tree(opened.value, show_secrets=show_secrets).splitlines()
            lines = [opened.message, f"  {opened.member}: {inner[0]}"]
            lines += [f"  {line}" for line in inner[1:]]
            return "\n".join(lines)
        return render_tree(opened, show_secrets=show_secrets)
    converter = make_json_converter(include_secrets=show_secrets)
    if isinstance(opened, _Opened):
        return json.dumps({opened.member: converter.unstructure(opened.value)}, indent=2)
    return json.dumps(converter.unstructure(opened), indent=2)


# --- the tree -----------------------------------------------------------------------


def render_tree(value: object, *, show_secrets: bool = False) -> str:
    """A domain value as an indented tree, one attribute a line.

    Scalars are written as in JSON (strings quoted, `null`, `true`), enums by
    value, durations as `H:MM:SS` and times in ISO 8601. A secret attribute
    that is set shows as `<secret str, not shown>` (`llmgw_wire.errors.shown`)
    unless `show_secrets`.
    """
    lines = [type(value).__name__]
    _attributes(value, 1, lines, show_secrets)
    return "\n".join(lines)


def _attributes(value: Any, depth: int, lines: list[str], show_secrets: bool) -> None:
    for field in attrs.fields(type(value)):
        item = getattr(value, field.name)
        if is_secret(type(value), field.name) and item and not show_secrets:
            lines.append(f"{'  ' * depth}{field.name}: {shown(item, secret=True)}")
        else:
            _item(field.name, item, depth, lines, show_secrets)


def _item(label: str, item: object, depth: int, lines: list[str], show_secrets: bool) -> None:
    indent = "  " * depth
    if attrs.has(type(item)):
        lines.append(f"{indent}{label}: {type(item).__name__}")
        _attributes(item, depth + 1, lines, show_secrets)
    elif isinstance(item, (tuple, list)):
        lines.append(f"{indent}{label}: {'[]' if not item else f'[{len(item)}]'}")
        for index, element in enumerate(item):
            _item(f"[{index}]", element, depth + 1, lines, show_secrets)
    elif isinstance(item, Mapping):
        lines.append(f"{indent}{label}: {'{}' if not item else ''}".rstrip())
        for key, element in item.items():
            _item(json.dumps(key), element, depth + 1, lines, show_secrets)
    else:
        lines.append(f"{indent}{label}: {_scalar(item)}")


def _scalar(item: object) -> str:
    if isinstance(item, enum.Enum):
        return json.dumps(item.value)
    if isinstance(item, dt.timedelta):
        return str(item)
    if isinstance(item, dt.datetime):
        return item.isoformat()
    return json.dumps(item)
