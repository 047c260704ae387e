"""The binary_cross_entropy_losses family of losses: everything it needs, its five levels in level order."""

from __future__ import annotations

import mpmath

from exactgrade.domains.pytorch.common import f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, sigmoid, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


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


LEVEL_1 = pytorch_level(
    "losses",
    reference=binary_cross_entropy_losses,
    independent=_binary_cross_entropy_losses,
    question="""Give `bce`, the binary cross-entropy (mean) of the probabilities `probs` against
        `target` (the third column holds a soft target); `with_logits`, the binary cross-entropy with
        logits (mean) of `logits` against `target` with positive-class weights `pos_weight` (one per
        column); and `with_logits_per_element`, the same without reduction.""",
    answer=lambda i: (
        {"bce": f32(), "with_logits": f32(), "with_logits_per_element": f32(*dims(i["logits"]))},
    ),
    sample=_sample_bce,
)


# binary_cross_entropy_losses ---------------------------------------------------------------------
_BCE_MATH = """For a probability q and a target t in [0, 1], the binary cross-entropy is -(t ln q + (1 - t)
    ln(1 - q)); with a positive-class weight w, -(w t ln q + (1 - t) ln(1 - q)). A logit z gives q = 1 / (1 +
    exp(-z)). `pos_weight[j]` is the weight of column j."""


LEVEL_2 = pytorch_level(
    "losses",
    reference=binary_cross_entropy_losses,
    independent=_binary_cross_entropy_losses,
    sample=_sample_bce,
    question=f"""{_BCE_MATH} Give `bce`, the mean over all elements of the binary cross-entropy of the
         probabilities `probs` against `target`; `with_logits_per_element`, the weighted binary
         cross-entropy of q = 1 / (1 + exp(-logits)) against `target`, per element; and `with_logits`,
         its mean.""",
    answer=lambda i: (
        {"bce": f32(), "with_logits": f32(), "with_logits_per_element": f32(*dims(i["logits"]))},
    ),
)


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


LEVEL_3 = pytorch_level(
    "losses",
    reference=bce_logit_gradient,
    independent=_bce_logit_gradient,
    sample=_sample_bce,
    question=f"""{_BCE_MATH} Let L be the mean over all elements of the weighted binary
    cross-entropy of
         q = 1 / (1 + exp(-logits)) against `target`. Give `grad_logits`, the gradient of L
         with respect
         to `logits`. (`probs` is not used.)""",
    answer=lambda i: ({"grad_logits": f32(*dims(i["logits"]))},),
)


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


LEVEL_4 = pytorch_level(
    "losses",
    reference=best_logits,
    independent=_best_logits,
    sample=_sample_best_logits,
    reject=_logit_signs,
    question=f"""{_BCE_MATH} Element j has the soft target `target[j]` and the weight `pos_weight[j]`.
         Give `logits`: for each j, the logit z that minimises that element's weighted binary
         cross-entropy.""",
    answer=lambda i: ({"logits": f32(*dims(i["target"]))},),
)


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


LEVEL_5 = pytorch_level(
    "losses",
    reference=recalibrated_bce,
    independent=_recalibrated_bce,
    sample=_sample_recalibration,
    refuse=_recalibration_rules,
    question=_RECALIBRATION_QUESTION,
    answer=lambda i: ({"shift": f32(i["logits"].shape[1]), "loss": f32()},),
)


BINARY_CROSS_ENTROPY_LOSSES = five_levels(
    "binary_cross_entropy_losses",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the two BCE calls named; L2 described; L3 the gradient of the weighted BCE with respect to "
   "the logits; L4 the logit that minimises each element's weighted BCE (a soft target); L5 per-column "
   "recalibration shifts that minimise a weighted, label-smoothed BCE with ignored elements (a convex "
   "1-D problem without closed form) and the pooled loss after them (columns count unequally)",
)
