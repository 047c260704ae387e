"""What two or more optimisation families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import (
    answer_field,
    as_int,
    dl_family,
    nonzero_dyadic,
    single_row,
)
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


def quadratic_vars(inputs):
    return {"curvature": ("list a of curvatures a_i", inputs["curvature"]),
            "center": ("list c of minimiser coordinates c_i", inputs["center"]),
            "w0": ("starting point", inputs["w0"])}


API = api(CONVENTIONS)


def _bowl(draw: Draw, dims: int, curvature_high: int = 8, bits: int = 2) -> dict:
    center = [nonzero_dyadic(draw, -2, 2, 2) for _ in range(dims)]
    w0 = [nonzero_dyadic(draw, -3, 3, 1) for _ in range(dims)]
    if any(w == c for w, c in zip(w0, center, strict=True)):
        raise Reject("w0 starts at the minimiser in one coordinate")
    return {"curvature": [as_int(draw.dyadic(F(1, 2**bits), curvature_high, bits)) for _ in range(dims)],
            "center": [as_int(c) for c in center], "w0": [as_int(w) for w in w0]}

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


QUESTIONS = {
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


GIVEN = {
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
    question, shape, units, _ = QUESTIONS[name]
    variables = {k: (d, inputs[k]) for k, d in GIVEN.items() if k in inputs}
    if "question" in inputs:
        variables["question"] = ("the question asked, as a word", name)
    return prompt(question, variables, single_row(shape), units)


def build(task_id, inputs):
    name = inputs.get("question", "words")
    conventions = QUESTIONS[name][3]
    kind = ("schedule" if conventions == SCHEDULE_WORDS else "adam" if ADAM_RULE in conventions else "sgd")
    meta = {"opt_question": name}
    if name == "words":
        return TaskDef(task_id, "optimisation", inputs, warmup_cosine_rows, _prompt, api(conventions), POLICY,
                       tags=(kind, "words"), meta={**meta, "optimiser": "schedule"})
    return TaskDef(task_id, "optimisation", inputs, opt_question_rows, _prompt, api(conventions), POLICY,
                   tags=(kind, name), meta=meta)


def opt_family(name, build_first, first, levels, upper_sample, **rules):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper_sample(draw, level)

    upper = {level: build for level in (2, 3, 4, 5)}  # this module's builder of levels 2-5
    return dl_family(name, build_first, sample, levels, upper=upper, **rules)


def a_row_is(key, value, levels):
    """Some row of the key (not only the first) holds ``value`` at ``key``."""
    return lambda task: task.level in levels and isinstance(task.expected, dict) and \
        any(row.get(key, ...) is value for row in task.expected["rows"])


def answer_is(key, value, levels):
    return lambda task: task.level in levels and isinstance(task.expected, dict) and \
        answer_field(task, key) is value
