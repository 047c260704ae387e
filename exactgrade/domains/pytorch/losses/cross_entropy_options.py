"""The cross_entropy_options family of losses: everything it needs, its five levels in level order."""

from __future__ import annotations

import mpmath

from exactgrade.domains.pytorch.common import Inputs, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, log_softmax, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.family import Draw, five_levels


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


LEVEL_1 = pytorch_level(
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
    refuse=_weights_matter,
)


# cross_entropy_options ---------------------------------------------------------------------------
_OPTIONS_MATH = """Row i of `logits` gives log-probabilities l[i, c] = logits[i, c] - ln(sum over k of
    exp(logits[i, k])); `target` gives each row's class, and a row whose target is -100 is left out of every
    sum below. Let n be the number of kept rows, C the number of classes."""


LEVEL_2 = pytorch_level(
    "losses",
    reference=cross_entropy_options,
    independent=_cross_entropy_options,
    sample=_sample_cross_entropy_options,
    refuse=_weights_matter,
    question=f"""{_OPTIONS_MATH} Give `ignoring`, the mean over kept rows of -l[i, target[i]];
         `weighted`, (sum over kept rows of w[target[i]] * -l[i, target[i]]) divided by (sum over kept
         rows of w[target[i]]), with w = `class_weight`; and `smoothed`, the mean over kept rows of
         0.9 * -l[i, target[i]] + 0.1 * (the mean over the C classes c of -l[i, c]) (no weights).""",
    answer=({"ignoring": f32(), "weighted": f32(), "smoothed": f32()},),
)

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


LEVEL_3 = pytorch_level(
    "losses",
    reference=combined_cross_entropy,
    independent=_combined_cross_entropy,
    sample=_sample_cross_entropy_options,
    refuse=_weights_matter,
    question=f"""{_OPTIONS_MATH} {_COMBINED_MATH} Give `loss`, L.""",
    answer=({"loss": f32()},),
)


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


LEVEL_4 = pytorch_level(
    "losses",
    reference=balancing_weight,
    independent=_balancing_weight,
    sample=_sample_balancing,
    refuse=_balancing_defined,
    question=f"""{_OPTIONS_MATH} With class weights w, the weighted loss is (sum over kept rows of
         w[target[i]] * -l[i, target[i]]) divided by (sum over kept rows of w[target[i]]). Keep every
         weight of `class_weight` except that of class `cls`, and give `weight`, the value of w[cls]
         that makes the weighted loss equal to the plain mean over kept rows of -l[i, target[i]].""",
    answer=({"weight": f32()},),
)


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


LEVEL_5 = pytorch_level(
    "losses",
    reference=smoothed_optimum,
    independent=_smoothed_optimum,
    sample=_sample_cross_entropy_options,
    refuse=_optimum_rules,
    question=f"""{_OPTIONS_MATH} {_COMBINED_MATH} {_OPTIMUM_QUESTION}""",
    answer=lambda i: ({"optimal": f32(sum(t != -100 for t in i["target"].data), i["logits"].shape[1]),
                       "floor": f32(), "excess": f32()},),
)


CROSS_ENTROPY_OPTIONS = five_levels(
    "cross_entropy_options",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 ignore_index, weight and label_smoothing named; L2 described; L3 class weights and smoothing "
   "together (the smoothing term weighted too); L4 the one class weight that balances the weighted loss to "
   "the plain one; L5 what minimises the weighted, smoothed loss: each kept row's optimal distribution "
   "(not the smoothed label), the loss floor and the current excess over it",
)
