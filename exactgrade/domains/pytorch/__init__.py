"""pytorch-env: 45 tasks on the CPU build of PyTorch, graded with AllClose(rtol=1e-5, atol=1e-7).

Categories in id order: tensor_ops (pt-000..pt-015), nn_modules (pt-016..pt-027), autograd
(pt-028..pt-033), losses (pt-034..pt-039), optim (pt-040..pt-044). Every key is the output of a
torch reference program and is recomputed independently without torch (exact Fractions or
mpmath) by check(). Every task is an instance of one of FAMILIES (48: one per canonical task
plus three chains), which also generate new instances at levels 1-5 (exactgrade.generate); a
generated key is posed only when check() confirms it the same way. This package imports without
torch; materialising or checking a task without it raises TorchMissing with the install command.

Layout: one module per family, exactgrade/domains/pytorch/<category>/<family>.py;
<category>/shared.py holds what two or more families of the category use, and
<category>/__init__.py their FAMILIES and the canonical TASKS (docs/families.md).
"""

from exactgrade.domains.pytorch import autograd, losses, nn_modules, optim, tensor_ops
from exactgrade.domains.pytorch.checks import check, environment, summary
from exactgrade.domains.pytorch.common import INSTALL_HINT, PROFILE, TorchMissing

FAMILIES = (*tensor_ops.FAMILIES, *nn_modules.FAMILIES, *autograd.FAMILIES, *losses.FAMILIES, *optim.FAMILIES)

TASKS = (*tensor_ops.TASKS, *nn_modules.TASKS, *autograd.TASKS, *losses.TASKS, *optim.TASKS)

generated_summary = summary  # independently confirmed: N/N holds for generated tasks too

__all__ = ["FAMILIES", "INSTALL_HINT", "PROFILE", "TASKS", "TorchMissing", "check", "environment",
           "generated_summary", "summary"]
