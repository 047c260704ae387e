"""Certain decisions about exact real numbers: equality and tolerance tests.

Exact values are int, Fraction and sympy expressions built from Integer/Rational, pi, E with
Add, Mul, Pow, log, exp, the trigonometric and hyperbolic functions and their reciprocals and
inverses (wire.FUNCTIONS), and, for evaluation at a point (exactgrade._symbolic), symbols bound
to exact rationals. Rationals are decided with Fraction arithmetic. Anything irrational is
evaluated with interval arithmetic (mpmath's iv context, outward rounding) at rising precision
until the interval decides the question; an interval is a proof, a rounded float is not. Only an
equality whose difference is tiny relative to the values (at 256 bits and above) goes to sympy,
in a worker process of its own under a hard time limit (exactgrade._timeout), because sympy's
simplification can run for ever.

Every question has a deadline (time.monotonic()), shared by all the work of one comparison: it is
checked at every node evaluated and the prover gets only what is left, so a hostile expression
overruns it by at most one interval operation (milliseconds at the wire format's size limits).

Untrusted sympy trees (decoded, unevaluated) are only walked here, never handed to sympy
methods in this process: sympy's automatic evaluation is what can run for ever.

Everything here raises Undecidable (with a one-line reason) rather than guessing.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from fractions import Fraction
from typing import Any

# Working precisions in bits. 64 settles nearly every tolerance test; the rest are for values
# that agree to many digits (genuinely equal values never separate, and go to the worker).
PRECISIONS = (64, 256, 1024, 4096)

# exp(x) needs about log2|x| extra working bits and |x| bits of exponent; refuse absurd sizes
# (exp(exp(exp(10))) and beyond) rather than run out of memory.
_MAX_EXP_ARGUMENT = 1 << 24


class Undecidable(Exception):
    """A question about exact values that this module could not settle with certainty."""


class OutOfTime(Undecidable):
    """The deadline passed before the question was settled."""


class Undefined(Undecidable):
    """The value is not a real number (a logarithm of a negative number, a division by zero, ...)."""


class _NeedMorePrecision(Exception):
    """An interval straddles a point where an operation is undefined; retry at higher precision."""


_local = threading.local()


def _context(prec: int, deadline: float = math.inf, point: dict[str, Fraction] | None = None) -> Any:
    """A per-thread mpmath interval context (the global mpmath.iv is shared mutable state).

    The deadline of the evaluation about to run is kept with it (_sympy_interval checks it at
    every node), and so is the point: the exact value of each symbol by name (none: no symbol
    has a value).
    """
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        from mpmath.ctx_iv import MPIntervalContext

        ctx = _local.ctx = MPIntervalContext()
    ctx.prec = prec
    _local.deadline = deadline
    _local.point = point or {}
    return ctx


def _sympy() -> Any:
    """sympy, imported only when an expression is already present (it costs ~0.3 s to import)."""
    import sympy

    return sympy


def is_sympy(x: object) -> bool:
    """True for a sympy Expr, without importing sympy when nobody has."""
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(x, sympy.Expr)


def as_fraction(x: object) -> Fraction | None:
    """x as a Fraction when x is an int, Fraction, finite float or sympy Rational; else None."""
    t = type(x)
    if t is int or t is Fraction:
        return Fraction(x)  # type: ignore[arg-type]
    if t is float:
        return Fraction(x) if x - x == 0 else None  # type: ignore[operator]
    if is_sympy(x) and x.is_Rational:  # type: ignore[attr-defined]
        return Fraction(int(x.p), int(x.q))  # type: ignore[attr-defined]
    return None


def _interval(x: object, ctx: Any) -> Any:
    """An interval enclosing the exact value of x at ctx's precision."""
    q = as_fraction(x)
    if q is not None:
        return _rational_interval(q.numerator, q.denominator, ctx)
    if not is_sympy(x):
        raise Undecidable(f"cannot evaluate a value of type {type(x).__name__}")
    return _sympy_interval(x, ctx)


def _sympy_interval(expr: Any, ctx: Any) -> Any:
    """The interval of a sympy node, reported to the thread's measure (if one is set: see
    measuring) as it is left."""
    measure = getattr(_local, "measure", None)
    if measure is None:
        return _node_interval(expr, ctx)
    mark = measure.enter()
    value = _node_interval(expr, ctx)
    measure.leave(expr, value, mark)
    return value


class measuring:  # noqa: N801 (a context manager, named for the with statement it reads as)
    """`with measuring(m):` reports every sympy node this thread evaluates to m: m.enter() as a node
    is entered (its result is passed back to m.leave) and m.leave(expr, interval, mark) as it is left,
    so m sees the value of every subexpression (exactgrade._symbolic sizes its agreement with it)."""

    def __init__(self, measure: Any) -> None:
        self.measure = measure

    def __enter__(self) -> Any:
        _local.measure = self.measure
        return self.measure

    def __exit__(self, *exc: object) -> None:
        _local.measure = None


def _node_interval(expr: Any, ctx: Any) -> Any:
    if time.monotonic() > _local.deadline:
        raise OutOfTime(f"stopped at {ctx.prec} bits")
    sympy = _sympy()
    if expr.is_Rational:
        return _rational_interval(int(expr.p), int(expr.q), ctx)
    if expr is sympy.pi:
        return ctx.pi
    if expr is sympy.E:
        return ctx.e
    if expr.is_Symbol:
        value = _local.point.get(expr.name) if type(expr) is sympy.Symbol else None
        if value is None:
            raise Undecidable(f"the symbol {str(expr.name)[:40]} has no value here (a value with free "
                              f"symbols is compared as a function, under Exact() only)")
        return _interval(value, ctx)
    if expr.is_Add:
        first, *rest = expr.args
        total = _sympy_interval(first, ctx)
        for arg in rest:
            total = total + _sympy_interval(arg, ctx)
        return total
    if expr.is_Mul:
        first, *rest = expr.args
        product = _sympy_interval(first, ctx)
        for arg in rest:
            product = product * _sympy_interval(arg, ctx)
        return product
    if expr.is_Pow:
        return _power(expr.base, expr.exp, ctx)
    function = _FUNCTIONS.get(type(expr).__name__) if len(expr.args) == 1 else None
    if function is not None and isinstance(expr, sympy.Function):
        return function(_sympy_interval(expr.args[0], ctx), ctx)
    raise Undecidable(f"unsupported sympy node {type(expr).__name__} (only rationals, pi, E, symbols, +, *, "
                      f"**, exp, log and the trigonometric and hyperbolic functions and their inverses "
                      f"are evaluated; non-analytic functions such as Abs, sign, floor and Piecewise "
                      f"are refused)")


MAX_POINT_EXPONENT = 1 << 24  # an exponent's exact value at a point, beyond which a power is refused


def _power(base: Any, exponent: Any, ctx: Any) -> Any:
    b = _sympy_interval(base, ctx)
    q = _exact_value(exponent, 0) if not exponent.is_Rational else as_fraction(exponent)
    if q is not None and max(abs(q.numerator), q.denominator) > MAX_POINT_EXPONENT:
        raise Undecidable(f"an exponent is larger than {MAX_POINT_EXPONENT} here")
    if q is not None and q.denominator == 1:
        n = q.numerator
        if n < 0:
            return _reciprocal(b ** (-n), ctx)
        return b ** n
    # A non-integer power is real only for a positive base (sympy's principal root of a negative
    # number is complex).
    low, high = _signs(b)
    if high < 0:
        raise Undefined("a non-integer power of a negative number is not a real number")
    if low <= 0:
        raise _NeedMorePrecision
    if q == Fraction(1, 2):
        return ctx.sqrt(b)
    e = _interval(q, ctx) if q is not None else _sympy_interval(exponent, ctx)
    return _exp(e * ctx.log(b), ctx)


def _exact_value(expr: Any, depth: int) -> Fraction | None:
    """The exact rational value of expr at the current point, if it is a rational function of the
    symbols with rational coefficients and small integer powers (else None). Exponents only."""
    if depth > 8:
        return None
    if expr.is_Rational:
        return as_fraction(expr)
    if expr.is_Symbol:
        return _local.point.get(expr.name)
    if expr.is_Add or expr.is_Mul:
        values = [_exact_value(arg, depth + 1) for arg in expr.args[:16]]
        if len(expr.args) > 16 or any(v is None for v in values):
            return None
        return sum(values, Fraction(0)) if expr.is_Add else math.prod(values, start=Fraction(1))
    return None


def _rational_interval(p: int, q: int, ctx: Any) -> Any:
    """The interval of p/q at ctx's precision, rounded outward (exact when p/q is a float there)."""
    from mpmath.libmp import from_rational, round_ceiling, round_floor

    prec = ctx.prec
    return ctx.make_mpf((from_rational(p, q, prec, round_floor), from_rational(p, q, prec, round_ceiling)))


def _signs(x: Any) -> tuple[int, int]:
    """The signs (-1, 0, 1) of an interval's two ends, read from its mpf tuples (no conversion)."""
    from mpmath.libmp import mpf_sign

    low, high = x._mpi_
    return mpf_sign(low), mpf_sign(high)


def _larger_than(x: Any, bound: int) -> bool:
    """Whether either end of x exceeds bound in magnitude."""
    from mpmath.libmp import from_int, mpf_abs, mpf_cmp

    limit = from_int(bound)
    return any(mpf_cmp(mpf_abs(end), limit) > 0 for end in x._mpi_)


def _exp(x: Any, ctx: Any) -> Any:
    if _larger_than(x, _MAX_EXP_ARGUMENT):
        raise Undecidable("an exponential is too large to evaluate")
    return ctx.exp(x)


def _log(x: Any, ctx: Any) -> Any:
    low, high = _signs(x)
    if high <= 0:
        raise Undefined("the logarithm of a non-positive number is not a real number")
    if low <= 0:
        raise _NeedMorePrecision
    return ctx.log(x)


# Trigonometric arguments beyond this are refused: mpmath reduces them modulo pi with as many
# extra bits as the argument has, so sin(10**10**6) would take minutes.
_MAX_TRIG_ARGUMENT = 1 << 256


def _reciprocal(x: Any, ctx: Any) -> Any:
    low, high = _signs(x)
    if low == 0 and high == 0:
        raise Undefined("division by zero")
    if low <= 0 <= high:
        raise _NeedMorePrecision
    return 1 / x


def _cos_sin(x: Any, ctx: Any) -> tuple[Any, Any]:
    from mpmath.libmp.libmpi import mpi_cos_sin

    if _larger_than(x, _MAX_TRIG_ARGUMENT):
        raise Undecidable("the argument of a trigonometric function is too large to evaluate")
    c, s = mpi_cos_sin(x._mpi_, ctx.prec)
    return ctx.make_mpf(c), ctx.make_mpf(s)


def _cosh_sinh(x: Any, ctx: Any) -> tuple[Any, Any]:
    e = _exp(x, ctx)
    inverse = 1 / e
    return (e + inverse) / 2, (e - inverse) / 2


def _atan(x: Any, ctx: Any) -> Any:
    from mpmath.libmp.libmpi import mpi_atan

    return ctx.make_mpf(mpi_atan(x._mpi_, ctx.prec))


def _within(x: Any, low: int, high: int, ctx: Any) -> None:
    """Undefined unless x can lie in [low, high]; more precision while it sticks out."""
    if x.b < low or x.a > high:
        raise Undefined("an inverse function's argument is outside its real domain")
    if x.a < low or x.b > high:
        raise _NeedMorePrecision


def _nonnegative(x: Any, ctx: Any) -> Any:
    """x, known to be >= 0 mathematically, with a lower end rounded below 0 clipped to 0."""
    return x if x.a >= 0 else ctx.mpf([0, max(x.b, 0)])


def _asin(x: Any, ctx: Any) -> Any:
    _within(x, -1, 1, ctx)
    return 2 * _atan(x / (1 + ctx.sqrt(_nonnegative(1 - x ** 2, ctx))), ctx)


def _acosh(x: Any, ctx: Any) -> Any:
    if x.b < 1:
        raise Undefined("acosh of a number below 1 is not a real number")
    if x.a < 1:
        raise _NeedMorePrecision
    return ctx.log(x + ctx.sqrt(_nonnegative(x ** 2 - 1, ctx)))


def _asinh(x: Any, ctx: Any) -> Any:
    if x.b < 0:  # odd: log(|x| + sqrt(x**2 + 1)) has no cancellation
        return -_asinh(-x, ctx)
    return ctx.log(x + ctx.sqrt(x ** 2 + 1))


def _atanh(x: Any, ctx: Any) -> Any:
    if x.b <= -1 or x.a >= 1:
        raise Undefined("atanh outside (-1, 1) is not a real number")
    if x.a <= -1 or x.b >= 1:
        raise _NeedMorePrecision
    return ctx.log((1 + x) / (1 - x)) / 2


def _acot(x: Any, ctx: Any) -> Any:
    if x.a == 0 and x.b == 0:
        return ctx.pi / 2  # sympy's acot(0)
    return _atan(_reciprocal(x, ctx), ctx)


def _tanh(x: Any, ctx: Any) -> Any:
    if x.b < 0:
        return -_tanh(-x, ctx)
    return 1 - 2 / (_exp(2 * x, ctx) + 1)


def _sin(x: Any, ctx: Any) -> Any:
    return _cos_sin(x, ctx)[1]


def _cos(x: Any, ctx: Any) -> Any:
    return _cos_sin(x, ctx)[0]


def _tan(x: Any, ctx: Any) -> Any:
    c, s = _cos_sin(x, ctx)
    return s * _reciprocal(c, ctx)


def _cot(x: Any, ctx: Any) -> Any:
    c, s = _cos_sin(x, ctx)
    return c * _reciprocal(s, ctx)


def _sinh(x: Any, ctx: Any) -> Any:
    return _cosh_sinh(x, ctx)[1]


def _cosh(x: Any, ctx: Any) -> Any:
    return _cosh_sinh(x, ctx)[0]


def _acos(x: Any, ctx: Any) -> Any:
    return ctx.pi / 2 - _asin(x, ctx)


_FUNCTIONS: dict[str, Any] = {
    "exp": _exp,
    "log": _log,
    "sin": _sin,
    "cos": _cos,
    "tan": _tan,
    "cot": _cot,
    "sec": lambda x, ctx: _reciprocal(_cos(x, ctx), ctx),
    "csc": lambda x, ctx: _reciprocal(_sin(x, ctx), ctx),
    "asin": _asin,
    "acos": _acos,
    "atan": _atan,
    "acot": _acot,
    "asec": lambda x, ctx: _acos(_reciprocal(x, ctx), ctx),
    "acsc": lambda x, ctx: _asin(_reciprocal(x, ctx), ctx),
    "sinh": _sinh,
    "cosh": _cosh,
    "tanh": _tanh,
    "coth": lambda x, ctx: _reciprocal(_tanh(x, ctx), ctx),
    "sech": lambda x, ctx: _reciprocal(_cosh(x, ctx), ctx),
    "csch": lambda x, ctx: _reciprocal(_sinh(x, ctx), ctx),
    "asinh": _asinh,
    "acosh": _acosh,
    "atanh": _atanh,
    "acoth": lambda x, ctx: _atanh(_reciprocal(x, ctx), ctx),
    "asech": lambda x, ctx: _acosh(_reciprocal(x, ctx), ctx),
    "acsch": lambda x, ctx: _asinh(_reciprocal(x, ctx), ctx),
}


def _refinements(build: Any, deadline: float) -> Any:
    """Yield (prec, build(ctx)) at each working precision in turn.

    build(ctx) returns intervals. Raises OutOfTime once the deadline passes (checked at every
    node), and Undecidable after the last precision if build never gave a value at all (it
    needed more precision every time).
    """
    evaluated = False
    for prec in PRECISIONS:
        ctx = _context(prec, deadline)
        try:
            value = build(ctx)
        except _NeedMorePrecision:
            continue
        evaluated = True
        yield prec, value
    if not evaluated:
        # A log, root or reciprocal of something indistinguishable from zero, up to the last
        # precision: perhaps not a real number at all (0/0), so it is not "together" with
        # anything, and must never reach the prover (whose sympy would happily cancel 0/0 to 1).
        raise Undecidable(f"cannot evaluate a logarithm, root or reciprocal of a value that may be "
                          f"zero ({PRECISIONS[-1]} bits)")


def _sign(build: Any, deadline: float) -> int:
    """The sign (-1 or +1) of the interval build(ctx), certain once it excludes zero."""
    for _, value in _refinements(build, deadline):
        if value.a > 0:
            return 1
        if value.b < 0:
            return -1
    raise Undecidable(f"could not separate the value from zero at {PRECISIONS[-1]} bits")


def approx(x: object) -> float:
    """A float near x, for messages only (never for decisions)."""
    q = as_fraction(x)
    try:
        if q is not None:
            return float(q)
        interval = _sympy_interval(x, _context(64))
        return float(interval.mid)
    except (Undecidable, _NeedMorePrecision, OverflowError, ValueError, ZeroDivisionError):
        return float("nan")


def within(expected: object, actual: object, rtol: float, atol: float, deadline: float) -> bool:
    """|actual - expected| <= atol + rtol * |expected|, decided exactly.

    Both sides are finite floats or exact values. Rationals use Fraction arithmetic (floats
    converted exactly); anything irrational uses intervals of rising precision until deadline.
    """
    e, a = as_fraction(expected), as_fraction(actual)
    rtol_q, atol_q = Fraction(rtol), Fraction(atol)
    if e is not None and a is not None:
        return abs(a - e) <= atol_q + rtol_q * abs(e)

    def excess(ctx: Any) -> Any:
        ev, av = _interval(expected, ctx), _interval(actual, ctx)
        return abs(av - ev) - (_interval(atol_q, ctx) + _interval(rtol_q, ctx) * abs(ev))

    try:
        return _sign(excess, deadline) < 0
    except OutOfTime:
        raise
    except Undecidable as error:
        # The difference sits exactly on the tolerance boundary only for a rational reference,
        # which Fraction arithmetic would have caught; say so rather than guess.
        raise Undecidable(f"could not decide the tolerance test: {error}") from None


# The prover is consulted from this precision on, and only when the difference is below
# 2**-(prec/2) of the values: intervals of huge cancelling terms are wide, and values that
# differ by 1 must be told apart by more precision, not handed to sympy as "agreeing".
_PROVER_PRECISION = 256


def equal(expected: object, actual: object, deadline: float) -> bool:
    """expected == actual as real numbers, decided exactly.

    Fast paths: Fraction equality; sympy structural equality; intervals that separate (a proof
    of inequality) or that are the single point zero (a proof of equality). Values whose
    difference is tiny relative to them go to sympy in a worker process: "equal" only when sympy
    proves the difference is zero. If it cannot, higher precision may still separate them;
    otherwise the question is Undecidable (OutOfTime if the deadline passed first).
    """
    e, a = as_fraction(expected), as_fraction(actual)
    if e is not None and a is not None:
        return e == a
    sympy = _sympy()
    se, sa = _to_sympy(expected, sympy), _to_sympy(actual, sympy)
    if se == sa:
        return True

    unproven: list[str] = []  # set once the prover has answered without a proof
    try:
        return _refine_equality(se, sa, deadline, unproven)
    except OutOfTime as error:
        if not unproven:
            raise
        raise OutOfTime(f"{unproven[0]} ({error})") from None


def _refine_equality(se: Any, sa: Any, deadline: float, unproven: list[str]) -> bool:
    def intervals(ctx: Any) -> tuple[Any, Any, Any]:
        ev, av = _interval(se, ctx), _interval(sa, ctx)
        return ev - av, ev, av

    for prec, (difference, ev, av) in _refinements(intervals, deadline):
        if difference.a > 0 or difference.b < 0:
            return False
        if difference.a == 0 and difference.b == 0:
            return True  # the enclosure of the difference is the point zero
        bits, relative = _agreement(difference, ev, av)
        agreement = (f"the values agree to {bits} bits" if relative
                     else f"both values are within 2**-{bits} of zero")
        if not unproven and prec >= _PROVER_PRECISION and bits >= prec // 2:
            try:
                why_unproven = _prove_equal(se, sa, deadline)
            except OutOfTime:
                raise OutOfTime(f"{agreement} but sympy had not proven them equal by the deadline") from None
            if why_unproven is None:
                return True
            unproven.append(f"{agreement} but {why_unproven}")
    if not unproven:
        raise Undecidable(f"could not separate the values at {prec} bits: their difference is not small "
                          f"relative to them (large terms cancel)")
    raise Undecidable(unproven[0])


def _agreement(difference: Any, ev: Any, av: Any) -> tuple[int, bool]:
    """(n, True) if |difference| < 2**-n * |value| (relative); (n, False) if only |difference| < 2**-n
    is known (both values' intervals contain zero)."""
    top = max(_upper_bits(end) for end in difference._mpi_)
    sizes = [_lower_bits(x) for x in (ev, av) if x.a > 0 or x.b < 0]
    return (max(sizes) - top, True) if sizes else (-top, False)


def _upper_bits(end: tuple) -> int:
    """k with |end| < 2**k, for an mpf tuple (sign, man, exp, bc); huge for inf or nan."""
    _, man, exp, bc = end
    if man:
        return exp + bc
    return -(1 << 30) if end == (0, 0, 0, 0) else 1 << 30


def _lower_bits(x: Any) -> int:
    """k with 2**k <= |y| for every y in the interval x, which excludes zero."""
    _, man, exp, bc = x._mpi_[0] if x.a > 0 else x._mpi_[1]
    return exp + bc - 1 if man else -(1 << 30)


def _to_sympy(x: object, sympy: Any) -> Any:
    q = as_fraction(x)
    return sympy.Rational(q.numerator, q.denominator) if q is not None else x


def _prove_equal(expected: Any, actual: Any, deadline: float) -> str | None:
    """None if sympy proves expected == actual by deadline, else why not; OutOfTime at the deadline."""
    from exactgrade import _timeout, wire

    try:
        payload = [wire.encode(expected), wire.encode(actual)]
    except wire.WireError as error:
        return f"they cannot be sent to the prover: {error}"
    try:
        answer = _timeout.call("exactgrade._real:prove_zero_difference", payload, deadline - time.monotonic())
    except _timeout.DeadlineExceeded:
        raise OutOfTime("the prover ran out of time") from None
    except _timeout.WorkerError as error:
        return f"the prover failed: {error}"
    return None if answer == "zero" else "sympy could not prove them equal"


def prove_zero_difference(expected_wire: str, actual_wire: str) -> str:
    """Worker side: 'zero' iff sympy proves expected - actual == 0, else 'unproven'.

    Runs only in the _timeout worker process (it may take unbounded time). Cheapest proofs first.
    logcombine(force=True) assumes log arguments are positive: true here, because the caller has
    already evaluated both values with intervals, which refuses the log of a non-positive number.
    """
    from exactgrade import wire

    sympy = _sympy()
    return _zero_or_unproven(_to_sympy(wire.decode(expected_wire) - wire.decode(actual_wire), sympy), sympy)


def prove_zero_at(node_wire: str, point: list[list[Any]]) -> str:
    """Worker side: 'zero' iff sympy proves the expression zero with each symbol replaced by its
    value at the point ([name, numerator, denominator] each), else 'unproven'.

    The caller (exactgrade._symbolic) asks this of a subexpression whose interval still holds zero
    at high precision: sin(pi*k) at an integer k is exactly zero, and only a proof says so.
    """
    from exactgrade import wire

    sympy = _sympy()
    node = wire.decode(node_wire)
    values = {name: sympy.Rational(p, q) for name, p, q in point}
    bound = node.xreplace({s: values[s.name] for s in node.free_symbols if s.name in values})
    return _zero_or_unproven(bound, sympy)


def _zero_or_unproven(difference: Any, sympy: Any) -> str:
    """'zero' iff sympy proves the difference is 0 (cheapest proofs first), else 'unproven'."""
    if difference == 0:
        return "zero"
    combined = sympy.logcombine(difference, force=True)
    if combined == 0 or combined.doit() == 0:
        return "zero"
    if sympy.simplify(difference) == 0 or difference.equals(0) is True:
        return "zero"
    return "unproven"


def warm_up() -> None:
    """Worker side, at startup: one typical proof, so that its first real one is not slower."""
    from exactgrade import wire

    sympy = _sympy()
    ratio = sympy.log(8) / sympy.log(2)
    root = sympy.Pow(sympy.Integer(8), sympy.Rational(1, 2), evaluate=False)
    prove_zero_difference(wire.encode(ratio), wire.encode(sympy.Integer(3)))
    prove_zero_difference(wire.encode(root), wire.encode(2 * sympy.sqrt(2)))
