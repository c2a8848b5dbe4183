"""Which fields of the schema are secret, read from the schema itself.

A field is secret when the schema marks it with protobuf's standard option
`[debug_redact = true]` (`string api_key = 16 [debug_redact = true];`). This
module reads that from the descriptor set the wire layer was generated from.
`redact_reprs` gives the betterproto2 classes a `repr` (and `str`) that shows
a secret field only as `<secret str, not shown>` (`llmgw_wire.errors.shown`);
it is called in one place, `llmgw_wire.v1`, the module that every path of the
library to the wire classes goes through (the mapping reads this module).
The mapping derives the secret domain attributes from the same set
(`llmgw_wire.mapping.SECRET_ATTRIBUTES`); a test holds the domain's own marks
(`secret()`) equal to them.

Serialisations asked for on purpose still carry the value: `bytes(message)`,
betterproto2's `to_dict` and `to_json`, and the library's `encode`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Read by `llmgw_wire._schema`, which loads no wire class; re-exported here.
from llmgw_wire._schema import SECRET_FIELDS, descriptor_set, secret_fields
from llmgw_wire.errors import shown

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["SECRET_FIELDS", "descriptor_set", "redact_reprs", "secret_fields"]


def redact_reprs(classes: Mapping[str, type], secrets: frozenset[str]) -> None:
    """Make the `repr` of each betterproto2 class that has a secret field hide it.

    Args:
        classes: betterproto2 message classes by full proto name.
        secrets: full names of the secret fields (`secret_fields`).

    The classes are changed in place; a class with no secret field keeps its
    own `repr`, and nested messages use theirs, so redaction holds at any depth.
    """
    for proto_name, cls in classes.items():
        names = {
            field.rsplit(".", 1)[1] for field in secrets if field.rsplit(".", 1)[0] == proto_name
        }
        if names:
            redacting = _redacting_repr(cls, frozenset(names))
            # betterproto2 defines no __str__; set it too, so that none can differ.
            setattr(cls, "__repr__", redacting)  # noqa: B010 - mypy refuses the assignment
            setattr(cls, "__str__", redacting)  # noqa: B010


def _redacting_repr(cls: type, names: frozenset[str]) -> Callable[[Any], str]:
    # betterproto2's own repr, but a secret field shows only its type.
    def __repr__(self: Any) -> str:  # noqa: N807 - it is the class's __repr__
        parts = []
        for field_name in self._betterproto.sorted_field_names:
            value = self.__getattribute__(field_name)
            if value == self._get_field_default(field_name):
                continue
            text = shown(value, secret=True) if field_name in names else repr(value)
            parts.append(f"{field_name}={text}")
        return f"{type(self).__name__}({', '.join(parts)})"

    __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
    return __repr__
