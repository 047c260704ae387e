"""The verifiers 0.4 adapter behind scaling-env, pytorch-env and deeplearning-env.

- taskset.py: TaskData / Task (reward, metrics, stop) / Taskset (a dataset or a finite generated
  pool) / Stream (an infinite generated stream);
- instances.py: a generated task keyed from the instance its TaskData carries (never re-drawn);
- calibration.py: calibration.json (pass rates per family and level) and the pool's band filter;
- toolset.py: the shared tool server exposing `execute_code` and `bash` in an exactgrade Sandbox;
- state.py: the rollout state the tool server and the reward share;
- harness.py: the default harness (verifiers' chat loop in-process, no uv, no local tools);
- keys.py: host-side answer keys.
"""

from exactgrade.env.harness import ExactgradeHarness
from exactgrade.env.taskset import (
    ExactgradeStream,
    ExactgradeStreamConfig,
    ExactgradeTask,
    ExactgradeTaskset,
    ExactgradeTasksetConfig,
)

__all__ = ["ExactgradeHarness", "ExactgradeStream", "ExactgradeStreamConfig", "ExactgradeTask",
           "ExactgradeTaskset", "ExactgradeTasksetConfig"]
