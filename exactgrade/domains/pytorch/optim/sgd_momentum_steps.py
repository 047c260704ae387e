"""The sgd_momentum_steps family of optim: everything it needs, its five levels in level order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from exactgrade.domains.pytorch.common import PY_INT, ExprSpec, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, values
from exactgrade.domains.pytorch.optim.shared import (
    LOSS_MATH,
    goals_between,
    goals_clear,
    hp_rows,
    loss_and_grad,
    mse_gradient,
    steps_vary,
)
from exactgrade.domains.pytorch.sampling import dyadic_tensor, regression_inputs
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Branch, five_levels

LR_EXPR = ExprSpec(("lr",))


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
        grad = mse_gradient(w, vx, vy)
        # the first step initialises the buffer to the gradient itself (no dampening)
        buffer = grad if buffer is None else [momentum * b + g for b, g in zip(buffer, grad, strict=True)]
        w = [p - lr * b for p, b in zip(w, buffer, strict=True)]
    return [{"w": ExactTensor.of("float32", w), "momentum_buffer": ExactTensor.of("float32", buffer)}]

LEVEL_1 = pytorch_level(
    "optim",
    reference=sgd_momentum_steps,
    independent=_sgd_momentum_steps,
    question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
        torch.optim.SGD([w], lr=0.05, momentum=0.9). Take two steps, each one zeroing the gradient,
        computing loss = mean((x @ w - y)^2) at the current w, calling backward and stepping. Give the
        parameter `w` after the two steps and the optimiser's `momentum_buffer` for w.""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "momentum_buffer": f32(*dims(i["w0"]))},),
    sample=regression_inputs,
)


# sgd_momentum_steps ------------------------------------------------------------------------------
_MOMENTUM_RULE = """A velocity buffer b is kept: at the first step b = g, at every later step b <-
0.9 * b + g;
    then w <- w - 0.05 * b."""


LEVEL_2 = pytorch_level(
    "optim",
    reference=sgd_momentum_steps,
    independent=_sgd_momentum_steps,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} {_MOMENTUM_RULE} Take two such steps from `w0`, recomputing g
    before each.
        Give `w` after them and the buffer b (`momentum_buffer`).""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "momentum_buffer": f32(*dims(i["w0"]))},),
)


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
        grad = [g + Fraction(1, 50) * p for g, p in zip(mse_gradient(w, vx, vy), w, strict=True)]
        buffer = (
            grad
            if buffer is None
            else [Fraction(9, 10) * b + Fraction(1, 2) * g for b, g in zip(buffer, grad, strict=True)]
        )
        w = [p - Fraction(1, 20) * b for p, b in zip(w, buffer, strict=True)]
    return [{"w": ExactTensor.of("float32", w), "momentum_buffer": ExactTensor.of("float32", buffer)}]


LEVEL_3 = pytorch_level(
    "optim",
    reference=sgd_momentum_decay_dampening,
    independent=_sgd_momentum_decay_dampening,
    sample=regression_inputs,
    question=f"""{LOSS_MATH} Each step first forms d = g + 0.02 * w (weight decay); a
    buffer b is kept:
        at the first step b = d, at every later step b <- 0.9 * b + 0.5 * d; then w <- w -
        0.05 * b. Take
        three steps from `w0`. Give `w` after them and the buffer b (`momentum_buffer`).""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "momentum_buffer": f32(*dims(i["w0"]))},),
)


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
    xs, ys = hp_rows(x, y)
    w, buffer, losses = [hp(e) for e in values(w0)], None, []
    for _ in range(_MAX_STEPS):
        _, grad = loss_and_grad(w, xs, ys)
        buffer = grad if buffer is None else [hp(0.9) * b + g for b, g in zip(buffer, grad, strict=True)]
        w = [p - hp(0.05) * b for p, b in zip(w, buffer, strict=True)]
        losses.append(loss_and_grad(w, xs, ys)[0])
    return losses


def _momentum_steps_to_goal(w0, x, y, goals):
    losses = _momentum_losses(w0, x, y)
    return [
        {"steps": next((k + 1 for k, loss in enumerate(losses) if loss <= hp(goal)), -1)}
        for goal in values(goals)
    ]


def _sample_momentum_goals(draw, level):
    inputs = regression_inputs(draw, 3)
    return {**inputs, "goals": tensor("float32", goals_between(draw, _momentum_losses(**inputs)))}


LEVEL_4 = pytorch_level(
    "optim",
    reference=momentum_steps_to_goal,
    independent=_momentum_steps_to_goal,
    sample=_sample_momentum_goals,
    refuse=goals_clear(lambda i: _momentum_losses(i["w0"], i["x"], i["y"])),
    reject=steps_vary,
    question=f"""{LOSS_MATH} {_MOMENTUM_RULE} Run up to {_MAX_STEPS} steps from `w0`. For
    each goal in
        `goals` (a row of the answer each, in order), give `steps`, the smallest number of steps k
        (1..{_MAX_STEPS}) after which L(w) <= goal, or -1 if no k up to {_MAX_STEPS} reaches it.""",
    answer=lambda i: tuple({"steps": PY_INT} for _ in range(i["goals"].shape[0])),
)


# L5: a closed form in the learning rate. The step rule combines an accumulated gradient of two unequal
# micro-batches, weight decay on w only, a buffer whose first step skips dampening, a look-ahead move and a
# warm-up then decayed schedule; the answer is each parameter and the loss after three steps as a polynomial
# in lr. Reference: sympy builds the loss and differentiates it; independent: the hand-derived gradient as
# an exact Fraction recurrence at seven rational lr, interpolated (polynomial_rows, below).
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


LEVEL_5 = pytorch_level(
    "optim",
    reference=momentum_lr_polynomial,
    independent=_momentum_lr_polynomial,
    sample=_sample_lr_polynomial,
    refuse=_lr_polynomial_degenerate,
    question=_LR_QUESTION,
    answer=({"first_weight": LR_EXPR, "second_weight": LR_EXPR, "bias": LR_EXPR, "loss": LR_EXPR},),
)


def interpolate(points: Sequence[tuple[Fraction, Fraction]], symbol: Any) -> Any:
    """The sympy polynomial of degree < len(points) in ``symbol`` through the exact points."""
    import sympy

    xs = [Fraction(x) for x, _ in points]
    if len(set(xs)) != len(xs):
        raise ValueError("interpolation points must have distinct abscissae")
    coefficients = [Fraction(0)] * len(points)
    for i, (xi, yi) in enumerate(points):
        basis = [Fraction(1)]  # prod_{j != i} (t - xj) / (xi - xj), lowest degree first
        for j, xj in enumerate(xs):
            if j == i:
                continue
            scale = 1 / (xi - xj)
            shifted = [Fraction(0), *basis]
            basis = [(s - xj * b) * scale for s, b in zip(shifted, [*basis, Fraction(0)], strict=True)]
        coefficients = [c + Fraction(yi) * b for c, b in zip(coefficients, basis, strict=True)]
    return sympy.Add(*(sympy.Rational(c.numerator, c.denominator) * symbol**k
                       for k, c in enumerate(coefficients) if c != 0))


def polynomial_rows(run: Callable[[Fraction], dict[str, Fraction]], degree: int,
                    symbol: Any) -> list[dict[str, Any]]:
    """One row of polynomials in ``symbol`` (degree <= ``degree``) from ``run(value)``, an exact
    recurrence giving every key at one rational value of the symbol."""
    samples = [(Fraction(k, 7), run(Fraction(k, 7))) for k in range(1, degree + 2)]
    keys = samples[0][1].keys()
    return [{key: interpolate([(t, out[key]) for t, out in samples], symbol) for key in keys}]


SGD_MOMENTUM_STEPS = five_levels(
    "sgd_momentum_steps",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 SGD with momentum named; L2 the heavy-ball rule described; L3 weight decay and dampening "
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
