"""Errors raised by the rational toolkit: all are ValueErrors, so callers can catch one family."""


class RationalError(ValueError):
    """Base class: an input the exact toolkit refuses to work on."""


class NotDyadicError(RationalError):
    """A probability (or other value) that must be an integer power of two is not."""


class NotADistributionError(RationalError):
    """Probabilities that are negative or do not sum to exactly 1."""


class SingularMatrixError(RationalError):
    """Inverse or solve of a matrix whose determinant is exactly zero."""


class ShapeError(RationalError):
    """A matrix, vector or network whose dimensions do not fit together."""


class KinkError(RationalError):
    """A ReLU pre-activation is zero, or changes sign inside a finite-difference interval, so the
    piecewise-linear function is not differentiable there (or the difference would not be exact)."""


class ConversionError(RationalError):
    """A value that cannot be converted exactly (NaN, infinity, an irrational sympy value, a string)."""
