"""Level 5 of max_batch_for_kv_cache (round 3): which pending requests to decode together.

Round 2's L5 asked for the largest batch under HBM and a latency budget, the same pattern as
three other serving L5s (the largest allowed batch, or where a compute-bound plateau starts).
This level asks for a subset of a pool of requests of different context lengths, too many to
enumerate: the model must see that for a given count the shortest requests are best (an
exchange argument), and that adding a request raises the throughput only while its cache is
smaller than the bytes per request read so far (weights included), so the best count is often
below the largest one the limits allow. References are self-contained; the float twin takes
another route and can reproduce the named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import bandwidth_for_capacity, rows, sample_server_kv
from exactgrade.domains.scaling._task import Level, known_mistake, near_tie
from exactgrade.domains.scaling.hardware import SERVER_HBM_BANDWIDTH, require
from exactgrade.family import Draw, Reject
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solution


def admitted_requests(hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes,
                      hbm_bandwidth, latency_budget_s, pools):
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


# ---------------------------------------------------------------- float twin (tests only)


def admitted_requests_float(hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes,
                            hbm_bandwidth, latency_budget_s, pools, mistake=None):
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


# ---------------------------------------------------------------- sampler and rules


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
    per_position = 2 * base["layers"] * base["n_kv_heads"] * base["head_dim"] * base["kv_bytes"]
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
        long = [] if at_limit else [draw.integer(longest // 8, longest)
                                    for _ in range(count * draw.integer(0, 30) // 100)]
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
    per_position = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["kv_bytes"]
    out, read = [], weights
    for count, length in enumerate(sorted(pool), start=1):
        read += per_position * length
        out.append((count, read))
    return out


def _allowed(i: dict, read: int) -> bool:
    return read <= i["hbm_bytes"] and Fraction(read, i["hbm_bandwidth"]) <= i["latency_budget_s"]


def _allowed_count(i: dict, pool: list[int]) -> int:
    """The largest count of a pool's requests its HBM and budget allow."""
    return sum(_allowed(i, read) for _, read in _counts(i, pool))


def below_limit(task: Task) -> bool:
    """Some pool's best count is below the largest its limits allow (a long request lowers it)."""
    return any(row["requests"] < _allowed_count(task.inputs, pool)
               for row, pool in zip(task.expected["rows"], task.inputs["pools"], strict=True))


def at_limit(task: Task) -> bool:
    """Some pool's best count is the largest its HBM or budget allows, with requests left over."""
    return any(row["requests"] == _allowed_count(task.inputs, pool) < len(pool)
               for row, pool in zip(task.expected["rows"], task.inputs["pools"], strict=True))


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
        for count, read in counts[max(0, allowed - 1):allowed + 1]:  # the prefixes either side of the limit
            if near_tie(read, limit):
                return f"pool {number}, {count} requests: the bytes read sit on a limit"
        best = row["requests"]
        for count, read in counts[max(0, best - 2):min(best + 1, allowed)]:
            rate, top = Fraction(count, read), Fraction(best, counts[best - 1][1])
            if rate != top and near_tie(rate, top):  # an exact tie is the stated rule's
                return f"pool {number}: {count} and {best} requests within 1e-9 of the best throughput"
    if len({row["requests"] for row in task.expected["rows"]}) < 2:
        return "the same count for every pool"
    return None


# ---------------------------------------------------------------- level

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

ADMISSION = Level(
    admitted_requests,
    _ADMISSION_L5,
    '{"rows": [{"requests": <int>, "tokens_per_s": <number>}, ...]}  # one row per pool, in order',
    admitted_requests_float,
    "largest_allowed",
    sample=sample_admission,
    reject=_admission_rules,
)

__all__ = ["ADMISSION", "admitted_requests", "at_limit", "below_limit"]
