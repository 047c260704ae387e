"""tensor_ops (pt-000..pt-015): reshape, reductions, clamp, masking, sorting, joins, matmul,
normalisation, cumulative ops, casts, indexing, broadcasting and grouping.
"""

from __future__ import annotations

from exactgrade.domains.pytorch.common import tensor
from exactgrade.domains.pytorch.exact import reshape
from exactgrade.domains.pytorch.tensor_ops.batched_products import BATCHED_PRODUCTS
from exactgrade.domains.pytorch.tensor_ops.broadcast_arithmetic import BROADCAST_ARITHMETIC
from exactgrade.domains.pytorch.tensor_ops.casts_and_wraparound import CASTS_AND_WRAPAROUND
from exactgrade.domains.pytorch.tensor_ops.clamp_and_select import CLAMP_AND_SELECT
from exactgrade.domains.pytorch.tensor_ops.gather_and_index import GATHER_AND_INDEX
from exactgrade.domains.pytorch.tensor_ops.group_by_key import GROUP_BY_KEY
from exactgrade.domains.pytorch.tensor_ops.integer_division import INTEGER_DIVISION
from exactgrade.domains.pytorch.tensor_ops.mask_above_mean import MASK_ABOVE_MEAN
from exactgrade.domains.pytorch.tensor_ops.normalise import NORMALISE
from exactgrade.domains.pytorch.tensor_ops.permute_and_reshape import PERMUTE_AND_RESHAPE
from exactgrade.domains.pytorch.tensor_ops.reductions import REDUCTIONS
from exactgrade.domains.pytorch.tensor_ops.running_statistics import RUNNING_STATISTICS
from exactgrade.domains.pytorch.tensor_ops.spread_statistics import SPREAD_STATISTICS
from exactgrade.domains.pytorch.tensor_ops.stable_sort import STABLE_SORT
from exactgrade.domains.pytorch.tensor_ops.stack_and_concatenate import STACK_AND_CONCATENATE
from exactgrade.domains.pytorch.tensor_ops.top_and_kth import TOP_AND_KTH

FAMILIES = (PERMUTE_AND_RESHAPE, REDUCTIONS, SPREAD_STATISTICS, CLAMP_AND_SELECT, INTEGER_DIVISION,
            MASK_ABOVE_MEAN, STABLE_SORT, TOP_AND_KTH, STACK_AND_CONCATENATE, BATCHED_PRODUCTS, NORMALISE,
            RUNNING_STATISTICS, CASTS_AND_WRAPAROUND, GATHER_AND_INDEX, BROADCAST_ARITHMETIC, GROUP_BY_KEY)

TASKS = (
    PERMUTE_AND_RESHAPE.task("pt-000", {"x": tensor("int64",
                                                    reshape([3 * i - 35 for i in range(24)], (2, 3, 4)))}),
    REDUCTIONS.task("pt-001", {"x": tensor("float32", [[0.5, -1.25, 2.0, 3.5], [-0.75, 4.25, 1.5, -2.0],
                                                       [2.25, 0.25, -3.75, 1.0]])}),
    SPREAD_STATISTICS.task("pt-002", {"x": tensor("float32", [[1.0, 2.5, -0.5, 4.0, 3.0],
                                                              [2.0, 2.0, 2.25, 1.75, 6.0]])}),
    CLAMP_AND_SELECT.task("pt-003", {"x": tensor("float32", [[-3.0, -1.25, 0.5, 1.75],
                                                             [2.5, -0.75, 4.0, 1.0]])}),
    INTEGER_DIVISION.task("pt-004", {"a": tensor("int64", [7, -7, 7, -7, 13, -13]),
                                     "b": tensor("int64", [3, 3, -3, -3, 5, 5])}),
    MASK_ABOVE_MEAN.task("pt-005", {"x": tensor("float32", [[1.5, -0.5, 3.25, 0.75], [2.0, -2.5, 0.25, 4.5],
                                                            [-1.0, 1.25, 3.0, -0.75]])}),
    STABLE_SORT.task("pt-006", {"x": tensor("float32", [3.0, 1.0, 2.0, 3.0, 1.0, 2.5, 3.0, 0.5])}),
    TOP_AND_KTH.task("pt-007", {"x": tensor("float32", [[0.5, 4.0, -1.5, 2.25, 3.0, -0.25],
                                                        [1.75, -3.0, 5.5, 0.75, -2.0, 2.5]])}),
    STACK_AND_CONCATENATE.task("pt-008", {"a": tensor("int64", [[1, 2, 3], [4, 5, 6]]),
                                          "b": tensor("int64", [[10, 20, 30], [40, 50, 60]])}),
    BATCHED_PRODUCTS.task("pt-009", {
        "a": tensor("float32", reshape([(2 * i - 23) / 8 for i in range(24)], (2, 3, 4))),
        "b": tensor("float32", [[0.5, -1.0], [1.5, 2.0], [-0.25, 0.75], [1.0, -0.5]])}),
    NORMALISE.task("pt-010", {"x": tensor("float32", [[3.0, -4.0, 1.0, 2.0], [0.5, 1.5, -2.5, 1.0],
                                                      [-1.0, 2.0, 2.0, -0.25]])}),
    RUNNING_STATISTICS.task("pt-011", {"x": tensor("float32", [[1.5, -2.0, 1.5, 0.5, 3.0],
                                                               [0.5, 2.0, -1.0, 2.0, 0.25]])}),
    CASTS_AND_WRAPAROUND.task("pt-012", {"x": tensor("float32",
                                                     [-2.75, -2.5, -1.5, 1.5, 2.5, 3.5, 3.75, 1.25]),
                                         "u": tensor("uint8", [250, 251, 252, 5])}),
    GATHER_AND_INDEX.task("pt-013", {
        "x": tensor("float32", reshape([i / 2 + 0.25 for i in range(12)], (3, 4))),
        "idx": tensor("int64", [[3, 0], [1, 1], [2, 0]]),
        "rows": tensor("int64", [2, 0, 2]), "cols": tensor("int64", [-1, 0, 2])}),
    BROADCAST_ARITHMETIC.task("pt-014", {"a": tensor("float32", [[0.5], [-1.5], [2.25]]),
                                         "b": tensor("float32", [[1.0, -2.0, 0.25, 3.0]]),
                                         "c": tensor("float32", [0.75, 1.25, -0.625, 2.5])}),
    GROUP_BY_KEY.task("pt-015", {"keys": tensor("int64", [8, 3, 12, 3, 5, 8, 8, 12]),
                                 "vals": tensor("float32", [1.5, -0.5, 2.0, 2.5, 0.75, 3.0, -1.25, 1.0])}),
)
