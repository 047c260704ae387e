"""The linear_layer family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, matmul, mean, softmax, transpose, values
from exactgrade.domains.pytorch.nn_modules.shared import affine
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims, solve
from exactgrade.family import Draw, Reject, five_levels


# pt-016 -------------------------------------------------------------------------------------------
def linear_layer(x, weight, bias):
    import torch

    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
        y = layer(x)
    return {"rows": [{"y": y}]}


def _linear_layer(x, weight, bias):
    return [{"y": ExactTensor.of("float32", affine(values(x), values(weight), values(bias)))}]


def _sample_linear(draw: Draw, level: int) -> dict:
    batch, n_in, n_out = draw.integer(2, 1 + level), draw.integer(3, 3 + level), draw.integer(2, 2 + level)
    return {
        "x": dyadic_tensor(draw, (batch, n_in), -3, 3, 2),
        "weight": dyadic_tensor(draw, (n_out, n_in), -1, 1, 3),
        "bias": dyadic_tensor(draw, (n_out,), -1, 1, 3),
    }


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=linear_layer,
    independent=_linear_layer,
    question=lambda i: (
        f"""Build torch.nn.Linear({i["weight"].shape[1]}, {i["weight"].shape[0]}), set its
        weight to `weight` (shape (out_features, in_features)) and its bias to `bias`, and apply it to the
        batch `x`. Give the output `y`."""
    ),
    answer=lambda i: ({"y": f32(i["x"].shape[0], i["weight"].shape[0])},),
    sample=_sample_linear,
)


# linear_layer ------------------------------------------------------------------------------------
_LINEAR_MATH = """A fully connected layer maps each row v of its input to the vector whose entry o is the sum
    over i of W[o, i] * v[i], plus c[o], with W (out_features, in_features) and c (out_features,)."""


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=linear_layer,
    independent=_linear_layer,
    sample=_sample_linear,
    question=lambda i: (
        f"""{_LINEAR_MATH} Apply such a layer with W = `weight` and c = `bias` to every
       row of the batch `x`. Give the output `y`."""
    ),
    answer=lambda i: ({"y": f32(i["x"].shape[0], i["weight"].shape[0])},),
)


def linear_confidence(x, weight, bias):
    import torch

    scores = x @ weight.T + bias
    return {"rows": [{"confidence": torch.softmax(scores, dim=1).max(dim=1).values}]}


def _linear_confidence(x, weight, bias):
    scores = affine(values(x), values(weight), values(bias))
    return [{"confidence": ExactTensor.of("float32", [max(softmax(row)) for row in scores])}]


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=linear_confidence,
    independent=_linear_confidence,
    sample=_sample_linear,
    question=lambda i: (
        f"""{_LINEAR_MATH} The layer with W = `weight` and c = `bias` scores the
       {i["weight"].shape[0]} classes of each row of `x`; the scores s become class probabilities
       exp(s_o) / sum_k exp(s_k). Give `confidence`: for each row of `x`, the probability of its most
       probable class."""
    ),
    answer=lambda i: ({"confidence": f32(i["x"].shape[0])},),
)


def linear_recover(x, y):
    import torch

    design = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1).double()
    solution = torch.linalg.lstsq(design, y.double()).solution
    return {"rows": [{"weight": solution[:-1].T.contiguous().to(x.dtype), "bias": solution[-1].to(x.dtype)}]}


def _augmented(x):
    return [[*row, Fraction(1)] for row in values(x)]


def _linear_recover(x, y):
    design = _augmented(x)
    gram = matmul(transpose(design), design)
    columns = [
        solve(
            gram,
            [
                sum((a * t for a, t in zip(col, target, strict=True)), Fraction(0))
                for col in transpose(design)
            ],
        )
        for target in transpose(values(y))
    ]
    return [
        {
            "weight": ExactTensor.of("float32", [c[:-1] for c in columns]),
            "bias": ExactTensor.of("float32", [c[-1] for c in columns]),
        }
    ]


def _sample_linear_recover(draw, level):
    n_in, n_out = draw.integer(2, 3), draw.integer(2, 3)
    batch = n_in + 1 + draw.integer(0, 1)
    x = dyadic_tensor(draw, (batch, n_in), -3, 3, 2)
    weight = dyadic_tensor(draw, (n_out, n_in), -1, 1, 3, nonzero=True)
    bias = dyadic_tensor(draw, (n_out,), -1, 1, 3, nonzero=True)
    design = _augmented(x)
    if solve(matmul(transpose(design), design), [0] * (n_in + 1)) is None:
        raise Reject("the inputs with a column of ones are rank deficient: the layer is not determined")
    y = affine(values(x), values(weight), values(bias))
    return {"x": x, "y": tensor("float32", [[float(e) for e in row] for row in y])}


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=linear_recover,
    independent=_linear_recover,
    sample=_sample_linear_recover,
    question=lambda i: (
        f"""{_LINEAR_MATH} An unknown layer of this kind with
       {i["x"].shape[1]} inputs and {i["y"].shape[1]} outputs mapped each row of `x` to the
       same row of
       `y` (exactly, in exact arithmetic). The rows determine the layer. Give its `weight` W and
       `bias` c."""
    ),
    answer=lambda i: (
        {"weight": f32(i["y"].shape[1], i["x"].shape[1]), "bias": f32(i["y"].shape[1])},
    ),
)


def linear_gd_step(x, weight, bias, target):
    import torch

    w = weight.clone().requires_grad_(True)
    b = bias.clone().requires_grad_(True)
    loss = ((x @ w.T + b - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        new_w, new_b = w - 0.125 * w.grad, b - 0.125 * b.grad
    return {"rows": [{"loss": loss.detach(), "weight": new_w, "bias": new_b}]}


def _linear_gd_step(x, weight, bias, target):
    vx, w, b = values(x), values(weight), values(bias)
    out = affine(vx, w, b)
    count = len(out) * len(out[0])
    g = [
        [2 * (o - t) / count for o, t in zip(ro, rt, strict=True)]
        for ro, rt in zip(out, values(target), strict=True)
    ]
    grad_w = matmul(transpose(g), vx)
    grad_b = [sum(col, Fraction(0)) for col in transpose(g)]
    lr = Fraction(1, 8)
    return [
        {
            "loss": ExactTensor.of(
                "float32",
                mean(
                    [
                        (o - t) ** 2
                        for ro, rt in zip(out, values(target), strict=True)
                        for o, t in zip(ro, rt, strict=True)
                    ]
                ),
            ),
            "weight": ExactTensor.of(
                "float32",
                [[p - lr * q for p, q in zip(rp, rq, strict=True)] for rp, rq in zip(w, grad_w, strict=True)],
            ),
            "bias": ExactTensor.of("float32", [p - lr * q for p, q in zip(b, grad_b, strict=True)]),
        }
    ]


def _sample_linear_step(draw, level):
    inputs = _sample_linear(draw, level)
    shape = (inputs["x"].shape[0], inputs["weight"].shape[0])
    return {**inputs, "target": dyadic_tensor(draw, shape, -3, 3, 2)}


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=linear_gd_step,
    independent=_linear_gd_step,
    sample=_sample_linear_step,
    question=lambda i: (
        f"""{_LINEAR_MATH} Train the layer with W = `weight` and c = `bias` for one
       step of plain gradient descent (step size 0.125, no momentum, no weight decay) on the loss L =
       the mean over all {i["x"].shape[0] * i["weight"].shape[0]} entries of (layer(x) - target)^2,
       for the batch `x` and `target`. Give `loss`, L before the step, and the layer's `weight` and
       `bias` after it."""
    ),
    answer=lambda i: (
        {"loss": f32(), "weight": f32(*dims(i["weight"])), "bias": f32(*dims(i["bias"]))},
    ),
)


LINEAR_LAYER = five_levels(
    "linear_layer",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the nn.Linear call; L2 the affine map described; L3 the probability of each row's top class "
   "(softmax of the layer's scores); L4 the layer recovered from input/output rows (exactly determined); "
   "L5 one gradient-descent step of the layer on a mean squared error, loss and updated parameters",
)
