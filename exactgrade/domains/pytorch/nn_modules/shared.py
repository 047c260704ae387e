"""What two or more nn_modules families use (written once).

Level 1 is the canonical question (the call named). Level 2 describes the operation mathematically;
level 3 chains it with a second operation (only the end asked); level 4 is a search or an inverse
(the best of candidate parameters for targets, a parameter recovered from outputs, a smallest size);
level 5 is a backward pass, a training step or a whole block reproduced from its mathematics.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, f32, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, matmul, reshape, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import clear_winner, leaves
from exactgrade.family import Draw


def affine(rows, weight, bias):
    """rows @ weight^T + bias, exactly (the nn.Linear convention: weight is (out, in))."""
    return [[s + b for s, b in zip(r, bias, strict=True)] for r in matmul(rows, transpose(weight))]


def cross_correlate(image, kernels, bias, stride, padding):
    """Conv2d's cross-correlation (no kernel flip) of one (C, H, W) image, zero padding, exact."""
    channels, height, width = len(image), len(image[0]), len(image[0][0])
    size = len(kernels[0][0])
    out_h = (height + 2 * padding - size) // stride + 1
    out_w = (width + 2 * padding - size) // stride + 1

    def pixel(c, i, j):
        inside = 0 <= i < height and 0 <= j < width
        return image[c][i][j] if inside else Fraction(0)

    return [[[bias[o] + sum((kernel[c][a][b] * pixel(c, i * stride - padding + a, j * stride - padding + b)
                             for c in range(channels) for a in range(size) for b in range(size)), Fraction(0))
              for j in range(out_w)] for i in range(out_h)] for o, kernel in enumerate(kernels)]


def sample_elementwise(low: float, high: float, widen: float):
    def sample(draw: Draw, level: int) -> dict:
        shape = (7 + level,) if level <= 2 else (draw.integer(2, level), draw.integer(4, 3 + level))
        return {"x": dyadic_tensor(draw, shape, low - widen * level, high + widen * level, 2)}

    return sample


BEST = """For each target `targets[r]` (a row r of the answer), give `best`, the candidate k whose output is
    closest to that target (the smallest sum over all elements of the squared difference; on an exact tie,
    the smaller k), and `error`, that smallest sum."""


def candidate_sampler(base, stacked, output, count=3):
    """The base inputs with the parameters in ``stacked`` (name -> (stacked name, low, high, bits))
    replaced by ``count`` candidates, and two targets near the outputs of two different candidates."""

    def sample(draw, level):
        inputs = dict(base(draw, min(level, 3)))
        for name, (plural, low, high, bits) in stacked.items():
            first = values(inputs.pop(name))
            rest = [values(dyadic_tensor(draw, dims_of(first), low, high, bits)) for _ in range(count - 1)]
            inputs[plural] = tensor("float32", [first, *rest])
        outputs = candidate_outputs(inputs, stacked, output)
        targets = [
            [rounded(e, 3) + noise(draw, 3) for e in outputs[k].values] for k in draw.sample(range(count), 2)
        ]
        inputs["targets"] = tensor("float32", [reshape(t, outputs[0].shape) for t in targets])
        return inputs

    return sample


def dims_of(nested):
    return (len(nested), *dims_of(nested[0])) if isinstance(nested, list) else ()


def candidate_outputs(inputs, stacked, output):
    plurals = {plural: name for name, (plural, *_) in stacked.items()}
    count = next(iter(inputs[p].shape[0] for p in plurals))
    fixed = {k: v for k, v in inputs.items() if k not in plurals and k != "targets"}
    return [
        output({**fixed, **{name: tensor("float32", values(inputs[p])[k]) for p, name in plurals.items()}})
        for k in range(count)
    ]


def candidate_errors(inputs, stacked, output):
    outputs = candidate_outputs(inputs, stacked, output)
    return [
        [
            sum(((a - b) ** 2 for a, b in zip(o.values, leaves(target), strict=True)), Fraction(0))
            if all(type(a) is Fraction for a in o.values)
            else mpmath.fsum((hp(a) - hp(b)) ** 2 for a, b in zip(o.values, leaves(target), strict=True))
            for o in outputs
        ]
        for target in values(inputs["targets"])
    ]


def best_of(stacked, output):
    """The independent key, the refusal and the zero reason of a best-candidate level."""

    def independent(**inputs):
        rows = []
        for errors in candidate_errors(inputs, stacked, output):
            k = min(range(len(errors)), key=lambda i: (errors[i], i))
            rows.append({"best": k, "error": ExactTensor.of("float32", errors[k])})
        return rows

    def refuse(inputs):
        for errors in candidate_errors(inputs, stacked, output):
            problem = clear_winner(errors)
            if problem is not None:
                return problem
        if len({row["best"] for row in independent(**inputs)}) < 2:
            return "both targets have the same best candidate: a constant answer passes"
        return None

    def zero_reason(inputs):
        rows = independent(**inputs)
        if any(row["best"] == 0 for row in rows):
            return "candidate 0 is the closest to a target: best is index 0"
        return None

    return {
        "independent": independent,
        "refuse": refuse,
        "zero_reason": zero_reason,
        "answer": ({"best": PY_INT, "error": f32()}, {"best": PY_INT, "error": f32()}),
    }


def rounded(value: Any, bits: int) -> float:
    """``value`` rounded down to the 2**-bits grid, as a float (a target an output lies near)."""
    scale = 2**bits
    return float(Fraction(int(value * scale) - (1 if value < 0 else 0), scale))


def noise(draw: Draw, bits: int) -> float:
    """A small offset on the 2**-bits grid in [-2, 2] * 2**-bits."""
    return draw.integer(-2, 2) / 2**bits
