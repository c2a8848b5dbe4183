"""Field helpers shared by the domain models.

Values are immutable all the way down, so that they can be shared, hashed
and used as keys: sequences are stored as tuples and maps as `FrozenMap`s,
each copied from whatever iterable or mapping they were built with. The
annotations say `Sequence[...]` and `Mapping[...]`, so that `Node(gpus=[...])`
type-checks; what is stored is always a tuple or a `FrozenMap`.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any

import attrs

from llmgw_wire.errors import shown

__all__ = ["FrozenMap", "secret", "seq", "str_map"]


class FrozenMap(Mapping[str, str]):
    """An immutable, hashable `str -> str` mapping; equal to a dict with the same items.

    Its repr is the dict's, so that reprs of domain values read as they are written.
    """

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, str] = dict(items)
        self._hash: int | None = None

    @classmethod
    def _owning(cls, items: dict[str, str]) -> FrozenMap:
        """A map that holds `items` itself, not a copy: for a dict no one else holds.

        The codec builds each map's dict fresh from the wire; copying it again
        would only cost time.
        """
        new = object.__new__(cls)
        new._items = items
        new._hash = None
        return new

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # The dict's own views and lookups, read-only as they are: at C speed,
    # where the Mapping mixins would call back into Python for every item.
    def keys(self) -> KeysView[str]:
        return self._items.keys()

    def values(self) -> ValuesView[str]:
        return self._items.values()

    def items(self) -> ItemsView[str, str]:
        return self._items.items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._items.get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self) -> tuple[type[FrozenMap], tuple[dict[str, str]]]:
        return (FrozenMap, (self._items,))


def _frozen_map(values: Mapping[str, str]) -> FrozenMap:
    return values if type(values) is FrozenMap else FrozenMap(values)


def seq() -> Any:
    """A tuple attribute, empty by default; any iterable is accepted and copied."""
    return attrs.field(factory=tuple, converter=tuple)


_EMPTY = FrozenMap()


def str_map() -> Any:
    """A `FrozenMap` attribute, empty by default, copied from the mapping given."""
    return attrs.field(default=_EMPTY, converter=_frozen_map)


def _redacted(value: object) -> str:
    # Only the type of a value that is set: `<secret str, not shown>`.
    empty = isinstance(value, (str, bytes, Mapping)) and not value
    return repr(value) if empty else shown(value, secret=True)


def secret(*, mapping: bool = False) -> Any:
    """An attribute whose value never appears in a repr, only whether it is set.

    A string by default, empty by default; `mapping=True` makes it a
    `FrozenMap` as `str_map()` does. Its metadata says `{"secret": True}`.
    Which attributes are secret is the schema's to say
    (`[debug_redact = true]`); the domain cannot read it, so it repeats it
    here, and a test holds the two equal (`llmgw_wire.mapping.SECRET_ATTRIBUTES`).
    """
    if mapping:
        return attrs.field(
            default=_EMPTY, converter=_frozen_map, repr=_redacted, metadata={"secret": True}
        )
    return attrs.field(default="", repr=_redacted, metadata={"secret": True})
