"""The tensor_parallel_layer family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    hbm_capacity_for_peak,
    link_bandwidth,
    peak_flops,
    peak_for_capacity,
    round_numbers,
    rows,
    sorted_sample,
    tp_link_bandwidth,
    value_bytes,
)
from exactgrade.domains.scaling._task import known_mistake, near_tie, scaling_level, tie_edge
from exactgrade.domains.scaling.hardware import HBM_CAPACITY, NETWORK, NVLINK, TP_LINK, draw_in, require
from exactgrade.family import Draw, Reject, five_levels
from exactgrade.task import Task


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


def tensor_parallel_layer_float(
    tokens, d_model, d_ff, bytes_per_value, tp_degrees, peak_flops, link_bandwidth, mistake=None
):
    known_mistake(mistake, "allreduce_once")
    passes = 1 if mistake == "allreduce_once" else 2
    rows = []
    for tp in tp_degrees:
        compute = tokens * d_model * (8.0 * d_model + 4.0 * d_ff) / peak_flops / tp
        comm = passes * 2.0 * (tp - 1) / tp * bytes_per_value * d_model * tokens / link_bandwidth
        rows.append({"tp": tp, "compute_s": compute, "comm_s": comm, "comm_bound": comm > compute})
    return {"rows": rows}


def sample_tensor_parallel_layer(draw: Draw, level: int) -> dict:
    """Communication over compute grows with tp as (tp - 1) * c: the degrees straddle the one at
    which it passes 1, so comm_bound takes both values in every instance."""
    shape = attention_shape(draw, level)
    degrees = (
        [2**e for e in sorted_sample(draw, 1, 3 + level, rows(level, 4))]
        if level < 3
        else sorted_sample(draw, 2, 16 * level, rows(level, 4))
    )
    inputs = {
        "tokens": 1024 * draw.integer(1, 16 * level),
        "d_model": shape["d_model"],
        "d_ff": shape["d_ff"],
        "bytes_per_value": value_bytes(draw, level),
        "tp_degrees": degrees,
        "peak_flops": peak_flops(draw, level),
        "link_bandwidth": link_bandwidth(draw, level),
    }
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


_TP_ROW = (
    '{"rows": [{"tp": <int>, "compute_s": <number>, "comm_s": <number>, "comm_bound": <bool>}, ...]}'
    "  # one row per entry of `tp_degrees`, in order"
)


LEVEL_1 = scaling_level(
    "sharding",
    tensor_parallel_layer,
    """\
Megatron-style tensor parallelism splits one transformer layer over `tp` devices. The layer's
forward pass on `tokens` tokens costs 2*tokens*(4*d_model**2 + 2*d_model*d_ff) FLOPs (attention
projections and a 2-matrix MLP), split evenly over the tp devices at `peak_flops` FLOP/s each. It
needs two ring all-reduces of the activations (tokens x d_model values, `bytes_per_value` bytes
each), one after attention and one after the MLP, over links of `link_bandwidth` bytes/s per
device. For each degree in `tp_degrees`, give the per-device compute time, the communication time
(seconds, no overlap assumed) and whether communication takes strictly longer than compute.""",
    _TP_ROW,
    tensor_parallel_layer_float,
    "allreduce_once",
    sample=sample_tensor_parallel_layer,
    reject=_tensor_parallel_not_tied,
    varying=("rows[].comm_bound",),
)


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


LEVEL_2 = scaling_level(
    "sharding",
    tensor_parallel_layer,
    _TP_L2,
    _TP_ROW,
    tensor_parallel_layer_float,
    "allreduce_once",
    reject=_tensor_parallel_not_tied,
    varying=("rows[].comm_bound",),
    sample=sample_tensor_parallel_layer,
)


SPLIT = """\
Megatron-style tensor parallelism splits every transformer layer over t devices. Count only the
layer's matmuls: attention's query, key, value and output projections, each a d_model x d_model
matrix, and an MLP of an up-projection [d_model, d_ff] and a down-projection [d_ff, d_model]. The
query, key, value and up-projection weights are split by columns and the output and
down-projection weights by rows, so every device holds 1/t of every weight matrix and does 1/t of
every matmul; in the forward pass the partial outputs of the output projection and of the
down-projection are each summed over the t devices by one all-reduce of the full activations
(tokens x d_model values, `bytes_per_value` bytes each). The backward pass costs twice the
matmul FLOPs of the forward pass and needs one all-reduce of the same size for each forward
all-reduce (the gradients with respect to the inputs of the attention block and of the MLP
block). Nothing overlaps: every device computes and communicates one after the other, and t = 1
needs no communication."""


def tp_training_step(
    tokens,
    layers,
    d_model,
    d_ff,
    bytes_per_value,
    state_bytes_per_param,
    act_bytes_per_token_layer,
    tp_degrees,
    peak_flops,
    link_bandwidth,
    hbm_bytes,
):
    """Per degree: forward + backward of every layer (3x the forward FLOPs, 4 all-reduces per
    layer), and whether the device's shard of weights, state and activations fits."""
    from fractions import Fraction

    layer_params = 4 * d_model * d_model + 2 * d_model * d_ff
    forward_flops = 2 * tokens * layer_params
    activation = tokens * d_model * bytes_per_value
    rows = []
    for tp in tp_degrees:
        compute_s = Fraction(3 * forward_flops, tp * peak_flops)
        comm_s = 4 * 2 * activation * Fraction(tp - 1, tp) / link_bandwidth
        held = layer_params * state_bytes_per_param + tokens * act_bytes_per_token_layer
        memory = Fraction(layers * held, tp)
        rows.append({"tp": tp, "step_time_s": layers * (compute_s + comm_s), "fits": memory <= hbm_bytes})
    return {"rows": rows}


def tp_training_step_float(
    tokens,
    layers,
    d_model,
    d_ff,
    bytes_per_value,
    state_bytes_per_param,
    act_bytes_per_token_layer,
    tp_degrees,
    peak_flops,
    link_bandwidth,
    hbm_bytes,
    mistake=None,
):
    known_mistake(mistake, "forward_collectives_only")
    collectives = 2 if mistake == "forward_collectives_only" else 4
    rows = []
    for t in tp_degrees:
        flops = 6.0 * tokens * d_model * (4 * d_model + 2 * d_ff) * layers / t
        sent = collectives * layers * 2.0 * (1 - 1 / t) * tokens * bytes_per_value * d_model
        held = state_bytes_per_param * d_model * (4 * d_model + 2 * d_ff) + act_bytes_per_token_layer * tokens
        rows.append(
            {
                "tp": t,
                "step_time_s": flops / peak_flops + sent / link_bandwidth,
                "fits": layers * held / t <= hbm_bytes,
            }
        )
    return {"rows": rows}


def _layer_params(i: dict) -> int:
    return 4 * i["d_model"] ** 2 + 2 * i["d_model"] * i["d_ff"]


def sample_training_step(draw: Draw, level: int) -> dict:
    """A real HBM lies between the shard sizes of two neighbouring degrees (the layer count puts
    it there), so fits takes both values; the link is drawn so that communication matters (0.2x
    to 5x the compute at the middle degree)."""
    shape = attention_shape(draw, level)
    degrees = (
        sorted_sample(draw, 2, 16 * level, rows(level, 3))
        if not round_numbers(level)
        else [2**e for e in sorted_sample(draw, 0, 3 + level, rows(level, 3))]
    )
    tokens = 1024 * draw.integer(1, 16 * level) - (0 if round_numbers(level) else draw.integer(1, 1023))
    inputs = {
        "tokens": tokens,
        "layers": 0,
        "d_model": shape["d_model"],
        "d_ff": shape["d_ff"],
        "bytes_per_value": 2,
        "state_bytes_per_param": draw.choice((16, 18, 20)),
        "act_bytes_per_token_layer": shape["d_model"] * draw.integer(10, 40),
        "tp_degrees": degrees,
        "peak_flops": peak_flops(draw, level),
        "link_bandwidth": tp_link_bandwidth(draw, level),
        "hbm_bytes": 0,
    }
    per_layer = (
        _layer_params(inputs) * inputs["state_bytes_per_param"] + tokens * inputs["act_bytes_per_token_layer"]
    )
    k = draw.integer(1, len(degrees) - 1)  # degrees[k] is the smallest that fits
    # A real HBM; the layer count puts it between the shards at degrees[k - 1] and degrees[k].
    hbm = hbm_capacity_for_peak(draw, level, inputs["peak_flops"])
    fewest = max(8, hbm * degrees[k - 1] // per_layer + 1)
    most = min(96, -(-hbm * degrees[k] // per_layer) - 1)
    if fewest > most:
        raise Reject("no layer count of 8-96 puts a real HBM between two degrees' shards")
    inputs["layers"], inputs["hbm_bytes"] = draw.integer(fewest, most), hbm
    return inputs


def _training_step_edges(task: Task) -> str | None:
    i = task.inputs
    per_layer = _layer_params(i) * i["state_bytes_per_param"] + i["tokens"] * i["act_bytes_per_token_layer"]
    held = i["layers"] * per_layer
    for tp in i["tp_degrees"]:
        if near_tie(Fraction(held, tp), i["hbm_bytes"]):
            return f"tp {tp}: the shard sits on the HBM limit"
    return None


_L3 = (
    SPLIT
    + """
Each device has `peak_flops` FLOP/s and links of `link_bandwidth` bytes/s (ring collectives). A
training step of a model of `layers` such layers processes `tokens` tokens: the forward pass
through every layer, then the backward pass through every layer. Each device stores, for its
1/t of every weight matrix, `state_bytes_per_param` bytes per parameter (weights, gradients and
optimizer state together), and `act_bytes_per_token_layer` bytes of saved activations per token
per layer, also split evenly over the t devices. For each degree t in `tp_degrees`, give the
training step time in seconds and whether one device's bytes fit in its `hbm_bytes` bytes of
HBM."""
)


LEVEL_3 = scaling_level(
    "sharding",
    tp_training_step,
    _L3,
    '{"rows": [{"tp": <int>, "step_time_s": <number>, "fits": <bool>}, ...]}'
    "  # one row per entry of `tp_degrees`, in order",
    tp_training_step_float,
    "forward_collectives_only",
    sample=sample_training_step,
    reject=_training_step_edges,
    varying=("rows[].fits",),
)


def tp_with_latency(
    token_counts, d_model, d_ff, bytes_per_value, n_heads, peak_flops, link_bandwidth, step_latency_s
):
    """Per token count: the divisor t of n_heads minimising one layer's forward time when each
    of a ring all-reduce's 2(t - 1) steps costs a latency plus V/t bytes; ties: smaller t."""
    from fractions import Fraction

    layer_flops = 2 * (4 * d_model * d_model + 2 * d_model * d_ff)
    rows = []
    for tokens in token_counts:
        volume = tokens * d_model * bytes_per_value
        best = None
        for tp in range(1, n_heads + 1):
            if n_heads % tp:
                continue
            allreduce = 2 * (tp - 1) * (step_latency_s + Fraction(volume, tp * link_bandwidth))
            time_s = Fraction(tokens * layer_flops, tp * peak_flops) + 2 * allreduce
            if best is None or time_s < best[1]:
                best = (tp, time_s)
        rows.append({"tokens": tokens, "tp": best[0], "time_s": best[1]})
    return {"rows": rows}


def _argmin(candidates):
    """The first (key, value) whose value is within 1e-12 of the smallest (the stated tie rule:
    candidates come in increasing order)."""
    low = min(value for _, value in candidates)
    return next((key, value) for key, value in candidates if value <= low * (1 + 1e-12))


def tp_with_latency_float(
    token_counts,
    d_model,
    d_ff,
    bytes_per_value,
    n_heads,
    peak_flops,
    link_bandwidth,
    step_latency_s,
    mistake=None,
):
    known_mistake(mistake, "no_latency")
    latency = 0.0 if mistake == "no_latency" else step_latency_s
    divisors = [t for t in range(1, n_heads + 1) if n_heads % t == 0]
    rows = []
    for n in token_counts:
        # (F/peak - 4V/B)/t + 4*latency*t + 4V/B - 4*latency
        fixed = 4.0 * n * d_model * bytes_per_value / link_bandwidth
        shrinking = n * d_model * (8.0 * d_model + 4.0 * d_ff) / peak_flops - fixed
        t, time = _argmin([(t, shrinking / t + 4 * latency * (t - 1) + fixed) for t in divisors])
        rows.append({"tokens": n, "tp": t, "time_s": time})
    return {"rows": rows}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def sample_latency(draw: Draw, level: int) -> dict:
    """The latency puts the unconstrained optimum sqrt(shrinking / (4 latency)) near a middle
    divisor at the middle token count; token counts span a factor of 16 or more, so the best
    degree moves across rows."""
    shape = attention_shape(draw, level)
    heads = draw.choice((16, 24, 32, 48, 64, 96, 128))
    counts = sorted_sample(draw, 1, 64 * level, rows(level, 3))
    counts = [512 * c - (0 if round_numbers(level) else draw.integer(1, 511)) for c in counts]
    if counts[-1] < 8 * counts[0]:
        raise Reject("token counts too close together to move the best degree")
    inputs = {
        "token_counts": counts,
        "d_model": shape["d_model"],
        "d_ff": shape["d_ff"],
        "bytes_per_value": draw.choice((1, 2)) if not round_numbers(level) else 2,
        "n_heads": heads,
        "peak_flops": peak_flops(draw, level),
        "link_bandwidth": tp_link_bandwidth(draw, level),
        "step_latency_s": Fraction(0),
    }
    d, f, w = inputs["d_model"], inputs["d_ff"], inputs["bytes_per_value"]
    per_token = Fraction(2 * (4 * d * d + 2 * d * f), inputs["peak_flops"]) - Fraction(
        4 * d * w, inputs["link_bandwidth"]
    )
    if per_token <= 0:
        raise Reject("communication outweighs compute at every degree")
    middle = counts[len(counts) // 2]
    target = draw.choice([t for t in _divisors(heads) if 2 <= t < heads])
    latency = per_token * middle / (4 * target * target)
    unit = 10**9 if round_numbers(level) else 10**11  # whole ns, or 0.01 ns
    inputs["step_latency_s"] = Fraction(max(1, round(latency * unit)), unit)
    return inputs


def _latency_edges(task: Task) -> str | None:
    i = task.inputs
    d, f, w = i["d_model"], i["d_ff"], i["bytes_per_value"]
    for tokens in i["token_counts"]:
        latency, link = i["step_latency_s"], i["link_bandwidth"]
        times = sorted(
            Fraction(tokens * 2 * (4 * d * d + 2 * d * f), t * i["peak_flops"])
            + 4 * (t - 1) * (latency + Fraction(tokens * d * w, t * link))
            for t in _divisors(i["n_heads"])
        )
        problem = tie_edge(f"{tokens} tokens: the two fastest degrees", times[0], times[1])
        if problem:
            return problem
    if len({row["tp"] for row in task.expected["rows"]}) < 2:
        return "the best degree is the same for every token count"
    return None


_L4 = """\
Megatron-style tensor parallelism splits a transformer layer over t devices. Count only the
layer's matmuls: attention's query, key, value and output projections, each a d_model x d_model
matrix, and an MLP of an up-projection [d_model, d_ff] and a down-projection [d_ff, d_model]. The
query, key, value and up-projection weights are split by columns and the output and
down-projection weights by rows, so every device does 1/t of every matmul at `peak_flops` FLOP/s;
the partial outputs of the output projection and of the down-projection are each summed over the
t devices by one all-reduce of the full activations (tokens x d_model values, `bytes_per_value`
bytes each). An all-reduce of V bytes over t devices runs as a ring of 2(t - 1) steps, one after
another; in each step every device sends V/t bytes to its neighbour over a link of
`link_bandwidth` bytes/s, and each step also costs a fixed `step_latency_s` seconds. Compute and
communication do not overlap; t = 1 needs no communication. The degree t must divide `n_heads`.
For each token count in `token_counts`, give the degree whose forward pass of one layer is the
fastest (on a tie, the smaller degree) and that time in seconds."""


LEVEL_4 = scaling_level(
    "sharding",
    tp_with_latency,
    _L4,
    '{"rows": [{"tokens": <int>, "tp": <int>, "time_s": <number>}, ...]}'
    "  # one row per entry of `token_counts`, in order",
    tp_with_latency_float,
    "no_latency",
    sample=sample_latency,
    reject=_latency_edges,
    varying=("rows[].tp",),
)


def tp_dp_design(
    layers,
    d_model,
    d_ff,
    bytes_per_value,
    state_bytes_per_param,
    act_bytes_per_token_layer,
    devices,
    node_size,
    global_batches,
    peak_flops,
    tp_link_bandwidth,
    dp_link_bandwidth,
    hbm_bytes,
):
    """Per global batch: the degree t (a divisor of node_size) of the fastest training step that
    fits, with dp = devices / t replicas, each on G / dp tokens; ties: smaller t."""
    from fractions import Fraction

    layer_params = 4 * d_model * d_model + 2 * d_model * d_ff
    rows = []
    for batch in global_batches:
        best = None
        for tp in range(1, node_size + 1):
            if node_size % tp:
                continue
            dp = devices // tp
            tokens = Fraction(batch, dp)
            memory = layers * (layer_params * state_bytes_per_param + tokens * act_bytes_per_token_layer) / tp
            if memory > hbm_bytes:
                continue
            compute = layers * 3 * 2 * tokens * layer_params / (tp * peak_flops)
            activation = tokens * d_model * bytes_per_value
            tp_comm = layers * 4 * 2 * activation * Fraction(tp - 1, tp) / tp_link_bandwidth
            grads = Fraction(layers * layer_params * bytes_per_value, tp)
            dp_comm = 2 * grads * Fraction(dp - 1, dp) / dp_link_bandwidth
            step = compute + tp_comm + dp_comm
            if best is None or step < best[1]:
                best = (tp, step)
        if best is None:
            rows.append({"global_batch": batch, "tp": None, "step_time_s": None})
        else:
            rows.append({"global_batch": batch, "tp": best[0], "step_time_s": best[1]})
    return {"rows": rows}


def tp_dp_design_float(
    layers,
    d_model,
    d_ff,
    bytes_per_value,
    state_bytes_per_param,
    act_bytes_per_token_layer,
    devices,
    node_size,
    global_batches,
    peak_flops,
    tp_link_bandwidth,
    dp_link_bandwidth,
    hbm_bytes,
    mistake=None,
):
    known_mistake(mistake, "forward_collectives_only")
    collectives = 2 if mistake == "forward_collectives_only" else 4
    params = layers * d_model * (4.0 * d_model + 2.0 * d_ff)
    rows = []
    for g in global_batches:
        found = []
        for t in (t for t in range(1, node_size + 1) if node_size % t == 0):
            replicas = devices / t
            # per device: the state of 1/t of the model, activations of 1/t of the replica's tokens
            held = params * state_bytes_per_param / t + layers * act_bytes_per_token_layer * g / devices
            if held > hbm_bytes:
                continue
            compute = 6.0 * params * g / devices / peak_flops
            tp_comm = collectives * layers * 2.0 * d_model * bytes_per_value * g * (t - 1) / devices
            dp_comm = 2.0 * params * bytes_per_value * (replicas - 1) / devices
            found.append((t, compute + tp_comm / tp_link_bandwidth + dp_comm / dp_link_bandwidth))
        if not found:
            rows.append({"global_batch": g, "tp": None, "step_time_s": None})
            continue
        t, step = _argmin(found)
        rows.append({"global_batch": g, "tp": t, "step_time_s": step})
    return {"rows": rows}


def sample_design(draw: Draw, level: int) -> dict:
    """Global batches of 256 to 32k tokens per device; the inter-node link is drawn so that the
    unconstrained best degree at the middle batch is a chosen t* (t*^2 = D / (A G), the TP
    traffic A G (t - 1) growing and the gradient all-reduce D / t falling with t); the HBM lies
    between the shards at two neighbouring degrees for the largest batch, so memory rules degrees
    out for some batches only (every batch fits at t = node_size)."""
    node = draw.choice((4, 8, 8, 16))
    devices = node * draw.choice((2, 4, 8, 16, 32, 64))
    d_model = 128 * draw.integer(8, 64)
    inputs = {
        "layers": draw.integer(8, 64),
        "d_model": d_model,
        "d_ff": d_model * draw.integer(2, 5) + 128 * draw.integer(0, 7),
        "bytes_per_value": 2,
        "state_bytes_per_param": draw.choice((16, 18, 20)),
        "act_bytes_per_token_layer": d_model * draw.integer(4, 24),
        "devices": devices,
        "node_size": node,
        "global_batches": [],
        "peak_flops": 0,
        "tp_link_bandwidth": draw_in(draw, NVLINK, 10**6),
        "dp_link_bandwidth": 0,
        "hbm_bytes": 0,
    }
    per_device = sorted(
        {
            2 ** draw.integer(8, 14) * draw.choice((1, 3, 5)) - draw.integer(0, 7)
            for _ in range(rows(level, 1))
        }
    )
    if len(per_device) < 3 or per_device[-1] < 8 * per_device[0]:
        raise Reject("too few or too close global batches")
    batches = [devices * t for t in per_device]
    inputs["global_batches"] = batches
    target = Fraction(draw.integer(4, 4 * node * node), 4)  # t*^2 at the middle batch
    middle = batches[len(batches) // 2]
    ideal = (
        Fraction(_layer_params(inputs) * devices * inputs["tp_link_bandwidth"], 4 * d_model * middle) / target
    )
    inputs["dp_link_bandwidth"] = 10**6 * max(1, round(ideal / 10**6))
    require("dp_link_bandwidth", inputs["dp_link_bandwidth"], NETWORK)
    params = inputs["layers"] * _layer_params(inputs)
    acts = inputs["layers"] * inputs["act_bytes_per_token_layer"] * per_device[-1]
    state = params * inputs["state_bytes_per_param"]
    degrees = _divisors(node)
    j = draw.integer(1, len(degrees) - 1)
    low, high = Fraction(state, degrees[j]) + acts, Fraction(state, degrees[j - 1]) + acts
    hbm = math.ceil(low + (high - low) * Fraction(draw.integer(1, 99), 100))
    inputs["hbm_bytes"] = require("hbm_bytes", hbm, HBM_CAPACITY)
    # the chip of that HBM: its peak drawn for it (a peak drawn apart posed 171 GB at 138 TFLOP/s)
    inputs["peak_flops"] = peak_for_capacity(draw, level, hbm)
    return inputs


def _design_steps(i: dict, batch: int) -> list[tuple[Fraction, int, bool]]:
    """(step, t, fits) of every degree (the reference's arithmetic, for the rules)."""
    out = []
    p = _layer_params(i)
    for tp in _divisors(i["node_size"]):
        dp = i["devices"] // tp
        tokens = Fraction(batch, dp)
        memory = i["layers"] * (p * i["state_bytes_per_param"] + tokens * i["act_bytes_per_token_layer"]) / tp
        step = (
            i["layers"] * 6 * tokens * p / (tp * i["peak_flops"])
            + i["layers"]
            * 8
            * tokens
            * i["d_model"]
            * i["bytes_per_value"]
            * Fraction(tp - 1, tp)
            / i["tp_link_bandwidth"]
            + 2
            * Fraction(i["layers"] * p * i["bytes_per_value"], tp)
            * Fraction(dp - 1, dp)
            / i["dp_link_bandwidth"]
        )
        if near_tie(memory, i["hbm_bytes"]):
            return []
        out.append((step, tp, memory <= i["hbm_bytes"]))
    return out


def _design_rules(task: Task) -> str | None:
    """Refuse ties within 1e-9 (the fastest two allowed degrees, a shard on the HBM limit), and
    an instance where memory never decides or always decides (each must happen in some row)."""
    i = task.inputs
    binds = []
    for batch in i["global_batches"]:
        steps = _design_steps(i, batch)
        if not steps:
            return f"global batch {batch}: a shard sits on the HBM limit"
        allowed = sorted(s for s, _, ok in steps if ok)
        if not allowed:
            return f"global batch {batch}: no degree fits"
        if len(allowed) > 1 and allowed[0] != allowed[1] and near_tie(allowed[0], allowed[1]):
            return f"global batch {batch}: the two fastest degrees are within 1e-9"
        free = min(steps)
        binds.append(not free[2])
    if len(set(binds)) < 2:
        return "memory decides the degree in every row or in none"
    if len({row["tp"] for row in task.expected["rows"]}) < 2:
        return "the same degree for every global batch"
    return None


_L5 = (
    SPLIT
    + """
You train a model of `layers` such layers on `devices` devices, in nodes of `node_size`
devices. Tensor parallelism of degree t (t must divide `node_size`) runs inside a node over
links of `tp_link_bandwidth` bytes/s per device; the devices form devices / t data-parallel
replicas, and a step's global batch of tokens is split evenly over the replicas (each replica
runs the forward and backward pass on its share). After the backward pass, every device all-reduces
its gradient shard (1/t of every weight matrix, `bytes_per_value` bytes per parameter) with the
devices holding the same shard in the other replicas, over links of `dp_link_bandwidth` bytes/s
per device (with one replica there is nothing to all-reduce). All collectives are rings; nothing
overlaps. Each device has `peak_flops` FLOP/s and `hbm_bytes` bytes of HBM, which must hold, for
its 1/t of every weight matrix, `state_bytes_per_param` bytes per parameter (weights, gradients
and optimizer state together), plus `act_bytes_per_token_layer` bytes of saved activations per
token of its replica's share per layer, split evenly over the t devices of the replica. For each
global batch (in tokens) in `global_batches`, choose the degree t that fits and gives the
shortest step (on a tie, the smaller t), and give that t and the step time in seconds; None for
both if no degree fits."""
)


LEVEL_5 = scaling_level(
    "sharding",
    tp_dp_design,
    _L5,
    '{"rows": [{"global_batch": <int>, "tp": <int> | None, "step_time_s": <number> | None}, ...]}'
    "  # one row per entry of `global_batches`, in order",
    tp_dp_design_float,
    "forward_collectives_only",
    sample=sample_design,
    reject=_design_rules,
    varying=("rows[].tp",),
)


TENSOR_PARALLEL_LAYER = five_levels(
    "tensor_parallel_layer",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the split described, the layer's FLOPs and collectives derived; L3: a whole training "
    "step per degree (backward collectives derived too) and whether the shard of weights, "
    "state and activations fits; L4: the degree (a divisor of the heads) that minimises a "
    "layer's time once each ring step has a latency, per token count; L5: tensor and data "
    "parallelism chosen together per global batch: memory forces a degree up, intra-node TP "
    "traffic and inter-node gradient all-reduce pull opposite ways",
)
