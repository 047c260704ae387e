"""Exact conversions between float, Fraction and sympy numbers.

A float is converted to the exact rational it stores (Fraction(0.1) is 3602879701896397/2**55,
not 1/10); NaN and infinities have no rational value and are refused. sympy values are built
from Python ints only, never from strings (sympify of a string runs eval).
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.rational.errors import ConversionError


def as_fraction(q: int | Fraction) -> Fraction:
    """Fraction(q) for an int or Fraction; TypeError for anything else (a float needs
    fraction_from_float, a bool is not a number here)"""
    if type(q) is int or type(q) is Fraction:
        return Fraction(q)
    raise TypeError(f"expected int or Fraction, got {type(q).__name__}")


def fraction_from_float(x: float) -> Fraction:
    """the exact rational value of a finite float; ConversionError for NaN or +-inf"""
    if type(x) is not float:
        raise TypeError(f"expected float, got {type(x).__name__}")
    if math.isnan(x) or math.isinf(x):
        raise ConversionError(f"{x!r} has no exact rational value")
    return Fraction(*x.as_integer_ratio())


def to_sympy(q: int | Fraction):  # -> sympy.Rational
    """sympy.Rational(q), built from the numerator and denominator ints"""
    import sympy

    if type(q) is int:
        return sympy.Integer(q)
    if type(q) is Fraction:
        return sympy.Rational(q.numerator, q.denominator)
    raise TypeError(f"expected int or Fraction, got {type(q).__name__}")


def from_sympy(value) -> Fraction:
    """Fraction(value) for a sympy Integer or Rational; ConversionError for anything irrational"""
    import sympy

    if not isinstance(value, sympy.Basic):
        raise TypeError(f"expected a sympy value, got {type(value).__name__}")
    if not isinstance(value, sympy.Rational):
        raise ConversionError(f"a {type(value).__name__} is not a rational number")
    return Fraction(int(value.p), int(value.q))
