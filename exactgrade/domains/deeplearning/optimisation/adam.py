"""The adam family of optimisation: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.optimisation.shared import (
    API,
    _bowl,
    answer_is,
    opt_family,
    opt_question_rows,
    quadratic_vars,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef


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


def _adam_prompt(inputs):
    return prompt(
        f"Run {inputs['steps']} step(s) of Adam (torch.optim.Adam semantics, see the conventions) on "
        "f(w) = 1/2 * sum_i a_i * (w_i - c_i)**2 from w0. After each step report the step number and the "
        "parameters w, exactly (sympy for square roots).",
        {**quadratic_vars(inputs),
         "lr": ("learning rate", inputs["lr"]),
         "beta1": ("first-moment decay", inputs["beta1"]),
         "beta2": ("second-moment decay", inputs["beta2"]),
         "eps": ("epsilon added to sqrt(v_hat)", inputs["eps"]),
         "steps": ("number of steps", inputs["steps"])},
        '{"rows": [{"step": int, "w": [exact value, ...]}, ...]}  (one row per step, 1..steps)',
        "w in the units of the parameters",
    )


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


def build_adam(task_id, inputs):
    tags = ("adam", "first-step" if inputs["steps"] == 1 else "sqrt")
    return TaskDef(task_id, "optimisation", inputs, adam_trajectory, _adam_prompt, API, POLICY, tags=tags,
                   meta={"optimiser": "adam"})


def sample_adam_upper(draw: Draw, level: int) -> dict:
    base = sample_adam(draw, 3 if level >= 3 else 2)
    common = {k: base[k] for k in ("curvature", "center", "w0")}
    if level == 2:
        if base["eps"] == 0:
            raise Reject("eps = 0 moves every coordinate by lr")
        return {"question": "first_step", **common, "lr": base["lr"], "eps": base["eps"]}
    if level == 3:
        return {"question": "two_step_loss", **common,
                **{k: base[k] for k in ("lr", "beta1", "beta2", "eps")}}
    if level == 4:
        candidates = sorted(draw.sample((F(1, 100), F(1, 10), F(1, 4), F(1, 2), F(1), F(2), F(4), F(10)), 5))
        eps = candidates[draw.below(5)]
        moves = opt_question_rows("first_step", **common, lr=base["lr"], eps=eps)["rows"]
        cap = max(row["move"] for row in moves) if draw.chance(5, 6) else base["lr"] / 100
        return {"question": "smallest_eps", **common, "lr": base["lr"], "candidates": candidates, "cap": cap}
    return sample_decay_modes(draw, common)


def sample_decay_modes(draw: Draw, common: dict) -> dict:
    """Adam's coupled and AdamW's decoupled decay on one step: a decay of 1/4..2 that flips the sign of
    a coordinate's decayed gradient in about half the instances; no gradient is 0, both best learning
    rates are positive, and the two optimisers' answers differ (the named mistake swaps them)."""
    want_flip = draw.chance(1, 2)  # decided once, then bowls are drawn until one fits (no bias by rejection)
    for _ in range(64):
        bowl = common if _ == 0 else _bowl(draw, len(common["w0"]), curvature_high=draw.choice((4, 8)))
        wd = draw.choice((F(1, 4), F(1, 2), F(1), F(2)))
        a, c, w = ([F(x) for x in bowl[k]] for k in ("curvature", "center", "w0"))
        grads = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
        if any(g == 0 or g + wd * wi == 0 for g, wi in zip(grads, w, strict=True)):
            continue  # 0/0 in the first Adam step with eps = 0
        if any((g > 0) != (g + wd * wi > 0) for g, wi in zip(grads, w, strict=True)) is not want_flip:
            continue
        inputs = {"question": "decay_modes", **{k: bowl[k] for k in ("curvature", "center", "w0")},
                  "weight_decay": wd}
        key = opt_question_rows(**inputs)["rows"][0]
        if key["adam_lr"] > 0 and key["adamw_lr"] > 0 and key["adam_lr"] != key["adamw_lr"]:
            return inputs  # both best rates positive, and swapping the optimisers fails
    raise Reject("no bowl of the wanted kind (a direction flipped by the decay, or none)")


def _decay_flips(task):
    if task.inputs.get("question") != "decay_modes":
        return False
    wd = F(task.inputs["weight_decay"])
    return any((F(a) * (F(w) - F(c)) > 0) != (F(a) * (F(w) - F(c)) + wd * F(w) > 0)
               for a, w, c in zip(task.inputs["curvature"], task.inputs["w0"], task.inputs["center"],
                                  strict=True))


ADAM = opt_family(
    "adam", build_adam, sample_adam,
    "L1: 1-3 Adam steps (torch semantics stated). L2 (derive): how far each coordinate moves in the first "
    "step and which moves furthest (m_hat = g, v_hat = g**2: the step is lr * |g| / (|g| + eps), not "
    "stated). "
    "L3 (compose): the loss after two steps, exact with square roots. L4 (inverse): the smallest eps keeping "
    "every first move under a cap, None in about a sixth. L5 (design): Adam's coupled weight decay against "
    "AdamW's decoupled one on a first step with eps = 0 (derived: the step is lr * sign of the decayed or "
    "plain gradient, AdamW also shrinks w by lr * wd), the learning rate minimising f after it and that f, "
    "for each; the decay flips a coordinate's direction in about half.", sample_adam_upper,
    branches=(Branch("no eps keeps the moves under the cap", answer_is("eps", None, (4,)), F(1, 20), (4,)),
              Branch("the decay flips a direction", _decay_flips, F(1, 4), (5,))))
