"""The broadcast_arithmetic family of tensor_ops: everything it needs, its five levels in level order."""

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
from exactgrade.domains.pytorch.sampling import dyadic_tensor, shape_text
from exactgrade.family import Draw, Reject, five_levels


# pt-014 -------------------------------------------------------------------------------------------
def broadcast_arithmetic(a, b, c):
    return {"rows": [{"affine": a * b + c, "difference": a - c, "column_totals": (a * b).sum(dim=0)}]}


def _broadcast_arithmetic(a, b, c):
    column = [row[0] for row in values(a)]
    line = values(b)[0]
    vc = values(c)
    return [{
        "affine": ExactTensor.of("float32", [[p * q + r for q, r in zip(line, vc, strict=True)]
                                             for p in column]),
        "difference": ExactTensor.of("float32", [[p - r for r in vc] for p in column]),
        "column_totals": ExactTensor.of("float32", [sum((p * q for p in column), Fraction(0)) for q in line]),
    }]


def _sample_broadcast(draw: Draw, level: int) -> dict:
    r, c = draw.integer(2, 2 + level), draw.integer(3, 3 + level)
    return {"a": dyadic_tensor(draw, (r, 1), -3, 3, 2), "b": dyadic_tensor(draw, (1, c), -3, 3, 2),
            "c": dyadic_tensor(draw, (c,), -3, 3, 3)}


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=broadcast_arithmetic,
    independent=_broadcast_arithmetic,
    question=lambda i: f"""With broadcasting (`a` is {i["a"].shape[0]}x1, `b` is 1x{i["b"].shape[1]}, `c`
        has {i["c"].shape[0]} elements), give `affine` = a * b + c, `difference` = a - c, and
        `column_totals`, the sum over the first axis of a * b.""",
    answer=lambda i: ({"affine": f32(i["a"].shape[0], i["b"].shape[1]),
                       "difference": f32(i["a"].shape[0], i["b"].shape[1]),
                       "column_totals": f32(i["b"].shape[1])},),
    sample=_sample_broadcast,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    broadcast_arithmetic,
    _broadcast_arithmetic,
    lambda i: f"""`a` has shape {shape_text(i["a"].shape)}, `b` has shape {shape_text(i["b"].shape)}
        and `c` has {i["c"].shape[0]} elements. Give `affine`, the {i["a"].shape[0]}x{i["b"].shape[1]}
        matrix with element [i, j] = a[i, 0]*b[0, j] + c[j]; `difference`, the matrix of the same shape
        with element [i, j] = a[i, 0] - c[j]; and `column_totals`, with element j = the sum over i of
        a[i, 0]*b[0, j].""",
    lambda i: ({"affine": f32(i["a"].shape[0], i["b"].shape[1]),
                "difference": f32(i["a"].shape[0], i["b"].shape[1]),
                "column_totals": f32(i["b"].shape[1])},),
    _sample_broadcast,
)


# broadcast_arithmetic L3: for each point of a, the nearest point of c ----------------------------
def nearest_points(a, c):
    distance = (a - c) ** 2
    best = distance.min(dim=1)
    return {"rows": [{"nearest": best.indices, "total": float(best.values.sum())}]}


def _nearest_points(a, c):
    column, vc = [row[0] for row in values(a)], values(c)
    best = [min(range(len(vc)), key=lambda j: ((p - vc[j]) ** 2, j)) for p in column]
    return [{"nearest": ExactTensor.of("int64", best),
             "total": sum(((p - vc[j]) ** 2 for p, j in zip(column, best, strict=True)), Fraction(0))}]


def _nearest_unique(inputs: Inputs) -> str | None:
    vc = values(inputs["c"])
    for row in values(inputs["a"]):
        d = sorted((row[0] - e) ** 2 for e in vc)
        if d[0] == d[1]:
            return f"{float(row[0])} is equally near two points of c: the index would be ambiguous"
    return None


def _sample_points(draw: Draw, level: int) -> dict:
    inputs = _sample_broadcast(draw, level)
    return {"a": inputs["a"], "c": inputs["c"]}


LEVEL_3 = pytorch_level(
    "tensor_ops",
    nearest_points,
    _nearest_points,
    lambda i: f"""The {i["a"].shape[0]} values of `a` (shape {shape_text(i["a"].shape)}) and the
        {i["c"].shape[0]} values of `c` are points on a line. Give `nearest`, for each point of a the
        index of the nearest point of c, and `total`, the sum over the points of a of the squared
        distance to that nearest point.""",
    lambda i: ({"nearest": i64(i["a"].shape[0]), "total": PY_FLOAT},),
    _sample_points,
    refuse=_nearest_unique,
)


# broadcast_arithmetic L4: the column of a*b + c with the largest minimum ------------------------
def best_worst_column(a, b, c):
    worst = (a * b + c).min(dim=0).values
    best = int(worst.argmax())
    return {"rows": [{"column": best, "worst": float(worst[best])}]}


def _column_minima(a, b, c):
    column, line, vc = [row[0] for row in values(a)], values(b)[0], values(c)
    return [min(p * q + r for p in column) for q, r in zip(line, vc, strict=True)]


def _best_worst_column(a, b, c):
    minima = _column_minima(a, b, c)
    best = minima.index(max(minima))
    return [{"column": best, "worst": minima[best]}]


def _best_worst_unique(inputs: Inputs) -> str | None:
    minima = _column_minima(inputs["a"], inputs["b"], inputs["c"])
    return "two columns share the largest minimum" if minima.count(max(minima)) > 1 else None


def _best_worst_first(inputs: Inputs) -> str | None:
    minima = _column_minima(inputs["a"], inputs["b"], inputs["c"])
    return "the first column is best: column is 0" if minima.index(max(minima)) == 0 else None


LEVEL_4 = pytorch_level(
    "tensor_ops",
    best_worst_column,
    _best_worst_column,
    lambda i: f"""Let M be the {i["a"].shape[0]}x{i["b"].shape[1]} matrix with M[i, j] = a[i, 0]*b[0, j]
        + c[j] (`a`, `b` and `c` as given). Give `column`, the index j of the column of M whose smallest
        element is largest, and `worst`, that smallest element.""",
    lambda i: ({"column": PY_INT, "worst": PY_FLOAT},),
    _sample_broadcast,
    refuse=_best_worst_unique,
    zero_reason=_best_worst_first,
)


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


LEVEL_5 = pytorch_level(
    "tensor_ops",
    broadcast_product,
    _broadcast_product,
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
    _sample_broadcast_product,
    reject=_broadcast_mistaken,
)


BROADCAST_ARITHMETIC = five_levels(
    "broadcast_arithmetic",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 broadcasting expressions given; L2 the same results by their index formulas; L3 nearest "
          "points between two broadcast sets, reduced; L4 the column of a broadcast matrix with the best "
          "worst case; L5 a broadcast product too large to build: its "
          "shape by the alignment rule, an element, and the count and sum of its positive elements by "
          "factorising over the sign regions of the two factors",
)
