"""Equality of exact expressions with free symbols, as functions on the symbols' declared domain.

A symbol's domain is its sympy assumptions as the wire spells them (wire.symbol_domain): an
integer symbol ranges over the integers of its sign, any other over the reals of its sign (a
symbol without assumptions is graded over the reals). The symbols of the whole reference (all
its leaves) are the allowed ones: an answer symbol of another name, or of the same name with
another domain, fails.

The decision, in order:

  1. Rational functions (both sides built from rationals and symbols with +, * and integer
     powers) are decided exactly: a/b == c/d over QQ(symbols) iff a*d == c*b as polynomials
     (sparse dicts of Fraction coefficients, bounded by MAX_TERMS, MAX_COEFFICIENT_BITS,
     MAX_DEGREE and the deadline; beyond those bounds step 2 decides). On the
     integers as on the reals, a rational function vanishes everywhere iff it is the zero
     function, so this is an exact decision with no error.
  2. Anything else is evaluated exactly at random points the host draws inside the domain
     (secrets.SystemRandom, fresh on every call; never visible to the sandbox), with the interval
     arithmetic of exactgrade._real. An interval of key - answer that excludes 0 at a point is a
     proof that they differ (the reason names the point); a point where the key is a real number
     and the answer is not is a difference too. A point is skipped only for the key's sake: where
     the key is not a real number (a pole, the logarithm of a negative number), or where an answer
     as large as the key (S below counted twice over the key) would need more agreement than
     MAX_PRECISION bits can show, or where the key holds a part that cannot be told from zero (and
     the prover does not show is zero). The two are declared equal
     after POINTS points at each of which the interval proves

         |key - answer| <= 2**-(AGREEMENT_BITS + S) * max(1, |key|)  and
         |key - answer| <= 2**-(ABSOLUTE_BITS + S)

     where S, the size of the pair at that point, is SIZE_WEIGHT (2) times the sum over BOTH
     expressions of
       - the bit size (numerator and denominator) of every rational constant, exponents included;
       - for each expression, log2(1/|v|) if its value v is below 1 in magnitude (a key of 2**-300 * x
         is checked to 2**-300 of itself);
       - for every sum, log2 of its largest term over the sum (cancellation: sqrt(2**600 + 1) -
         2**300) plus log2 of its largest term over its smallest (a negligible term: t + 2**-500
         under a root, 2**300 + 1 under a logarithm, x/7 + exp(-10**6*x**2) away from the bump's
         centre, p/(p+1) + 2**(-p-200));
       - for every product, the magnitude its factors above 1 and below 1 cancel, in bits
         (2*cosh(100)*exp(-100) is 1 + exp(-200));
       - for every power and function, log2(1/|a|) for each argument a below 1 in magnitude
         (cos(2**-150) is 1 - 2**-301, exp(2**-300) is 1 + 2**-300);
       - for tanh and coth, 3 bits per unit of their argument's magnitude, and for atan and acot
         log2 of it (a saturated function: tanh(100) is 1 - 2**-287).
     Agreement is sought at a working precision chosen from S (at least START_PRECISION), then
     higher up to MAX_PRECISION. A part whose interval still holds zero at PROVER_PRECISION (sin(pi*k)
     at an integer k) is sent, with the point, to sympy in a worker process (exactgrade._timeout); it
     counts as zero only if sympy proves it zero there. An answer that needs more than MAX_PRECISION
     bits (or holds a part neither separated from zero nor proven zero) fails at that point, saying so.

False-pass bound of step 2 (stated here and in docs/symbolic-bound.md). A wrong answer passes only
if the difference satisfies both inequalities at all POINTS points. The bound has two parts.

(a) Where the points land. For point i let eps_i be the probability, under that point's sampling
distribution (below), of landing where the difference meets both inequalities. Magnitudes are
independent across points, so

    P(a wrong answer passes) <= eps_1 * ... * eps_POINTS  (<= eps**8 when every eps_i <= eps).

A difference that is a nonzero polynomial of degree d in a positive integer symbol (2**10 values)
has eps_i <= d / 2**10, so P <= (d / 1024)**8; sqrt(x**2) against x (x real) has eps_i = 0 at the
half of the points with x negative, so it never passes; 2**p against 2**p - 1 has eps_i = 0.

(b) How small a difference can be where the points land. S makes every way we know of writing a
nonzero difference that is small at every point count against itself: the smallness has to come
from some subexpression (a lopsided or cancelling sum or product, a small argument, a saturated
function, a constant of many bits), and
each such bit raises the agreement required by SIZE_WEIGHT bits; the factor 2 covers the squaring
at a critical point (x * cos(2**-150) is x * (1 - 2**-301)) with AGREEMENT_BITS to spare. What is
left is a nonzero difference below 2**-(192 + S) with no such subexpression: a coincidence of
two different closed forms to 192 bits beyond the information their constants carry (heuristic:
the uniformity and witness conjectures of Richardson and van der Hoeven say such coincidences of
short expressions do not exist; no theorem covers exp, log and the trigonometric functions
together, and equality of such expressions is undecidable in general, so this part is a
heuristic, not a proof). The best-known near-identities are far from it: exp(pi*sqrt(163)) is
within 2**-40 of an integer. A difference confined to where no point is drawn (|x| beyond 16 or
below 1/16 for a real symbol, |k| beyond 2**10 for an integer one) is small on the sampled range,
so (b) applies to it. A point where the values are too large to resolve at MAX_PRECISION bits is
undecidable or a failure (saying so), never a pass.

What S costs: a correct answer whose own parts are far below 1 or cancel heavily at a point
needs a higher working precision there (slower), and fails if that exceeds MAX_PRECISION where the
key does not (a false fail, with a reason naming the point and the bits it needs); a part that is
exactly zero but that sympy cannot prove zero at the point fails the answer the same way.

Sampling (each point, each symbol): an integer symbol is uniform on its sign's part of
[-2**10, 2**10]; a real one is sign * (1 + u/2**20) * 2**e with u uniform in [0, 2**20) and e
uniform in [-4, 3] (|x| in [1/16, 16)). The sign is the domain's when it has one; for the first
SIGN_STRATA symbols whose domain allows both signs, point i takes sign pattern (start + i) mod
2**SIGN_STRATA for a random start (every pattern once in 8 consecutive points); other signs are
uniform. At most MAX_DRAWS points are drawn; if the key can be checked at fewer than POINTS of
them, the question is undecidable (it fails, saying so).

Every step checks the deadline shared with the rest of the comparison (exactgrade.compare).
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from exactgrade import _real

POINTS = 8
AGREEMENT_BITS = 192
ABSOLUTE_BITS = 64
SIZE_WEIGHT = 2  # bits of agreement required per bit of size (see the module docstring)
START_PRECISION = 256
MAX_PRECISION = 16384
PROVER_PRECISION = 1024  # a part whose interval still holds zero here goes to the prover
GUARD_BITS = 64  # working bits beyond the agreement sought
MAX_TERMS = 4096  # terms of one polynomial in the exact path; beyond, the point path decides
MAX_COEFFICIENT_BITS = 1 << 14  # likewise for the size of one coefficient (big-int products are slow)
MAX_DEGREE = 1024  # and for the exponent of a symbol in a term (x**10**12 must not be evaluated exactly)
MAX_DRAWS = 8 * POINTS  # points drawn in all, including those where the key is not a real number
SIGN_STRATA = 3
INTEGER_RANGE = 1 << 10
_MAX_RATIONAL_POWER = 64  # a larger integer power of a non-monomial goes to the point path

Domain = tuple[str, ...]  # wire.symbol_domain's spelling: (), ("real",), ("integer", "positive"), ...


class _NotRational(Exception):
    """The expression is not a (small enough) rational function: use the point path."""


def symbols(x: Any) -> dict[str, Domain]:
    """Name -> domain of every symbol in the sympy expression x (a walk of its args, linear in its
    distinct nodes; no sympy method runs).

    ValueError (one line) for a symbol the wire cannot carry or a name with two domains.
    """
    from exactgrade import wire

    found: dict[str, Domain] = {}
    non_analytic = ""
    stack, seen = [x], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:  # a shared subtree (in-process values may be DAGs) is walked once
            continue
        seen.add(id(node))
        if type(node).__name__ in wire.NON_ANALYTIC:
            non_analytic = non_analytic or type(node).__name__
        if node.is_Symbol:
            try:
                domain = wire.symbol_domain(node)
            except wire.WireError as error:
                raise ValueError(str(error)) from None
            if found.setdefault(node.name, domain) != domain:
                raise ValueError(f"symbol {node.name} appears with two sets of assumptions")
        else:
            stack.extend(node.args)
    if found and non_analytic:
        raise ValueError(f"{non_analytic} is not an analytic function: non-analytic functions (Abs, sign, "
                         f"floor, ceiling, Piecewise, Min, Max, ...) of a symbol are refused; write the "
                         f"expression that holds on the declared domain")
    return found


def symbols_of_value(value: Any) -> dict[str, Domain]:
    """Name -> domain of every symbol in every sympy leaf of a value (lists, tuples, dict values)."""
    found: dict[str, Domain] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is list or type(item) is tuple:
            stack.extend(item)
        elif type(item) is dict:
            stack.extend(item.values())
        elif _real.is_sympy(item):
            for name, domain in symbols(item).items():
                if found.setdefault(name, domain) != domain:
                    raise ValueError(f"symbol {name} appears in the reference with two sets of assumptions")
    return found


def describe_domain(domain: Domain) -> str:
    if not domain:
        return "no assumptions"
    return " ".join(domain)


def check_symbols(reference: dict[str, Domain], answer: dict[str, Domain]) -> str | None:
    """Why the answer's symbols are not allowed by the reference's, or None."""
    for name, domain in sorted(answer.items()):
        if name not in reference:
            allowed = ", ".join(sorted(reference)) or "none"
            return (f"the answer has the symbol {name}, which the reference does not have "
                    f"(its symbols: {allowed})")
        if reference[name] != domain:
            return (f"the answer's symbol {name} has assumptions ({describe_domain(domain)}) other than "
                    f"the reference's ({describe_domain(reference[name])})")
    return None


@dataclass(frozen=True, slots=True)
class Decision:
    """equal, or a reason naming where (a point, or the rational functions) they differ."""

    equal: bool
    reason: str = ""


def decide(key: Any, answer: Any, domains: dict[str, Domain], deadline: float) -> Decision:
    """key == answer as functions on the domains (names -> Domain): see the module docstring.

    Raises _real.Undecidable (OutOfTime at the deadline) when neither equality nor a difference
    could be established.
    """
    if key == answer:  # structural equality: no evaluation (sympy's == on trees)
        return Decision(True)
    try:
        return _rational_decision(key, answer, sorted(domains), domains, deadline)
    except _NotRational:
        return _point_decision(key, answer, domains, deadline)


# ---------------------------------------------------------------------------------------------
# Step 1: rational functions, exactly

Polynomial = dict[tuple[int, ...], Fraction]


def _rational_decision(key: Any, answer: Any, names: list[str], domains: dict[str, Domain],
                       deadline: float) -> Decision:
    """Exact, for two rational functions; _NotRational if either is not one (or is too large)."""
    index = {name: i for i, name in enumerate(names)}
    budget = _Budget(deadline)
    kn, kd = _rational(key, index, budget)
    an, ad = _rational(answer, index, budget)
    if _mul(kn, ad, budget) == _mul(an, kd, budget):
        return Decision(True)
    return Decision(False, _rational_witness((kn, kd), (an, ad), names, domains, deadline))


class _Budget:
    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def check(self, terms: int) -> None:
        if terms > MAX_TERMS:
            raise _NotRational
        if time.monotonic() > self.deadline:
            raise _real.OutOfTime("stopped while expanding a rational function")


def _rational(expr: Any, index: dict[str, int], budget: _Budget) -> tuple[Polynomial, Polynomial]:
    """(numerator, denominator) of expr; _NotRational if it is not a rational function."""
    zero = (0,) * len(index)
    if type(expr) is int or type(expr) is Fraction:
        return _constant(Fraction(expr), zero), {zero: Fraction(1)}
    if expr.is_Rational:
        return _constant(Fraction(int(expr.p), int(expr.q)), zero), {zero: Fraction(1)}
    if expr.is_Symbol:
        monomial = list(zero)
        monomial[index[expr.name]] = 1
        return {tuple(monomial): Fraction(1)}, {zero: Fraction(1)}
    if expr.is_Add:
        num, den = _rational(expr.args[0], index, budget)
        for arg in expr.args[1:]:
            n, d = _rational(arg, index, budget)
            if d == den:
                num = _add(num, n, budget)
            else:
                num = _add(_mul(num, d, budget), _mul(n, den, budget), budget)
                den = _mul(den, d, budget)
        return num, den
    if expr.is_Mul:
        num, den = {zero: Fraction(1)}, {zero: Fraction(1)}
        for arg in expr.args:
            n, d = _rational(arg, index, budget)
            num, den = _mul(num, n, budget), _mul(den, d, budget)
        return num, den
    if expr.is_Pow and expr.exp.is_Integer:
        num, den = _rational(expr.base, index, budget)
        n = int(expr.exp)
        if abs(n) > _MAX_RATIONAL_POWER and (len(num) > 1 or len(den) > 1):
            raise _NotRational
        if n < 0:
            if not num:
                raise _NotRational  # 1/0: the point path reports it as not a real number
            num, den, n = den, num, -n
        return _pow(num, n, len(index), budget), _pow(den, n, len(index), budget)
    raise _NotRational


def _constant(q: Fraction, zero: tuple[int, ...]) -> Polynomial:
    return {zero: q} if q else {}


def _add(a: Polynomial, b: Polynomial, budget: _Budget) -> Polynomial:
    out = dict(a)
    for monomial, c in b.items():
        total = out.get(monomial, 0) + c
        if total:
            out[monomial] = total
        else:
            out.pop(monomial, None)
    budget.check(len(out))
    return out


def _bits(p: Polynomial) -> int:
    return max((max(c.numerator.bit_length(), c.denominator.bit_length()) for c in p.values()), default=0)


def _degree(p: Polynomial) -> int:
    return max((max(monomial, default=0) for monomial in p), default=0)


def _mul(a: Polynomial, b: Polynomial, budget: _Budget) -> Polynomial:
    """a * b. Sizes are checked on the product: both factors are within the bounds, so one product
    costs at most twice the bounds (no single big-int multiplication can run away)."""
    budget.check(len(a) * len(b) // 4)  # a product has at most len(a)*len(b) terms; refuse the huge
    if len(a) == 1 and len(b) == 1:
        ((ma, ca),), ((mb, cb),) = a.items(), b.items()
        out = {tuple(x + y for x, y in zip(ma, mb, strict=True)): ca * cb}
    else:
        out = {}
        for ma, ca in a.items():
            for mb, cb in b.items():
                monomial = tuple(x + y for x, y in zip(ma, mb, strict=True))
                total = out.get(monomial, 0) + ca * cb
                if total:
                    out[monomial] = total
                else:
                    out.pop(monomial, None)
            budget.check(len(out))
    if _bits(out) > MAX_COEFFICIENT_BITS or _degree(out) > MAX_DEGREE:
        raise _NotRational
    return out


def _pow(a: Polynomial, n: int, width: int, budget: _Budget) -> Polynomial:
    if len(a) == 1:  # a monomial: no expansion
        (monomial, c), = a.items()
        if _bits(a) * n > MAX_COEFFICIENT_BITS or _degree(a) * n > MAX_DEGREE:
            raise _NotRational
        return {tuple(e * n for e in monomial): c ** n}
    result: Polynomial = {(0,) * width: Fraction(1)}
    base = a
    while n:
        if n & 1:
            result = _mul(result, base, budget)
        n >>= 1
        if n:
            base = _mul(base, base, budget)
    return result


def _evaluate_polynomial(p: Polynomial, values: tuple[Fraction, ...]) -> Fraction:
    return sum((c * math.prod((v ** e for v, e in zip(values, m, strict=True)), start=Fraction(1))
                for m, c in p.items()), Fraction(0))


def _rational_witness(key: tuple[Polynomial, Polynomial], answer: tuple[Polynomial, Polynomial],
                      names: list[str], domains: dict[str, Domain], deadline: float) -> str:
    """A point where two different rational functions take different values (or are undefined)."""
    draw = secrets.SystemRandom()
    for _ in range(MAX_DRAWS):
        if time.monotonic() > deadline:
            break
        point = {name: _draw(domains[name], draw, small=True) for name in names}
        values = tuple(point[name] for name in names)
        kd, ad = _evaluate_polynomial(key[1], values), _evaluate_polynomial(answer[1], values)
        if kd == 0:
            continue
        expected = _evaluate_polynomial(key[0], values) / kd
        if ad == 0:
            return (f"they differ at {_show_point(point)}: expected {_show_q(expected)}, "
                    f"the answer is undefined there")
        actual = _evaluate_polynomial(answer[0], values) / ad
        if expected != actual:
            return f"they differ at {_show_point(point)}: expected {_show_q(expected)}, got {_show_q(actual)}"
    return "they differ as rational functions"


# ---------------------------------------------------------------------------------------------
# Step 2: evaluation at random points

_SIGNS = {"positive": (1,), "nonnegative": (1,), "negative": (-1,), "nonpositive": (-1,)}


def _draw(domain: Domain, draw: secrets.SystemRandom, sign: int | None = None,
          small: bool = False) -> Fraction:
    """A random value in the domain; sign (+1 or -1) if given and the domain allows both signs."""
    restricted = next((s for s in domain if s in _SIGNS), None)
    if restricted is not None:
        sign = _SIGNS[restricted][0]
    elif sign is None:
        sign = draw.choice((1, -1))
    if "integer" in domain:
        limit = 16 if small else INTEGER_RANGE
        low = 0 if restricted in ("nonnegative", "nonpositive") or restricted is None else 1
        return Fraction(sign * draw.randint(low, limit))
    if small:
        return Fraction(sign * draw.randint(1, 64), draw.randint(1, 16))
    mantissa, exponent = (1 << 20) + draw.randrange(1 << 20), draw.randint(-4, 3)  # (1 + u/2**20) * 2**e
    return Fraction(sign * mantissa, 1 << (20 - exponent))


def _points(domains: dict[str, Domain], draw: secrets.SystemRandom) -> Any:
    """The random points, one per draw. The first SIGN_STRATA symbols (by name) whose domain allows
    both signs take the sign pattern of the draw's index (all 2**SIGN_STRATA patterns in every
    2**SIGN_STRATA draws, from a random start); every other sign and every magnitude is random."""
    free = [name for name in sorted(domains) if not any(s in _SIGNS for s in domains[name])][:SIGN_STRATA]
    start = draw.randrange(1 << SIGN_STRATA)
    for index in range(MAX_DRAWS):
        pattern = start + index
        signs = {name: 1 if (pattern >> bit) & 1 else -1 for bit, name in enumerate(free)}
        yield {name: _draw(domain, draw, signs.get(name)) for name, domain in domains.items()}


def _point_decision(key: Any, answer: Any, domains: dict[str, Domain], deadline: float) -> Decision:
    agreed = 0
    constants = (_constant_bits(key), _constant_bits(answer))
    skipped = ""
    start = min(MAX_PRECISION, _round_up(AGREEMENT_BITS + SIZE_WEIGHT * sum(constants) + GUARD_BITS))
    for point in _points(domains, secrets.SystemRandom()):
        test = _PointTest(key, answer, point, deadline, constants)
        outcome = test.run(start)
        if outcome is None:  # the key is not a real number here, or cannot be checked: another point
            skipped = test.skipped or skipped
            continue
        if outcome is not True:
            return Decision(False, outcome)
        agreed += 1
        start = test.prec  # the next point most likely needs about as much: one evaluation, not two
        if agreed == POINTS:
            return Decision(True)
    raise _real.Undecidable(f"the reference could be checked at only {agreed} of {MAX_DRAWS} random points "
                            f"of its domain (at least {POINTS} are needed)" + (skipped and f": {skipped}"))


def _constant_bits(expr: Any) -> int:
    """The bit sizes of expr's rational constants (numerator and denominator; exponents too), summed:
    the information an expression carries in its constants (a walk of its distinct nodes)."""
    total = 0
    stack, seen = [expr], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        q = _real.as_fraction(node)
        if q is not None:
            total += q.numerator.bit_length() + q.denominator.bit_length()
        else:
            stack.extend(node.args)
    return total


class _Sizes:
    """What one evaluation of one expression at a point shows about its subexpressions (fed by
    _real.measuring): `bits`, the sum over its sums, products, powers and functions of the bits each
    hides (see the module docstring; the value itself is _smallness's); `straddling`, the outermost
    subexpressions whose interval still holds zero without being the point zero (and that the prover
    has not shown to be zero: `proven`, ids of nodes -> whether it showed them zero at this point)."""

    __slots__ = ("bits", "straddling", "stack", "entered", "proven")

    def __init__(self, proven: dict[int, bool]) -> None:
        self.bits = 0
        self.straddling: list[tuple[int, Any]] = []  # (entry number, node)
        self.stack: list[Any] = []  # intervals of the nodes left, whose parent has not been left yet
        self.entered = 0
        self.proven = proven

    def enter(self) -> tuple[int, int]:
        self.entered += 1
        return len(self.stack), self.entered

    def leave(self, expr: Any, value: Any, mark: tuple[int, int]) -> None:
        depth, entered = mark
        children = self.stack[depth:]
        del self.stack[depth:]
        self.stack.append(value)
        if expr.is_Atom:  # a rational (counted by _constant_bits), pi, E, a symbol (our own value)
            return
        low, high = _real._signs(value)
        if low > 0 or high < 0:
            if expr.is_Add:
                self.bits += _sum_bits(children, _real._lower_bits(value))
            elif expr.is_Mul:
                self.bits += _product_bits(children)
            else:  # a power or a function: small arguments (cos(2**-150) is 1 - 2**-301), saturation
                self.bits += sum(max(0, -_real._lower_bits(child)) for child in children if _apart(child))
                if type(expr).__name__ in _SATURATING:
                    argument = max(map(_real._upper_bits, children[0]._mpi_))
                    self.bits += _SATURATING[type(expr).__name__](argument)
        elif (low or high) and not self.proven.get(id(expr)):
            while self.straddling and self.straddling[-1][0] > entered:
                self.straddling.pop()  # a part of this node: the outermost one is what matters
            self.straddling.append((entered, expr))


def _sum_bits(terms: list[Any], lower: int) -> int:
    """The bits a sum of these terms (intervals; its value at least 2**lower in magnitude) hides: its
    largest term over the sum (cancellation: N + 1 - N) plus its largest term over its smallest
    (a negligible term: log(2**300 + 1) / log(2**300) is 1 + 2**-308 with no small value anywhere)."""
    top = max(_real._upper_bits(end) for term in terms for end in term._mpi_)
    smallest = min((_real._lower_bits(term) for term in terms if _apart(term)), default=top)
    return max(0, top - lower) + max(0, top - smallest)


def _smallness(interval: Any) -> int:
    """log2(1/|v|) for a value below 1 in magnitude (a key of 2**-300 * x is checked to 2**-300 of
    itself, not of 1), else 0."""
    return max(0, -_real._lower_bits(interval)) if _apart(interval) else 0


def _product_bits(factors: list[Any]) -> int:
    """The bits a product hides: the magnitude its factors above 1 and its factors below 1 cancel
    (2 cosh(100) exp(-100) is 1 + exp(-200), with every value far from small but one)."""
    large = sum(max(0, max(map(_real._upper_bits, factor._mpi_))) for factor in factors)
    small = sum(max(0, -_real._lower_bits(factor)) for factor in factors if _apart(factor))
    return min(large, small)


def _apart(interval: Any) -> bool:
    """Whether an interval excludes zero."""
    low, high = _real._signs(interval)
    return low * high > 0


def _saturation(slope: int) -> Any:
    """Bits by which f(y) may be near its asymptote, given |y| < 2**top: slope * |y| bits (tanh:
    1 - tanh(y) ~ 2 exp(-2y), 2/ln 2 < 3 bits per unit of y); at most 2**40 (far beyond any check)."""
    return lambda top: slope << min(max(top, 0), 40)


_SATURATING: dict[str, Any] = {
    "tanh": _saturation(3),
    "coth": _saturation(3),
    "atan": lambda top: max(top, 0),  # pi/2 - atan(y) ~ 1/y
    "acot": lambda top: max(top, 0),
}


class _PointTest:
    """The test at one point (see the module docstring): run() is True if key and answer agree
    there, a reason if they differ, None if the key cannot be resolved there (not a real number,
    or too small, cancelling or unresolvable to check at MAX_PRECISION)."""

    def __init__(self, key: Any, answer: Any, point: dict[str, Fraction], deadline: float,
                 constants: tuple[int, int]) -> None:
        self.key, self.answer, self.point, self.deadline = key, answer, point, deadline
        self.constants = constants
        self.shown = _show_point(point)
        self.proven: dict[int, bool] = {}  # id of a node the prover was asked about -> shown zero here
        self.skipped = ""  # why the key could not be evaluated here, if that is why the point is skipped
        self.prec = 0

    def run(self, prec: int) -> bool | str | None:
        """The outcome, trying working precisions from prec up (self.prec: the last one tried)."""
        key_value = None
        answer_evaluated = False
        while True:
            self.prec = prec
            following = 4 * prec  # after an interval too wide to evaluate a log, root or reciprocal
            ctx = _real._context(prec, self.deadline, self.point)
            key_sizes = _Sizes(self.proven)
            try:
                with _real.measuring(key_sizes):
                    key_value = _real._interval(self.key, ctx)
            except _real.Undefined:
                return None
            except _real._NeedMorePrecision:
                pass
            except _real.OutOfTime:
                raise
            except _real.Undecidable as error:  # too large to evaluate here (exp(10**8)): skip the point
                self.skipped = str(error)
                return None
            else:
                outcome = self._answer_at(ctx, key_value, key_sizes)
                if type(outcome) is int:
                    answer_evaluated, following = True, max(outcome, 2 * prec)
                elif outcome is not _MORE:
                    return outcome
            if prec >= MAX_PRECISION:
                break
            prec = min(MAX_PRECISION, _round_up(following))
        if key_value is None:
            return None  # a singularity of the key at this very point
        if not answer_evaluated:
            return (f"they differ at {self.shown}: expected {_approx(key_value)}, but the answer cannot be "
                    f"evaluated there (a logarithm, root or reciprocal of a value that may be zero)")
        raise _real.Undecidable(f"could not tell the values apart or prove them within the agreement they "
                                f"need at {self.shown} ({MAX_PRECISION} bits)")

    def _answer_at(self, ctx: Any, ev: Any, key_sizes: _Sizes) -> Any:
        """At ctx's precision, with the key's interval ev: True, a reason, None (skip the point),
        _MORE (the answer needs more precision to evaluate) or the precision the test needs (int)."""
        answer_sizes = _Sizes(self.proven)
        try:
            with _real.measuring(answer_sizes):
                av = _real._interval(self.answer, ctx)
        except _real.Undefined as error:
            return (f"they differ at {self.shown}: expected {_approx(ev)}, but the answer is not a real "
                    f"number there ({error})")
        except _real._NeedMorePrecision:
            return _MORE
        except _real.OutOfTime:
            raise
        except _real.Undecidable as error:
            return f"the answer cannot be checked at {self.shown}: {error}"
        difference = ev - av
        low, high = _real._signs(difference)
        if low > 0 or high < 0:  # a proof that they differ, whatever the sizes
            expected, got = _approx(ev), _approx(av)
            by = f" (they differ by {_approx(difference)})" if expected == got else ""
            return f"they differ at {self.shown}: expected {expected}, got {got}{by}"
        if ctx.prec >= PROVER_PRECISION:
            self._prove_zero(key_sizes)
            self._prove_zero(answer_sizes)
        last = ctx.prec >= MAX_PRECISION
        if key_sizes.straddling:
            return None if last else 2 * ctx.prec
        key_bits = SIZE_WEIGHT * (self.constants[0] + key_sizes.bits + _smallness(ev))
        scale = max(0, max(_real._upper_bits(end) for end in ev._mpi_))
        if AGREEMENT_BITS + 2 * key_bits + scale + GUARD_BITS > MAX_PRECISION:
            return None  # no room here for an answer as large as the key: the key cannot be checked
        if answer_sizes.straddling:
            if not last:
                return 2 * ctx.prec
            return (f"the answer cannot be checked at {self.shown}: a part of it cannot be told from zero "
                    f"there at {MAX_PRECISION} bits, and the prover could not show it is zero")
        bits = key_bits + SIZE_WEIGHT * (self.constants[1] + answer_sizes.bits + _smallness(av))
        need = AGREEMENT_BITS + bits + scale + GUARD_BITS
        if need > MAX_PRECISION:
            return (f"the answer cannot be checked at {self.shown}: its constants, small parts and "
                    f"cancellations call for agreement to 2**-{AGREEMENT_BITS + bits}, beyond what "
                    f"{MAX_PRECISION}-bit evaluation can show")
        if _within_agreement(difference, ev, bits):
            return True
        return need

    def _prove_zero(self, sizes: _Sizes) -> None:
        """Ask the prover about each straddling part not asked about yet; drop those it shows zero."""
        for _, node in sizes.straddling:
            if id(node) not in self.proven:
                self.proven[id(node)] = self._is_zero(node)
        sizes.straddling = [(mark, node) for mark, node in sizes.straddling if not self.proven[id(node)]]

    def _is_zero(self, node: Any) -> bool:
        """Whether the prover (a worker process, under the deadline) shows node is zero at the point."""
        from exactgrade import _timeout, wire

        point = [[name, q.numerator, q.denominator] for name, q in sorted(self.point.items())]
        try:
            answer = _timeout.call("exactgrade._real:prove_zero_at", [wire.encode(node), point],
                                   self.deadline - time.monotonic())
        except _timeout.DeadlineExceeded:
            raise _real.OutOfTime("the prover ran out of time") from None
        except (wire.WireError, _timeout.WorkerError):
            return False
        return answer == "zero"


_MORE = object()  # the answer needs more precision to be evaluated at all


def _round_up(bits: int) -> int:
    """A working precision of at least bits (and START_PRECISION), a multiple of 64."""
    return max(START_PRECISION, -(-bits // 64) * 64)


def _within_agreement(difference: Any, key: Any, extra: int) -> bool:
    """|difference| <= 2**-(AGREEMENT_BITS + extra) * max(1, |key|) and <= 2**-(ABSOLUTE_BITS + extra),
    for every point of both intervals."""
    from mpmath.libmp import fone, mpf_abs, mpf_cmp, mpf_shift

    largest = max((mpf_abs(end) for end in difference._mpi_), key=_Key)
    low, high = key._mpi_
    smallest = fone if _real._signs(key)[0] <= 0 <= _real._signs(key)[1] else min(
        (mpf_abs(low), mpf_abs(high)), key=_Key)
    if mpf_cmp(smallest, fone) < 0:
        smallest = fone
    relative = mpf_cmp(largest, mpf_shift(smallest, -(AGREEMENT_BITS + extra))) <= 0
    return relative and mpf_cmp(largest, mpf_shift(fone, -(ABSOLUTE_BITS + extra))) <= 0


class _Key:
    """Orders raw mpf tuples (for max and min)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Key) -> bool:
        from mpmath.libmp import mpf_cmp

        return mpf_cmp(self.value, other.value) < 0


def _approx(interval: Any) -> str:
    """The midpoint of an interval in 6 significant digits (any magnitude: 1.0e+63936 too)."""
    from mpmath import mp

    return str(mp.nstr(mp.make_mpf(interval.mid._mpi_[0]), 6))


def _show_q(q: Fraction) -> str:
    text = str(q)
    return text if len(text) <= 40 else f"{float(q):.6g}"


def _show_point(point: dict[str, Fraction]) -> str:
    return ", ".join(f"{name}={_show_q(value)}" for name, value in sorted(point.items()))
