"""The cattrs converter between the `llmgw_wire.v1` messages and the domain models.

Its hooks are compiled from the mapping (`llmgw_wire.mapping`) for the
betterproto2 backend: `converter.structure(wire_gpu, GPU)` and
`converter.unstructure(gpu)` work for every pair, nested ones included.
Values the wire cannot carry raise `EncodeError` with their path; wire
messages the domain cannot hold raise `DecodeError`.

A hook registered on a converter for a model with a message of its own is
used wherever that model occurs, as in cattrs: the hooks of the models that
hold it are compiled again, for that converter alone, calling it where they
built the model inline. A converter with no hook of its own registered holds
the hooks compiled once per process, and costs nothing more.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import cattrs

from llmgw_wire.codec._classes import betterproto2_classes, not_top_level, top_level, wire_class
from llmgw_wire.codec._guard import guarded_structure, guarded_unstructure
from llmgw_wire.errors import DecodeError, shown
from llmgw_wire.mapping import MODELS_WITH_MESSAGE, STATE_NUMBERS, pair_for
from llmgw_wire.mapping._compiler import (
    Betterproto2,
    Compiled,
    Hooks,
    StructureFunction,
    UnstructureFunction,
    compile_backend,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing_extensions import Self


__all__ = [
    "betterproto2_classes",
    "compiled_betterproto2",
    "converter",
    "make_converter",
    "not_top_level",
    "structure_with_context",
    "top_level",
    "unstructure_with_context",
    "wire_class",
]

T = TypeVar("T")


@cache
def compiled_betterproto2() -> Compiled:
    """The mapping compiled for betterproto2, once per process."""
    from llmgw_wire.v1 import ShardStatusState

    states = {state: ShardStatusState(n) for state, n in STATE_NUMBERS.items()}
    return compile_backend(Betterproto2(betterproto2_classes(), dict(states)))


def _checked_structure(fn: Callable[..., T], domain: type) -> Callable[..., T]:
    wire_name = pair_for(domain).wire
    wire_class = betterproto2_classes()[wire_name]
    guarded = guarded_structure(fn, domain)

    def structure(message: object, _: object = None, **context: str) -> T:
        if not isinstance(message, wire_class):
            raise DecodeError(
                wire_name, f"expected a {wire_class.__name__} message, got {type(message).__name__}"
            )
        return guarded(message, **context)

    structure.__name__ = f"structure_{domain.__name__}"
    return structure


_StructureHooks = dict[type, StructureFunction]
_UnstructureHooks = dict[type, UnstructureFunction]


def _guarded_hooks(compiled: Compiled) -> tuple[_StructureHooks, _UnstructureHooks]:
    """The guarded structure and unstructure hooks of every model, from `compiled`."""
    models = MODELS_WITH_MESSAGE
    structure = {m: _checked_structure(compiled.structure[m], m) for m in models}
    unstructure = {
        m: guarded_unstructure(compiled.unstructure[m], m, "unstructure") for m in models
    }
    return structure, unstructure


@cache
def _hooks() -> tuple[_StructureHooks, _UnstructureHooks]:
    """The guarded structure and unstructure hooks of every pair, made once per process."""
    return _guarded_hooks(compiled_betterproto2())


class _HookFailed(Exception):  # noqa: N818 - a carrier inside the library, never seen by users
    """Carries what a registered hook raised past the fast path's guard, to be raised as it is."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error


def _called_structure(hook: Callable[..., object], domain: type[Any]) -> StructureFunction:
    """A registered structure hook of `domain`, as the compiled functions call a nested model's.

    What the enclosing message supplies (an adopted shard's node id) is set
    on the hook's value, as the mapping sets it on its own.
    """

    def structure(message: object, **context: str) -> object:
        try:
            value = hook(message, domain)
            if not isinstance(value, domain):
                reason = f"gave {shown(value)}, not a {domain.__name__}"
                raise TypeError(f"the structure hook registered for {domain.__name__} {reason}")
            return attrs.evolve(value, **context) if context else value
        except Exception as error:  # the hook's own error, raised as it is
            raise _HookFailed(error) from None

    return structure


def _called_unstructure(hook: Callable[[Any], object], domain: type) -> UnstructureFunction:
    """A registered unstructure hook of `domain`, as compiled functions call a nested model's."""
    message_class = wire_class(domain)

    def unstructure(value: object) -> object:
        try:
            message = hook(value)
            if not isinstance(message, message_class):
                reason = f"gave {shown(message)}, not a {message_class.__name__} message"
                raise TypeError(f"the unstructure hook registered for {domain.__name__} {reason}")
        except Exception as error:  # the hook's own error, raised as it is
            raise _HookFailed(error) from None
        return message

    return unstructure


def _raising_hook_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, such that what a registered hook raised inside it is raised as the hook raised it."""

    def call(*args: object, **kwargs: object) -> T:
        try:
            return fn(*args, **kwargs)
        except _HookFailed as failed:
            error = failed.error
        # Outside the handler: the error is the hook's own, chained to nothing of ours.
        raise error

    call.__name__ = getattr(fn, "__name__", "hook")
    return call


def _hooks_calling(registered: Hooks) -> tuple[_StructureHooks, _UnstructureHooks]:
    """The hooks of every model, compiled to call the `registered` hooks of the models they hold."""
    called = Hooks(
        structure={m: _called_structure(h, m) for m, h in registered.structure.items()},
        unstructure={m: _called_unstructure(h, m) for m, h in registered.unstructure.items()},
    )
    structure, unstructure = _guarded_hooks(
        compile_backend(compiled_betterproto2().backend, hooks=called)
    )
    return (
        {m: _raising_hook_errors(h) for m, h in structure.items() if m not in registered.structure},
        {
            m: _raising_hook_errors(h)
            for m, h in unstructure.items()
            if m not in registered.unstructure
        },
    )


class _MappedConverter(cattrs.Converter):
    """A cattrs converter holding the mapping's hooks, which a hook registered on it reaches.

    After each hook registered by class, the converter looks at which models
    now dispatch to a hook that is not the mapping's: when that set changes,
    the mapping's hooks of the other models are compiled again to call those
    (`_hooks_calling`), or, when it is empty again, are the process's own.
    A hook registered by predicate or factory never takes precedence over a
    hook registered by class (cattrs' dispatch), so it changes nothing here.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # cattrs.Converter's
        super().__init__(*args, **kwargs)
        #: The mapping's hooks this converter holds, and the models' others.
        self._mapped: tuple[_StructureHooks, _UnstructureHooks] = ({}, {})
        self._registered = Hooks()

    def _hold(self, structure: _StructureHooks, unstructure: _UnstructureHooks) -> None:
        for model, hook in structure.items():
            super().register_structure_hook(model, hook)
        for model, hook in unstructure.items():
            super().register_unstructure_hook(model, hook)
        self._mapped = (structure, unstructure)

    def _follow_registered(self) -> None:
        """Compile the mapping's hooks again if the hooks registered for its models changed."""
        # The mapping's: those this converter holds, and the process's own.
        process_structure, process_unstructure = _hooks()
        mapped_structure, mapped_unstructure = self._mapped
        registered = Hooks(
            structure={
                m: structure
                for m in MODELS_WITH_MESSAGE
                if (structure := self.get_structure_hook(m))
                not in (mapped_structure.get(m), process_structure[m])
            },
            unstructure={
                m: unstructure
                for m in MODELS_WITH_MESSAGE
                if (unstructure := self.get_unstructure_hook(m))
                not in (mapped_unstructure.get(m), process_unstructure[m])
            },
        )
        if registered == self._registered:
            return
        self._registered = registered
        if registered.structure or registered.unstructure:
            self._hold(*_hooks_calling(registered))
        else:
            self._hold(*_hooks())

    def register_structure_hook(self, cl: Any, func: Any = None) -> Any:
        """Register a structure hook, as cattrs does; the models that hold `cl` use it."""
        done = super().register_structure_hook(cl, func)
        self._follow_registered()
        return done

    def register_unstructure_hook(self, cls: Any = None, func: Any = None) -> Any:
        """Register an unstructure hook, as cattrs does; the models that hold `cls` use it."""
        done = super().register_unstructure_hook(cls, func)
        self._follow_registered()
        return done

    def copy(self, *args: Any, **kwargs: Any) -> Self:
        """A copy of the converter, as cattrs makes it, that knows which hooks are the mapping's."""
        copied = super().copy(*args, **kwargs)
        copied._mapped = self._mapped
        copied._registered = self._registered
        return copied


def make_converter() -> cattrs.Converter:
    """A new cattrs converter between the `llmgw_wire.v1` messages and the domain models.

    It holds a structure and an unstructure hook for every pair of the mapping,
    nested ones included: `structure(msg, GPU)` takes a `v1.Gpu` and gives a
    `GPU`; `unstructure(gpu)` gives the `v1.Gpu` back. Values the wire cannot
    carry raise `EncodeError`. A converter is cheap to make (the conversion
    functions are compiled once per process); add hooks to your own copy
    rather than to the shared `converter`.

    A hook you register for a model with a message of its own
    (`register_structure_hook(ShardSpec, ...)`) is used wherever the model
    occurs, as in cattrs: in `structure(msg, ShardCommand)`, in the GPUs of a
    `Registration`. What a hook raises is raised as it is.
    """
    conv = _MappedConverter()
    conv._hold(*_hooks())
    return conv


#: The converter the library's named conversions use. Treat it as read-only.
converter: cattrs.Converter = make_converter()


def structure_with_context(message: object, domain: type[T], **context: str) -> T:
    """Like `converter.structure`, with the values a message takes from its enclosing one.

    An adopted shard's `node_id`, for instance, is the registration's.
    """
    value: T = _hooks()[0][domain](message, domain, **context)
    return value


def unstructure_with_context(value: object, **wire: object) -> Any:
    """Like `converter.unstructure`, with wire fields a domain value does not hold.

    An agent reports its leader's address for a shard of every rank
    (`leader_addr`), where the domain holds it for rank 0 only, in its endpoint.
    """
    return _hooks()[1][type(value)](value, **wire)
