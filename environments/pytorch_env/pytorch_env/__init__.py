"""pytorch-env: the exactgrade pytorch tasks as a verifiers environment (`vf-eval pytorch-env ...`).

Exports exactly one vf.Taskset (and the default harness, so that no `uv` is needed on the
subprocess runtime). See the README section "The verifiers environments" for the flags.
"""

from exactgrade.env import ExactgradeHarness, ExactgradeTaskset


class PytorchTaskset(ExactgradeTaskset):
    DOMAIN = "pytorch"


__all__ = ["PytorchTaskset", "ExactgradeHarness"]
