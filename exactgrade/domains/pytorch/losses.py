"""losses (pt-034..pt-039): MSE, cross-entropy (per sample, mean, soft targets, class weights,
ignore_index, label smoothing), BCE and BCE-with-logits, L1 / smooth L1 / Huber, KL divergence.

The independent checks write each loss from its formula: Fractions for the polynomial losses,
mpmath for the ones with log and exp.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, Inputs, f32, pytorch_family, tensor
from exactgrade.domains.pytorch.exact import (
    ExactTensor,
    hp,
    log_softmax,
    mean,
    sigmoid,
    softmax,
    to_fraction,
    values,
)
from exactgrade.domains.pytorch.levels import clear_winner, leveled
from exactgrade.domains.pytorch.sampling import distribution, dyadic_list, dyadic_tensor, int_tensor
from exactgrade.family import Branch, Draw, Reject


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


# pt-035 -------------------------------------------------------------------------------------------
def cross_entropy_losses(logits, target, soft_target):
    import torch.nn.functional as F

    return {"rows": [{
        "per_sample": F.cross_entropy(logits, target, reduction="none"),
        "mean": F.cross_entropy(logits, target),
        "soft_mean": F.cross_entropy(logits, soft_target),
    }]}


def _cross_entropy_losses(logits, target, soft_target):
    log_probs = [log_softmax(row) for row in values(logits)]
    per_sample = [-lp[t] for lp, t in zip(log_probs, values(target), strict=True)]
    soft = [-mpmath.fsum(hp(q) * x for q, x in zip(qs, lp, strict=True))
            for qs, lp in zip(values(soft_target), log_probs, strict=True)]
    return [{
        "per_sample": ExactTensor.of("float32", per_sample),
        "mean": ExactTensor.of("float32", mpmath.fsum(per_sample) / len(per_sample)),
        "soft_mean": ExactTensor.of("float32", mpmath.fsum(soft) / len(soft)),
    }]


# pt-036 -------------------------------------------------------------------------------------------
def cross_entropy_options(logits, target, class_weight):
    import torch.nn.functional as F

    return {"rows": [{
        "ignoring": F.cross_entropy(logits, target),
        "weighted": F.cross_entropy(logits, target, weight=class_weight),
        "smoothed": F.cross_entropy(logits, target, label_smoothing=0.1),
    }]}


def _cross_entropy_options(logits, target, class_weight):
    kept = [(log_softmax(row), t) for row, t in zip(values(logits), values(target), strict=True) if t != -100]
    weights = values(class_weight)
    nll = [-lp[t] for lp, t in kept]
    eps = hp(0.1)  # the float label_smoothing, exactly
    smoothed = [(1 - eps) * -lp[t] + eps * mpmath.fsum(-x for x in lp) / len(lp) for lp, t in kept]
    # the weighted mean divides by the summed weights of the kept targets, not by their count
    weighted_total = mpmath.fsum(hp(weights[t]) * n for (_, t), n in zip(kept, nll, strict=True))
    return [{
        "ignoring": ExactTensor.of("float32", mpmath.fsum(nll) / len(nll)),
        "weighted": ExactTensor.of("float32", weighted_total / hp(sum(weights[t] for _, t in kept))),
        "smoothed": ExactTensor.of("float32", mpmath.fsum(smoothed) / len(smoothed)),
    }]


# pt-037 -------------------------------------------------------------------------------------------
def binary_cross_entropy_losses(probs, logits, target, pos_weight):
    import torch.nn.functional as F

    return {"rows": [{
        "bce": F.binary_cross_entropy(probs, target),
        "with_logits": F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos_weight),
        "with_logits_per_element": F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos_weight,
                                                                       reduction="none"),
    }]}


def _binary_cross_entropy_losses(probs, logits, target, pos_weight):
    weights = values(pos_weight)
    bce = [-(hp(t) * mpmath.log(hp(p)) + (1 - hp(t)) * mpmath.log(1 - hp(p)))
           for rp, rt in zip(values(probs), values(target), strict=True) for p, t in zip(rp, rt, strict=True)]
    per_element = [[-(hp(w) * hp(t) * mpmath.log(sigmoid(z)) + (1 - hp(t)) * mpmath.log(1 - sigmoid(z)))
                    for z, t, w in zip(rz, rt, weights, strict=True)]
                   for rz, rt in zip(values(logits), values(target), strict=True)]
    flat = [e for row in per_element for e in row]
    return [{
        "bce": ExactTensor.of("float32", mpmath.fsum(bce) / len(bce)),
        "with_logits": ExactTensor.of("float32", mpmath.fsum(flat) / len(flat)),
        "with_logits_per_element": ExactTensor.of("float32", per_element),
    }]


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


# pt-039 -------------------------------------------------------------------------------------------
def kl_divergences(logits, target):
    import torch
    import torch.nn.functional as F

    log_q = torch.log_softmax(logits, dim=1)
    return {"rows": [{
        "batchmean": F.kl_div(log_q, target, reduction="batchmean"),
        "sum": F.kl_div(log_q, target, reduction="sum"),
        "pointwise": F.kl_div(log_q, target, reduction="none"),
    }]}


def _kl_divergences(logits, target):
    rows = values(target)
    log_q = [log_softmax(r) for r in values(logits)]
    terms = [[hp(p) * (mpmath.log(hp(p)) - lq) for p, lq in zip(row, lq_row, strict=True)]
             for row, lq_row in zip(rows, log_q, strict=True)]
    total = mpmath.fsum(t for row in terms for t in row)
    return [{
        "batchmean": ExactTensor.of("float32", total / len(rows)),
        "sum": ExactTensor.of("float32", total),
        "pointwise": ExactTensor.of("float32", terms),
    }]


# ------------------------------------------------------------------------------------ families
# Level 1 is about the canonical size; each level adds samples and classes.


def _dims(x):
    return tuple(x.shape)


def _sample_mse(draw: Draw, level: int) -> dict:
    shape = (draw.integer(2, 1 + level), draw.integer(3, 2 + level))
    return {"pred": dyadic_tensor(draw, shape, -3, 3, 2), "target": dyadic_tensor(draw, shape, -3, 3, 2)}


MEAN_SQUARED_ERROR = pytorch_family(
    "mean_squared_error",
    "losses",
    reference=mean_squared_error,
    independent=_mean_squared_error,
    question="""Give the mean squared error between `pred` and `target` three ways: `mean` (torch's
        default reduction), `sum`, and `per_element` (no reduction).""",
    answer=lambda i: ({"mean": f32(), "sum": f32(), "per_element": f32(*_dims(i["pred"]))},),
    sample=_sample_mse,
    levels="pred and target of shape (2..1+level, 3..2+level) on the 1/4 grid",
)


def _sample_cross_entropy(draw: Draw, level: int) -> dict:
    samples, classes = draw.integer(3, 2 + level), draw.integer(3, 3 + level)
    return {
        "logits": dyadic_tensor(draw, (samples, classes), -2, 3, 2),
        "target": int_tensor(draw, (samples,), 0, classes - 1),
        "soft_target": tensor(
            "float32", [distribution(draw, classes, 3 + level // 2) for _ in range(samples)]
        ),
    }


CROSS_ENTROPY_LOSSES = pytorch_family(
    "cross_entropy_losses",
    "losses",
    reference=cross_entropy_losses,
    independent=_cross_entropy_losses,
    question=lambda i: (
        f"""`logits` holds unnormalised scores for {i["logits"].shape[0]} samples over
        {i["logits"].shape[1]} classes. Give the cross-entropy loss with the class indices `target`:
        `per_sample` (no reduction) and `mean` (torch's default); and `soft_mean`, the mean cross-entropy
        against the class-probability targets `soft_target`."""
    ),
    answer=lambda i: ({"per_sample": f32(i["logits"].shape[0]), "mean": f32(), "soft_mean": f32()},),
    sample=_sample_cross_entropy,
    levels="3..2+level samples over 3..3+level classes, soft targets on the 1/2**(3+level//2) grid",
)


def _sample_cross_entropy_options(draw: Draw, level: int) -> dict:
    samples, classes = draw.integer(4, 3 + level), draw.integer(3, 2 + level)
    target = [draw.integer(0, classes - 1) for _ in range(samples)]
    for position in draw.sample(range(samples), draw.integer(1, max(1, samples // 3))):
        target[position] = -100
    return {
        "logits": dyadic_tensor(draw, (samples, classes), -1, 3, 2),
        "target": tensor("int64", target),
        "class_weight": dyadic_tensor(draw, (classes,), 0.25, 2, 2),
    }


def _weights_matter(inputs: Inputs) -> str | None:
    kept = [t for t in values(inputs["target"]) if t != -100]
    weights = values(inputs["class_weight"])
    if len({weights[t] for t in kept}) < 2:
        return "every kept target has the same class weight: the weighted mean equals the plain one"
    return None


CROSS_ENTROPY_OPTIONS = pytorch_family(
    "cross_entropy_options",
    "losses",
    reference=cross_entropy_options,
    independent=_cross_entropy_options,
    question=lambda i: (
        f"""`logits` holds scores for {i["logits"].shape[0]} samples over
        {i["logits"].shape[1]} classes; `target` gives the class of each sample, and -100 marks a sample
        to ignore (torch's default ignore_index). With torch's default mean reduction, give `ignoring`,
        the plain cross-entropy; `weighted`, the cross-entropy with class weights `class_weight`; and
        `smoothed`, the cross-entropy with label_smoothing=0.1 (no weights)."""
    ),
    answer=({"ignoring": f32(), "weighted": f32(), "smoothed": f32()},),
    sample=_sample_cross_entropy_options,
    levels="4..3+level samples (up to a third ignored) over 3..2+level classes; instances whose kept "
    "targets share one weight rejected",
    refuse=_weights_matter,
)


def _sample_bce(draw: Draw, level: int) -> dict:
    shape = (draw.integer(2, 1 + level), draw.integer(3, 2 + level))
    target = [
        [float(draw.integer(1, 3)) / 4 if j == 2 else float(draw.integer(0, 1)) for j in range(shape[1])]
        for _ in range(shape[0])
    ]
    probs = [[draw.integer(1, 15) / 16 for _ in range(shape[1])] for _ in range(shape[0])]
    return {
        "probs": tensor("float32", probs),
        "logits": dyadic_tensor(draw, shape, -3, 3, 2),
        "target": tensor("float32", target),
        "pos_weight": dyadic_tensor(draw, (shape[1],), 0.5, 3, 1),
    }


BINARY_CROSS_ENTROPY_LOSSES = pytorch_family(
    "binary_cross_entropy_losses",
    "losses",
    reference=binary_cross_entropy_losses,
    independent=_binary_cross_entropy_losses,
    question="""Give `bce`, the binary cross-entropy (mean) of the probabilities `probs` against
        `target` (the third column holds a soft target); `with_logits`, the binary cross-entropy with
        logits (mean) of `logits` against `target` with positive-class weights `pos_weight` (one per
        column); and `with_logits_per_element`, the same without reduction.""",
    answer=lambda i: (
        {"bce": f32(), "with_logits": f32(), "with_logits_per_element": f32(*_dims(i["logits"]))},
    ),
    sample=_sample_bce,
    levels="(2..1+level, 3..2+level) probabilities k/16 and logits on the 1/4 grid; hard 0/1 targets "
    "except the third column, soft (k/4)",
)


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


ROBUST_REGRESSION_LOSSES = pytorch_family(
    "robust_regression_losses",
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
            "smooth_l1_beta_half": f32(*_dims(i["pred"])),
            "huber_delta_half": f32(*_dims(i["pred"])),
        },
    ),
    sample=_sample_robust,
    levels="6+2*(level-1) pairs on the 1/8 grid, with errors in all three branches of the losses",
    refuse=_every_branch,
)


def _sample_kl(draw: Draw, level: int) -> dict:
    rows, classes = draw.integer(2, 1 + level), draw.integer(3, 2 + level)
    return {
        "logits": dyadic_tensor(draw, (rows, classes), -2, 2, 2),
        "target": tensor("float32", [distribution(draw, classes, 3 + level // 2) for _ in range(rows)]),
    }


KL_DIVERGENCES = pytorch_family(
    "kl_divergences",
    "losses",
    reference=kl_divergences,
    independent=_kl_divergences,
    question="""Let log_q = log_softmax(logits, dim=1) (the model's log-probabilities) and p = `target`
        (the true distributions, one per row). Give torch.nn.functional.kl_div(log_q, p), the divergence
        KL(p || q), with reduction 'batchmean' (`batchmean`), 'sum' (`sum`) and 'none' (`pointwise`, the
        elementwise terms).""",
    answer=lambda i: ({"batchmean": f32(), "sum": f32(), "pointwise": f32(*_dims(i["logits"]))},),
    sample=_sample_kl,
    levels="(2..1+level, 3..2+level) logits on the 1/4 grid, positive target distributions on the "
    "1/2**(3+level//2) grid",
)

# ------------------------------------------------------------------------------------ levels 2-5
# Level 1 names the loss and its options. Level 2 describes the loss mathematically; level 3 asks a
# quantity built on it (a gradient, a symmetric divergence, a step); level 4 inverts it (the scale, logit
# or constant that minimises it or reaches a value); level 5 asks a loss or training quantity described
# but not named (a constrained calibration, distillation, focal loss, a quantile fit, reverse KL).


def _loss(name, **kwargs):
    return pytorch_family(name, "losses", levels="", **kwargs)


def _flat(nested):
    return [e for item in nested for e in _flat(item)] if isinstance(nested, list) else [nested]


# mean_squared_error ------------------------------------------------------------------------------
_MSE_MATH = """Let d = pred - target elementwise and n the number of elements."""


def mse_step(pred, target):
    import torch

    p = pred.clone().requires_grad_(True)
    ((p - target) ** 2).mean().backward()
    with torch.no_grad():
        after = ((p - 0.25 * p.grad - target) ** 2).mean()
    return {"rows": [{"grad": p.grad, "after": after}]}


def _mse_step(pred, target):
    d = [p - t for p, t in zip(_flat(values(pred)), _flat(values(target)), strict=True)]
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


def mse_scale(pred, target):

    p, t = pred.double().flatten(), target.double().flatten()
    a = (p @ t) / (p @ p)
    return {"rows": [{"scale": a.to(pred.dtype), "minimum": ((a * p - t) ** 2).mean().to(pred.dtype)}]}


def _mse_scale(pred, target):
    p, t = _flat(values(pred)), _flat(values(target))
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
    p, t = _flat(values(pred)), _flat(values(target))
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
    p = _flat(values(inputs["pred"]))
    if len(set(p)) < 2:
        return "pred is constant: the scale is not determined"
    return None


def _sample_mse_scale(draw, level):
    inputs = _sample_mse(draw, 3)
    if all(e == 0 for e in _flat(values(inputs["pred"]))):
        raise Reject("pred is zero: the scale is not determined")
    return inputs


MEAN_SQUARED_ERROR = leveled(
    MEAN_SQUARED_ERROR,
    {
        2: _loss(
            "mean_squared_error",
            reference=mean_squared_error,
            independent=_mean_squared_error,
            sample=_sample_mse,
            question=f"""{_MSE_MATH} Give `per_element`, the tensor of d^2; `sum`, the sum of its
            elements; and
                 `mean`, that sum divided by n (0-d tensors for the last two).""",
            answer=lambda i: ({"mean": f32(), "sum": f32(), "per_element": f32(*_dims(i["pred"]))},),
        ),
        3: _loss(
            "mean_squared_error",
            reference=mse_step,
            independent=_mse_step,
            sample=_sample_mse,
            question=f"""{_MSE_MATH} Let L(pred) = (sum of d^2) / n. Give `grad`, the gradient of L
            with respect
                 to `pred`, and `after`, L at pred - 0.25 * grad (one gradient step on the predictions; a 0-d
                 tensor).""",
            answer=lambda i: ({"grad": f32(*_dims(i["pred"])), "after": f32()},),
        ),
        4: _loss(
            "mean_squared_error",
            reference=mse_scale,
            independent=_mse_scale,
            sample=_sample_mse_scale,
            question="""Among all real a, find the one that minimises the mean over all elements of
                 (a * pred - target)^2. Give `scale`, that a, and `minimum`, the mean at that a
                 (0-d tensors).""",
            answer=({"scale": f32(), "minimum": f32()},),
        ),
        5: _loss(
            "mean_squared_error",
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
        ),
    },
    levels="L1 the three reductions named; L2 described; L3 the gradient with respect to the predictions and "
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


# cross_entropy_losses ----------------------------------------------------------------------------
_CE_MATH = """Row i of `logits` gives the class probabilities p[i, c] = exp(logits[i, c]) / (sum over k of
    exp(logits[i, k]))."""


def ce_logit_gradient(logits, target, soft_target):
    import torch.nn.functional as F

    z = logits.clone().requires_grad_(True)
    F.cross_entropy(z, target).backward()
    return {"rows": [{"grad_logits": z.grad}]}


def _ce_logit_gradient(logits, target, soft_target):
    rows = values(logits)
    return [
        {
            "grad_logits": ExactTensor.of(
                "float32",
                [
                    [(q - (1 if c == t else 0)) / len(rows) for c, q in enumerate(softmax(row))]
                    for row, t in zip(rows, values(target), strict=True)
                ],
            )
        }
    ]


def ce_logit_shift(logits, target, goal):
    import torch

    z = logits.double()
    others = torch.logsumexp(z.scatter(1, target[:, None], float("-inf")), dim=1)
    shift = (
        others
        - torch.log(torch.expm1(torch.tensor(goal, dtype=torch.float64)))
        - z.gather(1, target[:, None])[:, 0]
    )
    return {"rows": [{"shift": shift.to(logits.dtype)}]}


def _ce_logit_shift(logits, target, goal):
    out = []
    for row, t in zip(values(logits), values(target), strict=True):
        others = mpmath.fsum(mpmath.exp(hp(e)) for c, e in enumerate(row) if c != t)
        out.append(mpmath.log(others) - mpmath.log(mpmath.expm1(hp(goal))) - hp(row[t]))
    return [{"shift": ExactTensor.of("float32", out)}]


def _sample_ce_shift(draw, level):
    inputs = _sample_cross_entropy(draw, 3)
    return {"logits": inputs["logits"], "target": inputs["target"], "goal": draw.choice((0.125, 0.25, 0.5))}


def _shift_signs(task):
    signs = {e > 0 for e in task.expected["rows"][0]["shift"].data}
    if len(signs) < 2:
        return "every sample's shift has the same sign: a sign shortcut passes"
    return None


def distillation(logits, target, teacher):
    import torch.nn.functional as F

    z = logits.clone().requires_grad_(True)
    soft = F.kl_div(F.log_softmax(z / 2, dim=1), F.softmax(teacher / 2, dim=1), reduction="batchmean")
    loss = 0.5 * 4 * soft + 0.5 * F.cross_entropy(z, target)
    loss.backward()
    return {"rows": [{"loss": loss.detach(), "grad_logits": z.grad}]}


def _distillation(logits, target, teacher):
    rows, n = values(logits), len(values(logits))
    loss, grad = mpmath.mpf(0), []
    for z, t, teach in zip(rows, values(target), values(teacher), strict=True):
        p = softmax([hp(e) / 2 for e in teach])
        q, s = softmax([hp(e) / 2 for e in z]), softmax(z)
        log_q = log_softmax([hp(e) / 2 for e in z])
        loss += 2 * mpmath.fsum(a * (mpmath.log(a) - b) for a, b in zip(p, log_q, strict=True))
        loss += -log_softmax(z)[t] / 2
        # d/dz of T^2/2 * KL(P || Q) is T/2 * (Q - P); of H/2 it is (s - onehot)/2
        grad.append(
            [
                (2 * (qc - pc) + sc - (1 if c == t else 0)) / (2 * n)
                for c, (qc, pc, sc) in enumerate(zip(q, p, s, strict=True))
            ]
        )
    return [{"loss": ExactTensor.of("float32", loss / n), "grad_logits": ExactTensor.of("float32", grad)}]


def _sample_distillation(draw, level):
    inputs = _sample_cross_entropy(draw, 3)
    return {
        "logits": inputs["logits"],
        "target": inputs["target"],
        "teacher": dyadic_tensor(draw, _dims(inputs["logits"]), -2, 3, 2),
    }


CROSS_ENTROPY_LOSSES = leveled(
    CROSS_ENTROPY_LOSSES,
    {
        2: _loss(
            "cross_entropy_losses",
            reference=cross_entropy_losses,
            independent=_cross_entropy_losses,
            sample=_sample_cross_entropy,
            question=f"""{_CE_MATH} Give `per_sample`, -ln p[i, target[i]] for each row i; `mean`, the mean of
                 those; and `soft_mean`, the mean over rows of -(sum over c of soft_target[i, c] *
                 ln p[i, c]).""",
            answer=lambda i: ({"per_sample": f32(i["logits"].shape[0]), "mean": f32(), "soft_mean": f32()},),
        ),
        3: _loss(
            "cross_entropy_losses",
            reference=ce_logit_gradient,
            independent=_ce_logit_gradient,
            sample=_sample_cross_entropy,
            question=f"""{_CE_MATH} Let L be the mean over rows i of -ln p[i, target[i]]. Give `grad_logits`,
                 the gradient of L with respect to `logits`. (`soft_target` is not used.)""",
            answer=lambda i: ({"grad_logits": f32(*_dims(i["logits"]))},),
        ),
        4: _loss(
            "cross_entropy_losses",
            reference=ce_logit_shift,
            independent=_ce_logit_shift,
            sample=_sample_ce_shift,
            reject=_shift_signs,
            question=f"""{_CE_MATH} For each row i, give in `shift` the amount s (positive or negative) to add
                 to logits[i, target[i]] alone so that -ln p[i, target[i]] becomes exactly `goal`.""",
            answer=lambda i: ({"shift": f32(i["logits"].shape[0])},),
        ),
        5: _loss(
            "cross_entropy_losses",
            reference=distillation,
            independent=_distillation,
            sample=_sample_distillation,
            question="""A student with logits z = `logits` learns from hard labels `target` and
            from a teacher's
                 logits `teacher`, at temperature T = 2 with weight 0.5: L = 0.5 * T^2 * D + 0.5 *
                 H, where H is
                 the mean over rows of -ln softmax(z_i)[target[i]], D is the mean over rows of the sum over
                 classes c of P_ic * (ln P_ic - ln Q_ic), P_i = softmax(teacher_i / T), Q_i =
                 softmax(z_i / T), and
                 softmax(v)_c = exp(v_c) / sum_k exp(v_k). Give `loss`, L, and `grad_logits`, its
                 gradient with
                 respect to `logits`.""",
            answer=lambda i: ({"loss": f32(), "grad_logits": f32(*_dims(i["logits"]))},),
        ),
    },
    levels="L1 cross-entropy and its reductions named; L2 described; L3 the gradient with respect to the "
    "logits; L4 the target-logit shift that brings each sample's loss to a goal (either sign); L5 a "
    "temperature-scaled distillation loss and its gradient (described, not named)",
)


# cross_entropy_options ---------------------------------------------------------------------------
_OPTIONS_MATH = """Row i of `logits` gives log-probabilities l[i, c] = logits[i, c] - ln(sum over k of
    exp(logits[i, k])); `target` gives each row's class, and a row whose target is -100 is left out of every
    sum below. Let n be the number of kept rows, C the number of classes."""

_COMBINED_MATH = """The weighted, smoothed loss L = (1 - 0.1) * A + 0.1 * B / C, where A = (sum
over kept rows of
    w[target[i]] * -l[i, target[i]]) / W and B = (sum over kept rows and all classes c of w[c] *
    -l[i, c]) / W,
    with w = `class_weight` and W = the sum over kept rows of w[target[i]]."""


def combined_cross_entropy(logits, target, class_weight):
    import torch.nn.functional as F

    return {"rows": [{"loss": F.cross_entropy(logits, target, weight=class_weight, label_smoothing=0.1)}]}


def _combined_terms(logits, target, class_weight):
    w = [hp(e) for e in values(class_weight)]
    kept = [(log_softmax(row), t) for row, t in zip(values(logits), values(target), strict=True) if t != -100]
    total = mpmath.fsum(w[t] for _, t in kept)
    a = mpmath.fsum(w[t] * -lp[t] for lp, t in kept) / total
    b = mpmath.fsum(w[c] * -x for lp, _ in kept for c, x in enumerate(lp)) / total
    return a, b, len(w)


def _combined_cross_entropy(logits, target, class_weight):
    a, b, classes = _combined_terms(logits, target, class_weight)
    eps = hp(0.1)
    return [{"loss": ExactTensor.of("float32", (1 - eps) * a + eps * b / classes)}]


def balancing_weight(logits, target, class_weight, cls):
    import torch
    import torch.nn.functional as F

    z, t = logits.double(), target
    plain = F.cross_entropy(z, t)
    nll = F.cross_entropy(z, t, reduction="none")
    w = class_weight.double()
    kept = t != -100
    safe = torch.where(kept, t, torch.zeros_like(t))
    wt = torch.where(kept, w[safe], torch.zeros_like(nll))
    mine = kept & (t == cls)
    other_num = (wt * nll * (~mine)).sum()
    other_den = (wt * (~mine)).sum()
    own_num, own_den = (nll * mine).sum(), mine.sum()
    value = (plain * other_den - other_num) / (own_num - plain * own_den)
    return {"rows": [{"weight": value.to(logits.dtype)}]}


def _balancing_parts(logits, target, class_weight, cls):
    w = [hp(e) for e in values(class_weight)]
    kept = [
        (-log_softmax(row)[t], t) for row, t in zip(values(logits), values(target), strict=True) if t != -100
    ]
    plain = mpmath.fsum(n for n, _ in kept) / len(kept)
    other_num = mpmath.fsum(w[t] * n for n, t in kept if t != cls)
    other_den = mpmath.fsum(w[t] for _, t in kept if t != cls)
    own_num, own_den = mpmath.fsum(n for n, t in kept if t == cls), sum(1 for _, t in kept if t == cls)
    return plain, other_num, other_den, own_num, own_den


def _balancing_weight(logits, target, class_weight, cls):
    plain, other_num, other_den, own_num, own_den = _balancing_parts(logits, target, class_weight, cls)
    return [
        {"weight": ExactTensor.of("float32", (plain * other_den - other_num) / (own_num - plain * own_den))}
    ]


def _sample_balancing(draw, level):
    inputs = _sample_cross_entropy_options(draw, 3)
    kept = sorted({t for t in values(inputs["target"]) if t != -100})
    return {**inputs, "cls": draw.choice(kept)}


def _balancing_defined(inputs):
    plain, other_num, other_den, own_num, own_den = _balancing_parts(**inputs)
    if own_den == len([t for t in values(inputs["target"]) if t != -100]):
        return "every kept row has the chosen class: any weight gives the plain loss"
    denominator = own_num - plain * own_den
    if abs(denominator) < mpmath.mpf("0.05"):
        return "the chosen class's mean loss is close to the plain mean: the weight is ill-conditioned"
    value = (plain * other_den - other_num) / denominator
    if not mpmath.mpf("0.05") < value < 20:
        return "no weight between 0.05 and 20 balances the loss"
    return None


# L5: what the weighted, smoothed loss is minimised by. Each kept row's optimum is a distribution proportional
# to that row's coefficients of -l (the smoothing part weighted by class), not the smoothed label: the named
# misreading, which the rules require to change the answer. Reference: the optimum in torch, the loss of its
# logits by torch's own cross_entropy; independent: mpmath, the floor as a weighted entropy sum.
def smoothed_optimum(logits, target, class_weight):
    import torch
    import torch.nn.functional as F

    eps, w = 0.1, class_weight.double()
    kept = target != -100
    t = target[kept]
    coefficients = eps / w.shape[0] * w.expand(t.shape[0], -1).clone()
    coefficients[torch.arange(t.shape[0]), t] += (1 - eps) * w[t]
    optimum = coefficients / coefficients.sum(dim=1, keepdim=True)
    z = logits.double()
    best = torch.zeros_like(z)
    best[kept] = optimum.log()
    floor = F.cross_entropy(best, target, weight=w, label_smoothing=eps)
    now = F.cross_entropy(z, target, weight=w, label_smoothing=eps)
    return {"rows": [{"optimal": optimum.float(), "floor": floor.float(), "excess": (now - floor).float()}]}


def _smoothed_rows(target, class_weight, mistake=None):
    """Each kept row's optimal distribution (``mistake`` 'smoothed_label': the smoothed one-hot label)."""
    w = [hp(e) for e in values(class_weight)]
    eps, classes, rows = hp(0.1), len(w), []
    for t in values(target):
        if t == -100:
            continue
        if mistake == "smoothed_label":
            rows.append([(1 - eps) * (c == t) + eps / classes for c in range(classes)])
            continue
        a = [(1 - eps) * w[t] * (c == t) + eps / classes * w[c] for c in range(classes)]
        rows.append([e / mpmath.fsum(a) for e in a])
    return rows


def _smoothed_optimum(logits, target, class_weight):
    w = [hp(e) for e in values(class_weight)]
    eps, classes = hp(0.1), len(w)
    kept = [t for t in values(target) if t != -100]
    total = mpmath.fsum(w[t] for t in kept)
    floor = mpmath.fsum(
        -((1 - eps) * w[t] * (c == t) + eps / classes * w[c]) * mpmath.log(p)
        for t, row in zip(kept, _smoothed_rows(target, class_weight), strict=True) for c, p in enumerate(row)
    ) / total
    a, b, _ = _combined_terms(logits, target, class_weight)
    now = (1 - eps) * a + eps * b / classes
    return [{"optimal": ExactTensor.of("float32", _smoothed_rows(target, class_weight)),
             "floor": ExactTensor.of("float32", floor), "excess": ExactTensor.of("float32", now - floor)}]


def _optimum_rules(inputs):
    problem = _weights_matter(inputs)
    if problem is not None:
        return problem
    right = _smoothed_rows(inputs["target"], inputs["class_weight"])
    wrong = _smoothed_rows(inputs["target"], inputs["class_weight"], mistake="smoothed_label")
    if not any(abs(x - y) > mpmath.mpf("1e-3") for r, q in zip(right, wrong, strict=True)
               for x, y in zip(r, q, strict=True)):
        return "the smoothed label is within 1e-3 of the optimum: the misreading would pass"
    return None


_OPTIMUM_QUESTION = """Consider L as a function of all the logits. Give `optimal`: for each kept row, in
    order (a row of the answer tensor each, one column per class), the probabilities exp(l[i, c]) of the
    logits that minimise L when only that row's logits may change; `floor`, the smallest value of L over all
    logits (it is attained); and `excess`, L at `logits` minus `floor` (both 0-d float32)."""


CROSS_ENTROPY_OPTIONS = leveled(
    CROSS_ENTROPY_OPTIONS,
    {
        2: _loss(
            "cross_entropy_options",
            reference=cross_entropy_options,
            independent=_cross_entropy_options,
            sample=_sample_cross_entropy_options,
            refuse=_weights_matter,
            question=f"""{_OPTIONS_MATH} Give `ignoring`, the mean over kept rows of -l[i, target[i]];
                 `weighted`, (sum over kept rows of w[target[i]] * -l[i, target[i]]) divided by (sum over kept
                 rows of w[target[i]]), with w = `class_weight`; and `smoothed`, the mean over kept rows of
                 0.9 * -l[i, target[i]] + 0.1 * (the mean over the C classes c of -l[i, c]) (no weights).""",
            answer=({"ignoring": f32(), "weighted": f32(), "smoothed": f32()},),
        ),
        3: _loss(
            "cross_entropy_options",
            reference=combined_cross_entropy,
            independent=_combined_cross_entropy,
            sample=_sample_cross_entropy_options,
            refuse=_weights_matter,
            question=f"""{_OPTIONS_MATH} {_COMBINED_MATH} Give `loss`, L.""",
            answer=({"loss": f32()},),
        ),
        4: _loss(
            "cross_entropy_options",
            reference=balancing_weight,
            independent=_balancing_weight,
            sample=_sample_balancing,
            refuse=_balancing_defined,
            question=f"""{_OPTIONS_MATH} With class weights w, the weighted loss is (sum over kept rows of
                 w[target[i]] * -l[i, target[i]]) divided by (sum over kept rows of w[target[i]]). Keep every
                 weight of `class_weight` except that of class `cls`, and give `weight`, the value of w[cls]
                 that makes the weighted loss equal to the plain mean over kept rows of -l[i, target[i]].""",
            answer=({"weight": f32()},),
        ),
        5: _loss(
            "cross_entropy_options",
            reference=smoothed_optimum,
            independent=_smoothed_optimum,
            sample=_sample_cross_entropy_options,
            refuse=_optimum_rules,
            question=f"""{_OPTIONS_MATH} {_COMBINED_MATH} {_OPTIMUM_QUESTION}""",
            answer=lambda i: ({"optimal": f32(sum(t != -100 for t in i["target"].data), i["logits"].shape[1]),
                               "floor": f32(), "excess": f32()},),
        ),
    },
    levels="L1 ignore_index, weight and label_smoothing named; L2 described; L3 class weights and smoothing "
    "together (the smoothing term weighted too); L4 the one class weight that balances the weighted loss to "
    "the plain one; L5 what minimises the weighted, smoothed loss: each kept row's optimal distribution "
    "(not the smoothed label), the loss floor and the current excess over it",
)


# binary_cross_entropy_losses ---------------------------------------------------------------------
_BCE_MATH = """For a probability q and a target t in [0, 1], the binary cross-entropy is -(t ln q + (1 - t)
    ln(1 - q)); with a positive-class weight w, -(w t ln q + (1 - t) ln(1 - q)). A logit z gives q = 1 / (1 +
    exp(-z)). `pos_weight[j]` is the weight of column j."""


def bce_logit_gradient(probs, logits, target, pos_weight):
    import torch.nn.functional as F

    z = logits.clone().requires_grad_(True)
    F.binary_cross_entropy_with_logits(z, target, pos_weight=pos_weight).backward()
    return {"rows": [{"grad_logits": z.grad}]}


def _bce_logit_gradient(probs, logits, target, pos_weight):
    rows = values(logits)
    n = len(rows) * len(rows[0])
    # d/dz of -(w t ln s + (1 - t) ln(1 - s)) is s (1 + (w - 1) t) - w t
    return [
        {
            "grad_logits": ExactTensor.of(
                "float32",
                [
                    [
                        (sigmoid(z) * (1 + (hp(w) - 1) * hp(t)) - hp(w) * hp(t)) / n
                        for z, t, w in zip(rz, rt, values(pos_weight), strict=True)
                    ]
                    for rz, rt in zip(rows, values(target), strict=True)
                ],
            )
        }
    ]


def best_logits(target, pos_weight):
    import torch

    t = target.double()
    return {"rows": [{"logits": torch.log(pos_weight.double() * t / (1 - t)).to(target.dtype)}]}


def _best_logits(target, pos_weight):
    return [
        {
            "logits": ExactTensor.of(
                "float32",
                [
                    mpmath.log(hp(w) * hp(t) / (1 - hp(t)))
                    for t, w in zip(values(target), values(pos_weight), strict=True)
                ],
            )
        }
    ]


def _sample_best_logits(draw, level):
    count = draw.integer(4, 7)
    return {
        "target": tensor("float32", [draw.integer(1, 15) / 16 for _ in range(count)]),
        "pos_weight": dyadic_tensor(draw, (count,), 0.5, 3, 1),
    }


def _logit_signs(task):
    if len({e > 0 for e in task.expected["rows"][0]["logits"].data}) < 2:
        return "every best logit has the same sign: a sign shortcut passes"
    return None


# L5: per-column recalibration under interacting options. Each column's bias shift minimises the column's
# weighted, label-smoothed binary cross-entropy over its non-ignored elements (a convex 1-D problem with no
# closed form); the loss is then the mean over all non-ignored elements (columns count unequally). The
# reference bisects torch's autograd gradient in float64; the independent route solves the hand-derived
# stationarity condition with mpmath.findroot at 50 digits.
_IGNORE = -1.0


def recalibrated_bce(logits, target, pos_weight, smoothing):
    import torch

    z, t, w = logits.double(), target.double(), pos_weight.double()
    valid = t != -1
    soft = torch.where(valid, t * (1 - smoothing) + smoothing / 2, torch.zeros_like(t))

    count = valid.sum(dim=0)

    def column_losses(b):  # one mean per column, over its kept elements
        q = torch.sigmoid(z + b)
        terms = -(w * soft * torch.log(q) + (1 - soft) * torch.log(1 - q))
        return torch.where(valid, terms, torch.zeros_like(terms)).sum(dim=0) / count

    low, high = torch.full((z.shape[1],), -40.0, dtype=torch.float64), torch.full((z.shape[1],), 40.0,
                                                                                   dtype=torch.float64)
    for _ in range(80):  # bisection on the sign of each column's derivative (the loss is convex in b)
        b = ((low + high) / 2).requires_grad_(True)
        column_losses(b).sum().backward()
        rising = b.grad > 0
        low, high = torch.where(rising, low, b.detach()), torch.where(rising, b.detach(), high)
    shifts = (low + high) / 2
    shift = shifts
    q = torch.sigmoid(z + shift)
    terms = -(w * soft * torch.log(q) + (1 - soft) * torch.log(1 - q))
    return {"rows": [{"shift": shift.float(), "loss": terms[valid].mean().float()}]}


def _recalibration(logits, target, pos_weight, smoothing, mistake=None, shifts=None):
    """(shifts, loss) in mpmath. ``mistake``: 'mean_of_columns' averages the column means;
    'weight_on_hard' puts the positive weight on the unsmoothed target. ``shifts``: reuse these."""
    rows, ts, ws, eps = values(logits), values(target), [hp(w) for w in values(pos_weight)], hp(smoothing)
    columns = range(len(ws))
    # per kept element of each column: (z, weight of ln q, weight of ln(1 - q))
    kept = {c: [] for c in columns}
    for r, t in zip(rows, ts, strict=True):
        for c in columns:
            if t[c] != _IGNORE:
                hard, soft = hp(t[c]), hp(t[c]) * (1 - eps) + eps / 2
                kept[c].append((hp(r[c]), ws[c] * (hard if mistake == "weight_on_hard" else soft), 1 - soft))

    def stationarity(c):  # d/db of the column's sum: sum of q (a + b) - a, q = sigmoid(z + shift)
        return lambda shift: mpmath.fsum((a + b) / (1 + mpmath.exp(-(z + shift))) - a for z, a, b in kept[c])

    if shifts is None:
        shifts = [mpmath.findroot(stationarity(c), (hp(-40), hp(40)), solver="illinois") for c in columns]

    def element(z, a, b):
        q = 1 / (1 + mpmath.exp(-z))
        return -(a * mpmath.log(q) + b * mpmath.log(1 - q))

    column_sums = [mpmath.fsum(element(z + shifts[c], a, b) for z, a, b in kept[c]) for c in columns]
    if mistake == "mean_of_columns":
        loss = mpmath.fsum(total / len(kept[c]) for c, total in enumerate(column_sums)) / len(ws)
    else:
        loss = mpmath.fsum(column_sums) / sum(len(kept[c]) for c in columns)
    return shifts, loss


def _recalibrated_bce(logits, target, pos_weight, smoothing):
    shifts, loss = _recalibration(logits, target, pos_weight, smoothing)
    return [{"shift": ExactTensor.of("float32", shifts), "loss": ExactTensor.of("float32", loss)}]


def _sample_recalibration(draw, level):
    rows, cols = 6, 3
    ignored = {c: set(draw.sample(range(rows), c)) for c in range(cols)}  # 0, 1 and 2 ignored: unequal counts
    order = draw.shuffled(range(cols))
    target = [[_IGNORE if i in ignored[order[c]] else float(draw.integer(0, 1)) for c in range(cols)]
              for i in range(rows)]
    return {
        "logits": dyadic_tensor(draw, (rows, cols), -3, 3, 2),
        "target": tensor("float32", target),
        "pos_weight": tensor("float32", [draw.choice((0.5, 1.5, 2.0, 3.0)) for _ in range(cols)]),
        "smoothing": draw.choice((0.1, 0.2, 0.25)),
    }


def _recalibration_rules(inputs):
    """Refuse a shift near 0 (the uncalibrated logits would pass) and instances where either named
    misreading lands within 1e-3 of the key."""
    args = {k: inputs[k] for k in ("logits", "target", "pos_weight", "smoothing")}
    shifts, loss = _recalibration(**args)
    if any(abs(b) < mpmath.mpf("0.05") for b in shifts):
        return "a column's shift is within 0.05 of 0: leaving the logits alone nearly passes"
    for mistake in ("mean_of_columns", "weight_on_hard"):
        wrong_shifts, wrong_loss = _recalibration(**args, mistake=mistake,
                                                  shifts=shifts if mistake == "mean_of_columns" else None)
        if abs(wrong_loss - loss) < mpmath.mpf("1e-3") * abs(loss) and all(
                abs(a - b) < mpmath.mpf("1e-3") for a, b in zip(shifts, wrong_shifts, strict=True)):
            return f"the misreading {mistake!r} lands within 1e-3 of the key: it would pass"
    return None


_RECALIBRATION_QUESTION = """A multi-label classifier gives the logits `logits` (rows are examples,
    columns are labels) for the hard targets `target` (0 or 1; an entry -1 marks an element that is
    ignored: it has no loss and is not counted anywhere). For a kept element of column c with logit z, the
    target t is first smoothed to t' = t * (1 - `smoothing`) + `smoothing` / 2, and its loss is -(w_c t' ln
    q + (1 - t') ln(1 - q)) with q = 1 / (1 + exp(-z)) and w_c = `pos_weight[c]`. The classifier is
    recalibrated by adding one real shift b_c to every logit of column c; each b_c is chosen to minimise the
    mean loss over the kept elements of its own column. Give `shift`, the three shifts b_c (float32, in
    column order), and `loss`, the mean loss over all kept elements of the whole matrix after the shifts
    (0-d float32)."""


BINARY_CROSS_ENTROPY_LOSSES = leveled(
    BINARY_CROSS_ENTROPY_LOSSES,
    {
        2: _loss(
            "binary_cross_entropy_losses",
            reference=binary_cross_entropy_losses,
            independent=_binary_cross_entropy_losses,
            sample=_sample_bce,
            question=f"""{_BCE_MATH} Give `bce`, the mean over all elements of the binary cross-entropy of the
                 probabilities `probs` against `target`; `with_logits_per_element`, the weighted binary
                 cross-entropy of q = 1 / (1 + exp(-logits)) against `target`, per element; and `with_logits`,
                 its mean.""",
            answer=lambda i: (
                {"bce": f32(), "with_logits": f32(), "with_logits_per_element": f32(*_dims(i["logits"]))},
            ),
        ),
        3: _loss(
            "binary_cross_entropy_losses",
            reference=bce_logit_gradient,
            independent=_bce_logit_gradient,
            sample=_sample_bce,
            question=f"""{_BCE_MATH} Let L be the mean over all elements of the weighted binary
            cross-entropy of
                 q = 1 / (1 + exp(-logits)) against `target`. Give `grad_logits`, the gradient of L
                 with respect
                 to `logits`. (`probs` is not used.)""",
            answer=lambda i: ({"grad_logits": f32(*_dims(i["logits"]))},),
        ),
        4: _loss(
            "binary_cross_entropy_losses",
            reference=best_logits,
            independent=_best_logits,
            sample=_sample_best_logits,
            reject=_logit_signs,
            question=f"""{_BCE_MATH} Element j has the soft target `target[j]` and the weight `pos_weight[j]`.
                 Give `logits`: for each j, the logit z that minimises that element's weighted binary
                 cross-entropy.""",
            answer=lambda i: ({"logits": f32(*_dims(i["target"]))},),
        ),
        5: _loss(
            "binary_cross_entropy_losses",
            reference=recalibrated_bce,
            independent=_recalibrated_bce,
            sample=_sample_recalibration,
            refuse=_recalibration_rules,
            question=_RECALIBRATION_QUESTION,
            answer=lambda i: ({"shift": f32(i["logits"].shape[1]), "loss": f32()},),
        ),
    },
    levels="L1 the two BCE calls named; L2 described; L3 the gradient of the weighted BCE with respect to "
    "the logits; L4 the logit that minimises each element's weighted BCE (a soft target); L5 per-column "
    "recalibration shifts that minimise a weighted, label-smoothed BCE with ignored elements (a convex "
    "1-D problem without closed form) and the pooled loss after them (columns count unequally)",
)


# robust_regression_losses ------------------------------------------------------------------------
_ROBUST_MATH = """For an error d = pred - target: the absolute loss is |d|; the smooth absolute loss with
    parameter b is quadratic, d^2 / (2 b), for |d| < b and |d| - b / 2 beyond (continuous, slope 1); the
    robust loss with parameter c is d^2 / 2 for |d| < c and c * (|d| - c / 2) beyond (continuous, slope
    c)."""


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


ROBUST_REGRESSION_LOSSES = leveled(
    ROBUST_REGRESSION_LOSSES,
    {
        2: _loss(
            "robust_regression_losses",
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
                    "smooth_l1_beta_half": f32(*_dims(i["pred"])),
                    "huber_delta_half": f32(*_dims(i["pred"])),
                },
            ),
        ),
        3: _loss(
            "robust_regression_losses",
            reference=robust_gradients,
            independent=_robust_gradients,
            sample=_sample_robust,
            refuse=_every_branch,
            question=f"""{_ROBUST_MATH} Give `grad_smooth`, the gradient with respect to `pred` of
            the mean smooth
                 absolute loss with b = 1, and `grad_robust`, the gradient of the mean robust loss
                 with c = 0.5.""",
            answer=lambda i: (
                {"grad_smooth": f32(*_dims(i["pred"])), "grad_robust": f32(*_dims(i["pred"]))},
            ),
        ),
        4: _loss(
            "robust_regression_losses",
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
        ),
        5: _loss(
            "robust_regression_losses",
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
        ),
    },
    levels="L1 l1, smooth_l1 and huber named; L2 the piecewise losses described; L3 their gradients; L4 the "
    "constants minimising the mean absolute and the Huber loss (a median and a robust location by exact "
    "piecewise-linear root finding); L5 the minimiser of an asymmetric (quantile) loss, described not named",
)


# kl_divergences ----------------------------------------------------------------------------------
_KL_MATH = """Row i of `logits` gives the model's distribution q_i = softmax(logits_i), q[i, c] =
exp(logits[i, c]) /
    (sum over k of exp(logits[i, k])); row i of `target` is the true distribution p_i."""


def js_divergence(logits, target):
    import torch

    q, p = torch.softmax(logits.double(), dim=1), target.double()  # float64: the divergence is a small
    m = (q + p) / 2  # difference of logarithms, and float32 leaves it near half the tolerance
    js = 0.5 * (p * (p / m).log()).sum(dim=1) + 0.5 * (q * (q / m).log()).sum(dim=1)
    return {"rows": [{"js": js.to(logits.dtype)}]}


def _js_divergence(logits, target):
    out = []
    for row, p in zip(values(logits), values(target), strict=True):
        q, p = softmax(row), [hp(e) for e in p]
        m = [(a + b) / 2 for a, b in zip(q, p, strict=True)]
        out.append(
            mpmath.fsum(
                a * mpmath.log(a / c) + b * mpmath.log(b / c) for a, b, c in zip(p, q, m, strict=True)
            )
            / 2
        )
    return [{"js": ExactTensor.of("float32", out)}]


def best_temperature(logits, target, temperatures):
    import torch
    import torch.nn.functional as F

    scores = torch.stack(
        [
            F.kl_div(F.log_softmax(logits.double() / t, dim=1), target.double(), reduction="batchmean")
            for t in temperatures.double()
        ]
    )
    k = int(scores.argmin())
    return {"rows": [{"best": k, "divergence": scores[k].to(logits.dtype)}]}


def _temperature_scores(logits, target, temperatures):
    return [
        mpmath.fsum(
            mpmath.fsum(
                hp(a) * (mpmath.log(hp(a)) - b)
                for a, b in zip(p, log_softmax([hp(e) / hp(t) for e in row]), strict=True)
            )
            for row, p in zip(values(logits), values(target), strict=True)
        )
        / len(values(logits))
        for t in values(temperatures)
    ]


def _best_temperature(logits, target, temperatures):
    scores = _temperature_scores(logits, target, temperatures)
    k = scores.index(min(scores))
    return [{"best": k, "divergence": ExactTensor.of("float32", scores[k])}]


def _sample_temperature(draw, level):
    inputs = _sample_kl(draw, 3)
    scale = draw.choice((Fraction(1, 2), Fraction(2), Fraction(3)))
    logits = [[float(e * scale) for e in row] for row in values(inputs["logits"])]
    temperatures = sorted(draw.sample([0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0], 4))
    return {
        "logits": tensor("float32", logits),
        "target": inputs["target"],
        "temperatures": tensor("float32", temperatures),
    }


def _temperature_clear(inputs):
    return clear_winner(_temperature_scores(**inputs))


def _temperature_zero(inputs):
    scores = _temperature_scores(**inputs)
    return "the first temperature is the best: best is index 0" if scores.index(min(scores)) == 0 else None


def reverse_kl_gradient(logits, target):
    import torch

    z = logits.clone().requires_grad_(True)
    log_q = torch.log_softmax(z, dim=1)
    loss = (log_q.exp() * (log_q - target.log())).sum() / logits.shape[0]
    loss.backward()
    return {"rows": [{"reverse_kl": loss.detach(), "grad_logits": z.grad}]}


def _reverse_kl_gradient(logits, target):
    rows, n = values(logits), len(values(logits))
    total, grad = mpmath.mpf(0), []
    for row, p in zip(rows, values(target), strict=True):
        q, log_q = softmax(row), log_softmax(row)
        terms = [lq - mpmath.log(hp(a)) for lq, a in zip(log_q, p, strict=True)]
        kl = mpmath.fsum(b * t for b, t in zip(q, terms, strict=True))
        total += kl
        grad.append(
            [b * (t - kl) / n for b, t in zip(q, terms, strict=True)]
        )  # d KL(q||p) / dz = q (log q/p - KL)
    return [
        {"reverse_kl": ExactTensor.of("float32", total / n), "grad_logits": ExactTensor.of("float32", grad)}
    ]


KL_DIVERGENCES = leveled(
    KL_DIVERGENCES,
    {
        2: _loss(
            "kl_divergences",
            reference=kl_divergences,
            independent=_kl_divergences,
            sample=_sample_kl,
            question=f"""{_KL_MATH} Give `pointwise`, the terms p[i, c] * (ln p[i, c] - ln q[i,
            c]); `sum`, the
                 sum of all of them; and `batchmean`, that sum divided by the number of rows.""",
            answer=lambda i: ({"batchmean": f32(), "sum": f32(), "pointwise": f32(*_dims(i["logits"]))},),
        ),
        3: _loss(
            "kl_divergences",
            reference=js_divergence,
            independent=_js_divergence,
            sample=_sample_kl,
            question=f"""{_KL_MATH} Give `js`: for each row, the average of the divergences of p_i and of q_i
                 from their midpoint m_i = (p_i + q_i) / 2, where the divergence of a from b is the sum over c
                 of a_c (ln a_c - ln b_c).""",
            answer=lambda i: ({"js": f32(i["logits"].shape[0])},),
        ),
        4: _loss(
            "kl_divergences",
            reference=best_temperature,
            independent=_best_temperature,
            sample=_sample_temperature,
            refuse=_temperature_clear,
            zero_reason=_temperature_zero,
            question=f"""{_KL_MATH} Dividing the logits by a temperature T first gives q_i(T) =
                 softmax(logits_i / T). Among the candidates in `temperatures` (index k = 0, 1,
                 ...), give `best`,
                 the index of the T that minimises the mean over rows of the sum over c of p[i, c]
                 * (ln p[i, c]
                 - ln q(T)[i, c]), and `divergence`, that minimum.""",
            answer=({"best": PY_INT, "divergence": f32()},),
        ),
        5: _loss(
            "kl_divergences",
            reference=reverse_kl_gradient,
            independent=_reverse_kl_gradient,
            sample=_sample_kl,
            question=f"""{_KL_MATH} A mode-seeking objective measures the divergence the other way
            round: L = the
                 mean over rows of the sum over c of q[i, c] * (ln q[i, c] - ln p[i, c]). Give
                 `reverse_kl`, L,
                 and `grad_logits`, its gradient with respect to `logits`.""",
            answer=lambda i: ({"reverse_kl": f32(), "grad_logits": f32(*_dims(i["logits"]))},),
        ),
    },
    levels="L1 kl_div and its reductions named; L2 described; L3 the Jensen-Shannon divergence of each row "
    "(described, not named); L4 the candidate temperature that minimises the divergence; L5 the reverse "
    "divergence and its gradient with respect to the logits",
)

FAMILIES = (
    MEAN_SQUARED_ERROR,
    CROSS_ENTROPY_LOSSES,
    CROSS_ENTROPY_OPTIONS,
    BINARY_CROSS_ENTROPY_LOSSES,
    ROBUST_REGRESSION_LOSSES,
    KL_DIVERGENCES,
)

TASKS = (
    MEAN_SQUARED_ERROR.task(
        "pt-034",
        {
            "pred": tensor("float32", [[1.5, -0.5, 2.0], [0.25, 3.0, -1.0]]),
            "target": tensor("float32", [[1.0, 0.5, 2.75], [-0.5, 2.5, 1.0]]),
        },
    ),
    CROSS_ENTROPY_LOSSES.task(
        "pt-035",
        {
            "logits": tensor(
                "float32", [[2.0, 0.5, -1.0, 1.0], [0.25, 1.5, 0.75, -0.5], [-1.0, 0.0, 2.5, 3.0]]
            ),
            "target": tensor("int64", [2, 0, 3]),
            "soft_target": tensor(
                "float32", [[0.5, 0.25, 0.125, 0.125], [0.0, 0.75, 0.25, 0.0], [0.25, 0.25, 0.25, 0.25]]
            ),
        },
    ),
    CROSS_ENTROPY_OPTIONS.task(
        "pt-036",
        {
            "logits": tensor(
                "float32", [[1.5, -0.5, 0.25], [0.5, 2.0, -1.0], [3.0, 0.0, 1.0], [-0.75, 1.25, 0.5]]
            ),
            "target": tensor("int64", [0, 2, -100, 1]),
            "class_weight": tensor("float32", [0.5, 2.0, 1.0]),
        },
    ),
    BINARY_CROSS_ENTROPY_LOSSES.task(
        "pt-037",
        {
            "probs": tensor("float32", [[0.75, 0.125, 0.5], [0.875, 0.25, 0.625]]),
            "logits": tensor("float32", [[1.5, -2.0, 0.25], [2.5, -0.5, 1.0]]),
            "target": tensor("float32", [[1.0, 0.0, 0.25], [1.0, 0.0, 1.0]]),
            "pos_weight": tensor("float32", [2.0, 1.0, 0.5]),
        },
    ),
    ROBUST_REGRESSION_LOSSES.task(
        "pt-038",
        {
            "pred": tensor("float32", [0.5, 1.25, 2.0, -1.0, 3.5, 0.0]),
            "target": tensor("float32", [3.0, 2.0, 2.25, -1.125, 2.875, -1.5]),
        },
    ),
    KL_DIVERGENCES.task(
        "pt-039",
        {
            "logits": tensor("float32", [[1.0, 0.5, -0.5], [2.0, -1.0, 0.25]]),
            "target": tensor("float32", [[0.5, 0.25, 0.25], [0.625, 0.125, 0.25]]),
        },
    ),
)
