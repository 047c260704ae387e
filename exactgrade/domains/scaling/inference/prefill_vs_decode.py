"""The prefill_vs_decode family of inference: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    bandwidth_for_capacity,
    chip_inputs,
    hbm_capacity_for_peak,
    jitter,
    kv_bytes_per_token,
    model_on_chip,
    n_params,
    n_params_between,
    resident_bytes,
    round_numbers,
    rows,
    sorted_sample,
    value_bytes,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level, some_none
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def prefill_vs_decode(n_params, weight_bytes, prompt_lens, peak_flops, hbm_bandwidth):
    """Prefill processes the whole prompt in one pass; decode produces one token per pass."""
    from fractions import Fraction

    weight_read_s = Fraction(n_params * weight_bytes, hbm_bandwidth)
    decode_s = max(Fraction(2 * n_params, peak_flops), weight_read_s)
    rows = []
    for prompt_len in prompt_lens:
        prefill_s = max(Fraction(2 * n_params * prompt_len, peak_flops), weight_read_s)
        rows.append(
            {
                "prompt_len": prompt_len,
                "prefill_s": prefill_s,
                "decode_step_s": decode_s,
                "throughput_ratio": (prompt_len / prefill_s) / (1 / decode_s),
            }
        )
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
        rows.append(
            {
                "prompt_len": p,
                "prefill_s": prefill,
                "decode_step_s": decode,
                "throughput_ratio": decode * p / prefill,
            }
        )
    return {"rows": rows}


def sample_prefill_vs_decode(draw: Draw, level: int) -> dict:
    prompt_lens = [
        128 * p - jitter(draw, level, 128) for p in sorted_sample(draw, 1, 64 * 2**level, rows(level, 3))
    ]
    chip, width = chip_inputs(draw, level), value_bytes(draw, level, (1, 2))
    return {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        "prompt_lens": prompt_lens,
        **chip,
    }


_PREFILL_ROW = (
    '{"rows": [{"prompt_len": <int>, "prefill_s": <number>, "decode_step_s": <number>, '
    '"throughput_ratio": <number>}, ...]}  # one row per entry of `prompt_lens`, in order'
)


LEVEL_1 = scaling_level(
    "inference",
    prefill_vs_decode,
    """\
A single request (batch 1) to a model of `n_params` parameters (`weight_bytes` bytes each) first
prefills its prompt in one forward pass over all prompt tokens (2*n_params FLOPs per token, every
weight read once), then decodes one token per step (2*n_params FLOPs, every weight read once).
Use the roofline time max(FLOPs / peak_flops, bytes / hbm_bandwidth) and ignore the KV cache. For
each prompt length in `prompt_lens`, give the prefill time, the decode step time (both in seconds)
and the ratio of prefill throughput (prompt tokens per second) to decode throughput (tokens per
second).""",
    _PREFILL_ROW,
    prefill_vs_decode_float,
    "prefill_as_decode_steps",
    sample=sample_prefill_vs_decode,
)


def _ridge(i: dict) -> Fraction:
    """The prompt length at which a prefill turns compute-bound."""
    return Fraction(i["weight_bytes"] * i["peak_flops"], 2 * i["hbm_bandwidth"])


def sample_prefill_l2(draw: Draw, level: int) -> dict:
    """Prompts on both sides of the ridge, so the throughput ratio is not one constant."""
    chip, width = chip_inputs(draw, level), value_bytes(draw, level, (1, 2))
    inputs = {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        "prompt_lens": [],
        **chip,
    }
    ridge = _ridge(inputs)
    if ridge < 4:
        raise Reject("the prefill ridge is below four tokens")
    below = draw.sample(range(1, math.floor(ridge)), min(2, math.floor(ridge) - 1))
    above = [math.ceil(ridge) + draw.integer(1, 64 * 2**level) for _ in range(rows(level, 3) - len(below))]
    lens = sorted(set(below) | set(above))
    if len(lens) < 3 or all(p >= ridge for p in lens) or all(p <= ridge for p in lens):
        raise Reject("prompt lengths on one side of the ridge")
    inputs["prompt_lens"] = lens
    return inputs


_L2 = """\
A single request (batch 1) to a model of `n_params` parameters (`weight_bytes` bytes each) on a
chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s first prefills its prompt in one forward
pass over all prompt tokens, then decodes one token per forward pass; a forward pass costs 2 FLOPs
per parameter per token it processes and reads every weight from HBM once (ignore the KV cache).
For each prompt length in `prompt_lens`, give the prefill time, the decode step time (both in
seconds) and the ratio of prefill throughput (prompt tokens per second) to decode throughput
(tokens per second)."""


L2_QUESTION = _L2


LEVEL_2 = scaling_level(
    "inference",
    prefill_vs_decode,
    L2_QUESTION,
    _PREFILL_ROW,
    prefill_vs_decode_float,
    "prefill_as_decode_steps",
    sample=sample_prefill_l2,
    varying=("rows[].throughput_ratio",),
)


REQUEST = """\
A request to a model of `n_params` parameters (`weight_bytes` bytes each) on a chip with
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s is served in two phases. Prefill: one forward pass
over all p prompt tokens at once, which yields the first generated token. Decode: each further
generated token needs one forward pass over the single previous token. A forward pass costs 2
FLOPs per parameter per token it processes (ignore attention's own FLOPs) and reads every weight
from HBM once; a decode pass also reads the cached keys and values of every position before its
input token (p + k - 2 positions for the pass that yields generated token k = 2, 3, ...). Each
position's cache is a key and a value of `head_dim` values for each of `layers` layers and
`n_kv_heads` KV heads, `kv_bytes` bytes per value. Only these reads count as HBM traffic (writes
are free), and a pass takes max(its FLOPs / peak_flops, its bytes read / hbm_bandwidth) seconds."""


def request_latency(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, peak_flops, hbm_bandwidth, requests
):
    """Per request: prefill (roofline over p tokens) plus n - 1 decode passes whose KV reads grow
    by one position each; the time and the decode passes' share of it."""
    from fractions import Fraction

    kv = 2 * layers * n_kv_heads * head_dim * kv_bytes
    weights = Fraction(n_params * weight_bytes, hbm_bandwidth)
    token = Fraction(2 * n_params, peak_flops)

    def decode(first, last):  # passes reading first..last cached positions, one each
        # compute-bound while weights + c * kv over the bandwidth stays at most the compute
        cut = (token - weights) * hbm_bandwidth / kv
        bound = min(last, max(first - 1, int(cut // 1)))
        compute = bound - first + 1
        count = last - bound
        reads = Fraction((bound + 1 + last) * count, 2) * kv / hbm_bandwidth
        return compute * token + count * weights + reads

    rows = []
    for request in requests:
        p, n = request["prompt_len"], request["new_tokens"]
        prefill = max(p * token, weights)
        steps = decode(p, p + n - 2)
        rows.append(
            {
                "prompt_len": p,
                "new_tokens": n,
                "request_s": prefill + steps,
                "decode_share": steps / (prefill + steps),
            }
        )
    return {"rows": rows}


def _passes_float(n_params, weight_bytes, kv, peak_flops, hbm_bandwidth, batch, p, n, growing=True):
    """Prefill of one request and the n - 1 decode passes at batch B, summed pass by pass."""
    flops = 2.0 * n_params / peak_flops
    read = float(n_params) * weight_bytes / hbm_bandwidth
    prefill = max(read, p * flops)
    steps = 0.0
    for k in range(2, n + 1):
        context = p + k - 2 if growing else p
        steps += max(batch * flops, read + batch * context * kv / hbm_bandwidth)
    return prefill, steps


def request_latency_float(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    peak_flops,
    hbm_bandwidth,
    requests,
    mistake=None,
):
    known_mistake(mistake, "kv_not_growing")
    kv = 2.0 * kv_bytes * head_dim * n_kv_heads * layers
    rows = []
    for r in requests:
        p, n = r["prompt_len"], r["new_tokens"]
        prefill, steps = _passes_float(
            n_params, weight_bytes, kv, peak_flops, hbm_bandwidth, 1, p, n, mistake != "kv_not_growing"
        )
        rows.append(
            {
                "prompt_len": p,
                "new_tokens": n,
                "request_s": steps + prefill,
                "decode_share": 1 - prefill / (steps + prefill),
            }
        )
    return {"rows": rows}


def _kv_shape(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    return {
        "layers": draw.integer(16, 96),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
    }


def _model(draw: Draw, level: int) -> dict:
    """Level 5's model, KV shape and chip (its model size and bandwidth are redrawn for its HBM)."""
    return {
        "n_params": n_params(draw, level),
        "weight_bytes": value_bytes(draw, level, (1, 2)),
        **_kv_shape(draw, level),
        **chip_inputs(draw, level),
    }


def _model_on_chip(draw: Draw, level: int) -> dict:
    """A model whose weights fit one chip (model_on_chip), its KV shape and the chip."""
    width, shape, chip = value_bytes(draw, level, (1, 2)), _kv_shape(draw, level), chip_inputs(draw, level)
    return {
        "n_params": model_on_chip(draw, level, width, chip["hbm_bandwidth"]),
        "weight_bytes": width,
        **shape,
        **chip,
    }


def _cached_tokens(inputs: dict) -> int:
    """The most positions one request may cache beside the weights in the chip's HBM (resident_bytes):
    a request of p prompt and n generated tokens is drawn with p + n at most this."""
    per_token = kv_bytes_per_token(inputs)
    room = resident_bytes(inputs["hbm_bandwidth"]) - inputs["n_params"] * inputs["weight_bytes"]
    return room // per_token


def _longest_past_ridge(inputs: dict, ridge: Fraction, new_tokens: int, most: int) -> int:
    """How far past the ridge (at most `most` tokens) a prompt may reach with its new tokens
    cached in the chip's HBM; Reject when not one token past it fits (nor then one before it)."""
    room = min(most, _cached_tokens(inputs) - new_tokens - math.ceil(ridge))
    if room < 1:
        raise Reject("no prompt past the ridge caches its tokens in the chip's HBM")
    return room


def sample_requests(draw: Draw, level: int) -> dict:
    """Requests with prompts on both sides of the prefill ridge and 2 to 4k new tokens; every
    decode pass is memory-bound at batch 1 (the twin sums them pass by pass regardless)."""
    inputs = _model_on_chip(draw, level)
    ridge = _ridge(inputs)
    if ridge < 8:
        raise Reject("the prefill ridge is below eight tokens")
    requests = []
    for i in range(rows(level, 1)):
        n = draw.integer(2, 4096)
        reach = _longest_past_ridge(inputs, ridge, n, 1024 * 2**level)
        if i % 2 == 0:
            p = draw.integer(1, math.floor(ridge) - 1)
        else:
            p = math.ceil(ridge) + draw.integer(1, reach) - jitter(draw, level, 2)
        requests.append({"prompt_len": p, "new_tokens": n})
    inputs["requests"] = draw.shuffled(requests)
    return inputs


def _requests_edges(task: Task) -> str | None:
    i = task.inputs
    ridge = _ridge(i)
    for r in i["requests"]:
        if near_tie(Fraction(r["prompt_len"]), ridge):
            return f"prompt {r['prompt_len']}: the prefill sits on its ridge"
    return None


_L3 = (
    REQUEST
    + """
For each request in `requests` (prompt length p and `new_tokens` n, the number of generated tokens
including the first), give the time from the start of the prefill to the last generated token in
seconds, and the share of that time spent in decode passes."""
)


LEVEL_3 = scaling_level(
    "inference",
    request_latency,
    _L3,
    '{"rows": [{"prompt_len": <int>, "new_tokens": <int>, "request_s": <number>, '
    '"decode_share": <number>}, ...]}  # one row per entry of `requests`, in order',
    request_latency_float,
    "kv_not_growing",
    sample=sample_requests,
    reject=_requests_edges,
)


def longest_prompt(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, peak_flops, hbm_bandwidth, requests
):
    """Per (new_tokens, budget): the largest prompt length whose whole request (prefill plus the
    decode passes) takes at most the budget; None when even a 1-token prompt is too slow."""
    from fractions import Fraction

    kv = 2 * layers * n_kv_heads * head_dim * kv_bytes
    weights = Fraction(n_params * weight_bytes, hbm_bandwidth)
    token = Fraction(2 * n_params, peak_flops)

    def decode(first, last):
        cut = (token - weights) * hbm_bandwidth / kv
        bound = min(last, max(first - 1, int(cut // 1)))
        compute = bound - first + 1
        count = last - bound
        reads = Fraction((bound + 1 + last) * count, 2) * kv / hbm_bandwidth
        return compute * token + count * weights + reads

    def total(p, n):
        return max(p * token, weights) + decode(p, p + n - 2)

    rows = []
    for request in requests:
        n, budget = request["new_tokens"], request["budget_s"]
        if total(1, n) > budget:
            rows.append({"new_tokens": n, "budget_s": budget, "max_prompt_len": None})
            continue
        low, high = 1, 2
        while total(high, n) <= budget:  # the request time grows with p
            low, high = high, 2 * high
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if total(middle, n) <= budget else (low, middle)
        rows.append({"new_tokens": n, "budget_s": budget, "max_prompt_len": low})
    return {"rows": rows}


def longest_prompt_float(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    peak_flops,
    hbm_bandwidth,
    requests,
    mistake=None,
):
    """Solves the piecewise-linear request time for p (prefill memory- or compute-bound; every
    decode pass memory-bound, which the rules guarantee) instead of searching."""
    known_mistake(mistake, "kv_not_growing")
    kv = 2.0 * kv_bytes * head_dim * n_kv_heads * layers / hbm_bandwidth
    read = float(n_params) * weight_bytes / hbm_bandwidth
    flops = 2.0 * n_params / peak_flops
    rows = []
    for r in requests:
        n, budget = r["new_tokens"], r["budget_s"]
        growth = 0.0 if mistake == "kv_not_growing" else kv * (n - 1) * (n - 2) / 2
        fixed = (n - 1) * read + growth  # decode time = fixed + (n - 1) * kv * p
        on_compute = (budget - fixed) / (flops + (n - 1) * kv)  # prefill compute-bound
        on_memory = (budget - read - fixed) / ((n - 1) * kv)  # prefill memory-bound
        p = math.floor(on_compute if on_compute >= read / flops else on_memory)
        rows.append({"new_tokens": n, "budget_s": budget, "max_prompt_len": p if p >= 1 else None})
    return {"rows": rows}


def _request_time(i: dict, p: int, n: int) -> Fraction:
    return request_latency(
        **{k: v for k, v in i.items() if k != "requests"}, requests=[{"prompt_len": p, "new_tokens": n}]
    )["rows"][0]["request_s"]


def sample_budgets(draw: Draw, level: int) -> dict:
    """Each budget is the request time of a drawn prompt length plus a part of one more token's
    worth, on alternating sides of the ridge; one instance in six has a budget below a 1-token
    prompt's time (None)."""
    inputs = _model_on_chip(draw, level)
    ridge = _ridge(inputs)
    if ridge < 8:
        raise Reject("the prefill ridge is below eight tokens")
    requests = []
    none_row = draw.chance(1, 6)
    count = rows(level, 1)
    for k in range(count):
        n = draw.integer(2, 2048)
        if none_row and k == count - 1:
            budget = _request_time(inputs, 1, n) * Fraction(draw.integer(50, 99), 100)
        else:
            reach = _longest_past_ridge(inputs, ridge, n, 64 * 1024)
            p = (
                draw.integer(1, math.floor(ridge) - 1)
                if k % 2 == 0
                else math.ceil(ridge) + draw.integer(1, reach)
            )
            here, further = _request_time(inputs, p, n), _request_time(inputs, p + 1, n)
            budget = here + (further - here) * Fraction(draw.integer(1, 99), 100)
        budget = (
            Fraction(math.floor(budget * 10**9), 10**9)
            if round_numbers(level)
            else Fraction(math.floor(budget * 10**12), 10**12)
        )
        requests.append({"new_tokens": n, "budget_s": budget})
    inputs["requests"] = draw.shuffled(requests)
    return inputs


def _budget_edges(task: Task) -> str | None:
    i = task.inputs
    model = {k: v for k, v in i.items() if k != "requests"}
    flops = Fraction(2 * i["n_params"], i["peak_flops"])
    if flops >= Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"]):
        return "a batch-1 decode pass can be compute-bound"
    for r, row in zip(i["requests"], task.expected["rows"], strict=True):
        p = row["max_prompt_len"]
        for q in (1,) if p is None else (p, p + 1):
            time = _request_time(model, q, r["new_tokens"])
            if near_tie(time, r["budget_s"]):
                return f"budget {float(r['budget_s'])}: a prompt of {q} tokens sits on it"
    return None


def _mostly_none(task: Task) -> str | None:
    rows_ = task.expected["rows"]
    if 2 * sum(None in row.values() for row in rows_) > len(rows_):
        return "more than half of the rows are None"
    return None


_L4 = (
    REQUEST
    + """
For each entry of `requests` (a number n of generated tokens, `new_tokens`, counting the first, and
a latency budget `budget_s` in seconds), give the longest prompt length p (an integer >= 1) for
which the whole request, from the start of the prefill to the n-th generated token, takes at most
the budget; None if even a 1-token prompt takes longer."""
)


LEVEL_4 = scaling_level(
    "inference",
    longest_prompt,
    _L4,
    '{"rows": [{"new_tokens": <int>, "budget_s": <number>, "max_prompt_len": <int> | None}, ...]}'
    "  # one row per entry of `requests`, in order",
    longest_prompt_float,
    "kv_not_growing",
    sample=sample_budgets,
    reject=lambda task: _budget_edges(task) or _mostly_none(task),
)


def wave_batch(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    peak_flops,
    hbm_bandwidth,
    hbm_bytes,
    max_step_s,
    profiles,
):
    """Per profile (p, n): the batch B of the highest wave throughput B*n / (B prefills + n - 1
    decode passes at batch B) under the per-pass latency limit and the HBM; ties: smaller B.

    The throughput rises with B while some decode pass is memory-bound and is flat once every
    pass is compute-bound, so the best B is the smaller of the largest allowed B and the
    smallest B at which the longest pass is compute-bound."""
    import math
    from fractions import Fraction

    kv = 2 * layers * n_kv_heads * head_dim * kv_bytes
    weights = Fraction(n_params * weight_bytes, hbm_bandwidth)
    token = Fraction(2 * n_params, peak_flops)

    def decode(batch, first, last):
        cut = (batch * token - weights) * hbm_bandwidth / (batch * kv)
        bound = min(last, max(first - 1, math.floor(cut)))
        compute = bound - first + 1
        count = last - bound
        reads = Fraction((bound + 1 + last) * count, 2) * batch * kv / hbm_bandwidth
        return compute * batch * token + count * weights + reads

    rows = []
    for profile in profiles:
        p, n = profile["prompt_len"], profile["new_tokens"]
        longest = p + n - 2
        by_memory = (hbm_bytes - n_params * weight_bytes) // ((p + n) * kv)
        by_compute = math.floor(max_step_s / token)
        by_reads = math.floor((max_step_s - weights) * hbm_bandwidth / (longest * kv))
        cap = min(by_memory, by_compute, by_reads)
        if cap < 1:
            rows.append({"prompt_len": p, "new_tokens": n, "batch": None, "tokens_per_s": None})
            continue
        slope = token - Fraction(longest * kv, hbm_bandwidth)
        batch = cap if slope <= 0 else min(cap, math.ceil(weights / slope))
        wave = batch * max(p * token, weights) + decode(batch, p, longest)
        rows.append({"prompt_len": p, "new_tokens": n, "batch": batch, "tokens_per_s": batch * n / wave})
    return {"rows": rows}


def wave_batch_float(
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    peak_flops,
    hbm_bandwidth,
    hbm_bytes,
    max_step_s,
    profiles,
    mistake=None,
):
    """Scans every allowed batch, checking each pass's latency, and keeps the first best."""
    known_mistake(mistake, "kv_not_growing")
    growing = mistake != "kv_not_growing"
    kv = 2.0 * kv_bytes * head_dim * n_kv_heads * layers
    flops = 2.0 * n_params / peak_flops
    read = float(n_params) * weight_bytes / hbm_bandwidth
    rows = []
    for f in profiles:
        p, n = f["prompt_len"], f["new_tokens"]
        last = p + n - 2 if growing else p
        found = []
        b = 1
        while n_params * weight_bytes + b * (p + n) * kv <= hbm_bytes and b <= 20_000:
            if max(b * flops, read + b * last * kv / hbm_bandwidth) > max_step_s:
                break
            prefill, steps = _closed_decode(flops, read, kv / hbm_bandwidth, b, p, n, growing)
            found.append((b, b * n / (b * prefill + steps)))
            b += 1
        if not found:
            rows.append({"prompt_len": p, "new_tokens": n, "batch": None, "tokens_per_s": None})
            continue
        high = max(v for _, v in found)
        b, value = next((b, v) for b, v in found if v >= high * (1 - 1e-12))
        rows.append({"prompt_len": p, "new_tokens": n, "batch": b, "tokens_per_s": value})
    return {"rows": rows}


def _closed_decode(flops, read, kv_time, batch, p, n, growing):
    """Prefill and decode time at batch B in floats: the compute-bound passes counted, the
    memory-bound ones summed as an arithmetic series."""
    prefill = max(read, p * flops)
    last = p + n - 2 if growing else p
    cut = (batch * flops - read) / (batch * kv_time)  # contexts up to cut are compute-bound
    if not growing:
        return prefill, (n - 1) * max(batch * flops, read + batch * p * kv_time)
    compute = min(n - 1, max(0, math.floor(cut) - p + 1))
    first = p + compute
    count = n - 1 - compute
    series = (first + last) * count / 2
    return prefill, compute * batch * flops + count * read + batch * kv_time * series


def _per_token(i: dict) -> int:
    return kv_bytes_per_token(i)


def sample_waves(draw: Draw, level: int) -> dict:
    """Profiles whose best batch is set by the HBM, by the step-latency limit or by the
    compute-bound plateau; the HBM and the limit are drawn around the caps of two profiles."""
    inputs = _model(draw, level)
    per_token = _per_token(inputs)
    # A real HBM capacity; the model size leaves the caches room for 2^e to 2^e * 15/8 tokens,
    # 2^e between 2k and 1M tokens and the room at most half the HBM.
    hbm = hbm_capacity_for_peak(draw, level, inputs["peak_flops"])
    inputs["hbm_bandwidth"] = bandwidth_for_capacity(draw, level, hbm, inputs["peak_flops"])
    most = 20
    while most >= 11 and 2 * per_token * 2**most > hbm:
        most -= 1
    if most < 11:
        raise Reject("not 2k tokens of cache fit in half the HBM")
    room = per_token * 2 ** draw.integer(11, most)
    width = inputs["weight_bytes"]
    low, high = Fraction(hbm - room * 15 // 8, width), Fraction(hbm - room, width)
    inputs["n_params"] = n_params_between(draw, level, low, high)
    inputs["hbm_bytes"] = hbm
    weights = inputs["n_params"] * inputs["weight_bytes"]
    read = Fraction(weights, inputs["hbm_bandwidth"])
    inputs["max_step_s"] = Fraction(math.ceil(read * Fraction(draw.integer(105, 400), 100) * 10**7), 10**7)
    profiles = []
    for k in range(rows(level, 1)):
        kind = (k + draw.below(3)) % 3  # short, medium, long contexts
        p = (draw.integer(8, 128), draw.integer(256, 4096), draw.integer(4096, 65536))[kind]
        n = (draw.integer(2, 64), draw.integer(16, 1024), draw.integer(64, 2048))[kind]
        profiles.append({"prompt_len": p, "new_tokens": n})
    inputs["profiles"] = profiles
    return inputs


def _wave_kinds(i: dict) -> list[str | None]:
    """What sets each profile's best batch: "memory", "latency", "plateau" (None: no batch)."""
    kv = _per_token(i)
    token = Fraction(2 * i["n_params"], i["peak_flops"])
    weights = Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"])
    kinds: list[str | None] = []
    for f in i["profiles"]:
        p, n = f["prompt_len"], f["new_tokens"]
        longest = p + n - 2
        memory = Fraction(i["hbm_bytes"] - i["n_params"] * i["weight_bytes"], (p + n) * kv)
        limit = i["max_step_s"]
        latency = min(limit / token, (limit - weights) * i["hbm_bandwidth"] / (longest * kv))
        slope = token - Fraction(longest * kv, i["hbm_bandwidth"])
        plateau = weights / slope if slope > 0 else None
        for value in (memory, latency, plateau):
            if value is not None and value > 0 and near_integer(value):
                return ["edge"]
        cap = min(math.floor(memory), math.floor(latency))
        if cap < 1:
            kinds.append(None)
        elif plateau is not None and math.ceil(plateau) <= cap:
            kinds.append("plateau")
        else:
            kinds.append("memory" if math.floor(memory) <= math.floor(latency) else "latency")
    return kinds


def _wave_throughput(i: dict, p: int, n: int, batch: int) -> Fraction:
    """The exact throughput of a wave at a given batch (compute-bound passes counted, the
    memory-bound ones summed as a series)."""
    kv, token = _per_token(i), Fraction(2 * i["n_params"], i["peak_flops"])
    weights = Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"])
    first, last = p, p + n - 2
    cut = (batch * token - weights) * i["hbm_bandwidth"] / (batch * kv)
    bound = min(last, max(first - 1, math.floor(cut)))
    count = last - bound
    decode = (
        (bound - first + 1) * batch * token
        + count * weights
        + Fraction((bound + 1 + last) * count * batch * kv, 2 * i["hbm_bandwidth"])
    )
    return Fraction(batch * n) / (batch * max(p * token, weights) + decode)


def _wave_rules(task: Task) -> str | None:
    i = task.inputs
    kinds = _wave_kinds(i)
    if "edge" in kinds:
        return "a batch cap sits within 1e-9 of an integer"
    if len({k for k in kinds if k is not None}) < 2:
        return f"the best batch is set the same way in every row ({kinds[0]})"
    for row in task.expected["rows"]:
        b = row["batch"]
        if b is not None and b > 20_000:
            return "a best batch above 20000"
        if (
            b is not None
            and b > 1
            and near_tie(
                _wave_throughput(i, row["prompt_len"], row["new_tokens"], b - 1), row["tokens_per_s"]
            )
        ):
            return f"batches {b - 1} and {b} are within 1e-9 in throughput"
    return _mostly_none(task)


_L5 = (
    REQUEST
    + """
The chip serves requests in waves. A wave admits B requests with the same profile (prompt length p
and n generated tokens, `new_tokens`, counting the first); it prefills them one after another (B
separate prefill passes at batch 1), then runs the n - 1 decode passes of all B requests together:
a decode pass at batch B processes one token of each of the B sequences (2 FLOPs per parameter per
token), reads every weight once, and reads the cached keys and values of each sequence. Every
decode pass must take at most `max_step_s` seconds, and the HBM (`hbm_bytes` bytes) must hold the
weights plus the keys and values of p + n positions for each of the B sequences. The wave's
throughput is its B * n generated tokens divided by its time (prefills plus decode passes). For
each profile in `profiles`, give the integer B >= 1 with the highest throughput (on a tie, the
smaller B) and that throughput in tokens per second; None for both if no B is allowed."""
)


LEVEL_5 = scaling_level(
    "inference",
    wave_batch,
    _L5,
    '{"rows": [{"prompt_len": <int>, "new_tokens": <int>, "batch": <int> | None, '
    '"tokens_per_s": <number> | None}, ...]}  # one row per entry of `profiles`, in order',
    wave_batch_float,
    "kv_not_growing",
    sample=sample_waves,
    reject=_wave_rules,
)


BRANCHES = (Branch("none", some_none, Fraction(1, 10), (4,)),)


PREFILL_VS_DECODE = five_levels(
    "prefill_vs_decode",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the passes described, no roofline formula restated, prompts on both sides of the "
    "prefill ridge; L3: a whole batch-1 request, the KV cache derived from the attention "
    "shape and growing by one position per decode pass (its time and the decode share); "
    "L4: the longest prompt a request-latency budget allows, across the prefill ridge "
    "(None); L5: the decode batch of a serving wave (B prefills, then n - 1 batched decode "
    "passes) of the highest throughput under a per-pass latency limit and the HBM: the HBM, "
    "the latency limit or the compute-bound plateau decides, differently per profile",
    branches=BRANCHES,
)
