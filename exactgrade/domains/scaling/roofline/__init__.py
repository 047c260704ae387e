"""Roofline tasks (sc-000..sc-006): arithmetic intensity against the chip's critical intensity.

Each reference is a self-contained function (imports inside, no globals): its source is the
program a perfect model would run. Each ``*_float`` twin recomputes the answer in floats with
the operations reordered, and can reproduce one named mistake; the tests use both.
"""

from __future__ import annotations

from exactgrade.domains.scaling.roofline.decode_attention_roofline import DECODE_ATTENTION_ROOFLINE
from exactgrade.domains.scaling.roofline.elementwise_roofline import ELEMENTWISE_ROOFLINE
from exactgrade.domains.scaling.roofline.matmul_fraction_of_peak import MATMUL_FRACTION_OF_PEAK
from exactgrade.domains.scaling.roofline.matmul_roofline import MATMUL_ROOFLINE
from exactgrade.domains.scaling.roofline.min_compute_bound_batch import MIN_COMPUTE_BOUND_BATCH
from exactgrade.domains.scaling.roofline.weight_streaming_roofline import WEIGHT_STREAMING_ROOFLINE

FAMILIES = (
    MATMUL_ROOFLINE,
    MIN_COMPUTE_BOUND_BATCH,
    ELEMENTWISE_ROOFLINE,
    MATMUL_FRACTION_OF_PEAK,
    DECODE_ATTENTION_ROOFLINE,
    WEIGHT_STREAMING_ROOFLINE,
)


TASKS = (
    MATMUL_ROOFLINE.task(
        "sc-000",
        {
            "batches": [1, 64, 256, 512, 4096],
            "d_model": 8192,
            "d_ff": 32768,
            "weight_bytes": 2,
            "activation_bytes": 2,
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    MIN_COMPUTE_BOUND_BATCH.task(
        "sc-001",
        {
            "chips": [
                {"name": "chip_a", "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
                {"name": "chip_b", "peak_flops": 990 * 10**12, "hbm_bandwidth": 3350 * 10**9},
                {"name": "chip_c", "peak_flops": 197 * 10**12, "hbm_bandwidth": 820 * 10**9},
            ],
            "d_model": 8192,
            "d_ff": 28672,
            "bytes_per_value": 2,
        },
    ),
    ELEMENTWISE_ROOFLINE.task(
        "sc-002",
        {
            "element_counts": [4096 * 8192, 32 * 4096 * 8192],
            "flops_per_element": 24,
            "bytes_read_per_element": 2,
            "bytes_written_per_element": 2,
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    # int8 weights with bf16 activations: the same family as sc-000.
    MATMUL_ROOFLINE.task(
        "sc-003",
        {
            "batches": [1, 128, 256, 1024],
            "d_model": 8192,
            "d_ff": 32768,
            "weight_bytes": 1,
            "activation_bytes": 2,
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    MATMUL_FRACTION_OF_PEAK.task(
        "sc-004",
        {
            "shapes": [[1, 8192, 8192], [128, 8192, 8192], [4096, 8192, 8192], [4096, 128, 4096]],
            "bytes_per_value": 2,
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    DECODE_ATTENTION_ROOFLINE.task(
        "sc-005",
        {
            "batches": [1, 16, 256],
            "seq_len": 8192,
            "n_heads": 64,
            "n_kv_heads": 8,
            "head_dim": 128,
            "bytes_per_value": 2,
            "peak_flops": 400 * 10**12,
            "hbm_bandwidth": 1600 * 10**9,
        },
    ),
    WEIGHT_STREAMING_ROOFLINE.task(
        "sc-006",
        {
            "batch": 512,
            "d_model": 8192,
            "d_ff": 32768,
            "bytes_per_value": 2,
            "peak_flops": 400 * 10**12,
            "tiers": [
                {"name": "hbm", "bandwidth": 1600 * 10**9},
                {"name": "host_dram_over_pcie", "bandwidth": 64 * 10**9},
                {"name": "nvme_offload", "bandwidth": 7 * 10**9},
            ],
        },
    ),
)
