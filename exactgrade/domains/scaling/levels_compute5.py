"""Round-2 upper levels of the roofline families (elementwise_roofline, decode_attention_roofline,
min_compute_bound_batch, matmul_fraction_of_peak, weight_streaming_roofline): each level asks its
own question, the upper ones with regimes that change (memory- vs compute-bound, fits or not), ties
broken by a stated rule, and searches whose method the prompt does not give.

elementwise_roofline: an activation fused into the matmul that produces its input (L3); a chain of
ops split into kernels under an op limit and a launch cost (L5). decode_attention_roofline: a
layer's decode step with its weights (L3); the smallest compute-bound batch per context (L4, None);
the KV format and batch of the most tokens per second under capacity and latency (L5).
min_compute_bound_batch: mixed widths and the step time (L3); the narrowest compute-bound layer
(L4, None); the weight format compute-bound at the smallest batch (L5). matmul_fraction_of_peak: an
attention head's two matmuls (L3); the best tile under padding, re-reads and SRAM (L5).
weight_streaming_roofline: weights split between HBM and a host stream (L3); the resident layer
count of the fastest pass (L5).

References are self-contained; the ``*_float`` twins compute in floats by another route (a search
instead of a closed form, or the reverse) and can reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    chip_at_ridge,
    chip_inputs,
    host_link,
    letters,
    peak_and_bandwidth,
    round_numbers,
    sample_min_compute_bound_batch,
)
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer, near_tie
from exactgrade.domains.scaling.hardware import (
    HBM_CAPACITY,
    RIDGE,
    SHARED_MEMORY,
    VECTOR_FLOPS,
    VECTOR_RIDGE,
    require,
    require_full_read,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

# ================================================================ elementwise_roofline


def epilogue_fusion(batches, d_model, d_ff, bytes_per_value, flops_per_element, peak_flops, hbm_bandwidth):
    """A matmul then an elementwise activation: two kernels, or the activation fused into the
    matmul's epilogue (the intermediate never touches HBM)."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        matmul_flops = 2 * batch * d_model * d_ff
        matmul_bytes = bytes_per_value * (batch * d_model + d_model * d_ff + batch * d_ff)
        act_flops = flops_per_element * batch * d_ff
        act_bytes = 2 * bytes_per_value * batch * d_ff
        unfused = max(Fraction(matmul_flops, peak_flops), Fraction(matmul_bytes, hbm_bandwidth)) + max(
            Fraction(act_flops, peak_flops), Fraction(act_bytes, hbm_bandwidth)
        )
        fused_compute = Fraction(matmul_flops + act_flops, peak_flops)
        fused_memory = Fraction(matmul_bytes, hbm_bandwidth)
        rows.append(
            {
                "batch": batch,
                "saving_s": unfused - max(fused_compute, fused_memory),
                "fused_bound": "compute" if fused_compute >= fused_memory else "memory",
            }
        )
    return {"rows": rows}


def epilogue_fusion_float(
    batches, d_model, d_ff, bytes_per_value, flops_per_element, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "fused_drops_activation_flops")
    rows = []
    for b in batches:
        compute = b * d_ff * (2.0 * d_model) / peak_flops
        memory = ((b + d_ff) * d_model + b * d_ff) * bytes_per_value / hbm_bandwidth
        activation = b * d_ff * max(flops_per_element / peak_flops, 2.0 * bytes_per_value / hbm_bandwidth)
        extra = (
            0.0 if mistake == "fused_drops_activation_flops" else flops_per_element * b * d_ff / peak_flops
        )
        fused = max(compute + extra, memory)
        rows.append(
            {
                "batch": b,
                "saving_s": max(compute, memory) + activation - fused,
                "fused_bound": "compute" if compute + extra >= memory else "memory",
            }
        )
    return {"rows": rows}


def sample_epilogue(draw: Draw, level: int) -> dict:
    """The activation alone memory-bound (as the family's physics says); batches spread over
    both sides of the fused kernel's compute/memory crossover."""
    d_model = 1024 * draw.integer(1, 8) + (0 if round_numbers(level) else 64 * draw.integer(1, 15))
    d_ff = d_model * draw.choice((2, 3, 4))
    width = draw.choice((1, 2, 4))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    top = math.floor(Fraction(peak * 2 * width, bandwidth)) - 1  # the activation stays memory-bound
    if top < 2:
        raise Reject("even one FLOP per element makes the activation compute-bound")
    flops = draw.integer(max(1, top // 8), top)
    batches = sorted(draw.sample(range(1, 2**13), 2 + level))
    return {
        "batches": batches,
        "d_model": d_model,
        "d_ff": d_ff,
        "bytes_per_value": width,
        "flops_per_element": flops,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


def _epilogue_edges(task: Task) -> str | None:
    i = task.inputs
    for b in i["batches"]:
        compute = Fraction(
            2 * b * i["d_model"] * i["d_ff"] + i["flops_per_element"] * b * i["d_ff"], i["peak_flops"]
        )
        memory = Fraction(
            i["bytes_per_value"] * (b * i["d_model"] + i["d_model"] * i["d_ff"] + b * i["d_ff"]),
            i["hbm_bandwidth"],
        )
        if near_tie(compute, memory):
            return f"batch {b}: the fused kernel sits on its compute/memory tie"
    return None


def fusion_plan(
    n_elements, input_bytes, ops, max_ops_per_kernel, launch_overhead_s, vector_flops, hbm_bandwidth
):
    """The least time of a chain of elementwise ops split into kernels of consecutive ops, and the
    fewest kernels reaching it (dynamic programming over where kernels end)."""
    from fractions import Fraction

    n = len(ops)
    best = [(Fraction(0), 0)] + [None] * n
    for end in range(1, n + 1):
        for start in range(max(0, end - max_ops_per_kernel), end):
            read = input_bytes if start == 0 else ops[start - 1]["output_bytes"]
            flops = n_elements * sum(op["flops_per_element"] for op in ops[start:end])
            traffic = n_elements * (read + ops[end - 1]["output_bytes"])
            kernel = launch_overhead_s + max(Fraction(flops, vector_flops), Fraction(traffic, hbm_bandwidth))
            option = (best[start][0] + kernel, best[start][1] + 1)
            if best[end] is None or option < best[end]:
                best[end] = option
    time_s, kernels = best[n]
    return {"rows": [{"min_time_s": time_s, "kernels": kernels}]}


def _plans(n: int, limit: int):
    """Every split of n consecutive ops into groups of at most ``limit`` (as lists of sizes)."""
    for mask in range(2 ** (n - 1)):
        sizes, size = [], 1
        for position in range(n - 1):
            if mask >> position & 1:
                sizes.append(size)
                size = 1
            else:
                size += 1
        sizes.append(size)
        if max(sizes) <= limit:
            yield sizes


def _plan_time(sizes, n_elements, input_bytes, ops, launch, peak, bandwidth, exact):
    total, start = (Fraction(0) if exact else 0.0), 0
    for size in sizes:
        group = ops[start : start + size]
        read = input_bytes if start == 0 else ops[start - 1]["output_bytes"]
        flops = sum(op["flops_per_element"] for op in group) * n_elements
        traffic = (read + group[-1]["output_bytes"]) * n_elements
        if exact:
            total += launch + max(Fraction(flops, peak), Fraction(traffic, bandwidth))
        else:
            total += launch + max(flops / peak, traffic / bandwidth)
        start += size
    return total


def fusion_plan_float(
    n_elements,
    input_bytes,
    ops,
    max_ops_per_kernel,
    launch_overhead_s,
    vector_flops,
    hbm_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "greedy_full_kernels")
    n = len(ops)
    if mistake == "greedy_full_kernels":
        plans = [
            [max_ops_per_kernel] * (n // max_ops_per_kernel)
            + ([n % max_ops_per_kernel] if n % max_ops_per_kernel else [])
        ]
    else:
        plans = list(_plans(n, max_ops_per_kernel))
    timed = [
        (
            _plan_time(
                p, n_elements, input_bytes, ops, launch_overhead_s, vector_flops, hbm_bandwidth, False
            ),
            len(p),
        )
        for p in plans
    ]
    low = min(t for t, _ in timed)
    kernels = min(k for t, k in timed if t <= low * (1 + 1e-12))
    return {"rows": [{"min_time_s": low, "kernels": kernels}]}


def sample_fusion_plan(draw: Draw, level: int) -> dict:
    """Ops whose FLOPs straddle the chip's critical intensity (a single op memory-bound, two or
    three together compute-bound), outputs of 1, 2 or 4 bytes, a kernel limit below the chain
    length (fusing everything is not allowed) and a launch cost comparable to one pass."""
    n = 4 + level
    # elementwise work runs on the vector units, not at the tensor-core matmul peak
    peak, bandwidth = chip_at_ridge(
        draw, level, VECTOR_RIDGE.low, VECTOR_RIDGE.high, VECTOR_FLOPS, VECTOR_RIDGE
    )
    critical = Fraction(peak, bandwidth)
    if critical < 4:
        raise Reject("a chip this slow makes every op compute-bound")
    n_elements = 1024 * draw.integer(2**10, 2**16)
    ops = [
        {
            "op": name,
            "flops_per_element": max(1, math.floor(critical * Fraction(draw.integer(30, 500), 100))),
            "output_bytes": draw.choice((1, 2, 4)),
        }
        for name in letters("op", n)
    ]
    one_pass = Fraction(n_elements * 4, bandwidth)
    launch = Fraction(math.ceil(one_pass * Fraction(draw.integer(5, 80), 100) * 10**9), 10**9)
    return {
        "n_elements": n_elements,
        "input_bytes": draw.choice((2, 4)),
        "ops": ops,
        "max_ops_per_kernel": draw.integer(2, n - 2),
        "launch_overhead_s": launch,
        "vector_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


def _fusion_plan_rules(task: Task) -> str | None:
    """No two plans within 1e-9 of each other unless equal (a float search could take either),
    and the plan is not simply the greedy one nor one op per kernel."""
    i = task.inputs
    best = task.expected["rows"][0]["min_time_s"]
    args = (
        i["n_elements"],
        i["input_bytes"],
        i["ops"],
        i["launch_overhead_s"],
        i["vector_flops"],
        i["hbm_bandwidth"],
    )
    singles = None
    for sizes in _plans(len(i["ops"]), i["max_ops_per_kernel"]):
        time_s = _plan_time(sizes, *args, True)
        if time_s != best and near_tie(time_s, best):
            return "two fusion plans sit within 1e-9 of each other"
        if len(sizes) == len(i["ops"]):
            singles = time_s
    if singles == best:
        return "one op per kernel is optimal (no fusion to reason about)"
    return None


_EPILOGUE_L3 = """\
A feed-forward matmul y = x @ W multiplies x of shape [batch, d_model] by W of shape
[d_model, d_ff]; an elementwise activation then spends `flops_per_element` FLOPs on every element
of y. Every value takes `bytes_per_value` bytes. Run as two kernels, the matmul reads x and W from
HBM once and writes y once, then the activation kernel reads y once and writes its result once.
Fused, one kernel computes the activation on y before writing it, so y itself never goes to HBM
and only the activation's result is written. Every kernel follows the roofline on a chip of
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s. For each batch size in `batches`, give the time
fusion saves (two-kernel time minus fused time, seconds) and the bound of the fused kernel."""

_FUSION_PLAN_L5 = """\
A chain of elementwise ops in `ops` runs, in order, on a tensor of `n_elements` elements; the
chain's input holds `input_bytes` bytes per element, and op i spends ops[i]["flops_per_element"]
FLOPs per element and produces a tensor of ops[i]["output_bytes"] bytes per element. The ops are
split into kernels, each running a run of consecutive ops (at most `max_ops_per_kernel` ops in one
kernel, every op in exactly one kernel, in chain order). A kernel reads the tensor its first op
consumes from HBM once, keeps everything between its ops on chip, and writes the tensor its last
op produces to HBM once. A kernel takes `launch_overhead_s` seconds to launch plus its roofline
time on a chip whose HBM gives `hbm_bandwidth` bytes/s and whose vector units give `vector_flops`
FLOP/s: elementwise ops run on the vector units, not on the tensor cores (whose matmul peak is
several times higher and does not apply here); kernels run one after another.
Give the least total time of the chain over all such splits, and the fewest kernels of a split
that reaches that least time."""

ELEMENTWISE_LEVELS_R2 = {
    3: Level(
        epilogue_fusion,
        _EPILOGUE_L3,
        '{"rows": [{"batch": <int>, "saving_s": <number>, "fused_bound": "compute" | "memory"}, ...]}'
        "  # one row per entry of `batches`, in order",
        epilogue_fusion_float,
        "fused_drops_activation_flops",
        sample=sample_epilogue,
        reject=_epilogue_edges,
        varying=("rows[].fused_bound",),
    ),
    5: Level(
        fusion_plan,
        _FUSION_PLAN_L5,
        '{"rows": [{"min_time_s": <number>, "kernels": <int>}]}',
        fusion_plan_float,
        "greedy_full_kernels",
        sample=sample_fusion_plan,
        reject=_fusion_plan_rules,
    ),
}


# ================================================================ decode_attention_roofline


def decode_layer_step(
    batches, seq_len, layer_params, n_heads, n_kv_heads, head_dim, bytes_per_value, peak_flops, hbm_bandwidth
):
    """One layer's decode step as one roofline operation: its weights read once for the batch,
    every sequence's own K and V cache read once; matmul and attention FLOPs."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = batch * (2 * layer_params + 4 * n_heads * seq_len * head_dim)
        traffic = bytes_per_value * (layer_params + batch * 2 * seq_len * n_kv_heads * head_dim)
        compute_s, memory_s = Fraction(flops, peak_flops), Fraction(traffic, hbm_bandwidth)
        rows.append(
            {
                "batch": batch,
                "time_s": max(compute_s, memory_s),
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def decode_layer_step_float(
    batches,
    seq_len,
    layer_params,
    n_heads,
    n_kv_heads,
    head_dim,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "kv_read_once_per_batch")
    rows = []
    for b in batches:
        readers = 1 if mistake == "kv_read_once_per_batch" else b
        compute = 2.0 * b * (layer_params + 2 * head_dim * seq_len * n_heads) / peak_flops
        memory = (
            (layer_params + 2.0 * readers * head_dim * n_kv_heads * seq_len) * bytes_per_value / hbm_bandwidth
        )
        rows.append(
            {
                "batch": b,
                "time_s": max(compute, memory),
                "bound": "compute" if compute >= memory else "memory",
            }
        )
    return {"rows": rows}


def _layer_params(d_model: int, n_heads: int, n_kv_heads: int, head_dim: int, d_ff: int) -> int:
    return 2 * d_model * (n_heads + n_kv_heads) * head_dim + 3 * d_model * d_ff


def _decode_shape(draw: Draw, level: int) -> dict:
    head_dim = draw.choice((64, 128) if round_numbers(level) else (64, 80, 96, 128))
    n_kv_heads = draw.choice((1, 2, 4, 8))
    n_heads = n_kv_heads * draw.choice((2, 4, 8))
    d_model = n_heads * head_dim
    return {
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "head_dim": head_dim,
        "layer_params": _layer_params(d_model, n_heads, n_kv_heads, head_dim, d_model * draw.choice((3, 4))),
    }


def sample_decode_layer(draw: Draw, level: int) -> dict:
    """Batches on both sides of the batch where the step turns compute-bound (batch 1 always
    memory-bound: the weights are read for a single token)."""
    shape = _decode_shape(draw, level)
    width, seq_len = draw.choice((1, 2)), 256 * draw.integer(1, 16) + draw.integer(0, 255)
    peak, bandwidth = peak_and_bandwidth(draw, level)
    gain = Fraction(
        2 * shape["layer_params"] + 4 * shape["n_heads"] * seq_len * shape["head_dim"], peak
    ) - Fraction(width * 2 * seq_len * shape["n_kv_heads"] * shape["head_dim"], bandwidth)
    if gain <= 0:
        raise Reject("the KV cache keeps this layer memory-bound at every batch")
    cross = Fraction(width * shape["layer_params"], bandwidth) / gain
    if not 4 <= cross <= 2**12:
        raise Reject("the compute-bound batch is out of range")
    below = draw.sample(range(2, math.ceil(cross)), min(level, math.ceil(cross) - 2))
    above = draw.sample(range(math.ceil(cross), 2 * math.ceil(cross) + 64), 2)
    return {
        "batches": sorted({1, *below, *above}),
        "seq_len": seq_len,
        **shape,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


def _decode_layer_edges(task: Task) -> str | None:
    i = task.inputs
    for b in i["batches"]:
        flops = b * (2 * i["layer_params"] + 4 * i["n_heads"] * i["seq_len"] * i["head_dim"])
        traffic = i["bytes_per_value"] * (
            i["layer_params"] + b * 2 * i["seq_len"] * i["n_kv_heads"] * i["head_dim"]
        )
        if near_tie(Fraction(flops, i["peak_flops"]), Fraction(traffic, i["hbm_bandwidth"])):
            return f"batch {b}: compute time sits on memory time"
    return None


def min_compute_bound_decode_layer(
    seq_lens, layer_params, n_heads, n_kv_heads, head_dim, bytes_per_value, peak_flops, hbm_bandwidth
):
    """Smallest batch at which the layer's decode step is compute-bound, per context length; None
    where the per-sequence KV reads alone keep it memory-bound at any batch."""
    import math
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        per_seq_flops = Fraction(2 * layer_params + 4 * n_heads * seq_len * head_dim, peak_flops)
        per_seq_bytes = Fraction(bytes_per_value * 2 * seq_len * n_kv_heads * head_dim, hbm_bandwidth)
        weights = Fraction(bytes_per_value * layer_params, hbm_bandwidth)
        # batch * per_seq_flops >= weights + batch * per_seq_bytes
        gain = per_seq_flops - per_seq_bytes
        batch = max(1, math.ceil(weights / gain)) if gain > 0 else None
        rows.append({"seq_len": seq_len, "min_batch": batch})
    return {"rows": rows}


def min_compute_bound_decode_layer_float(
    seq_lens,
    layer_params,
    n_heads,
    n_kv_heads,
    head_dim,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "attention_flops_dropped")
    rows = []
    for s in seq_lens:
        attention = 0.0 if mistake == "attention_flops_dropped" else 4.0 * s * head_dim * n_heads

        def compute_bound(b, s=s, attention=attention):
            return (
                b * (2.0 * layer_params + attention) / peak_flops
                >= (layer_params + 2.0 * b * s * head_dim * n_kv_heads) * bytes_per_value / hbm_bandwidth
            )

        limit = (
            2.0 * layer_params + attention
        ) / peak_flops - 2.0 * s * head_dim * n_kv_heads * bytes_per_value / hbm_bandwidth
        if limit <= 0:
            rows.append({"seq_len": s, "min_batch": None})
            continue
        high = 1
        while not compute_bound(high):
            high *= 2
        low = high // 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if compute_bound(middle) else (middle, high)
        rows.append({"seq_len": s, "min_batch": high})
    return {"rows": rows}


def sample_min_decode_layer(draw: Draw, level: int) -> dict:
    """Contexts from short to very long: the intensity limit (per-sequence FLOPs over per-sequence
    KV bytes) falls with the context, below the chip's critical intensity for the longest ones."""
    shape = _decode_shape(draw, level)
    width = draw.choice((1, 2))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    critical = Fraction(peak, bandwidth)
    # the context where per-sequence FLOPs/peak equal per-sequence KV bytes/bandwidth
    kv = 2 * shape["n_kv_heads"] * shape["head_dim"] * width
    denominator = critical * kv - 4 * shape["n_heads"] * shape["head_dim"]
    if denominator <= 0:
        raise Reject("the KV cache never caps this layer's intensity on this chip")
    edge = 2 * shape["layer_params"] / denominator
    if edge < 64 or edge > 2**21:
        raise Reject("the context where the KV cache caps the intensity is out of range")
    seq_lens = sorted({max(16, int(edge * Fraction(draw.integer(5, 300), 100))) for _ in range(2 + level)})
    return {
        "seq_lens": seq_lens,
        **shape,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


def _min_decode_layer_edges(task: Task) -> str | None:
    i = task.inputs
    for s in i["seq_lens"]:
        flops = Fraction(2 * i["layer_params"] + 4 * i["n_heads"] * s * i["head_dim"], i["peak_flops"])
        kv = Fraction(i["bytes_per_value"] * 2 * s * i["n_kv_heads"] * i["head_dim"], i["hbm_bandwidth"])
        if near_tie(flops, kv):
            return f"context {s}: the intensity limit sits on the critical intensity"
        if flops > kv and near_integer(
            Fraction(i["bytes_per_value"] * i["layer_params"], i["hbm_bandwidth"]) / (flops - kv)
        ):
            return f"context {s}: the batch bound sits on an integer"
    return None


def _some_min_batch_none(task: Task) -> bool:
    return any(row.get("min_batch", 0) is None for row in task.expected["rows"])


def kv_serving_plan(
    n_params,
    layers,
    n_heads,
    n_kv_heads,
    head_dim,
    seq_len,
    weight_bytes,
    kv_formats,
    peak_flops,
    hbm_bandwidth,
    hbm_capacity,
    latency_budget_s,
):
    """The KV format and batch of the most decode tokens per second under an HBM capacity and a
    per-step latency budget; on a throughput tie the smaller batch, then the earlier format."""
    import math
    from fractions import Fraction

    best = None
    weights = weight_bytes * n_params
    for index, fmt in enumerate(kv_formats):
        values = 2 * layers * n_kv_heads * head_dim * seq_len  # K and V of one sequence
        kv_seq = Fraction(fmt["bits_per_value"] * values, 8)
        flops_seq = (
            2 * n_params + 4 * layers * n_heads * head_dim * seq_len + fmt["dequant_flops_per_value"] * values
        )
        # the batch limits: HBM capacity, then both roofline terms within the budget
        by_capacity = math.floor((hbm_capacity - weights) / kv_seq)
        by_compute = math.floor(latency_budget_s * peak_flops / flops_seq)
        by_memory = math.floor((latency_budget_s * hbm_bandwidth - weights) / kv_seq)
        top = min(by_capacity, by_compute, by_memory)
        if top < 1:
            continue
        # throughput b / max(compute, memory) grows until the step turns compute-bound, then stays
        gain = Fraction(flops_seq, peak_flops) - kv_seq / hbm_bandwidth
        batch = top
        if gain > 0:
            batch = min(top, max(1, math.ceil(Fraction(weights, hbm_bandwidth) / gain)))
        step = max(Fraction(batch * flops_seq, peak_flops), (weights + batch * kv_seq) / hbm_bandwidth)
        option = (batch / step, -batch, -index, fmt["name"])
        if best is None or option[:3] > best[:3]:
            best = option
    if best is None:
        return {"rows": [{"kv_format": None, "batch": None, "tokens_per_s": None}]}
    return {"rows": [{"kv_format": best[3], "batch": -best[1], "tokens_per_s": best[0]}]}


def kv_serving_plan_float(
    n_params,
    layers,
    n_heads,
    n_kv_heads,
    head_dim,
    seq_len,
    weight_bytes,
    kv_formats,
    peak_flops,
    hbm_bandwidth,
    hbm_capacity,
    latency_budget_s,
    mistake=None,
):
    """Every batch of every format tried in floats (no closed form)."""
    known_mistake(mistake, "kv_read_once_per_step")
    weights = float(weight_bytes) * n_params
    options = []
    for index, fmt in enumerate(kv_formats):
        values = 2.0 * layers * n_kv_heads * head_dim * seq_len
        kv_seq = values * fmt["bits_per_value"] / 8
        flops_seq = (
            2.0 * n_params
            + 4.0 * layers * n_heads * head_dim * seq_len
            + values * fmt["dequant_flops_per_value"]
        )
        b = 1
        while weights + b * kv_seq <= hbm_capacity * (1 + 1e-15):
            readers = 1 if mistake == "kv_read_once_per_step" else b
            step = max(b * flops_seq / peak_flops, (weights + readers * kv_seq) / hbm_bandwidth)
            if step > latency_budget_s * (1 + 1e-15):
                break
            options.append((b / step, b, index, fmt["name"]))
            b += 1
    if not options:
        return {"rows": [{"kv_format": None, "batch": None, "tokens_per_s": None}]}
    top = max(o[0] for o in options)
    _, b, _, name = min((o for o in options if o[0] >= top * (1 - 1e-12)), key=lambda o: (o[1], o[2]))
    return {
        "rows": [
            {
                "kv_format": name,
                "batch": b,
                "tokens_per_s": next(o[0] for o in options if o[1] == b and o[3] == name),
            }
        ]
    }


_KV_FORMATS = (("fp8", 8, 1, 4), ("int8", 8, 2, 8), ("int4", 4, 4, 16), ("nf4", 4, 8, 24))
"""name, bits per value, and the range of its decode FLOPs per value."""


def _flops_seq(i: dict, fmt: dict) -> int:
    values = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["seq_len"]
    return (
        2 * i["n_params"]
        + 4 * i["layers"] * i["n_heads"] * i["head_dim"] * i["seq_len"]
        + fmt["dequant_flops_per_value"] * values
    )


def _format_limits(i: dict, fmt: dict) -> tuple[Fraction, Fraction, Fraction, Fraction, Fraction]:
    values = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["seq_len"]
    kv_seq = Fraction(fmt["bits_per_value"] * values, 8)
    flops_seq = (
        2 * i["n_params"]
        + 4 * i["layers"] * i["n_heads"] * i["head_dim"] * i["seq_len"]
        + fmt["dequant_flops_per_value"] * values
    )
    weights = i["weight_bytes"] * i["n_params"]
    by_capacity = (i["hbm_capacity"] - weights) / kv_seq
    by_compute = i["latency_budget_s"] * i["peak_flops"] / flops_seq
    by_memory = (i["latency_budget_s"] * i["hbm_bandwidth"] - weights) / kv_seq
    gain = Fraction(flops_seq, i["peak_flops"]) - kv_seq / i["hbm_bandwidth"]
    cross = Fraction(weights, i["hbm_bandwidth"]) / gain if gain > 0 else Fraction(-1)
    return by_capacity, by_compute, by_memory, cross, kv_seq


def sample_kv_serving(draw: Draw, level: int) -> dict:
    """A model, a chip and a capacity such that the formats land in different regimes: some
    capped by HBM capacity, some by the latency budget, some reaching the compute-bound batch."""
    head_dim = draw.choice((64, 80, 96, 128))
    n_kv_heads = draw.choice((1, 2, 4, 8))
    n_heads = n_kv_heads * draw.choice((2, 4, 8))
    layers = draw.integer(16, 80)
    d_model = n_heads * head_dim
    n_params = layers * _layer_params(
        d_model, n_heads, n_kv_heads, head_dim, d_model * draw.choice((3, 4))
    ) + 2 * d_model * draw.integer(32_000, 160_000)
    weight_bytes = draw.choice((1, 2))
    peak, bandwidth = chip_at_ridge(draw, level, RIDGE.low, 200)
    seq_len = 64 * draw.integer(2, 48) + draw.integer(0, 63)
    formats = [{"name": "bf16", "bits_per_value": 16, "dequant_flops_per_value": 0}] + [
        {"name": name, "bits_per_value": bits, "dequant_flops_per_value": draw.integer(low, high)}
        for name, bits, low, high in draw.sample(_KV_FORMATS, draw.integer(2, 3))
    ]
    weights = weight_bytes * n_params
    values = 2 * layers * n_kv_heads * head_dim * seq_len
    # the capacity leaves room for a drawn number of bf16 sequences; the budget a drawn multiple of
    # the weight-read time
    # around the batch where bf16 turns compute-bound, when it does: then bf16's uncapped
    # throughput competes with the narrower formats' cheaper reads
    flops16 = 2 * n_params + 4 * layers * n_heads * head_dim * seq_len
    gain = Fraction(flops16, peak) - Fraction(2 * values, bandwidth)
    cross = Fraction(weights, bandwidth) / gain if gain > 0 else None
    if cross is None or cross > 2**12 or draw.chance(1, 4):
        sequences, budget = (
            draw.integer(4, 512),
            Fraction(weights, bandwidth) * Fraction(draw.integer(105, 600), 100),
        )
    else:
        sequences = max(1, math.floor(cross * Fraction(draw.integer(50, 250), 100)))
        budget = max(Fraction(flops16 * cross, peak), Fraction(weights, bandwidth)) * Fraction(
            draw.integer(80, 250), 100
        )
    capacity = weights + values * 2 * sequences + draw.integer(0, values)
    require("hbm_capacity", capacity, HBM_CAPACITY)
    require_full_read(capacity, bandwidth)
    budget = Fraction(math.ceil(budget * 10**7), 10**7)
    return {
        "n_params": n_params,
        "layers": layers,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "head_dim": head_dim,
        "seq_len": seq_len,
        "weight_bytes": weight_bytes,
        "kv_formats": formats,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
        "hbm_capacity": capacity,
        "latency_budget_s": budget,
    }


def _kv_serving_rules(task: Task) -> str | None:
    """No batch limit on an integer, no two formats' throughputs within 1e-9 unless equal, and
    at least two regimes among the formats (capacity-, latency- or compute-limited)."""
    i = task.inputs
    regimes, throughputs = set(), []
    chosen = task.expected["rows"][0]["tokens_per_s"]
    for fmt in i["kv_formats"]:
        by_capacity, by_compute, by_memory, cross, kv_seq = _format_limits(i, fmt)
        for bound in (by_capacity, by_compute, by_memory, cross):
            if bound > 0 and near_integer(bound):
                return f"{fmt['name']}: a batch limit sits on an integer"
        top = math.floor(min(by_capacity, by_compute, by_memory))
        if top < 1:
            regimes.add("none")
            continue
        if 0 < cross <= top:
            regimes.add("compute")
            throughputs.append(Fraction(i["peak_flops"], _flops_seq(i, fmt)))
        elif by_capacity <= min(by_compute, by_memory):
            regimes.add("capacity")
        else:
            regimes.add("latency")
        if not 0 < cross <= top:
            throughputs.append(
                top / ((i["weight_bytes"] * i["n_params"] + top * kv_seq) / i["hbm_bandwidth"])
            )
    if any(t != chosen and near_tie(t, chosen) for t in throughputs):
        return "two KV formats' best throughputs sit within 1e-9 of each other"
    if len(regimes) < 2:
        return f"every KV format is in one regime ({regimes.pop()})"
    if task.expected["rows"][0]["kv_format"] is None:
        return "no format serves a single sequence"
    return None


def _kv_plan_compute(task: Task) -> bool:
    """The chosen batch is the compute-bound crossover (the tie rule decides it)."""
    i, row = task.inputs, task.expected["rows"][0]
    fmt = next(f for f in i["kv_formats"] if f["name"] == row["kv_format"])
    by_capacity, by_compute, by_memory, cross, _ = _format_limits(i, fmt)
    return 0 < cross and row["batch"] < math.floor(min(by_capacity, by_compute, by_memory))


def _kv_plan_not_narrowest(task: Task) -> bool:
    """A wider KV format wins over the narrowest one (fewest bits is not the answer)."""
    formats = task.inputs["kv_formats"]
    chosen = next(f for f in formats if f["name"] == task.expected["rows"][0]["kv_format"])
    return chosen["bits_per_value"] > min(f["bits_per_value"] for f in formats)


_DECODE_LAYER_L3 = """\
During decoding, one transformer layer processes one new token for each sequence in the batch. Its
weights (`layer_params` values, 2 FLOPs per weight per token) are read from HBM once per step for
the whole batch. Its attention, for each sequence, takes each of the `n_heads` query heads' query
(`head_dim` values), dots it with the `seq_len` cached keys of its KV head and sums the `seq_len`
cached value vectors weighted by the scores (2 FLOPs per multiply-add); grouped-query attention
caches `n_kv_heads` key heads and as many value heads of `head_dim` values per position, and each
sequence reads its own K and V cache from HBM once. Every value (weight or cache) takes
`bytes_per_value` bytes. Treat the layer's decode step as one roofline operation (all its FLOPs
against all its HBM bytes) on a chip of `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s. For each
batch size in `batches`, give the step's time in seconds and its bound."""

_DECODE_LAYER_L4 = """\
During decoding, one transformer layer processes one new token for each sequence in the batch;
every sequence of the batch is at the same context length S. The layer's weights (`layer_params`
values, 2 FLOPs per weight per token) are read from HBM once per step for the whole batch. Its
attention, for each sequence, takes each of the `n_heads` query heads' query (`head_dim` values),
dots it with the S cached keys of its KV head and sums the S cached value vectors weighted by the
scores (2 FLOPs per multiply-add); grouped-query attention caches `n_kv_heads` key heads and as
many value heads of `head_dim` values per position, and each sequence reads its own K and V cache
from HBM once. Every value (weight or cache) takes `bytes_per_value` bytes. Treat the layer's
decode step as one roofline operation (all its FLOPs against all its HBM bytes) on a chip of
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s. For each context length S in `seq_lens`, give the
smallest integer batch at which the step is compute-bound (compute time at least memory time), or
None if no batch size makes it compute-bound."""

_KV_SERVING_L5 = """\
A decoder with `n_params` weights (`weight_bytes` bytes each, 2 FLOPs per weight per generated
token) and `layers` layers serves a batch of sequences that are all at context length `seq_len`
on one chip of `peak_flops` FLOP/s, `hbm_bandwidth` bytes/s and `hbm_capacity` bytes of HBM. One
decode step generates one token for every sequence of the batch: it reads all the weights once
for the whole batch, and every sequence reads its own KV cache once. In every layer each of the
`n_heads` query heads dots its query (`head_dim` values) with the keys of all `seq_len` cached
positions of its KV head and sums their value vectors weighted by the scores (2 FLOPs per
multiply-add); the cache holds, per layer and position, `n_kv_heads` key vectors and as many value
vectors of `head_dim` values. The cache may be stored in any format of `kv_formats`: a cached value
takes `bits_per_value` bits, and every cached value read costs `dequant_flops_per_value` FLOPs to
decode (on top of the attention FLOPs). A step takes its roofline time (all its FLOPs against all
the bytes it reads from HBM). HBM must hold the weights and the KV cache of every sequence of the
batch (nothing else), and a step may take at most `latency_budget_s` seconds. Choose the KV format
and the batch size (an integer, at least 1) giving the most generated tokens per second
(batch / step time); on a tie, the smaller batch, then the format listed first. Give the format,
the batch and that throughput."""

DECODE_ATTENTION_LEVELS_R2 = {
    3: Level(
        decode_layer_step,
        _DECODE_LAYER_L3,
        '{"rows": [{"batch": <int>, "time_s": <number>, "bound": "compute" | "memory"}, ...]}'
        "  # one row per entry of `batches`, in order",
        decode_layer_step_float,
        "kv_read_once_per_batch",
        sample=sample_decode_layer,
        reject=_decode_layer_edges,
        varying=("rows[].bound",),
    ),
    4: Level(
        min_compute_bound_decode_layer,
        _DECODE_LAYER_L4,
        '{"rows": [{"seq_len": <int>, "min_batch": <int> | None}, ...]}  # one row per entry of '
        "`seq_lens`, in order",
        min_compute_bound_decode_layer_float,
        "attention_flops_dropped",
        sample=sample_min_decode_layer,
        reject=_min_decode_layer_edges,
    ),
    5: Level(
        kv_serving_plan,
        _KV_SERVING_L5,
        '{"rows": [{"kv_format": <str>, "batch": <int>, "tokens_per_s": <number>}]}',
        kv_serving_plan_float,
        "kv_read_once_per_step",
        sample=sample_kv_serving,
        reject=_kv_serving_rules,
    ),
}
DECODE_ATTENTION_BRANCHES_R2 = (
    Branch("none", _some_min_batch_none, Fraction(1, 4), (4,)),
    Branch("compute-bound tie", _kv_plan_compute, Fraction(1, 10), (5,)),
    Branch("a wider KV format wins", _kv_plan_not_narrowest, Fraction(1, 5), (5,)),
)


# ================================================================ min_compute_bound_batch


def min_batch_and_time(chips, d_model, d_ff, weight_bytes, activation_bytes):
    """Per chip: the smallest compute-bound batch of the mixed-precision matmul, then its step time."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        # 2*B*D*F >= c * (a*B*(D + F) + w*D*F)
        slope = 2 * d_model * d_ff - critical * activation_bytes * (d_model + d_ff)
        if slope <= 0:
            rows.append({"chip": chip["name"], "min_batch": None, "step_time_s": None})
            continue
        batch = max(1, math.ceil(critical * weight_bytes * d_model * d_ff / slope))
        rows.append(
            {
                "chip": chip["name"],
                "min_batch": batch,
                "step_time_s": Fraction(2 * batch * d_model * d_ff, chip["peak_flops"]),
            }
        )
    return {"rows": rows}


def min_batch_and_time_float(chips, d_model, d_ff, weight_bytes, activation_bytes, mistake=None):
    known_mistake(mistake, "weights_at_activation_bytes")
    weights = activation_bytes if mistake == "weights_at_activation_bytes" else weight_bytes
    rows = []
    for c in chips:

        def bound(b, c=c):
            return (
                2.0 * b * d_model * d_ff / c["peak_flops"]
                >= ((d_model + d_ff) * b * activation_bytes + weights * d_model * d_ff) / c["hbm_bandwidth"]
            )

        if (
            2.0 * d_model * d_ff / (activation_bytes * (d_model + d_ff))
            <= c["peak_flops"] / c["hbm_bandwidth"]
        ):
            rows.append({"chip": c["name"], "min_batch": None, "step_time_s": None})
            continue
        high = 1
        while not bound(high):
            high *= 2
        low = high // 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if bound(middle) else (middle, high)
        rows.append(
            {
                "chip": c["name"],
                "min_batch": high,
                "step_time_s": d_model * (2.0 * high * d_ff) / c["peak_flops"],
            }
        )
    return {"rows": rows}


def _mixed_bound(i: dict, chip: dict) -> Fraction | None:
    critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
    slope = 2 * i["d_model"] * i["d_ff"] - critical * i["activation_bytes"] * (i["d_model"] + i["d_ff"])
    return critical * i["weight_bytes"] * i["d_model"] * i["d_ff"] / slope if slope > 0 else None


def sample_min_batch_time(draw: Draw, level: int) -> dict:
    """As level 1's sampler (a narrow layer in some instances, for None), with int8 or int4-sized
    weights apart from the activations."""
    base = sample_min_compute_bound_batch(draw, level)
    weight_bytes, activation_bytes = draw.choice(((1, 2), (2, 2), (1, 4), (2, 4), (4, 4)))
    return {
        "chips": base["chips"],
        "d_model": base["d_model"],
        "d_ff": base["d_ff"],
        "weight_bytes": weight_bytes,
        "activation_bytes": activation_bytes,
    }


def _min_batch_time_edges(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        if near_tie(
            Fraction(2 * i["d_model"] * i["d_ff"], i["activation_bytes"] * (i["d_model"] + i["d_ff"])),
            critical,
        ):
            return f"{chip['name']}: the intensity limit sits on the critical intensity"
        bound = _mixed_bound(i, chip)
        if bound is not None and near_integer(bound):
            return f"{chip['name']}: the batch bound sits on an integer"
    return None


def some_none(task: Task) -> bool:
    """Some row of the key holds None."""
    return any(None in row.values() for row in task.expected["rows"])


def _rows_none(field: str):
    return lambda task: any(row[field] is None for row in task.expected["rows"])


def min_width_for_batch(chips, batch, ff_ratio, weight_bytes, activation_bytes, width_step):
    """Per chip: the narrowest layer (d_model a multiple of width_step, d_ff = ff_ratio * d_model)
    whose matmul is compute-bound at this batch; None if no width makes it so."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        c = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        # 2*B*r*D^2 >= c*(a*B*(1 + r)*D + w*r*D^2)  <=>  D*(2*B*r - c*w*r) >= c*a*B*(1 + r)
        gain = 2 * batch * ff_ratio - c * weight_bytes * ff_ratio
        if gain <= 0:
            rows.append({"chip": chip["name"], "min_d_model": None})
            continue
        width = c * activation_bytes * batch * (1 + ff_ratio) / gain
        rows.append({"chip": chip["name"], "min_d_model": width_step * max(1, math.ceil(width / width_step))})
    return {"rows": rows}


def min_width_for_batch_float(
    chips, batch, ff_ratio, weight_bytes, activation_bytes, width_step, mistake=None
):
    known_mistake(mistake, "activations_ignored")
    rows = []
    for c in chips:

        def bound(d, c=c):
            f = ff_ratio * d
            moved = (
                0.0 if mistake == "activations_ignored" else activation_bytes * batch * (d + f)
            ) + weight_bytes * d * f
            return 2.0 * batch * d * f * c["hbm_bandwidth"] >= moved * c["peak_flops"]

        if 2.0 * batch <= weight_bytes * c["peak_flops"] / c["hbm_bandwidth"]:
            rows.append({"chip": c["name"], "min_d_model": None})
            continue
        k = 1
        while not bound(k * width_step) and k < 10**7:
            k += 1 if k < 64 else k // 2
        low = max(1, k // 2 if k > 64 else k - 1)
        k = next(j for j in range(low, k + 1) if bound(j * width_step))
        rows.append({"chip": c["name"], "min_d_model": k * width_step})
    return {"rows": rows}


def sample_min_width(draw: Draw, level: int) -> dict:
    """A batch that some chips can make compute-bound with a wide enough layer and others cannot
    (the batch's own intensity limit 2*batch/weight_bytes sits below their critical intensity)."""
    chips = [{"name": name, **chip_inputs(draw, level)} for name in letters("chip", 3 + level // 2)]
    weight_bytes, activation_bytes = draw.choice(((1, 2), (2, 2), (1, 1), (2, 4)))
    criticals = sorted(Fraction(c["peak_flops"], c["hbm_bandwidth"]) for c in chips)
    middle = criticals[draw.below(len(criticals))]
    batch = max(1, math.floor(middle * weight_bytes / 2 * Fraction(draw.integer(80, 140), 100)))
    return {
        "chips": chips,
        "batch": batch,
        "ff_ratio": draw.choice((2, 3, 4)),
        "weight_bytes": weight_bytes,
        "activation_bytes": activation_bytes,
        "width_step": draw.choice((64, 128, 256)),
    }


def _min_width_edges(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        c = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        gain = 2 * i["batch"] * i["ff_ratio"] - c * i["weight_bytes"] * i["ff_ratio"]
        if near_tie(2 * i["batch"] * i["ff_ratio"], c * i["weight_bytes"] * i["ff_ratio"]):
            return f"{chip['name']}: the batch's intensity limit sits on the critical intensity"
        if gain > 0:
            width = c * i["activation_bytes"] * i["batch"] * (1 + i["ff_ratio"]) / gain
            if near_integer(width / i["width_step"]):
                return f"{chip['name']}: the width bound sits on a multiple of the step"
            if width > 2**20:
                return f"{chip['name']}: a layer wider than 2**20"
    if all(row["min_d_model"] is None for row in task.expected["rows"]):
        return "no chip can be made compute-bound"
    return None


def format_min_batch(chips, d_model, d_ff, activation_bytes, formats):
    """Per chip: the weight format whose matmul turns compute-bound at the smallest batch, and that
    batch; decoding a format's weights costs FLOPs once per weight per matmul."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        best = None
        for fmt in formats:
            # B*(2*D*F/P - a*(D + F)/W) >= bits/8*D*F/W - q*D*F/P
            gain = Fraction(2 * d_model * d_ff, chip["peak_flops"]) - Fraction(
                activation_bytes * (d_model + d_ff), chip["hbm_bandwidth"]
            )
            need = Fraction(fmt["bits_per_weight"] * d_model * d_ff, 8 * chip["hbm_bandwidth"]) - Fraction(
                fmt["dequant_flops_per_weight"] * d_model * d_ff, chip["peak_flops"]
            )
            if gain > 0:
                batch = max(1, math.ceil(need / gain))
            else:
                batch = 1 if gain >= need else None  # a larger batch only moves it further away
            if batch is not None and (best is None or batch < best[1]):
                best = (fmt["name"], batch)
        name, batch = best if best is not None else (None, None)
        rows.append({"chip": chip["name"], "format": name, "min_batch": batch})
    return {"rows": rows}


def format_min_batch_float(chips, d_model, d_ff, activation_bytes, formats, mistake=None):
    """Every batch tried from 1 up, in floats."""
    known_mistake(mistake, "dequant_per_row")
    rows = []
    for c in chips:
        options = []
        for order, f in enumerate(formats):
            for b in range(1, 2**16):
                rows_decoded = b if mistake == "dequant_per_row" else 1
                flops = (
                    2.0 * b * d_model * d_ff + f["dequant_flops_per_weight"] * d_model * d_ff * rows_decoded
                )
                moved = activation_bytes * b * (d_model + d_ff) + f["bits_per_weight"] / 8 * d_model * d_ff
                if flops / c["peak_flops"] >= moved / c["hbm_bandwidth"]:
                    options.append((b, order, f["name"]))
                    break
        if options:
            b, _, name = min(options)
            rows.append({"chip": c["name"], "format": name, "min_batch": b})
        else:
            rows.append({"chip": c["name"], "format": None, "min_batch": None})
    return {"rows": rows}


_WEIGHT_FORMATS = (
    ("int8", 8, 1, 6),
    ("fp8", 8, 0, 3),
    ("int4", 4, 4, 24),
    ("nf4", 4, 8, 40),
    ("int2", 2, 10, 60),
)


def sample_format_batch(draw: Draw, level: int) -> dict:
    """Chips over the whole real range of critical intensity (hardware.RIDGE, 110 to 650 FLOPs
    per byte): the decode FLOPs of narrow formats weigh against the bytes they save differently on
    each, and a chip above the layer's intensity limit has no compute-bound batch (None), so the
    answer changes with the chip. The narrowest format wins most chips: layers from d_model 512
    (a low intensity limit) keep enough instances whose rows differ (acceptance 4% -> 6% after
    the ridge floor rose from 50 to 110)."""
    chips = []
    for name in letters("chip", 3 + level // 2):
        peak, bandwidth = chip_at_ridge(draw, level, RIDGE.low, RIDGE.high)
        chips.append({"name": name, "peak_flops": peak, "hbm_bandwidth": bandwidth})
    formats = [{"name": "bf16", "bits_per_weight": 16, "dequant_flops_per_weight": 0}] + [
        {"name": name, "bits_per_weight": bits, "dequant_flops_per_weight": draw.integer(low, high)}
        for name, bits, low, high in draw.sample(_WEIGHT_FORMATS, draw.integer(2, 4))
    ]
    d_model = 128 * draw.integer(4, 64)
    return {
        "chips": chips,
        "d_model": d_model,
        "d_ff": d_model * draw.choice((2, 3, 4)) + 64 * draw.integer(0, 7),
        "activation_bytes": draw.choice((2, 4)),
        "formats": formats,
    }


def _format_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        gain = Fraction(2 * i["d_model"] * i["d_ff"], chip["peak_flops"]) - Fraction(
            i["activation_bytes"] * (i["d_model"] + i["d_ff"]), chip["hbm_bandwidth"]
        )
        batches = []
        for fmt in i["formats"]:
            need = Fraction(
                fmt["bits_per_weight"] * i["d_model"] * i["d_ff"], 8 * chip["hbm_bandwidth"]
            ) - Fraction(fmt["dequant_flops_per_weight"] * i["d_model"] * i["d_ff"], chip["peak_flops"])
            if near_tie(gain, 0) or (gain > 0 and near_integer(need / gain)) or near_tie(gain, need):
                return f"{chip['name']} {fmt['name']}: the batch bound sits on an integer"
            if gain > 0:
                batches.append(max(1, math.ceil(need / gain)))
        if batches and min(batches) > 2**15:
            return f"{chip['name']}: the smallest batch is above 2**15"
    return None


_MIN_BATCH_L3 = """\
The matmul y = x @ W multiplies activations x[batch, d_model] by weights W[d_model, d_ff]; it reads
x and W from HBM once and writes y[batch, d_ff] once. Weights take `weight_bytes` bytes per value,
activations (x and y) `activation_bytes`. For each chip in `chips` (peak FLOP/s and HBM bytes/s
given; every kernel on the roofline), give the smallest integer batch at which the matmul is
compute-bound (compute time at least memory time) and the matmul's time in seconds at that batch;
None for both if no batch size makes it compute-bound."""

_MIN_BATCH_L4 = """\
A layer's matmul y = x @ W multiplies activations x[batch, d_model] by weights W[d_model, d_ff],
with d_ff = ff_ratio * d_model (`ff_ratio` given); it reads x and W from HBM once and writes y once.
Weights take `weight_bytes` bytes per value, activations (x and y) `activation_bytes`. The batch is
`batch`. For each chip in `chips` (peak FLOP/s and HBM bytes/s given), give the smallest d_model, a
multiple of `width_step`, at which the matmul is compute-bound (compute time at least memory time),
or None if no width makes it compute-bound."""

_MIN_BATCH_L5 = """\
The matmul y = x @ W multiplies activations x[batch, d_model] by weights W[d_model, d_ff]; it reads
x and W from HBM once and writes y[batch, d_ff] once; x and y take `activation_bytes` bytes per
value. W may be stored in any format of `formats`: a weight takes `bits_per_weight` bits in HBM,
and the kernel decodes every weight once per matmul (whatever the batch), at
`dequant_flops_per_weight` FLOPs per weight, on top of the matmul's own FLOPs. The matmul's time
follows the roofline (all its FLOPs against all its HBM bytes). For each chip in `chips` (peak
FLOP/s and HBM bytes/s given), give the format whose matmul becomes compute-bound (compute time at
least memory time) at the smallest integer batch, and that batch; on a tie, the format listed
first; None for both if no format is compute-bound at any batch."""

MIN_BATCH_LEVELS_R2 = {
    3: Level(
        min_batch_and_time,
        _MIN_BATCH_L3,
        '{"rows": [{"chip": <str>, "min_batch": <int> | None, "step_time_s": <number> | None}, ...]}'
        "  # one row per chip, in order",
        min_batch_and_time_float,
        "weights_at_activation_bytes",
        sample=sample_min_batch_time,
        reject=_min_batch_time_edges,
    ),
    4: Level(
        min_width_for_batch,
        _MIN_BATCH_L4,
        '{"rows": [{"chip": <str>, "min_d_model": <int> | None}, ...]}  # one row per chip, in order',
        min_width_for_batch_float,
        "activations_ignored",
        sample=sample_min_width,
        reject=_min_width_edges,
    ),
    5: Level(
        format_min_batch,
        _MIN_BATCH_L5,
        '{"rows": [{"chip": <str>, "format": <str> | None, "min_batch": <int> | None}, ...]}'
        "  # one row per chip, in order",
        format_min_batch_float,
        "dequant_per_row",
        sample=sample_format_batch,
        reject=_format_batch_edges,
        varying=("rows[].format",),
    ),
}
MIN_BATCH_BRANCHES_R2 = (
    Branch("none", _rows_none("min_batch"), Fraction(1, 5), (1, 2, 3)),
    Branch("none at L4", _rows_none("min_d_model"), Fraction(1, 5), (4,)),
)


# ================================================================ matmul_fraction_of_peak


def attention_matmuls_fraction(seq_lens, head_dim, bytes_per_value, peak_flops, hbm_bandwidth):
    """One head's attention as two kernels, scores S = Q @ K^T and output O = P @ V, each on the
    roofline (S written and P read in full): the fraction of peak of the pair."""
    from fractions import Fraction

    rows = []
    for s in seq_lens:
        flops = 2 * (2 * s * head_dim * s)  # both matmuls
        scores = max(
            Fraction(2 * s * head_dim * s, peak_flops),
            Fraction(bytes_per_value * (2 * s * head_dim + s * s), hbm_bandwidth),
        )
        output = max(
            Fraction(2 * s * s * head_dim, peak_flops),
            Fraction(bytes_per_value * (s * s + 2 * s * head_dim), hbm_bandwidth),
        )
        rows.append({"seq_len": s, "fraction_of_peak": Fraction(flops, peak_flops) / (scores + output)})
    return {"rows": rows}


def attention_matmuls_fraction_float(
    seq_lens, head_dim, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "scores_not_stored")
    rows = []
    for s in seq_lens:
        square = 0.0 if mistake == "scores_not_stored" else float(s) * s
        kernel = max(
            2.0 * head_dim * s * s / peak_flops,
            (2.0 * head_dim * s + square) * bytes_per_value / hbm_bandwidth,
        )
        rows.append({"seq_len": s, "fraction_of_peak": 4.0 * head_dim * s * s / peak_flops / (2 * kernel)})
    return {"rows": rows}


def sample_attention_matmuls(draw: Draw, level: int) -> dict:
    """Lengths on both sides of where the kernels turn compute-bound."""
    peak, bandwidth = peak_and_bandwidth(draw, level)
    head_dim, width = draw.choice((64, 80, 96, 128, 256)), draw.choice((1, 2, 4))
    # compute-bound once 2*s*d*s / peak >= b*(2*s*d + s*s) / bw, i.e. s*(2*d - c*b) >= 2*c*b*d
    critical = Fraction(peak, bandwidth)
    gain = 2 * head_dim - critical * width
    if gain <= 0:
        raise Reject("these attention matmuls are never compute-bound on this chip")
    edge = 2 * critical * width * head_dim / gain
    if not 16 <= edge <= 2**16:
        raise Reject("the crossover length is out of range")
    lengths = sorted(
        {max(2, math.floor(edge * Fraction(draw.integer(10, 1000), 100))) for _ in range(2 + level)}
    )
    return {
        "seq_lens": lengths,
        "head_dim": head_dim,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


def best_tile(shapes, tiles, bytes_per_value, sram_bytes, peak_flops, hbm_bandwidth):
    """Per shape: the tile of the highest useful fraction of peak. A tiled kernel computes padded
    tiles, reads A once per column of tiles and B once per row of tiles, writes C once."""
    from fractions import Fraction

    rows = []
    for m, k, n in shapes:
        best = None
        for tile in tiles:
            tm, tn, tk = tile["tile_m"], tile["tile_n"], tile["tile_k"]
            if bytes_per_value * (tm * tk + tk * tn) + 4 * tm * tn > sram_bytes:
                continue
            row_tiles, col_tiles, depth = -(-m // tm), -(-n // tn), -(-k // tk)
            flops = 2 * (row_tiles * tm) * (depth * tk) * (col_tiles * tn)
            traffic = bytes_per_value * (m * k * col_tiles + k * n * row_tiles + m * n)
            time_s = max(Fraction(flops, peak_flops), Fraction(traffic, hbm_bandwidth))
            fraction = Fraction(2 * m * k * n, peak_flops) / time_s
            if best is None or fraction > best[1]:
                best = (tile["name"], fraction)
        rows.append({"shape": [m, k, n], "tile": best[0], "fraction_of_peak": best[1]})
    return {"rows": rows}


def _tile_fractions(m, k, n, tiles, width, sram, peak, bandwidth, mistake=None):
    out = []
    for t in tiles:
        tm, tn, tk = t["tile_m"], t["tile_n"], t["tile_k"]
        if width * (tm * tk + tk * tn) + 4.0 * tm * tn > sram:
            continue
        padded = 2.0 * math.ceil(m / tm) * tm * math.ceil(k / tk) * tk * math.ceil(n / tn) * tn
        if mistake == "operands_read_once":
            traffic = width * (m * k + k * n + m * n)
        else:
            traffic = width * (m * k * math.ceil(n / tn) + k * n * math.ceil(m / tm) + m * n)
        out.append((2.0 * m * k * n / peak / max(padded / peak, traffic / bandwidth), t["name"]))
    return out


def best_tile_float(shapes, tiles, bytes_per_value, sram_bytes, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "operands_read_once")
    rows = []
    for m, k, n in shapes:
        options = _tile_fractions(
            m, k, n, tiles, bytes_per_value, sram_bytes, peak_flops, hbm_bandwidth, mistake
        )
        top = max(f for f, _ in options)
        name = next(name for f, name in options if f >= top * (1 - 1e-12))
        rows.append({"shape": [m, k, n], "tile": name, "fraction_of_peak": top})
    return {"rows": rows}


_TILES = (
    (64, 64, 32),
    (128, 128, 32),
    (128, 256, 64),
    (256, 128, 64),
    (256, 256, 32),
    (64, 256, 128),
    (32, 512, 64),
    (512, 64, 64),
    (128, 64, 128),
    (16, 256, 256),
)


def sample_tiles(draw: Draw, level: int) -> dict:
    """Shapes from skinny to square, dims off the tile multiples, and an SRAM that rules the
    largest tiles out: which tile wins changes with the shape."""
    width = draw.choice((1, 2))
    tiles = [
        {"name": f"t{tm}x{tn}x{tk}", "tile_m": tm, "tile_n": tn, "tile_k": tk}
        for tm, tn, tk in draw.sample(_TILES, 3 + level // 2)
    ]
    needs = sorted(
        width * (t["tile_m"] * t["tile_k"] + t["tile_k"] * t["tile_n"]) + 4 * t["tile_m"] * t["tile_n"]
        for t in tiles
    )
    sram = needs[-2] + draw.integer(0, needs[-1] - needs[-2] - 1) if needs[-1] > needs[-2] else needs[-1]
    shapes = []
    for _ in range(2 + level):
        m = draw.choice((draw.integer(1, 64), draw.integer(65, 1024), draw.integer(1025, 16_384)))
        shapes.append([m, draw.integer(256, 16_384), draw.integer(256, 16_384)])
    return {
        "shapes": shapes,
        "tiles": tiles,
        "bytes_per_value": width,
        "sram_bytes": require("sram_bytes", sram, SHARED_MEMORY),
        **chip_inputs(draw, level),
    }


def _tile_rules(task: Task) -> str | None:
    i = task.inputs
    for (m, k, n), row in zip(i["shapes"], task.expected["rows"], strict=True):
        fractions = []
        for t in i["tiles"]:
            tm, tn, tk = t["tile_m"], t["tile_n"], t["tile_k"]
            if i["bytes_per_value"] * (tm * tk + tk * tn) + 4 * tm * tn > i["sram_bytes"]:
                continue
            flops = 2 * (-(-m // tm) * tm) * (-(-k // tk) * tk) * (-(-n // tn) * tn)
            traffic = i["bytes_per_value"] * (m * k * -(-n // tn) + k * n * -(-m // tm) + m * n)
            fractions.append(
                Fraction(2 * m * k * n, i["peak_flops"])
                / max(Fraction(flops, i["peak_flops"]), Fraction(traffic, i["hbm_bandwidth"]))
            )
            if near_tie(Fraction(flops, i["peak_flops"]), Fraction(traffic, i["hbm_bandwidth"])):
                return f"shape {[m, k, n]} tile {t['name']}: compute time sits on memory time"
        if any(f != row["fraction_of_peak"] and near_tie(f, row["fraction_of_peak"]) for f in fractions):
            return f"shape {[m, k, n]}: two tiles sit within 1e-9"
    return None


_ATTENTION_MATMULS_L3 = """\
One attention head at sequence length S runs two matmuls as two kernels: the scores S_mat = Q @ K^T
(Q and K of shape [S, head_dim]) and the output O = P @ V (P of shape [S, S], the softmaxed scores,
V of shape [S, head_dim]). Each kernel reads its two operands from HBM once and writes its result
once, `bytes_per_value` bytes per value (ignore the softmax itself and its FLOPs), and follows the
roofline on a chip of `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s; the kernels run one after
the other. For each length in `seq_lens`, give the fraction of peak FLOP/s the pair achieves (both
matmuls' FLOPs / their total time / peak_flops)."""

_TILES_L5 = """\
A matmul C = A @ B with A of shape [m, k] and B of shape [k, n] (each entry of `shapes` is [m, k, n],
`bytes_per_value` bytes per value) runs as a tiled kernel with one of the tile shapes in `tiles`. C
is divided into tiles of tile_m rows by tile_n columns; m and n are padded up to whole tiles, and
the k dimension is walked in steps of tile_k, padded up to a whole step. The kernel computes every
padded tile in full (2 FLOPs per multiply-add, padding included), reads from HBM the tile_m rows of
A that a C tile needs once for every C tile of that row band, and the tile_n columns of B once for
every C tile of that column band (so A is read once per column of tiles and B once per row of
tiles), and writes C once; the padding itself is never read or written. A tile fits on chip when
its A block [tile_m, tile_k] and B block [tile_k, tile_n] (`bytes_per_value` bytes per value) and
an fp32 accumulator [tile_m, tile_n] (4 bytes per value) together take at most `sram_bytes` bytes;
a tile that does not fit cannot be used. The kernel's time follows the roofline on a chip of
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s. For each shape, give the tile (by name) with the
highest useful fraction of peak (2*m*k*n / time / peak_flops, padding not counted as useful) and that
fraction; on a tie, the tile listed first."""

FRACTION_LEVELS_R2 = {
    3: Level(
        attention_matmuls_fraction,
        _ATTENTION_MATMULS_L3,
        '{"rows": [{"seq_len": <int>, "fraction_of_peak": <number>}, ...]}  # one row per length, in order',
        attention_matmuls_fraction_float,
        "scores_not_stored",
        sample=sample_attention_matmuls,
    ),
    5: Level(
        best_tile,
        _TILES_L5,
        '{"rows": [{"shape": [<int>, <int>, <int>], "tile": <str>, "fraction_of_peak": <number>}, ...]}'
        "  # one row per shape, in order",
        best_tile_float,
        "operands_read_once",
        sample=sample_tiles,
        reject=_tile_rules,
        varying=("rows[].tile",),
    ),
}


# ================================================================ weight_streaming_roofline


def split_weights(
    batch, d_model, d_ff, bytes_per_value, peak_flops, hbm_bandwidth, host_bandwidth, hbm_fractions
):
    """The matmul with a share of W resident in HBM and the rest streamed from host memory at the
    same time: the step takes the longest of compute, the HBM reads and the host stream."""
    from fractions import Fraction

    rows = []
    weights = bytes_per_value * d_model * d_ff
    activations = bytes_per_value * (batch * d_model + batch * d_ff)
    for share in hbm_fractions:
        times = {
            "compute": Fraction(2 * batch * d_model * d_ff, peak_flops),
            "hbm": (activations + share * weights) / hbm_bandwidth,
            "host": (1 - share) * weights / host_bandwidth,
        }
        bound = max(times, key=lambda name: times[name])
        rows.append({"hbm_fraction": share, "time_s": times[bound], "bound": bound})
    return {"rows": rows}


def split_weights_float(
    batch,
    d_model,
    d_ff,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    host_bandwidth,
    hbm_fractions,
    mistake=None,
):
    known_mistake(mistake, "streams_serialised")
    rows = []
    w = float(bytes_per_value) * d_model * d_ff
    for f in hbm_fractions:
        compute = 2.0 * d_model * d_ff * batch / peak_flops
        hbm = (bytes_per_value * batch * (d_model + d_ff) + f * w) / hbm_bandwidth
        host = (1 - f) * w / host_bandwidth
        options = [(compute, "compute"), (hbm, "hbm"), (host, "host")]
        if mistake == "streams_serialised":
            options = [(compute, "compute"), (hbm + host, "hbm" if hbm >= host else "host")]
        t, name = max(options)
        rows.append({"hbm_fraction": f, "time_s": t, "bound": name})
    return {"rows": rows}


def sample_split_weights(draw: Draw, level: int) -> dict:
    """Shares across the point where the HBM and host streams balance; a batch where compute
    binds between them."""
    d_model = 1024 * draw.integer(2, 16)
    d_ff = d_model * draw.choice((2, 3, 4))
    width = draw.choice((1, 2))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    host = host_link(draw, bandwidth, 4, 40)
    w = width * d_model * d_ff
    # compute time set near the balanced stream time w / (bandwidth + host)
    balanced = Fraction(w, bandwidth + host)
    batch = max(1, math.floor(balanced * peak / (2 * d_model * d_ff) * Fraction(draw.integer(60, 130), 100)))
    shares = sorted({Fraction(draw.integer(1, 99), 100) for _ in range(3 + level)})
    return {
        "batch": batch,
        "d_model": d_model,
        "d_ff": d_ff,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
        "host_bandwidth": host,
        "hbm_fractions": shares,
    }


def _split_rules(task: Task) -> str | None:
    i = task.inputs
    w = i["bytes_per_value"] * i["d_model"] * i["d_ff"]
    for share in i["hbm_fractions"]:
        times = sorted(
            [
                Fraction(2 * i["batch"] * i["d_model"] * i["d_ff"], i["peak_flops"]),
                (i["bytes_per_value"] * i["batch"] * (i["d_model"] + i["d_ff"]) + share * w)
                / i["hbm_bandwidth"],
                (1 - share) * w / i["host_bandwidth"],
            ]
        )
        if near_tie(times[-1], times[-2]):
            return f"share {share}: the two longest times tie"
    return None


def resident_layers(
    layers,
    batches,
    d_model,
    d_ff,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    host_bandwidth,
    max_resident_layers,
):
    """Per batch: how many layers' weights to keep in HBM (the rest streamed from host, both streams
    concurrent with compute) for the fastest forward pass; on a tie the fewest resident layers."""
    from fractions import Fraction

    per_layer = bytes_per_value * 2 * d_model * d_ff  # up- and down-projection weights
    rows = []
    for batch in batches:
        compute = Fraction(layers * 2 * batch * 2 * d_model * d_ff, peak_flops)
        activations = layers * bytes_per_value * 2 * batch * (d_model + d_ff)
        best = None
        for resident in range(max_resident_layers + 1):
            time_s = max(
                compute,
                Fraction(activations + resident * per_layer, hbm_bandwidth),
                Fraction((layers - resident) * per_layer, host_bandwidth),
            )
            if best is None or time_s < best[1]:
                best = (resident, time_s)
        rows.append({"batch": batch, "resident_layers": best[0], "time_s": best[1]})
    return {"rows": rows}


def resident_layers_float(
    layers,
    batches,
    d_model,
    d_ff,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    host_bandwidth,
    max_resident_layers,
    mistake=None,
):
    """The balance point in closed form: the host stream falls and the HBM stream grows with the
    resident layers; the best count is where they cross, or the fewest at which both are under the
    compute time, capped by the HBM limit."""
    known_mistake(mistake, "compute_ignored")
    per_layer = 2.0 * bytes_per_value * d_model * d_ff
    rows = []
    for b in batches:
        compute = 0.0 if mistake == "compute_ignored" else 4.0 * layers * b * d_model * d_ff / peak_flops
        activations = 2.0 * layers * bytes_per_value * b * (d_model + d_ff)

        def time(r, b=b, compute=compute, activations=activations):
            return max(
                compute,
                (activations + r * per_layer) / hbm_bandwidth,
                (layers - r) * per_layer / host_bandwidth,
            )

        # the host stream is under the compute time from r_host on; the HBM stream up to r_hbm
        r_host = max(0, math.ceil(layers - compute * host_bandwidth / per_layer))
        cross = (layers * per_layer / host_bandwidth - activations / hbm_bandwidth) / (
            per_layer / hbm_bandwidth + per_layer / host_bandwidth
        )
        candidates = {
            min(max_resident_layers, max(0, r)) for r in (r_host, math.floor(cross), math.ceil(cross))
        }
        low = min(time(r) for r in candidates)
        r = min(r for r in candidates if time(r) <= low * (1 + 1e-12))
        rows.append({"batch": b, "resident_layers": r, "time_s": time(r)})
    return {"rows": rows}


def sample_resident(draw: Draw, level: int) -> dict:
    """Batches from stream-bound (the best count balances the two streams) to compute-bound (many
    counts tie at the compute time: the fewest wins), and an HBM limit that sometimes binds."""
    layers = draw.integer(8, 96)
    d_model = 1024 * draw.integer(2, 12)
    d_ff = d_model * draw.choice((2, 3, 4))
    width = draw.choice((1, 2))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    host = host_link(draw, bandwidth, 3, 30)
    per_layer = width * 2 * d_model * d_ff
    balanced = Fraction(layers * per_layer, bandwidth + host)
    edge = balanced * peak / (layers * 4 * d_model * d_ff)  # the batch whose compute equals it
    batches = sorted(
        {max(1, math.floor(edge * Fraction(draw.integer(20, 400), 100))) for _ in range(2 + level)}
    )
    return {
        "layers": layers,
        "batches": batches,
        "d_model": d_model,
        "d_ff": d_ff,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
        "host_bandwidth": host,
        "max_resident_layers": draw.integer(layers // 3, layers),
    }


def _resident_rules(task: Task) -> str | None:
    i = task.inputs
    per_layer = i["bytes_per_value"] * 2 * i["d_model"] * i["d_ff"]
    for b in i["batches"]:
        compute = Fraction(i["layers"] * 4 * b * i["d_model"] * i["d_ff"], i["peak_flops"])
        activations = i["layers"] * i["bytes_per_value"] * 2 * b * (i["d_model"] + i["d_ff"])
        times = sorted(
            {
                max(
                    compute,
                    Fraction(activations + r * per_layer, i["hbm_bandwidth"]),
                    Fraction((i["layers"] - r) * per_layer, i["host_bandwidth"]),
                )
                for r in range(i["max_resident_layers"] + 1)
            }
        )
        if len(times) > 1 and near_tie(times[0], times[1]):
            return f"batch {b}: two resident counts sit within 1e-9"
        if near_integer(i["layers"] - compute * i["host_bandwidth"] / per_layer):
            return f"batch {b}: the host stream meets the compute time at a whole layer"
    return None


def _resident_compute_tie(task: Task) -> bool:
    """A batch where several resident counts tie at the compute time (the tie rule decides)."""
    i = task.inputs
    for b, row in zip(i["batches"], task.expected["rows"], strict=True):
        if row["time_s"] == Fraction(i["layers"] * 4 * b * i["d_model"] * i["d_ff"], i["peak_flops"]):
            return True
    return False


_SPLIT_L3 = """\
The matmul y = x @ W multiplies x of shape [batch, d_model] by W of shape [d_model, d_ff],
`bytes_per_value` bytes per value, on a chip of `peak_flops` FLOP/s. A share of W (the fraction
hbm_fraction of its values) is resident in HBM and read from there at `hbm_bandwidth` bytes/s,
together with x and y (read x once, write y once, both in HBM); the rest of W is streamed from host
memory at `host_bandwidth` bytes/s. Compute, the HBM traffic and the host stream all run at the same
time, so the matmul takes as long as the slowest of the three. For each share in `hbm_fractions`,
give the time in seconds and which of the three sets it ("compute", "hbm" or "host")."""

_RESIDENT_L5 = """\
A model's forward pass runs `layers` identical feed-forward layers, each two matmuls: x[batch,
d_model] @ W1[d_model, d_ff] and h[batch, d_ff] @ W2[d_ff, d_model], `bytes_per_value` bytes per
value, on a chip of `peak_flops` FLOP/s. A chosen number of the layers keep both their weight
matrices resident in HBM (at most `max_resident_layers` layers fit); the weights of the others are
streamed from host memory at `host_bandwidth` bytes/s. Every layer reads its input activation and
writes its output activation in HBM for each matmul (x and the first product, then h and the
second product), and resident weights are read from HBM, all at `hbm_bandwidth` bytes/s. Compute,
the HBM traffic and the host stream of the whole pass all run at the same time, so the pass takes
as long as the slowest of the three totals. For each batch size in `batches`, give the number of
resident layers that makes the pass fastest (on a tie, the fewest) and that time in seconds."""

STREAMING_LEVELS_R2 = {
    3: Level(
        split_weights,
        _SPLIT_L3,
        '{"rows": [{"hbm_fraction": <number>, "time_s": <number>, "bound": "compute" | "hbm" | "host"}, ...]}'
        "  # one row per share, in order",
        split_weights_float,
        "streams_serialised",
        sample=sample_split_weights,
        reject=_split_rules,
        varying=("rows[].bound",),
    ),
    5: Level(
        resident_layers,
        _RESIDENT_L5,
        '{"rows": [{"batch": <int>, "resident_layers": <int>, "time_s": <number>}, ...]}'
        "  # one row per batch, in order",
        resident_layers_float,
        "compute_ignored",
        sample=sample_resident,
        reject=_resident_rules,
    ),
}
STREAMING_BRANCHES_R2 = (Branch("compute-bound tie", _resident_compute_tie, Fraction(1, 5), (5,)),)

__all__ = [
    "FRACTION_LEVELS_R2",
    "STREAMING_BRANCHES_R2",
    "STREAMING_LEVELS_R2",
    "DECODE_ATTENTION_BRANCHES_R2",
    "DECODE_ATTENTION_LEVELS_R2",
    "ELEMENTWISE_LEVELS_R2",
    "MIN_BATCH_BRANCHES_R2",
    "MIN_BATCH_LEVELS_R2",
]
