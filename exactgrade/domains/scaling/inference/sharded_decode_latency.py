"""The sharded_decode_latency family of inference: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import (
    attention_shape,
    bandwidth_for_capacity,
    hbm_capacity,
    kv_bytes_per_token,
    n_params,
    n_params_between,
    peak_for_capacity,
    round_numbers,
    rows,
    tp_link_bandwidth,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    scaling_level,
    smallest_satisfying,
    some_none,
    tie_edge,
)
from exactgrade.domains.scaling.hardware import HBM_CAPACITY, require
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def sharded_decode_latency(
    n_params, weight_bytes, kv_cache_bytes, hbm_bytes_per_chip, hbm_bandwidth, chip_counts
):
    """Weights and KV cache split evenly over the chips; each chip reads its share every step."""
    from fractions import Fraction

    total = n_params * weight_bytes + kv_cache_bytes
    rows = []
    for chips in chip_counts:
        rows.append(
            {
                "chips": chips,
                "fits": total <= chips * hbm_bytes_per_chip,
                "time_per_token_s": Fraction(total, chips * hbm_bandwidth),
            }
        )
    return {"rows": rows}


def sharded_decode_latency_float(
    n_params, weight_bytes, kv_cache_bytes, hbm_bytes_per_chip, hbm_bandwidth, chip_counts, mistake=None
):
    known_mistake(mistake, "weights_only")
    total = float(n_params * weight_bytes) + (0 if mistake == "weights_only" else kv_cache_bytes)
    return {
        "rows": [
            {
                "chips": c,
                "fits": c * hbm_bytes_per_chip >= total,
                "time_per_token_s": total / c / hbm_bandwidth,
            }
            for c in chip_counts
        ]
    }


def sample_sharded_decode_latency(draw: Draw, level: int) -> dict:
    """The chip counts straddle the fewest chips that hold weights plus cache, so fits takes
    both values in every instance: the HBM per chip is a real capacity, and the model size puts
    weights plus cache between two chip counts' HBM."""
    counts = sorted(
        {
            2 ** draw.integer(0, 3 + level) if round_numbers(level) else draw.integer(1, 16 * level)
            for _ in range(rows(level, 4))
        }
    )
    if len(counts) < 2:
        raise Reject("a single chip count")
    kv = 10**9 * draw.integer(1, 100 * level) if round_numbers(level) else draw.integer(10**9, 10**11 * level)
    hbm, weight_bytes = hbm_capacity(draw, level), value_bytes(draw, level, (1, 2))
    need = draw.integer(1, len(counts) - 1)  # counts[need] is the smallest that fits
    params = n_params_between(
        draw,
        level,
        Fraction(counts[need - 1] * hbm - kv, weight_bytes),
        Fraction(counts[need] * hbm - kv, weight_bytes),
    )
    return {
        "n_params": params,
        "weight_bytes": weight_bytes,
        "kv_cache_bytes": kv,
        "hbm_bytes_per_chip": hbm,
        "hbm_bandwidth": sample.bandwidth_for_capacity(draw, level, hbm),
        "chip_counts": counts,
    }


def _sharded_fits_not_tied(task: Task) -> str | None:
    i = task.inputs
    total = i["n_params"] * i["weight_bytes"] + i["kv_cache_bytes"]
    for count in i["chip_counts"]:
        problem = tie_edge(
            f"{count} chips: weights plus cache against the HBM", total, count * i["hbm_bytes_per_chip"]
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "inference",
    sharded_decode_latency,
    """\
A model of `n_params` parameters (`weight_bytes` bytes each) with a KV cache of `kv_cache_bytes`
bytes is split evenly over a number of chips, each with `hbm_bytes_per_chip` bytes of HBM and
`hbm_bandwidth` bytes/s. A decode step is memory-bound: each chip reads its share of the weights
and KV cache once, all chips in parallel (ignore communication). For each chip count in
`chip_counts`, say whether weights plus KV cache fit in the chips' total HBM and give the time per
decode step in seconds (`time_per_token_s`: one step yields the next token of every sequence).""",
    '{"rows": [{"chips": <int>, "fits": <bool>, "time_per_token_s": <number>}, ...]}'
    "  # one row per entry of `chip_counts`, in order",
    sharded_decode_latency_float,
    "weights_only",
    sample=sample_sharded_decode_latency,
    reject=_sharded_fits_not_tied,
    varying=("rows[].fits",),
)


CACHE = """\
A model of `n_params` parameters (`weight_bytes` bytes each) decodes `batch` sequences of
`seq_len` cached positions each; every cached position holds a key and a value of `head_dim`
values for each of `layers` layers and `n_kv_heads` KV heads, `kv_bytes` bytes per value."""


def sharded_decode_cache(
    n_params,
    weight_bytes,
    batch,
    seq_len,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    hbm_bytes_per_chip,
    hbm_bandwidth,
    chip_counts,
):
    """Weights plus the KV cache derived from the shape, split evenly; each chip reads its share."""
    from fractions import Fraction

    total = n_params * weight_bytes + 2 * layers * n_kv_heads * head_dim * kv_bytes * seq_len * batch
    return {
        "rows": [
            {
                "chips": chips,
                "fits": total <= chips * hbm_bytes_per_chip,
                "time_per_token_s": Fraction(total, chips * hbm_bandwidth),
            }
            for chips in chip_counts
        ]
    }


def sharded_decode_cache_float(
    n_params,
    weight_bytes,
    batch,
    seq_len,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    hbm_bytes_per_chip,
    hbm_bandwidth,
    chip_counts,
    mistake=None,
):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    total = (
        float(n_params) * weight_bytes
        + float(batch * seq_len) * layers * n_kv_heads * head_dim * kv_bytes * tensors
    )
    return {
        "rows": [
            {
                "chips": c,
                "fits": c * hbm_bytes_per_chip >= total,
                "time_per_token_s": total / hbm_bandwidth / c,
            }
            for c in chip_counts
        ]
    }


def _shape(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    return {
        "layers": draw.integer(16, 96),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
    }


def _total(i: dict) -> int:
    return (
        i["n_params"] * i["weight_bytes"]
        + kv_bytes_per_token(i) * i["seq_len"] * i["batch"]
    )


def sample_cache(draw: Draw, level: int) -> dict:
    """The HBM per chip is a real capacity; the batch keeps the cache within half the HBM of the
    smallest count that fits, and the model size puts weights plus cache between two counts."""
    counts = sorted({draw.integer(1, 16 * level) for _ in range(rows(level, 4))})
    if len(counts) < 2:
        raise Reject("a single chip count")
    hbm, weight_bytes = hbm_capacity(draw, level), value_bytes(draw, level, (1, 2))
    seq_len = draw.integer(512, 32768)
    shape = _shape(draw, level)
    need = draw.integer(1, len(counts) - 1)  # counts[need] is the smallest that fits
    per_sequence = kv_bytes_per_token(shape) * seq_len
    most = min(64 * level, counts[need] * hbm // (2 * per_sequence))
    if most < 1:
        raise Reject("one sequence's cache takes over half the HBM")
    batch = draw.integer(1, most)
    kv = batch * per_sequence
    params = n_params_between(
        draw,
        level,
        Fraction(counts[need - 1] * hbm - kv, weight_bytes),
        Fraction(counts[need] * hbm - kv, weight_bytes),
    )
    return {
        "n_params": params,
        "weight_bytes": weight_bytes,
        "batch": batch,
        "seq_len": seq_len,
        **shape,
        "hbm_bytes_per_chip": hbm,
        "hbm_bandwidth": bandwidth_for_capacity(draw, level, hbm),
        "chip_counts": counts,
    }


def _cache_edges(task: Task) -> str | None:
    i = task.inputs
    for c in i["chip_counts"]:
        problem = tie_edge(
            f"{c} chips: weights plus cache against the HBM", _total(i), c * i["hbm_bytes_per_chip"]
        )
        if problem:
            return problem
    return None


_L2 = (
    CACHE
    + """
The weights and the KV cache are split evenly over a number of chips, each with
`hbm_bytes_per_chip` bytes of HBM and `hbm_bandwidth` bytes/s. A decode step is memory-bound: each
chip reads its share of the weights and of the KV cache once, all chips in parallel (ignore
communication). For each chip count in `chip_counts`, say whether weights plus KV cache fit in
the chips' total HBM and give the time of one decode step in seconds (`time_per_token_s`: one
step yields the next token of every sequence)."""
)


LEVEL_2 = scaling_level(
    "inference",
    sharded_decode_cache,
    _L2,
    '{"rows": [{"chips": <int>, "fits": <bool>, "time_per_token_s": <number>}, ...]}'
    "  # one row per entry of `chip_counts`, in order",
    sharded_decode_cache_float,
    "keys_only",
    sample=sample_cache,
    reject=_cache_edges,
    varying=("rows[].fits",),
)


TENSOR_PARALLEL = """\
Tensor parallelism over c chips, as Megatron-LM splits a layer: c must divide `n_heads` (each chip
computes n_heads / c query heads), and must divide `n_kv_heads` or be a multiple of it. Each chip
holds 1/c of every weight matrix (the key and value projections counted as split too, a
simplification: past n_kv_heads chips real ones are replicated) and the KV cache of the KV heads it
serves: n_kv_heads / c of them when c divides n_kv_heads, else one KV head replicated on
c / n_kv_heads chips, so 1 / min(c, n_kv_heads) of every sequence's KV cache."""


def tensor_parallel_decode(
    n_params,
    weight_bytes,
    batch,
    seq_len,
    layers,
    n_heads,
    n_kv_heads,
    head_dim,
    kv_bytes,
    d_model,
    act_bytes,
    hbm_bytes_per_chip,
    peak_flops,
    hbm_bandwidth,
    link_bandwidth,
    chip_counts,
):
    """Per tensor-parallel degree c: the roofline of 1/c of the weights and FLOPs and of the KV
    heads a chip holds (1 / min(c, n_kv_heads) of the cache: replicated past n_kv_heads), plus two
    ring all-reduces of batch x d_model activations per layer; whether one chip's share fits."""
    from fractions import Fraction

    weights = n_params * weight_bytes
    kv = 2 * layers * n_kv_heads * head_dim * kv_bytes * seq_len * batch
    rows = []
    for chips in chip_counts:
        per_chip = Fraction(weights, chips) + Fraction(kv, min(chips, n_kv_heads))
        roofline = max(Fraction(2 * n_params * batch, chips * peak_flops), per_chip / hbm_bandwidth)
        comm = layers * 2 * 2 * batch * d_model * act_bytes * Fraction(chips - 1, chips) / link_bandwidth
        step = roofline + comm
        rows.append(
            {
                "chips": chips,
                "fits": per_chip <= hbm_bytes_per_chip,
                "step_time_s": step,
                "tokens_per_s": batch / step,
            }
        )
    return {"rows": rows}


def tensor_parallel_decode_float(
    n_params,
    weight_bytes,
    batch,
    seq_len,
    layers,
    n_heads,
    n_kv_heads,
    head_dim,
    kv_bytes,
    d_model,
    act_bytes,
    hbm_bytes_per_chip,
    peak_flops,
    hbm_bandwidth,
    link_bandwidth,
    chip_counts,
    mistake=None,
):
    known_mistake(mistake, "one_allreduce_per_layer")
    per_layer = 1 if mistake == "one_allreduce_per_layer" else 2
    heads_cache = 2.0 * layers * head_dim * kv_bytes * seq_len * batch  # one KV head's cache
    out = []
    for c in chip_counts:
        held = n_kv_heads / c if c <= n_kv_heads else 1  # KV heads on one chip
        share = float(n_params) * weight_bytes / c + held * heads_cache
        memory, compute = share / hbm_bandwidth, 2.0 * batch * n_params / peak_flops / c
        comm = per_layer * layers * (1 - 1 / c) * 2.0 * d_model * act_bytes * batch / link_bandwidth
        step = comm + (memory if memory > compute else compute)
        out.append(
            {
                "chips": c,
                "fits": share <= hbm_bytes_per_chip,
                "step_time_s": step,
                "tokens_per_s": batch / step,
            }
        )
    return {"rows": out}


def tp_degrees(n_heads: int, n_kv_heads: int, most: int) -> list[int]:
    """Tensor-parallel degrees up to most: c divides the query heads, and divides the KV heads or is
    a multiple of them (KV heads replicated past n_kv_heads), as Megatron-LM and vLLM require."""
    return [
        c for c in range(1, most + 1) if n_heads % c == 0 and (n_kv_heads % c == 0 or c % n_kv_heads == 0)
    ]


def _per_chip(i: dict, chips: int) -> Fraction:
    """One chip's bytes under tensor parallelism: 1/c of the weights, 1/min(c, n_kv) of the cache."""
    kv = _total(i) - i["n_params"] * i["weight_bytes"]
    return Fraction(i["n_params"] * i["weight_bytes"], chips) + Fraction(kv, min(chips, i["n_kv_heads"]))


def sample_tensor_parallel(draw: Draw, level: int) -> dict:
    """Degrees that divide the heads (KV heads replicated past n_kv_heads) and a real HBM set so
    the smallest degree that holds a chip's share falls inside the counts."""
    shape = attention_shape(draw, level)
    inputs = {
        "n_params": n_params(draw, level),
        "weight_bytes": value_bytes(draw, level, (1, 2)),
        "batch": draw.integer(1, 64 * level),
        "seq_len": draw.integer(512, 32768),
        **_shape(draw, level),
        "d_model": shape["d_model"],
        "act_bytes": value_bytes(draw, level, (2, 4)),
        "hbm_bytes_per_chip": 0,
        "peak_flops": 0,  # drawn for the HBM's capacity below
        "hbm_bandwidth": 0,  # drawn for the HBM's capacity below
        "link_bandwidth": tp_link_bandwidth(draw, level),
        "chip_counts": [],
    }
    inputs["n_heads"] = max(8, inputs["n_kv_heads"] * draw.choice((1, 2, 4, 8)))
    degrees = tp_degrees(inputs["n_heads"], inputs["n_kv_heads"], 16 * level)
    counts = sorted(draw.sample(degrees, min(len(degrees), rows(level, 4))))
    if len(counts) < 3:
        raise Reject("fewer than three tensor-parallel degrees divide the heads")
    need = draw.integer(1, len(counts) - 1)
    low, high = _per_chip(inputs, counts[need]), _per_chip(inputs, counts[need - 1])
    hbm = math.ceil(low + (high - low) * Fraction(draw.integer(1, 99), 100))
    inputs["hbm_bytes_per_chip"] = require("hbm_bytes_per_chip", hbm, HBM_CAPACITY)
    inputs["peak_flops"] = peak_for_capacity(draw, level, hbm)
    inputs["hbm_bandwidth"] = bandwidth_for_capacity(draw, level, hbm, inputs["peak_flops"])
    inputs["chip_counts"] = counts
    order = (
        "n_params",
        "weight_bytes",
        "batch",
        "seq_len",
        "layers",
        "n_heads",
        "n_kv_heads",
        "head_dim",
        "kv_bytes",
        "d_model",
        "act_bytes",
        "hbm_bytes_per_chip",
        "peak_flops",
        "hbm_bandwidth",
        "link_bandwidth",
        "chip_counts",
    )
    return {name: inputs[name] for name in order}


def _tensor_parallel_edges(task: Task) -> str | None:
    i = task.inputs
    for c in i["chip_counts"]:
        problem = tie_edge(
            f"{c} chips: a chip's share against its HBM", _per_chip(i, c), i["hbm_bytes_per_chip"]
        )
        if problem:
            return problem
    for c in i["chip_counts"]:
        problem = tie_edge(
            f"{c} chips: compute against memory",
            Fraction(2 * i["n_params"] * i["batch"], c * i["peak_flops"]),
            _per_chip(i, c) / i["hbm_bandwidth"],
        )
        if problem:
            return problem
    return None


_L3 = (
    CACHE
    + """
"""
    + TENSOR_PARALLEL
    + """ Each chip does 1/c of the step's FLOPs (2 per parameter per
sequence) at `peak_flops` FLOP/s and reads its share of the weights and of the KV cache at
`hbm_bandwidth` bytes/s; its compute and its reads overlap (roofline). Each layer then sums
partial results over the c chips twice (after attention and after the MLP), each time by a ring
all-reduce of the batch's activations (batch x `d_model` values of `act_bytes` bytes) over links of
`link_bandwidth` bytes/s per chip, not overlapped with anything; c = 1 needs none. For each degree c
in `chip_counts` (chips of `hbm_bytes_per_chip` bytes of HBM each), say whether one chip's share of
the weights and of the KV cache fits in its HBM, and give the decode step time in seconds and the
throughput in tokens per second."""
)


LEVEL_3 = scaling_level(
    "inference",
    tensor_parallel_decode,
    _L3,
    '{"rows": [{"chips": <int>, "fits": <bool>, "step_time_s": <number>, "tokens_per_s": <number>}, ...]}'
    "  # one row per entry of `chip_counts`, in order",
    tensor_parallel_decode_float,
    "one_allreduce_per_layer",
    sample=sample_tensor_parallel,
    reject=_tensor_parallel_edges,
    varying=("rows[].fits",),
)


def fewest_decode_chips(
    n_params, weight_bytes, kv_cache_bytes, hbm_bytes_per_chip, hbm_bandwidth, max_chips, step_budgets_s
):
    """Fewest chips (1..max_chips) that hold weights plus cache and read them within each budget."""
    import math
    from fractions import Fraction

    total = n_params * weight_bytes + kv_cache_bytes
    need = max(math.ceil(Fraction(total, hbm_bytes_per_chip)), 1)
    rows = []
    for budget in step_budgets_s:
        chips = max(need, math.ceil(Fraction(total) / (hbm_bandwidth * budget)))
        rows.append({"step_budget_s": budget, "min_chips": chips if chips <= max_chips else None})
    return {"rows": rows}


def fewest_decode_chips_float(
    n_params,
    weight_bytes,
    kv_cache_bytes,
    hbm_bytes_per_chip,
    hbm_bandwidth,
    max_chips,
    step_budgets_s,
    mistake=None,
):
    known_mistake(mistake, "weights_only")
    total = float(n_params) * weight_bytes + (0 if mistake == "weights_only" else kv_cache_bytes)
    return {
        "rows": [
            {
                "step_budget_s": t,
                "min_chips": smallest_satisfying(
                    lambda c, t=t: c * hbm_bytes_per_chip >= total and total / c / hbm_bandwidth <= t,
                    max_chips,
                ),
            }
            for t in step_budgets_s
        ]
    }


def sample_decode_chips(draw: Draw, level: int) -> dict:
    params, width = n_params(draw, level), draw.choice((1, 2))
    kv = draw.integer(10**9, 10**11)
    hbm = hbm_capacity(draw, level)
    bandwidth = bandwidth_for_capacity(draw, level, hbm)
    total = params * width + kv
    budgets = sorted(
        {
            Fraction(math.ceil(Fraction(total, bandwidth * draw.integer(1, 64)) * 10**6), 10**6)
            for _ in range(2 + level)
        }
    )
    return {
        "n_params": params,
        "weight_bytes": width,
        "kv_cache_bytes": kv,
        "hbm_bytes_per_chip": hbm,
        "hbm_bandwidth": bandwidth,
        "max_chips": draw.choice((8, 16, 32, 64)),
        "step_budgets_s": budgets,
    }


def _decode_chip_edges(task: Task) -> str | None:
    i = task.inputs
    total = i["n_params"] * i["weight_bytes"] + i["kv_cache_bytes"]
    if near_integer(Fraction(total, i["hbm_bytes_per_chip"])):
        return "the chips that hold the model sit on an integer"
    for t in i["step_budgets_s"]:
        if near_integer(Fraction(total) / (i["hbm_bandwidth"] * t)):
            return f"budget {t}: the chips that meet it sit on an integer"
    return None


DECODE_CHIPS_L4 = """\
A model of `n_params` parameters (`weight_bytes` bytes each) with a KV cache of `kv_cache_bytes`
bytes is split evenly over some number of chips, each with `hbm_bytes_per_chip` bytes of HBM and
`hbm_bandwidth` bytes/s. A decode step is memory-bound: each chip reads its share of the weights
and KV cache once, all chips in parallel (ignore communication). For each step-time budget in
`step_budgets_s`, give the fewest chips, from 1 to `max_chips`, that hold weights plus KV cache
and finish a step within the budget, or None if no such count does."""


def at_most_half_none(task: Task) -> str | None:
    """A rule for any level with None rows: more than half of them None would let a mostly-None
    answer carry too much of the key."""
    found = task.expected["rows"]
    if 2 * sum(None in row.values() for row in found) > len(found):
        return "more than half of the rows are None"
    return None


LEVEL_4 = scaling_level(
    "inference",
    fewest_decode_chips,
    DECODE_CHIPS_L4,
    '{"rows": [{"step_budget_s": <number>, "min_chips": <int> | None}, ...]}  # one row per budget',
    fewest_decode_chips_float,
    "weights_only",
    sample=sample_decode_chips,
    reject=lambda task: _decode_chip_edges(task) or at_most_half_none(task),
)


def decode_layout(
    n_params,
    weight_bytes,
    layers,
    n_heads,
    n_kv_heads,
    head_dim,
    kv_bytes,
    d_model,
    act_bytes,
    hbm_bytes_per_chip,
    peak_flops,
    hbm_bandwidth,
    link_bandwidth,
    step_latency_s,
    max_step_s,
    max_chips,
    seq_lens,
):
    """Per context length: the tensor-parallel degree c (1..max_chips, dividing the heads, KV heads
    replicated past n_kv_heads) and batch B of the most tokens per second per chip, every step
    within max_step_s and a chip's share of weights and caches in its HBM;
    ties: fewer chips, then the smaller batch. For a c the step is increasing and piecewise
    linear in B, and B / step never falls as B grows, so B is the largest allowed, or the first
    of a flat stretch (c = 1, compute-bound: no fixed cost to amortise)."""
    import math
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        kv = 2 * layers * n_kv_heads * head_dim * kv_bytes * seq_len  # one sequence's cache
        best = None
        for chips in range(1, max_chips + 1):
            if n_heads % chips or (n_kv_heads % chips and chips % n_kv_heads):
                continue  # not a tensor-parallel degree of these heads
            held = min(chips, n_kv_heads)  # a chip holds 1/held of every cache (replicated past n_kv)
            compute = Fraction(2 * n_params, chips * peak_flops)  # per sequence
            reads, per_seq = (
                Fraction(n_params * weight_bytes, chips * hbm_bandwidth),
                Fraction(kv, held * hbm_bandwidth),
            )
            fixed = layers * 2 * 2 * (chips - 1) * step_latency_s
            per_act = layers * 2 * 2 * d_model * act_bytes * Fraction(chips - 1, chips) / link_bandwidth
            # step(B) = max(compute B, reads + per_seq B) + fixed + per_act B
            room = hbm_bytes_per_chip - Fraction(n_params * weight_bytes, chips)
            by_memory = math.floor(room * held / kv)
            by_compute = (max_step_s - fixed) / (compute + per_act)
            by_reads = (max_step_s - fixed - reads) / (per_seq + per_act)
            cap = min(by_memory, math.floor(by_compute), math.floor(by_reads))
            if cap < 1:
                continue
            candidates = [cap]
            if fixed == 0 and compute > per_seq:  # the flat stretch starts where compute binds
                candidates.append(max(1, math.ceil(reads / (compute - per_seq))))
            for batch in sorted(b for b in candidates if b <= cap):
                step = max(compute * batch, reads + per_seq * batch) + fixed + per_act * batch
                value = batch / (step * chips)
                if best is None or value > best[2]:
                    best = (chips, batch, value)
        if best is None:
            rows.append({"seq_len": seq_len, "chips": None, "batch": None, "tokens_per_s_per_chip": None})
        else:
            rows.append(
                {"seq_len": seq_len, "chips": best[0], "batch": best[1], "tokens_per_s_per_chip": best[2]}
            )
    return {"rows": rows}


def decode_layout_float(
    n_params,
    weight_bytes,
    layers,
    n_heads,
    n_kv_heads,
    head_dim,
    kv_bytes,
    d_model,
    act_bytes,
    hbm_bytes_per_chip,
    peak_flops,
    hbm_bandwidth,
    link_bandwidth,
    step_latency_s,
    max_step_s,
    max_chips,
    seq_lens,
    mistake=None,
):
    """Per chip count, the largest allowed batch by bisection on the step and the memory, and the
    flat stretch's first batch by bisection too; then the best (c, B) in floats."""
    known_mistake(mistake, "no_latency")
    latency = 0.0 if mistake == "no_latency" else step_latency_s
    out = []
    for s in seq_lens:
        head_kv = 2.0 * layers * head_dim * kv_bytes * s  # one KV head's cache per sequence
        found = []
        degrees = [
            c
            for c in range(1, max_chips + 1)
            if n_heads % c == 0 and (n_kv_heads % c == 0 or c % n_kv_heads == 0)
        ]
        for c in degrees:
            kv = head_kv * (n_kv_heads / c if c <= n_kv_heads else 1)  # one chip's share per sequence

            def step(b, c=c, kv=kv):
                compute = 2.0 * n_params * b / peak_flops / c
                memory = float(n_params) * weight_bytes / c / hbm_bandwidth + b * kv / hbm_bandwidth
                comm = 4.0 * layers * (c - 1) * (latency + b * d_model * act_bytes / c / link_bandwidth)
                return max(compute, memory) + comm

            def allowed(b, c=c, kv=kv, step=step):
                return step(b) <= max_step_s * (1 + 1e-13) and float(
                    n_params
                ) * weight_bytes / c + b * kv <= hbm_bytes_per_chip * (1 + 1e-13)

            if not allowed(1):
                continue
            low, high = 1, 2
            while allowed(high):
                low, high = high, 2 * high
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if allowed(mid) else (low, mid)
            for b in sorted({low, _first_flat(step, low)}):
                found.append(((c, b), b / step(b) / c))
        if not found:
            out.append({"seq_len": s, "chips": None, "batch": None, "tokens_per_s_per_chip": None})
            continue
        top = max(v for _, v in found)
        (c, b), v = next((k, v) for k, v in found if v >= top * (1 - 1e-12))
        out.append({"seq_len": s, "chips": c, "batch": b, "tokens_per_s_per_chip": v})
    return {"rows": out}


def _first_flat(step, cap):
    """The smallest batch whose throughput equals the cap's (within 1e-12), by bisection (the
    throughput never falls with the batch)."""
    target = cap / step(cap)
    low, high = 0, cap
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if mid / step(mid) >= target * (1 - 1e-12) else (mid, high)
    return high


def sample_layout(draw: Draw, level: int) -> dict:
    """Context lengths over a factor of 16 or more; the HBM holds the weights on 1 to 8 chips;
    the latency limit is 1.2x to 4x one chip's weight read at the smallest count that holds
    them; the ring-step latency makes many chips costly for short contexts."""
    inputs = {
        "n_params": n_params(draw, 3),
        "weight_bytes": value_bytes(draw, level, (1, 2)),
        **_shape(draw, level),
        "d_model": 128 * draw.integer(16, 128),
        "act_bytes": 2,
        "hbm_bytes_per_chip": 0,
        "peak_flops": 0,  # drawn for the HBM's capacity below
        "hbm_bandwidth": 0,  # drawn for the HBM's capacity below
        "link_bandwidth": tp_link_bandwidth(draw, level),
        "step_latency_s": Fraction(draw.integer(1, 100), 10**7),
        "max_step_s": Fraction(0),
        "max_chips": draw.choice((8, 16, 32)),
        "seq_lens": [],
    }
    inputs["n_heads"] = max(8, inputs["n_kv_heads"] * draw.choice((2, 4, 8, 16)))
    first = ("n_params", "weight_bytes", "layers", "n_heads")
    inputs = {name: inputs[name] for name in (*first, *(name for name in inputs if name not in first))}
    weights = inputs["n_params"] * inputs["weight_bytes"]
    holding = draw.integer(1, 8)
    inputs["hbm_bytes_per_chip"] = require(
        "hbm_bytes_per_chip",
        math.ceil(Fraction(weights, holding) * Fraction(draw.integer(105, 300), 100)),
        HBM_CAPACITY,
    )
    inputs["peak_flops"] = peak_for_capacity(draw, level, inputs["hbm_bytes_per_chip"])
    inputs["hbm_bandwidth"] = bandwidth_for_capacity(
        draw, level, inputs["hbm_bytes_per_chip"], inputs["peak_flops"]
    )
    read = Fraction(weights, holding * inputs["hbm_bandwidth"])
    inputs["max_step_s"] = Fraction(math.ceil(read * Fraction(draw.integer(120, 400), 100) * 10**6), 10**6)
    exponents = sorted(draw.sample(range(9, 18), rows(level, 1) - 1))
    if exponents[-1] - exponents[0] < 4:
        raise Reject("context lengths too close together")
    inputs["seq_lens"] = [2**e - draw.integer(0, 2 ** (e - 2)) for e in exponents]
    return inputs


def _layout_rules(task: Task) -> str | None:
    i = task.inputs
    rows_ = task.expected["rows"]
    if 2 * sum(row["chips"] is None for row in rows_) > len(rows_):
        return "more than half of the rows are None"
    if len({row["chips"] for row in rows_ if row["chips"] is not None}) < 2:
        return "the same chip count for every context length"
    if len(tp_degrees(i["n_heads"], i["n_kv_heads"], i["max_chips"])) < 3:
        return "fewer than three tensor-parallel degrees to choose from"
    weights = i["n_params"] * i["weight_bytes"]
    for row in rows_:
        if row["chips"] is None:
            continue
        c, b = row["chips"], row["batch"]
        kv = kv_bytes_per_token(i) * row["seq_len"]
        held = min(c, i["n_kv_heads"])
        compute = Fraction(2 * i["n_params"], c * i["peak_flops"])
        reads, per_seq = Fraction(weights, c * i["hbm_bandwidth"]), Fraction(kv, held * i["hbm_bandwidth"])
        fixed = 4 * i["layers"] * (c - 1) * i["step_latency_s"]
        per_act = 4 * i["layers"] * i["d_model"] * i["act_bytes"] * Fraction(c - 1, c) / i["link_bandwidth"]
        for bound in (
            (i["hbm_bytes_per_chip"] - Fraction(weights, c)) * held / kv,
            (i["max_step_s"] - fixed) / (compute + per_act),
            (i["max_step_s"] - fixed - reads) / (per_seq + per_act),
        ):
            if bound > 0 and near_integer(bound):
                return f"context {row['seq_len']}: a batch bound sits on an integer"
        if near_tie(compute * b, reads + per_seq * b):
            return f"context {row['seq_len']}: the best batch sits on the roofline ridge"
    return _runner_up(task)


def _runner_up(task: Task) -> str | None:
    """The best chip count must beat every other chip count's best by more than 1e-9."""
    i = task.inputs
    for row in task.expected["rows"]:
        if row["chips"] is None:
            continue
        for chips in tp_degrees(i["n_heads"], i["n_kv_heads"], i["max_chips"]):
            if chips == row["chips"]:
                continue
            only = _only_chips(i, row["seq_len"], chips)
            if only is not None and near_tie(only, row["tokens_per_s_per_chip"]):
                return f"context {row['seq_len']}: {chips} chips within 1e-9 of the best"
    return None


def _only_chips(i: dict, seq_len: int, chips: int) -> Fraction | None:
    """The best throughput per chip at exactly this chip count (None: nothing allowed)."""
    kv = kv_bytes_per_token(i) * seq_len
    weights = i["n_params"] * i["weight_bytes"]
    held = min(chips, i["n_kv_heads"])
    compute = Fraction(2 * i["n_params"], chips * i["peak_flops"])
    reads, per_seq = Fraction(weights, chips * i["hbm_bandwidth"]), Fraction(kv, held * i["hbm_bandwidth"])
    fixed = 4 * i["layers"] * (chips - 1) * i["step_latency_s"]
    per_act = (
        4 * i["layers"] * i["d_model"] * i["act_bytes"] * Fraction(chips - 1, chips) / i["link_bandwidth"]
    )
    cap = min(
        math.floor((i["hbm_bytes_per_chip"] - Fraction(weights, chips)) * held / kv),
        math.floor((i["max_step_s"] - fixed) / (compute + per_act)),
        math.floor((i["max_step_s"] - fixed - reads) / (per_seq + per_act)),
    )
    if cap < 1:
        return None
    step = max(compute * cap, reads + per_seq * cap) + fixed + per_act * cap
    return cap / (step * chips)


_L5 = (
    """\
A model of `n_params` parameters (`weight_bytes` bytes each) decodes a batch of B sequences that
each have S cached positions; every cached position holds a key and a value of `head_dim`
values for each of `layers` layers and `n_kv_heads` KV heads (of `n_heads` query heads),
`kv_bytes` bytes per value. You choose the number of chips c (1 to `max_chips`) and B (an integer
>= 1). """
    + TENSOR_PARALLEL
    + """ A chip's share of the weights and of the KV cache must fit in
its `hbm_bytes_per_chip` bytes of HBM. Each chip does 1/c of the step's FLOPs (2 per parameter per
sequence) at `peak_flops` FLOP/s and reads its share of the weights and of the KV cache at
`hbm_bandwidth` bytes/s; its compute and its reads overlap (roofline). Each layer then sums
partial results over the c chips twice (after attention and after the MLP), each time by an
all-reduce of the batch's activations (B x `d_model` values of `act_bytes` bytes): a ring of
2(c - 1) steps one after another, in each of which every chip sends 1/c of those bytes over a
link of `link_bandwidth` bytes/s and pays a fixed `step_latency_s` seconds; nothing overlaps the
all-reduces, and c = 1 needs none. A decode step (which yields one token per sequence) must take
at most `max_step_s` seconds. For each context length S in `seq_lens`, give the (c, B) with the
most tokens per second per chip (on a tie, the fewer chips, then the smaller batch) and that
throughput per chip; None for all three if no choice is allowed."""
)


LEVEL_5 = scaling_level(
    "inference",
    decode_layout,
    _L5,
    '{"rows": [{"seq_len": <int>, "chips": <int> | None, "batch": <int> | None, '
    '"tokens_per_s_per_chip": <number> | None}, ...]}  # one row per entry of `seq_lens`, in order',
    decode_layout_float,
    "no_latency",
    sample=sample_layout,
    reject=_layout_rules,
    varying=("rows[].chips",),
)


SHARDED_DECODE_LATENCY = five_levels(
    "sharded_decode_latency",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the KV cache derived from the attention shape; L3: tensor-parallel decode per chip "
    "count, the two per-layer all-reduces of the activations derived, fits or not; L4: the "
    "fewest chips per step-time budget (None in at most half the rows); L5: the chip count "
    "and batch of the most tokens per second per chip under a per-step latency limit and "
    "the HBM, every ring step carrying a latency (the best chip count changes with the "
    "context length)",
    branches=(Branch("none", some_none, Fraction(1, 8), (4,)),),
)
