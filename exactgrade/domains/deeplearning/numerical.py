"""Numerical tasks (dl-030..dl-035): which failure a float computation hits.

The answer is a category ("inf", "nan", "zero", "finite"), never the float itself. A case is an
expression tree evaluated in a stated IEEE 754 format with round-to-nearest-even after every
operation; the reference computes the category by running the float computation with the
standard library (struct for float16/float32 rounding), and meta["argument"] says, per case,
why that category is right. verify recomputes every case independently with numpy scalars.

Families, one per canonical task: exp_range (dl-030), softmax (dl-031), logsumexp (dl-032),
underflow (dl-033), cancellation (dl-034), format_limits (dl-035). Samplers draw cases around
the real thresholds of each format (x near ln(max) and ln(smallest subnormal / 2), logits
around them, powers whose value crosses half the smallest subnormal, increments at the
ties-to-even boundaries 2**-p, large integers 2**p + 1, squares near sqrt(max), max + half an
ulp). A case is kept only if ieee.stable_outcome gives it one category under every correct
implementation (exp/log a few ulps off, literals rounded once), so the reference's
struct-rounded path and numpy cannot disagree; the check re-derives each category with numpy
and re-runs the robustness test. Generated arguments state the exact real value, the format's
limits and the outcome.
"""

from __future__ import annotations

from fractions import Fraction as F
from functools import lru_cache
from math import isqrt

from exactgrade.domains.deeplearning._family import dl_family
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.domains.deeplearning.ieee import real_value, stable_outcome
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef

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


def float_outcome_rows(cases):
    import math
    import struct
    from fractions import Fraction

    def rounder(fmt):
        code = {"float16": "e", "float32": "f", "float64": None}[fmt]

        def rnd(x):
            if code is None or math.isnan(x) or math.isinf(x):
                return x
            try:
                return struct.unpack(code, struct.pack(code, x))[0]
            except OverflowError:  # struct refuses what IEEE rounds to infinity
                return math.copysign(math.inf, x)

        return rnd

    def exp(x):
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf

    def log(x):
        if math.isnan(x) or x < 0:
            return math.nan
        return -math.inf if x == 0 else math.log(x)

    def div(x, y):
        if y == 0:
            if x == 0 or math.isnan(x):
                return math.nan
            return math.copysign(math.inf, x) * math.copysign(1.0, y)
        return x / y

    def maximum(*xs):
        return math.nan if any(math.isnan(x) for x in xs) else max(xs)

    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": div,
           "exp": exp, "log": log, "neg": lambda a: -a, "max": maximum}

    def evaluate(node, rnd):
        if not isinstance(node, dict):
            return rnd(float(Fraction(node)))
        op, args = node["op"], node["args"]
        if op == "powi":
            x = evaluate(args[0], rnd)
            value = x
            for _ in range(args[1] - 1):
                value = rnd(value * x)
            return value
        values = [evaluate(a, rnd) for a in args]
        if op == "sum":
            total = values[0]
            for v in values[1:]:
                total = rnd(total + v)
            return total
        return rnd(ops[op](*values))

    def category(x):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf"
        return "zero" if x == 0 else "finite"

    rows = []
    for case in cases:
        value = evaluate(case["expr"], rounder(case["format"]))
        rows.append({"case": case["name"], "outcome": category(value)})
    return {"rows": rows}


def op(name, *args):
    """An expression node."""
    return {"op": name, "args": list(args)}


def softmax_naive(logits, index):
    return op("div", op("exp", logits[index]), op("sum", *[op("exp", x) for x in logits]))


def softmax_shifted(logits, index):
    m = op("max", *logits)
    return op("div", op("exp", op("sub", logits[index], m)),
              op("sum", *[op("exp", op("sub", x, m)) for x in logits]))


def logsumexp_naive(logits):
    return op("log", op("sum", *[op("exp", x) for x in logits]))


def logsumexp_shifted(logits):
    m = op("max", *logits)
    return op("add", m, op("log", op("sum", *[op("exp", op("sub", x, m)) for x in logits])))


def _show_int(n: int) -> str:
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
            return _show_int(q.numerator)
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


def _case(name, fmt, expr, argument):
    return {"name": name, "format": fmt, "expr": expr}, argument


_MEAN_SQUARE_300 = op("div", op("add", op("mul", 300, 300), op("mul", 300, 300)), 2)

# ---------------------------------------------------------------------------- thresholds

FORMATS = ("float16", "float32", "float64")
SHORT = {"float16": "f16", "float32": "f32", "float64": "f64"}
PRECISION = {"float16": 11, "float32": 24, "float64": 53}
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


def _thawed(frozen):
    return {"op": frozen[0], "args": list(map(_thawed, frozen[1]))} if isinstance(frozen, tuple) else frozen


@lru_cache(maxsize=4096)
def _robust_frozen(frozen, fmt):
    return stable_outcome(_thawed(frozen), fmt)


def robust_outcome(expr, fmt):
    """ieee.stable_outcome, memoised: a sampled case's outcome is computed once for the sampler
    and its argument text. (check() calls ieee.stable_outcome itself, never this memo.)"""
    return _robust_frozen(_frozen(expr), fmt)


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


# ---------------------------------------------------------------------------- samplers


def sample_exp_range(draw: Draw, level: int) -> dict:
    """exp(x) with x within 3 of ln(max) or ln(half the smallest subnormal): integers at levels
    1-2, multiples of 1/4 from level 3, and from level 4 scaled by 2, 1/2 or 1/16 afterwards."""
    bits = 0 if level <= 2 else 2

    def make(draw, i):
        fmt = draw.choice(_formats(level))
        edge = draw.choice((LN_MAX, LN_HALF_SUBNORMAL))[fmt]
        expr = op("exp", _grid(edge + draw.dyadic(-3, 3, bits), bits))
        if level >= 4 and draw.chance(1, 2):
            expr = op(draw.choice(("mul", "div")), expr, draw.choice((2, F(1, 2), F(1, 16))))
        return "exp", fmt, expr

    return {"cases": _cases(draw, 4 + 2 * level, make)}


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


def _logit_sampler(stem, naive, shifted, indexed):
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


sample_softmax = _logit_sampler("p", softmax_naive, softmax_shifted, indexed=True)
sample_logsumexp = _logit_sampler("lse", logsumexp_naive, logsumexp_shifted, indexed=False)


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


def sample_underflow(draw: Draw, level: int) -> dict:
    """powi(q, n) with n within 3 (level 1) .. 3 + level of where q**n crosses half the smallest
    subnormal (q = 1/2 gives exact ties), and its log-space twin n * log(q)."""
    bases = (F(1, 2), F(1, 4), F(1, 1000))
    if level > 1:
        bases += (F(1, 8), F(1, 10), F(3, 4), F(1, 3))

    def make(draw, i):
        fmt = draw.choice(_formats(level))
        q = draw.choice(bases)
        n = max(2, underflow_power(q, fmt) + draw.integer(-2 - level, 2 + level))
        if draw.chance(1, 4):
            return "log_likelihood", fmt, op("mul", n, op("log", q))
        return "likelihood", fmt, op("powi", q, n)

    return {"cases": _cases(draw, 4 + level, make)}


def _variance(values):
    """E[x^2] - E[x]^2 in one pass, as the canonical dl-034 case writes it."""
    n = len(values)
    mean_square = op("div", op("sum", *[op("mul", x, x) for x in values]), n)
    mean = op("div", op("sum", *values), n)
    return op("sub", mean_square, op("mul", mean, mean))


def sample_cancellation(draw: Draw, level: int) -> dict:
    """(1 + d) - 1 with d = 2**-k near the format's precision (ties at k = p) or 10**-k;
    (2**k + 1) - 2**k at the large-integer tie; one-pass variance of 2 (3 from level 3)
    integers near 2**(p/2), where the squares stop being exact."""

    def make(draw, i):
        fmt = draw.choice(_formats(level))
        p = PRECISION[fmt]
        kind = draw.choice(("increment", "decimal", "integer", "variance"))
        if kind == "increment":
            return "one_plus", fmt, op("sub", op("add", 1, F(1, 2 ** (p + draw.integer(-2, 1)))), 1)
        if kind == "decimal":
            k = draw.integer(max(1, p * 3 // 10 - 2), p * 3 // 10 + 2)
            return "one_plus_decimal", fmt, op("sub", op("add", 1, F(1, 10**k)), 1)
        if kind == "integer":
            big = 2 ** (p + draw.integer(-1, 1))
            return "big_plus_one", fmt, op("sub", op("add", big, draw.choice((1, 2, 3))), big)
        start = draw.integer(2 ** (p // 2 - 1), 2 ** (p // 2 + 2))
        values = [start + step for step in sorted(draw.sample(range(0, 5), 3 if level >= 3 else 2))]
        return "variance_one_pass", fmt, _variance(values)

    return {"cases": _cases(draw, 4 + level, make)}


def sample_format_limits(draw: Draw, level: int) -> dict:
    """max + c around half an ulp (the tie rounds to even = up = inf), k * k around sqrt(max),
    1 / 2**-k around max, and a two-value mean square; float16 at levels 1-2, all formats above."""
    formats = ("float16",) if level <= 2 else FORMATS

    def make(draw, i):
        fmt = draw.choice(formats)
        p, e = PRECISION[fmt], MAX_EXPONENT[fmt]
        kind = draw.choice(("max_plus", "square", "reciprocal", "mean_square"))
        if kind == "max_plus":
            half_ulp = 2 ** (e - p)
            return kind, fmt, op("add", max_finite(fmt), half_ulp + draw.integer(-3, 3) * half_ulp // 8)
        if kind == "square":
            root = 2 ** ((e + 1) // 2) if e % 2 else 2 ** (e // 2) * 181 // 128
            k = root + draw.integer(-4, 4) * max(1, root // 256)
            return kind, fmt, op("mul", k, k)
        if kind == "reciprocal":
            k = min(SUBNORMAL_EXPONENT[fmt], e + draw.integer(-2, 2))
            return kind, fmt, op("div", 1, F(1, 2**k))
        x = 2 ** (e // 2) * 181 // 128 + draw.integer(-4, 4) * max(1, 2 ** (e // 2) // 256)
        return kind, fmt, op("div", op("add", op("mul", x, x), op("mul", x, x)), 2)

    return {"cases": _cases(draw, 4 + level, make)}


# ---------------------------------------------------------------------------- levels 2-5: searches

SEARCH_CONVENTIONS = CONVENTIONS + (
    " A template is an expression in which the integer n stands in for a literal (the leaf "
    "{'op': 'n', 'args': []} in the tree): the case for one n is the template with that integer put in "
    "(as a literal, rounded to the format like any literal; in powi(x, n) it is the count of copies). An "
    "outcome is non-finite when it is \"inf\", \"nan\" or \"zero\". A window {'format', 'low', 'high'} is "
    "every integer n with low <= n <= high, both included, evaluated in that format."
)


def float_search_rows(templates, windows, question):
    import math
    import struct
    from fractions import Fraction

    def rounder(fmt):
        code = {"float16": "e", "float32": "f", "float64": None}[fmt]

        def rnd(x):
            if code is None or math.isnan(x) or math.isinf(x):
                return x
            try:
                return struct.unpack(code, struct.pack(code, x))[0]
            except OverflowError:
                return math.copysign(math.inf, x)

        return rnd

    def exp(x):
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf

    def log(x):
        if math.isnan(x) or x < 0:
            return math.nan
        return -math.inf if x == 0 else math.log(x)

    def div(x, y):
        if y == 0:
            if x == 0 or math.isnan(x):
                return math.nan
            return math.copysign(math.inf, x) * math.copysign(1.0, y)
        return x / y

    def maximum(*xs):
        return math.nan if any(math.isnan(x) for x in xs) else max(xs)

    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": div,
           "exp": exp, "log": log, "neg": lambda a: -a, "max": maximum}

    def evaluate(node, n, rnd):
        if not isinstance(node, dict):
            return rnd(float(Fraction(node)))
        op, args = node["op"], node["args"]
        if op == "n":
            return rnd(float(n))
        if op == "powi":
            x = evaluate(args[0], n, rnd)
            count = n if isinstance(args[1], dict) else args[1]
            value = x
            for _ in range(count - 1):
                value = rnd(value * x)
            return value
        values = [evaluate(a, n, rnd) for a in args]
        if op == "sum":
            total = values[0]
            for v in values[1:]:
                total = rnd(total + v)
            return total
        return rnd(ops[op](*values))

    def finite(template, n, fmt):
        value = evaluate(template, n, rounder(fmt))
        return not (math.isnan(value) or math.isinf(value) or value == 0)

    rows = []
    if question == "cheapest":
        formats = []
        for w in windows:
            if w["format"] not in formats:
                formats.append(w["format"])
        found = False
        for fmt in formats:
            bad = sum(1 for t, w in zip(templates, windows, strict=True) if w["format"] == fmt
                      for n in range(w["low"], w["high"] + 1) if not finite(t, n, fmt))
            rows.append({"format": fmt, "non_finite": bad, "finite_everywhere": bad == 0,
                         "cheapest": bad == 0 and not found})
            found = found or bad == 0
        return {"rows": rows}
    if question == "last_all_finite":
        w = windows[0]
        fine = [n for n in range(w["low"], w["high"] + 1)
                if all(finite(t, n, w["format"]) for t in templates)]
        return {"rows": [{"format": w["format"], "last_all_finite": fine[-1] if fine else None,
                          "all_finite": len(fine)}]}
    for t, w in zip(templates, windows, strict=True):
        bad = [n for n in range(w["low"], w["high"] + 1) if not finite(t, n, w["format"])]
        row = {"format": w["format"], "first_non_finite": bad[0] if bad else None}
        if question == "count":
            row["non_finite"] = len(bad)
        rows.append(row)
    return {"rows": rows}


HOLE = {"op": "n", "args": []}


def _neg_hole():
    return op("neg", HOLE)


TEMPLATES = {
    "exp_range": (
        ("exp(n) overflows", lambda: op("exp", HOLE), lambda f: int(LN_MAX[f])),
        ("exp(-n) underflows", lambda: op("exp", _neg_hole()), lambda f: int(-LN_HALF_SUBNORMAL[f])),
        ("exp(n) / 16", lambda: op("div", op("exp", HOLE), 16), lambda f: int(LN_MAX[f])),
    ),
    "softmax": (
        ("naive softmax of [n, n - 1], index 0", lambda: softmax_naive([HOLE, op("sub", HOLE, 1)], 0),
         lambda f: int(LN_MAX[f])),
        ("naive softmax of [-n, -n - 1], index 1",
         lambda: softmax_naive([_neg_hole(), op("sub", _neg_hole(), 1)], 1),
         lambda f: int(-LN_HALF_SUBNORMAL[f])),
        ("naive softmax of [0, n], index 0", lambda: softmax_naive([0, HOLE], 0), lambda f: int(LN_MAX[f])),
    ),
    "logsumexp": (
        ("naive log-sum-exp of [n, n]", lambda: logsumexp_naive([HOLE, HOLE]), lambda f: int(LN_MAX[f])),
        ("naive log-sum-exp of [-n, -n]", lambda: logsumexp_naive([_neg_hole(), _neg_hole()]),
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


_WIDTH = {2: (6, 12), 3: (8, 16), 4: (6, 10), 5: (4, 8)}


def _window(draw: Draw, fmt: str, edge: int, level: int, below: bool) -> dict:
    """Consecutive integers around the edge, or entirely below it (then no n is non-finite)."""
    width = draw.integer(*_WIDTH[level])
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


def _robust_window(template, window):
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


def _binding_draw(draw: Draw, family: str, kinds: list[int]) -> tuple[str, int, list[int]]:
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


def _search_sampler(family):
    def sample(draw: Draw, level: int) -> dict:
        kinds = list(range(len(TEMPLATES[family])))
        templates, windows = [], []
        if level == 5:  # a random non-empty proper subset of the formats has every window below its edge
            chosen = draw.sample(kinds, 2)
            formats = [f for f in FORMATS if any(f == g for k in chosen for g, _, _ in _posable(family, k))]
            if len(formats) < 2:
                raise Reject("the two templates are posable in one format only")
            subsets = [mask for mask in range(1, 2 ** len(formats) - 1)]
            mask = draw.choice(subsets)
            clean = {f for i, f in enumerate(formats) if mask >> i & 1}
            for k in chosen:
                for fmt, template, edge in _posable(family, k):
                    templates.append(template)
                    windows.append(_window(draw, fmt, edge, level, below=fmt in clean))
        elif level == 4:  # 2-3 templates in one format on one shared window
            fmt, binding, others = _binding_draw(draw, family, kinds)
            made = [_template(family, k, fmt) for k in draw.shuffled([binding, *others])]
            edge = _template(family, binding, fmt)[1]
            window = _window(draw, fmt, edge, level, below=False)
            if draw.chance(1, 10):  # wholly past the binding edge: no n keeps every template finite
                low = edge + draw.integer(3, 6)
                window = {"format": fmt, "low": low, "high": low + window["high"] - window["low"]}
            templates = [template for template, _ in made]
            windows = [dict(window) for _ in made]
        else:
            count = draw.integer(2, 3) if level == 2 else draw.integer(1, 2)
            for _ in range(count):
                fmt, template, edge = draw.choice(_posable(family, draw.choice(kinds)))
                templates.append(template)
                windows.append(_window(draw, fmt, edge, level, below=level >= 3 and draw.chance(1, 4)))
        for template, window in zip(templates, windows, strict=True):
            if not _robust_window(template, window):
                raise Reject("a case of a window is not robust")
        question = {2: "first", 3: "count", 4: "last_all_finite", 5: "cheapest"}[level]
        return {"templates": templates, "windows": windows, "question": question}

    return sample


_QUESTIONS = {
    "first": "For each template and its window (same position in the two lists), give the smallest n of "
             "the window whose outcome is non-finite, or None if no n of the window has a non-finite "
             "outcome.",
    "count": "For each template and its window (same position in the two lists), give how many n of the "
             "window have a non-finite outcome, and the smallest such n (None if there is none).",
    "last_all_finite": "All the templates are posed in the same format on the same window. Give the largest "
                       "n of the window at which no template's outcome is non-finite (None if there is no "
                       "such n), and how many n of the window have no template's outcome non-finite.",
    "cheapest": "Formats cost in the order float16 < float32 < float64. Each template is posed in several "
                "formats, each time on its own window (the list below). For every format, count the pairs "
                "(template, n) of its windows whose outcome is non-finite, say whether every template is "
                "finite on every n of its windows in that format, and whether it is the cheapest format "
                "for which that holds (True for at most one format; False for all when no format is).",
}
_SHAPES = {
    "first": '{"rows": [{"format": str, "first_non_finite": int or None}, ...]}  '
             "(one row per window, in order)",
    "count": '{"rows": [{"format": str, "first_non_finite": int or None, "non_finite": int}, ...]}  '
             "(one row per window, in order)",
    "last_all_finite": '{"rows": [{"format": str, "last_all_finite": int or None, "all_finite": int}]}  '
                       "(a single row)",
    "cheapest": '{"rows": [{"format": str, "non_finite": int, "finite_everywhere": bool, '
                '"cheapest": bool}, ...]}  '
                "(one row per format, in the order the formats first appear in `windows`)",
}


def _search_prompt(inputs):
    listing = "\n".join(f"  {i}: {show_expr(t)} in {w['format']}, n from {w['low']} to {w['high']}"
                        for i, (t, w) in enumerate(zip(inputs["templates"], inputs["windows"], strict=True)))
    return prompt(
        _QUESTIONS[inputs["question"]] + " The templates and windows:\n" + listing,
        {"templates": ("list of expression trees {'op': name, 'args': [...]} with the leaf {'op': 'n', "
                       "'args': []} for n", ...),
         "windows": ("list of dicts {'format', 'low', 'high'}, one per template", ...),
         "question": ("the question asked, as a word", inputs["question"])},
        _SHAPES[inputs["question"]],
        "n is a plain integer; counts are integers; formats are the strings 'float16', 'float32', 'float64'",
    )


def _build_search(tags):
    def build(task_id, inputs):
        cases = [{"name": f"t{i}_n{n}", "format": w["format"], "expr": substituted(t, n)}
                 for i, (t, w) in enumerate(zip(inputs["templates"], inputs["windows"], strict=True))
                 for n in range(w["low"], w["high"] + 1)]
        clean = [all(robust_outcome(substituted(t, n), w["format"]) == "finite"
                     for n in range(w["low"], w["high"] + 1))
                 for t, w in zip(inputs["templates"], inputs["windows"], strict=True)]
        formats = {w["format"] for w in inputs["windows"]}
        every = [all(robust_outcome(substituted(t, n), inputs["windows"][0]["format"]) == "finite"
                     for t in inputs["templates"]) for n in range(inputs["windows"][0]["low"],
                                                                  inputs["windows"][0]["high"] + 1)]
        zero = (any(clean) if inputs["question"] == "count" else
                not any(every) if inputs["question"] == "last_all_finite" else
                inputs["question"] == "cheapest" and any(all(c for c, w in zip(clean, inputs["windows"],
                                                                                strict=True)
                                                             if w["format"] == f) for f in formats))
        zero_reason = (("no n of the window keeps every template finite, so that count is exactly 0"
                        if inputs["question"] == "last_all_finite" else
                        "a window lies wholly on the finite side of its edge, so it has no non-finite n and "
                        "its count is exactly 0") if zero else None)
        return TaskDef(task_id, "numerical", inputs, float_search_rows, _search_prompt,
                       api(SEARCH_CONVENTIONS), POLICY, tags=(*tags, "search", inputs["question"]),
                       zero_reason=zero_reason, meta={"float_search": cases})

    return build


# ---------------------------------------------------------------------------- builders

_ARGUMENTS: dict[str, dict[str, str]] = {}
"""The hand-written arguments of the canonical cases, by task id."""


def _builder(tags):
    def build(task_id, inputs):
        cases = inputs["cases"]
        argument = _ARGUMENTS.get(task_id) or {c["name"]: _argument(c) for c in cases}
        return TaskDef(task_id, "numerical", inputs, float_outcome_rows, _prompt,
                       api(CONVENTIONS, exact=False), POLICY,
                       tags=tags, meta={"float_cases": cases, "argument": argument})

    return build


def _numerical_family(name, tags, sample_cases, level_one):
    search = _build_search(tags)
    sample_search = _search_sampler(name)

    def sample(draw: Draw, level: int) -> dict:
        return sample_cases(draw, level) if level == 1 else sample_search(draw, level)

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
    return dl_family(name, _builder(tags), sample, levels, upper={2: search, 3: search, 4: search, 5: search},
                     varying_at={1: ("rows[].outcome",), 5: ("rows[].finite_everywhere", "rows[].cheapest")},
                     branches=(Branch("a window without a non-finite n", _has_none_row, F(1, 10), (3,)),
                               Branch("no n keeps every template finite", _has_none_row, F(1, 40), (4,)),
                               Branch("the cheapest format posed is not finite everywhere", _cheapest_fails,
                                      F(1, 5), (5,)),
                               Branch("a cheaper format is finite everywhere where a dearer one is not",
                                      _not_monotone, F(1, 10), (5,))))


def _has_none_row(task):
    return any(row.get("first_non_finite", 0) is None or row.get("last_all_finite", 0) is None
               for row in task.expected["rows"])


def _cheapest_fails(task):
    return task.level == 5 and not task.expected["rows"][0]["finite_everywhere"]


def _not_monotone(task):
    """A format finite everywhere before (cheaper than) one that is not: "the dearer the safer" fails."""
    flags = [row["finite_everywhere"] for row in task.expected["rows"]] if task.level == 5 else []
    return any(a and not b for a, b in zip(flags, flags[1:], strict=False))


EXP_RANGE = _numerical_family("exp_range", ("overflow", "exp"), sample_exp_range,
                              "4+2*level exp cases within 3 of the overflow/underflow edges")
SOFTMAX = _numerical_family("softmax", ("softmax", "overflow"), sample_softmax,
                            "naive/shifted softmax cases of logits near the edges")
LOGSUMEXP = _numerical_family("logsumexp", ("logsumexp", "overflow", "log0"), sample_logsumexp,
                              "naive/shifted log-sum-exp cases of logits near the edges")
UNDERFLOW = _numerical_family("underflow", ("underflow", "subnormal"), sample_underflow,
                              "powers q**n near the underflow edge, and log-space twins")
CANCELLATION = _numerical_family("cancellation", ("cancellation",), sample_cancellation,
                                 "(1 + 2**-k) - 1, (1 + 10**-k) - 1, (2**p + c) - 2**p, one-pass variance")
FORMAT_LIMITS = _numerical_family("format_limits", ("float16", "overflow", "limits"), sample_format_limits,
                                  "max + half ulp, squares near sqrt(max), 1/2**-k, mean squares")

FAMILIES = (EXP_RANGE, SOFTMAX, LOGSUMEXP, UNDERFLOW, CANCELLATION, FORMAT_LIMITS)


def _canonical(task_id, family, cases_with_arguments):
    _ARGUMENTS[task_id] = {c["name"]: why for c, why in cases_with_arguments}
    return family.task(task_id, {"cases": [c for c, _ in cases_with_arguments]})


TASKS = (
    _canonical("dl-030", EXP_RANGE, [
        _case("exp88_f32", "float32", op("exp", 88), "e**88 = 1.65e38 < float32 max 3.40e38"),
        _case("exp89_f32", "float32", op("exp", 89), "e**89 = 4.49e38 > float32 max 3.40e38: overflow"),
        _case("exp709_f64", "float64", op("exp", 709), "e**709 = 8.2e307 < float64 max 1.80e308"),
        _case("exp710_f64", "float64", op("exp", 710), "e**710 = 2.2e308 > float64 max 1.80e308: overflow"),
        _case("exp11_f16", "float16", op("exp", 11), "e**11 = 59874 < float16 max 65504"),
        _case("exp12_f16", "float16", op("exp", 12), "e**12 = 162755 > float16 max 65504: overflow"),
        _case("exp_neg100_f32", "float32", op("exp", -100),
              "e**-100 = 3.7e-44 is below the float32 normal range but above the smallest subnormal 1.4e-45"),
        _case("exp_neg110_f32", "float32", op("exp", -110),
              "e**-110 = 1.7e-48 < half the smallest float32 subnormal (7.0e-46): underflows to 0"),
    ]),
    _canonical("dl-031", SOFTMAX, [
        _case("naive_p0_big", "float64", softmax_naive([1000, 999], 0),
              "exp(1000) and exp(999) overflow to inf, so p0 = inf / (inf + inf) = inf / inf = nan"),
        _case("shifted_p0_big", "float64", softmax_shifted([1000, 999], 0),
              "after subtracting the max the exponents are 0 and -1: p0 = 1 / (1 + e**-1), finite"),
        _case("naive_p0_very_negative", "float64", softmax_naive([-1000, -1001], 0),
              "exp(-1000) and exp(-1001) underflow to 0, so p0 = 0 / 0 = nan"),
        _case("shifted_p0_very_negative", "float64", softmax_shifted([-1000, -1001], 0),
              "shifted exponents 0 and -1 again: p0 = 1 / (1 + e**-1), finite"),
        _case("naive_p0_f16", "float16", softmax_naive([10, 12], 0),
              "exp(10) = 22026 fits float16 but exp(12) = 162755 overflows: p0 = 22026 / inf = 0"),
        _case("naive_p1_f16", "float16", softmax_naive([10, 12], 1),
              "p1 = exp(12) / (exp(10) + exp(12)) = inf / inf = nan"),
        _case("shifted_p0_f16", "float16", softmax_shifted([10, 12], 0),
              "shifted exponents -2 and 0: p0 = e**-2 / (e**-2 + 1) = 0.119, finite"),
    ]),
    _canonical("dl-032", LOGSUMEXP, [
        _case("naive_lse_big", "float64", logsumexp_naive([1000, 1000]),
              "exp(1000) overflows, inf + inf = inf, log(inf) = inf, though the true value is 1000.69"),
        _case("shifted_lse_big", "float64", logsumexp_shifted([1000, 1000]),
              "1000 + log(e**0 + e**0) = 1000 + log 2, finite"),
        _case("naive_lse_very_negative", "float64", logsumexp_naive([-1000, -1000]),
              "exp(-1000) underflows to 0, so log(0 + 0) = log(0) = -inf (true value -999.31)"),
        _case("shifted_lse_very_negative", "float64", logsumexp_shifted([-1000, -1000]),
              "-1000 + log 2, finite"),
        _case("naive_lse_f32_ok", "float32", logsumexp_naive([80, 80]),
              "exp(80) = 5.5e34 and the sum 1.1e35 are below float32 max 3.4e38: log gives 80.69, finite"),
        _case("naive_lse_f32_overflow", "float32", logsumexp_naive([89, 0]),
              "exp(89) = 4.5e38 overflows float32, log(inf) = inf"),
    ]),
    _canonical("dl-033", UNDERFLOW, [
        _case("half_pow149_f32", "float32", op("powi", F(1, 2), 149),
              "2**-149 is exactly the smallest float32 subnormal: representable, finite"),
        _case("half_pow150_f32", "float32", op("powi", F(1, 2), 150),
              "2**-150 is exactly half the smallest subnormal: a tie, rounded to the even neighbour 0"),
        _case("half_pow24_f16", "float16", op("powi", F(1, 2), 24),
              "2**-24 is the smallest float16 subnormal"),
        _case("half_pow25_f16", "float16", op("powi", F(1, 2), 25),
              "2**-25 is a tie between 0 and 2**-24: ties-to-even gives 0"),
        _case("likelihood_100_f64", "float64", op("powi", F(1, 1000), 100),
              "1e-300 is above the float64 normal minimum 2.2e-308: finite"),
        _case("likelihood_110_f64", "float64", op("powi", F(1, 1000), 110),
              "1e-330 is below half the smallest float64 subnormal (2.5e-324): underflows to 0"),
        _case("log_likelihood_110_f64", "float64", op("mul", 110, op("log", F(1, 1000))),
              "in log space the same likelihood is 110 * log(1/1000) = -759.8, finite"),
    ]),
    _canonical("dl-034", CANCELLATION, [
        _case("one_plus_2m24_f32", "float32", op("sub", op("add", 1, F(1, 2**24)), 1),
              "1 + 2**-24 is a tie between 1 and 1 + 2**-23; ties-to-even gives 1, and 1 - 1 = 0"),
        _case("one_plus_2m23_f32", "float32", op("sub", op("add", 1, F(1, 2**23)), 1),
              "1 + 2**-23 is the next float32 after 1, so the difference is 2**-23, finite"),
        _case("one_plus_1e-8_f64", "float64", op("sub", op("add", 1, F(1, 10**8)), 1),
              "float64 has 52 fraction bits (ulp 2.2e-16 at 1): 1 + 1e-8 keeps the increment, finite"),
        _case("one_plus_1e-8_f32", "float32", op("sub", op("add", 1, F(1, 10**8)), 1),
              "1e-8 is below half the float32 ulp at 1 (6e-8): 1 + 1e-8 rounds to 1, difference 0"),
        _case("one_plus_1e-3_f16", "float16", op("sub", op("add", 1, F(1, 1000)), 1),
              "the float16 ulp at 1 is 2**-10 = 9.8e-4: 1 + 0.001 rounds to 1 + 2**-10, difference finite"),
        _case("one_plus_1e-4_f16", "float16", op("sub", op("add", 1, F(1, 10**4)), 1),
              "1e-4 is below half the float16 ulp at 1 (4.9e-4): rounds to 1, difference 0"),
        _case("variance_one_pass_f32", "float32",
              op("sub", op("div", op("add", op("mul", 4097, 4097), op("mul", 4099, 4099)), 2),
                 op("mul", op("div", op("add", 4097, 4099), 2), op("div", op("add", 4097, 4099), 2))),
              "E[x^2] - E[x]^2 for x = (4097, 4099): the true variance is 1, but 4097**2 = 16785409 and "
              "4099**2 = 16801801 exceed 2**24 and are odd, so float32 rounds them to even neighbours; "
              "their mean 16793604 is exact, 4098**2 = 16793604 is exact, and the difference is 0"),
    ]),
    _canonical("dl-035", FORMAT_LIMITS, [
        _case("max_plus_15_f16", "float16", op("add", 65504, 15),
              "65519 is below the rounding boundary 65520 between 65504 and 2**16: rounds to 65504"),
        _case("max_plus_16_f16", "float16", op("add", 65504, 16),
              "65520 is exactly halfway between 65504 (odd significand) and 65536: ties-to-even rounds up to "
              "2**16, which overflows to inf"),
        _case("square_255_f16", "float16", op("mul", 255, 255), "255**2 = 65025 <= 65504: finite"),
        _case("square_256_f16", "float16", op("mul", 256, 256), "256**2 = 65536 > 65504: inf"),
        _case("reciprocal_min_subnormal_f16", "float16", op("div", 1, F(1, 2**24)),
              "1 / 2**-24 = 2**24 = 16777216 > 65504: inf"),
        _case("mean_square_300_f16", "float16", _MEAN_SQUARE_300,
              "300**2 = 90000 overflows before the mean is taken: inf / 2 = inf (a LayerNorm variance in "
              "float16 overflows for activations of only 300)"),
        _case("mean_square_300_f32", "float32", _MEAN_SQUARE_300,
              "90000 is tiny for float32: finite"),
    ]),
)
