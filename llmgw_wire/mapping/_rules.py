"""The vocabulary of the mapping: how one domain attribute travels on the wire.

A rule is plain data (see `llmgw_wire.mapping` for the table of pairs built
from them). Each rule knows three things about its attribute:

* the source of the fast conversion code it contributes, for either direction
  and either wire backend (`llmgw_wire.mapping._compiler` assembles these into one function per
  pair);
* how to check a domain value and say exactly what is wrong with it, which the
  codec runs only after the fast path has refused a value, to name the path;
* how to describe itself, for the generated mapping reference.

Fast code raises `Invalid` (no details, no cost) and the explaining walk turns
that into an `EncodeError` or `DecodeError` with the path, so the happy path
pays for no bookkeeping.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from attrs import frozen

from llmgw_wire.domain._keepalive import EPOCH
from llmgw_wire.domain._reconciler import leader_endpoint
from llmgw_wire.errors import DecodeError, EncodeError
from llmgw_wire.mapping._runtime import Invalid

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = [
    "EPOCH",
    "INT_RANGES",
    "Constant",
    "Embedded",
    "EpochMillis",
    "FieldRule",
    "FromContext",
    "Invalid",
    "LeaderEndpoint",
    "Message",
    "Messages",
    "Millis",
    "NotCarried",
    "Path",
    "Repeated",
    "Rule",
    "RuleKind",
    "Scalar",
    "ScalarKind",
    "StateEnum",
    "StrMap",
    "StructureWriter",
    "UnstructureWriter",
    "Walk",
    "attr_for_wire",
    "check_source",
    "epoch_millis",
    "expected",
    "from_epoch_millis",
    "from_millis",
    "leader_addr",
    "millis",
    "scalar_ok",
    "utf8_ok",
    "wire_kind",
]

Path = tuple[str | int, ...]

#: The kinds of rule, one per rule class.
RuleKind = Literal[
    "scalar",
    "repeated",
    "map",
    "message",
    "messages",
    "embedded",
    "state",
    "millis",
    "epoch-millis",
    "leader-endpoint",
    "constant",
    "from-context",
    "not-carried",
]

#: The wire scalars a `Scalar` or `Repeated` rule carries.
ScalarKind = Literal["int32", "int64", "string", "bool"]

INT_RANGES: dict[str, tuple[int, int]] = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_ZERO: dict[str, object] = {"int32": 0, "int64": 0, "string": "", "bool": False, "repeated": ()}


def utf8_ok(text: str) -> bool:
    """Whether `text` encodes as UTF-8: no lone surrogates, which proto3 strings cannot hold."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scalar_ok(kind: ScalarKind, value: object) -> bool:
    """Whether `value` can be carried by a wire scalar of `kind` as it is."""
    if kind == "string":
        return isinstance(value, str) and utf8_ok(value)
    if kind == "bool":
        return type(value) is bool
    lo, hi = INT_RANGES[kind]
    return type(value) is int and lo <= value <= hi


def expected(kind: ScalarKind, value: object) -> str:
    """What a wire scalar of `kind` expected, for the error about `value`."""
    if kind == "string" and isinstance(value, str):
        return "a string that is valid UTF-8 (no lone surrogates)"
    return kind


def check_source(kind: ScalarKind, var: str) -> str:
    """Source of a test that is true when `var` cannot be carried by a wire scalar of `kind`."""
    if kind == "string":
        return f"not isinstance({var}, str) or not ({var}.isascii() or _utf8_ok({var}))"
    if kind == "bool":
        return f"type({var}) is not bool"
    lo, hi = INT_RANGES[kind]
    return f"type({var}) is not int or not {lo} <= {var} <= {hi}"


def millis(value: object) -> int:
    """A `timedelta` as whole milliseconds; `Invalid` if it is not exactly that."""
    if type(value) is not dt.timedelta:
        raise Invalid
    # From the normalised parts (0 <= seconds, microseconds): twice as fast as divmod.
    micros = value.microseconds
    ms = (value.days * 86400 + value.seconds) * 1000 + micros // 1000
    if micros % 1000 or not INT_RANGES["int64"][0] <= ms <= INT_RANGES["int64"][1]:
        raise Invalid
    return ms


#: The whole milliseconds a `timedelta` holds (about 2.7 million years each way).
MILLIS_RANGE = (-86_399_999_913_600_000, 86_399_999_999_999_999)

#: The milliseconds since the epoch a `datetime` holds: 0001-01-01T00:00:00Z
#: to 9999-12-31T23:59:59.999Z. Go's time.Time holds more; the domain refuses
#: the rest both ways, saying so, rather than wrapping.
EPOCH_MILLIS_RANGE = (-62_135_596_800_000, 253_402_300_799_999)

_TIMEDELTA_LIMIT = f"from {MILLIS_RANGE[0]} to {MILLIS_RANGE[1]} ms"
_DATETIME_LIMIT = "from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"


def from_millis(value: int) -> dt.timedelta:
    """Whole milliseconds as a `timedelta`; `Invalid` beyond its range."""
    try:
        return dt.timedelta(milliseconds=value)
    except OverflowError:
        raise Invalid from None


def epoch_millis(value: object) -> int:
    """An aware `datetime` as whole milliseconds since the epoch; `Invalid` otherwise."""
    if not isinstance(value, dt.datetime) or value.utcoffset() is None:
        raise Invalid
    ms = millis(value - EPOCH)
    # In UTC, what decoding gives back: an offset can put it past the range.
    if not EPOCH_MILLIS_RANGE[0] <= ms <= EPOCH_MILLIS_RANGE[1]:
        raise Invalid
    return ms


def from_epoch_millis(value: int) -> dt.datetime:
    """Milliseconds since the epoch as an aware UTC `datetime`; `Invalid` beyond its range."""
    try:
        return EPOCH + dt.timedelta(milliseconds=value)
    except OverflowError:
        raise Invalid from None


class Walk(Protocol):
    """The explaining walk over a table of pairs, as the rules see it.

    Rules know nothing of the table they are in (`llmgw_wire.mapping._table`);
    a rule that holds another domain model asks the walk to explain it.
    """

    def value(self, value: object, path: Path) -> None:
        """Raise the precise `EncodeError` for the first thing wrong in a domain value."""

    def wire(self, message: object, domain: type, path: Path, message_type: str) -> None:
        """Raise the precise `DecodeError` for the first wire value with no domain value."""

    def rules(self, domain: type) -> tuple[Rule, ...]:
        """The rules of the pair of `domain`."""
        ...


class StructureWriter(Protocol):
    """What a rule asks of the writer of a structure function (`llmgw_wire.mapping._compiler`).

    The writer knows the wire backend's idioms; a rule says only which field
    holds its attribute and how it is converted. Rules are below the compiler:
    they name this protocol, never its classes.
    """

    #: The name of the message being read, in the generated source.
    m: str

    def structure_fn(self, domain: type) -> str:
        """The name of the function that structures a `domain` message."""
        ...

    def field(self, wire: str) -> str:
        """Source: the value of the scalar field `wire` of the message `m`.

        The writer reads a field that several rules of one function ask for
        once, into a local: a read of a wire message's field is a call into
        its runtime, not a local's load.
        """
        ...

    def takes_positionally(self, domain: type, keywords: tuple[str, ...]) -> bool:
        """Whether the structure function of `domain` takes `keywords` positionally, in order.

        So when it is the function compiled for `domain` and its parameters
        after the message are exactly these (a hook takes them by keyword).
        """
        ...

    def optional_message(self, wire: str, fn: str) -> str:
        """Source: the sub-message `wire` structured by `fn`, or None when it is unset."""
        ...

    def required_message(self, wire: str, fn: str, domain: type) -> str:
        """Source: the sub-message `wire` structured by `fn`; `domain()` when it is unset."""
        ...

    def repeated(self, wire: str) -> str:
        """Source: the items of the repeated field `wire`, as an iterable of its own."""
        ...

    def str_map(self, wire: str) -> str:
        """Source: the map field `wire` as the domain holds it."""
        ...

    def const(self, value: object) -> str:
        """The name of a global of the generated module holding `value`."""
        ...

    def param(self, name: str) -> None:
        """Take `name` as a keyword parameter of the function, from its caller."""
        ...


class UnstructureWriter(Protocol):
    """What a rule asks of the writer of an unstructure function (`_compiler`)."""

    @property
    def domain(self) -> type:
        """The domain model whose attributes are being read."""
        ...

    def rules(self, domain: type) -> tuple[Rule, ...]:
        """The rules of the pair of `domain`."""
        ...

    def const(self, value: object) -> str:
        """The name of a global of the generated module holding `value`."""
        ...

    def param(self, name: str) -> None:
        """Take the wire field `name` as a keyword parameter, None by default."""
        ...

    def stmt(self, source: str) -> None:
        """Add `source`, statements, to the function at the current indentation."""
        ...

    def local(self, expr: str) -> str:
        """Assign `expr` to a new local of the function; its name."""
        ...

    def block(self, header: str) -> AbstractContextManager[None]:
        """Statements added inside are the body of `header` (an `if ...:`)."""
        ...

    def check(self, kind: ScalarKind, var: str) -> str:
        """Source: true when `var` cannot be carried by a wire scalar of `kind`."""
        ...

    def sequence(self, value: str) -> str:
        """Source: a domain sequence as the wire takes it."""
        ...

    def mapping(self, value: str) -> str:
        """Source: a domain dict as the wire takes it."""
        ...

    def message(self, domain: type, value: str, *, optional: bool) -> str:
        """Source of the wire value of a sub-message field holding the domain `value`."""
        ...

    def messages(self, domain: type, value: str) -> str:
        """Source of the wire value of a repeated sub-message field, from the domain `value`."""
        ...

    def embedded(self, domain: type, obj: str) -> list[tuple[str, str]]:
        """The wire fields of this message that the embedded `domain` value `obj` fills."""
        ...


def attr_for_wire(rules: tuple[Rule, ...], wire: str) -> str:
    """The attribute that the wire field `wire` carries, among `rules`."""
    for rule in rules:
        if isinstance(rule, FieldRule) and rule.wire == wire:
            return rule.attr
    raise KeyError(wire)


def wire_kind(rules: tuple[Rule, ...], wire: str) -> str:
    """The kind of value (`int32`, `string`, ..., `repeated`) of the wire field `wire`."""
    for rule in rules:
        if isinstance(rule, FieldRule) and rule.wire == wire:
            return rule.kind if isinstance(rule, Scalar) else "repeated"
    raise KeyError(wire)


@frozen
class Rule:
    """How one domain attribute, `attr`, travels (or does not) on the wire."""

    attr: str

    #: What kind of rule it is: the closed set of `RuleKind`, what the
    #: mapping's description (`llmgw_wire.mapping._description`) records.
    rule_kind: ClassVar[RuleKind]
    #: Whether the attribute is one field of scalars of the pair's own message
    #: (a scalar, a repeated scalar, a map, a state, a duration or a time):
    #: two attributes on one such field must agree to be encoded.
    flat: ClassVar[bool] = False
    #: Whether the rule's wire fields are those of the enclosing message (an
    #: error path then names no field of its own for it).
    embedded_in_parent: ClassVar[bool] = False

    def structure_expr(self, g: StructureWriter) -> str:
        """Source of an expression giving the attribute from the message `g.m`."""
        raise NotImplementedError

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        """Emit checks into `g`; return `(wire field, source expression)` pairs."""
        raise NotImplementedError

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        """Raise `EncodeError` if `value` cannot be carried; else return."""

    def explain_in(self, owner: object, path: Path, walk: Walk) -> None:
        """Raise `EncodeError` if the attribute of `owner` cannot be carried.

        The attribute alone, by default; a rule whose value depends on other
        attributes of the same value (the leader endpoint) reads them here.
        """
        self.explain(getattr(owner, self.attr), path, walk)

    def made_of(self) -> tuple[str, ...]:
        """The wire fields of the pair's message whose values the attribute holds.

        A secret field makes the attribute secret (`llmgw_wire.mapping.secrets`).
        """
        return ()

    def explain_structure(self, message: object, path: Path, message_type: str, walk: Walk) -> None:
        """Raise `DecodeError` if the wire value does not make a domain value."""

    def describe(self) -> str:
        """One line for the mapping reference."""
        raise NotImplementedError


@frozen
class FieldRule(Rule):
    """A rule whose attribute is carried by `wire`, a field of the pair's own message."""

    wire: str

    def made_of(self) -> tuple[str, ...]:
        return (self.wire,)


@frozen
class Scalar(FieldRule):
    """A scalar field: `int32`, `int64`, `string` or `bool`, range-checked when encoding."""

    rule_kind: ClassVar[RuleKind] = "scalar"
    flat: ClassVar[bool] = True

    kind: ScalarKind = "string"

    def structure_expr(self, g: StructureWriter) -> str:
        return g.field(self.wire)

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        var = g.local(f"{obj}.{self.attr}")
        g.stmt(f"if {g.check(self.kind, var)}: raise _Invalid")
        return [(self.wire, var)]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        if not scalar_ok(self.kind, value):
            raise EncodeError(expected(self.kind, value), value, path)

    def describe(self) -> str:
        if self.kind in INT_RANGES:
            lo, hi = INT_RANGES[self.kind]
            return f"{self.kind}; an int outside [{lo}, {hi}] is an error"
        return self.kind


@frozen
class Repeated(FieldRule):
    """A repeated scalar field: a tuple in the domain, each item checked when encoding."""

    rule_kind: ClassVar[RuleKind] = "repeated"
    flat: ClassVar[bool] = True

    kind: ScalarKind = "string"

    def structure_expr(self, g: StructureWriter) -> str:
        return f"tuple({g.repeated(self.wire)})"

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        var = g.local(g.sequence(f"{obj}.{self.attr}"))
        g.stmt(f"for _x in {var}:\n    if {g.check(self.kind, '_x')}: raise _Invalid")
        return [(self.wire, var)]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise EncodeError(f"a sequence of {self.kind}", value, path)
        for i, item in enumerate(value):
            if not scalar_ok(self.kind, item):
                raise EncodeError(expected(self.kind, item), item, (*path, i))

    def describe(self) -> str:
        return f"repeated {self.kind} as a tuple; empty is ()"


@frozen
class StrMap(FieldRule):
    """A `map<string, string>` field: a dict in the domain, copied both ways."""

    rule_kind: ClassVar[RuleKind] = "map"
    flat: ClassVar[bool] = True

    def structure_expr(self, g: StructureWriter) -> str:
        return g.str_map(self.wire)

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        var = g.local(g.mapping(f"{obj}.{self.attr}"))
        g.stmt(
            f"for _k, _x in {var}.items():\n"
            f"    if {g.check('string', '_k')} or {g.check('string', '_x')}: raise _Invalid"
        )
        return [(self.wire, var)]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        if not hasattr(value, "items"):
            raise EncodeError("a mapping of string to string", value, path)
        for key, item in value.items():
            if not scalar_ok("string", key):
                raise EncodeError(expected("string", key), key, (*path, f"<key {key!r}>"))
            if not scalar_ok("string", item):
                raise EncodeError(expected("string", item), item, (*path, key))

    def describe(self) -> str:
        return "map<string, string> as a dict; empty is {}"


@frozen
class Message(FieldRule):
    """A sub-message carried by its own pair (`domain`).

    Optional: None in the domain exactly when the field is unset on the wire.
    Required: an unset field decodes as the domain type's zero value, and the
    field is always set when encoding.
    """

    rule_kind: ClassVar[RuleKind] = "message"

    domain: type = object
    optional: bool = False

    def structure_expr(self, g: StructureWriter) -> str:
        fn = g.structure_fn(self.domain)
        if self.optional:
            return g.optional_message(self.wire, fn)
        return g.required_message(self.wire, fn, self.domain)

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        return [(self.wire, g.message(self.domain, f"{obj}.{self.attr}", optional=self.optional))]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        if value is None and self.optional:
            return
        if type(value) is not self.domain:
            expected = self.domain.__name__ + (" or None" if self.optional else "")
            raise EncodeError(expected, value, path)
        walk.value(value, path)

    def explain_structure(self, message: object, path: Path, message_type: str, walk: Walk) -> None:
        sub = getattr(message, self.wire)
        if sub is not None:
            walk.wire(sub, self.domain, path, message_type)

    def describe(self) -> str:
        if self.optional:
            return f"{self.domain.__name__} | None; None exactly when the field is unset"
        return f"{self.domain.__name__}; unset decodes as {self.domain.__name__}()"


@frozen
class Messages(FieldRule):
    """A repeated sub-message: a tuple of the pair's domain values.

    `context` names keyword arguments passed to each item's structure function
    from fields of this message (the node id an adopted shard belongs to),
    read once: positionally to the function compiled for the item's model,
    by keyword to a hook that stands for it.
    """

    rule_kind: ClassVar[RuleKind] = "messages"

    domain: type = object
    context: tuple[tuple[str, str], ...] = ()

    def structure_expr(self, g: StructureWriter) -> str:
        fn = g.structure_fn(self.domain)
        items = g.repeated(self.wire)
        if not self.context:
            return f"tuple(map({fn}, {items}))"
        values = [g.field(wire) for _, wire in self.context]
        if g.takes_positionally(self.domain, tuple(k for k, _ in self.context)):
            # The context read once, and each item's call made by `map`, with
            # no keyword to bind: what a hand-written loop does at best.
            repeats = "".join(f", _repeat({value})" for value in values)
            return f"tuple(map({fn}, {items}{repeats}))"
        kwargs = ", ".join(f"{k}={v}" for (k, _), v in zip(self.context, values, strict=True))
        return f"tuple([{fn}(_x, {kwargs}) for _x in {items}])"

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        return [(self.wire, g.messages(self.domain, f"{obj}.{self.attr}"))]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise EncodeError(f"a sequence of {self.domain.__name__}", value, path)
        for i, item in enumerate(value):
            if type(item) is not self.domain:
                raise EncodeError(self.domain.__name__, item, (*path, i))
            walk.value(item, (*path, i))

    def explain_structure(self, message: object, path: Path, message_type: str, walk: Walk) -> None:
        for i, sub in enumerate(getattr(message, self.wire)):
            walk.wire(sub, self.domain, (*path, i), message_type)

    def describe(self) -> str:
        return f"repeated, as a tuple of {self.domain.__name__}; empty is ()"


@frozen
class Embedded(Rule):
    """Fields of this same wire message that make a nested domain value.

    The wire keeps them flat (a GPU's fabric and health fields); the domain
    groups them. With `present_if`, the nested value is None exactly when that
    wire field is empty, so encoding one whose field is empty is an error.
    """

    rule_kind: ClassVar[RuleKind] = "embedded"

    domain: type = object
    present_if: str = ""

    embedded_in_parent: ClassVar[bool] = True

    def structure_expr(self, g: StructureWriter) -> str:
        call = f"{g.structure_fn(self.domain)}({g.m})"
        return f"({call} if {g.field(self.present_if)} else None)" if self.present_if else call

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        inner = g.local(f"{obj}.{self.attr}")
        if not self.present_if:
            return g.embedded(self.domain, inner)
        with g.block(f"if {inner} is not None:"):
            fields = g.embedded(self.domain, inner)
            g.stmt(f"if not {dict(fields)[self.present_if]}: raise _Invalid")
        # None leaves every embedded field at its zero value.
        rules = g.rules(self.domain)
        return [
            (wire, f"({g.const(_ZERO[wire_kind(rules, wire)])} if {inner} is None else {expr})")
            for wire, expr in fields
        ]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        if value is None and self.present_if:
            return
        if type(value) is not self.domain:
            raise EncodeError(self.domain.__name__, value, path)
        walk.value(value, path)
        if self.present_if:
            attr = attr_for_wire(walk.rules(self.domain), self.present_if)
            if not getattr(value, attr):
                raise EncodeError(
                    f"a non-empty string, since an empty {self.present_if} means no {self.attr}",
                    getattr(value, attr),
                    (*path, attr),
                )

    def explain_structure(self, message: object, path: Path, message_type: str, walk: Walk) -> None:
        walk.wire(message, self.domain, path, message_type)

    def describe(self) -> str:
        if self.present_if:
            return (
                f"{self.domain.__name__} | None from flat fields; "
                f"None exactly when `{self.present_if}` is empty"
            )
        return f"{self.domain.__name__} from flat fields of the same message"


@frozen
class StateEnum(FieldRule):
    """The shard state enum; a number this side does not know decodes as FAILED."""

    rule_kind: ClassVar[RuleKind] = "state"
    flat: ClassVar[bool] = True

    def structure_expr(self, g: StructureWriter) -> str:
        return f"_state_from_wire.get({g.field(self.wire)}, _FAILED)"

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        var = g.local(f"_state_to_wire.get({obj}.{self.attr})")
        g.stmt(f"if {var} is None: raise _Invalid")
        return [(self.wire, var)]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        from llmgw_wire.domain import State

        if not isinstance(value, State):
            raise EncodeError("State", value, path)

    def describe(self) -> str:
        return "ShardStatus.State <-> State; unspecified or unknown numbers decode as FAILED"


@frozen
class Millis(FieldRule):
    """A `timedelta` carried as whole milliseconds in an int64."""

    rule_kind: ClassVar[RuleKind] = "millis"
    flat: ClassVar[bool] = True

    def structure_expr(self, g: StructureWriter) -> str:
        return f"_from_millis({g.field(self.wire)})"

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        return [(self.wire, f"_millis({obj}.{self.attr})")]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        try:
            millis(value)
        except Invalid:
            raise EncodeError(
                "a timedelta of whole milliseconds, within int64", value, path
            ) from None

    def explain_structure(self, message: object, path: Path, message_type: str, walk: Walk) -> None:
        try:
            from_millis(getattr(message, self.wire))
        except Invalid:
            reason = (
                f"{getattr(message, self.wire)} ms does not fit a timedelta ({_TIMEDELTA_LIMIT})"
            )
            raise DecodeError(message_type, reason, path) from None

    def describe(self) -> str:
        return "timedelta as int64 milliseconds; a fraction of a millisecond is an error"


@frozen
class EpochMillis(FieldRule):
    """An aware `datetime` carried as whole milliseconds since the Unix epoch."""

    rule_kind: ClassVar[RuleKind] = "epoch-millis"
    flat: ClassVar[bool] = True

    def structure_expr(self, g: StructureWriter) -> str:
        return f"_from_epoch_millis({g.field(self.wire)})"

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        return [(self.wire, f"_epoch_millis({obj}.{self.attr})")]

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        try:
            epoch_millis(value)
        except Invalid:
            try:
                millis(value - EPOCH)  # type: ignore[operator]
            except (Invalid, TypeError):
                raise EncodeError("an aware datetime of whole milliseconds", value, path) from None
            expected = f"an aware datetime {_DATETIME_LIMIT} in UTC"
            raise EncodeError(expected, value, path) from None

    def explain_structure(self, message: object, path: Path, message_type: str, walk: Walk) -> None:
        try:
            from_epoch_millis(getattr(message, self.wire))
        except Invalid:
            reason = (
                f"{getattr(message, self.wire)} ms since the epoch does not fit a datetime "
                f"({_DATETIME_LIMIT}: {EPOCH_MILLIS_RANGE[0]} to {EPOCH_MILLIS_RANGE[1]} ms)"
            )
            raise DecodeError(message_type, reason, path) from None

    def describe(self) -> str:
        return "aware datetime as int64 ms since the epoch, decoded in UTC"


@frozen
class LeaderEndpoint(FieldRule):
    """The reference's endpoint rule: an URL made of three wire fields.

    `wire` is the leader's address; `rank` and `port` are the wire fields of
    the shard's rank and HTTP port, which the same pair maps to attributes of
    their own. Decoding: `http://{address}:{port}` for rank 0 with an
    address, else None. Encoding recovers the address from the endpoint, so
    an endpoint of any other form cannot be encoded; the leader address of a
    shard of another rank does not survive decoding (a documented
    normalisation).
    """

    rule_kind: ClassVar[RuleKind] = "leader-endpoint"

    rank: str = "rank"
    port: str = "http_port"

    def structure_expr(self, g: StructureWriter) -> str:
        # `leader_endpoint`'s rule written inline, with no call per shard (a
        # test holds the two equal); each use of a field asked for, so that
        # the writer reads the address once.
        addr, rank, port = g.field(self.wire), g.field(self.rank), g.field(self.port)
        return (
            f'(f"http://{{{g.field(self.wire)}}}:{{{port}}}" if {rank} == 0 and {addr} else None)'
        )

    def _siblings(self, rules: tuple[Rule, ...]) -> tuple[str, str]:
        return attr_for_wire(rules, self.rank), attr_for_wire(rules, self.port)

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        rank, port = self._siblings(g.rules(g.domain))
        # A caller may give the address itself: an agent reports its leader's
        # for every rank, which no domain value but rank 0's holds.
        g.param(self.wire)
        derived = f"_leader_addr({obj}.{self.attr}, {obj}.{rank}, {obj}.{port})"
        return [(self.wire, f"({derived} if {self.wire} is None else {self.wire})")]

    def explain_in(self, owner: object, path: Path, walk: Walk) -> None:
        rank, port = self._siblings(walk.rules(type(owner)))
        endpoint = getattr(owner, self.attr)
        try:
            leader_addr(endpoint, getattr(owner, rank), getattr(owner, port))
        except Invalid:
            expected = f"None, or `http://<{self.wire}>:<{port}>` for {rank} 0"
            raise EncodeError(expected, endpoint, path) from None

    def made_of(self) -> tuple[str, ...]:
        return (self.wire, self.rank, self.port)

    def describe(self) -> str:
        return (
            f"str | None: `http://{{{self.wire}}}:{{{self.port}}}` for {self.rank} 0"
            f" with a leader address"
        )


@frozen
class Constant(Rule):
    """A domain attribute the wire does not carry, set to `value` when decoding."""

    rule_kind: ClassVar[RuleKind] = "constant"

    value: object = None

    def structure_expr(self, g: StructureWriter) -> str:
        return g.const(self.value)

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        return []

    def describe(self) -> str:
        shown = str(self.value) if isinstance(self.value, enum.Enum) else repr(self.value)
        return f"not on the wire; decodes as {shown}"


@frozen
class FromContext(Rule):
    """A domain attribute the enclosing message supplies (e.g. the node id)."""

    rule_kind: ClassVar[RuleKind] = "from-context"

    #: The field of the enclosing message that supplies it.
    source: str = ""

    def structure_expr(self, g: StructureWriter) -> str:
        g.param(self.attr)
        return self.attr

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        return []

    def describe(self) -> str:
        return f"not on this message; taken from `{self.source}` of the enclosing one"


@frozen
class NotCarried(Rule):
    """A domain attribute this message has no field for: None when decoding.

    Encoding a value that has it set is an error rather than a silent loss.
    """

    rule_kind: ClassVar[RuleKind] = "not-carried"

    #: The message that has no field for it, for the error and the reference.
    message: str = ""

    def structure_expr(self, g: StructureWriter) -> str:
        return "None"

    def unstructure(self, g: UnstructureWriter, obj: str) -> list[tuple[str, str]]:
        g.stmt(f"if {obj}.{self.attr} is not None: raise _Invalid")
        return []

    def explain(self, value: object, path: Path, walk: Walk) -> None:
        if value is not None:
            raise EncodeError(f"None ({self.message} does not carry it)", value, path)

    def describe(self) -> str:
        return f"not carried by {self.message}: decodes as None, and must be None to encode"


def leader_addr(endpoint: object, rank: object, port: object) -> str:
    """The leader address an endpoint implies for a shard of `rank` on `port`; `Invalid` if none."""
    if endpoint is None:
        return ""
    if not isinstance(endpoint, str) or rank != 0 or not endpoint.startswith("http://"):
        raise Invalid
    if type(port) is not int:
        raise Invalid
    addr = endpoint[7:].rpartition(":")[0]
    if not addr or endpoint != leader_endpoint(addr, rank, port):
        raise Invalid
    return addr
