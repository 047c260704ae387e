"""The conv_same_padding family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, mean, reshape, values
from exactgrade.domains.pytorch.nn_modules.shared import BEST, best_of, candidate_sampler, cross_correlate
from exactgrade.domains.pytorch.sampling import dyadic_tensor, shape_text
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import Draw, five_levels


# pt-017 -------------------------------------------------------------------------------------------
def conv_same_padding(x, weight, bias):
    import torch

    size = weight.shape[2]
    conv = torch.nn.Conv2d(weight.shape[1], weight.shape[0], kernel_size=size, padding=size // 2,
                           dtype=x.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight)
        conv.bias.copy_(bias)
        y = conv(x)
    return {"rows": [{"y": y}]}


def _conv_same_padding(x, weight, bias):
    kernels, offsets, padding = values(weight), values(bias), weight.shape[2] // 2
    return [{"y": ExactTensor.of("float32", [cross_correlate(image, kernels, offsets, 1, padding)
                                             for image in values(x)])}]

_SOBEL = ((1, 0, -1), (2, 0, -2), (1, 0, -1))


def _sample_conv(draw: Draw, level: int) -> dict:
    batch = 1 if level <= 2 else draw.integer(1, level - 1)
    c_in, c_out = draw.integer(1, 1 + level // 2), draw.integer(2, 1 + level)
    height, width = draw.integer(4, 3 + level), draw.integer(4, 4 + level)
    sobel = [[[e * s for e in row] for row in _SOBEL] for s in (1, -1)]
    sobel += [[list(col) for col in zip(*k, strict=True)] for k in sobel]  # the four orientations
    first = [
        [[float(e * scale) for e in row] for row in draw.choice(sobel)]
        for scale in (draw.choice((Fraction(1), Fraction(1, 2), Fraction(1, 4))) for _ in range(c_in))
    ]
    rest = values(dyadic_tensor(draw, (c_out - 1, c_in, 3, 3), -1, 1, 2))
    return {
        "x": dyadic_tensor(draw, (batch, c_in, height, width), -2.5, 2.5, 3),
        "weight": tensor(
            "float32", [first, *[[[[float(e) for e in r] for r in k] for k in o] for o in rest]]
        ),
        "bias": dyadic_tensor(draw, (c_out,), -1, 1, 3),
    }


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=conv_same_padding,
    independent=_conv_same_padding,
    question=lambda i: (
        f"""Apply torch.nn.Conv2d({i["weight"].shape[1]}, {i["weight"].shape[0]},
        kernel_size={i["weight"].shape[2]}, padding={i["weight"].shape[2] // 2}) with weight `weight` and
        bias `bias` to the image batch `x` (N, C, H, W). The first kernel is a Sobel-like edge filter; use
        it exactly as given, the way Conv2d applies kernels. Give the output `y`."""
    ),
    answer=lambda i: ({"y": f32(i["x"].shape[0], i["weight"].shape[0], *dims(i["x"])[2:])},),
    sample=_sample_conv,
)


# conv_same_padding -------------------------------------------------------------------------------
def _conv_math(i):
    size = i["weight"].shape[-1] if "weight" in i else i["weights"].shape[-1]
    return f"""Let x~ be each image of `x` (N, C, H, W) extended by {size // 2} zero pixel(s) on every side.
        Output channel o of an image at (i, j) is c[o] plus the sum over input channels ch and offsets a, b
        in 0..{size - 1} of K[o, ch, a, b] * x~[ch, i + a, j + b] (the kernel is not flipped), for
        every (i, j)
        that keeps the {size}x{size} window inside x~, so the output has the input's height and width."""


def conv_relu_mean(x, weight, bias):
    import torch.nn.functional as F

    y = F.relu(F.conv2d(x, weight, bias, padding=weight.shape[2] // 2))
    return {"rows": [{"channel_means": y.mean(dim=(2, 3))}]}


def _conv_relu_mean(x, weight, bias):
    y = _conv_same_padding(x, weight, bias)[0]["y"]
    planes = reshape(list(y.values), y.shape)
    return [
        {
            "channel_means": ExactTensor.of(
                "float32",
                [[mean([max(e, Fraction(0)) for e in leaves(plane)]) for plane in image] for image in planes],
            )
        }
    ]


def conv_best(x, weights, bias, targets):
    import torch
    import torch.nn.functional as F

    rows = []
    for target in targets:
        errors = torch.stack(
            [((F.conv2d(x, w, bias, padding=w.shape[2] // 2) - target) ** 2).sum() for w in weights]
        )
        k = int(torch.argmin(errors))
        rows.append({"best": k, "error": errors[k]})
    return {"rows": rows}


_CONV_STACK = {"weight": ("weights", -1, 1, 2)}


def _CONV_OUT(i):
    return _conv_same_padding(**i)[0]["y"]


_CONV_BEST = best_of(_CONV_STACK, _CONV_OUT)


def conv_backward(x, weight, bias, upstream):
    import torch.nn.functional as F

    w = weight.clone().requires_grad_(True)
    b = bias.clone().requires_grad_(True)
    (F.conv2d(x, w, b, padding=weight.shape[2] // 2) * upstream).sum().backward()
    return {"rows": [{"grad_weight": w.grad, "grad_bias": b.grad}]}


def _conv_backward(x, weight, bias, upstream):
    images, up = values(x), values(upstream)
    out, ch, size = weight.shape[0], weight.shape[1], weight.shape[2]
    pad, height, width = size // 2, x.shape[2], x.shape[3]

    def pixel(n, c, i, j):
        return images[n][c][i][j] if 0 <= i < height and 0 <= j < width else Fraction(0)

    grad_w = [
        [
            [
                [
                    sum(
                        (
                            up[n][o][i][j] * pixel(n, c, i + a - pad, j + b - pad)
                            for n in range(len(images))
                            for i in range(height)
                            for j in range(width)
                        ),
                        Fraction(0),
                    )
                    for b in range(size)
                ]
                for a in range(size)
            ]
            for c in range(ch)
        ]
        for o in range(out)
    ]
    grad_b = [sum((e for n in range(len(images)) for e in leaves(up[n][o])), Fraction(0)) for o in range(out)]
    return [
        {"grad_weight": ExactTensor.of("float32", grad_w), "grad_bias": ExactTensor.of("float32", grad_b)}
    ]


def _sample_conv_upstream(draw, level):
    inputs = _sample_conv(draw, 3)
    n, _, h, w = inputs["x"].shape
    return {**inputs, "upstream": dyadic_tensor(draw, (n, inputs["weight"].shape[0], h, w), -1, 1, 2)}


def _conv_out(i):
    return f32(i["x"].shape[0], i["weight"].shape[0], *dims(i["x"])[2:])


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=conv_same_padding,
    independent=_conv_same_padding,
    sample=_sample_conv,
    question=lambda i: (
        f"""{_conv_math(i)} Compute this with K = `weight` and c = `bias`. Give the
       output `y` (N, {i["weight"].shape[0]}, H, W)."""
    ),
    answer=lambda i: ({"y": _conv_out(i)},),
)


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=conv_relu_mean,
    independent=_conv_relu_mean,
    sample=_sample_conv,
    question=lambda i: (
        f"""{_conv_math(i)} Compute this with K = `weight` and c = `bias`, replace every
       negative output by 0, and give `channel_means`: for each image and output channel, the mean of
       the resulting H x W plane (shape (N, {i["weight"].shape[0]}))."""
    ),
    answer=lambda i: ({"channel_means": f32(i["x"].shape[0], i["weight"].shape[0])},),
)


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=conv_best,
    sample=candidate_sampler(_sample_conv, _CONV_STACK, _CONV_OUT),
    question=lambda i: (
        f"""{_conv_math(i)} Candidate k (k = 0..{i["weights"].shape[0] - 1}) uses
       K = `weights[k]` and c = `bias`, applied to `x`. {BEST}"""
    ),
    **_CONV_BEST,
)


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=conv_backward,
    independent=_conv_backward,
    sample=_sample_conv_upstream,
    question=lambda i: (
        f"""{_conv_math(i)} With K = `weight`, c = `bias` and the output y computed
       this way from `x`, let L = the sum over all elements of y * `upstream`. Give the gradients of L
       with respect to the kernels, `grad_weight` (shape {shape_text(i["weight"].shape)}), and with
       respect to the offsets c, `grad_bias`."""
    ),
    answer=lambda i: (
        {"grad_weight": f32(*dims(i["weight"])), "grad_bias": f32(i["weight"].shape[0])},
    ),
)


CONV_SAME_PADDING = five_levels(
    "conv_same_padding",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the Conv2d call; L2 the zero-padded cross-correlation described; L3 convolution, ReLU and "
   "the mean of each plane; L4 the candidate kernel set closest to each of two targets; L5 the "
   "gradient of a weighted sum of the outputs with respect to the kernels and offsets",
)
