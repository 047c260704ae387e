"""The adamw_three_steps family of optim: everything it needs, its five levels in level order."""

from __future__ import annotations

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, values
from exactgrade.domains.pytorch.optim.shared import LOSS_MATH, hp_rows, loss_and_grad
from exactgrade.domains.pytorch.sampling import regression_inputs
from exactgrade.domains.pytorch.shared import clear_winner, dims
from exactgrade.family import five_levels


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

LEVEL_1 = pytorch_level(
    "optim",
    reference=adamw_three_steps,
    independent=_adamw_three_steps,
    question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
        torch.optim.AdamW([w], lr=0.1, weight_decay=0.1) (default betas and eps). Take three steps, each
        one zeroing the gradient, computing loss = mean((x @ w - y)^2) at the current w, calling
        backward and stepping. Give the parameter `w` after the three steps and `losses`, the three loss
        values computed before each step, in order.""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "losses": f32(3)},),
    sample=regression_inputs,
)


# adamw_three_steps -------------------------------------------------------------------------------
_ADAMW_RULE = """Each step t = 1, 2, 3 first shrinks w <- w * (1 - lr * 0.1) (decoupled weight decay 0.1),
    then updates m <- 0.9 * m + 0.1 * g and v <- 0.999 * v + 0.001 * g^2 (elementwise, both starting at 0, g
    taken at the w before the shrink) and sets w <- w - lr / (1 - 0.9^t) * m / (sqrt(v) / sqrt(1 - 0.999^t) +
    1e-8)."""


LEVEL_2 = pytorch_level(
    "optim",
    reference=adamw_three_steps,
    independent=_adamw_three_steps,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} {_ADAMW_RULE.replace("lr", "0.1")} Take three steps from
    `w0`. Give `w` after
        them and `losses`, L at the start of each step, in order.""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "losses": f32(3)},),
)


def _adamw_run(w0, x, y, lr, steps, *, warmup=0, max_norm=None):
    xs, ys = hp_rows(x, y)
    w = [hp(e) for e in values(w0)]
    m, v, losses = [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w), []
    b1, b2, decay, eps = hp(0.9), hp(0.999), hp(0.1), hp(1e-8)
    for t in range(1, steps + 1):
        loss, grad = loss_and_grad(w, xs, ys)
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
    return w, losses, loss_and_grad(w, xs, ys)[0]


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


LEVEL_3 = pytorch_level(
    "optim",
    reference=adamw_after,
    independent=_adamw_after,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} {_ADAMW_RULE.replace("lr", "0.1")} Take three steps from
    `w0`. Give `loss`,
        L at the w they end at, and `distance`, the Euclidean distance from `w0` to that w (0-d
        tensors).""",
    answer=({"loss": f32(), "distance": f32()},),
)


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


LEVEL_4 = pytorch_level(
    "optim",
    reference=adamw_best_rate,
    independent=_adamw_best_rate,
    sample=_sample_rates,
    refuse=_rates_clear,
    zero_reason=_rate_zero,
    question=f"""{LOSS_MATH} {_ADAMW_RULE} For each candidate step size lr in `rates`
    (index k = 0, 1,
        ...), take three steps from `w0`. Give `best`, the index of the lr whose three
        steps end at the
        lowest L, and `loss`, that lowest L.""",
    answer=({"best": PY_INT, "loss": f32()},),
)


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
    xs, ys = hp_rows(task.inputs["x"], task.inputs["y"])
    norm = mpmath.sqrt(
        mpmath.fsum(g * g for g in loss_and_grad([hp(e) for e in values(task.inputs["w0"])], xs, ys)[1])
    )
    if norm <= 1:
        return "the first gradient's norm is at most 1: the clipping would not act"
    return None


LEVEL_5 = pytorch_level(
    "optim",
    reference=adamw_warmup_clipping,
    independent=_adamw_warmup_clipping,
    sample=regression_inputs,
    reject=_warmup_clips,
    question=f"""{LOSS_MATH} Train for five steps t = 1..5. In each, compute g at the current w and
        scale it by min(1, 1 / (||g|| + 1e-6)) (||g|| the Euclidean norm: the gradient is clipped to
        norm 1); the step size is lr_t = 0.1 * min(t / 3, 1) (a linear warm-up over three steps).
        {_ADAMW_RULE.replace("lr", "lr_t").replace("t = 1, 2, 3", "t")} Give `w` after the five steps
        and `losses`, L at the start of each step, in order.""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "losses": f32(5)},),
)


ADAMW_THREE_STEPS = five_levels(
    "adamw_three_steps",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 torch.optim.AdamW named; L2 the decoupled decay and moments described; L3 the loss at the end "
   "and the distance travelled; L4 the best of four step sizes after three steps; L5 a warm-up schedule "
   "and gradient clipping around the update (described, not named)",
)
