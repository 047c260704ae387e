"""Optimisation tasks (dl-017..dl-023): SGD, momentum, Nesterov, Adam, a learning-rate schedule.

The objective is a separable quadratic f(w) = 1/2 * sum_i a_i (w_i - c_i)**2 with rational
curvatures a and centre c, so SGD-family trajectories stay rational. verify recomputes SGD
trajectories as powers of each coordinate's linear state map, and Adam and the schedule in
80-digit mpmath arithmetic. Adam's square root is kept
exact with sympy (its first step is rational: sqrt(g**2) = |g|); the cosine schedule is exact
sympy at multiples of pi/12.

Families: sgd (dl-017..020), adam (dl-021, 022), warmup_cosine (dl-023). SGD instances draw a
learning rate on either side of the stability limit of their optimiser (2/lambda_max for plain
SGD, with lambda_max = max curvature + weight decay; 2(1 + mu)/lambda_max for heavy ball;
2(1 + mu)/((1 + 2mu) lambda_max) for Nesterov), so about a third of them diverge. Adam keeps its
square roots exact, and nested roots grow fast with the steps (4 steps with eps > 0 is ~3 kB
of sympy), so Adam stops at 3 steps and the key-size rule refuses the largest. Schedules use
decay lengths whose cosines sympy writes in radicals (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30).
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import as_int, nonzero_dyadic
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Draw, Reject
from exactgrade.task import TaskDef

CONVENTIONS = (
    "Optimisation conventions. The objective is f(w) = 1/2 * sum_i a_i * (w_i - c_i)**2 with curvatures "
    "a = `curvature` and centre c = `center`, so its gradient is g_i = a_i * (w_i - c_i). Steps are counted "
    "from 1; w0 is the starting point. The optimisers follow PyTorch's torch.optim definitions exactly. "
    "SGD (torch.optim.SGD, dampening 0): g = grad f(w) + weight_decay * w; with momentum mu != 0 the "
    "buffer is b = g at step 1 and b = mu * b + g afterwards; the step direction is d = g + mu * b with "
    "nesterov=True, d = b without, d = g when mu = 0; then w = w - lr * d. The reported loss is f(w) after "
    "the step (without any weight-decay term). "
    "Adam (torch.optim.Adam, no weight decay, amsgrad off): m = beta1 * m + (1 - beta1) * g, "
    "v = beta2 * v + (1 - beta2) * g**2 (elementwise, m = v = 0 before step 1), m_hat = m / (1 - beta1**t), "
    "v_hat = v / (1 - beta2**t), w = w - lr * m_hat / (sqrt(v_hat) + eps); keep square roots exact with "
    "sympy.sqrt. Learning-rate schedule (linear warmup then cosine decay): for step s < warmup_steps, "
    "lr = peak_lr * s / warmup_steps; for warmup_steps <= s <= warmup_steps + decay_steps, "
    "lr = min_lr + (peak_lr - min_lr) * (1 + cos(pi * (s - warmup_steps) / decay_steps)) / 2; after that "
    "lr = min_lr. Use sympy.cos and sympy.pi so the values stay exact."
)


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


def adam_trajectory(curvature, center, w0, lr, beta1, beta2, eps, steps):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    a = [exact(x) for x in curvature]
    c = [exact(x) for x in center]
    w = [exact(x) for x in w0]
    lr, beta1, beta2, eps = exact(lr), exact(beta1), exact(beta2), exact(eps)
    m = [sympy.Integer(0)] * len(w)
    v = [sympy.Integer(0)] * len(w)
    rows = []
    for t in range(1, steps + 1):
        g = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
        m = [beta1 * mi + (1 - beta1) * gi for mi, gi in zip(m, g, strict=True)]
        v = [beta2 * vi + (1 - beta2) * gi**2 for vi, gi in zip(v, g, strict=True)]
        m_hat = [mi / (1 - beta1**t) for mi in m]
        v_hat = [vi / (1 - beta2**t) for vi in v]
        w = [wi - lr * mh / (sympy.sqrt(vh) + eps) for wi, mh, vh in zip(w, m_hat, v_hat, strict=True)]
        rows.append({"step": t, "w": w})
    return {"rows": rows}


def warmup_cosine_rows(peak_lr, min_lr, warmup_steps, decay_steps, steps):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    peak, low = Fraction(peak_lr), Fraction(min_lr)
    rows = []
    for s in steps:
        if s < warmup_steps:
            lr = exact(peak * Fraction(s, warmup_steps))
        elif s <= warmup_steps + decay_steps:
            # low + (peak - low) * (1 + cos) / 2, with the rational parts summed before sympy sees them
            cosine = sympy.cos(sympy.pi * sympy.Rational(s - warmup_steps, decay_steps))
            lr = exact((low + peak) / 2) + exact((peak - low) / 2) * cosine
        else:
            lr = exact(low)
        rows.append({"step": s, "lr": lr})
    return {"rows": rows}


def _quadratic_vars(inputs):
    return {"curvature": ("list a of curvatures a_i", inputs["curvature"]),
            "center": ("list c of minimiser coordinates c_i", inputs["center"]),
            "w0": ("starting point", inputs["w0"])}


def _sgd_prompt(inputs):
    kind = ("plain SGD" if inputs["momentum"] == 0 else
            "SGD with Nesterov momentum" if inputs["nesterov"] else "SGD with (heavy-ball) momentum")
    return prompt(
        f"Run {inputs['steps']} steps of {kind} (torch.optim.SGD semantics, see the conventions) on "
        "f(w) = 1/2 * sum_i a_i * (w_i - c_i)**2 from w0. After each step report the step number, the "
        "parameters w and the loss f(w).",
        {**_quadratic_vars(inputs),
         "lr": ("learning rate", inputs["lr"]),
         "momentum": ("momentum mu (0 = none)", inputs["momentum"]),
         "nesterov": ("bool: True for Nesterov momentum", inputs["nesterov"]),
         "weight_decay": ("L2 weight decay added to the gradient", inputs["weight_decay"]),
         "steps": ("number of steps", inputs["steps"])},
        '{"rows": [{"step": int, "w": [Fraction, ...], "loss": Fraction}, ...]}  '
        "(one row per step, 1..steps)",
        "w in the units of the parameters; loss in the units of f",
    )


def _adam_prompt(inputs):
    return prompt(
        f"Run {inputs['steps']} step(s) of Adam (torch.optim.Adam semantics, see the conventions) on "
        "f(w) = 1/2 * sum_i a_i * (w_i - c_i)**2 from w0. After each step report the step number and the "
        "parameters w, exactly (sympy for square roots).",
        {**_quadratic_vars(inputs),
         "lr": ("learning rate", inputs["lr"]),
         "beta1": ("first-moment decay", inputs["beta1"]),
         "beta2": ("second-moment decay", inputs["beta2"]),
         "eps": ("epsilon added to sqrt(v_hat)", inputs["eps"]),
         "steps": ("number of steps", inputs["steps"])},
        '{"rows": [{"step": int, "w": [exact value, ...]}, ...]}  (one row per step, 1..steps)',
        "w in the units of the parameters",
    )


def _schedule_prompt(inputs):
    return prompt(
        "A learning-rate schedule warms up linearly from 0 to peak_lr over warmup_steps steps, then decays "
        "with a half cosine from peak_lr to min_lr over decay_steps steps, then stays at min_lr (exact "
        "formula in the conventions). Give the learning rate at each step listed in `steps`, exactly.",
        {"peak_lr": ("peak learning rate", inputs["peak_lr"]),
         "min_lr": ("final learning rate", inputs["min_lr"]),
         "warmup_steps": ("warmup length in steps", inputs["warmup_steps"]),
         "decay_steps": ("cosine decay length in steps", inputs["decay_steps"]),
         "steps": ("the steps to report", inputs["steps"])},
        '{"rows": [{"step": int, "lr": exact value}, ...]}  (one row per listed step, in that order)',
        "learning rate (per step)",
    )


_API = api(CONVENTIONS)

# ---------------------------------------------------------------------------- samplers


def stability_limit(momentum, nesterov, weight_decay, curvature):
    """The largest stable learning rate of torch's SGD on the quadratic (an exact Fraction)."""
    mu, lam = F(momentum), max(F(a) for a in curvature) + F(weight_decay)
    if mu == 0:
        return 2 / lam
    return 2 * (1 + mu) / ((1 + 2 * mu) * lam) if nesterov else 2 * (1 + mu) / lam


def _bowl(draw: Draw, dims: int, curvature_high: int = 8, bits: int = 2) -> dict:
    center = [nonzero_dyadic(draw, -2, 2, 2) for _ in range(dims)]
    w0 = [nonzero_dyadic(draw, -3, 3, 1) for _ in range(dims)]
    if any(w == c for w, c in zip(w0, center, strict=True)):
        raise Reject("w0 starts at the minimiser in one coordinate")
    return {"curvature": [as_int(draw.dyadic(F(1, 2**bits), curvature_high, bits)) for _ in range(dims)],
            "center": [as_int(c) for c in center], "w0": [as_int(w) for w in w0]}


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


_ADAM_SHAPE = {1: (1, 1, 3), 2: (2, 1, 2), 3: (2, 2, 3), 4: (3, 1, 2), 5: (3, 2, 3)}
"""steps, fewest and most coordinates, per level"""


def sample_adam(draw: Draw, level: int) -> dict:
    """1 step (rational: each coordinate moves by lr, whatever its gradient's size) at level 1,
    2 steps at levels 2-3, 3 at levels 4-5; eps = 0 or a small rational (1e-8 .. 1e-3)."""
    steps, low, high = _ADAM_SHAPE[level]
    bowl = _bowl(draw, draw.integer(low, high), curvature_high=draw.choice((4, 8, 100)))
    eps = 0 if draw.chance(1, 2) else draw.choice((F(1, 10**8), F(1, 10**6), F(1, 1000)))
    return {**bowl, "lr": draw.choice((F(1, 10), F(1, 8), F(1, 4), F(1, 20), F(1, 100))),
            "beta1": draw.choice((F(9, 10), F(4, 5), F(1, 2))),
            "beta2": draw.choice((F(999, 1000), F(99, 100), F(9, 10))), "eps": eps, "steps": steps}


_DECAYS = {1: (4, 6, 8, 12), 2: (3, 4, 5, 6, 8, 10, 12), 3: (3, 4, 5, 6, 8, 10, 12, 20, 24),
           4: (5, 6, 8, 10, 12, 15, 20, 24, 30), 5: (8, 10, 12, 15, 20, 24, 30)}


def sample_schedule(draw: Draw, level: int) -> dict:
    """Warmup 1..2+2*level steps, a decay length from _DECAYS (cosines in radicals), 6 + 2*level
    listed steps; from level 3 some steps lie after the decay (lr = min_lr)."""
    peak = F(draw.integer(1, 9), 10 ** draw.integer(3, 4))
    low = peak * draw.choice((F(1, 10), F(1, 20), F(1, 4), F(1, 100)))
    warmup, decay = draw.integer(1, 2 + 2 * level), draw.choice(_DECAYS[level])
    last = warmup + decay + (decay // 2 if level >= 3 else 0)
    count = min(last, 6 + 2 * level)
    return {"peak_lr": peak, "min_lr": low, "warmup_steps": warmup, "decay_steps": decay,
            "steps": sorted(draw.sample(range(1, last + 1), count))}


# ---------------------------------------------------------------------------- builders


def build_sgd(task_id, inputs):
    """Tags say which optimiser, and 'divergence' when lr is past the stability limit."""
    momentum, nesterov = inputs["momentum"], inputs["nesterov"]
    kind = ("nesterov",) if nesterov else ("momentum",) if momentum != 0 else ()
    decay = ("weight-decay",) if inputs["weight_decay"] != 0 else ()
    limit = stability_limit(momentum, nesterov, inputs["weight_decay"], inputs["curvature"])
    diverges = ("divergence",) if F(inputs["lr"]) > limit else ()
    return TaskDef(task_id, "optimisation", inputs, sgd_trajectory, _sgd_prompt, _API, POLICY,
                   tags=("sgd", *kind, *decay, *diverges), meta={"optimiser": "sgd"})


def build_adam(task_id, inputs):
    tags = ("adam", "first-step" if inputs["steps"] == 1 else "sqrt")
    return TaskDef(task_id, "optimisation", inputs, adam_trajectory, _adam_prompt, _API, POLICY, tags=tags,
                   meta={"optimiser": "adam"})


def build_schedule(task_id, inputs):
    return TaskDef(task_id, "optimisation", inputs, warmup_cosine_rows, _schedule_prompt, _API, POLICY,
                   tags=("schedule", "cosine"), meta={"optimiser": "schedule"})
