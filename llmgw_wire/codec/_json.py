"""The JSON codec's implementation: hooks, error translation, secrets, element counting.

Its public verbs are in `llmgw_wire.codec.json`, which documents the format.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import sys
import types
import typing
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import attrs
from cattrs.cols import list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import JsonConverter, configure_converter

from llmgw_wire.codec._limits import (
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_SIZE,
    item_budget,
    over_budget,
)
from llmgw_wire.domain import FrozenMap, State
from llmgw_wire.errors import EncodeError, JSONError, Redacted, shown
from llmgw_wire.mapping import PAIRS, is_secret

if TYPE_CHECKING:
    from collections.abc import Callable

    from attrs import AttrsInstance

__all__ = [
    "decode",
    "encode",
    "json_converter",
    "make_json_converter",
    "parse_json",
]

T = TypeVar("T")

#: A value as `json.loads` gives it and `json.dumps` takes it.
JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
Path = tuple[str | int, ...]

_MS = dt.timedelta(milliseconds=1)


class _Mismatch(Exception):  # noqa: N818 - a private signal, never seen by users
    """A JSON value of the wrong type, at `path` below the hook that raised it."""

    def __init__(self, expected: str, got: object, path: Path = (), detail: str = "") -> None:
        super().__init__(expected, got, path, detail)
        self.expected = expected
        self.got = got
        self.path = path
        self.detail = detail


class _Refused(Exception):  # noqa: N818 - a private signal, never seen by users
    """A domain value JSON cannot hold exactly, refused by the hook for `kind`."""

    def __init__(self, kind: type, expected: str, got: object) -> None:
        super().__init__(kind, expected, got)
        self.kind = kind
        self.expected = expected
        self.got = got


# --- structuring: strict JSON types -----------------------------------------------


def _int(value: object, _: object) -> int:
    if type(value) is not int:
        raise _Mismatch("integer", value)
    # Python's JSON writes no integer of more digits than it may convert
    # (`sys.get_int_max_str_digits()`, 4300 by default; 0: no limit). Below
    # 2 ** (3 * limit) an int has at most `limit` digits: the exact test is
    # for the rare larger ones only.
    limit = sys.get_int_max_str_digits()
    if limit and value.bit_length() > 3 * limit and abs(value) >= 10**limit:
        raise _Mismatch(f"integer of at most {limit} digits", value)
    return value


def _str(value: object, _: object) -> str:
    if type(value) is not str:
        raise _Mismatch("string", value)
    return value


def _bool(value: object, _: object) -> bool:
    if type(value) is not bool:
        raise _Mismatch("boolean", value)
    return value


def _str_map(value: object, _: object) -> dict[str, str]:
    if type(value) is not dict:
        raise _Mismatch("object", value)
    for key, item in value.items():
        if type(key) is not str:
            # A JSON document's keys are strings; a domain map's key of 1
            # would be written "1" and come back as another map.
            raise _Mismatch("a string key", key)
        if type(item) is not str:
            raise _Mismatch("string", item, (key,))
    return dict(value)


def _timedelta(value: object, _: object) -> dt.timedelta:
    if type(value) is not int:
        raise _Mismatch("integer", value, detail="milliseconds")
    try:
        return dt.timedelta(milliseconds=value)
    except OverflowError:
        raise _Mismatch("integer", value, detail="milliseconds within a timedelta") from None


def _datetime(value: object, _: object) -> dt.datetime:
    if type(value) is str:
        # Python 3.10's parser does not read the "Z" that other writers use for UTC.
        text = value[:-1] + "+00:00" if value.endswith("Z") else value
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            if parsed.utcoffset() is not None:
                return parsed
    raise _Mismatch("string", value, detail="an ISO 8601 datetime with its UTC offset")


_STATES = {state.value: state for state in State}


def _state(value: object, _: object) -> State:
    if type(value) is not str:
        raise _Mismatch("string", value, detail="a shard state")
    return _STATES.get(value, State.FAILED)


def _enum_structure(cls: type[enum.Enum]) -> Callable[[object, object], enum.Enum]:
    if cls is State:
        return _state
    members = {member.value: member for member in cls}
    expected = " | ".join(json.dumps(value) for value in members)

    def structure(value: object, _: object) -> enum.Enum:
        try:
            return members[value]
        except (KeyError, TypeError):
            raise _Mismatch(expected, value) from None

    return structure


def _optional_of(annotation: object) -> object:
    """The `X` of `X | None`, or None for any other annotation."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    args = typing.get_args(annotation)
    if len(args) != 2 or type(None) not in args:
        return None
    return args[0] if args[1] is type(None) else args[1]


def _array_item(annotation: object) -> object:
    """The `X` of `list[X]` or `tuple[X, ...]`, or None for any other annotation."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and len(args) == 1:
        return args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    if origin is Sequence and len(args) == 1:
        return args[0]
    return None


def _is_enum(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def _is_secret(cls: type, name: str) -> bool:
    return attrs.has(cls) and is_secret(cls, name)


def _secret_cut(value: Any, path: Path) -> Path | None:  # any value, indexed as `path` says
    """`path` cut after the secret attribute it goes through, or None if it goes through none."""
    for i, step in enumerate(path):
        if isinstance(step, str) and _is_secret(type(value), step):
            return path[: i + 1]
        try:
            value = getattr(value, step) if isinstance(step, str) else value[step]
        except (AttributeError, LookupError, TypeError):
            return None
    return None


# --- unstructuring: exact or refused -----------------------------------------------


def _unstructure_timedelta(value: dt.timedelta) -> int:
    if type(value) is not dt.timedelta:
        raise _Refused(dt.timedelta, "a timedelta of whole milliseconds", value)
    ms, rest = divmod(value, _MS)
    if rest:
        raise _Refused(dt.timedelta, "a timedelta of whole milliseconds", value)
    return int(ms)


def _unstructure_datetime(value: dt.datetime) -> str:
    if not isinstance(value, dt.datetime) or value.utcoffset() is None:
        raise _Refused(dt.datetime, "an aware datetime", value)
    return value.isoformat()


def _find(
    value: object, refused: _Refused, path: Path = (), declared: object = None
) -> Path | None:
    """The path of the refused value inside `value`, first in attribute order.

    It is found by identity, in an attribute declared of the refused hook's
    type: a small int wrongly given for a `timedelta` is the same object as
    an equal int elsewhere, where it is no fault.
    """
    if value is refused.got and declared in (None, refused.kind, refused.kind | None):
        return path
    cls: Any = type(value)
    if attrs.has(cls):
        pairs: list[tuple[str | int, object, object]] = [
            (field.name, getattr(value, field.name), field.type)
            for field in attrs.fields(attrs.resolve_types(cls))
        ]
    elif isinstance(value, (list, tuple)):
        pairs = [(i, item, None) for i, item in enumerate(value)]
    elif isinstance(value, Mapping):
        pairs = [(key, item, None) for key, item in value.items()]
    else:
        return None
    for step, item, item_type in pairs:
        found = _find(item, refused, (*path, step), item_type)
        if found is not None:
            return found
    return None


# --- errors ------------------------------------------------------------------------


@attrs.frozen
class _Problem:
    """The first thing wrong in a document: where, and what was expected and found."""

    path: Path
    reason: str
    expected: str
    got: object


def _problem(exc: BaseException, path: Path = (), secret: bool = False) -> _Problem:
    """The first error in cattrs' exception group, with its path in the document."""
    if isinstance(exc, BaseValidationError):
        inner = exc.exceptions[0]
        for note in getattr(inner, "__notes__", ()):
            # Below a secret, nothing more of the path is named.
            if isinstance(note, AttributeValidationNote):
                below = secret or (
                    isinstance(exc, ClassValidationError) and _is_secret(exc.cl, note.name)
                )
                return _problem(inner, path if secret else (*path, note.name), below)
            if isinstance(note, IterableValidationNote):
                return _problem(inner, path if secret else (*path, note.index), secret)
        return _problem(inner, path, secret)
    if isinstance(exc, _Mismatch):
        detail = f" ({exc.detail})" if exc.detail else ""
        # A secret is named by its attribute's path only: a map's key or an
        # item's index below it would tell something of it.
        where = path if secret else (*path, *exc.path)
        got: object = Redacted(type(exc.got).__name__) if secret else exc.got
        # A dump's check meets Python values JSON has no spelling for (bytes).
        spelling = "json" if isinstance(exc.got, _JSON_TYPES) else "python"
        text = shown(exc.got, secret=secret, spelling=spelling)
        reason = f"expected `{exc.expected}`{detail}, got {text}"
        return _Problem(where, reason, exc.expected, got)
    if isinstance(exc, KeyError):
        # cattrs' own signal for a required attribute that the document lacks.
        return _Problem(path, "required key missing", "a value", None)
    # Nothing but the hooks above should refuse a value; say what cattrs said,
    # unless it may be about a secret.
    said = shown(str(exc), secret=True) if secret else str(exc)
    return _Problem(path, f"{type(exc).__name__}: {said}", "a valid value", None)


_JSON_TYPES = (type(None), bool, int, float, str, list, dict)
# What cattrs' generated functions raise on a value not of its declared type.
_CANNOT_UNSTRUCTURE = (TypeError, ValueError, AttributeError, RecursionError)


def _type_name(cl: object) -> str:
    """`ShardSpec`, `list[AdoptedShard]`, `Compute | None`: a type as its reader would write it."""
    origin, args = typing.get_origin(cl), typing.get_args(cl)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is not None and args:
        return f"{_type_name(origin)}[{', '.join(_type_name(arg) for arg in args)}]"
    if cl is Ellipsis:
        return "..."
    if cl is type(None):
        return "None"
    return cl.__name__ if isinstance(cl, type) else str(cl)


# --- the converter -----------------------------------------------------------------


class _JSONConverter(JsonConverter):
    """`cattrs.preconf.json`'s converter, raising the library's errors.

    Its public `structure` and `unstructure` (and so `loads` and `dumps`)
    translate cattrs' exception groups into one `JSONError` or `EncodeError`
    with the path of the first offending value.
    """

    # cattrs calls these two itself for some nested values: only the outermost
    # call translates, so that the path is the whole document's.

    def structure(self, obj: object, cl: type[T]) -> T:
        if _NESTED.get():
            return super().structure(obj, cl)
        token = _NESTED.set(True)
        try:
            return super().structure(obj, cl)
        except (BaseValidationError, _Mismatch) as exc:
            problem = _problem(exc)
        finally:
            _NESTED.reset(token)
        # Raised outside the handler, so that no chained exception keeps the value.
        raise JSONError(_type_name(cl), problem.reason, problem.path)

    def unstructure(self, obj: object, unstructure_as: object = None) -> object:
        if _NESTED.get():
            return super().unstructure(obj, unstructure_as)
        token = _NESTED.set(True)
        try:
            document = super().unstructure(obj, unstructure_as)
            # What is written must load: a mistyped value is refused now, not when read back.
            declared = _declared_type(obj, unstructure_as)
            if declared is not None:
                super().structure(document, declared)
        except _Refused as exc:
            error = _refused(obj, exc.expected, exc.got, _find(obj, exc) or ())
        except (BaseValidationError, _Mismatch) as exc:
            problem = _problem(exc)
            error = _refused(obj, problem.expected, problem.got, problem.path)
        except _CANNOT_UNSTRUCTURE:
            # A value its hooks cannot take apart (None for a model); the
            # message is not kept, since it may quote a secret.
            path, declared = _unstructure_failure(self, obj, unstructure_as)
            expected = "a value of its declared type" if declared is None else _type_name(declared)
            error = _refused(obj, expected, _at(obj, path), path)
        else:
            return document
        finally:
            _NESTED.reset(token)
        # Raised outside the handler, so that no chained exception keeps the value.
        raise error


def _unstructure_failure(
    conv: JsonConverter, value: object, declared: object = None, path: Path = ()
) -> tuple[Path, object]:
    """The path and declared type of the innermost value in `value` that `conv` cannot take."""
    cls: Any = type(value)
    if attrs.has(cls):
        fields = attrs.fields(attrs.resolve_types(cls))
        parts: list[tuple[str | int, object, object]] = [
            (field.name, getattr(value, field.name), field.type) for field in fields
        ]
    elif isinstance(value, (list, tuple)):
        item_type = _array_item(declared) if declared is not None else None
        parts = [(i, item, item_type) for i, item in enumerate(value)]
    else:
        return path, declared
    for step, item, item_type in parts:
        try:
            conv.unstructure(item, item_type)
        except _CANNOT_UNSTRUCTURE:  # noqa: PERF203 - only on the way to an error
            return _unstructure_failure(conv, item, item_type, (*path, step))
    return path, declared


def _at(value: object, path: Path) -> object:
    for step in path:
        value = value[step] if isinstance(step, int) else getattr(value, step)  # type: ignore[index]
    return value


def _refused(obj: object, expected: str, got: object, path: Path) -> EncodeError:
    cut = _secret_cut(obj, path)
    return EncodeError(expected, got, path if cut is None else cut, secret=cut is not None)


_NESTED: ContextVar[bool] = ContextVar("llmgw_wire_json_nested", default=False)


def _declared_type(obj: object, unstructure_as: object) -> Any:  # a type or a generic alias
    """The type to check a dump of `obj` against, when it is known."""
    if unstructure_as is not None:
        return unstructure_as
    if attrs.has(type(obj)):
        return type(obj)
    if isinstance(obj, (list, tuple)) and obj and len({type(item) for item in obj}) == 1:
        item_type = type(obj[0])
        return types.GenericAlias(list, (item_type,)) if attrs.has(item_type) else None
    return None


def make_json_converter(*, include_secrets: bool = False) -> JsonConverter:
    """A new cattrs JSON converter for the domain models.

    It is configured like `cattrs.preconf.json.make_converter()`, with the
    strict hooks described in this module's documentation; `structure` raises
    `JSONError` and `unstructure` `EncodeError`, each with the path of the
    offending value. `dumps(value)` and `loads(text, cls)` go through text.

    Args:
        include_secrets: put secret attributes (`ShardSpec.api_key`) in what it
            unstructures; by default they are left out.
    """
    # The same collection overrides as `cattrs.preconf.json.make_converter()`,
    # and the domain's immutable maps written as plain objects.
    conv = _JSONConverter(
        unstruct_collection_overrides={AbstractSet: list, Counter: dict, Mapping: dict}
    )
    configure_converter(conv)

    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(bool, _bool)
    conv.register_structure_hook_func(lambda t: t in (dict[str, str], Mapping[str, str]), _str_map)
    conv.register_structure_hook(dt.timedelta, _timedelta)
    conv.register_structure_hook(dt.datetime, _datetime)
    conv.register_unstructure_hook(FrozenMap, dict)
    conv.register_unstructure_hook(dt.timedelta, _unstructure_timedelta)
    conv.register_unstructure_hook(dt.datetime, _unstructure_datetime)
    conv.register_structure_hook_factory(_is_enum, _enum_structure)

    def optional(annotation: object) -> Callable[[object, object], object]:
        inner_type = _optional_of(annotation)
        inner = conv.get_structure_hook(inner_type)

        def structure(value: object, _: object) -> object:
            if value is None:
                return None
            try:
                return inner(value, inner_type)
            except _Mismatch as exc:
                if exc.path:
                    raise
                raise _Mismatch(f"{exc.expected} | null", exc.got, detail=exc.detail) from None

        return structure

    def array(annotation: object) -> Callable[[object, object], object]:
        # cattrs' own list hook, behind a check that the value is an array: it
        # would take any iterable, a string as a list of characters.
        item = _array_item(annotation)
        as_list: Any = types.GenericAlias(list, (item,))
        items = list_structure_factory(as_list, conv)
        make = tuple if typing.get_origin(annotation) is tuple else list

        def structure(value: object, _: object) -> object:
            if type(value) is not list:
                raise _Mismatch("array", value)
            return make(items(value, as_list))

        return structure

    def attrs_structure(cls: type[AttrsInstance]) -> Callable[[object, object], object]:
        fields = make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=False)

        def structure(value: object, _: object) -> object:
            if type(value) is not dict:
                raise _Mismatch("object", value)
            return fields(value, cls)

        return structure

    def attrs_unstructure(cls: type[AttrsInstance]) -> Callable[[Any], dict[str, Any]]:
        omitted = {} if include_secrets else _secret_overrides(cls)
        return make_dict_unstructure_fn(cls, conv, **omitted)

    conv.register_structure_hook_factory(lambda t: _optional_of(t) is not None, optional)
    conv.register_structure_hook_factory(lambda t: _array_item(t) is not None, array)
    conv.register_structure_hook_factory(attrs.has, attrs_structure)
    conv.register_unstructure_hook_factory(attrs.has, attrs_unstructure)
    return conv


def _secret_overrides(cls: type[AttrsInstance]) -> dict[str, Any]:
    return {
        field.name: override(omit=True) for field in attrs.fields(cls) if is_secret(cls, field.name)
    }


#: The default converter: secrets are left out of what it unstructures. Treat it as read-only.
json_converter: JsonConverter = make_json_converter()
_with_secrets: JsonConverter = make_json_converter(include_secrets=True)


def encode(value: object, *, include_secrets: bool = False, indent: int | None = None) -> str:
    """A domain value as JSON text (ASCII, attributes in their declared order).

    Args:
        value: a domain model, or a list or tuple of them.
        include_secrets: put secret attributes (`ShardSpec.api_key`) in the
            text; by default they are left out.
        indent: as for `json.dumps`; None for one line.

    Raises:
        EncodeError: a value JSON cannot hold exactly (a fraction of a
            millisecond, a naive datetime) or of the wrong type, with its path.
    """
    conv = _with_secrets if include_secrets else json_converter
    return conv.dumps(value, indent=indent)


def parse_json(data: str | bytes | bytearray, type_name: str) -> JSONValue:
    """JSON text (or UTF-8, -16 or -32 bytes) as plain values.

    Raises:
        JSONError: the text is not JSON; `type_name` says what it was to be.
    """
    try:
        document: JSONValue = json.loads(data)
    except json.JSONDecodeError as exc:
        # "Unterminated string starting at" is one of json's messages.
        where = f"at line {exc.lineno}, column {exc.colno}"
        reason = f"not JSON: {exc.msg.removesuffix(' at')} {where}"
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text: {exc.reason} at byte {exc.start}"
    except RecursionError:
        reason = "not JSON this reader accepts: nested too deeply"
    except ValueError as exc:
        # Python refuses to read an integer of more than 4300 digits
        # (sys.get_int_max_str_digits()): a bare ValueError, not a JSONDecodeError.
        reason = f"not JSON this reader accepts: {_int_limit(exc)}"
    else:
        return document
    raise JSONError(type_name, reason)


def _int_limit(exc: ValueError) -> str:
    if "integer string conversion" in str(exc):
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    return "a value it cannot read"


def decode(
    data: str | bytes | bytearray,
    into: type[T],
    *,
    max_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> T:
    """The domain value of type `into` that the JSON text `data` holds.

    Unknown keys are ignored and missing ones take their defaults; values
    must be of their JSON type (see this module's documentation). As for
    `decode`, a document over `max_size` bytes (characters, for text) or with
    more elements of arrays and maps (at any depth, under unknown keys too)
    than `max_items`, or than 10,000 and one per 16 of its bytes
    (`llmgw_wire.codec._limits.item_budget`), is refused before any domain
    value is built.

    Raises:
        JSONError: `data` is not JSON, or not a `into`, with the path of the
            first offending value (`$.gpu_indices[2]`), or over a limit.
    """
    name = _type_name(into)
    if len(data) > max_size:
        raise JSONError(name, f"{len(data)} bytes is over the limit of {max_size}")
    plain = parse_json(data, name)
    budget = item_budget(len(data), max_items)
    # As for bytes: every counted element takes at least one character (or
    # byte) of the text, so a text of at most its budget cannot be over it.
    items = _items(plain, budget) if len(data) > budget else 0
    if items > budget:
        counted = f"at least {items}"
        reason = over_budget(counted, "arrays and maps", budget, max_items, len(data))
        raise JSONError(name, reason)
    return json_converter.structure(plain, into)


def _items(plain: object, limit: int) -> int:
    """Array elements and map entries in a parsed document, counted until over `limit`.

    A JSON object is a map when it is the value of a map attribute (`labels`,
    `nic_paths`, ...): each entry counts. In any other object, the keys that
    are attributes do not count (nor do the fields of a binary message); a
    key no domain model has counts, as an unknown field would if it cost as
    much (it is ignored, but parsed and looked at).
    """
    count = 0
    pending = [(plain, False)]
    while pending and count <= limit:
        value, is_map = pending.pop()
        if isinstance(value, list):
            count += len(value)
            pending.extend((item, False) for item in value if isinstance(item, (list, dict)))
        elif isinstance(value, dict):
            count += len(value) if is_map else len(value.keys() - _ATTRIBUTES)
            pending.extend(
                (item, key in _MAP_ATTRIBUTES)
                for key, item in value.items()
                if isinstance(item, (list, dict))
            )
    return count


# The attributes whose JSON objects are maps: their entries count as elements.
_MAP_ATTRIBUTES = frozenset(
    rule.attr for pair in PAIRS for rule in pair.rules if rule.rule_kind == "map"
)

# Every attribute name of the domain models: any other key is unknown.
_ATTRIBUTES = frozenset(rule.attr for pair in PAIRS for rule in pair.rules) | frozenset(
    a.name for pair in PAIRS for a in attrs.fields(pair.domain)
)
