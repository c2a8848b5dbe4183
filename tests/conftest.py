"""Hypothesis profiles, chosen by the HYPOTHESIS_PROFILE environment variable.

`dev` (the default) is quick for a local run, `ci` is what `make test` runs,
and `fuzz` is the long run of `make fuzz`. The `backend` fixture runs a test
on each of the two wire backends.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest
from hypothesis import HealthCheck, settings

from llmgw_wire import converter, decode, encode
from llmgw_wire.codec import wire_class

if TYPE_CHECKING:
    from collections.abc import Callable

_BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", _BASE, max_examples=30)
# ci is hypothesis's own default of 100 examples per test; the long search for
# counterexamples on fresh seeds is `make fuzz`.
settings.register_profile("ci", _BASE, max_examples=100, print_blob=True)
settings.register_profile("fuzz", _BASE, max_examples=5000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: starts several processes and runs for seconds (deselect: -m 'not slow')"
    )


class WireBackend(NamedTuple):
    """One of the two wire backends the mapping is compiled for, as bytes in and out."""

    name: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes, type], Any]


def _betterproto2_encode(value: Any) -> bytes:
    return bytes(converter.unstructure(value))


def _betterproto2_decode(data: bytes, model: type) -> Any:
    return converter.structure(wire_class(model).parse(data), model)


BACKENDS = (
    WireBackend("upb", encode, decode),
    WireBackend("betterproto2", _betterproto2_encode, _betterproto2_decode),
)


@pytest.fixture(params=BACKENDS, ids=[b.name for b in BACKENDS])
def backend(request: pytest.FixtureRequest) -> WireBackend:
    """Runs a test once on each backend: upb (`encode`/`decode`) and betterproto2 (the converter).

    The two are compiled from one mapping and must agree on every value, every
    refusal and every error message.
    """
    return request.param  # type: ignore[no-any-return]
