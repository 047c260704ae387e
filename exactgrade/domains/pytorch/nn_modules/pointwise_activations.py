"""The pointwise_activations family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, elementwise, hp, sigmoid, to_fraction, values
from exactgrade.domains.pytorch.nn_modules.shared import sample_elementwise
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import five_levels


# pt-019 -------------------------------------------------------------------------------------------
def pointwise_activations(x):
    import torch
    import torch.nn.functional as F

    return {"rows": [{
        "relu": F.relu(x),
        "leaky_relu": F.leaky_relu(x, negative_slope=0.1),
        "sigmoid": torch.sigmoid(x),
        "silu": F.silu(x),
        "softplus": F.softplus(x),
    }]}


def _pointwise_activations(x):
    v = values(x)
    return [{
        "relu": ExactTensor.of("float32", elementwise(lambda e: max(e, Fraction(0)), v)),
        "leaky_relu": ExactTensor.of("float32", elementwise(lambda e: e if e > 0 else e / 10, v)),
        "sigmoid": ExactTensor.of("float32", elementwise(sigmoid, v)),
        "silu": ExactTensor.of("float32", elementwise(lambda e: hp(e) * sigmoid(e), v)),
        "softplus": ExactTensor.of("float32", elementwise(lambda e: mpmath.log(1 + mpmath.exp(hp(e))), v)),
    }]


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=pointwise_activations,
    independent=_pointwise_activations,
    question="""Apply five activations to `x` elementwise: `relu`; `leaky_relu` with negative slope 0.1;
        `sigmoid`; `silu` (x * sigmoid(x)); and `softplus` with torch's default beta and threshold.""",
    answer=lambda i: (
        {name: f32(*dims(i["x"])) for name in ("relu", "leaky_relu", "sigmoid", "silu", "softplus")},
    ),
    sample=sample_elementwise(-3, 3, 0.5),
)


# pointwise_activations and gelu_variants ---------------------------------------------------------
_ACTIVATIONS_MATH = """`f1`: max(x, 0); `f2`: x where x > 0, else 0.1 * x; `f3`: 1 / (1 + exp(-x)); `f4`: x /
    (1 + exp(-x)); and `f5`: ln(1 + exp(x))."""


_ACTIVATION_KEYS = {"f1": "relu", "f2": "leaky_relu", "f3": "sigmoid", "f4": "silu", "f5": "softplus"}


def activation_formulas(x):
    import torch

    return {"rows": [{"f1": torch.clamp(x, min=0), "f2": torch.where(x > 0, x, 0.1 * x),
                      "f3": 1 / (1 + torch.exp(-x)), "f4": x * torch.sigmoid(x),
                      "f5": torch.nn.functional.softplus(x)}]}


def _activation_formulas(x):
    row = _pointwise_activations(x)[0]
    return [{key: row[name] for key, name in _ACTIVATION_KEYS.items()}]


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=activation_formulas,
    independent=_activation_formulas,
    sample=sample_elementwise(-3, 3, 0.5),
    question=f"""Apply five functions to `x` elementwise: {_ACTIVATIONS_MATH}""",
    answer=lambda i: ({key: f32(*dims(i["x"])) for key in _ACTIVATION_KEYS},),
)


def silu_softplus_chain(x):
    import torch.nn.functional as F

    z = x.clone().requires_grad_(True)
    value = F.softplus(F.silu(z))
    value.sum().backward()
    return {"rows": [{"value": value.detach(), "slope": z.grad}]}


def _silu_softplus_chain(x):
    def silu(e):
        return hp(e) * sigmoid(e)

    def slope(e):
        s = sigmoid(e)
        return sigmoid(silu(e)) * s * (1 + hp(e) * (1 - s))

    v = values(x)
    return [
        {
            "value": ExactTensor.of("float32", elementwise(lambda e: mpmath.log(1 + mpmath.exp(silu(e))), v)),
            "slope": ExactTensor.of("float32", elementwise(slope, v)),
        }
    ]


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=silu_softplus_chain,
    independent=_silu_softplus_chain,
    sample=sample_elementwise(-3, 3, 0.5),
    question="""Let u = x / (1 + exp(-x)) and f(x) = ln(1 + exp(u)), elementwise on `x`. Give `value`,
       f at each element of `x`, and `slope`, the derivative df/dx at each element.""",
    answer=lambda i: ({"value": f32(*dims(i["x"])), "slope": f32(*dims(i["x"]))},),
)


def activation_inverses(s, p):
    import torch

    return {
        "rows": [
            {
                "z_of_s": torch.logit(s.double()).to(s.dtype),
                "z_of_p": torch.log(torch.expm1(p.double())).to(p.dtype),
            }
        ]
    }


def _activation_inverses(s, p):
    return [
        {
            "z_of_s": ExactTensor.of(
                "float32", elementwise(lambda e: mpmath.log(hp(e) / (1 - hp(e))), values(s))
            ),
            "z_of_p": ExactTensor.of(
                "float32", elementwise(lambda e: mpmath.log(mpmath.expm1(hp(e))), values(p))
            ),
        }
    ]


def _sample_inverses(draw, level):
    count = draw.integer(5, 8)
    s = [k / 64 for k in draw.sample([k for k in range(3, 62) if k != 32], count)]
    return {"s": tensor("float32", s), "p": dyadic_tensor(draw, (count,), 0.125, 4, 3)}


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=activation_inverses,
    independent=_activation_inverses,
    sample=_sample_inverses,
    question="""`s` holds outputs of the function 1 / (1 + exp(-z)) and `p` outputs of ln(1 + exp(z)).
       Give `z_of_s` and `z_of_p`, the inputs z that produced each element of `s` and of
       `p` (each function is one-to-one).""",
    answer=lambda i: ({"z_of_s": f32(*dims(i["s"])), "z_of_p": f32(*dims(i["p"]))},),
)


def silu_window_min(x):
    import math

    import torch
    import torch.nn.functional as F

    t = (
        -1.0
    )  # the minimiser solves d/dt [t sigmoid(t)] = 0, i.e. 1 + t + exp(t) = 0 ... by Newton, in float64
    for _ in range(60):
        t -= (1 + t + math.exp(t)) / (1 + math.exp(t))
    low, high = x.double() - 1, x.double() + 1
    inside = (low <= t) & (t <= high)
    ends = torch.minimum(F.silu(low), F.silu(high))
    floor = torch.full_like(low, t / (1 + math.exp(-t)))
    return {"rows": [{"window_min": torch.where(inside, floor, ends).to(x.dtype)}]}


def _silu_window_min(x):
    star = mpmath.findroot(lambda t: 1 + t + mpmath.exp(t), -1.3)

    def f(t):
        return t * sigmoid(t) if isinstance(t, mpmath.mpf) else hp(t) * sigmoid(t)

    def window(e):
        low, high = hp(e) - 1, hp(e) + 1
        return f(star) if low <= star <= high else min(f(low), f(high))

    return [{"window_min": ExactTensor.of("float32", elementwise(window, values(x)))}]


def _window_cases(inputs, reach):
    xs = [to_fraction(e) for e in leaves(values(inputs["x"]))]
    star = reach
    inside = [abs(e - star) <= 1 for e in xs]
    if all(inside) or not any(inside):
        return "every window holds the minimiser, or none does: one case of the answer goes untested"
    return None


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=silu_window_min,
    independent=_silu_window_min,
    sample=sample_elementwise(-3, 3, 0.5),
    question="""Let f(t) = t / (1 + exp(-t)). For each element x of `x`, give the smallest
        value f takes
       on the closed interval [x - 1, x + 1], as `window_min`.""",
    answer=lambda i: ({"window_min": f32(*dims(i["x"]))},),
    refuse=lambda i: _window_cases(i, Fraction(-1278, 1000)),
)


POINTWISE_ACTIVATIONS = five_levels(
    "pointwise_activations",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the activations named; L2 their formulas, not their names; L3 the value and derivative of a "
   "composition; L4 the inputs recovered from outputs (inverse functions); L5 the minimum of x*sigmoid(x) "
   "over a window around each element (needs the function's minimiser)",
)
