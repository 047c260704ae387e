"""autograd (pt-028..pt-033): backward on scalar losses, gradient accumulation,
torch.autograd.grad, detach, second derivatives with create_graph, and gradients at kinks.

The independent checks differentiate the polynomials by hand in exact Fraction arithmetic.
"""

from __future__ import annotations

from exactgrade.domains.pytorch.autograd.accumulated_gradient import ACCUMULATED_GRADIENT
from exactgrade.domains.pytorch.autograd.detached_gradient import DETACHED_GRADIENT
from exactgrade.domains.pytorch.autograd.kink_gradients import KINK_GRADIENTS
from exactgrade.domains.pytorch.autograd.mlp_loss_gradients import MLP_LOSS_GRADIENTS
from exactgrade.domains.pytorch.autograd.partial_derivatives import PARTIAL_DERIVATIVES
from exactgrade.domains.pytorch.autograd.regression_gradient import REGRESSION_GRADIENT
from exactgrade.domains.pytorch.autograd.second_derivative import SECOND_DERIVATIVE
from exactgrade.domains.pytorch.common import tensor

FAMILIES = (
    REGRESSION_GRADIENT,
    ACCUMULATED_GRADIENT,
    PARTIAL_DERIVATIVES,
    DETACHED_GRADIENT,
    SECOND_DERIVATIVE,
    KINK_GRADIENTS,
    MLP_LOSS_GRADIENTS,
)

TASKS = (
    REGRESSION_GRADIENT.task(
        "pt-028",
        {
            "w0": tensor("float32", [0.5, -1.0, 0.25]),
            "x": tensor("float32", [[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [3.0, 0.25, 1.0], [-2.0, 1.0, 0.5]]),
            "y": tensor("float32", [1.0, -2.0, 0.5, 3.0]),
        },
    ),
    ACCUMULATED_GRADIENT.task("pt-029", {"w0": tensor("float32", [-1.5, 0.25, 2.0, 0.75])}),
    PARTIAL_DERIVATIVES.task(
        "pt-030", {"a0": tensor("float32", [1.5, -0.75, 2.0]), "b0": tensor("float32", [0.5, 1.25, -1.0])}
    ),
    DETACHED_GRADIENT.task("pt-031", {"x0": tensor("float32", [-1.5, 0.5, 1.0, 2.5])}),
    SECOND_DERIVATIVE.task("pt-032", {"x0": tensor("float32", [-1.5, -0.5, 0.25, 1.5, 2.0])}),
    KINK_GRADIENTS.task("pt-033", {"x0": tensor("float32", [-1.0, 0.0, 0.5, 2.0, 3.0, 3.0])}),
)
