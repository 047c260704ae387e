"""An expression tree -> an exact value: a Fraction while the value is rational, else sympy.

Rational arithmetic is done exactly as it is read (``2^{10}`` is 1024, ``\\frac{6}{4}`` is 3/2,
``\\sqrt{9/4}`` is 3/2, ``\\log_2 8`` is 3), within the integer cap, so a rational answer is an
int or a Fraction as a sandbox read-back of the same number would be. Anything irrational is
built as sympy nodes without evaluation (the wire's own builders: Add, Mul, Pow, the wire's
functions, pi, E and the declared symbols), because sympy's automatic evaluation of an
untrusted tree can run for minutes. The value then goes through wire.encode and wire.decode:
what a sandbox read-back of that expression gives, checked by the wire's own caps.

Roots are real roots: ``\\sqrt[3]{-8}`` is -2 (sympy's principal cube root would be complex); an
even root of a negative rational is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from exactgrade import wire
from exactgrade.text.grammar import Node
from exactgrade.text.limits import MAX_BITS, MAX_EXPONENT, MAX_FACTORIAL, MAX_INT_DIGITS, TextError

_INT_LIMIT = 10**MAX_INT_DIGITS


def build(node: Node, symbols: Mapping[str, Any]) -> int | Fraction | Any:
    """The exact value of a tree: int, Fraction, or an unevaluated sympy expression."""
    value = _value(node, symbols)
    if type(value) is Fraction:
        return value.numerator if value.denominator == 1 else value
    try:
        return wire.decode(wire.encode(value))
    except wire.WireError as error:
        raise TextError(str(error)) from None


def _sympy() -> Any:
    import sympy

    return sympy


def _checked(q: Fraction) -> Fraction:
    if abs(q.numerator) >= _INT_LIMIT or q.denominator >= _INT_LIMIT:
        raise TextError(f"a value with more than {MAX_INT_DIGITS} digits")
    return q


def _symbolic(x: Fraction | Any) -> Any:
    if type(x) is not Fraction:
        return x
    sympy = _sympy()
    return sympy.Integer(x.numerator) if x.denominator == 1 else sympy.Rational(x.numerator, x.denominator)


def _value(node: Node, symbols: Mapping[str, Any]) -> Fraction | Any:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "pi":
        return _sympy().pi
    if kind == "e":
        return _sympy().E
    if kind == "sym":
        return symbols[node[1]]
    if kind == "neg":
        x = _value(node[1], symbols)
        return -x if type(x) is Fraction else _sympy().Mul(-1, x, evaluate=False)
    if kind == "add":
        return _combine([_value(term, symbols) for term in node[1]], "Add")
    if kind == "mul":
        return _combine([_value(factor, symbols) for factor in node[1]], "Mul")
    if kind == "div":
        return _divide(_value(node[1], symbols), _value(node[2], symbols))
    if kind == "pow":
        return _power(_value(node[1], symbols), _value(node[2], symbols))
    if kind == "root":
        return _root(_value(node[1], symbols), node[2])
    if kind == "func":
        x = _value(node[2], symbols)
        if node[1] == "exp" and x == 0:
            return Fraction(1)
        return getattr(_sympy(), node[1])(_symbolic(x), evaluate=False)
    if kind == "log":
        return _logarithm(_value(node[1], symbols), _value(node[2], symbols))
    if kind == "fact":
        return _factorial(_value(node[1], symbols))
    raise TextError(f"{kind} is not read here")


def _combine(values: list[Fraction | Any], operation: str) -> Fraction | Any:
    """A sum or product: rational parts folded exactly, the rest kept as unevaluated sympy."""
    rational = Fraction(0 if operation == "Add" else 1)
    others = []
    for value in values:
        if type(value) is Fraction:
            rational = _checked(rational + value if operation == "Add" else rational * value)
        else:
            others.append(value)
    if not others:
        return rational
    sympy = _sympy()
    identity = 0 if operation == "Add" else 1
    args = ([] if rational == identity else [_symbolic(rational)]) + others
    return args[0] if len(args) == 1 else getattr(sympy, operation)(*args, evaluate=False)


def _divide(x: Fraction | Any, y: Fraction | Any) -> Fraction | Any:
    if type(y) is Fraction:
        if y == 0:
            raise TextError("division by zero")
        if type(x) is Fraction:
            return _checked(x / y)
    reciprocal = _power(y, Fraction(-1))
    if type(x) is Fraction and x == 1:
        return reciprocal
    return _combine([x, reciprocal], "Mul")


def _power(base: Fraction | Any, exponent: Fraction | Any) -> Fraction | Any:
    sympy = _sympy() if type(base) is not Fraction or type(exponent) is not Fraction else None
    if sympy is not None:
        if type(exponent) is Fraction:
            _check_exponent(exponent)
        return sympy.Pow(_symbolic(base), _symbolic(exponent), evaluate=False)
    _check_exponent(exponent)
    if exponent.denominator == 1:
        return _integer_power(base, exponent.numerator)
    if base < 0:
        if exponent.denominator % 2 == 0:
            raise TextError("an even root of a negative number is not a real number")
        magnitude = _power(-base, exponent)
        return -magnitude if type(magnitude) is Fraction else _sympy().Mul(-1, magnitude, evaluate=False)
    root = _exact_root(base, exponent.denominator)
    if root is not None:
        return _integer_power(root, exponent.numerator)
    return _sympy().Pow(_symbolic(base), _symbolic(exponent), evaluate=False)


def _check_exponent(exponent: Fraction) -> None:
    if max(abs(exponent.numerator), exponent.denominator) > MAX_EXPONENT:
        raise TextError(f"an exponent larger than {MAX_EXPONENT}")


def _integer_power(base: Fraction, n: int) -> Fraction | Any:
    if base == 0:
        if n <= 0:
            raise TextError("0 to a power <= 0 is undefined")
        return Fraction(0)
    size = max(abs(base.numerator).bit_length(), base.denominator.bit_length())
    if abs(base) != 1 and (size - 1) * abs(n) > MAX_BITS:  # beyond the integer cap: keep it a power
        sympy = _sympy()
        return sympy.Pow(_symbolic(base), sympy.Integer(n), evaluate=False)
    return _checked(base**n)


def _exact_root(q: Fraction, n: int) -> Fraction | None:
    """q**(1/n) when it is rational (q >= 0), else None."""
    top, bottom = _integer_root(q.numerator, n), _integer_root(q.denominator, n)
    return Fraction(top, bottom) if top is not None and bottom is not None else None


def _integer_root(m: int, n: int) -> int | None:
    if m < 2:
        return m
    if n == 2:
        r = math.isqrt(m)
        return r if r * r == m else None
    if n > m.bit_length():
        return None  # 2**n > m: only 1 and 0 have such roots
    r = 1 << -(-m.bit_length() // n)  # r >= the root; Newton's method descends to it
    while True:
        s = ((n - 1) * r + m // r ** (n - 1)) // n
        if s >= r:
            break
        r = s
    return r if r**n == m else None


def _root(x: Fraction | Any, n: int) -> Fraction | Any:
    return _power(x, Fraction(1, n))


def _logarithm(x: Fraction | Any, base: Fraction | Any) -> Fraction | Any:
    """log_base(x): an integer when x is an exact integer power of a rational base."""
    if type(x) is Fraction and type(base) is Fraction:
        if base <= 0 or base == 1:
            raise TextError("a logarithm's base must be positive and not 1")
        if x <= 0:
            raise TextError("the logarithm of a number <= 0 is not a real number")
        k = round(_log(x) / _log(base))
        if (
            abs(k) <= MAX_EXPONENT
            and abs(k) * max(base.numerator.bit_length(), base.denominator.bit_length()) <= MAX_BITS + 64
            and base**k == x
        ):
            return Fraction(k)
    sympy = _sympy()
    return _divide(sympy.log(_symbolic(x), evaluate=False), sympy.log(_symbolic(base), evaluate=False))


def _log(q: Fraction) -> float:
    return math.log(q.numerator) - math.log(q.denominator)


def _factorial(x: Fraction | Any) -> Fraction:
    if type(x) is not Fraction or x.denominator != 1 or x < 0:
        raise TextError("a factorial is read only of a non-negative integer")
    if x > MAX_FACTORIAL:
        raise TextError(
            f"{x}! has more than {MAX_INT_DIGITS} digits (factorials are read up to {MAX_FACTORIAL}!)"
        )
    return Fraction(math.factorial(int(x)))
