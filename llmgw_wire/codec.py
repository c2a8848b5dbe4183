"""The codec: a cattrs converter between wire messages and domain models, and bytes.

Two wire backends are compiled from the one mapping (`llmgw_wire.mapping`):

* the betterproto2 classes of `llmgw_wire.v1`, the typed wire API, behind the
  cattrs converter (`converter.structure(wire_gpu, GPU)`,
  `converter.unstructure(gpu)`);
* Google's protobuf runtime (upb), a strict and fast parser and serialiser,
  behind `encode` and `decode`.

Both raise the library's errors: `EncodeError` with the path of the first
value the wire cannot carry, `DecodeError` with the message type and what was
wrong.
"""

from __future__ import annotations

from functools import cache, partial
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

import cattrs
from google.protobuf.message import DecodeError as _PbDecodeError

from llmgw_wire import _pb, _rules, _strict
from llmgw_wire._compile import STATE_NUMBERS, Betterproto2, Compiled, Upb, compile_backend
from llmgw_wire._gen.message_pool import default_message_pool
from llmgw_wire.errors import DecodeError, EncodeError
from llmgw_wire.mapping import PAIRS, pair_for

if TYPE_CHECKING:
    from collections.abc import Callable

    import betterproto2

__all__ = [
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_SIZE",
    "converter",
    "decode",
    "encode",
    "make_converter",
    "wire_class",
]

T = TypeVar("T")

#: The largest message `decode` accepts by default: gRPC's default limit.
DEFAULT_MAX_SIZE = 4 * 1024 * 1024

#: The most elements of repeated message and map fields (GPUs, shards, labels,
#: ...) `decode` accepts by default in one message. An empty element is two
#: bytes on the wire but a whole object in memory, so the size limit alone
#: would let 4 MiB of input take gigabytes; this keeps memory in proportion.
DEFAULT_MAX_ITEMS = 10_000

# Inputs larger than this are counted on a skeleton parse (repeated messages
# as bytes) before the real parse, which alone costs upb ~130 bytes of memory
# per input byte of empty elements. Below it, that cost is small and the
# count runs on the parsed message.
_COUNT_FIRST_ABOVE = 64 * 1024

# Exceptions a compiled function lets through for a value it cannot convert;
# the explaining walk then says which attribute and why.
_REFUSED = (_rules._Invalid, TypeError, ValueError, AttributeError, UnicodeError, OverflowError)


@cache
def _betterproto2_classes() -> dict[str, type]:
    prefix = "type.googleapis.com/"
    return {url.removeprefix(prefix): cls for url, cls in default_message_pool.url_to_type.items()}


@cache
def _compiled_betterproto2() -> Compiled:
    from llmgw_wire.v1 import ShardStatusState

    states = {state: ShardStatusState(n) for state, n in STATE_NUMBERS.items()}
    return compile_backend(Betterproto2(_betterproto2_classes(), dict(states)))


@cache
def _compiled_upb() -> Compiled:
    return compile_backend(Upb(_pb.CLASSES, dict(STATE_NUMBERS)))


def _explain_encode(value: object, domain: type, exc: BaseException) -> EncodeError:
    if type(value) is not domain:
        return EncodeError(domain.__name__, value, ())
    try:
        _rules.explain_value(value, ())
    except EncodeError as error:
        return error
    # The fast path refused what the checks accept: a bug here, not bad input.
    raise AssertionError(f"{domain.__name__} refused but not explained") from exc


def _explain_decode(message: Any, domain: type, exc: BaseException) -> DecodeError:
    name = pair_for(domain).wire
    try:
        _rules.explain_wire(message, domain, (), name)
    except DecodeError as error:
        return error
    return DecodeError(name, f"{type(exc).__name__}: {exc}")


def _guard_unstructure(fn: Callable[[Any], T], domain: type) -> Callable[[Any], T]:
    def unstructure(value: Any) -> T:
        try:
            return fn(value)
        except _REFUSED as exc:
            raise _explain_encode(value, domain, exc) from None

    unstructure.__name__ = f"unstructure_{domain.__name__}"
    return unstructure


def _guard_structure(fn: Callable[..., T], domain: type) -> Callable[[Any, Any], T]:
    wire_class = _betterproto2_classes()[pair_for(domain).wire]

    def structure(message: Any, _: Any = None, **context: str) -> T:
        if not isinstance(message, wire_class):
            raise DecodeError(
                pair_for(domain).wire,
                f"expected a {wire_class.__name__} message, got {type(message).__name__}",
            )
        try:
            return fn(message, **context)
        except _REFUSED as exc:
            raise _explain_decode(message, domain, exc) from None

    structure.__name__ = f"structure_{domain.__name__}"
    return structure


@cache
def _hooks() -> tuple[dict[type, Callable[..., Any]], dict[type, Callable[[Any], Any]]]:
    """The guarded structure and unstructure hooks of every pair, made once per process."""
    compiled = _compiled_betterproto2()
    models = [pair.domain for pair in PAIRS if not pair.embedded]
    structure = {m: _guard_structure(compiled.structure[m], m) for m in models}
    unstructure = {m: _guard_unstructure(compiled.unstructure[m], m) for m in models}
    return structure, unstructure


def make_converter() -> cattrs.Converter:
    """A new cattrs converter between the `llmgw_wire.v1` messages and the domain models.

    It holds a structure and an unstructure hook for every pair of the mapping,
    nested ones included: `structure(msg, GPU)` takes a `v1.Gpu` and gives a
    `GPU`; `unstructure(gpu)` gives the `v1.Gpu` back. Values the wire cannot
    carry raise `EncodeError`. A converter is cheap to make (the conversion
    functions are compiled once per process); add hooks to your own copy
    rather than to the shared `converter`.
    """
    conv = cattrs.Converter()
    structure, unstructure = _hooks()
    for model, hook in structure.items():
        conv.register_structure_hook(model, hook)
    for model, hook in unstructure.items():
        conv.register_unstructure_hook(model, hook)
    return conv


#: The converter the library's named conversions use. Treat it as read-only.
converter: cattrs.Converter = make_converter()


def structure_with_context(message: Any, domain: type[T], **context: str) -> T:
    """Like `converter.structure`, with the values a message takes from its enclosing one.

    An adopted shard's `node_id`, for instance, is the registration's.
    """
    return _hooks()[0][domain](message, domain, **context)  # type: ignore[no-any-return]


# --- bytes ----------------------------------------------------------------------


_WIRE_NAMES: dict[type, str] = {cls: name for name, cls in _betterproto2_classes().items()}


def wire_class(domain: type) -> type[betterproto2.Message]:
    """The `llmgw_wire.v1` class of the wire message that carries the domain model `domain`.

    Raises:
        TypeError: `domain` is not a domain model with a wire message of its own.
    """
    return _betterproto2_classes()[_top_level(domain)]


def _top_level(domain: type) -> str:
    try:
        pair = pair_for(domain)
    except KeyError:
        pair = None
    if pair is None or pair.embedded:
        _not_top_level(domain)
    return pair.wire


def _not_top_level(domain: type) -> NoReturn:
    raise TypeError(f"{domain!r} is not a domain model carried by a wire message of its own")


def encode(value: object) -> bytes:
    """Serialise a domain value as its wire message.

    The bytes are deterministic (map entries sorted), so the same value always
    gives the same bytes.

    Raises:
        EncodeError: a value the wire cannot carry, with its path.
        TypeError: `value` is not a domain model with a wire message of its own.
    """
    encoder = _ENCODERS.get(type(value)) or _upb_encoder(type(value))
    return encoder(value)


# By domain model: its whole path to bytes, made on first use (when the upb
# backend is compiled) so that encode() is one lookup and one call.
_ENCODERS: dict[type, Callable[[Any], bytes]] = {}


def _upb_encoder(domain: type) -> Callable[[Any], bytes]:
    if not _ENCODERS:
        encoders = {}
        for model, fill in _compiled_upb().fill.items():
            message_class: Any = _pb.CLASSES[pair_for(model).wire]
            deterministic = _reaches_map(message_class.DESCRIPTOR)
            encoders[model] = _make_encoder(model, fill, message_class, deterministic=deterministic)
        # All at once (one C call under the GIL): another thread never sees half a table.
        _ENCODERS.update(encoders)
    return _ENCODERS.get(domain) or _not_top_level(domain)


def _make_encoder(
    domain: type, fill: Callable[[Any, Any], None], message_class: Any, *, deterministic: bool
) -> Callable[[Any], bytes]:
    # Deterministic serialisation only orders map entries, and its keyword
    # alone doubles upb's cost on a small message: asked for only where a map
    # can occur.
    serialize = message_class.SerializeToString
    if deterministic:
        serialize = partial(serialize, deterministic=True)

    def encode(value: Any) -> bytes:
        message = message_class()
        try:
            fill(value, message)
        except _REFUSED as exc:
            raise _explain_encode(value, domain, exc) from None
        return serialize(message)  # type: ignore[no-any-return]

    return encode


def _reaches_map(descriptor: Any, seen: frozenset[str] = frozenset()) -> bool:
    for field in descriptor.fields:
        sub = field.message_type
        if sub is None or sub.full_name in seen:
            continue
        if sub.GetOptions().map_entry or _reaches_map(sub, seen | {descriptor.full_name}):
            return True
    return False


def _parse(
    data: bytes | bytearray | memoryview,
    name: str,
    max_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> Any:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > max_size:
        raise DecodeError(name, f"{len(raw)} bytes is over the limit of {max_size}")
    if len(raw) > _COUNT_FIRST_ABOVE:
        _check_items(_parse_as(_pb.SKELETONS[name], raw, name), name, max_items)
    message = _parse_as(_pb.CLASSES[name], raw, name)
    _check_items(message, name, max_items)
    return message


def _parse_as(message_class: Any, raw: bytes, name: str) -> Any:
    message = message_class()
    try:
        message.ParseFromString(raw)
    except _PbDecodeError as exc:
        # upb says only that something is wrong; the scanner says what and where.
        problem = _strict.diagnose(raw, _pb.CLASSES[name].DESCRIPTOR)  # type: ignore[attr-defined]
        if problem is None:
            raise DecodeError(name, str(exc) or "malformed bytes") from None
        raise DecodeError(name, problem.reason, problem.path) from None
    return message


def _check_items(message: Any, name: str, max_items: int) -> None:
    items = _pb.item_count(message)
    if items > max_items:
        reason = f"{items} elements of repeated fields is over the limit of {max_items}"
        raise DecodeError(name, reason)


@overload
def decode(
    data: bytes | bytearray | memoryview,
    into: type[betterproto2.Message],
    *,
    max_size: int = ...,
    max_items: int = ...,
) -> Any: ...
@overload
def decode(
    data: bytes | bytearray | memoryview,
    into: type[T],
    *,
    max_size: int = ...,
    max_items: int = ...,
) -> T: ...
def decode(
    data: bytes | bytearray | memoryview,
    into: type[T],
    *,
    max_size: int = DEFAULT_MAX_SIZE,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> T:
    """Parse the wire message for `into` from `data` and return it as a domain value.

    `into` is a domain model (`Node`, `Registration`, `ShardCommand`, ...) or
    a `llmgw_wire.v1` message class. Parsing is strict: malformed bytes,
    invalid UTF-8, messages over `max_size` bytes and messages with more than
    `max_items` elements of repeated message and map fields raise
    `DecodeError`, so memory stays in proportion to the input.

    Raises:
        DecodeError: the bytes are not a valid message of that type.
        TypeError: `into` is neither a domain model with a wire message of its
            own nor a `llmgw_wire.v1` message class.
    """
    wire_name = _WIRE_NAMES.get(into)
    if wire_name is not None:
        # Parsed strictly first; betterproto2 then reads the canonical bytes.
        canonical = _strict.canonical_for_betterproto2(
            _parse(data, wire_name, max_size, max_items), data, wire_name
        )
        return into.parse(canonical)  # type: ignore[attr-defined,no-any-return]
    name, structure = _upb_decoders().get(into) or _not_top_level(into)
    message = _parse(data, name, max_size, max_items)
    try:
        return structure(message)  # type: ignore[no-any-return]
    except _REFUSED as exc:
        raise _explain_decode(message, into, exc) from None


@cache
def _upb_decoders() -> dict[type, tuple[str, Callable[[Any], Any]]]:
    """By domain model with a wire message of its own: its name and the upb structure function."""
    structure = _compiled_upb().structure
    return {p.domain: (p.wire, structure[p.domain]) for p in PAIRS if not p.embedded}
