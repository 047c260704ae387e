"""The cross_entropy_losses family of losses: everything it needs, its five levels in level order."""

from __future__ import annotations

import mpmath

from exactgrade.domains.pytorch.common import f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, log_softmax, softmax, values
from exactgrade.domains.pytorch.sampling import distribution, dyadic_tensor, int_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


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


def _sample_cross_entropy(draw: Draw, level: int) -> dict:
    samples, classes = draw.integer(3, 2 + level), draw.integer(3, 3 + level)
    return {
        "logits": dyadic_tensor(draw, (samples, classes), -2, 3, 2),
        "target": int_tensor(draw, (samples,), 0, classes - 1),
        "soft_target": tensor(
            "float32", [distribution(draw, classes, 3 + level // 2) for _ in range(samples)]
        ),
    }


LEVEL_1 = pytorch_level(
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
)


# cross_entropy_losses ----------------------------------------------------------------------------
_CE_MATH = """Row i of `logits` gives the class probabilities p[i, c] = exp(logits[i, c]) / (sum over k of
    exp(logits[i, k]))."""


LEVEL_2 = pytorch_level(
    "losses",
    reference=cross_entropy_losses,
    independent=_cross_entropy_losses,
    sample=_sample_cross_entropy,
    question=f"""{_CE_MATH} Give `per_sample`, -ln p[i, target[i]] for each row i; `mean`, the mean of
         those; and `soft_mean`, the mean over rows of -(sum over c of soft_target[i, c] *
         ln p[i, c]).""",
    answer=lambda i: ({"per_sample": f32(i["logits"].shape[0]), "mean": f32(), "soft_mean": f32()},),
)


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


LEVEL_3 = pytorch_level(
    "losses",
    reference=ce_logit_gradient,
    independent=_ce_logit_gradient,
    sample=_sample_cross_entropy,
    question=f"""{_CE_MATH} Let L be the mean over rows i of -ln p[i, target[i]]. Give `grad_logits`,
         the gradient of L with respect to `logits`. (`soft_target` is not used.)""",
    answer=lambda i: ({"grad_logits": f32(*dims(i["logits"]))},),
)


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


LEVEL_4 = pytorch_level(
    "losses",
    reference=ce_logit_shift,
    independent=_ce_logit_shift,
    sample=_sample_ce_shift,
    reject=_shift_signs,
    question=f"""{_CE_MATH} For each row i, give in `shift` the amount s (positive or negative) to add
         to logits[i, target[i]] alone so that -ln p[i, target[i]] becomes exactly `goal`.""",
    answer=lambda i: ({"shift": f32(i["logits"].shape[0])},),
)


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
        "teacher": dyadic_tensor(draw, dims(inputs["logits"]), -2, 3, 2),
    }


LEVEL_5 = pytorch_level(
    "losses",
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
    answer=lambda i: ({"loss": f32(), "grad_logits": f32(*dims(i["logits"]))},),
)


CROSS_ENTROPY_LOSSES = five_levels(
    "cross_entropy_losses",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 cross-entropy and its reductions named; L2 described; L3 the gradient with respect to the "
   "logits; L4 the target-logit shift that brings each sample's loss to a goal (either sign); L5 a "
   "temperature-scaled distillation loss and its gradient (described, not named)",
)
