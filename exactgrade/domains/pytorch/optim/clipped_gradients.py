"""The clipped_gradients family of optim: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, reshape, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, Reject, five_levels
from exactgrade.task import Task


# pt-044 -------------------------------------------------------------------------------------------
def clipped_gradients(p1_0, p2_0):
    import torch

    p1 = p1_0.clone().requires_grad_(True)
    p2 = p2_0.clone().requires_grad_(True)
    loss = 1.5 * (p1 ** 2).sum() + (p2 ** 3).sum()
    loss.backward()
    total_norm = torch.nn.utils.clip_grad_norm_([p1, p2], max_norm=1.0)
    return {"rows": [{"total_norm": total_norm, "grad_p1": p1.grad, "grad_p2": p2.grad}]}


def _clipped_gradients(p1_0, p2_0):
    g1 = [[3 * e for e in row] for row in values(p1_0)]
    g2 = [3 * e * e for e in values(p2_0)]
    total = mpmath.sqrt(hp(sum((g * g for row in g1 for g in row), Fraction(0)) + sum((g * g for g in g2),
                                                                                     Fraction(0))))
    coefficient = min(1 / (total + hp(1e-6)), hp(1))  # the returned norm is the one before clipping
    return [{
        "total_norm": ExactTensor.of("float32", total),
        "grad_p1": ExactTensor.of("float32", [[coefficient * hp(g) for g in row] for row in g1]),
        "grad_p2": ExactTensor.of("float32", [coefficient * hp(g) for g in g2]),
    }]


def _sample_clipping(draw: Draw, level: int) -> dict:
    return {
        "p1_0": dyadic_tensor(draw, (draw.integer(2, 1 + level), draw.integer(2, 1 + level)), -2, 2, 2),
        "p2_0": dyadic_tensor(draw, (draw.integer(3, 2 + level),), -2, 2, 2),
    }


def _clips(task: Task) -> str | None:
    if task.expected["rows"][0]["total_norm"].data[0] <= 1.5:
        return "the gradient norm is at most 1.5: clipping to max_norm=1.0 would barely act"
    return None


LEVEL_1 = pytorch_level(
    "optim",
    reference=clipped_gradients,
    independent=_clipped_gradients,
    question="""Make leaf tensors p1 (from `p1_0`) and p2 (from `p2_0`) that require gradients, compute
        loss = 1.5 * sum(p1^2) + sum(p2^3) and call backward. Then clip the gradients of [p1, p2] with
        torch.nn.utils.clip_grad_norm_ and max_norm=1.0 (total L2 norm). Give `total_norm`, the value
        clip_grad_norm_ returns, and the clipped gradients `grad_p1` and `grad_p2`.""",
    answer=lambda i: (
        {"total_norm": f32(), "grad_p1": f32(*dims(i["p1_0"])), "grad_p2": f32(*dims(i["p2_0"]))},
    ),
    sample=_sample_clipping,
    reject=_clips,
)


# clipped_gradients -------------------------------------------------------------------------------
_CLIP_SETUP = """Let L = 1.5 * sum(p1^2) + sum(p2^3) for tensors p1 = `p1_0` and p2 = `p2_0`, and g1, g2 its
    gradients with respect to them."""

_CLIP_MATH = """Clipping to a maximum norm M computes the total norm N = sqrt(sum of g1^2 + sum of
g2^2) over both
    tensors together and multiplies both gradients by min(1, M / (N + 1e-6))."""


LEVEL_2 = pytorch_level(
    "optim",
    reference=clipped_gradients,
    independent=_clipped_gradients,
    sample=_sample_clipping,
    reject=_clips,
    question=f"""{_CLIP_SETUP} {_CLIP_MATH} Clip g1, g2 to M = 1. Give `total_norm`, N (before
        clipping), and the clipped gradients `grad_p1` and `grad_p2`.""",
    answer=lambda i: (
        {"total_norm": f32(), "grad_p1": f32(*dims(i["p1_0"])), "grad_p2": f32(*dims(i["p2_0"]))},
    ),
)


def clip_then_step(p1_0, p2_0):
    import torch

    p1, p2 = p1_0.clone().requires_grad_(True), p2_0.clone().requires_grad_(True)
    (1.5 * (p1**2).sum() + (p2**3).sum()).backward()
    torch.nn.utils.clip_grad_norm_([p1, p2], max_norm=1.0)
    with torch.no_grad():
        q1, q2 = p1 - 0.5 * p1.grad, p2 - 0.5 * p2.grad
        loss = 1.5 * (q1**2).sum() + (q2**3).sum()
    return {"rows": [{"p1": q1, "p2": q2, "loss": loss}]}


def _clip_coefficient(g1, g2, max_norm):
    total = mpmath.sqrt(hp(sum((g * g for g in g1), Fraction(0)) + sum((g * g for g in g2), Fraction(0))))
    return total, min(hp(max_norm) / (total + hp(1e-6)), hp(1))


def _clip_then_step(p1_0, p2_0):
    v1, v2 = values(p1_0), values(p2_0)
    g1 = [3 * e for row in v1 for e in row]
    g2 = [3 * e * e for e in v2]
    _, c = _clip_coefficient(g1, g2, 1.0)
    q1 = [[hp(e) - c * hp(3 * e) / 2 for e in row] for row in v1]
    q2 = [hp(e) - c * hp(3 * e * e) / 2 for e in v2]
    loss = hp(1.5) * mpmath.fsum(e * e for row in q1 for e in row) + mpmath.fsum(e**3 for e in q2)
    return [
        {
            "p1": ExactTensor.of("float32", q1),
            "p2": ExactTensor.of("float32", q2),
            "loss": ExactTensor.of("float32", loss),
        }
    ]


def threshold_for_norm(p1_0, p2_0, goal):
    import torch

    g1 = 3 * p1_0.double()
    g2 = 3 * p2_0.double() ** 2
    total = torch.sqrt((g1**2).sum() + (g2**2).sum())
    return {"rows": [{"max_norm": (goal * (total + 1e-6) / g1.norm()).to(p1_0.dtype).item()}]}


def _threshold_for_norm(p1_0, p2_0, goal):
    g1 = [3 * e for row in values(p1_0) for e in row]
    g2 = [3 * e * e for e in values(p2_0)]
    total, _ = _clip_coefficient(g1, g2, 1.0)
    norm1 = mpmath.sqrt(hp(sum((g * g for g in g1), Fraction(0))))
    return [{"max_norm": hp(goal) * (total + hp(1e-6)) / norm1}]


def _sample_threshold(draw, level):
    inputs = _sample_clipping(draw, 3)
    g1 = [3 * e for row in values(inputs["p1_0"]) for e in row]
    norm1 = math.sqrt(sum(g * g for g in g1))
    if norm1 < 1:
        raise Reject("p1's gradient is too small to clip to a goal")
    return {**inputs, "goal": float(draw.dyadic(Fraction(1, 4), Fraction(min(norm1, 8)) * Fraction(3, 4), 2))}


def _threshold_clips(inputs):
    g1 = [3 * e for row in values(inputs["p1_0"]) for e in row]
    g2 = [3 * e * e for e in values(inputs["p2_0"])]
    total = math.sqrt(sum(g * g for g in g1) + sum(g * g for g in g2))
    if not 0 < inputs["goal"] < math.sqrt(sum(g * g for g in g1)) * 0.98:
        return "the goal is not below p1's unclipped gradient norm: no clipping threshold reaches it"
    if total < 1.5:
        return "the total norm is small: the instance barely clips"
    return None


def adaptive_clipping(p1_0, p2_0):
    import torch

    params = [p1_0.clone().requires_grad_(True), p2_0.clone().requires_grad_(True)]
    (1.5 * (params[0] ** 2).sum() + (params[1] ** 3).sum()).backward()
    out = []
    with torch.no_grad():
        for p in params:
            limit = 0.5 * torch.clamp(p.norm(), min=1e-3)
            scale = torch.clamp(limit / p.grad.norm(), max=1.0)
            out.append(p - 0.25 * p.grad * scale)
    return {"rows": [{"p1": out[0], "p2": out[1]}]}


def _adaptive_clipping(p1_0, p2_0):
    out = []
    for flat, grad, shape in (
        (values(p1_0), [[3 * e for e in row] for row in values(p1_0)], "matrix"),
        (values(p2_0), [3 * e * e for e in values(p2_0)], "vector"),
    ):
        ps = [hp(e) for e in _flat_opt(flat)]
        gs = [hp(e) for e in _flat_opt(grad)]
        limit = hp(0.5) * max(mpmath.sqrt(mpmath.fsum(p * p for p in ps)), hp(1e-3))
        scale = min(limit / mpmath.sqrt(mpmath.fsum(g * g for g in gs)), 1)
        stepped = [p - hp(0.25) * g * scale for p, g in zip(ps, gs, strict=True)]
        out.append(reshape(stepped, (len(flat), len(flat[0]))) if shape == "matrix" else stepped)
    return [{"p1": ExactTensor.of("float32", out[0]), "p2": ExactTensor.of("float32", out[1])}]


def _flat_opt(nested):
    return [e for item in nested for e in _flat_opt(item)] if isinstance(nested, list) else [nested]


LEVEL_3 = pytorch_level(
    "optim",
    reference=clip_then_step,
    independent=_clip_then_step,
    sample=_sample_clipping,
    refuse=lambda i: (
        None
        if math.sqrt(sum((3 * e) ** 2 for e in _flat_opt(values(i["p1_0"])))) > 1.5
        else "p1's gradient is small: clipping barely acts"
    ),
    question=f"""{_CLIP_SETUP} {_CLIP_MATH} Clip g1, g2 to M = 1, then take one
    gradient-descent step of
        size 0.5 on both tensors with the clipped gradients. Give the new tensors `p1` and `p2` and
        `loss`, L at them.""",
    answer=lambda i: ({"p1": f32(*dims(i["p1_0"])), "p2": f32(*dims(i["p2_0"])), "loss": f32()},),
)


LEVEL_4 = pytorch_level(
    "optim",
    reference=threshold_for_norm,
    independent=_threshold_for_norm,
    sample=_sample_threshold,
    refuse=_threshold_clips,
    question=f"""{_CLIP_SETUP} {_CLIP_MATH} Give `max_norm`, the M for which the clipped g1
    has Euclidean
        norm exactly `goal` (a Python float).""",
    answer=({"max_norm": PY_FLOAT},),
)


def _one_clips(inputs):
    states = []
    for ps, gs in (
        (_flat_opt(values(inputs["p1_0"])), [3 * e for e in _flat_opt(values(inputs["p1_0"]))]),
        (values(inputs["p2_0"]), [3 * e * e for e in values(inputs["p2_0"])]),
    ):
        ratio = math.sqrt(sum(g * g for g in gs)) / max(math.sqrt(sum(p * p for p in ps)), 1e-3)
        if abs(ratio - 0.5) < 0.01:
            return "a tensor's gradient-to-weight ratio is within 0.01 of the limit"
        states.append(ratio > 0.5)
    if len(set(states)) < 2:
        return "both tensors are clipped, or neither: one case goes untested"
    return None


def _sample_adaptive_clip(draw, level):
    inputs = _sample_clipping(draw, 3)
    scale = draw.choice((Fraction(1, 8), Fraction(1, 16)))
    return {
        "p1_0": inputs["p1_0"],
        "p2_0": tensor("float32", [float(e * scale) for e in values(inputs["p2_0"])]),
    }


LEVEL_5 = pytorch_level(
    "optim",
    reference=adaptive_clipping,
    independent=_adaptive_clipping,
    sample=_sample_adaptive_clip,
    refuse=_one_clips,
    question=f"""{_CLIP_SETUP} Each tensor p is clipped on its own, relative to its size:
    its gradient g
        is multiplied by min(1, 0.5 * max(||p||, 1e-3) / ||g||) (||.|| the Euclidean norm of all its
        elements). Then take one gradient-descent step of size 0.25 on both tensors with the clipped
        gradients. Give the new tensors `p1` and `p2`.""",
    answer=lambda i: ({"p1": f32(*dims(i["p1_0"])), "p2": f32(*dims(i["p2_0"]))},),
)


CLIPPED_GRADIENTS = five_levels(
    "clipped_gradients",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 clip_grad_norm_ named; L2 the global norm clipping described; L3 clipping then a step and the "
   "loss after it; L4 the threshold that clips one tensor's gradient to a given norm (an inverse); L5 "
   "per-tensor clipping relative to the weight norm (adaptive clipping, described not named)",
)
