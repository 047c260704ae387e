"""The spread_statistics family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

import bisect
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import Inputs, f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, mean, values
from exactgrade.domains.pytorch.sampling import word
from exactgrade.domains.pytorch.tensor_ops.shared import (
    one_answer_for_all,
    sample_matrix,
    some_sentinel,
    thresholds,
)
from exactgrade.family import Branch, Draw, five_levels


# pt-002 -------------------------------------------------------------------------------------------
def spread_statistics(x):
    return {"rows": [{
        "row_std": x.std(dim=1),
        "row_population_var": x.var(dim=1, correction=0),
        "overall_std": x.std(),
    }]}


def _spread_statistics(x):
    v = values(x)

    def squared_deviations(xs):
        m = mean(xs)
        return sum(((e - m) ** 2 for e in xs), Fraction(0))

    def sample_std(xs):  # torch's default correction=1 (Bessel)
        return mpmath.sqrt(hp(squared_deviations(xs) / (len(xs) - 1)))

    everything = [e for row in v for e in row]
    return [{
        "row_std": ExactTensor.of("float32", [sample_std(r) for r in v]),
        "row_population_var": ExactTensor.of("float32", [squared_deviations(r) / len(r) for r in v]),
        "overall_std": ExactTensor.of("float32", sample_std(everything)),
    }]

LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=spread_statistics,
    independent=_spread_statistics,
    question=lambda i: f"""For `x`, compute `row_std`, the standard deviation of each row with torch's
        default `std` settings; `row_population_var`, the population variance of each row (dividing by the
        number of elements); and `overall_std`, torch's default standard deviation of all
        {word(i["x"].shape[0] * i["x"].shape[1])} elements.""",
    answer=lambda i: ({"row_std": f32(i["x"].shape[0]), "row_population_var": f32(i["x"].shape[0]),
                       "overall_std": f32()},),
    sample=sample_matrix((2, 1), (4, 4), -3, 6, 2),
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    spread_statistics,
    _spread_statistics,
    lambda i: f"""For each row of `x` ({i["x"].shape[1]} elements), let S be the sum of the squared
        differences between the row's elements and the row's mean. Give `row_std`, the square root of
        S / ({i["x"].shape[1]} - 1), per row; `row_population_var`, S / {i["x"].shape[1]}, per row;
        and `overall_std`, the square root of S' / (n - 1) where S' is the same sum of squares taken
        over all n = {i["x"].shape[0] * i["x"].shape[1]} elements about their common mean.""",
    lambda i: ({"row_std": f32(i["x"].shape[0]), "row_population_var": f32(i["x"].shape[0]),
                "overall_std": f32()},),
    sample_matrix((2, 1), (4, 4), -3, 6, 2),
)


# spread_statistics L3: between-row against within-row spread -------------------------------------
def variance_ratio(x):
    within = x.var(dim=1).mean()
    between = x.mean(dim=1).var() * x.shape[1]
    return {"rows": [{"within": within, "between": between, "ratio": between / within}]}


def _squared_deviations(xs):
    m = mean(xs)
    return sum(((e - m) ** 2 for e in xs), Fraction(0))


def _variance_ratio(x):
    v = values(x)
    within = mean([_squared_deviations(r) / (len(r) - 1) for r in v])
    between = _squared_deviations([mean(r) for r in v]) / (len(v) - 1) * len(v[0])
    return [{"within": ExactTensor.of("float32", within), "between": ExactTensor.of("float32", between),
             "ratio": ExactTensor.of("float32", between / within)}]


LEVEL_3 = pytorch_level(
    "tensor_ops",
    variance_ratio,
    _variance_ratio,
    lambda i: f"""The {i["x"].shape[0]} rows of `x` are groups of {i["x"].shape[1]} measurements each.
        Give `within`, the average over the groups of each group's sample variance (sum of squared
        deviations from the group mean, divided by one less than the group size); `between`, the
        sample variance of the group means (same divisor rule, across the {i["x"].shape[0]} means)
        multiplied by the group size; and `ratio` = between / within. All three are 0-d tensors.""",
    lambda i: ({"within": f32(), "between": f32(), "ratio": f32()},),
    sample_matrix((2, 1), (4, 4), -3, 6, 2),
)


# spread_statistics L4: the fewest leading columns whose spread passes each bound ------------------
def columns_for_spread(x, bounds):
    import torch

    columns = []
    for bound in bounds.tolist():
        passing = [m for m in range(2, x.shape[1] + 1)
                   if bool((x[:, :m].var(dim=1, correction=0) > bound).all())]
        columns.append(passing[0] if passing else -1)
    return {"rows": [{"columns": torch.tensor(columns)}]}


def _columns_for_spread(x, bounds):
    v = values(x)
    columns = []
    for bound in values(bounds):
        passing = [m for m in range(2, len(v[0]) + 1)
                   if all(_squared_deviations(r[:m]) / m > bound for r in v)]
        columns.append(passing[0] if passing else -1)
    return [{"columns": ExactTensor.of("int64", columns)}]


SPREAD_BOUNDS = 4


def _sample_spread_bound(draw: Draw, level: int) -> dict:
    x = sample_matrix((2, 1), (4, 4), -3, 6, 2)(draw, level)["x"]
    v = values(x)
    spreads = {m: [_squared_deviations(r[:m]) / m for r in v] for m in range(2, len(v[0]) + 1)}
    least = {m: min(s) for m, s in spreads.items()}  # a bound below it is passed by every row
    every = sorted(s for row in spreads.values() for s in row)

    def answer_of(bound: Fraction) -> int | None:
        at = bisect.bisect_left(every, bound)  # the nearest variances are every[at - 1] and every[at]
        if bound <= 0 or any(abs(bound - s) <= max(s, Fraction(1, 16)) / 2**14
                             for s in every[max(at - 1, 0):at + 1]):
            return None  # float32 variances could fall on either side of a bound this close
        return next((m for m in least if least[m] > bound), -1)

    intervals, best = {}, Fraction(0)
    for m, spread in least.items():  # the bounds whose answer is m lie in [best spread before m, spread)
        if spread > best:
            intervals[m], best = (best, spread), spread
    intervals[-1] = (best, best * 5 / 4)
    return {"x": x, "bounds": tensor("float32", thresholds(draw, answer_of, intervals, SPREAD_BOUNDS, 5))}


LEVEL_4 = pytorch_level(
    "tensor_ops",
    columns_for_spread,
    _columns_for_spread,
    lambda i: """For each element b of `bounds`, give in `columns` (an int64 vector, one entry per
        bound, in order) the smallest m >= 2 for which one and the same m works in every row of `x`:
        the population variance (mean squared deviation from the mean, dividing by m) of the row's
        first m elements is strictly greater than b in each row at that m; -1 if no m up to the full
        width qualifies.""",
    lambda i: ({"columns": i64(i["bounds"].shape[0])},),
    _sample_spread_bound,
    reject=one_answer_for_all("columns"),
)


# spread_statistics L5: exponentially weighted mean and variance, by their recurrence --------------
def ew_statistics(x, alpha):
    m = x[:, 0].clone()
    var = x.new_zeros(x.shape[0])
    for t in range(1, x.shape[1]):
        d = x[:, t] - m
        m = m + alpha * d
        var = (1 - alpha) * (var + alpha * d * d)
    return {"rows": [{"mean": m, "var": var}]}


def _ew_statistics(x, alpha):
    a = Fraction(alpha)
    means, variances = [], []
    for row in values(x):
        m, var = row[0], Fraction(0)
        for e in row[1:]:
            d = e - m
            m, var = m + a * d, (1 - a) * (var + a * d * d)
        means.append(m)
        variances.append(var)
    return [{"mean": ExactTensor.of("float32", means), "var": ExactTensor.of("float32", variances)}]


def _sample_ew(draw: Draw, level: int) -> dict:
    x = sample_matrix((2, 1), (4, 4), -3, 6, 2)(draw, level)["x"]
    return {"x": x, "alpha": draw.choice((0.25, 0.375, 0.5, 0.125))}


def _ew_mean_away_from_zero(inputs: Inputs) -> str | None:
    rows = _ew_statistics(inputs["x"], inputs["alpha"])[0]["mean"].values
    if any(abs(m) < Fraction(1, 16) for m in rows):
        return "a weighted mean is within 1/16 of zero: its float32 error would use much of the tolerance"
    return None


LEVEL_5 = pytorch_level(
    "tensor_ops",
    ew_statistics,
    _ew_statistics,
    lambda i: """Track an exponentially weighted mean m and variance v along each row of `x`, element
        by element: start with m = the row's first element and v = 0; then for each following
        element e, with d = e - m (m before the update), set m to m + alpha*d and v to
        (1 - alpha)*(v + alpha*d^2), where `alpha` is given. Give the final `mean` and `var` of every
        row.""",
    lambda i: ({"mean": f32(i["x"].shape[0]), "var": f32(i["x"].shape[0])},),
    _sample_ew,
    refuse=_ew_mean_away_from_zero,
)


SPREAD_STATISTICS = five_levels(
    "spread_statistics",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 torch's std/var defaults named; L2 the statistics by their sums of squares; L3 the "
          "between/within spread ratio of row groups (intermediates not asked); L4 the fewest leading "
          "columns whose spread passes each of four bounds, or -1 (a fifth of the bounds); L5 an "
          "exponentially weighted mean/variance recurrence to run",
    branches=(Branch("no prefix passes some bound", some_sentinel("columns"), Fraction(1, 4), (4,)),),
)
