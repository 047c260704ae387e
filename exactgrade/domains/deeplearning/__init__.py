"""The mathematics of deep learning (deeplearning-env): 36 exact tasks.

Categories, in id order: information 9 (dl-000..008), backprop 8 (dl-009..016), optimisation 7
(dl-017..023), linalg 6 (dl-024..029), numerical 6 (dl-030..035). References run in the plain
Python sandbox (standard library + sympy); every key is exact and graded with Exact().
"""

from exactgrade.domains.deeplearning import backprop, numerical
from exactgrade.domains.deeplearning import information_levels as information
from exactgrade.domains.deeplearning import linalg_levels as linalg
from exactgrade.domains.deeplearning import optimisation_levels as optimisation
from exactgrade.domains.deeplearning.checks import check

PROFILE = "python"

FAMILIES = (*information.FAMILIES, *backprop.FAMILIES, *optimisation.FAMILIES,
            *linalg.FAMILIES, *numerical.FAMILIES)

TASKS = (*information.TASKS, *backprop.TASKS, *optimisation.TASKS, *linalg.TASKS, *numerical.TASKS)

CATEGORY_COUNTS = {"information": 9, "backprop": 8, "optimisation": 7, "linalg": 6, "numerical": 6}

__all__ = ["CATEGORY_COUNTS", "FAMILIES", "PROFILE", "TASKS", "check"]
