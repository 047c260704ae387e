"""Inference tasks (sc-028..sc-034): decode roofline, KV-cache traffic, prefill, latency, cost.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.scaling._task import with_tags
from exactgrade.domains.scaling.inference.decode_compute_bound_batch import DECODE_COMPUTE_BOUND_BATCH
from exactgrade.domains.scaling.inference.decode_step import DECODE_STEP
from exactgrade.domains.scaling.inference.kv_read_share import KV_READ_SHARE
from exactgrade.domains.scaling.inference.prefill_vs_decode import PREFILL_VS_DECODE
from exactgrade.domains.scaling.inference.quantized_decode import QUANTIZED_DECODE
from exactgrade.domains.scaling.inference.serving_cost import SERVING_COST
from exactgrade.domains.scaling.inference.sharded_decode_latency import SHARDED_DECODE_LATENCY

FAMILIES = (
    DECODE_STEP,
    KV_READ_SHARE,
    DECODE_COMPUTE_BOUND_BATCH,
    PREFILL_VS_DECODE,
    SHARDED_DECODE_LATENCY,
    QUANTIZED_DECODE,
    SERVING_COST,
)


TASKS = (
    with_tags(
        DECODE_STEP.task(
            "sc-028",
            {
                "chips": [
                    {"name": "chip_a", "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
                    {"name": "chip_a_2.5x_flops", "peak_flops": 1000 * 10**12, "hbm_bandwidth": 1600 * 10**9},
                    {
                        "name": "chip_a_2x_bandwidth",
                        "peak_flops": 400 * 10**12,
                        "hbm_bandwidth": 3200 * 10**9,
                    },
                ],
                "n_params": 70 * 10**9,
                "bytes_per_param": 2,
                "batch": 1,
            },
        ),
        "headline:decode_memory_bound",
    ),
    with_tags(
        KV_READ_SHARE.task(
            "sc-029",
            {
                "n_params": 8 * 10**9,
                "weight_bytes": 2,
                "layers": 32,
                "n_kv_heads": 8,
                "head_dim": 128,
                "kv_bytes": 2,
                "hbm_bandwidth": 1600 * 10**9,
                "cases": [
                    {"batch": 1, "seq_len": 4096},
                    {"batch": 32, "seq_len": 8192},
                    {"batch": 64, "seq_len": 32768},
                ],
            },
        ),
        "headline:kv_cache_share",
    ),
    DECODE_COMPUTE_BOUND_BATCH.task(
        "sc-030",
        {
            "n_params": 70 * 10**9,
            "weight_bytes": 2,
            "kv_bytes_per_token": 327680,
            "seq_lens": [128, 1024, 4096, 32768],
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    PREFILL_VS_DECODE.task(
        "sc-031",
        {
            "n_params": 70 * 10**9,
            "weight_bytes": 2,
            "prompt_lens": [128, 2048, 8192],
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    SHARDED_DECODE_LATENCY.task(
        "sc-032",
        {
            "n_params": 405 * 10**9,
            "weight_bytes": 2,
            "kv_cache_bytes": 100 * 10**9,
            "hbm_bytes_per_chip": 80 * 10**9,
            "hbm_bandwidth": 3350 * 10**9,
            "chip_counts": [4, 8, 16, 32],
        },
    ),
    QUANTIZED_DECODE.task(
        "sc-033",
        {
            "n_params": 70 * 10**9,
            "formats": [
                {"name": "bf16", "bits_per_weight": 16},
                {"name": "int8", "bits_per_weight": 8},
                {"name": "int4", "bits_per_weight": 4},
            ],
            "batch": 64,
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    SERVING_COST.task(
        "sc-034",
        {
            "n_params": 8 * 10**9,
            "weight_bytes": 2,
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
            "dollars_per_chip_hour": Fraction(5, 2),
            "batches": [1, 16, 256, 1024],
        },
    ),
)
