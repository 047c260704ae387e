"""The sgd_schedule_clipping family of optim: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, values
from exactgrade.domains.pytorch.optim.shared import hp_rows, loss_and_grad
from exactgrade.domains.pytorch.sampling import dyadic_tensor, regression_inputs
from exactgrade.domains.pytorch.shared import clear_winner, dims
from exactgrade.family import Draw, five_levels
from exactgrade.task import Task


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


LEVEL_1 = pytorch_level(
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
            "w": f32(*dims(i["w0"])),
            "losses": f32(i["steps"]),
            "grad_norms": f32(i["steps"]),
            "final_lr": PY_FLOAT,
        },
    ),
    sample=_sample_schedule,
    reject=_clipping_acts,
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
    xs, ys = hp_rows(x, y)
    w = [hp(e) for e in values(w0)]
    lr, momentum, decay, max_norm, gamma = (hp(v) for v in (lr, momentum, weight_decay, max_norm, gamma))
    buffer, losses, norms = None, [], []
    count = len(xs) // batch if batch else 1
    for t in range(steps):
        rows = slice((t % count) * batch, (t % count + 1) * batch) if batch else slice(None)
        loss, grad = loss_and_grad(w, xs[rows], ys[rows])
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
    xs, ys = hp_rows(x, y)
    finals = []
    for m in values(thresholds):
        w, _, _ = _schedule_run(w0, x, y, steps, lr, momentum, weight_decay, m, step_size, gamma)
        finals.append(loss_and_grad(w, xs, ys)[0])
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


def _sample_full_schedule(draw, level):
    inputs = _sample_minibatch_schedule(draw, level)
    return {**inputs, "warmup": draw.integer(2, 3)}


# L5: the clipping threshold at the regime boundary. The smallest M at which the scaling never acts is the
# largest gradient norm of the unclipped run (plus the 1e-6): below it the run clips at the step holding that
# maximum (first, for M just below), above it the run is the unclipped one. No candidate list is given, so
# the solver must see the fixed point; the rules put the maximum after step 0 (so the first gradient's norm is
# wrong) and require the run at half that threshold to clip at some steps but not all, and to end at a loss
# that forgetting its clipping would not give (the count of its clipped steps, once asked, was 1 on
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
    xs, ys = hp_rows(x, y)
    return norms, threshold, loss_and_grad(final, xs, ys)[0], half_norms, loss_and_grad(half, xs, ys)[0]


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


LEVEL_2 = pytorch_level(
    "optim",
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
            "w": f32(*dims(i["w0"])),
            "losses": f32(i["steps"]),
            "grad_norms": f32(i["steps"]),
            "final_lr": PY_FLOAT,
        },
    ),
)


def _schedule_answer(i):
    return ({"w": f32(*dims(i["w0"])), "losses": f32(i["steps"]), "grad_norms": f32(i["steps"])},)


LEVEL_3 = pytorch_level(
    "optim",
    reference=schedule_minibatches,
    independent=_schedule_minibatches,
    sample=_sample_minibatch_schedule,
    reject=_schedule_clips,
    question=lambda i: f"""{_schedule_math(i, batches=True)} {_SCHEDULE_ANSWER}""",
    answer=_schedule_answer,
)


LEVEL_4 = pytorch_level(
    "optim",
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
)


LEVEL_5 = pytorch_level(
    "optim",
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
)


SGD_SCHEDULE_CLIPPING = five_levels(
    "sgd_schedule_clipping",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 SGD, StepLR and clip_grad_norm_ named; L2 the whole loop described mathematically; L3 the "
   "loop on mini-batches in rotation; L4 the best of four clipping thresholds for the final loss; L5 "
   "the clipping threshold at its regime boundary (the smallest M that never scales: the largest norm of "
   "the unclipped run), the step that binds, the loss there and the loss of the run at half that threshold "
   "(which clips at some steps, not all), with mini-batches, warm-up times step decay and look-ahead "
   "momentum",
)
