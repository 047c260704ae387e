"""An independent IEEE 754 evaluator for the numerical tasks' expression trees, on numpy scalars.

The reference programs round with struct and emulate IEEE exceptions by hand (the ``ieee_*``
helpers below, written once for every numerical reference and for the robustness test); ``outcome``
lets numpy's float16/float32/float64 scalars do the arithmetic, so verify's agreement between the
two is evidence, not a tautology. (numpy ships with the `datasets` dependency.)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from exactgrade.task import uses


# The reference programs' IEEE arithmetic, written once: each helper is self-contained (a reference
# that calls one names it with ``uses``, and its program defines it), so it runs in the sandbox.
def ieee_rounder(fmt):
    """A function rounding a Python float to fmt (struct's float16/float32; float64 as is), with
    IEEE overflow to +-inf where struct refuses."""
    import math
    import struct

    code = {"float16": "e", "float32": "f", "float64": None}[fmt]

    def rnd(x):
        if code is None or math.isnan(x) or math.isinf(x):
            return x
        try:
            return struct.unpack(code, struct.pack(code, x))[0]
        except OverflowError:  # struct refuses what IEEE rounds to infinity
            return math.copysign(math.inf, x)

    return rnd


def ieee_exp(x):
    """exp with IEEE overflow to inf (math.exp raises instead)."""
    import math

    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def ieee_log(x):
    """log with IEEE semantics: log(0) = -inf, log of a negative number or nan is nan."""
    import math

    if math.isnan(x) or x < 0:
        return math.nan
    return -math.inf if x == 0 else math.log(x)


def ieee_div(x, y):
    """x / y with IEEE semantics: x / 0 = +-inf for x != 0, 0 / 0 = nan."""
    import math

    if y == 0:
        if x == 0 or math.isnan(x):
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def ieee_max(*xs):
    """max that propagates nan."""
    import math

    return math.nan if any(math.isnan(x) for x in xs) else max(xs)


@uses(ieee_exp, ieee_log, ieee_div, ieee_max)
def ieee_evaluate(node, rnd, n=None):
    """An expression tree's value, every literal and every operation's result rounded by ``rnd``;
    the leaf {'op': 'n'} is the integer ``n`` (powi(x, n) then takes n copies)."""
    from fractions import Fraction

    if not isinstance(node, dict):
        return rnd(float(Fraction(node)))
    op, args = node["op"], node["args"]
    if op == "n":
        return rnd(float(n))
    if op == "powi":
        x = ieee_evaluate(args[0], rnd, n)
        count = n if isinstance(args[1], dict) else args[1]
        value = x
        for _ in range(count - 1):
            value = rnd(value * x)
        return value
    values = [ieee_evaluate(a, rnd, n) for a in args]
    if op == "sum":
        total = values[0]
        for v in values[1:]:
            total = rnd(total + v)
        return total
    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": ieee_div,
           "exp": ieee_exp, "log": ieee_log, "neg": lambda a: -a, "max": ieee_max}
    return rnd(ops[op](*values))


def ieee_category(x):
    """'nan', 'inf', 'zero' or 'finite': the category of a float."""
    import math

    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf"
    return "zero" if x == 0 else "finite"


def outcome(expr: Any, fmt: str) -> str:
    """'nan', 'inf', 'zero' or 'finite': the category of expr evaluated in fmt."""
    import numpy as np

    dtype = {"float16": np.float16, "float32": np.float32, "float64": np.float64}[fmt]
    binary = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    unary = {"exp": np.exp, "log": np.log, "neg": np.negative}

    def evaluate(node: Any) -> Any:
        if not isinstance(node, dict):
            return dtype(float(Fraction(node)))
        name, args = node["op"], node["args"]
        if name == "powi":
            x = evaluate(args[0])
            value = x
            for _ in range(args[1] - 1):
                value = dtype(value * x)
            return value
        values = [evaluate(a) for a in args]
        if name == "sum":
            total = values[0]
            for v in values[1:]:
                total = dtype(total + v)
            return total
        if name == "max":
            return dtype(np.max(np.array(values, dtype=dtype)))
        if name in binary:
            return dtype(binary[name](values[0], values[1], dtype=dtype))
        return dtype(unary[name](values[0], dtype=dtype))

    with np.errstate(all="ignore"):
        value = evaluate(expr)
    if np.isnan(value):
        return "nan"
    if np.isinf(value):
        return "inf"
    return "zero" if value == 0 else "finite"


# ---------------------------------------------------------------------------- robustness

PRECISION = {"float16": 11, "float32": 24, "float64": 53}
TRANSCENDENTAL_ULPS = 8
"""How far (in units of the format's precision) an exp or log may be off in a correct
implementation: numpy's float16/float32 kernels and libm are within 1-4; 8 leaves room."""


class Unstable(Exception):
    """The category could differ between correct IEEE implementations."""


def stable_outcome(expr: Any, fmt: str) -> str | None:
    """The category of expr in fmt if every correct implementation agrees on it, else None.

    Interval evaluation with the reference's semantics: basic operations are correctly rounded
    everywhere (numpy's float16 goes through float32, which is innocuous: 24 >= 2 * 11 + 2), so
    only a literal that float() rounds before the format does (double rounding) and each exp or
    log (within TRANSCENDENTAL_ULPS of the true value) widen the interval; the category is
    stable when the final interval holds one category. An instance near a threshold (overflow
    by a hair, underflow at half the smallest subnormal, a cancellation a few ulps wide) fails.
    """
    import math

    rnd, exp = ieee_rounder(fmt), ieee_exp
    delta = TRANSCENDENTAL_ULPS * 2.0 ** -PRECISION[fmt]
    nan = "nan"

    def degenerate(*values: Any) -> bool:
        return all(v[0] == v[1] for v in values)

    def add(a: Any, b: Any) -> Any:
        if a == nan or b == nan:
            return nan
        if (a[1] == math.inf and b[0] == -math.inf) or (a[0] == -math.inf and b[1] == math.inf):
            if degenerate(a, b):
                return nan
            raise Unstable
        return rnd(a[0] + b[0]), rnd(a[1] + b[1])

    def neg(a: Any) -> Any:
        return nan if a == nan else (-a[1], -a[0])

    def has_zero(a: Any) -> bool:
        return a[0] <= 0 <= a[1]

    def has_inf(a: Any) -> bool:
        return math.isinf(a[0]) or math.isinf(a[1])

    def mul(a: Any, b: Any) -> Any:
        if a == nan or b == nan:
            return nan
        if a[0] > 0 and b[0] > 0:  # rounding is monotonic: the corners' extremes, without the rest
            return rnd(a[0] * b[0]), rnd(a[1] * b[1])
        if (has_zero(a) and has_inf(b)) or (has_inf(a) and has_zero(b)):
            if degenerate(a, b):
                return nan
            raise Unstable
        corners = [x * y for x in a for y in b]
        return rnd(min(corners)), rnd(max(corners))

    def div(a: Any, b: Any) -> Any:
        if a == nan or b == nan:
            return nan
        if has_zero(b):
            if not degenerate(a, b):
                raise Unstable
            x, y = a[0], b[0]
            if x == 0 or math.isnan(x):
                return nan
            value = math.copysign(math.inf, x) * math.copysign(1.0, y)
            return value, value
        if has_inf(a) and has_inf(b):
            if degenerate(a, b):
                return nan
            raise Unstable
        corners = [x / y for x in a for y in b]
        return rnd(min(corners)), rnd(max(corners))

    def log_bound(x: float, side: int) -> float:
        if x == 0:
            return -math.inf
        if math.isinf(x):
            return math.inf
        value = math.log(x)
        return value + side * delta * abs(value)

    def evaluate(node: Any) -> Any:
        if not isinstance(node, dict):
            q = Fraction(node)
            d = float(q)
            if Fraction(d) == q:
                return rnd(d), rnd(d)
            return rnd(math.nextafter(d, -math.inf)), rnd(math.nextafter(d, math.inf))
        name, args = node["op"], node["args"]
        if name == "powi":
            x = evaluate(args[0])
            value = x
            for _ in range(args[1] - 1):
                value = mul(value, x)
            return value
        values = [evaluate(a) for a in args]
        if name in ("sum", "add"):
            total = values[0]
            for v in values[1:]:
                total = add(total, v)
            return total
        if name == "sub":
            return add(values[0], neg(values[1]))
        if name == "mul":
            return mul(*values)
        if name == "div":
            return div(*values)
        if name == "neg":
            return neg(values[0])
        if name == "max":
            if any(v == nan for v in values):
                return nan
            return max(v[0] for v in values), max(v[1] for v in values)
        (a,) = values
        if a == nan:
            return nan
        if name == "exp":
            return rnd(exp(a[0] - delta)), rnd(exp(a[1] + delta))
        if name == "log":
            if a[1] < 0:
                return nan
            if a[0] < 0:
                raise Unstable
            return rnd(log_bound(a[0], -1)), rnd(log_bound(a[1], 1))
        raise ValueError(f"unknown operation {name!r}")

    try:
        value = evaluate(expr)
    except Unstable:
        return None
    if value == nan:
        return "nan"
    lo, hi = value
    if lo == hi:
        return "inf" if math.isinf(lo) else "zero" if lo == 0 else "finite"
    if has_zero(value) or has_inf(value):
        return None
    return "finite"


def real_value(expr: Any) -> str:
    """The exact real value of expr (no rounding), to 4 digits, for an argument's text."""
    import mpmath

    operations = {"sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
                  "neg": lambda a: -a, "max": lambda *xs: max(xs), "exp": mpmath.exp, "log": mpmath.log}
    with mpmath.workdps(40):
        def evaluate(node: Any) -> Any:
            if not isinstance(node, dict):
                q = Fraction(node)
                return mpmath.mpf(q.numerator) / q.denominator
            name, args = node["op"], node["args"]
            if name == "powi":
                return evaluate(args[0]) ** args[1]
            values = [evaluate(a) for a in args]
            if name in ("sum", "add"):
                return mpmath.fsum(values)
            return operations[name](*values)

        try:
            return mpmath.nstr(evaluate(expr), 4)
        except (ZeroDivisionError, ValueError):
            return "undefined"
