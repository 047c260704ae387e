"""Levels 2-5 of the optimisation families: stability derived, trajectories composed, steps and
learning rates searched, and schedules designed, instead of transcribing a stated update.

References are self-contained sandbox programs; checks.py recomputes each (``meta["opt_question"]``)
another way: SGD through each coordinate's linear state map (and the stability limit through the
map's characteristic polynomial at -1 and numpy eigenvalues on either side), Adam and the schedule
in 80-digit mpmath.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning import optimisation as _base
from exactgrade.domains.deeplearning._family import answer_field, dl_family, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.domains.deeplearning.optimisation import (
    build_adam,
    build_schedule,
    build_sgd,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef

QUADRATIC = ("Optimisation conventions. The objective is f(w) = 1/2 * sum_i a_i * (w_i - c_i)**2 with "
             "curvatures "
             "a = `curvature` and centre c = `center`. Steps are counted from 1; w0 is the starting point. ")
SGD_RULE = ("SGD (as torch.optim.SGD, dampening 0): g = grad f(w) + weight_decay * w; with momentum mu != 0 "
            "the "
            "buffer is b = g at step 1 and b = mu * b + g afterwards; the step direction is d = g + mu * b "
            "with "
            "nesterov=True, d = b without, d = g when mu = 0; then w = w - lr * d. A reported loss is f(w) "
            "(without any weight-decay term). ")
ADAM_RULE = ("Adam (as torch.optim.Adam, no weight decay, amsgrad off): g = grad f(w); m = beta1 * m + (1 - "
             "beta1) "
             "* g, v = beta2 * v + (1 - beta2) * g**2 (elementwise, m = v = 0 before step 1), m_hat = m / (1 "
             "- "
             "beta1**t), v_hat = v / (1 - beta2**t), w = w - lr * m_hat / (sqrt(v_hat) + eps). Keep square "
             "roots "
             "exact with sympy.sqrt. ")
SCHEDULE_WORDS = ("Learning-rate schedule conventions. The learning rate at step s (s = 1, 2, ...) follows a "
                  "schedule: during warmup it rises linearly in s from 0 (the value it would have at s = 0) "
                  "and "
                  "reaches peak_lr at s = warmup_steps; from s = warmup_steps to s = warmup_steps + "
                  "decay_steps it "
                  "follows half a period of a cosine, from peak_lr down to min_lr (flat at both ends of that "
                  "stretch); after that it stays at min_lr. Use sympy.cos and sympy.pi so values stay "
                  "exact. ")


def opt_question_rows(question, **given):
    def answer(question, **given):
        from fractions import Fraction

        import sympy

        def sgd(lr, steps):
            a = [Fraction(x) for x in given["curvature"]]
            c = [Fraction(x) for x in given["center"]]
            w = [Fraction(x) for x in given["w0"]]
            mu, wd, nesterov = Fraction(given["momentum"]), Fraction(given["weight_decay"]), given["nesterov"]
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

        def stability():
            mu = Fraction(given["momentum"])
            lam = max(Fraction(a) for a in given["curvature"]) + Fraction(given["weight_decay"])
            if mu == 0:
                return 2 / lam
            return 2 * (1 + mu) / ((1 + 2 * mu) * lam) if given["nesterov"] else 2 * (1 + mu) / lam

        def adam_first(lr, eps):
            moves = []
            for a, w, c in zip(given["curvature"], given["w0"], given["center"], strict=True):
                g = Fraction(a) * (Fraction(w) - Fraction(c))
                moves.append(Fraction(lr) * g / (abs(g) + Fraction(eps)))
            return moves

        def exact(q):
            q = Fraction(q)
            return sympy.Rational(q.numerator, q.denominator)

        def lr_at(s, peak, low, warmup, decay):
            peak, low = Fraction(peak), Fraction(low)
            if s < warmup:
                return exact(peak * s / warmup)
            if s <= warmup + decay:
                cosine = sympy.cos(sympy.pi * sympy.Rational(s - warmup, decay))
                return exact((low + peak) / 2) + exact((peak - low) / 2) * cosine
            return exact(low)

        def at_least(x, y):
            """x >= y for exact sympy numbers (decided to 60 digits; the samplers keep away from ties)."""
            return sympy.N(x - y, 60) >= 0

        if question == "stability":
            return {"lr_limit": stability()}
        if question in ("closed_form", "closed_form_momentum"):
            eta, mu = given["eta"], given["mu"]
            a, c, w = ([exact(x) for x in given[k]] for k in ("curvature", "center", "w0"))
            wd, nesterov = exact(given["weight_decay"]), given["nesterov"]
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
                return {"loss_after_two_steps": loss, "best_first_lr": sympy.factor(best),
                        "lr_limit": sympy.factor(limit)}
            low, high = sympy.Poly(loss, mu).all_coeffs()[::-1][1:3]  # heavy ball: f(w2) is quadratic in mu
            return {"loss_after_two_steps": loss, "best_momentum": sympy.factor(-low / (2 * high)),
                    "lr_limit": sympy.factor(limit)}
        if question == "final":
            return {"final_loss": sgd(given["lr"], given["steps"])[-1],
                    "diverges": Fraction(given["lr"]) > stability()}
        if question == "first_below":
            losses = sgd(given["lr"], given["steps"])
            rows = []
            for target in given["targets"]:
                hit = [t for t, loss in enumerate(losses, start=1) if loss <= Fraction(target)]
                rows.append({"step": hit[0] if hit else None})
            return {"rows": rows}
        if question == "first_step":
            moves = [abs(m) for m in adam_first(given["lr"], given["eps"])]
            furthest = moves.index(max(moves))
            return {"rows": [{"move": m, "furthest": i == furthest} for i, m in enumerate(moves)]}
        if question == "two_step_loss":
            a, c, w = ([exact(x) for x in given[k]] for k in ("curvature", "center", "w0"))
            lr, b1, b2, eps = (exact(given[k]) for k in ("lr", "beta1", "beta2", "eps"))
            m, v = [0] * len(w), [0] * len(w)
            for t in (1, 2):
                g = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
                m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g, strict=True)]
                v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g, strict=True)]
                w = [wi - lr * (mi / (1 - b1**t)) / (sympy.sqrt(vi / (1 - b2**t)) + eps)
                     for wi, mi, vi in zip(w, m, v, strict=True)]
            return {"loss": sympy.Add(*[ai * (wi - ci) ** 2 for ai, wi, ci in zip(a, w, c, strict=True)]) / 2}
        if question == "decay_modes":  # eps = 0: the first step is lr * sign(g) per coordinate
            a, c, w = ([Fraction(x) for x in given[k]] for k in ("curvature", "center", "w0"))
            wd = Fraction(given["weight_decay"])

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
            return out
        if question == "smallest_eps":
            for eps in sorted(Fraction(e) for e in given["candidates"]):
                if all(abs(m) <= Fraction(given["cap"]) for m in adam_first(given["lr"], eps)):
                    return {"eps": eps}
            return {"eps": None}
        if question == "closed_schedule":  # warmup 1..W-1; the cosine's D + 1 steps sum to the midpoint
            W, D, T = given["W"], given["D"], given["T"]  # (a cosine over the half period sums to 0,
            peak, low = exact(given["peak_lr"]), exact(given["min_lr"])  # its square to (D + 2) / 2)
            mid, half = (peak + low) / 2, (peak - low) / 2
            total = peak * (W - 1) / 2 + (D + 1) * mid + low * (T - W - D)
            squares = (peak**2 * (W - 1) * (2 * W - 1) / (6 * W) + (D + 1) * mid**2 + half**2 * (D + 2) / 2
                       + low**2 * (T - W - D))
            return {"total": sympy.factor(total), "total_squares": sympy.together(squares)}
        args = (given["peak_lr"], given["min_lr"], given["warmup_steps"])
        if question == "total":
            rates = [lr_at(s, *args, given["decay_steps"]) for s in range(1, given["last"] + 1)]
            return {"total": sympy.Add(*rates)}
        if question == "first_at_most":
            rows = []
            for target in given["targets"]:
                steps = range(given["warmup_steps"], given["warmup_steps"] + given["decay_steps"] + 1)
                hit = [s for s in steps if at_least(exact(target), lr_at(s, *args, given["decay_steps"]))]
                rows.append({"step": hit[0] if hit else None})
            return {"rows": rows}
        raise ValueError(f"unknown question {question!r}")

    out = answer(question, **given)
    return out if list(out) == ["rows"] else {"rows": [out]}


# ---------------------------------------------------------------------------- prompts

_QUESTIONS = {
    "stability": (
        "SGD as in the conventions runs on f with the given curvatures, momentum, nesterov flag and weight "
        "decay (the centre c and the starting point are not given: the answer holds for every c and every "
        "start). Give the supremum of the learning rates lr > 0 for which the iterates converge from every "
        "starting point (to the minimiser of f(w) + weight_decay/2 * ||w||**2).",
        '{"lr_limit": Fraction}', "learning rate (parameter units per gradient unit)", QUADRATIC + SGD_RULE),
    "closed_form": (
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
        "loss in the units of f; learning rates in parameter units per gradient unit",
        QUADRATIC + SGD_RULE),
    "closed_form_momentum": (
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
        "unit", QUADRATIC + SGD_RULE),
    "final": (
        "Run `steps` steps of SGD as in the conventions from w0 with the learning rate `lr`. Give f(w) after "
        "the last step, and whether these iterates, continued forever, would grow without bound (True) "
        "rather than converge (False).",
        '{"final_loss": Fraction, "diverges": bool}', "loss in the units of f", QUADRATIC + SGD_RULE),
    "first_below": (
        "Run SGD as in the conventions from w0 with the learning rate `lr`, for at most `steps` steps. For "
        "each target in `targets`, give the first step t after which f(w) <= that target, or None if no "
        "step up to `steps` reaches it.",
        '{"rows": [{"step": int or None}, ...]}  (one row per target, in the order of `targets`)', "steps",
        QUADRATIC + SGD_RULE),
    "first_step": (
        "Adam as in the conventions takes its first step from w0 with the learning rate `lr` and the given "
        "eps (beta1 and beta2 are not given: the answer does not need them). Give, for each coordinate, how "
        "far it moves (|w1_i - w0_i|), and whether it is the coordinate that moves furthest (True for "
        "exactly one coordinate: on a tie, the earliest).",
        '{"rows": [{"move": Fraction, "furthest": bool}, ...]}  (one row per coordinate)', "parameter units",
        QUADRATIC + ADAM_RULE),
    "two_step_loss": (
        "Run two steps of Adam as in the conventions from w0. Give f(w) after the second step, exactly.",
        '{"loss": exact sympy value}', "the units of f", QUADRATIC + ADAM_RULE),
    "smallest_eps": (
        "Adam as in the conventions takes its first step from w0 with the learning rate `lr` (beta1 and "
        "beta2 are not given: the answer does not need them). Of the values in `candidates` for eps, which "
        "is the smallest for which no coordinate moves by more than `cap` in that step? None if none is.",
        '{"eps": Fraction or None}', "eps in gradient units", QUADRATIC + ADAM_RULE),
    "decay_modes": (
        "Two optimisers take one step from w0 on f with eps = 0 (beta1 and beta2 are not given: the answer "
        "does not need them). The conventions' Adam has no weight decay; these two variants add one, "
        "wd = `weight_decay`, in different ways. Adam with weight decay (as torch.optim.Adam with "
        "weight_decay=wd) adds wd * w to the gradient, g = grad f(w) + wd * w, and then steps as in the "
        "conventions. AdamW (as torch.optim.AdamW with weight_decay=wd) keeps g = grad f(w) "
        "(taken at w0, before any change), multiplies w by (1 - lr * wd), then steps as in the conventions "
        "with that g. For each optimiser give "
        "the learning rate lr > 0 that makes f(w1) after its first step smallest (lr is free; f is the "
        "objective without any decay term), and that smallest f(w1).",
        '{"adam_lr": Fraction, "adam_loss": Fraction, "adamw_lr": Fraction, "adamw_loss": Fraction}',
        "learning rates in parameter units per update unit; losses in the units of f", QUADRATIC + ADAM_RULE),
    "words": (
        "Give the learning rate of the schedule in the conventions (with the given peak_lr, min_lr, "
        "warmup_steps and decay_steps) at each step listed in `steps`, exactly.",
        '{"rows": [{"step": int, "lr": exact value}, ...]}  (one row per listed step, in order)',
        "learning rate (per step)", SCHEDULE_WORDS),
    "closed_schedule": (
        "The schedule in the conventions has the given peak_lr and min_lr; its warmup length, its decay "
        "length and the number of training steps are left free: they are the symbols `W` (warmup_steps), "
        "`D` (decay_steps) and `T`, preloaded as sympy Symbols (positive integers; sympy.symbols('W D T', "
        "positive=True, integer=True) makes the same ones), with W >= 1, D >= 2 and T >= W + D. Training "
        "runs steps 1 to T. Give, as exact sympy expressions in W, D and T (valid for every such W, D, T): "
        "the sum of the learning rates of those T steps, and the sum of their squares. Any algebraically "
        "equal form passes; no cos, sum, floats, Abs, floor or Piecewise in the answer.",
        '{"total": <expression in W, D, T>, "total_squares": <expression in W, D, T>}',
        "learning rate summed over steps; its square summed over steps", SCHEDULE_WORDS),
    "total": (
        "Training uses the schedule in the conventions for steps 1 to `last`. Give the sum of the learning "
        "rates of those steps, exactly.",
        '{"total": exact sympy value}', "learning rate summed over steps", SCHEDULE_WORDS),
    "first_at_most": (
        "With the schedule in the conventions, for each target in `targets`, give the first step s >= "
        "warmup_steps at which the learning rate is at most that target, or None if no step up to "
        "warmup_steps + decay_steps has one.",
        '{"rows": [{"step": int or None}, ...]}  (one row per target, in the order of `targets`)', "steps",
        SCHEDULE_WORDS),
}
_GIVEN = {
    "curvature": "list a of curvatures a_i", "center": "list c of minimiser coordinates c_i",
    "w0": "starting point", "lr": "learning rate", "momentum": "momentum mu (0 = none)",
    "nesterov": "bool: True for Nesterov momentum", "weight_decay":
    "the weight decay coefficient wd (how it enters: see the conventions or the question)",
    "steps": "number of steps (for a schedule: the steps to report)",
    "targets": "the target values, each asked on its own",
    "candidates": "the candidate values", "beta1": "first-moment decay", "beta2": "second-moment decay",
    "eps": "epsilon added to sqrt(v_hat)", "cap": "the largest move allowed", "peak_lr": "peak learning rate",
    "min_lr": "final learning rate", "warmup_steps": "warmup length in steps",
    "decay_steps": "cosine decay length in steps", "last": "the last training step",
    "W": "sympy Symbol: the warmup length, left free", "D": "sympy Symbol: the decay length, left free",
    "T": "sympy Symbol: the number of training steps, left free",
    "eta": "sympy Symbol: the learning rate lr, left free", "mu": "sympy Symbol: the momentum, left free",
}


def _prompt(inputs):
    """The prompt of a question (a schedule's level 2 has no `question` input: its reference is level 1's)."""
    name = inputs.get("question", "words")
    question, shape, units, _ = _QUESTIONS[name]
    variables = {k: (d, inputs[k]) for k, d in _GIVEN.items() if k in inputs}
    if "question" in inputs:
        variables["question"] = ("the question asked, as a word", name)
    return prompt(question, variables, single_row(shape), units)


def build(task_id, inputs):
    name = inputs.get("question", "words")
    conventions = _QUESTIONS[name][3]
    kind = ("schedule" if conventions == SCHEDULE_WORDS else "adam" if ADAM_RULE in conventions else "sgd")
    meta = {"opt_question": name}
    if name == "words":
        from exactgrade.domains.deeplearning.optimisation import warmup_cosine_rows

        return TaskDef(task_id, "optimisation", inputs, warmup_cosine_rows, _prompt, api(conventions), POLICY,
                       tags=(kind, "words"), meta={**meta, "optimiser": "schedule"})
    return TaskDef(task_id, "optimisation", inputs, opt_question_rows, _prompt, api(conventions), POLICY,
                   tags=(kind, name), meta=meta)


# ---------------------------------------------------------------------------- samplers

_SGD_KEYS = ("curvature", "center", "w0", "lr", "momentum", "nesterov", "weight_decay", "steps")


def sample_sgd(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.optimisation import sample_sgd as level_one

    base = level_one(draw, min(level, 3))
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

    from exactgrade.domains.deeplearning.optimisation import _bowl

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
    from exactgrade.domains.deeplearning.optimisation import sgd_trajectory

    return [row["loss"] for row in sgd_trajectory(**{k: inputs[k] for k in _SGD_KEYS if k != "lr"},
                                                  lr=lr)["rows"]]


def sample_adam(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.optimisation import sample_adam as level_one

    base = level_one(draw, 3 if level >= 3 else 2)
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
    from exactgrade.domains.deeplearning.optimisation import _bowl

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


def sample_schedule(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.optimisation import sample_schedule as level_one

    base = level_one(draw, 3)
    schedule = {k: base[k] for k in ("peak_lr", "min_lr", "warmup_steps", "decay_steps")}
    if level == 2:
        return {**base}
    if level == 3:
        end = schedule["warmup_steps"] + schedule["decay_steps"]
        return {"question": "total", **schedule, "last": draw.integer(schedule["warmup_steps"] + 1, end + 3)}
    import mpmath

    def value(s, decay):
        peak, low, warmup = (mpmath.mpf(F(schedule[k]).numerator) / F(schedule[k]).denominator
                             for k in ("peak_lr", "min_lr", "warmup_steps"))
        if s < schedule["warmup_steps"]:
            return peak * s / warmup
        if s <= schedule["warmup_steps"] + decay:
            phase = mpmath.pi * (s - schedule["warmup_steps"]) / decay
            return low + (peak - low) * (1 + mpmath.cos(phase)) / 2
        return low

    def between(x, y):
        """A rational strictly between two distinct values, far from both (12 significant digits)."""
        return F(mpmath.nstr((x + y) / 2, 12))

    if level == 4:  # three targets, each between two consecutive rates (the later one's step answers it)
        warmup, decay = schedule["warmup_steps"], schedule["decay_steps"]
        values = [value(s, decay) for s in range(warmup, warmup + decay + 1)]
        unreachable = draw.chance(1, 6)  # one target below min_lr: its row is None
        targets = [between(values[k - 1], values[k]) for k in draw.sample(range(1, len(values)), 3)]
        if unreachable:
            targets[draw.below(3)] = F(schedule["min_lr"]) / 2
        return {"question": "first_at_most", **schedule, "targets": targets}
    import sympy

    W, D, T = sympy.symbols("W D T", positive=True, integer=True)
    return {"question": "closed_schedule", "peak_lr": schedule["peak_lr"], "min_lr": schedule["min_lr"],
            "W": W, "D": D, "T": T}


# ---------------------------------------------------------------------------- families
# (here, not in optimisation.py: this module sits above the level-1 module, never the other way round)


def _opt_family(name, build_first, first, levels, upper_sample, **rules):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper_sample(draw, level)

    upper = {level: build for level in (2, 3, 4, 5)}  # this module's builder of levels 2-5
    return dl_family(name, build_first, sample, levels, upper=upper, **rules)


def _decay_flips(task):
    if task.inputs.get("question") != "decay_modes":
        return False
    wd = F(task.inputs["weight_decay"])
    return any((F(a) * (F(w) - F(c)) > 0) != (F(a) * (F(w) - F(c)) + wd * F(w) > 0)
               for a, w, c in zip(task.inputs["curvature"], task.inputs["w0"], task.inputs["center"],
                                  strict=True))


def _a_row_is(key, value, levels):
    """Some row of the key (not only the first) holds ``value`` at ``key``."""
    return lambda task: task.level in levels and isinstance(task.expected, dict) and \
        any(row.get(key, ...) is value for row in task.expected["rows"])


def _answer_is(key, value, levels):
    return lambda task: task.level in levels and isinstance(task.expected, dict) and \
        answer_field(task, key) is value


SGD = _opt_family(
    "sgd", build_sgd, _base.sample_sgd,
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
    sample_sgd,
    branches=(Branch("heavy-ball momentum", lambda t: t.level == 5 and not t.inputs["nesterov"], F(1, 4),
                     (5,)),
              Branch("Nesterov momentum", lambda t: t.level == 5 and t.inputs["nesterov"], F(1, 4), (5,)),
              Branch("weight decay", lambda t: t.level == 5 and t.inputs["weight_decay"] != 0, F(1, 4), (5,)),
              Branch("the run diverges", _answer_is("diverges", True, (3,)), F(1, 10), (3,)),
              Branch("the run converges", _answer_is("diverges", False, (3,)), F(1, 10), (3,)),
              Branch("no step reaches a target", _a_row_is("step", None, (4,)), F(1, 20), (4,))))
ADAM = _opt_family(
    "adam", build_adam, _base.sample_adam,
    "L1: 1-3 Adam steps (torch semantics stated). L2 (derive): how far each coordinate moves in the first "
    "step and which moves furthest (m_hat = g, v_hat = g**2: the step is lr * |g| / (|g| + eps), not "
    "stated). "
    "L3 (compose): the loss after two steps, exact with square roots. L4 (inverse): the smallest eps keeping "
    "every first move under a cap, None in about a sixth. L5 (design): Adam's coupled weight decay against "
    "AdamW's decoupled one on a first step with eps = 0 (derived: the step is lr * sign of the decayed or "
    "plain gradient, AdamW also shrinks w by lr * wd), the learning rate minimising f after it and that f, "
    "for each; the decay flips a coordinate's direction in about half.", sample_adam,
    branches=(Branch("no eps keeps the moves under the cap", _answer_is("eps", None, (4,)), F(1, 20), (4,)),
              Branch("the decay flips a direction", _decay_flips, F(1, 4), (5,))))
WARMUP_COSINE = _opt_family(
    "warmup_cosine", build_schedule, _base.sample_schedule,
    "L1: the learning rate at listed steps, formula stated. L2 (derive): the same from the schedule "
    "described "
    "in words. L3 (compose): the sum of the learning rates over the first steps (exact radicals; a whole "
    "decay sums to a rational). L4 (inverse): for each of three targets (in random order), the first step "
    "at which the rate is at most it, a None row in about a sixth. L5 (closed form in the symbols W, D, "
    "T): the sum of the learning rates and of their "
    "squares over T steps (the warmup's W - 1 steps, the cosine's D + 1 steps whose cosines sum to 0 and "
    "whose squared cosines sum to (D + 2)/2, then the floor), derived, never summed numerically.",
    sample_schedule,
    branches=(Branch("no step reaches a target", _a_row_is("step", None, (4,)), F(1, 20), (4,)),))

FAMILIES = (SGD, ADAM, WARMUP_COSINE)

# ---------------------------------------------------------------------------- canonical tasks

_BOWL = {"curvature": [1, 4], "center": [1, -1], "w0": [3, 2]}


def _sgd(task_id, lr, momentum=0, nesterov=False, weight_decay=0, steps=3, bowl=None):
    return SGD.task(task_id, {**(bowl or _BOWL), "lr": lr, "momentum": momentum, "nesterov": nesterov,
                              "weight_decay": weight_decay, "steps": steps})


def _adam(task_id, bowl, lr, eps, steps):
    return ADAM.task(task_id, {**bowl, "lr": lr, "beta1": F(9, 10), "beta2": F(999, 1000), "eps": eps,
                               "steps": steps})


TASKS = (
    _sgd("dl-017", lr=F(1, 8)),
    _sgd("dl-018", lr=F(1, 8), momentum=F(9, 10)),
    _sgd("dl-019", lr=F(1, 8), momentum=F(9, 10), nesterov=True, weight_decay=F(1, 10)),
    # lr = 9/32 > 2 / a_max = 1/4: the stiff coordinate oscillates with growing amplitude (factor -5/4).
    _sgd("dl-020", lr=F(9, 32), steps=4, bowl={"curvature": [1, 8], "center": [0, 0], "w0": [1, 1]}),
    # Gradients 1 and 100, eps = 0: Adam's first step moves both coordinates by exactly lr.
    _adam("dl-021", {"curvature": [1, 100], "center": [0, 0], "w0": [1, 1]}, lr=F(1, 10), eps=0, steps=1),
    _adam("dl-022", {"curvature": [2], "center": [1], "w0": [3]}, lr=F(1, 10), eps=F(1, 10**8), steps=2),
    WARMUP_COSINE.task("dl-023", {"peak_lr": F(3, 1000), "min_lr": F(3, 10000), "warmup_steps": 4,
                                  "decay_steps": 12, "steps": [1, 3, 4, 5, 6, 7, 10, 13, 16, 20]}),
)
