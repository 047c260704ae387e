"""Memory tasks (sc-015..sc-020): Adam state, KV cache, activations, what fits in HBM.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.scaling._task import with_tags
from exactgrade.domains.scaling.memory.activation_memory import ACTIVATION_MEMORY
from exactgrade.domains.scaling.memory.adam_memory import ADAM_MEMORY
from exactgrade.domains.scaling.memory.kv_cache_size import KV_CACHE_SIZE
from exactgrade.domains.scaling.memory.largest_model import LARGEST_MODEL
from exactgrade.domains.scaling.memory.max_batch_for_kv_cache import MAX_BATCH_FOR_KV_CACHE

FAMILIES = (ADAM_MEMORY, KV_CACHE_SIZE, MAX_BATCH_FOR_KV_CACHE, ACTIVATION_MEMORY, LARGEST_MODEL)


TASKS = (
    with_tags(
        ADAM_MEMORY.task(
            "sc-015",
            {
                "models": [
                    {"name": "8B", "n_params": 8 * 10**9},
                    {"name": "70B", "n_params": 70 * 10**9},
                    {"name": "405B", "n_params": 405 * 10**9},
                ],
                "weight_bytes": 2,
                "master_bytes": 4,
                "first_moment_bytes": 4,
                "second_moment_bytes": 4,
                "hbm_bytes_per_chip": 96 * 10**9,
            },
        ),
        "headline:adam_state_multiple",
    ),
    KV_CACHE_SIZE.task(
        "sc-016",
        {
            "configs": [
                {"name": "mha", "layers": 80, "n_kv_heads": 64, "head_dim": 128},
                {"name": "gqa", "layers": 80, "n_kv_heads": 8, "head_dim": 128},
                {"name": "mqa", "layers": 80, "n_kv_heads": 1, "head_dim": 128},
            ],
            "seq_len": 32768,
            "batch": 16,
            "bytes_per_value": 2,
        },
    ),
    MAX_BATCH_FOR_KV_CACHE.task(
        "sc-017",
        {
            "hbm_bytes": 8 * 80 * 10**9,
            "n_params": 70 * 10**9,
            "weight_bytes": 2,
            "layers": 80,
            "n_kv_heads": 8,
            "head_dim": 128,
            "kv_bytes": 2,
            "seq_lens": [8192, 32768, 131072],
        },
    ),
    ACTIVATION_MEMORY.task(
        "sc-018",
        {"layers": 32, "d_model": 4096, "n_heads": 32, "batch": 1, "seq_lens": [2048, 8192, 32768]},
    ),
    LARGEST_MODEL.task(
        "sc-019",
        {
            "hbm_bytes_per_chip": 80 * 10**9,
            "chips": 8,
            "uses": [
                {"name": "inference_bf16", "bytes_per_param": 2},
                {"name": "inference_int8", "bytes_per_param": 1},
                {"name": "inference_int4", "bytes_per_param": Fraction(1, 2)},
                {"name": "training_adam_state_no_grads", "bytes_per_param": 14},
                {"name": "training_adam_fp32_grads", "bytes_per_param": 18},
            ],
        },
    ),
    # 8-bit moments (2 + 4 + 1 + 1 bytes per parameter) on 16 GiB chips: the same family as sc-015.
    ADAM_MEMORY.task(
        "sc-020",
        {
            "models": [
                {"name": "1.3B", "n_params": 1_300_000_000},
                {"name": "7B", "n_params": 7 * 10**9},
                {"name": "13B", "n_params": 13 * 10**9},
            ],
            "weight_bytes": 2,
            "master_bytes": 4,
            "first_moment_bytes": 1,
            "second_moment_bytes": 1,
            "hbm_bytes_per_chip": 16 * 2**30,
        },
    ),
)
