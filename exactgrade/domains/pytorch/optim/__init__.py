"""optim (pt-040..pt-044): one SGD step with weight decay, SGD with momentum, one Adam step,
three chained AdamW steps, and clip_grad_norm_.

The independent checks replay each update rule as torch documents it: exact Fractions for SGD
on a quadratic loss, mpmath for the square roots of Adam and of the gradient norm.
"""

from __future__ import annotations

from exactgrade.domains.pytorch.common import tensor
from exactgrade.domains.pytorch.optim.adam_step import ADAM_STEP
from exactgrade.domains.pytorch.optim.adamw_three_steps import ADAMW_THREE_STEPS
from exactgrade.domains.pytorch.optim.clipped_gradients import CLIPPED_GRADIENTS
from exactgrade.domains.pytorch.optim.sgd_momentum_steps import SGD_MOMENTUM_STEPS
from exactgrade.domains.pytorch.optim.sgd_schedule_clipping import SGD_SCHEDULE_CLIPPING
from exactgrade.domains.pytorch.optim.sgd_step import SGD_STEP

FAMILIES = (
    SGD_STEP,
    SGD_MOMENTUM_STEPS,
    ADAM_STEP,
    ADAMW_THREE_STEPS,
    CLIPPED_GRADIENTS,
    SGD_SCHEDULE_CLIPPING,
)

_REGRESSION = {
    "x": tensor("float32", [[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [3.0, 0.25, 1.0], [-2.0, 1.0, 0.5]]),
    "y": tensor("float32", [1.0, -2.0, 0.5, 3.0]),
}

TASKS = (
    SGD_STEP.task("pt-040", {"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION}),
    SGD_MOMENTUM_STEPS.task("pt-041", {"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION}),
    ADAM_STEP.task(
        "pt-042",
        {"w0": tensor("float32", [1.5, -2.0, 0.75]), "scales": tensor("float32", [256.0, 0.001953125, -1.0])},
    ),
    ADAMW_THREE_STEPS.task("pt-043", {"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION}),
    CLIPPED_GRADIENTS.task(
        "pt-044",
        {
            "p1_0": tensor("float32", [[0.5, -1.0], [1.5, 0.25]]),
            "p2_0": tensor("float32", [-0.75, 1.25, 2.0]),
        },
    ),
)
