"""The grouped_strided_conv family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, reshape, values
from exactgrade.domains.pytorch.nn_modules.shared import BEST, best_of, candidate_sampler, cross_correlate
from exactgrade.domains.pytorch.sampling import dyadic_tensor, shape_text, word
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import Draw, five_levels


# pt-018 -------------------------------------------------------------------------------------------
def grouped_strided_conv(x, weight):
    import torch

    conv = torch.nn.Conv2d(x.shape[1], weight.shape[0], kernel_size=weight.shape[2], stride=2,
                           groups=x.shape[1] // weight.shape[1], bias=False, dtype=x.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight)
        y = conv(x)
    return {"rows": [{"y": y}]}


def _grouped_strided_conv(x, weight):
    kernels = values(weight)
    per_group_in = weight.shape[1]
    groups = x.shape[1] // per_group_in
    per_group_out = weight.shape[0] // groups
    zero_bias = [Fraction(0)] * per_group_out
    out = []
    for image in values(x):  # group g: input channels g*in..(g+1)*in -> outputs g*out..(g+1)*out
        out.append([plane for g in range(groups)
                    for plane in cross_correlate(image[g * per_group_in:(g + 1) * per_group_in],
                                                  kernels[g * per_group_out:(g + 1) * per_group_out],
                                                  zero_bias, 2, 0)])
    return [{"y": ExactTensor.of("float32", out)}]


def _sample_grouped(draw: Draw, level: int) -> dict:
    groups = 2 if level <= 2 else draw.choice((2, 3))
    per_in, per_out = draw.integer(1, 1 + level // 2), draw.integer(1, 1 + level // 2)
    if level == 1:
        per_in, per_out = 2, draw.integer(1, 2)
    size = 2 if level <= 2 else draw.choice((2, 3))
    side = draw.integer(4, 4 + level)
    batch = 1 if level <= 3 else 2
    return {
        "x": dyadic_tensor(draw, (batch, groups * per_in, side, draw.integer(4, 4 + level)), -2, 2, 2),
        "weight": dyadic_tensor(draw, (groups * per_out, per_in, size, size), -2, 2, 3),
    }


def _grouped_output(i):
    x, w = dims(i["x"]), dims(i["weight"])
    return x[0], w[0], (x[2] - w[2]) // 2 + 1, (x[3] - w[2]) // 2 + 1


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=grouped_strided_conv,
    independent=_grouped_strided_conv,
    question=lambda i: (
        f"""Apply torch.nn.Conv2d({i["x"].shape[1]}, {i["weight"].shape[0]},
        kernel_size={i["weight"].shape[2]}, stride=2, groups={i["x"].shape[1] // i["weight"].shape[1]},
        bias=False) with weight `weight` (shape {shape_text(i["weight"].shape)}) to `x`. Give the output
        `y`."""
    ),
    answer=lambda i: ({"y": f32(*_grouped_output(i))},),
    sample=_sample_grouped,
)


# grouped_strided_conv ----------------------------------------------------------------------------
def _grouped_math(i):
    w = i["weight"].shape if "weight" in i else i["weights"].shape[1:]
    groups = i["x"].shape[1] // w[1]
    return f"""The C = {i["x"].shape[1]} input channels of `x` (N, C, H, W) form {word(groups)} consecutive
        blocks of {w[1]}, and the {w[0]} output channels {word(groups)} consecutive blocks of
        {w[0] // groups}; output channel o of block g sees only input block g. Output o at (i, j) is the sum
        over the {w[1]} channels ch of its input block and offsets a, b in 0..{w[2] - 1} of
        K[o, ch, a, b] * x[block start + ch, 2i + a, 2j + b] (the kernel is not flipped; no padding, no
        offset term), for every (i, j) whose {w[2]}x{w[2]} window fits inside the image."""


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=grouped_strided_conv,
    independent=_grouped_strided_conv,
    sample=_sample_grouped,
    question=lambda i: f"""{_grouped_math(i)} Compute this with K = `weight`. Give the output `y`.""",
    answer=lambda i: ({"y": f32(*_grouped_output(i))},),
)


def grouped_relu_max(x, weight):
    import torch.nn.functional as F

    y = F.conv2d(x, weight, stride=2, groups=x.shape[1] // weight.shape[1])
    return {"rows": [{"channel_max": F.relu(y).amax(dim=(2, 3))}]}


def _grouped_relu_max(x, weight):
    y = _grouped_strided_conv(x, weight)[0]["y"]
    planes = reshape(list(y.values), y.shape)
    return [
        {
            "channel_max": ExactTensor.of(
                "float32", [[max(max(leaves(p)), Fraction(0)) for p in image] for image in planes]
            )
        }
    ]


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=grouped_relu_max,
    independent=_grouped_relu_max,
    sample=_sample_grouped,
    question=lambda i: (
        f"""{_grouped_math(i)} Compute this with K = `weight`, replace every negative
       output by 0, and give `channel_max`: for each image and output channel, the largest value of
       the resulting plane (shape (N, {i["weight"].shape[0]}))."""
    ),
    answer=lambda i: ({"channel_max": f32(i["x"].shape[0], i["weight"].shape[0])},),
)


def grouped_best(x, weights, targets):
    import torch
    import torch.nn.functional as F

    rows = []
    for target in targets:
        errors = torch.stack(
            [
                ((F.conv2d(x, w, stride=2, groups=x.shape[1] // w.shape[1]) - target) ** 2).sum()
                for w in weights
            ]
        )
        k = int(torch.argmin(errors))
        rows.append({"best": k, "error": errors[k]})
    return {"rows": rows}


def _GROUPED_OUT(i):
    return _grouped_strided_conv(**i)[0]["y"]


_GROUPED_STACK = {"weight": ("weights", -2, 2, 3)}


_GROUPED_BEST = best_of(_GROUPED_STACK, _GROUPED_OUT)


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=grouped_best,
    sample=candidate_sampler(_sample_grouped, _GROUPED_STACK, _GROUPED_OUT),
    question=lambda i: (
        f"""{_grouped_math(i)} Candidate k (k = 0..{i["weights"].shape[0] - 1}) uses
       K = `weights[k]`, applied to `x`. {BEST}"""
    ),
    **_GROUPED_BEST,
)


def grouped_input_gradient(x, weight, upstream):
    import torch.nn.functional as F

    z = x.clone().requires_grad_(True)
    (F.conv2d(z, weight, stride=2, groups=x.shape[1] // weight.shape[1]) * upstream).sum().backward()
    return {"rows": [{"grad_x": z.grad}]}


def _grouped_input_gradient(x, weight, upstream):
    n, c, h, w = x.shape
    out, per_in, size = weight.shape[0], weight.shape[1], weight.shape[2]
    per_out = out // (c // per_in)
    kernels, up = values(weight), values(upstream)
    grad = [[[[Fraction(0)] * w for _ in range(h)] for _ in range(c)] for _ in range(n)]
    for s in range(n):
        for o in range(out):
            start = (o // per_out) * per_in
            for i in range(len(up[s][o])):
                for j in range(len(up[s][o][0])):
                    for ch in range(per_in):
                        for a in range(size):
                            for b in range(size):
                                grad[s][start + ch][2 * i + a][2 * j + b] += (
                                    up[s][o][i][j] * kernels[o][ch][a][b]
                                )
    return [{"grad_x": ExactTensor.of("float32", grad)}]


def _sample_grouped_upstream(draw, level):
    inputs = _sample_grouped(draw, 3)
    return {**inputs, "upstream": dyadic_tensor(draw, _grouped_output(inputs), -1, 1, 2, nonzero=True)}


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=grouped_input_gradient,
    independent=_grouped_input_gradient,
    sample=_sample_grouped_upstream,
    question=lambda i: (
        f"""{_grouped_math(i)} With K = `weight` and the output y computed this way
       from `x`, let L = the sum over all elements of y * `upstream`. Give `grad_x`, the gradient of L
       with respect to `x` (shape {shape_text(i["x"].shape)}; pixels no window covers get 0)."""
    ),
    answer=lambda i: ({"grad_x": f32(*dims(i["x"]))},),
)


GROUPED_STRIDED_CONV = five_levels(
    "grouped_strided_conv",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the grouped, strided Conv2d call; L2 the channel blocks and the stride described; L3 "
   "convolution, ReLU and the maximum of each plane; L4 the candidate kernels closest to each of two "
   "targets; L5 the gradient with respect to the input (the transposed operation, not named)",
)
