"""The elementwise_roofline family of roofline: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import (
    chip_at_ridge,
    chip_inputs,
    letters,
    peak_and_bandwidth,
    round_numbers,
    rows,
    sorted_sample,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level
from exactgrade.domains.scaling.hardware import VECTOR_FLOPS, VECTOR_RIDGE
from exactgrade.domains.scaling.roofline.shared import _intensity_not_tied
from exactgrade.family import Draw, Reject, five_levels
from exactgrade.task import Task


def elementwise_roofline(
    element_counts,
    flops_per_element,
    bytes_read_per_element,
    bytes_written_per_element,
    peak_flops,
    hbm_bandwidth,
):
    """An elementwise kernel: each element read once, computed on, written once."""
    from fractions import Fraction

    rows = []
    for count in element_counts:
        flops = count * flops_per_element
        traffic = count * (bytes_read_per_element + bytes_written_per_element)
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / hbm_bandwidth
        rows.append(
            {
                "elements": count,
                "intensity": Fraction(flops) / traffic,
                "time_s": max(compute_s, memory_s),
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def elementwise_roofline_float(
    element_counts,
    flops_per_element,
    bytes_read_per_element,
    bytes_written_per_element,
    peak_flops,
    hbm_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "reads_only")
    moved = bytes_read_per_element + (0 if mistake == "reads_only" else bytes_written_per_element)
    intensity = flops_per_element / moved
    bound = "compute" if intensity * hbm_bandwidth >= peak_flops else "memory"
    rows = []
    for count in element_counts:
        time = count / peak_flops * flops_per_element if bound == "compute" else moved / hbm_bandwidth * count
        rows.append({"elements": count, "intensity": intensity, "time_s": time, "bound": bound})
    return {"rows": rows}


def sample_elementwise_roofline(draw: Draw, level: int) -> dict:
    """An activation's few FLOPs per byte stay below every real chip's vector-unit ridge
    (hardware.VECTOR_RIDGE), so the kernel is memory-bound on the vector units it runs on as at
    the tensor-core `peak_flops` (constant by physics: the family says so). Up to 40 FLOPs per
    element at any width posed kernels that real vector units would run compute-bound."""
    counts = [1024 * c for c in sorted_sample(draw, 1, 2 ** (14 + level), rows(level, 2))]
    read, written = draw.choice((1, 2, 4)), draw.choice((1, 2, 4))
    moved = read + written
    inputs = {
        "element_counts": counts,
        "flops_per_element": draw.integer(1, min(40 * level, VECTOR_RIDGE.low * moved - 1)),
        "bytes_read_per_element": read,
        "bytes_written_per_element": written,
        **chip_inputs(draw, level),
    }
    critical = Fraction(inputs["peak_flops"], inputs["hbm_bandwidth"])
    if Fraction(inputs["flops_per_element"], moved) >= critical:
        raise Reject("a compute-bound activation kernel (outside the physics this family teaches)")
    return inputs


LEVEL_1 = scaling_level(
    "roofline",
    elementwise_roofline,
    """\
An elementwise activation kernel (a GELU written out, say) reads each element once
(`bytes_read_per_element` bytes), spends `flops_per_element` FLOPs on it and writes the result once
(`bytes_written_per_element` bytes). On a chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s,
give for each tensor size in `element_counts` the arithmetic intensity (FLOPs per byte), the roofline
time in seconds and the bound. (An activation does far fewer FLOPs per byte than any chip's
critical intensity: at these inputs the kernel is memory-bound.) `peak_flops` is the chip's
tensor-core matmul peak; an elementwise kernel runs on the vector units, at a lower peak, but at
these inputs it does fewer FLOPs per byte than the vector units' ridge too (8 FLOP/byte or more on
real chips), so it is memory-bound there as well and its time is the same.""",
    '{"rows": [{"elements": <int>, "intensity": <number>, "time_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per entry of `element_counts`, in order',
    elementwise_roofline_float,
    "reads_only",
    sample=sample_elementwise_roofline,
    reject=_intensity_not_tied,
)


def fusion_saving(element_counts, ops_flops_per_element, bytes_per_value, peak_flops, hbm_bandwidth):
    """A chain of elementwise ops as one kernel each, or fused into one kernel."""
    from fractions import Fraction

    rows = []
    for count in element_counts:
        unfused = 0
        for flops in ops_flops_per_element:
            unfused += max(
                Fraction(count * flops, peak_flops), Fraction(2 * bytes_per_value * count, hbm_bandwidth)
            )
        fused = max(
            Fraction(count * sum(ops_flops_per_element), peak_flops),
            Fraction(2 * bytes_per_value * count, hbm_bandwidth),
        )
        rows.append({"elements": count, "unfused_s": unfused, "fused_s": fused, "speedup": unfused / fused})
    return {"rows": rows}


def fusion_saving_float(
    element_counts, ops_flops_per_element, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "fused_reads_each_op")
    per_element_read = 2.0 * bytes_per_value / hbm_bandwidth
    rows = []
    for n in element_counts:
        unfused = sum(max(f / peak_flops, per_element_read) for f in ops_flops_per_element) * n
        passes = len(ops_flops_per_element) if mistake == "fused_reads_each_op" else 1
        fused = n * max(sum(ops_flops_per_element) / peak_flops, passes * per_element_read)
        rows.append({"elements": n, "unfused_s": unfused, "fused_s": fused, "speedup": unfused / fused})
    return {"rows": rows}


def sample_fusion(draw: Draw, level: int) -> dict:
    """Every op alone is memory-bound and the fused chain compute-bound, so the speedup is not
    just the number of ops (a shortcut that would otherwise pass)."""
    counts = [1024 * c for c in sorted(draw.sample(range(1, 2**16), 2 + level))]
    peak, bandwidth = peak_and_bandwidth(draw, level)
    width = draw.choice((1, 2, 4))
    k = draw.integer(2, 3 + level)
    alone = Fraction(peak * 2 * width, bandwidth)  # FLOPs per element at the tie
    if alone < 2:
        raise Reject("even a single FLOP per element is compute-bound")
    ops = [draw.integer(1, math.ceil(alone) - 1) for _ in range(k)]
    if sum(ops) <= alone:
        raise Reject("the fused chain stays memory-bound (its speedup would be the op count)")
    return {
        "element_counts": counts,
        "ops_flops_per_element": ops,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


def _fusion_rules(task: Task) -> str | None:
    i = task.inputs
    critical = Fraction(i["peak_flops"], i["hbm_bandwidth"])
    for flops in (*i["ops_flops_per_element"], sum(i["ops_flops_per_element"])):
        if near_tie(Fraction(flops, 2 * i["bytes_per_value"]), critical):
            return "a kernel sits on the compute/memory tie"
    return None


_FUSION_L2 = """\
A chain of elementwise ops runs on tensors of n elements, `bytes_per_value` bytes per value. The i-th
op spends ops_flops_per_element[i] FLOPs per element. Run unfused, every op is its own kernel that
reads its input tensor from HBM and writes its output tensor to HBM; fused, one kernel reads the
chain's input once, applies all the ops in registers and writes the final output once. On a chip
with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s (each kernel on the roofline), give for each
element count in `element_counts` the unfused time, the fused time (seconds) and the speedup
(unfused / fused)."""


LEVEL_2 = scaling_level(
    "roofline",
    fusion_saving,
    _FUSION_L2,
    '{"rows": [{"elements": <int>, "unfused_s": <number>, "fused_s": <number>, '
    '"speedup": <number>}, ...]}  # one row per entry of `element_counts`, in order',
    fusion_saving_float,
    "fused_reads_each_op",
    sample=sample_fusion,
    reject=_fusion_rules,
)


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


_EPILOGUE_L3 = """\
A feed-forward matmul y = x @ W multiplies x of shape [batch, d_model] by W of shape
[d_model, d_ff]; an elementwise activation then spends `flops_per_element` FLOPs on every element
of y. Every value takes `bytes_per_value` bytes. Run as two kernels, the matmul reads x and W from
HBM once and writes y once, then the activation kernel reads y once and writes its result once.
Fused, one kernel computes the activation on y before writing it, so y itself never goes to HBM
and only the activation's result is written. Every kernel follows the roofline on a chip of
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s. For each batch size in `batches`, give the time
fusion saves (two-kernel time minus fused time, seconds) and the bound of the fused kernel."""


LEVEL_3 = scaling_level(
    "roofline",
    epilogue_fusion,
    _EPILOGUE_L3,
    '{"rows": [{"batch": <int>, "saving_s": <number>, "fused_bound": "compute" | "memory"}, ...]}'
    "  # one row per entry of `batches`, in order",
    epilogue_fusion_float,
    "fused_drops_activation_flops",
    sample=sample_epilogue,
    reject=_epilogue_edges,
    varying=("rows[].fused_bound",),
)


def max_fused_ops(chips, flops_per_element, bytes_read_per_element, bytes_written_per_element, element_count):
    """Most copies of an op one kernel can fuse while staying memory-bound (strictly), and its time."""
    import math
    from fractions import Fraction

    moved = bytes_read_per_element + bytes_written_per_element
    rows = []
    for chip in chips:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        # k * flops / moved < critical
        k = math.ceil(critical * moved / flops_per_element) - 1
        rows.append(
            {
                "chip": chip["name"],
                "max_fused_ops": k,
                "time_s": Fraction(element_count * moved, chip["hbm_bandwidth"]),
            }
        )
    return {"rows": rows}


def max_fused_ops_float(
    chips, flops_per_element, bytes_read_per_element, bytes_written_per_element, element_count, mistake=None
):
    known_mistake(mistake, "reads_only")
    moved = bytes_read_per_element + (0 if mistake == "reads_only" else bytes_written_per_element)
    rows = []
    for c in chips:
        k = 0
        while (k + 1) * flops_per_element * c["hbm_bandwidth"] < c["peak_flops"] * moved:
            k += 1
        rows.append(
            {
                "chip": c["name"],
                "max_fused_ops": k,
                "time_s": element_count
                / c["hbm_bandwidth"]
                * (bytes_read_per_element + bytes_written_per_element),
            }
        )
    return {"rows": rows}


def sample_fused_ops(draw: Draw, level: int) -> dict:
    return {
        "chips": sample.chips(draw, level, 2 + level),
        "flops_per_element": draw.integer(1, 40),
        "bytes_read_per_element": draw.choice((1, 2, 4)),
        "bytes_written_per_element": draw.choice((1, 2, 4)),
        "element_count": 1024 * draw.integer(1, 2**16),
    }


def _fused_edges(task: Task) -> str | None:
    i = task.inputs
    moved = i["bytes_read_per_element"] + i["bytes_written_per_element"]
    for c in i["chips"]:
        if near_integer(Fraction(c["peak_flops"] * moved, c["hbm_bandwidth"] * i["flops_per_element"])):
            return f"{c['name']}: the fused count sits on an integer (the strict bound decides it)"
    return None


_FUSION_L4 = """\
An elementwise op reads `bytes_read_per_element` bytes and writes `bytes_written_per_element` bytes
per element and spends `flops_per_element` FLOPs on it. Fusing k copies of it into one kernel (the
kernel reads the input once, applies the op k times in registers, writes once) multiplies the
FLOPs by k and leaves the bytes unchanged. For each chip in `chips` (peak FLOP/s and HBM bytes/s),
give the largest k for which the fused kernel is still strictly memory-bound (its compute time
below its memory time), and that kernel's roofline time in seconds on `element_count` elements."""


LEVEL_4 = scaling_level(
    "roofline",
    max_fused_ops,
    _FUSION_L4,
    '{"rows": [{"chip": <str>, "max_fused_ops": <int>, "time_s": <number>}, ...]}  # one row per chip',
    max_fused_ops_float,
    "reads_only",
    sample=sample_fused_ops,
    reject=_fused_edges,
)


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


LEVEL_5 = scaling_level(
    "roofline",
    fusion_plan,
    _FUSION_PLAN_L5,
    '{"rows": [{"min_time_s": <number>, "kernels": <int>}]}',
    fusion_plan_float,
    "greedy_full_kernels",
    sample=sample_fusion_plan,
    reject=_fusion_plan_rules,
)


ELEMENTWISE_ROOFLINE = five_levels(
    "elementwise_roofline",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="memory-bound by physics, so L2+ ask about fusion: L2: the time a chain of ops saves when "
    "fused into one kernel; L3: the time saved by fusing the activation into the matmul that "
    "produces it, and the fused kernel's bound (it changes with the batch); L4: the most copies "
    "of an op one kernel fuses while strictly memory-bound, per chip; L5: the least time of a "
    "chain of ops of different output widths split into kernels under an op limit and a launch "
    "cost, and the fewest kernels reaching it (the split search not given)",
    constant={
        "rows[].bound": "an elementwise kernel's intensity (a few FLOPs per byte) is far below "
        "any chip's critical intensity: always memory-bound, and the prompt says so"
    },
)
