"""The sgd family of optimisation: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.optimisation.shared import (
    API,
    _bowl,
    a_row_is,
    answer_is,
    opt_family,
    quadratic_vars,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef


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
    """The largest stable learning rate of torch's SGD on the quadratic (an exact Fraction)."""
    mu, lam = F(momentum), max(F(a) for a in curvature) + F(weight_decay)
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


def build_sgd(task_id, inputs):
    """Tags say which optimiser, and 'divergence' when lr is past the stability limit."""
    momentum, nesterov = inputs["momentum"], inputs["nesterov"]
    kind = ("nesterov",) if nesterov else ("momentum",) if momentum != 0 else ()
    decay = ("weight-decay",) if inputs["weight_decay"] != 0 else ()
    limit = stability_limit(momentum, nesterov, inputs["weight_decay"], inputs["curvature"])
    diverges = ("divergence",) if F(inputs["lr"]) > limit else ()
    return TaskDef(task_id, "optimisation", inputs, sgd_trajectory, _sgd_prompt, API, POLICY,
                   tags=("sgd", *kind, *decay, *diverges), meta={"optimiser": "sgd"})


_SGD_KEYS = ("curvature", "center", "w0", "lr", "momentum", "nesterov", "weight_decay", "steps")


def sample_sgd_upper(draw: Draw, level: int) -> dict:
    base = sample_sgd(draw, min(level, 3))
    if level == 2:
        return {"question": "stability", **{k: base[k] for k in ("curvature", "momentum", "nesterov",
                                                                 "weight_decay")}}
    if level == 3:
        return {"question": "final", **base}
    if level == 5:
        return sample_sgd_closed_form(draw)
    losses = _losses(base, base["lr"])
    if level == 4:
        return {"question": "first_below", **base, "targets": record_targets(draw, losses)}
    raise ValueError(f"sgd has no level {level}")


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


def sample_sgd_closed_form(draw: Draw) -> dict:
    """Two coordinates, heavy-ball or Nesterov half each, weight decay in half; the curvatures
    differ (so the stiffest one binds the limit), and the first step's descent along the
    gradient is positive (so Nesterov's best first learning rate is positive). Heavy ball's first
    step is plain gradient descent, so its best first rate would not depend on mu: heavy-ball
    instances ask instead for the momentum that minimises f after the second step (a quadratic
    in mu), as a function of eta."""
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


def _losses(inputs, lr):
    """f(w) after each step of the level-1 trajectory."""
    return [row["loss"] for row in sgd_trajectory(**{k: inputs[k] for k in _SGD_KEYS if k != "lr"},
                                                  lr=lr)["rows"]]


SGD = opt_family(
    "sgd", build_sgd, sample_sgd,
    "L1: the trajectory of plain/heavy-ball/Nesterov SGD (torch semantics stated), lr at 1/8..5/4 of the "
    "stability limit. L2 (derive): the supremum of stable learning rates (not stated). L3 (compose): the "
    "loss "
    "after the last step and whether the run diverges. L4 (inverse): for each of two or three targets (new "
    "lows of the trajectory, in random order), the first step whose loss reaches it, a None row in about a "
    "sixth. L5 (closed form in the symbols eta = lr and mu = momentum): f after two "
    "heavy-ball or Nesterov steps (a polynomial), the supremum of stable learning rates in mu (derived from "
    "each coordinate's two-term recurrence; the stiffest coordinate plus weight decay binds), and for "
    "Nesterov the best first learning rate in mu (its first step is (1 + mu) g), for heavy ball (whose first "
    "step does not see mu) the momentum minimising f after two steps, in eta; weight decay in half.",
    sample_sgd_upper,
    branches=(Branch("heavy-ball momentum", lambda t: t.level == 5 and not t.inputs["nesterov"], F(1, 4),
                     (5,)),
              Branch("Nesterov momentum", lambda t: t.level == 5 and t.inputs["nesterov"], F(1, 4), (5,)),
              Branch("weight decay", lambda t: t.level == 5 and t.inputs["weight_decay"] != 0, F(1, 4), (5,)),
              Branch("the run diverges", answer_is("diverges", True, (3,)), F(1, 10), (3,)),
              Branch("the run converges", answer_is("diverges", False, (3,)), F(1, 10), (3,)),
              Branch("no step reaches a target", a_row_is("step", None, (4,)), F(1, 20), (4,))))
