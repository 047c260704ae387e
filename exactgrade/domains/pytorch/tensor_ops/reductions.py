"""The reductions family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, i64, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, hp, mean, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.tensor_ops.shared import (
    flat_elements,
    not_constant,
    sample_matrix,
    softmax_row,
)
from exactgrade.family import Branch, Draw, five_levels


# pt-001 -------------------------------------------------------------------------------------------
def reductions(x):
    import torch

    return {"rows": [{
        "column_sums": x.sum(dim=0),
        "row_means": x.mean(dim=1),
        "row_logsumexp": torch.logsumexp(x, dim=1),
        "argmax": x.argmax(),
    }]}


def _reductions(x):
    v = values(x)
    elements = [e for row in v for e in row]
    return [{
        "column_sums": ExactTensor.of("float32", [sum(col, Fraction(0)) for col in transpose(v)]),
        "row_means": ExactTensor.of("float32", [mean(row) for row in v]),
        "row_logsumexp": ExactTensor.of("float32", [mpmath.log(mpmath.fsum(mpmath.exp(hp(e)) for e in row))
                                                    for row in v]),
        "argmax": ExactTensor.of("int64", elements.index(max(elements))),
    }]


def _argmax_unique(inputs: Inputs) -> str | None:
    elements = flat_elements(inputs["x"])
    top = max(elements)
    if elements.count(top) > 1:
        return f"the maximum {float(top)} occurs {elements.count(top)} times: argmax would be ambiguous"
    return None


def _argmax_is_zero(inputs: Inputs) -> str | None:
    elements = flat_elements(inputs["x"])
    if elements.index(max(elements)) == 0:
        return "the largest element is the first one: argmax is index 0"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=reductions,
    independent=_reductions,
    question="""For the matrix `x`, compute: `column_sums`, the sum of each column; `row_means`, the
        mean of each row; `row_logsumexp`, log(sum(exp(.))) of each row; and `argmax`, the index of the
        largest element of the flattened matrix (row-major), as torch's argmax returns it.""",
    answer=lambda i: ({"column_sums": f32(i["x"].shape[1]), "row_means": f32(i["x"].shape[0]),
                       "row_logsumexp": f32(i["x"].shape[0]), "argmax": i64()},),
    sample=sample_matrix((2, 2), (3, 3), -4, 4, 2),
    refuse=_argmax_unique,
    zero_reason=_argmax_is_zero,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    reductions,
    _reductions,
    lambda i: f"""For the {i["x"].shape[0]}x{i["x"].shape[1]} matrix `x` with elements x[i, j], give:
        `column_sums`[j] = x[0, j] + ... + x[{i["x"].shape[0] - 1}, j]; `row_means`[i], the arithmetic
        mean of row i; `row_logsumexp`[i], the natural logarithm of the sum over j of e^(x[i, j]); and
        `argmax`, the position p = i*{i["x"].shape[1]} + j of the largest element x[i, j] (a 0-d int64
        tensor).""",
    lambda i: ({"column_sums": f32(i["x"].shape[1]), "row_means": f32(i["x"].shape[0]),
                "row_logsumexp": f32(i["x"].shape[0]), "argmax": i64()},),
    sample_matrix((2, 2), (3, 3), -4, 4, 2),
    refuse=_argmax_unique,
    zero_reason=_argmax_is_zero,
)

# reductions L3: softmax-weighted row averages, then the best row ---------------------------------
def pooled_rows(x):
    import torch

    pooled = (torch.softmax(x, dim=1) * x).sum(dim=1)
    return {"rows": [{"pooled": pooled, "best_row": int(pooled.argmax())}]}


def _pooled(v):
    return [mpmath.fsum(p * hp(e) for p, e in zip(softmax_row(row), row, strict=True)) for row in v]


def _pooled_rows(x):
    pooled = _pooled(values(x))
    return [{"pooled": ExactTensor.of("float32", pooled), "best_row": pooled.index(max(pooled))}]


def _pooled_clear_winner(inputs: Inputs) -> str | None:
    pooled = sorted(_pooled(values(inputs["x"])), reverse=True)
    if pooled[0] - pooled[1] < mpmath.mpf("1e-3") * (1 + abs(pooled[0])):
        return "the two largest pooled rows are within 1e-3: the best row would hinge on rounding"
    return None


def _pooled_first_best(inputs: Inputs) -> str | None:
    pooled = _pooled(values(inputs["x"]))
    return "the first row pools highest: best_row is 0" if pooled.index(max(pooled)) == 0 else None


LEVEL_3 = pytorch_level(
    "tensor_ops",
    pooled_rows,
    _pooled_rows,
    lambda i: """Treat each row of `x` as scores over its columns. Weight every element of a row by
        e^(its score) divided by the sum of e^(score) over that row, and give `pooled`, for each row
        the weighted sum of the row's own elements, and `best_row`, the index of the row whose pooled
        value is largest.""",
    lambda i: ({"pooled": f32(i["x"].shape[0]), "best_row": PY_INT},),
    sample_matrix((2, 2), (3, 3), -4, 4, 2),
    refuse=_pooled_clear_winner,
    zero_reason=_pooled_first_best,
)


# reductions L4: per column, the shortest prefix whose sum passes a threshold ----------------------
def prefix_to_threshold(x, threshold):
    import torch

    above = x.cumsum(dim=0) > threshold
    first = torch.where(above.any(dim=0), above.int().argmax(dim=0) + 1, torch.tensor(-1))
    return {"rows": [{"rows_needed": first}]}


def _prefix_to_threshold(x, threshold):
    v, t = values(x), Fraction(threshold)
    out = []
    for column in transpose(v):
        total, found = Fraction(0), -1
        for m, e in enumerate(column, start=1):
            total += e
            if total > t:
                found = m
                break
        out.append(found)
    return [{"rows_needed": ExactTensor.of("int64", out)}]


def _sample_prefix(draw: Draw, level: int) -> dict:
    x = sample_matrix((3, 2), (3, 2), -3, 4, 2)(draw, level)["x"]
    return {"x": x, "threshold": float(draw.dyadic(1, 2 + level, 2))}


LEVEL_4 = pytorch_level(
    "tensor_ops",
    prefix_to_threshold,
    _prefix_to_threshold,
    lambda i: """For every column j of `x`, give the smallest m >= 1 such that the sum of the first m
        elements of the column (rows 0 to m-1) is strictly greater than `threshold`, or -1 if no prefix
        of the column, the whole column included, is; `rows_needed` is the int64 vector of these
        numbers, one per column.""",
    lambda i: ({"rows_needed": i64(i["x"].shape[1])},),
    _sample_prefix,
    reject=not_constant("rows_needed"),
)


def _some_column_never(task) -> bool:
    return -1 in task.expected["rows"][0]["rows_needed"].data


# reductions L5: the smallest set of most probable classes covering a mass ------------------------
def nucleus(x, mass):
    import torch

    probs = torch.softmax(x, dim=1)
    ordered, _ = torch.sort(probs, dim=1, descending=True)
    cumulative = ordered.cumsum(dim=1)
    kept = (cumulative < mass).sum(dim=1) + 1
    top = ordered[:, 0] / cumulative.gather(1, (kept - 1).unsqueeze(1)).squeeze(1)
    return {"rows": [{"kept": kept, "top_share": top}]}


def _nucleus_rows(x, mass):
    rows = []
    for row in values(x):
        ordered = sorted(softmax_row(row), reverse=True)
        total, kept = mpmath.mpf(0), 0
        while total < mass:
            total += ordered[kept]
            kept += 1
        rows.append((kept, ordered[0] / total, ordered))
    return rows


def _nucleus(x, mass):
    rows = _nucleus_rows(x, mpmath.mpf(mass))
    return [{"kept": ExactTensor.of("int64", [k for k, _, _ in rows]),
             "top_share": ExactTensor.of("float32", [s for _, s, _ in rows])}]


def _nucleus_margin(inputs: Inputs) -> str | None:
    mass = mpmath.mpf(inputs["mass"])
    for row in values(inputs["x"]):
        total = mpmath.mpf(0)
        for p in sorted(softmax_row(row), reverse=True):
            total += p
            if abs(total - mass) < mpmath.mpf("1e-4"):
                return "a cumulative probability is within 1e-4 of the mass: the cut would hinge on rounding"
    return None


def _sample_nucleus(draw: Draw, level: int) -> dict:
    # logits within +-2.5 over 4..7 columns: the most probable class rarely holds the mass alone
    x = dyadic_tensor(draw, (draw.integer(3, 5), draw.integer(4, 7)), -2.5, 2.5, 2)
    return {"x": x, "mass": draw.choice((0.75, 0.8125, 0.875, 0.9375))}


def _nucleus_keeps_several(task) -> str | None:
    """Top-p must keep at least two classes in most rows (else "keep one" passes most rows), and
    the kept counts must not all be equal."""
    kept = task.expected["rows"][0]["kept"].data
    if sum(1 for k in kept if k >= 2) * 2 <= len(kept):
        return f"at most half of the rows keep two or more classes: {kept}"
    return not_constant("kept")(task)


LEVEL_5 = pytorch_level(
    "tensor_ops",
    nucleus,
    _nucleus,
    lambda i: """Each row of `x` holds the logits of a distribution over its columns (probability of a
        column: e^(logit) over the sum of e^(logit) across the row). For each row, keep the fewest
        most probable columns whose probabilities add up to at least `mass` (take columns in order of
        decreasing probability until the running total reaches `mass` or more). Give `kept`, the number
        of columns kept per row, and `top_share`, the probability of the row's most probable column
        divided by the total probability of the kept columns.""",
    lambda i: ({"kept": i64(i["x"].shape[0]), "top_share": f32(i["x"].shape[0])},),
    _sample_nucleus,
    refuse=_nucleus_margin,
    reject=_nucleus_keeps_several,
)


REDUCTIONS = five_levels(
    "reductions",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the four reductions named; L2 each given by its formula, no call named; L3 softmax-weighted "
          "row pooling, then the best row; L4 per column the shortest prefix passing a threshold, or -1 "
          "(the None branch); L5 the smallest top-probability set covering a mass, described not named",
    branches=(Branch("a column never passes the threshold", _some_column_never, Fraction(1, 5), (4,)),),
)
