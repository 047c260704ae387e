"""The regression_gradient family of autograd: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_FLOAT, Inputs, f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, matmul, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor, regression_inputs, word
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


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


LEVEL_1 = pytorch_level(
    "autograd",
    reference=regression_gradient,
    independent=_regression_gradient,
    question=lambda i: (
        f"""Make a leaf tensor w from `w0` that requires gradients, compute the mean squared
        error loss = mean((x @ w - y)^2) over the {word(i["x"].shape[0])} samples, and call loss.backward().
        Give the `loss` (a 0-d tensor) and `grad`, the gradient stored in w.grad."""
    ),
    answer=lambda i: ({"loss": f32(), "grad": f32(*dims(i["w0"]))},),
    sample=regression_inputs,
)


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


LEVEL_2 = pytorch_level(
    "autograd",
    regression_gradient,
    _regression_gradient,
    lambda i: f"""The loss of a weight vector w is {_MSE_TEXT} ({word(i["x"].shape[0])} samples). At w =
        `w0`, give `loss` (a 0-d tensor) and `grad`, the vector of partial derivatives of the loss
        with respect to the elements of w.""",
    lambda i: ({"loss": f32(), "grad": f32(*dims(i["w0"]))},),
    regression_inputs,
)


LEVEL_3 = pytorch_level(
    "autograd",
    regression_step,
    _regression_step,
    lambda i: f"""The loss of a weight vector w is {_MSE_TEXT}. Starting at w = `w0`, take one step of
        plain gradient descent with step size `lr` (subtract lr times the gradient of the loss). Give
        the new weights `w1` and `loss_after`, the loss at w1 (a 0-d tensor).""",
    lambda i: ({"w1": f32(*dims(i["w0"])), "loss_after": f32()},),
    _sample_regression_lr,
)


LEVEL_4 = pytorch_level(
    "autograd",
    best_learning_rate,
    _best_learning_rate,
    lambda i: f"""The loss of a weight vector w is {_MSE_TEXT}. One step of plain gradient descent from
        `w0` with step size s gives w0 - s times the gradient of the loss at w0. Of the candidate step
        sizes in `lrs`, give `lr`, the one whose step reaches the lowest loss (the smaller step size if
        two reach the same loss), and `loss_after`, that loss.""",
    lambda i: ({"lr": PY_FLOAT, "loss_after": PY_FLOAT},),
    _sample_lrs,
    refuse=_lr_clear,
)


# regression_gradient L5: two steps of steepest descent with the exactly best step size -------------
def line_search_descent(w0, x, y):
    import torch

    xd, yd = x.double(), y.double()

    def loss(w):
        return ((xd @ w - yd) ** 2).mean()

    w, steps = w0.double(), []
    for _ in range(2):
        w = w.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(loss(w), w, create_graph=True)
        (hg,) = torch.autograd.grad(g, w, grad_outputs=g.detach())   # the curvature along g, H @ g
        g = g.detach()
        step = float((g @ g) / (g @ hg))            # the minimiser of the loss along -g (a parabola)
        steps.append(step)
        w = (w - step * g).detach()
    return {"rows": [{"steps": torch.tensor(steps, dtype=torch.float32), "w2": w.float(),
                      "loss2": float(loss(w))}]}


def _line_search_descent(w0, x, y):
    vx, vy = values(x), values(y)
    count = len(vx)
    gram = [[sum((row[p] * row[q] for row in vx), Fraction(0)) for q in range(len(vx[0]))]
            for p in range(len(vx[0]))]
    w, steps = list(values(w0)), []
    for _ in range(2):
        residual = [sum((a * b for a, b in zip(row, w, strict=True)), Fraction(0)) - t
                    for row, t in zip(vx, vy, strict=True)]
        g = [Fraction(2, count) * sum((row[p] * e for row, e in zip(vx, residual, strict=True)), Fraction(0))
             for p in range(len(w))]
        curvature = Fraction(2, count) * sum((g[p] * gram[p][q] * g[q] for p in range(len(w))
                                              for q in range(len(w))), Fraction(0))
        step = sum((e * e for e in g), Fraction(0)) / curvature
        steps.append(step)
        w = [a - step * e for a, e in zip(w, g, strict=True)]
    loss = sum(((sum((a * b for a, b in zip(row, w, strict=True)), Fraction(0)) - t) ** 2
                for row, t in zip(vx, vy, strict=True)), Fraction(0)) / count
    return [{"steps": ExactTensor.of("float32", steps), "w2": ExactTensor.of("float32", w), "loss2": loss}]


def _sample_line_search(draw: Draw, level: int) -> dict:
    weights = draw.integer(3, 4)
    samples = draw.integer(weights + 2, weights + 4)
    return {"w0": dyadic_tensor(draw, (weights,), -1.5, 1.5, 2),
            "x": dyadic_tensor(draw, (samples, weights), -3, 3, 2),
            "y": dyadic_tensor(draw, (samples,), -3, 3, 2)}


def _line_search_clear(task) -> str | None:
    """The two step sizes must differ by more than the tolerance (else one step size reused passes)
    and the loss must stay well above zero. The named mistake, the curvature without the factor 2
    of the square, doubles every step: it fails on every instance by construction."""
    row = task.expected["rows"][0]
    s1, s2 = row["steps"].data
    if abs(s1 - s2) <= 0.01 * max(s1, s2) or row["loss2"] < 1 / 16:
        return "the two best steps are nearly equal, or the loss after them is nearly zero"
    return None


LEVEL_5 = pytorch_level(
    "autograd",
    line_search_descent,
    _line_search_descent,
    lambda i: """The loss of a weight vector w is the mean over the samples of the squared difference
        between the prediction (the dot product of the sample's row of `x` with w) and the sample's target
        in `y`. Starting at w = `w0`, take two steps of steepest descent: each step moves from the current
        w to w - s*G, where G is the gradient of the loss at the current w and s > 0 is the step size for
        which the loss at w - s*G is the smallest possible (over all real s, for that step). Give `steps`,
        the two step sizes in order, `w2`, the weights after the second step, and `loss2`, the loss there.""",
    lambda i: ({"steps": f32(2), "w2": f32(i["w0"].shape[0]), "loss2": PY_FLOAT},),
    _sample_line_search,
    reject=_line_search_clear,
)


REGRESSION_GRADIENT = five_levels(
    "regression_gradient",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 backward on the stated loss; L2 the gradient of the loss described; L3 one descent step "
          "and the loss after it; L4 the best of candidate step sizes (ties: the smaller); L5 two "
          "steps of steepest descent with the exactly best step size (the curvature along the gradient "
          "derived), the steps, weights and loss after them",
)
