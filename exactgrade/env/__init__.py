"""The verifiers 0.4 adapter behind scaling-env, pytorch-env and deeplearning-env.

- taskset.py: TaskData / Task (reward, metrics, stop) / Taskset over a domain's dataset;
- toolset.py: the shared tool server exposing `execute_code` and `bash` in an exactgrade Sandbox;
- state.py: the rollout state the tool server and the reward share;
- harness.py: the default harness (verifiers' chat loop in-process, no uv, no local tools);
- keys.py: host-side answer keys.
"""

from exactgrade.env.harness import ExactgradeHarness
from exactgrade.env.taskset import ExactgradeTask, ExactgradeTaskset, ExactgradeTasksetConfig

__all__ = ["ExactgradeHarness", "ExactgradeTask", "ExactgradeTaskset", "ExactgradeTasksetConfig"]
