"""The kink_gradients family of autograd: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    PY_INT,
    Inputs,
    f32,
    pytorch_level,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.domains.pytorch.sampling import dyadic_list
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


# pt-033 -------------------------------------------------------------------------------------------
def kink_gradients(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    (relu_grad,) = torch.autograd.grad(torch.relu(x).sum(), x)
    (abs_grad,) = torch.autograd.grad(x.abs().sum(), x)
    (clamp_grad,) = torch.autograd.grad(x.clamp(0.0, 2.0).sum(), x)
    (max_grad,) = torch.autograd.grad(x.max(), x)
    return {"rows": [{"relu": relu_grad, "abs": abs_grad, "clamp": clamp_grad, "max": max_grad}]}


def _kink_gradients(x0):
    v = values(x0)
    top = max(v)
    ties = v.count(top)
    # torch's documented conventions: relu'(0) = 0; abs'(0) = sign(0) = 0; clamp passes the gradient on
    # the closed interval [min, max]; a full max() reduction splits the gradient evenly between ties.
    return [{
        "relu": ExactTensor.of("float32", [Fraction(1) if e > 0 else Fraction(0) for e in v]),
        "abs": ExactTensor.of("float32", [Fraction((e > 0) - (e < 0)) for e in v]),
        "clamp": ExactTensor.of("float32", [Fraction(1) if 0 <= e <= 2 else Fraction(0) for e in v]),
        "max": ExactTensor.of("float32", [Fraction(1, ties) if e == top else Fraction(0) for e in v]),
    }]


def _sample_kinks(draw: Draw, level: int) -> dict:
    n = 5 + level
    v = dyadic_list(draw, n - 3, -2, 3 + level / 2, 1)
    v += [0.0, 2.0, max(v)]  # the kinks of relu/abs (0) and of clamp (2), and a tied maximum
    return {"x0": tensor("float32", draw.shuffled(v))}


def _maximum_tied(inputs: Inputs) -> str | None:
    v = values(inputs["x0"])
    if v.count(max(v)) < 2:
        return "the maximum is not tied: the documented even split of x.max()'s gradient is not tested"
    return None


LEVEL_1 = pytorch_level(
    "autograd",
    reference=kink_gradients,
    independent=_kink_gradients,
    question="""Let x be a leaf tensor from `x0` that requires gradients. Give the gradient that torch's
        autograd computes with respect to x of: `relu`, sum(relu(x)); `abs`, sum(abs(x)); `clamp`,
        sum(x.clamp(0.0, 2.0)); and `max`, x.max() (the maximum over all elements; note the tie).
        Several inputs sit exactly on kinks: report torch's conventions there.""",
    answer=lambda i: ({name: f32(*dims(i["x0"])) for name in ("relu", "abs", "clamp", "max")},),
    sample=_sample_kinks,
    refuse=_maximum_tied,
)

# kink_gradients -----------------------------------------------------------------------------------
_KINK_RELU = "the derivative of max(t, 0) at t = 0 is 0"


_KINK_ABS = "the derivative of |t| at t = 0 is 0"


_KINK_CLAMP = ("limiting t to an interval [lo, hi] passes the gradient (derivative 1) wherever "
               "lo <= t <= hi, both ends included, and blocks it (0) outside")


_KINK_MAX = "the gradient of the maximum of several values is split evenly among all the values equal to it"


def _kink_rules(*rules: str) -> str:
    """The kink conventions a question needs (and only those)."""
    return "At a kink, use " + ("this convention: " if len(rules) == 1 else "these conventions: ") + \
        "; ".join(rules) + "."


_KINK_RULES = _kink_rules(_KINK_RELU, _KINK_ABS, _KINK_CLAMP, _KINK_MAX)


LEVEL_2 = pytorch_level(
    "autograd",
    kink_gradients,
    _kink_gradients,
    f"""With x = `x0`, give the gradient with respect to x of: `relu`, the sum of max(x_i, 0); `abs`,
        the sum of |x_i|; `clamp`, the sum of x_i limited to [0, 2]; and `max`, the largest element of x.
        {_KINK_RULES}""",
    lambda i: ({name: f32(*dims(i["x0"])) for name in ("relu", "abs", "clamp", "max")},),
    _sample_kinks,
    refuse=_maximum_tied,
)


def clamped_max_and_product(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    (of_max,) = torch.autograd.grad(x.clamp(0.0, 2.0).max(), x)
    (of_product,) = torch.autograd.grad((torch.relu(x) * x.abs()).sum(), x)
    return {"rows": [{"of_max": of_max, "of_product": of_product}]}


def _clamped_max_and_product(x0):
    v = values(x0)
    clamped = [min(max(e, Fraction(0)), Fraction(2)) for e in v]
    top = max(clamped)
    share = Fraction(1, clamped.count(top))
    return [{"of_max": ExactTensor.of("float32", [share if c == top and 0 <= e <= 2 else Fraction(0)
                                                  for e, c in zip(v, clamped, strict=True)]),
             "of_product": ExactTensor.of("float32", [2 * e if e > 0 else Fraction(0) for e in v])}]


def _above_the_clamp(inputs: Inputs) -> str | None:
    if not any(e > 2 for e in values(inputs["x0"])):
        return "no element lies above 2: the clamped maximum's tie with blocked elements is not tested"
    return _maximum_tied(inputs)


LEVEL_3 = pytorch_level(
    "autograd",
    clamped_max_and_product,
    _clamped_max_and_product,
    f"""With x = `x0`, give `of_max`, the gradient with respect to x of the largest element of c, where
        c is x with every element limited to [0, 2]; and `of_product`, the gradient of the sum over i of
        max(x_i, 0) * |x_i| (the product rule applies, each factor with the conventions below).
        {_KINK_RULES}""",
    lambda i: ({"of_max": f32(*dims(i["x0"])), "of_product": f32(*dims(i["x0"]))},),
    _sample_kinks,
    refuse=_above_the_clamp,
)


def smallest_passing_bound(x0):
    import torch

    n = x0.numel()
    for c in [k / 2 for k in range(0, 2 * int(x0.abs().max()) + 3)]:
        x = x0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(x.clamp(-c, c).sum(), x)
        if int((g == 1).sum()) >= (n + 1) // 2:
            return {"rows": [{"bound": c, "passing": int((g == 1).sum())}]}
    return {"rows": [{"bound": -1.0, "passing": -1}]}


def _smallest_passing_bound(x0):
    v = values(x0)
    c = sorted(abs(e) for e in v)[(len(v) + 1) // 2 - 1]
    return [{"bound": c, "passing": sum(1 for e in v if abs(e) <= c)}]


LEVEL_4 = pytorch_level(
    "autograd",
    smallest_passing_bound,
    _smallest_passing_bound,
    f"""With x = `x0` and a number c >= 0, let g(c) be the gradient with respect to x of the sum of the
        elements of x each limited to [-c, c]. Give `bound`, the smallest c >= 0 for which at least half
        of the entries of g(c) (half the element count, rounded up) equal 1, and `passing`, the
        number of entries of g(bound) equal to 1. {_kink_rules(_KINK_CLAMP)}""",
    lambda i: ({"bound": PY_FLOAT, "passing": PY_INT},),
    _sample_kinks,
)


def top_three_sum(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    value = torch.sort(x, descending=True, stable=True).values[:3].sum()
    (grad,) = torch.autograd.grad(value, x)
    return {"rows": [{"value": float(value.detach()), "grad": grad}]}


def _top_three_sum(x0):
    v = values(x0)
    chosen = sorted(range(len(v)), key=lambda i: (-v[i], i))[:3]
    return [{"value": sum((v[i] for i in chosen), Fraction(0)),
             "grad": ExactTensor.of("float32", [Fraction(1) if i in chosen else Fraction(0)
                                               for i in range(len(v))])}]


def _sample_top_three(draw: Draw, level: int) -> dict:
    v = dyadic_list(draw, 5 + level, -2, 3 + level / 2, 1)
    order = sorted(range(len(v)), key=lambda i: -v[i])
    v[order[3]] = v[order[2]]  # the third-largest value is shared: the stated tie rule decides
    return {"x0": tensor("float32", v)}


def _boundary_tied(inputs: Inputs) -> str | None:
    ordered = sorted(values(inputs["x0"]), reverse=True)
    if ordered[2] != ordered[3]:
        return "the third-largest value is not shared: the tie rule is not tested"
    return None


LEVEL_5 = pytorch_level(
    "autograd",
    top_three_sum,
    _top_three_sum,
    """With x = `x0`, let T(x) be the sum of the three largest elements of x, where among equal
        elements the one with the smaller index counts as the larger (so exactly three elements are
        counted). Give `value`, T at x0, and `grad`, the gradient of T with respect to x at x0, the
        choice of the counted elements being held fixed while differentiating.""",
    lambda i: ({"value": PY_FLOAT, "grad": f32(*dims(i["x0"]))},),
    _sample_top_three,
    refuse=_boundary_tied,
)


KINK_GRADIENTS = five_levels(
    "kink_gradients",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 torch's kink conventions to report; L2 the same functions with the conventions stated; L3 "
          "a maximum of clamped values (ties with blocked elements) and a product of kinked factors; L4 "
          "the smallest clamp bound passing half the gradient; L5 the gradient of a top-three sum with a "
          "stated tie rule at the boundary",
)
