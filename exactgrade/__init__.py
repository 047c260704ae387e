"""exactgrade: exact-arithmetic grading for quantitative deep-learning RL environments.

Data flow: task definition (exactgrade.domains) -> reference solution -> exact answer key
(exactgrade.task) -> dataset row (exactgrade.dataset) -> rollout in the sandbox
(exactgrade.env, exactgrade.sandbox) -> wire read-back (exactgrade.wire) -> comparator
verdict (exactgrade.compare) -> reward. Text answers: exactgrade.text (extract, read by the
key, compare).
"""

from exactgrade._version import __version__
from exactgrade.compare import compare
from exactgrade.family import Family, GenerationError, families, generate
from exactgrade.lookup import get_task
from exactgrade.policy import AllClose, Exact, Policy, RelTol
from exactgrade.task import Task, TaskDef, tasks
from exactgrade.text import Extraction, ParsedAnswer, extract_answer, grade_text, parse_answer
from exactgrade.values import TensorValue
from exactgrade.verdict import Verdict

__all__ = [
    "__version__",
    "AllClose",
    "Exact",
    "Extraction",
    "Family",
    "GenerationError",
    "ParsedAnswer",
    "Policy",
    "RelTol",
    "Task",
    "TaskDef",
    "TensorValue",
    "Verdict",
    "compare",
    "extract_answer",
    "families",
    "generate",
    "get_task",
    "grade_text",
    "parse_answer",
    "tasks",
]
