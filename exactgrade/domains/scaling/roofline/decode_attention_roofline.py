"""The decode_attention_roofline family of roofline: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    chip_at_ridge,
    chip_inputs,
    jitter,
    peak_and_bandwidth,
    round_numbers,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level
from exactgrade.domains.scaling._text import DEQUANT_AT_PEAK
from exactgrade.domains.scaling.hardware import (
    HBM_CAPACITY,
    RIDGE,
    require,
    require_capacity_per_peak,
    require_full_read,
)
from exactgrade.domains.scaling.roofline.shared import _ROOFLINE_ROW, _intensity_not_tied
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def decode_attention_roofline(
    batches, seq_len, n_heads, n_kv_heads, head_dim, bytes_per_value, peak_flops, hbm_bandwidth
):
    """One decode step of attention for one layer: each sequence reads its own K and V cache."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = 2 * 2 * batch * n_heads * seq_len * head_dim  # q.K^T and p.V
        traffic = 2 * batch * seq_len * n_kv_heads * head_dim * bytes_per_value  # K and V
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / hbm_bandwidth
        rows.append(
            {
                "batch": batch,
                "intensity": Fraction(flops) / traffic,
                "time_s": max(compute_s, memory_s),
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def decode_attention_roofline_float(
    batches, seq_len, n_heads, n_kv_heads, head_dim, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "kv_shared_across_batch")
    rows = []
    for b in batches:
        readers = 1 if mistake == "kv_shared_across_batch" else b
        traffic = 2.0 * head_dim * n_kv_heads * seq_len * bytes_per_value * readers
        flops = 4.0 * seq_len * head_dim * n_heads * b
        intensity = flops / traffic
        bound = "compute" if flops / traffic >= peak_flops / hbm_bandwidth else "memory"
        rows.append(
            {
                "batch": b,
                "intensity": intensity,
                "time_s": flops / peak_flops if bound == "compute" else traffic / hbm_bandwidth,
                "bound": bound,
            }
        )
    return {"rows": rows}


def sample_decode_attention_roofline(draw: Draw, level: int) -> dict:
    n_kv_heads = draw.choice((1, 2, 4, 8, 16))
    return {
        "batches": sorted({1, *draw.sample(range(2, 64 * 2**level), rows(level, 3) - 1)}),
        "seq_len": 1024 * draw.integer(1, 8 * 2**level) + jitter(draw, level, 1024),
        "n_heads": n_kv_heads * draw.choice((1, 2, 4, 8)),
        "n_kv_heads": n_kv_heads,
        "head_dim": draw.choice((64, 128) if round_numbers(level) else (64, 80, 96, 128, 256)),
        "bytes_per_value": value_bytes(draw, level),
        **chip_inputs(draw, level),
    }


LEVEL_1 = scaling_level(
    "roofline",
    decode_attention_roofline,
    """\
During decoding, one layer's attention computes, for every sequence in the batch, the scores of its
single new query against `seq_len` cached keys and the weighted sum of `seq_len` cached values:
2*2*n_heads*seq_len*head_dim FLOPs per sequence. Grouped-query attention stores `n_kv_heads` key
heads and as many value heads of size `head_dim`, `bytes_per_value` bytes per value; every sequence
reads its own K and V cache from HBM once (ignore the query and output bytes). On a chip with
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s, give for each batch size in `batches` the
arithmetic intensity, the roofline time in seconds and the bound. (Every sequence reads its own
cache, so the intensity, and with it the bound, is the same at every batch size.)""",
    _ROOFLINE_ROW,
    decode_attention_roofline_float,
    "kv_shared_across_batch",
    sample=sample_decode_attention_roofline,
    reject=_intensity_not_tied,
)


_DECODE_ATTENTION_L2 = """\
During decoding, one layer's attention takes, for every sequence in the batch, its single new
token: each of its `n_heads` query heads dots its query (`head_dim` values) with the `seq_len`
cached keys of its KV head and sums the `seq_len` cached value vectors weighted by those scores
(2 FLOPs per multiply-add). Grouped-query attention stores `n_kv_heads` key heads and as many value
heads of size `head_dim`, `bytes_per_value` bytes per value; every sequence reads its own K and V
cache from HBM once (ignore the query and output bytes). On a chip with `peak_flops` FLOP/s and
`hbm_bandwidth` bytes/s, give for each batch size in `batches` the arithmetic intensity, the
roofline time in seconds and the bound. (Every sequence reads its own cache, so the intensity,
and with it the bound, is the same at every batch size.)"""


LEVEL_2 = scaling_level(
    "roofline",
    decode_attention_roofline,
    _DECODE_ATTENTION_L2,
    _ROOFLINE_ROW,
    decode_attention_roofline_float,
    "kv_shared_across_batch",
    reject=_intensity_not_tied,
    sample=sample_decode_attention_roofline,
)


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


LEVEL_3 = scaling_level(
    "roofline",
    decode_layer_step,
    _DECODE_LAYER_L3,
    '{"rows": [{"batch": <int>, "time_s": <number>, "bound": "compute" | "memory"}, ...]}'
    "  # one row per entry of `batches`, in order",
    decode_layer_step_float,
    "kv_read_once_per_batch",
    sample=sample_decode_layer,
    reject=_decode_layer_edges,
    varying=("rows[].bound",),
)


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


LEVEL_4 = scaling_level(
    "roofline",
    min_compute_bound_decode_layer,
    _DECODE_LAYER_L4,
    '{"rows": [{"seq_len": <int>, "min_batch": <int> | None}, ...]}  # one row per entry of '
    "`seq_lens`, in order",
    min_compute_bound_decode_layer_float,
    "attention_flops_dropped",
    sample=sample_min_decode_layer,
    reject=_min_decode_layer_edges,
)


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
    require_capacity_per_peak(capacity, peak)
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


_KV_SERVING_L5 = (
    """\
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
the batch and that throughput.
"""
    + DEQUANT_AT_PEAK
)


LEVEL_5 = scaling_level(
    "roofline",
    kv_serving_plan,
    _KV_SERVING_L5,
    '{"rows": [{"kv_format": <str>, "batch": <int>, "tokens_per_s": <number>}]}',
    kv_serving_plan_float,
    "kv_read_once_per_step",
    sample=sample_kv_serving,
    reject=_kv_serving_rules,
)


def _some_min_batch_none(task: Task) -> bool:
    return any(row.get("min_batch", 0) is None for row in task.expected["rows"])


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


DECODE_ATTENTION_BRANCHES = (
    Branch("none", _some_min_batch_none, Fraction(1, 4), (4,)),
    Branch("compute-bound tie", _kv_plan_compute, Fraction(1, 10), (5,)),
    Branch("a wider KV format wins", _kv_plan_not_narrowest, Fraction(1, 5), (5,)),
)


DECODE_ATTENTION_ROOFLINE = five_levels(
    "decode_attention_roofline",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the attention FLOPs derived; L3: a whole layer's decode step with its weights, whose "
    "bound changes with the batch; L4: the smallest compute-bound batch per context length "
    "(None where the KV reads cap the intensity); L5: the KV-cache format and batch of the most "
    "tokens per second under an HBM capacity and a latency budget (decode FLOPs against cheaper "
    "reads; compute-bound throughput ties broken by the smaller batch)",
    constant={
        "rows[].bound": "each sequence reads its own KV cache, so FLOPs and bytes both grow with "
        "the batch and the intensity 2*n_heads/(n_kv_heads*bytes) does not depend on it: the "
        "prompt says so"
    },
    branches=DECODE_ATTENTION_BRANCHES,
)
