"""The flatten_mlp family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import Inputs, f32, pytorch_level
from exactgrade.domains.pytorch.exact import (
    ExactTensor,
    log_softmax,
    matmul,
    mean,
    reshape,
    transpose,
    values,
)
from exactgrade.domains.pytorch.nn_modules.shared import BEST, affine, best_of, candidate_sampler
from exactgrade.domains.pytorch.sampling import dyadic_tensor, int_tensor, word
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import Draw, five_levels


# pt-025 -------------------------------------------------------------------------------------------
def flatten_mlp(x, w1, b1, w2, b2):
    import torch

    model = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(w1.shape[1], w1.shape[0], dtype=w1.dtype),
        torch.nn.ReLU(),
        torch.nn.Linear(w2.shape[1], w2.shape[0], dtype=w2.dtype),
    )
    with torch.no_grad():
        model[1].weight.copy_(w1)
        model[1].bias.copy_(b1)
        model[3].weight.copy_(w2)
        model[3].bias.copy_(b2)
        y = model(x)
    return {"rows": [{"y": y}]}


def _flatten_mlp(x, w1, b1, w2, b2):
    flat = [[e for row in sample for e in row] for sample in values(x)]
    hidden = [[max(h, Fraction(0)) for h in row] for row in affine(flat, values(w1), values(b1))]
    return [{"y": ExactTensor.of("float32", affine(hidden, values(w2), values(b2)))}]


def _sample_mlp(draw: Draw, level: int) -> dict:
    batch, a, b = draw.integer(2, 1 + level), draw.integer(2, 2 + level // 2), draw.integer(2, 3 + level // 2)
    hidden, out = draw.integer(3, 3 + level), draw.integer(2, 1 + level)
    return {
        "x": dyadic_tensor(draw, (batch, a, b), -3, 3, 2),
        "w1": dyadic_tensor(draw, (hidden, a * b), -1, 1, 2),
        "b1": dyadic_tensor(draw, (hidden,), -1, 1, 3),
        "w2": dyadic_tensor(draw, (out, hidden), -2, 2, 2),
        "b2": dyadic_tensor(draw, (out,), -1, 1, 3),
    }


def _relu_clips(inputs: Inputs) -> str | None:
    i = inputs
    flat = [[e for row in s for e in row] for s in values(i["x"])]
    if all(h > 0 for row in affine(flat, values(i["w1"]), values(i["b1"])) for h in row):
        return "every hidden pre-activation is positive: the ReLU would do nothing"
    return None


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=flatten_mlp,
    independent=_flatten_mlp,
    question=lambda i: (
        f"""Build torch.nn.Sequential(Flatten(), Linear({i["w1"].shape[1]},
        {i["w1"].shape[0]}), ReLU(), Linear({i["w2"].shape[1]}, {i["w2"].shape[0]})), set the first
        Linear's weight and bias to `w1`, `b1` and the second's to `w2`, `b2`, and apply it to `x` (a
        batch of {word(i["x"].shape[0])} {i["x"].shape[1]}x{i["x"].shape[2]} samples). Give the output
        `y`."""
    ),
    answer=lambda i: ({"y": f32(i["x"].shape[0], i["w2"].shape[0])},),
    sample=_sample_mlp,
    refuse=_relu_clips,
)


# flatten_mlp -------------------------------------------------------------------------------------
def _mlp_math(i):
    w1, w2 = (i["w1"].shape, i["w2"].shape if "w2" in i else i["w2s"].shape[1:])
    return f"""A network flattens each sample of `x` (a {i["x"].shape[1]}x{i["x"].shape[2]} array) row by row
        into a vector v of {w1[1]} entries, computes h = max(W1 v + c1, 0) elementwise ({w1[0]} hidden units)
        and outputs W2 h + c2 ({w2[0]} values), with W1 = `w1`, c1 = `b1`, c2 = `b2`"""


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=flatten_mlp,
    independent=_flatten_mlp,
    sample=_sample_mlp,
    refuse=_relu_clips,
    question=lambda i: (
        f"""{_mlp_math(i)} and W2 = `w2`. Give the outputs `y` for the batch of
       {word(i["x"].shape[0])} samples."""
    ),
    answer=lambda i: ({"y": f32(i["x"].shape[0], i["w2"].shape[0])},),
)


def mlp_cross_entropy(x, w1, b1, w2, b2, target):
    import torch

    logits = torch.relu(x.flatten(1) @ w1.T + b1) @ w2.T + b2
    return {"rows": [{"loss": torch.nn.functional.cross_entropy(logits, target)}]}


def _mlp_cross_entropy(x, w1, b1, w2, b2, target):
    logits = _flatten_mlp(x, w1, b1, w2, b2)[0]["y"]
    rows = reshape(list(logits.values), logits.shape)
    return [
        {
            "loss": ExactTensor.of(
                "float32",
                mpmath.fsum(-log_softmax(r)[t] for r, t in zip(rows, values(target), strict=True))
                / len(rows),
            )
        }
    ]


def _sample_mlp_target(draw, level):
    inputs = _sample_mlp(draw, 3)
    return {**inputs, "target": int_tensor(draw, (inputs["x"].shape[0],), 0, inputs["w2"].shape[0] - 1)}


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=mlp_cross_entropy,
    independent=_mlp_cross_entropy,
    sample=_sample_mlp_target,
    refuse=_relu_clips,
    question=lambda i: (
        f"""{_mlp_math(i)} and W2 = `w2`. The outputs are class scores s; the
       probability of class c is exp(s_c) / sum_k exp(s_k). Give `loss`, the mean over the batch of
       -ln(probability of the class `target` names for that sample)."""
    ),
    answer=({"loss": f32()},),
)


def mlp_best(x, w1, b1, w2s, b2, targets):
    import torch

    hidden = torch.relu(x.flatten(1) @ w1.T + b1)
    rows = []
    for target in targets:
        errors = torch.stack([((hidden @ w.T + b2 - target) ** 2).sum() for w in w2s])
        k = int(torch.argmin(errors))
        rows.append({"best": k, "error": errors[k]})
    return {"rows": rows}


def _MLP_OUT(i):
    return _flatten_mlp(**i)[0]["y"]


_MLP_STACK = {"w2": ("w2s", -2, 2, 2)}


_MLP_BEST = best_of(_MLP_STACK, _MLP_OUT)


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=mlp_best,
    sample=candidate_sampler(_sample_mlp, _MLP_STACK, _MLP_OUT),
    question=lambda i: (
        f"""{_mlp_math(i)}. Candidate k (k = 0..{i["w2s"].shape[0] - 1}) uses W2 =
       `w2s[k]`, applied to `x`. {BEST}"""
    ),
    **_MLP_BEST,
)


def mlp_sgd_step(x, w1, b1, w2, b2, target):
    import torch

    params = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)]
    out = torch.relu(x.flatten(1) @ params[0].T + params[1]) @ params[2].T + params[3]
    loss = ((out - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        new = [p - 0.125 * p.grad for p in params]
    return {"rows": [{"loss": loss.detach(), "w1": new[0], "b1": new[1], "w2": new[2], "b2": new[3]}]}


def _mlp_sgd_step(x, w1, b1, w2, b2, target):
    flat = [leaves(sample) for sample in values(x)]
    vw1, vb1, vw2, vb2 = values(w1), values(b1), values(w2), values(b2)
    pre = affine(flat, vw1, vb1)
    hidden = [[max(e, Fraction(0)) for e in row] for row in pre]
    out = affine(hidden, vw2, vb2)
    count = len(out) * len(out[0])
    g_out = [
        [2 * (o - t) / count for o, t in zip(ro, rt, strict=True)]
        for ro, rt in zip(out, values(target), strict=True)
    ]
    g_w2, g_b2 = matmul(transpose(g_out), hidden), [sum(c, Fraction(0)) for c in transpose(g_out)]
    g_hidden = matmul(g_out, vw2)
    g_pre = [
        [g if p > 0 else Fraction(0) for g, p in zip(rg, rp, strict=True)]
        for rg, rp in zip(g_hidden, pre, strict=True)
    ]
    g_w1, g_b1 = matmul(transpose(g_pre), flat), [sum(c, Fraction(0)) for c in transpose(g_pre)]
    lr = Fraction(1, 8)

    def step(p, g):
        return [step(a, b) for a, b in zip(p, g, strict=True)] if isinstance(p, list) else p - lr * g

    loss = mean(
        [
            (o - t) ** 2
            for ro, rt in zip(out, values(target), strict=True)
            for o, t in zip(ro, rt, strict=True)
        ]
    )
    return [
        {
            "loss": ExactTensor.of("float32", loss),
            "w1": ExactTensor.of("float32", step(vw1, g_w1)),
            "b1": ExactTensor.of("float32", step(vb1, g_b1)),
            "w2": ExactTensor.of("float32", step(vw2, g_w2)),
            "b2": ExactTensor.of("float32", step(vb2, g_b2)),
        }
    ]


def _sample_mlp_regression(draw, level):
    inputs = _sample_mlp(draw, 3)
    return {**inputs, "target": dyadic_tensor(draw, (inputs["x"].shape[0], inputs["w2"].shape[0]), -3, 3, 2)}


def _mlp_units_alive(inputs):
    flat = [leaves(s) for s in values(inputs["x"])]
    pre = [e for row in affine(flat, values(inputs["w1"]), values(inputs["b1"])) for e in row]
    if 0 in pre:
        return "a hidden pre-activation is exactly 0: the ReLU's gradient would sit on its kink"
    if 2 * sum(1 for e in pre if e < 0) >= len(pre) or all(e > 0 for e in pre):
        return "half or more of the hidden pre-activations are negative, or none is: a degenerate instance"
    return None


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=mlp_sgd_step,
    independent=_mlp_sgd_step,
    sample=_sample_mlp_regression,
    refuse=_mlp_units_alive,
    question=lambda i: (
        f"""{_mlp_math(i)} and W2 = `w2`. Train it for one step of plain gradient
       descent (step size 0.125, no momentum, no weight decay) on L = the mean over all
       {i["x"].shape[0] * i["w2"].shape[0]} entries of (output - target)^2 for the batch `x` and
       `target`. Give `loss`, L before the step, and the parameters after it: `w1`, `b1`, `w2`,
       `b2`."""
    ),
    answer=lambda i: (
        {
            "loss": f32(),
            "w1": f32(*dims(i["w1"])),
            "b1": f32(*dims(i["b1"])),
            "w2": f32(*dims(i["w2"])),
            "b2": f32(*dims(i["b2"])),
        },
    ),
)


FLATTEN_MLP = five_levels(
    "flatten_mlp",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the Sequential named; L2 the network's mathematics; L3 its mean cross-entropy on class "
   "targets; L4 the candidate output layer closest to each of two targets; L5 one gradient-descent step "
   "through the ReLU (backpropagation, not named)",
)
