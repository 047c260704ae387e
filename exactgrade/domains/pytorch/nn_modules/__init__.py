"""nn_modules (pt-016..pt-027): Linear, Conv2d, activations, GELU, softmax, LayerNorm, pooling,
Flatten in a Sequential, Embedding and BatchNorm, all with explicit deterministic weights.

Module weights are copied in from the inputs (never default initialisation under a seed).
"""

from __future__ import annotations

from exactgrade.domains.pytorch.common import tensor
from exactgrade.domains.pytorch.exact import reshape
from exactgrade.domains.pytorch.nn_modules.adaptive_pooling import ADAPTIVE_POOLING
from exactgrade.domains.pytorch.nn_modules.batch_norm_training import BATCH_NORM_TRAINING
from exactgrade.domains.pytorch.nn_modules.conv_relu_pool_linear import CONV_RELU_POOL_LINEAR
from exactgrade.domains.pytorch.nn_modules.conv_same_padding import CONV_SAME_PADDING
from exactgrade.domains.pytorch.nn_modules.embedding_lookup import EMBEDDING_LOOKUP
from exactgrade.domains.pytorch.nn_modules.flatten_mlp import FLATTEN_MLP
from exactgrade.domains.pytorch.nn_modules.gelu_variants import GELU_VARIANTS
from exactgrade.domains.pytorch.nn_modules.grouped_strided_conv import GROUPED_STRIDED_CONV
from exactgrade.domains.pytorch.nn_modules.layer_norm import LAYER_NORM
from exactgrade.domains.pytorch.nn_modules.linear_layer import LINEAR_LAYER
from exactgrade.domains.pytorch.nn_modules.pointwise_activations import POINTWISE_ACTIVATIONS
from exactgrade.domains.pytorch.nn_modules.pooling import POOLING
from exactgrade.domains.pytorch.nn_modules.softmax_rows import SOFTMAX_ROWS

FAMILIES = (
    LINEAR_LAYER,
    CONV_SAME_PADDING,
    GROUPED_STRIDED_CONV,
    POINTWISE_ACTIVATIONS,
    GELU_VARIANTS,
    SOFTMAX_ROWS,
    LAYER_NORM,
    POOLING,
    ADAPTIVE_POOLING,
    FLATTEN_MLP,
    EMBEDDING_LOOKUP,
    BATCH_NORM_TRAINING,
    CONV_RELU_POOL_LINEAR,
)

TASKS = (
    LINEAR_LAYER.task(
        "pt-016",
        {
            "x": tensor("float32", [[1.0, -2.0, 0.5, 3.0], [2.5, 0.25, -1.5, 1.0]]),
            "weight": tensor("float32", reshape([(i - 6) / 8 for i in range(12)], (3, 4))),
            "bias": tensor("float32", [0.5, -0.25, 1.0]),
        },
    ),
    CONV_SAME_PADDING.task(
        "pt-017",
        {
            "x": tensor("float32", reshape([(2 * i - 19) / 8 for i in range(20)], (1, 1, 4, 5))),
            "weight": tensor(
                "float32",
                [
                    [[[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]]],
                    [[[0.5, 0.25, 0.0], [0.25, 0.5, 0.25], [0.0, 0.25, 0.5]]],
                ],
            ),
            "bias": tensor("float32", [0.125, -0.5]),
        },
    ),
    GROUPED_STRIDED_CONV.task(
        "pt-018",
        {
            "x": tensor("float32", reshape([(3 * i % 11 - 4.5) / 4 for i in range(100)], (1, 4, 5, 5))),
            "weight": tensor("float32", reshape([(i - 16) / 8 for i in range(32)], (4, 2, 2, 2))),
        },
    ),
    POINTWISE_ACTIVATIONS.task(
        "pt-019", {"x": tensor("float32", [-3.0, -1.5, -0.5, -0.25, 0.25, 0.5, 1.5, 3.0])}
    ),
    GELU_VARIANTS.task("pt-020", {"x": tensor("float32", [-2.0, -1.0, -0.5, 0.25, 0.5, 1.0, 2.5])}),
    SOFTMAX_ROWS.task(
        "pt-021", {"logits": tensor("float32", [[1.0, 2.0, 0.5, -1.0], [100.0, 101.0, 102.0, 99.0]])}
    ),
    LAYER_NORM.task(
        "pt-022",
        {
            "x": tensor("float32", [[1.0, 2.0, 4.0, -1.0, 0.5], [10.0, 10.5, 9.0, 12.0, 11.25]]),
            "weight": tensor("float32", [0.5, 0.75, 1.0, 1.25, 1.5]),
            "bias": tensor("float32", [0.5, -0.5, 0.75, 0.125, -0.25]),
        },
    ),
    POOLING.task(
        "pt-023",
        {"x": tensor("float32", reshape([(7 * i % 20 - 10.5) / 4 for i in range(20)], (1, 1, 4, 5)))},
    ),
    ADAPTIVE_POOLING.task(
        "pt-024", {"x": tensor("float32", reshape([((3 * i) % 13 - 6) / 4 for i in range(70)], (1, 2, 5, 7)))}
    ),
    FLATTEN_MLP.task(
        "pt-025",
        {
            "x": tensor("float32", reshape([(2 * i - 11) / 4 for i in range(12)], (2, 2, 3))),
            "w1": tensor("float32", reshape([((5 * i) % 9 - 4) / 4 for i in range(24)], (4, 6))),
            "b1": tensor("float32", [0.5, -1.0, 0.25, -0.5]),
            "w2": tensor("float32", [[1.0, -0.5, 0.75, 2.0], [-1.5, 0.25, 1.0, 0.5]]),
            "b2": tensor("float32", [0.125, -0.375]),
        },
    ),
    EMBEDDING_LOOKUP.task(
        "pt-026",
        {
            "weight": tensor("float32", reshape([(2 * i - 15) / 8 for i in range(15)], (5, 3))),
            "idx": tensor("int64", [[0, 3, 1], [4, 0, 2]]),
            "flat_idx": tensor("int64", [1, 3, 0, 4, 1, 4]),
            "offsets": tensor("int64", [0, 2]),
        },
    ),
    BATCH_NORM_TRAINING.task(
        "pt-027",
        {
            "x": tensor("float32", [[1.0, -2.0, 0.5], [3.0, 0.0, 1.5], [2.0, 1.0, -0.5], [-1.0, 4.0, 2.5]]),
            "weight": tensor("float32", [1.5, 0.5, 2.0]),
            "bias": tensor("float32", [0.5, -0.25, 0.75]),
        },
    ),
)
