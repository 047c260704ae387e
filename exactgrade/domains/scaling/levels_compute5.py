"""Round-2 upper levels of the roofline families elementwise_roofline and decode_attention_roofline.

elementwise_roofline: an activation fused into the matmul that produces its input (L3: the time
fusion saves, the fused kernel's bound changing with the batch); a chain of elementwise ops of
different output widths to split into kernels under a per-kernel op limit and a launch cost (L5:
the least time and the fewest kernels reaching it; the method, a partition search, is not given).
decode_attention_roofline: a layer's decode step with its weights (L3: the bound changes with the
batch); the smallest compute-bound batch per context (L4, None where the KV cache caps the
intensity); the KV format and batch of the most tokens per second under an HBM capacity and a
latency budget (L5: compute-bound throughput ties, broken by the smaller batch).

References are self-contained; the ``*_float`` twins compute in floats by another route (a search
instead of a closed form) and can reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import hbm_bandwidth, letters, peak_flops, round_numbers
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer, near_tie
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
    peak, bandwidth = peak_flops(draw, level), hbm_bandwidth(draw, level)
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
    n_elements, input_bytes, ops, max_ops_per_kernel, launch_overhead_s, peak_flops, hbm_bandwidth
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
            kernel = launch_overhead_s + max(Fraction(flops, peak_flops), Fraction(traffic, hbm_bandwidth))
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
    peak_flops,
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
            _plan_time(p, n_elements, input_bytes, ops, launch_overhead_s, peak_flops, hbm_bandwidth, False),
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
    peak, bandwidth = peak_flops(draw, level), hbm_bandwidth(draw, level)
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
        "peak_flops": peak,
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
        i["peak_flops"],
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
time on a chip of `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s; kernels run one after another.
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
    peak, bandwidth = peak_flops(draw, level), hbm_bandwidth(draw, level)
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
    peak, bandwidth = peak_flops(draw, level), hbm_bandwidth(draw, level)
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
    peak = peak_flops(draw, level)
    bandwidth = 10**6 * max(1, peak // (10**6 * draw.integer(20, 200)))
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
    if capacity > 10**12:
        raise Reject("an HBM capacity above 1 TB")
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
During decoding, one transformer layer processes one new token for each sequence in the batch.
Its weights (`layer_params` values, 2 FLOPs per weight per token) are read from HBM once per step
for the whole batch. Its attention, for each sequence, takes each of the `n_heads` query heads'
query (`head_dim` values), dots it with the `seq_len` cached keys of its KV head and sums the
`seq_len` cached value vectors weighted by the scores (2 FLOPs per multiply-add); grouped-query
attention caches `n_kv_heads` key heads and as many value heads of `head_dim` values per
position, and each sequence reads its own K and V cache from HBM once. Every value (weight or
cache) takes `bytes_per_value` bytes. Treat the layer's decode
step as one roofline operation (all its FLOPs against all its HBM bytes) on a chip of
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s. For each batch size in `batches`, give the
step's time in seconds and its bound."""

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
    from exactgrade.domains.scaling.roofline import sample_min_compute_bound_batch

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
    chips = [
        {"name": name, "peak_flops": peak_flops(draw, level), "hbm_bandwidth": hbm_bandwidth(draw, level)}
        for name in letters("chip", 3 + level // 2)
    ]
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
    """Chips of low critical intensity (tens of FLOPs per byte), where the decode FLOPs of narrow
    formats are comparable to the bytes they save: which format wins changes with the chip."""
    chips = []
    for name in letters("chip", 3 + level // 2):
        peak = peak_flops(draw, level)
        chips.append(
            {
                "name": name,
                "peak_flops": peak,
                "hbm_bandwidth": 10**6 * max(1, peak // (10**6 * draw.integer(6, 120))),
            }
        )
    formats = [{"name": "bf16", "bits_per_weight": 16, "dequant_flops_per_weight": 0}] + [
        {"name": name, "bits_per_weight": bits, "dequant_flops_per_weight": draw.integer(low, high)}
        for name, bits, low, high in draw.sample(_WEIGHT_FORMATS, draw.integer(2, 4))
    ]
    d_model = 128 * draw.integer(8, 64)
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

__all__ = [
    "DECODE_ATTENTION_BRANCHES_R2",
    "DECODE_ATTENTION_LEVELS_R2",
    "ELEMENTWISE_LEVELS_R2",
    "MIN_BATCH_BRANCHES_R2",
    "MIN_BATCH_LEVELS_R2",
]
