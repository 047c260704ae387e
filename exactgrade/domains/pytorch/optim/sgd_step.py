"""The sgd_step family of optim: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_FLOAT, f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, matmul, transpose, values
from exactgrade.domains.pytorch.optim.shared import LOSS_MATH, mse_gradient
from exactgrade.domains.pytorch.sampling import regression_inputs
from exactgrade.domains.pytorch.shared import dims, solve
from exactgrade.family import five_levels


# pt-040 -------------------------------------------------------------------------------------------
def sgd_step(w0, x, y):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=0.1, weight_decay=0.01)
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    return {"rows": [{"w": w.detach(), "grad": w.grad}]}


def _sgd_step(w0, x, y):
    w = values(w0)
    grad = mse_gradient(w, values(x), values(y))
    lr, decay = Fraction(1, 10), Fraction(1, 100)
    return [{
        "w": ExactTensor.of("float32", [p - lr * (g + decay * p) for p, g in zip(w, grad, strict=True)]),
        "grad": ExactTensor.of("float32", grad),  # weight decay enters the update, not .grad
    }]


_STEP_QUESTION = """Make a leaf tensor w from `w0` that requires gradients and an optimiser
    torch.optim.SGD([w], lr=0.1, weight_decay=0.01). Compute loss = mean((x @ w - y)^2), call
    loss.backward() and take one optimiser step. Give the updated parameter `w` and `grad`, the
    gradient stored in w.grad."""

LEVEL_1 = pytorch_level(
    "optim",
    reference=sgd_step,
    independent=_sgd_step,
    question=_STEP_QUESTION,
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "grad": f32(*dims(i["w0"]))},),
    sample=regression_inputs,
)


# sgd_step ----------------------------------------------------------------------------------------
_SGD_RULE = """One update step sets w <- w - 0.1 * (g + 0.01 * w) (step size 0.1, weight decay 0.01 added to
    the gradient)."""


LEVEL_2 = pytorch_level(
    "optim",
    reference=sgd_step,
    independent=_sgd_step,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} {_SGD_RULE} Take one step from `w0`. Give the updated `w` and
    `grad`, g at
        `w0` (the gradient of L alone, without the decay term).""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "grad": f32(*dims(i["w0"]))},),
)


def sgd_two_steps(w0, x, y):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=0.1, weight_decay=0.01)
    for _ in range(2):
        optimizer.zero_grad()
        ((x @ w - y) ** 2).mean().backward()
        optimizer.step()
    with torch.no_grad():
        loss = ((x @ w - y) ** 2).mean()
    return {"rows": [{"w": w.detach(), "loss": loss}]}


def _sgd_two_steps(w0, x, y):
    w, vx, vy = values(w0), values(x), values(y)
    for _ in range(2):
        grad = mse_gradient(w, vx, vy)
        w = [p - Fraction(1, 10) * (g + Fraction(1, 100) * p) for p, g in zip(w, grad, strict=True)]
    residual = [
        sum((a * b for a, b in zip(row, w, strict=True)), Fraction(0)) - t
        for row, t in zip(vx, vy, strict=True)
    ]
    return [
        {
            "w": ExactTensor.of("float32", w),
            "loss": ExactTensor.of("float32", sum((r * r for r in residual), Fraction(0)) / len(residual)),
        }
    ]


LEVEL_3 = pytorch_level(
    "optim",
    reference=sgd_two_steps,
    independent=_sgd_two_steps,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} {_SGD_RULE} Take two such steps from `w0`, recomputing g before each.
        Give `w` after the two steps and `loss`, L at that w.""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "loss": f32()},),
)


def sgd_line_search(w0, x, y):
    import torch

    w, xd, yd = w0.double().requires_grad_(True), x.double(), y.double()
    ((xd @ w - yd) ** 2).mean().backward()
    with torch.no_grad():
        d = w.grad + 0.01 * w
        r, xdd = xd @ w - yd, xd @ d
        eta = (r @ xdd) / (xdd @ xdd)
        new = w - eta * d
    return {"rows": [{"step_size": eta.to(w0.dtype).item(), "w": new.to(w0.dtype)}]}


def _sgd_line_search(w0, x, y):
    w, vx, vy = values(w0), values(x), values(y)
    d = [g + Fraction(1, 100) * p for p, g in zip(w, mse_gradient(w, vx, vy), strict=True)]
    r = [
        sum((a * b for a, b in zip(row, w, strict=True)), Fraction(0)) - t
        for row, t in zip(vx, vy, strict=True)
    ]
    xd = [sum((a * b for a, b in zip(row, d, strict=True)), Fraction(0)) for row in vx]
    eta = sum((a * b for a, b in zip(r, xd, strict=True)), Fraction(0)) / sum(
        (a * a for a in xd), Fraction(0)
    )
    return [
        {"step_size": eta, "w": ExactTensor.of("float32", [p - eta * e for p, e in zip(w, d, strict=True)])}
    ]


LEVEL_4 = pytorch_level(
    "optim",
    reference=sgd_line_search,
    independent=_sgd_line_search,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} Let d = g + 0.01 * w at w = `w0` (the gradient plus weight decay 0.01).
        Instead of a fixed step size, choose the step size eta that minimises L(w0 - eta * d) over all
        real eta. Give `step_size`, that eta (a Python float), and `w`, w0 - eta * d.""",
    answer=lambda i: ({"step_size": PY_FLOAT, "w": f32(*dims(i["w0"]))},),
)


def sgd_fixed_point(w0, x, y):
    import torch

    xd, yd = x.double(), y.double()
    n = x.shape[0]
    system = 2 / n * xd.T @ xd + 0.01 * torch.eye(x.shape[1], dtype=torch.float64)
    w = torch.linalg.solve(system, 2 / n * xd.T @ yd)
    return {"rows": [{"w_star": w.to(w0.dtype), "loss": ((xd @ w - yd) ** 2).mean().to(w0.dtype)}]}


def _sgd_fixed_point(w0, x, y):
    vx, vy = values(x), values(y)
    n, k = len(vx), len(vx[0])
    gram = matmul(transpose(vx), vx)
    system = [[2 * gram[i][j] / n + (Fraction(1, 100) if i == j else 0) for j in range(k)] for i in range(k)]
    rhs = [2 * sum((row[j] * t for row, t in zip(vx, vy, strict=True)), Fraction(0)) / n for j in range(k)]
    w = solve(system, rhs)
    residual = [
        sum((a * b for a, b in zip(row, w, strict=True)), Fraction(0)) - t
        for row, t in zip(vx, vy, strict=True)
    ]
    return [
        {
            "w_star": ExactTensor.of("float32", w),
            "loss": ExactTensor.of("float32", sum((r * r for r in residual), Fraction(0)) / n),
        }
    ]


LEVEL_5 = pytorch_level(
    "optim",
    reference=sgd_fixed_point,
    independent=_sgd_fixed_point,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} {_SGD_RULE} There is exactly one point w* that this step
    leaves unchanged.
        Give `w_star`, that point, and `loss`, L(w*). (`w0` does not change it.)""",
    answer=lambda i: ({"w_star": f32(*dims(i["w0"])), "loss": f32()},),
)


SGD_STEP = five_levels(
    "sgd_step",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 torch.optim.SGD with weight decay named; L2 the update rule described, the gradient to "
   "derive; L3 two steps and the loss after them; L4 an exact line search along the decayed gradient; "
   "L5 the fixed point of the update (a regularised least-squares solve)",
)
