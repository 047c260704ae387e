"""deeplearning-env: the exactgrade deeplearning tasks as a verifiers environment.

Run with `vf-eval deeplearning-env ...`.

Exports exactly one vf.Taskset (and the default harness, so that no `uv` is needed on the
subprocess runtime). See the README section "The verifiers environments" for the flags.
"""

from exactgrade.env import ExactgradeHarness, ExactgradeTaskset


class DeeplearningTaskset(ExactgradeTaskset):
    DOMAIN = "deeplearning"


__all__ = ["DeeplearningTaskset", "ExactgradeHarness"]
