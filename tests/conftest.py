"""Hypothesis profiles, chosen by the HYPOTHESIS_PROFILE environment variable.

`dev` (the default) is quick for a local run, `ci` is what `make test` runs,
and `fuzz` is the long run of `make fuzz`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("dev", max_examples=30, **_COMMON)
settings.register_profile("ci", max_examples=150, print_blob=True, **_COMMON)
settings.register_profile("fuzz", max_examples=5000, print_blob=True, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
