"""The sgd family of optimisation: everything it needs, its five levels in level order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction as F
from typing import Any

import sympy

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.optimisation.shared import (
    API,
    QUADRATIC,
    SGD_RULE,
    _bowl,
    a_row_is,
    answer_is,
    exact_rational,
    quadratic_vars,
    question_level,
)
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import TaskDef, uses


def sgd_trajectory(curvature, center, w0, lr, momentum, nesterov, weight_decay, steps):
    from fractions import Fraction

    a = [Fraction(x) for x in curvature]
    c = [Fraction(x) for x in center]
    w = [Fraction(x) for x in w0]
    lr, mu, wd = Fraction(lr), Fraction(momentum), Fraction(weight_decay)
    buf = None
    rows = []
    for step in range(1, steps + 1):
        g = [ai * (wi - ci) + wd * wi for ai, wi, ci in zip(a, w, c, strict=True)]
        if mu != 0:
            buf = g if buf is None else [mu * b + gi for b, gi in zip(buf, g, strict=True)]
            g = [gi + mu * b for gi, b in zip(g, buf, strict=True)] if nesterov else buf
        w = [wi - lr * gi for wi, gi in zip(w, g, strict=True)]
        loss = sum((ai * (wi - ci) ** 2 for ai, wi, ci in zip(a, w, c, strict=True)), Fraction(0)) / 2
        rows.append({"step": step, "w": w, "loss": loss})
    return {"rows": rows}


def _sgd_prompt(inputs):
    kind = ("plain SGD" if inputs["momentum"] == 0 else
            "SGD with Nesterov momentum" if inputs["nesterov"] else "SGD with (heavy-ball) momentum")
    return prompt(
        f"Run {inputs['steps']} steps of {kind} (torch.optim.SGD semantics, see the conventions) on "
        "f(w) = 1/2 * sum_i a_i * (w_i - c_i)**2 from w0. After each step report the step number, the "
        "parameters w and the loss f(w).",
        {**quadratic_vars(inputs),
         "lr": ("learning rate", inputs["lr"]),
         "momentum": ("momentum mu (0 = none)", inputs["momentum"]),
         "nesterov": ("bool: True for Nesterov momentum", inputs["nesterov"]),
         "weight_decay": ("L2 weight decay added to the gradient", inputs["weight_decay"]),
         "steps": ("number of steps", inputs["steps"])},
        '{"rows": [{"step": int, "w": [Fraction, ...], "loss": Fraction}, ...]}  '
        "(one row per step, 1..steps)",
        "w in the units of the parameters; loss in the units of f",
    )


def stability_limit(momentum, nesterov, weight_decay, curvature):
    """The largest stable learning rate of torch's SGD on the quadratic (an exact Fraction; a
    reference helper too: self-contained)."""
    from fractions import Fraction

    mu, lam = Fraction(momentum), max(Fraction(a) for a in curvature) + Fraction(weight_decay)
    if mu == 0:
        return 2 / lam
    return 2 * (1 + mu) / ((1 + 2 * mu) * lam) if nesterov else 2 * (1 + mu) / lam


_SGD_STEPS = {1: (3, 4), 2: (4, 5), 3: (5, 6), 4: (6, 8), 5: (8, 10)}


_SGD_DIMS = {1: (2, 2), 2: (2, 3), 3: (2, 3), 4: (2, 4), 5: (3, 4)}


def sample_sgd(draw: Draw, level: int) -> dict:
    """Plain, heavy-ball or Nesterov SGD, weight decay in a third; lr a multiple of 1/64 at 1/8
    to 5/4 of the stability limit. From level 4 momentum and decay are dyadic and lr a multiple
    of 1/16 (curvatures of 1/2 at level 5) so that 8-10 steps keep the key under the size limit."""
    bowl = _bowl(draw, draw.integer(*_SGD_DIMS[level]), bits=1 if level == 5 else 2)
    kind = draw.choice(("plain", "momentum", "nesterov"))
    momenta = (F(1, 2), F(3, 4), F(7, 8)) if level >= 4 else (F(1, 2), F(3, 4), F(9, 10), F(7, 8))
    decays = (F(1, 16), F(1, 8)) if level >= 4 else (F(1, 10), F(1, 16), F(1, 100))
    momentum = 0 if kind == "plain" else draw.choice(momenta)
    weight_decay = draw.choice(decays) if draw.chance(1, 3) else 0
    limit = stability_limit(momentum, kind == "nesterov", weight_decay, bowl["curvature"])
    factor = draw.choice((F(1, 8), F(1, 4), F(1, 2), F(3, 4), F(7, 8), F(9, 8), F(5, 4)))
    grid = 64 if level < 4 else 16
    lr = F(round(limit * factor * grid), grid)
    if lr <= 0 or lr == limit:
        raise Reject("the learning rate rounds to 0 or onto the stability limit")
    return {**bowl, "lr": lr, "momentum": momentum, "nesterov": kind == "nesterov",
            "weight_decay": weight_decay, "steps": draw.integer(*_SGD_STEPS[level])}


def state_maps(inputs, lr: F) -> list[list[list[F]]]:
    """Per coordinate, torch SGD's linear map of the state (w, buffer, 1): g = (a + wd) w - a c,
    b' = mu b + g, then w' = w - lr b' (heavy ball) or w' = w - lr (g + mu b') (Nesterov)."""
    mu, wd = rational.as_fraction(inputs["momentum"]), rational.as_fraction(inputs["weight_decay"])
    maps = []
    centre = inputs.get("center", [0] * len(inputs["curvature"]))  # stability: the homogeneous part only
    for a, c in zip(inputs["curvature"], centre, strict=True):
        a, c = rational.as_fraction(a), rational.as_fraction(c)
        k = a + wd
        if inputs["nesterov"]:
            maps.append([[1 - lr * k * (1 + mu), -lr * mu * mu, lr * a * c * (1 + mu)], [k, mu, -a * c],
                         [0, 0, 1]])
        else:
            maps.append([[1 - lr * k, -lr * mu, lr * a * c], [k, mu, -a * c], [0, 0, 1]])
    return maps


def map_losses(inputs, lr, steps: int) -> list[F]:
    """f(w) after each of ``steps`` steps, by iterating each coordinate's state map."""
    maps = state_maps(inputs, rational.as_fraction(lr))
    states = [(rational.as_fraction(w), F(0), F(1)) for w in inputs["w0"]]
    losses = []
    for _ in range(steps):
        states = [tuple(rational.matvec(m, s)) for m, s in zip(maps, states, strict=True)]
        losses.append(sum((rational.as_fraction(a) * (s[0] - rational.as_fraction(c)) ** 2
                           for a, s, c in zip(inputs["curvature"], states, inputs["center"], strict=True)),
                          F(0)) / 2)
    return losses


def spectral_radius(inputs, lr: F) -> float:
    """The largest |eigenvalue| of the coordinates' 2x2 homogeneous maps, by numpy."""
    import numpy as np

    return max(float(max(abs(np.linalg.eigvals(np.array([[float(x) for x in row[:2]] for row in m[:2]])))))
               for m in state_maps(inputs, lr))


def _check_trajectory(task):
    """Every row by iterating each coordinate's state map (state_maps) in Fractions."""
    inputs, rows = task.inputs, task.expected["rows"]
    lr = rational.as_fraction(inputs["lr"])
    columns = []
    for m, w0 in zip(state_maps(inputs, lr), inputs["w0"], strict=True):
        state: tuple[F, ...] = (rational.as_fraction(w0), F(0), F(1))
        trajectory = []
        for _ in range(inputs["steps"]):
            state = rational.matvec(m, state)
            trajectory.append(state[0])
        columns.append(trajectory)
    problems = []
    for t, row in enumerate(rows):
        w = [column[t] for column in columns]
        terms = zip(inputs["curvature"], w, inputs["center"], strict=True)
        loss = sum((rational.as_fraction(a) * (wi - rational.as_fraction(c)) ** 2 for a, wi, c in terms),
                   F(0)) / 2
        if row != {"step": t + 1, "w": w, "loss": loss}:
            shown = "[" + ", ".join(map(str, w)) + "]"
            problems.append(f"rows[{t}] is {row} but the linear state map gives w = {shown}, loss = {loss}")
    if len(rows) != inputs["steps"]:
        problems.append(f"{len(rows)} rows for {inputs['steps']} steps")
    return problems


def build_sgd(task_id, inputs):
    """Tags say which optimiser, and 'divergence' when lr is past the stability limit."""
    momentum, nesterov = inputs["momentum"], inputs["nesterov"]
    kind = ("nesterov",) if nesterov else ("momentum",) if momentum != 0 else ()
    decay = ("weight-decay",) if inputs["weight_decay"] != 0 else ()
    limit = stability_limit(momentum, nesterov, inputs["weight_decay"], inputs["curvature"])
    diverges = ("divergence",) if F(inputs["lr"]) > limit else ()
    return TaskDef(task_id, "optimisation", inputs, sgd_trajectory, _sgd_prompt, API, POLICY,
                   tags=("sgd", *kind, *decay, *diverges), meta={"independent": _check_trajectory})

LEVEL_1 = Level(build_sgd, sample_sgd)


def sgd_losses(curvature, center, w0, lr, momentum, nesterov, weight_decay, steps):
    """f(w) after each SGD step (a reference helper: self-contained)."""
    from fractions import Fraction

    a, c, w = [Fraction(x) for x in curvature], [Fraction(x) for x in center], [Fraction(x) for x in w0]
    mu, wd = Fraction(momentum), Fraction(weight_decay)
    buf, losses = None, []
    for _ in range(steps):
        g = [ai * (wi - ci) + wd * wi for ai, wi, ci in zip(a, w, c, strict=True)]
        if mu != 0:
            buf = g if buf is None else [mu * b + gi for b, gi in zip(buf, g, strict=True)]
            g = [gi + mu * b for gi, b in zip(g, buf, strict=True)] if nesterov else buf
        w = [wi - Fraction(lr) * gi for wi, gi in zip(w, g, strict=True)]
        terms = zip(a, w, c, strict=True)
        losses.append(sum((ai * (wi - ci) ** 2 for ai, wi, ci in terms), Fraction(0)) / 2)
    return losses


# L2 (derive): the supremum of the stable learning rates
@uses(stability_limit)
def stable_learning_rate(curvature, momentum, nesterov, weight_decay, question=None):
    return {"rows": [{"lr_limit": stability_limit(momentum, nesterov, weight_decay, curvature)}]}


def _check_stable_learning_rate(task):
    """At the key's limit the stiffest coordinate's map has the eigenvalue -1, and numpy's spectral
    radius is below 1 just under it and above 1 just over it."""
    inputs, limit = task.inputs, task.expected["rows"][0]["lr_limit"]
    curvature = [rational.as_fraction(a) for a in inputs["curvature"]]
    m = state_maps(inputs, limit)[curvature.index(max(curvature))]
    if (m[0][0] + 1) * (m[1][1] + 1) - m[0][1] * m[1][0] != 0:
        return [f"at lr = {limit} the worst coordinate's map has no eigenvalue -1"]
    below, above = (spectral_radius(inputs, limit * F(k, 100)) for k in (99, 101))
    if not below < 1 < above:
        return [f"numpy eigenvalues do not change stability at lr = {limit}"]
    return []


def sample_stability(draw: Draw, level: int) -> dict:
    base = sample_sgd(draw, 2)
    return {"question": "stability",
            **{k: base[k] for k in ("curvature", "momentum", "nesterov", "weight_decay")}}


LEVEL_2 = Level(question_level(
    "stability", "sgd", stable_learning_rate, _check_stable_learning_rate, QUADRATIC + SGD_RULE,
    "SGD as in the conventions runs on f with the given curvatures, momentum, nesterov flag and weight decay "
    "(the centre c and the starting point are not given: the answer holds for every c and every start). Give "
    "the supremum of the learning rates lr > 0 for which the iterates converge from every starting point (to "
    "the minimiser of f(w) + weight_decay/2 * ||w||**2).",
    '{"lr_limit": Fraction}', "learning rate (parameter units per gradient unit)"), sample_stability)


# L3 (compose): the loss after the last step, and whether the run diverges
@uses(sgd_losses, stability_limit)
def final_loss(curvature, center, w0, lr, momentum, nesterov, weight_decay, steps, question=None):
    from fractions import Fraction

    losses = sgd_losses(curvature, center, w0, lr, momentum, nesterov, weight_decay, steps)
    limit = stability_limit(momentum, nesterov, weight_decay, curvature)
    return {"rows": [{"final_loss": losses[-1], "diverges": Fraction(lr) > limit}]}


def _check_final_loss(task):
    inputs = task.inputs
    radius = spectral_radius(inputs, rational.as_fraction(inputs["lr"]))
    return key_agrees(task, {"final_loss": map_losses(inputs, inputs["lr"], inputs["steps"])[-1],
                             "diverges": radius > 1})


def sample_final_loss(draw: Draw, level: int) -> dict:
    return {"question": "final", **sample_sgd(draw, 3)}


LEVEL_3 = Level(question_level(
    "final", "sgd", final_loss, _check_final_loss, QUADRATIC + SGD_RULE,
    "Run `steps` steps of SGD as in the conventions from w0 with the learning rate `lr`. Give f(w) after the "
    "last step, and whether these iterates, continued forever, would grow without bound (True) rather than "
    "converge (False).",
    '{"final_loss": Fraction, "diverges": bool}', "loss in the units of f"), sample_final_loss)


# L4 (inverse): the first step whose loss reaches each target
@uses(sgd_losses)
def first_steps_below(curvature, center, w0, lr, momentum, nesterov, weight_decay, steps, targets,
                      question=None):
    from fractions import Fraction

    losses = sgd_losses(curvature, center, w0, lr, momentum, nesterov, weight_decay, steps)
    rows = []
    for target in targets:
        hit = [t for t, loss in enumerate(losses, start=1) if loss <= Fraction(target)]
        rows.append({"step": hit[0] if hit else None})
    return {"rows": rows}


def _check_first_steps_below(task):
    losses = map_losses(task.inputs, task.inputs["lr"], task.inputs["steps"])
    return key_agrees(task, {"rows": [{"step": next((t for t, v in enumerate(losses, 1) if v <= target),
                                                    None)} for target in task.inputs["targets"]]})


def record_targets(draw: Draw, losses: list[F]) -> list[F]:
    """sgd L4's targets, one question each (so the key is a tuple of steps, not one of a handful):
    the losses at two or three distinct new lows of the trajectory after the first step (a new
    low's step is that target's answer; the first loss would answer step 1 for free), in random
    order; in a sixth of the instances (decided after any refusal, so redraws do not change that
    share) one of them is replaced by half the lowest loss, so its row is None. A trajectory with
    fewer than two new lows after the first step is refused."""
    later = [k for k, loss in enumerate(losses) if k and all(loss < earlier for earlier in losses[:k])]
    if len(later) < 2:
        raise Reject("fewer than two new lows after the first step")
    unreachable = draw.chance(1, 6)
    targets = [losses[k] for k in draw.sample(later, min(3, len(later)))]
    if unreachable:
        targets[draw.below(len(targets))] = min(losses) / 2
    return targets


_SGD_KEYS = ("curvature", "center", "w0", "lr", "momentum", "nesterov", "weight_decay", "steps")


def _losses(inputs, lr):
    """f(w) after each step of the level-1 trajectory."""
    return [row["loss"] for row in sgd_trajectory(**{k: inputs[k] for k in _SGD_KEYS if k != "lr"},
                                                  lr=lr)["rows"]]


def sample_first_below(draw: Draw, level: int) -> dict:
    base = sample_sgd(draw, 3)
    return {"question": "first_below", **base, "targets": record_targets(draw, _losses(base, base["lr"]))}


LEVEL_4 = Level(question_level(
    "first_below", "sgd", first_steps_below, _check_first_steps_below, QUADRATIC + SGD_RULE,
    "Run SGD as in the conventions from w0 with the learning rate `lr`, for at most `steps` steps. For each "
    "target in `targets`, give the first step t after which f(w) <= that target, or None if no step up to "
    "`steps` reaches it.",
    '{"rows": [{"step": int or None}, ...]}  (one row per target, in the order of `targets`)', "steps"),
    sample_first_below)


# L5 (closed form in the symbols eta and mu): f after two steps, the best first learning rate
# (Nesterov) or the best momentum (heavy ball), and the stability limit
@uses(exact_rational)
def sgd_closed_forms(curvature, center, w0, nesterov, weight_decay, eta, mu, question=None):
    import sympy

    a, c, w = ([exact_rational(x) for x in v] for v in (curvature, center, w0))
    wd = exact_rational(weight_decay)
    first = [ai * (wi - ci) + wd * wi for ai, wi, ci in zip(a, w, c, strict=True)]
    scale = 1 + mu if nesterov else 1  # step 1: b = g, so d = g + mu * g (Nesterov) or d = g
    best = (sympy.Add(*[ai * (wi - ci) * gi for ai, wi, ci, gi in zip(a, w, c, first, strict=True)])
            / (scale * sympy.Add(*[ai * gi**2 for ai, gi in zip(a, first, strict=True)])))
    buf, w = None, [sympy.Poly(wi, eta, mu) for wi in w]  # polynomials in (eta, mu)
    for _ in range(2):
        g = [ai * (wi - ci) + wd * wi for ai, wi, ci in zip(a, w, c, strict=True)]
        buf = g if buf is None else [mu * b + gi for b, gi in zip(buf, g, strict=True)]
        d = [gi + mu * b for gi, b in zip(g, buf, strict=True)] if nesterov else buf
        w = [wi - eta * di for wi, di in zip(w, d, strict=True)]
    loss = sum((ai * (wi - ci) ** 2 for ai, wi, ci in zip(a, w, c, strict=True)),
               sympy.Poly(0, eta, mu)).as_expr() / 2
    lam = max(a) + wd
    limit = 2 * (1 + mu) / ((1 + 2 * mu) * lam) if nesterov else 2 * (1 + mu) / lam
    if nesterov:
        return {"rows": [{"loss_after_two_steps": loss, "best_first_lr": sympy.factor(best),
                          "lr_limit": sympy.factor(limit)}]}
    low, high = sympy.Poly(loss, mu).all_coeffs()[::-1][1:3]  # heavy ball: f(w2) is quadratic in mu
    return {"rows": [{"loss_after_two_steps": loss, "best_momentum": sympy.factor(-low / (2 * high)),
                      "lr_limit": sympy.factor(limit)}]}


CLOSED_FORM_POINTS = ((F(1, 7), F(1, 3)), (F(2, 5), F(5, 6)),
                      (F(3, 11), F(1, 2)), (F(9, 4), F(7, 9)))
"""(eta, mu) points at which the SGD closed form is re-derived in exact rationals."""


def _check_closed_forms(task) -> list[str]:
    """sgd L5 another way: the three closed forms re-derived, at rational points (eta, mu): the loss by
    iterating each coordinate's linear state map in Fractions; Nesterov's best first learning rate
    as the vertex of f(w1), a quadratic in eta fitted through the map at eta = 0, 1, 2, and heavy
    ball's best momentum as the vertex of f(w2), a quadratic in mu fitted through the map at
    mu = 0, 1, 2; the limit as the eta at which the stiffest coordinate's 2x2 map has the
    eigenvalue -1, with numpy's spectral radius below 1 just under it and above 1 just over it
    (every coordinate). The key must be a polynomial in eta and mu (loss) and rational functions
    of one symbol, and the named mistakes (the other momentum's limit; the limit without weight
    decay; Nesterov's first step taken as g; heavy ball's second gradient taken at w0, or its
    best momentum for f plus the weight-decay term) must give other functions."""
    inputs, row = task.inputs, task.expected["rows"][0]
    eta, mu = inputs["eta"], inputs["mu"]
    problems = []
    nesterov = inputs["nesterov"]
    best_name, best_symbol = ("best_first_lr", mu) if nesterov else ("best_momentum", eta)
    loss, best, limit = (row[k] for k in ("loss_after_two_steps", best_name, "lr_limit"))
    if not (isinstance(loss, sympy.Expr) and loss.is_polynomial(eta, mu) and loss.free_symbols <= {eta, mu}):
        return [f"the loss {loss} is not a polynomial in eta and mu"]
    for name, value, symbol in ((best_name, best, best_symbol), ("lr_limit", limit, mu)):
        if not (isinstance(value, sympy.Expr) and value.free_symbols <= {symbol}
                and value.is_rational_function(symbol)):
            return [f"{name} {value} is not a rational function of {symbol}"]
    if not nesterov:
        problems += _best_momentum(inputs, best, eta)
    curvature = [rational.as_fraction(a) for a in inputs["curvature"]]
    worst = curvature.index(max(curvature))
    polynomial = sympy.Poly(loss, eta, mu)
    for lr, m in CLOSED_FORM_POINTS:
        at = {**inputs, "momentum": m}

        def subs(expr: Any, m: F = m) -> F:
            return rational.from_sympy(expr.subs(mu, rational.to_sympy(m)))

        point = {eta: rational.to_sympy(lr), mu: rational.to_sympy(m)}
        at_point = rational.from_sympy(polynomial.eval(point))
        if at_point != map_losses(at, lr, 2)[-1]:
            problems.append(f"at eta = {lr}, mu = {m} the key's loss is {at_point} but the state map gives "
                            f"{map_losses(at, lr, 2)[-1]}")
        if nesterov:
            vertex = _vertex([map_losses(at, F(x), 1)[0] for x in (0, 1, 2)])
            if subs(best) != vertex:
                problems.append(f"at mu = {m} best_first_lr is {subs(best)} but the vertex of f(w1) is "
                                f"{vertex}")
        edge = subs(limit)
        grid = state_maps(at, edge)[worst]
        if (grid[0][0] + 1) * (grid[1][1] + 1) - grid[0][1] * grid[1][0] != 0:
            problems.append(f"at mu = {m}, eta = lr_limit = {edge}: the stiffest map has no eigenvalue -1")
        below, above = (spectral_radius(at, edge * F(k, 100)) for k in (99, 101))
        if not below < 1 < above:
            problems.append(f"at mu = {m} numpy eigenvalues do not change stability at eta = {edge}")
    wd = rational.to_sympy(rational.as_fraction(inputs["weight_decay"]))
    lam = rational.to_sympy(max(curvature))
    mistakes = [("the other momentum's limit", 2 * (1 + mu) / (lam + wd) if inputs["nesterov"]
                 else 2 * (1 + mu) / ((1 + 2 * mu) * (lam + wd)), limit)]
    if wd != 0:
        mistakes.append(("the limit without weight decay", 2 * (1 + mu) / ((1 + 2 * mu) * lam)
                         if inputs["nesterov"] else 2 * (1 + mu) / lam, limit))
    if nesterov:
        mistakes.append(("Nesterov's first step taken as g", best * (1 + mu), best))
    for name, wrong, right in mistakes:  # differing at one rational point proves another function
        if all(rational.from_sympy(wrong.subs(mu, rational.to_sympy(m))) ==
               rational.from_sympy(right.subs(mu, rational.to_sympy(m))) for _, m in CLOSED_FORM_POINTS):
            problems.append(Degenerate(f"the named mistake ({name}) gives the key"))
    return problems


def _vertex(values: Sequence[F]) -> F:
    """The minimiser x of the quadratic through (0, values[0]), (1, values[1]), (2, values[2])."""
    f0, f1, f2 = values
    curve = f2 - 2 * f1 + f0  # q(x) = f0 + b x + (curve / 2) x**2
    return -(f1 - f0 - curve / 2) / curve


def _best_momentum(inputs: Mapping[str, Any], best: Any, eta: Any) -> list[str]:
    """heavy ball's best momentum at rational learning rates: the vertex of f(w2) through the
    state map at mu = 0, 1, 2 (the key, a function of eta, must agree), and the named mistakes
    (the second gradient taken at w0; the weight-decay term added to f) must give other values."""
    wd = rational.as_fraction(inputs["weight_decay"])
    a, c, w0 = ([rational.as_fraction(x) for x in inputs[k]] for k in ("curvature", "center", "w0"))
    g0 = [ai * (wi - ci) + wd * wi for ai, wi, ci in zip(a, w0, c, strict=True)]
    problems, stale, decayed = [], True, wd != 0
    for lr, _ in CLOSED_FORM_POINTS:
        key = rational.from_sympy(best.subs(eta, rational.to_sympy(lr)))
        vertex = _vertex([map_losses({**inputs, "momentum": F(m)}, lr, 2)[-1] for m in (0, 1, 2)])
        if key != vertex:
            problems.append(f"at eta = {lr} best_momentum is {key} but the vertex of f(w2) in mu is {vertex}")
        # w2 = w0 - lr * (g0 + g1) - mu * lr * g0, so f(w2) (plus wd/2 ||w2||**2) is quadratic in mu
        g1 = [gi - lr * (ai + wd) * gi for ai, gi in zip(a, g0, strict=True)]
        plain = [wi - lr * (x + y) for wi, x, y in zip(w0, g0, g1, strict=True)]
        at_w0 = [wi - 2 * lr * x for wi, x in zip(w0, g0, strict=True)]

        def minimiser(u: list[F], decay: F, lr: F = lr) -> F:
            terms = zip(a, u, c, g0, strict=True)
            top = sum(((ai * (ui - ci) + decay * ui) * gi for ai, ui, ci, gi in terms), F(0))
            bottom = sum(((ai + decay) * gi * gi for ai, gi in zip(a, g0, strict=True)), F(0))
            return top / (lr * bottom)

        stale = stale and minimiser(at_w0, F(0)) == key
        decayed = decayed and minimiser(plain, wd) == key
        if minimiser(plain, F(0)) != vertex:
            problems.append(f"at eta = {lr} the vertex of f(w2) in mu is {vertex} but the direct form gives "
                            f"{minimiser(plain, F(0))}")
    problems += [Degenerate(f"the named mistake ({name}) gives the key") for name, hit in
                 (("the second gradient taken at w0", stale), ("the weight-decay term added to f", decayed))
                 if hit]
    return problems


def sample_sgd_closed_form(draw: Draw, level: int) -> dict:
    """Two coordinates, heavy-ball or Nesterov half each, weight decay in half; the curvatures
    differ (so the stiffest one binds the limit), and the first step's descent along the
    gradient is positive (so Nesterov's best first learning rate is positive). Heavy ball's first
    step is plain gradient descent, so its best first rate would not depend on mu: heavy-ball
    instances ask instead for the momentum that minimises f after the second step (a quadratic
    in mu), as a function of eta. The inputs of a level-3 trajectory are drawn first and dropped:
    the stream stays the one it was."""
    sample_sgd(draw, 3)
    import sympy

    bowl = _bowl(draw, 2, bits=2)
    if bowl["curvature"][0] == bowl["curvature"][1]:
        raise Reject("equal curvatures")
    weight_decay = draw.choice((F(1, 16), F(1, 8), F(1, 4))) if draw.chance(1, 2) else 0
    gradient = [F(a) * (F(w) - F(c)) + weight_decay * F(w)
                for a, w, c in zip(bowl["curvature"], bowl["w0"], bowl["center"], strict=True)]
    descent = sum((F(a) * (F(w) - F(c)) * g for a, w, c, g in
                   zip(bowl["curvature"], bowl["w0"], bowl["center"], gradient, strict=True)), F(0))
    if descent <= 0 or 0 in gradient:
        raise Reject("the first step does not descend f (or a gradient coordinate is 0)")
    eta, mu = sympy.symbols("eta mu", positive=True)
    nesterov = draw.chance(1, 2)
    return {"question": "closed_form" if nesterov else "closed_form_momentum", **bowl, "nesterov": nesterov,
            "weight_decay": weight_decay, "eta": eta, "mu": mu}

NESTEROV_CLOSED_FORMS = question_level(
    "closed_form", "sgd", sgd_closed_forms, _check_closed_forms, QUADRATIC + SGD_RULE,
    "SGD as in the conventions, with momentum (the nesterov flag is `nesterov`) and the weight decay "
    "`weight_decay`, runs on f from w0. The learning rate lr and the momentum mu are left free: they "
    "are the symbols `eta` and `mu`, preloaded as sympy Symbols (positive; sympy.symbols('eta mu', "
    "positive=True) makes the same ones), and mu is understood to lie in 0 < mu < 1. Give, as exact "
    "sympy expressions: f(w) after the second step, as a function of eta and mu; the learning rate "
    "eta > 0 that makes f(w) after the first step smallest, as a function of mu; and the supremum of "
    "the learning rates for which the iterates converge from every starting point (to the minimiser "
    "of f(w) + weight_decay/2 * ||w||**2), as a function of mu. Any algebraically equal form passes; "
    "no floats, and no Abs, Min, Max, floor or Piecewise.",
    '{"loss_after_two_steps": <expression in eta, mu>, "best_first_lr": <expression in mu>, '
    '"lr_limit": <expression in mu>}',
    "loss in the units of f; learning rates in parameter units per gradient unit")
HEAVY_BALL_CLOSED_FORMS = question_level(
    "closed_form_momentum", "sgd", sgd_closed_forms, _check_closed_forms, QUADRATIC + SGD_RULE,
    "SGD as in the conventions, with momentum (the nesterov flag is `nesterov`) and the weight decay "
    "`weight_decay`, runs on f from w0. The learning rate lr and the momentum mu are left free: they "
    "are the symbols `eta` and `mu`, preloaded as sympy Symbols (positive; sympy.symbols('eta mu', "
    "positive=True) makes the same ones), and mu is understood to lie in 0 < mu < 1 except where said. "
    "Give, as exact sympy expressions: f(w) after the second step, as a function of eta and mu; for "
    "each learning rate eta > 0, the momentum that makes f(w) after the second step smallest, the "
    "minimiser over all real numbers mu (for this part mu may lie outside 0 < mu < 1), as a function "
    "of eta; and the supremum of the learning rates for which the iterates converge from every starting "
    "point (to the minimiser of f(w) + weight_decay/2 * ||w||**2), as a function of mu. Any "
    "algebraically equal form passes; no floats, and no Abs, Min, Max, floor or Piecewise.",
    '{"loss_after_two_steps": <expression in eta, mu>, "best_momentum": <expression in eta>, '
    '"lr_limit": <expression in mu>}',
    "loss in the units of f; momentum a plain number; learning rates in parameter units per gradient "
    "unit")


def build_closed_forms(task_id, inputs):
    """Nesterov instances ask for the best first learning rate, heavy-ball ones for the best momentum."""
    return (NESTEROV_CLOSED_FORMS if inputs["nesterov"] else HEAVY_BALL_CLOSED_FORMS)(task_id, inputs)


LEVEL_5 = Level(build_closed_forms, sample_sgd_closed_form)


SGD = deeplearning_family(
    "sgd", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
    "L1: the trajectory of plain/heavy-ball/Nesterov SGD (torch semantics stated), lr at 1/8..5/4 of the "
    "stability limit. L2 (derive): the supremum of stable learning rates (not stated). L3 (compose): the "
    "loss "
    "after the last step and whether the run diverges. L4 (inverse): for each of two or three targets (new "
    "lows of the trajectory, in random order), the first step whose loss reaches it, a None row in about a "
    "sixth. L5 (closed form in the symbols eta = lr and mu = momentum): f after two "
    "heavy-ball or Nesterov steps (a polynomial), the supremum of stable learning rates in mu (derived from "
    "each coordinate's two-term recurrence; the stiffest coordinate plus weight decay binds), and for "
    "Nesterov the best first learning rate in mu (its first step is (1 + mu) g), for heavy ball (whose first "
    "step does not see mu) the momentum minimising f after two steps, in eta; weight decay in half."),
    branches=(Branch("heavy-ball momentum", lambda t: t.level == 5 and not t.inputs["nesterov"], F(1, 4),
                     (5,)),
              Branch("Nesterov momentum", lambda t: t.level == 5 and t.inputs["nesterov"], F(1, 4), (5,)),
              Branch("weight decay", lambda t: t.level == 5 and t.inputs["weight_decay"] != 0, F(1, 4), (5,)),
              Branch("the run diverges", answer_is("diverges", True, (3,)), F(1, 10), (3,)),
              Branch("the run converges", answer_is("diverges", False, (3,)), F(1, 10), (3,)),
              Branch("no step reaches a target", a_row_is("step", None, (4,)), F(1, 20), (4,))))
