"""Compile the mapping into conversion functions, once per wire backend.

For every pair this writes the source of two plain functions, `s_<Model>`
(wire message to domain value) and `u_<Model>` (domain value to wire message),
in the way attrs and cattrs generate `__init__` and hooks: one expression per
attribute, nested pairs calling each other directly, no per-field dispatch at
run time. The two backends differ only in a few idioms (how presence is
tested, how repeated fields and maps are read, how a message is built), so
they share everything else.

The idioms are the fastest measured for each runtime (`make bench` has the
figures). Domain values are built with positional arguments, in attribute
order, which CPython binds faster than keywords; each line carries the
attribute's name as a comment. betterproto2 messages are dataclasses, built
by keyword. Google's upb messages are filled in place: a field assignment is
cheaper than a constructor keyword, sub-messages are filled where they live
(`parent.field.add()`) rather than built and copied in, empty repeated
fields and maps are not touched at all, since even an empty one costs upb a
container, and an int's range is left to upb, which refuses one that does not
fit its field.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import itertools
import re
import threading
import types
import typing
from collections.abc import Callable, Mapping
from sys import getsizeof
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

import attrs
from google.protobuf.message import DecodeError as PbDecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from llmgw_wire.domain import FrozenMap, State
from llmgw_wire.mapping import _rules as rules
from llmgw_wire.mapping._runtime import exec_generated
from llmgw_wire.mapping._table import PAIRS, STATES_BY_NUMBER, Pair
from llmgw_wire.mapping.secrets import SECRET_ATTRIBUTES

if TYPE_CHECKING:
    from collections.abc import Iterator

    from llmgw_wire.mapping._rules import ScalarKind


__all__ = [
    "Backend",
    "Betterproto2",
    "Compiled",
    "FillFunction",
    "Hooks",
    "StructureFunction",
    "StructureGen",
    "UnstructureFunction",
    "UnstructureGen",
    "Upb",
    "compile_backend",
    "exec_generated",
    "source_file_name",
]

_Tuple = TypeVar("_Tuple", bound=tuple[object, ...])

#: A compiled structure function: a wire message, with what its enclosing
#: message supplies as keywords, to a value of the domain model it was
#: compiled for. The tables that hold them are by model, which a type
#: checker cannot relate to the value: `Any`, here alone.
StructureFunction: TypeAlias = Callable[..., Any]
#: A compiled unstructure function: a value of its domain model (and no
#: other) to its wire message.
UnstructureFunction: TypeAlias = Callable[[Any], Any]
#: A compiled fill function of the upb backend: a value of its domain model
#: (and no other) written into a message of its wire class, in place.
FillFunction: TypeAlias = Callable[[Any, Any], None]


class Backend(Protocol):
    """The idioms of one wire backend's message classes: what the compiler asks of a backend."""

    #: The backend's name, in the file names of its generated functions.
    name: str
    #: Its message classes, by full proto name.
    classes: dict[str, type]
    #: Its value of each shard state.
    state_values: dict[State, object]
    #: Whether equal decoded values of scalars, tuples and maps are one object.
    shares_values: bool

    def optional_message(self, g: StructureGen, wire: str, fn: str) -> str:
        """Source: the structured sub-message, or None when it is unset."""
        ...

    def required_message(self, g: StructureGen, wire: str, fn: str, domain: type) -> str:
        """Source: the structured sub-message, the zero value when it is unset."""
        ...

    def repeated(self, g: StructureGen, wire: str) -> str:
        """Source: the items of a repeated field, as an iterable of its own."""
        ...

    def str_map(self, g: StructureGen, wire: str) -> str:
        """Source: a map field as a new dict."""
        ...

    def check(self, kind: ScalarKind, var: str) -> str:
        """Source: true when `var` cannot be carried by a wire scalar of `kind`."""
        ...

    def sequence(self, value: str) -> str:
        """Source: a domain sequence as the wire takes it, iterable more than once."""
        ...

    def mapping(self, value: str) -> str:
        """Source: a domain dict as the wire takes it."""
        ...

    def message(self, g: UnstructureGen, domain: type, value: str, *, optional: bool) -> str:
        """Source of the wire value for a sub-message field holding the domain `value`."""
        ...

    def messages(self, g: UnstructureGen, domain: type, value: str) -> str:
        """Source of the wire value for a repeated sub-message field, from the domain `value`."""
        ...

    def unstructure_functions(
        self, g: UnstructureGen, domain: type, wire_class: type, fields: list[tuple[str, str]]
    ) -> str:
        """The source of `u_<Model>` (and its helpers), given the checks in `g` and the fields."""
        ...


class _Classes:
    """What both backends hold: their classes and state values; the checks they share."""

    name = ""
    #: Whether decoded values of scalars, tuples and maps are shared when equal.
    shares_values = False

    def __init__(self, classes: dict[str, type], state_values: dict[State, object]) -> None:
        self.classes = classes
        self.state_values = state_values

    def check(self, kind: ScalarKind, var: str) -> str:
        """Source: true when `var` cannot be carried by a wire scalar of `kind`."""
        return rules.check_source(kind, var)


class Betterproto2(_Classes):
    """betterproto2 dataclasses: an unset sub-message is None; messages are built by keyword."""

    name = "betterproto2"

    def optional_message(self, g: StructureGen, wire: str, fn: str) -> str:
        return f"(None if (_v := {g.m}.{wire}) is None else {fn}(_v))"

    def required_message(self, g: StructureGen, wire: str, fn: str, domain: type) -> str:
        # A fresh zero value each time: a shared one would share its dicts.
        return f"({g.const(domain)}() if (_v := {g.m}.{wire}) is None else {fn}(_v))"

    def repeated(self, g: StructureGen, wire: str) -> str:
        return f"{g.m}.{wire}"

    def str_map(self, g: StructureGen, wire: str) -> str:
        return f"dict({g.m}.{wire})"

    def sequence(self, value: str) -> str:
        # The message owns its lists: never the domain's tuple, nor a view of it.
        return f"list({value})"

    def mapping(self, value: str) -> str:
        return f"dict({value})"

    def message(self, g: UnstructureGen, domain: type, value: str, *, optional: bool) -> str:
        fn = g.unstructure_fn(domain)
        if optional:
            return f"(None if (_v := {value}) is None else {fn}(_v))"
        return f"{fn}({value})"

    def messages(self, g: UnstructureGen, domain: type, value: str) -> str:
        return f"[{g.unstructure_fn(domain)}(_x) for _x in {value}]"

    def unstructure_functions(
        self, g: UnstructureGen, domain: type, wire_class: type, fields: list[tuple[str, str]]
    ) -> str:
        cls = g.const(wire_class)
        args = ",\n        ".join(f"{wire}={expr}" for wire, expr in fields)
        body = "\n".join(g.lines)
        return (
            f"def u_{domain.__name__}(d{g.signature()}):\n{body}\n"
            f"    return {cls}(\n        {args},\n    )\n"
        )


@attrs.frozen
class _SubMessage:
    """A sub-message field to fill in place, behind its placeholder name."""

    fn: str
    value: str
    optional: bool = False
    repeated: bool = False


class Upb(_Classes):
    """Google's protobuf classes: presence is `HasField`; messages are filled in place.

    `u_<Model>(d)` makes the message and has `f_<Model>(d, m)` fill it; nested
    pairs fill their part of the parent through the `f_` functions.
    """

    name = "upb"
    #: Equal values of scalars, tuples and maps decoded are one object (`StructureGen.interned`).
    shares_values = True

    def __init__(
        self,
        classes: dict[str, type],
        state_values: dict[State, object],
        str_entry: type | None = None,
    ) -> None:
        super().__init__(classes, state_values)
        #: The message class of a map entry of strings, for a decode class
        #: that reads such a map as its entries' bytes (None: none does).
        self.str_entry = str_entry

    def optional_message(self, g: StructureGen, wire: str, fn: str) -> str:
        return f"({fn}({g.m}.{wire}) if {g.m}.HasField({wire!r}) else None)"

    def required_message(self, g: StructureGen, wire: str, fn: str, domain: type) -> str:
        return f"({fn}({g.m}.{wire}) if {g.m}.HasField({wire!r}) else {g.const(domain)}())"

    def repeated(self, g: StructureGen, wire: str) -> str:
        # A slice is one C call; iterating the container is one per item.
        return f"{g.m}.{wire}[:]"

    def str_map(self, g: StructureGen, wire: str) -> str:
        # Key by key is twice as fast as dict() over upb's map container.
        if self.str_entry is None:
            return f"_str_map({g.m}.{wire})"
        return f"_str_map({g.m}.{wire}, {g.const(self.str_entry)})"

    def check(self, kind: ScalarKind, var: str) -> str:
        if kind in rules.INT_RANGES:
            # upb refuses an int out of its field's range itself (ValueError,
            # which the explaining walk then names); a bool or an int
            # subclass it would take, so the type is still ours to check.
            return f"type({var}) is not int"
        if kind == "string":
            # upb refuses a string it cannot encode as UTF-8 itself.
            return f"not isinstance({var}, str)"
        return rules.check_source(kind, var)

    def sequence(self, value: str) -> str:
        # upb copies what it is given; tuple() is free on the domain's tuples.
        return f"tuple({value})"

    def mapping(self, value: str) -> str:
        return value

    def message(self, g: UnstructureGen, domain: type, value: str, *, optional: bool) -> str:
        return g.placeholder(_SubMessage(f"f_{domain.__name__}", value, optional=optional))

    def messages(self, g: UnstructureGen, domain: type, value: str) -> str:
        return g.placeholder(_SubMessage(f"f_{domain.__name__}", value, repeated=True))

    def unstructure_functions(
        self, g: UnstructureGen, domain: type, wire_class: type, fields: list[tuple[str, str]]
    ) -> str:
        descriptor: Any = wire_class.DESCRIPTOR  # type: ignore[attr-defined]
        assigns: list[str] = []
        present = False  # whether an unconditional assignment marks `m` as set
        for wire, expr in fields:
            sub = g.placeholders.get(expr)
            if sub is None and any(p in expr for p in g.placeholders):
                raise NotImplementedError(f"{wire}: a sub-message inside an expression")
            field = descriptor.fields_by_name[wire]
            if sub is not None:
                assigns.extend(_fill_sub_message(wire, sub))
            elif field.message_type is not None and field.message_type.GetOptions().map_entry:
                assigns.extend(_fill_map(wire, expr))
            elif field.is_repeated:
                assigns.extend(_fill_repeated(wire, expr))
            else:
                assigns.append(f"m.{wire} = {expr}")
                present = True
        if not present:
            # A sub-message with nothing else to set is still sent, empty.
            assigns.insert(0, "m.SetInParent()")
        name = domain.__name__
        body = "\n".join([*g.lines, *(f"    {line}" for line in assigns)])
        return (
            f"def f_{name}(d, m{g.signature()}):\n{body}\n\n\n"
            f"def u_{name}(d{g.signature()}):\n    m = {g.const(wire_class)}()\n"
            f"    f_{name}(d, m{g.passed()})\n    return m\n"
        )


def _fill_sub_message(wire: str, sub: _SubMessage) -> list[str]:
    if sub.repeated:
        return [f"_a = m.{wire}.add", f"for _x in {sub.value}:", f"    {sub.fn}(_x, _a())"]
    if sub.optional:
        return [f"if (_v := {sub.value}) is not None:", f"    {sub.fn}(_v, m.{wire})"]
    return [f"{sub.fn}({sub.value}, m.{wire})"]


def _fill_map(wire: str, expr: str) -> list[str]:
    # upb's map update() is written in Python; item assignment is a C call.
    return [
        f"if {expr}:",
        f"    _t = m.{wire}",
        f"    for _k, _x in {expr}.items():",
        "        _t[_k] = _x",
    ]


def _fill_repeated(wire: str, expr: str) -> list[str]:
    return [f"if {expr}:", f"    m.{wire}.extend({expr})"]


# One empty map for every empty map decoded: fewer objects per node.
_NO_MAP = FrozenMap()


def _str_map(container: Any, entry: Any = None) -> FrozenMap:
    """A map field of upb's as a `FrozenMap`, the one shared map of its entries.

    Read as upb parsed it: a map, its entries as messages, or with `entry`
    (the entry's message class), its entries' bytes. Equal maps in the same
    order are one map (a GPU's NIC paths, a fleet's labels); by bytes, a
    map seen before is neither parsed nor read again.
    """
    if not container:
        return _NO_MAP
    as_bytes: bool | None = False
    if entry is not None:
        # Known by the container's class: a `hasattr` that fails costs an exception.
        as_bytes = _AS_BYTES.get(type(container))
        if as_bytes is None:
            as_bytes = _AS_BYTES[type(container)] = _holds_bytes(container)
    if as_bytes:
        key: tuple[object, ...] = tuple(container[:])
        shared = _MAPS_get(key)
        if shared is not None:
            return shared  # type: ignore[return-value]
    # Loops, not comprehensions: a comprehension is a function call of its own.
    items = {}
    if as_bytes:
        items = _parsed_entries(entry, key)
    elif hasattr(container, "add"):
        # A map read as its entries (how `decode` parses maps, so that an
        # entry with an unknown field keeps its key, as Go's runtime does):
        # a later entry for the same key wins. Sliced first: the container
        # has no iterator of its own, and a slice is one C call.
        for message in container[:]:
            items[message.key] = message.value
        key = (*items, *items.values())  # keys then values: as many of each
    else:
        for name in container:
            items[name] = container[name]
        key = (*items, *items.values())
    shared = _MAPS_get(key)
    if shared is None:
        shared = FrozenMap._owning(items)
        _MAPS.add(key, shared)
    return shared  # type: ignore[return-value]


def _parsed_entries(entry: Any, entries: tuple[object, ...]) -> dict[str, str]:
    """The items of a map of strings from its `entries`' bytes, each parsed as `entry`.

    Parsed only now: upb's own error (not a value refused) for bytes it
    refuses, and for an entry with unknown fields, whose groups would nest
    from the top here rather than from where the entry sits: `decode` then
    parses the message again with its maps in place, at their depth.
    """
    items = {}
    parse = entry.FromString
    for raw in entries:
        message = parse(raw)
        if UnknownFieldSet(message):
            raise PbDecodeError("a map entry with unknown fields, parsed out of place")
        items[message.key] = message.value
    return items


def _holds_bytes(container: object) -> bool:
    """Whether a container of upb's holds a map's entries as bytes: a repeated scalar field."""
    return not hasattr(container, "add") and hasattr(container, "append")


# By upb's container class: whether it holds a map's entries as their bytes.
_AS_BYTES: dict[type, bool] = {}


def _tuple(value: _Tuple) -> _Tuple:
    """`value`, a tuple of a repeated scalar field not seen before, shared from now on."""
    _TUPLES.add(value, value)
    return value


def _items(identities: tuple[int, ...], value: _Tuple) -> _Tuple:
    """`value`, a tuple of shared values not seen before, shared from now on by their identities.

    Sound as a key: the table keeps `value`, whose items are then alive, so
    no other object can have their identities while the key is in it; the
    same identities are the same objects. One object for the tuple of every
    node with the same weights, storage or fabrics: fewer objects for the
    collector to walk.
    """
    _ITEMS.add(identities, value)
    return value


#: The most values a table of shared values holds, and the most bytes of
#: memory their keys and values take (a peer chooses them: a fabric's texts
#: can be megabytes, a tuple can hold a hundred thousand numbers). A table
#: starts again when either is reached; a value of more is not shared.
INTERNED_MAX = 4096
INTERNED_BYTES = 1 << 22


def _held(parts: tuple[object, ...]) -> int:
    """The bytes a key (or a value) takes: its tuple, and each of its objects once."""
    held = 56 + 8 * len(parts)
    for part in parts:
        if isinstance(part, (str, bytes, int, float)):
            held += getsizeof(part)
        elif isinstance(part, tuple):
            held += _held(part)
        elif isinstance(part, FrozenMap):
            held += 104 * len(part) + sum(getsizeof(k) + getsizeof(v) for k, v in part.items())
    return held


class _Interned(dict[tuple[object, ...], object]):
    """A table of shared values by their wire fields, bounded in count and in bytes held."""

    __slots__ = ("_lock", "held")

    def __init__(self) -> None:
        super().__init__()
        self.held = 0
        # Decodes in threads (large messages) add too: the count of bytes stays true.
        self._lock = threading.Lock()

    def add(self, key: tuple[object, ...], value: object) -> None:
        """Share `value` under `key` from now on (a lookup is the dict's own `get`)."""
        # The value's own objects besides the key's (a map's, read from its entries' bytes).
        held = _held(key) if value is key else _held(key) + _held((value,))
        if held > INTERNED_BYTES:
            return
        with self._lock:
            if len(self) >= INTERNED_MAX or self.held + held > INTERNED_BYTES:
                self.reset()
            self[key] = value
            self.held += held

    def reset(self) -> None:
        """Start again, empty."""
        self.clear()
        self.held = 0


# The decoded maps and tuples of repeated scalars, shared when equal, in every
# decode of the process (upb's structure functions).
_MAPS = _Interned()
_TUPLES = _Interned()
_MAPS_get = _MAPS.get
# The tuples of shared values (a node's weights), by their items' identities.
_ITEMS = _Interned()


class _Namespace:
    """The globals of the generated module: helpers, classes and constants."""

    def __init__(self, backend: Backend, pairs: tuple[Pair, ...], hooks: Hooks) -> None:
        self.pairs = {pair.domain: pair for pair in pairs}
        self.hooks = hooks
        self.globals: dict[str, Any] = {
            "_Invalid": rules.Invalid,
            "_utf8_ok": rules.utf8_ok,
            "_FAILED": State.FAILED,
            "_state_from_wire": STATES_BY_NUMBER,
            "_state_to_wire": dict(backend.state_values),
            "_millis": rules.millis,
            "_from_millis": rules.from_millis,
            "_epoch_millis": rules.epoch_millis,
            "_from_epoch_millis": rules.from_epoch_millis,
            "_leader_addr": rules.leader_addr,
            "_str_map": _str_map,
            "_tuple": _tuple,
            "_TUPLES": _TUPLES,
            # A table's lookup bound once: a global's load, not a method's per value.
            "_TUPLES_get": _TUPLES.get,
            "_items": _items,
            "_ITEMS": _ITEMS,
            "_ITEMS_get": _ITEMS.get,
            "_new": object.__new__,
            "_repeat": itertools.repeat,
        }
        #: The keyword parameters of each structure function compiled so far, in order.
        self.structure_params: dict[type, tuple[str, ...]] = {}
        self._consts: dict[int, str] = {}
        self._setters: dict[tuple[type, str], str] = {}
        self._interned: dict[type, str] = {}

    def const(self, value: object) -> str:
        key = id(value)
        if key not in self._consts:
            name = self._unused(_const_name(value))
            self.globals[name] = value
            self._consts[key] = name
        return self._consts[key]

    def named(self, name: str, value: object) -> str:
        """A global of the generated module named after `name`, holding `value`."""
        name = self._unused(name)
        self.globals[name] = value
        return name

    def setter(self, domain: type, attr: str) -> str:
        """The global that sets `attr` on a new `domain` value: its slot's `__set__`."""
        key = (domain, attr)
        if key not in self._setters:
            slot = inspect.getattr_static(domain, attr)
            self._setters[key] = self.named(f"_set_{domain.__name__}_{attr}", slot.__set__)
        return self._setters[key]

    def interned(self, domain: type) -> str:
        """The global table of the `domain` values built so far, by their wire fields."""
        if domain not in self._interned:
            table = _Interned()
            name = self.named(f"_interned_{domain.__name__}", table)
            self.globals[f"{name}_get"] = table.get  # its lookup, bound once
            self._interned[domain] = name
        return self._interned[domain]

    def _unused(self, name: str) -> str:
        if name not in self.globals:
            return name
        n = 2
        while f"{name}_{n}" in self.globals:
            n += 1
        return f"{name}_{n}"


def _const_name(value: object) -> str:
    """A name that says what a constant of the generated code is: `_GPU`, `_wire_GPU`, ..."""
    if isinstance(value, type):
        prefix = "_" if attrs.has(value) else "_wire_"
        return prefix + value.__name__
    if isinstance(value, enum.Enum):
        return f"_{type(value).__name__}_{value.name}"
    if isinstance(value, types.FunctionType):
        return "_" + value.__name__.lstrip("_")
    if value in ("", 0, False, ()) and type(value) in (str, int, bool, tuple):
        return f"_zero_{type(value).__name__}"
    return f"_{type(value).__name__}_value"


def _settable(domain: type) -> bool:
    """Whether a `domain` value built slot by slot is the value `domain(...)` builds.

    So for a slotted attrs class whose `__init__` only converts and sets: no
    validators, no hooks around `__init__`, no cached hash, every attribute
    set by `__init__` and held in a slot of its own.
    """
    if not attrs.has(domain) or "__slots__" not in vars(domain):
        return False
    if any(hasattr(domain, hook) for hook in ("__attrs_pre_init__", "__attrs_post_init__")):
        return False
    if any(slot.startswith("_attrs_cached_hash") for slot in vars(domain)["__slots__"]):
        return False
    return all(
        f.init
        and f.validator is None
        and f.on_setattr in (None, attrs.setters.NO_OP)
        and isinstance(inspect.getattr_static(domain, f.name), types.MemberDescriptorType)
        for f in attrs.fields(domain)
    )


# What an expression of the structure functions gives, by how it begins.
_GIVES = {"tuple(": tuple, "_str_map(": FrozenMap}


def _gives(expr: str) -> type | None:
    return next((cls for start, cls in _GIVES.items() if expr.startswith(start)), None)


def _result(converter: Callable[..., Any]) -> object:
    """The type a converter returns: a class's own, a function's annotation."""
    if isinstance(converter, type):
        return converter
    return typing.get_type_hints(converter).get("return")


def _positional(domain: type, attributes: list[str]) -> bool:
    """Whether `domain(...)` takes `attributes` positionally, in this order."""
    fields = [f for f in attrs.fields(domain) if f.init]
    return not any(f.kw_only for f in fields) and [f.alias for f in fields] == attributes


class StructureGen:
    """Writes `s_<Model>(m)`: the message `m` as a domain value."""

    m = "m"

    def __init__(self, backend: Backend, ns: _Namespace) -> None:
        self.backend = backend
        self.ns = ns
        self.params: list[str] = []
        #: How many times the function's rules read each scalar field of `m`.
        self.reads: dict[str, int] = {}
        #: The fields read more than once: the local each is read into, first.
        self.once: dict[str, str] = {}

    def structure_fn(self, domain: type) -> str:
        return f"s_{domain.__name__}"

    def field(self, wire: str) -> str:
        self.reads[wire] = self.reads.get(wire, 0) + 1
        return self.once.get(wire) or f"{self.m}.{wire}"

    def takes_positionally(self, domain: type, keywords: tuple[str, ...]) -> bool:
        if domain in self.ns.hooks.structure:
            return False
        return self.ns.structure_params.get(domain) == keywords

    def rules(self, domain: type) -> tuple[rules.Rule, ...]:
        return self.ns.pairs[domain].rules

    def const(self, value: object) -> str:
        return self.ns.const(value)

    def param(self, name: str) -> None:
        self.params.append(name)

    def optional_message(self, wire: str, fn: str) -> str:
        return self.backend.optional_message(self, wire, fn)

    def required_message(self, wire: str, fn: str, domain: type) -> str:
        return self.backend.required_message(self, wire, fn, domain)

    def repeated(self, wire: str) -> str:
        return self.backend.repeated(self, wire)

    def converted(self, domain: type, attr: str, expr: str) -> str:
        """`expr` as attrs' `__init__` stores it: through the attribute's converter, if any."""
        converter: Any = attrs.fields_dict(domain)[attr].converter
        if converter is None or _gives(expr) is _result(converter):
            # The domain's converters return a value of their result type as it is.
            return expr
        if not callable(converter):
            raise NotImplementedError(f"{domain.__name__}.{attr}: a converter that is not callable")
        return f"{self.ns.const(converter)}({expr})"

    def str_map(self, wire: str) -> str:
        return self.backend.str_map(self, wire)

    def function(self, domain: type) -> str:
        """The source of `s_<Model>`, each field that its rules read more than once read once.

        Written twice: the first time counts the reads (what a rule reads is
        its own business), the second reads the fields read more than once
        into locals, first thing, and has the rules use those.
        """
        self._function(domain)
        self.once = {wire: f"_m_{wire}" for wire, n in self.reads.items() if n > 1}
        self.params.clear()
        head, body = self._function(domain)
        self.ns.structure_params[domain] = tuple(self.params)
        reads = "".join(f"    {local} = {self.m}.{wire}\n" for wire, local in self.once.items())
        return head + reads + body

    def _function(self, domain: type) -> tuple[str, str]:
        pair = self.ns.pairs[domain]
        reads = dict(self.reads)
        # Its parameters, and the arguments of a call if it cannot be built.
        exprs = [(rule.attr, rule.structure_expr(self)) for rule in pair.rules]
        called, self.reads = self.reads, reads
        params = "".join(f", {p}=''" for p in self.params)
        cls = self.const(domain)
        head = f"def s_{domain.__name__}(m{params}):\n"
        built = self.interned(domain, "o", "    ") if self.backend.shares_values else None
        built = built or self.built(domain, "o", "    ")
        if built is not None:
            return head, "".join(f"{line}\n" for line in built) + "    return o\n"
        self.reads = called
        if _positional(domain, [attr for attr, _ in exprs]):
            body = "".join(f"\n        {expr},  # {attr}" for attr, expr in exprs)
        else:
            body = "".join(f"\n        {attr}={expr}," for attr, expr in exprs)
        return head, f"    return {cls}({body}\n    )\n"

    def shared_tuple(self, rule: object, expr: str, local: str, indent: str) -> list[str]:
        """Statements that set `local` to the tuple `expr` gives, the one shared equal tuple.

        Empty when the backend does not share values or `expr` is not a
        repeated field's tuple. A lookup, and a call only for a tuple not seen
        before: a repeated field of a value not itself shared (a GPU's NVLink
        peers, a shard's GPUs) is one tuple for every value that has it.
        """
        if not (self.backend.shares_values and expr.startswith("tuple(")):
            return []
        if type(rule) is rules.Repeated:
            return [
                f"{indent}{local} = _TUPLES_get(_t := {expr})",
                f"{indent}if {local} is None:",
                f"{indent}    {local} = _tuple(_t)",
            ]
        if type(rule) is rules.Messages and not rule.context and self.shares(rule.domain):
            # Its items are shared values (a node's weights, storage, fabrics):
            # the same items, the same tuple, found by their identities (`_items`).
            return [
                f"{indent}{local} = _ITEMS_get(_k := tuple(map(id, _t := {expr})))",
                f"{indent}if {local} is None:",
                f"{indent}    {local} = _items(_k, _t)",
            ]
        return []

    def shares(self, domain: type) -> bool:
        """Whether a value of `domain` is a table's shared value as it is built (`interned`).

        Values of scalars alone are; with a backend that `shares_values`,
        values of tuples and maps too. Never a value with a secret, nor one
        built by a hook or by anything but `built`'s positional slot stores.
        """
        rules_ = self.ns.pairs[domain].rules
        kinds: tuple[type, ...] = (
            (rules.Scalar, rules.Repeated, rules.StrMap)
            if self.backend.shares_values
            else (rules.Scalar,)
        )
        return (
            domain not in self.ns.hooks.structure
            and all(type(rule) in kinds for rule in rules_)
            and not any(owner is domain for owner, _ in SECRET_ATTRIBUTES)
            and _positional(domain, [rule.attr for rule in rules_])
            and _settable(domain)
        )

    def built(
        self, domain: type, var: str, indent: str, ready: list[str] | None = None
    ) -> list[str] | None:
        """Statements that build a `domain` value from `m` into `var`, slot by slot; None if not.

        What attrs' `__init__` does for a frozen slotted class with no
        validators, unrolled: each slot set through its descriptor (no
        `object.__setattr__` lookup by name), each converter applied unless
        the expression already gives its result. A value embedded in the same
        message (a GPU's health) is built inline, with no call of its own.
        """
        rules_ = self.ns.pairs[domain].rules
        params, reads = list(self.params), dict(self.reads)
        exprs = ready or [rule.structure_expr(self) for rule in rules_]
        # The function's own parameters are already declared (`function` read
        # its rules first); an embedded value that takes some of its own is
        # built by its own function.
        takes_own = self.params != params and var != "o"
        self.params[:] = params
        if takes_own or not (
            _positional(domain, [rule.attr for rule in rules_]) and _settable(domain)
        ):
            self.reads = reads  # none of these reads is written
            return None
        lines = [f"{indent}{var} = _new({self.const(domain)})"]
        for rule, expr in zip(rules_, exprs, strict=True):
            value = expr
            if isinstance(rule, rules.Embedded) and rule.domain not in self.ns.hooks.structure:
                local = f"_{var}_{rule.attr}"
                deeper = indent + ("    " if rule.present_if else "")
                inner = self.interned(rule.domain, local, deeper)
                if inner is None:
                    inner = self.built(rule.domain, local, deeper)
                if inner is not None:
                    value = local
                    if rule.present_if:
                        lines.append(f"{indent}if {self.field(rule.present_if)}:")
                        lines += [*inner, f"{indent}else:", f"{indent}    {local} = None"]
                    else:
                        lines += inner
            setter = self.ns.setter(domain, rule.attr)
            if ready is None:
                value = self.converted(domain, rule.attr, value)
                if value == expr and (
                    shared := self.shared_tuple(rule, expr, f"_{var}_{rule.attr}", indent)
                ):
                    lines += shared
                    value = f"_{var}_{rule.attr}"
            lines.append(f"{indent}{setter}({var}, {value})")
        return lines

    def interned(self, domain: type, var: str, indent: str) -> list[str] | None:
        """`built`, for a value of scalars alone: equal values share one object; None if not.

        The value's wire fields are its key in a table of the values built so
        far (bounded: `_Interned`), so that a GPU's fabric, the same for every
        GPU of an NVLink domain, is one object and one set of strings for
        them all: fewer objects for the garbage collector to walk, less memory.
        A backend that `shares_values` shares values of tuples and maps too
        (a GPU's health, a MIG slice, a shard's placement), each field read
        once into a local. The values are frozen, so sharing one is not seen
        but by `is`. A value with a secret is never kept in a table: it lives
        no longer than its message.
        """
        if not self.shares(domain):
            return None
        rules_ = self.ns.pairs[domain].rules
        shares = self.backend.shares_values
        counted = dict(self.reads)
        reads: list[str] = []
        if shares:
            fields = [f"{var}_{rule.attr}" for rule in rules_]
            for rule, local in zip(rules_, fields, strict=True):
                # A tuple here is shared with its value: no table of its own.
                expr = self.converted(domain, rule.attr, rule.structure_expr(self))
                reads.append(f"{indent}{local} = {expr}")
            inner = self.built(domain, var, indent + "    ", ready=fields)
        else:
            fields = [rule.structure_expr(self) for rule in rules_]
            inner = self.built(domain, var, indent + "    ")
        if inner is None:
            self.reads = counted  # none of these reads is written
            return None
        key = ", ".join(fields) + ("," if len(fields) == 1 else "")
        table = self.ns.interned(domain)
        return [
            *reads,
            f"{indent}{var}_key = ({key})",
            f"{indent}{var} = {table}_get({var}_key)",
            f"{indent}if {var} is None:",
            *inner,
            f"{indent}    {table}.add({var}_key, {var})",
        ]


class UnstructureGen:
    """Writes `u_<Model>(d)`: the domain value `d` as a wire message."""

    def __init__(self, backend: Backend, ns: _Namespace) -> None:
        self.backend = backend
        self.ns = ns
        self.lines: list[str] = []
        self.indent = "    "
        self.count = 0
        self.placeholders: dict[str, _SubMessage] = {}
        #: The domain model whose attributes are being read (a nested one, inline).
        self.domain: type = object
        #: Keyword parameters of the function, each a wire field a caller may give.
        self.params: list[str] = []

    def param(self, name: str) -> None:
        """Take the wire field `name` as a keyword parameter, None by default."""
        self.params.append(name)

    def signature(self) -> str:
        """The keyword parameters, as they follow `d` (or `d, m`) in a `def`."""
        return "".join(f", {p}=None" for p in self.params)

    def passed(self) -> str:
        """The keyword parameters, passed on to an inner function."""
        return "".join(f", {p}={p}" for p in self.params)

    def unstructure_fn(self, domain: type) -> str:
        return f"u_{domain.__name__}"

    def rules(self, domain: type) -> tuple[rules.Rule, ...]:
        return self.ns.pairs[domain].rules

    def const(self, value: object) -> str:
        return self.ns.const(value)

    def stmt(self, source: str) -> None:
        self.lines.extend(self.indent + line for line in source.splitlines())

    def local(self, expr: str) -> str:
        # Numbered, and named for the attribute it reads where there is one:
        # `_3_memory_total_mb = d.memory_total_mb`.
        attribute = re.fullmatch(r"(?:\w+\()?[\w.]*\.(\w+)\)?", expr)
        suffix = f"_{attribute.group(1)}" if attribute else ""
        name = f"_{self.count}{suffix}"
        self.count += 1
        self.stmt(f"{name} = {expr}")
        return name

    def placeholder(self, sub: _SubMessage) -> str:
        """A name standing for a sub-message the backend fills in place."""
        name = f"_sub{len(self.placeholders)}_"
        self.placeholders[name] = sub
        return name

    def check(self, kind: ScalarKind, var: str) -> str:
        return self.backend.check(kind, var)

    def sequence(self, value: str) -> str:
        return self.backend.sequence(value)

    def mapping(self, value: str) -> str:
        return self.backend.mapping(value)

    def message(self, domain: type, value: str, *, optional: bool) -> str:
        return self.backend.message(self, domain, value, optional=optional)

    def messages(self, domain: type, value: str) -> str:
        return self.backend.messages(self, domain, value)

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
        outer, self.domain = self.domain, domain
        for rule in self.rules(domain):
            for wire, expr in rule.unstructure(self, obj):
                if wire in fields:
                    if fields[wire] in self.placeholders or expr in self.placeholders:
                        raise NotImplementedError(f"{wire}: a sub-message shared by two attributes")
                    # One wire field for two attributes: they must agree.
                    self.stmt(f"if {fields[wire]} != {expr}: raise _Invalid")
                else:
                    fields[wire] = expr
        self.domain = outer
        for rule in self.rules(domain):
            if isinstance(rule, rules.Messages):
                # An item's attribute that the enclosing message carries (an
                # adopted shard's node id) must agree with it, or decoding
                # would silently give back another value.
                for attr, wire in rule.context:
                    self.stmt(
                        f"if any(_x.{attr} != {fields[wire]} for _x in {obj}.{rule.attr}): "
                        "raise _Invalid"
                    )
        return list(fields.items())

    def embedded(self, domain: type, obj: str) -> list[tuple[str, str]]:
        """The wire fields the embedded `domain` value `obj` fills: inline, or its hook's."""
        if domain not in self.ns.hooks.unstructure:
            return self.inline(domain, obj)
        message = self.local(f"{self.unstructure_fn(domain)}({obj})")
        # Which fields the model fills, as an inline reading of it would write them.
        filled = UnstructureGen(self.backend, self.ns).inline(domain, "d")
        return [(wire, f"{message}.{wire}") for wire, _ in filled]

    def function(self, domain: type, wire_class: type) -> str:
        fields = self.inline(domain, "d")
        return self.backend.unstructure_functions(self, domain, wire_class, fields)


@attrs.frozen
class Hooks:
    """Conversions that stand for some models' generated ones, wherever those models occur.

    `structure[M](message, **context)` gives the `M` value of a message of
    `M`'s pair (`context`: what its enclosing message supplies, an adopted
    shard's node id); `unstructure[M](value)` gives the message of an `M`
    value. The functions of the models holding `M` call its hook, and read
    from its message the fields they share with it, where they would have
    built `M` inline. Only models with a message of their own have hooks, and
    only a backend that builds messages by keyword (betterproto2) takes
    unstructure hooks.
    """

    structure: Mapping[type, StructureFunction] = attrs.field(factory=dict)
    unstructure: Mapping[type, UnstructureFunction] = attrs.field(factory=dict)


class Compiled:
    """The conversion functions of one backend, by domain model.

    `fill` has, for a backend that fills messages in place, the functions
    `f(value, message)` that `unstructure` wraps (empty for the others).
    """

    def __init__(
        self,
        backend: Backend,
        structure: dict[type, StructureFunction],
        unstructure: dict[type, UnstructureFunction],
        sources: dict[type, str],
        fill: dict[type, FillFunction] | None = None,
    ) -> None:
        self.backend = backend
        self.structure = structure
        self.unstructure = unstructure
        self.sources = sources
        self.fill = fill or {}


def compile_backend(
    backend: Backend, pairs: tuple[Pair, ...] = PAIRS, hooks: Hooks | None = None
) -> Compiled:
    """Generate, compile and return the conversion functions of `pairs` for `backend`.

    Each pair's functions are compiled under a file name of their own,
    `<llmgw_wire generated BACKEND Model>`, registered with `linecache`, so
    that a traceback or a debugger shows the generated line (as cattrs does
    for its hooks). All share one namespace, where they call each other by
    name: a model's hook (`hooks`) takes its name there, so that every
    function calls the hook instead (and `Compiled` gives it for that model).
    """
    hooks = hooks or Hooks()
    embedded = {p.domain for p in pairs if p.embedded}
    if embedded & {*hooks.structure, *hooks.unstructure}:
        raise ValueError("a hook for a model with no message of its own")
    if hooks.unstructure and isinstance(backend, Upb):
        raise NotImplementedError("upb fills sub-messages in place: no unstructure hooks")
    ns = _Namespace(backend, pairs, hooks)
    sources: dict[type, str] = {}
    for pair in pairs:
        chunks = [StructureGen(backend, ns).function(pair.domain)]
        if not pair.embedded:
            wire_class = backend.classes[pair.wire]
            chunks.append(UnstructureGen(backend, ns).function(pair.domain, wire_class))
        sources[pair.domain] = "\n\n".join(chunks)
    exec_generated(
        {source_file_name(backend, domain): source for domain, source in sources.items()},
        ns.globals,
    )
    ns.globals.update({f"s_{domain.__name__}": fn for domain, fn in hooks.structure.items()})
    ns.globals.update({f"u_{domain.__name__}": fn for domain, fn in hooks.unstructure.items()})
    structure = {p.domain: ns.globals[f"s_{p.domain.__name__}"] for p in pairs}
    top = [p.domain for p in pairs if not p.embedded]
    unstructure = {d: ns.globals[f"u_{d.__name__}"] for d in top}
    fill = {d: ns.globals[f"f_{d.__name__}"] for d in top if f"f_{d.__name__}" in ns.globals}
    return Compiled(backend, structure, unstructure, sources, fill)


def source_file_name(backend: Backend, domain: type) -> str:
    """The pseudo file name under which the functions of `domain`'s pair are compiled."""
    return f"<llmgw_wire generated {backend.name} {domain.__name__}>"
