"""Hypothesis profiles, chosen by the HYPOTHESIS_PROFILE environment variable.

`dev` (the default) is quick for a local run, `ci` is what `make test` runs,
and `fuzz` is the long run of `make fuzz`. The `backend` fixture runs a test
on each of the two wire backends.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.support import BACKENDS, WireBackend

_BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", _BASE, max_examples=30)
# ci is hypothesis's own default of 100 examples per test; the long search for
# counterexamples on fresh seeds is `make fuzz`.
settings.register_profile("ci", _BASE, max_examples=100, print_blob=True)
settings.register_profile("fuzz", _BASE, max_examples=5000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(params=BACKENDS, ids=[b.name for b in BACKENDS])
def backend(request: pytest.FixtureRequest) -> WireBackend:
    """Runs a test once on each backend: upb (`encode`/`decode`) and betterproto2 (the converter).

    The two are compiled from one mapping and must agree on every value, every
    refusal and every error message.
    """
    return request.param  # type: ignore[no-any-return]
