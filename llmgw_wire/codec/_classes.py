"""The betterproto2 class of every message of the schema, and which domain models have one.

Neither needs the cattrs converter: `decode(data, v1.X)` and the error for a
type that is not a top-level domain model are answered from here, so that
decoding and encoding import no cattrs. The betterproto2 classes are loaded
on first use: decoding into and encoding from domain values needs none.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import betterproto2

__all__ = ["betterproto2_classes", "not_top_level", "top_level", "wire_class"]


@cache
def betterproto2_classes() -> dict[str, type]:
    """The betterproto2 class of every message of the schema, by full proto name."""
    # Through `llmgw_wire.v1`, which every path to the wire classes takes (it redacts their reprs).
    import llmgw_wire.v1  # noqa: F401
    from llmgw_wire._gen.message_pool import default_message_pool

    prefix = "type.googleapis.com/"
    return {url.removeprefix(prefix): cls for url, cls in default_message_pool.url_to_type.items()}


def wire_class(domain: type) -> type[betterproto2.Message]:
    """The `llmgw_wire.v1` class of the wire message that carries the domain model `domain`.

    Raises:
        TypeError: `domain` is not a domain model with a wire message of its own.
    """
    return betterproto2_classes()[top_level(domain)]


def top_level(domain: type) -> str:
    """The proto name of the message that carries `domain`; `TypeError` for any other type."""
    from llmgw_wire.mapping import pair_for  # the table, loaded on first use

    try:
        pair = pair_for(domain)
    except KeyError:
        pair = None
    if pair is None or pair.embedded:
        not_top_level(domain)
    return pair.wire


def not_top_level(domain: type) -> NoReturn:
    """Raise the `TypeError` for a type that is not a domain model with a message of its own."""
    raise TypeError(f"{domain!r} is not a domain model carried by a wire message of its own")
