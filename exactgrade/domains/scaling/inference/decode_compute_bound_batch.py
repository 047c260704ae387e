"""The decode_compute_bound_batch family of inference: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    chip_for_capacity,
    chip_inputs,
    hbm_capacity,
    jitter,
    kv_bytes_per_token,
    model_on_chip,
    n_params_between,
    require_resident,
    resident_bytes,
    rows,
    sorted_sample,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    rounding_edge,
    scaling_level,
    some_none,
    tie_edge,
)
from exactgrade.domains.scaling.inference.shared import _kv_shape
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def decode_compute_bound_batch(
    n_params, weight_bytes, kv_bytes_per_token, seq_lens, peak_flops, hbm_bandwidth
):
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


def decode_compute_bound_batch_float(
    n_params, weight_bytes, kv_bytes_per_token, seq_lens, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "ignore_kv_cache")
    rows = []
    for s in seq_lens:
        kv = 0 if mistake == "ignore_kv_cache" else s * kv_bytes_per_token
        # per-sequence: compute 2N/peak vs its own KV read; shared weight read amortised over the batch
        margin = 2.0 * n_params * hbm_bandwidth - kv * peak_flops
        batch = math.ceil(n_params * weight_bytes * peak_flops / margin) if margin > 0 else None
        rows.append({"seq_len": s, "min_batch": batch})
    return {"rows": rows}


def sample_decode_compute_bound_batch(draw: Draw, level: int) -> dict:
    shape = _kv_shape(draw, level)
    per_token = kv_bytes_per_token(shape)
    chip, width = chip_inputs(draw, level), value_bytes(draw, level, (1, 2))
    inputs = {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        "kv_bytes_per_token": per_token,
        **chip,
    }
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
    for row in decode_compute_bound_batch(**{k: inputs[k] for k in _INPUTS})["rows"]:
        if row["min_batch"] is not None:  # the batch's weights and KV cache sit in the chip's HBM
            resident = inputs["n_params"] * width + row["min_batch"] * row["seq_len"] * per_token
            require_resident(
                f"the weights and KV cache at batch {row['min_batch']}", resident, inputs["hbm_bandwidth"]
            )
    return {k: inputs[k] for k in _INPUTS}


_INPUTS = ("n_params", "weight_bytes", "kv_bytes_per_token", "seq_lens", "peak_flops", "hbm_bandwidth")


def _compute_bound_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for seq_len in i["seq_lens"]:
        per_sequence_compute = Fraction(2 * i["n_params"], i["peak_flops"])
        per_sequence_read = Fraction(seq_len * i["kv_bytes_per_token"], i["hbm_bandwidth"])
        problem = tie_edge(
            f"seq_len {seq_len}: a sequence's compute against its KV read",
            per_sequence_compute,
            per_sequence_read,
        )
        slope = per_sequence_compute - per_sequence_read
        if problem is None and slope > 0:
            problem = rounding_edge(
                f"seq_len {seq_len}: the batch bound",
                Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"]) / slope,
            )
        if problem:
            return problem
    return None


_COMPUTE_BOUND_ROW = (
    '{"rows": [{"seq_len": <int>, "min_batch": <int> | None}, ...]}  # one row per entry of `seq_lens`'
)


LEVEL_1 = scaling_level(
    "inference",
    decode_compute_bound_batch,
    """\
A decode step with batch B of sequences that each have `seq_len` cached tokens costs
2*n_params*B FLOPs and reads all weights once (n_params * weight_bytes bytes) plus every
sequence's KV cache (B * seq_len * kv_bytes_per_token bytes). On a chip with `peak_flops` FLOP/s
and `hbm_bandwidth` bytes/s, give for each length in `seq_lens` the smallest integer batch B at
which the step is compute-bound (FLOPs / peak_flops >= bytes / hbm_bandwidth), or None if no batch
size makes it compute-bound.""",
    _COMPUTE_BOUND_ROW,
    decode_compute_bound_batch_float,
    "ignore_kv_cache",
    sample=sample_decode_compute_bound_batch,
    reject=_compute_bound_batch_edges,
)


STEP = """\
A decode step generates the next token of each of B sequences. It runs the model of `n_params`
parameters on the B new tokens (2 FLOPs per parameter per token), reads every weight from HBM once
(`weight_bytes` bytes each) and reads each sequence's own KV cache, which holds every earlier token
of that sequence."""


L2_QUESTION = (
    STEP
    + """ Each cached token of a sequence takes `kv_bytes_per_token` bytes of KV cache.
On a chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s, give for each length in `seq_lens`
(cached tokens per sequence) the smallest integer batch B at which the step is compute-bound, or
None if no batch size makes it compute-bound."""
)


LEVEL_2 = scaling_level(
    "inference",
    decode_compute_bound_batch,
    L2_QUESTION,
    _COMPUTE_BOUND_ROW,
    decode_compute_bound_batch_float,
    "ignore_kv_cache",
    reject=_compute_bound_batch_edges,
    sample=sample_decode_compute_bound_batch,
)


def compute_bound_throughput(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, seq_lens, peak_flops, hbm_bandwidth
):
    """The smallest compute-bound batch with the KV cache derived, and its step time."""
    import math
    from fractions import Fraction

    kv_per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for seq_len in seq_lens:
        slope = Fraction(2 * n_params, peak_flops) - Fraction(seq_len * kv_per_token, hbm_bandwidth)
        if slope <= 0:
            rows.append({"seq_len": seq_len, "min_batch": None, "step_time_s": None})
            continue
        batch = math.ceil(Fraction(n_params * weight_bytes, hbm_bandwidth) / slope)
        rows.append(
            {
                "seq_len": seq_len,
                "min_batch": batch,
                "step_time_s": Fraction(2 * n_params * batch, peak_flops),
            }
        )  # compute-bound here
    return {"rows": rows}


def _largest(ok, high):
    """The largest b in [1, high] with ok(b) (ok monotone, true then false), or 0."""
    if high < 1 or not ok(1):
        return 0
    low = 1
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if ok(middle) else (low, middle - 1)
    return low


def compute_bound_throughput_float(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    seq_lens,
    peak_flops,
    hbm_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "ignore_kv_cache")
    per_token = 0.0 if mistake == "ignore_kv_cache" else 2.0 * head_dim * n_kv_heads * layers * kv_bytes
    rows = []
    for s in seq_lens:
        if per_token * s / hbm_bandwidth >= 2.0 * n_params / peak_flops:
            rows.append({"seq_len": s, "min_batch": None, "step_time_s": None})
            continue

        def memory_bound(b, s=s):
            return (
                2.0 * b * n_params / peak_flops
                < (weight_bytes * n_params + b * s * per_token) / hbm_bandwidth
            )

        b = _largest(memory_bound, 10**15) + 1
        rows.append({"seq_len": s, "min_batch": b, "step_time_s": b * (2.0 * n_params) / peak_flops})
    return {"rows": rows}


def _decode_kv_shape(draw: Draw) -> dict:
    return {
        "layers": draw.integer(16, 96),
        "n_kv_heads": draw.choice((1, 2, 4, 8, 16)),
        "head_dim": draw.choice((64, 80, 96, 128, 256)),
        "kv_bytes": draw.choice((1, 2)),
    }


def sample_throughput(draw: Draw, level: int) -> dict:
    """A model that fits the chip, and lengths whose smallest compute-bound batch keeps its KV cache
    beside the weights in the chip's HBM; half the instances also reach past the length at which
    no batch is compute-bound (None)."""
    shape, width, chip = _decode_kv_shape(draw), draw.choice((1, 2)), chip_inputs(draw, level)
    inputs = {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        **shape,
        **chip,
    }
    per_token = kv_bytes_per_token(shape)
    limit = Fraction(2 * inputs["n_params"] * inputs["hbm_bandwidth"], inputs["peak_flops"] * per_token)
    room = resident_bytes(inputs["hbm_bandwidth"]) - inputs["n_params"] * width

    def resident(s: int) -> bool:  # the smallest compute-bound batch at length s caches beside the weights
        row = compute_bound_throughput(**inputs, seq_lens=[s])["rows"][0]
        return row["min_batch"] * s * per_token <= room

    fit = _largest(resident, math.ceil(limit) - 1)
    if fit < 8:
        raise Reject("no eight lengths whose compute-bound batch fits the chip's HBM")
    count, past = 2 + level, 0
    if draw.chance(1, 2) and math.floor(2 * limit) >= math.ceil(limit) + count:
        past = draw.integer(1, count - 1)  # lengths at which no batch is compute-bound
    lens = sorted_sample(draw, 1, fit, count - past)
    inputs["seq_lens"] = lens + (
        sorted_sample(draw, math.ceil(limit), math.floor(2 * limit), past) if past else []
    )
    return inputs


def _throughput_edges(task: Task) -> str | None:
    i = task.inputs
    per_token = kv_bytes_per_token(i)
    for s in i["seq_lens"]:
        a, b = Fraction(2 * i["n_params"], i["peak_flops"]), Fraction(s * per_token, i["hbm_bandwidth"])
        if near_tie(a, b):
            return f"seq_len {s}: a sequence's compute sits on its KV read"
        if a > b and near_integer(Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"]) / (a - b)):
            return f"seq_len {s}: the batch bound sits on an integer"
    return None


_L3 = (
    STEP
    + """ The KV cache holds, per cached token, a key and a value vector of `head_dim` values
for each of `layers` layers and `n_kv_heads` KV heads, `kv_bytes` bytes per value. On a chip with
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s, for each length in `seq_lens` (cached tokens
per sequence), take the smallest integer batch at which the step is compute-bound and give it with
the step time in seconds at that batch; None for both if no batch size makes the step
compute-bound."""
)


LEVEL_3 = scaling_level(
    "inference",
    compute_bound_throughput,
    _L3,
    '{"rows": [{"seq_len": <int>, "min_batch": <int> | None, "step_time_s": <number> | None}, ...]}'
    "  # one row per entry of `seq_lens`, in order",
    compute_bound_throughput_float,
    "ignore_kv_cache",
    sample=sample_throughput,
    reject=_throughput_edges,
)


def largest_decode_batch(
    n_params, weight_bytes, kv_bytes_per_token, seq_lens, hbm_bytes, peak_flops, hbm_bandwidth
):
    """The largest batch whose weights and KV caches fit, its throughput and its bound."""
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        batch = (hbm_bytes - n_params * weight_bytes) // (seq_len * kv_bytes_per_token)
        if batch < 1:
            rows.append({"seq_len": seq_len, "max_batch": None, "tokens_per_s": None, "bound": None})
            continue
        compute_s = Fraction(2 * n_params * batch, peak_flops)
        memory_s = Fraction(n_params * weight_bytes + batch * seq_len * kv_bytes_per_token, hbm_bandwidth)
        rows.append(
            {
                "seq_len": seq_len,
                "max_batch": batch,
                "tokens_per_s": batch / max(compute_s, memory_s),
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def largest_decode_batch_float(
    n_params, weight_bytes, kv_bytes_per_token, seq_lens, hbm_bytes, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "ignore_weights")
    held = 0.0 if mistake == "ignore_weights" else weight_bytes * float(n_params)
    rows = []
    for s in seq_lens:
        b = math.floor((hbm_bytes - held) / (kv_bytes_per_token * s))
        if b < 1:
            rows.append({"seq_len": s, "max_batch": None, "tokens_per_s": None, "bound": None})
            continue
        compute, memory = (
            b * 2.0 * n_params / peak_flops,
            (weight_bytes * n_params + s * kv_bytes_per_token * b) / hbm_bandwidth,
        )
        rows.append(
            {
                "seq_len": s,
                "max_batch": b,
                "tokens_per_s": b / max(compute, memory),
                "bound": "compute" if compute >= memory else "memory",
            }
        )
    return {"rows": rows}


def _fitting(draw: Draw, level: int, hbm: int, per_chip: int | None = None) -> dict:
    """A model and contexts for `hbm` bytes of real HBM (chips of per_chip bytes each, one chip
    when None; the bandwidth one a real part of that capacity has): the longest context's cache takes at most
    half of it, and the model size leaves room for a batch that is compute-bound at the shortest
    length and not at the longest in most instances; a quarter leave no room for one longest
    sequence (None). The model is chosen to fit the HBM, never the HBM to fit the model."""
    shape = _decode_kv_shape(draw)
    per_token = kv_bytes_per_token(shape)
    most = min(256 * level, hbm // (2 * 128 * per_token))
    if most < 2 + level:
        raise Reject("too few contexts fit half the HBM")
    seq_lens = [128 * s for s in sorted_sample(draw, 1, most, 2 + level)]
    width = draw.choice((1, 2))
    shortest, longest = seq_lens[0] * per_token, seq_lens[-1] * per_token
    room_low, room_high = (shortest, longest) if draw.chance(1, 4) else (longest, 512 * longest)
    params = n_params_between(draw, level, Fraction(hbm - room_high, width), Fraction(hbm - room_low, width))
    return {
        "n_params": params,
        "weight_bytes": width,
        "kv_bytes_per_token": per_token,
        "seq_lens": seq_lens,
        "hbm_bytes": hbm,
        **chip_for_capacity(draw, level, per_chip or hbm),
    }


def sample_largest(draw: Draw, level: int) -> dict:
    return _fitting(draw, level, hbm_capacity(draw, level))


def _largest_edges(task: Task) -> str | None:
    i = task.inputs
    for row in task.expected["rows"]:
        s = row["seq_len"]
        room = Fraction(i["hbm_bytes"] - i["n_params"] * i["weight_bytes"], s * i["kv_bytes_per_token"])
        if near_integer(room):
            return f"seq_len {s}: the batch that fits sits on an integer"
        b = row["max_batch"]
        if b is not None and near_tie(
            Fraction(2 * i["n_params"] * b, i["peak_flops"]),
            Fraction(i["n_params"] * i["weight_bytes"] + b * s * i["kv_bytes_per_token"], i["hbm_bandwidth"]),
        ):
            return f"seq_len {s}: compute sits on memory"
    return None


_L4 = (
    STEP
    + """ Each cached token takes `kv_bytes_per_token` bytes of KV cache. The chip has
`hbm_bytes` bytes of HBM (weights and caches only; nothing else in memory), `peak_flops` FLOP/s
and `hbm_bandwidth` bytes/s. For each length in `seq_lens` (cached tokens per sequence), give the
largest batch whose weights and caches fit, the throughput in generated tokens per second at that
batch and its bound; None for all three if not even one sequence fits."""
)


LEVEL_4 = scaling_level(
    "inference",
    largest_decode_batch,
    _L4,
    '{"rows": [{"seq_len": <int>, "max_batch": <int> | None, "tokens_per_s": <number> | None, '
    '"bound": "compute" | "memory" | None}, ...]}  # one row per entry of `seq_lens`, in order',
    largest_decode_batch_float,
    "ignore_weights",
    sample=sample_largest,
    reject=_largest_edges,
)


def cheapest_decode_layout(
    n_params,
    weight_bytes,
    kv_bytes_per_token,
    seq_lens,
    chip_counts,
    hbm_bytes_per_chip,
    peak_flops,
    hbm_bandwidth,
    max_step_s,
):
    """Per context length: the chip count and batch with the fewest chip-seconds per token whose
    step meets the latency budget and whose weights and caches fit; ties: fewer chips."""
    from fractions import Fraction

    weights = n_params * weight_bytes
    rows = []
    for seq_len in seq_lens:
        kv = seq_len * kv_bytes_per_token
        best = None
        for chips in chip_counts:
            # Cost per token, chips * step / B, falls with B: take the largest allowed batch.
            by_memory = (chips * hbm_bytes_per_chip - weights) // kv
            by_compute = Fraction(chips * peak_flops * max_step_s, 2 * n_params)
            by_reads = (chips * hbm_bandwidth * max_step_s - weights) / Fraction(kv)
            batch = min(by_memory, int(by_compute), int(by_reads) if by_reads >= 0 else 0)
            if batch < 1:
                continue
            step_s = max(
                Fraction(2 * n_params * batch, chips * peak_flops),
                Fraction(weights + batch * kv, chips * hbm_bandwidth),
            )
            cost = chips * step_s / batch
            if best is None or cost < best[2]:
                best = (chips, batch, cost)
        chips, batch, cost = best if best is not None else (None, None, None)
        rows.append({"seq_len": seq_len, "chips": chips, "batch": batch, "chip_seconds_per_token": cost})
    return {"rows": rows}


def cheapest_decode_layout_float(
    n_params,
    weight_bytes,
    kv_bytes_per_token,
    seq_lens,
    chip_counts,
    hbm_bytes_per_chip,
    peak_flops,
    hbm_bandwidth,
    max_step_s,
    mistake=None,
):
    known_mistake(mistake, "ignore_kv_cache")
    rows = []
    for s in seq_lens:
        kv = s * kv_bytes_per_token
        read = 0.0 if mistake == "ignore_kv_cache" else kv
        options = []
        for n in chip_counts:

            def step(b, n=n, read=read):
                return max(
                    2.0 * n_params * b / (n * peak_flops),
                    (weight_bytes * n_params + b * read) / (n * hbm_bandwidth),
                )

            def ok(b, n=n, kv=kv, step=step):
                return weight_bytes * n_params + b * kv <= n * hbm_bytes_per_chip and step(
                    b
                ) <= max_step_s * (1 + 1e-12)

            b = _largest(ok, 10**12)
            if b >= 1:
                options.append((n * step(b) / b, n, b))
        if not options:
            rows.append({"seq_len": s, "chips": None, "batch": None, "chip_seconds_per_token": None})
            continue
        low = min(o[0] for o in options)
        cost, n, b = next(o for o in options if o[0] <= low * (1 + 1e-12))
        rows.append({"seq_len": s, "chips": n, "batch": b, "chip_seconds_per_token": cost})
    return {"rows": rows}


def sample_layout(draw: Draw, level: int) -> dict:
    per_chip = hbm_capacity(draw, level)
    inputs = _fitting(draw, level, per_chip * draw.choice((1, 2, 4)), per_chip)  # one, two or four chips
    chips = sorted(draw.sample((1, 2, 4, 8, 16, 32), 3 + level // 2))
    inputs.update(chip_counts=chips, hbm_bytes_per_chip=per_chip)
    weight_read = Fraction(inputs["n_params"] * inputs["weight_bytes"], chips[-1] * inputs["hbm_bandwidth"])
    inputs["max_step_s"] = weight_read * Fraction(draw.integer(101, 400), 100)
    inputs["max_step_s"] = Fraction(math.ceil(inputs["max_step_s"] * 10**6), 10**6)
    order = (
        "n_params",
        "weight_bytes",
        "kv_bytes_per_token",
        "seq_lens",
        "chip_counts",
        "hbm_bytes_per_chip",
        "peak_flops",
        "hbm_bandwidth",
        "max_step_s",
    )
    return {k: inputs[k] for k in order}


def _layout_rules(task: Task) -> str | None:
    i = task.inputs
    weights = i["n_params"] * i["weight_bytes"]
    for s in i["seq_lens"]:
        kv = s * i["kv_bytes_per_token"]
        for n in i["chip_counts"]:
            for what, bound in (
                ("memory", Fraction(n * i["hbm_bytes_per_chip"] - weights, kv)),
                ("compute", n * i["peak_flops"] * i["max_step_s"] / (2 * i["n_params"])),
                ("reads", (n * i["hbm_bandwidth"] * i["max_step_s"] - weights) / kv),
            ):
                if bound > 0 and near_integer(bound):
                    return f"seq_len {s}, {n} chips: the {what} bound on the batch sits on an integer"
    rows = task.expected["rows"]
    if all(row["chips"] is None for row in rows):
        return "no layout for any length"
    if len({row["chips"] for row in rows}) < 2:
        return "one chip count wins at every length"
    return None


_L5 = (
    STEP
    + """ Each cached token takes `kv_bytes_per_token` bytes of KV cache. You may serve on any
count of chips in `chip_counts`, each with `hbm_bytes_per_chip` bytes of HBM, `peak_flops` FLOP/s
and `hbm_bandwidth` bytes/s; weights, caches, FLOPs and reads split evenly over the chips, all
working in parallel (ignore communication), so a step takes the roofline time of one chip's share.
A layout (chip count, batch) is allowed when the weights and caches fit in the chips' HBM and a
step takes at most `max_step_s` seconds. For each length in `seq_lens` (cached tokens per
sequence), give the allowed layout with the fewest chip-seconds per generated token (chips * step
time / batch) and that cost; on a tie, the fewer chips, then the larger batch. None for all three if
no layout is allowed."""
)


LEVEL_5 = scaling_level(
    "inference",
    cheapest_decode_layout,
    _L5,
    '{"rows": [{"seq_len": <int>, "chips": <int> | None, "batch": <int> | None, '
    '"chip_seconds_per_token": <number> | None}, ...]}  # one row per entry of `seq_lens`, in order',
    cheapest_decode_layout_float,
    "ignore_kv_cache",
    sample=sample_layout,
    reject=_layout_rules,
)


def _no_batch_is_compute_bound(task: Task) -> bool:
    return any(row["min_batch"] is None for row in task.expected["rows"])


BRANCHES = (Branch("none", some_none, Fraction(1, 5), (3, 4)),)


DECODE_COMPUTE_BOUND_BATCH = five_levels(
    "decode_compute_bound_batch",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the decode step described, the compute-bound condition derived; L3: the KV cache "
    "derived from the attention shape, with the step time at the smallest compute-bound "
    "batch; L4: the largest batch the HBM holds, its throughput and bound; L5: the chip "
    "count and batch of the fewest chip-seconds per token under a latency budget and the HBM "
    "(None branches at L1-L4)",
    branches=(Branch("none", _no_batch_is_compute_bound, Fraction(1, 4), (1, 2)), *BRANCHES),
)
