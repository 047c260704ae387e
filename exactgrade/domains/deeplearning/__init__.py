"""The mathematics of deep learning (deeplearning-env): 36 exact tasks.

Categories, in id order: information 9 (dl-000..008), backprop 8 (dl-009..016), optimisation 7
(dl-017..023), linalg 6 (dl-024..029), numerical 6 (dl-030..035). References run in the plain
Python sandbox (standard library + sympy); every key is exact and graded with Exact().

Layout: one module per family, exactgrade/domains/deeplearning/<category>/<family>.py;
<category>/shared.py holds what two or more families of the category use, and
<category>/__init__.py their FAMILIES and the canonical TASKS (docs/families.md).
"""

from exactgrade.domains.deeplearning import backprop, information, linalg, numerical, optimisation
from exactgrade.domains.deeplearning.checks import check

PROFILE = "python"

FAMILIES = (*information.FAMILIES, *backprop.FAMILIES, *optimisation.FAMILIES,
            *linalg.FAMILIES, *numerical.FAMILIES)

TASKS = (*information.TASKS, *backprop.TASKS, *optimisation.TASKS, *linalg.TASKS, *numerical.TASKS)

CATEGORY_COUNTS = {"information": 9, "backprop": 8, "optimisation": 7, "linalg": 6, "numerical": 6}

__all__ = ["CATEGORY_COUNTS", "FAMILIES", "PROFILE", "TASKS", "check"]
