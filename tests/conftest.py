"""Shared test configuration: Hypothesis profiles and the tshark referee switch.

Profiles: ``dev`` (default, fast) and ``ci`` (derandomized, more examples); CI selects
``ci`` with ``HYPOTHESIS_PROFILE=ci``.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
