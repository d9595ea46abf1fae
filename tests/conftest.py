"""Hypothesis profiles: "ci" (default, minutes at most) and "thorough".

Select with ELASTICOPT_HYPOTHESIS_PROFILE=thorough.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("ELASTICOPT_HYPOTHESIS_PROFILE", "ci"))
