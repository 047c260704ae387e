"""Backprop tasks (dl-009..dl-016): exact forward passes and gradients of small ReLU networks.

Every network is piecewise linear (affine layers, ReLU, squared error) with rational weights,
so activations, losses and gradients are exact Fractions. verify cross-checks every gradient
against an exact symmetric finite difference (exactgrade.rational.finite_difference), which
refuses to straddle a ReLU kink.

Families: mlp_forward (dl-009) and mlp_gradient (dl-010..016). The gradient sampler draws one
variant per instance (plain, dead unit, input gradient, batch mean, deep, multi-output,
identical units) on a network whose width, depth and batch grow with the level; weights are
multiples of 1/4, inputs of 1/2, targets of 1/4, so every pre-activation is a multiple of 1/32
or coarser and a finite-difference step of 1/1024 keeps far from every kink (the check refuses
the instance otherwise). Tags, zero_reason and the identical-unit pairs are derived from the
inputs by the builder, so a canonical task and a generated one are described alike.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.backprop.mlp_forward import MLP_FORWARD
from exactgrade.domains.deeplearning.backprop.mlp_gradient import MLP_GRADIENT, _all_names
from exactgrade.domains.deeplearning.backprop.shared import _layer

FAMILIES = (MLP_FORWARD, MLP_GRADIENT)


# 2-3-1, one hidden unit negative on the first example, a different one on the second.
_NET_231 = {"layers": [_layer([[1, -1], [F(1, 2), 2], [-1, F(1, 4)]], [F(1, 4), F(-1, 2), F(1, 8)], "relu"),
                       _layer([[2, -1, F(1, 2)]], [F(1, 4)], "identity")]}


_BATCH_231 = [{"x": [1, F(1, 2)], "t": [1]}, {"x": [F(-1, 2), 1], "t": [F(1, 2)]}]

_NET_221 = {"layers": [_layer([[1, -1], [F(1, 2), 1]], [0, F(-1, 4)], "relu"),
                       _layer([[2, -1]], [F(1, 8)], "identity")]}


_BATCH_221 = [{"x": [1, F(1, 2)], "t": [1]}]

# Hidden unit 1 has z = -3/4 < 0 on this input: every gradient through it is exactly 0.
_NET_DEAD = {"layers": [_layer([[1, F(1, 2)], [-1, F(-1, 4)]], [F(1, 4), F(1, 2)], "relu"),
                        _layer([[F(3, 2), 2]], [0], "identity")]}


_BATCH_DEAD = [{"x": [1, 1], "t": [F(1, 2)]}]

_NET_321 = {"layers": [_layer([[1, 0, -1], [F(1, 2), -1, 1]], [F(1, 8), 0], "relu"),
                       _layer([[F(3, 4), -2]], [F(-1, 4)], "identity")]}


_BATCH_321 = [{"x": [2, F(-1, 2), F(1, 2)], "t": [F(1, 4)]}]

_NET_BATCH = {"layers": [_layer([[1, -2], [-1, 1]], [F(1, 4), F(1, 4)], "relu"),
                         _layer([[1, 2]], [0], "identity")]}


_BATCH_THREE = [{"x": [1, F(1, 4)], "t": [1]}, {"x": [0, 1], "t": [0]}, {"x": [F(1, 2), F(1, 2)], "t": [2]}]

_NET_DEEP = {"layers": [_layer([[1, -1], [F(1, 2), F(1, 2)], [-1, 2]], [0, F(1, 4), F(1, 4)], "relu"),
                        _layer([[1, -1, F(1, 2)], [F(-1, 2), 1, 1]], [F(1, 8), 0], "relu"),
                        _layer([[2, -1]], [F(1, 2)], "identity")]}


_BATCH_DEEP = [{"x": [1, F(1, 2)], "t": [-1]}]

_NET_TWO_OUT = {"layers": [_layer([[1, 1], [1, -1]], [0, F(1, 2)], "relu"),
                           _layer([[1, F(-1, 2)], [F(1, 4), 1]], [F(1, 2), -1], "identity")]}


_BATCH_TWO_OUT = [{"x": [F(1, 2), F(1, 4)], "t": [1, F(-1, 2)]}]

# Two hidden units with identical incoming and outgoing weights: identical gradients, forever.
_NET_SYMMETRIC = {"layers": [_layer([[F(1, 2), F(1, 4)], [F(1, 2), F(1, 4)]], [F(1, 8), F(1, 8)], "relu"),
                             _layer([[F(3, 4), F(3, 4)]], [0], "identity")]}


_BATCH_SYMMETRIC = [{"x": [1, 2], "t": [2]}, {"x": [2, -1], "t": [-1]}]


def _gradient_task(task_id, network, batch, wrt):
    return MLP_GRADIENT.task(task_id, {"network": network, "batch": batch, "wrt": wrt})


def _names(text):
    return text.split()


TASKS = (
    MLP_FORWARD.task("dl-009", {"network": _NET_231, "batch": _BATCH_231}),
    _gradient_task("dl-010", _NET_221, _BATCH_221, _all_names(_NET_221)),
    _gradient_task("dl-011", _NET_DEAD, _BATCH_DEAD, _all_names(_NET_DEAD)),
    _gradient_task("dl-012", _NET_321, _BATCH_321, ["x[0]", "x[1]", "x[2]"]),
    _gradient_task("dl-013", _NET_BATCH, _BATCH_THREE,
                   _names("W1[0][0] W1[0][1] W1[1][0] W1[1][1] b1[0] b1[1] W2[0][0] W2[0][1]")),
    _gradient_task("dl-014", _NET_DEEP, _BATCH_DEEP,
                   _names("W1[0][0] W1[0][1] W1[1][0] W1[1][1] W1[2][0] W1[2][1] b1[0] b1[2]")),
    _gradient_task("dl-015", _NET_TWO_OUT, _BATCH_TWO_OUT,
                   _names("W2[0][0] W2[0][1] W2[1][0] W2[1][1] b2[0] b2[1] W1[0][0] W1[1][1]")),
    _gradient_task("dl-016", _NET_SYMMETRIC, _BATCH_SYMMETRIC,
                   _names("W1[0][0] W1[1][0] W1[0][1] W1[1][1] b1[0] b1[1] W2[0][0] W2[0][1]")),
)
