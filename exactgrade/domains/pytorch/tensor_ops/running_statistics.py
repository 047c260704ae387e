"""The running_statistics family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    PY_INT,
    Inputs,
    f32,
    i64,
    pytorch_level,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.domains.pytorch.sampling import dyadic_list
from exactgrade.domains.pytorch.shared import dims
from exactgrade.domains.pytorch.tensor_ops.shared import not_constant, sample_matrix
from exactgrade.family import Branch, Draw, Reject, five_levels


# pt-011 -------------------------------------------------------------------------------------------
def running_statistics(x):
    import torch

    running_max = torch.cummax(x, dim=1)
    return {"rows": [{
        "cumsum": torch.cumsum(x, dim=1),
        "cumprod": torch.cumprod(x, dim=1),
        "running_max": running_max.values,
        "running_max_index": running_max.indices,
    }]}


def _running_statistics(x):
    sums, products, maxima, where = [], [], [], []
    for row in values(x):
        total, product, best, best_at = Fraction(0), Fraction(1), None, -1
        for output in (sums, products, maxima, where):
            output.append([])
        for j, e in enumerate(row):
            total += e
            product *= e
            if best is None or e >= best:  # torch 2.13 CPU reports the last of tied maxima
                best, best_at = e, j
            for output, value in ((sums, total), (products, product), (maxima, best), (where, best_at)):
                output[-1].append(value)
    return [{
        "cumsum": ExactTensor.of("float32", sums),
        "cumprod": ExactTensor.of("float32", products),
        "running_max": ExactTensor.of("float32", maxima),
        "running_max_index": ExactTensor.of("int64", where),
    }]


def _cummax_without_ties(inputs: Inputs) -> str | None:
    for r, row in enumerate(values(inputs["x"])):
        for j in range(1, len(row)):
            if row[j] == max(row[:j]):
                return (f"x[{r}, {j}] ties the running maximum: the index torch.cummax reports for ties is "
                        "not documented")
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=running_statistics,
    independent=_running_statistics,
    question="""Along each row of `x`, give the running sum (`cumsum`), the running product (`cumprod`),
        the running maximum (`running_max`) and, for every position, the index that torch.cummax reports
        for that running maximum (`running_max_index`).""",
    answer=lambda i: ({"cumsum": f32(*dims(i["x"])), "cumprod": f32(*dims(i["x"])),
                       "running_max": f32(*dims(i["x"])), "running_max_index": i64(*dims(i["x"]))},),
    sample=sample_matrix((2, 0), (5, 1), -3, 3, 3),
    refuse=_cummax_without_ties,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    running_statistics,
    _running_statistics,
    """Along each row of `x`, for every position j give: `cumsum`, the sum of the row's elements at
        positions 0 to j; `cumprod`, their product; `running_max`, their largest value; and
        `running_max_index`, the position (0 to j) at which that largest value occurs.""",
    lambda i: ({"cumsum": f32(*dims(i["x"])), "cumprod": f32(*dims(i["x"])),
                "running_max": f32(*dims(i["x"])), "running_max_index": i64(*dims(i["x"]))},),
    sample_matrix((2, 0), (5, 1), -3, 3, 3),
    refuse=_cummax_without_ties,
)

# running_statistics L3: the deepest fall of the running total below its running peak --------------
def deepest_fall(x):
    import torch

    path = torch.cumsum(x, dim=1)
    fall = torch.cummax(path, dim=1).values - path
    deepest = fall.max(dim=1)
    return {"rows": [{"fall": deepest.values, "at": deepest.indices}]}


def _falls(v):
    out = []
    for row in v:
        total, peak, falls = Fraction(0), None, []
        for e in row:
            total += e
            peak = total if peak is None else max(peak, total)
            falls.append(peak - total)
        out.append(falls)
    return out


def _deepest_fall(x):
    falls = _falls(values(x))
    return [{"fall": ExactTensor.of("float32", [max(f) for f in falls]),
             "at": ExactTensor.of("int64", [f.index(max(f)) for f in falls])}]


def _fall_unique(inputs: Inputs) -> str | None:
    for r, f in enumerate(_falls(values(inputs["x"]))):
        if max(f) == 0:
            return f"row {r} never falls below its running peak"
        if f.count(max(f)) > 1:
            return f"row {r} reaches its deepest fall twice: the position would be ambiguous"
    return None


LEVEL_3 = pytorch_level(
    "tensor_ops",
    deepest_fall,
    _deepest_fall,
    """Read each row of `x` as daily changes of a balance that starts at 0: the balance after day j
        is the sum of the changes of days 0 to j. For each row, give `fall`, the largest amount by which
        the balance after some day is below the highest balance reached after any day up to and
        including it, and `at`, the day (0-based) on which that largest fall is reached.""",
    lambda i: ({"fall": f32(i["x"].shape[0]), "at": i64(i["x"].shape[0])},),
    sample_matrix((2, 1), (5, 1), -3, 3, 3),
    refuse=_fall_unique,
)


# running_statistics L4: the first position where the running mean passes a level -----------------
def first_mean_above(x, level):
    import torch

    running = torch.cumsum(x, dim=1) / torch.arange(1, x.shape[1] + 1)
    above = running > level
    return {"rows": [{"first": torch.where(above.any(dim=1), above.int().argmax(dim=1), torch.tensor(-1))}]}


def _first_mean_above(x, level):
    out = []
    for row in values(x):
        total, found = Fraction(0), -1
        for j, e in enumerate(row):
            total += e
            if total / (j + 1) > Fraction(level):
                found = j
                break
        out.append(found)
    return [{"first": ExactTensor.of("int64", out)}]


def _sample_mean_level(draw: Draw, level: int) -> dict:
    x = sample_matrix((2, 1), (5, 1), -3, 3, 3)(draw, level)["x"]
    return {"x": x, "level": float(draw.dyadic(-1, 2, 3))}


def _first_none(task) -> bool:
    return -1 in task.expected["rows"][0]["first"].data


def _mean_level_clear(inputs: Inputs) -> str | None:
    level = Fraction(inputs["level"])
    for row in values(inputs["x"]):
        total = Fraction(0)
        for j, e in enumerate(row):
            total += e
            if abs(total / (j + 1) - level) < Fraction(1, 2**20):
                return "a running mean sits on the level: the float32 division would decide it"
    return None


LEVEL_4 = pytorch_level(
    "tensor_ops",
    first_mean_above,
    _first_mean_above,
    """For each row of `x`, give the first position j (0-based) at which the mean of the row's
        elements at positions 0 to j is strictly greater than `level`, or -1 if there is none; `first`
        is the int64 vector of these positions, one per row.""",
    lambda i: ({"first": i64(i["x"].shape[0])},),
    _sample_mean_level,
    refuse=_mean_level_clear,
    reject=not_constant("first"),
)


# running_statistics L5: the best run of a periodic sequence of 10^11..10^12 terms ------------------
def periodic_best_run(pattern, n):
    import torch

    m = pattern.numel()
    Q, r = divmod(n, m)
    p = torch.cat([torch.zeros(1, dtype=torch.float64), pattern.double().cumsum(0)])  # p[t]: first t terms
    S = float(p[m])
    best = None
    for a in range(m):              # the run starts at offset a of the first period (every later
        for b in range(m):          # start only repeats a run of the first period, or loses S > 0)
            if S > 0:               # as many periods as fit: end in the last period with offset b
                periods = Q if b < r else Q - 1
            else:                   # as few as possible (S = 0: the tie rule takes the earliest end)
                periods = 0 if a <= b else 1
            key = (periods * S + float(p[b + 1] - p[a]), -a, -(periods * m + b))
            if best is None or key > best:
                best = key
    total, start, end = best
    return {"rows": [{"best_sum": total, "start": -start, "end": -end}]}


def _periodic_best_run(pattern, n):
    """Every run whose start lies in period 0 or 1 and whose end lies in period 0, 1, 2 or one of
    the last two, compared exactly (the optimum, ties broken by the rule, is among them)."""
    v = values(pattern)
    m = len(v)
    Q, r = divmod(n, m)
    prefix = [Fraction(0)]
    for e in v:
        prefix.append(prefix[-1] + e)

    def upto(position):             # the sum of the first `position` terms
        k, t = divmod(position, m)
        return k * prefix[m] + prefix[t]

    best = None
    for ks in (0, 1):
        for ke in sorted({0, 1, 2, Q - 1, Q}):
            for a in range(m):
                for b in range(m):
                    start, end = ks * m + a, ke * m + b
                    if start <= end < n:
                        key = (upto(end + 1) - upto(start), -start, -end)
                        best = key if best is None or key > best else best
    total, start, end = best
    return [{"best_sum": total, "start": -start, "end": -end}]


def _sample_periodic_run(draw: Draw, level: int) -> dict:
    m = draw.integer(5, 8)
    v = dyadic_list(draw, m, -3, 3, 2, nonzero=True)
    regime = draw.below(3)          # period sum positive, zero or negative
    total = sum(v[:-1])
    if regime == 1:
        v[-1] = -total
    elif regime == 2 and total + v[-1] >= 0 or regime == 0 and total + v[-1] <= 0:
        v[-1] = -total + (-1 if regime == 2 else 1) * draw.dyadic(Fraction(1, 4), Fraction(3, 2), 2)
    if not -6 <= v[-1] <= 6 or v[-1] == 0 or not any(e > 0 for e in v) or max(v) <= 0:
        raise Reject("the last term is out of range, zero, or nothing is positive")
    if regime:  # period sum <= 0: the best run has at most m terms; rotate the pattern so that it
        # starts j terms before a period's end and runs on into the next period
        exact = [Fraction(e) for e in v]
        best = max((sum(exact[(a + t) % m] for t in range(length)), -length, a)
                    for a in range(m) for length in range(1, m + 1))
        length, a = -best[1], best[2]
        if length < 2:
            raise Reject("the best run is a single term: it cannot cross a period boundary")
        shift = a - (m - draw.integer(1, length - 1))
        v = [v[(t + shift) % m] for t in range(m)]
    Q = draw.integer(10**11, 10**12) // m
    n = Q * m + draw.integer(1, m - 1)
    return {"pattern": tensor("float32", [float(e) for e in v]), "n": n}


def _run_starts_at_zero(inputs: Inputs) -> str | None:
    if _periodic_best_run(**inputs)[0]["start"] == 0:
        return "the best run starts at the first position"
    return None


def run_tied(task) -> bool:
    """Another run has the best sum: the period sum is not positive, so the best run repeats in
    every period and the stated rule picks the first."""
    return sum(values(task.inputs["pattern"])) <= 0


def run_period_positive(task) -> bool:
    return sum(values(task.inputs["pattern"])) > 0


def _periodic_run_mistaken(task) -> str | None:
    """The named mistake: the best run of the pattern read once, start to end, without running on
    into the next period: it must not be the answer (the best run crosses a period boundary)."""
    row, m = task.expected["rows"][0], task.inputs["pattern"].shape[0]
    if row["start"] // m == row["end"] // m:
        return "the best run lies within one period: the pattern's own best run answers"
    return None


LEVEL_5 = pytorch_level(
    "tensor_ops",
    periodic_best_run,
    _periodic_best_run,
    lambda i: f"""A sequence s has n = {i["n"]} terms (far too many to build): s[t] = pattern[t mod
        {i["pattern"].shape[0]}] for t = 0, 1, ..., n-1, where `pattern` is the given vector of
        {i["pattern"].shape[0]} values (the pattern repeats; n need not be a multiple of its length). Among
        all contiguous non-empty runs s[start], s[start+1], ..., s[end] (0 <= start <= end <= n-1), find the
        one whose terms have the largest sum; if several runs share that sum, take the one with the smallest
        start, and among those the one with the smallest end. Give `best_sum`, that sum, and `start` and
        `end`, its first and last positions (0-based).""",
    lambda i: ({"best_sum": PY_FLOAT, "start": PY_INT, "end": PY_INT},),
    _sample_periodic_run,
    zero_reason=_run_starts_at_zero,
    reject=_periodic_run_mistaken,
)


RUNNING_STATISTICS = five_levels(
    "running_statistics",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 cumsum, cumprod and cummax named; L2 the running quantities described; L3 the deepest fall "
          "of a running total below its running peak; L4 the first position where the running mean "
          "passes a level, or -1; L5 the best run of a "
          "periodic sequence of 10^11..10^12 terms: the period sum's sign decides whether the run spans "
          "every period or one boundary, and the stated tie rule picks among repeats",
    branches=(Branch("a row never passes the level", _first_none, Fraction(1, 10), (4,)),
              Branch("runs tie: the stated rule picks the first", run_tied, Fraction(1, 4), (5,)),
              Branch("the period sum is positive: the run spans every period", run_period_positive,
                     Fraction(1, 5), (5,))),
)
