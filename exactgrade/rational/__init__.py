"""Exact helpers for the domains: dyadic logs, information in bits and nats, matrices over Q,
piecewise-linear networks with an exact finite difference, and exact conversions."""

from exactgrade.rational.convert import as_fraction, fraction_from_float, from_sympy, to_sympy
from exactgrade.rational.dyadic import is_dyadic, log2_dyadic
from exactgrade.rational.errors import (
    ConversionError,
    KinkError,
    NotADistributionError,
    NotDyadicError,
    RationalError,
    ShapeError,
    SingularMatrixError,
)
from exactgrade.rational.information import (
    bits_to_nats,
    cross_entropy_bits,
    cross_entropy_nats,
    entropy_bits,
    entropy_nats,
    kl_bits,
    kl_nats,
    marginals,
    mutual_information_bits,
    mutual_information_nats,
)
from exactgrade.rational.matrix import determinant, inverse, matmul, matvec, rank, solve, transpose
from exactgrade.rational.piecewise import finite_difference, forward, gradients, loss

__all__ = [
    "as_fraction",
    "ConversionError",
    "KinkError",
    "NotADistributionError",
    "NotDyadicError",
    "RationalError",
    "ShapeError",
    "SingularMatrixError",
    "bits_to_nats",
    "cross_entropy_bits",
    "cross_entropy_nats",
    "determinant",
    "entropy_bits",
    "entropy_nats",
    "finite_difference",
    "forward",
    "fraction_from_float",
    "from_sympy",
    "gradients",
    "inverse",
    "is_dyadic",
    "kl_bits",
    "kl_nats",
    "log2_dyadic",
    "loss",
    "marginals",
    "matmul",
    "matvec",
    "mutual_information_bits",
    "mutual_information_nats",
    "rank",
    "solve",
    "to_sympy",
    "transpose",
]
