"""The kv_read_share family of inference: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    chip_inputs,
    hbm_bandwidth,
    jitter,
    kv_bytes_per_token,
    model_on_chip,
    n_params,
    require_resident,
    resident_bytes,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, scaling_level, some_none, tie_edge
from exactgrade.domains.scaling.inference.shared import _kv_shape
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def kv_read_share(n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, hbm_bandwidth, cases):
    """Bytes a decode step reads: every weight once plus every sequence's whole KV cache."""
    from fractions import Fraction

    weights = n_params * weight_bytes
    per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
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


def kv_read_share_float(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, hbm_bandwidth, cases, mistake=None
):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for c in cases:
        kv = float(c["batch"] * c["seq_len"]) * kv_bytes * head_dim * n_kv_heads * layers * tensors
        weights = float(weight_bytes) * n_params
        rows.append(
            {
                "batch": c["batch"],
                "seq_len": c["seq_len"],
                "kv_bytes": kv,
                "kv_share": 1 / (1 + weights / kv),
                "step_time_s": kv / hbm_bandwidth + weights / hbm_bandwidth,
            }
        )
    return {"rows": rows}


def sample_kv_read_share(draw: Draw, level: int) -> dict:
    cases = [
        {
            "batch": draw.integer(1, 32 * level),
            "seq_len": 1024 * draw.integer(1, 16 * 2**level) - jitter(draw, level, 1024),
        }
        for _ in range(rows(level, 3))
    ]
    width, shape, bandwidth = (
        value_bytes(draw, level, (1, 2)),
        _kv_shape(draw, level),
        hbm_bandwidth(draw, level),
    )
    n = model_on_chip(draw, level, width, bandwidth)
    per_token = kv_bytes_per_token(shape)
    for case in cases:  # every case's weights and KV cache sit in the chip's HBM
        require_resident(
            f"a batch of {case['batch']} at {case['seq_len']} tokens",
            n * width + case["batch"] * case["seq_len"] * per_token,
            bandwidth,
        )
    return {"n_params": n, "weight_bytes": width, **shape, "hbm_bandwidth": bandwidth, "cases": cases}


LEVEL_1 = scaling_level(
    "inference",
    kv_read_share,
    """\
A decode step of a model with `n_params` parameters (`weight_bytes` bytes each) reads every weight
once plus the whole KV cache of every sequence in the batch: a key and a value of `head_dim`
values for each of `layers` layers, `n_kv_heads` KV heads and `seq_len` cached positions,
`kv_bytes` bytes per value. For each case in `cases` (batch size and sequence length), give the
KV-cache bytes read per step, the KV cache's share of all bytes read per step, and the step time
in seconds if the step is limited by reading those bytes at `hbm_bandwidth` bytes/s.""",
    '{"rows": [{"batch": <int>, "seq_len": <int>, "kv_bytes": <number>, "kv_share": <number>, '
    '"step_time_s": <number>}, ...]}  # one row per case, in order',
    kv_read_share_float,
    "keys_only",
    sample=sample_kv_read_share,
)


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


def _cache_room(inputs: dict) -> int:
    """The HBM bytes left for KV caches beside the weights on a chip of the inputs' bandwidth."""
    return resident_bytes(inputs["hbm_bandwidth"]) - inputs["n_params"] * inputs["weight_bytes"]


def _cached_case(draw: Draw, most_batch: int, most_blocks: int, per_token: int, room: int) -> tuple[int, int]:
    """A batch (at most most_batch) and a count of 1024-position blocks per sequence (at most
    most_blocks) whose KV cache fits room bytes; Reject when not one block does."""
    block = 1024 * per_token
    if room < block:
        raise Reject("not one 1024-position cache fits beside the weights in the chip's HBM")
    batch = draw.integer(1, min(most_batch, room // block))
    return batch, draw.integer(1, min(most_blocks, room // (batch * block)))


def sample_grouped(draw: Draw, level: int) -> dict:
    """A model that fits the chip and cases whose KV caches fit beside it."""
    shape = attention_shape(draw, level)
    group, width, bandwidth = (
        draw.choice((2, 4, 8)),
        value_bytes(draw, level, (1, 2)),
        hbm_bandwidth(draw, level),
    )
    inputs = {
        "n_params": model_on_chip(draw, level, width, bandwidth),
        "weight_bytes": width,
        "layers": draw.integer(8, 40 * level),
        "n_heads": shape["n_kv_heads"] * group * draw.choice((1, 2)),
        "group_size": group,
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
        "hbm_bandwidth": bandwidth,
        "cases": [],
    }
    kv_heads = inputs["n_heads"] // group
    per_token = 2 * inputs["layers"] * kv_heads * inputs["head_dim"] * inputs["kv_bytes"]
    for _ in range(rows(level, 3)):
        batch, blocks = _cached_case(draw, 32 * level, 16 * 2**level, per_token, _cache_room(inputs))
        inputs["cases"].append({"batch": batch, "seq_len": 1024 * blocks - jitter(draw, level, 1024)})
    return inputs


_L2 = """\
A decode step of a model with `n_params` parameters (`weight_bytes` bytes each) reads every weight
once plus the whole KV cache of every sequence in the batch. The model uses grouped-query
attention: each of its `layers` layers has `n_heads` query heads, and every `group_size`
consecutive query heads share one key head and one value head of `head_dim` values, cached for
every position at `kv_bytes` bytes per value. For each case in `cases` (batch size and sequence
length, the number of cached positions per sequence), give the KV-cache bytes read per step, the
KV cache's share of all bytes read per step, and the step time in seconds if the step is limited
by reading those bytes at `hbm_bandwidth` bytes/s."""


LEVEL_2 = scaling_level(
    "inference",
    grouped_kv_share,
    _L2,
    '{"rows": [{"batch": <int>, "seq_len": <int>, "kv_bytes": <number>, "kv_share": <number>, '
    '"step_time_s": <number>}, ...]}  # one row per case, in order',
    grouped_kv_share_float,
    "query_heads_cached",
    sample=sample_grouped,
)


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


def sample_roofline(draw: Draw, level: int) -> dict:
    """Batches on both sides of the one whose step turns compute-bound at a short context, on a
    model that fits the chip with every case's KV cache beside it."""
    shape, width, chip = (
        attention_shape(draw, level),
        value_bytes(draw, level, (1, 2)),
        chip_inputs(draw, level),
    )
    inputs = {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
        **chip,
        "cases": [],
    }
    per_token = kv_bytes_per_token(inputs)
    room = _cache_room(inputs)
    ridge = Fraction(inputs["weight_bytes"] * inputs["peak_flops"], 2 * inputs["hbm_bandwidth"])  # no cache
    cases = []
    for k in range(rows(level, 3)):
        if k % 2 == 0:  # short context, above the ridge: compute-bound
            batch = math.ceil(ridge * Fraction(draw.integer(120, 400), 100))
            if batch * per_token > room:
                raise Reject(f"not one cached position of a batch of {batch} fits beside the weights")
            cases.append({"batch": batch, "seq_len": draw.integer(1, min(256, room // (batch * per_token)))})
        else:
            batch, blocks = _cached_case(draw, math.ceil(2 * ridge), 64, per_token, room)
            cases.append({"batch": batch, "seq_len": 1024 * blocks})
    inputs["cases"] = draw.shuffled(cases)
    return inputs


def _roofline_edges(task: Task) -> str | None:
    i = task.inputs
    per_token = kv_bytes_per_token(i)
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


_L3 = """\
A decode step generates the next token of each of B sequences: it runs the model of `n_params`
parameters on the B new tokens (2 FLOPs per parameter per token, ignore attention's own FLOPs),
reads every weight once (`weight_bytes` bytes each) and reads the whole KV cache of every
sequence: a key and a value of `head_dim` values for each of `layers` layers, `n_kv_heads` KV heads
and each of its `seq_len` cached positions, `kv_bytes` bytes per value. The chip computes at
`peak_flops` FLOP/s and reads HBM at `hbm_bandwidth` bytes/s, the two overlapping. For each case in
`cases` (B and seq_len), give the throughput in tokens per second and whether the step is
"compute"- or "memory"-bound (compute-bound when its compute time is at least its read time)."""


LEVEL_3 = scaling_level(
    "inference",
    kv_roofline,
    _L3,
    '{"rows": [{"batch": <int>, "seq_len": <int>, "tokens_per_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per case, in order',
    kv_roofline_float,
    "ignore_kv_cache",
    sample=sample_roofline,
    reject=_roofline_edges,
    varying=("rows[].bound",),
)


def longest_context_for_share(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches, max_kv_share
):
    """Longest context at which the KV cache is at most the given share of the bytes a step reads."""
    import math
    from fractions import Fraction

    weights = n_params * weight_bytes
    per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for batch in batches:
        # kv / (kv + weights) <= f  <=>  kv <= f / (1 - f) * weights
        longest = math.floor(max_kv_share / (1 - max_kv_share) * weights / Fraction(per_token * batch))
        rows.append({"batch": batch, "max_seq_len": longest if longest >= 1 else None})
    return {"rows": rows}


def longest_context_for_share_float(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches, max_kv_share, mistake=None
):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for b in batches:
        s = math.floor(
            n_params
            * weight_bytes
            * max_kv_share
            / (1 - max_kv_share)
            / (tensors * layers * n_kv_heads * head_dim * kv_bytes * b)
        )
        rows.append({"batch": b, "max_seq_len": s if s >= 1 else None})
    return {"rows": rows}


def sample_share(draw: Draw, level: int) -> dict:
    """A quarter of the instances set the share so low that the largest batch cannot cache even
    one position (None there)."""
    shape = attention_shape(draw, level)
    inputs = {
        "n_params": n_params(draw, level),
        "weight_bytes": draw.choice((1, 2)),
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": draw.choice((1, 2)),
        "batches": sorted(draw.sample(range(1, 1025), 2 + level)),
        "max_kv_share": Fraction(draw.integer(1, 90), 100),
    }
    if draw.chance(1, 4):
        largest = (
            2
            * inputs["layers"]
            * inputs["n_kv_heads"]
            * inputs["head_dim"]
            * inputs["kv_bytes"]
            * inputs["batches"][-1]
        )
        weights = inputs["n_params"] * inputs["weight_bytes"]
        inputs["max_kv_share"] = Fraction(largest, 2 * weights + largest)  # half a position at that batch
    return inputs


def _share_edges(task: Task) -> str | None:
    i = task.inputs
    per_token = kv_bytes_per_token(i)
    f = i["max_kv_share"]
    for b in i["batches"]:
        if near_integer(f / (1 - f) * i["n_params"] * i["weight_bytes"] / (per_token * b)):
            return f"batch {b}: the longest context sits on an integer"
    return None


_SHARE = """\
A decode step of a model with `n_params` parameters (`weight_bytes` bytes each) reads every weight
once plus the whole KV cache of every sequence in the batch: a key and a value of `head_dim`
values for each of `layers` layers, `n_kv_heads` KV heads and every cached position, `kv_bytes`
bytes per value. For each batch size in `batches`, give the longest integer number of cached
positions per sequence at which the KV cache is at most `max_kv_share` of all bytes read per step,
or None if not even one position is."""


LEVEL_4 = scaling_level(
    "inference",
    longest_context_for_share,
    _SHARE,
    '{"rows": [{"batch": <int>, "max_seq_len": <int> | None}, ...]}  # one row per batch, in order',
    longest_context_for_share_float,
    "keys_only",
    sample=sample_share,
    reject=_share_edges,
)


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


LEVEL_5 = scaling_level(
    "inference",
    windowed_context,
    _L5,
    '{"rows": [{"batch": <int>, "max_seq_len": <int> | None}, ...]}  # one row per batch, in order',
    windowed_context_float,
    "every_layer_global",
    sample=sample_windowed,
    reject=_windowed_rules,
)


BRANCHES = (Branch("none", some_none, Fraction(1, 10), (4, 5)),)


KV_READ_SHARE = five_levels(
    "kv_read_share",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the KV heads derived from grouped-query attention; L3: the decode step's roofline "
    "with the cache read, compute- or memory-bound per case; L4: the longest context per "
    "batch under a KV share (None); L5: the same once most layers cache only a sliding "
    "window: the cache grows at two rates, the answers fall on both sides of the window "
    "(None)",
    branches=BRANCHES,
)
