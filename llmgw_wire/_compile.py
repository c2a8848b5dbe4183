"""Compile the mapping into conversion functions, once per wire backend.

For every pair this writes the source of two plain functions, `s_<Model>`
(wire message to domain value) and `u_<Model>` (domain value to wire message),
in the way attrs and cattrs generate `__init__` and hooks: one expression per
attribute, nested pairs calling each other directly, no per-field dispatch at
run time. The two backends differ only in a few idioms (how presence is
tested, which class is built), so they share everything else.
"""

from __future__ import annotations

import contextlib
import linecache
from typing import TYPE_CHECKING, Any

from llmgw_wire import _rules
from llmgw_wire.domain import State
from llmgw_wire.mapping import PAIRS, pair_for

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# Wire enum numbers of the shard states; a number not here decodes as FAILED.
STATE_NUMBERS: dict[State, int] = {
    State.PENDING: 1,
    State.STARTING: 2,
    State.LOADING: 3,
    State.READY: 4,
    State.DRAINING: 5,
    State.STOPPED: 6,
    State.FAILED: 7,
}


class Backend:
    """The idioms of one wire backend's message classes."""

    name = ""

    def __init__(self, classes: dict[str, type], state_values: dict[State, object]) -> None:
        self.classes = classes
        self.state_values = state_values

    def optional_message(self, g: StructureGen, wire: str, fn: str) -> str:
        """Source: the structured sub-message, or None when it is unset."""
        raise NotImplementedError

    def required_message(self, g: StructureGen, wire: str, fn: str, domain: type) -> str:
        """Source: the structured sub-message, the zero value when it is unset."""
        raise NotImplementedError


class Betterproto2(Backend):
    """betterproto2 dataclasses: an unset sub-message is None."""

    name = "betterproto2"

    def optional_message(self, g: StructureGen, wire: str, fn: str) -> str:
        return f"(None if (_v := {g.m}.{wire}) is None else {fn}(_v))"

    def required_message(self, g: StructureGen, wire: str, fn: str, domain: type) -> str:
        return f"({g.const(domain())} if (_v := {g.m}.{wire}) is None else {fn}(_v))"


class Upb(Backend):
    """Google's protobuf classes: presence is `HasField`, unset reads as the default."""

    name = "upb"

    def optional_message(self, g: StructureGen, wire: str, fn: str) -> str:
        return f"({fn}({g.m}.{wire}) if {g.m}.HasField({wire!r}) else None)"

    def required_message(self, g: StructureGen, wire: str, fn: str, domain: type) -> str:
        return f"({fn}({g.m}.{wire}) if {g.m}.HasField({wire!r}) else {g.const(domain())})"


class _Namespace:
    """The globals of the generated module: helpers, classes and constants."""

    def __init__(self, backend: Backend) -> None:
        self.globals: dict[str, Any] = {
            "_Invalid": _rules._Invalid,
            "_FAILED": State.FAILED,
            "_state_from_wire": {n: s for s, n in STATE_NUMBERS.items()},
            "_state_to_wire": dict(backend.state_values),
            "_millis": _rules.millis,
            "_from_millis": _rules.from_millis,
            "_epoch_millis": _rules.epoch_millis,
            "_from_epoch_millis": _rules.from_epoch_millis,
            "_leader_addr": _rules.leader_addr,
        }
        self._consts: dict[int, str] = {}

    def const(self, value: object) -> str:
        key = id(value)
        if key not in self._consts:
            name = f"_c{len(self._consts)}"
            self.globals[name] = value
            self._consts[key] = name
        return self._consts[key]


class StructureGen:
    """Writes `s_<Model>(m)`: the message `m` as a domain value."""

    m = "m"

    def __init__(self, backend: Backend, ns: _Namespace) -> None:
        self.backend = backend
        self.ns = ns
        self.params: list[str] = []

    def structure_fn(self, domain: type) -> str:
        return f"s_{domain.__name__}"

    def const(self, value: object) -> str:
        return self.ns.const(value)

    def param(self, name: str) -> None:
        self.params.append(name)

    def function(self, domain: type) -> str:
        pair = pair_for(domain)
        args = [f"{rule.attr}={rule.structure_expr(self)}" for rule in pair.rules]
        params = "".join(f", {p}=''" for p in self.params)
        body = ",\n        ".join(args)
        cls = self.const(domain)
        return f"def s_{domain.__name__}(m{params}):\n    return {cls}(\n        {body},\n    )\n"


class UnstructureGen:
    """Writes `u_<Model>(d)`: the domain value `d` as a wire message."""

    def __init__(self, backend: Backend, ns: _Namespace) -> None:
        self.backend = backend
        self.ns = ns
        self.lines: list[str] = []
        self.indent = "    "
        self.count = 0

    def unstructure_fn(self, domain: type) -> str:
        return f"u_{domain.__name__}"

    def const(self, value: object) -> str:
        return self.ns.const(value)

    def stmt(self, source: str) -> None:
        self.lines.extend(self.indent + line for line in source.splitlines())

    def local(self, expr: str) -> str:
        name = f"_{self.count}"
        self.count += 1
        self.stmt(f"{name} = {expr}")
        return name

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.stmt(header)
        outer, self.indent = self.indent, self.indent + "    "
        try:
            yield
        finally:
            self.indent = outer

    def inline(self, domain: type, obj: str) -> list[tuple[str, str]]:
        """The wire fields of `domain`'s pair, read from the domain value `obj`."""
        fields: dict[str, str] = {}
        for rule in pair_for(domain).rules:
            for wire, expr in rule.unstructure(self, obj):
                if wire in fields:
                    # One wire field for two attributes: they must agree.
                    self.stmt(f"if {fields[wire]} != {expr}: raise _Invalid")
                else:
                    fields[wire] = expr
        return list(fields.items())

    def function(self, domain: type, wire_class: type) -> str:
        fields = self.inline(domain, "d")
        cls = self.const(wire_class)
        args = ",\n        ".join(f"{wire}={expr}" for wire, expr in fields)
        body = "\n".join(self.lines)
        return f"def u_{domain.__name__}(d):\n{body}\n    return {cls}(\n        {args},\n    )\n"


class Compiled:
    """The conversion functions of one backend, by domain model."""

    def __init__(
        self,
        backend: Backend,
        structure: dict[type, Callable[..., Any]],
        unstructure: dict[type, Callable[[Any], Any]],
        source: str,
    ) -> None:
        self.backend = backend
        self.structure = structure
        self.unstructure = unstructure
        self.source = source


def compile_backend(backend: Backend) -> Compiled:
    """Generate, compile and return the conversion functions for `backend`."""
    ns = _Namespace(backend)
    chunks: list[str] = []
    for pair in PAIRS:
        chunks.append(StructureGen(backend, ns).function(pair.domain))
        if not pair.embedded:
            wire_class = backend.classes[pair.wire]
            chunks.append(UnstructureGen(backend, ns).function(pair.domain, wire_class))
    source = "\n\n".join(chunks)
    filename = f"<llmgw_wire generated {backend.name} conversions>"
    # Registered with linecache so that tracebacks through it show the source.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns.globals)  # noqa: S102 - our own generated code
    structure = {p.domain: ns.globals[f"s_{p.domain.__name__}"] for p in PAIRS}
    unstructure = {p.domain: ns.globals[f"u_{p.domain.__name__}"] for p in PAIRS if not p.embedded}
    return Compiled(backend, structure, unstructure, source)
