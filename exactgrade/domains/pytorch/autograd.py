"""autograd (pt-028..pt-033): backward on scalar losses, gradient accumulation,
torch.autograd.grad, detach, second derivatives with create_graph, and gradients at kinks.

The independent checks differentiate the polynomials by hand in exact Fraction arithmetic.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, Inputs, f32, pytorch_family, tensor
from exactgrade.domains.pytorch.exact import (
    ExactTensor,
    elementwise,
    hp,
    matmul,
    reshape,
    shape_and_flat,
    softmax,
    transpose,
    values,
)
from exactgrade.domains.pytorch.levels import leveled
from exactgrade.domains.pytorch.levels_ops import (
    BOOTSTRAPPED_FIXED_POINT,
    GRADIENT_NORM_DESCENT,
    LINE_SEARCH_DESCENT,
    negative_count,
)
from exactgrade.domains.pytorch.sampling import (
    dyadic_list,
    dyadic_tensor,
    int_tensor,
    regression_inputs,
    shape_text,
    word,
)
from exactgrade.family import Branch, Draw, Reject


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
    grad = elementwise(lambda e: 3 * e * e - 1, values(w0))
    return [{
        "after_one": ExactTensor.of("float32", grad),
        "after_two": ExactTensor.of("float32", elementwise(lambda g: 2 * g, grad)),
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
        # the detached x**2 is a constant
        "grad_z": ExactTensor.of("float32", elementwise(lambda e: e * e + 2 * e, v)),
        "grad_w": ExactTensor.of("float32", elementwise(lambda e: 3 * e ** 3, v)),  # d/dx (x**3 * c) at c = x
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
        "first": ExactTensor.of("float32", elementwise(lambda e: 4 * e ** 3 - 6 * e ** 2 + 1, v)),
        "second": ExactTensor.of("float32", elementwise(lambda e: 12 * e ** 2 - 12 * e, v)),
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


# chain: a loss through a small model and its gradients --------------------------------------------
def mlp_loss_gradients(x, target, w1, b1, w2, b2):
    import torch
    import torch.nn.functional as F

    params = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)]
    hidden = torch.relu(F.linear(x, params[0], params[1]))
    loss = F.cross_entropy(F.linear(hidden, params[2], params[3]), target)
    loss.backward()
    return {
        "rows": [
            {
                "loss": loss.detach(),
                "grad_w1": params[0].grad,
                "grad_b1": params[1].grad,
                "grad_w2": params[2].grad,
                "grad_b2": params[3].grad,
            }
        ]
    }


def _hidden_pre_activations(x, w1, b1):
    return [
        [
            sum((a * b for a, b in zip(row, unit, strict=True)), Fraction(0)) + c
            for unit, c in zip(values(w1), values(b1), strict=True)
        ]
        for row in values(x)
    ]


def _mlp_loss_gradients(x, target, w1, b1, w2, b2):
    pre = _hidden_pre_activations(x, w1, b1)
    hidden = [[max(h, Fraction(0)) for h in row] for row in pre]
    logits = [
        [
            sum((a * b for a, b in zip(row, unit, strict=True)), Fraction(0)) + c
            for unit, c in zip(values(w2), values(b2), strict=True)
        ]
        for row in hidden
    ]
    n = len(logits)
    probabilities = [softmax(row) for row in logits]
    labels = values(target)
    loss = -mpmath.fsum(mpmath.log(p[t]) for p, t in zip(probabilities, labels, strict=True)) / n
    # d loss / d logits = (softmax - one_hot) / n; back through the second layer and the ReLU mask
    d_logits = [
        [(p - (1 if k == t else 0)) / n for k, p in enumerate(ps)]
        for ps, t in zip(probabilities, labels, strict=True)
    ]
    w2_rows = values(w2)
    d_hidden = [
        [
            mpmath.fsum(d * w2_rows[k][j] for k, d in enumerate(row)) if pre[i][j] > 0 else mpmath.mpf(0)
            for j in range(len(pre[0]))
        ]
        for i, row in enumerate(d_logits)
    ]
    x_rows = values(x)

    def outer(grads, inputs):  # sum over samples of grads^T inputs
        return [
            [
                mpmath.fsum(g[k] * hp(a[j]) for g, a in zip(grads, inputs, strict=True))
                for j in range(len(inputs[0]))
            ]
            for k in range(len(grads[0]))
        ]

    return [
        {
            "loss": ExactTensor.of("float32", loss),
            "grad_w1": ExactTensor.of("float32", outer(d_hidden, x_rows)),
            "grad_b1": ExactTensor.of("float32", [mpmath.fsum(column) for column in transpose(d_hidden)]),
            "grad_w2": ExactTensor.of("float32", outer(d_logits, hidden)),
            "grad_b2": ExactTensor.of("float32", [mpmath.fsum(column) for column in transpose(d_logits)]),
        }
    ]


# ------------------------------------------------------------------------------------ families
# Level 1 is about the canonical size; each level adds elements (a matrix instead of a vector from
# level 3 on where the task is elementwise) and widens the value range.


def _dims(x):
    return tuple(x.shape)


def _elementwise_input(low: float, high: float, bits: int):
    def sample(draw: Draw, level: int) -> dict:
        shape = (3 + level,) if level <= 2 else (draw.integer(2, level), draw.integer(3, 2 + level))
        return {"x0": dyadic_tensor(draw, shape, low, high, bits, nonzero=True)}

    return sample


def _renamed(sample, name: str):
    def renamed(draw: Draw, level: int) -> dict:
        return {name: sample(draw, level)["x0"]}

    return renamed


REGRESSION_GRADIENT = pytorch_family(
    "regression_gradient",
    "autograd",
    reference=regression_gradient,
    independent=_regression_gradient,
    question=lambda i: (
        f"""Make a leaf tensor w from `w0` that requires gradients, compute the mean squared
        error loss = mean((x @ w - y)^2) over the {word(i["x"].shape[0])} samples, and call loss.backward().
        Give the `loss` (a 0-d tensor) and `grad`, the gradient stored in w.grad."""
    ),
    answer=lambda i: ({"loss": f32(), "grad": f32(*_dims(i["w0"]))},),
    sample=regression_inputs,
    levels="4..3+level samples of 3..2+level features on the 1/4 grid",
)

ACCUMULATED_GRADIENT = pytorch_family(
    "accumulated_gradient",
    "autograd",
    reference=accumulated_gradient,
    independent=_accumulated_gradient,
    question="""Make a leaf tensor w from `w0` that requires gradients and let loss = sum(w^3 - w). Call
        loss.backward(retain_graph=True), record w.grad as `after_one`, then call loss.backward() once
        more on the same graph without zeroing anything and give w.grad as `after_two`.""",
    answer=lambda i: ({"after_one": f32(*_dims(i["w0"])), "after_two": f32(*_dims(i["w0"]))},),
    sample=_renamed(_elementwise_input(-2.5, 2.5, 2), "w0"),
    levels="3+level weights (levels 1-2), then a (2..level, 3..2+level) matrix, on the 1/4 grid",
)


def _sample_pair(draw: Draw, level: int) -> dict:
    shape = (2 + level,)
    return {"a0": dyadic_tensor(draw, shape, -2, 2, 2), "b0": dyadic_tensor(draw, shape, -1.5, 1.5, 2)}


PARTIAL_DERIVATIVES = pytorch_family(
    "partial_derivatives",
    "autograd",
    reference=partial_derivatives,
    independent=_partial_derivatives,
    question="""With leaf tensors a (from `a0`) and b (from `b0`) that require gradients, let f =
        sum(a*b + a^2*b - b^3). Use torch.autograd.grad to get the gradients of f with respect to a and
        b. Give `f` (a 0-d tensor), `grad_a` and `grad_b`.""",
    answer=lambda i: ({"f": f32(), "grad_a": f32(*_dims(i["a0"])), "grad_b": f32(*_dims(i["a0"]))},),
    sample=_sample_pair,
    levels="2+level elements each on the 1/4 grid",
)

DETACHED_GRADIENT = pytorch_family(
    "detached_gradient",
    "autograd",
    reference=detached_gradient,
    independent=_detached_gradient,
    question="""Let x be a leaf tensor from `x0` that requires gradients and y = x**2. Give `grad_z`,
        the gradient with respect to x of z = sum(y.detach() * x + y), and `grad_w`, the gradient with
        respect to x of w = sum(x**3 * x.detach()).""",
    answer=lambda i: ({"grad_z": f32(*_dims(i["x0"])), "grad_w": f32(*_dims(i["x0"]))},),
    sample=_elementwise_input(-2.5, 2.5, 2),
    levels="3+level elements (levels 1-2), then a (2..level, 3..2+level) matrix, non-zero on the 1/4 grid",
)

SECOND_DERIVATIVE = pytorch_family(
    "second_derivative",
    "autograd",
    reference=second_derivative,
    independent=_second_derivative,
    question="""Let x be a leaf tensor from `x0` that requires gradients and f = sum(x^4 - 2x^3 + x).
        Give `first`, the gradient of f with respect to x, and `second`, the gradient of sum(first) with
        respect to x (the diagonal of the Hessian), obtained by differentiating twice with
        torch.autograd.grad and create_graph=True.""",
    answer=lambda i: ({"first": f32(*_dims(i["x0"])), "second": f32(*_dims(i["x0"]))},),
    sample=_elementwise_input(-2, 2.5, 2),
    levels="3+level elements (levels 1-2), then a (2..level, 3..2+level) matrix, non-zero on the 1/4 grid",
)


def _sample_kinks(draw: Draw, level: int) -> dict:
    n = 5 + level
    v = dyadic_list(draw, n - 3, -2, 3 + level / 2, 1)
    v += [0.0, 2.0, max(v)]  # the kinks of relu/abs (0) and of clamp (2), and a tied maximum
    return {"x0": tensor("float32", draw.shuffled(v))}


def _maximum_tied(inputs: Inputs) -> str | None:
    v = values(inputs["x0"])
    if v.count(max(v)) < 2:
        return "the maximum is not tied: the documented even split of x.max()'s gradient is not tested"
    return None


KINK_GRADIENTS = pytorch_family(
    "kink_gradients",
    "autograd",
    reference=kink_gradients,
    independent=_kink_gradients,
    question="""Let x be a leaf tensor from `x0` that requires gradients. Give the gradient that torch's
        autograd computes with respect to x of: `relu`, sum(relu(x)); `abs`, sum(abs(x)); `clamp`,
        sum(x.clamp(0.0, 2.0)); and `max`, x.max() (the maximum over all elements; note the tie).
        Several inputs sit exactly on kinks: report torch's conventions there.""",
    answer=lambda i: ({name: f32(*_dims(i["x0"])) for name in ("relu", "abs", "clamp", "max")},),
    sample=_sample_kinks,
    levels="5+level values on the 1/2 grid including 0, 2 and a tied maximum (torch documents the even "
    "split of max()'s gradient between ties)",
    refuse=_maximum_tied,
)


def _sample_mlp_loss(draw: Draw, level: int) -> dict:
    batch, features = draw.integer(2, 2 + level), draw.integer(2, 2 + level)
    hidden, classes = draw.integer(2, 2 + level), draw.integer(2, 2 + level // 2)
    return {
        "x": dyadic_tensor(draw, (batch, features), -2, 2, 2),
        "target": int_tensor(draw, (batch,), 0, classes - 1),
        "w1": dyadic_tensor(draw, (hidden, features), -1, 1, 3),
        "b1": dyadic_tensor(draw, (hidden,), -0.5, 0.5, 3),
        "w2": dyadic_tensor(draw, (classes, hidden), -1, 1, 3),
        "b2": dyadic_tensor(draw, (classes,), -0.5, 0.5, 3),
    }


def _off_the_relu_kink(inputs: Inputs) -> str | None:
    pre = _hidden_pre_activations(inputs["x"], inputs["w1"], inputs["b1"])
    if any(h == 0 for row in pre for h in row):
        return "a hidden pre-activation is exactly 0: the ReLU gradient would sit on its kink"
    if all(h < 0 for row in pre for h in row):
        return "every hidden unit is off: no gradient reaches the first layer"
    return None


MLP_LOSS_GRADIENTS = pytorch_family(
    "mlp_loss_gradients",
    "autograd",
    reference=mlp_loss_gradients,
    independent=_mlp_loss_gradients,
    question=lambda i: (
        f"""A small classifier maps the batch `x` through Linear({i["w1"].shape[1]},
        {i["w1"].shape[0]}) (weight `w1`, bias `b1`), ReLU and Linear({i["w2"].shape[1]}, {i["w2"].shape[0]})
        (weight `w2`, bias `b2`) to logits. With the parameters as leaf tensors that require gradients,
        compute the cross-entropy loss of the logits against the class indices `target` (torch's default
        mean reduction) and call backward. Give the `loss` (a 0-d tensor) and the gradients `grad_w1`,
        `grad_b1`, `grad_w2` and `grad_b2` of the four parameters."""
    ),
    answer=lambda i: (
        {
            "loss": f32(),
            "grad_w1": f32(*_dims(i["w1"])),
            "grad_b1": f32(*_dims(i["b1"])),
            "grad_w2": f32(*_dims(i["w2"])),
            "grad_b2": f32(*_dims(i["b2"])),
        },
    ),
    sample=_sample_mlp_loss,
    levels="a chain linear -> relu -> linear -> cross-entropy -> backward at every level; batch, features "
    "and hidden units 2..2+level, 2..2+level//2 classes; a pre-activation on the ReLU kink rejected",
    refuse=lambda inputs: _off_the_relu_kink(inputs) or _mostly_alive(inputs),
)

TASKS = (
    REGRESSION_GRADIENT.task(
        "pt-028",
        {
            "w0": tensor("float32", [0.5, -1.0, 0.25]),
            "x": tensor("float32", [[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [3.0, 0.25, 1.0], [-2.0, 1.0, 0.5]]),
            "y": tensor("float32", [1.0, -2.0, 0.5, 3.0]),
        },
    ),
    ACCUMULATED_GRADIENT.task("pt-029", {"w0": tensor("float32", [-1.5, 0.25, 2.0, 0.75])}),
    PARTIAL_DERIVATIVES.task(
        "pt-030", {"a0": tensor("float32", [1.5, -0.75, 2.0]), "b0": tensor("float32", [0.5, 1.25, -1.0])}
    ),
    DETACHED_GRADIENT.task("pt-031", {"x0": tensor("float32", [-1.5, 0.5, 1.0, 2.5])}),
    SECOND_DERIVATIVE.task("pt-032", {"x0": tensor("float32", [-1.5, -0.5, 0.25, 1.5, 2.0])}),
    KINK_GRADIENTS.task("pt-033", {"x0": tensor("float32", [-1.0, 0.0, 0.5, 2.0, 3.0, 3.0])}),
)


# ------------------------------------------------------------------------------------ levels 2-5
# Level 2 restates a level-1 question mathematically (no torch call named) with the level-1
# reference; levels 3-5 ask new questions of the same setting, each with its own torch reference
# and its own independent recomputation (exact polynomials in Fractions, or mpmath).


def _level(name, reference, independent, question, answer, sample, *, refuse=None, zero_reason=None,
           reject=None):
    """One level of the autograd family ``name``."""
    return pytorch_family(name, "autograd", reference=reference, independent=independent,
                          question=question, answer=answer, sample=sample, levels="", refuse=refuse,
                          zero_reason=zero_reason, reject=reject)


def _dot(u, v):
    return sum((p * q for p, q in zip(u, v, strict=True)), Fraction(0))


def _mse_and_grad(vx, vy, w):
    residual = [_dot(row, w) - t for row, t in zip(vx, vy, strict=True)]
    n = len(residual)
    loss = sum((r * r for r in residual), Fraction(0)) / n
    return loss, [Fraction(2, n) * _dot(col, residual) for col in transpose(vx)]


# regression_gradient L3: one step of gradient descent, then the loss there -----------------------
def regression_step(w0, x, y, lr):
    w = w0.clone().requires_grad_(True)
    ((x @ w - y) ** 2).mean().backward()
    w1 = (w - lr * w.grad).detach()
    return {"rows": [{"w1": w1, "loss_after": ((x @ w1 - y) ** 2).mean()}]}


def _regression_step(w0, x, y, lr):
    vx, vy = values(x), values(y)
    _, grad = _mse_and_grad(vx, vy, values(w0))
    w1 = [w - Fraction(lr) * g for w, g in zip(values(w0), grad, strict=True)]
    return [{"w1": ExactTensor.of("float32", w1),
             "loss_after": ExactTensor.of("float32", _mse_and_grad(vx, vy, w1)[0])}]


def _sample_regression_lr(draw: Draw, level: int) -> dict:
    return {**regression_inputs(draw, level), "lr": draw.choice((0.015625, 0.03125, 0.0078125))}


# regression_gradient L4: the best of candidate learning rates ------------------------------------
def best_learning_rate(w0, x, y, lrs):
    w = w0.clone().requires_grad_(True)
    ((x @ w - y) ** 2).mean().backward()
    losses = [float(((x @ (w - lr * w.grad).detach() - y) ** 2).mean()) for lr in lrs]
    best = min(range(len(lrs)), key=lambda k: (losses[k], lrs[k]))
    return {"rows": [{"lr": lrs[best], "loss_after": losses[best]}]}


def _losses_after(w0, x, y, lrs):
    vx, vy = values(x), values(y)
    _, grad = _mse_and_grad(vx, vy, values(w0))
    return [_mse_and_grad(vx, vy, [w - Fraction(lr) * g for w, g in zip(values(w0), grad, strict=True)])[0]
            for lr in lrs]


def _best_learning_rate(w0, x, y, lrs):
    losses = _losses_after(w0, x, y, lrs)
    best = min(range(len(lrs)), key=lambda k: (losses[k], lrs[k]))
    return [{"lr": Fraction(lrs[best]), "loss_after": losses[best]}]


def _sample_lrs(draw: Draw, level: int) -> dict:
    inputs = regression_inputs(draw, level)
    return {**inputs, "lrs": sorted(draw.sample([k / 128 for k in range(1, 33)], 4))}


def _lr_clear(inputs: Inputs) -> str | None:
    losses = sorted(_losses_after(inputs["w0"], inputs["x"], inputs["y"], inputs["lrs"]))
    if losses[1] - losses[0] < Fraction(1, 1000) * (1 + losses[0]):
        return "two learning rates give almost the same loss: the float32 comparison would decide"
    best = _best_learning_rate(inputs["w0"], inputs["x"], inputs["y"], inputs["lrs"])[0]["lr"]
    if best == Fraction(inputs["lrs"][-1]):
        return "the largest candidate wins: no interior optimum to find"
    return None


_MSE_TEXT = """the mean over the samples of the squared difference between the prediction (the dot product
    of the sample's row of `x` with the weight vector w) and the sample's target in `y`"""

REGRESSION_GRADIENT = leveled(REGRESSION_GRADIENT, {
    2: _level(
        "regression_gradient",
        regression_gradient, _regression_gradient,
        lambda i: f"""The loss of a weight vector w is {_MSE_TEXT} ({word(i["x"].shape[0])} samples). At w =
            `w0`, give `loss` (a 0-d tensor) and `grad`, the vector of partial derivatives of the loss
            with respect to the elements of w.""",
        lambda i: ({"loss": f32(), "grad": f32(*_dims(i["w0"]))},), regression_inputs),
    3: _level(
        "regression_gradient",
        regression_step, _regression_step,
        lambda i: f"""The loss of a weight vector w is {_MSE_TEXT}. Starting at w = `w0`, take one step of
            plain gradient descent with step size `lr` (subtract lr times the gradient of the loss). Give
            the new weights `w1` and `loss_after`, the loss at w1 (a 0-d tensor).""",
        lambda i: ({"w1": f32(*_dims(i["w0"])), "loss_after": f32()},), _sample_regression_lr),
    4: _level(
        "regression_gradient",
        best_learning_rate, _best_learning_rate,
        lambda i: f"""The loss of a weight vector w is {_MSE_TEXT}. One step of plain gradient descent from
            `w0` with step size s gives w0 - s times the gradient of the loss at w0. Of the candidate step
            sizes in `lrs`, give `lr`, the one whose step reaches the lowest loss (the smaller step size if
            two reach the same loss), and `loss_after`, that loss.""",
        lambda i: ({"lr": PY_FLOAT, "loss_after": PY_FLOAT},), _sample_lrs, refuse=_lr_clear),
    5: LINE_SEARCH_DESCENT,
}, levels="L1 backward on the stated loss; L2 the gradient of the loss described; L3 one descent step "
          "and the loss after it; L4 the best of candidate step sizes (ties: the smaller); L5 two "
          "steps of steepest descent with the exactly best step size (the curvature along the gradient "
          "derived), the steps, weights and loss after them")


# accumulated_gradient ----------------------------------------------------------------------------
def _cubic(ws):
    return sum((w ** 3 - w for w in ws), Fraction(0))


def accumulated_step(w0, lr):
    w = w0.clone().requires_grad_(True)
    loss = (w ** 3 - w).sum()
    loss.backward(retain_graph=True)
    (w ** 2).sum().backward()
    w1 = (w - lr * w.grad).detach()
    return {"rows": [{"w1": w1, "loss_after": (w1 ** 3 - w1).sum()}]}


def _accumulated_step(w0, lr):
    w1 = elementwise(lambda e: e - Fraction(lr) * (3 * e * e - 1 + 2 * e), values(w0))
    flat = [e for row in w1 for e in row] if isinstance(w1[0], list) else w1
    return [{"w1": ExactTensor.of("float32", w1), "loss_after": ExactTensor.of("float32", _cubic(flat))}]


def _sample_accumulated_lr(draw: Draw, level: int) -> dict:
    return {"w0": _elementwise_input(-2.5, 2.5, 2)(draw, level)["x0"],
            "lr": draw.choice((0.125, 0.0625, 0.25))}


def overshoot_passes(w0, lrs):
    rows = []
    for lr in lrs:
        w = w0.clone().requires_grad_(True)
        loss = (w ** 3 - w).sum()
        start, found = float(loss.detach()), -1
        for passes in range(1, 13):
            loss.backward(retain_graph=True)
            stepped = (w - lr * w.grad).detach()
            if float((stepped ** 3 - stepped).sum()) > start:
                found = passes
                break
        rows.append({"passes": found})
    return {"rows": rows}


def _first_overshoot(ws, lr) -> int:
    start = _cubic(ws)
    return next((passes for passes in range(1, 13)
                 if _cubic([w - Fraction(lr) * passes * (3 * w * w - 1) for w in ws]) > start), -1)


def _overshoot_passes(w0, lrs):
    return [{"passes": _first_overshoot(values(w0), lr)} for lr in lrs]


OVERSHOOT_GRID = 12
"""The learning rates of accumulated_gradient L4 are multiples of 2**-OVERSHOOT_GRID (exact in
float32, and fine enough that every pass count from 2 to 12 has one)."""


def _overshoot_window(ws: list[Fraction]) -> tuple[float, float] | None:
    """The trial steps a (w0 - a * gradient) at which L rises above L(w0), as an open interval
    (a1, a2) in floats (a2 may be inf), or None. L(w0 - a g) - L(w0) = a * (3 a B - S2 - a^2 S3)
    with g = 3 w0^2 - 1, S2 = sum g^2, B = sum w0 g^2, S3 = sum g^3: the quadratic's roots."""
    g = [3 * w * w - 1 for w in ws]
    s2, s3 = sum(e * e for e in g), sum(e ** 3 for e in g)
    b = sum(w * e * e for w, e in zip(ws, g, strict=True))
    if s3 == 0:
        return (float(s2 / (3 * b)), math.inf) if b > 0 else None
    disc = 9 * b * b - 4 * s3 * s2
    if disc <= 0 or (s3 > 0 and b <= 0):
        return None
    root = math.sqrt(disc)
    return float((3 * b - root) / (2 * s3)), (math.inf if s3 < 0 else float((3 * b + root) / (2 * s3)))


OVERSHOOT_RATES = 3
"""Step sizes per accumulated_gradient L4 instance, a row of the answer each: with one, the -1 of
one instance in six was a whole key that the first 24 instances held 8 times."""


def _sample_overshoot(draw: Draw, level: int) -> dict:
    """w0 on [-1/2, 1] (below -1/sqrt(3) an element falls without bound, so the sum almost never
    rises: every instance of the old [-1.5, 1.5] sampler answered -1), refused unless the trial
    steps that end above L(w0) form a window at least half as wide as its start; only then are the
    branches drawn: for each step size, one in six an lr whose 12 passes all stop short of the
    window (-1), the rest an lr that first enters it at a pass count drawn from 2..12."""
    w0 = dyadic_tensor(draw, (3 + level,), -0.5, 1, 3, nonzero=True)
    window = _overshoot_window(values(w0))
    if window is None or window[1] < 1.5 * window[0]:
        raise Reject("no trial step rises over a window wide enough for a pass count to land in")
    lrs = []
    for _ in range(OVERSHOOT_RATES):
        passes = -1 if draw.chance(1, 6) else draw.integer(2, 12)
        target = window[0] / (draw.integer(13, 18) if passes == -1 else passes - 0.5)
        lr = math.floor(target * 2**OVERSHOOT_GRID) / 2**OVERSHOOT_GRID
        if _first_overshoot(values(w0), lr) != passes:  # float rounding of the window's roots
            raise Reject(f"the learning rate drawn for {passes} passes gives another count")
        lrs.append(lr)
    return {"w0": w0, "lrs": lrs}


def _overshoot_clear(inputs: Inputs) -> str | None:
    ws = values(inputs["w0"])
    start = _cubic(ws)
    for lr in map(Fraction, inputs["lrs"]):
        for passes in range(1, 13):
            if abs(_cubic([w - lr * passes * (3 * w * w - 1) for w in ws]) - start) < Fraction(1, 1000):
                return "a stepped loss is within 1/1000 of the start: the comparison would hinge on rounding"
        if _first_overshoot(ws, lr) == 1:
            return "the first pass already overshoots: no search"
    return None


def _passes_none(task) -> bool:
    return any(row["passes"] == -1 for row in task.expected["rows"])


def newton_iterations(w0):
    import torch

    w = w0.clone().requires_grad_(True)
    for _ in range(3):
        (g,) = torch.autograd.grad((w ** 3 - w).sum(), w, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), w)
        w = (w - g / h).detach().requires_grad_(True)
    w = w.detach()
    return {"rows": [{"w3": w, "loss_after": (w ** 3 - w).sum()}]}


def _newton_iterations(w0):
    def run(e):
        for _ in range(3):
            e = e - (3 * e * e - 1) / (6 * e)
        return e

    w3 = elementwise(run, values(w0))
    flat = [e for row in w3 for e in row] if isinstance(w3[0], list) else w3
    return [{"w3": ExactTensor.of("float32", w3), "loss_after": ExactTensor.of("float32", _cubic(flat))}]


def _newton_defined(inputs: Inputs) -> str | None:
    flat = values(inputs["w0"])
    flat = [e for row in flat for e in row] if isinstance(flat[0], list) else flat
    finals = []
    for e in flat:
        for _ in range(3):
            if abs(e) < Fraction(1, 8):
                return "an iterate comes within 1/8 of 0, where the second derivative vanishes"
            e = e - (3 * e * e - 1) / (6 * e)
        finals.append(e)
    if abs(_cubic(finals)) < Fraction(1, 2):
        return "the terms of the final loss nearly cancel: its float32 value would use much of the tolerance"
    return None


ACCUMULATED_GRADIENT = leveled(ACCUMULATED_GRADIENT, {
    2: _level(
        "accumulated_gradient",
        accumulated_gradient, _accumulated_gradient,
        """Let L(w) be the sum over the elements of w of w^3 - w. A gradient buffer starts at zero, and
            each backward pass adds the gradient of L at w = `w0` to it, without the buffer ever being
            reset. Give `after_one`, the buffer after one pass, and `after_two`, the buffer after a second
            pass.""",
        lambda i: ({"after_one": f32(*_dims(i["w0"])), "after_two": f32(*_dims(i["w0"]))},),
        _renamed(_elementwise_input(-2.5, 2.5, 2), "w0")),
    3: _level(
        "accumulated_gradient",
        accumulated_step, _accumulated_step,
        """A gradient buffer starts at zero. At w = `w0`, one backward pass adds the gradient of L1(w) =
            sum(w^3 - w) to it, and a second pass adds the gradient of L2(w) = sum(w^2), the buffer not
            being reset in between. Then one plain gradient-descent step uses the buffer: w1 = w0 - lr *
            buffer, with `lr` given. Give `w1` and `loss_after`, L1 at w1 (a 0-d tensor).""",
        lambda i: ({"w1": f32(*_dims(i["w0"])), "loss_after": f32()},), _sample_accumulated_lr),
    4: _level(
        "accumulated_gradient",
        overshoot_passes, _overshoot_passes,
        """Let L(w) = sum(w^3 - w). Backward passes of L at w = `w0` accumulate into a gradient buffer
            that starts at zero and is never reset, so after n passes the buffer holds n times the
            gradient. After each pass, consider the trial step w0 - lr * buffer (w itself stays at w0).
            For each step size lr in `lrs` (a row of the answer each, in order, each with its own buffer
            starting at zero), give `passes`, the smallest n from 1 to 12 for which L at that trial step
            is strictly greater than L(w0), or -1 if there is none.""",
        lambda i: tuple({"passes": PY_INT} for _ in i["lrs"]), _sample_overshoot, refuse=_overshoot_clear),
    5: _level(
        "accumulated_gradient",
        newton_iterations, _newton_iterations,
        """Let L(w) = sum(w^3 - w), a sum of independent terms. Starting at w = `w0`, update every element
            three times by dividing the first derivative of its term by the second derivative of its term,
            at the current value, and subtracting the quotient. Give `w3`, the weights after the three
            updates, and `loss_after`, L at w3 (a 0-d tensor).""",
        lambda i: ({"w3": f32(*_dims(i["w0"])), "loss_after": f32()},),
        _renamed(_elementwise_input(-2.5, 2.5, 2), "w0"), refuse=_newton_defined),
}, levels="L1 backward twice without zeroing; L2 accumulation described; L3 two losses accumulated, "
          "then a step and its loss; L4 the fewest accumulated passes whose step overshoots, at each of "
          "three step sizes, or -1; L5 "
          "three elementwise Newton updates from first and second derivatives",
   branches=(Branch("no pass count overshoots at some step size", _passes_none, Fraction(1, 10), (4,)),))

# partial_derivatives ------------------------------------------------------------------------------
def _partials(pairs):
    return [(b + 2 * a * b, a + a * a - 3 * b * b) for a, b in pairs]


def directional_slope(a0, b0):
    import torch

    a = a0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    grad_a, grad_b = torch.autograd.grad((a * b + a ** 2 * b - b ** 3).sum(), (a, b))
    return {"rows": [{"slope": float((grad_a - grad_b).sum()),
                      "squared_norm": float((grad_a ** 2).sum() + (grad_b ** 2).sum())}]}


def _directional_slope(a0, b0):
    grads = _partials(list(zip(values(a0), values(b0), strict=True)))
    return [{"slope": sum((ga - gb for ga, gb in grads), Fraction(0)),
             "squared_norm": sum((ga * ga + gb * gb for ga, gb in grads), Fraction(0))}]


def steepest_element(a0, b0):
    import torch

    a = a0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    grad_a, grad_b = torch.autograd.grad((a * b + a ** 2 * b - b ** 3).sum(), (a, b))
    norms = grad_a ** 2 + grad_b ** 2
    best = int(norms.argmax())
    return {"rows": [{"element": best, "squared_norm": float(norms[best])}]}


def _element_norms(a0, b0):
    return [ga * ga + gb * gb for ga, gb in _partials(list(zip(values(a0), values(b0), strict=True)))]


def _steepest_element(a0, b0):
    norms = _element_norms(a0, b0)
    best = norms.index(max(norms))
    return [{"element": best, "squared_norm": norms[best]}]


def _steepest_unique(inputs: Inputs) -> str | None:
    norms = _element_norms(inputs["a0"], inputs["b0"])
    return "two elements share the steepest gradient" if norms.count(max(norms)) > 1 else None


def _steepest_first(inputs: Inputs) -> str | None:
    norms = _element_norms(inputs["a0"], inputs["b0"])
    return "the first element is the steepest: element is 0" if norms.index(max(norms)) == 0 else None


_F_TEXT = "f(a, b) = sum over i of (a_i*b_i + a_i^2*b_i - b_i^3)"

PARTIAL_DERIVATIVES = leveled(PARTIAL_DERIVATIVES, {
    2: _level(
        "partial_derivatives",
        partial_derivatives, _partial_derivatives,
        f"""Let {_F_TEXT}, for vectors a and b of the same length. At a = `a0`, b = `b0`, give `f` (a 0-d
            tensor) and the vectors `grad_a` and `grad_b` of its partial derivatives with respect to each
            a_i and each b_i.""",
        lambda i: ({"f": f32(), "grad_a": f32(*_dims(i["a0"])), "grad_b": f32(*_dims(i["a0"]))},),
        _sample_pair),
    3: _level(
        "partial_derivatives",
        directional_slope, _directional_slope,
        f"""Let {_F_TEXT}. At a = `a0`, b = `b0`, give `slope`, the rate of change of f when every a_i
            increases and every b_i decreases at unit speed at the same time (the derivative of f(a0 + t,
            b0 - t) at t = 0, t added to every element), and `squared_norm`, the sum of the squares of all
            partial derivatives of f there.""",
        lambda i: ({"slope": PY_FLOAT, "squared_norm": PY_FLOAT},), _sample_pair),
    4: _level(
        "partial_derivatives",
        steepest_element, _steepest_element,
        f"""Let {_F_TEXT}. At a = `a0`, b = `b0`, give `element`, the index i for which the partial
            derivatives of f with respect to a_i and b_i have the largest sum of squares, and
            `squared_norm`, that sum of squares.""",
        lambda i: ({"element": PY_INT, "squared_norm": PY_FLOAT},), _sample_pair, refuse=_steepest_unique,
        zero_reason=_steepest_first),
    5: GRADIENT_NORM_DESCENT,
}, levels="L1 autograd.grad of the stated function; L2 the partial derivatives asked by their "
          "definition; L3 a directional derivative and the gradient's squared norm; L4 the element "
          "with the steepest gradient; L5 a coupled function: the gradient of its squared gradient "
          "norm (a Hessian-vector product) and the number of negative Hessian eigenvalues (varies: "
          "branches below)",
   branches=(Branch("fewer negative eigenvalues than n", negative_count(-99, -1), Fraction(1, 10), (5,)),
             Branch("more negative eigenvalues than n", negative_count(1, 99), Fraction(1, 10), (5,))))


# detached_gradient --------------------------------------------------------------------------------
def straight_through(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    y = x + (torch.round(x) - x).detach()
    loss = (y ** 2).sum()
    (grad,) = torch.autograd.grad(loss, x)
    return {"rows": [{"loss": loss.detach(), "grad": grad}]}


def _straight_through(x0):
    v = values(x0)
    flat = [e for row in v for e in row] if isinstance(v[0], list) else v
    return [{"loss": ExactTensor.of("float32", sum((Fraction(round(e)) ** 2 for e in flat), Fraction(0))),
             "grad": ExactTensor.of("float32", elementwise(lambda e: Fraction(2 * round(e)), v))}]


def _sample_straight(draw: Draw, level: int) -> dict:
    x = values(_elementwise_input(-3.5, 3.5, 2)(draw, level)["x0"])
    return {"x0": tensor("float32", x)}


def _straight_has_halves(inputs: Inputs) -> str | None:
    v = values(inputs["x0"])
    flat = [e for row in v for e in row] if isinstance(v[0], list) else v
    if not any(e.denominator == 2 for e in flat):
        return "no element is an exact half: the rounding rule is not tested"
    if sum(1 for e in flat if round(e) == 0) * 2 >= len(flat):
        return "half or more of the elements round to 0: most gradients would be 0"
    return None


def detached_power(x0, targets):
    import torch

    x = x0.clone().requires_grad_(True)
    grads = [torch.autograd.grad((x ** k * x.detach() ** (4 - k)).sum(), x)[0] for k in range(1, 5)]
    return {"rows": [{"k": next((k for k, g in enumerate(grads, 1) if torch.equal(g, target)), -1)}
                     for target in targets]}


def _detached_power(x0, targets):
    v = values(x0)
    grads = [elementwise(lambda e, k=k: k * e ** 3, v) for k in range(1, 5)]
    return [{"k": next((k for k, g in enumerate(grads, 1) if g == t), -1)} for t in values(targets)]


DETACHED_TARGETS = 3
"""Targets per detached_gradient L4 instance, a row of the answer each: with one target, one k of
four (or -1) was the whole key, so guessing it passed a quarter of the instances or more."""


def _sample_detached_power(draw: Draw, level: int) -> dict:
    """Each target is g_k for a k drawn from 1..4, or (1 in 8) g_k with one element moved by 1/4,
    which no k gives."""
    x = _elementwise_input(-2.5, 2.5, 2)(draw, level)["x0"]
    targets = []
    for _ in range(DETACHED_TARGETS):
        k = draw.integer(1, 4)
        flat = [k * e ** 3 for e in shape_and_flat(values(x))[1]]
        if draw.chance(1, 8):
            flat[draw.below(len(flat))] += Fraction(1, 4)
        targets.append(reshape([float(e) for e in flat], x.shape))
    return {"x0": x, "targets": tensor("float32", targets)}


def _k_none(task) -> bool:
    return any(row["k"] == -1 for row in task.expected["rows"])


DETACHED_GRADIENT = leveled(DETACHED_GRADIENT, {
    2: _level(
        "detached_gradient",
        detached_gradient, _detached_gradient,
        """Write sg(.) for a value that is used in the forward computation but treated as a constant
            when differentiating (no gradient flows through it). With x = `x0` and y = x^2 elementwise,
            give `grad_z`, the gradient with respect to x of z = sum(sg(y) * x + y), and `grad_w`, the
            gradient with respect to x of w = sum(x^3 * sg(x)).""",
        lambda i: ({"grad_z": f32(*_dims(i["x0"])), "grad_w": f32(*_dims(i["x0"]))},),
        _elementwise_input(-2.5, 2.5, 2)),
    3: _level(
        "detached_gradient",
        straight_through, _straight_through,
        """Write sg(.) for a value used in the forward computation but treated as a constant when
            differentiating. With x = `x0`, let y = x + sg(r(x) - x), where r rounds to the nearest integer
            with halves going to the even neighbour, so y's values are the rounded x. Give `loss` = sum(y^2)
            (a 0-d tensor) and `grad`, its gradient with respect to x.""",
        lambda i: ({"loss": f32(), "grad": f32(*_dims(i["x0"]))},), _sample_straight,
        refuse=_straight_has_halves),
    4: _level(
        "detached_gradient",
        detached_power, _detached_power,
        lambda i: f"""Write sg(.) for a value used in the forward computation but treated as a constant
            when differentiating. With x = `x0`, for k = 1, 2, 3, 4 let g_k be the gradient with respect to
            x of sum(x^k * sg(x)^(4 - k)). `targets` stacks {word(DETACHED_TARGETS)} tensors of x's shape
            along its first dimension (targets[0], targets[1], ...). For each of them (a row of the
            answer each, in order), give `k`, the k for which g_k equals that target exactly (element for
            element), the smallest if several do, or -1 if none does.""",
        lambda i: tuple({"k": PY_INT} for _ in range(DETACHED_TARGETS)), _sample_detached_power),
    5: BOOTSTRAPPED_FIXED_POINT,
}, levels="L1 detach named in the expressions; L2 stop-gradient described; L3 a straight-through "
          "rounding estimator; L4 which power split reproduces each of three target gradients, or -1; "
          "L5 the "
          "fixed point of a regression whose bootstrapped target is held constant (derived as a linear "
          "system, not the loss minimiser) and the full gradient there",
   branches=(Branch("no k gives a target", _k_none, Fraction(1, 10), (4,)),))

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
    return {**_elementwise_input(-2, 2.5, 2)(draw, level), "h": draw.choice((0.25, 0.5, -0.25, -0.5, 0.125))}


_POLY_TEXT = "f(x) = sum over the elements of x of (x^4 - 2x^3 + x)"

SECOND_DERIVATIVE = leveled(SECOND_DERIVATIVE, {
    2: _level(
        "second_derivative",
        second_derivative, _second_derivative,
        f"""Let {_POLY_TEXT}. At x = `x0`, give `first`, the gradient of f with respect to x, and `second`,
            for each element the second derivative of f with respect to that element (the diagonal of the
            matrix of second derivatives).""",
        lambda i: ({"first": f32(*_dims(i["x0"])), "second": f32(*_dims(i["x0"]))},),
        _elementwise_input(-2, 2.5, 2)),
    3: _level(
        "second_derivative",
        newton_step, _newton_step,
        f"""Let {_POLY_TEXT}, a sum of independent terms. From x = `x0`, move every element by minus the
            first derivative of its term divided by the second derivative of its term (both at x0): call
            the result x1. Give `x1` and `slope_after`, the gradient of f at x1.""",
        lambda i: ({"x1": f32(*_dims(i["x0"])), "slope_after": f32(*_dims(i["x0"]))},),
        _elementwise_input(-2, 2.5, 2), refuse=_newton_well_defined),
    4: _level(
        "second_derivative",
        newton_steps_needed, _newton_steps_needed,
        f"""Let {_POLY_TEXT}, a sum of independent terms. Repeat from x = `x0`: move every element by minus
            the first derivative of its term divided by the second derivative of its term (at the current
            x). Give `steps`, the smallest number of such updates after which the absolute value
            of the gradient of f is strictly below `tolerance` at every element (here it is at most 6), and
            `x_final`, x after that many updates.""",
        lambda i: ({"steps": PY_INT, "x_final": f32(*_dims(i["x0"]))},), _sample_newton_steps,
        refuse=_newton_converges_clearly),
    5: _level(
        "second_derivative",
        taylor_check, _taylor_check,
        f"""Let {_POLY_TEXT}. Give `third`, for each element of x = `x0` the third derivative of f with
            respect to that element, and `taylor_error`: the exact value of f(x0 + h) minus its second-order
            Taylor prediction from x0 (f(x0) plus the sum of first derivative times h plus the sum of second
            derivative times h^2 / 2, every element moved by the same `h`).""",
        lambda i: ({"third": f32(*_dims(i["x0"])), "taylor_error": PY_FLOAT},), _sample_taylor),
}, levels="L1 double differentiation with create_graph named; L2 the diagonal of second derivatives "
          "asked; L3 one Newton step and the slope after it; L4 the fewest Newton steps to a tolerance; "
          "L5 third derivatives and the exact remainder of the second-order Taylor prediction")

# kink_gradients -----------------------------------------------------------------------------------
_KINK_RELU = "the derivative of max(t, 0) at t = 0 is 0"
_KINK_ABS = "the derivative of |t| at t = 0 is 0"
_KINK_CLAMP = ("limiting t to an interval [lo, hi] passes the gradient (derivative 1) wherever "
               "lo <= t <= hi, both ends included, and blocks it (0) outside")
_KINK_MAX = "the gradient of the maximum of several values is split evenly among all the values equal to it"


def _kink_rules(*rules: str) -> str:
    """The kink conventions a question needs (and only those)."""
    return "At a kink, use " + ("this convention: " if len(rules) == 1 else "these conventions: ") + \
        "; ".join(rules) + "."


_KINK_RULES = _kink_rules(_KINK_RELU, _KINK_ABS, _KINK_CLAMP, _KINK_MAX)


def clamped_max_and_product(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    (of_max,) = torch.autograd.grad(x.clamp(0.0, 2.0).max(), x)
    (of_product,) = torch.autograd.grad((torch.relu(x) * x.abs()).sum(), x)
    return {"rows": [{"of_max": of_max, "of_product": of_product}]}


def _clamped_max_and_product(x0):
    v = values(x0)
    clamped = [min(max(e, Fraction(0)), Fraction(2)) for e in v]
    top = max(clamped)
    share = Fraction(1, clamped.count(top))
    return [{"of_max": ExactTensor.of("float32", [share if c == top and 0 <= e <= 2 else Fraction(0)
                                                  for e, c in zip(v, clamped, strict=True)]),
             "of_product": ExactTensor.of("float32", [2 * e if e > 0 else Fraction(0) for e in v])}]


def _above_the_clamp(inputs: Inputs) -> str | None:
    if not any(e > 2 for e in values(inputs["x0"])):
        return "no element lies above 2: the clamped maximum's tie with blocked elements is not tested"
    return _maximum_tied(inputs)


def smallest_passing_bound(x0):
    import torch

    n = x0.numel()
    for c in [k / 2 for k in range(0, 2 * int(x0.abs().max()) + 3)]:
        x = x0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(x.clamp(-c, c).sum(), x)
        if int((g == 1).sum()) >= (n + 1) // 2:
            return {"rows": [{"bound": c, "passing": int((g == 1).sum())}]}
    return {"rows": [{"bound": -1.0, "passing": -1}]}


def _smallest_passing_bound(x0):
    v = values(x0)
    c = sorted(abs(e) for e in v)[(len(v) + 1) // 2 - 1]
    return [{"bound": c, "passing": sum(1 for e in v if abs(e) <= c)}]


def top_three_sum(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    value = torch.sort(x, descending=True, stable=True).values[:3].sum()
    (grad,) = torch.autograd.grad(value, x)
    return {"rows": [{"value": float(value.detach()), "grad": grad}]}


def _top_three_sum(x0):
    v = values(x0)
    chosen = sorted(range(len(v)), key=lambda i: (-v[i], i))[:3]
    return [{"value": sum((v[i] for i in chosen), Fraction(0)),
             "grad": ExactTensor.of("float32", [Fraction(1) if i in chosen else Fraction(0)
                                               for i in range(len(v))])}]


def _sample_top_three(draw: Draw, level: int) -> dict:
    v = dyadic_list(draw, 5 + level, -2, 3 + level / 2, 1)
    order = sorted(range(len(v)), key=lambda i: -v[i])
    v[order[3]] = v[order[2]]  # the third-largest value is shared: the stated tie rule decides
    return {"x0": tensor("float32", v)}


def _boundary_tied(inputs: Inputs) -> str | None:
    ordered = sorted(values(inputs["x0"]), reverse=True)
    if ordered[2] != ordered[3]:
        return "the third-largest value is not shared: the tie rule is not tested"
    return None


KINK_GRADIENTS = leveled(KINK_GRADIENTS, {
    2: _level(
        "kink_gradients",
        kink_gradients, _kink_gradients,
        f"""With x = `x0`, give the gradient with respect to x of: `relu`, the sum of max(x_i, 0); `abs`,
            the sum of |x_i|; `clamp`, the sum of x_i limited to [0, 2]; and `max`, the largest element of x.
            {_KINK_RULES}""",
        lambda i: ({name: f32(*_dims(i["x0"])) for name in ("relu", "abs", "clamp", "max")},),
        _sample_kinks, refuse=_maximum_tied),
    3: _level(
        "kink_gradients",
        clamped_max_and_product, _clamped_max_and_product,
        f"""With x = `x0`, give `of_max`, the gradient with respect to x of the largest element of c, where
            c is x with every element limited to [0, 2]; and `of_product`, the gradient of the sum over i of
            max(x_i, 0) * |x_i| (the product rule applies, each factor with the conventions below).
            {_KINK_RULES}""",
        lambda i: ({"of_max": f32(*_dims(i["x0"])), "of_product": f32(*_dims(i["x0"]))},), _sample_kinks,
        refuse=_above_the_clamp),
    4: _level(
        "kink_gradients",
        smallest_passing_bound, _smallest_passing_bound,
        f"""With x = `x0` and a number c >= 0, let g(c) be the gradient with respect to x of the sum of the
            elements of x each limited to [-c, c]. Give `bound`, the smallest c >= 0 for which at least half
            of the entries of g(c) (half the element count, rounded up) equal 1, and `passing`, the
            number of entries of g(bound) equal to 1. {_kink_rules(_KINK_CLAMP)}""",
        lambda i: ({"bound": PY_FLOAT, "passing": PY_INT},), _sample_kinks),
    5: _level(
        "kink_gradients",
        top_three_sum, _top_three_sum,
        """With x = `x0`, let T(x) be the sum of the three largest elements of x, where among equal
            elements the one with the smaller index counts as the larger (so exactly three elements are
            counted). Give `value`, T at x0, and `grad`, the gradient of T with respect to x at x0, the
            choice of the counted elements being held fixed while differentiating.""",
        lambda i: ({"value": PY_FLOAT, "grad": f32(*_dims(i["x0"]))},), _sample_top_three,
        refuse=_boundary_tied),
}, levels="L1 torch's kink conventions to report; L2 the same functions with the conventions stated; L3 "
          "a maximum of clamped values (ties with blocked elements) and a product of kinked factors; L4 "
          "the smallest clamp bound passing half the gradient; L5 the gradient of a top-three sum with a "
          "stated tie rule at the boundary")

# mlp_loss_gradients -------------------------------------------------------------------------------
def _mp(nested):
    """A nested list of numbers as mpfs at the working precision, converted once (an mpf stays
    itself: its exact value round-trips, so converting it again would only cost time)."""
    if isinstance(nested, list):
        return [_mp(e) for e in nested]
    return nested if isinstance(nested, mpmath.mpf) else hp(nested)


def _mlp_exact(xv, labels, params):
    """Loss, gradients and pre-activations of linear -> relu -> linear -> cross-entropy, in mpmath
    (params: nested lists w1, b1, w2, b2 of Fractions or mpfs)."""
    xv = _mp(xv)
    w1, b1, w2, b2 = _mp(list(params))
    pre = [[mpmath.fsum(a * b for a, b in zip(row, unit, strict=True)) + c
            for unit, c in zip(w1, b1, strict=True)] for row in xv]
    hidden = [[h if h > 0 else mpmath.mpf(0) for h in row] for row in pre]
    logits = [[mpmath.fsum(a * b for a, b in zip(row, unit, strict=True)) + c
               for unit, c in zip(w2, b2, strict=True)] for row in hidden]
    n = len(logits)
    probabilities = [softmax(row) for row in logits]
    loss = -mpmath.fsum(mpmath.log(p[t]) for p, t in zip(probabilities, labels, strict=True)) / n
    d_logits = [[(p - (1 if k == t else 0)) / n for k, p in enumerate(ps)]
                for ps, t in zip(probabilities, labels, strict=True)]
    d_hidden = [[mpmath.fsum(d * w2[k][j] for k, d in enumerate(row)) if pre[i][j] > 0 else mpmath.mpf(0)
                 for j in range(len(w1))] for i, row in enumerate(d_logits)]

    def outer(grads, inputs):
        return [[mpmath.fsum(g[k] * a[j] for g, a in zip(grads, inputs, strict=True))
                 for j in range(len(inputs[0]))] for k in range(len(grads[0]))]

    grads = (outer(d_hidden, xv), [mpmath.fsum(c) for c in transpose(d_hidden)], outer(d_logits, hidden),
             [mpmath.fsum(c) for c in transpose(d_logits)])
    return loss, grads, pre, logits


def _update(params, steps, lr):
    """params minus lr times steps, elementwise over the nested lists."""
    def sub(p, s):
        return [sub(a, b) for a, b in zip(p, s, strict=True)] if isinstance(p, list) else _mp(p) - lr * s
    return [sub(p, s) for p, s in zip(params, steps, strict=True)]


_MLP_TENSORS = ("x", "target", "w1", "b1", "w2", "b2")


def _mlp_trajectory(inputs, steps, lr, momentum=0):
    """(loss, params, pre, logits) after each of ``steps`` heavy-ball steps (momentum 0: plain SGD).
    The refusal of a draw, the refusal of the built task and the independent check each walk the
    same trajectory: it is computed once (the arguments are immutable; do not mutate the result)."""
    return _trajectory(tuple(inputs[name] for name in _MLP_TENSORS), steps, lr, momentum)


@functools.lru_cache(maxsize=32)
def _trajectory(tensors, steps, lr, momentum):
    xv, labels = values(tensors[0]), values(tensors[1])
    params, velocity, out = [values(t) for t in tensors[2:]], None, []
    loss, grads, pre, logits = _mlp_exact(xv, labels, params)
    out.append((loss, params, pre, logits))
    for _ in range(steps):
        if velocity is None:
            velocity = grads
        else:
            velocity = _update(grads, velocity, -mpmath.mpf(momentum))  # grads + momentum * velocity
        params = _update(params, velocity, mpmath.mpf(lr))
        loss, grads, pre, logits = _mlp_exact(xv, labels, params)
        out.append((loss, params, pre, logits))
    return tuple(out)


def _mostly_alive(inputs: Inputs) -> str | None:
    """Refuse an instance whose first-layer gradient is mostly exactly zero (dead ReLUs)."""
    pre = _hidden_pre_activations(inputs["x"], inputs["w1"], inputs["b1"])
    xv = values(inputs["x"])
    hidden, features = len(pre[0]), len(xv[0])
    zeros = sum(1 for j in range(hidden) for f in range(features)
                if all(pre[s][j] <= 0 or xv[s][f] == 0 for s in range(len(xv))))
    if 2 * zeros >= hidden * features:
        return f"{zeros} of {hidden * features} first-layer gradients are exactly 0 (dead ReLUs)"
    return None


def _mlp_ok(inputs: Inputs) -> str | None:
    return _off_the_relu_kink(inputs) or _mostly_alive(inputs)


def _trajectory_clear(inputs: Inputs, steps: int, lr, momentum=0) -> str | None:
    problem = _mlp_ok(inputs)
    if problem is not None:
        return problem
    for _, _, pre, logits in _mlp_trajectory(inputs, steps, lr, momentum):
        if any(abs(h) < mpmath.mpf("1e-3") for row in pre for h in row):
            return "a pre-activation comes within 1e-3 of the ReLU kink along the way"
        for row in logits:
            top = sorted(row, reverse=True)
            if top[0] - top[1] < mpmath.mpf("1e-3"):
                return "two logits come within 1e-3: the predicted class would hinge on rounding"
    return None


def _mlp_forward_text(i):
    return f"""A classifier maps each row s of `x` to logits z_s = W2 h_s + b2, where h_s = max(0, W1 x_s +
        b1) elementwise (W1 = `w1` of shape {shape_text(i["w1"].shape)}, b1 = `b1`, W2 = `w2` of shape
        {shape_text(i["w2"].shape)}, b2 = `b2`). The loss is the mean over the {i["x"].shape[0]} samples s of
        (ln(sum over classes k of e^(z_s[k])) - z_s[target_s]), with the class indices in `target`."""


def mlp_sgd_step(x, target, w1, b1, w2, b2, lr):
    import torch
    import torch.nn.functional as F

    def loss_of(p):
        return F.cross_entropy(F.linear(torch.relu(F.linear(x, p[0], p[1])), p[2], p[3]), target)

    params = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)]
    grads = torch.autograd.grad(loss_of(params), params)
    new = [(p - lr * g).detach() for p, g in zip(params, grads, strict=True)]
    after = loss_of(new)
    return {"rows": [{"loss_after": after, "b2_after": new[3]}]}


def _mlp_sgd_step(x, target, w1, b1, w2, b2, lr):
    inputs = {"x": x, "target": target, "w1": w1, "b1": b1, "w2": w2, "b2": b2}
    loss, params, _, _ = _mlp_trajectory(inputs, 1, lr)[-1]
    return [{"loss_after": ExactTensor.of("float32", loss), "b2_after": ExactTensor.of("float32", params[3])}]


def _sample_mlp_lr(draw: Draw, level: int) -> dict:
    return {**_sample_mlp_loss(draw, level), "lr": draw.choice((0.5, 0.25, 1.0))}


def steps_to_fit(x, target, w1, b1, w2, b2, lrs):
    import torch
    import torch.nn.functional as F

    rows = []
    for lr in lrs:
        params, found = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)], -1
        for steps in range(0, 9):
            logits = F.linear(torch.relu(F.linear(x, params[0], params[1])), params[2], params[3])
            if bool((logits.argmax(dim=1) == target).all()):
                found = steps
                break
            grads = torch.autograd.grad(F.cross_entropy(logits, target), params)
            params = [(p - lr * g).detach().requires_grad_(True) for p, g in zip(params, grads, strict=True)]
        rows.append({"steps": found})
    return {"rows": rows}


def _fitted(logits, labels) -> bool:
    return all(row.index(max(row)) == t for row, t in zip(logits, labels, strict=True))


def _steps_to_fit(x, target, w1, b1, w2, b2, lrs):
    inputs, labels = {"x": x, "target": target, "w1": w1, "b1": b1, "w2": w2, "b2": b2}, values(target)
    return [{"steps": next((steps for steps, (_, _, _, logits) in enumerate(_mlp_trajectory(inputs, 8, lr))
                            if _fitted(logits, labels)), -1)} for lr in lrs]


FIT_LRS = (0.125, 0.25, 0.5, 1.0, 2.0)
"""mlp_loss_gradients L4 asks the fewest steps at three of these learning rates, a row each: with
one rate, -1 or 1 step was the whole key of a quarter of the instances or more."""


def _sample_mlp_lrs(draw: Draw, level: int) -> dict:
    return {**_sample_mlp_loss(draw, level), "lrs": sorted(draw.sample(FIT_LRS, 3))}


def _fit_clear(inputs: Inputs) -> str | None:
    network = {name: inputs[name] for name in _MLP_TENSORS}
    problem = _mlp_ok(network)
    if problem is not None:
        return problem
    if _fitted(_mlp_trajectory(network, 0, 0)[0][3], values(inputs["target"])):
        return "every sample is classified correctly before any step"
    for lr in inputs["lrs"]:
        problem = _trajectory_clear(network, 8, lr)
        if problem is not None:
            return problem
    if len({row["steps"] for row in _steps_to_fit(**inputs)}) == 1:
        return "every learning rate takes the same number of steps: a constant answer passes"
    return None


def _fit_none(task) -> bool:
    return any(row["steps"] == -1 for row in task.expected["rows"])


def mlp_momentum(x, target, w1, b1, w2, b2, lr, momentum):
    import torch
    import torch.nn.functional as F

    def loss_of(p):
        return F.cross_entropy(F.linear(torch.relu(F.linear(x, p[0], p[1])), p[2], p[3]), target)

    params = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)]
    velocity = None
    for _ in range(3):
        grads = torch.autograd.grad(loss_of(params), params)
        if velocity is None:
            velocity = list(grads)
        else:
            velocity = [momentum * v + g for v, g in zip(velocity, grads, strict=True)]
        params = [(p - lr * v).detach().requires_grad_(True) for p, v in zip(params, velocity, strict=True)]
    final = loss_of(params)
    return {"rows": [{"loss_final": final.detach(), "w2_final": params[2].detach()}]}


def _mlp_momentum(x, target, w1, b1, w2, b2, lr, momentum):
    inputs = {"x": x, "target": target, "w1": w1, "b1": b1, "w2": w2, "b2": b2}
    loss, params, _, _ = _mlp_trajectory(inputs, 3, lr, momentum)[-1]
    return [{"loss_final": ExactTensor.of("float32", loss), "w2_final": ExactTensor.of("float32", params[2])}]


def _sample_mlp_momentum(draw: Draw, level: int) -> dict:
    return {**_sample_mlp_loss(draw, level), "lr": draw.choice((0.5, 0.25)),
            "momentum": draw.choice((0.5, 0.75, 0.875))}


MLP_LOSS_GRADIENTS = leveled(MLP_LOSS_GRADIENTS, {
    2: _level(
        "mlp_loss_gradients",
        mlp_loss_gradients, _mlp_loss_gradients,
        lambda i: f"""{_mlp_forward_text(i)} At the given parameters, give the `loss` (a 0-d tensor) and its
            gradients `grad_w1`, `grad_b1`, `grad_w2` and `grad_b2` with respect to W1, b1, W2 and b2.""",
        lambda i: ({"loss": f32(), "grad_w1": f32(*_dims(i["w1"])), "grad_b1": f32(*_dims(i["b1"])),
                    "grad_w2": f32(*_dims(i["w2"])), "grad_b2": f32(*_dims(i["b2"]))},),
        _sample_mlp_loss, refuse=_mlp_ok),
    3: _level(
        "mlp_loss_gradients",
        mlp_sgd_step, _mlp_sgd_step,
        lambda i: f"""{_mlp_forward_text(i)} Take one plain gradient-descent step on all four parameters at
            once (each parameter minus `lr` times the loss's gradient with respect to it, all gradients
            taken at the given parameters). Give `loss_after`, the loss after the step (a 0-d tensor), and
            `b2_after`, the updated b2.""",
        lambda i: ({"loss_after": f32(), "b2_after": f32(*_dims(i["b2"]))},), _sample_mlp_lr,
        refuse=lambda i: _trajectory_clear(i, 1, i["lr"])),
    4: _level(
        "mlp_loss_gradients",
        steps_to_fit, _steps_to_fit,
        lambda i: f"""{_mlp_forward_text(i)} A sample is classified correctly when its largest logit is the
            one of its target class. Starting from the given parameters, repeatedly take plain
            gradient-descent steps on all four parameters at once (each parameter minus lr times the
            loss's gradient with respect to it). For each learning rate lr in `lrs` (a row of the answer
            each, in order, each run starting from the given parameters), give `steps`, the smallest
            number of steps from 0 to 8 after which every sample is classified correctly, or -1 if no
            number of steps up to 8 achieves it.""",
        lambda i: tuple({"steps": PY_INT} for _ in i["lrs"]), _sample_mlp_lrs, refuse=_fit_clear),
    5: _level(
        "mlp_loss_gradients",
        mlp_momentum, _mlp_momentum,
        lambda i: f"""{_mlp_forward_text(i)} Train all four parameters for three steps of gradient descent
            with a velocity: at each step compute the gradient g of the loss at the current parameters, set
            the velocity to g on the first step and to `momentum` times the previous velocity plus g
            afterwards, then subtract `lr` times the velocity from the parameters. Give `loss_final`, the
            loss after the three steps (a 0-d tensor), and `w2_final`, W2 after them.""",
        lambda i: ({"loss_final": f32(), "w2_final": f32(*_dims(i["w2"]))},), _sample_mlp_momentum,
        refuse=lambda i: _trajectory_clear(i, 3, i["lr"], i["momentum"])),
}, levels="L1 the modules and backward named; L2 the network and loss given by their formulas; L3 one "
          "descent step and the loss after it; L4 the fewest descent steps until every sample is "
          "classified correctly, at each of three learning rates, or -1; L5 three steps of descent with "
          "a velocity (heavy-ball momentum) described, to reproduce",
   branches=(Branch("no step count fits the batch at some rate", _fit_none, Fraction(1, 10), (4,)),))


# ------------------------------------------------------------------------------------ the table
FAMILIES = (
    REGRESSION_GRADIENT,
    ACCUMULATED_GRADIENT,
    PARTIAL_DERIVATIVES,
    DETACHED_GRADIENT,
    SECOND_DERIVATIVE,
    KINK_GRADIENTS,
    MLP_LOSS_GRADIENTS,
)
