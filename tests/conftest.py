"""Hypothesis profiles, chosen by the HYPOTHESIS_PROFILE environment variable.

`dev` (the default) is quick for a local run, `ci` is what `make test` runs,
and `fuzz` is the long run of `make fuzz`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", _BASE, max_examples=30)
settings.register_profile("ci", _BASE, max_examples=150, print_blob=True)
settings.register_profile("fuzz", _BASE, max_examples=5000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
