"""FLOP-counting tasks (sc-007..sc-014): per-layer FLOPs, attention share, 6ND, MFU, time to train.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.scaling._task import with_tags
from exactgrade.domains.scaling.flops.attention_crossover import ATTENTION_CROSSOVER
from exactgrade.domains.scaling.flops.dense_param_count import DENSE_PARAM_COUNT
from exactgrade.domains.scaling.flops.layer_flops import LAYER_FLOPS
from exactgrade.domains.scaling.flops.model_flops_utilization import MODEL_FLOPS_UTILIZATION
from exactgrade.domains.scaling.flops.moe_training_flops import MOE_TRAINING_FLOPS
from exactgrade.domains.scaling.flops.time_to_train import TIME_TO_TRAIN
from exactgrade.domains.scaling.flops.utilization_by_counting import UTILIZATION_BY_COUNTING

FAMILIES = (
    LAYER_FLOPS,
    ATTENTION_CROSSOVER,
    TIME_TO_TRAIN,
    MODEL_FLOPS_UTILIZATION,
    UTILIZATION_BY_COUNTING,
    MOE_TRAINING_FLOPS,
    DENSE_PARAM_COUNT,
)


TASKS = (
    with_tags(
        LAYER_FLOPS.task(
            "sc-007",
            {
                "d_model": 8192,
                "d_ff": 28672,
                "n_heads": 64,
                "n_kv_heads": 8,
                "head_dim": 128,
                "mlp_matrices": 3,
                "seq_lens": [4096, 8192, 32768],
            },
        ),
        "headline:attention_minority",
    ),
    ATTENTION_CROSSOVER.task(
        "sc-008",
        {
            "models": [
                {
                    "name": "small",
                    "d_model": 768,
                    "d_ff": 3072,
                    "n_heads": 12,
                    "n_kv_heads": 12,
                    "head_dim": 64,
                    "mlp_matrices": 2,
                },
                {
                    "name": "medium",
                    "d_model": 4096,
                    "d_ff": 14336,
                    "n_heads": 32,
                    "n_kv_heads": 8,
                    "head_dim": 128,
                    "mlp_matrices": 3,
                },
                {
                    "name": "large",
                    "d_model": 8192,
                    "d_ff": 28672,
                    "n_heads": 64,
                    "n_kv_heads": 8,
                    "head_dim": 128,
                    "mlp_matrices": 3,
                },
            ]
        },
    ),
    TIME_TO_TRAIN.task(
        "sc-009",
        {
            "n_params": 70 * 10**9,
            "n_tokens": 15 * 10**12,
            "clusters": [
                {"name": "cluster_a", "chips": 8192, "peak_flops": 400 * 10**12, "mfu": Fraction(2, 5)},
                {"name": "cluster_b", "chips": 2048, "peak_flops": 990 * 10**12, "mfu": Fraction(7, 20)},
            ],
        },
    ),
    MODEL_FLOPS_UTILIZATION.task(
        "sc-010",
        {
            "n_params": 8 * 10**9,
            "runs": [
                {
                    "name": "run_a",
                    "chips": 256,
                    "peak_flops": 400 * 10**12,
                    "tokens_per_step": 4 * 2**20,
                    "step_time_s": Fraction(53, 10),
                },
                {
                    "name": "run_b",
                    "chips": 1024,
                    "peak_flops": 400 * 10**12,
                    "tokens_per_step": 4 * 2**20,
                    "step_time_s": Fraction(19, 10),
                },
            ],
        },
    ),
    UTILIZATION_BY_COUNTING.task(
        "sc-011",
        {
            "n_params": 8 * 10**9,
            "layers": 32,
            "n_heads": 32,
            "head_dim": 128,
            "seq_len": 32768,
            "tokens_per_step": 4 * 2**20,
            "step_time_s": Fraction(79, 10),
            "chips": 256,
            "peak_flops": 400 * 10**12,
        },
    ),
    MOE_TRAINING_FLOPS.task(
        "sc-012",
        {
            "layers": 32,
            "d_model": 4096,
            "n_heads": 32,
            "n_kv_heads": 8,
            "head_dim": 128,
            "expert_d_ff": 14336,
            "n_experts": 8,
            "top_k": 2,
            "mlp_matrices": 3,
            "n_tokens": 2 * 10**12,
        },
    ),
    DENSE_PARAM_COUNT.task(
        "sc-013",
        {
            "layers": 80,
            "d_model": 8192,
            "d_ff": 28672,
            "n_heads": 64,
            "n_kv_heads": 8,
            "head_dim": 128,
            "vocab_size": 128256,
            "mlp_matrices": 3,
            "tied_embeddings": False,
            "n_tokens": 15 * 10**12,
        },
    ),
    # A small multi-head-attention layer with a plain 2-matrix MLP: the same family as sc-007.
    LAYER_FLOPS.task(
        "sc-014",
        {
            "d_model": 768,
            "d_ff": 3072,
            "n_heads": 12,
            "n_kv_heads": 12,
            "head_dim": 64,
            "mlp_matrices": 2,
            "seq_lens": [1024, 8192, 32768],
        },
    ),
)
