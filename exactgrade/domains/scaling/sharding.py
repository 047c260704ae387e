"""Sharding tasks (sc-021..sc-027): DP all-reduce, FSDP, TP, pipeline bubbles, EP, ZeRO memory.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

from exactgrade.domains.scaling import (
    levels_data,
    levels_experts,
    levels_fsdp,
    levels_inverse,
    levels_inverse2,
    levels_pipeline,
    levels_pipeline_step,
    levels_tensor,
    levels_zero,
)
from exactgrade.domains.scaling._sample import (
    attention_shape,
    fraction,
    hbm_capacity,
    jitter,
    link_bandwidth,
    n_params,
    peak_flops,
    round_numbers,
    rows,
    sorted_sample,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    Level,
    known_mistake,
    near_integer,
    rounding_edge,
    scaling_family,
    tie_edge,
    with_tags,
)
from exactgrade.domains.scaling.hardware import TP_LINK, require
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def data_parallel_step(n_params, grad_bytes, devices, link_bandwidth, tokens_per_device, peak_flops, mfu):
    """Gradient all-reduce time against the backward pass, the only compute it can overlap
    (synchronous data parallelism: the next step's forward needs the updated weights)."""
    from fractions import Fraction

    gradient = n_params * grad_bytes
    allreduce_s = 2 * gradient * Fraction(devices - 1, devices) / link_bandwidth
    rows = []
    for tokens in tokens_per_device:
        backward_s = Fraction(4 * n_params * tokens) / (peak_flops * mfu)
        rows.append({
            "tokens_per_device": tokens,
            "backward_s": backward_s,
            "allreduce_s": allreduce_s,
            "allreduce_exceeds_backward": allreduce_s > backward_s,
        })
    return {"rows": rows}


def fsdp_step_communication(n_params, param_bytes, device_counts, link_bandwidth):
    """FSDP: all-gather weights for forward and for backward, reduce-scatter the gradients."""
    from fractions import Fraction

    full = n_params * param_bytes
    rows = []
    for devices in device_counts:
        sent = 3 * full * Fraction(devices - 1, devices)
        rows.append({
            "devices": devices,
            "params_gib_per_device": Fraction(full, devices * 2**30),
            "comm_bytes_per_device": sent,
            "comm_s": sent / link_bandwidth,
        })
    return {"rows": rows}


def tensor_parallel_layer(tokens, d_model, d_ff, bytes_per_value, tp_degrees, peak_flops, link_bandwidth):
    """Megatron tensor parallelism, one layer's forward: matmuls split tp ways, two all-reduces."""
    from fractions import Fraction

    layer_flops = 2 * tokens * (4 * d_model * d_model + 2 * d_model * d_ff)
    activation = tokens * d_model * bytes_per_value
    rows = []
    for tp in tp_degrees:
        compute_s = Fraction(layer_flops, tp) / peak_flops
        comm_s = 2 * (2 * activation * Fraction(tp - 1, tp)) / link_bandwidth
        rows.append({"tp": tp, "compute_s": compute_s, "comm_s": comm_s, "comm_bound": comm_s > compute_s})
    return {"rows": rows}


def pipeline_bubble(stages, microbatch_counts, microbatch_stage_time_s):
    """GPipe-style schedule: M microbatches through P stages take M + P - 1 slots."""
    from fractions import Fraction

    rows = []
    for microbatches in microbatch_counts:
        slots = microbatches + stages - 1
        rows.append({
            "microbatches": microbatches,
            "step_time_s": slots * microbatch_stage_time_s,
            "bubble_fraction": Fraction(stages - 1, slots),
        })
    return {"rows": rows}


def min_microbatches(stage_counts, max_bubble_fraction):
    """Smallest M with (P - 1) / (M + P - 1) <= f, i.e. M >= (P - 1)(1 - f) / f."""
    import math

    rows = []
    for stages in stage_counts:
        bound = (stages - 1) * (1 - max_bubble_fraction) / max_bubble_fraction
        rows.append({"stages": stages, "min_microbatches": max(1, math.ceil(bound))})
    return {"rows": rows}


def pipeline_step_time(stage_counts, max_bubble_fraction, microbatch_stage_time_s):
    """The fewest microbatches that keep the bubble under the limit, then the step they take."""
    import math

    rows = []
    for stages in stage_counts:
        microbatches = max(1, math.ceil((stages - 1) * (1 - max_bubble_fraction) / max_bubble_fraction))
        rows.append({
            "stages": stages,
            "min_microbatches": microbatches,
            "step_time_s": (microbatches + stages - 1) * microbatch_stage_time_s,
        })
    return {"rows": rows}


def expert_parallel_all_to_all(tokens_per_device, d_model, bytes_per_value, top_k, ep_degrees,
                               link_bandwidth):
    """One MoE layer's forward: dispatch tokens to experts and combine them back (two all-to-alls)."""
    from fractions import Fraction

    routed = tokens_per_device * top_k * d_model * bytes_per_value
    rows = []
    for ep in ep_degrees:
        sent = 2 * routed * Fraction(ep - 1, ep)  # uniform routing keeps 1/ep of the copies local
        rows.append({"ep": ep, "bytes_per_device": sent, "time_s": sent / link_bandwidth})
    return {"rows": rows}


def zero_memory(n_params, devices, hbm_bytes_per_device, param_bytes, grad_bytes, optimizer_bytes):
    """Per-device training memory under ZeRO stages (what is sharded over the devices)."""
    from fractions import Fraction

    n = Fraction(n_params)
    per_device = {
        "replicated": n * (param_bytes + grad_bytes + optimizer_bytes),
        "zero1_optimizer": n * (param_bytes + grad_bytes) + n * optimizer_bytes / devices,
        "zero2_gradients": n * param_bytes + n * (grad_bytes + optimizer_bytes) / devices,
        "zero3_parameters": n * (param_bytes + grad_bytes + optimizer_bytes) / devices,
    }
    rows = []
    for stage, size in per_device.items():
        rows.append({"stage": stage, "gib_per_device": size / 2**30, "fits": size <= hbm_bytes_per_device})
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def data_parallel_step_float(n_params, grad_bytes, devices, link_bandwidth, tokens_per_device, peak_flops,
                             mfu, mistake=None):
    known_mistake(mistake, "allreduce_once")
    passes = 1 if mistake == "allreduce_once" else 2
    allreduce = grad_bytes * n_params / link_bandwidth * (1 - 1 / devices) * passes
    rows = []
    for t in tokens_per_device:
        backward = 4.0 * t / mfu * (n_params / peak_flops)
        rows.append({"tokens_per_device": t, "backward_s": backward, "allreduce_s": allreduce,
                     "allreduce_exceeds_backward": allreduce > backward})
    return {"rows": rows}


def fsdp_step_communication_float(n_params, param_bytes, device_counts, link_bandwidth, mistake=None):
    known_mistake(mistake, "drop_ring_factor")
    rows = []
    for d in device_counts:
        ring = 1.0 if mistake == "drop_ring_factor" else (d - 1) / d
        sent = ring * 3 * param_bytes * n_params
        rows.append({"devices": d, "params_gib_per_device": param_bytes * (n_params / d) / 1024**3,
                     "comm_bytes_per_device": sent,
                     "comm_s": ring * (3.0 * param_bytes / link_bandwidth) * n_params})
    return {"rows": rows}


def tensor_parallel_layer_float(tokens, d_model, d_ff, bytes_per_value, tp_degrees, peak_flops,
                                link_bandwidth, mistake=None):
    known_mistake(mistake, "allreduce_once")
    passes = 1 if mistake == "allreduce_once" else 2
    rows = []
    for tp in tp_degrees:
        compute = tokens * d_model * (8.0 * d_model + 4.0 * d_ff) / peak_flops / tp
        comm = passes * 2.0 * (tp - 1) / tp * bytes_per_value * d_model * tokens / link_bandwidth
        rows.append({"tp": tp, "compute_s": compute, "comm_s": comm, "comm_bound": comm > compute})
    return {"rows": rows}


def pipeline_bubble_float(stages, microbatch_counts, microbatch_stage_time_s, mistake=None):
    known_mistake(mistake, "bubble_over_microbatches")
    rows = []
    for m in microbatch_counts:
        idle = stages - 1.0
        bubble = idle / m if mistake == "bubble_over_microbatches" else 1.0 - m / (m + idle)
        step = microbatch_stage_time_s * m + microbatch_stage_time_s * idle
        rows.append({"microbatches": m, "step_time_s": step, "bubble_fraction": bubble})
    return {"rows": rows}


def min_microbatches_float(stage_counts, max_bubble_fraction, mistake=None):
    known_mistake(mistake, "bubble_over_microbatches")
    rows = []
    for p in stage_counts:
        if mistake == "bubble_over_microbatches":
            m = math.ceil((p - 1) / max_bubble_fraction)
        else:  # search the falling bubble fraction instead of solving for M
            def too_idle(m, p=p):
                return (p - 1) / (m + p - 1) > max_bubble_fraction

            low, m = 0, 1
            while too_idle(m):
                low, m = m, 2 * m
            while m - low > 1:
                middle = (low + m) // 2
                low, m = (middle, m) if too_idle(middle) else (low, middle)
        rows.append({"stages": p, "min_microbatches": m})
    return {"rows": rows}


def pipeline_step_time_float(stage_counts, max_bubble_fraction, microbatch_stage_time_s, mistake=None):
    known_mistake(mistake, "bubble_over_microbatches")
    found = min_microbatches_float(stage_counts, max_bubble_fraction, mistake)["rows"]
    return {"rows": [{"stages": row["stages"], "min_microbatches": row["min_microbatches"],
                      "step_time_s": microbatch_stage_time_s * row["min_microbatches"]
                      + microbatch_stage_time_s * (row["stages"] - 1)} for row in found]}


def expert_parallel_all_to_all_float(tokens_per_device, d_model, bytes_per_value, top_k, ep_degrees,
                                     link_bandwidth, mistake=None):
    known_mistake(mistake, "dispatch_only")
    collectives = 1 if mistake == "dispatch_only" else 2
    rows = []
    for ep in ep_degrees:
        sent = (1 - 1 / ep) * collectives * d_model * top_k * tokens_per_device * bytes_per_value
        rows.append({"ep": ep, "bytes_per_device": sent, "time_s": sent / link_bandwidth})
    return {"rows": rows}


def zero_memory_float(n_params, devices, hbm_bytes_per_device, param_bytes, grad_bytes, optimizer_bytes,
                      mistake=None):
    known_mistake(mistake, "optimizer_without_master")
    opt = optimizer_bytes - 4 if mistake == "optimizer_without_master" else optimizer_bytes
    p, g = param_bytes, grad_bytes
    sizes = (("replicated", (p + g + opt) * float(n_params)),
             ("zero1_optimizer", (p + g + opt / devices) * float(n_params)),
             ("zero2_gradients", (p + (g + opt) / devices) * float(n_params)),
             ("zero3_parameters", float(n_params) / devices * (opt + g + p)))
    return {"rows": [{"stage": name, "gib_per_device": size / 2**30, "fits": size <= hbm_bytes_per_device}
                     for name, size in sizes]}


# ---------------------------------------------------------------- families and tasks


def _device_count(draw: Draw, level: int) -> int:
    if round_numbers(level):
        return 2 ** draw.integer(1, 8 + level)
    return draw.integer(2, 2 ** (8 + level))


def sample_data_parallel_step(draw: Draw, level: int) -> dict:
    """The per-device batches straddle the batch at which the backward pass catches up with the
    all-reduce (the crossover), so the boolean takes both values in every instance."""
    inputs = {"n_params": n_params(draw, level), "grad_bytes": value_bytes(draw, level, (2, 4)),
              "devices": _device_count(draw, level), "link_bandwidth": link_bandwidth(draw, level),
              "peak_flops": peak_flops(draw, level), "mfu": fraction(draw, level, 20, 60)}
    devices = inputs["devices"]
    allreduce_s = (2 * inputs["n_params"] * inputs["grad_bytes"] * Fraction(devices - 1, devices)
                   / inputs["link_bandwidth"])
    crossover = allreduce_s * inputs["peak_flops"] * inputs["mfu"] / (4 * inputs["n_params"]) / 512
    top = 16 * level
    if not 1 < crossover < top:
        raise Reject("the all-reduce crossover lies outside the batches drawn")
    below = draw.integer(1, math.ceil(crossover) - 1)
    above = draw.integer(math.floor(crossover) + 1, top)
    rest = draw.sample([t for t in range(1, top + 1) if t not in (below, above)], rows(level, 3) - 2)
    inputs["tokens_per_device"] = [512 * t for t in sorted({below, above, *rest})]
    return inputs


def _allreduce_not_tied(task: Task) -> str | None:
    for row in task.expected["rows"]:
        problem = tie_edge(f"{row['tokens_per_device']} tokens: the all-reduce against the backward pass",
                           row["allreduce_s"], row["backward_s"])
        if problem:
            return problem
    return None


DATA_PARALLEL_STEP = scaling_family(
    "data_parallel_step", "sharding", data_parallel_step,
    """\
Synchronous data parallelism (as PyTorch DDP) over `devices` devices: every device holds the whole
model of `n_params` parameters and computes on `tokens_per_device` tokens per step, 2*N FLOPs per
token forward and 4*N backward, at `peak_flops` FLOP/s and utilization `mfu`. The gradients
(`grad_bytes` bytes per parameter) are summed by a ring all-reduce over links of `link_bandwidth`
bytes/s per device, which can overlap only the backward pass: gradients become ready during it,
and the next step's forward needs the updated weights. For each per-device batch in
`tokens_per_device`, give the backward time, the all-reduce time (both in seconds) and whether the
all-reduce takes strictly longer than the backward pass.""",
    '{"rows": [{"tokens_per_device": <int>, "backward_s": <number>, "allreduce_s": <number>, '
    '"allreduce_exceeds_backward": <bool>}, ...]}  # one row per entry of `tokens_per_device`, in order',
    data_parallel_step_float, "allreduce_once",
    sample=sample_data_parallel_step,
    levels="L2: the step described, its FLOPs derived; L3: the all-reduce overlapping the backward "
           "pass, the step time and utilisation (some batches hide it, some do not); L4: the "
           "smallest per-device batch whose compute hides the all-reduce, per device count (it must "
           "differ between device counts); L5: a fixed global batch per device count, in the fewest "
           "microbatches whose activations fit, the all-reduce overlapping only the last "
           "microbatch's backward (memory, overlap and ring change regime across device counts)",
    reject=_allreduce_not_tied,
    varying=("rows[].allreduce_exceeds_backward",),
    upper={2: levels_data.l2_level(data_parallel_step, sample_data_parallel_step, _allreduce_not_tied),
           3: levels_data.LEVELS[3],
           4: dataclasses.replace(levels_inverse.HIDING, varying=("rows[].min_tokens_per_device",)),
           5: levels_data.LEVELS[5]},
)


def sample_fsdp_step_communication(draw: Draw, level: int) -> dict:
    counts = sorted({_device_count(draw, level) for _ in range(rows(level, 3))})
    return {"n_params": n_params(draw, level), "param_bytes": value_bytes(draw, level, (2, 4)),
            "device_counts": counts, "link_bandwidth": link_bandwidth(draw, level)}


_FSDP_ROW = ('{"rows": [{"devices": <int>, "params_gib_per_device": <number>, "comm_bytes_per_device": '
             '<number>, "comm_s": <number>}, ...]}  # one row per entry of `device_counts`, in order')

FSDP_STEP_COMMUNICATION = scaling_family(
    "fsdp_step_communication", "sharding", fsdp_step_communication,
    """\
Fully sharded data parallelism (FSDP / ZeRO-3) shards a model of `n_params` parameters, stored at
`param_bytes` bytes each, evenly over the devices. Each training step all-gathers the full weights
once for the forward pass and once more for the backward pass, and reduce-scatters the gradients
(same size as the weights) once, all with ring collectives over links of `link_bandwidth` bytes/s
per device. For each device count in `device_counts`, give the weights each device stores in GiB,
the bytes each device sends per step and that communication time in seconds.""",
    _FSDP_ROW,
    fsdp_step_communication_float, "drop_ring_factor",
    sample=sample_fsdp_step_communication,
    upper={2: levels_fsdp.l2_level(fsdp_step_communication, sample_fsdp_step_communication, _FSDP_ROW),
           **levels_fsdp.LEVELS, 4: levels_inverse.FSDP},
    levels="L2: the collectives derived from what each device must hold when; L3: a fixed global "
           "batch per device count, compute and communication back to back, fits or not; L4: the "
           "largest model under memory and a communication budget, and which limits it; L5: "
           "hybrid sharding, the group size of the fastest step per device count (memory forces "
           "the group up, the slow link pulls it into a node, the groups' all-reduce shrinks with "
           "it; in about half the instances the rule that a group divide a node or span whole nodes "
           "decides a row, in the other half a whole node beats the smallest group that fits)",
    branches=(Branch("node_rule_binds", levels_fsdp.node_rule_binds, Fraction(1, 3), (5,)),
              Branch("not_smallest", levels_fsdp.not_smallest, Fraction(1, 3), (5,))),
)


def sample_tensor_parallel_layer(draw: Draw, level: int) -> dict:
    """Communication over compute grows with tp as (tp - 1) * c: the degrees straddle the one at
    which it passes 1, so comm_bound takes both values in every instance."""
    shape = attention_shape(draw, level)
    degrees = [2**e for e in sorted_sample(draw, 1, 3 + level, rows(level, 4))] if level < 3 else \
        sorted_sample(draw, 2, 16 * level, rows(level, 4))
    inputs = {"tokens": 1024 * draw.integer(1, 16 * level), "d_model": shape["d_model"],
              "d_ff": shape["d_ff"], "bytes_per_value": value_bytes(draw, level), "tp_degrees": degrees,
              "peak_flops": peak_flops(draw, level), "link_bandwidth": link_bandwidth(draw, level)}
    # comm / compute = 4 * (tp - 1) * bytes * peak / ((8*d_model + 4*d_ff) * link): solve for the link.
    d, f, w, peak = shape["d_model"], shape["d_ff"], inputs["bytes_per_value"], inputs["peak_flops"]
    crossing = draw.integer(degrees[0], degrees[-1] - 1) + Fraction(1, 2)
    ideal = 4 * (crossing - 1) * w * peak / (8 * d + 4 * f)
    unit = 25 * 10**9 if round_numbers(level) else 10**6
    # a tensor-parallel group's link: NVLink or TPU ICI, never a network link
    inputs["link_bandwidth"] = require("link_bandwidth", max(unit, unit * round(ideal / unit)), TP_LINK)
    return inputs


def _tensor_parallel_not_tied(task: Task) -> str | None:
    for row in task.expected["rows"]:
        problem = tie_edge(f"tp {row['tp']}: communication against compute", row["comm_s"], row["compute_s"])
        if problem:
            return problem
    return None


_TP_ROW = ('{"rows": [{"tp": <int>, "compute_s": <number>, "comm_s": <number>, "comm_bound": <bool>}, ...]}'
           "  # one row per entry of `tp_degrees`, in order")

_TP_L2 = """\
Megatron-style tensor parallelism splits one transformer layer over `tp` devices. Count only the
layer's matmuls: attention's query, key, value and output projections, each a d_model x d_model
matrix, and an MLP of an up-projection [d_model, d_ff] and a down-projection [d_ff, d_model]. The
query, key, value and up-projection weights are split by columns and the output and
down-projection weights by rows, so every device does 1/tp of every matmul at `peak_flops`
FLOP/s; the partial outputs of the output projection and of the down-projection are each summed
over the devices by one ring all-reduce of the full activations (tokens x d_model values,
`bytes_per_value` bytes each) over links of `link_bandwidth` bytes/s per device. For a forward
pass on `tokens` tokens and each degree in `tp_degrees`, give the per-device compute time, the
communication time (seconds, no overlap) and whether communication takes strictly longer than
compute."""

TENSOR_PARALLEL_LAYER = scaling_family(
    "tensor_parallel_layer", "sharding", tensor_parallel_layer,
    """\
Megatron-style tensor parallelism splits one transformer layer over `tp` devices. The layer's
forward pass on `tokens` tokens costs 2*tokens*(4*d_model**2 + 2*d_model*d_ff) FLOPs (attention
projections and a 2-matrix MLP), split evenly over the tp devices at `peak_flops` FLOP/s each. It
needs two ring all-reduces of the activations (tokens x d_model values, `bytes_per_value` bytes
each), one after attention and one after the MLP, over links of `link_bandwidth` bytes/s per
device. For each degree in `tp_degrees`, give the per-device compute time, the communication time
(seconds, no overlap assumed) and whether communication takes strictly longer than compute.""",
    _TP_ROW,
    tensor_parallel_layer_float, "allreduce_once",
    sample=sample_tensor_parallel_layer,
    upper={2: Level(tensor_parallel_layer, _TP_L2, _TP_ROW, tensor_parallel_layer_float, "allreduce_once",
                    reject=_tensor_parallel_not_tied, varying=("rows[].comm_bound",)),
           **levels_tensor.LEVELS},
    levels="L2: the split described, the layer's FLOPs and collectives derived; L3: a whole training "
           "step per degree (backward collectives derived too) and whether the shard of weights, "
           "state and activations fits; L4: the degree (a divisor of the heads) that minimises a "
           "layer's time once each ring step has a latency, per token count; L5: tensor and data "
           "parallelism chosen together per global batch: memory forces a degree up, intra-node TP "
           "traffic and inter-node gradient all-reduce pull opposite ways",
    reject=_tensor_parallel_not_tied,
    varying=("rows[].comm_bound",),
)


def _stage_time(draw: Draw, level: int) -> Fraction:
    if round_numbers(level):
        return Fraction(draw.integer(1, 100), 100)
    denominator = draw.choice((1000, 300, 700, 900, 1100, 30_000))
    return Fraction(draw.integer(1, denominator), denominator)  # at most a second


def sample_pipeline_bubble(draw: Draw, level: int) -> dict:
    return {"stages": draw.integer(2, 8 * level),
            "microbatch_counts": sorted_sample(draw, 1, 64 * 2**level, rows(level, 4)),
            "microbatch_stage_time_s": _stage_time(draw, level)}


_BUBBLE_ROW = ('{"rows": [{"microbatches": <int>, "step_time_s": <number>, "bubble_fraction": <number>}, '
               '...]}  # one row per entry of `microbatch_counts`, in order')

PIPELINE_BUBBLE = scaling_family(
    "pipeline_bubble", "sharding", pipeline_bubble,
    """\
A GPipe-style pipeline has `stages` stages. One microbatch occupies one stage for
`microbatch_stage_time_s` seconds (forward and backward together), and a step of M microbatches
takes M + stages - 1 such time slots; the bubble fraction is the share of a stage's slots spent
idle, (stages - 1) / (M + stages - 1). For each M in `microbatch_counts`, give the step time in
seconds and the bubble fraction.""",
    _BUBBLE_ROW, pipeline_bubble_float, "bubble_over_microbatches",
    sample=sample_pipeline_bubble,
    levels="L2: the schedule described, the bubble derived; L3: the slot time derived from the layers, "
           "FLOPs and chips, the throughput per microbatch count; L4: the microbatch count (a divisor "
           "of the batch) that minimises the step when each slot has a fixed overhead, ties to the "
           "smaller; L5: stages and microbatches chosen together under a per-device memory limit "
           "(1F1B in-flight activations), or None",
    tags=("headline:pipeline_bubble",),
    upper={2: Level(pipeline_bubble, levels_pipeline.BUBBLE_L2, _BUBBLE_ROW, pipeline_bubble_float,
                    "bubble_over_microbatches"), **levels_pipeline.BUBBLE_LEVELS},
    branches=levels_pipeline.BUBBLE_BRANCHES,
)


def sample_min_microbatches(draw: Draw, level: int) -> dict:
    if round_numbers(level):
        limit = Fraction(draw.integer(1, 30), 100)
    else:
        limit = Fraction(draw.integer(1, 300), draw.choice((1000, 999, 997, 700, 360)))
    # Stage counts whose bound (P - 1)(1 - f)/f is a whole number are dropped here (cheaper than
    # refusing the built instance); _min_microbatches_edges still checks every posed one.
    over, under = limit.denominator - limit.numerator, limit.numerator  # (1 - f) / f
    candidates = [p for p in draw.sample(range(2, 16 * 2**level + 1), 3 * rows(level, 5))
                  if not near_integer(Fraction((p - 1) * over, under))]
    if len(candidates) < rows(level, 5):
        raise Reject("too few stage counts off an integer bound")
    return {"stage_counts": sorted(candidates[:rows(level, 5)]), "max_bubble_fraction": limit}


def _min_microbatches_edges(task: Task) -> str | None:
    f = task.inputs["max_bubble_fraction"]
    for stages in task.inputs["stage_counts"]:
        problem = rounding_edge(f"{stages} stages: the microbatch bound", (stages - 1) * (1 - f) / f)
        if problem:
            return problem
    return None


_MIN_M_ROW = ('{"rows": [{"stages": <int>, "min_microbatches": <int>}, ...]}'
              "  # one row per entry of `stage_counts`, in order")

MIN_MICROBATCHES = scaling_family(
    "min_microbatches", "sharding", min_microbatches,
    """\
In a GPipe-style pipeline of P stages running M microbatches per step, the bubble fraction (idle
share of each stage) is (P - 1) / (M + P - 1). For each stage count P in `stage_counts`, give the
smallest integer M >= 1 for which the bubble fraction is at most `max_bubble_fraction`.""",
    _MIN_M_ROW,
    min_microbatches_float, "bubble_over_microbatches",
    sample=sample_min_microbatches,
    levels="L2: the schedule described, the bubble and the bound derived; L3: the stage count "
           "derived from the device memory first (the fewest stages whose layers fit), then the "
           "bound; L4: M must also divide the batch, None when no divisor is enough; L5: closed "
           "forms in symbols m and W: the step time with a per-slot overhead, the real m that "
           "minimises it and the minimal step",
    reject=_min_microbatches_edges,
    upper={2: Level(min_microbatches, levels_pipeline.MIN_M_L2, _MIN_M_ROW, min_microbatches_float,
                    "bubble_over_microbatches", reject=_min_microbatches_edges),
           3: levels_pipeline_step.MIN_M_L3,
           4: Level(levels_pipeline.min_microbatches_dividing, levels_pipeline.MIN_M_L4,
                    levels_pipeline.MIN_M_L4_SHAPE, levels_pipeline.min_microbatches_dividing_float,
                    "bubble_over_microbatches",
                    sample=levels_pipeline.with_global_batch(sample_min_microbatches),
                    reject=_min_microbatches_edges),
           5: levels_pipeline.MIN_M_L5_LEVEL},
    branches=levels_pipeline.MIN_M_BRANCHES,
)


def sample_pipeline_step_time(draw: Draw, level: int) -> dict:
    return {**sample_min_microbatches(draw, level), "microbatch_stage_time_s": _stage_time(draw, level)}


_STEP_ROW = ('{"rows": [{"stages": <int>, "min_microbatches": <int>, "step_time_s": <number>}, ...]}'
             "  # one row per entry of `stage_counts`, in order")

PIPELINE_STEP_TIME = scaling_family(
    "pipeline_step_time", "sharding", pipeline_step_time,
    """\
In a GPipe-style pipeline of P stages, a step of M microbatches takes M + P - 1 time slots of
`microbatch_stage_time_s` seconds each, and the bubble fraction (idle share of each stage) is
(P - 1) / (M + P - 1). For each stage count P in `stage_counts`, give the smallest integer M >= 1
for which the bubble fraction is at most `max_bubble_fraction`, and the step time in seconds with
that many microbatches.""",
    _STEP_ROW,
    pipeline_step_time_float, "bubble_over_microbatches",
    sample=sample_pipeline_step_time,
    levels="(no canonical task) min_microbatches chained into the step time; L2: the schedule "
           "described, the bubble derived; L3: the slot time derived from the layers and the chip, "
           "chained with the microbatches the bubble limit needs; L4: per bubble limit, the fewest "
           "stages whose first stage holds its state and the activations of the microbatches in "
           "flight (None); L5: stages, data-parallel replicas and microbatches chosen together per "
           "global batch under a per-slot overhead, each stage's gradient all-reduce and the "
           "memory of the microbatches in flight",
    reject=_min_microbatches_edges,
    upper={2: Level(pipeline_step_time, levels_pipeline.STEP_L2, _STEP_ROW, pipeline_step_time_float,
                    "bubble_over_microbatches", reject=_min_microbatches_edges),
           **levels_pipeline_step.LEVELS},
    branches=levels_pipeline_step.BRANCHES,
)


def sample_expert_parallel_all_to_all(draw: Draw, level: int) -> dict:
    degrees = [2**e for e in sorted_sample(draw, 1, 5 + level, rows(level, 3))] if level < 3 else \
        sorted_sample(draw, 2, 64 * level, rows(level, 3))
    tokens = 1024 * draw.integer(1, 32 * level) - jitter(draw, level, 1024)
    return {"tokens_per_device": tokens, "d_model": attention_shape(draw, level)["d_model"],
            "bytes_per_value": value_bytes(draw, level),
            "top_k": draw.integer(1, 2 + level), "ep_degrees": degrees,
            "link_bandwidth": link_bandwidth(draw, level)}


_EP_ROW = ('{"rows": [{"ep": <int>, "bytes_per_device": <number>, "time_s": <number>}, ...]}'
           "  # one row per entry of `ep_degrees`, in order")

EXPERT_PARALLEL_ALL_TO_ALL = scaling_family(
    "expert_parallel_all_to_all", "sharding", expert_parallel_all_to_all,
    """\
Expert parallelism spreads a mixture-of-experts layer's experts over `ep` devices. Each device holds
`tokens_per_device` tokens of d_model values (`bytes_per_value` bytes each) and sends a copy of
each token to each of its `top_k` experts; with uniform routing, a fraction 1/ep of those copies
stays on the device and the rest is sent. The forward pass of one MoE layer needs two all-to-alls
of that size: dispatch (tokens to experts) and combine (results back). For each degree in
`ep_degrees`, give the bytes each device sends per MoE layer forward pass and the time in seconds
over links of `link_bandwidth` bytes/s per device.""",
    _EP_ROW,
    expert_parallel_all_to_all_float, "dispatch_only",
    sample=sample_expert_parallel_all_to_all,
    upper={2: levels_experts.l2_level(expert_parallel_all_to_all, sample_expert_parallel_all_to_all, _EP_ROW),
           **levels_experts.LEVELS, 4: levels_inverse2.TOKENS},
    levels="L2: the traffic derived from the routing (the local share, the return trip); L3: the "
           "layer's expert compute against its two all-to-alls per degree (communication-bound "
           "varies); L4: the most tokens per device under an all-to-all time budget; L5: the "
           "smallest capacity factor keeping dropped copies under a limit with skewed expert "
           "loads, and the busiest device's expert time at it (an exact capacity boundary)",
)


def sample_zero_memory(draw: Draw, level: int) -> dict:
    return {"n_params": n_params(draw, level), "devices": _device_count(draw, level),
            "hbm_bytes_per_device": hbm_capacity(draw, level), "param_bytes": 2,
            "grad_bytes": value_bytes(draw, level, (2, 4)), "optimizer_bytes": 12}


def _zero_fits_not_tied(task: Task) -> str | None:
    capacity = task.inputs["hbm_bytes_per_device"]
    for row in task.expected["rows"]:
        problem = tie_edge(f"{row['stage']}: the bytes per device against the HBM",
                           row["gib_per_device"] * 2**30, capacity)
        if problem:
            return problem
    return None


ZERO_MEMORY = scaling_family(
    "zero_memory", "sharding", zero_memory,
    """\
Data-parallel training of a model of `n_params` parameters over `devices` devices keeps bf16
weights (`param_bytes` per parameter), gradients (`grad_bytes`) and Adam optimizer state
(`optimizer_bytes`: fp32 master copy and two fp32 moments). ZeRO shards parts of this evenly over
the devices: "replicated" shards nothing, "zero1_optimizer" shards the optimizer state,
"zero2_gradients" the optimizer state and gradients, "zero3_parameters" all three. For each stage,
in that order, give the bytes per device in GiB and whether they fit in `hbm_bytes_per_device`
bytes, ignoring activations.""",
    '{"rows": [{"stage": "replicated", "gib_per_device": <number>, "fits": <bool>}, '
    '{"stage": "zero1_optimizer", ...}, {"stage": "zero2_gradients", ...}, '
    '{"stage": "zero3_parameters", ...}]}',
    zero_memory_float, "optimizer_without_master",
    sample=sample_zero_memory,
    levels="L2: the bytes per parameter derived from the stated precisions; L3: the activations "
           "and ZeRO-3's gathered-layer buffer added, fits or not per stage; L4: the fewest devices "
           "per ZeRO stage (None); L5: the stage and device count of the fewest device-seconds "
           "per step for each global batch, each stage's memory and collective traffic derived "
           "(the best stage changes with the batch; each of the four stages is the best of some "
           "batch in a declared share of the instances, ties to the stage listed first)",
    reject=_zero_fits_not_tied,
    varying=("rows[].fits",),
    upper={**levels_zero.LEVELS, 4: levels_inverse.ZERO},
    branches=(Branch("none", levels_inverse._some_none, Fraction(1, 8), (4,)),
              *(Branch(stage, functools.partial(levels_zero.stage_wins, stage), share, (5,))
                for stage, share in (("replicated", Fraction(2, 5)), ("zero1_optimizer", Fraction(1, 4)),
                                     ("zero2_gradients", Fraction(1, 2)),
                                     ("zero3_parameters", Fraction(2, 5))))),
)

FAMILIES = (DATA_PARALLEL_STEP, FSDP_STEP_COMMUNICATION, TENSOR_PARALLEL_LAYER, PIPELINE_BUBBLE,
            MIN_MICROBATCHES, PIPELINE_STEP_TIME, EXPERT_PARALLEL_ALL_TO_ALL, ZERO_MEMORY)

TASKS = (
    with_tags(DATA_PARALLEL_STEP.task(
        "sc-021",
        {"n_params": 8 * 10**9, "grad_bytes": 2, "devices": 256, "link_bandwidth": 50 * 10**9,
         "tokens_per_device": [1024, 2048, 4096], "peak_flops": 400 * 10**12, "mfu": Fraction(2, 5)},
    ), "headline:allreduce_exceeds_backward"),
    FSDP_STEP_COMMUNICATION.task(
        "sc-022",
        {"n_params": 70 * 10**9, "param_bytes": 2, "device_counts": [8, 64, 512],
         "link_bandwidth": 100 * 10**9},
    ),
    TENSOR_PARALLEL_LAYER.task(
        "sc-023",
        {"tokens": 8192, "d_model": 8192, "d_ff": 32768, "bytes_per_value": 2, "tp_degrees": [2, 4, 8, 16],
         "peak_flops": 400 * 10**12, "link_bandwidth": 100 * 10**9},
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
        {"tokens_per_device": 16384, "d_model": 4096, "bytes_per_value": 2, "top_k": 2,
         "ep_degrees": [2, 8, 64], "link_bandwidth": 100 * 10**9},
    ),
    ZERO_MEMORY.task(
        "sc-027",
        {"n_params": 30 * 10**9, "devices": 64, "hbm_bytes_per_device": 80 * 10**9, "param_bytes": 2,
         "grad_bytes": 2, "optimizer_bytes": 12},
    ),
)
