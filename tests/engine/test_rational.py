"""exactgrade.rational: exact values and exact types, and refusals with clear errors."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
import sympy

from exactgrade import rational
from exactgrade.rational import (
    ConversionError,
    KinkError,
    NotADistributionError,
    NotDyadicError,
    RationalError,
    ShapeError,
    SingularMatrixError,
)

P = [F(1, 2), F(1, 4), F(1, 8), F(1, 8)]
UNIFORM4 = [F(1, 4)] * 4
ROTATED = [F(1, 4), F(1, 8), F(1, 8), F(1, 2)]


def assert_typed_equal(actual, expected):
    assert type(actual) is type(expected), f"{type(actual).__name__} != {type(expected).__name__}"
    assert actual == expected


# ------------------------------------------------------------------------------ dyadic logs

@pytest.mark.parametrize(("p", "log2"), [(1, 0), (2, 1), (1024, 10), (F(1, 2), -1), (F(1, 8), -3),
                                         (F(4, 1), 2), (F(1, 2**70), -70)])
def test_log2_dyadic_is_an_exact_int(p, log2):
    assert_typed_equal(rational.log2_dyadic(p), log2)
    assert rational.is_dyadic(p)


@pytest.mark.parametrize("p", [F(3, 8), F(3, 4), 3, 0, F(-1, 2), -4, F(2, 3)])
def test_log2_dyadic_refuses_non_powers_of_two(p):
    with pytest.raises(NotDyadicError, match="not an integer power of two"):
        rational.log2_dyadic(p)
    assert not rational.is_dyadic(p)


def test_errors_are_value_errors():
    for error in (NotDyadicError, NotADistributionError, SingularMatrixError, ShapeError, KinkError,
                  ConversionError):
        assert issubclass(error, RationalError) and issubclass(error, ValueError)


@pytest.mark.parametrize("p", [0.5, True, "1/2"])
def test_log2_dyadic_rejects_non_rational_types(p):
    with pytest.raises(TypeError, match="expected int or Fraction"):
        rational.log2_dyadic(p)


# ------------------------------------------------------------------------------ information

@pytest.mark.parametrize(("p", "bits"), [
    (P, F(7, 4)),
    (UNIFORM4, F(2)),
    ([F(1, 2), F(1, 2)], F(1)),
    ([1], F(0)),
    ([F(1, 2), 0, F(1, 2)], F(1)),  # 0 * log 0 = 0
    ([F(1, 2)] + [F(1, 8)] * 4, F(2)),
])
def test_entropy_bits_is_a_fraction(p, bits):
    assert_typed_equal(rational.entropy_bits(p), bits)


def test_entropy_nats_is_bits_times_log2_exactly():
    nats = rational.entropy_nats(P)
    assert isinstance(nats, sympy.Expr)
    assert nats == 7 * sympy.log(2) / 4
    assert nats != sympy.Rational(7, 4)
    assert not nats.atoms(sympy.Float)


@pytest.mark.parametrize(("p", "q", "cross", "kl"), [
    (P, UNIFORM4, F(2), F(1, 4)),
    (UNIFORM4, P, F(9, 4), F(1, 4)),  # symmetric by coincidence
    (P, ROTATED, F(9, 4), F(1, 2)),
    (ROTATED, P, F(19, 8), F(5, 8)),  # ... but not in general
    (P, P, F(7, 4), F(0)),
])
def test_cross_entropy_and_kl_bits(p, q, cross, kl):
    assert_typed_equal(rational.cross_entropy_bits(p, q), cross)
    assert_typed_equal(rational.kl_bits(p, q), kl)
    assert rational.kl_nats(p, q) == kl * sympy.log(2)


@pytest.mark.parametrize(("p", "q", "error", "reason"), [
    ([F(1, 2), F(1, 4)], [F(1, 2), F(1, 2)], NotADistributionError, "sum to 3/4"),
    ([F(3, 2), F(-1, 2)], [F(1, 2), F(1, 2)], NotADistributionError, ">= 0"),
    ([F(1, 2), F(1, 2)], [1, 0], NotADistributionError, "cross-entropy is infinite"),
    ([F(1, 2), F(1, 2)], [F(1, 4)] * 4, ShapeError, "2 outcomes"),
    ([F(1, 4), F(3, 4)], [F(1, 2), F(1, 2)], NotDyadicError, "3/4"),
])
def test_divergence_refusals(p, q, error, reason):
    with pytest.raises(error, match=reason):
        rational.kl_bits(p, q)


@pytest.mark.parametrize(("joint", "mi"), [
    ([[F(1, 4), F(1, 4)], [F(1, 4), F(1, 4)]], F(0)),  # a dyadic split of a binary axis: independent
    ([[F(1, 2), 0], [0, F(1, 2)]], F(1)),  # B = A
    # B = f(A) not invertible: I = H(B)
    ([[F(1, 4), 0, 0], [F(1, 4), 0, 0], [0, F(1, 8), 0], [0, F(1, 8), 0], [0, 0, F(1, 4)]], F(3, 2)),
])
def test_mutual_information_bits(joint, mi):
    assert_typed_equal(rational.mutual_information_bits(joint), mi)
    assert rational.mutual_information_nats(joint) == mi * sympy.log(2)


def test_mutual_information_refuses_a_non_dyadic_marginal():
    with pytest.raises(NotDyadicError, match="3/8"):
        rational.mutual_information_bits([[F(1, 4), F(1, 8)], [F(1, 8), F(1, 2)]])


def test_marginals_are_row_and_column_sums():
    pa, pb = rational.marginals([[F(1, 4), F(1, 8)], [F(1, 8), F(1, 2)]])
    assert pa == (F(3, 8), F(5, 8)) and pb == (F(3, 8), F(5, 8))
    assert all(type(x) is F for x in pa + pb)


# ------------------------------------------------------------------------------ matrices

A = [[2, 1, 0], [1, 3, 1], [0, 1, 4]]


@pytest.mark.parametrize(("matrix", "det", "rank"), [
    (A, F(18), 3),
    ([[1, 2], [2, 4]], F(0), 1),
    ([[0, 1], [1, 0]], F(-1), 2),  # needs a row swap
    ([[F(1, 2), F(1, 3)], [F(1, 4), F(1, 5)]], F(1, 60), 2),
    ([[0, 0], [0, 0]], F(0), 0),
])
def test_determinant_and_rank(matrix, det, rank):
    assert_typed_equal(rational.determinant(matrix), det)
    assert_typed_equal(rational.rank(matrix), rank)


def test_inverse_times_matrix_is_identity():
    inverse = rational.inverse(A)
    assert inverse[0] == (F(11, 18), F(-2, 9), F(1, 18))
    assert rational.matmul(A, inverse) == rational.matrix.identity(3)
    assert all(type(x) is F for row in inverse for x in row)


def test_solve_and_transpose_and_matvec():
    x = rational.solve(A, [1, 2, 3])
    assert rational.matvec(A, x) == (F(1), F(2), F(3))
    assert all(type(v) is F for v in x)
    assert rational.transpose([[1, 2, 3], [4, 5, 6]]) == ((1, 4), (2, 5), (3, 6))
    assert rational.rank([[1, 2, 3, 4], [2, 1, 0, -1], [3, 3, 3, 3], [-1, 1, 3, 5]]) == 2


@pytest.mark.parametrize(("call", "error", "reason"), [
    (lambda: rational.inverse([[1, 2], [2, 4]]), SingularMatrixError, "singular"),
    (lambda: rational.solve([[1, 2], [2, 4]], [1, 1]), SingularMatrixError, "singular"),
    (lambda: rational.matmul([[1, 2]], [[1, 2]]), ShapeError, "cannot multiply 1x2 by 1x2"),
    (lambda: rational.determinant([[1, 2, 3], [4, 5, 6]]), ShapeError, "square"),
    (lambda: rational.solve(A, [1, 2]), ShapeError, "2 entries"),
    (lambda: rational.rank([[1, 2], [3]]), ShapeError, "rectangular"),
])
def test_matrix_refusals(call, error, reason):
    with pytest.raises(error, match=reason):
        call()


# ------------------------------------------------------------------------------ conversions

@pytest.mark.parametrize(("x", "q"), [(0.5, F(1, 2)), (0.1, F(3602879701896397, 2**55)), (-3.0, F(-3)),
                                      (5e-324, F(1, 2**1074))])
def test_fraction_from_float_is_exact(x, q):
    assert_typed_equal(rational.fraction_from_float(x), q)


@pytest.mark.parametrize("x", [float("nan"), float("inf"), float("-inf")])
def test_fraction_from_float_refuses_non_finite(x):
    with pytest.raises(ConversionError, match="no exact rational value"):
        rational.fraction_from_float(x)


@pytest.mark.parametrize("x", [1, F(1, 2), "0.5", True])
def test_fraction_from_float_takes_only_floats(x):
    with pytest.raises(TypeError, match="expected float"):
        rational.fraction_from_float(x)


def test_sympy_round_trip():
    s = rational.to_sympy(F(-7, 4))
    assert_typed_equal(s, sympy.Rational(-7, 4))
    assert_typed_equal(rational.to_sympy(3), sympy.Integer(3))
    assert_typed_equal(rational.from_sympy(s), F(-7, 4))
    assert_typed_equal(rational.from_sympy(sympy.Integer(5)), F(5))


@pytest.mark.parametrize(("value", "error", "reason"), [
    (sympy.sqrt(2), ConversionError, "not a rational"),
    (sympy.log(2), ConversionError, "not a rational"),
    (sympy.Float(0.5), ConversionError, "not a rational"),
    ("1/2", TypeError, "expected a sympy value"),  # a string is never sympified
    (F(1, 2), TypeError, "expected a sympy value"),
])
def test_from_sympy_refusals(value, error, reason):
    with pytest.raises(error, match=reason):
        rational.from_sympy(value)


@pytest.mark.parametrize("value", [0.5, "1/2", True])
def test_to_sympy_and_as_fraction_take_only_int_or_fraction(value):
    with pytest.raises(TypeError, match="expected int or Fraction"):
        rational.to_sympy(value)
    with pytest.raises(TypeError, match="expected int or Fraction"):
        rational.as_fraction(value)


def test_as_fraction():
    assert_typed_equal(rational.as_fraction(3), F(3))
    assert_typed_equal(rational.as_fraction(F(1, 3)), F(1, 3))


# ------------------------------------------------------------------------------ piecewise-linear networks

def layer(W, b, activation):
    return {"W": W, "b": b, "activation": activation}


NET = {"layers": [layer([[1, -1], [F(1, 2), 1]], [0, F(-1, 4)], "relu"),
                  layer([[2, -1]], [F(1, 8)], "identity")]}
BATCH = [{"x": [1, F(1, 2)], "t": [1]}]
GRADIENTS = {"W1[0][0]": F(-5, 4), "W1[0][1]": F(-5, 8), "W1[1][0]": F(5, 8), "W1[1][1]": F(5, 16),
             "b1[0]": F(-5, 4), "b1[1]": F(5, 8), "W2[0][0]": F(-5, 16), "W2[0][1]": F(-15, 32),
             "b2[0]": F(-5, 8), "x[0]": F(-15, 16), "x[1]": F(15, 8)}


def test_affine_relu_squared_error():
    z = rational.piecewise.affine([[1, -1], [F(1, 2), 1]], [0, F(-1, 4)], [F(1), F(1, 2)])
    assert z == (F(1, 2), F(3, 4))
    assert rational.piecewise.relu((F(-1), F(2), F(0))) == (0, 2, 0)
    assert_typed_equal(rational.piecewise.squared_error([F(3, 4)], [F(1)]), F(1, 32))


def test_forward_and_loss():
    trace = rational.forward(rational.piecewise.layers(NET), [F(1), F(1, 2)])
    assert trace.pre == ((F(1, 2), F(3, 4)), (F(3, 8),))
    assert trace.output == (F(3, 8),)
    assert_typed_equal(rational.loss(NET, BATCH), F(25, 128))


def test_backprop_gradients_are_exact():
    grads = rational.gradients(NET, BATCH)
    assert grads == GRADIENTS
    assert all(type(g) is F for g in grads.values())


@pytest.mark.parametrize("name", sorted(GRADIENTS))
@pytest.mark.parametrize("h", [F(1, 1024), F(1, 8)])
def test_finite_difference_equals_the_derivative_exactly(name, h):
    """The loss is quadratic in one parameter inside a linear region: no truncation error at any h."""
    assert_typed_equal(rational.finite_difference(NET, BATCH, name, h), GRADIENTS[name])


@pytest.mark.parametrize(("name", "h", "reason"), [
    ("W1[0][0]", F(1), "straddles a ReLU kink: example 0 layer 1 unit 0 pre-activation signs -1, \\+1, \\+1"),
    ("b1[1]", F(3, 4), "signs \\+0, \\+1, \\+1"),  # p - h puts the pre-activation exactly at the kink
    ("x[1]", F(1, 2), "straddles a ReLU kink"),
])
def test_finite_difference_refuses_a_kink(name, h, reason):
    with pytest.raises(KinkError, match=reason):
        rational.finite_difference(NET, BATCH, name, h)


def test_backprop_refuses_a_pre_activation_at_zero():
    at_kink = {"layers": [layer([[1, -2]], [0], "relu"), layer([[1]], [0], "identity")]}
    with pytest.raises(KinkError, match="exactly 0"):
        rational.gradients(at_kink, [{"x": [2, 1], "t": [1]}])
    with pytest.raises(KinkError, match="\\+1, \\+0, -1|-1, \\+0, \\+1"):
        rational.finite_difference(at_kink, [{"x": [2, 1], "t": [1]}], "b1[0]", F(1, 1024))


def test_identity_layers_have_no_kinks():
    linear = {"layers": [layer([[1, -2]], [0], "identity"), layer([[3]], [0], "identity")]}
    batch = [{"x": [2, 1], "t": [1]}]
    exact = rational.gradients(linear, batch)["b1[0]"]
    assert rational.finite_difference(linear, batch, "b1[0]", F(5)) == exact


def test_batch_gradient_is_the_mean():
    batch = BATCH + [{"x": [F(1, 2), 1], "t": [0]}]
    mean = rational.gradients(NET, batch)
    single = [rational.gradients(NET, [e]) for e in batch]
    assert mean["W2[0][1]"] == (single[0]["W2[0][1]"] + single[1]["W2[0][1]"]) / 2
    assert "x[0]" not in mean  # input gradients only for one-example batches
    assert rational.finite_difference(NET, batch, "W2[0][1]", F(1, 64)) == mean["W2[0][1]"]


@pytest.mark.parametrize(("network", "batch", "name", "reason"), [
    (NET, BATCH, "W3[0][0]", "no parameter 'W3\\[0\\]\\[0\\]'"),
    (NET, BATCH, "w1[0][0]", "not a parameter name"),
    (NET, BATCH, "W0[0][0]", "layers count from 1 to 2"),
    (NET, BATCH, "W1[5][0]", "no parameter 'W1\\[5\\]\\[0\\]' in this network"),
    (NET, BATCH, "b1[0][0]", "a bias has one index"),
    (NET, BATCH + BATCH, "x[0]", "one-example batch"),
    ({"layers": [layer([[1, 1]], [0, 0], "relu")]}, BATCH, "b1[0]", "one bias per row"),
    ({"layers": [layer([[1, 1]], [0], "tanh")]}, BATCH, "b1[0]", "activation 'tanh'"),
    ({"layers": [layer([[1, 1]], [0], "relu"), layer([[1, 1]], [0], "relu")]}, BATCH, "b1[0]",
     "takes 2 inputs"),
])
def test_network_refusals(network, batch, name, reason):
    with pytest.raises(ShapeError, match=reason):
        rational.finite_difference(network, batch, name, F(1, 1024))
