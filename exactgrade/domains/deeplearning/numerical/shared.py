"""What two or more numerical families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F
from functools import lru_cache
from math import isqrt

from exactgrade.domains.deeplearning._family import deeplearning_family, varying_fields
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.domains.deeplearning.ieee import (
    PRECISION,
    TRANSCENDENTAL_ULPS,
    ieee_category,
    ieee_evaluate,
    ieee_rounder,
    outcome,
    real_value,
    stable_outcome,
)
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import TaskDef, uses

CONVENTIONS = (
    "Floating-point conventions. Each case is an expression evaluated in one IEEE 754 binary format "
    "(float16 = half: max 65504, smallest subnormal 2**-24; float32 = single: max about 3.4e38, smallest "
    "subnormal 2**-149; float64 = double: max about 1.8e308, smallest subnormal 2**-1074). Every literal "
    "is first rounded to the format, and every operation's result is rounded to the format with "
    "round-to-nearest, ties-to-even (gradual underflow to subnormals, overflow to +-inf). The semantics "
    "are IEEE's, as in numpy or torch, not Python's math module: exp of a large number gives inf (not an "
    "exception), log(0) = -inf, log of a negative number is nan, x / 0 = +-inf for x != 0, 0 / 0 = nan, "
    "inf - inf = nan, inf / inf = nan, 0 * inf = nan; max propagates nan. Expression syntax: 2**-24 is the "
    "literal value 2 to the power -24 (one literal, not an operation); (1/1000) is the literal value "
    "one thousandth rounded to the format; sum(a, b, c) adds left to right, rounding after each addition; "
    "powi(x, n) multiplies n copies of x left to right, rounding after each multiplication; "
    "max(a, b) is the larger value. The outcome of a case is the category of its final value: \"nan\" "
    "if NaN, \"inf\" if +inf or -inf, \"zero\" if +0 or -0, else \"finite\"."
)


@uses(ieee_rounder, ieee_evaluate, ieee_category)
def float_outcome_rows(cases):
    rows = []
    for case in cases:
        value = ieee_evaluate(case["expr"], ieee_rounder(case["format"]))
        rows.append({"case": case["name"], "outcome": ieee_category(value)})
    return {"rows": rows}


def op(name, *args):
    """An expression node."""
    return {"op": name, "args": list(args)}


def softmax_naive(logits, index):
    return op("div", op("exp", logits[index]), op("sum", *[op("exp", x) for x in logits]))


def logsumexp_naive(logits):
    return op("log", op("sum", *[op("exp", x) for x in logits]))


def show_int(n: int) -> str:
    """An int literal; one of 2**24 or more with trailing zero bits as (m*2**k), so float32 and
    float64 limits stay readable (the exact value is also in `cases`)."""
    zeros = (n & -n).bit_length() - 1 if n else 0
    if abs(n) < 2**24 or zeros < 8:
        return str(n)
    m = n >> zeros
    return f"(2**{zeros})" if m == 1 else f"({m}*2**{zeros})"


def show_expr(node) -> str:
    """An expression tree as the text the prompt shows."""
    if not isinstance(node, dict):
        q = F(node)
        if q.numerator == 1 and q.denominator > 1 and q.denominator & (q.denominator - 1) == 0:
            return f"2**-{q.denominator.bit_length() - 1}"
        if q.denominator == 1:
            return show_int(q.numerator)
        return f"({q})"
    name, args = node["op"], node["args"]
    if name == "n":
        return "n"
    infix = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
    if name in infix:
        return f"({show_expr(args[0])} {infix[name]} {show_expr(args[1])})"
    if name == "neg":
        return f"-{show_expr(args[0])}"
    if name == "powi":
        return f"powi({show_expr(args[0])}, {'n' if isinstance(args[1], dict) else args[1]})"
    return f"{name}({', '.join(show_expr(a) for a in args)})"


def _prompt(inputs):
    listing = "\n".join(f"  {c['name']}: in {c['format']}, {show_expr(c['expr'])}" for c in inputs["cases"])
    return prompt(
        "Each case below is a floating-point computation in the stated IEEE 754 format (every literal and "
        "every intermediate result rounded to that format, see the conventions). For each case, say what "
        'the final value is: "inf" (+inf or -inf), "nan", "zero" (+0 or -0) or "finite" (any other '
        "number). The cases:\n" + listing + "\n(The same cases are in the variable `cases` as expression "
        "trees {'op': name, 'args': [...]}, leaves int or Fraction, with 'name', 'format' and 'expr' keys.)",
        {"cases": ("list of dicts {'name', 'format', 'expr'}: the cases listed above", ...)},
        '{"rows": [{"case": name, "outcome": "inf" | "nan" | "zero" | "finite"}, ...]}  '
        "(one row per case, in the given order)",
        "none (categorical answers; every row's outcome is one of the four strings)",
        exact=False,
    )


FORMATS = ("float16", "float32", "float64")


SHORT = {"float16": "f16", "float32": "f32", "float64": "f64"}


MAX_EXPONENT = {"float16": 15, "float32": 127, "float64": 1023}


SUBNORMAL_EXPONENT = {"float16": 24, "float32": 149, "float64": 1074}
"""The smallest subnormal is 2**-SUBNORMAL_EXPONENT; values below half of it round to 0."""


LN_MAX = {"float16": F(110898, 10**4), "float32": F(887228, 10**4), "float64": F(7097827, 10**4)}


LN_HALF_SUBNORMAL = {"float16": F(-173287, 10**4), "float32": F(-1039721, 10**4),
                     "float64": F(-7451332, 10**4)}
"""ln(max finite) and ln(2**-(SUBNORMAL_EXPONENT + 1)), to 4 decimals (the robustness test,
not these constants, decides whether a case is posed)."""


def max_finite(fmt):
    p, e = PRECISION[fmt], MAX_EXPONENT[fmt]
    return (2**p - 1) * 2 ** (e - p + 1)


def _frozen(node):
    """An expression tree as nested tuples (hashable), for the memo of robust outcomes."""
    return (node["op"], tuple(map(_frozen, node["args"]))) if isinstance(node, dict) else node


def thawed(frozen):
    return {"op": frozen[0], "args": list(map(thawed, frozen[1]))} if isinstance(frozen, tuple) else frozen


@lru_cache(maxsize=4096)
def robust_frozen(frozen, fmt):
    return stable_outcome(thawed(frozen), fmt)


def robust_outcome(expr, fmt):
    """ieee.stable_outcome, memoised: a sampled case's outcome is computed once for the sampler
    and its argument text. (check() calls ieee.stable_outcome itself, never this memo.)"""
    return robust_frozen(_frozen(expr), fmt)


def _argument(case):
    fmt = case["format"]
    outcome = robust_outcome(case["expr"], fmt)
    return (f"the exact real value is {real_value(case['expr'])}; {fmt} holds at most "
            f"{float(max_finite(fmt)):.4g} "
            f"and at least 2**-{SUBNORMAL_EXPONENT[fmt]} in magnitude, and rounding after every step gives "
            f"{outcome!r}, which no exp/log error of a few ulps can change")


def _grid(value, bits):
    """value rounded down to a multiple of 2**-bits (an int when bits = 0)."""
    scale = 2**bits
    q = F(int((value * scale).__floor__()), scale)
    return q.numerator if q.denominator == 1 else q


def _cases(draw: Draw, count: int, make) -> list[dict]:
    """count cases from make(draw, i) -> (stem, format, expr), each redrawn until it is new and
    its outcome is robust (ieee.stable_outcome), named c<i>_<stem>_<format>. The outcomes must
    not all be the same: when the first count - 1 agree, the last is redrawn until it differs."""
    cases, outcomes = [], set()
    for i in range(count):
        for _ in range(32):
            stem, fmt, expr = make(draw, i)
            repeated = any(c["format"] == fmt and c["expr"] == expr for c in cases)
            outcome = None if repeated else robust_outcome(expr, fmt)
            if outcome is not None and (i < count - 1 or len(outcomes | {outcome}) >= 2):
                cases.append({"name": f"c{i}_{stem}_{SHORT[fmt]}", "format": fmt, "expr": expr})
                outcomes.add(outcome)
                break
        else:
            raise Reject("no robust case near the threshold" if i < count - 1 or len(outcomes) > 1
                         else "every case has the same outcome")
    return cases


def _formats(level):
    return FORMATS if level >= 2 else ("float16", "float32")


def _logits(draw: Draw, fmt: str, count: int, bits: int) -> list:
    """Logits around an overflow or underflow edge of fmt, or around 0 with one far out."""
    regime = draw.choice(("over", "under", "spread"))
    if regime == "spread":
        base = [_grid(draw.dyadic(-4, 4, bits), bits) for _ in range(count)]
        far = draw.choice((LN_MAX, LN_HALF_SUBNORMAL))[fmt] + draw.dyadic(-2, 6, bits)
        base[draw.below(count)] = _grid(far, bits)
        return base
    edge = (LN_MAX if regime == "over" else LN_HALF_SUBNORMAL)[fmt]
    centre = edge + draw.dyadic(-3, 3, bits)
    return [_grid(centre + draw.dyadic(-4, 4, bits), bits) for _ in range(count)]


def logit_sampler(stem, naive, shifted, indexed):
    """Naive and max-shifted cases of 2..1+level logits (multiples of 1/2 from level 3); an
    indexed function (softmax) also takes the index of the probability asked for."""

    def sample(draw: Draw, level: int) -> dict:
        bits = 0 if level <= 2 else 1

        def make(draw, i):
            fmt = draw.choice(_formats(level))
            logits = _logits(draw, fmt, draw.integer(2, max(2, 1 + level)), bits)
            extra = (draw.below(len(logits)),) if indexed else ()
            is_naive = draw.chance(1, 2)
            expr = (naive if is_naive else shifted)(logits, *extra)
            return ("naive_" if is_naive else "shifted_") + stem, fmt, expr

        return {"cases": _cases(draw, 4 + level, make)}

    return sample


def underflow_power(q, fmt):
    """The smallest n with q**n below half the smallest subnormal of fmt (exact integers)."""
    q, bound = F(q), 2 ** (SUBNORMAL_EXPONENT[fmt] + 1)
    low, high = 1, 1
    while q.numerator ** high * bound >= q.denominator ** high:
        low, high = high, 2 * high
    while low < high:
        mid = (low + high) // 2
        if q.numerator ** mid * bound < q.denominator ** mid:
            high = mid
        else:
            low = mid + 1
    return low


SEARCH_CONVENTIONS = CONVENTIONS + (
    " A template is an expression in which the integer n stands in for a literal (the leaf "
    "{'op': 'n', 'args': []} in the tree): the case for one n is the template with that integer put in "
    "(as a literal, rounded to the format like any literal; in powi(x, n) it is the count of copies). An "
    "outcome is non-finite when it is \"inf\", \"nan\" or \"zero\". A window {'format', 'low', 'high'} is "
    "every integer n with low <= n <= high, both included, evaluated in that format."
)


@uses(ieee_rounder, ieee_evaluate)
def non_finite(template, n, fmt):
    """Whether the template's case for n is inf, nan or zero in fmt."""
    import math

    value = ieee_evaluate(template, ieee_rounder(fmt), n)
    return math.isnan(value) or math.isinf(value) or value == 0


HOLE = {"op": "n", "args": []}


def neg_hole():
    return op("neg", HOLE)


TEMPLATES = {
    "exp_range": (
        ("exp(n) overflows", lambda: op("exp", HOLE), lambda f: int(LN_MAX[f])),
        ("exp(-n) underflows", lambda: op("exp", neg_hole()), lambda f: int(-LN_HALF_SUBNORMAL[f])),
        ("exp(n) / 16", lambda: op("div", op("exp", HOLE), 16), lambda f: int(LN_MAX[f])),
    ),
    "softmax": (
        ("naive softmax of [n, n - 1], index 0", lambda: softmax_naive([HOLE, op("sub", HOLE, 1)], 0),
         lambda f: int(LN_MAX[f])),
        ("naive softmax of [-n, -n - 1], index 1",
         lambda: softmax_naive([neg_hole(), op("sub", neg_hole(), 1)], 1),
         lambda f: int(-LN_HALF_SUBNORMAL[f])),
        ("naive softmax of [0, n], index 0", lambda: softmax_naive([0, HOLE], 0), lambda f: int(LN_MAX[f])),
    ),
    "logsumexp": (
        ("naive log-sum-exp of [n, n]", lambda: logsumexp_naive([HOLE, HOLE]), lambda f: int(LN_MAX[f])),
        ("naive log-sum-exp of [-n, -n]", lambda: logsumexp_naive([neg_hole(), neg_hole()]),
         lambda f: int(-LN_HALF_SUBNORMAL[f])),
        ("naive log-sum-exp of [n, 0, 0]", lambda: logsumexp_naive([HOLE, 0, 0]), lambda f: int(LN_MAX[f])),
    ),
    "underflow": (
        ("powi(1/2, n)", lambda: op("powi", F(1, 2), HOLE), lambda f: underflow_power(F(1, 2), f)),
        ("powi(1/10, n)", lambda: op("powi", F(1, 10), HOLE), lambda f: underflow_power(F(1, 10), f)),
        ("powi(3/4, n)", lambda: op("powi", F(3, 4), HOLE), lambda f: underflow_power(F(3, 4), f)),
    ),
    "cancellation": (
        ("(n + 1) - n", lambda: op("sub", op("add", HOLE, 1), HOLE), lambda f: 2 ** PRECISION[f]),
        ("(n + 3) - n", lambda: op("sub", op("add", HOLE, 3), HOLE), lambda f: 2 ** (PRECISION[f] + 1)),
        ("(n * n + 1) - n * n", lambda: op("sub", op("add", op("mul", HOLE, HOLE), 1), op("mul", HOLE, HOLE)),
         lambda f: isqrt(2 ** PRECISION[f])),
    ),
    "format_limits": (
        ("n * n", lambda: op("mul", HOLE, HOLE), lambda f: isqrt(max_finite(f))),
        ("(n * n + n * n) / 2", lambda: op("div", op("add", op("mul", HOLE, HOLE), op("mul", HOLE, HOLE)), 2),
         lambda f: isqrt(max_finite(f) // 2)),
        ("max + n", lambda: None, None),
        ("powi(2, n)", lambda: op("powi", 2, HOLE), lambda f: MAX_EXPONENT[f]),
    ),
}
"""Per family: (description, template maker, where n crosses the edge in a format). format_limits'
third template (max finite + n) is built per format (its constant depends on the format)."""


def _template(family, k, fmt):
    if family == "format_limits" and k == 2:
        return op("add", max_finite(fmt), HOLE), 2 ** (MAX_EXPONENT[fmt] - PRECISION[fmt])
    _, make, edge = TEMPLATES[family][k]
    return make(), edge(fmt)


WIDTH = {2: (6, 12), 3: (8, 16), 4: (6, 10), 5: (4, 8)}


def _window(draw: Draw, fmt: str, edge: int, level: int, below: bool) -> dict:
    """Consecutive integers around the edge, or entirely below it (then no n is non-finite)."""
    width = draw.integer(*WIDTH[level])
    if below:
        high = edge - draw.integer(2, 6)
        return {"format": fmt, "low": high - width, "high": high}
    low = edge - draw.integer(1, width - 1)
    return {"format": fmt, "low": low, "high": low + width}


def substituted(template, n):
    """The template with the integer n put in (host side: for the checks and the robustness test)."""
    if not isinstance(template, dict):
        return template
    if template["op"] == "n":
        return n
    if template["op"] == "powi" and isinstance(template["args"][1], dict):
        return op("powi", substituted(template["args"][0], n), n)
    return op(template["op"], *[substituted(a, n) for a in template["args"]])


def robust_window(template, window):
    return all(robust_outcome(substituted(template, n), window["format"]) is not None
               for n in range(window["low"], window["high"] + 1))


def _posable(family, k):
    """The formats in which template k's edge is an integer a double holds exactly (so a literal n
    is rounded once), with that template and edge."""
    found = []
    for fmt in FORMATS:
        template, edge = _template(family, k, fmt)
        if edge < 2**50:
            found.append((fmt, template, edge))
    return found


def binding_draw(draw: Draw, family: str, kinds: list[int]) -> tuple[str, int, list[int]]:
    """Level 4's format, the template that binds (fails first: drawn uniformly among those with
    another template posable in the format whose edge is not earlier) and one or two such others.
    Drawing the smallest edge from a random subset instead bound format_limits to powi(2, n) or
    max + n (the last finite n 15) in 19 draws in 20."""
    fmt = draw.choice(FORMATS)
    edges = {k: e for k in kinds for f, _, e in _posable(family, k) if f == fmt}
    later = {k: [j for j in edges if j != k and edges[j] >= edges[k]] for k in edges}
    binders = [k for k in edges if later[k]]
    if not binders:
        raise Reject("fewer than two templates posable in this format")
    binding = draw.choice(binders)
    others = draw.sample(later[binding], draw.integer(1, min(2, len(later[binding]))))
    return fmt, binding, others


def _robust(templates: list, windows: list[dict]) -> dict:
    """The drawn templates and windows, refused unless every case of every window is robust."""
    for template, window in zip(templates, windows, strict=True):
        if not robust_window(template, window):
            raise Reject("a case of a window is not robust")
    return {"templates": templates, "windows": windows}


def separate_windows(draw: Draw, family: str, level: int) -> dict:
    """Levels 2-3: 2-3 (level 2) or 1-2 (level 3) templates, each in a format it is posable in, on
    its own window around its edge; from level 3 a quarter of the windows lie wholly below it."""
    kinds = list(range(len(TEMPLATES[family])))
    templates, windows = [], []
    count = draw.integer(2, 3) if level == 2 else draw.integer(1, 2)
    for _ in range(count):
        fmt, template, edge = draw.choice(_posable(family, draw.choice(kinds)))
        templates.append(template)
        windows.append(_window(draw, fmt, edge, level, below=level >= 3 and draw.chance(1, 4)))
    return _robust(templates, windows)


def shared_window(draw: Draw, family: str, level: int) -> dict:
    """Level 4: 2-3 templates in one format on one shared window around the binding edge (wholly
    past it in a tenth: then no n keeps every template finite)."""
    fmt, binding, others = binding_draw(draw, family, list(range(len(TEMPLATES[family]))))
    made = [_template(family, k, fmt) for k in draw.shuffled([binding, *others])]
    edge = _template(family, binding, fmt)[1]
    window = _window(draw, fmt, edge, level, below=False)
    if draw.chance(1, 10):
        low = edge + draw.integer(3, 6)
        window = {"format": fmt, "low": low, "high": low + window["high"] - window["low"]}
    return _robust([template for template, _ in made], [dict(window) for _ in made])


def windows_per_format(draw: Draw, family: str, level: int) -> dict:
    """Level 5: two templates, each posed in every format it is posable in on its own window; a
    random non-empty proper subset of the formats has every window below its edge."""
    chosen = draw.sample(list(range(len(TEMPLATES[family]))), 2)
    formats = [f for f in FORMATS if any(f == g for k in chosen for g, _, _ in _posable(family, k))]
    if len(formats) < 2:
        raise Reject("the two templates are posable in one format only")
    subsets = [mask for mask in range(1, 2 ** len(formats) - 1)]
    mask = draw.choice(subsets)
    clean = {f for i, f in enumerate(formats) if mask >> i & 1}
    templates, windows = [], []
    for k in chosen:
        for fmt, template, edge in _posable(family, k):
            templates.append(template)
            windows.append(_window(draw, fmt, edge, level, below=fmt in clean))
    return _robust(templates, windows)


def search_prompt(question: str, shape: str):
    def render(inputs):
        listing = "\n".join(f"  {i}: {show_expr(t)} in {w['format']}, n from {w['low']} to {w['high']}"
                            for i, (t, w) in enumerate(zip(inputs["templates"], inputs["windows"],
                                                           strict=True)))
        return prompt(
            question + " The templates and windows:\n" + listing,
            {"templates": ("list of expression trees {'op': name, 'args': [...]} with the leaf {'op': 'n', "
                           "'args': []} for n", ...),
             "windows": ("list of dicts {'format', 'low', 'high'}, one per template", ...),
             "question": ("the question asked, as a word", inputs["question"])},
            shape,
            "n is a plain integer; counts are integers; formats are the strings 'float16', 'float32', "
            "'float64'",
        )

    return render


def finite_windows(inputs) -> list[bool]:
    """Per window: every n of it is robustly finite."""
    return [all(robust_outcome(substituted(t, n), w["format"]) == "finite"
                for n in range(w["low"], w["high"] + 1))
            for t, w in zip(inputs["templates"], inputs["windows"], strict=True)]


WINDOW_WITHOUT_NON_FINITE = ("a window lies wholly on the finite side of its edge, so it has no non-finite n "
                             "and its count is exactly 0")


def window_outcomes(task) -> tuple[list[str], dict | None]:
    """Every case of every window recomputed with numpy (ieee.outcome) and tested for robustness
    (ieee.stable_outcome): the problems found, and for each (window, n) whether it is non-finite
    (None when meta lacks a case)."""
    cases = {case["name"]: case for case in task.meta["float_search"]}
    problems, bad = [], {}
    for i, w in enumerate(task.inputs["windows"]):
        for n in range(w["low"], w["high"] + 1):
            case = cases.get(f"t{i}_n{n}")
            if case is None or case["format"] != w["format"]:
                return [f"meta['float_search'] lacks the case n = {n} of window {i}"], None
            got = outcome(case["expr"], case["format"])
            if stable_outcome(case["expr"], case["format"]) != got:
                problems.append(Degenerate(f"window {i}, n = {n}: the outcome is not robust"))
            bad[i, n] = got != "finite"
    return problems, bad


def window_level(tags, word: str, reference, from_outcomes, sample, question: str, shape: str,
                 zero_reason=lambda inputs: None, reject=None) -> Level:
    """One of levels 2-5: a question on templates and windows, its reference, and its independent
    check: ``from_outcomes(inputs, bad)`` rebuilds the key from numpy's outcomes of every case
    (window_outcomes); ``zero_reason(inputs)`` says why the key holds an exact zero, if it does."""

    def check(task):
        problems, bad = window_outcomes(task)
        if bad is None:
            return problems
        want = from_outcomes(task.inputs, bad)
        if task.expected != want:
            problems.append(f"the key {task.expected} differs from numpy's outcomes, which give {want}")
        return problems

    def build(task_id, inputs):
        if inputs.get("question") != word:
            raise ValueError(f"this level asks {word!r}; the inputs say {inputs.get('question')!r}")
        cases = [{"name": f"t{i}_n{n}", "format": w["format"], "expr": substituted(t, n)}
                 for i, (t, w) in enumerate(zip(inputs["templates"], inputs["windows"], strict=True))
                 for n in range(w["low"], w["high"] + 1)]
        return TaskDef(task_id, "numerical", inputs, reference, search_prompt(question, shape),
                       api(SEARCH_CONVENTIONS), POLICY, tags=(*tags, "search", word),
                       zero_reason=zero_reason(inputs), meta={"float_search": cases, "independent": check})

    def sample_level(draw: Draw, level: int) -> dict:
        return {**sample(draw, level), "question": word}

    return Level(build, sample_level, reject)


# L2 (derive the edge): the first non-finite n of each window
@uses(non_finite)
def first_non_finite_rows(templates, windows, question=None):
    rows = []
    for t, w in zip(templates, windows, strict=True):
        bad = [n for n in range(w["low"], w["high"] + 1) if non_finite(t, n, w["format"])]
        rows.append({"format": w["format"], "first_non_finite": bad[0] if bad else None})
    return {"rows": rows}


def _hits(inputs, bad) -> list[tuple[dict, list[int]]]:
    """Each window with its non-finite n (from numpy's outcomes ``bad``)."""
    return [(w, [n for n in range(w["low"], w["high"] + 1) if bad[i, n]])
            for i, w in enumerate(inputs["windows"])]


def _first_from_outcomes(inputs, bad):
    return {"rows": [{"format": w["format"], "first_non_finite": min(hits) if hits else None}
                     for w, hits in _hits(inputs, bad)]}


def first_non_finite_level(family: str, tags) -> Level:
    return window_level(
        tags, "first", first_non_finite_rows, _first_from_outcomes,
        lambda draw, level: separate_windows(draw, family, level),
        "For each template and its window (same position in the two lists), give the smallest n of the "
        "window whose outcome is non-finite, or None if no n of the window has a non-finite outcome.",
        '{"rows": [{"format": str, "first_non_finite": int or None}, ...]}  (one row per window, in order)')


# L3 (compose): how many n of each window are non-finite, and the first
@uses(non_finite)
def non_finite_count_rows(templates, windows, question=None):
    rows = []
    for t, w in zip(templates, windows, strict=True):
        bad = [n for n in range(w["low"], w["high"] + 1) if non_finite(t, n, w["format"])]
        rows.append({"format": w["format"], "first_non_finite": bad[0] if bad else None,
                     "non_finite": len(bad)})
    return {"rows": rows}


def _count_from_outcomes(inputs, bad):
    return {"rows": [{**row, "non_finite": len(hits)} for row, (_, hits)
                     in zip(_first_from_outcomes(inputs, bad)["rows"], _hits(inputs, bad), strict=True)]}


def non_finite_count_level(family: str, tags) -> Level:
    return window_level(
        tags, "count", non_finite_count_rows, _count_from_outcomes,
        lambda draw, level: separate_windows(draw, family, level),
        "For each template and its window (same position in the two lists), give how many n of the window "
        "have a non-finite outcome, and the smallest such n (None if there is none).",
        '{"rows": [{"format": str, "first_non_finite": int or None, "non_finite": int}, ...]}  '
        "(one row per window, in order)",
        zero_reason=lambda inputs: WINDOW_WITHOUT_NON_FINITE if any(finite_windows(inputs)) else None)


# L4 (search): the largest n of a shared window that keeps every template finite
@uses(non_finite)
def last_all_finite_rows(templates, windows, question=None):
    w = windows[0]
    fine = [n for n in range(w["low"], w["high"] + 1)
            if not any(non_finite(t, n, w["format"]) for t in templates)]
    return {"rows": [{"format": w["format"], "last_all_finite": fine[-1] if fine else None,
                      "all_finite": len(fine)}]}


def _last_all_finite_from_outcomes(inputs, bad):
    w = inputs["windows"][0]
    fine = [n for n in range(w["low"], w["high"] + 1)
            if not any(bad[i, n] for i in range(len(inputs["windows"])))]
    return {"rows": [{"format": w["format"], "last_all_finite": max(fine) if fine else None,
                      "all_finite": len(fine)}]}


def _none_all_finite(inputs):
    w = inputs["windows"][0]
    if any(all(robust_outcome(substituted(t, n), w["format"]) == "finite" for t in inputs["templates"])
           for n in range(w["low"], w["high"] + 1)):
        return None
    return "no n of the window keeps every template finite, so that count is exactly 0"


def last_all_finite_level(family: str, tags) -> Level:
    return window_level(
        tags, "last_all_finite", last_all_finite_rows, _last_all_finite_from_outcomes,
        lambda draw, level: shared_window(draw, family, level),
        "All the templates are posed in the same format on the same window. Give the largest n of the window "
        "at which no template's outcome is non-finite (None if there is no such n), and how many n of the "
        "window have no template's outcome non-finite.",
        '{"rows": [{"format": str, "last_all_finite": int or None, "all_finite": int}]}  (a single row)',
        zero_reason=_none_all_finite)


# L5 (design): per format, the non-finite count, whether it is finite everywhere, and the cheapest
@uses(non_finite)
def cheapest_format_rows(templates, windows, question=None):
    formats = []
    for w in windows:
        if w["format"] not in formats:
            formats.append(w["format"])
    rows, found = [], False
    for fmt in formats:
        bad = sum(1 for t, w in zip(templates, windows, strict=True) if w["format"] == fmt
                  for n in range(w["low"], w["high"] + 1) if non_finite(t, n, fmt))
        rows.append({"format": fmt, "non_finite": bad, "finite_everywhere": bad == 0,
                     "cheapest": bad == 0 and not found})
        found = found or bad == 0
    return {"rows": rows}


def _cheapest_from_outcomes(inputs, bad):
    windows = inputs["windows"]
    formats = list(dict.fromkeys(w["format"] for w in windows))
    counts = {f: sum(v for (i, _), v in bad.items() if windows[i]["format"] == f) for f in formats}
    cheapest = next((f for f in formats if counts[f] == 0), None)
    return {"rows": [{"format": f, "non_finite": counts[f], "finite_everywhere": counts[f] == 0,
                      "cheapest": f == cheapest} for f in formats]}


def _format_without_non_finite(inputs):
    clean = finite_windows(inputs)
    windows = inputs["windows"]
    if any(all(c for c, w in zip(clean, windows, strict=True) if w["format"] == f)
           for f in {w["format"] for w in windows}):
        return WINDOW_WITHOUT_NON_FINITE
    return None


def cheapest_format_level(family: str, tags) -> Level:
    return window_level(
        tags, "cheapest", cheapest_format_rows, _cheapest_from_outcomes,
        lambda draw, level: windows_per_format(draw, family, level),
        "Formats cost in the order float16 < float32 < float64. Each template is posed in several "
        "formats, each time on its own window (the list below). For every format, count the pairs "
        "(template, n) of its windows whose outcome is non-finite, say whether every template is finite on "
        "every n of its windows in that format, and whether it is the cheapest format for which that holds "
        "(True for at most one format; False for all when no format is).",
        '{"rows": [{"format": str, "non_finite": int, "finite_everywhere": bool, "cheapest": bool}, ...]}  '
        "(one row per format, in the order the formats first appear in `windows`)",
        zero_reason=_format_without_non_finite,
        reject=varying_fields("rows[].finite_everywhere", "rows[].cheapest"))


_ARGUMENTS: dict[str, dict[str, str]] = {}
"""The hand-written arguments of the canonical cases, by task id."""


def check_cases(task):
    """Level 1: every case's category recomputed with numpy scalars (ieee.outcome) and robust
    under every correct IEEE implementation (ieee.stable_outcome), and argued in meta['argument']."""
    cases, rows = task.meta["float_cases"], task.expected["rows"]
    argument = task.meta.get("argument", {})
    if [row["case"] for row in rows] != [case["name"] for case in cases]:
        return ["the expected rows do not list the cases of meta['float_cases'] in order"]
    problems = []
    for i, (row, case) in enumerate(zip(rows, cases, strict=True)):
        recomputed = outcome(case["expr"], case["format"])
        if row["outcome"] != recomputed:
            problems.append(f"rows[{i}] ({case['name']}): the key says {row['outcome']!r} but numpy "
                            f"{case['format']} arithmetic gives {recomputed!r}")
        if stable_outcome(case["expr"], case["format"]) != row["outcome"]:
            problems.append(Degenerate(f"rows[{i}] ({case['name']}): the outcome is not robust: another "
                                       "correct IEEE implementation (exp/log within "
                                       f"{TRANSCENDENTAL_ULPS} ulps, literals rounded once) could give "
                                       "another category"))
        if not str(argument.get(case["name"], "")).strip():
            problems.append(f"rows[{i}] ({case['name']}): meta['argument'] does not say why")
    return problems


def cases_level(tags, sample_cases) -> Level:
    """Level 1: the category of each stated case."""

    def build(task_id, inputs):
        cases = inputs["cases"]
        argument = _ARGUMENTS.get(task_id) or {c["name"]: _argument(c) for c in cases}
        return TaskDef(task_id, "numerical", inputs, float_outcome_rows, _prompt,
                       api(CONVENTIONS, exact=False), POLICY,
                       tags=tags,
                       meta={"float_cases": cases, "argument": argument, "independent": check_cases})

    return Level(build, sample_cases, varying_fields("rows[].outcome"))


def numerical_family(name, tags, sample_cases, level_one):
    """A numerical family: level 1 poses the cases ``sample_cases`` draws; levels 2-5 ask the same
    four questions of every family, on the family's templates (TEMPLATES[name])."""
    kinds = "; ".join(description for description, _, _ in TEMPLATES[name][:2]) + ("; max + n"
                                                                                    if name == "format_limits"
                                                                                    else "")
    levels = (f"L1: {level_one} (the category of each stated expression). L2 (derive the edge): 2-3 "
              f"templates ({kinds}, ...) with an integer n, each the first n of a window around the format's "
              "edge whose value is inf, nan or 0. L3 (compose): 1-2 windows, how many n are non-finite and "
              "the first; a "
              "quarter of the windows lie wholly below the edge. L4 (search): 2-3 templates in one format on "
              "one window, the largest n keeping all of them finite (the template that fails first drawn "
              "uniformly; a window past its edge in a tenth, None unless an n there is finite again, as "
              "(n + 1) - n is at n = 2050, 2054, ... in float16). L5 (design): two "
              "templates posed in every format they fit: every format's count of non-finite cases, whether "
              "it is finite everywhere, and the cheapest format that is; in every instance some formats are "
              "and some are not (a random non-empty proper subset has its windows below the edge), so "
              "\"the dearer format is the safe one\" fails in about half.")
    return deeplearning_family(
        name, (cases_level(tags, sample_cases), first_non_finite_level(name, tags),
               non_finite_count_level(name, tags), last_all_finite_level(name, tags),
               cheapest_format_level(name, tags)),
        about=levels,
        branches=(Branch("a window without a non-finite n", has_none_row, F(1, 10), (3,)),
                  Branch("no n keeps every template finite", has_none_row, F(1, 40), (4,)),
                  Branch("the cheapest format posed is not finite everywhere", cheapest_fails, F(1, 5), (5,)),
                  Branch("a cheaper format is finite everywhere where a dearer one is not", not_monotone,
                         F(1, 10), (5,))))


def has_none_row(task):
    return any(row.get("first_non_finite", 0) is None or row.get("last_all_finite", 0) is None
               for row in task.expected["rows"])


def cheapest_fails(task):
    return task.level == 5 and not task.expected["rows"][0]["finite_everywhere"]


def not_monotone(task):
    """A format finite everywhere before (cheaper than) one that is not: "the dearer the safer" fails."""
    flags = [row["finite_everywhere"] for row in task.expected["rows"]] if task.level == 5 else []
    return any(a and not b for a, b in zip(flags, flags[1:], strict=False))
