"""The kl_divergences family of losses: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, log_softmax, softmax, values
from exactgrade.domains.pytorch.sampling import distribution, dyadic_tensor
from exactgrade.domains.pytorch.shared import clear_winner, dims
from exactgrade.family import Draw, five_levels


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


def _sample_kl(draw: Draw, level: int) -> dict:
    rows, classes = draw.integer(2, 1 + level), draw.integer(3, 2 + level)
    return {
        "logits": dyadic_tensor(draw, (rows, classes), -2, 2, 2),
        "target": tensor("float32", [distribution(draw, classes, 3 + level // 2) for _ in range(rows)]),
    }


LEVEL_1 = pytorch_level(
    "losses",
    reference=kl_divergences,
    independent=_kl_divergences,
    question="""Let log_q = log_softmax(logits, dim=1) (the model's log-probabilities) and p = `target`
        (the true distributions, one per row). Give torch.nn.functional.kl_div(log_q, p), the divergence
        KL(p || q), with reduction 'batchmean' (`batchmean`), 'sum' (`sum`) and 'none' (`pointwise`, the
        elementwise terms).""",
    answer=lambda i: ({"batchmean": f32(), "sum": f32(), "pointwise": f32(*dims(i["logits"]))},),
    sample=_sample_kl,
)


# kl_divergences ----------------------------------------------------------------------------------
_KL_MATH = """Row i of `logits` gives the model's distribution q_i = softmax(logits_i), q[i, c] =
exp(logits[i, c]) /
    (sum over k of exp(logits[i, k])); row i of `target` is the true distribution p_i."""


LEVEL_2 = pytorch_level(
    "losses",
    reference=kl_divergences,
    independent=_kl_divergences,
    sample=_sample_kl,
    question=f"""{_KL_MATH} Give `pointwise`, the terms p[i, c] * (ln p[i, c] - ln q[i,
    c]); `sum`, the
         sum of all of them; and `batchmean`, that sum divided by the number of rows.""",
    answer=lambda i: ({"batchmean": f32(), "sum": f32(), "pointwise": f32(*dims(i["logits"]))},),
)


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


LEVEL_3 = pytorch_level(
    "losses",
    reference=js_divergence,
    independent=_js_divergence,
    sample=_sample_kl,
    question=f"""{_KL_MATH} Give `js`: for each row, the average of the divergences of p_i and of q_i
         from their midpoint m_i = (p_i + q_i) / 2, where the divergence of a from b is the sum over c
         of a_c (ln a_c - ln b_c).""",
    answer=lambda i: ({"js": f32(i["logits"].shape[0])},),
)


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


LEVEL_4 = pytorch_level(
    "losses",
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
)


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


LEVEL_5 = pytorch_level(
    "losses",
    reference=reverse_kl_gradient,
    independent=_reverse_kl_gradient,
    sample=_sample_kl,
    question=f"""{_KL_MATH} A mode-seeking objective measures the divergence the other way
    round: L = the
         mean over rows of the sum over c of q[i, c] * (ln q[i, c] - ln p[i, c]). Give
         `reverse_kl`, L,
         and `grad_logits`, its gradient with respect to `logits`.""",
    answer=lambda i: ({"reverse_kl": f32(), "grad_logits": f32(*dims(i["logits"]))},),
)


KL_DIVERGENCES = five_levels(
    "kl_divergences",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 kl_div and its reductions named; L2 described; L3 the Jensen-Shannon divergence of each row "
   "(described, not named); L4 the candidate temperature that minimises the divergence; L5 the reverse "
   "divergence and its gradient with respect to the logits",
)
