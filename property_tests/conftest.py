"""Hypothesis profiles for the property suite.

ci (default): a fixed, derandomized set of examples with no deadline (the CI box is shared and
slow) and no example database, so every run checks the same cases quickly.
dev: many more random examples, for hunting bugs locally. Select with HYPOTHESIS_PROFILE=dev.
"""

import os

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_SLOW_OK)
settings.register_profile("dev", max_examples=1000, deadline=None, suppress_health_check=_SLOW_OK)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
