"""Sharding tasks (sc-021..sc-027): DP all-reduce, FSDP, TP, pipeline bubbles, EP, ZeRO memory.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.scaling._task import with_tags
from exactgrade.domains.scaling.sharding.data_parallel_step import DATA_PARALLEL_STEP
from exactgrade.domains.scaling.sharding.expert_parallel_all_to_all import EXPERT_PARALLEL_ALL_TO_ALL
from exactgrade.domains.scaling.sharding.fsdp_step_communication import FSDP_STEP_COMMUNICATION
from exactgrade.domains.scaling.sharding.min_microbatches import MIN_MICROBATCHES
from exactgrade.domains.scaling.sharding.pipeline_bubble import PIPELINE_BUBBLE
from exactgrade.domains.scaling.sharding.pipeline_step_time import PIPELINE_STEP_TIME
from exactgrade.domains.scaling.sharding.tensor_parallel_layer import TENSOR_PARALLEL_LAYER
from exactgrade.domains.scaling.sharding.zero_memory import ZERO_MEMORY

FAMILIES = (
    DATA_PARALLEL_STEP,
    FSDP_STEP_COMMUNICATION,
    TENSOR_PARALLEL_LAYER,
    PIPELINE_BUBBLE,
    MIN_MICROBATCHES,
    PIPELINE_STEP_TIME,
    EXPERT_PARALLEL_ALL_TO_ALL,
    ZERO_MEMORY,
)


TASKS = (
    with_tags(
        DATA_PARALLEL_STEP.task(
            "sc-021",
            {
                "n_params": 8 * 10**9,
                "grad_bytes": 2,
                "devices": 256,
                "link_bandwidth": 50 * 10**9,
                "tokens_per_device": [1024, 2048, 4096],
                "peak_flops": 400 * 10**12,
                "mfu": Fraction(2, 5),
            },
        ),
        "headline:allreduce_exceeds_backward",
    ),
    FSDP_STEP_COMMUNICATION.task(
        "sc-022",
        {
            "n_params": 70 * 10**9,
            "param_bytes": 2,
            "device_counts": [8, 64, 512],
            "link_bandwidth": 100 * 10**9,
        },
    ),
    TENSOR_PARALLEL_LAYER.task(
        "sc-023",
        {
            "tokens": 8192,
            "d_model": 8192,
            "d_ff": 32768,
            "bytes_per_value": 2,
            "tp_degrees": [2, 4, 8, 16],
            "peak_flops": 400 * 10**12,
            "link_bandwidth": 100 * 10**9,
        },
    ),
    PIPELINE_BUBBLE.task(
        "sc-024",
        {"stages": 8, "microbatch_counts": [1, 8, 32, 128], "microbatch_stage_time_s": Fraction(3, 100)},
    ),
    MIN_MICROBATCHES.task(
        "sc-025",
        {"stage_counts": [2, 4, 8, 16, 64], "max_bubble_fraction": Fraction(2, 25)},
    ),
    EXPERT_PARALLEL_ALL_TO_ALL.task(
        "sc-026",
        {
            "tokens_per_device": 16384,
            "d_model": 4096,
            "bytes_per_value": 2,
            "top_k": 2,
            "ep_degrees": [2, 8, 64],
            "link_bandwidth": 100 * 10**9,
        },
    ),
    ZERO_MEMORY.task(
        "sc-027",
        {
            "n_params": 30 * 10**9,
            "devices": 64,
            "hbm_bytes_per_device": 80 * 10**9,
            "param_bytes": 2,
            "grad_bytes": 2,
            "optimizer_bytes": 12,
        },
    ),
)
