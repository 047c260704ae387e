"""Exact forward and backward passes of piecewise-linear networks, and an exact finite difference.

A network is ``{"layers": [{"W": [[...]], "b": [...], "activation": "relu" | "identity"}, ...]}``
with rational weights. For one example ``{"x": [...], "t": [...]}`` the loss is the squared
error ``L = 1/2 * sum_k (y_k - t_k)**2``; for a batch it is the mean over examples. Parameters
are named ``W1[i][j]``, ``b1[i]`` (layers counted from 1) and, for a one-example batch, the
input ``x[i]``.

Every value here is an exact Fraction, so a gradient is a number, not an estimate. A ReLU has
no derivative where its pre-activation is exactly 0: backward refuses (KinkError).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from exactgrade.rational.convert import as_fraction
from exactgrade.rational.errors import KinkError, ShapeError

ACTIVATIONS = ("relu", "identity")
_NAME = re.compile(r"^(?:([Wb])(\d+)\[(\d+)\](?:\[(\d+)\])?|x\[(\d+)\])$")


@dataclass(frozen=True)
class Layer:
    """One affine layer followed by an activation."""

    W: tuple[tuple[Fraction, ...], ...]
    b: tuple[Fraction, ...]
    activation: str


@dataclass(frozen=True)
class Trace:
    """Forward pass of one example: pre-activations z and activations a of every layer."""

    x: tuple[Fraction, ...]
    pre: tuple[tuple[Fraction, ...], ...]
    post: tuple[tuple[Fraction, ...], ...]

    @property
    def output(self) -> tuple[Fraction, ...]:
        return self.post[-1]


Example = tuple[tuple[Fraction, ...], tuple[Fraction, ...]]


def layers(network: Mapping[str, Any]) -> tuple[Layer, ...]:
    """the network's layers, checked for shape and activation names"""
    result = []
    for n, spec in enumerate(network["layers"], start=1):
        W = tuple(tuple(as_fraction(w) for w in row) for row in spec["W"])
        b = tuple(as_fraction(x) for x in spec["b"])
        if not W or len({len(r) for r in W}) != 1 or len(b) != len(W):
            raise ShapeError(f"layer {n}: W must be rectangular with one bias per row")
        if result and len(W[0]) != len(result[-1].b):
            raise ShapeError(f"layer {n} takes {len(W[0])} inputs but layer {n - 1} "
                             f"has {len(result[-1].b)} units")
        if spec["activation"] not in ACTIVATIONS:
            raise ShapeError(f"layer {n}: activation {spec['activation']!r} not in {ACTIVATIONS}")
        result.append(Layer(W, b, spec["activation"]))
    if not result:
        raise ShapeError("a network needs at least one layer")
    return tuple(result)


def examples(batch: Sequence[Mapping[str, Any]]) -> tuple[Example, ...]:
    """the batch as (x, t) pairs of Fraction tuples"""
    if not batch:
        raise ShapeError("a batch needs at least one example")
    return tuple((tuple(map(as_fraction, e["x"])), tuple(map(as_fraction, e["t"]))) for e in batch)


def affine(W: Sequence[Sequence[Fraction]], b: Sequence[Fraction],
           x: Sequence[Fraction]) -> tuple[Fraction, ...]:
    """W @ x + b"""
    if any(len(row) != len(x) for row in W):
        raise ShapeError(f"W has rows of length {len(W[0])}, x has {len(x)} entries")
    return tuple(sum((w * xi for w, xi in zip(row, x, strict=True)), Fraction(0)) + bi
                 for row, bi in zip(W, b, strict=True))


def relu(z: Sequence[Fraction]) -> tuple[Fraction, ...]:
    """max(z, 0) elementwise"""
    return tuple(zi if zi > 0 else Fraction(0) for zi in z)


def squared_error(y: Sequence[Fraction], t: Sequence[Fraction]) -> Fraction:
    """1/2 * sum_k (y_k - t_k)**2"""
    if len(y) != len(t):
        raise ShapeError(f"output has {len(y)} entries, target has {len(t)}")
    return sum(((yi - ti) ** 2 for yi, ti in zip(y, t, strict=True)), Fraction(0)) / 2


def forward(net: Sequence[Layer], x: Sequence[Fraction]) -> Trace:
    """the forward pass of one example"""
    pre, post = [], []
    a = tuple(x)
    for layer in net:
        z = affine(layer.W, layer.b, a)
        a = relu(z) if layer.activation == "relu" else z
        pre.append(z)
        post.append(a)
    return Trace(tuple(x), tuple(pre), tuple(post))


def loss(network: Mapping[str, Any], batch: Sequence[Mapping[str, Any]]) -> Fraction:
    """mean over the batch of 1/2 * ||y - t||**2"""
    net = layers(network)
    data = examples(batch)
    return sum((squared_error(forward(net, x).output, t) for x, t in data), Fraction(0)) / len(data)


def _backward_one(net: Sequence[Layer], x: Sequence[Fraction], t: Sequence[Fraction]) -> dict[str, Fraction]:
    trace = forward(net, x)
    grads: dict[str, Fraction] = {}
    upstream = tuple(y - ti for y, ti in zip(trace.output, t, strict=True))  # dL/da of the last layer
    for n in range(len(net), 0, -1):
        layer = net[n - 1]
        z = trace.pre[n - 1]
        if layer.activation == "relu":
            for i, zi in enumerate(z):
                if zi == 0:
                    raise KinkError(f"layer {n} unit {i} has pre-activation exactly 0: "
                                    "ReLU has no derivative there")
            delta = tuple(g if zi > 0 else Fraction(0) for g, zi in zip(upstream, z, strict=True))
        else:
            delta = upstream
        inputs = trace.post[n - 2] if n > 1 else trace.x
        for i, d in enumerate(delta):
            grads[f"b{n}[{i}]"] = d
            for j, a in enumerate(inputs):
                grads[f"W{n}[{i}][{j}]"] = d * a
        upstream = tuple(sum((layer.W[i][j] * delta[i] for i in range(len(delta))), Fraction(0))
                         for j in range(len(inputs)))
    for j, g in enumerate(upstream):
        grads[f"x[{j}]"] = g
    return grads


def gradients(network: Mapping[str, Any], batch: Sequence[Mapping[str, Any]]) -> dict[str, Fraction]:
    """dL/dp for every parameter p (and dL/dx[i] when the batch has one example), by backprop"""
    net = layers(network)
    data = examples(batch)
    total: dict[str, Fraction] = {}
    for x, t in data:
        for name, g in _backward_one(net, x, t).items():
            total[name] = total.get(name, Fraction(0)) + g
    if len(data) > 1:
        total = {k: v for k, v in total.items() if not k.startswith("x[")}
    return {k: v / len(data) for k, v in total.items()}


def perturb(network: Mapping[str, Any], batch: Sequence[Mapping[str, Any]], name: str,
            delta: Fraction) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(network, batch) with the parameter or input called ``name`` increased by ``delta``"""
    match = _NAME.match(name)
    if match is None:
        raise ShapeError(f"{name!r} is not a parameter name like W1[0][1], b2[0] or x[0]")
    kind, layer, i, j, xi = match.groups()
    if layer is not None and not 1 <= int(layer) <= len(network["layers"]):
        raise ShapeError(f"no parameter {name!r}: layers count from 1 to {len(network['layers'])}")
    net = [{"W": [list(r) for r in L["W"]], "b": list(L["b"]), "activation": L["activation"]}
           for L in network["layers"]]
    data = [{"x": list(e["x"]), "t": list(e["t"])} for e in batch]
    try:
        if xi is not None:
            if len(data) != 1:
                raise ShapeError(f"{name}: input gradients need a one-example batch")
            data[0]["x"][int(xi)] = as_fraction(data[0]["x"][int(xi)]) + delta
        elif kind == "W":
            row = net[int(layer) - 1]["W"][int(i)]
            row[int(j)] = as_fraction(row[int(j)]) + delta
        else:
            if j is not None:
                raise ShapeError(f"{name!r}: a bias has one index")
            bias = net[int(layer) - 1]["b"]
            bias[int(i)] = as_fraction(bias[int(i)]) + delta
    except (IndexError, TypeError) as error:
        raise ShapeError(f"no parameter {name!r} in this network") from error
    return {"layers": net}, data


def _signs_and_loss(network: Mapping[str, Any], batch: Sequence[Mapping[str, Any]]
                    ) -> tuple[list[tuple[str, int]], Fraction]:
    """Every ReLU pre-activation's sign, and the batch loss, from one forward pass per example."""
    net, data = layers(network), examples(batch)
    signs, total = [], Fraction(0)
    for e, (x, t) in enumerate(data):
        trace = forward(net, x)
        total += squared_error(trace.output, t)
        for n, (layer, z) in enumerate(zip(net, trace.pre, strict=True), start=1):
            if layer.activation == "relu":
                signs += [(f"example {e} layer {n} unit {i}", (zi > 0) - (zi < 0)) for i, zi in enumerate(z)]
    return signs, total / len(data)


def finite_difference(network: Mapping[str, Any], batch: Sequence[Mapping[str, Any]], name: str,
                      h: Fraction) -> Fraction:
    """(L(p + h) - L(p - h)) / (2h) for the parameter p called ``name``, exactly.

    Inside one linear region (no ReLU pre-activation changes sign) the network output is affine
    in any single parameter, so the loss is quadratic in it and this symmetric difference equals
    the derivative exactly, for any h. The region is checked, not assumed: every ReLU
    pre-activation must be non-zero with the same sign at p - h, p and p + h, else KinkError.
    Three points suffice: if layer n's pre-activations keep their sign at the three points, layer
    n + 1's are affine on [p - h, p + h] (a ReLU with a fixed pattern is linear), so an affine
    function with same-signed non-zero ends does not vanish in between; by induction over layers
    no pre-activation changes sign or hits zero anywhere in the interval.
    """
    step = as_fraction(h)
    if step <= 0:
        raise ValueError(f"h={step} must be > 0")
    (signs_lo, loss_lo), (signs_at, _), (signs_hi, loss_hi) = (
        _signs_and_loss(*perturb(network, batch, name, d)) for d in (-step, Fraction(0), step))
    for (unit, below), (_, at), (_, above) in zip(signs_lo, signs_at, signs_hi, strict=True):
        if below == 0 or at == 0 or above == 0 or not below == at == above:
            raise KinkError(f"{name} +- {step} straddles a ReLU kink: {unit} pre-activation signs "
                            f"{below:+d}, {at:+d}, {above:+d} at p - h, p, p + h")
    return (loss_hi - loss_lo) / (2 * step)
