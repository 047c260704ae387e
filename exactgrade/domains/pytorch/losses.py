"""losses (pt-034..pt-039): MSE, cross-entropy (per sample, mean, soft targets, class weights,
ignore_index, label smoothing), BCE and BCE-with-logits, L1 / smooth L1 / Huber, KL divergence.

The independent checks write each loss from its formula: Fractions for the polynomial losses,
mpmath for the ones with log and exp.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import f32, make_task, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, log_softmax, mean, sigmoid, values


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


TASKS = (
    make_task(
        "pt-034", "losses", reference=mean_squared_error, independent=_mean_squared_error,
        inputs={"pred": tensor("float32", [[1.5, -0.5, 2.0], [0.25, 3.0, -1.0]]),
                "target": tensor("float32", [[1.0, 0.5, 2.75], [-0.5, 2.5, 1.0]])},
        question="""Give the mean squared error between `pred` and `target` three ways: `mean` (torch's
            default reduction), `sum`, and `per_element` (no reduction).""",
        answer=({"mean": f32(), "sum": f32(), "per_element": f32(2, 3)},),
    ),
    make_task(
        "pt-035", "losses", reference=cross_entropy_losses, independent=_cross_entropy_losses,
        inputs={"logits": tensor("float32", [[2.0, 0.5, -1.0, 1.0], [0.25, 1.5, 0.75, -0.5],
                                             [-1.0, 0.0, 2.5, 3.0]]),
                "target": tensor("int64", [2, 0, 3]),
                "soft_target": tensor("float32", [[0.5, 0.25, 0.125, 0.125], [0.0, 0.75, 0.25, 0.0],
                                                  [0.25, 0.25, 0.25, 0.25]])},
        question="""`logits` holds unnormalised scores for 3 samples over 4 classes. Give the cross-entropy
            loss with the class indices `target`: `per_sample` (no reduction) and `mean` (torch's default);
            and `soft_mean`, the mean cross-entropy against the class-probability targets `soft_target`.""",
        answer=({"per_sample": f32(3), "mean": f32(), "soft_mean": f32()},),
    ),
    make_task(
        "pt-036", "losses", reference=cross_entropy_options, independent=_cross_entropy_options,
        inputs={"logits": tensor("float32", [[1.5, -0.5, 0.25], [0.5, 2.0, -1.0], [3.0, 0.0, 1.0],
                                             [-0.75, 1.25, 0.5]]),
                "target": tensor("int64", [0, 2, -100, 1]),
                "class_weight": tensor("float32", [0.5, 2.0, 1.0])},
        question="""`logits` holds scores for 4 samples over 3 classes; `target` gives the class of each
            sample, and -100 marks a sample to ignore (torch's default ignore_index). With torch's default
            mean reduction, give `ignoring`, the plain cross-entropy; `weighted`, the cross-entropy with
            class weights `class_weight`; and `smoothed`, the cross-entropy with label_smoothing=0.1 (no
            weights).""",
        answer=({"ignoring": f32(), "weighted": f32(), "smoothed": f32()},),
    ),
    make_task(
        "pt-037", "losses", reference=binary_cross_entropy_losses, independent=_binary_cross_entropy_losses,
        inputs={"probs": tensor("float32", [[0.75, 0.125, 0.5], [0.875, 0.25, 0.625]]),
                "logits": tensor("float32", [[1.5, -2.0, 0.25], [2.5, -0.5, 1.0]]),
                "target": tensor("float32", [[1.0, 0.0, 0.25], [1.0, 0.0, 1.0]]),
                "pos_weight": tensor("float32", [2.0, 1.0, 0.5])},
        question="""Give `bce`, the binary cross-entropy (mean) of the probabilities `probs` against
            `target` (the third column holds a soft target); `with_logits`, the binary cross-entropy with
            logits (mean) of `logits` against `target` with positive-class weights `pos_weight` (one per
            column); and `with_logits_per_element`, the same without reduction.""",
        answer=({"bce": f32(), "with_logits": f32(), "with_logits_per_element": f32(2, 3)},),
    ),
    make_task(
        "pt-038", "losses", reference=robust_regression_losses, independent=_robust_regression_losses,
        inputs={"pred": tensor("float32", [0.5, 1.25, 2.0, -1.0, 3.5, 0.0]),
                "target": tensor("float32", [3.0, 2.0, 2.25, -1.125, 2.875, -1.5])},
        question="""Compare `pred` with `target`: `l1`, the mean absolute error; `smooth_l1`, torch's smooth
            L1 loss with its default beta (mean); `smooth_l1_beta_half`, the smooth L1 loss with beta=0.5
            per element; and `huber_delta_half`, the Huber loss with delta=0.5 per element.""",
        answer=({"l1": f32(), "smooth_l1": f32(), "smooth_l1_beta_half": f32(6),
                 "huber_delta_half": f32(6)},),
    ),
    make_task(
        "pt-039", "losses", reference=kl_divergences, independent=_kl_divergences,
        inputs={"logits": tensor("float32", [[1.0, 0.5, -0.5], [2.0, -1.0, 0.25]]),
                "target": tensor("float32", [[0.5, 0.25, 0.25], [0.625, 0.125, 0.25]])},
        question="""Let log_q = log_softmax(logits, dim=1) (the model's log-probabilities) and p = `target`
            (the true distributions, one per row). Give torch.nn.functional.kl_div(log_q, p), the divergence
            KL(p || q), with reduction 'batchmean' (`batchmean`), 'sum' (`sum`) and 'none' (`pointwise`, the
            elementwise terms).""",
        answer=({"batchmean": f32(), "sum": f32(), "pointwise": f32(2, 3)},),
    ),
)
