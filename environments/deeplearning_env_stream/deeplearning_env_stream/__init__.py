"""deeplearning-env-stream: an infinite stream of generated exactgrade deeplearning tasks.

Run with `vf-eval deeplearning-env-stream -n N ...` (`-n` bounds a run).

Its own environment because infinity is a property of the Taskset class (verifiers and prime-rl
read `type(taskset).INFINITE`): deeplearning-env's generated source is a finite pool. Exports exactly
one vf.Taskset (and the default harness). See the README section "Generated tasks".
"""

from exactgrade.env import ExactgradeHarness, ExactgradeStream


class DeeplearningStream(ExactgradeStream):
    DOMAIN = "deeplearning"


__all__ = ["DeeplearningStream", "ExactgradeHarness"]
