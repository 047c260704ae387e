"""The second_derivative family of autograd: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.autograd.shared import elementwise_input
from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, Inputs, f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, elementwise, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


# pt-032 -------------------------------------------------------------------------------------------
def second_derivative(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    f = (x ** 4 - 2 * x ** 3 + x).sum()
    (g,) = torch.autograd.grad(f, x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    return {"rows": [{"first": g.detach(), "second": h}]}


def _second_derivative(x0):
    v = values(x0)
    return [{
        "first": ExactTensor.of("float32", elementwise(lambda e: 4 * e ** 3 - 6 * e ** 2 + 1, v)),
        "second": ExactTensor.of("float32", elementwise(lambda e: 12 * e ** 2 - 12 * e, v)),
    }]

LEVEL_1 = pytorch_level(
    "autograd",
    reference=second_derivative,
    independent=_second_derivative,
    question="""Let x be a leaf tensor from `x0` that requires gradients and f = sum(x^4 - 2x^3 + x).
        Give `first`, the gradient of f with respect to x, and `second`, the gradient of sum(first) with
        respect to x (the diagonal of the Hessian), obtained by differentiating twice with
        torch.autograd.grad and create_graph=True.""",
    answer=lambda i: ({"first": f32(*dims(i["x0"])), "second": f32(*dims(i["x0"]))},),
    sample=elementwise_input(-2, 2.5, 2),
)

# second_derivative ------------------------------------------------------------------------------
def _d1(e):
    return 4 * e ** 3 - 6 * e ** 2 + 1


def _d2(e):
    return 12 * e ** 2 - 12 * e


def newton_step(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad((x ** 4 - 2 * x ** 3 + x).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    x1 = (x - g / h).detach().requires_grad_(True)
    (slope,) = torch.autograd.grad((x1 ** 4 - 2 * x1 ** 3 + x1).sum(), x1)
    return {"rows": [{"x1": x1.detach(), "slope_after": slope}]}


def _newton_step(x0):
    x1 = elementwise(lambda e: e - _d1(e) / _d2(e), values(x0))
    return [{"x1": ExactTensor.of("float32", x1),
             "slope_after": ExactTensor.of("float32", elementwise(_d1, x1))}]


def _newton_well_defined(inputs: Inputs) -> str | None:
    v = values(inputs["x0"])
    flat = [e for row in v for e in row] if isinstance(v[0], list) else v
    for e in flat:
        if abs(_d2(e)) < Fraction(1, 2):
            return "the second derivative is (nearly) 0 at an element: the step would be huge or undefined"
        if abs(_d1(e - _d1(e) / _d2(e))) < Fraction(1, 8):
            return "a slope after the step is nearly 0: its float32 value would be mostly rounding"
    return None


def newton_steps_needed(x0, tolerance):

    x = x0.clone().double()
    for steps in range(1, 7):
        x = x - (4 * x ** 3 - 6 * x ** 2 + 1) / (12 * x ** 2 - 12 * x)
        if bool(((4 * x ** 3 - 6 * x ** 2 + 1).abs() < tolerance).all()):
            return {"rows": [{"steps": steps, "x_final": x.float()}]}
    return {"rows": [{"steps": -1, "x_final": x.float()}]}


def _newton_steps_needed(x0, tolerance):
    v = values(x0)
    t = Fraction(tolerance)
    current = list(v)
    for steps in range(1, 7):
        current = [e - _d1(e) / _d2(e) for e in current]
        if all(abs(_d1(e)) < t for e in current):
            return [{"steps": steps, "x_final": ExactTensor.of("float32", current)}]
    raise ValueError("no convergence within 6 steps")


def _newton_converges_clearly(inputs: Inputs) -> str | None:
    t = Fraction(inputs["tolerance"])
    current = list(values(inputs["x0"]))
    for _ in range(1, 7):
        if any(abs(_d2(e)) < Fraction(1, 4) for e in current):
            return "an iterate sits where the second derivative nearly vanishes"
        current = [e - _d1(e) / _d2(e) for e in current]
        if any(abs(abs(_d1(e)) - t) < t / 4 for e in current):
            return "a slope is within a quarter of the tolerance of it: the stop would hinge on rounding"
        if all(abs(_d1(e)) < t for e in current):
            return None
    return "no convergence within 6 steps"


def _sample_newton_steps(draw: Draw, level: int) -> dict:
    return {"x0": dyadic_tensor(draw, (3 + level,), -2, 2.5, 2, nonzero=True),
            "tolerance": draw.choice((2.0 ** -8, 2.0 ** -12, 2.0 ** -16))}


def taylor_check(x0, h):
    import torch

    x = x0.clone().requires_grad_(True)
    f = (x ** 4 - 2 * x ** 3 + x).sum()
    (g,) = torch.autograd.grad(f, x, create_graph=True)
    (s,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    (third,) = torch.autograd.grad(s.sum(), x)
    xd, hd = x0.double(), h
    exact = ((xd + hd) ** 4 - 2 * (xd + hd) ** 3 + (xd + hd)).sum()
    predicted = ((xd ** 4 - 2 * xd ** 3 + xd).sum() + (g.detach().double() * hd).sum()
                 + (s.detach().double() * hd ** 2 / 2).sum())
    return {"rows": [{"third": third, "taylor_error": float(exact - predicted)}]}


def _taylor_check(x0, h):
    v, step = values(x0), Fraction(h)
    flat = [e for row in v for e in row] if isinstance(v[0], list) else v
    error = sum((24 * e - 12) * step ** 3 / 6 + 24 * step ** 4 / 24 for e in flat)
    return [{"third": ExactTensor.of("float32", elementwise(lambda e: 24 * e - 12, v)),
             "taylor_error": error}]


def _sample_taylor(draw: Draw, level: int) -> dict:
    return {**elementwise_input(-2, 2.5, 2)(draw, level), "h": draw.choice((0.25, 0.5, -0.25, -0.5, 0.125))}


_POLY_TEXT = "f(x) = sum over the elements of x of (x^4 - 2x^3 + x)"


LEVEL_2 = pytorch_level(
    "autograd",
    second_derivative,
    _second_derivative,
    f"""Let {_POLY_TEXT}. At x = `x0`, give `first`, the gradient of f with respect to x, and `second`,
        for each element the second derivative of f with respect to that element (the diagonal of the
        matrix of second derivatives).""",
    lambda i: ({"first": f32(*dims(i["x0"])), "second": f32(*dims(i["x0"]))},),
    elementwise_input(-2, 2.5, 2),
)


LEVEL_3 = pytorch_level(
    "autograd",
    newton_step,
    _newton_step,
    f"""Let {_POLY_TEXT}, a sum of independent terms. From x = `x0`, move every element by minus the
        first derivative of its term divided by the second derivative of its term (both at x0): call
        the result x1. Give `x1` and `slope_after`, the gradient of f at x1.""",
    lambda i: ({"x1": f32(*dims(i["x0"])), "slope_after": f32(*dims(i["x0"]))},),
    elementwise_input(-2, 2.5, 2),
    refuse=_newton_well_defined,
)


LEVEL_4 = pytorch_level(
    "autograd",
    newton_steps_needed,
    _newton_steps_needed,
    f"""Let {_POLY_TEXT}, a sum of independent terms. Repeat from x = `x0`: move every element by minus
        the first derivative of its term divided by the second derivative of its term (at the current
        x). Give `steps`, the smallest number of such updates after which the absolute value
        of the gradient of f is strictly below `tolerance` at every element (here it is at most 6), and
        `x_final`, x after that many updates.""",
    lambda i: ({"steps": PY_INT, "x_final": f32(*dims(i["x0"]))},),
    _sample_newton_steps,
    refuse=_newton_converges_clearly,
)


LEVEL_5 = pytorch_level(
    "autograd",
    taylor_check,
    _taylor_check,
    f"""Let {_POLY_TEXT}. Give `third`, for each element of x = `x0` the third derivative of f with
        respect to that element, and `taylor_error`: the exact value of f(x0 + h) minus its second-order
        Taylor prediction from x0 (f(x0) plus the sum of first derivative times h plus the sum of second
        derivative times h^2 / 2, every element moved by the same `h`).""",
    lambda i: ({"third": f32(*dims(i["x0"])), "taylor_error": PY_FLOAT},),
    _sample_taylor,
)


SECOND_DERIVATIVE = five_levels(
    "second_derivative",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 double differentiation with create_graph named; L2 the diagonal of second derivatives "
          "asked; L3 one Newton step and the slope after it; L4 the fewest Newton steps to a tolerance; "
          "L5 third derivatives and the exact remainder of the second-order Taylor prediction",
)
