"""optim (pt-040..pt-044): one SGD step with weight decay, SGD with momentum, one Adam step,
three chained AdamW steps, and clip_grad_norm_.

The independent checks replay each update rule as torch documents it: exact Fractions for SGD
on a quadratic loss, mpmath for the square roots of Adam and of the gradient norm.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, ExprSpec, f32, pytorch_family, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, matmul, reshape, transpose, values
from exactgrade.domains.pytorch.levels import clear_winner, leveled, solve
from exactgrade.domains.pytorch.levels_modules import polynomial_rows
from exactgrade.domains.pytorch.sampling import dyadic_list, dyadic_tensor, regression_inputs
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

LR_EXPR = ExprSpec(("lr",))


def _mse_gradient(w, x, y):
    """d/dw mean((x @ w - y)^2) = 2/n x^T (x @ w - y), for nested-list x and vectors w, y."""
    residual = [p[0] - t for p, t in zip(matmul(x, [[e] for e in w]), y, strict=True)]
    return [2 * sum((c * r for c, r in zip(col, residual, strict=True)), Fraction(0)) / len(residual)
            for col in transpose(x)]


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
    grad = _mse_gradient(w, values(x), values(y))
    lr, decay = Fraction(1, 10), Fraction(1, 100)
    return [{
        "w": ExactTensor.of("float32", [p - lr * (g + decay * p) for p, g in zip(w, grad, strict=True)]),
        "grad": ExactTensor.of("float32", grad),  # weight decay enters the update, not .grad
    }]


# pt-041 -------------------------------------------------------------------------------------------
def sgd_momentum_steps(w0, x, y):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=0.05, momentum=0.9)
    for _ in range(2):
        optimizer.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    return {"rows": [{"w": w.detach(), "momentum_buffer": optimizer.state[w]["momentum_buffer"]}]}


def _sgd_momentum_steps(w0, x, y):
    w, vx, vy = values(w0), values(x), values(y)
    lr, momentum = Fraction(1, 20), Fraction(9, 10)
    buffer = None
    for _ in range(2):
        grad = _mse_gradient(w, vx, vy)
        # the first step initialises the buffer to the gradient itself (no dampening)
        buffer = grad if buffer is None else [momentum * b + g for b, g in zip(buffer, grad, strict=True)]
        w = [p - lr * b for p, b in zip(w, buffer, strict=True)]
    return [{"w": ExactTensor.of("float32", w), "momentum_buffer": ExactTensor.of("float32", buffer)}]


# pt-042 -------------------------------------------------------------------------------------------
def adam_step(w0, scales):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([w], lr=0.01)
    loss = (scales * w ** 2).sum()
    loss.backward()
    optimizer.step()
    state = optimizer.state[w]
    return {"rows": [{"w": w.detach(), "exp_avg": state["exp_avg"], "exp_avg_sq": state["exp_avg_sq"]}]}


def _adam_step(w0, scales):
    w = [hp(e) for e in values(w0)]
    grad = [2 * hp(s) * p for s, p in zip(values(scales), w, strict=True)]
    lr, beta1, beta2, eps = hp(0.01), hp(0.9), hp(0.999), hp(1e-8)
    m = [(1 - beta1) * g for g in grad]
    v = [(1 - beta2) * g * g for g in grad]
    m_hat = [e / (1 - beta1) for e in m]
    v_hat = [e / (1 - beta2) for e in v]
    return [{
        # after one step m_hat / sqrt(v_hat) = sign(g): every coordinate moves by about lr, whatever |g|
        "w": ExactTensor.of("float32", [p - lr * a / (mpmath.sqrt(b) + eps)
                                        for p, a, b in zip(w, m_hat, v_hat, strict=True)]),
        "exp_avg": ExactTensor.of("float32", m),
        "exp_avg_sq": ExactTensor.of("float32", v),
    }]


# pt-043 -------------------------------------------------------------------------------------------
def adamw_three_steps(w0, x, y):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([w], lr=0.1, weight_decay=0.1)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        losses.append(loss.detach())
        loss.backward()
        optimizer.step()
    return {"rows": [{"w": w.detach(), "losses": torch.stack(losses)}]}


def _adamw_three_steps(w0, x, y):
    vx, vy = values(x), values(y)
    x_hp = [[hp(e) for e in row] for row in vx]
    y_hp = [hp(e) for e in vy]
    lr, decay, beta1, beta2, eps = hp(0.1), hp(0.1), hp(0.9), hp(0.999), hp(1e-8)
    w = [hp(e) for e in values(w0)]
    m, v, losses = [hp(0)] * len(w), [hp(0)] * len(w), []
    for step in range(1, 4):
        residual = [mpmath.fsum(a * b for a, b in zip(row, w, strict=True)) - t for row, t in zip(x_hp, y_hp,
                                                                                                strict=True)]
        losses.append(mpmath.fsum(r * r for r in residual) / len(residual))
        grad = [2 * mpmath.fsum(row[j] * r for row, r in zip(x_hp, residual, strict=True)) / len(residual)
                for j in range(len(w))]
        w = [p * (1 - lr * decay) for p in w]  # decoupled weight decay, applied before the Adam update
        m = [beta1 * a + (1 - beta1) * g for a, g in zip(m, grad, strict=True)]
        v = [beta2 * b + (1 - beta2) * g * g for b, g in zip(v, grad, strict=True)]
        correction1, correction2 = 1 - beta1 ** step, 1 - beta2 ** step
        w = [p - lr / correction1 * a / (mpmath.sqrt(b) / mpmath.sqrt(correction2) + eps)
             for p, a, b in zip(w, m, v, strict=True)]
    return [{"w": ExactTensor.of("float32", w), "losses": ExactTensor.of("float32", losses)}]


# pt-044 -------------------------------------------------------------------------------------------
def clipped_gradients(p1_0, p2_0):
    import torch

    p1 = p1_0.clone().requires_grad_(True)
    p2 = p2_0.clone().requires_grad_(True)
    loss = 1.5 * (p1 ** 2).sum() + (p2 ** 3).sum()
    loss.backward()
    total_norm = torch.nn.utils.clip_grad_norm_([p1, p2], max_norm=1.0)
    return {"rows": [{"total_norm": total_norm, "grad_p1": p1.grad, "grad_p2": p2.grad}]}


def _clipped_gradients(p1_0, p2_0):
    g1 = [[3 * e for e in row] for row in values(p1_0)]
    g2 = [3 * e * e for e in values(p2_0)]
    total = mpmath.sqrt(hp(sum((g * g for row in g1 for g in row), Fraction(0)) + sum((g * g for g in g2),
                                                                                     Fraction(0))))
    coefficient = min(1 / (total + hp(1e-6)), hp(1))  # the returned norm is the one before clipping
    return [{
        "total_norm": ExactTensor.of("float32", total),
        "grad_p1": ExactTensor.of("float32", [[coefficient * hp(g) for g in row] for row in g1]),
        "grad_p2": ExactTensor.of("float32", [coefficient * hp(g) for g in g2]),
    }]


# chain: several optimiser steps with a schedule, weight decay and clipping ------------------------
def sgd_schedule_clipping(w0, x, y, steps, lr, momentum, weight_decay, max_norm, step_size, gamma):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=lr, momentum=momentum, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=step_size, gamma=gamma)
    losses, norms = [], []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_([w], max_norm=max_norm))
        losses.append(loss.detach())
        optimizer.step()
        schedule.step()
    return {
        "rows": [
            {
                "w": w.detach(),
                "losses": torch.stack(losses),
                "grad_norms": torch.stack(norms),
                "final_lr": optimizer.param_groups[0]["lr"],
            }
        ]
    }


def _sgd_schedule_clipping(w0, x, y, steps, lr, momentum, weight_decay, max_norm, step_size, gamma):
    x_hp = [[hp(e) for e in row] for row in values(x)]
    y_hp = [hp(e) for e in values(y)]
    w = [hp(e) for e in values(w0)]
    lr, momentum, decay, max_norm, gamma = (hp(v) for v in (lr, momentum, weight_decay, max_norm, gamma))
    buffer, losses, norms = None, [], []
    for step in range(steps):
        residual = [
            mpmath.fsum(a * b for a, b in zip(row, w, strict=True)) - t
            for row, t in zip(x_hp, y_hp, strict=True)
        ]
        losses.append(mpmath.fsum(r * r for r in residual) / len(residual))
        grad = [
            2 * mpmath.fsum(row[j] * r for row, r in zip(x_hp, residual, strict=True)) / len(residual)
            for j in range(len(w))
        ]
        norm = mpmath.sqrt(mpmath.fsum(g * g for g in grad))
        norms.append(norm)
        grad = [g * min(max_norm / (norm + hp(1e-6)), 1) for g in grad]  # clip_grad_norm_, before the step
        grad = [g + decay * p for g, p in zip(grad, w, strict=True)]  # weight decay joins the clipped grad
        buffer = grad if buffer is None else [momentum * b + g for b, g in zip(buffer, grad, strict=True)]
        rate = lr * gamma ** (step // step_size)  # StepLR: gamma every step_size steps
        w = [p - rate * b for p, b in zip(w, buffer, strict=True)]
    return [
        {
            "w": ExactTensor.of("float32", w),
            "losses": ExactTensor.of("float32", losses),
            "grad_norms": ExactTensor.of("float32", norms),
            "final_lr": lr * gamma ** (steps // step_size),
        }
    ]


# ------------------------------------------------------------------------------------ families
# Level 1 is about the canonical size; each level adds samples and weights (regression_inputs).


def _dims(x):
    return tuple(x.shape)


_STEP_QUESTION = """Make a leaf tensor w from `w0` that requires gradients and an optimiser
    torch.optim.SGD([w], lr=0.1, weight_decay=0.01). Compute loss = mean((x @ w - y)^2), call
    loss.backward() and take one optimiser step. Give the updated parameter `w` and `grad`, the
    gradient stored in w.grad."""

SGD_STEP = pytorch_family(
    "sgd_step",
    "optim",
    reference=sgd_step,
    independent=_sgd_step,
    question=_STEP_QUESTION,
    answer=lambda i: ({"w": f32(*_dims(i["w0"])), "grad": f32(*_dims(i["w0"]))},),
    sample=regression_inputs,
    levels="4..3+level samples of 3..2+level features on the 1/4 grid",
)

SGD_MOMENTUM_STEPS = pytorch_family(
    "sgd_momentum_steps",
    "optim",
    reference=sgd_momentum_steps,
    independent=_sgd_momentum_steps,
    question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
        torch.optim.SGD([w], lr=0.05, momentum=0.9). Take two steps, each one zeroing the gradient,
        computing loss = mean((x @ w - y)^2) at the current w, calling backward and stepping. Give the
        parameter `w` after the two steps and the optimiser's `momentum_buffer` for w.""",
    answer=lambda i: ({"w": f32(*_dims(i["w0"])), "momentum_buffer": f32(*_dims(i["w0"]))},),
    sample=regression_inputs,
    levels="4..3+level samples of 3..2+level features on the 1/4 grid",
)


def _sample_adam(draw: Draw, level: int) -> dict:
    n = 2 + level
    scales = [
        float(draw.integer(1, 7) * draw.choice((-1, 1)) * Fraction(2) ** draw.integer(-9, 8))
        for _ in range(n)
    ]
    return {
        "w0": tensor("float32", dyadic_list(draw, n, -2, 2, 2, nonzero=True)),
        "scales": tensor("float32", scales),
    }


ADAM_STEP = pytorch_family(
    "adam_step",
    "optim",
    reference=adam_step,
    independent=_adam_step,
    question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
        torch.optim.Adam([w], lr=0.01) (default betas and eps). Compute loss = sum(scales * w^2), call
        backward and take one optimiser step. Give the updated `w` and the optimiser state tensors
        `exp_avg` and `exp_avg_sq` for w.""",
    answer=lambda i: (
        {"w": f32(*_dims(i["w0"])), "exp_avg": f32(*_dims(i["w0"])), "exp_avg_sq": f32(*_dims(i["w0"]))},
    ),
    sample=_sample_adam,
    levels="2+level non-zero weights, scales k * 2**e with e in -9..8 (gradients over five orders of "
    "magnitude)",
)

ADAMW_THREE_STEPS = pytorch_family(
    "adamw_three_steps",
    "optim",
    reference=adamw_three_steps,
    independent=_adamw_three_steps,
    question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
        torch.optim.AdamW([w], lr=0.1, weight_decay=0.1) (default betas and eps). Take three steps, each
        one zeroing the gradient, computing loss = mean((x @ w - y)^2) at the current w, calling
        backward and stepping. Give the parameter `w` after the three steps and `losses`, the three loss
        values computed before each step, in order.""",
    answer=lambda i: ({"w": f32(*_dims(i["w0"])), "losses": f32(3)},),
    sample=regression_inputs,
    levels="4..3+level samples of 3..2+level features on the 1/4 grid",
)


def _sample_clipping(draw: Draw, level: int) -> dict:
    return {
        "p1_0": dyadic_tensor(draw, (draw.integer(2, 1 + level), draw.integer(2, 1 + level)), -2, 2, 2),
        "p2_0": dyadic_tensor(draw, (draw.integer(3, 2 + level),), -2, 2, 2),
    }


def _clips(task: Task) -> str | None:
    if task.expected["rows"][0]["total_norm"].data[0] <= 1.5:
        return "the gradient norm is at most 1.5: clipping to max_norm=1.0 would barely act"
    return None


CLIPPED_GRADIENTS = pytorch_family(
    "clipped_gradients",
    "optim",
    reference=clipped_gradients,
    independent=_clipped_gradients,
    question="""Make leaf tensors p1 (from `p1_0`) and p2 (from `p2_0`) that require gradients, compute
        loss = 1.5 * sum(p1^2) + sum(p2^3) and call backward. Then clip the gradients of [p1, p2] with
        torch.nn.utils.clip_grad_norm_ and max_norm=1.0 (total L2 norm). Give `total_norm`, the value
        clip_grad_norm_ returns, and the clipped gradients `grad_p1` and `grad_p2`.""",
    answer=lambda i: (
        {"total_norm": f32(), "grad_p1": f32(*_dims(i["p1_0"])), "grad_p2": f32(*_dims(i["p2_0"]))},
    ),
    sample=_sample_clipping,
    levels="p1 of shape (2..1+level, 2..1+level) and p2 of 3..2+level elements on the 1/4 grid; norms "
    "at most 1.5 (little clipping) rejected",
    reject=_clips,
)


def _sample_schedule(draw: Draw, level: int) -> dict:
    inputs = regression_inputs(draw, level)
    steps = 2 + level
    return {
        **inputs,
        "steps": steps,
        "lr": draw.choice((0.125, 0.0625, 0.1, 0.05)),
        "momentum": draw.choice((0.5, 0.75, 0.9)),
        "weight_decay": draw.choice((0.0078125, 0.015625, 0.01)),
        "max_norm": float(draw.dyadic(Fraction(1, 2), 4, 2)),
        "step_size": draw.integer(1, max(1, steps - 1)),
        "gamma": draw.choice((0.5, 0.25, 0.1)),
    }


def _clipping_acts(task: Task) -> str | None:
    norms = task.expected["rows"][0]["grad_norms"].data
    if not any(n > task.inputs["max_norm"] for n in norms):
        return "no step's gradient norm exceeds max_norm: the clipping never acts"
    return None


SGD_SCHEDULE_CLIPPING = pytorch_family(
    "sgd_schedule_clipping",
    "optim",
    reference=sgd_schedule_clipping,
    independent=_sgd_schedule_clipping,
    question=lambda i: (
        f"""Make a leaf tensor w from `w0` that requires gradients, an optimiser
        torch.optim.SGD([w], lr={i["lr"]}, momentum={i["momentum"]}, weight_decay={i["weight_decay"]}) and a
        scheduler torch.optim.lr_scheduler.StepLR(optimizer, step_size={i["step_size"]}, gamma={i["gamma"]}).
        Take {i["steps"]} steps; in each, zero the gradient, compute loss = mean((x @ w - y)^2) at the
        current w, call backward, clip the gradient with torch.nn.utils.clip_grad_norm_([w],
        max_norm={i["max_norm"]}), step the optimiser, then step the scheduler. Give the final `w`, `losses`
        and `grad_norms` (the loss and the norm clip_grad_norm_ returns at each step, in order) and
        `final_lr`, the optimiser's learning rate after the last scheduler step (a Python float)."""
    ),
    answer=lambda i: (
        {
            "w": f32(*_dims(i["w0"])),
            "losses": f32(i["steps"]),
            "grad_norms": f32(i["steps"]),
            "final_lr": PY_FLOAT,
        },
    ),
    sample=_sample_schedule,
    levels="a chain loss -> backward -> clip -> SGD (momentum, weight decay) -> StepLR for 2+level steps on "
    "4..3+level samples of 3..2+level features; instances where clipping never acts rejected",
    reject=_clipping_acts,
)

# ------------------------------------------------------------------------------------ levels 2-5
# Level 1 names the optimiser and its options. Level 2 describes the update rule mathematically (the
# gradient left to derive); level 3 chains more steps or another rule into it (a final loss, decay, a
# dampened buffer); level 4 searches (an exact line search, the first step below a goal, the best learning
# rate, the clipping threshold for a given norm); level 5 is an algorithm described but not named (the
# update's fixed point, Nesterov momentum, AMSGrad, warmup with clipping, adaptive clipping, mini-batches).


def _opt(name, **kwargs):
    return pytorch_family(name, "optim", levels="", **kwargs)


_LOSS_MATH = """The loss is L(w) = mean((x @ w - y)^2), the mean over the rows of `x` of the squared residual,
    at the current w; w starts at `w0`; g denotes the gradient of L at the current w."""


def _hp_rows(x, y):
    return [[hp(e) for e in row] for row in values(x)], [hp(e) for e in values(y)]


def _loss_and_grad(w, xs, ys):
    residual = [
        mpmath.fsum(a * b for a, b in zip(row, w, strict=True)) - t for row, t in zip(xs, ys, strict=True)
    ]
    loss = mpmath.fsum(r * r for r in residual) / len(residual)
    grad = [
        2 * mpmath.fsum(row[j] * r for row, r in zip(xs, residual, strict=True)) / len(residual)
        for j in range(len(w))
    ]
    return loss, grad


# sgd_step ----------------------------------------------------------------------------------------
_SGD_RULE = """One update step sets w <- w - 0.1 * (g + 0.01 * w) (step size 0.1, weight decay 0.01 added to
    the gradient)."""


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
        grad = _mse_gradient(w, vx, vy)
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
    d = [g + Fraction(1, 100) * p for p, g in zip(w, _mse_gradient(w, vx, vy), strict=True)]
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


SGD_STEP = leveled(
    SGD_STEP,
    {
        2: _opt(
            "sgd_step",
            reference=sgd_step,
            independent=_sgd_step,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} {_SGD_RULE} Take one step from `w0`. Give the updated `w` and
            `grad`, g at
                `w0` (the gradient of L alone, without the decay term).""",
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "grad": f32(*_dims(i["w0"]))},),
        ),
        3: _opt(
            "sgd_step",
            reference=sgd_two_steps,
            independent=_sgd_two_steps,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} {_SGD_RULE} Take two such steps from `w0`, recomputing g before each.
                Give `w` after the two steps and `loss`, L at that w.""",
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "loss": f32()},),
        ),
        4: _opt(
            "sgd_step",
            reference=sgd_line_search,
            independent=_sgd_line_search,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} Let d = g + 0.01 * w at w = `w0` (the gradient plus weight decay 0.01).
                Instead of a fixed step size, choose the step size eta that minimises L(w0 - eta * d) over all
                real eta. Give `step_size`, that eta (a Python float), and `w`, w0 - eta * d.""",
            answer=lambda i: ({"step_size": PY_FLOAT, "w": f32(*_dims(i["w0"]))},),
        ),
        5: _opt(
            "sgd_step",
            reference=sgd_fixed_point,
            independent=_sgd_fixed_point,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} {_SGD_RULE} There is exactly one point w* that this step
            leaves unchanged.
                Give `w_star`, that point, and `loss`, L(w*). (`w0` does not change it.)""",
            answer=lambda i: ({"w_star": f32(*_dims(i["w0"])), "loss": f32()},),
        ),
    },
    levels="L1 torch.optim.SGD with weight decay named; L2 the update rule described, the gradient to "
    "derive; L3 two steps and the loss after them; L4 an exact line search along the decayed gradient; "
    "L5 the fixed point of the update (a regularised least-squares solve)",
)


# sgd_momentum_steps ------------------------------------------------------------------------------
_MOMENTUM_RULE = """A velocity buffer b is kept: at the first step b = g, at every later step b <-
0.9 * b + g;
    then w <- w - 0.05 * b."""


def sgd_momentum_decay_dampening(w0, x, y):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=0.05, momentum=0.9, dampening=0.5, weight_decay=0.02)
    for _ in range(3):
        optimizer.zero_grad()
        ((x @ w - y) ** 2).mean().backward()
        optimizer.step()
    return {"rows": [{"w": w.detach(), "momentum_buffer": optimizer.state[w]["momentum_buffer"]}]}


def _sgd_momentum_decay_dampening(w0, x, y):
    w, vx, vy = values(w0), values(x), values(y)
    buffer = None
    for _ in range(3):
        grad = [g + Fraction(1, 50) * p for g, p in zip(_mse_gradient(w, vx, vy), w, strict=True)]
        buffer = (
            grad
            if buffer is None
            else [Fraction(9, 10) * b + Fraction(1, 2) * g for b, g in zip(buffer, grad, strict=True)]
        )
        w = [p - Fraction(1, 20) * b for p, b in zip(w, buffer, strict=True)]
    return [{"w": ExactTensor.of("float32", w), "momentum_buffer": ExactTensor.of("float32", buffer)}]


_MAX_STEPS = 25


def momentum_steps_to_goal(w0, x, y, goals):
    import torch

    w = w0.double().requires_grad_(True)
    xd, yd = x.double(), y.double()
    optimizer = torch.optim.SGD([w], lr=0.05, momentum=0.9)
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        ((xd @ w - yd) ** 2).mean().backward()
        optimizer.step()
        with torch.no_grad():
            losses.append(float(((xd @ w - yd) ** 2).mean()))
    rows = []
    for goal in goals.tolist():
        rows.append({"steps": next((k + 1 for k, loss in enumerate(losses) if loss <= goal), -1)})
    return {"rows": rows}


def _momentum_losses(w0, x, y):
    xs, ys = _hp_rows(x, y)
    w, buffer, losses = [hp(e) for e in values(w0)], None, []
    for _ in range(_MAX_STEPS):
        _, grad = _loss_and_grad(w, xs, ys)
        buffer = grad if buffer is None else [hp(0.9) * b + g for b, g in zip(buffer, grad, strict=True)]
        w = [p - hp(0.05) * b for p, b in zip(w, buffer, strict=True)]
        losses.append(_loss_and_grad(w, xs, ys)[0])
    return losses


def _momentum_steps_to_goal(w0, x, y, goals):
    losses = _momentum_losses(w0, x, y)
    return [
        {"steps": next((k + 1 for k, loss in enumerate(losses) if loss <= hp(goal)), -1)}
        for goal in values(goals)
    ]


def _as_f32(value):
    return struct.unpack("<f", struct.pack("<f", float(value)))[0]


def _goals_between(draw, losses, count=3):
    """Goals that fall between two distinct losses of a trajectory (one below all of them), as floats
    that keep a margin from every loss."""
    levels = sorted(set(losses))
    picks = []
    for k in draw.sample(range(len(levels) - 1), min(count - 1, len(levels) - 1)):
        picks.append(_as_f32(mpmath.sqrt(levels[k] * levels[k + 1])))
    picks.append(_as_f32(levels[0] / 2))
    return draw.shuffled(picks)


def _sample_momentum_goals(draw, level):
    inputs = regression_inputs(draw, 3)
    return {**inputs, "goals": tensor("float32", _goals_between(draw, _momentum_losses(**inputs)))}


def _goals_clear(losses_of):
    def refuse(inputs):
        losses = losses_of(inputs)
        for goal in values(inputs["goals"]):
            if any(abs(loss - hp(goal)) <= abs(hp(goal)) * mpmath.mpf("1e-6") for loss in losses):
                return "a goal lies within 1e-6 of a loss on the trajectory: too close to call"
        return None

    return refuse


def _steps_vary(task):
    if len({row["steps"] for row in task.expected["rows"]}) < 2:
        return "every goal gives the same step count: a constant answer passes"
    return None


# L5: a closed form in the learning rate. The step rule combines an accumulated gradient of two unequal
# micro-batches, weight decay on w only, a buffer whose first step skips dampening, a look-ahead move and a
# warm-up then decayed schedule; the answer is each parameter and the loss after three steps as a polynomial
# in lr. Reference: sympy builds the loss and differentiates it; independent: the hand-derived gradient as
# an exact Fraction recurrence at seven rational lr, interpolated (levels_modules.polynomial_rows).
_LR_STEPS = 3


def momentum_lr_polynomial(w0, x, y, c0, split, momentum, dampening, decay, gamma, lr):
    import sympy

    xs = [[sympy.Rational(e) for e in row] for row in x.tolist()]
    ys = [sympy.Rational(e) for e in y.tolist()]
    mu, tau, lam, gam = (sympy.Rational(v) for v in (momentum, dampening, decay, gamma))
    *weights, bias = names = sympy.symbols("p0 p1 c")

    def mean_loss(rows, w, c):
        total = sum(((xs[i][0] * w[0] + xs[i][1] * w[1] + c - ys[i]) ** 2 for i in rows), sympy.Integer(0))
        return total / len(rows)

    accumulated = sympy.expand(mean_loss(range(split), weights, bias)
                               + mean_loss(range(split, 4), weights, bias))
    gradient = [sympy.diff(accumulated, p) for p in names]
    params = [sympy.Rational(e) for e in w0.tolist()] + [sympy.Rational(c0)]
    factors = [sympy.Rational(1, 2), sympy.Integer(1), gam]
    buffers = None
    for step in range(3):
        d = [sympy.expand(g.subs(dict(zip(names, params, strict=True)))) for g in gradient]
        d = [d[0] + lam * params[0], d[1] + lam * params[1], d[2]]
        if buffers is None:
            buffers = d
        else:
            buffers = [mu * b + (1 - tau) * e for b, e in zip(buffers, d, strict=True)]
        params = [sympy.expand(p - lr * factors[step] * (e + mu * b))
                  for p, e, b in zip(params, d, buffers, strict=True)]
    loss = sympy.expand(mean_loss(range(4), params[:2], params[2]))
    row = {"first_weight": params[0], "second_weight": params[1], "bias": params[2], "loss": loss}
    return {"rows": [row]}


def _lr_recurrence(w0, x, y, c0, split, momentum, dampening, decay, gamma, *, mistake=None):
    """The same three steps at one rational lr, by the hand-derived gradient of each micro-batch mean
    (2/n_b X_b^T r_b for w, 2/n_b sum r_b for c). ``mistake``: 'first_step_dampened' scales the first
    buffer by (1 - dampening) as later ones are; 'bias_decayed' decays c too."""
    vx, vy, w = values(x), values(y), values(w0)
    mu, tau, lam, gam = (Fraction(v) for v in (momentum, dampening, decay, gamma))
    factors = (Fraction(1, 2), Fraction(1), gam)
    decayed = 3 if mistake == "bias_decayed" else 2

    def residual(params, i):
        return vx[i][0] * params[0] + vx[i][1] * params[1] + params[2] - vy[i]

    def run(lr):
        params, buffers = [*w, Fraction(c0)], None
        for step in range(_LR_STEPS):
            grad = [Fraction(0)] * 3
            for rows in (range(split), range(split, 4)):
                for i in rows:
                    for j, a in enumerate((vx[i][0], vx[i][1], Fraction(1))):
                        grad[j] += 2 * a * residual(params, i) / len(rows)
            d = [g + lam * p if j < decayed else g for j, (g, p) in enumerate(zip(grad, params, strict=True))]
            if buffers is None:
                buffers = [(1 - tau) * e for e in d] if mistake == "first_step_dampened" else d
            else:
                buffers = [mu * b + (1 - tau) * e for b, e in zip(buffers, d, strict=True)]
            eta = lr * factors[step]
            params = [p - eta * (e + mu * b) for p, e, b in zip(params, d, buffers, strict=True)]
        loss = sum((residual(params, i) ** 2 for i in range(4)), Fraction(0)) / 4
        return {"first_weight": params[0], "second_weight": params[1], "bias": params[2], "loss": loss}

    return run


def _momentum_lr_polynomial(w0, x, y, c0, split, momentum, dampening, decay, gamma, lr, mistake=None):
    run = _lr_recurrence(w0, x, y, c0, split, momentum, dampening, decay, gamma, mistake=mistake)
    return polynomial_rows(run, 2 * _LR_STEPS, lr)


def _sample_lr_polynomial(draw, level):
    import sympy

    return {
        "w0": dyadic_tensor(draw, (2,), -1, 1, 1, nonzero=True),
        "x": dyadic_tensor(draw, (4, 2), -2, 2, 1),
        "y": dyadic_tensor(draw, (4,), -2, 2, 1),
        "c0": float(draw.dyadic(Fraction(-1), Fraction(1), 1)),
        "split": draw.choice((1, 3)),
        "momentum": draw.choice((0.5, 0.75, 0.875)),
        "dampening": draw.choice((0.25, 0.5)),
        "decay": draw.choice((0.125, 0.25)),
        "gamma": draw.choice((0.5, 0.25)),
        "lr": sympy.Symbol("lr", real=True),  # a polynomial: its domain does not matter, and real is cheap
    }


def _lr_polynomial_degenerate(inputs):
    """Refuse a start where a gradient component or the bias is zero (a term of the closed form
    would vanish and a wrong reading of that option would still pass)."""
    run = _lr_recurrence(**{k: v for k, v in inputs.items() if k != "lr"})
    if Fraction(inputs["c0"]) == 0:
        return "the bias starts at zero: decaying it or not would give the same first step"
    first, dampened = run(Fraction(1, 7)), _lr_recurrence(
        **{k: v for k, v in inputs.items() if k != "lr"}, mistake="first_step_dampened")(Fraction(1, 7))
    if first == dampened:
        return "the first buffer is zero: dampening it would not change the answer"
    xs = values(inputs["x"])
    if len({tuple(row) for row in xs}) < len(xs) or any(all(row[j] == 0 for row in xs) for j in range(2)):
        return "repeated rows or a zero column: a degenerate regression"
    return None


_LR_QUESTION = """A linear model predicts p_i = x_i . w + c for the rows x_i of `x` (4 rows, 2 features),
    with w starting at `w0` and the scalar bias c at `c0`. The rows are cut into two micro-batches: A = the
    first `split` rows, B = the remaining rows. Each step first computes the gradient G (of w and of c) of
    L_A + L_B at the current parameters, where L_A is the mean over A of (p_i - y_i)^2 and L_B the same mean
    over B (y = `y`). It then forms d = G + `decay` * w for w and d = G for c (the bias is not decayed). Each
    parameter keeps a buffer b: at the first step b = d; at every later step b <- `momentum` * b + (1 -
    `dampening`) * d. The parameter then moves by -eta_t * (d + `momentum` * b), using the buffer just
    updated. The step size eta_t is lr / 2 at step 1, lr at step 2, and `gamma` * lr at step 3. Take three
    steps. The symbol lr is preloaded as a real sympy Symbol, and every float input is an exact binary
    fraction (sympy.Rational(v) gives it exactly). Give, as exact polynomials in lr: `first_weight` and
    `second_weight`, the two entries of w after the three steps; `bias`, c after them; and `loss`, the
    mean over all four rows of (p_i - y_i)^2 at the final parameters."""


SGD_MOMENTUM_STEPS = leveled(
    SGD_MOMENTUM_STEPS,
    {
        2: _opt(
            "sgd_momentum_steps",
            reference=sgd_momentum_steps,
            independent=_sgd_momentum_steps,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} {_MOMENTUM_RULE} Take two such steps from `w0`, recomputing g
            before each.
                Give `w` after them and the buffer b (`momentum_buffer`).""",
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "momentum_buffer": f32(*_dims(i["w0"]))},),
        ),
        3: _opt(
            "sgd_momentum_steps",
            reference=sgd_momentum_decay_dampening,
            independent=_sgd_momentum_decay_dampening,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} Each step first forms d = g + 0.02 * w (weight decay); a
            buffer b is kept:
                at the first step b = d, at every later step b <- 0.9 * b + 0.5 * d; then w <- w -
                0.05 * b. Take
                three steps from `w0`. Give `w` after them and the buffer b (`momentum_buffer`).""",
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "momentum_buffer": f32(*_dims(i["w0"]))},),
        ),
        4: _opt(
            "sgd_momentum_steps",
            reference=momentum_steps_to_goal,
            independent=_momentum_steps_to_goal,
            sample=_sample_momentum_goals,
            refuse=_goals_clear(lambda i: _momentum_losses(i["w0"], i["x"], i["y"])),
            reject=_steps_vary,
            question=f"""{_LOSS_MATH} {_MOMENTUM_RULE} Run up to {_MAX_STEPS} steps from `w0`. For
            each goal in
                `goals` (a row of the answer each, in order), give `steps`, the smallest number of steps k
                (1..{_MAX_STEPS}) after which L(w) <= goal, or -1 if no k up to {_MAX_STEPS} reaches it.""",
            answer=lambda i: tuple({"steps": PY_INT} for _ in range(i["goals"].shape[0])),
        ),
        5: _opt(
            "sgd_momentum_steps",
            reference=momentum_lr_polynomial,
            independent=_momentum_lr_polynomial,
            sample=_sample_lr_polynomial,
            refuse=_lr_polynomial_degenerate,
            question=_LR_QUESTION,
            answer=({"first_weight": LR_EXPR, "second_weight": LR_EXPR, "bias": LR_EXPR, "loss": LR_EXPR},),
        ),
    },
    levels="L1 SGD with momentum named; L2 the heavy-ball rule described; L3 weight decay and dampening "
    "joined into it for three steps; L4 the first step at which the loss reaches each of three goals (-1 "
    "when none within 25 steps); L5 closed forms in the learning rate: three steps of an accumulated "
    "two-micro-batch gradient, decay on w only, an undampened first buffer, a look-ahead move and a warm-up "
    "then decayed schedule, each parameter and the final loss as a polynomial in lr (a symbolic key)",
    branches=(
        Branch(
            "a goal is never reached",
            lambda t: any(r.get("steps") == -1 for r in t.expected["rows"]),
            Fraction(1, 2),
            (4,),
        ),
    ),
)


# adam_step ---------------------------------------------------------------------------------------
_QUAD_MATH = """The loss is L(w) = sum(scales * w^2) (elementwise product, summed); w starts at
`w0`; g denotes
    the gradient of L at the current w."""

_ADAM_RULE = """Each step t = 1, 2, ... updates m <- 0.9 * m + 0.1 * g and v <- 0.999 * v + 0.001 * g^2
    (elementwise, both starting at 0), then w <- w - 0.01 * m_hat / (sqrt(v_hat) + 1e-8) with m_hat = m / (1 -
    0.9^t) and v_hat = v / (1 - 0.999^t)."""


def adam_three_steps(w0, scales):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([w], lr=0.01)
    for _ in range(3):
        optimizer.zero_grad()
        (scales * w**2).sum().backward()
        optimizer.step()
    return {"rows": [{"w": w.detach(), "exp_avg_sq": optimizer.state[w]["exp_avg_sq"]}]}


def _adam_run(w0, scales, steps, *, decay=0, amsgrad=False, beta2=0.999):
    w, s = [hp(e) for e in values(w0)], [hp(e) for e in values(scales)]
    m, v, top = [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w)
    b1, b2, lr, eps = hp(0.9), hp(beta2), hp(0.01), hp(1e-8)
    trail = []
    for t in range(1, steps + 1):
        grad = [2 * a * p + hp(decay) * p for a, p in zip(s, w, strict=True)]
        m = [b1 * a + (1 - b1) * g for a, g in zip(m, grad, strict=True)]
        v = [b2 * a + (1 - b2) * g * g for a, g in zip(v, grad, strict=True)]
        top = [max(a, b) for a, b in zip(top, v, strict=True)] if amsgrad else v
        c1, c2 = 1 - b1**t, 1 - b2**t
        w = [
            p - lr / c1 * a / (mpmath.sqrt(b) / mpmath.sqrt(c2) + eps)
            for p, a, b in zip(w, m, top, strict=True)
        ]
        trail.append(mpmath.fsum(a * p * p for a, p in zip(s, w, strict=True)))
    return w, v, top, trail


def _adam_three_steps(w0, scales):
    w, v, _, _ = _adam_run(w0, scales, 3)
    return [{"w": ExactTensor.of("float32", w), "exp_avg_sq": ExactTensor.of("float32", v)}]


def adam_steps_to_goal(w0, scales, goals):
    import torch

    w = w0.double().requires_grad_(True)
    s = scales.double()
    optimizer = torch.optim.Adam([w], lr=0.01)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        (s * w**2).sum().backward()
        optimizer.step()
        with torch.no_grad():
            losses.append(float((s * w**2).sum()))
    return {
        "rows": [
            {"steps": next((k + 1 for k, loss in enumerate(losses) if loss <= goal), -1)}
            for goal in goals.tolist()
        ]
    }


def _adam_steps_to_goal(w0, scales, goals):
    trail = _adam_run(w0, scales, 30)[3]
    return [
        {"steps": next((k + 1 for k, loss in enumerate(trail) if loss <= hp(goal)), -1)}
        for goal in values(goals)
    ]


def _sample_adam_goals(draw, level):
    n = draw.integer(3, 4)
    scales = [float(draw.integer(1, 7) * Fraction(2) ** draw.integer(-3, 2)) for _ in range(n)]
    inputs = {
        "w0": tensor("float32", dyadic_list(draw, n, -1, 1, 3, nonzero=True)),
        "scales": tensor("float32", scales),
    }
    return {
        **inputs,
        "goals": tensor("float32", _goals_between(draw, _adam_run(inputs["w0"], inputs["scales"], 30)[3])),
    }


# L5: two vectors, one of which joins the training at step 3. The bias correction is not given: it is fixed
# by a property the solver must turn into 1 - beta^k, with k the updates that vector has received (not the
# global step: the named misreading, which the rules require to change the answer).
def late_parameter_adam(w0, u0, scales, lr):
    import torch

    w = w0.clone().requires_grad_(True)
    u = u0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([w, u], lr=lr, betas=(0.9, 0.99), eps=1e-8)
    for step in range(1, 6):
        optimizer.zero_grad()
        loss = (scales * w**2).sum()
        if step >= 3:
            loss = loss + 0.5 * ((u - w) ** 2).sum()
        loss.backward()
        optimizer.step()
    return {"rows": [{"w": w.detach(), "u": u.detach()}]}


def _late_adam(w0, u0, scales, lr, mistake=None, steps=5):
    """(w, u) after ``steps`` steps, an mpmath replay with each vector's own update count k in its bias
    correction (``mistake``: 'global_step' uses the step number instead)."""
    w, u, s = [hp(e) for e in values(w0)], [hp(e) for e in values(u0)], [hp(e) for e in values(scales)]
    state = {"w": ([mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w), 0),
             "u": ([mpmath.mpf(0)] * len(u), [mpmath.mpf(0)] * len(u), 0)}
    b1, b2, eps = hp(0.9), hp(0.99), hp(1e-8)
    for step in range(1, steps + 1):
        grads = {"w": [2 * a * p for a, p in zip(s, w, strict=True)]}
        if step >= 3:
            grads["w"] = [g - (q - p) for g, p, q in zip(grads["w"], w, u, strict=True)]
            grads["u"] = [q - p for p, q in zip(w, u, strict=True)]
        params = {"w": w, "u": u}
        for name, grad in grads.items():
            m, v, k = state[name]
            m = [b1 * a + (1 - b1) * g for a, g in zip(m, grad, strict=True)]
            v = [b2 * a + (1 - b2) * g * g for a, g in zip(v, grad, strict=True)]
            k += 1
            t = step if mistake == "global_step" else k
            state[name] = (m, v, k)
            params[name] = [p - hp(lr) * (a / (1 - b1**t)) / (mpmath.sqrt(b / (1 - b2**t)) + eps)
                            for p, a, b in zip(params[name], m, v, strict=True)]
        w, u = params["w"], params["u"]
    return w, u


def _late_parameter_adam(w0, u0, scales, lr):
    w, u = _late_adam(w0, u0, scales, lr)
    return [{"w": ExactTensor.of("float32", w), "u": ExactTensor.of("float32", u)}]


def _sample_late_adam(draw, level):
    n = 3
    return {
        "w0": tensor("float32", dyadic_list(draw, n, -1, 1, 3, nonzero=True)),
        "u0": tensor("float32", dyadic_list(draw, n, -1, 1, 3, nonzero=True)),
        "scales": tensor("float32", [float(draw.integer(1, 7) * Fraction(2) ** draw.integer(-3, 1))
                                     for _ in range(n)]),
        "lr": draw.choice((0.05, 0.1, 0.2)),
    }


def _late_adam_rules(inputs):
    """Refuse a u that starts (at step 3) almost where w is (its gradient would be tiny and its sign
    fragile), and instances where counting the global step instead of u's own would still pass."""
    args = {k: inputs[k] for k in ("w0", "u0", "scales", "lr")}
    w, u = _late_adam(**args, steps=2)
    if any(abs(q - p) < mpmath.mpf(1) / 64 for p, q in zip(w, u, strict=True)):
        return "u starts within 1/64 of w at step 3: its first gradient is too small to call"
    right, wrong = _late_adam(**args), _late_adam(**args, mistake="global_step")
    if not any(abs(a - b) > mpmath.mpf("1e-3") for r, q in zip(right, wrong, strict=True)
               for a, b in zip(r, q, strict=True)):
        return "counting the global step gives the same answer: the misreading would pass"
    return None


_LATE_ADAM_QUESTION = """Two parameter vectors are trained together: w (starting at `w0`) and u (starting at
    `u0`), each of length 3. Steps 1 and 2 minimise L1(w) = sum(scales * w^2) (`scales` elementwise, then
    summed); u does not appear in L1, and at these two steps u and everything the method keeps for u are left
    untouched. Steps 3, 4 and 5 minimise L2(w, u) = sum(scales * w^2) + 0.5 * sum((u - w)^2), and both
    vectors take part. At each step, every vector p that takes part, with g the gradient of that step's loss
    with respect to p at the current parameters, is updated elementwise: m <- 0.9 * m + 0.1 * g and v <-
    0.99 * v + 0.01 * g^2 (m and v belong to p and are 0 before p's first update), then p <- p - `lr` * mh
    / (sqrt(vh) + 1e-8), where mh = m / a and vh = v / b. The positive scalars a and b are set at each update
    so that, had every gradient p has received up to and including this one been the same vector g, mh
    would equal g and vh would equal g^2 exactly. Both vectors' gradients at a step are taken before either
    is updated. Give `w` and `u` after step 5."""


ADAM_STEP = leveled(
    ADAM_STEP,
    {
        2: _opt(
            "adam_step",
            reference=adam_step,
            independent=_adam_step,
            sample=_sample_adam,
            question=f"""{_QUAD_MATH} {_ADAM_RULE} Take one step (t = 1) from `w0`. Give the
            updated `w` and the
                moment vectors after it, `exp_avg` (m) and `exp_avg_sq` (v).""",
            answer=lambda i: (
                {
                    "w": f32(*_dims(i["w0"])),
                    "exp_avg": f32(*_dims(i["w0"])),
                    "exp_avg_sq": f32(*_dims(i["w0"])),
                },
            ),
        ),
        3: _opt(
            "adam_step",
            reference=adam_three_steps,
            independent=_adam_three_steps,
            sample=_sample_adam,
            question=f"""{_QUAD_MATH} {_ADAM_RULE} Take three steps (t = 1, 2, 3) from `w0`, recomputing g at
                the current w before each. Give `w` after them and `exp_avg_sq`, the vector v.""",
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "exp_avg_sq": f32(*_dims(i["w0"]))},),
        ),
        4: _opt(
            "adam_step",
            reference=adam_steps_to_goal,
            independent=_adam_steps_to_goal,
            sample=_sample_adam_goals,
            refuse=_goals_clear(lambda i: _adam_run(i["w0"], i["scales"], 30)[3]),
            reject=_steps_vary,
            question=f"""{_QUAD_MATH} {_ADAM_RULE} Run up to 30 steps from `w0`. For each goal in `goals` (a
                row of the answer each, in order), give `steps`, the smallest number of steps k (1..30) after
                which L(w) <= goal, or -1 if no k up to 30 reaches it.""",
            answer=lambda i: tuple({"steps": PY_INT} for _ in range(i["goals"].shape[0])),
        ),
        5: _opt(
            "adam_step",
            reference=late_parameter_adam,
            independent=_late_parameter_adam,
            sample=_sample_late_adam,
            refuse=_late_adam_rules,
            question=_LATE_ADAM_QUESTION,
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "u": f32(*_dims(i["u0"]))},),
        ),
    },
    levels="L1 torch.optim.Adam named; L2 the moment estimates and bias correction described; L3 three steps "
    "with the gradient recomputed; L4 the first step at which the loss reaches each of three goals (-1 "
    "when none within 30 steps); L5 two vectors, one joining at step 3, under an adaptive rule whose bias "
    "correction is fixed by a property to derive (it counts each vector's own updates, not the step)",
    branches=(
        Branch(
            "a goal is never reached",
            lambda t: any(r.get("steps") == -1 for r in t.expected["rows"]),
            Fraction(1, 2),
            (4,),
        ),
    ),
)


# adamw_three_steps -------------------------------------------------------------------------------
_ADAMW_RULE = """Each step t = 1, 2, 3 first shrinks w <- w * (1 - lr * 0.1) (decoupled weight decay 0.1),
    then updates m <- 0.9 * m + 0.1 * g and v <- 0.999 * v + 0.001 * g^2 (elementwise, both starting at 0, g
    taken at the w before the shrink) and sets w <- w - lr / (1 - 0.9^t) * m / (sqrt(v) / sqrt(1 - 0.999^t) +
    1e-8)."""


def _adamw_run(w0, x, y, lr, steps, *, warmup=0, max_norm=None):
    xs, ys = _hp_rows(x, y)
    w = [hp(e) for e in values(w0)]
    m, v, losses = [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w), []
    b1, b2, decay, eps = hp(0.9), hp(0.999), hp(0.1), hp(1e-8)
    for t in range(1, steps + 1):
        loss, grad = _loss_and_grad(w, xs, ys)
        losses.append(loss)
        if max_norm is not None:
            norm = mpmath.sqrt(mpmath.fsum(g * g for g in grad))
            grad = [g * min(hp(max_norm) / (norm + hp(1e-6)), 1) for g in grad]
        rate = hp(lr) * (mpmath.mpf(t) / warmup if t <= warmup else 1)
        w = [p * (1 - rate * decay) for p in w]
        m = [b1 * a + (1 - b1) * g for a, g in zip(m, grad, strict=True)]
        v = [b2 * a + (1 - b2) * g * g for a, g in zip(v, grad, strict=True)]
        c1, c2 = 1 - b1**t, 1 - b2**t
        w = [
            p - rate / c1 * a / (mpmath.sqrt(b) / mpmath.sqrt(c2) + eps)
            for p, a, b in zip(w, m, v, strict=True)
        ]
    return w, losses, _loss_and_grad(w, xs, ys)[0]


def adamw_after(w0, x, y):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([w], lr=0.1, weight_decay=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        ((x @ w - y) ** 2).mean().backward()
        optimizer.step()
    with torch.no_grad():
        return {"rows": [{"loss": ((x @ w - y) ** 2).mean(), "distance": (w - w0).norm()}]}


def _adamw_after(w0, x, y):
    w, _, final = _adamw_run(w0, x, y, 0.1, 3)
    distance = mpmath.sqrt(mpmath.fsum((a - hp(b)) ** 2 for a, b in zip(w, values(w0), strict=True)))
    return [{"loss": ExactTensor.of("float32", final), "distance": ExactTensor.of("float32", distance)}]


def adamw_best_rate(w0, x, y, rates):
    import torch

    finals = []
    for lr in rates.tolist():
        w = w0.double().requires_grad_(True)
        optimizer = torch.optim.AdamW([w], lr=lr, weight_decay=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            ((x.double() @ w - y.double()) ** 2).mean().backward()
            optimizer.step()
        with torch.no_grad():
            finals.append(((x.double() @ w - y.double()) ** 2).mean())
    finals = torch.stack(finals)
    k = int(finals.argmin())
    return {"rows": [{"best": k, "loss": finals[k].to(x.dtype)}]}


def _adamw_finals(w0, x, y, rates):
    return [_adamw_run(w0, x, y, lr, 3)[2] for lr in values(rates)]


def _adamw_best_rate(w0, x, y, rates):
    finals = _adamw_finals(w0, x, y, rates)
    k = finals.index(min(finals))
    return [{"best": k, "loss": ExactTensor.of("float32", finals[k])}]


def _sample_rates(draw, level):
    inputs = regression_inputs(draw, 3)
    rates = sorted(draw.sample([0.015625, 0.03125, 0.0625, 0.125, 0.25, 0.5, 1.0], 4))
    return {**inputs, "rates": tensor("float32", rates)}


def _rates_clear(inputs):
    return clear_winner(_adamw_finals(**inputs))


def _rate_zero(inputs):
    finals = _adamw_finals(**inputs)
    return "the first rate is the best: best is index 0" if finals.index(min(finals)) == 0 else None


def adamw_warmup_clipping(w0, x, y):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([w], lr=0.1, weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min((step + 1) / 3, 1.0))
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        losses.append(loss.detach())
        loss.backward()
        torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)
        optimizer.step()
        schedule.step()
    return {"rows": [{"w": w.detach(), "losses": torch.stack(losses)}]}


def _adamw_warmup_clipping(w0, x, y):
    w, losses, _ = _adamw_run(w0, x, y, 0.1, 5, warmup=3, max_norm=1.0)
    return [{"w": ExactTensor.of("float32", w), "losses": ExactTensor.of("float32", losses)}]


def _warmup_clips(task):
    xs, ys = _hp_rows(task.inputs["x"], task.inputs["y"])
    norm = mpmath.sqrt(
        mpmath.fsum(g * g for g in _loss_and_grad([hp(e) for e in values(task.inputs["w0"])], xs, ys)[1])
    )
    if norm <= 1:
        return "the first gradient's norm is at most 1: the clipping would not act"
    return None


ADAMW_THREE_STEPS = leveled(
    ADAMW_THREE_STEPS,
    {
        2: _opt(
            "adamw_three_steps",
            reference=adamw_three_steps,
            independent=_adamw_three_steps,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} {_ADAMW_RULE.replace("lr", "0.1")} Take three steps from
            `w0`. Give `w` after
                them and `losses`, L at the start of each step, in order.""",
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "losses": f32(3)},),
        ),
        3: _opt(
            "adamw_three_steps",
            reference=adamw_after,
            independent=_adamw_after,
            sample=regression_inputs,
            question=f"""{_LOSS_MATH} {_ADAMW_RULE.replace("lr", "0.1")} Take three steps from
            `w0`. Give `loss`,
                L at the w they end at, and `distance`, the Euclidean distance from `w0` to that w (0-d
                tensors).""",
            answer=({"loss": f32(), "distance": f32()},),
        ),
        4: _opt(
            "adamw_three_steps",
            reference=adamw_best_rate,
            independent=_adamw_best_rate,
            sample=_sample_rates,
            refuse=_rates_clear,
            zero_reason=_rate_zero,
            question=f"""{_LOSS_MATH} {_ADAMW_RULE} For each candidate step size lr in `rates`
            (index k = 0, 1,
                ...), take three steps from `w0`. Give `best`, the index of the lr whose three
                steps end at the
                lowest L, and `loss`, that lowest L.""",
            answer=({"best": PY_INT, "loss": f32()},),
        ),
        5: _opt(
            "adamw_three_steps",
            reference=adamw_warmup_clipping,
            independent=_adamw_warmup_clipping,
            sample=regression_inputs,
            reject=_warmup_clips,
            question=f"""{_LOSS_MATH} Train for five steps t = 1..5. In each, compute g at the current w and
                scale it by min(1, 1 / (||g|| + 1e-6)) (||g|| the Euclidean norm: the gradient is clipped to
                norm 1); the step size is lr_t = 0.1 * min(t / 3, 1) (a linear warm-up over three steps).
                {_ADAMW_RULE.replace("lr", "lr_t").replace("t = 1, 2, 3", "t")} Give `w` after the five steps
                and `losses`, L at the start of each step, in order.""",
            answer=lambda i: ({"w": f32(*_dims(i["w0"])), "losses": f32(5)},),
        ),
    },
    levels="L1 torch.optim.AdamW named; L2 the decoupled decay and moments described; L3 the loss at the end "
    "and the distance travelled; L4 the best of four step sizes after three steps; L5 a warm-up schedule "
    "and gradient clipping around the update (described, not named)",
)


# clipped_gradients -------------------------------------------------------------------------------
_CLIP_SETUP = """Let L = 1.5 * sum(p1^2) + sum(p2^3) for tensors p1 = `p1_0` and p2 = `p2_0`, and g1, g2 its
    gradients with respect to them."""

_CLIP_MATH = """Clipping to a maximum norm M computes the total norm N = sqrt(sum of g1^2 + sum of
g2^2) over both
    tensors together and multiplies both gradients by min(1, M / (N + 1e-6))."""


def clip_then_step(p1_0, p2_0):
    import torch

    p1, p2 = p1_0.clone().requires_grad_(True), p2_0.clone().requires_grad_(True)
    (1.5 * (p1**2).sum() + (p2**3).sum()).backward()
    torch.nn.utils.clip_grad_norm_([p1, p2], max_norm=1.0)
    with torch.no_grad():
        q1, q2 = p1 - 0.5 * p1.grad, p2 - 0.5 * p2.grad
        loss = 1.5 * (q1**2).sum() + (q2**3).sum()
    return {"rows": [{"p1": q1, "p2": q2, "loss": loss}]}


def _clip_coefficient(g1, g2, max_norm):
    total = mpmath.sqrt(hp(sum((g * g for g in g1), Fraction(0)) + sum((g * g for g in g2), Fraction(0))))
    return total, min(hp(max_norm) / (total + hp(1e-6)), hp(1))


def _clip_then_step(p1_0, p2_0):
    v1, v2 = values(p1_0), values(p2_0)
    g1 = [3 * e for row in v1 for e in row]
    g2 = [3 * e * e for e in v2]
    _, c = _clip_coefficient(g1, g2, 1.0)
    q1 = [[hp(e) - c * hp(3 * e) / 2 for e in row] for row in v1]
    q2 = [hp(e) - c * hp(3 * e * e) / 2 for e in v2]
    loss = hp(1.5) * mpmath.fsum(e * e for row in q1 for e in row) + mpmath.fsum(e**3 for e in q2)
    return [
        {
            "p1": ExactTensor.of("float32", q1),
            "p2": ExactTensor.of("float32", q2),
            "loss": ExactTensor.of("float32", loss),
        }
    ]


def threshold_for_norm(p1_0, p2_0, goal):
    import torch

    g1 = 3 * p1_0.double()
    g2 = 3 * p2_0.double() ** 2
    total = torch.sqrt((g1**2).sum() + (g2**2).sum())
    return {"rows": [{"max_norm": (goal * (total + 1e-6) / g1.norm()).to(p1_0.dtype).item()}]}


def _threshold_for_norm(p1_0, p2_0, goal):
    g1 = [3 * e for row in values(p1_0) for e in row]
    g2 = [3 * e * e for e in values(p2_0)]
    total, _ = _clip_coefficient(g1, g2, 1.0)
    norm1 = mpmath.sqrt(hp(sum((g * g for g in g1), Fraction(0))))
    return [{"max_norm": hp(goal) * (total + hp(1e-6)) / norm1}]


def _sample_threshold(draw, level):
    inputs = _sample_clipping(draw, 3)
    g1 = [3 * e for row in values(inputs["p1_0"]) for e in row]
    norm1 = math.sqrt(sum(g * g for g in g1))
    if norm1 < 1:
        raise Reject("p1's gradient is too small to clip to a goal")
    return {**inputs, "goal": float(draw.dyadic(Fraction(1, 4), Fraction(min(norm1, 8)) * Fraction(3, 4), 2))}


def _threshold_clips(inputs):
    g1 = [3 * e for row in values(inputs["p1_0"]) for e in row]
    g2 = [3 * e * e for e in values(inputs["p2_0"])]
    total = math.sqrt(sum(g * g for g in g1) + sum(g * g for g in g2))
    if not 0 < inputs["goal"] < math.sqrt(sum(g * g for g in g1)) * 0.98:
        return "the goal is not below p1's unclipped gradient norm: no clipping threshold reaches it"
    if total < 1.5:
        return "the total norm is small: the instance barely clips"
    return None


def adaptive_clipping(p1_0, p2_0):
    import torch

    params = [p1_0.clone().requires_grad_(True), p2_0.clone().requires_grad_(True)]
    (1.5 * (params[0] ** 2).sum() + (params[1] ** 3).sum()).backward()
    out = []
    with torch.no_grad():
        for p in params:
            limit = 0.5 * torch.clamp(p.norm(), min=1e-3)
            scale = torch.clamp(limit / p.grad.norm(), max=1.0)
            out.append(p - 0.25 * p.grad * scale)
    return {"rows": [{"p1": out[0], "p2": out[1]}]}


def _adaptive_clipping(p1_0, p2_0):
    out = []
    for flat, grad, shape in (
        (values(p1_0), [[3 * e for e in row] for row in values(p1_0)], "matrix"),
        (values(p2_0), [3 * e * e for e in values(p2_0)], "vector"),
    ):
        ps = [hp(e) for e in _flat_opt(flat)]
        gs = [hp(e) for e in _flat_opt(grad)]
        limit = hp(0.5) * max(mpmath.sqrt(mpmath.fsum(p * p for p in ps)), hp(1e-3))
        scale = min(limit / mpmath.sqrt(mpmath.fsum(g * g for g in gs)), 1)
        stepped = [p - hp(0.25) * g * scale for p, g in zip(ps, gs, strict=True)]
        out.append(reshape(stepped, (len(flat), len(flat[0]))) if shape == "matrix" else stepped)
    return [{"p1": ExactTensor.of("float32", out[0]), "p2": ExactTensor.of("float32", out[1])}]


def _flat_opt(nested):
    return [e for item in nested for e in _flat_opt(item)] if isinstance(nested, list) else [nested]


def _one_clips(inputs):
    states = []
    for ps, gs in (
        (_flat_opt(values(inputs["p1_0"])), [3 * e for e in _flat_opt(values(inputs["p1_0"]))]),
        (values(inputs["p2_0"]), [3 * e * e for e in values(inputs["p2_0"])]),
    ):
        ratio = math.sqrt(sum(g * g for g in gs)) / max(math.sqrt(sum(p * p for p in ps)), 1e-3)
        if abs(ratio - 0.5) < 0.01:
            return "a tensor's gradient-to-weight ratio is within 0.01 of the limit"
        states.append(ratio > 0.5)
    if len(set(states)) < 2:
        return "both tensors are clipped, or neither: one case goes untested"
    return None


def _sample_adaptive_clip(draw, level):
    inputs = _sample_clipping(draw, 3)
    scale = draw.choice((Fraction(1, 8), Fraction(1, 16)))
    return {
        "p1_0": inputs["p1_0"],
        "p2_0": tensor("float32", [float(e * scale) for e in values(inputs["p2_0"])]),
    }


CLIPPED_GRADIENTS = leveled(
    CLIPPED_GRADIENTS,
    {
        2: _opt(
            "clipped_gradients",
            reference=clipped_gradients,
            independent=_clipped_gradients,
            sample=_sample_clipping,
            reject=_clips,
            question=f"""{_CLIP_SETUP} {_CLIP_MATH} Clip g1, g2 to M = 1. Give `total_norm`, N (before
                clipping), and the clipped gradients `grad_p1` and `grad_p2`.""",
            answer=lambda i: (
                {"total_norm": f32(), "grad_p1": f32(*_dims(i["p1_0"])), "grad_p2": f32(*_dims(i["p2_0"]))},
            ),
        ),
        3: _opt(
            "clipped_gradients",
            reference=clip_then_step,
            independent=_clip_then_step,
            sample=_sample_clipping,
            refuse=lambda i: (
                None
                if math.sqrt(sum((3 * e) ** 2 for e in _flat_opt(values(i["p1_0"])))) > 1.5
                else "p1's gradient is small: clipping barely acts"
            ),
            question=f"""{_CLIP_SETUP} {_CLIP_MATH} Clip g1, g2 to M = 1, then take one
            gradient-descent step of
                size 0.5 on both tensors with the clipped gradients. Give the new tensors `p1` and `p2` and
                `loss`, L at them.""",
            answer=lambda i: ({"p1": f32(*_dims(i["p1_0"])), "p2": f32(*_dims(i["p2_0"])), "loss": f32()},),
        ),
        4: _opt(
            "clipped_gradients",
            reference=threshold_for_norm,
            independent=_threshold_for_norm,
            sample=_sample_threshold,
            refuse=_threshold_clips,
            question=f"""{_CLIP_SETUP} {_CLIP_MATH} Give `max_norm`, the M for which the clipped g1
            has Euclidean
                norm exactly `goal` (a Python float).""",
            answer=({"max_norm": PY_FLOAT},),
        ),
        5: _opt(
            "clipped_gradients",
            reference=adaptive_clipping,
            independent=_adaptive_clipping,
            sample=_sample_adaptive_clip,
            refuse=_one_clips,
            question=f"""{_CLIP_SETUP} Each tensor p is clipped on its own, relative to its size:
            its gradient g
                is multiplied by min(1, 0.5 * max(||p||, 1e-3) / ||g||) (||.|| the Euclidean norm of all its
                elements). Then take one gradient-descent step of size 0.25 on both tensors with the clipped
                gradients. Give the new tensors `p1` and `p2`.""",
            answer=lambda i: ({"p1": f32(*_dims(i["p1_0"])), "p2": f32(*_dims(i["p2_0"]))},),
        ),
    },
    levels="L1 clip_grad_norm_ named; L2 the global norm clipping described; L3 clipping then a step and the "
    "loss after it; L4 the threshold that clips one tensor's gradient to a given norm (an inverse); L5 "
    "per-tensor clipping relative to the weight norm (adaptive clipping, described not named)",
)


# sgd_schedule_clipping ---------------------------------------------------------------------------
def _schedule_math(i, *, batches=False, warmup=False, nesterov=False):
    data = (
        (
            "L_t(w) = mean((x_t @ w - y_t)^2), where (x_t, y_t) is mini-batch number t mod B: the rows of "
            "`x`, `y` cut in order into B = "
            + str(i["x"].shape[0] // i["batch"])
            + " consecutive batches of "
            + str(i["batch"])
            + " rows"
        )
        if batches
        else "L(w) = mean((x @ w - y)^2) over all rows of `x`, `y`"
    )
    rate = (
        f"lr_t = {i['lr']} * min((t + 1) / {i['warmup']}, 1) * {i['gamma']}^floor(t / {i['step_size']})"
        if warmup
        else f"lr_t = {i['lr']} * {i['gamma']}^floor(t / {i['step_size']})"
    )
    move = f"w <- w - lr_t * (d + {i['momentum']} * b)" if nesterov else "w <- w - lr_t * b"
    return f"""Train w, starting at `w0`, for {i["steps"]} steps t = 0, 1, ..., {i["steps"] - 1} on the loss
        {data}. In step t: compute the gradient g of the loss at the current w and its Euclidean norm n_t;
        scale g by min(1, {i["max_norm"]} / (n_t + 1e-6)); form d = g + {i["weight_decay"]} * w; update a
        buffer b (b = d at step 0, b <- {i["momentum"]} * b + d after); then {move} with the step size
        {rate}."""


def _schedule_run(
    w0,
    x,
    y,
    steps,
    lr,
    momentum,
    weight_decay,
    max_norm,
    step_size,
    gamma,
    *,
    batch=None,
    warmup=None,
    nesterov=False,
):
    xs, ys = _hp_rows(x, y)
    w = [hp(e) for e in values(w0)]
    lr, momentum, decay, max_norm, gamma = (hp(v) for v in (lr, momentum, weight_decay, max_norm, gamma))
    buffer, losses, norms = None, [], []
    count = len(xs) // batch if batch else 1
    for t in range(steps):
        rows = slice((t % count) * batch, (t % count + 1) * batch) if batch else slice(None)
        loss, grad = _loss_and_grad(w, xs[rows], ys[rows])
        losses.append(loss)
        norm = mpmath.sqrt(mpmath.fsum(g * g for g in grad))
        norms.append(norm)
        grad = [g * min(max_norm / (norm + hp(1e-6)), 1) + decay * p for g, p in zip(grad, w, strict=True)]
        buffer = grad if buffer is None else [momentum * b + g for b, g in zip(buffer, grad, strict=True)]
        rate = lr * gamma ** (t // step_size) * (min(mpmath.mpf(t + 1) / warmup, 1) if warmup else 1)
        move = [g + momentum * b for g, b in zip(grad, buffer, strict=True)] if nesterov else buffer
        w = [p - rate * m for p, m in zip(w, move, strict=True)]
    return w, losses, norms


def _schedule_keys(**inputs):
    w, losses, norms = _schedule_run(**inputs)
    return [
        {
            "w": ExactTensor.of("float32", w),
            "losses": ExactTensor.of("float32", losses),
            "grad_norms": ExactTensor.of("float32", norms),
        }
    ]


def schedule_minibatches(w0, x, y, steps, lr, momentum, weight_decay, max_norm, step_size, gamma, batch):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=lr, momentum=momentum, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=step_size, gamma=gamma)
    count = x.shape[0] // batch
    losses, norms = [], []
    for t in range(steps):
        xb, yb = (
            x[(t % count) * batch : (t % count + 1) * batch],
            y[(t % count) * batch : (t % count + 1) * batch],
        )
        optimizer.zero_grad()
        loss = ((xb @ w - yb) ** 2).mean()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_([w], max_norm=max_norm))
        losses.append(loss.detach())
        optimizer.step()
        schedule.step()
    return {"rows": [{"w": w.detach(), "losses": torch.stack(losses), "grad_norms": torch.stack(norms)}]}


def _schedule_minibatches(w0, x, y, steps, lr, momentum, weight_decay, max_norm, step_size, gamma, batch):
    return _schedule_keys(
        w0=w0,
        x=x,
        y=y,
        steps=steps,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        max_norm=max_norm,
        step_size=step_size,
        gamma=gamma,
        batch=batch,
    )


def _sample_minibatch_schedule(draw, level):
    inputs = dict(_sample_schedule(draw, 3))
    batch = 2
    rows = batch * draw.integer(2, 3)
    weights = inputs["w0"].shape[0]
    inputs["x"] = dyadic_tensor(draw, (rows, weights), -3, 3, 2)
    inputs["y"] = dyadic_tensor(draw, (rows,), -3, 3, 2)
    inputs["steps"] = 2 * rows // batch + draw.integer(0, 1)
    inputs["step_size"] = draw.integer(2, 3)
    return {**inputs, "batch": batch}


def _schedule_clips(task):
    norms = task.expected["rows"][0]["grad_norms"].data
    if not any(n > task.inputs["max_norm"] for n in norms) or all(n > task.inputs["max_norm"] for n in norms):
        return "the clipping acts at every step or at none: one case goes untested"
    return None


def schedule_best_threshold(w0, x, y, steps, lr, momentum, weight_decay, thresholds, step_size, gamma):
    import torch

    finals = []
    for max_norm in thresholds.tolist():
        w = w0.double().requires_grad_(True)
        optimizer = torch.optim.SGD([w], lr=lr, momentum=momentum, weight_decay=weight_decay)
        schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=step_size, gamma=gamma)
        for _ in range(steps):
            optimizer.zero_grad()
            ((x.double() @ w - y.double()) ** 2).mean().backward()
            torch.nn.utils.clip_grad_norm_([w], max_norm=max_norm)
            optimizer.step()
            schedule.step()
        with torch.no_grad():
            finals.append(((x.double() @ w - y.double()) ** 2).mean())
    finals = torch.stack(finals)
    k = int(finals.argmin())
    return {"rows": [{"best": k, "loss": finals[k].to(x.dtype)}]}


def _threshold_finals(w0, x, y, steps, lr, momentum, weight_decay, thresholds, step_size, gamma):
    xs, ys = _hp_rows(x, y)
    finals = []
    for m in values(thresholds):
        w, _, _ = _schedule_run(w0, x, y, steps, lr, momentum, weight_decay, m, step_size, gamma)
        finals.append(_loss_and_grad(w, xs, ys)[0])
    return finals


def _schedule_best_threshold(**inputs):
    finals = _threshold_finals(**inputs)
    k = finals.index(min(finals))
    return [{"best": k, "loss": ExactTensor.of("float32", finals[k])}]


def _sample_thresholds(draw, level):
    inputs = dict(_sample_schedule(draw, 3))
    inputs.pop("max_norm")
    thresholds = sorted(draw.sample([0.25, 0.5, 1.0, 2.0, 4.0, 8.0], 4))
    return {**inputs, "thresholds": tensor("float32", thresholds)}


def _thresholds_clear(inputs):
    return clear_winner(_threshold_finals(**inputs))


def _threshold_zero(inputs):
    finals = _threshold_finals(**inputs)
    return "the first threshold is the best: best is index 0" if finals.index(min(finals)) == 0 else None


def schedule_full(w0, x, y, steps, lr, momentum, weight_decay, max_norm, step_size, gamma, batch, warmup):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda t: min((t + 1) / warmup, 1.0) * gamma ** (t // step_size)
    )
    count = x.shape[0] // batch
    losses, norms = [], []
    for t in range(steps):
        xb, yb = (
            x[(t % count) * batch : (t % count + 1) * batch],
            y[(t % count) * batch : (t % count + 1) * batch],
        )
        optimizer.zero_grad()
        loss = ((xb @ w - yb) ** 2).mean()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_([w], max_norm=max_norm))
        losses.append(loss.detach())
        optimizer.step()
        schedule.step()
    return {"rows": [{"w": w.detach(), "losses": torch.stack(losses), "grad_norms": torch.stack(norms)}]}


def _schedule_full(w0, x, y, steps, lr, momentum, weight_decay, max_norm, step_size, gamma, batch, warmup):
    return _schedule_keys(
        w0=w0,
        x=x,
        y=y,
        steps=steps,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        max_norm=max_norm,
        step_size=step_size,
        gamma=gamma,
        batch=batch,
        warmup=warmup,
        nesterov=True,
    )


def _sample_full_schedule(draw, level):
    inputs = _sample_minibatch_schedule(draw, level)
    return {**inputs, "warmup": draw.integer(2, 3)}


# L5: the clipping threshold at the regime boundary. The smallest M at which the scaling never acts is the
# largest gradient norm of the unclipped run (plus the 1e-6): below it the run clips at the step holding that
# maximum (first, for M just below), above it the run is the unclipped one. No candidate list is given, so
# the solver must see the fixed point; the rules put the maximum after step 0 (so the first gradient's norm is
# wrong) and require the run at half that threshold to clip at some steps but not all, and to end at a loss
# that forgetting its clipping would not give (round 3: the count of its clipped steps, asked before, was 1 on
# most instances; the loss carries the whole clipped trajectory).
_UNCLIPPED = 1e300


def schedule_clip_boundary(w0, x, y, steps, lr, momentum, weight_decay, step_size, gamma, batch, warmup):
    import torch

    xd, yd = x.double(), y.double()
    count = x.shape[0] // batch

    def run(max_norm):
        w = w0.double().clone().requires_grad_(True)
        optimizer = torch.optim.SGD([w], lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=True)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda t: min((t + 1) / warmup, 1.0) * gamma ** (t // step_size))
        norms = []
        for t in range(steps):
            rows = slice((t % count) * batch, (t % count + 1) * batch)
            optimizer.zero_grad()
            ((xd[rows] @ w - yd[rows]) ** 2).mean().backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_([w], max_norm=max_norm)))
            optimizer.step()
            schedule.step()
        with torch.no_grad():
            return norms, float(((xd @ w - yd) ** 2).mean())

    norms, _ = run(1e300)
    threshold = max(norms) + 1e-6
    _, final_loss = run(threshold)
    _, half_loss = run(threshold / 2)
    row = {"threshold": threshold, "binding_step": norms.index(max(norms)), "final_loss": final_loss,
           "loss_at_half": half_loss}
    return {"rows": [row]}


def _clip_boundary_parts(w0, x, y, steps, lr, momentum, weight_decay, step_size, gamma, batch, warmup):
    args = {"w0": w0, "x": x, "y": y, "steps": steps, "lr": lr, "momentum": momentum,
            "weight_decay": weight_decay, "step_size": step_size, "gamma": gamma, "batch": batch,
            "warmup": warmup, "nesterov": True}
    _, _, norms = _schedule_run(**args, max_norm=_UNCLIPPED)
    threshold = max(norms) + hp(1e-6)
    final, _, _ = _schedule_run(**args, max_norm=threshold)
    half, _, half_norms = _schedule_run(**args, max_norm=threshold / 2)
    xs, ys = _hp_rows(x, y)
    return norms, threshold, _loss_and_grad(final, xs, ys)[0], half_norms, _loss_and_grad(half, xs, ys)[0]


def _schedule_clip_boundary(**inputs):
    norms, threshold, final_loss, _, half_loss = _clip_boundary_parts(**inputs)
    return [{"threshold": threshold, "binding_step": norms.index(max(norms)), "final_loss": final_loss,
             "loss_at_half": half_loss}]


def _sample_clip_boundary(draw, level):
    inputs = _sample_full_schedule(draw, level)
    del inputs["max_norm"]
    return inputs


def _clip_boundary_rules(inputs):
    norms, threshold, final_loss, half_norms, half_loss = _clip_boundary_parts(**inputs)
    ordered = sorted(norms, reverse=True)
    if ordered[0] - ordered[1] < mpmath.mpf("1e-3") * ordered[0]:
        return "the two largest gradient norms are within 1e-3: the binding step is too close to call"
    if norms.index(ordered[0]) == 0:
        return "the first gradient is the largest: its norm alone would give the threshold"
    half = threshold / 2
    if any(abs(n + hp(1e-6) - half) < mpmath.mpf("1e-4") * half for n in half_norms):
        return "a norm of the half-threshold run lies within 1e-4 of it: too close to call"
    clipped = sum(1 for n in half_norms if n + hp(1e-6) > half)
    if not 0 < clipped < len(half_norms):
        return "the half-threshold run clips at every step or at none: one regime goes untested"
    if abs(half_loss - final_loss) < mpmath.mpf("1e-3") * max(abs(half_loss), abs(final_loss)):
        return ("the half-threshold run ends within 1e-3 of the unclipped run's loss: forgetting its "
                "clipping passes")
    return None


_CLIP_BOUNDARY_ANSWER = """Give `threshold`, the smallest M for which the scaling factor equals 1 at every
    step of the run (a Python float); `binding_step`, the step t at which the gradient is first scaled in
    every run with M below `threshold` and close enough to it (a Python int); `final_loss`, L over all rows
    of `x`, `y` at the final w of the run with M = `threshold` (a Python float); and `loss_at_half`, L over
    all rows of `x`, `y` at the final w of the run with M = `threshold` / 2 (a Python float)."""


_SCHEDULE_ANSWER = (
    "Give the final `w`, and `losses` and `grad_norms`: for each step t in order, the loss at the w that "
    "step starts from, and n_t."
)


def _schedule_answer(i):
    return ({"w": f32(*_dims(i["w0"])), "losses": f32(i["steps"]), "grad_norms": f32(i["steps"])},)


SGD_SCHEDULE_CLIPPING = leveled(
    SGD_SCHEDULE_CLIPPING,
    {
        2: _opt(
            "sgd_schedule_clipping",
            reference=sgd_schedule_clipping,
            independent=_sgd_schedule_clipping,
            sample=_sample_schedule,
            reject=_clipping_acts,
            question=lambda i: (
                f"""{_schedule_math(i)} {_SCHEDULE_ANSWER} Also give `final_lr`, the step size
                the schedule gives for step t = {i["steps"]} (one past the last; a Python float)."""
            ),
            answer=lambda i: (
                {
                    "w": f32(*_dims(i["w0"])),
                    "losses": f32(i["steps"]),
                    "grad_norms": f32(i["steps"]),
                    "final_lr": PY_FLOAT,
                },
            ),
        ),
        3: _opt(
            "sgd_schedule_clipping",
            reference=schedule_minibatches,
            independent=_schedule_minibatches,
            sample=_sample_minibatch_schedule,
            reject=_schedule_clips,
            question=lambda i: f"""{_schedule_math(i, batches=True)} {_SCHEDULE_ANSWER}""",
            answer=_schedule_answer,
        ),
        4: _opt(
            "sgd_schedule_clipping",
            reference=schedule_best_threshold,
            independent=_schedule_best_threshold,
            sample=_sample_thresholds,
            refuse=_thresholds_clear,
            zero_reason=_threshold_zero,
            question=lambda i: (
                f"""{_schedule_math({**i, "max_norm": "M"})} For each candidate M in `thresholds`
                (index k = 0, 1, ...), run this training from `w0`. Give `best`, the index of the M whose run
                ends at the lowest L (evaluated at the final w), and `loss`, that lowest L."""
            ),
            answer=({"best": PY_INT, "loss": f32()},),
        ),
        5: _opt(
            "sgd_schedule_clipping",
            reference=schedule_clip_boundary,
            independent=_schedule_clip_boundary,
            sample=_sample_clip_boundary,
            refuse=_clip_boundary_rules,
            question=lambda i: (
                f"""{_schedule_math({**i, "max_norm": "M"}, batches=True, warmup=True, nesterov=True)}
                {_CLIP_BOUNDARY_ANSWER}"""
            ),
            answer=({"threshold": PY_FLOAT, "binding_step": PY_INT, "final_loss": PY_FLOAT,
                     "loss_at_half": PY_FLOAT},),
        ),
    },
    levels="L1 SGD, StepLR and clip_grad_norm_ named; L2 the whole loop described mathematically; L3 the "
    "loop on mini-batches in rotation; L4 the best of four clipping thresholds for the final loss; L5 "
    "the clipping threshold at its regime boundary (the smallest M that never scales: the largest norm of "
    "the unclipped run), the step that binds, the loss there and the loss of the run at half that threshold "
    "(which clips at some steps, not all), with mini-batches, warm-up times step decay and look-ahead "
    "momentum",
)

FAMILIES = (
    SGD_STEP,
    SGD_MOMENTUM_STEPS,
    ADAM_STEP,
    ADAMW_THREE_STEPS,
    CLIPPED_GRADIENTS,
    SGD_SCHEDULE_CLIPPING,
)

_REGRESSION = {
    "x": tensor("float32", [[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [3.0, 0.25, 1.0], [-2.0, 1.0, 0.5]]),
    "y": tensor("float32", [1.0, -2.0, 0.5, 3.0]),
}

TASKS = (
    SGD_STEP.task("pt-040", {"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION}),
    SGD_MOMENTUM_STEPS.task("pt-041", {"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION}),
    ADAM_STEP.task(
        "pt-042",
        {"w0": tensor("float32", [1.5, -2.0, 0.75]), "scales": tensor("float32", [256.0, 0.001953125, -1.0])},
    ),
    ADAMW_THREE_STEPS.task("pt-043", {"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION}),
    CLIPPED_GRADIENTS.task(
        "pt-044",
        {
            "p1_0": tensor("float32", [[0.5, -1.0], [1.5, 0.25]]),
            "p2_0": tensor("float32", [-0.75, 1.25, 2.0]),
        },
    ),
)
