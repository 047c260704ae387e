"""The adam family of optimisation: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

import sympy

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.optimisation.shared import (
    ADAM_RULE,
    API,
    QUADRATIC,
    _bowl,
    agrees_to_50_digits,
    answer_is,
    exact_rational,
    high_precision,
    mpmath_of,
    quadratic_vars,
    question_level,
)
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import TaskDef, uses


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


def adam_in_mpmath(inputs, steps: int) -> list[list]:
    """The parameters after each of ``steps`` Adam steps in mpmath (call it inside ``mpmath.workdps``)."""
    import mpmath

    a, c, w = ([high_precision(x) for x in inputs[k]] for k in ("curvature", "center", "w0"))
    lr, b1, b2, eps = (high_precision(inputs[k]) for k in ("lr", "beta1", "beta2", "eps"))
    m, v = [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w)
    trajectory = []
    for t in range(1, steps + 1):
        g = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g, strict=True)]
        v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g, strict=True)]
        w = [wi - lr * (mi / (1 - b1**t)) / (mpmath.sqrt(vi / (1 - b2**t)) + eps)
             for wi, mi, vi in zip(w, m, v, strict=True)]
        trajectory.append(list(w))
    return trajectory


def _check_trajectory(task):
    """Every step recomputed in 80-digit mpmath; the exact key must agree to 1e-50."""
    import mpmath

    with mpmath.workdps(80):
        wanted = adam_in_mpmath(task.inputs, task.inputs["steps"])
        return agrees_to_50_digits(task.expected["rows"], "w", wanted)


def build_adam(task_id, inputs):
    tags = ("adam", "first-step" if inputs["steps"] == 1 else "sqrt")
    return TaskDef(task_id, "optimisation", inputs, adam_trajectory, _adam_prompt, API, POLICY, tags=tags,
                   meta={"independent": _check_trajectory})

LEVEL_1 = Level(build_adam, sample_adam)


def _level_three_bowl(draw: Draw) -> dict:
    """The bowl of a level-3 draw (levels 3-5 start from one, so their streams stay what they were)."""
    base = sample_adam(draw, 3)
    return {**{k: base[k] for k in ("curvature", "center", "w0")},
            **{k: base[k] for k in ("lr", "beta1", "beta2", "eps")}}


def adam_first_moves(curvature, center, w0, lr, eps):
    """Adam's first step per coordinate: lr * g / (|g| + eps), since m_hat = g and v_hat = g**2 (a
    reference helper: self-contained)."""
    from fractions import Fraction

    moves = []
    for a, w, c in zip(curvature, w0, center, strict=True):
        g = Fraction(a) * (Fraction(w) - Fraction(c))
        moves.append(Fraction(lr) * g / (abs(g) + Fraction(eps)))
    return moves


# L2 (derive): how far each coordinate moves in the first step
@uses(adam_first_moves)
def first_moves(curvature, center, w0, lr, eps, question=None):
    moves = [abs(m) for m in adam_first_moves(curvature, center, w0, lr, eps)]
    furthest = moves.index(max(moves))
    return {"rows": [{"move": m, "furthest": i == furthest} for i, m in enumerate(moves)]}


def _check_first_moves(task):
    moves = first_moves_by_sympy(task.inputs, task.inputs["lr"], task.inputs["eps"])
    return key_agrees(task, {"rows": [{"move": m, "furthest": i == moves.index(max(moves))}
                                      for i, m in enumerate(moves)]})


def sample_first_moves(draw: Draw, level: int) -> dict:
    base = sample_adam(draw, 2)
    if base["eps"] == 0:
        raise Reject("eps = 0 moves every coordinate by lr")
    return {"question": "first_step", **{k: base[k] for k in ("curvature", "center", "w0")}, "lr": base["lr"],
            "eps": base["eps"]}


LEVEL_2 = Level(question_level(
    "first_step", "adam", first_moves, _check_first_moves, QUADRATIC + ADAM_RULE,
    "Adam as in the conventions takes its first step from w0 with the learning rate `lr` and the given eps "
    "(beta1 and beta2 are not given: the answer does not need them). Give, for each coordinate, how far it "
    "moves (|w1_i - w0_i|), and whether it is the coordinate that moves furthest (True for exactly one "
    "coordinate: on a tie, the earliest).",
    '{"rows": [{"move": Fraction, "furthest": bool}, ...]}  (one row per coordinate)', "parameter units"),
    sample_first_moves)


# L3 (compose): the loss after two steps, exact with square roots
@uses(exact_rational)
def two_step_loss(curvature, center, w0, lr, beta1, beta2, eps, question=None):
    import sympy

    a, c, w = ([exact_rational(x) for x in v] for v in (curvature, center, w0))
    lr, b1, b2, eps = (exact_rational(x) for x in (lr, beta1, beta2, eps))
    m, v = [0] * len(w), [0] * len(w)
    for t in (1, 2):
        g = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g, strict=True)]
        v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g, strict=True)]
        w = [wi - lr * (mi / (1 - b1**t)) / (sympy.sqrt(vi / (1 - b2**t)) + eps)
             for wi, mi, vi in zip(w, m, v, strict=True)]
    loss = sympy.Add(*[ai * (wi - ci) ** 2 for ai, wi, ci in zip(a, w, c, strict=True)]) / 2
    return {"rows": [{"loss": loss}]}


def _check_two_step_loss(task) -> list[str]:
    """Two Adam steps and the loss in 80-digit mpmath; the exact key must agree to 1e-50."""
    import mpmath

    inputs = task.inputs
    with mpmath.workdps(80):
        w = adam_in_mpmath(inputs, 2)[-1]
        a, c = ([high_precision(x) for x in inputs[k]] for k in ("curvature", "center"))
        want = mpmath.fsum(ai * (wi - ci) ** 2 for ai, wi, ci in zip(a, w, c, strict=True)) / 2
        got = mpmath_of(task.expected["rows"][0]["loss"])
        if abs(got - want) > mpmath.mpf(10) ** -50:
            return [f"the loss is {mpmath.nstr(got, 20)} but 80-digit mpmath gives {mpmath.nstr(want, 20)}"]
    return []


def sample_two_step_loss(draw: Draw, level: int) -> dict:
    return {"question": "two_step_loss", **_level_three_bowl(draw)}


LEVEL_3 = Level(question_level(
    "two_step_loss", "adam", two_step_loss, _check_two_step_loss, QUADRATIC + ADAM_RULE,
    "Run two steps of Adam as in the conventions from w0. Give f(w) after the second step, exactly.",
    '{"loss": exact sympy value}', "the units of f"), sample_two_step_loss)


# L4 (inverse): the smallest eps that keeps every first move under a cap
@uses(adam_first_moves)
def smallest_eps(curvature, center, w0, lr, candidates, cap, question=None):
    from fractions import Fraction

    for eps in sorted(Fraction(e) for e in candidates):
        if all(abs(m) <= Fraction(cap) for m in adam_first_moves(curvature, center, w0, lr, eps)):
            return {"rows": [{"eps": eps}]}
    return {"rows": [{"eps": None}]}


def _check_smallest_eps(task):
    inputs = task.inputs
    fits = [rational.as_fraction(e) for e in inputs["candidates"]
            if max(first_moves_by_sympy(inputs, inputs["lr"], e)) <= inputs["cap"]]
    return key_agrees(task, {"eps": min(fits, default=None)})


def sample_smallest_eps(draw: Draw, level: int) -> dict:
    base = _level_three_bowl(draw)
    common = {k: base[k] for k in ("curvature", "center", "w0")}
    candidates = sorted(draw.sample((F(1, 100), F(1, 10), F(1, 4), F(1, 2), F(1), F(2), F(4), F(10)), 5))
    eps = candidates[draw.below(5)]
    moves = first_moves(**common, lr=base["lr"], eps=eps)["rows"]
    cap = max(row["move"] for row in moves) if draw.chance(5, 6) else base["lr"] / 100
    return {"question": "smallest_eps", **common, "lr": base["lr"], "candidates": candidates, "cap": cap}


LEVEL_4 = Level(question_level(
    "smallest_eps", "adam", smallest_eps, _check_smallest_eps, QUADRATIC + ADAM_RULE,
    "Adam as in the conventions takes its first step from w0 with the learning rate `lr` (beta1 and beta2 "
    "are not given: the answer does not need them). Of the values in `candidates` for eps, which is the "
    "smallest for which no coordinate moves by more than `cap` in that step? None if none is.",
    '{"eps": Fraction or None}', "eps in gradient units"), sample_smallest_eps)


# L5 (design): Adam's coupled weight decay against AdamW's decoupled one, on a first step with eps = 0
def best_decayed_steps(curvature, center, w0, weight_decay, question=None):
    """eps = 0: the first step is lr * sign(g) per coordinate."""
    from fractions import Fraction

    a, c, w = ([Fraction(x) for x in v] for v in (curvature, center, w0))
    wd = Fraction(weight_decay)

    def sign(x):
        return 1 if x > 0 else -1

    gaps = [wi - ci for wi, ci in zip(w, c, strict=True)]
    coupled = [sign(ai * e + wd * wi) for ai, e, wi in zip(a, gaps, w, strict=True)]
    decoupled = [wd * wi + sign(ai * e) for ai, e, wi in zip(a, gaps, w, strict=True)]
    out = {}
    for name, d in (("adam", coupled), ("adamw", decoupled)):  # f(w1) = 1/2 sum a (e - lr d)**2
        top = sum((ai * e * di for ai, e, di in zip(a, gaps, d, strict=True)), Fraction(0))
        lr = top / sum((ai * di * di for ai, di in zip(a, d, strict=True)), Fraction(0))
        out[f"{name}_lr"] = lr
        terms = zip(a, gaps, d, strict=True)
        out[f"{name}_loss"] = sum((ai * (e - lr * di) ** 2 for ai, e, di in terms), Fraction(0)) / 2
    return {"rows": [out]}


def _check_best_decayed_steps(task) -> list[str]:
    """Another way: each optimiser's first step run in sympy with lr a symbol, through the
    general update (m, v, bias corrections, the square root; eps = 0), f(w1) expanded to a quadratic
    in lr and its vertex solved for; swapping the two optimisers (the named mistake) must not pass."""
    inputs, row = task.inputs, task.expected["rows"][0]
    lr = sympy.Symbol("lr", positive=True)
    b1, b2 = sympy.Rational(9, 10), sympy.Rational(999, 1000)  # step 1 does not depend on them
    a, c, w = ([rational.to_sympy(rational.as_fraction(x)) for x in inputs[k]]
               for k in ("curvature", "center", "w0"))
    wd = rational.to_sympy(rational.as_fraction(inputs["weight_decay"]))
    want = {}
    for name, coupled in (("adam", True), ("adamw", False)):
        moved = []
        for ai, ci, wi in zip(a, c, w, strict=True):
            g = ai * (wi - ci) + (wd * wi if coupled else 0)
            m_hat, v_hat = (1 - b1) * g / (1 - b1), (1 - b2) * g**2 / (1 - b2)
            start = wi if coupled else wi * (1 - lr * wd)
            moved.append(start - lr * m_hat / sympy.sqrt(v_hat))
        terms = [ai * (x - ci) ** 2 for ai, x, ci in zip(a, moved, c, strict=True)]
        loss = sympy.Poly(sympy.expand(sum(terms) / 2), lr)
        best = sympy.solve(loss.diff(lr).as_expr(), lr)
        if len(best) != 1:
            return [Degenerate(f"{name}: f(w1) is not a quadratic in lr with a positive vertex")]
        want[f"{name}_lr"] = rational.from_sympy(best[0])
        want[f"{name}_loss"] = rational.from_sympy(loss.eval(best[0]))
    problems = [] if row == want else [f"the key {row} differs from sympy's general first step: {want}"]
    if (row["adam_lr"], row["adam_loss"]) == (row["adamw_lr"], row["adamw_loss"]):
        problems.append(Degenerate("the named mistake (the two optimisers swapped) gives the key"))
    return problems


def sample_decay_modes(draw: Draw, level: int) -> dict:
    """Adam's coupled and AdamW's decoupled decay on one step: a decay of 1/4..2 that flips the sign of
    a coordinate's decayed gradient in about half the instances; no gradient is 0, both best learning
    rates are positive, and the two optimisers' answers differ (the named mistake swaps them). The
    first bowl tried is that of a level-3 draw."""
    common = _level_three_bowl(draw)
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
        key = best_decayed_steps(**inputs)["rows"][0]
        if key["adam_lr"] > 0 and key["adamw_lr"] > 0 and key["adam_lr"] != key["adamw_lr"]:
            return inputs  # both best rates positive, and swapping the optimisers fails
    raise Reject("no bowl of the wanted kind (a direction flipped by the decay, or none)")




LEVEL_5 = Level(question_level(
    "decay_modes", "adam", best_decayed_steps, _check_best_decayed_steps, QUADRATIC + ADAM_RULE,
    "Two optimisers take one step from w0 on f with eps = 0 (beta1 and beta2 are not given: the answer does "
    "not need them). The conventions' Adam has no weight decay; these two variants add one, "
    "wd = `weight_decay`, in different ways. Adam with weight decay (as torch.optim.Adam with "
    "weight_decay=wd) adds wd * w to the gradient, g = grad f(w) + wd * w, and then steps as in the "
    "conventions. AdamW (as torch.optim.AdamW with weight_decay=wd) keeps g = grad f(w) (taken at w0, before "
    "any change), multiplies w by (1 - lr * wd), then steps as in the conventions with that g. For each "
    "optimiser give the learning rate lr > 0 that makes f(w1) after its first step smallest (lr is free; f "
    "is the objective without any decay term), and that smallest f(w1).",
    '{"adam_lr": Fraction, "adam_loss": Fraction, "adamw_lr": Fraction, "adamw_loss": Fraction}',
    "learning rates in parameter units per update unit; losses in the units of f"), sample_decay_modes)


def first_moves_by_sympy(inputs, lr, eps) -> list[F]:
    """|w1 - w0| per coordinate through Adam's general step in sympy (m_hat, v_hat, sqrt)."""
    moves = []
    b1, b2 = sympy.Rational(9, 10), sympy.Rational(999, 1000)  # step 1 does not depend on the betas
    for a, w, c in zip(inputs["curvature"], inputs["w0"], inputs["center"], strict=True):
        g = rational.to_sympy(rational.as_fraction(a) * (rational.as_fraction(w) - rational.as_fraction(c)))
        m_hat, v_hat = (1 - b1) * g / (1 - b1), (1 - b2) * g**2 / (1 - b2)
        move = sympy.Abs(rational.to_sympy(rational.as_fraction(lr)) * m_hat /
                         (sympy.sqrt(v_hat) + rational.to_sympy(rational.as_fraction(eps))))
        moves.append(rational.from_sympy(move))
    return moves


def _decay_flips(task):
    if task.level != 5:
        return False
    wd = F(task.inputs["weight_decay"])
    return any((F(a) * (F(w) - F(c)) > 0) != (F(a) * (F(w) - F(c)) + wd * F(w) > 0)
               for a, w, c in zip(task.inputs["curvature"], task.inputs["w0"], task.inputs["center"],
                                  strict=True))


ADAM = deeplearning_family(
    "adam", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
    "L1: 1-3 Adam steps (torch semantics stated). L2 (derive): how far each coordinate moves in the first "
    "step and which moves furthest (m_hat = g, v_hat = g**2: the step is lr * |g| / (|g| + eps), not "
    "stated). "
    "L3 (compose): the loss after two steps, exact with square roots. L4 (inverse): the smallest eps keeping "
    "every first move under a cap, None in about a sixth. L5 (design): Adam's coupled weight decay against "
    "AdamW's decoupled one on a first step with eps = 0 (derived: the step is lr * sign of the decayed or "
    "plain gradient, AdamW also shrinks w by lr * wd), the learning rate minimising f after it and that f, "
    "for each; the decay flips a coordinate's direction in about half."),
    branches=(Branch("no eps keeps the moves under the cap", answer_is("eps", None, (4,)), F(1, 20), (4,)),
              Branch("the decay flips a direction", _decay_flips, F(1, 4), (5,))))
