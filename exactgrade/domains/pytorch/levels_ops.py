"""Round-2 level-5 questions of the tensor_ops and autograd families: hard to reason, not to type.

Each L5 here describes a system by its mathematics and asks quantities that a transcription of
the text cannot produce: a chain of index maps over a tensor too large to build (the index
arithmetic must be derived), a statistic of a vector of 10^10..10^12 elements defined by a period
(closed forms, a partial last period, a strict boundary count), a 32-bit wrapping recurrence run
10^11 steps (affine maps composed, no division mod 2^32), a best run over a periodic sequence whose
regime (period sum positive, zero, negative) decides the method, an inverse over a continuous
threshold whose answer is an exact rational at a regime boundary, and higher-order gradients of a
coupled function. Each has a torch reference (the program a perfect model runs), an independent
recomputation by another route, and a named mistake that must give another answer (``reject``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, Inputs, f32, i64, pytorch_family, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, values
from exactgrade.domains.pytorch.levels import solve
from exactgrade.domains.pytorch.sampling import dyadic_list, dyadic_tensor, int_tensor
from exactgrade.family import Draw, Reject


def _family(name: str, category: str, reference, independent, question, answer, sample, *, refuse=None,
            reject=None, zero_reason=None):
    return pytorch_family(name, category, reference=reference, independent=independent, question=question,
                          answer=answer, sample=sample, levels="", refuse=refuse, reject=reject,
                          zero_reason=zero_reason)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _smooth(draw: Draw, low: int, high: int) -> int:
    """A number in [low, high] made of the primes 2, 3, 5, 7 (so that it has many divisors)."""
    while True:
        n = 1
        while n < low:
            n *= draw.choice((2, 2, 3, 3, 5, 7))
        if n <= high:
            return n


# permute_and_reshape L5: a chain of re-indexings of a tensor too large to build ----------------------
def view_chain(A, B, C, R, T, queries):
    import torch

    # x[i, j, k] = i*B*C + j*C + k; follow each query position back through the chain
    S, half = A * B * C // R, R // 2
    U = S * half // T
    flat_v = queries[:, 0] * U + queries[:, 1]            # v is w read out row-major, regrouped
    q, p = flat_v // half, flat_v % half                  # w[q, p] = u[p, q]
    flat_y = (2 * p + 1) * S + q                          # u's row p is z's row 2p+1; z is y read out
    k, j, i = flat_y // (B * A), (flat_y // A) % B, flat_y % A   # y[k, j, i] = x[i, j, k]
    return {"rows": [{"values": (i * B * C + j * C + k).to(torch.int64)}]}


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, r = divmod(flat, size)
        index.append(r)
    return tuple(reversed(index))


def _ravel(index: tuple[int, ...], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, size in zip(index, shape, strict=True):
        flat = flat * size + i
    return flat


def _view_chain_value(A, B, C, R, T, t, c, *, copy_free=False):
    """The element of v at (t, c), stage by stage (copy_free: the named mistake, reading every
    regrouping off x's own storage order as if no axis had moved)."""
    N = A * B * C
    S, half = N // R, R // 2
    U = N // 2 // T
    q, p = _unravel(_ravel((t, c), (T, U)), (S, half))    # v -> w
    row, col = 2 * p + 1, q                               # w -> u -> z
    flat = _ravel((row, col), (R, S))
    if copy_free:
        return flat
    k, j, i = _unravel(flat, (C, B, A))                   # z -> y
    return _ravel((i, j, k), (A, B, C))                   # y -> x, whose value is its flat position


def _view_chain(A, B, C, R, T, queries):
    return [{"values": ExactTensor.of("int64", [_view_chain_value(A, B, C, R, T, t, c)
                                                for t, c in values(queries)])}]


def _sample_view_chain(draw: Draw, level: int) -> dict:
    A, B, C = (_smooth(draw, 600, 6000) for _ in range(3))
    N = A * B * C
    evens = [d for d in _divisors(N) if d % 2 == 0 and 40 <= d <= 10**6 and d not in (2 * A, 2 * B, 2 * C)]
    rows = [d for d in _divisors(N // 2) if 40 <= d <= 10**6]
    if not evens or len(rows) < 3:
        raise Reject("too few divisors in range for the two regroupings")
    R = draw.choice(evens)
    T = draw.choice([d for d in rows if d not in (R, N // R)])
    U = N // 2 // T
    queries = [[draw.integer(0, T - 1), draw.integer(0, U - 1)] for _ in range(6)]
    return {"A": A, "B": B, "C": C, "R": R, "T": T, "queries": tensor("int64", queries)}


def _view_chain_mistaken(task) -> str | None:
    i = task.inputs
    wrong = [_view_chain_value(i["A"], i["B"], i["C"], i["R"], i["T"], t, c, copy_free=True)
             for t, c in values(i["queries"])]
    right = task.expected["rows"][0]["values"].data
    if sum(a == b for a, b in zip(wrong, right, strict=True)) * 2 >= len(right):
        return "reading the regroupings off x's storage order gives the right values"
    return None


VIEW_CHAIN = _family(
    "permute_and_reshape", "tensor_ops", view_chain, _view_chain,
    lambda i: f"""Let x be an int64 tensor of shape (A, B, C) = ({i["A"]}, {i["B"]}, {i["C"]}) whose element
        x[i, j, k] is i*B*C + j*C + k (x is far too large to build: it is only described). Define, in order:
        y, of shape (C, B, A), with y[k, j, i] = x[i, j, k]; z, of shape (R, A*B*C/R) with R = {i["R"]}: the
        elements of y listed in row-major order (last index fastest) and laid out row after row; u: the
        rows of z with odd index (rows 1, 3, 5, ...), in order, so u has R/2 rows; w, the transpose of u
        (w[q, p] = u[p, q]); and v, of shape (T, A*B*C/(2T)) with T = {i["T"]}: the elements of w listed in
        row-major order and laid out row after row. Give `values`, the int64 vector whose element t is
        v[queries[t, 0], queries[t, 1]].""",
    lambda i: ({"values": i64(i["queries"].shape[0])},), _sample_view_chain, reject=_view_chain_mistaken)


# normalise L5: standardising a periodic vector of 10^10..10^12 elements ---------------------------
def periodic_standardise(n, m, queries):
    import math

    import torch

    Q, r = divmod(n, m)
    total = Q * m * (m - 1) // 2 + r * (r - 1) // 2                       # sum of (i mod m)
    squares = Q * (m - 1) * m * (2 * m - 1) // 6 + (r - 1) * r * (2 * r - 1) // 6
    mean = total / n
    std = ((squares * n - total * total) / (n * n)) ** 0.5                # exact numerator, then float
    z = ((queries.to(torch.float64).remainder(m) - mean) / std).float()
    first = math.floor(mean + std) + 1              # the smallest residue above mean + std

    def above(length):                              # residues 0..length-1 above it
        return max(0, length - first)

    return {"rows": [{"standardised": z, "above": Q * above(m) + above(r)}]}


def _sum_squares(k: int) -> int:
    """0^2 + 1^2 + ... + (k-1)^2 as 2*C(k,3) + C(k,2) (another route than the product formula)."""
    return 2 * math.comb(k, 3) + math.comb(k, 2)


def _periodic_moments(n: int, m: int) -> tuple[Fraction, Fraction]:
    Q, r = divmod(n, m)
    mean = Fraction(Q * math.comb(m, 2) + math.comb(r, 2), n)
    return mean, Fraction(Q * _sum_squares(m) + _sum_squares(r), n) - mean * mean


def _first_above(mean: Fraction, var: Fraction) -> int:
    """The smallest integer t with t - mean > sqrt(var), decided in exact integers."""
    t = math.floor(mean) + math.isqrt(math.floor(var)) - 2
    while not (t > mean and (t - mean) ** 2 > var):
        t += 1
    return t


def _periodic_standardise(n, m, queries):
    Q, r = divmod(n, m)
    mean, var = _periodic_moments(n, m)
    std = mpmath.sqrt(hp(var))
    z = [(hp(int(p) % m) - hp(mean)) / std for p in values(queries)]
    first = _first_above(mean, var)
    above = Q * max(0, m - first) + max(0, r - first)
    return [{"standardised": ExactTensor.of("float32", z), "above": above}]


def _periodic_threshold_clear(inputs: Inputs) -> str | None:
    mean, var = _periodic_moments(inputs["n"], inputs["m"])
    with mpmath.workdps(60):
        threshold = hp(mean) + mpmath.sqrt(hp(var))
        if abs(threshold - mpmath.nint(threshold)) < mpmath.mpf("1e-3"):
            return "mean + std lies within 1e-3 of an integer: the count would hinge on rounding"
    return None


def _sample_periodic(draw: Draw, level: int) -> dict:
    m = draw.integer(10**9, 3 * 10**11)
    Q = draw.integer(2, 5)
    r = draw.integer(m // 5, 4 * m // 5)
    n = Q * m + r
    queries = [draw.integer(0, n - 1) for _ in range(5)]
    return {"n": n, "m": m, "queries": tensor("int64", queries)}


def _periodic_mistaken(task) -> str | None:
    """The named mistake: the last, partial period ignored (moments of one full period)."""
    m = task.inputs["m"]
    mean = Fraction(m - 1, 2)
    std = mpmath.sqrt(mpmath.mpf(m * m - 1) / 12)
    first = int(mpmath.floor(mean + std)) + 1
    n = task.inputs["n"]
    Q, r = divmod(n, m)
    if Q * max(0, m - first) + max(0, r - first) == task.expected["rows"][0]["above"]:
        return "ignoring the partial last period gives the right count"
    return None


PERIODIC_STANDARDISE = _family(
    "normalise", "tensor_ops", periodic_standardise, _periodic_standardise,
    lambda i: f"""A vector v has n = {i["n"]} elements (far too many to build): v[i] = i mod m, with m =
        {i["m"]}, for i = 0, 1, ..., n-1 (so v counts 0, 1, ..., m-1, starts again at 0, and so on; n need not
        be a multiple of m). Standardise it: subtract from every element the mean of all n elements, then
        divide by their standard deviation, the square root of the mean of the squared deviations from
        the mean (divide by n, no correction, no epsilon). Give `standardised`, the standardised values at
        the positions listed in `queries` (0-based positions into v, in that order), and `above`, the
        number of positions i (out of all n) whose standardised value is strictly greater than 1.""",
    lambda i: ({"standardised": f32(i["queries"].shape[0]), "above": PY_INT},), _sample_periodic,
    refuse=_periodic_threshold_clear, reject=_periodic_mistaken)


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


PERIODIC_BEST_RUN = _family(
    "running_statistics", "tensor_ops", periodic_best_run, _periodic_best_run,
    lambda i: f"""A sequence s has n = {i["n"]} terms (far too many to build): s[t] = pattern[t mod
        {i["pattern"].shape[0]}] for t = 0, 1, ..., n-1, where `pattern` is the given vector of
        {i["pattern"].shape[0]} values (the pattern repeats; n need not be a multiple of its length). Among
        all contiguous non-empty runs s[start], s[start+1], ..., s[end] (0 <= start <= end <= n-1), find the
        one whose terms have the largest sum; if several runs share that sum, take the one with the smallest
        start, and among those the one with the smallest end. Give `best_sum`, that sum, and `start` and
        `end`, its first and last positions (0-based).""",
    lambda i: ({"best_sum": PY_FLOAT, "start": PY_INT, "end": PY_INT},), _sample_periodic_run,
    zero_reason=_run_starts_at_zero, reject=_periodic_run_mistaken)


# clamp_and_select L5: the shrinkage level that leaves a given total magnitude --------------------
def shrink_to_budget(x, budget):
    import torch

    magnitudes = torch.sort(x.abs().reshape(-1).double(), descending=True).values
    cumulative = magnitudes.cumsum(0)
    counts = torch.arange(1, magnitudes.numel() + 1, dtype=torch.float64)
    levels = (cumulative - budget) / counts          # the level if exactly the k largest stay nonzero
    k = int((magnitudes > levels).sum())             # the k for which that is consistent
    level = float(levels[k - 1])
    shrunk = torch.sign(x) * torch.clamp(x.abs() - level, min=0.0)
    return {"rows": [{"level": level, "shrunk": shrunk, "nonzero": int((shrunk != 0).sum())}]}


def _shrink_to_budget(x, budget):
    flat = sorted((abs(e) for row in values(x) for e in row), reverse=True)
    target = Fraction(budget)
    for k in range(1, len(flat) + 1):   # the total magnitude is piecewise linear in the level:
        level = (sum(flat[:k]) - target) / k     # find the piece whose level is consistent
        below = flat[k] if k < len(flat) else Fraction(0)
        if flat[k - 1] > level >= below and level >= 0:
            break

    def shrink(e):
        return (1 if e > 0 else -1) * max(abs(e) - level, Fraction(0))

    shrunk = [[shrink(e) for e in row] for row in values(x)]
    return [{"level": level, "shrunk": ExactTensor.of("float32", shrunk),
             "nonzero": sum(1 for e in flat if e > level)}]


def _sample_budget(draw: Draw, level: int) -> dict:
    """x with a gap of at least 1/2 between its k-th and (k+1)-th magnitudes by construction, k (the
    elements left nonzero) drawn from a third of x up to all but two: the shrunk tensor is never a few
    survivors among zeros, and how many survive varies across instances (the family's branches)."""
    rows, cols = draw.integer(3, 5), draw.integer(3, 5)
    n = rows * cols
    k = draw.integer(-(-n // 3), n - 2)
    split = draw.dyadic(Fraction(3, 4), Fraction(11, 4), 2)  # the n - k small magnitudes lie in [1/4, split]
    magnitudes = ([draw.dyadic(Fraction(1, 4), split, 2) for _ in range(n - k)]
                  + [draw.dyadic(split + Fraction(1, 2), split + 3, 2) for _ in range(k)])
    signed = [float(m) * draw.choice((-1, 1)) for m in draw.shuffled(magnitudes)]
    x = tensor("float32", [signed[r * cols:(r + 1) * cols] for r in range(rows)])
    flat = sorted(magnitudes, reverse=True)
    # a level strictly inside the gap, not on the 1/4 grid: the budget it leaves
    level = flat[k] + (flat[k - 1] - flat[k]) * Fraction(draw.integer(2, 5), 7)
    budget = sum(flat[:k]) - k * level
    budget = Fraction(round(budget * 64), 64)  # a dyadic budget; the level follows from it exactly
    return {"x": x, "budget": float(budget)}


def _budget_level_clear(inputs: Inputs) -> str | None:
    flat = sorted((abs(e) for row in values(inputs["x"]) for e in row), reverse=True)
    level = _shrink_to_budget(inputs["x"], inputs["budget"])[0]["level"]
    if min(abs(level - e) for e in flat) < Fraction(1, 16) or level <= 0:
        return "the level lies within 1/16 of a magnitude (or is not positive)"
    return None


def _budget_mistaken(task) -> str | None:
    """The named mistakes: every element assumed to stay nonzero ((sum - budget) / count), or the
    median magnitude taken as the level."""
    flat = sorted((abs(e) for row in values(task.inputs["x"]) for e in row), reverse=True)
    level = Fraction(task.expected["rows"][0]["level"])
    everyone = (sum(flat) - Fraction(task.inputs["budget"])) / len(flat)
    median = sorted(flat)[(len(flat) + 1) // 2 - 1]
    if abs(everyone - level) <= abs(level) / 1000 or median == level:
        return "a named mistake gives the level"
    return None


def _budget_rules(task) -> str | None:
    """A third of x or more stays nonzero (the non-trivial part of `shrunk` is a substantial share of
    it), and no named mistake gives the level."""
    row, count = task.expected["rows"][0], math.prod(task.inputs["x"].shape)
    if 3 * row["nonzero"] < count:
        return f"only {row['nonzero']} of {count} elements stay nonzero: the shrunk tensor is mostly zeros"
    return _budget_mistaken(task)


SHRINK_TO_BUDGET = _family(
    "clamp_and_select", "tensor_ops", shrink_to_budget, _shrink_to_budget,
    lambda i: """Shrinking `x` by a level L >= 0 moves every element toward zero by L and sets it to zero
        if it would cross zero (an element e becomes 0 if |e| <= L, otherwise e - L when positive and e + L
        when negative). Give `level`, the level L at which the absolute values of the shrunk elements add
        up to exactly `budget`; `shrunk`, x shrunk by that level; and `nonzero`, the number of elements of
        the shrunk tensor that are not zero.""",
    lambda i: ({"level": PY_FLOAT, "shrunk": f32(*i["x"].shape), "nonzero": PY_INT},), _sample_budget,
    refuse=_budget_level_clear, reject=_budget_rules)


# casts_and_wraparound L5: a 32-bit wrapping recurrence run 10^11..10^12 steps ---------------------
def wrapping_recurrence(pattern, seed, mult, n):
    import torch

    mask = (1 << 32) - 1

    def compose(f, g):             # g after f, each an affine map h -> a*h + c (mod 2^32)
        return (f[0] * g[0]) & mask, (f[1] * g[0] + g[1]) & mask

    def power(f, k):               # f applied k times, by repeated squaring
        out = (1, 0)
        while k:
            if k & 1:
                out = compose(out, f)
            f, k = compose(f, f), k >> 1
        return out

    def run(steps):
        period = (1, 0)
        for e in pattern.tolist():
            period = compose(period, (mult, e & mask))
        a, c = power(period, steps // pattern.numel())
        h = (a * (seed & mask) + c) & mask
        for e in pattern.tolist()[:steps % pattern.numel()]:
            h = (h * mult + e) & mask
        return int(torch.tensor(h, dtype=torch.int64).to(torch.int32))   # read as signed int32

    return {"rows": [{"halfway": run(n // 2), "final": run(n)}]}


def _wrapping_recurrence(pattern, seed, mult, n):
    """After k whole periods h = A^k*seed + c*(A^k - 1)/(A - 1), with A = mult^m and c the period's
    constant; the division is exact over the integers, so A^k is taken mod 2^32*(A - 1)."""
    v = list(values(pattern))
    m = len(v)
    A = mult ** m
    c = 0
    for e in v:
        c = c * mult + e
    modulus = (1 << 32) * (A - 1)

    def run(steps):
        k, rest = divmod(steps, m)
        power = pow(A, k, modulus)
        h = power * seed + c * ((power - 1) // (A - 1))
        for e in v[:rest]:
            h = h * mult + e
        h %= 1 << 32
        return h - (1 << 32) if h >= 1 << 31 else h

    return [{"halfway": run(n // 2), "final": run(n)}]


def _sample_wrapping(draw: Draw, level: int) -> dict:
    m = draw.integer(4, 7)
    pattern = int_tensor(draw, (m,), -(2**31), 2**31 - 1, "int32")
    n = draw.integer(10**11, 10**12)
    return {"pattern": pattern, "seed": draw.integer(-(2**31), 2**31 - 1),
            "mult": 2 * draw.integer(2, 500_000) + 1, "n": n}


def _wrapping_mistaken(task) -> str | None:
    """The named mistake: the unsigned reading of the 32 bits (the answer must be read as signed)."""
    row = task.expected["rows"][0]
    if row["halfway"] >= 0 and row["final"] >= 0:
        return "both answers are non-negative: the unsigned reading gives them too"
    return None


WRAPPING_RECURRENCE = _family(
    "casts_and_wraparound", "tensor_ops", wrapping_recurrence, _wrapping_recurrence,
    lambda i: f"""A 32-bit signed integer register h (two's complement: every addition and multiplication
        keeps only the low 32 bits of the exact result, which are then read as a value from -2^31 to
        2^31 - 1, as int32 tensor arithmetic does) starts at h = `seed`. Step t, for t = 0, 1, 2, ...,
        sets h to h * `mult` + pattern[t mod {i["pattern"].shape[0]}], with `pattern` the given int32
        vector. Give `halfway`, the value of h after the first floor(n/2) steps, and `final`, its value
        after n steps, with n = `n` = {i["n"]} (both as Python ints from -2^31 to 2^31 - 1).""",
    lambda i: ({"halfway": PY_INT, "final": PY_INT},), _sample_wrapping, reject=_wrapping_mistaken)


# partial_derivatives L5: the gradient of the squared gradient norm, and the curvature's inertia -------
COUPLED_TEXT = ("f(a, b) = sum over i of (a_i^2*b_i + b_i^3) + sum over i from 0 to n-2 of a_i*b_(i+1)")


def gradient_norm_descent(a0, b0):
    import torch

    a, b = a0.double().requires_grad_(True), b0.double().requires_grad_(True)

    def f(a, b):
        return (a ** 2 * b + b ** 3).sum() + (a[:-1] * b[1:]).sum()

    grad_a, grad_b = torch.autograd.grad(f(a, b), (a, b), create_graph=True)
    norm = (grad_a ** 2).sum() + (grad_b ** 2).sum()
    of_a, of_b = torch.autograd.grad(norm, (a, b))
    n = a0.numel()
    hessian = torch.autograd.functional.hessian(lambda z: f(z[:n], z[n:]), torch.cat([a, b]).detach())
    negative = int((torch.linalg.eigvalsh(hessian) < 0).sum())
    return {"rows": [{"grad_a": of_a.float(), "grad_b": of_b.float(), "negative": negative}]}


def _coupled_hessian(va, vb):
    """The exact Hessian of f in the order (a_0..a_(n-1), b_0..b_(n-1)), and its gradient."""
    n = len(va)
    grad = [2 * va[i] * vb[i] + (vb[i + 1] if i < n - 1 else 0) for i in range(n)] + \
           [va[i] ** 2 + 3 * vb[i] ** 2 + (va[i - 1] if i > 0 else 0) for i in range(n)]
    h = [[Fraction(0)] * (2 * n) for _ in range(2 * n)]
    for i in range(n):
        h[i][i] = 2 * vb[i]
        h[i][n + i] = h[n + i][i] = 2 * va[i]
        h[n + i][n + i] = 6 * vb[i]
        if i < n - 1:
            h[i][n + i + 1] = h[n + i + 1][i] = Fraction(1)
    return h, grad


def _inertia(h, shift=Fraction(0)) -> int | None:
    """The number of negative eigenvalues of h + shift*I by symmetric elimination (Sylvester's law:
    the signs of the pivots), or None when a pivot is zero."""
    m = [[e + (shift if r == c else 0) for c, e in enumerate(row)] for r, row in enumerate(h)]
    negative = 0
    for k in range(len(m)):
        pivot = m[k][k]
        if pivot == 0:
            return None
        negative += pivot < 0
        for r in range(k + 1, len(m)):
            factor = m[r][k] / pivot
            m[r] = [x - factor * y for x, y in zip(m[r], m[k], strict=True)]
    return negative


def _gradient_norm_descent(a0, b0):
    h, grad = _coupled_hessian(values(a0), values(b0))
    n = len(grad) // 2
    of = [2 * sum((h[r][c] * grad[c] for c in range(2 * n)), Fraction(0)) for r in range(2 * n)]
    return [{"grad_a": ExactTensor.of("float32", of[:n]), "grad_b": ExactTensor.of("float32", of[n:]),
             "negative": _inertia(h)}]


def _sample_coupled(draw: Draw, level: int) -> dict:
    n = draw.integer(4, 6)
    return {"a0": dyadic_tensor(draw, (n,), -1.5, 1.5, 2),
            "b0": dyadic_tensor(draw, (n,), -1, 1, 3, nonzero=True)}


def _curvature_clear(inputs: Inputs) -> str | None:
    h, _ = _coupled_hessian(values(inputs["a0"]), values(inputs["b0"]))
    counts = {_inertia(h, s) for s in (Fraction(-1, 16), Fraction(0), Fraction(1, 16))}
    if None in counts or len(counts) > 1:
        return "an eigenvalue of the Hessian lies within 1/16 of zero: its sign would hinge on rounding"
    return None


def _coupling_mistaken(task) -> str | None:
    """The named mistakes: the coupling terms dropped from the Hessian, or 2*grad f taken for the
    gradient of the squared norm: neither may reproduce an element of the answer."""
    va, vb = values(task.inputs["a0"]), values(task.inputs["b0"])
    h, grad = _coupled_hessian(va, vb)
    n = len(va)
    for r in range(n):
        for c in range(n):
            if c != r:
                h[r][n + c] = h[n + c][r] = Fraction(0)
    uncoupled = [2 * sum((h[r][c] * grad[c] for c in range(2 * n)), Fraction(0)) for r in range(2 * n)]
    row = task.expected["rows"][0]
    key = [Fraction(e) for e in row["grad_a"].data + row["grad_b"].data]
    close = sum(1 for u, k in zip(uncoupled, key, strict=True) if abs(u - k) <= abs(k) / 10**4)
    doubled = sum(1 for g, k in zip(grad, key, strict=True) if abs(2 * g - k) <= abs(k) / 10**4)
    if close * 2 > len(key) or doubled * 2 > len(key):
        return "a named mistake reproduces most of the gradient"
    return None


def negative_count(low: int, high: int):
    def reached(task) -> bool:
        return low <= task.expected["rows"][0]["negative"] - task.inputs["a0"].shape[0] <= high
    return reached


GRADIENT_NORM_DESCENT = _family(
    "partial_derivatives", "autograd", gradient_norm_descent, _gradient_norm_descent,
    lambda i: f"""Let {COUPLED_TEXT}, for vectors a and b of the same length n = {i["a0"].shape[0]}. Let
        g(a, b) be the sum of the squares of all 2n partial derivatives of f (the squared length of its
        gradient). At a = `a0`, b = `b0`, give `grad_a` and `grad_b`, the partial derivatives of g with
        respect to each a_i and each b_i, and `negative`, the number of negative eigenvalues of the
        2n x 2n matrix of second partial derivatives of f with respect to (a_0, ..., a_(n-1), b_0, ...,
        b_(n-1)) there.""",
    lambda i: ({"grad_a": f32(i["a0"].shape[0]), "grad_b": f32(i["a0"].shape[0]), "negative": PY_INT},),
    _sample_coupled, refuse=_curvature_clear, reject=_coupling_mistaken)


# regression_gradient L5: two steps of steepest descent with the exactly best step size -------------
def line_search_descent(w0, x, y):
    import torch

    xd, yd = x.double(), y.double()

    def loss(w):
        return ((xd @ w - yd) ** 2).mean()

    w, steps = w0.double(), []
    for _ in range(2):
        w = w.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(loss(w), w, create_graph=True)
        (hg,) = torch.autograd.grad(g, w, grad_outputs=g.detach())   # the curvature along g, H @ g
        g = g.detach()
        step = float((g @ g) / (g @ hg))            # the minimiser of the loss along -g (a parabola)
        steps.append(step)
        w = (w - step * g).detach()
    return {"rows": [{"steps": torch.tensor(steps, dtype=torch.float32), "w2": w.float(),
                      "loss2": float(loss(w))}]}


def _line_search_descent(w0, x, y):
    vx, vy = values(x), values(y)
    count = len(vx)
    gram = [[sum((row[p] * row[q] for row in vx), Fraction(0)) for q in range(len(vx[0]))]
            for p in range(len(vx[0]))]
    w, steps = list(values(w0)), []
    for _ in range(2):
        residual = [sum((a * b for a, b in zip(row, w, strict=True)), Fraction(0)) - t
                    for row, t in zip(vx, vy, strict=True)]
        g = [Fraction(2, count) * sum((row[p] * e for row, e in zip(vx, residual, strict=True)), Fraction(0))
             for p in range(len(w))]
        curvature = Fraction(2, count) * sum((g[p] * gram[p][q] * g[q] for p in range(len(w))
                                              for q in range(len(w))), Fraction(0))
        step = sum((e * e for e in g), Fraction(0)) / curvature
        steps.append(step)
        w = [a - step * e for a, e in zip(w, g, strict=True)]
    loss = sum(((sum((a * b for a, b in zip(row, w, strict=True)), Fraction(0)) - t) ** 2
                for row, t in zip(vx, vy, strict=True)), Fraction(0)) / count
    return [{"steps": ExactTensor.of("float32", steps), "w2": ExactTensor.of("float32", w), "loss2": loss}]


def _sample_line_search(draw: Draw, level: int) -> dict:
    weights = draw.integer(3, 4)
    samples = draw.integer(weights + 2, weights + 4)
    return {"w0": dyadic_tensor(draw, (weights,), -1.5, 1.5, 2),
            "x": dyadic_tensor(draw, (samples, weights), -3, 3, 2),
            "y": dyadic_tensor(draw, (samples,), -3, 3, 2)}


def _line_search_clear(task) -> str | None:
    """The two step sizes must differ by more than the tolerance (else one step size reused passes)
    and the loss must stay well above zero. The named mistake, the curvature without the factor 2
    of the square, doubles every step: it fails on every instance by construction."""
    row = task.expected["rows"][0]
    s1, s2 = row["steps"].data
    if abs(s1 - s2) <= 0.01 * max(s1, s2) or row["loss2"] < 1 / 16:
        return "the two best steps are nearly equal, or the loss after them is nearly zero"
    return None


LINE_SEARCH_DESCENT = _family(
    "regression_gradient", "autograd", line_search_descent, _line_search_descent,
    lambda i: """The loss of a weight vector w is the mean over the samples of the squared difference
        between the prediction (the dot product of the sample's row of `x` with w) and the sample's target
        in `y`. Starting at w = `w0`, take two steps of steepest descent: each step moves from the current
        w to w - s*G, where G is the gradient of the loss at the current w and s > 0 is the step size for
        which the loss at w - s*G is the smallest possible (over all real s, for that step). Give `steps`,
        the two step sizes in order, `w2`, the weights after the second step, and `loss2`, the loss there.""",
    lambda i: ({"steps": f32(2), "w2": f32(i["w0"].shape[0]), "loss2": PY_FLOAT},), _sample_line_search,
    reject=_line_search_clear)


# stable_sort L5: the stable order of a periodic sequence of 10^11..10^12 terms, both ways ----------
def periodic_stable_order(pattern, n, positions, places):
    import torch

    p = pattern.tolist()
    m = len(p)
    Q, r = divmod(n, m)
    count = {v: Q * p.count(v) + p[:r].count(v) for v in set(p)}        # occurrences in all n terms
    before = {v: sum(c for u, c in count.items() if u > v) for v in count}  # larger terms come first

    def place_of(i):               # larger first; equal terms keep their order (earlier first)
        k, t = divmod(i, m)
        v = p[t]
        return before[v] + k * p.count(v) + p[:t].count(v)

    def term_at(place):            # the inverse: which term lands at this place
        v = min(u for u in count if before[u] <= place)   # smaller values come later
        j = place - before[v]
        offsets = [t for t in range(m) if p[t] == v]
        k, e = divmod(j, len(offsets))
        return k * m + offsets[e]

    return {"rows": [{"place": torch.tensor([place_of(i) for i in positions.tolist()]),
                      "term": torch.tensor([term_at(k) for k in places.tolist()])}]}


def _periodic_stable_order(pattern, n, positions, places):
    """Places counted term by term over one period and scaled (no per-value table), and each
    term found by bisection on the place of the terms of its value (place is increasing along them)."""
    p = list(values(pattern))
    m = len(p)
    Q, r = divmod(n, m)

    def place_of(i):
        k, t = divmod(i, m)
        larger = sum(Q + (1 if s < r else 0) for s in range(m) if p[s] > p[t])
        equal_before = sum(k + (1 if s < t else 0) for s in range(m) if p[s] == p[t])
        return larger + equal_before

    def term_at(place):
        for v in sorted(set(p), reverse=True):
            ts = [t for t in range(m) if p[t] == v]
            first = place_of(ts[0])
            last_position = max(k * m + t for t in ts for k in (Q - 1, Q) if k * m + t < n)
            if first <= place <= place_of(last_position):
                low, high = 0, n // m + 1              # the last period index whose first v is <= place
                while low < high:
                    mid = (low + high + 1) // 2
                    if place_of(mid * m + ts[0]) <= place:
                        low = mid
                    else:
                        high = mid - 1
                for t in ts:
                    if low * m + t < n and place_of(low * m + t) == place:
                        return low * m + t
        raise AssertionError("no term at this place")

    return [{"place": ExactTensor.of("int64", [place_of(i) for i in values(positions)]),
             "term": ExactTensor.of("int64", [term_at(k) for k in values(places)])}]


def _sample_periodic_order(draw: Draw, level: int) -> dict:
    m = draw.integer(6, 9)
    pattern = [draw.integer(0, 4) for _ in range(m)]
    if len(set(pattern)) < 3 or max(pattern.count(v) for v in pattern) < 2:
        raise Reject("the pattern needs three values and a repeated one")
    n = draw.integer(10**11, 10**12) // m * m + draw.integer(1, m - 1)
    return {"pattern": tensor("int64", pattern), "n": n,
            "positions": tensor("int64", [draw.integer(0, n - 1) for _ in range(4)]),
            "places": tensor("int64", [draw.integer(0, n - 1) for _ in range(4)])}


def _order_mistaken(task) -> str | None:
    """The named mistakes: the partial last period ignored (every value occurring exactly Q times
    its count per period), or ties broken against the original order: each must miss most answers."""
    p, n = list(values(task.inputs["pattern"])), task.inputs["n"]
    m = len(p)
    Q = n // m
    places = task.expected["rows"][0]["place"].data
    partial_missed = sum(1 for i, k in zip(values(task.inputs["positions"]), places, strict=True)
                         if sum(Q for s in range(m) if p[s] > p[i % m]) + (i // m) * p.count(p[i % m])
                         + p[:i % m].count(p[i % m]) == k)
    if partial_missed * 2 > len(places):
        return "ignoring the partial last period gives most places"
    return None


PERIODIC_STABLE_ORDER = _family(
    "stable_sort", "tensor_ops", periodic_stable_order, _periodic_stable_order,
    lambda i: f"""A sequence s has n = {i["n"]} terms (far too many to build): s[t] = pattern[t mod
        {i["pattern"].shape[0]}] for t = 0, 1, ..., n-1, where `pattern` is the given int64 vector
        (the pattern repeats; n need not be a multiple of its length). Arrange the n terms from largest to
        smallest, where equal terms keep their original relative order (the one at the smaller
        position first);
        the arranged places are numbered 0 to n-1. Give `place`, for each position listed in `positions`
        the place its term takes in the arrangement, and `term`, for each place listed in `places` the
        original position of the term that lands there.""",
    lambda i: ({"place": i64(i["positions"].shape[0]), "term": i64(i["places"].shape[0])},),
    _sample_periodic_order, reject=_order_mistaken)


# integer_division L5: floor and truncating quotients summed over 10^11..10^12 terms ---------------
def division_sums(a, b, c, n):
    def floor_sum(n, m, a, b):      # sum over i < n of floor((a*i + b) / m), m > 0: Euclid-like steps
        total = 0
        if a < 0 or a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b < 0 or b >= m:
            total += n * (b // m)
            b %= m
        while True:
            if a >= m:
                total += (n - 1) * n // 2 * (a // m)
                a %= m
            if b >= m:
                total += n * (b // m)
                b %= m
            top = a * n + b
            if top < m:
                return total
            n, b, m, a = top // m, top % m, a, m

    import math

    floors = floor_sum(n, c, a, b)
    negative = min(n, max(0, (-b - 1) // a + 1))      # i < negative: a*i + b < 0 (a > 0)
    g = math.gcd(a, c)                                # a*i + b = 0 (mod c) has solutions iff g | b,
    exact = 0                                         # one in every c/g consecutive i
    if b % g == 0 and negative > 0:
        period = c // g
        first = (-b // g) * pow(a // g, -1, period) % period
        exact = 0 if first >= negative else (negative - 1 - first) // period + 1
    return {"rows": [{"floor_sum": floors, "trunc_sum": floors + negative - exact}]}


def _floor_sum_inclusive(a: int, b: int, c: int, n: int) -> int:
    """sum over 0 <= i <= n of floor((a*i + b) / c) for a, b >= 0, c > 0, by the reciprocity
    recursion (the lattice points under the line counted from the other axis)."""
    if n < 0:
        return 0
    if a == 0:
        return (n + 1) * (b // c)
    if a >= c or b >= c:
        return (a // c) * n * (n + 1) // 2 + (b // c) * (n + 1) + _floor_sum_inclusive(a % c, b % c, c, n)
    top = (a * n + b) // c
    return n * top - _floor_sum_inclusive(c, c - b - 1, a, top - 1)


def _floor_total(a: int, b: int, c: int, count: int) -> int:
    """sum over i < count of floor((a*i + b) / c), a > 0, any b."""
    shift = -(b // c)                                 # b + shift*c lies in [0, c)
    return _floor_sum_inclusive(a, b + shift * c, c, count - 1) - shift * count


def _division_sums(a, b, c, n):
    floors = _floor_total(a, b, c, n)
    negative = next(k for k in ((-b + a - 1) // a, (-b + a - 1) // a + 1) if a * k + b >= 0)
    negative = min(n, negative)
    # the exact quotients among the negative terms: floor(v/c) - floor((v-1)/c) is 1 iff c divides v
    exact = _floor_total(a, b, c, negative) - _floor_total(a, b - 1, c, negative)
    return [{"floor_sum": floors, "trunc_sum": floors + negative - exact}]


def _sample_division_sums(draw: Draw, level: int) -> dict:
    n = draw.integer(10**11, 10**12)
    g = draw.choice((1, 2, 4, 6, 10, 12))
    c = g * draw.integer(200, 50_000)
    a = g * draw.integer(2_000, 1_000_000)
    b = -a * draw.integer(n // 4, 3 * n // 4) - draw.integer(0, a - 1)
    if draw.chance(2, 3):
        b -= b % g                                    # some negative terms divide exactly
    return {"a": a, "b": b, "c": c, "n": n}


def division_exact_negatives(task) -> bool:
    """Some negative term divides exactly: its truncated and floor quotients agree (the named
    mistake, trunc = floor + the number of negative terms, then fails)."""
    i = task.inputs
    return task.expected["rows"][0]["trunc_sum"] != _floor_total(i["a"], i["b"], i["c"], i["n"]) + min(
        i["n"], (-i["b"] - 1) // i["a"] + 1)


DIVISION_SUMS = _family(
    "integer_division", "tensor_ops", division_sums, _division_sums,
    lambda i: f"""For i = 0, 1, ..., n-1 with n = {i["n"]} (far too many terms to list), let v_i = a*i + b
        with a = `a`, b = `b`, and divide v_i by c = `c` in two ways: the quotient rounded down (toward
        minus infinity) and the quotient rounded toward zero (its fractional part dropped). Give
        `floor_sum`, the sum over all i of the rounded-down quotients, and `trunc_sum`, the sum over all
        i of the quotients rounded toward zero (both exact Python ints).""",
    lambda i: ({"floor_sum": PY_INT, "trunc_sum": PY_INT},), _sample_division_sums)


# broadcast_arithmetic L5: a broadcast product of 10^10..10^13 elements, by its factors ------------
def broadcast_product(P, Q, R, s, d, at):
    import torch

    # a: (P, 1) lines up with the last two dimensions of b: (Q, 1, R), so out is (Q, P, R) and
    # out[q, p, r] = (p - s) * (q - r + d): positive where both factors share a sign
    shape = [Q, P, R]
    q0, p0, r0 = at.tolist()
    picked = (p0 - s) * (q0 - r0 + d)
    up_a = [p - s for p in range(P) if p > s]
    down_a = [p - s for p in range(P) if p < s]
    count = {1: 0, -1: 0}
    total = {1: 0, -1: 0}
    for r in range(R):                  # per r, the q with q - r + d > 0 form a tail of 0..Q-1
        first = max(0, r - d + 1)       # the smallest q with a positive factor
        if first < Q:
            k = Q - first
            count[1] += k
            total[1] += k * (first - r + d) + k * (k - 1) // 2
        last = min(Q, r - d)            # q < last: a negative factor
        if last > 0:
            count[-1] += last
            total[-1] += last * (-r + d) + last * (last - 1) // 2
    positive_count = len(up_a) * count[1] + len(down_a) * count[-1]
    positive_sum = sum(up_a) * total[1] + sum(down_a) * total[-1]
    return {"rows": [{"shape": torch.tensor(shape), "picked": picked, "positive_count": positive_count,
                      "positive_sum": positive_sum}]}


def _broadcast_product(P, Q, R, s, d, at):
    """The same by rows of q (the other factor's axis) and closed forms over p."""
    q0, p0, r0 = values(at)

    def side(sign):                     # count and sum of the (p - s) with that sign
        ps = [p - s for p in range(P) if (p - s) * sign > 0]
        return len(ps), sum(ps)

    count, total = {1: 0, -1: 0}, {1: 0, -1: 0}
    for q in range(Q):                  # per q, r with q - r + d > 0 are r < q + d
        below = min(R, max(0, q + d))   # r in [0, below): factor q - r + d >= 1
        count[1] += below
        total[1] += below * (q + d) - below * (below - 1) // 2
        above = R - min(R, max(0, q + d + 1))   # r > q + d: negative factor
        start = min(R, max(0, q + d + 1))
        count[-1] += above
        total[-1] += above * (q + d) - (start + R - 1) * above // 2 if above else 0
    n_up, s_up = side(1)
    n_down, s_down = side(-1)
    return [{"shape": ExactTensor.of("int64", [Q, P, R]), "picked": (p0 - s) * (q0 - r0 + d),
             "positive_count": n_up * count[1] + n_down * count[-1],
             "positive_sum": s_up * total[1] + s_down * total[-1]}]


def _sample_broadcast_product(draw: Draw, level: int) -> dict:
    P, Q, R = draw.integer(2000, 20_000), draw.integer(2000, 40_000), draw.integer(2000, 40_000)
    s = draw.integer(P // 5, 4 * P // 5)
    d = draw.integer(-R // 2, Q // 2)
    at = [draw.integer(0, Q - 1), draw.integer(0, P - 1), draw.integer(0, R - 1)]
    if len({P, Q, R}) < 3:
        raise Reject("two dimensions are equal: the wrong alignment would not show in the shape")
    return {"P": P, "Q": Q, "R": R, "s": s, "d": d, "at": tensor("int64", at)}


def _broadcast_mistaken(task) -> str | None:
    """The named mistake: the shapes lined up from the first dimension (out of shape (P, Q, R) with
    out[p, q, r] = a[p] * b[q, r]): its picked element must differ."""
    i = task.inputs
    first, second, third = values(i["at"])
    wrong = (first - i["s"]) * (second - third + i["d"]) if first < i["P"] and second < i["Q"] else None
    if wrong == task.expected["rows"][0]["picked"]:
        return "reading the index as (p, q, r) gives the same picked element"
    return None


BROADCAST_PRODUCT = _family(
    "broadcast_arithmetic", "tensor_ops", broadcast_product, _broadcast_product,
    lambda i: f"""Two int64 tensors are only described (too large to build): `a` of shape (P, 1) with
        a[p, 0] = p - s, and `b` of shape (Q, 1, R) with b[q, 0, r] = q - r + d, where P = {i["P"]}, Q =
        {i["Q"]}, R = {i["R"]}, s = {i["s"]}, d = {i["d"]}. Let out be their elementwise product under
        broadcasting: the two shapes are lined up at their last dimension and compared backwards, a
        missing leading dimension counts as size 1, and a dimension of size 1 is stretched to the other
        tensor's size in that position. Give `shape`, the shape of out (an int64 vector); `picked`, the
        element of out at the index `at` (one index per dimension of out, in order); `positive_count`,
        the number of elements of out that are strictly greater than 0; and `positive_sum`, the sum of
        those elements (exact Python ints).""",
    lambda i: ({"shape": i64(3), "picked": PY_INT, "positive_count": PY_INT, "positive_sum": PY_INT},),
    _sample_broadcast_product, reject=_broadcast_mistaken)


# detached_gradient L5: the fixed point of a bootstrapped (constant-target) regression ---------------
def bootstrapped_fixed_point(phi, phi_next, reward, gamma):
    import torch

    f, f2, r = phi.double(), phi_next.double(), reward.double()

    def loss(w, constant_target):
        target = r + gamma * (f2 @ w)
        if constant_target:
            target = target.detach()
        return ((target - f @ w) ** 2).mean()

    def direction(w):           # the gradient with the target held constant (affine in w, since the
        w = w.clone().requires_grad_(True)    # held target's value still moves with w)
        return torch.autograd.grad(loss(w, True), w)[0]

    k = phi.shape[1]
    at_zero = direction(torch.zeros(k, dtype=torch.float64))
    columns = [direction(torch.eye(k, dtype=torch.float64)[p]) - at_zero for p in range(k)]
    w_star = torch.linalg.solve(torch.stack(columns, dim=1), -at_zero)
    w = w_star.clone().requires_grad_(True)
    (full,) = torch.autograd.grad(loss(w, False), w)
    return {"rows": [{"w_star": w_star.float(), "loss_star": float(loss(w_star, True)),
                      "full_gradient": full.float()}]}


def _bootstrapped_fixed_point(phi, phi_next, reward, gamma):
    """The held-constant gradient is -(2/T) * sum_t delta_t * phi_t with delta_t = r_t + gamma*phi'_t.w
    - phi_t.w: it vanishes where sum_t phi_t (phi_t - gamma*phi'_t)^T w = sum_t r_t phi_t."""
    f, f2, r, g = values(phi), values(phi_next), values(reward), Fraction(gamma)
    T, k = len(f), len(f[0])
    matrix = [[sum((f[t][p] * (f[t][q] - g * f2[t][q]) for t in range(T)), Fraction(0)) for q in range(k)]
              for p in range(k)]
    w = solve(matrix, [sum((r[t] * f[t][p] for t in range(T)), Fraction(0)) for p in range(k)])
    delta = [r[t] + sum(((g * f2[t][q] - f[t][q]) * w[q] for q in range(k)), Fraction(0)) for t in range(T)]
    full = [Fraction(2, T) * sum((delta[t] * (g * f2[t][p] - f[t][p]) for t in range(T)), Fraction(0))
            for p in range(k)]
    loss = sum((d * d for d in delta), Fraction(0)) / T
    return [{"w_star": ExactTensor.of("float32", w), "loss_star": loss,
             "full_gradient": ExactTensor.of("float32", full)}]


def _sample_bootstrapped(draw: Draw, level: int) -> dict:
    T, k = draw.integer(5, 7), draw.integer(2, 3)
    return {"phi": tensor("float32", [[float(draw.integer(-2, 2)) for _ in range(k)] for _ in range(T)]),
            "phi_next": tensor("float32", [[float(draw.integer(-2, 2)) for _ in range(k)] for _ in range(T)]),
            "reward": dyadic_tensor(draw, (T,), -2, 2, 2),
            "gamma": draw.choice((0.5, 0.75, 0.875, 0.9375))}


def _bootstrapped_clear(inputs: Inputs) -> str | None:
    """A unique, well-scaled fixed point that is not the least-squares fit of the full gradient
    (the named mistake: minimising the loss with the target differentiated too)."""
    f, f2, g = values(inputs["phi"]), values(inputs["phi_next"]), Fraction(inputs["gamma"])
    T, k = len(f), len(f[0])
    matrix = [[sum((f[t][p] * (f[t][q] - g * f2[t][q]) for t in range(T)), Fraction(0)) for q in range(k)]
              for p in range(k)]
    w = solve(matrix, [sum((values(inputs["reward"])[t] * f[t][p] for t in range(T)), Fraction(0))
                       for p in range(k)])
    if w is None or any(abs(e) > 32 for e in w) or max(abs(e) for e in w) < Fraction(1, 8):
        return "the fixed point is not unique, or too large or too small to carry float32 digits"
    residual = [[f[t][q] - g * f2[t][q] for q in range(k)] for t in range(T)]
    normal = [[sum((residual[t][p] * residual[t][q] for t in range(T)), Fraction(0)) for q in range(k)]
              for p in range(k)]
    least = solve(normal, [sum((values(inputs["reward"])[t] * residual[t][p] for t in range(T)), Fraction(0))
                           for p in range(k)])
    if least is None or max(abs(a - b) for a, b in zip(least, w, strict=True)) < Fraction(1, 16):
        return "the fixed point nearly equals the full-gradient minimiser: the named mistake would pass"
    return None


BOOTSTRAPPED_FIXED_POINT = _family(
    "detached_gradient", "autograd", bootstrapped_fixed_point, _bootstrapped_fixed_point,
    lambda i: f"""Row t of `phi` and of `phi_next` are the features of the state at step t and of the state
        after it, for T = {i["phi"].shape[0]} transitions with rewards `reward`; a value estimate of a state
        is the dot product of its features with a weight vector w. The loss of w is the mean over t of
        (reward_t + gamma * (phi_next_t . w) - phi_t . w)^2 with gamma = `gamma`, where, when
        differentiating, the bootstrapped part reward_t + gamma * (phi_next_t . w) is held constant (its
        value is used, no derivative flows through it). Let w_star be the weight vector at which that
        gradient is zero (there is exactly one here). Give `w_star`, `loss_star`, the loss at w_star,
        and `full_gradient`, the gradient of the same loss at w_star when nothing is held constant.""",
    lambda i: ({"w_star": f32(i["phi"].shape[1]), "loss_star": PY_FLOAT,
                "full_gradient": f32(i["phi"].shape[1])},),
    _sample_bootstrapped, refuse=_bootstrapped_clear)
