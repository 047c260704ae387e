"""Properties of the comparator on expressions in symbols.

Rewrites of the same function pass (expanded, factored, partial fractions, reassociated, rewritten
in other functions); mutations fail with a reason naming the point (a dropped factor, a changed
exponent, a flipped sign, swapped symbols, another function); assumptions matter; math-verify's
false passes fail and the pairs exactgrade used to refuse pass. Every label is certain: the
rational ones are checked with sympy's cancel (exact on rational functions), and the mutations
of the elementary expressions change the function by construction.
"""

from __future__ import annotations

import pytest
import sympy
from hypothesis import assume, given
from hypothesis import strategies as st

from exactgrade import Exact, compare, wire

X, Y = sympy.symbols("x y")  # no assumptions: graded over the reals
P = sympy.Symbol("p", positive=True, integer=True)
PR = sympy.Symbol("r", positive=True)  # a positive real
RX = sympy.Symbol("x", real=True)
SYMBOLS = (X, Y, P)

COEFFICIENTS = st.integers(-9, 9)


@st.composite
def polynomials(draw: st.DrawFn, symbols: tuple = SYMBOLS) -> sympy.Expr:
    """A non-constant polynomial with small integer coefficients in up to two of the symbols."""
    chosen = draw(st.lists(st.sampled_from(symbols), min_size=1, max_size=2, unique=True))
    terms = draw(st.lists(st.tuples(COEFFICIENTS.filter(bool), *(st.integers(0, 3) for _ in chosen)),
                          min_size=1, max_size=4))
    polynomial = sympy.Add(*(c * sympy.Mul(*(s**e for s, e in zip(chosen, exps, strict=True)))
                             for c, *exps in terms))
    assume(polynomial.free_symbols)
    return polynomial


@st.composite
def rational_functions(draw: st.DrawFn) -> sympy.Expr:
    numerator, denominator = draw(polynomials()), draw(polynomials())
    value = numerator / denominator
    assume(sympy.cancel(value).free_symbols)  # not a constant
    return value


def reassociated(draw: st.DrawFn, expr: sympy.Expr) -> sympy.Expr:
    """The same expression with its sums and products regrouped and reordered, unevaluated."""
    if not expr.args or not (expr.is_Add or expr.is_Mul):
        if expr.is_Pow:
            return sympy.Pow(reassociated(draw, expr.base), expr.exp, evaluate=False)
        return expr
    args = [reassociated(draw, a) for a in draw(st.permutations(list(expr.args)))]
    while len(args) > 1:
        i = draw(st.integers(0, len(args) - 2))
        args[i:i + 2] = [expr.func(args[i], args[i + 1], evaluate=False)]
    return args[0]


REWRITES = {
    "expand": sympy.expand,
    "factor": sympy.factor,
    "together": sympy.together,
    "cancel": sympy.cancel,
    "apart": lambda e: sympy.apart(e, sorted(e.free_symbols, key=str)[0]),  # the others as parameters
}


@given(rational_functions(), st.sampled_from(sorted(REWRITES)))
def test_rewrites_of_a_rational_function_pass(key: sympy.Expr, rewrite: str) -> None:
    try:
        answer = REWRITES[rewrite](key)
    except (sympy.PolynomialError, NotImplementedError):
        assume(False)
    verdict = compare(key, wire.decode(wire.encode(answer)), Exact())
    assert verdict.ok, verdict.reason


@given(st.data(), rational_functions())
def test_a_reassociated_rational_function_passes(data: st.DataObject, key: sympy.Expr) -> None:
    answer = reassociated(data.draw, sympy.expand(key) if data.draw(st.booleans()) else key)
    verdict = compare(key, answer, Exact())
    assert verdict.ok, verdict.reason


def mutations(key: sympy.Expr, factor: sympy.Expr) -> dict[str, sympy.Expr]:
    return {
        "dropped factor": (key * factor, key),
        "changed exponent": (key**2, key**3),
        "flipped sign": (key, -key),
        "swapped symbols": (key, key.subs({X: Y, Y: X}, simultaneous=True)),
    }


@given(rational_functions(), polynomials(), st.sampled_from(["dropped factor", "changed exponent",
                                                            "flipped sign", "swapped symbols"]))
def test_mutations_of_a_rational_function_fail_naming_a_point(key: sympy.Expr, factor: sympy.Expr,
                                                              mutation: str) -> None:
    assume(sympy.cancel(factor - 1) != 0)
    reference, answer = mutations(key, factor)[mutation]
    assume(sympy.cancel(reference - answer) != 0)  # certain for all but a swap of symmetric ones
    assume(answer.free_symbols <= reference.free_symbols)  # key * factor may cancel to a constant
    verdict = compare(reference, answer, Exact())
    assert not verdict.ok
    assert "they differ at" in verdict.reason, verdict.reason


# -- elementary functions ------------------------------------------------------------------------

FUNCTIONS = [sympy.sin, sympy.cos, sympy.tan, sympy.exp, sympy.sinh, sympy.cosh, sympy.tanh, sympy.atan,
             sympy.asinh, sympy.sec]


@st.composite
def elementary(draw: st.DrawFn) -> tuple[sympy.Expr, int]:
    """R * f(a*x + b) with R a rational function of x and f an elementary function: (expr, index of f)."""
    index = draw(st.integers(0, len(FUNCTIONS) - 1))
    a, b = draw(st.integers(1, 3)), draw(st.integers(-3, 3))
    rational = draw(polynomials((X,))) / draw(st.sampled_from([1, X**2 + 1, X**2 + 2 * X + 5]))
    return rational * FUNCTIONS[index](a * X + b), index


def rewritten(expr: sympy.Expr) -> sympy.Expr:
    """The same function in other terms: trig in sin and cos, hyperbolic in exp, angles expanded."""
    out = expr.rewrite(sympy.sin, sympy.cos) if expr.has(sympy.tan, sympy.sec) else expr
    out = out.rewrite(sympy.exp) if out.has(sympy.sinh, sympy.cosh, sympy.tanh) else out
    out = sympy.expand_trig(out)
    return sympy.expand(out) if not out.has(sympy.atan, sympy.asinh) else out


@given(elementary())
def test_rewrites_of_an_elementary_expression_pass(drawn: tuple[sympy.Expr, int]) -> None:
    key, _ = drawn
    answer = rewritten(key)
    assume(not answer.has(sympy.I))
    verdict = compare(key, wire.decode(wire.encode(answer)), Exact())
    assert verdict.ok, f"{key} vs {answer}: {verdict.reason}"


@given(elementary(), st.sampled_from(["changed constant", "changed exponent", "flipped sign",
                                      "another function"]), st.integers(1, len(FUNCTIONS) - 1))
def test_mutations_of_an_elementary_expression_fail_naming_a_point(drawn: tuple[sympy.Expr, int],
                                                                   mutation: str, shift: int) -> None:
    key, index = drawn
    other = FUNCTIONS[(index + shift) % len(FUNCTIONS)]
    answer = {
        "changed constant": 2 * key,
        "changed exponent": key**2,
        "flipped sign": -key,
        "another function": key.replace(FUNCTIONS[index], other),
    }[mutation]
    verdict = compare(key, answer, Exact())
    assert not verdict.ok
    assert "they differ at x=" in verdict.reason, verdict.reason


# -- symbols and assumptions ---------------------------------------------------------------------

@given(polynomials((P,)))
def test_root_of_a_square_equals_the_value_for_positive_symbols_only(polynomial: sympy.Expr) -> None:
    positive = sympy.Add(*(abs(c) * m for c, m in zip(*_coefficients(polynomial), strict=True)))
    root = sympy.Pow(sympy.Pow(positive, 2, evaluate=False), sympy.Rational(1, 2), evaluate=False)
    assert compare(positive, root).ok
    real = RX * positive  # changes sign with x
    real_root = sympy.Pow(sympy.Pow(real, 2, evaluate=False), sympy.Rational(1, 2), evaluate=False)
    verdict = compare(real, real_root)
    assert not verdict.ok and "x=-" in verdict.reason, verdict.reason


def _coefficients(polynomial: sympy.Expr) -> tuple[list, list]:
    terms = sympy.Poly(polynomial, P).terms()
    return [c for _, c in terms], [P**e for (e,), _ in terms]


@given(rational_functions(), st.sampled_from(["z", "p_2"]))
def test_an_answer_in_another_symbol_fails_naming_it(key: sympy.Expr, name: str) -> None:
    symbol = sorted(key.free_symbols, key=str)[0]
    renamed = key.subs(symbol, sympy.Symbol(name, **_assumptions(symbol)))
    verdict = compare(key, renamed, Exact())
    assert not verdict.ok
    assert f"the answer has the symbol {name}, which the reference does not have" in verdict.reason


@given(rational_functions())
def test_the_same_name_under_other_assumptions_fails_naming_it(key: sympy.Expr) -> None:
    symbol = sorted(key.free_symbols, key=str)[0]
    other = sympy.Symbol(symbol.name, negative=True) if _assumptions(symbol) else sympy.Symbol(symbol.name,
                                                                                                real=True)
    verdict = compare(key, key.subs(symbol, other), Exact())
    assert not verdict.ok
    assert f"the answer's symbol {symbol.name} has assumptions" in verdict.reason


def _assumptions(symbol: sympy.Symbol) -> dict[str, bool]:
    return dict.fromkeys(wire.symbol_domain(symbol), True)


# -- math-verify's issues: its false passes fail, and the pairs exactgrade refused before pass ------

MATH_VERIFY_PAIRS = [
    ("#14 e", 1 - 1 / sympy.E, 1 + 1 / sympy.E, False),
    ("#14 powers", sympy.Rational(1, 2**99), sympy.Rational(1, 2**98), False),
    ("#14 powers unevaluated", sympy.Pow(sympy.Pow(2, 99, evaluate=False), -1, evaluate=False),
     sympy.Pow(sympy.Pow(2, 98, evaluate=False), -1, evaluate=False), False),
    ("#14 factorials", 1 / sympy.factorial(2004), 1 / sympy.factorial(2006), False),
    ("#41 root", sympy.Integer(4), 4 * sympy.sqrt(2), False),
    ("refused before: linear", (X + 2) / 7, X / 7 + sympy.Rational(2, 7), True),
    ("refused before: tan-sec", sympy.tan(Y) ** 2 + 1, sympy.sec(Y) ** 2, True),
]


@pytest.mark.parametrize(("key", "answer", "equal"), [row[1:] for row in MATH_VERIFY_PAIRS],
                         ids=[row[0] for row in MATH_VERIFY_PAIRS])
def test_math_verify_issue_pairs(key: sympy.Expr, answer: sympy.Expr, equal: bool) -> None:
    verdict = compare(key, answer, Exact())
    assert verdict.ok is equal, verdict.reason
    assert equal or "differ" in verdict.reason, verdict.reason
