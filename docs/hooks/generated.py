"""Parts of the documentation written at build time from the code itself.

An mkdocs hook (`hooks:` in mkdocs.yml). A page asks for a part with a line of
its own, `<!-- generated: NAME -->`, and the build replaces that line with what
the generator NAME writes from the library:

* `mapping`: the mapping reference, one table per (wire message, domain
  model) pair, from `llmgw_wire.mapping.PAIRS`, each rule's `describe()` and
  the schema's own comments;
* `states`: the shard states on the wire and in the domain, from
  `state_from_wire` and `state_to_wire`;
* `envelopes`: which member of which envelope carries which domain value,
  from `llmgw_wire.mapping.ENVELOPES`;
* `compiled-source`: the functions the compiler writes for one pair, for
  both backends (`llmgw_wire.mapping._compiler`);
* `wire-messages`: every name of `llmgw_wire.v1`, with what it carries;
* `laws`: the round-trip laws `llmgw-wire fuzz` checks, from
  `llmgw_wire.testing.laws.LAWS`;
* `benchmarks`: the last measured benchmark tables, from the JSON that
  `make bench` wrote into `docs/reference/benchmarks.json`;
* `compat-rules`: the rules of the schema checker and their categories, from
  `llmgw_wire.compat.RULES`;
* `compat-deviations`: the checker's deliberate deviations from buf, from
  `llmgw_wire.compat.deviations()` (the data file `deviations.json`);
* `api-summary`: every name `llmgw_wire` exports, with its summary and a link
  to its entry in the API reference.

So the reference cannot drift from the code: what is added there shows here at
the next build, and what this module cannot render fails the build.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import griffe
from google.protobuf import descriptor_pb2
from mkdocs.exceptions import PluginError

import llmgw_wire
from llmgw_wire import v1
from llmgw_wire._gen.message_pool import default_message_pool
from llmgw_wire.conversions import state_from_wire, state_to_wire
from llmgw_wire.domain import State
from llmgw_wire.mapping import ENVELOPES, PAIRS, Pair, pair_for
from llmgw_wire.mapping._rules import (
    Constant,
    Embedded,
    FieldRule,
    FromContext,
    Message,
    Messages,
    NotCarried,
    Rule,
)
from llmgw_wire.mapping._table import mapped_fields

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

BENCHMARKS = Path(__file__).resolve().parent.parent / "reference" / "benchmarks.json"
LOAD = BENCHMARKS.with_name("load.json")
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)

#: The public modules whose API pages document the names `llmgw_wire` exports,
#: in the order the API summary lists them.
HOME_MODULES = (
    "llmgw_wire.domain",
    "llmgw_wire.conversions",
    "llmgw_wire.codec",
    "llmgw_wire.errors",
    "llmgw_wire.codec.json",
    "llmgw_wire.store",
)

# Rules whose attribute is not carried by a wire field of its own message.


def on_page_markdown(markdown: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace each `<!-- generated: NAME -->` line of a page with its part."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            known = ", ".join(sorted(GENERATORS))
            raise PluginError(f"{page.file.src_uri}: no generated part {name!r} (known: {known})")
        return GENERATORS[name]()

    return MARKER.sub(part, markdown)


# --- the schema, with its comments ---------------------------------------------------


@cache
def _schema() -> dict[str, tuple[descriptor_pb2.DescriptorProto, dict[tuple[int, ...], str]]]:
    """Every message of the generated schema by full name, with its file's comments by path."""
    data = resources.files("llmgw_wire").joinpath("_gen/llmgw_v1.binpb").read_bytes()
    fds = descriptor_pb2.FileDescriptorSet.FromString(data)
    found = {}
    for file in fds.file:
        comments = {
            tuple(loc.path): " ".join((loc.leading_comments + loc.trailing_comments).split())
            for loc in file.source_code_info.location
        }

        def walk(
            messages: Any, prefix: str, path: tuple[int, ...], comments: dict[tuple[int, ...], str]
        ) -> None:
            for i, message in enumerate(messages):
                name = f"{prefix}.{message.name}"
                own = (*path, i)
                found[name] = (
                    message,
                    {k[len(own) :]: v for k, v in comments.items() if k[: len(own)] == own},
                )
                walk(message.nested_type, name, (*own, 3), comments)

        walk(file.message_type, file.package, (4,), comments)
    return found


def _fields(message: str) -> dict[str, tuple[int, str]]:
    """The fields of a message by name: their number and the schema's comment on them."""
    descriptor, comments = _schema()[message]
    return {
        field.name: (field.number, comments.get((2, i), ""))
        for i, field in enumerate(descriptor.field)
    }


def _message_comment(message: str) -> str:
    return _schema()[message][1].get((), "")


# --- the mapping reference ----------------------------------------------------------


def _anchor(domain: type) -> str:
    return domain.__name__.lower()


def _link(domain: type) -> str:
    return f"[`{domain.__name__}`](#{_anchor(domain)})"


def _nested(rule: Rule) -> type | None:
    """The domain model a rule carries in another pair, if any."""
    if isinstance(rule, (Message, Messages, Embedded)):
        return rule.domain
    return None


def _reading_order() -> list[Pair]:
    """Every pair, each outer message followed depth-first by the pairs inside it."""
    inside = {_nested(rule) for pair in PAIRS for rule in pair.rules} - {None}
    order: list[Pair] = []

    def visit(pair: Pair) -> None:
        if pair in order:
            return
        order.append(pair)
        for rule in pair.rules:
            nested = _nested(rule)
            if nested is not None:
                visit(pair_for(nested))

    for pair in PAIRS:
        if pair.domain not in inside:
            visit(pair)
    for pair in PAIRS:  # anything reachable only from a cycle
        visit(pair)
    return order


def _used_by() -> dict[type, list[str]]:
    used: dict[type, list[str]] = {}
    for pair in PAIRS:
        for rule in pair.rules:
            nested = _nested(rule)
            if nested is not None:
                where = f"[`{pair.domain.__name__}.{rule.attr}`](#{_anchor(pair.domain)})"
                used.setdefault(nested, []).append(where)
    return used


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: no line break, no column break, no HTML."""
    # Code spans (odd parts) show `<` as it is; prose around them must escape it.
    parts = text.replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _rule_text(pair: Pair, rule: Rule, path: tuple[str, ...]) -> str:
    parts = [f"{rule.describe()}"]
    if isinstance(rule, FieldRule) and rule.made_of() == (rule.wire,) and rule.wire != rule.attr:
        parts.insert(0, "renamed")
    nested = _nested(rule)
    if nested is not None:
        parts.append(f"see {_link(nested)}")
    if isinstance(rule, Messages) and rule.context:
        given = ", ".join(f"`{attr}` is this message's `{wire}`" for attr, wire in rule.context)
        parts.append(f"each item's {given}")
    for claims in pair.shared_wire_fields().values():
        if path in claims:
            others = ", ".join(f"`{'.'.join(c)}`" for c in claims if c != path)
            parts.append(
                f"the same wire field as {others}: both decode from it, and must be equal to encode"
            )
    return "; ".join(parts)


def _rows(
    pair: Pair, root: Pair, message: str, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, str, str, str, str]]:
    """Table rows `(number, wire field, domain attribute, rule, schema comment)`."""
    fields = _fields(message)
    for rule in pair.rules:
        path = (*prefix, rule.attr)
        attr = f"`{'.'.join(path)}`"
        text = _rule_text(root, rule, path)
        if isinstance(rule, Embedded):
            yield "", "*flat fields, below*", attr, text, ""
            yield from _rows(pair_for(rule.domain), root, message, path)
        elif isinstance(rule, (Constant, NotCarried)):
            yield "", "*none*", attr, text, ""
        elif isinstance(rule, FromContext):
            yield "", "*the enclosing message's*", attr, text, ""
        elif isinstance(rule, FieldRule):
            if rule.wire not in fields:
                raise PluginError(
                    f"{pair.domain.__name__}.{rule.attr}: {message} has no field {rule.wire!r}"
                )
            number, comment = fields[rule.wire]
            wire = f"`{rule.wire}`"
            others = [field for field in rule.made_of() if field != rule.wire]
            if others:
                wire += ", with " + " and ".join(f"`{field}`" for field in others)
            yield str(number), wire, attr, text, comment


def _pair_section(pair: Pair, used_by: dict[type, list[str]]) -> str:
    name = pair.domain.__name__
    title = f"`{name}` in `{pair.wire}`" if pair.embedded else f"`{name}` ↔ `{pair.wire}`"
    out = [f"## {title} {{ #{_anchor(pair.domain)} }}", ""]
    api = f"[`{name}`][{pair.domain.__module__.rsplit('.', 1)[0]}.{name}]"
    if pair.embedded:
        out.append(
            f"The domain model {api} has no wire message of its own: its attributes are "
            f"fields of `{pair.wire}`, flattened, listed with the model it is part of."
        )
    else:
        wire_class = next(cls for cls, proto in _proto_names().items() if proto == pair.wire)
        out.append(
            f"The domain model {api} and the wire message `{pair.wire}` "
            f"(`llmgw_wire.v1.{wire_class.__name__}`)."
        )
        comment = _message_comment(pair.wire)
        if comment:
            out[-1] += f" The schema says: *{comment}*"
    if pair.domain in used_by:
        out[-1] += f" Part of {', '.join(used_by[pair.domain])}."
    out += [
        "",
        "| no. | wire field | domain attribute | rule | the schema's comment |",
        "| ---: | --- | --- | --- | --- |",
    ]
    for row in _rows(pair, pair, pair.wire):
        out.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
    rest = [f for f in _fields(pair.wire) if f not in mapped_fields(pair)]
    if rest and not pair.embedded:
        carried = []
        for field in rest:
            others = [
                other.domain
                for other in PAIRS
                if other.wire == pair.wire and not other.embedded and field in mapped_fields(other)
            ]
            where = f" ({', '.join(_link(d) for d in others)})" if others else ""
            carried.append(f"`{field}`{where}")
        out += [
            "",
            f"Other fields of `{pair.wire}`, carried by another model: {', '.join(carried)}.",
        ]
    return "\n".join(out)


def mapping() -> str:
    """The mapping reference: an index of the pairs, then a section per pair."""
    order = _reading_order()
    used_by = _used_by()
    out = [
        "| domain model | wire message | carried |",
        "| --- | --- | --- |",
    ]
    for pair in order:
        how = f"flattened into `{pair.wire}`" if pair.embedded else "a message of its own"
        out.append(f"| {_link(pair.domain)} | `{pair.wire}` | {how} |")
    sections = [_pair_section(pair, used_by) for pair in order]
    return "\n".join(out) + "\n\n" + "\n\n".join(sections) + "\n"


def states() -> str:
    """Shard states both ways, and the fallback for numbers this version does not know."""
    out = [
        "| wire value | number | decodes as | encoded from |",
        "| --- | ---: | --- | --- |",
    ]
    for member in v1.ShardStatusState:
        number = int(member)
        name = v1.ShardStatusState.betterproto_value_to_renamed_proto_names()[number]
        encoded = ", ".join(f"`{s}`" for s in State if state_to_wire(s) == number) or "*none*"
        out.append(f"| `{name}` | {number} | `{state_from_wire(number)}` | {encoded} |")
    newer = max(int(m) for m in v1.ShardStatusState) + 1
    out.append(
        f"| *any other number* (a newer peer's) | {newer}, ... | `{state_from_wire(newer)}` | |"
    )
    return "\n".join(out) + "\n"


def envelopes() -> str:
    """Which envelope member carries which domain value, in both directions."""
    out = [
        "| direction | envelope | member | no. | wire message | domain value |",
        "| --- | --- | --- | ---: | --- | --- |",
    ]
    directions = ("agent → control plane", "control plane → agent")
    for direction, envelope in zip(directions, ENVELOPES, strict=True):
        for member, domain in envelope.members:
            number, _comment = _fields(envelope.wire)[member]
            out.append(
                f"| {direction} | `{envelope.wire}` | `{member}` | {number} | "
                f"`{pair_for(domain).wire}` | {_mapping_link(domain)} |"
            )
    return "\n".join(out) + "\n"


def compiled_source() -> str:
    """The source the compiler writes for one pair (a GPU), for both backends."""
    from llmgw_wire.codec._binary import compiled_upb
    from llmgw_wire.codec._cattrs_converter import compiled_betterproto2
    from llmgw_wire.domain import GPU

    out = []
    for name, compiled in (("upb", compiled_upb()), ("betterproto2", compiled_betterproto2())):
        out.append(f'=== "{name}"\n\n    ```python\n')
        out.extend(f"    {line}".rstrip() + "\n" for line in compiled.sources[GPU].splitlines())
        out.append("    ```\n")
    return "\n".join(out)


# --- the wire layer and the API summary ---------------------------------------------------


def _first_paragraph(doc: str | None) -> str:
    text = inspect.cleandoc(doc or "")
    return " ".join(text.split("\n\n", 1)[0].split())


@cache
def _proto_names() -> dict[type, str]:
    """The full proto name of every generated message class."""
    prefix = "type.googleapis.com/"
    return {cls: url.removeprefix(prefix) for url, cls in default_message_pool.url_to_type.items()}


def wire_messages() -> str:
    """Every name of `llmgw_wire.v1`, its proto name and what it carries."""
    proto_names = _proto_names()
    out = [
        "| name | proto name | carries | the schema's comment |",
        "| --- | --- | --- | --- |",
    ]
    for name in v1.__all__:
        obj = getattr(v1, name)
        proto = proto_names.get(obj, "")
        carried = [_mapping_link(p.domain) for p in PAIRS if p.wire == proto]
        if obj is v1.ShardStatusState:
            proto, carried = "llmgw.v1.ShardStatus.State", ["[`State`][llmgw_wire.domain.State]"]
        elif name in {"AgentMessage", "ControlMessage"}:
            carried = ["the envelope: see [the stream](../guides/stream.md#what-travels)"]
        elif name.startswith("AgentService"):
            proto = "llmgw.v1.AgentService"
            carried = ["the gRPC service; see [`llmgw_wire.stream`](stream.md)"]
        summary = _first_paragraph(obj.__doc__)
        row = [f"`{name}`", f"`{proto}`", ", ".join(carried), summary]
        out.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
    return "\n".join(out) + "\n"


def _mapping_link(domain: type, base: str = "../reference/") -> str:
    """A link to a model's section of the mapping reference, from a page in another folder."""
    return f"[`{domain.__name__}`]({base}mapping.md#{_anchor(domain)})"


@cache
def _griffe_package() -> griffe.Module:
    loaded = griffe.load(
        "llmgw_wire",
        docstring_parser="google",
        extensions=griffe.load_extensions("griffe_sphinx"),
    )
    assert isinstance(loaded, griffe.Module)
    return loaded


def api_summary() -> str:
    """Every name `llmgw_wire` exports, grouped by the module that documents it."""
    package = _griffe_package()
    homes: dict[str, list[str]] = {module: [] for module in HOME_MODULES}
    unhomed = []
    for name in llmgw_wire.__all__:
        obj = getattr(llmgw_wire, name)
        home = next(
            (
                m
                for m in HOME_MODULES
                if name in importlib.import_module(m).__all__
                and getattr(importlib.import_module(m), name) is obj
            ),
            None,
        )
        if home is None:
            unhomed.append(name)
        else:
            homes[home].append(name)
    out = []
    for module, names in homes.items():
        if not names:
            continue
        page = module.removeprefix("llmgw_wire.")
        out += [
            f"### [`{module}`]({page}.md)",
            "",
            "| name | summary |",
            "| --- | --- |",
        ]
        for name in names:
            doc = package[name].docstring
            summary = _first_paragraph(doc.value if doc else "")
            out.append(f"| [`{name}`][{module}.{name}] | {_cell(summary)} |")
        out.append("")
    if unhomed:
        out += ["### Defined in the package itself", "", "| name | summary |", "| --- | --- |"]
        for name in unhomed:
            doc = package[name].docstring
            out.append(f"| `{name}` | {_cell(_first_paragraph(doc.value if doc else ''))} |")
    return "\n".join(out) + "\n"


def compat_rules() -> str:
    """The schema checker's rules, by buf's name, with the categories that apply them."""
    from llmgw_wire import compat

    out = ["| rule | " + " | ".join(f"`{c}`" for c in compat.CATEGORIES) + " |"]
    out.append("| --- |" + " :---: |" * len(compat.CATEGORIES))
    for name, categories in sorted(compat.RULES.items()):
        marks = " | ".join("✓" if c in categories else "" for c in compat.CATEGORIES)
        out.append(f"| `{name}` | {marks} |")
    return "\n".join(out) + "\n"


def compat_deviations() -> str:
    """The schema checker's deliberate deviations from buf, one row each, with the reason."""
    from llmgw_wire import compat

    out = ["| id | corpus case | rule, where | | why |", "| --- | --- | --- | --- | --- |"]
    for d in compat.deviations():
        where = f"`{d.rule}` at {d.path}:{d.line} ({', '.join(d.categories)})"
        kind = "the checker only" if d.kind == "extra" else "buf only"
        out.append(f"| `{d.id}` | {_cell(d.case)} | {where} | {kind} | {_cell(d.reason)} |")
    return "\n".join(out) + "\n"


def laws() -> str:
    """The laws of the mapping, with the domain models each holds for."""
    from llmgw_wire.testing.laws import LAWS

    out = ["| law | what it says | models |", "| --- | --- | --- |"]
    for law in LAWS:
        models = ", ".join(_mapping_link(model, "../reference/") for model in law.models)
        out.append(f"| `{law.name}` | {_cell(law.summary)} | {models} |")
    return "\n".join(out) + "\n"


def benchmarks() -> str:
    """The benchmark tables of the last committed run, with the machine it ran on."""
    data = json.loads(BENCHMARKS.read_text())
    env, settings = data["environment"], data["settings"]
    pinned = f"pinned to CPU {env['pinned_cpu']}" if env["pinned_cpu"] is not None else "not pinned"
    when = f"on {env['date']}" if env.get("date") else "(the run did not record its date)"
    versions = ", ".join(f"{name} {version}" for name, version in env["versions"].items())
    out = [
        f"Measured {when} on {env['cpu_model']} ({env['platform']}), "
        f"{env['implementation']} {env['python']}, protobuf's `{env['protobuf_backend']}` "
        f"backend, {pinned}, load average {env['loadavg_start'][0]:.2f} at the start and "
        f"{env['loadavg_end'][0]:.2f} at the end; {versions}. Each figure is the median of "
        f"{settings['repetitions']} batches of about {settings['batch_ms']:g} ms "
        f"(garbage collection {settings['gc']}).",
        "",
    ]
    messages = list(dict.fromkeys(row["message"] for row in data["results"]))
    for message in messages:
        size = data["sizes"].get(message)
        out += [
            f"### {message}" + (f" ({size} bytes)" if size is not None else ""),
            "",
            "| operation | contender | median µs | CPU µs | spread | vs the first |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        last = None
        for row in (r for r in data["results"] if r["message"] == message):
            operation = row["operation"] if row["operation"] != last else ""
            last = row["operation"]
            out.append(
                f"| {_cell(operation)} | {row['contender']} | {row['median_ns'] / 1000:.2f} | "
                f"{row['cpu_median_ns'] / 1000:.2f} | {row['spread']:.1%} | "
                f"{row['ratio_to_first']:.2f}x |"
            )
        out.append("")
    storm = data["storm"]
    out += [
        "### The registration storm",
        "",
        f"{storm['registrations']} registrations of {storm['bytes_each']} bytes, each decoded "
        "and adopted (kept by node id), in one thread:",
        "",
        "| garbage collection | wall s | CPU s | of which collecting, s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for key in ("gc_on", "gc_tuned", "gc_frozen", "gc_off"):
        if key not in storm:
            continue
        run = storm[key]
        label = {
            "gc_on": "on, default thresholds",
            "gc_tuned": f"on, thresholds {tuple(run.get('thresholds', ()))}",
            "gc_frozen": (
                "on, default thresholds, "
                f"`llmgw_wire.gc.AdoptionFreezer({run.get('freeze_every')})`"
            ),
            "gc_off": "off",
        }[key]
        out.append(f"| {label} | {run['wall_s']:.3f} | {run['cpu_s']:.3f} | {run['gc_s']:.3f} |")
    out += [
        "",
        f"Memory: a tracemalloc peak of {storm['traced_peak_bytes'] / 2**20:.1f} MiB (Python "
        f"allocations, the adopted values included); the resident set grew by "
        f"{storm['maxrss_delta_bytes'] / 2**20:.1f} MiB.",
        "",
        "### Targets",
        "",
        "| target | measured | bound | |",
        "| --- | ---: | ---: | --- |",
    ]
    for target in data["targets"]:
        unit = target.get("unit", "x")
        bound = ("≥ " if target["at_least"] else "≤ ") + f"{target['bound']:g}{unit}"
        verdict = "met" if target["met"] else "**missed**"
        name = target["name"] + (f" ({target['context']})" if target.get("context") else "")
        out.append(f"| {_cell(name)} | {target['measured']:.2f}{unit} | {bound} | {verdict} |")
    return "\n".join(out) + "\n"


# --- the internals pages: code quoted from the package, and what import does -----------


def _quoted(*objects: Any) -> str:
    """The source of each object, as the package has it, in one Python block."""
    out = ["```python"]
    for obj in objects:
        out.extend([*inspect.getsource(obj).rstrip().splitlines(), ""])
    return "\n".join([*out[:-1], "```"]) + "\n"


def guarded_call() -> str:
    """`guarded` and `serializer`: the fast path's one guard, and the one serializer choice."""
    from llmgw_wire.codec import _guard

    return _quoted(_guard.guarded, _guard.serializer)


def decode_steps() -> str:
    """`parse`: the steps every binary decode takes, in order."""
    from llmgw_wire.codec import _binary as binary

    return _quoted(binary.parse, binary._parse_as)


def session_reader() -> str:
    """The session's reader task and the control plane's call, as the stream has them."""
    from llmgw_wire.stream import _server, _session

    return _quoted(_session._Session._read, _server.AgentService._call)


_IMPORT_PROBE = """
import json, os, sys
env = dict(os.environ)
import betterproto2
base_repr = betterproto2.Message.__repr__
name = sys.argv[1]
before = set(sys.modules)
__import__(name)
loaded = set(sys.modules) - before
changed = sorted(k for k in os.environ if os.environ.get(k) != env.get(k))
from llmgw_wire._gen.message_pool import default_message_pool as pool
classes = list(pool.url_to_type.values())
print(json.dumps({
    "modules": sorted(m for m in loaded if m.startswith("llmgw_wire")),
    "others": sorted(
        {m.split(".")[0] for m in loaded} - {"llmgw_wire"} - set(sys.stdlib_module_names)
        - {m for m in loaded if m.startswith("_")}
    ),
    "env": changed,
    "reprs": sorted(c.__name__ for c in classes if c.__repr__ is not base_repr),
    "from_string": len([c for c in classes if "FromString" in c.__dict__]),
}))
"""


def import_effects() -> str:
    """What importing each entry point does, measured in a fresh interpreter at build time."""
    import subprocess
    import sys

    names = [
        "llmgw_wire",
        "llmgw_wire.domain",
        "llmgw_wire.v1",
        "llmgw_wire.codec",
        "llmgw_wire.stream",
    ]
    rows = [
        "| import | modules of the library loaded | other top-level packages "
        "| environment variables changed | wire classes with the secret-aware repr "
        "| wire classes whose `FromString` is the library's |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in names:
        done = subprocess.run(
            [sys.executable, "-c", _IMPORT_PROBE, name],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        data = json.loads(done.stdout)
        env = ", ".join(f"`{k}`" for k in data["env"]) or "none"
        reprs = ", ".join(f"`{c}`" for c in data["reprs"]) or "none"
        rows.append(
            f"| `import {name}` | {len(data['modules'])} | {', '.join(data['others']) or 'none'} "
            f"| {env} | {reprs} | {data['from_string']} |"
        )
    return "\n".join(rows) + "\n"


def load() -> str:
    """The control planes of the last committed `make load` run, and the capacity they imply."""
    data = json.loads(LOAD.read_text())
    settings, summary = data["settings"], data["summary"]

    def figure(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    out = [
        f'`make load LOAD_ARGS="--rounds {settings["rounds"]} --json docs/reference/load.json"` '
        f"({settings['agents']:,} agents in {settings['processes']} processes, "
        f"{settings['connections']}, {settings['rounds']} interleaved rounds, "
        f"{settings['heartbeats']} heartbeats per agent; the medians over rounds; "
        f"{settings['cpus']} cores shared with other work, load average "
        f"{settings['load_average']} at the start; Python {settings['python']}, "
        f"grpcio {settings['grpc']}):",
        "",
        "| plane | CPU s per 1,000 exchanges | x raw (each round) | peak MiB per 1,000 agents "
        "| x raw | CPU µs per heartbeat | x raw | heartbeats/s seen | agents per core at 10 s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for plane, f in summary.items():
        rounds = ", ".join(f"{r:.2f}" for r in f.get("ratio_to_raw_rounds", []))
        out.append(
            f"| {plane} | {f['cpu_s_per_1000_exchanges']:.2f} | "
            f"{figure(f.get('ratio_to_raw'), '.2f')} ({rounds}) | "
            f"{f['peak_rss_mib_per_1000_agents']:.1f} | "
            f"{figure(f.get('rss_ratio_to_raw'), '.2f')} | "
            f"{figure(f['cpu_us_per_heartbeat'], '.1f')} | "
            f"{figure(f.get('heartbeat_ratio_to_raw'), '.2f')} | "
            f"{figure(f['heartbeats_per_s'], ',.0f')} | "
            f"{figure(f.get('agents_per_core_at_10s'), ',.0f')} |"
        )
    library = summary.get("library")
    if library and library.get("agents_per_core_at_10s"):
        out += [
            "",
            "The targets, each the median of the rounds' ratios of two planes run side by side:",
            "",
        ]
        out += [
            "| plane | over | per | at most | median (rounds) | |",
            "| --- | --- | --- | ---: | ---: | --- |",
        ]
        for t in data.get("targets", []):
            low, high = t["range"]
            verdict = "met" if t["met"] else "**missed**"
            out.append(
                f"| {t['plane']} | {t['over']} | {t['per']} | {t['at_most']:.2f}x | "
                f"{t['median']:.2f}x ({low:.2f}-{high:.2f}) | {verdict} |"
            )
        out += [
            "",
            f"The library's plane costs {library['ratio_to_raw']:.2f}x grpc.aio's raw floor per "
            f"exchange. At a heartbeat every 10 seconds, one core "
            f"of the library's plane carries the heartbeats of about "
            f"{round(library['agents_per_core_at_10s'], -3):,.0f} agents "
            f"({library['cpu_us_per_heartbeat']:.1f} µs each), and those agents' connections "
            f"take about {library['peak_rss_mib_per_1000_agents']:.0f} MiB per 1,000.",
        ]
        parts = data.get("codec_and_sessions")
        if parts:
            codec, sessions = parts
            out[-1] += (
                f" Of that ratio, the codec called inline on the floor accounts for "
                f"{codec:.2f}x (raw+codec over raw), and the stream's sessions for "
                f"{sessions:.2f}x (the library over raw+codec)."
            )
        bound = summary.get("library-id-only", {}).get("ratio_to_raw")
        if bound is not None:
            out[-1] += (
                f" With no registration's values built, the library's plane costs "
                f"{bound:.2f}x the floor (library-id-only)."
            )
        direct = summary.get("library-direct", {})
        if direct.get("ratio_to_raw") is not None and direct.get("cpu_us_per_heartbeat"):
            out[-1] += (
                f" Reading the call in `recv`, without the reader task (library-direct), "
                f"it would cost {direct['ratio_to_raw']:.2f}x per exchange and "
                f"{direct['cpu_us_per_heartbeat']:.1f} µs per heartbeat instead: the difference is "
                f"the price of a timeout that leaves the session usable."
            )
        reader = summary.get("raw+reader", {})
        codec = summary.get("raw+codec", {})
        if reader.get("cpu_us_per_heartbeat") and codec.get("cpu_us_per_heartbeat"):
            out[-1] += (
                f" A reader task on asyncio's queue over raw+codec, and nothing else of the "
                f"sessions (raw+reader), costs {reader['cpu_s_per_1000_exchanges']:.2f} s per "
                f"1,000 exchanges and {reader['cpu_us_per_heartbeat']:.1f} µs per heartbeat, "
                f"against raw+codec's {codec['cpu_s_per_1000_exchanges']:.2f} s and "
                f"{codec['cpu_us_per_heartbeat']:.1f} µs."
            )
    return "\n".join(out) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "api-summary": api_summary,
    "benchmarks": benchmarks,
    "compat-deviations": compat_deviations,
    "compat-rules": compat_rules,
    "compiled-source": compiled_source,
    "decode-steps": decode_steps,
    "envelopes": envelopes,
    "guarded-call": guarded_call,
    "import-effects": import_effects,
    "laws": laws,
    "load": load,
    "mapping": mapping,
    "session-reader": session_reader,
    "states": states,
    "wire-messages": wire_messages,
}
