"""The robust_regression_losses family of losses: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_FLOAT, Inputs, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, mean, to_fraction, values
from exactgrade.domains.pytorch.sampling import dyadic_list
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


# pt-038 -------------------------------------------------------------------------------------------
def robust_regression_losses(pred, target):
    import torch.nn.functional as F

    return {"rows": [{
        "l1": F.l1_loss(pred, target),
        "smooth_l1": F.smooth_l1_loss(pred, target),
        "smooth_l1_beta_half": F.smooth_l1_loss(pred, target, beta=0.5, reduction="none"),
        "huber_delta_half": F.huber_loss(pred, target, delta=0.5, reduction="none"),
    }]}


def _robust_regression_losses(pred, target):
    d = [p - t for p, t in zip(values(pred), values(target), strict=True)]

    def smooth_l1(e, beta):
        return e * e / (2 * beta) if abs(e) < beta else abs(e) - beta / 2

    def huber(e, delta):
        return e * e / 2 if abs(e) < delta else delta * (abs(e) - delta / 2)

    half = Fraction(1, 2)
    return [{
        "l1": ExactTensor.of("float32", mean([abs(e) for e in d])),
        "smooth_l1": ExactTensor.of("float32", mean([smooth_l1(e, Fraction(1)) for e in d])),
        "smooth_l1_beta_half": ExactTensor.of("float32", [smooth_l1(e, half) for e in d]),
        "huber_delta_half": ExactTensor.of("float32", [huber(e, half) for e in d]),
    }]


def _sample_robust(draw: Draw, level: int) -> dict:
    n = 6 + 2 * (level - 1)
    target = dyadic_list(draw, n, -3, 3, 3)
    sign = (-1, 1)
    gaps = [float(draw.dyadic(Fraction(-3, 8), Fraction(3, 8), 3)),  # one error in each branch
            draw.choice(sign) * float(draw.dyadic(Fraction(5, 8), Fraction(7, 8), 3)),
            draw.choice(sign) * float(draw.dyadic(Fraction(9, 8), 3, 3))]
    gaps += dyadic_list(draw, n - 3, -3, 3, 3)
    return {"pred": tensor("float32", [t + g for t, g in zip(target, draw.shuffled(gaps), strict=True)]),
            "target": tensor("float32", target)}


def _every_branch(inputs: Inputs) -> str | None:
    gaps = [
        abs(p - t) for p, t in zip(values(inputs["pred"]), values(inputs["target"]), strict=True)
    ]
    if not (
        any(g < Fraction(1, 2) for g in gaps)
        and any(Fraction(1, 2) < g < 1 for g in gaps)
        and any(g > 1 for g in gaps)
    ):
        return ("the errors do not cover |d| < 0.5, 0.5 < |d| < 1 and |d| > 1: a branch of the losses "
                "goes untested")
    return None


LEVEL_1 = pytorch_level(
    "losses",
    reference=robust_regression_losses,
    independent=_robust_regression_losses,
    question="""Compare `pred` with `target`: `l1`, the mean absolute error; `smooth_l1`, torch's smooth
        L1 loss with its default beta (mean); `smooth_l1_beta_half`, the smooth L1 loss with beta=0.5
        per element; and `huber_delta_half`, the Huber loss with delta=0.5 per element.""",
    answer=lambda i: (
        {
            "l1": f32(),
            "smooth_l1": f32(),
            "smooth_l1_beta_half": f32(*dims(i["pred"])),
            "huber_delta_half": f32(*dims(i["pred"])),
        },
    ),
    sample=_sample_robust,
    refuse=_every_branch,
)


# robust_regression_losses ------------------------------------------------------------------------
_ROBUST_MATH = """For an error d = pred - target: the absolute loss is |d|; the smooth absolute loss with
    parameter b is quadratic, d^2 / (2 b), for |d| < b and |d| - b / 2 beyond (continuous, slope 1); the
    robust loss with parameter c is d^2 / 2 for |d| < c and c * (|d| - c / 2) beyond (continuous, slope
    c)."""


LEVEL_2 = pytorch_level(
    "losses",
    reference=robust_regression_losses,
    independent=_robust_regression_losses,
    sample=_sample_robust,
    refuse=_every_branch,
    question=f"""{_ROBUST_MATH} Give `l1`, the mean absolute loss; `smooth_l1`, the mean
    smooth absolute
         loss with b = 1; `smooth_l1_beta_half`, the smooth absolute loss with b = 0.5 per
         element; and
         `huber_delta_half`, the robust loss with c = 0.5 per element.""",
    answer=lambda i: (
        {
            "l1": f32(),
            "smooth_l1": f32(),
            "smooth_l1_beta_half": f32(*dims(i["pred"])),
            "huber_delta_half": f32(*dims(i["pred"])),
        },
    ),
)


def robust_gradients(pred, target):
    import torch.nn.functional as F

    a = pred.clone().requires_grad_(True)
    b = pred.clone().requires_grad_(True)
    F.smooth_l1_loss(a, target).backward()
    F.huber_loss(b, target, delta=0.5).backward()
    return {"rows": [{"grad_smooth": a.grad, "grad_robust": b.grad}]}


def _robust_gradients(pred, target):
    d = [p - t for p, t in zip(values(pred), values(target), strict=True)]
    n, half = len(d), Fraction(1, 2)

    def clip(e, c):
        return max(min(e, c), -c)

    return [
        {
            "grad_smooth": ExactTensor.of("float32", [clip(e, 1) / n for e in d]),
            "grad_robust": ExactTensor.of("float32", [clip(e, half) / n for e in d]),
        }
    ]


LEVEL_3 = pytorch_level(
    "losses",
    reference=robust_gradients,
    independent=_robust_gradients,
    sample=_sample_robust,
    refuse=_every_branch,
    question=f"""{_ROBUST_MATH} Give `grad_smooth`, the gradient with respect to `pred` of
    the mean smooth
         absolute loss with b = 1, and `grad_robust`, the gradient of the mean robust loss
         with c = 0.5.""",
    answer=lambda i: (
        {"grad_smooth": f32(*dims(i["pred"])), "grad_robust": f32(*dims(i["pred"]))},
    ),
)


def robust_locations(target):
    import torch

    t = target.double().sort().values
    n = t.numel()
    median = t[(n - 1) // 2]
    # the mean-Huber minimiser: sum clip(c - t, -0.5, 0.5) = 0; psi is piecewise linear and increasing, so
    # the root lies between two neighbouring knots t +- 0.5, where psi is linear
    knots = torch.cat([t - 0.5, t + 0.5]).unique()
    psi = torch.clamp(knots[:, None] - t[None, :], -0.5, 0.5).sum(dim=1)
    k = int(((psi[:-1] <= 0) & (psi[1:] >= 0) & (psi[:-1] != psi[1:])).nonzero()[0])
    c = knots[k] + (knots[k + 1] - knots[k]) * (-psi[k]) / (psi[k + 1] - psi[k])
    return {
        "rows": [
            {"l1_location": median.to(target.dtype).item(), "robust_location": c.to(target.dtype).item()}
        ]
    }


def _huber_location(ts):
    """The c with sum clip(c - t, -1/2, 1/2) = 0, exactly: the function is piecewise linear and increasing."""
    half = Fraction(1, 2)
    knots = sorted({t + s for t in ts for s in (-half, half)})

    def psi(c):
        return sum((max(min(c - t, half), -half) for t in ts), Fraction(0))

    for lo, hi in zip(knots, knots[1:], strict=False):
        a, b = psi(lo), psi(hi)
        if a <= 0 <= b and a != b:
            return lo + (hi - lo) * (-a) / (b - a)
    raise ValueError("no root")


def _robust_locations(target):
    ts = sorted(values(target))
    return [{"l1_location": ts[(len(ts) - 1) // 2], "robust_location": _huber_location(ts)}]


def _sample_locations(draw, level):
    count = draw.integer(6, 9)
    core = dyadic_list(draw, count - 2, -1, 1, 3)
    outliers = [draw.choice((-1, 1)) * float(draw.dyadic(3, 6, 2)) for _ in range(2)]
    return {"target": tensor("float32", draw.shuffled(core + outliers))}


def _locations_untied(inputs):
    ts = values(inputs["target"])
    if len(set(ts)) < len(ts):
        return "two targets are equal"
    c = _huber_location(sorted(ts))
    if any(abs(abs(c - t) - Fraction(1, 2)) < Fraction(1, 1000) for t in ts):
        return "the robust location sits within 1e-3 of a kink"
    if c == 0 or sorted(ts)[(len(ts) - 1) // 2] == 0:
        return "a location is exactly 0"
    return None


LEVEL_4 = pytorch_level(
    "losses",
    reference=robust_locations,
    independent=_robust_locations,
    sample=_sample_locations,
    refuse=_locations_untied,
    question=f"""{_ROBUST_MATH} Predict one constant c for every element of `target` (a few
    of them are
         outliers). Give `l1_location`, the smallest c that minimises the mean absolute loss of c -
         target, and `robust_location`, the c that minimises the mean robust loss with
         parameter 0.5 (it
         is unique); both Python floats.""",
    answer=({"l1_location": PY_FLOAT, "robust_location": PY_FLOAT},),
)


def quantile_fit(target, tau):
    import torch

    t = target.double().sort().values
    n = t.numel()
    k = int(torch.ceil(torch.tensor(tau * n, dtype=torch.float64))) - 1
    c = t[k]
    loss = torch.where(t >= c, tau * (t - c), (1 - tau) * (c - t)).mean()
    return {"rows": [{"location": c.to(target.dtype).item(), "minimum": loss.to(target.dtype)}]}


def _quantile_fit(target, tau):
    ts, q = sorted(values(target)), to_fraction(tau)

    def loss(c):
        return mean([q * (t - c) if t >= c else (1 - q) * (c - t) for t in ts])

    best = min(loss(c) for c in ts)  # a piecewise-linear convex function: its minimum sits at a data point
    location = min(c for c in ts if loss(c) == best)
    return [{"location": location, "minimum": ExactTensor.of("float32", best)}]


def _sample_quantile(draw, level):
    count = draw.integer(6, 9)
    return {
        "target": tensor("float32", dyadic_list(draw, count, -3, 3, 3)),
        "tau": draw.choice((0.25, 0.75, 0.3, 0.6)),
    }


def _quantile_unique(inputs):
    ts, q = values(inputs["target"]), to_fraction(inputs["tau"])
    if len(set(ts)) < len(ts):
        return "two targets are equal"
    if (q * len(ts)).denominator == 1:
        return "tau * n is an integer: every point between two order statistics minimises the loss"
    if 0 in ts:
        return "a target is 0: the location could be exactly 0"
    return None


LEVEL_5 = pytorch_level(
    "losses",
    reference=quantile_fit,
    independent=_quantile_fit,
    sample=_sample_quantile,
    refuse=_quantile_unique,
    question="""An asymmetric loss charges a prediction c, for a target t, tau * (t - c)
    when t >= c and
         (1 - tau) * (c - t) when t < c, with tau = `tau`. Predict one constant c for every element of
         `target`. Give `location`, the c that minimises the mean of that loss (a Python float; it is
         unique here), and `minimum`, the mean loss there (a 0-d tensor).""",
    answer=({"location": PY_FLOAT, "minimum": f32()},),
)


ROBUST_REGRESSION_LOSSES = five_levels(
    "robust_regression_losses",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 l1, smooth_l1 and huber named; L2 the piecewise losses described; L3 their gradients; L4 the "
   "constants minimising the mean absolute and the Huber loss (a median and a robust location by exact "
   "piecewise-linear root finding); L5 the minimiser of an asymmetric (quantile) loss, described not named",
)
