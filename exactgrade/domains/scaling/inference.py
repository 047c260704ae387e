"""Inference tasks (sc-028..sc-034): decode roofline, KV-cache traffic, prefill, latency, cost.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling import (
    levels_decode,
    levels_inverse,
    levels_inverse2,
    levels_kv,
    levels_prefill,
    levels_quantized,
    levels_serving,
    levels_sharded,
    levels_speculative,
)
from exactgrade.domains.scaling._sample import (
    attention_shape,
    chip_inputs,
    hbm_bandwidth,
    hbm_capacity,
    jitter,
    n_params,
    n_params_between,
    round_numbers,
    rows,
    sorted_sample,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    Level,
    known_mistake,
    rounding_edge,
    scaling_family,
    tie_edge,
    with_tags,
)
from exactgrade.domains.scaling._text import SAME_SPEED_ANY_FORMAT
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def decode_step(chips, n_params, bytes_per_param, batch):
    """One decode step per chip: 2*N*batch FLOPs against reading every weight once."""
    from fractions import Fraction

    rows = []
    for chip in chips:
        compute_s = Fraction(2 * n_params * batch, chip["peak_flops"])
        memory_s = Fraction(n_params * bytes_per_param) / chip["hbm_bandwidth"]
        step_s = max(compute_s, memory_s)
        rows.append({
            "chip": chip["name"],
            "time_s": step_s,
            "tokens_per_s": batch / step_s,
            "bound": "compute" if compute_s >= memory_s else "memory",
        })
    return {"rows": rows}


def kv_read_share(n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, hbm_bandwidth, cases):
    """Bytes a decode step reads: every weight once plus every sequence's whole KV cache."""
    from fractions import Fraction

    weights = n_params * weight_bytes
    per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for case in cases:
        kv = per_token * case["seq_len"] * case["batch"]
        rows.append({
            "batch": case["batch"],
            "seq_len": case["seq_len"],
            "kv_bytes": Fraction(kv),
            "kv_share": Fraction(kv, kv + weights),
            "step_time_s": Fraction(kv + weights, hbm_bandwidth),
        })
    return {"rows": rows}


def decode_compute_bound_batch(n_params, weight_bytes, kv_bytes_per_token, seq_lens, peak_flops,
                               hbm_bandwidth):
    """Smallest batch whose decode step is compute-bound once each sequence's KV cache is read."""
    import math
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        # 2*N*B/peak >= (N*w + B*S*kv)/bw  <=>  B*(2*N/peak - S*kv/bw) >= N*w/bw
        slope = Fraction(2 * n_params, peak_flops) - Fraction(seq_len * kv_bytes_per_token, hbm_bandwidth)
        if slope <= 0:
            min_batch = None
        else:
            min_batch = math.ceil(Fraction(n_params * weight_bytes, hbm_bandwidth) / slope)
        rows.append({"seq_len": seq_len, "min_batch": min_batch})
    return {"rows": rows}


def prefill_vs_decode(n_params, weight_bytes, prompt_lens, peak_flops, hbm_bandwidth):
    """Prefill processes the whole prompt in one pass; decode produces one token per pass."""
    from fractions import Fraction

    weight_read_s = Fraction(n_params * weight_bytes, hbm_bandwidth)
    decode_s = max(Fraction(2 * n_params, peak_flops), weight_read_s)
    rows = []
    for prompt_len in prompt_lens:
        prefill_s = max(Fraction(2 * n_params * prompt_len, peak_flops), weight_read_s)
        rows.append({
            "prompt_len": prompt_len,
            "prefill_s": prefill_s,
            "decode_step_s": decode_s,
            "throughput_ratio": (prompt_len / prefill_s) / (1 / decode_s),
        })
    return {"rows": rows}


def sharded_decode_latency(n_params, weight_bytes, kv_cache_bytes, hbm_bytes_per_chip, hbm_bandwidth,
                           chip_counts):
    """Weights and KV cache split evenly over the chips; each chip reads its share every step."""
    from fractions import Fraction

    total = n_params * weight_bytes + kv_cache_bytes
    rows = []
    for chips in chip_counts:
        rows.append({
            "chips": chips,
            "fits": total <= chips * hbm_bytes_per_chip,
            "time_per_token_s": Fraction(total, chips * hbm_bandwidth),
        })
    return {"rows": rows}


def quantized_decode(n_params, formats, batch, peak_flops, hbm_bandwidth):
    """Decode-step time as weight precision drops; speedup relative to the first format."""
    from fractions import Fraction

    compute_s = Fraction(2 * n_params * batch, peak_flops)
    times = []
    rows = []
    for fmt in formats:
        memory_s = Fraction(n_params * fmt["bits_per_weight"], 8 * hbm_bandwidth)
        times.append(max(compute_s, memory_s))
        rows.append({
            "format": fmt["name"],
            "time_s": times[-1],
            "speedup": times[0] / times[-1],
            "bound": "compute" if compute_s >= memory_s else "memory",
        })
    return {"rows": rows}


def serving_cost(n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, batches):
    """Decode throughput and price per million generated tokens on one chip."""
    from fractions import Fraction

    memory_s = Fraction(n_params * weight_bytes, hbm_bandwidth)
    rows = []
    for batch in batches:
        step_s = max(Fraction(2 * n_params * batch, peak_flops), memory_s)
        tokens_per_s = batch / step_s
        rows.append({
            "batch": batch,
            "tokens_per_s": tokens_per_s,
            "dollars_per_million_tokens": Fraction(dollars_per_chip_hour) / 3600 / tokens_per_s * 10**6,
        })
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def decode_step_float(chips, n_params, bytes_per_param, batch, mistake=None):
    known_mistake(mistake, "compute_only")
    rows = []
    for c in chips:
        weights_per_s = c["hbm_bandwidth"] / (bytes_per_param * float(n_params))  # weight sweeps per second
        flops_limited = c["peak_flops"] / (2.0 * n_params)  # token passes per second
        memory = weights_per_s < flops_limited / batch and mistake != "compute_only"
        steps_per_s = weights_per_s if memory else flops_limited / batch
        rows.append({"chip": c["name"], "time_s": 1 / steps_per_s, "tokens_per_s": steps_per_s * batch,
                     "bound": "memory" if memory else "compute"})
    return {"rows": rows}


def kv_read_share_float(n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, hbm_bandwidth, cases,
                        mistake=None):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for c in cases:
        kv = float(c["batch"] * c["seq_len"]) * kv_bytes * head_dim * n_kv_heads * layers * tensors
        weights = float(weight_bytes) * n_params
        rows.append({"batch": c["batch"], "seq_len": c["seq_len"], "kv_bytes": kv,
                     "kv_share": 1 / (1 + weights / kv),
                     "step_time_s": kv / hbm_bandwidth + weights / hbm_bandwidth})
    return {"rows": rows}


def decode_compute_bound_batch_float(n_params, weight_bytes, kv_bytes_per_token, seq_lens, peak_flops,
                                     hbm_bandwidth, mistake=None):
    known_mistake(mistake, "ignore_kv_cache")
    rows = []
    for s in seq_lens:
        kv = 0 if mistake == "ignore_kv_cache" else s * kv_bytes_per_token
        # per-sequence: compute 2N/peak vs its own KV read; shared weight read amortised over the batch
        margin = 2.0 * n_params * hbm_bandwidth - kv * peak_flops
        batch = math.ceil(n_params * weight_bytes * peak_flops / margin) if margin > 0 else None
        rows.append({"seq_len": s, "min_batch": batch})
    return {"rows": rows}


def prefill_vs_decode_float(n_params, weight_bytes, prompt_lens, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "prefill_as_decode_steps")
    read = weight_bytes * n_params / hbm_bandwidth
    decode = max(read, 2.0 / peak_flops * n_params)
    rows = []
    for p in prompt_lens:
        prefill = max(read, 2.0 * p / peak_flops * n_params)
        if mistake == "prefill_as_decode_steps":
            prefill = p * decode
        rows.append({"prompt_len": p, "prefill_s": prefill, "decode_step_s": decode,
                     "throughput_ratio": decode * p / prefill})
    return {"rows": rows}


def sharded_decode_latency_float(n_params, weight_bytes, kv_cache_bytes, hbm_bytes_per_chip, hbm_bandwidth,
                                 chip_counts, mistake=None):
    known_mistake(mistake, "weights_only")
    total = float(n_params * weight_bytes) + (0 if mistake == "weights_only" else kv_cache_bytes)
    return {"rows": [{"chips": c, "fits": c * hbm_bytes_per_chip >= total,
                      "time_per_token_s": total / c / hbm_bandwidth} for c in chip_counts]}


def quantized_decode_float(n_params, formats, batch, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "bits_as_bytes")
    per_byte = 1 if mistake == "bits_as_bytes" else 8
    compute = batch * 2.0 * n_params / peak_flops
    base = max(compute, formats[0]["bits_per_weight"] / per_byte * n_params / hbm_bandwidth)
    rows = []
    for f in formats:
        memory = f["bits_per_weight"] / per_byte * n_params / hbm_bandwidth
        time = max(compute, memory)
        rows.append({"format": f["name"], "time_s": time, "speedup": base / time,
                     "bound": "memory" if memory > compute else "compute"})
    return {"rows": rows}


def serving_cost_float(n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, batches,
                       mistake=None):
    known_mistake(mistake, "per_sequence_throughput")
    rows = []
    for b in batches:
        step = max(n_params * (2.0 * b / peak_flops), n_params * (weight_bytes / hbm_bandwidth))
        tokens_per_s = (1 if mistake == "per_sequence_throughput" else b) / step
        tokens_per_hour = tokens_per_s * 3600
        rows.append({"batch": b, "tokens_per_s": tokens_per_s,
                     "dollars_per_million_tokens": 1e6 * dollars_per_chip_hour / tokens_per_hour})
    return {"rows": rows}


# ---------------------------------------------------------------- families and tasks


def sample_decode_step(draw: Draw, level: int) -> dict:
    """The batch lies between the chips' compute-bound thresholds (batch >= bytes_per_param *
    peak / (2 * bandwidth)), so the bound differs between chips in every instance."""
    chips, width = sample.chips(draw, level, rows(level, 3)), value_bytes(draw, level)
    thresholds = sorted(Fraction(width * c["peak_flops"], 2 * c["hbm_bandwidth"]) for c in chips)
    low, high = math.floor(thresholds[0]) + 1, math.ceil(thresholds[-1]) - 1
    if low > high:
        raise Reject("no batch between the chips' thresholds")
    return {"chips": chips, "n_params": n_params(draw, level), "bytes_per_param": width,
            "batch": draw.integer(low, high)}


def _decode_step_not_tied(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        problem = tie_edge(f"{chip['name']}: compute time against memory time",
                           Fraction(2 * i["n_params"] * i["batch"], chip["peak_flops"]),
                           Fraction(i["n_params"] * i["bytes_per_param"], chip["hbm_bandwidth"]))
        if problem:
            return problem
    return None


DECODE_STEP = scaling_family(
    "decode_step", "inference", decode_step,
    """\
A dense model of `n_params` parameters stored at `bytes_per_param` bytes each generates tokens
for `batch` sequence(s). Each decode step costs 2*n_params FLOPs per sequence and reads every
weight from HBM once (ignore the KV cache and activations). For each chip in `chips` (peak FLOP/s
and HBM bytes/s), give the decode step time in seconds, the throughput in tokens per second and
the bound.""",
    '{"rows": [{"chip": <str>, "time_s": <number>, "tokens_per_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per chip, in order',
    decode_step_float, "compute_only",
    sample=sample_decode_step,
    levels="L2: the step described, its FLOPs and reads derived; L3: the KV cache read and "
           "attention's FLOPs derived from the shape, the bound differing between chips; L4: the "
           "smallest compute-bound batch per chip and its step time; L5: speculative decoding, "
           "the draft length of the most expected tokens per second per chip (the expected tokens "
           "of a cycle derived from the acceptance rule; the verification pass turns compute-bound "
           "at a different length on each chip)",
    reject=_decode_step_not_tied,
    varying=("rows[].bound",),
    upper={2: levels_speculative.l2_level(decode_step, sample_decode_step, _decode_step_not_tied),
           **levels_speculative.LEVELS, 4: levels_inverse2.DECODE},
)


def _kv_shape(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    return {"layers": draw.integer(8, 40 * level), "n_kv_heads": shape["n_kv_heads"],
            "head_dim": shape["head_dim"], "kv_bytes": value_bytes(draw, level, (1, 2))}


def sample_kv_read_share(draw: Draw, level: int) -> dict:
    cases = [{"batch": draw.integer(1, 32 * level), "seq_len": 1024 * draw.integer(1, 16 * 2**level)
              - jitter(draw, level, 1024)} for _ in range(rows(level, 3))]
    return {"n_params": n_params(draw, level), "weight_bytes": value_bytes(draw, level, (1, 2)),
            **_kv_shape(draw, level), "hbm_bandwidth": hbm_bandwidth(draw, level), "cases": cases}


KV_READ_SHARE = scaling_family(
    "kv_read_share", "inference", kv_read_share,
    """\
A decode step of a model with `n_params` parameters (`weight_bytes` bytes each) reads every weight
once plus the whole KV cache of every sequence in the batch: a key and a value of `head_dim`
values for each of `layers` layers, `n_kv_heads` KV heads and `seq_len` cached positions,
`kv_bytes` bytes per value. For each case in `cases` (batch size and sequence length), give the
KV-cache bytes read per step, the KV cache's share of all bytes read per step, and the step time
in seconds if the step is limited by reading those bytes at `hbm_bandwidth` bytes/s.""",
    '{"rows": [{"batch": <int>, "seq_len": <int>, "kv_bytes": <number>, "kv_share": <number>, '
    '"step_time_s": <number>}, ...]}  # one row per case, in order',
    kv_read_share_float, "keys_only",
    sample=sample_kv_read_share,
    upper={**levels_kv.LEVELS, 4: levels_inverse2.SHARE},
    branches=levels_kv.BRANCHES,
    levels="L2: the KV heads derived from grouped-query attention; L3: the decode step's roofline "
           "with the cache read, compute- or memory-bound per case; L4: the longest context per "
           "batch under a KV share (None); L5: the same once most layers cache only a sliding "
           "window: the cache grows at two rates, the answers fall on both sides of the window "
           "(None)",
)


def sample_decode_compute_bound_batch(draw: Draw, level: int) -> dict:
    shape = _kv_shape(draw, level)
    per_token = 2 * shape["layers"] * shape["n_kv_heads"] * shape["head_dim"] * shape["kv_bytes"]
    inputs = {"n_params": n_params(draw, level), "weight_bytes": value_bytes(draw, level, (1, 2)),
              "kv_bytes_per_token": per_token, **chip_inputs(draw, level)}
    # Past S* = 2*N*bw / (peak*kv) a sequence's KV read outlasts its compute: no batch is
    # compute-bound (None). Half the instances reach past it; every one keeps a length below.
    limit = Fraction(2 * inputs["n_params"] * inputs["hbm_bandwidth"], inputs["peak_flops"] * per_token) / 128
    past = draw.chance(1, 2)
    top = math.floor(2 * limit) if past else math.ceil(limit) - 1
    if top < rows(level, 4) or (past and math.floor(limit) < 1):
        raise Reject("the no-batch length does not fit the lengths drawn")
    picks = sorted_sample(draw, 1, top, rows(level, 4))
    if past and picks[-1] <= limit:
        picks[-1] = draw.integer(math.floor(limit) + 1, top)
        picks = sorted(set(picks))
    if picks[0] >= limit:
        raise Reject("no length below the no-batch length")
    inputs["seq_lens"] = [128 * s - jitter(draw, level, 128) for s in picks]
    return {k: inputs[k] for k in ("n_params", "weight_bytes", "kv_bytes_per_token", "seq_lens", "peak_flops",
                                   "hbm_bandwidth")}


def _no_batch_is_compute_bound(task: Task) -> bool:
    return any(row["min_batch"] is None for row in task.expected["rows"])


def _compute_bound_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for seq_len in i["seq_lens"]:
        per_sequence_compute = Fraction(2 * i["n_params"], i["peak_flops"])
        per_sequence_read = Fraction(seq_len * i["kv_bytes_per_token"], i["hbm_bandwidth"])
        problem = tie_edge(f"seq_len {seq_len}: a sequence's compute against its KV read",
                           per_sequence_compute, per_sequence_read)
        slope = per_sequence_compute - per_sequence_read
        if problem is None and slope > 0:
            problem = rounding_edge(f"seq_len {seq_len}: the batch bound",
                                    Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"]) / slope)
        if problem:
            return problem
    return None


_COMPUTE_BOUND_ROW = ('{"rows": [{"seq_len": <int>, "min_batch": <int> | None}, ...]}'
                      "  # one row per entry of `seq_lens`")

DECODE_COMPUTE_BOUND_BATCH = scaling_family(
    "decode_compute_bound_batch", "inference", decode_compute_bound_batch,
    """\
A decode step with batch B of sequences that each have `seq_len` cached tokens costs
2*n_params*B FLOPs and reads all weights once (n_params * weight_bytes bytes) plus every
sequence's KV cache (B * seq_len * kv_bytes_per_token bytes). On a chip with `peak_flops` FLOP/s
and `hbm_bandwidth` bytes/s, give for each length in `seq_lens` the smallest integer batch B at
which the step is compute-bound (FLOPs / peak_flops >= bytes / hbm_bandwidth), or None if no batch
size makes it compute-bound.""",
    _COMPUTE_BOUND_ROW,
    decode_compute_bound_batch_float, "ignore_kv_cache",
    sample=sample_decode_compute_bound_batch,
    levels="L2: the decode step described, the compute-bound condition derived; L3: the KV cache "
           "derived from the attention shape, with the step time at the smallest compute-bound "
           "batch; L4: the largest batch the HBM holds, its throughput and bound; L5: the chip "
           "count and batch of the fewest chip-seconds per token under a latency budget and the HBM "
           "(None branches at L1-L4)",
    reject=_compute_bound_batch_edges,
    upper={2: Level(decode_compute_bound_batch, levels_decode.L2_QUESTION, _COMPUTE_BOUND_ROW,
                    decode_compute_bound_batch_float, "ignore_kv_cache", reject=_compute_bound_batch_edges),
           **levels_decode.LEVELS},
    branches=(Branch("none", _no_batch_is_compute_bound, Fraction(1, 4), (1, 2)), *levels_decode.BRANCHES),
)


def sample_prefill_vs_decode(draw: Draw, level: int) -> dict:
    prompt_lens = [128 * p - jitter(draw, level, 128)
                   for p in sorted_sample(draw, 1, 64 * 2**level, rows(level, 3))]
    return {"n_params": n_params(draw, level), "weight_bytes": value_bytes(draw, level, (1, 2)),
            "prompt_lens": prompt_lens, **chip_inputs(draw, level)}


_PREFILL_ROW = ('{"rows": [{"prompt_len": <int>, "prefill_s": <number>, "decode_step_s": <number>, '
                '"throughput_ratio": <number>}, ...]}  # one row per entry of `prompt_lens`, in order')

PREFILL_VS_DECODE = scaling_family(
    "prefill_vs_decode", "inference", prefill_vs_decode,
    """\
A single request (batch 1) to a model of `n_params` parameters (`weight_bytes` bytes each) first
prefills its prompt in one forward pass over all prompt tokens (2*n_params FLOPs per token, every
weight read once), then decodes one token per step (2*n_params FLOPs, every weight read once).
Use the roofline time max(FLOPs / peak_flops, bytes / hbm_bandwidth) and ignore the KV cache. For
each prompt length in `prompt_lens`, give the prefill time, the decode step time (both in seconds)
and the ratio of prefill throughput (prompt tokens per second) to decode throughput (tokens per
second).""",
    _PREFILL_ROW,
    prefill_vs_decode_float, "prefill_as_decode_steps",
    sample=sample_prefill_vs_decode,
    upper={2: Level(prefill_vs_decode, levels_prefill.L2_QUESTION, _PREFILL_ROW, prefill_vs_decode_float,
                    "prefill_as_decode_steps", sample=levels_prefill.sample_prefill_l2,
                    varying=("rows[].throughput_ratio",)),
           **levels_prefill.LEVELS},
    branches=levels_prefill.BRANCHES,
    levels="L2: the passes described, no roofline formula restated, prompts on both sides of the "
           "prefill ridge; L3: a whole batch-1 request, the KV cache derived from the attention "
           "shape and growing by one position per decode pass (its time and the decode share); "
           "L4: the longest prompt a request-latency budget allows, across the prefill ridge "
           "(None); L5: the decode batch of a serving wave (B prefills, then n - 1 batched decode "
           "passes) of the highest throughput under a per-pass latency limit and the HBM: the HBM, "
           "the latency limit or the compute-bound plateau decides, differently per profile",
)


def sample_sharded_decode_latency(draw: Draw, level: int) -> dict:
    """The chip counts straddle the fewest chips that hold weights plus cache, so fits takes
    both values in every instance: the HBM per chip is a real capacity, and the model size puts
    weights plus cache between two chip counts' HBM."""
    counts = sorted({2 ** draw.integer(0, 3 + level) if round_numbers(level) else draw.integer(1, 16 * level)
                     for _ in range(rows(level, 4))})
    if len(counts) < 2:
        raise Reject("a single chip count")
    kv = 10**9 * draw.integer(1, 100 * level) if round_numbers(level) else draw.integer(10**9, 10**11 * level)
    hbm, weight_bytes = hbm_capacity(draw, level), value_bytes(draw, level, (1, 2))
    need = draw.integer(1, len(counts) - 1)  # counts[need] is the smallest that fits
    params = n_params_between(draw, level, Fraction(counts[need - 1] * hbm - kv, weight_bytes),
                              Fraction(counts[need] * hbm - kv, weight_bytes))
    return {"n_params": params, "weight_bytes": weight_bytes, "kv_cache_bytes": kv, "hbm_bytes_per_chip": hbm,
            "hbm_bandwidth": sample.bandwidth_for_capacity(draw, level, hbm), "chip_counts": counts}


def _sharded_fits_not_tied(task: Task) -> str | None:
    i = task.inputs
    total = i["n_params"] * i["weight_bytes"] + i["kv_cache_bytes"]
    for count in i["chip_counts"]:
        problem = tie_edge(f"{count} chips: weights plus cache against the HBM", total,
                           count * i["hbm_bytes_per_chip"])
        if problem:
            return problem
    return None


SHARDED_DECODE_LATENCY = scaling_family(
    "sharded_decode_latency", "inference", sharded_decode_latency,
    """\
A model of `n_params` parameters (`weight_bytes` bytes each) with a KV cache of `kv_cache_bytes`
bytes is split evenly over a number of chips, each with `hbm_bytes_per_chip` bytes of HBM and
`hbm_bandwidth` bytes/s. A decode step is memory-bound: each chip reads its share of the weights
and KV cache once, all chips in parallel (ignore communication). For each chip count in
`chip_counts`, say whether weights plus KV cache fit in the chips' total HBM and give the time per
decode step in seconds (`time_per_token_s`: one step yields the next token of every sequence).""",
    '{"rows": [{"chips": <int>, "fits": <bool>, "time_per_token_s": <number>}, ...]}'
    "  # one row per entry of `chip_counts`, in order",
    sharded_decode_latency_float, "weights_only",
    sample=sample_sharded_decode_latency,
    levels="L2: the KV cache derived from the attention shape; L3: tensor-parallel decode per chip "
           "count, the two per-layer all-reduces of the activations derived, fits or not; L4: the "
           "fewest chips per step-time budget (None in at most half the rows); L5: the chip count "
           "and batch of the most tokens per second per chip under a per-step latency limit and "
           "the HBM, every ring step carrying a latency (the best chip count changes with the "
           "context length)",
    reject=_sharded_fits_not_tied,
    varying=("rows[].fits",),
    upper={2: levels_sharded.LEVELS[2], 3: levels_sharded.LEVELS[3],
           4: dataclasses.replace(levels_inverse.DECODE_CHIPS, reject=lambda task: (
               levels_inverse.DECODE_CHIPS.reject(task) or levels_sharded.at_most_half_none(task))),
           5: levels_sharded.LEVELS[5]},
    branches=(Branch("none", levels_sharded.some_none, Fraction(1, 8), (4,)),),
)

_FORMATS = (("fp8", 8), ("int8", 8), ("int4", 4), ("int3", 3), ("int2", 2), ("fp6", 6))
_SCALED_FORMATS = (("int4_g128_scales", Fraction(33, 8)), ("int4_g32_scales", Fraction(9, 2)),
                   ("int8_g64_scales", Fraction(33, 4)))


def sample_quantized_decode(draw: Draw, level: int) -> dict:
    pool = _FORMATS if round_numbers(level) else _FORMATS + _SCALED_FORMATS
    formats = [("bf16", 16), *draw.sample(pool, rows(level, 3) - 1)]
    return {"n_params": n_params(draw, level),
            "formats": [{"name": name, "bits_per_weight": bits} for name, bits in formats],
            "batch": draw.integer(1, 128 * level), **chip_inputs(draw, level)}


def _quantized_not_tied(task: Task) -> str | None:
    i = task.inputs
    compute = Fraction(2 * i["n_params"] * i["batch"], i["peak_flops"])
    for fmt in i["formats"]:
        problem = tie_edge(f"{fmt['name']}: compute time against memory time", compute,
                           Fraction(i["n_params"] * fmt["bits_per_weight"], 8 * i["hbm_bandwidth"]))
        if problem:
            return problem
    return None


QUANTIZED_DECODE = scaling_family(
    "quantized_decode", "inference", quantized_decode,
    """\
A model of `n_params` parameters decodes a batch of `batch` sequences; each step costs
2*n_params*batch FLOPs at `peak_flops` FLOP/s
""" + SAME_SPEED_ANY_FORMAT + """
and reads every weight once at `hbm_bandwidth` bytes/s, a weight taking bits_per_weight / 8 bytes
(bits_per_weight already includes any quantization scales of the format; ignore the KV cache). For
each format in `formats`, give the roofline step time in seconds, the speedup over the first
format (its time / this time) and the bound.""",
    '{"rows": [{"format": <str>, "time_s": <number>, "speedup": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per format, in order',
    quantized_decode_float, "bits_as_bytes",
    sample=sample_quantized_decode,
    levels="L2: the bits per weight derived from the code bits and the group scales; L3: "
           "dequantisation work added to the compute and the KV cache to the reads (the bound "
           "differs between formats); L4: the largest strictly memory-bound batch per format "
           "(None); L5: the format and batch of the highest throughput per context length under "
           "a step-latency limit and the HBM (narrow weights free HBM but cost dequantisation)",
    reject=_quantized_not_tied,
    varying=("rows[].bound",),
    upper={**levels_quantized.LEVELS, 4: levels_inverse.QUANTIZED},
)


def sample_serving_cost(draw: Draw, level: int) -> dict:
    if round_numbers(level):
        price = Fraction(draw.integer(50, 1000), 100)
    else:
        price = Fraction(draw.integer(5000, 99999), 10_000)
    return {"n_params": n_params(draw, level), "weight_bytes": value_bytes(draw, level, (1, 2)),
            **chip_inputs(draw, level),
            "dollars_per_chip_hour": price,
            "batches": sorted({1, *draw.sample(range(2, 256 * 2**level), rows(level, 4) - 1)})}


_SERVING_ROW = ('{"rows": [{"batch": <int>, "tokens_per_s": <number>, '
                '"dollars_per_million_tokens": <number>}, ...]}  # one row per entry of `batches`, in order')

_SERVING_L2 = """\
One chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s serves a model of `n_params`
parameters (`weight_bytes` bytes each) and costs `dollars_per_chip_hour` dollars per hour. A decode
step for a batch of B sequences runs the model on one new token per sequence (2 FLOPs per parameter
per token), reads every weight from HBM once (ignore the KV cache) and yields B tokens. For each
batch size in `batches`, give the throughput in tokens per second and the cost in dollars per
million generated tokens."""

SERVING_COST = scaling_family(
    "serving_cost", "inference", serving_cost,
    """\
One chip serves a model of `n_params` parameters (`weight_bytes` bytes each) and costs
`dollars_per_chip_hour` dollars per hour. A decode step for a batch of B sequences takes
max(2*n_params*B / peak_flops, n_params*weight_bytes / hbm_bandwidth) seconds and yields B tokens
(ignore the KV cache). For each batch size in `batches`, give the throughput in tokens per second
and the cost in dollars per million generated tokens.""",
    _SERVING_ROW,
    serving_cost_float, "per_sequence_throughput",
    sample=sample_serving_cost,
    upper={2: Level(serving_cost, _SERVING_L2, _SERVING_ROW, serving_cost_float, "per_sequence_throughput"),
           **levels_serving.LEVELS, 4: levels_inverse.PRICE},
    branches=(Branch("none", levels_sharded.some_none, Fraction(1, 8), (4,)),),
    levels="L2: the step described; L3: the KV cache read each step derived from the attention "
           "shape, batches on both sides of the compute-bound one; L4: the smallest batch under each "
           "price target (None below the compute-bound floor); L5: the chip type and batch of the "
           "lowest price per context length under a step-latency limit and each type's HBM (the "
           "HBM, the limit or the compute-bound plateau sets each type's batch; the cheapest type "
           "changes with the context)",
)

FAMILIES = (DECODE_STEP, KV_READ_SHARE, DECODE_COMPUTE_BOUND_BATCH, PREFILL_VS_DECODE, SHARDED_DECODE_LATENCY,
            QUANTIZED_DECODE, SERVING_COST)

TASKS = (
    with_tags(DECODE_STEP.task(
        "sc-028",
        {"chips": [
            {"name": "chip_a", "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
            {"name": "chip_a_2.5x_flops", "peak_flops": 1000 * 10**12, "hbm_bandwidth": 1600 * 10**9},
            {"name": "chip_a_2x_bandwidth", "peak_flops": 400 * 10**12, "hbm_bandwidth": 3200 * 10**9},
        ], "n_params": 70 * 10**9, "bytes_per_param": 2, "batch": 1},
    ), "headline:decode_memory_bound"),
    with_tags(KV_READ_SHARE.task(
        "sc-029",
        {"n_params": 8 * 10**9, "weight_bytes": 2, "layers": 32, "n_kv_heads": 8, "head_dim": 128,
         "kv_bytes": 2, "hbm_bandwidth": 1600 * 10**9,
         "cases": [{"batch": 1, "seq_len": 4096}, {"batch": 32, "seq_len": 8192},
                   {"batch": 64, "seq_len": 32768}]},
    ), "headline:kv_cache_share"),
    DECODE_COMPUTE_BOUND_BATCH.task(
        "sc-030",
        {"n_params": 70 * 10**9, "weight_bytes": 2, "kv_bytes_per_token": 327680,
         "seq_lens": [128, 1024, 4096, 32768], "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    PREFILL_VS_DECODE.task(
        "sc-031",
        {"n_params": 70 * 10**9, "weight_bytes": 2, "prompt_lens": [128, 2048, 8192],
         "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    SHARDED_DECODE_LATENCY.task(
        "sc-032",
        {"n_params": 405 * 10**9, "weight_bytes": 2, "kv_cache_bytes": 100 * 10**9,
         "hbm_bytes_per_chip": 80 * 10**9, "hbm_bandwidth": 3350 * 10**9, "chip_counts": [4, 8, 16, 32]},
    ),
    QUANTIZED_DECODE.task(
        "sc-033",
        {"n_params": 70 * 10**9, "formats": [{"name": "bf16", "bits_per_weight": 16},
                                             {"name": "int8", "bits_per_weight": 8},
                                             {"name": "int4", "bits_per_weight": 4}],
         "batch": 64, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    SERVING_COST.task(
        "sc-034",
        {"n_params": 8 * 10**9, "weight_bytes": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9,
         "dollars_per_chip_hour": Fraction(5, 2), "batches": [1, 16, 256, 1024]},
    ),
)
