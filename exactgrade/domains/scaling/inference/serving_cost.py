"""The serving_cost family of inference: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    chip_for_capacity,
    chip_inputs,
    hbm_capacity,
    kv_bytes_per_token,
    letters,
    model_on_chip,
    n_params_between,
    peak_and_bandwidth,
    resident_bytes,
    round_numbers,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    scaling_level,
    smallest_satisfying,
    some_none,
)
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def serving_cost(n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, batches):
    """Decode throughput and price per million generated tokens on one chip."""
    from fractions import Fraction

    memory_s = Fraction(n_params * weight_bytes, hbm_bandwidth)
    rows = []
    for batch in batches:
        step_s = max(Fraction(2 * n_params * batch, peak_flops), memory_s)
        tokens_per_s = batch / step_s
        rows.append(
            {
                "batch": batch,
                "tokens_per_s": tokens_per_s,
                "dollars_per_million_tokens": Fraction(dollars_per_chip_hour) / 3600 / tokens_per_s * 10**6,
            }
        )
    return {"rows": rows}


def serving_cost_float(
    n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, batches, mistake=None
):
    known_mistake(mistake, "per_sequence_throughput")
    rows = []
    for b in batches:
        step = max(n_params * (2.0 * b / peak_flops), n_params * (weight_bytes / hbm_bandwidth))
        tokens_per_s = (1 if mistake == "per_sequence_throughput" else b) / step
        tokens_per_hour = tokens_per_s * 3600
        rows.append(
            {
                "batch": b,
                "tokens_per_s": tokens_per_s,
                "dollars_per_million_tokens": 1e6 * dollars_per_chip_hour / tokens_per_hour,
            }
        )
    return {"rows": rows}


def sample_serving_cost(draw: Draw, level: int) -> dict:
    if round_numbers(level):
        price = Fraction(draw.integer(50, 1000), 100)
    else:
        price = Fraction(draw.integer(5000, 99999), 10_000)
    chip, width = chip_inputs(draw, level), value_bytes(draw, level, (1, 2))
    return {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        **chip,
        "dollars_per_chip_hour": price,
        "batches": sorted({1, *draw.sample(range(2, 256 * 2**level), rows(level, 4) - 1)}),
    }


_SERVING_ROW = (
    '{"rows": [{"batch": <int>, "tokens_per_s": <number>, '
    '"dollars_per_million_tokens": <number>}, ...]}  # one row per entry of `batches`, in order'
)


LEVEL_1 = scaling_level(
    "inference",
    serving_cost,
    """\
One chip serves a model of `n_params` parameters (`weight_bytes` bytes each) and costs
`dollars_per_chip_hour` dollars per hour. A decode step for a batch of B sequences takes
max(2*n_params*B / peak_flops, n_params*weight_bytes / hbm_bandwidth) seconds and yields B tokens
(ignore the KV cache). For each batch size in `batches`, give the throughput in tokens per second
and the cost in dollars per million generated tokens.""",
    _SERVING_ROW,
    serving_cost_float,
    "per_sequence_throughput",
    sample=sample_serving_cost,
)


_SERVING_L2 = """\
One chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s serves a model of `n_params`
parameters (`weight_bytes` bytes each) and costs `dollars_per_chip_hour` dollars per hour. A decode
step for a batch of B sequences runs the model on one new token per sequence (2 FLOPs per parameter
per token), reads every weight from HBM once (ignore the KV cache) and yields B tokens. For each
batch size in `batches`, give the throughput in tokens per second and the cost in dollars per
million generated tokens."""


LEVEL_2 = scaling_level(
    "inference",
    serving_cost,
    _SERVING_L2,
    _SERVING_ROW,
    serving_cost_float,
    "per_sequence_throughput",
    sample=sample_serving_cost,
)


def cache_serving_cost(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    seq_len,
    peak_flops,
    hbm_bandwidth,
    dollars_per_chip_hour,
    batches,
):
    """Per batch: the roofline step with every sequence's cache of seq_len positions read."""
    from fractions import Fraction

    kv = 2 * layers * n_kv_heads * head_dim * kv_bytes * seq_len
    rows = []
    for batch in batches:
        step = max(
            Fraction(2 * n_params * batch, peak_flops),
            Fraction(n_params * weight_bytes + batch * kv, hbm_bandwidth),
        )
        tokens_per_s = batch / step
        rows.append(
            {
                "batch": batch,
                "tokens_per_s": tokens_per_s,
                "dollars_per_million_tokens": Fraction(dollars_per_chip_hour) / 3600 / tokens_per_s * 10**6,
            }
        )
    return {"rows": rows}


def cache_serving_cost_float(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    seq_len,
    peak_flops,
    hbm_bandwidth,
    dollars_per_chip_hour,
    batches,
    mistake=None,
):
    known_mistake(mistake, "ignore_kv_cache")
    kv = 0.0 if mistake == "ignore_kv_cache" else 2.0 * seq_len * layers * n_kv_heads * head_dim * kv_bytes
    out = []
    for b in batches:
        step = max(b * 2.0 * n_params / peak_flops, (b * kv + float(n_params) * weight_bytes) / hbm_bandwidth)
        out.append(
            {
                "batch": b,
                "tokens_per_s": b / step,
                "dollars_per_million_tokens": dollars_per_chip_hour * step / b / 3600 * 1e6,
            }
        )
    return {"rows": out}


def _shape(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    return {
        "layers": draw.integer(16, 96),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
    }


def _price(draw: Draw) -> Fraction:
    return Fraction(draw.integer(5000, 99999), 10_000)


def sample_cache_cost(draw: Draw, level: int) -> dict:
    """Batches on both sides of the one at which the step turns compute-bound, all but one below it,
    on a model that fits the chip with the largest batch's caches beside it."""
    width, shape, seq_len, chip = (
        value_bytes(draw, level, (1, 2)),
        _shape(draw, level),
        draw.integer(64, 2048),
        chip_inputs(draw, level),
    )
    inputs = {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        **shape,
        "seq_len": seq_len,
        **chip,
        "dollars_per_chip_hour": _price(draw),
        "batches": [],
    }
    kv = (
        2
        * inputs["layers"]
        * inputs["n_kv_heads"]
        * inputs["head_dim"]
        * inputs["kv_bytes"]
        * inputs["seq_len"]
    )
    slope = Fraction(2 * inputs["n_params"], inputs["peak_flops"]) - Fraction(kv, inputs["hbm_bandwidth"])
    if slope <= 0:
        raise Reject("the step never turns compute-bound at this context")
    ridge = Fraction(inputs["n_params"] * inputs["weight_bytes"], inputs["hbm_bandwidth"]) / slope
    if not 2 <= ridge <= 10**5:
        raise Reject("the compute-bound batch is out of range")
    # Past the ridge every row is the same (peak-bound tokens/s, one price): one batch there, the
    # others memory-bound, where each row differs.
    below = range(2, math.ceil(ridge))
    if len(below) < rows(level, 4) - 2:
        raise Reject("too few memory-bound batch sizes")
    cached = (resident_bytes(inputs["hbm_bandwidth"]) - inputs["n_params"] * width) // kv
    if cached < math.ceil(ridge):
        raise Reject("no compute-bound batch caches its sequences beside the weights")
    above = draw.integer(math.ceil(ridge), min(math.ceil(2 * ridge), cached))
    inputs["batches"] = sorted({1, above, *draw.sample(below, rows(level, 4) - 2)})
    return inputs


def _cache_cost_edges(task: Task) -> str | None:
    i = task.inputs
    kv = kv_bytes_per_token(i) * i["seq_len"]
    kinds = set()
    for b in i["batches"]:
        compute = Fraction(2 * i["n_params"] * b, i["peak_flops"])
        memory = Fraction(i["n_params"] * i["weight_bytes"] + b * kv, i["hbm_bandwidth"])
        if near_tie(compute, memory):
            return f"batch {b}: compute against memory sits on the tie"
        kinds.add(compute >= memory)
    if len(kinds) < 2:
        return "every batch has the same bound"
    return None


_L3 = """\
One chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s serves a model of `n_params`
parameters (`weight_bytes` bytes each) and costs `dollars_per_chip_hour` dollars per hour. A decode
step for a batch of B sequences runs the model on one new token per sequence (2 FLOPs per
parameter per token, ignore attention's own FLOPs), reads every weight once and reads each
sequence's KV cache of `seq_len` cached positions: a key and a value of `head_dim` values per
position for each of `layers` layers and `n_kv_heads` KV heads, `kv_bytes` bytes per value.
Compute and reads overlap; the step yields B tokens. For each batch size in `batches`, give the
throughput in tokens per second and the cost in dollars per million generated tokens."""


LEVEL_3 = scaling_level(
    "inference",
    cache_serving_cost,
    _L3,
    '{"rows": [{"batch": <int>, "tokens_per_s": <number>, "dollars_per_million_tokens": <number>}, ...]}'
    "  # one row per entry of `batches`, in order",
    cache_serving_cost_float,
    "ignore_kv_cache",
    sample=sample_cache_cost,
    reject=_cache_cost_edges,
)


def batch_for_price(n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, price_targets):
    """Smallest batch whose cost per million tokens is at most each target (None if none reaches it)."""
    import math
    from fractions import Fraction

    # cost(B) = price * max(2N/peak, N*w/(bw*B)) / 3600 * 1e6 falls with B to the compute-bound floor
    floor_cost = dollars_per_chip_hour * Fraction(2 * n_params, peak_flops) / 3600 * 10**6
    rows = []
    for target in price_targets:
        batch = None
        if target >= floor_cost:  # then only the weight-read term must come under the target
            reads = dollars_per_chip_hour * Fraction(n_params * weight_bytes, hbm_bandwidth) * 10**6
            batch = max(1, math.ceil(reads / (3600 * target)))
        rows.append({"target_dollars_per_million": target, "min_batch": batch})
    return {"rows": rows}


def batch_for_price_float(
    n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, price_targets, mistake=None
):
    known_mistake(mistake, "per_sequence_throughput")

    def cost(b):
        step = max(2.0 * n_params * b / peak_flops, weight_bytes * n_params / hbm_bandwidth)
        tokens = 1 if mistake == "per_sequence_throughput" else b
        return dollars_per_chip_hour / (tokens / step * 3600) * 1e6

    return {
        "rows": [
            {
                "target_dollars_per_million": t,
                "min_batch": smallest_satisfying(lambda b, t=t: cost(b) <= t * (1 + 1e-12), 10**7),
            }
            for t in price_targets
        ]
    }


def sample_price(draw: Draw, level: int) -> dict:
    """Targets from below the compute-bound floor (None) to the batch-1 cost."""
    width = draw.choice((1, 2))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    params = model_on_chip(draw, level, width, bandwidth)
    price = Fraction(draw.integer(50, 1000), 100)
    floor_cost = price * Fraction(2 * params, peak) / 3600 * 10**6
    batch_one = price * Fraction(params * width, bandwidth) / 3600 * 10**6
    targets = set()
    for _ in range(2 + level):
        if draw.chance(1, 4):  # below the compute-bound floor: no batch reaches it
            target = floor_cost * Fraction(draw.integer(50, 99), 100)
        else:
            target = floor_cost + (batch_one - floor_cost) * Fraction(draw.integer(1, 100), 100)
        targets.add(Fraction(math.ceil(target * 10**6), 10**6))
    targets = sorted(targets)
    return {
        "n_params": params,
        "weight_bytes": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
        "dollars_per_chip_hour": price,
        "price_targets": targets,
    }


def _price_edges(task: Task) -> str | None:
    i = task.inputs
    for t in i["price_targets"]:
        bound = (
            i["dollars_per_chip_hour"]
            * Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"])
            * 10**6
            / (3600 * t)
        )
        if near_integer(bound) or near_tie(
            t, i["dollars_per_chip_hour"] * Fraction(2 * i["n_params"], i["peak_flops"]) / 3600 * 10**6
        ):
            return f"target {t}: the batch bound sits on an integer or the target on the floor"
    return None


PRICE_L4 = """\
One chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s serves a model of `n_params`
parameters (`weight_bytes` bytes each) and costs `dollars_per_chip_hour` dollars per hour. A decode
step for a batch of B sequences runs the model on one new token per sequence (2 FLOPs per
parameter per token), reads every weight from HBM once (ignore the KV cache), takes its roofline
time and yields B tokens. For each target in `price_targets` (dollars per million generated
tokens), give the smallest batch whose cost is at most the target, or None if no batch reaches
it."""


LEVEL_4 = scaling_level(
    "inference",
    batch_for_price,
    PRICE_L4,
    '{"rows": [{"target_dollars_per_million": <number>, "min_batch": <int> | None}, ...]}'
    "  # one row per target, in order",
    batch_for_price_float,
    "per_sequence_throughput",
    sample=sample_price,
    reject=_price_edges,
)


def cheapest_chip(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, chip_types, max_step_s, seq_lens
):
    """Per context length: the chip type and batch of the lowest price per million tokens. For a
    type the price per token, price * step(B) / B, falls with B while the step is memory-bound
    and is flat once compute-bound, so B is the largest allowed or the first compute-bound
    batch; ties: the earlier type, then the smaller batch."""
    import math
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        kv = 2 * layers * n_kv_heads * head_dim * kv_bytes * seq_len
        best = None
        for chip in chip_types:
            token = Fraction(2 * n_params, chip["peak_flops"])
            reads, per_seq = (
                Fraction(n_params * weight_bytes, chip["hbm_bandwidth"]),
                Fraction(kv, chip["hbm_bandwidth"]),
            )
            by_memory = (chip["hbm_bytes"] - n_params * weight_bytes) // kv
            cap = min(by_memory, math.floor(max_step_s / token), math.floor((max_step_s - reads) / per_seq))
            if cap < 1:
                continue
            batch = cap
            if token > per_seq:  # compute-bound from reads / (token - per_seq) on
                batch = min(cap, max(1, math.ceil(reads / (token - per_seq))))
            step = max(token * batch, reads + per_seq * batch)
            price = Fraction(chip["dollars_per_hour"]) / 3600 * step / batch * 10**6
            if best is None or price < best[2]:
                best = (chip["name"], batch, price)
        if best is None:
            rows.append({"seq_len": seq_len, "chip": None, "batch": None, "dollars_per_million_tokens": None})
        else:
            rows.append(
                {"seq_len": seq_len, "chip": best[0], "batch": best[1], "dollars_per_million_tokens": best[2]}
            )
    return {"rows": rows}


def cheapest_chip_float(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    chip_types,
    max_step_s,
    seq_lens,
    mistake=None,
):
    """Per type, the largest allowed batch by bisection, and the first batch whose price per
    token equals its price (the plateau) by bisection; then the cheapest in floats."""
    known_mistake(mistake, "ignore_kv_cache")
    out = []
    for s in seq_lens:
        kv = 0.0 if mistake == "ignore_kv_cache" else 2.0 * s * layers * n_kv_heads * head_dim * kv_bytes
        found = []
        for c in chip_types:

            def step(b, c=c, kv=kv):
                return max(
                    2.0 * n_params * b / c["peak_flops"],
                    (float(n_params) * weight_bytes + b * kv) / c["hbm_bandwidth"],
                )

            def allowed(b, c=c, kv=kv, step=step):
                return (
                    step(b) <= max_step_s * (1 + 1e-13) and n_params * weight_bytes + b * kv <= c["hbm_bytes"]
                )

            if not allowed(1):
                continue
            low, high = 1, 2
            while allowed(high) and high < 2**40:
                low, high = high, 2 * high
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if allowed(mid) else (low, mid)
            target = step(low) / low
            lo, hi = 0, low  # the first batch as cheap per token as the largest
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if step(mid) / mid <= target * (1 + 1e-12) else (mid, hi)
            found.append(((c["name"], hi), c["dollars_per_hour"] * step(hi) / hi / 3600 * 1e6))
        if not found:
            out.append({"seq_len": s, "chip": None, "batch": None, "dollars_per_million_tokens": None})
            continue
        low_price = min(v for _, v in found)
        (name, b), v = next((k, v) for k, v in found if v <= low_price * (1 + 1e-12))
        out.append({"seq_len": s, "chip": name, "batch": b, "dollars_per_million_tokens": v})
    return {"rows": out}


def _chip_with_hbm(draw: Draw, level: int) -> dict:
    """A chip's peak, HBM bandwidth and HBM capacity as one real part pairs them."""
    hbm = hbm_capacity(draw, level)
    return {**chip_for_capacity(draw, level, hbm), "hbm_bytes": hbm}


def sample_cheapest(draw: Draw, level: int) -> dict:
    """Two or three chip types (one fast and dear, others slower and cheaper, HBM sizes apart);
    context lengths over a factor of 32, so the HBM binds long contexts and the plateau or the
    latency limit the short ones."""
    width = value_bytes(draw, level, (1, 2))
    types = [
        {
            "name": name,
            **_chip_with_hbm(draw, level),
            "dollars_per_hour": _price(draw),
        }
        for name in letters("chip", draw.integer(2, 3))
    ]
    # The model leaves every type at least 2 GB for the caches (the HBM is real; the model fits it).
    smallest = min(t["hbm_bytes"] for t in types)
    params = n_params_between(draw, 3, 0, Fraction(smallest - 2 * 10**9, width))
    weights = params * width
    slowest = max(Fraction(weights, t["hbm_bandwidth"]) for t in types)
    exponents = sorted(draw.sample(range(7, 18), rows(level, 1) - 1))
    if exponents[-1] - exponents[0] < 5:
        raise Reject("context lengths too close together")
    return {
        "n_params": params,
        "weight_bytes": width,
        **_shape(draw, level),
        "chip_types": types,
        "max_step_s": Fraction(math.ceil(slowest * Fraction(draw.integer(110, 400), 100) * 10**6), 10**6),
        "seq_lens": [2**e - draw.integer(0, 2 ** (e - 2)) for e in exponents],
    }


def _cheapest_rules(task: Task) -> str | None:
    i = task.inputs
    found = task.expected["rows"]
    if 2 * sum(row["chip"] is None for row in found) > len(found):
        return "more than half of the rows are None"
    if len({row["chip"] for row in found if row["chip"] is not None}) < 2:
        return "the same chip type for every context length"
    for row in found:
        if row["chip"] is None:
            continue
        kv = kv_bytes_per_token(i) * row["seq_len"]
        prices = []
        for c in i["chip_types"]:
            token = Fraction(2 * i["n_params"], c["peak_flops"])
            reads, per_seq = (
                Fraction(i["n_params"] * i["weight_bytes"], c["hbm_bandwidth"]),
                Fraction(kv, c["hbm_bandwidth"]),
            )
            bounds = [
                Fraction(c["hbm_bytes"] - i["n_params"] * i["weight_bytes"], kv),
                i["max_step_s"] / token,
                (i["max_step_s"] - reads) / per_seq,
            ]
            if token > per_seq:
                bounds.append(reads / (token - per_seq))
            if any(b > 0 and near_integer(b) for b in bounds):
                return f"context {row['seq_len']}, {c['name']}: a batch bound sits on an integer"
            one = cheapest_chip(**{**i, "chip_types": [c], "seq_lens": [row["seq_len"]]})["rows"][0]
            if one["chip"] is not None:
                prices.append(one["dollars_per_million_tokens"])
                if one["batch"] > 20_000:
                    return "a batch above 20000"
        prices.sort()
        if len(prices) > 1 and (prices[0] == prices[1] or near_tie(prices[0], prices[1])):
            return f"context {row['seq_len']}: two chip types within 1e-9 in price"
    return None


_L5 = """\
A model of `n_params` parameters (`weight_bytes` bytes each) is served on one chip of a type you
choose from `chip_types` (peak FLOP/s, HBM bytes/s, HBM capacity in bytes, dollars per hour). A
decode step for a batch of B sequences runs the model on one new token per sequence (2 FLOPs per
parameter per token, ignore attention's own FLOPs), reads every weight once and reads each
sequence's KV cache: a key and a value of `head_dim` values per cached position for each of
`layers` layers and `n_kv_heads` KV heads, `kv_bytes` bytes per value. Compute and reads overlap
(the step takes the longer of the two); the step yields B tokens. Every step must take at most
`max_step_s` seconds, and the chip's HBM must hold the weights plus every sequence's cache. For
each context length in `seq_lens` (the cached positions of every sequence), give the chip type
and the integer batch B >= 1 of the lowest cost in dollars per million generated tokens (on a
tie, the type listed first, then the smaller batch) and that cost; None for all three if no type
and batch are allowed."""


LEVEL_5 = scaling_level(
    "inference",
    cheapest_chip,
    _L5,
    '{"rows": [{"seq_len": <int>, "chip": <str> | None, "batch": <int> | None, '
    '"dollars_per_million_tokens": <number> | None}, ...]}  # one row per entry of `seq_lens`, in order',
    cheapest_chip_float,
    "ignore_kv_cache",
    sample=sample_cheapest,
    reject=_cheapest_rules,
    varying=("rows[].chip",),
)


SERVING_COST = five_levels(
    "serving_cost",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the step described; L3: the KV cache read each step derived from the attention "
    "shape, batches on both sides of the compute-bound one; L4: the smallest batch under each "
    "price target (None below the compute-bound floor); L5: the chip type and batch of the "
    "lowest price per context length under a step-latency limit and each type's HBM (the "
    "HBM, the limit or the compute-bound plateau sets each type's batch; the cheapest type "
    "changes with the context)",
    branches=(Branch("none", some_none, Fraction(1, 8), (4,)),),
)
