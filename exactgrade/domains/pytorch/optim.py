"""optim (pt-040..pt-044): one SGD step with weight decay, SGD with momentum, one Adam step,
three chained AdamW steps, and clip_grad_norm_.

The independent checks replay each update rule as torch documents it: exact Fractions for SGD
on a quadratic loss, mpmath for the square roots of Adam and of the gradient norm.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import f32, make_task, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, matmul, transpose, values


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


_REGRESSION = {
    "x": tensor("float32", [[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [3.0, 0.25, 1.0], [-2.0, 1.0, 0.5]]),
    "y": tensor("float32", [1.0, -2.0, 0.5, 3.0]),
}

TASKS = (
    make_task(
        "pt-040", "optim", reference=sgd_step, independent=_sgd_step,
        inputs={"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION},
        question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
            torch.optim.SGD([w], lr=0.1, weight_decay=0.01). Compute loss = mean((x @ w - y)^2), call
            loss.backward() and take one optimiser step. Give the updated parameter `w` and `grad`, the
            gradient stored in w.grad.""",
        answer=({"w": f32(3), "grad": f32(3)},),
    ),
    make_task(
        "pt-041", "optim", reference=sgd_momentum_steps, independent=_sgd_momentum_steps,
        inputs={"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION},
        question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
            torch.optim.SGD([w], lr=0.05, momentum=0.9). Take two steps, each one zeroing the gradient,
            computing loss = mean((x @ w - y)^2) at the current w, calling backward and stepping. Give the
            parameter `w` after the two steps and the optimiser's `momentum_buffer` for w.""",
        answer=({"w": f32(3), "momentum_buffer": f32(3)},),
    ),
    make_task(
        "pt-042", "optim", reference=adam_step, independent=_adam_step,
        inputs={"w0": tensor("float32", [1.5, -2.0, 0.75]),
                "scales": tensor("float32", [256.0, 0.001953125, -1.0])},
        question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
            torch.optim.Adam([w], lr=0.01) (default betas and eps). Compute loss = sum(scales * w^2), call
            backward and take one optimiser step. Give the updated `w` and the optimiser state tensors
            `exp_avg` and `exp_avg_sq` for w.""",
        answer=({"w": f32(3), "exp_avg": f32(3), "exp_avg_sq": f32(3)},),
    ),
    make_task(
        "pt-043", "optim", reference=adamw_three_steps, independent=_adamw_three_steps,
        inputs={"w0": tensor("float32", [0.5, -1.0, 0.25]), **_REGRESSION},
        question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
            torch.optim.AdamW([w], lr=0.1, weight_decay=0.1) (default betas and eps). Take three steps, each
            one zeroing the gradient, computing loss = mean((x @ w - y)^2) at the current w, calling
            backward and stepping. Give the parameter `w` after the three steps and `losses`, the three loss
            values computed before each step, in order.""",
        answer=({"w": f32(3), "losses": f32(3)},),
    ),
    make_task(
        "pt-044", "optim", reference=clipped_gradients, independent=_clipped_gradients,
        inputs={"p1_0": tensor("float32", [[0.5, -1.0], [1.5, 0.25]]),
                "p2_0": tensor("float32", [-0.75, 1.25, 2.0])},
        question="""Make leaf tensors p1 (from `p1_0`) and p2 (from `p2_0`) that require gradients, compute
            loss = 1.5 * sum(p1^2) + sum(p2^3) and call backward. Then clip the gradients of [p1, p2] with
            torch.nn.utils.clip_grad_norm_ and max_norm=1.0 (total L2 norm). Give `total_norm`, the value
            clip_grad_norm_ returns, and the clipped gradients `grad_p1` and `grad_p2`.""",
        answer=({"total_norm": f32(), "grad_p1": f32(2, 2), "grad_p2": f32(3)},),
    ),
)
