"""The normalise family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, transpose, values
from exactgrade.domains.pytorch.shared import dims
from exactgrade.domains.pytorch.tensor_ops.shared import (
    one_answer_for_all,
    sample_matrix,
    some_sentinel,
    thresholds,
)
from exactgrade.family import Branch, Draw, Reject, five_levels


# pt-010 -------------------------------------------------------------------------------------------
def normalise(x):
    import torch.nn.functional as F

    return {"rows": [{
        "rows_unit_l2": F.normalize(x, p=2.0, dim=1),
        "columns_unit_l1": F.normalize(x, p=1.0, dim=0),
    }]}


def _normalise(x):
    v = values(x)
    l2 = [mpmath.sqrt(hp(sum((e * e for e in row), Fraction(0)))) for row in v]
    l1 = [sum((abs(e) for e in col), Fraction(0)) for col in transpose(v)]
    return [{
        "rows_unit_l2": ExactTensor.of("float32", [[hp(e) / n for e in row]
                                                   for row, n in zip(v, l2, strict=True)]),
        "columns_unit_l1": ExactTensor.of("float32", [[e / l1[j] for j, e in enumerate(row)] for row in v]),
    }]


def _sample_normalise(draw: Draw, level: int) -> dict:
    x = sample_matrix((3, 0), (4, 1), -4, 4, 2)(draw, level)["x"]
    v = values(x)
    if any(all(e == 0 for e in row) for row in v) or any(all(e == 0 for e in c) for c in transpose(v)):
        raise Reject("a zero row or column has no direction to normalise")
    return {"x": x}


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=normalise,
    independent=_normalise,
    question="""Give `rows_unit_l2`, each row of `x` divided by its Euclidean (L2) norm, and
        `columns_unit_l1`, each column of x divided by the sum of the absolute values of that column
        (torch.nn.functional.normalize semantics).""",
    answer=lambda i: ({"rows_unit_l2": f32(*dims(i["x"])), "columns_unit_l1": f32(*dims(i["x"]))},),
    sample=_sample_normalise,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    normalise,
    _normalise,
    """Give `rows_unit_l2`, each row of `x` divided by the square root of the sum of the squares of
        its elements, and `columns_unit_l1`, each column of x divided by the sum of the absolute values
        of its elements.""",
    lambda i: ({"rows_unit_l2": f32(*dims(i["x"])), "columns_unit_l1": f32(*dims(i["x"]))},),
    _sample_normalise,
)


# normalise L3: the most similar other row by cosine ----------------------------------------------
def nearest_rows(x):
    import torch
    import torch.nn.functional as F

    unit = F.normalize(x, dim=1)
    similarity = unit @ unit.T - 3 * torch.eye(x.shape[0])
    best = similarity.max(dim=1)
    return {"rows": [{"nearest": best.indices, "similarity": best.values}]}


def _cosines(v):
    norms = [mpmath.sqrt(hp(sum((e * e for e in row), Fraction(0)))) for row in v]
    return [[mpmath.fsum(hp(p) * hp(q) for p, q in zip(v[i], v[j], strict=True)) / (norms[i] * norms[j])
             if i != j else mpmath.mpf(-3) for j in range(len(v))] for i in range(len(v))]


def _nearest_rows(x):
    cos = _cosines(values(x))
    best = [row.index(max(row)) for row in cos]
    return [{"nearest": ExactTensor.of("int64", best),
             "similarity": ExactTensor.of("float32", [row[j] for row, j in zip(cos, best, strict=True)])}]


def _nearest_clear(inputs: Inputs) -> str | None:
    for row in _cosines(values(inputs["x"])):
        top = sorted(row, reverse=True)
        if top[0] - top[1] < mpmath.mpf("1e-4"):
            return "two rows are almost equally similar to a third: the index would hinge on rounding"
    return _nonzero_lines(inputs)


LEVEL_3 = pytorch_level(
    "tensor_ops",
    nearest_rows,
    _nearest_rows,
    """Compare the rows of `x` by the cosine of the angle between them (their dot product divided
        by the product of their Euclidean lengths). For each row, give in `nearest` the index of the
        other row (never itself) with the largest cosine, and in `similarity` that cosine.""",
    lambda i: ({"nearest": i64(i["x"].shape[0]), "similarity": f32(i["x"].shape[0])},),
    _sample_normalise,
    refuse=_nearest_clear,
)


def _nonzero_lines(inputs: Inputs) -> str | None:
    v = values(inputs["x"])
    if any(all(e == 0 for e in row) for row in v) or any(all(e == 0 for e in c) for c in transpose(v)):
        return "a zero row or column has no direction to normalise"
    return None


# normalise L4: the smallest integer p whose norm of every row stays under each bound -------------
def smallest_norm_order(x, bounds):
    import torch

    magnitudes = x.double().abs()
    orders = []
    for bound in bounds.tolist():
        passing = [p for p in range(1, 9) if bool((magnitudes.pow(p).sum(dim=1) <= bound ** p).all())]
        orders.append(passing[0] if passing else -1)
    return {"rows": [{"p": torch.tensor(orders)}]}


def _smallest_norm_order(x, bounds):
    v = values(x)
    orders = []
    for b in values(bounds):
        passing = [p for p in range(1, 9) if all(sum((abs(e) ** p for e in row), Fraction(0)) <= b ** p
                                                 for row in v)]
        orders.append(passing[0] if passing else -1)
    return [{"p": ExactTensor.of("int64", orders)}]


NORM_BOUNDS = 4


def _sample_norm_bound(draw: Draw, level: int) -> dict:
    x = _sample_normalise(draw, level)["x"]
    v = values(x)
    den, bits = math.lcm(*(e.denominator for row in v for e in row)), 6
    # in integers (this runs on a hundred candidate bounds): sum |e|^p <= (k / 2^bits)^p, times (2^bits den)^p
    sums = {p: [sum(abs(int(e * den)) ** p for e in row) << (bits * p) for row in v] for p in range(1, 9)}
    norm = {p: max(float(Fraction(s, (den << bits) ** p)) ** (1 / p) for s in row) for p, row in sums.items()}

    def answer_of(bound: Fraction) -> int | None:
        power = {p: int(bound * 2**bits * den) ** p for p in sums}
        if any(abs(s - power[p]) <= power[p] >> 30 for p, row in sums.items() for s in row):
            return None  # float64 powers could fall on either side of a bound this close
        return next((p for p, row in sums.items() if all(s <= power[p] for s in row)), -1)

    # the bounds whose answer is p lie in [p-norm, (p-1)-norm); p = 1 (no search) is never drawn
    intervals = {p: (Fraction(norm[p]), Fraction(norm[p - 1])) for p in range(2, 9)}
    intervals[-1] = (Fraction(norm[8]) * 3 / 4, Fraction(norm[8]))
    return {"x": x, "bounds": tensor("float32", thresholds(draw, answer_of, intervals, NORM_BOUNDS, bits))}


LEVEL_4 = pytorch_level(
    "tensor_ops",
    smallest_norm_order,
    _smallest_norm_order,
    """For an integer p >= 1, the p-norm of a row is (sum of |element|^p over the row)^(1/p). For
        each element b of `bounds`, give in `p` (an int64 vector, one entry per bound, in order) the
        smallest integer p from 1 to 8 for which the p-norm of every row of `x` is at most b, or -1 if
        none of them is.""",
    lambda i: ({"p": i64(i["bounds"].shape[0])},),
    _sample_norm_bound,
    refuse=_nonzero_lines,
    reject=one_answer_for_all("p"),
)


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


LEVEL_5 = pytorch_level(
    "tensor_ops",
    periodic_standardise,
    _periodic_standardise,
    lambda i: f"""A vector v has n = {i["n"]} elements (far too many to build): v[i] = i mod m, with m =
        {i["m"]}, for i = 0, 1, ..., n-1 (so v counts 0, 1, ..., m-1, starts again at 0, and so on; n need not
        be a multiple of m). Standardise it: subtract from every element the mean of all n elements, then
        divide by their standard deviation, the square root of the mean of the squared deviations from
        the mean (divide by n, no correction, no epsilon). Give `standardised`, the standardised values at
        the positions listed in `queries` (0-based positions into v, in that order), and `above`, the
        number of positions i (out of all n) whose standardised value is strictly greater than 1.""",
    lambda i: ({"standardised": f32(i["queries"].shape[0]), "above": PY_INT},),
    _sample_periodic,
    refuse=_periodic_threshold_clear,
    reject=_periodic_mistaken,
)


NORMALISE = five_levels(
    "normalise",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 F.normalize named; L2 the two normalisations described; L3 cosine similarity between rows, "
          "then the nearest other row; L4 the smallest integer p whose p-norm of every row stays under "
          "each of four bounds, or -1 (a fifth of the bounds); L5 standardising a periodic vector of "
          "10^10..10^12 elements: its mean and "
          "deviation in closed form (a partial last period), values at queries and a strict count above "
          "one deviation",
    branches=(Branch("no p up to 8 for some bound", some_sentinel("p"), Fraction(1, 4), (4,)),),
)
