"""What two or more optimisation families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import answer_field, as_int, nonzero_dyadic, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Builder, Draw, Reject
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


def exact_rational(q):
    """A Fraction (or int) as an exact sympy Rational (a reference helper: self-contained)."""
    from fractions import Fraction

    import sympy

    q = Fraction(q)
    return sympy.Rational(q.numerator, q.denominator)


def question_level(word: str, kind: str, reference, independent, conventions: str, question: str, shape: str,
                   units: str) -> Builder:
    """The builder of one levels 2-5 question: its text, answer shape, units and conventions, its
    reference and its independent check (``meta["independent"]``); the inputs carry the question's
    ``word``, which the prompt shows, and the task is tagged (``kind``, word)."""

    def render(inputs):
        variables = {k: (d, inputs[k]) for k, d in GIVEN.items() if k in inputs}
        variables["question"] = ("the question asked, as a word", word)
        return prompt(question, variables, single_row(shape), units)

    def build(task_id, inputs):
        if inputs.get("question") != word:
            raise ValueError(f"this level asks {word!r}; the inputs say {inputs.get('question')!r}")
        return TaskDef(task_id, "optimisation", inputs, reference, render, api(conventions), POLICY,
                       tags=(kind, word), meta={"independent": independent})

    return build


def high_precision(q):
    """An exact rational (Fraction, int or sympy Rational) as an mpmath number at the working precision."""
    import mpmath

    from exactgrade import rational

    q = rational.as_fraction(q)
    return mpmath.mpf(q.numerator) / q.denominator


def mpmath_of(value) -> object:
    """An exact key value (a Fraction, int or exact sympy expression) to 70 digits, as mpmath."""
    import mpmath
    import sympy

    from exactgrade.domains.deeplearning.checks import as_sympy

    return mpmath.mpf(sympy.N(as_sympy(value), 70))


def agrees_to_50_digits(rows, key: str, wanted: list) -> list[str]:
    """The key's ``rows[i][key]`` (a value or a list of values) against 80-digit mpmath values
    ``wanted[i]``, to 1e-50 (call it inside ``mpmath.workdps(80)``)."""
    import mpmath

    if len(rows) != len(wanted):
        return [f"{len(rows)} rows but the recomputation has {len(wanted)}"]
    problems = []
    for i, (row, values) in enumerate(zip(rows, wanted, strict=True)):
        exact = row[key] if isinstance(row[key], list) else [row[key]]
        for e, want in zip(exact, values, strict=True):
            got = mpmath_of(e)
            if abs(got - want) > mpmath.mpf(10) ** -50:
                problems.append(f"rows[{i}][{key!r}]: the key is {mpmath.nstr(got, 20)} but 80-digit "
                                f"mpmath gives {mpmath.nstr(want, 20)}")
    return problems


def a_row_is(key, value, levels):
    """Some row of the key (not only the first) holds ``value`` at ``key``."""
    return lambda task: task.level in levels and isinstance(task.expected, dict) and \
        any(row.get(key, ...) is value for row in task.expected["rows"])


def answer_is(key, value, levels):
    return lambda task: task.level in levels and isinstance(task.expected, dict) and \
        answer_field(task, key) is value
