"""optim (pt-040..pt-044): one SGD step with weight decay, SGD with momentum, one Adam step,
three chained AdamW steps, and clip_grad_norm_.

The independent checks replay each update rule as torch documents it: exact Fractions for SGD
on a quadratic loss, mpmath for the square roots of Adam and of the gradient norm.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, f32, pytorch_family, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, matmul, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_list, dyadic_tensor, regression_inputs
from exactgrade.family import Draw
from exactgrade.task import Task


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
