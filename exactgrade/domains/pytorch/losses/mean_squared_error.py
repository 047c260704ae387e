"""The mean_squared_error family of losses: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_FLOAT, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, mean, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import Branch, Draw, Reject, five_levels


# pt-034 -------------------------------------------------------------------------------------------
def mean_squared_error(pred, target):
    import torch.nn.functional as F

    return {"rows": [{
        "mean": F.mse_loss(pred, target),
        "sum": F.mse_loss(pred, target, reduction="sum"),
        "per_element": F.mse_loss(pred, target, reduction="none"),
    }]}


def _mean_squared_error(pred, target):
    pairs = zip(values(pred), values(target), strict=True)
    squares = [[(p - t) ** 2 for p, t in zip(rp, rt, strict=True)] for rp, rt in pairs]
    everything = [s for row in squares for s in row]
    return [{
        "mean": ExactTensor.of("float32", mean(everything)),
        "sum": ExactTensor.of("float32", sum(everything, Fraction(0))),
        "per_element": ExactTensor.of("float32", squares),
    }]


def _sample_mse(draw: Draw, level: int) -> dict:
    shape = (draw.integer(2, 1 + level), draw.integer(3, 2 + level))
    return {"pred": dyadic_tensor(draw, shape, -3, 3, 2), "target": dyadic_tensor(draw, shape, -3, 3, 2)}


LEVEL_1 = pytorch_level(
    "losses",
    reference=mean_squared_error,
    independent=_mean_squared_error,
    question="""Give the mean squared error between `pred` and `target` three ways: `mean` (torch's
        default reduction), `sum`, and `per_element` (no reduction).""",
    answer=lambda i: ({"mean": f32(), "sum": f32(), "per_element": f32(*dims(i["pred"]))},),
    sample=_sample_mse,
)


# mean_squared_error ------------------------------------------------------------------------------
_MSE_MATH = """Let d = pred - target elementwise and n the number of elements."""


LEVEL_2 = pytorch_level(
    "losses",
    reference=mean_squared_error,
    independent=_mean_squared_error,
    sample=_sample_mse,
    question=f"""{_MSE_MATH} Give `per_element`, the tensor of d^2; `sum`, the sum of its
    elements; and
         `mean`, that sum divided by n (0-d tensors for the last two).""",
    answer=lambda i: ({"mean": f32(), "sum": f32(), "per_element": f32(*dims(i["pred"]))},),
)


def mse_step(pred, target):
    import torch

    p = pred.clone().requires_grad_(True)
    ((p - target) ** 2).mean().backward()
    with torch.no_grad():
        after = ((p - 0.25 * p.grad - target) ** 2).mean()
    return {"rows": [{"grad": p.grad, "after": after}]}


def _mse_step(pred, target):
    d = [p - t for p, t in zip(leaves(values(pred)), leaves(values(target)), strict=True)]
    n = len(d)
    grad = [
        [2 * (p - t) / n for p, t in zip(rp, rt, strict=True)]
        for rp, rt in zip(values(pred), values(target), strict=True)
    ]
    return [
        {
            "grad": ExactTensor.of("float32", grad),
            "after": ExactTensor.of("float32", mean([(e - Fraction(1, 4) * 2 * e / n) ** 2 for e in d])),
        }
    ]


LEVEL_3 = pytorch_level(
    "losses",
    reference=mse_step,
    independent=_mse_step,
    sample=_sample_mse,
    question=f"""{_MSE_MATH} Let L(pred) = (sum of d^2) / n. Give `grad`, the gradient of L
    with respect
         to `pred`, and `after`, L at pred - 0.25 * grad (one gradient step on the predictions; a 0-d
         tensor).""",
    answer=lambda i: ({"grad": f32(*dims(i["pred"])), "after": f32()},),
)


def mse_scale(pred, target):

    p, t = pred.double().flatten(), target.double().flatten()
    a = (p @ t) / (p @ p)
    return {"rows": [{"scale": a.to(pred.dtype), "minimum": ((a * p - t) ** 2).mean().to(pred.dtype)}]}


def _mse_scale(pred, target):
    p, t = leaves(values(pred)), leaves(values(target))
    a = sum((x * y for x, y in zip(p, t, strict=True)), Fraction(0)) / sum((x * x for x in p), Fraction(0))
    return [
        {
            "scale": ExactTensor.of("float32", a),
            "minimum": ExactTensor.of("float32", mean([(a * x - y) ** 2 for x, y in zip(p, t, strict=True)])),
        }
    ]


def mse_calibration(pred, target):
    import torch

    p, t = pred.double().flatten(), target.double().flatten()
    pc, tc = p - p.mean(), t - t.mean()
    a = torch.clamp((pc @ tc) / (pc @ pc), min=0.5)
    b = t.mean() - a * p.mean()
    return {
        "rows": [
            {
                "scale": a.to(pred.dtype).item(),
                "offset": b.to(pred.dtype),
                "minimum": ((a * p + b - t) ** 2).mean().to(pred.dtype),
            }
        ]
    }


def _mse_calibration(pred, target):
    p, t = leaves(values(pred)), leaves(values(target))
    mp, mt = mean(p), mean(t)
    a = max(
        sum(((x - mp) * (y - mt) for x, y in zip(p, t, strict=True)), Fraction(0))
        / sum(((x - mp) ** 2 for x in p), Fraction(0)),
        Fraction(1, 2),
    )
    b = mt - a * mp
    return [
        {
            "scale": a,
            "offset": ExactTensor.of("float32", b),
            "minimum": ExactTensor.of(
                "float32", mean([(a * x + b - y) ** 2 for x, y in zip(p, t, strict=True)])
            ),
        }
    ]


def _sample_calibration(draw, level):
    shape = (draw.integer(2, 3), draw.integer(3, 4))
    pred = dyadic_tensor(draw, shape, -3, 3, 2)
    slope = draw.choice((Fraction(-1, 2), Fraction(1, 4), Fraction(1), Fraction(3, 2)))
    target = [[slope * e + draw.dyadic(-1, 1, 2) for e in row] for row in values(pred)]
    return {"pred": pred, "target": tensor("float32", [[float(e) for e in row] for row in target])}


def _calibration_point(inputs):
    p = leaves(values(inputs["pred"]))
    if len(set(p)) < 2:
        return "pred is constant: the scale is not determined"
    return None


def _sample_mse_scale(draw, level):
    inputs = _sample_mse(draw, 3)
    if all(e == 0 for e in leaves(values(inputs["pred"]))):
        raise Reject("pred is zero: the scale is not determined")
    return inputs


LEVEL_4 = pytorch_level(
    "losses",
    reference=mse_scale,
    independent=_mse_scale,
    sample=_sample_mse_scale,
    question="""Among all real a, find the one that minimises the mean over all elements of
         (a * pred - target)^2. Give `scale`, that a, and `minimum`, the mean at that a
         (0-d tensors).""",
    answer=({"scale": f32(), "minimum": f32()},),
)


LEVEL_5 = pytorch_level(
    "losses",
    reference=mse_calibration,
    independent=_mse_calibration,
    sample=_sample_calibration,
    refuse=_calibration_point,
    question="""A calibration maps every prediction p of `pred` to a * p + b. Find the a >=
    0.5 and real b
         that minimise the mean over all elements of (a * pred + b - target)^2 (a may not be
         below 0.5). Give `scale`, that a (a Python float), `offset`, that b, and
         `minimum`, the mean at
         that (a, b) (0-d tensors).""",
    answer=({"scale": PY_FLOAT, "offset": f32(), "minimum": f32()},),
)


MEAN_SQUARED_ERROR = five_levels(
    "mean_squared_error",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the three reductions named; L2 described; L3 the gradient with respect to the predictions and "
   "the loss after one step on them; L4 the least-squares scale of the predictions; L5 a scale-and-offset "
   "calibration with a scale of at least 0.5 (the bound binds when the fit is flatter)",
    branches=(
        Branch(
            "the scale's bound binds",
            lambda t: t.expected["rows"][0].get("scale") == 0.5,
            Fraction(1, 10),
            (5,),
        ),
    ),
)
