"""losses (pt-034..pt-039): MSE, cross-entropy (per sample, mean, soft targets, class weights,
ignore_index, label smoothing), BCE and BCE-with-logits, L1 / smooth L1 / Huber, KL divergence.

The independent checks write each loss from its formula: Fractions for the polynomial losses,
mpmath for the ones with log and exp.
"""

from __future__ import annotations

from exactgrade.domains.pytorch.common import tensor
from exactgrade.domains.pytorch.losses.binary_cross_entropy_losses import BINARY_CROSS_ENTROPY_LOSSES
from exactgrade.domains.pytorch.losses.cross_entropy_losses import CROSS_ENTROPY_LOSSES
from exactgrade.domains.pytorch.losses.cross_entropy_options import CROSS_ENTROPY_OPTIONS
from exactgrade.domains.pytorch.losses.kl_divergences import KL_DIVERGENCES
from exactgrade.domains.pytorch.losses.mean_squared_error import MEAN_SQUARED_ERROR
from exactgrade.domains.pytorch.losses.robust_regression_losses import ROBUST_REGRESSION_LOSSES

FAMILIES = (
    MEAN_SQUARED_ERROR,
    CROSS_ENTROPY_LOSSES,
    CROSS_ENTROPY_OPTIONS,
    BINARY_CROSS_ENTROPY_LOSSES,
    ROBUST_REGRESSION_LOSSES,
    KL_DIVERGENCES,
)

TASKS = (
    MEAN_SQUARED_ERROR.task(
        "pt-034",
        {
            "pred": tensor("float32", [[1.5, -0.5, 2.0], [0.25, 3.0, -1.0]]),
            "target": tensor("float32", [[1.0, 0.5, 2.75], [-0.5, 2.5, 1.0]]),
        },
    ),
    CROSS_ENTROPY_LOSSES.task(
        "pt-035",
        {
            "logits": tensor(
                "float32", [[2.0, 0.5, -1.0, 1.0], [0.25, 1.5, 0.75, -0.5], [-1.0, 0.0, 2.5, 3.0]]
            ),
            "target": tensor("int64", [2, 0, 3]),
            "soft_target": tensor(
                "float32", [[0.5, 0.25, 0.125, 0.125], [0.0, 0.75, 0.25, 0.0], [0.25, 0.25, 0.25, 0.25]]
            ),
        },
    ),
    CROSS_ENTROPY_OPTIONS.task(
        "pt-036",
        {
            "logits": tensor(
                "float32", [[1.5, -0.5, 0.25], [0.5, 2.0, -1.0], [3.0, 0.0, 1.0], [-0.75, 1.25, 0.5]]
            ),
            "target": tensor("int64", [0, 2, -100, 1]),
            "class_weight": tensor("float32", [0.5, 2.0, 1.0]),
        },
    ),
    BINARY_CROSS_ENTROPY_LOSSES.task(
        "pt-037",
        {
            "probs": tensor("float32", [[0.75, 0.125, 0.5], [0.875, 0.25, 0.625]]),
            "logits": tensor("float32", [[1.5, -2.0, 0.25], [2.5, -0.5, 1.0]]),
            "target": tensor("float32", [[1.0, 0.0, 0.25], [1.0, 0.0, 1.0]]),
            "pos_weight": tensor("float32", [2.0, 1.0, 0.5]),
        },
    ),
    ROBUST_REGRESSION_LOSSES.task(
        "pt-038",
        {
            "pred": tensor("float32", [0.5, 1.25, 2.0, -1.0, 3.5, 0.0]),
            "target": tensor("float32", [3.0, 2.0, 2.25, -1.125, 2.875, -1.5]),
        },
    ),
    KL_DIVERGENCES.task(
        "pt-039",
        {
            "logits": tensor("float32", [[1.0, 0.5, -0.5], [2.0, -1.0, 0.25]]),
            "target": tensor("float32", [[0.5, 0.25, 0.25], [0.625, 0.125, 0.25]]),
        },
    ),
)
