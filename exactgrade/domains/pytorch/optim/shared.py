"""What two or more optim families use (written once)."""

from __future__ import annotations

import struct
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.exact import hp, matmul, transpose, values


def mse_gradient(w, x, y):
    """d/dw mean((x @ w - y)^2) = 2/n x^T (x @ w - y), for nested-list x and vectors w, y."""
    residual = [p[0] - t for p, t in zip(matmul(x, [[e] for e in w]), y, strict=True)]
    return [2 * sum((c * r for c, r in zip(col, residual, strict=True)), Fraction(0)) / len(residual)
            for col in transpose(x)]


LOSS_MATH = """The loss is L(w) = mean((x @ w - y)^2), the mean over the rows of `x` of the squared residual,
    at the current w; w starts at `w0`; g denotes the gradient of L at the current w."""


def hp_rows(x, y):
    return [[hp(e) for e in row] for row in values(x)], [hp(e) for e in values(y)]


def loss_and_grad(w, xs, ys):
    residual = [
        mpmath.fsum(a * b for a, b in zip(row, w, strict=True)) - t for row, t in zip(xs, ys, strict=True)
    ]
    loss = mpmath.fsum(r * r for r in residual) / len(residual)
    grad = [
        2 * mpmath.fsum(row[j] * r for row, r in zip(xs, residual, strict=True)) / len(residual)
        for j in range(len(w))
    ]
    return loss, grad


def as_f32(value):
    return struct.unpack("<f", struct.pack("<f", float(value)))[0]


def goals_between(draw, losses, count=3):
    """Goals that fall between two distinct losses of a trajectory (one below all of them), as floats
    that keep a margin from every loss."""
    levels = sorted(set(losses))
    picks = []
    for k in draw.sample(range(len(levels) - 1), min(count - 1, len(levels) - 1)):
        picks.append(as_f32(mpmath.sqrt(levels[k] * levels[k + 1])))
    picks.append(as_f32(levels[0] / 2))
    return draw.shuffled(picks)


def goals_clear(losses_of):
    def refuse(inputs):
        losses = losses_of(inputs)
        for goal in values(inputs["goals"]):
            if any(abs(loss - hp(goal)) <= abs(hp(goal)) * mpmath.mpf("1e-6") for loss in losses):
                return "a goal lies within 1e-6 of a loss on the trajectory: too close to call"
        return None

    return refuse


def steps_vary(task):
    if len({row["steps"] for row in task.expected["rows"]}) < 2:
        return "every goal gives the same step count: a constant answer passes"
    return None
