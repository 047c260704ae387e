"""Optimisation tasks (dl-017..dl-023): SGD, momentum, Nesterov, Adam, a learning-rate schedule.

The objective is a separable quadratic f(w) = 1/2 * sum_i a_i (w_i - c_i)**2 with rational
curvatures a and centre c, so SGD-family trajectories stay rational. verify recomputes SGD
trajectories as powers of each coordinate's linear state map, and Adam and the schedule in
80-digit mpmath arithmetic. Adam's square root is kept
exact with sympy (its first step is rational: sqrt(g**2) = |g|); the cosine schedule is exact
sympy at multiples of pi/12.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, api, prompt
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

    peak, low = exact(peak_lr), exact(min_lr)
    rows = []
    for s in steps:
        if s < warmup_steps:
            lr = peak * sympy.Rational(s, warmup_steps)
        elif s <= warmup_steps + decay_steps:
            angle = sympy.pi * sympy.Rational(s - warmup_steps, decay_steps)
            lr = low + (peak - low) * (1 + sympy.cos(angle)) / 2
        else:
            lr = low
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
_BOWL = {"curvature": [1, 4], "center": [1, -1], "w0": [3, 2]}


def _sgd(task_id, tags, lr, momentum=0, nesterov=False, weight_decay=0, steps=3, bowl=None):
    inputs = {**(bowl or _BOWL), "lr": lr, "momentum": momentum, "nesterov": nesterov,
              "weight_decay": weight_decay, "steps": steps}
    return TaskDef(task_id, "optimisation", inputs, sgd_trajectory, _sgd_prompt, _API, POLICY, tags=tags,
                   meta={"optimiser": "sgd"})


def _adam(task_id, tags, bowl, lr, eps, steps):
    inputs = {**bowl, "lr": lr, "beta1": F(9, 10), "beta2": F(999, 1000), "eps": eps, "steps": steps}
    return TaskDef(task_id, "optimisation", inputs, adam_trajectory, _adam_prompt, _API, POLICY, tags=tags,
                   meta={"optimiser": "adam"})


TASKS = (
    _sgd("dl-017", ("sgd",), lr=F(1, 8)),
    _sgd("dl-018", ("sgd", "momentum"), lr=F(1, 8), momentum=F(9, 10)),
    _sgd("dl-019", ("sgd", "nesterov", "weight-decay"), lr=F(1, 8), momentum=F(9, 10), nesterov=True,
         weight_decay=F(1, 10)),
    # lr = 9/32 > 2 / a_max = 1/4: the stiff coordinate oscillates with growing amplitude (factor -5/4).
    _sgd("dl-020", ("sgd", "divergence"), lr=F(9, 32), steps=4,
         bowl={"curvature": [1, 8], "center": [0, 0], "w0": [1, 1]}),
    # Gradients 1 and 100, eps = 0: Adam's first step moves both coordinates by exactly lr.
    _adam("dl-021", ("adam", "first-step"), {"curvature": [1, 100], "center": [0, 0], "w0": [1, 1]},
          lr=F(1, 10), eps=0, steps=1),
    _adam("dl-022", ("adam", "sqrt"), {"curvature": [2], "center": [1], "w0": [3]},
          lr=F(1, 10), eps=F(1, 10**8), steps=2),
    TaskDef("dl-023", "optimisation",
            {"peak_lr": F(3, 1000), "min_lr": F(3, 10000), "warmup_steps": 4, "decay_steps": 12,
             "steps": [1, 3, 4, 5, 6, 7, 10, 13, 16, 20]},
            warmup_cosine_rows, _schedule_prompt, _API, POLICY, tags=("schedule", "cosine"),
            meta={"optimiser": "schedule"}),
)
