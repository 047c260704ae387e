"""scaling-env: the exactgrade scaling tasks as a verifiers environment (`vf-eval scaling-env ...`).

Exports exactly one vf.Taskset (and the default harness, so that no `uv` is needed on the
subprocess runtime). See the README section "The verifiers environments" for the flags.
"""

from exactgrade.env import ExactgradeHarness, ExactgradeTaskset


class ScalingTaskset(ExactgradeTaskset):
    DOMAIN = "scaling"


__all__ = ["ScalingTaskset", "ExactgradeHarness"]
