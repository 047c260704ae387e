"""The clamp_and_select family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    PY_INT,
    Inputs,
    f32,
    pytorch_level,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, mean, values
from exactgrade.domains.pytorch.shared import dims
from exactgrade.domains.pytorch.tensor_ops.shared import flat_elements, sample_matrix
from exactgrade.family import Branch, Draw, five_levels


# pt-003 -------------------------------------------------------------------------------------------
def clamp_and_select(x):
    import torch

    return {"rows": [{
        "clipped": torch.clamp(x, min=-1.5, max=2.0),
        "inverted_bounds": torch.clamp(x, min=2.0, max=1.0),
        "leaky": torch.where(x > 0, x, 0.1 * x),
    }]}


def _clamp_and_select(x):
    v = values(x)
    low, high = Fraction(-3, 2), Fraction(2)
    return [{
        "clipped": ExactTensor.of("float32", [[min(max(e, low), high) for e in row] for row in v]),
        # torch.clamp documents that min > max sets every element to max
        "inverted_bounds": ExactTensor.of("float32", [[Fraction(1) for _ in row] for row in v]),
        "leaky": ExactTensor.of("float32", [[e if e > 0 else Fraction(1, 10) * e for e in row] for row in v]),
    }]


def _clamp_makes_its_point(inputs: Inputs) -> str | None:
    elements = flat_elements(inputs["x"])
    if not any(e < Fraction(-3, 2) for e in elements) or not any(e > 2 for e in elements):
        return "no element lies outside [-1.5, 2.0] on both sides: the clamp would not clip"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=clamp_and_select,
    independent=_clamp_and_select,
    question="""From `x`, compute `clipped` = torch.clamp(x, min=-1.5, max=2.0); `inverted_bounds` =
        torch.clamp(x, min=2.0, max=1.0) (the bounds are deliberately the wrong way round; report what
        torch returns); and `leaky`, which keeps the positive elements of x and multiplies the others by
        0.1 (use torch.where).""",
    answer=lambda i: ({"clipped": f32(*dims(i["x"])), "inverted_bounds": f32(*dims(i["x"])),
                       "leaky": f32(*dims(i["x"]))},),
    sample=sample_matrix((2, 0), (4, 2), -4, 4.5, 2),
    refuse=_clamp_makes_its_point,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    clamp_and_select,
    _clamp_and_select,
    """From `x`, give `clipped`, x with every element below -1.5 raised to -1.5 and every element
        above 2.0 lowered to 2.0; `inverted_bounds`, the result of first raising every element of x
        below 2.0 to 2.0 and then lowering every element above 1.0 to 1.0; and `leaky`, the function
        f(e) = e for e > 0 and f(e) = 0.1*e otherwise (0.1 as a float32 constant), applied to every
        element.""",
    lambda i: ({"clipped": f32(*dims(i["x"])), "inverted_bounds": f32(*dims(i["x"])),
                "leaky": f32(*dims(i["x"]))},),
    sample_matrix((2, 0), (4, 2), -4, 4.5, 2),
    refuse=_clamp_makes_its_point,
)


def _few_survive(task) -> bool:
    return 2 * task.expected["rows"][0]["nonzero"] <= math.prod(task.inputs["x"].shape)


# clamp_and_select L3: clip, leak, then per-row means and the number clipped -----------------------
def clip_leak_summary(x):
    import torch

    clipped = torch.clamp(x, min=-1.5, max=2.0)
    leaky = torch.where(clipped > 0, clipped, 0.1 * clipped)
    return {"rows": [{"row_means": leaky.mean(dim=1), "changed": int((clipped != x).sum())}]}


def _clip_leak_summary(x):
    v = values(x)
    low, high = Fraction(-3, 2), Fraction(2)
    clipped = [[min(max(e, low), high) for e in row] for row in v]
    leaky = [[e if e > 0 else Fraction(1, 10) * e for e in row] for row in clipped]
    changed = sum(1 for row, c in zip(v, clipped, strict=True) for e, f in zip(row, c, strict=True) if e != f)
    return [{"row_means": ExactTensor.of("float32", [mean(row) for row in leaky]), "changed": changed}]


LEVEL_3 = pytorch_level(
    "tensor_ops",
    clip_leak_summary,
    _clip_leak_summary,
    """Limit every element of `x` to the interval [-1.5, 2.0] (values outside move to the nearer
        end), then map each result e to e if e > 0 and to 0.1*e otherwise (0.1 as a float32 constant).
        Give `row_means`, the mean of each row of the final tensor, and `changed`, how many elements of
        x the limiting step altered.""",
    lambda i: ({"row_means": f32(i["x"].shape[0]), "changed": PY_INT},),
    sample_matrix((2, 0), (4, 2), -4, 4.5, 2),
    refuse=_clamp_makes_its_point,
)


# clamp_and_select L4: the tightest symmetric bound that clips at most k elements -----------------
def tightest_bound(x, k):
    import torch

    magnitudes = torch.sort(x.abs().reshape(-1), descending=True).values
    bound = magnitudes[k]
    return {"rows": [{"bound": float(bound), "clipped_sum": float(torch.clamp(x, -bound, bound).sum())}]}


def _tightest_bound(x, k):
    flat = [e for row in values(x) for e in row]
    bound = sorted((abs(e) for e in flat), reverse=True)[k]
    return [{"bound": bound, "clipped_sum": sum((min(max(e, -bound), bound) for e in flat), Fraction(0))}]


def _sample_tightest(draw: Draw, level: int) -> dict:
    x = sample_matrix((2, 0), (4, 2), -4, 4.5, 2)(draw, level)["x"]
    return {"x": x, "k": draw.integer(1, max(1, len(x.data) // 2))}


LEVEL_4 = pytorch_level(
    "tensor_ops",
    tightest_bound,
    _tightest_bound,
    """Limiting `x` to [-b, b] for a number b >= 0 moves every element e with |e| > b to the nearer
        end. Give `bound`, the smallest b >= 0 for which at most `k` elements of x move, and
        `clipped_sum`, the sum of all elements of x after limiting it to [-bound, bound].""",
    lambda i: ({"bound": PY_FLOAT, "clipped_sum": PY_FLOAT},),
    _sample_tightest,
)


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


LEVEL_5 = pytorch_level(
    "tensor_ops",
    shrink_to_budget,
    _shrink_to_budget,
    lambda i: """Shrinking `x` by a level L >= 0 moves every element toward zero by L and sets it to zero
        if it would cross zero (an element e becomes 0 if |e| <= L, otherwise e - L when positive and e + L
        when negative). Give `level`, the level L at which the absolute values of the shrunk elements add
        up to exactly `budget`; `shrunk`, x shrunk by that level; and `nonzero`, the number of elements of
        the shrunk tensor that are not zero.""",
    lambda i: ({"level": PY_FLOAT, "shrunk": f32(*i["x"].shape), "nonzero": PY_INT},),
    _sample_budget,
    refuse=_budget_level_clear,
    reject=_budget_rules,
)


CLAMP_AND_SELECT = five_levels(
    "clamp_and_select",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 clamp and where named, with torch's inverted-bounds rule; L2 the same maps described "
          "elementwise; L3 clip then leak, reduced to row means and a count; L4 the tightest symmetric "
          "bound that clips at most k elements; L5 the inverse of soft "
          "thresholding: the level that leaves a given total magnitude (which elements stay nonzero "
          "decides the formula; exact rational level; from a third of the elements to all but two stay "
          "nonzero)",
    branches=(Branch("at most half of x stays nonzero", _few_survive, Fraction(1, 4), (5,)),
              Branch("more than half of x stays nonzero", lambda task: not _few_survive(task), Fraction(1, 4),
                     (5,))),
)
