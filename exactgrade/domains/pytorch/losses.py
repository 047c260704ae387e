"""losses (pt-034..pt-039): MSE, cross-entropy (per sample, mean, soft targets, class weights,
ignore_index, label smoothing), BCE and BCE-with-logits, L1 / smooth L1 / Huber, KL divergence.

The independent checks write each loss from its formula: Fractions for the polynomial losses,
mpmath for the ones with log and exp.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import Inputs, f32, pytorch_family, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, log_softmax, mean, sigmoid, values
from exactgrade.domains.pytorch.sampling import distribution, dyadic_list, dyadic_tensor, int_tensor
from exactgrade.family import Draw


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
