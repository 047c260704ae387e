"""The gelu_variants family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, elementwise, hp, to_fraction, values
from exactgrade.domains.pytorch.nn_modules.shared import sample_elementwise
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import Reject, five_levels


# pt-020 -------------------------------------------------------------------------------------------
def gelu_variants(x):
    import torch.nn.functional as F

    return {"rows": [{"gelu_erf": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh")}]}


def _gelu_variants(x):
    v = elementwise(hp, values(x))
    c, k = mpmath.sqrt(2 / mpmath.pi), mpmath.mpf("0.044715")

    def exact(e):
        return e / 2 * (1 + mpmath.erf(e / mpmath.sqrt(2)))

    def approximate(e):
        return e / 2 * (1 + mpmath.tanh(c * (e + k * e ** 3)))

    return [{
        "gelu_erf": ExactTensor.of("float32", elementwise(exact, v)),
        "gelu_tanh": ExactTensor.of("float32", elementwise(approximate, v)),
    }]

LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=gelu_variants,
    independent=_gelu_variants,
    question="""Apply GELU to `x` twice: `gelu_erf`, the exact form x * Phi(x) with the Gaussian CDF
        (torch's default), and `gelu_tanh`, torch's tanh approximation.""",
    answer=lambda i: ({"gelu_erf": f32(*dims(i["x"])), "gelu_tanh": f32(*dims(i["x"]))},),
    sample=sample_elementwise(-2.5, 2.5, 0.0),
)


_GELU_MATH = """`exact`: x * P(Z <= x) for a standard normal Z; and `approximate`: 0.5 * x * (1 +
    tanh(sqrt(2 /
    pi) * (x + 0.044715 * x^3)))."""


def gelu_forms(x):
    import torch.nn.functional as F

    return {"rows": [{"exact": F.gelu(x), "approximate": F.gelu(x, approximate="tanh")}]}


def _gelu_forms(x):
    row = _gelu_variants(x)[0]
    return [{"exact": row["gelu_erf"], "approximate": row["gelu_tanh"]}]


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=gelu_forms,
    independent=_gelu_forms,
    sample=sample_elementwise(-2.5, 2.5, 0.0),
    question=f"""Apply two functions to `x` elementwise: {_GELU_MATH}""",
    answer=lambda i: ({"exact": f32(*dims(i["x"])), "approximate": f32(*dims(i["x"]))},),
)


def _gelu_exact(e):
    e = hp(e)
    return e / 2 * (1 + mpmath.erf(e / mpmath.sqrt(2)))


def _gelu_slope(e):
    e = hp(e)
    return (1 + mpmath.erf(e / mpmath.sqrt(2))) / 2 + e * mpmath.exp(-e * e / 2) / mpmath.sqrt(2 * mpmath.pi)


def gelu_twice(x):
    import torch.nn.functional as F

    z = x.double().requires_grad_(True)
    value = F.gelu(F.gelu(z))
    value.sum().backward()
    return {"rows": [{"value": value.detach().to(x.dtype), "slope": z.grad.to(x.dtype)}]}


def _gelu_twice(x):
    v = values(x)
    return [
        {
            "value": ExactTensor.of("float32", elementwise(lambda e: _gelu_exact(_gelu_exact(e)), v)),
            "slope": ExactTensor.of(
                "float32", elementwise(lambda e: _gelu_slope(_gelu_exact(e)) * _gelu_slope(e), v)
            ),
        }
    ]


def gelu_inverse(y):
    import torch

    z = torch.ones_like(y, dtype=torch.float64)  # Newton on z * Phi(z) = y, in float64 (increasing for z > 0)
    for _ in range(60):
        phi = torch.exp(-z * z / 2) / (2 * torch.pi) ** 0.5
        cdf = (1 + torch.erf(z / 2**0.5)) / 2
        z = z - (z * cdf - y.double()) / (cdf + z * phi)
    return {"rows": [{"x": z.to(y.dtype)}]}


def _gelu_inverse(y):
    return [
        {
            "x": ExactTensor.of(
                "float32",
                elementwise(
                    lambda e: mpmath.findroot(lambda t: _gelu_exact(t) - hp(e), 1 + hp(e)), values(y)
                ),
            )
        }
    ]


def _sample_gelu_inverse(draw, level):
    return {"y": dyadic_tensor(draw, (draw.integer(5, 8),), 0.125, 3, 3)}


def gelu_window_min(x):
    import torch
    import torch.nn.functional as F

    t = torch.tensor(
        -0.75, dtype=torch.float64
    )  # the minimiser: Phi(t) + t * phi(t) = 0, by Newton in float64
    for _ in range(60):
        phi = torch.exp(-t * t / 2) / (2 * torch.pi) ** 0.5
        cdf = (1 + torch.erf(t / 2**0.5)) / 2
        t = t - (cdf + t * phi) / (phi * (2 - t * t))
    low, high = x.double() - 0.5, x.double() + 0.5
    inside = (low <= t) & (t <= high)
    ends = torch.minimum(F.gelu(low), F.gelu(high))
    return {"rows": [{"window_min": torch.where(inside, F.gelu(t), ends).to(x.dtype)}]}


def _gelu_window_min(x):
    star = mpmath.findroot(_gelu_slope, -0.75)

    def window(e):
        low, high = hp(e) - mpmath.mpf(1) / 2, hp(e) + mpmath.mpf(1) / 2
        return _gelu_exact(star) if low <= star <= high else min(_gelu_exact(low), _gelu_exact(high))

    return [{"window_min": ExactTensor.of("float32", elementwise(window, values(x)))}]


def _gelu_window_cases(inputs):
    xs = [to_fraction(e) for e in leaves(values(inputs["x"]))]
    inside = [abs(e + Fraction(7518, 10000)) <= Fraction(1, 2) for e in xs]
    if all(inside) or not any(inside):
        return "every window holds the minimiser, or none does: one case of the answer goes untested"
    return None


def _away_from_gelu_minimum(sample):
    def draw_inputs(draw, level):
        inputs = sample(draw, level)
        if any(abs(to_fraction(e) + Fraction(3, 4)) < Fraction(1, 8) for e in leaves(values(inputs["x"]))):
            raise Reject("an element sits where GELU's slope nearly vanishes: float32 loses the slope there")
        return inputs

    return draw_inputs


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=gelu_twice,
    independent=_gelu_twice,
    sample=_away_from_gelu_minimum(sample_elementwise(-2.5, 2.5, 0.0)),
    question="""Let g(t) = t * P(Z <= t) for a standard normal Z, and f(x) = g(g(x)). Give `value`, f
       at each element of `x`, and `slope`, the derivative df/dx at each element.""",
    answer=lambda i: ({"value": f32(*dims(i["x"])), "slope": f32(*dims(i["x"]))},),
)


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=gelu_inverse,
    independent=_gelu_inverse,
    sample=_sample_gelu_inverse,
    question="""Let g(t) = t * P(Z <= t) for a standard normal Z. Every element of `y` is g(t) for
       exactly one t > 0. Give `x`, those t, elementwise.""",
    answer=lambda i: ({"x": f32(*dims(i["y"]))},),
)


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=gelu_window_min,
    independent=_gelu_window_min,
    sample=sample_elementwise(-2.5, 2.5, 0.0),
    question="""Let g(t) = t * P(Z <= t) for a standard normal Z. For each element x of `x`, give the
       smallest value g takes on the closed interval [x - 0.5, x + 0.5], as `window_min`.""",
    answer=lambda i: ({"window_min": f32(*dims(i["x"]))},),
    refuse=_gelu_window_cases,
)


GELU_VARIANTS = five_levels(
    "gelu_variants",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the two GELU forms named; L2 their formulas; L3 the value and derivative of GELU applied "
   "twice; L4 the positive input recovered from an output; L5 the minimum of GELU over a window around each "
   "element (needs the function's minimiser)",
)
