"""exactgrade: exact-arithmetic grading for quantitative deep-learning RL environments.

Data flow: task definition (exactgrade.domains) -> reference solution -> exact answer key
(exactgrade.task) -> dataset row (exactgrade.dataset) -> rollout in the sandbox
(exactgrade.env, exactgrade.sandbox) -> wire read-back (exactgrade.wire) -> comparator
verdict (exactgrade.compare) -> reward.
"""

from exactgrade._version import __version__
from exactgrade.compare import compare
from exactgrade.family import Family, GenerationError, families, generate
from exactgrade.lookup import get_task
from exactgrade.policy import AllClose, Exact, Policy, RelTol
from exactgrade.task import Task, TaskDef, tasks
from exactgrade.values import TensorValue
from exactgrade.verdict import Verdict

__all__ = [
    "__version__",
    "AllClose",
    "Exact",
    "Family",
    "GenerationError",
    "Policy",
    "RelTol",
    "Task",
    "TaskDef",
    "TensorValue",
    "Verdict",
    "compare",
    "families",
    "generate",
    "get_task",
    "tasks",
]
