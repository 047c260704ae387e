"""The mask_above_mean family of tensor_ops: everything it needs, its five levels in level order."""

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
from exactgrade.domains.pytorch.exact import ExactTensor, mean, reshape, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_list
from exactgrade.domains.pytorch.shared import dims
from exactgrade.domains.pytorch.tensor_ops.shared import flat_elements, sample_matrix
from exactgrade.family import Branch, Draw, five_levels


# pt-005 -------------------------------------------------------------------------------------------
def mask_above_mean(x):
    mask = x > x.mean()
    return {"rows": [{
        "filled": x.masked_fill(~mask, -1.0),
        "selected": x[mask],
        "positions": mask.nonzero(),
    }]}


def _mask_above_mean(x):
    v = values(x)
    m = mean([e for row in v for e in row])
    above = [(i, j) for i, row in enumerate(v) for j, e in enumerate(row) if e > m]
    return [{
        "filled": ExactTensor.of("float32", [[e if e > m else Fraction(-1) for e in row] for row in v]),
        "selected": ExactTensor.of("float32", [v[i][j] for i, j in above]),
        "positions": ExactTensor.of("int64", [[i, j] for i, j in above]),
    }]


def _above_mean(x):
    elements = flat_elements(x)
    m = mean(elements)
    return sum(1 for e in elements if e > m)


def _no_element_at_mean(inputs: Inputs) -> str | None:
    elements = flat_elements(inputs["x"])
    m = mean(elements)
    if m in elements:
        return f"an element equals the mean {float(m)}: the strict mask would hinge on rounding"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=mask_above_mean,
    independent=_mask_above_mean,
    question="""Let mask mark the elements of `x` strictly greater than the mean of all of x. Give
        `filled`, x with every element outside the mask replaced by -1.0; `selected`, the masked
        elements in row-major order; and `positions`, their (row, column) indices, one row per element,
        in the same order.""",
    answer=lambda i: ({"filled": f32(*dims(i["x"])), "selected": f32(_above_mean(i["x"])),
                       "positions": i64(_above_mean(i["x"]), 2)},),
    sample=sample_matrix((3, 2), (4, 3), -3, 5, 2),
    refuse=_no_element_at_mean,
)

# mask_above_mean L2: above the mean of the element's own row --------------------------------------
def above_row_mean(x):
    mask = x > x.mean(dim=1, keepdim=True)
    return {"rows": [{"filled": x.masked_fill(~mask, -1.0), "selected": x[mask],
                      "positions": mask.nonzero()}]}


def _above_row_mean_positions(v):
    means = [mean(row) for row in v]
    return [(i, j) for i, row in enumerate(v) for j, e in enumerate(row) if e > means[i]]


def _above_row_mean(x):
    v = values(x)
    above = set(_above_row_mean_positions(v))
    ordered = sorted(above)
    return [{
        "filled": ExactTensor.of("float32", [[e if (i, j) in above else Fraction(-1)
                                              for j, e in enumerate(row)] for i, row in enumerate(v)]),
        "selected": ExactTensor.of("float32", [v[i][j] for i, j in ordered]),
        "positions": ExactTensor.of("int64", [[i, j] for i, j in ordered]),
    }]


def _no_element_at_its_row_mean(inputs: Inputs) -> str | None:
    for r, row in enumerate(values(inputs["x"])):
        if mean(row) in row:
            return f"an element of row {r} equals the row's mean: the strict mask would hinge on rounding"
    return None


def _count_above_row_mean(x):
    return len(_above_row_mean_positions(values(x)))


# mask_above_mean L3: above both its row's and its column's mean -----------------------------------
def above_both_means(x):
    mask = (x > x.mean(dim=1, keepdim=True)) & (x > x.mean(dim=0, keepdim=True))
    return {"rows": [{"counts": mask.sum(dim=1), "masked_mean": float(x[mask].mean())}]}


def _both(v):
    rows, cols = [mean(r) for r in v], [mean(c) for c in transpose(v)]
    return [[e > rows[i] and e > cols[j] for j, e in enumerate(row)] for i, row in enumerate(v)]


def _above_both_means(x):
    v = values(x)
    mask = _both(v)
    chosen = [e for row, m in zip(v, mask, strict=True) for e, keep in zip(row, m, strict=True) if keep]
    return [{"counts": ExactTensor.of("int64", [sum(m) for m in mask]), "masked_mean": mean(chosen)}]


def _no_element_at_a_mean(inputs: Inputs) -> str | None:
    v = values(inputs["x"])
    rows, cols = [mean(r) for r in v], [mean(c) for c in transpose(v)]
    if any(e in (rows[i], cols[j]) for i, row in enumerate(v) for j, e in enumerate(row)):
        return "an element equals its row's or its column's mean: the strict mask would hinge on rounding"
    return None


# mask_above_mean L4: the fewest largest elements whose mean falls to a goal -----------------------
def top_mean_count(x, goal):
    import torch

    ordered = x.reshape(-1).sort(descending=True).values
    means = ordered.cumsum(dim=0) / torch.arange(1, ordered.numel() + 1)
    hits = (means <= goal).nonzero()
    return {"rows": [{"count": int(hits[0]) + 1 if hits.numel() else -1}]}


def _top_mean_count(x, goal):
    ordered = sorted((e for row in values(x) for e in row), reverse=True)
    total = Fraction(0)
    for k, e in enumerate(ordered, start=1):
        total += e
        if total / k <= Fraction(goal):
            return [{"count": k}]
    return [{"count": -1}]


def _sample_top_mean(draw: Draw, level: int) -> dict:
    x = sample_matrix((3, 2), (4, 3), -3, 5, 2)(draw, level)["x"]
    flat = sorted(e for row in values(x) for e in row)
    low, high = mean(flat) - 1, flat[-2]
    return {"x": x, "goal": float(draw.dyadic(low, max(low, high), 2))}


def _count_none(task) -> bool:
    return task.expected["rows"][0]["count"] == -1


# mask_above_mean L5: iterated clipping of outliers ------------------------------------------------
def iterated_clipping(x, width):
    kept = x.reshape(-1).double()
    rounds = 0
    while True:
        m = kept.mean()
        var = ((kept - m) ** 2).mean()
        keep = (kept - m) ** 2 <= width * width * var
        if bool(keep.all()):
            break
        kept, rounds = kept[keep], rounds + 1
    return {"rows": [{"rounds": rounds, "kept": int(kept.numel()), "kept_mean": float(kept.mean())}]}


def _clipping_rounds(x, width):
    kept, rounds, w2 = [e for row in values(x) for e in row], 0, Fraction(width) ** 2
    while True:
        m = mean(kept)
        var = mean([(e - m) ** 2 for e in kept])
        survivors = [e for e in kept if (e - m) ** 2 <= w2 * var]
        if len(survivors) == len(kept):
            return rounds, kept
        kept, rounds = survivors, rounds + 1


def _iterated_clipping(x, width):
    rounds, kept = _clipping_rounds(x, width)
    return [{"rounds": rounds, "kept": len(kept), "kept_mean": mean(kept)}]


def _sample_outliers(draw: Draw, level: int) -> dict:
    shape = (draw.integer(3, 2 + level), draw.integer(4, 3 + level))
    n = shape[0] * shape[1]
    flat = dyadic_list(draw, n, -2, 2, 2)
    for j in draw.sample(range(n), draw.integer(1, 2)):
        flat[j] = float(draw.dyadic(5, 9, 2) * draw.choice((-1, 1)))
    return {"x": tensor("float32", reshape(flat, shape)), "width": draw.choice((1.5, 2.0, 2.5))}


def _clipping_does_something(inputs: Inputs) -> str | None:
    kept, w2 = [e for row in values(inputs["x"]) for e in row], Fraction(inputs["width"]) ** 2
    while True:  # every comparison of every pass must be clear of its boundary
        m = mean(kept)
        bound = w2 * mean([(e - m) ** 2 for e in kept])
        if any(abs((e - m) ** 2 - bound) < Fraction(1, 1000) * (1 + bound) for e in kept):
            return "an element sits on the clipping boundary: the pass would hinge on rounding"
        survivors = [e for e in kept if (e - m) ** 2 <= bound]
        if len(survivors) == len(kept):
            break
        kept = survivors
    rounds, kept = _clipping_rounds(inputs["x"], inputs["width"])
    if rounds < 1:
        return "no element is ever dropped: the iteration would not run"
    if len(kept) < 3:
        return "fewer than three elements survive"
    return None


_MASK_FILL_TEXT = """Mark the elements of `x` that are strictly greater than the mean of their own row.
    Give `filled`, x with every unmarked element replaced by -1.0; `selected`, the marked elements in
    row-major order; and `positions`, their (row, column) indices, one row per marked element, in the same
    order."""


LEVEL_2 = pytorch_level(
    "tensor_ops",
    above_row_mean,
    _above_row_mean,
    _MASK_FILL_TEXT,
    lambda i: ({"filled": f32(*dims(i["x"])), "selected": f32(_count_above_row_mean(i["x"])),
                "positions": i64(_count_above_row_mean(i["x"]), 2)},),
    sample_matrix((3, 2), (4, 3), -3, 5, 2),
    refuse=_no_element_at_its_row_mean,
)


LEVEL_3 = pytorch_level(
    "tensor_ops",
    above_both_means,
    _above_both_means,
    """Mark the elements of `x` that are strictly greater than the mean of their row and also
        strictly greater than the mean of their column. Give `counts`, the number of marked elements in
        each row, and `masked_mean`, the mean of all marked elements.""",
    lambda i: ({"counts": i64(i["x"].shape[0]), "masked_mean": PY_FLOAT},),
    sample_matrix((3, 2), (4, 3), -3, 5, 2),
    refuse=_no_element_at_a_mean,
)


LEVEL_4 = pytorch_level(
    "tensor_ops",
    top_mean_count,
    _top_mean_count,
    """Give `count`, the smallest k >= 1 such that the mean of the k largest elements of `x` is at
        most `goal` (ties among equal elements do not matter for the mean), or -1 if no k up to the
        number of elements of x has this property.""",
    lambda i: ({"count": PY_INT},),
    _sample_top_mean,
)


LEVEL_5 = pytorch_level(
    "tensor_ops",
    iterated_clipping,
    _iterated_clipping,
    """Start with all elements of `x` kept. Repeat: compute the mean m and the population variance
        v (mean squared deviation from m, dividing by the number kept) of the kept elements, and drop
        every kept element e with (e - m)^2 > width^2 * v, where `width` is given; stop at the first
        pass that drops nothing (that pass is not counted). Give `rounds`, the number of passes that
        dropped something; `kept`, how many elements remain; and `kept_mean`, their mean.""",
    lambda i: ({"rounds": PY_INT, "kept": PY_INT, "kept_mean": PY_FLOAT},),
    _sample_outliers,
    refuse=_clipping_does_something,
)


MASK_ABOVE_MEAN = five_levels(
    "mask_above_mean",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the mask against the overall mean; L2 against each element's row mean (broadcast derived); "
          "L3 against its row's and its column's means, reduced; L4 the fewest largest elements whose mean "
          "falls to a goal, or -1; L5 iterated outlier clipping described, to run to convergence",
    branches=(Branch("no count reaches the goal", _count_none, Fraction(1, 10), (4,)),),
)
