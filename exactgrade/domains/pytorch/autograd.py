"""autograd (pt-028..pt-033): backward on scalar losses, gradient accumulation,
torch.autograd.grad, detach, second derivatives with create_graph, and gradients at kinks.

The independent checks differentiate the polynomials by hand in exact Fraction arithmetic.
"""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import f32, make_task, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, matmul, transpose, values


# pt-028 -------------------------------------------------------------------------------------------
def regression_gradient(w0, x, y):
    w = w0.clone().requires_grad_(True)
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    return {"rows": [{"loss": loss.detach(), "grad": w.grad}]}


def _regression_gradient(w0, x, y):
    vx, vy = values(x), values(y)
    residual = [p[0] - t for p, t in zip(matmul(vx, [[e] for e in values(w0)]), vy, strict=True)]
    n = len(residual)

    def dot(u, v):
        return sum((p * q for p, q in zip(u, v, strict=True)), Fraction(0))

    return [{
        "loss": ExactTensor.of("float32", sum((r * r for r in residual), Fraction(0)) / n),
        "grad": ExactTensor.of("float32", [Fraction(2, n) * dot(col, residual) for col in transpose(vx)]),
    }]


# pt-029 -------------------------------------------------------------------------------------------
def accumulated_gradient(w0):
    w = w0.clone().requires_grad_(True)
    loss = (w ** 3 - w).sum()
    loss.backward(retain_graph=True)
    after_one = w.grad.clone()
    loss.backward()
    return {"rows": [{"after_one": after_one, "after_two": w.grad}]}


def _accumulated_gradient(w0):
    grad = [3 * e * e - 1 for e in values(w0)]
    return [{
        "after_one": ExactTensor.of("float32", grad),
        "after_two": ExactTensor.of("float32", [2 * g for g in grad]),
    }]


# pt-030 -------------------------------------------------------------------------------------------
def partial_derivatives(a0, b0):
    import torch

    a = a0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    f = (a * b + a ** 2 * b - b ** 3).sum()
    grad_a, grad_b = torch.autograd.grad(f, (a, b))
    return {"rows": [{"f": f.detach(), "grad_a": grad_a, "grad_b": grad_b}]}


def _partial_derivatives(a0, b0):
    pairs = list(zip(values(a0), values(b0), strict=True))
    return [{
        "f": ExactTensor.of("float32", sum((a * b + a * a * b - b ** 3 for a, b in pairs), Fraction(0))),
        "grad_a": ExactTensor.of("float32", [b + 2 * a * b for a, b in pairs]),
        "grad_b": ExactTensor.of("float32", [a + a * a - 3 * b * b for a, b in pairs]),
    }]


# pt-031 -------------------------------------------------------------------------------------------
def detached_gradient(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    y = x ** 2
    z = (y.detach() * x + y).sum()
    (grad_z,) = torch.autograd.grad(z, x)
    w = (x ** 3 * x.detach()).sum()
    (grad_w,) = torch.autograd.grad(w, x)
    return {"rows": [{"grad_z": grad_z, "grad_w": grad_w}]}


def _detached_gradient(x0):
    v = values(x0)
    return [{
        "grad_z": ExactTensor.of("float32", [e * e + 2 * e for e in v]),  # the detached x**2 is a constant
        "grad_w": ExactTensor.of("float32", [3 * e ** 3 for e in v]),  # d/dx (x**3 * c) at c = x
    }]


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
        "first": ExactTensor.of("float32", [4 * e ** 3 - 6 * e ** 2 + 1 for e in v]),
        "second": ExactTensor.of("float32", [12 * e ** 2 - 12 * e for e in v]),
    }]


# pt-033 -------------------------------------------------------------------------------------------
def kink_gradients(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    (relu_grad,) = torch.autograd.grad(torch.relu(x).sum(), x)
    (abs_grad,) = torch.autograd.grad(x.abs().sum(), x)
    (clamp_grad,) = torch.autograd.grad(x.clamp(0.0, 2.0).sum(), x)
    (max_grad,) = torch.autograd.grad(x.max(), x)
    return {"rows": [{"relu": relu_grad, "abs": abs_grad, "clamp": clamp_grad, "max": max_grad}]}


def _kink_gradients(x0):
    v = values(x0)
    top = max(v)
    ties = v.count(top)
    # torch's documented conventions: relu'(0) = 0; abs'(0) = sign(0) = 0; clamp passes the gradient on
    # the closed interval [min, max]; a full max() reduction splits the gradient evenly between ties.
    return [{
        "relu": ExactTensor.of("float32", [Fraction(1) if e > 0 else Fraction(0) for e in v]),
        "abs": ExactTensor.of("float32", [Fraction((e > 0) - (e < 0)) for e in v]),
        "clamp": ExactTensor.of("float32", [Fraction(1) if 0 <= e <= 2 else Fraction(0) for e in v]),
        "max": ExactTensor.of("float32", [Fraction(1, ties) if e == top else Fraction(0) for e in v]),
    }]


TASKS = (
    make_task(
        "pt-028", "autograd", reference=regression_gradient, independent=_regression_gradient,
        inputs={"w0": tensor("float32", [0.5, -1.0, 0.25]),
                "x": tensor("float32", [[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [3.0, 0.25, 1.0],
                                        [-2.0, 1.0, 0.5]]),
                "y": tensor("float32", [1.0, -2.0, 0.5, 3.0])},
        question="""Make a leaf tensor w from `w0` that requires gradients, compute the mean squared error
            loss = mean((x @ w - y)^2) over the four samples, and call loss.backward(). Give the `loss` (a
            0-d tensor) and `grad`, the gradient stored in w.grad.""",
        answer=({"loss": f32(), "grad": f32(3)},),
    ),
    make_task(
        "pt-029", "autograd", reference=accumulated_gradient, independent=_accumulated_gradient,
        inputs={"w0": tensor("float32", [-1.5, 0.25, 2.0, 0.75])},
        question="""Make a leaf tensor w from `w0` that requires gradients and let loss = sum(w^3 - w). Call
            loss.backward(retain_graph=True), record w.grad as `after_one`, then call loss.backward() once
            more on the same graph without zeroing anything and give w.grad as `after_two`.""",
        answer=({"after_one": f32(4), "after_two": f32(4)},),
    ),
    make_task(
        "pt-030", "autograd", reference=partial_derivatives, independent=_partial_derivatives,
        inputs={"a0": tensor("float32", [1.5, -0.75, 2.0]), "b0": tensor("float32", [0.5, 1.25, -1.0])},
        question="""With leaf tensors a (from `a0`) and b (from `b0`) that require gradients, let f =
            sum(a*b + a^2*b - b^3). Use torch.autograd.grad to get the gradients of f with respect to a and
            b. Give `f` (a 0-d tensor), `grad_a` and `grad_b`.""",
        answer=({"f": f32(), "grad_a": f32(3), "grad_b": f32(3)},),
    ),
    make_task(
        "pt-031", "autograd", reference=detached_gradient, independent=_detached_gradient,
        inputs={"x0": tensor("float32", [-1.5, 0.5, 1.0, 2.5])},
        question="""Let x be a leaf tensor from `x0` that requires gradients and y = x**2. Give `grad_z`,
            the gradient with respect to x of z = sum(y.detach() * x + y), and `grad_w`, the gradient with
            respect to x of w = sum(x**3 * x.detach()).""",
        answer=({"grad_z": f32(4), "grad_w": f32(4)},),
    ),
    make_task(
        "pt-032", "autograd", reference=second_derivative, independent=_second_derivative,
        inputs={"x0": tensor("float32", [-1.5, -0.5, 0.25, 1.5, 2.0])},
        question="""Let x be a leaf tensor from `x0` that requires gradients and f = sum(x^4 - 2x^3 + x).
            Give `first`, the gradient of f with respect to x, and `second`, the gradient of sum(first) with
            respect to x (the diagonal of the Hessian), obtained by differentiating twice with
            torch.autograd.grad and create_graph=True.""",
        answer=({"first": f32(5), "second": f32(5)},),
    ),
    make_task(
        "pt-033", "autograd", reference=kink_gradients, independent=_kink_gradients,
        inputs={"x0": tensor("float32", [-1.0, 0.0, 0.5, 2.0, 3.0, 3.0])},
        question="""Let x be a leaf tensor from `x0` that requires gradients. Give the gradient that torch's
            autograd computes with respect to x of: `relu`, sum(relu(x)); `abs`, sum(abs(x)); `clamp`,
            sum(x.clamp(0.0, 2.0)); and `max`, x.max() (the maximum over all elements; note the tie).
            Several inputs sit exactly on kinks: report torch's conventions there.""",
        answer=({"relu": f32(6), "abs": f32(6), "clamp": f32(6), "max": f32(6)},),
    ),
)
