"""The max_batch_for_kv_cache family of memory: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    bandwidth_for_capacity,
    hbm_capacity,
    kv_bytes_per_token,
    rows,
    sample_max_batch_for_kv_cache,
    sample_server_kv,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    rounding_edge,
    scaling_level,
    some_none,
)
from exactgrade.domains.scaling.hardware import SERVER_HBM_BANDWIDTH, require
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def max_batch_for_kv_cache(
    hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, seq_lens
):
    """How many full-length sequences fit in the HBM the weights leave free."""
    from fractions import Fraction

    free = hbm_bytes - n_params * weight_bytes
    rows = []
    for seq_len in seq_lens:
        per_sequence = 2 * layers * n_kv_heads * head_dim * kv_bytes * seq_len
        rows.append(
            {
                "seq_len": seq_len,
                "kv_bytes_per_sequence": Fraction(per_sequence),
                "max_batch": free // per_sequence,
            }
        )
    return {"rows": rows}


def max_batch_for_kv_cache_float(
    hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, seq_lens, mistake=None
):
    known_mistake(mistake, "ignore_weights")
    free = float(hbm_bytes) if mistake == "ignore_weights" else hbm_bytes - float(n_params) * weight_bytes
    rows = []
    for s in seq_lens:
        per_sequence = 2.0 * s * kv_bytes * head_dim * n_kv_heads * layers
        rows.append(
            {
                "seq_len": s,
                "kv_bytes_per_sequence": per_sequence,
                "max_batch": math.floor(free / per_sequence),
            }
        )
    return {"rows": rows}


def _max_batch_edges(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes"] - i["n_params"] * i["weight_bytes"]
    for seq_len in i["seq_lens"]:
        per_sequence = kv_bytes_per_token(i) * seq_len
        problem = rounding_edge(f"seq_len {seq_len}: the sequences that fit", Fraction(free, per_sequence))
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "memory",
    max_batch_for_kv_cache,
    """\
A server with `hbm_bytes` bytes of HBM in total holds a model of `n_params` parameters at
`weight_bytes` bytes each; all remaining HBM holds KV cache. The model caches a key and a value of
`head_dim` values for each of `layers` layers and `n_kv_heads` KV heads per token, `kv_bytes` bytes
per value. For each sequence length in `seq_lens`, give the KV-cache bytes of one full-length
sequence and the largest number of such sequences (the batch) whose KV cache fits (ignore
activations and fragmentation).""",
    '{"rows": [{"seq_len": <int>, "kv_bytes_per_sequence": <number>, "max_batch": <int>}, ...]}'
    "  # one row per entry of `seq_lens`, in order",
    max_batch_for_kv_cache_float,
    "ignore_weights",
    sample=sample_max_batch_for_kv_cache,
    reject=_max_batch_edges,
)


def grouped_max_batch(
    hbm_bytes, n_params, weight_bytes, layers, n_heads, query_heads_per_kv_head, head_dim, kv_bytes, seq_lens
):
    """Level 1's question with the KV heads derived from the query-head grouping."""
    from fractions import Fraction

    free = hbm_bytes - n_params * weight_bytes
    kv_heads = n_heads // query_heads_per_kv_head
    rows = []
    for seq_len in seq_lens:
        per_sequence = 2 * layers * kv_heads * head_dim * kv_bytes * seq_len
        rows.append(
            {
                "seq_len": seq_len,
                "kv_bytes_per_sequence": Fraction(per_sequence),
                "max_batch": free // per_sequence,
            }
        )
    return {"rows": rows}


def grouped_max_batch_float(
    hbm_bytes,
    n_params,
    weight_bytes,
    layers,
    n_heads,
    query_heads_per_kv_head,
    head_dim,
    kv_bytes,
    seq_lens,
    mistake=None,
):
    known_mistake(mistake, "query_heads_cached")
    heads = n_heads if mistake == "query_heads_cached" else n_heads / query_heads_per_kv_head
    free = hbm_bytes - float(n_params) * weight_bytes
    rows = []
    for s in seq_lens:
        per_sequence = 2.0 * s * kv_bytes * head_dim * heads * layers
        rows.append(
            {
                "seq_len": s,
                "kv_bytes_per_sequence": per_sequence,
                "max_batch": math.floor(free / per_sequence),
            }
        )
    return {"rows": rows}


def sample_grouped_max_batch(draw: Draw, level: int) -> dict:
    base = dict(sample_max_batch_for_kv_cache(draw, level))
    group = draw.choice((1, 2, 4, 8))
    kv_heads = base.pop("n_kv_heads")
    order = ("hbm_bytes", "n_params", "weight_bytes", "layers")
    return {
        **{k: base[k] for k in order},
        "n_heads": kv_heads * group,
        "query_heads_per_kv_head": group,
        "head_dim": base["head_dim"],
        "kv_bytes": base["kv_bytes"],
        "seq_lens": base["seq_lens"],
    }


def _grouped_max_batch_edges(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes"] - i["n_params"] * i["weight_bytes"]
    kv_heads = i["n_heads"] // i["query_heads_per_kv_head"]
    for s in i["seq_lens"]:
        if near_integer(Fraction(free, 2 * i["layers"] * kv_heads * i["head_dim"] * i["kv_bytes"] * s)):
            return f"seq_len {s}: the sequences that fit sit on an integer"
    return None


_GROUPED_MAX_BATCH_L2 = """\
A server with `hbm_bytes` bytes of HBM in total holds a model of `n_params` parameters at
`weight_bytes` bytes each; all remaining HBM holds KV cache. The model has `layers` layers; in each,
attention has `n_heads` query heads of `head_dim` values, and every group of
`query_heads_per_kv_head` query heads shares one key head and one value head (grouped-query
attention). During decoding every layer caches the keys and values of its key and value heads for
every position, `kv_bytes` bytes per value. For each sequence length in `seq_lens`, give the
KV-cache bytes of one full-length sequence and the largest number of such sequences (the batch)
whose KV cache fits (ignore activations and fragmentation)."""


LEVEL_2 = scaling_level(
    "memory",
    grouped_max_batch,
    _GROUPED_MAX_BATCH_L2,
    '{"rows": [{"seq_len": <int>, "kv_bytes_per_sequence": <number>, "max_batch": <int>}, ...]}'
    "  # one row per entry of `seq_lens`, in order",
    grouped_max_batch_float,
    "query_heads_cached",
    sample=sample_grouped_max_batch,
    reject=_grouped_max_batch_edges,
)


# ================================================================ max_batch_for_kv_cache
def tp_max_batch(
    hbm_bytes_per_chip, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, seq_len, tp_degrees
):
    """Per tensor-parallel degree: weights split evenly over the chips, KV heads split over them
    (a KV head is never split: with more chips than KV heads each chip keeps a copy of one)."""
    from fractions import Fraction

    rows = []
    for tp in tp_degrees:
        free = hbm_bytes_per_chip - Fraction(n_params * weight_bytes, tp)
        heads = -(-n_kv_heads // tp)  # KV heads per chip
        per_sequence = 2 * layers * heads * head_dim * kv_bytes * seq_len
        batch = free // per_sequence if free > 0 else None
        rows.append({"tp": tp, "max_batch": None if batch is None or batch < 1 else int(batch)})
    return {"rows": rows}


def tp_max_batch_float(
    hbm_bytes_per_chip,
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    seq_len,
    tp_degrees,
    mistake=None,
):
    known_mistake(mistake, "kv_heads_split_fractionally")
    rows = []
    for tp in tp_degrees:
        heads = n_kv_heads / tp if mistake == "kv_heads_split_fractionally" else math.ceil(n_kv_heads / tp)
        free = hbm_bytes_per_chip - n_params * float(weight_bytes) / tp
        batch = math.floor(free / (2.0 * layers * heads * head_dim * kv_bytes * seq_len)) if free > 0 else 0
        rows.append({"tp": tp, "max_batch": batch if batch >= 1 else None})
    return {"rows": rows}


def sample_tp_batch(draw: Draw, level: int) -> dict:
    """Degrees past the KV-head count (copies) and a model that needs several chips (None at 1)."""
    n_kv_heads = draw.choice((1, 2, 4, 8))
    hbm = hbm_capacity(draw, level)
    weight_bytes = draw.choice((1, 2))
    params = math.floor(Fraction(hbm, weight_bytes) * Fraction(draw.integer(60, 300), 100))
    degrees = sorted({1, 2, 4, 8, 16} - {draw.choice((2, 4))})
    return {
        "hbm_bytes_per_chip": hbm,
        "n_params": params,
        "weight_bytes": weight_bytes,
        "layers": draw.integer(16, 96),
        "n_kv_heads": n_kv_heads,
        "head_dim": draw.choice((64, 128)),
        "kv_bytes": draw.choice((1, 2)),
        "seq_len": 1024 * draw.integer(1, 64) + draw.integer(0, 1023),
        "tp_degrees": degrees,
    }


def _tp_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for tp in i["tp_degrees"]:
        free = i["hbm_bytes_per_chip"] - Fraction(i["n_params"] * i["weight_bytes"], tp)
        heads = -(-i["n_kv_heads"] // tp)
        per_sequence = 2 * i["layers"] * heads * i["head_dim"] * i["kv_bytes"] * i["seq_len"]
        if free > 0 and near_integer(free / per_sequence):
            return f"tp {tp}: the batch sits on an integer"
    if all(row["max_batch"] is None for row in task.expected["rows"]):
        return "no degree fits a sequence"
    if not any(
        tp > i["n_kv_heads"] and row["max_batch"] is not None
        for tp, row in zip(i["tp_degrees"], task.expected["rows"], strict=True)
    ):
        return "no fitting degree goes past the KV-head count"
    return None


_TP_L3 = """\
A model of `n_params` parameters (`weight_bytes` bytes each) is served with tensor parallelism over
tp chips of `hbm_bytes_per_chip` bytes of HBM each: every chip holds an equal 1/tp share of the
weights. The model caches a key and a value of `head_dim` values for each of its `layers` layers
and `n_kv_heads` KV heads per position, `kv_bytes` bytes per value. The KV heads are divided among
the tp chips as evenly as possible without splitting a head: when tp exceeds n_kv_heads, each
chip keeps a full copy of one KV head's cache (so a chip holds ceil(n_kv_heads / tp) heads). All HBM
a chip has left after its weights holds KV cache. For each degree tp in `tp_degrees`, give the
largest number of sequences of `seq_len` tokens whose cache fits on every chip, or None if not
one fits."""


LEVEL_3 = scaling_level(
    "memory",
    tp_max_batch,
    _TP_L3,
    '{"rows": [{"tp": <int>, "max_batch": <int> | None}, ...]}  # one row per entry of `tp_degrees`',
    tp_max_batch_float,
    "kv_heads_split_fractionally",
    sample=sample_tp_batch,
    reject=_tp_batch_edges,
)


def longest_sequences_for_batch(
    hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches
):
    """Longest length at which each batch of full-length sequences still fits its KV cache."""
    free = hbm_bytes - n_params * weight_bytes
    per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for batch in batches:
        longest = free // (per_token * batch)
        rows.append({"batch": batch, "max_seq_len": longest if longest >= 1 else None})
    return {"rows": rows}


def longest_sequences_for_batch_float(
    hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches, mistake=None
):
    known_mistake(mistake, "ignore_weights")
    free = hbm_bytes - (0 if mistake == "ignore_weights" else n_params * weight_bytes)
    rows = []
    for b in batches:
        s = math.floor(free / (b * kv_bytes * head_dim * n_kv_heads * layers * 2.0))
        rows.append({"batch": b, "max_seq_len": s if s >= 1 else None})
    return {"rows": rows}


def sample_longest(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    chips = draw.choice((1, 2, 4, 8))
    hbm = chips * hbm_capacity(draw, level)
    width = draw.choice((1, 2))
    params = draw.integer(10**9, hbm * 4 // (5 * width))
    inputs = {
        "hbm_bytes": hbm,
        "n_params": params,
        "weight_bytes": width,
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": draw.choice((1, 2)),
    }
    per_token = kv_bytes_per_token(inputs)
    top = (hbm - params * width) // per_token  # the batch at which one position is all that fits
    inputs["batches"] = (
        sorted(draw.sample(range(1, max(3, top * 2)), 2 + level))
        if draw.chance(1, 3)
        else sorted(draw.sample(range(1, max(3, min(top, 4096))), 2 + level))
    )
    return inputs


def _longest_edges(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes"] - i["n_params"] * i["weight_bytes"]
    per_token = kv_bytes_per_token(i)
    for b in i["batches"]:
        if near_integer(Fraction(free, per_token * b)):
            return f"batch {b}: the longest length sits on an integer"
    return None


_LONGEST = """\
A server with `hbm_bytes` bytes of HBM in total holds a model of `n_params` parameters at
`weight_bytes` bytes each; all remaining HBM holds KV cache. The model caches a key and a value of
`head_dim` values for each of `layers` layers and `n_kv_heads` KV heads per token, `kv_bytes` bytes
per value. For each batch in `batches`, give the longest sequence length such that that many
full-length sequences fit their KV cache (ignore activations and fragmentation), or None if not
even one token per sequence fits."""


LEVEL_4 = scaling_level(
    "memory",
    longest_sequences_for_batch,
    _LONGEST,
    '{"rows": [{"batch": <int>, "max_seq_len": <int> | None}, ...]}  # one row per batch, in order',
    longest_sequences_for_batch_float,
    "ignore_weights",
    sample=sample_longest,
    reject=_longest_edges,
)


def admitted_requests(
    hbm_bytes,
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    hbm_bandwidth,
    latency_budget_s,
    pools,
):
    """Per pool: the count of the subset of most tokens per second (ties: the fewest). For a
    count B the B shortest requests read the fewest bytes, so they are the best B; a step reads
    the weights and the chosen caches once, B tokens per step."""
    from fractions import Fraction

    weights = n_params * weight_bytes
    per_position = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for pool in pools:
        best = None
        read = weights
        for count, length in enumerate(sorted(pool), start=1):
            read += per_position * length
            if read > hbm_bytes or Fraction(read, hbm_bandwidth) > latency_budget_s:
                break
            rate = Fraction(count * hbm_bandwidth, read)
            if best is None or rate > best[1]:
                best = (count, rate)
        rows.append({"requests": best[0], "tokens_per_s": best[1]})
    return {"rows": rows}


def admitted_requests_float(
    hbm_bytes,
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    hbm_bandwidth,
    latency_budget_s,
    pools,
    mistake=None,
):
    """The largest allowed count from prefix sums, then the best count by the marginal rule:
    keep adding the next shortest request while its cache is below the bytes per request so far."""
    known_mistake(mistake, "largest_allowed")
    weights = float(n_params) * weight_bytes
    per_position = 2.0 * layers * n_kv_heads * head_dim * kv_bytes
    limit = min(float(hbm_bytes), latency_budget_s * hbm_bandwidth)
    out = []
    for pool in pools:
        caches = [per_position * length for length in sorted(pool)]
        sums = [weights]
        for cache in caches:
            sums.append(sums[-1] + cache)
        allowed = max(b for b in range(1, len(caches) + 1) if sums[b] <= limit * (1 + 1e-15))
        count = 1
        if mistake == "largest_allowed":
            count = allowed
        else:
            while count < allowed and caches[count] * count < sums[count]:
                count += 1
        out.append({"requests": count, "tokens_per_s": count * hbm_bandwidth / sums[count]})
    return {"rows": out}


def sample_admission(draw: Draw, level: int) -> dict:
    """Level 1's model and cache shape; pools of 40 to 160 requests, up to 30 % of them long
    (one long request's cache can exceed the bytes per request read so far: the best count
    falls below the largest allowed one), the short ones adding up to 1/4 to 2 times the room
    the HBM and the budget leave; a third of the pools all short and over the room, the room
    below the weights (so a limit binds: at_limit)."""
    base, chips = sample_server_kv(draw, level)
    base.pop("seq_lens")
    # the server's chips read their HBM together: its bandwidth is theirs added up, each chip's
    # one a real part has for its capacity
    per_chip = bandwidth_for_capacity(draw, level, base["hbm_bytes"] // chips)
    bandwidth = int(require("hbm_bandwidth", chips * per_chip, SERVER_HBM_BANDWIDTH))
    weights = base["n_params"] * base["weight_bytes"]
    free = base["hbm_bytes"] - weights
    per_position = kv_bytes_per_token(base)
    longest = min(free // (4 * per_position), 2**18)  # a long request fills at most a quarter of the room
    if longest < 4096:
        raise Reject("the HBM leaves no room for long requests")
    budget = Fraction(weights + min(free, weights) * Fraction(draw.integer(30, 90), 100), bandwidth)
    budget = Fraction(math.ceil(budget * 10**7), 10**7)
    room = min(free, budget * bandwidth - weights)
    pools = []
    for _ in range(rows(level, 0)):
        count = draw.integer(40, 160)
        at_limit = draw.chance(1, 3)  # short requests only, more than the room: a limit binds
        long = (
            []
            if at_limit
            else [draw.integer(longest // 8, longest) for _ in range(count * draw.integer(0, 30) // 100)]
        )
        # the short requests' caches add up to about 1/4 to 2 (at a limit: 1.3 to 2.5) times the room
        share = Fraction(draw.integer(130, 250) if at_limit else draw.integer(25, 200), 100)
        rest = room * share - per_position * sum(long)
        top = min(longest // 8, max(64, math.floor(2 * rest / (per_position * (count - len(long))))))
        pool = long + [draw.integer(16, top) for _ in range(count - len(long))]
        pools.append(draw.sample(pool, len(pool)))  # the long requests anywhere in the list
    return {**base, "hbm_bandwidth": bandwidth, "latency_budget_s": budget, "pools": pools}


def _counts(i: dict, pool: list[int]) -> list[tuple[int, int]]:
    """(count, bytes read) of the shortest-first prefixes, up to the first over HBM or budget."""
    weights = i["n_params"] * i["weight_bytes"]
    per_position = kv_bytes_per_token(i)
    out, read = [], weights
    for count, length in enumerate(sorted(pool), start=1):
        read += per_position * length
        out.append((count, read))
    return out


def _admission_rules(task: Task) -> str | None:
    """Refuse a draw whose bytes read sit on a limit, or whose best count is within 1e-9 of a
    neighbour (the throughput rises then falls with the count: the runner-up is adjacent)."""
    i = task.inputs
    limit = min(Fraction(i["hbm_bytes"]), i["latency_budget_s"] * i["hbm_bandwidth"])
    for number, (pool, row) in enumerate(zip(i["pools"], task.expected["rows"], strict=True)):
        counts = _counts(i, pool)
        if counts[0][1] > limit:
            return f"pool {number}: not even the shortest request is allowed"
        allowed = sum(read <= limit for _, read in counts)
        for count, read in counts[max(0, allowed - 1) : allowed + 1]:  # the prefixes either side of the limit
            if near_tie(read, limit):
                return f"pool {number}, {count} requests: the bytes read sit on a limit"
        best = row["requests"]
        for count, read in counts[max(0, best - 2) : min(best + 1, allowed)]:
            rate, top = Fraction(count, read), Fraction(best, counts[best - 1][1])
            if rate != top and near_tie(rate, top):  # an exact tie is the stated rule's
                return f"pool {number}: {count} and {best} requests within 1e-9 of the best throughput"
    if len({row["requests"] for row in task.expected["rows"]}) < 2:
        return "the same count for every pool"
    return None


_ADMISSION_L5 = """\
A server with `hbm_bytes` bytes of HBM in total (its chips' HBM added up) and `hbm_bandwidth`
bytes/s of HBM bandwidth in total (its chips' bandwidths added up: the weights and caches are spread
evenly over the chips, which read their shares at once) holds a model of `n_params` parameters at
`weight_bytes` bytes each, and the KV cache of the requests it decodes: a key and a value of
`head_dim` values for each of `layers` layers and `n_kv_heads` KV heads per cached position,
`kv_bytes` bytes per value. Each pool in `pools` lists pending requests by their context lengths
(cached positions; a request's cache does not grow during the step). From a pool the server chooses
any set of its requests (each at most once, at least one) and runs one decode step over them: the
step generates one token per chosen request, reads all weights once and every chosen request's cache
once, and takes its bytes read / `hbm_bandwidth` seconds (count no compute time nor communication
between the chips). The weights plus the chosen caches must fit in the HBM, and the step may take at
most `latency_budget_s` seconds. For each pool, give the number of requests in the set with the most
tokens per second (chosen requests / step time; on a tie, the fewest requests) and that throughput."""


LEVEL_5 = scaling_level(
    "memory",
    admitted_requests,
    _ADMISSION_L5,
    '{"rows": [{"requests": <int>, "tokens_per_s": <number>}, ...]}  # one row per pool, in order',
    admitted_requests_float,
    "largest_allowed",
    sample=sample_admission,
    reject=_admission_rules,
)


def _allowed(i: dict, read: int) -> bool:
    return read <= i["hbm_bytes"] and Fraction(read, i["hbm_bandwidth"]) <= i["latency_budget_s"]


def _allowed_count(i: dict, pool: list[int]) -> int:
    """The largest count of a pool's requests its HBM and budget allow."""
    return sum(_allowed(i, read) for _, read in _counts(i, pool))


def below_limit(task: Task) -> bool:
    """Some pool's best count is below the largest its limits allow (a long request lowers it)."""
    return any(
        row["requests"] < _allowed_count(task.inputs, pool)
        for row, pool in zip(task.expected["rows"], task.inputs["pools"], strict=True)
    )


def at_limit(task: Task) -> bool:
    """Some pool's best count is the largest its HBM or budget allows, with requests left over."""
    return any(
        row["requests"] == _allowed_count(task.inputs, pool) < len(pool)
        for row, pool in zip(task.expected["rows"], task.inputs["pools"], strict=True)
    )


MAX_BATCH_BRANCHES = (
    Branch("none", some_none, Fraction(1, 8), (4,)),
    Branch("none at L3", some_none, Fraction(1, 5), (3,)),
)


MAX_BATCH_FOR_KV_CACHE = five_levels(
    "max_batch_for_kv_cache",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the KV heads derived from the query-head grouping; L3: tensor-parallel degrees splitting the "
    "weights and the KV heads (copies past the head count; None); L4: the longest length per "
    "batch (None); L5: which requests of a pool of mixed context lengths, too many to enumerate, "
    "to decode together for the most tokens per second under the HBM and a step budget "
    "(the shortest first, by an exchange argument; a long request lowers the throughput, so "
    "the best count is often below the limits, and at them in others)",
    branches=(
        *MAX_BATCH_BRANCHES,
        Branch("below the limits", below_limit, Fraction(1, 1), (5,)),
        Branch("at a limit", at_limit, Fraction(2, 5), (5,)),
    ),
)
