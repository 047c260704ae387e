"""The layer_norm family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, innermost_rows, mean, reshape, values
from exactgrade.domains.pytorch.nn_modules.shared import BEST, best_of, candidate_sampler
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


# pt-022 -------------------------------------------------------------------------------------------
def layer_norm(x, weight, bias):
    import torch

    norm = torch.nn.LayerNorm(x.shape[-1], eps=1e-5, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        y = norm(x)
    return {"rows": [{"y": y}]}


def _layer_norm(x, weight, bias):
    w, b = values(weight), values(bias)
    eps = hp(1e-5)  # the float nn.LayerNorm stores, exactly
    out = []
    for row in innermost_rows(values(x)):
        m = mean(row)
        var = mean([(e - m) ** 2 for e in row])  # biased variance, as LayerNorm uses
        scale = 1 / mpmath.sqrt(hp(var) + eps)
        out += [hp(e - m) * scale * hp(wi) + hp(bi) for e, wi, bi in zip(row, w, b, strict=True)]
    return [{"y": ExactTensor.of("float32", reshape(out, tuple(x.shape)))}]


def _sample_layer_norm(draw: Draw, level: int) -> dict:
    width = draw.integer(4, 4 + level)
    lead = (draw.integer(2, 1 + level),) if level <= 2 else (draw.integer(2, level), draw.integer(2, 3))
    return {
        "x": dyadic_tensor(draw, (*lead, width), -4, 12, 2),
        "weight": dyadic_tensor(draw, (width,), 0.25, 2, 2),
        "bias": dyadic_tensor(draw, (width,), -1, 1, 3),
    }


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=layer_norm,
    independent=_layer_norm,
    question=lambda i: (
        f"""Apply torch.nn.LayerNorm over the last dimension (size {i["x"].shape[-1]},
        eps=1e-5) with elementwise affine weight `weight` and bias `bias` to `x`. Give the output `y`."""
    ),
    answer=lambda i: ({"y": f32(*dims(i["x"]))},),
    sample=_sample_layer_norm,
)


# layer_norm --------------------------------------------------------------------------------------
_NORM_MATH = """N(v) normalises a vector v of D features: with m the mean of v and s2 the mean of (v - m)^2
    (dividing by D), entry j of N(v) is (v[j] - m) / sqrt(s2 + 1e-5) * gamma[j] + beta[j]."""


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=layer_norm,
    independent=_layer_norm,
    sample=_sample_layer_norm,
    question=lambda i: (
        f"""{_NORM_MATH} Apply N with gamma = `weight` and beta = `bias` to every
       vector along the last dimension of `x` (D = {i["x"].shape[-1]}). Give the output `y`."""
    ),
    answer=lambda i: ({"y": f32(*dims(i["x"]))},),
)


def _norm_rows(rows, weight, bias):
    """N applied to each row of a list of rows (mpmath)."""
    out = []
    for row in rows:
        v = [hp(e) for e in row]
        m = mpmath.fsum(v) / len(v)
        scale = 1 / mpmath.sqrt(mpmath.fsum((e - m) ** 2 for e in v) / len(v) + hp(1e-5))
        out.append([(e - m) * scale * hp(w) + hp(b) for e, w, b in zip(v, weight, bias, strict=True)])
    return out


def layer_norm_twice(x, weight, bias):
    import torch.nn.functional as F

    first = F.layer_norm(x, x.shape[-1:], weight, bias, eps=1e-5)
    return {"rows": [{"y": F.layer_norm(x + first, x.shape[-1:], weight, bias, eps=1e-5)}]}


def _layer_norm_twice(x, weight, bias):
    w, b = values(weight), values(bias)
    rows = innermost_rows(values(x))
    first = _norm_rows(rows, w, b)
    summed = [[hp(e) + f for e, f in zip(r, fr, strict=True)] for r, fr in zip(rows, first, strict=True)]
    return [
        {
            "y": ExactTensor.of(
                "float32", reshape([e for r in _norm_rows(summed, w, b) for e in r], tuple(x.shape))
            )
        }
    ]


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=layer_norm_twice,
    independent=_layer_norm_twice,
    sample=_sample_layer_norm,
    question=lambda i: (
        f"""{_NORM_MATH} With gamma = `weight` and beta = `bias`, applied to every vector
       v along the last dimension of `x` (D = {i["x"].shape[-1]}), give `y` = N(v + N(v)) for every
       such vector (the shape of `x`)."""
    ),
    answer=lambda i: ({"y": f32(*dims(i["x"]))},),
)


def layer_norm_best(x, weights, biases, targets):
    import torch
    import torch.nn.functional as F

    rows = []
    for target in targets:
        errors = torch.stack(
            [
                ((F.layer_norm(x, x.shape[-1:], w, b, eps=1e-5) - target) ** 2).sum()
                for w, b in zip(weights, biases, strict=True)
            ]
        )
        k = int(torch.argmin(errors))
        rows.append({"best": k, "error": errors[k]})
    return {"rows": rows}


def _NORM_OUT(i):
    return _layer_norm(**i)[0]["y"]


_NORM_STACK = {"weight": ("weights", 0.25, 2, 2), "bias": ("biases", -1, 1, 3)}


_NORM_BEST = best_of(_NORM_STACK, _NORM_OUT)


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=layer_norm_best,
    sample=candidate_sampler(_sample_layer_norm, _NORM_STACK, _NORM_OUT),
    question=lambda i: (
        f"""{_NORM_MATH} Candidate k (k = 0..{i["weights"].shape[0] - 1}) uses gamma =
       `weights[k]` and beta = `biases[k]` and applies N to every vector along the last dimension of
       `x` (D = {i["x"].shape[-1]}). {BEST}"""
    ),
    **_NORM_BEST,
)


# L5: the normalisation inverted. The output alone fixes the normalised vector; its spread is below 1 only
# because of the 1e-5 under the root, and that shortfall fixes the row's variance: s2 = 1e-5 * V / (1 - V)
# for V the (biased) spread of the normalised row. Rows have variances near 1e-5, where that term matters in
# float32. Reference: the closed form in float64; independent: mpmath, a root of the self-consistency
# equation for the row's scale, then a forward pass that must reproduce `y`.
def invert_layer_norm(y, weight, bias, means):
    import torch

    xh = (y.double() - bias.double()) / weight.double()
    spread = xh.var(dim=1, unbiased=False)
    variance = 1e-5 * spread / (1 - spread)
    x = means.double()[:, None] + xh * torch.sqrt(variance + 1e-5)[:, None]
    return {"rows": [{"x": x.float(), "variance": variance.float()}]}


def _invert_layer_norm(y, weight, bias, means):
    eps, gamma, beta = hp(1e-5), [hp(e) for e in values(weight)], [hp(e) for e in values(bias)]
    xs, variances = [], []
    for row, m in zip(values(y), values(means), strict=True):
        xh = [(hp(e) - b) / g for e, g, b in zip(row, gamma, beta, strict=True)]
        centre = mpmath.fsum(xh) / len(xh)
        spread = mpmath.fsum((e - centre) ** 2 for e in xh) / len(xh)
        # the scale s of the row: normalising m + s * xh must give xh back, s / sqrt(s^2 spread + eps) = 1
        scale = mpmath.findroot(lambda t, sp=spread: t * t * (1 - sp) - eps, mpmath.sqrt(eps))
        x = [hp(m) + e * scale for e in xh]
        if max(abs(a - hp(b)) for a, b in zip(_norm_rows([x], gamma, beta)[0], row, strict=True)) > hp(1e-20):
            raise ValueError("the recovered row does not normalise back to y")
        xs.append(x)
        variances.append(mpmath.fsum((e - hp(m)) ** 2 for e in x) / len(x))
    return [{"x": ExactTensor.of("float32", xs), "variance": ExactTensor.of("float32", variances)}]


def _sample_inverse_norm(draw, level):
    rows, width = draw.integer(3, 4), 6
    gamma = [draw.choice((-1, 1)) * float(draw.dyadic(Fraction(1, 4), 2, 2)) for _ in range(width)]
    beta = [float(draw.dyadic(-1, 1, 3)) for _ in range(width)]
    ys = []
    for _ in range(rows):
        while True:  # integers with sum 0, scaled by a power of two so that the spread V is in (0.2, 0.95)
            a = [draw.integer(-6, 6) for _ in range(width - 1)]
            a.append(-sum(a))
            power = [Fraction(1, 2**k) for k in range(0, 6)
                     if Fraction(1, 5) < Fraction(sum(e * e for e in a), width) / 4**k < Fraction(19, 20)]
            if power:
                break
        c = draw.choice(power)
        ys.append([float(g * Fraction(e) * c + Fraction(b)) for e, g, b in zip(a, gamma, beta, strict=True)])
    return {
        "y": tensor("float32", ys),
        "weight": tensor("float32", gamma),
        "bias": tensor("float32", beta),
        "means": tensor("float32", [float(draw.dyadic(-2, 2, 3)) for _ in range(rows)]),
    }


def _inverse_norm_question(i):
    return f"""{_NORM_MATH} Each row of `y` ({i["y"].shape[0]} rows, D =
    {i["y"].shape[1]}) is N(v) for an unknown row v, with gamma = `weight` and beta = `bias`; the mean of that
    v is the row's entry of `means`. Give `x`, the rows v (the shape of `y`), and `variance`, each v's s2 (one
    per row)."""


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=invert_layer_norm,
    independent=_invert_layer_norm,
    sample=_sample_inverse_norm,
    question=_inverse_norm_question,
    answer=lambda i: ({"x": f32(*dims(i["y"])), "variance": f32(i["y"].shape[0])},),
)


LAYER_NORM = five_levels(
    "layer_norm",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the nn.LayerNorm call; L2 the normalisation described; L3 the normalisation applied to v + "
   "N(v); L4 the candidate scale and shift closest to each of two targets; L5 the normalisation inverted: "
   "each input row from its output and its mean (the 1e-5 under the root is what fixes the variance)",
)
