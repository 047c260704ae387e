"""Levels 2, 3 and 5 of kv_read_share: the KV heads derived from grouped-query attention (L2);
the roofline of the decode step with the KV cache, its bound changing between cases (L3); the
longest context whose KV cache stays under a share of the bytes read once most layers attend
over a sliding window only (L5: the KV cache grows at two rates, below and above the window, and
the answer lies on either side of it across the rows; None when even one position is too much).
References are self-contained; the ``*_float`` twins take another route in floats and can
reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    chip_inputs,
    hbm_bandwidth,
    jitter,
    n_params,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer, tie_edge
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def grouped_kv_share(
    n_params, weight_bytes, layers, n_heads, group_size, head_dim, kv_bytes, hbm_bandwidth, cases
):
    """kv_read_share with n_heads / group_size KV heads (each shared by group_size query heads)."""
    from fractions import Fraction

    weights = n_params * weight_bytes
    per_token = 2 * layers * (n_heads // group_size) * head_dim * kv_bytes
    rows = []
    for case in cases:
        kv = per_token * case["seq_len"] * case["batch"]
        rows.append(
            {
                "batch": case["batch"],
                "seq_len": case["seq_len"],
                "kv_bytes": Fraction(kv),
                "kv_share": Fraction(kv, kv + weights),
                "step_time_s": Fraction(kv + weights, hbm_bandwidth),
            }
        )
    return {"rows": rows}


def kv_roofline(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, peak_flops, hbm_bandwidth, cases
):
    """Per case: 2 N B FLOPs against the weights plus B caches of seq_len positions read."""
    from fractions import Fraction

    per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for case in cases:
        batch = case["batch"]
        compute = Fraction(2 * n_params * batch, peak_flops)
        memory = Fraction(n_params * weight_bytes + per_token * case["seq_len"] * batch, hbm_bandwidth)
        step = max(compute, memory)
        rows.append(
            {
                "batch": batch,
                "seq_len": case["seq_len"],
                "tokens_per_s": batch / step,
                "bound": "compute" if compute >= memory else "memory",
            }
        )
    return {"rows": rows}


def windowed_context(
    n_params,
    weight_bytes,
    layers,
    global_every,
    window,
    n_kv_heads,
    head_dim,
    kv_bytes,
    batches,
    max_kv_share,
):
    """Per batch: the longest context S whose KV cache (global layers hold S positions, the
    others min(S, window)) is at most max_kv_share of all bytes read; None if S = 1 is too much."""
    import math
    from fractions import Fraction

    weights = n_params * weight_bytes
    per_position = 2 * n_kv_heads * head_dim * kv_bytes  # one layer
    global_layers = layers // global_every
    allowed = Fraction(max_kv_share, 1 - max_kv_share) * weights  # kv <= f / (1 - f) * weights
    rows = []
    for batch in batches:
        per_step = batch * per_position  # bytes per position per layer for the batch
        if layers * per_step > allowed:
            rows.append({"batch": batch, "max_seq_len": None})
            continue
        if layers * per_step * window <= allowed:  # beyond the window only the global layers grow
            longest = window + math.floor((allowed - layers * per_step * window) / (global_layers * per_step))
        else:
            longest = math.floor(allowed / (layers * per_step))
        rows.append({"batch": batch, "max_seq_len": longest})
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def grouped_kv_share_float(
    n_params,
    weight_bytes,
    layers,
    n_heads,
    group_size,
    head_dim,
    kv_bytes,
    hbm_bandwidth,
    cases,
    mistake=None,
):
    known_mistake(mistake, "query_heads_cached")
    heads = n_heads if mistake == "query_heads_cached" else n_heads / group_size
    out = []
    for c in cases:
        kv = 2.0 * c["batch"] * c["seq_len"] * heads * head_dim * kv_bytes * layers
        weights = float(n_params) * weight_bytes
        out.append(
            {
                "batch": c["batch"],
                "seq_len": c["seq_len"],
                "kv_bytes": kv,
                "kv_share": 1 / (1 + weights / kv),
                "step_time_s": kv / hbm_bandwidth + weights / hbm_bandwidth,
            }
        )
    return {"rows": out}


def kv_roofline_float(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    peak_flops,
    hbm_bandwidth,
    cases,
    mistake=None,
):
    known_mistake(mistake, "ignore_kv_cache")
    out = []
    for c in cases:
        b = c["batch"]
        kv = (
            0.0
            if mistake == "ignore_kv_cache"
            else 2.0 * b * c["seq_len"] * layers * n_kv_heads * head_dim * kv_bytes
        )
        steps_memory = hbm_bandwidth / (float(n_params) * weight_bytes + kv)  # steps per second
        steps_compute = peak_flops / (2.0 * n_params * b)
        memory = steps_memory < steps_compute
        out.append(
            {
                "batch": b,
                "seq_len": c["seq_len"],
                "tokens_per_s": b * min(steps_memory, steps_compute),
                "bound": "memory" if memory else "compute",
            }
        )
    return {"rows": out}


def windowed_context_float(
    n_params,
    weight_bytes,
    layers,
    global_every,
    window,
    n_kv_heads,
    head_dim,
    kv_bytes,
    batches,
    max_kv_share,
    mistake=None,
):
    """Bisection on the share, layer by layer."""
    known_mistake(mistake, "every_layer_global")
    weights = float(n_params) * weight_bytes
    out = []
    for b in batches:

        def share(s, b=b):
            kv = 0.0
            for layer in range(1, layers + 1):
                is_global = mistake == "every_layer_global" or layer % global_every == 0
                kv += 2.0 * b * n_kv_heads * head_dim * kv_bytes * (s if is_global else min(s, window))
            return kv / (kv + weights)

        limit = max_kv_share * (1 + 1e-13)
        if share(1) > limit:
            out.append({"batch": b, "max_seq_len": None})
            continue
        low, high = 1, 2
        while share(high) <= limit:
            if high > 2**50:
                break
            low, high = high, 2 * high
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if share(mid) <= limit else (low, mid)
        out.append({"batch": b, "max_seq_len": low})
    return {"rows": out}


# ---------------------------------------------------------------- samplers and rules


def sample_grouped(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    group = draw.choice((2, 4, 8))
    cases = [
        {
            "batch": draw.integer(1, 32 * level),
            "seq_len": 1024 * draw.integer(1, 16 * 2**level) - jitter(draw, level, 1024),
        }
        for _ in range(rows(level, 3))
    ]
    return {
        "n_params": n_params(draw, level),
        "weight_bytes": value_bytes(draw, level, (1, 2)),
        "layers": draw.integer(8, 40 * level),
        "n_heads": shape["n_kv_heads"] * group * draw.choice((1, 2)),
        "group_size": group,
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
        "hbm_bandwidth": hbm_bandwidth(draw, level),
        "cases": cases,
    }


def sample_roofline(draw: Draw, level: int) -> dict:
    """Batches on both sides of the one whose step turns compute-bound at a short context."""
    shape = attention_shape(draw, level)
    inputs = {
        "n_params": n_params(draw, level),
        "weight_bytes": value_bytes(draw, level, (1, 2)),
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
        **chip_inputs(draw, level),
        "cases": [],
    }
    ridge = Fraction(inputs["weight_bytes"] * inputs["peak_flops"], 2 * inputs["hbm_bandwidth"])  # no cache
    cases = []
    for k in range(rows(level, 3)):
        if k % 2 == 0:  # short context, above the ridge: compute-bound
            cases.append(
                {
                    "batch": math.ceil(ridge * Fraction(draw.integer(120, 400), 100)),
                    "seq_len": draw.integer(1, 256),
                }
            )
        else:
            cases.append(
                {"batch": draw.integer(1, math.ceil(2 * ridge)), "seq_len": 1024 * draw.integer(1, 64)}
            )
    inputs["cases"] = draw.shuffled(cases)
    return inputs


def _roofline_edges(task: Task) -> str | None:
    i = task.inputs
    per_token = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["kv_bytes"]
    for c in i["cases"]:
        problem = tie_edge(
            f"case {c}: compute against memory",
            Fraction(2 * i["n_params"] * c["batch"], i["peak_flops"]),
            Fraction(
                i["n_params"] * i["weight_bytes"] + per_token * c["seq_len"] * c["batch"], i["hbm_bandwidth"]
            ),
        )
        if problem:
            return problem
    return None


def sample_windowed(draw: Draw, level: int) -> dict:
    """The share is drawn so that the middle batch's answer lies near the window; batches span a
    factor of 16 or more, so some answers fall below the window and some above; one instance in
    five replaces the largest batch by one that cannot cache a single position (a None row)."""
    shape = attention_shape(draw, level)
    inputs = {
        "n_params": n_params(draw, level),
        "weight_bytes": value_bytes(draw, level, (1, 2)),
        "layers": draw.integer(12, 96),
        "global_every": draw.integer(2, 8),
        "window": 256 * draw.integer(1, 32) - jitter(draw, level, 256),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
        "batches": [],
        "max_kv_share": Fraction(0),
    }
    exponents = sorted(draw.sample(range(0, 11), rows(level, 1)))
    if exponents[-1] - exponents[0] < 4:
        raise Reject("batches too close together")
    batches = [2**e + draw.integer(0, 2**e - 1) for e in exponents]
    inputs["batches"] = batches
    weights = inputs["n_params"] * inputs["weight_bytes"]
    per_position = 2 * inputs["n_kv_heads"] * inputs["head_dim"] * inputs["kv_bytes"]
    middle = batches[len(batches) // 2]
    # kv at the window for the middle batch, times a factor around 1
    kv = inputs["layers"] * per_position * middle * inputs["window"] * Fraction(draw.integer(30, 300), 100)
    share = kv / (kv + weights)
    inputs["max_kv_share"] = Fraction(math.ceil(share * 10**6), 10**6)
    if not 0 < inputs["max_kv_share"] < 1:
        raise Reject("a share outside (0, 1)")
    if draw.chance(1, 5):  # the largest batch cannot cache one position (a None row)
        f = inputs["max_kv_share"]
        one = f / (1 - f) * weights / (inputs["layers"] * per_position)  # the most sequences at S = 1
        inputs["batches"] = batches[:-1] + [math.floor(one) + draw.integer(1, max(1, math.floor(one)))]
    return inputs


def _windowed_rules(task: Task) -> str | None:
    i = task.inputs
    f = i["max_kv_share"]
    allowed = f / (1 - f) * i["n_params"] * i["weight_bytes"]
    per_position = 2 * i["n_kv_heads"] * i["head_dim"] * i["kv_bytes"]
    g = i["layers"] // i["global_every"]
    sides = set()
    for b, row in zip(i["batches"], task.expected["rows"], strict=True):
        per_step = b * per_position
        for bound in (
            allowed / (i["layers"] * per_step),
            i["window"] + (allowed - i["layers"] * per_step * i["window"]) / (g * per_step),
        ):
            if bound > 0 and near_integer(bound):
                return f"batch {b}: the longest context sits on an integer bound"
        if row["max_seq_len"] is not None:
            sides.add(row["max_seq_len"] > i["window"])
    if len(sides) < 2:
        return "every answer lies on one side of the window"
    if len({row["max_seq_len"] for row in task.expected["rows"]}) < 2:
        return "the same answer for every batch"
    found = task.expected["rows"]
    if 2 * sum(row["max_seq_len"] is None for row in found) > len(found):
        return "more than half of the rows are None"
    return None


def _some_none(task: Task) -> bool:
    return any(None in row.values() for row in task.expected["rows"])


# ---------------------------------------------------------------- levels

_L2 = """\
A decode step of a model with `n_params` parameters (`weight_bytes` bytes each) reads every weight
once plus the whole KV cache of every sequence in the batch. The model uses grouped-query
attention: each of its `layers` layers has `n_heads` query heads, and every `group_size`
consecutive query heads share one key head and one value head of `head_dim` values, cached for
every position at `kv_bytes` bytes per value. For each case in `cases` (batch size and sequence
length, the number of cached positions per sequence), give the KV-cache bytes read per step, the
KV cache's share of all bytes read per step, and the step time in seconds if the step is limited
by reading those bytes at `hbm_bandwidth` bytes/s."""

_L3 = """\
A decode step generates the next token of each of B sequences: it runs the model of `n_params`
parameters on the B new tokens (2 FLOPs per parameter per token, ignore attention's own FLOPs),
reads every weight once (`weight_bytes` bytes each) and reads the whole KV cache of every
sequence: a key and a value of `head_dim` values for each of `layers` layers, `n_kv_heads` KV heads
and each of its `seq_len` cached positions, `kv_bytes` bytes per value. The chip computes at
`peak_flops` FLOP/s and reads HBM at `hbm_bandwidth` bytes/s, the two overlapping. For each case in
`cases` (B and seq_len), give the throughput in tokens per second and whether the step is
"compute"- or "memory"-bound (compute-bound when its compute time is at least its read time)."""

_L5 = """\
A decode step of a model with `n_params` parameters (`weight_bytes` bytes each) reads every weight
once plus the KV cache of every sequence in the batch. The model has `layers` layers, numbered 1
to layers; a layer whose number is a multiple of `global_every` attends over the whole context and
caches every position, every other layer attends over a sliding window and caches only the last
`window` positions (all of them while the context is shorter). A cached position holds, per layer,
a key and a value of `head_dim` values for each of `n_kv_heads` KV heads, `kv_bytes` bytes per
value. For each batch size in `batches` (every sequence with the same context length S, the number
of cached positions), give the longest integer S >= 1 at which the KV cache is at most
`max_kv_share` of all bytes read per step, or None if not even S = 1 is."""

LEVELS = {
    2: Level(
        grouped_kv_share,
        _L2,
        '{"rows": [{"batch": <int>, "seq_len": <int>, "kv_bytes": <number>, "kv_share": <number>, '
        '"step_time_s": <number>}, ...]}  # one row per case, in order',
        grouped_kv_share_float,
        "query_heads_cached",
        sample=sample_grouped,
    ),
    3: Level(
        kv_roofline,
        _L3,
        '{"rows": [{"batch": <int>, "seq_len": <int>, "tokens_per_s": <number>, '
        '"bound": "compute" | "memory"}, ...]}  # one row per case, in order',
        kv_roofline_float,
        "ignore_kv_cache",
        sample=sample_roofline,
        reject=_roofline_edges,
        varying=("rows[].bound",),
    ),
    5: Level(
        windowed_context,
        _L5,
        '{"rows": [{"batch": <int>, "max_seq_len": <int> | None}, ...]}  # one row per batch, in order',
        windowed_context_float,
        "every_layer_global",
        sample=sample_windowed,
        reject=_windowed_rules,
    ),
}

BRANCHES = (Branch("none", _some_none, Fraction(1, 10), (4, 5)),)

__all__ = ["BRANCHES", "LEVELS", "grouped_kv_share", "kv_roofline", "windowed_context"]
