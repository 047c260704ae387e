"""nn_modules (pt-016..pt-027): Linear, Conv2d, activations, GELU, softmax, LayerNorm, pooling,
Flatten in a Sequential, Embedding and BatchNorm, all with explicit deterministic weights.

Module weights are copied in from the inputs (never default initialisation under a seed).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, i64, pytorch_family, tensor
from exactgrade.domains.pytorch.exact import (
    ExactTensor,
    elementwise,
    hp,
    innermost_rows,
    log_softmax,
    matmul,
    mean,
    reshape,
    sigmoid,
    softmax,
    to_fraction,
    transpose,
    values,
)
from exactgrade.domains.pytorch.levels import clear_winner, leveled, noise, rounded, solve
from exactgrade.domains.pytorch.sampling import (
    distinct_dyadic_tensor,
    dyadic_tensor,
    int_tensor,
    shape_text,
    word,
)
from exactgrade.family import Branch, Draw, Reject


def _affine(rows, weight, bias):
    """rows @ weight^T + bias, exactly (the nn.Linear convention: weight is (out, in))."""
    return [[s + b for s, b in zip(r, bias, strict=True)] for r in matmul(rows, transpose(weight))]


def _cross_correlate(image, kernels, bias, stride, padding):
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
    return [{"y": ExactTensor.of("float32", _affine(values(x), values(weight), values(bias)))}]


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
    return [{"y": ExactTensor.of("float32", [_cross_correlate(image, kernels, offsets, 1, padding)
                                             for image in values(x)])}]


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
                    for plane in _cross_correlate(image[g * per_group_in:(g + 1) * per_group_in],
                                                  kernels[g * per_group_out:(g + 1) * per_group_out],
                                                  zero_bias, 2, 0)])
    return [{"y": ExactTensor.of("float32", out)}]


# pt-019 -------------------------------------------------------------------------------------------
def pointwise_activations(x):
    import torch
    import torch.nn.functional as F

    return {"rows": [{
        "relu": F.relu(x),
        "leaky_relu": F.leaky_relu(x, negative_slope=0.1),
        "sigmoid": torch.sigmoid(x),
        "silu": F.silu(x),
        "softplus": F.softplus(x),
    }]}


def _pointwise_activations(x):
    v = values(x)
    return [{
        "relu": ExactTensor.of("float32", elementwise(lambda e: max(e, Fraction(0)), v)),
        "leaky_relu": ExactTensor.of("float32", elementwise(lambda e: e if e > 0 else e / 10, v)),
        "sigmoid": ExactTensor.of("float32", elementwise(sigmoid, v)),
        "silu": ExactTensor.of("float32", elementwise(lambda e: hp(e) * sigmoid(e), v)),
        "softplus": ExactTensor.of("float32", elementwise(lambda e: mpmath.log(1 + mpmath.exp(hp(e))), v)),
    }]


# pt-020 -------------------------------------------------------------------------------------------
def gelu_variants(x):
    import torch.nn.functional as F

    return {"rows": [{"gelu_erf": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh")}]}


def _gelu_variants(x):
    v = elementwise(hp, values(x))
    c, k = mpmath.sqrt(2 / mpmath.pi), mpmath.mpf("0.044715")

    def exact(e):
        return e / 2 * (1 + mpmath.erf(e / mpmath.sqrt(2)))

    def approximate(e):
        return e / 2 * (1 + mpmath.tanh(c * (e + k * e ** 3)))

    return [{
        "gelu_erf": ExactTensor.of("float32", elementwise(exact, v)),
        "gelu_tanh": ExactTensor.of("float32", elementwise(approximate, v)),
    }]


# pt-021 -------------------------------------------------------------------------------------------
def softmax_rows(logits):
    import torch

    return {"rows": [{
        "probabilities": torch.softmax(logits, dim=1),
        "log_probabilities": torch.log_softmax(logits, dim=1),
    }]}


def _softmax_rows(logits):
    v = values(logits)
    return [{
        "probabilities": ExactTensor.of("float32", [softmax(row) for row in v]),
        "log_probabilities": ExactTensor.of("float32", [log_softmax(row) for row in v]),
    }]


# pt-022 -------------------------------------------------------------------------------------------
def layer_norm(x, weight, bias):
    import torch

    norm = torch.nn.LayerNorm(x.shape[-1], eps=1e-5, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        y = norm(x)
    return {"rows": [{"y": y}]}


def _layer_norm(x, weight, bias):
    w, b = values(weight), values(bias)
    eps = hp(1e-5)  # the float nn.LayerNorm stores, exactly
    out = []
    for row in innermost_rows(values(x)):
        m = mean(row)
        var = mean([(e - m) ** 2 for e in row])  # biased variance, as LayerNorm uses
        scale = 1 / mpmath.sqrt(hp(var) + eps)
        out += [hp(e - m) * scale * hp(wi) + hp(bi) for e, wi, bi in zip(row, w, b, strict=True)]
    return [{"y": ExactTensor.of("float32", reshape(out, tuple(x.shape)))}]


# pt-023 -------------------------------------------------------------------------------------------
def pooling(x):
    import torch.nn.functional as F

    ceil_max, ceil_indices = F.max_pool2d(x, kernel_size=2, ceil_mode=True, return_indices=True)
    return {"rows": [{
        "max_floor": F.max_pool2d(x, kernel_size=2),
        "max_ceil": ceil_max,
        "max_ceil_indices": ceil_indices,
        "avg_with_pad": F.avg_pool2d(x, kernel_size=3, stride=1, padding=1),
        "avg_without_pad": F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False),
    }]}


def _pooling(x):
    planes = [[_pool_plane(image) for image in sample] for sample in values(x)]

    def field(name, dtype):
        return ExactTensor.of(dtype, [[plane[name] for plane in sample] for sample in planes])

    return [{
        "max_floor": field("max_floor", "float32"),
        "max_ceil": field("max_ceil", "float32"),
        "max_ceil_indices": field("max_ceil_indices", "int64"),
        "avg_with_pad": field("avg_with_pad", "float32"),
        "avg_without_pad": field("avg_without_pad", "float32"),
    }]


def _pool_plane(image):
    """The five pooled versions of one H x W plane, exactly."""
    height, width = len(image), len(image[0])

    def window(rows, cols):
        return [(image[i][j], i * width + j) for i in rows if 0 <= i < height for j in cols if 0 <= j < width]

    def max_pool(ceil):
        count = math.ceil if ceil else math.floor
        out_h, out_w = count((height - 2) / 2) + 1, count((width - 2) / 2) + 1
        return [[max(window(range(2 * i, 2 * i + 2), range(2 * j, 2 * j + 2))) for j in range(out_w)]
                for i in range(out_h)]

    def avg_pool(include_pad):
        out = []
        for i in range(height):
            out.append([])
            for j in range(width):
                cells = window(range(i - 1, i + 2), range(j - 1, j + 2))
                total = sum((value for value, _ in cells), Fraction(0))
                out[-1].append(total / (9 if include_pad else len(cells)))
        return out

    ceil = max_pool(True)
    return {
        "max_floor": [[v for v, _ in r] for r in max_pool(False)],
        "max_ceil": [[v for v, _ in r] for r in ceil],
        "max_ceil_indices": [[k for _, k in r] for r in ceil],
        "avg_with_pad": avg_pool(True),
        "avg_without_pad": avg_pool(False),
    }


# pt-024 -------------------------------------------------------------------------------------------
def adaptive_pooling(x):
    import torch.nn.functional as F

    return {"rows": [{
        "adaptive_avg": F.adaptive_avg_pool2d(x, (3, 4)),
        "adaptive_max": F.adaptive_max_pool2d(x, (3, 4)),
    }]}


def _adaptive_pooling(x):
    def bins(size, out):  # bin i covers [floor(i*size/out), ceil((i+1)*size/out)); neighbours may overlap
        return [range(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]

    avg, best = [], []
    for sample in values(x):
        avg.append([])
        best.append([])
        for channel in sample:
            cells = [[[channel[i][j] for i in rows for j in cols] for cols in bins(len(channel[0]), 4)]
                     for rows in bins(len(channel), 3)]
            avg[-1].append([[mean(c) for c in line] for line in cells])
            best[-1].append([[max(c) for c in line] for line in cells])
    return [{
        "adaptive_avg": ExactTensor.of("float32", avg),
        "adaptive_max": ExactTensor.of("float32", best),
    }]


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
    hidden = [[max(h, Fraction(0)) for h in row] for row in _affine(flat, values(w1), values(b1))]
    return [{"y": ExactTensor.of("float32", _affine(hidden, values(w2), values(b2)))}]


# pt-026 -------------------------------------------------------------------------------------------
def embedding_lookup(weight, idx, flat_idx, offsets):
    import torch
    import torch.nn.functional as F

    embedding = torch.nn.Embedding(weight.shape[0], weight.shape[1], padding_idx=0, dtype=weight.dtype)
    with torch.no_grad():
        embedding.weight.copy_(weight)
        looked_up = embedding(idx)
    return {"rows": [{
        "looked_up": looked_up,
        "bag_mean": F.embedding_bag(flat_idx, weight, offsets, mode="mean"),
        "bag_max": F.embedding_bag(flat_idx, weight, offsets, mode="max"),
    }]}


def _embedding_lookup(weight, idx, flat_idx, offsets):
    table, ids, starts = values(weight), values(flat_idx), values(offsets)
    bags = [ids[start:end] for start, end in zip(starts, [*starts[1:], len(ids)], strict=True)]
    return [{
        # padding_idx only zeroes the row at initialisation and blocks its gradient: the copied row comes back
        "looked_up": ExactTensor.of("float32", [[table[i] for i in row] for row in values(idx)]),
        "bag_mean": ExactTensor.of("float32", [[mean(col) for col in transpose([table[i] for i in bag])]
                                               for bag in bags]),
        "bag_max": ExactTensor.of("float32", [[max(col) for col in transpose([table[i] for i in bag])]
                                              for bag in bags]),
    }]


# pt-027 -------------------------------------------------------------------------------------------
def batch_norm_training(x, weight, bias):
    import torch

    norm = torch.nn.BatchNorm1d(x.shape[1], eps=1e-5, momentum=0.1, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        norm.train()
        y = norm(x)
    return {"rows": [{"y": y, "running_mean": norm.running_mean, "running_var": norm.running_var}]}


def _batch_norm_training(x, weight, bias):
    columns = transpose(values(x))
    n = len(columns[0])
    eps, momentum = hp(1e-5), hp(0.1)  # the floats the module stores, exactly
    means = [mean(c) for c in columns]
    squares = [sum(((e - m) ** 2 for e in c), Fraction(0)) for c, m in zip(columns, means, strict=True)]
    normalised = [[hp(e - m) / mpmath.sqrt(hp(s / n) + eps) * hp(w) + hp(b) for e in c]  # biased var here ...
                  for c, m, s, w, b in zip(columns, means, squares, values(weight), values(bias),
                                           strict=True)]
    return [{
        "y": ExactTensor.of("float32", transpose(normalised)),
        "running_mean": ExactTensor.of("float32", [momentum * hp(m) for m in means]),
        # ... but the unbiased variance (n - 1) in the running estimate
        "running_var": ExactTensor.of("float32", [1 - momentum + momentum * hp(s / (n - 1))
                                                  for s in squares]),
    }]


# pt-chain ----------------------------------------------------------------------------------------
def conv_relu_pool_linear(x, conv_weight, conv_bias, fc_weight, fc_bias):
    import torch

    size = conv_weight.shape[2]
    model = torch.nn.Sequential(
        torch.nn.Conv2d(
            conv_weight.shape[1], conv_weight.shape[0], kernel_size=size, padding=size // 2, dtype=x.dtype
        ),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(fc_weight.shape[1], fc_weight.shape[0], dtype=x.dtype),
    )
    with torch.no_grad():
        model[0].weight.copy_(conv_weight)
        model[0].bias.copy_(conv_bias)
        model[4].weight.copy_(fc_weight)
        model[4].bias.copy_(fc_bias)
        features = model[:4](x)
        logits = model[4](features)
    return {"rows": [{"features": features, "logits": logits, "predicted": logits.argmax(dim=1)}]}


def _cnn_logits(x, conv_weight, conv_bias, fc_weight, fc_bias):
    """(features, logits) of the conv -> relu -> 2x2 max pool -> flatten -> linear chain, exactly."""
    kernels, offsets, padding = values(conv_weight), values(conv_bias), conv_weight.shape[2] // 2
    features = []
    for image in values(x):
        maps = _cross_correlate(image, kernels, offsets, 1, padding)
        pooled = [
            [
                [
                    max(
                        max(
                            m[2 * i][2 * j], m[2 * i][2 * j + 1], m[2 * i + 1][2 * j], m[2 * i + 1][2 * j + 1]
                        ),
                        Fraction(0),
                    )  # relu then max equals max then relu
                    for j in range(len(m[0]) // 2)
                ]
                for i in range(len(m) // 2)
            ]
            for m in maps
        ]
        features.append([e for plane in pooled for row in plane for e in row])
    return features, _affine(features, values(fc_weight), values(fc_bias))


def _conv_relu_pool_linear(x, conv_weight, conv_bias, fc_weight, fc_bias):
    features, logits = _cnn_logits(x, conv_weight, conv_bias, fc_weight, fc_bias)
    return [
        {
            "features": ExactTensor.of("float32", features),
            "logits": ExactTensor.of("float32", logits),
            "predicted": ExactTensor.of("int64", [row.index(max(row)) for row in logits]),
        }
    ]


# ------------------------------------------------------------------------------------ families
# Level 1 is about the canonical size; each level grows the shapes, batches and channels.


def _dims(x):
    return tuple(x.shape)


def _sample_linear(draw: Draw, level: int) -> dict:
    batch, n_in, n_out = draw.integer(2, 1 + level), draw.integer(3, 3 + level), draw.integer(2, 2 + level)
    return {
        "x": dyadic_tensor(draw, (batch, n_in), -3, 3, 2),
        "weight": dyadic_tensor(draw, (n_out, n_in), -1, 1, 3),
        "bias": dyadic_tensor(draw, (n_out,), -1, 1, 3),
    }


LINEAR_LAYER = pytorch_family(
    "linear_layer",
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
    levels="batch 2..1+level, in 3..3+level, out 2..2+level features; inputs on the 1/4 grid, weights "
    "on the 1/8 grid",
)

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


CONV_SAME_PADDING = pytorch_family(
    "conv_same_padding",
    "nn_modules",
    reference=conv_same_padding,
    independent=_conv_same_padding,
    question=lambda i: (
        f"""Apply torch.nn.Conv2d({i["weight"].shape[1]}, {i["weight"].shape[0]},
        kernel_size={i["weight"].shape[2]}, padding={i["weight"].shape[2] // 2}) with weight `weight` and
        bias `bias` to the image batch `x` (N, C, H, W). The first kernel is a Sobel-like edge filter; use
        it exactly as given, the way Conv2d applies kernels. Give the output `y`."""
    ),
    answer=lambda i: ({"y": f32(i["x"].shape[0], i["weight"].shape[0], *_dims(i["x"])[2:])},),
    sample=_sample_conv,
    levels="3x3 kernels, the first a Sobel filter in one of four orientations; batch 1 (up to level-1 "
    "from level 3), 1..1+level//2 input and 2..1+level output channels, H 4..3+level, W 4..4+level",
)


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
    x, w = _dims(i["x"]), _dims(i["weight"])
    return x[0], w[0], (x[2] - w[2]) // 2 + 1, (x[3] - w[2]) // 2 + 1


GROUPED_STRIDED_CONV = pytorch_family(
    "grouped_strided_conv",
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
    levels="2 groups (2 or 3 from level 3), 1..1+level//2 channels per group in and out, kernel 2 "
    "(2 or 3 from level 3), stride 2, planes 4..4+level, batch 2 from level 4",
)


def _sample_elementwise(low: float, high: float, widen: float):
    def sample(draw: Draw, level: int) -> dict:
        shape = (7 + level,) if level <= 2 else (draw.integer(2, level), draw.integer(4, 3 + level))
        return {"x": dyadic_tensor(draw, shape, low - widen * level, high + widen * level, 2)}

    return sample


POINTWISE_ACTIVATIONS = pytorch_family(
    "pointwise_activations",
    "nn_modules",
    reference=pointwise_activations,
    independent=_pointwise_activations,
    question="""Apply five activations to `x` elementwise: `relu`; `leaky_relu` with negative slope 0.1;
        `sigmoid`; `silu` (x * sigmoid(x)); and `softplus` with torch's default beta and threshold.""",
    answer=lambda i: (
        {name: f32(*_dims(i["x"])) for name in ("relu", "leaky_relu", "sigmoid", "silu", "softplus")},
    ),
    sample=_sample_elementwise(-3, 3, 0.5),
    levels="7+level values (levels 1-2), then a (2..level, 4..3+level) matrix; the 1/4 grid within "
    "+-(3+level/2)",
)

GELU_VARIANTS = pytorch_family(
    "gelu_variants",
    "nn_modules",
    reference=gelu_variants,
    independent=_gelu_variants,
    question="""Apply GELU to `x` twice: `gelu_erf`, the exact form x * Phi(x) with the Gaussian CDF
        (torch's default), and `gelu_tanh`, torch's tanh approximation.""",
    answer=lambda i: ({"gelu_erf": f32(*_dims(i["x"])), "gelu_tanh": f32(*_dims(i["x"]))},),
    sample=_sample_elementwise(-2.5, 2.5, 0.0),
    levels="7+level values (levels 1-2), then a (2..level, 4..3+level) matrix; the 1/4 grid within "
    "+-2.5 (below about -2.7 torch's float32 erf GELU misses the exact value by more than the "
    "tolerance: 123% of it at x = -3)",
)


def _sample_softmax(draw: Draw, level: int) -> dict:
    rows, cols = draw.integer(2, 1 + level), draw.integer(4, 3 + level)
    logits = values(dyadic_tensor(draw, (rows, cols), -3, 3, 2))
    large = draw.below(rows)
    shift = draw.integer(90, 110)  # one row of logits around 100: exp overflows float32 there
    return {
        "logits": tensor(
            "float32",
            [[float(e + shift) if r == large else float(e) for e in row] for r, row in enumerate(logits)],
        )
    }


SOFTMAX_ROWS = pytorch_family(
    "softmax_rows",
    "nn_modules",
    reference=softmax_rows,
    independent=_softmax_rows,
    question="""Give `probabilities`, the softmax of each row of `logits`, and `log_probabilities`, the
        log of the softmax of each row, both in float32. (exp(x) overflows float32 once x exceeds
        about 88.7: compute stably.)""",
    answer=lambda i: (
        {"probabilities": f32(*_dims(i["logits"])), "log_probabilities": f32(*_dims(i["logits"]))},
    ),
    sample=_sample_softmax,
    levels="logits of shape (2..1+level, 4..3+level) on the 1/4 grid, one row shifted by 90..110",
)


def _sample_layer_norm(draw: Draw, level: int) -> dict:
    width = draw.integer(4, 4 + level)
    lead = (draw.integer(2, 1 + level),) if level <= 2 else (draw.integer(2, level), draw.integer(2, 3))
    return {
        "x": dyadic_tensor(draw, (*lead, width), -4, 12, 2),
        "weight": dyadic_tensor(draw, (width,), 0.25, 2, 2),
        "bias": dyadic_tensor(draw, (width,), -1, 1, 3),
    }


LAYER_NORM = pytorch_family(
    "layer_norm",
    "nn_modules",
    reference=layer_norm,
    independent=_layer_norm,
    question=lambda i: (
        f"""Apply torch.nn.LayerNorm over the last dimension (size {i["x"].shape[-1]},
        eps=1e-5) with elementwise affine weight `weight` and bias `bias` to `x`. Give the output `y`."""
    ),
    answer=lambda i: ({"y": f32(*_dims(i["x"]))},),
    sample=_sample_layer_norm,
    levels="rows of 4..4+level features; 2..1+level rows (levels 1-2), then a (2..level, 2..3, .) batch",
)


def _sample_pooling(draw: Draw, level: int) -> dict:
    batch, channels = (1, 1) if level <= 2 else (draw.integer(1, level - 1), draw.integer(1, 2))
    height, width = (
        draw.integer(4, 3 + level),
        2 * draw.integer(2, 1 + level) + 1,
    )  # odd width: ceil_mode matters
    return {"x": distinct_dyadic_tensor(draw, (batch, channels, height, width), 3)}


def _pool_windows_untied(inputs: Inputs) -> str | None:
    for n, sample in enumerate(values(inputs["x"])):
        for c, plane in enumerate(sample):
            for i in range(0, len(plane), 2):
                for j in range(0, len(plane[0]), 2):
                    cells = [
                        plane[a][b]
                        for a in (i, i + 1)
                        if a < len(plane)
                        for b in (j, j + 1)
                        if b < len(plane[0])
                    ]
                    if cells.count(max(cells)) > 1:
                        return (f"the 2x2 window at ({n}, {c}, {i}, {j}) has a tied maximum: "
                                "its index is ambiguous")
    return None


def _pooled(i, ceil):
    n, c, h, w = _dims(i["x"])
    count = (lambda v: -(-v // 2)) if ceil else (lambda v: v // 2)
    return n, c, count(h - 2) + 1, count(w - 2) + 1


POOLING = pytorch_family(
    "pooling",
    "nn_modules",
    reference=pooling,
    independent=_pooling,
    question=lambda i: (
        f"""For the image batch `x` (N, C, H, W) = {shape_text(i["x"].shape)}, give:
        `max_floor`, 2x2 max pooling with stride 2 (torch defaults); `max_ceil`, the same with
        ceil_mode=True, and `max_ceil_indices`, the indices it returns (return_indices=True, flat positions
        in each H*W plane); `avg_with_pad`, 3x3 average pooling with stride 1 and padding 1 (torch defaults
        otherwise); and `avg_without_pad`, the same but excluding the padding from the divisor
        (count_include_pad=False)."""
    ),
    answer=lambda i: (
        {
            "max_floor": f32(*_pooled(i, False)),
            "max_ceil": f32(*_pooled(i, True)),
            "max_ceil_indices": i64(*_pooled(i, True)),
            "avg_with_pad": f32(*_dims(i["x"])),
            "avg_without_pad": f32(*_dims(i["x"])),
        },
    ),
    sample=_sample_pooling,
    levels="one (1, 1, H, W) plane at levels 1-2, then batches of 1..level-1 and 1..2 channels; "
    "H 4..3+level, odd W 5..3+2*level; distinct values on the 1/8 grid (a tied maximum in a 2x2 window "
    "would be rejected)",
    refuse=_pool_windows_untied,
)


def _sample_adaptive(draw: Draw, level: int) -> dict:
    batch, channels = (1, 2) if level <= 2 else (draw.integer(1, level - 1), draw.integer(1, 3))
    shape = (batch, channels, draw.integer(4, 4 + level), draw.integer(5, 6 + level))
    return {"x": dyadic_tensor(draw, shape, -2, 2, 2)}


ADAPTIVE_POOLING = pytorch_family(
    "adaptive_pooling",
    "nn_modules",
    reference=adaptive_pooling,
    independent=_adaptive_pooling,
    question=lambda i: (
        f"""Pool `x` (N, C, H, W) = {shape_text(i["x"].shape)} to an output of size (3, 4)
        with adaptive average pooling (`adaptive_avg`) and adaptive max pooling (`adaptive_max`), as torch
        defines them."""
    ),
    answer=lambda i: (
        {"adaptive_avg": f32(*_dims(i["x"])[:2], 3, 4), "adaptive_max": f32(*_dims(i["x"])[:2], 3, 4)},
    ),
    sample=_sample_adaptive,
    levels="output (3, 4) from H 4..4+level, W 5..6+level (overlapping bins); 2 channels at levels 1-2, "
    "then batches of 1..level-1 and 1..3 channels",
)


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
    if all(h > 0 for row in _affine(flat, values(i["w1"]), values(i["b1"])) for h in row):
        return "every hidden pre-activation is positive: the ReLU would do nothing"
    return None


FLATTEN_MLP = pytorch_family(
    "flatten_mlp",
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
    levels="batch 2..1+level of (2..2+level//2, 2..3+level//2) samples, hidden 3..3+level, out "
    "2..1+level; an instance where the ReLU clips nothing rejected",
    refuse=_relu_clips,
)


def _sample_embedding(draw: Draw, level: int) -> dict:
    vocab, dim = draw.integer(4, 4 + 2 * level), draw.integer(2, 2 + level)
    idx = int_tensor(draw, (draw.integer(2, 1 + level), draw.integer(2, 2 + level)), 0, vocab - 1)
    bags = draw.integer(2, 1 + level)
    flat = [draw.integer(0, vocab - 1) for _ in range(bags + draw.integer(bags, 2 * bags + level))]
    offsets = [0, *sorted(draw.sample(range(1, len(flat)), bags - 1))]
    return {
        "weight": dyadic_tensor(draw, (vocab, dim), -2, 2, 3),
        "idx": idx,
        "flat_idx": tensor("int64", flat),
        "offsets": tensor("int64", offsets),
    }


def _looks_up_padding_row(inputs: Inputs) -> str | None:
    if 0 not in [e for row in values(inputs["idx"]) for e in row]:
        return "idx never looks up the padding row 0"
    return None


EMBEDDING_LOOKUP = pytorch_family(
    "embedding_lookup",
    "nn_modules",
    reference=embedding_lookup,
    independent=_embedding_lookup,
    question=lambda i: (
        f"""Build torch.nn.Embedding({i["weight"].shape[0]}, {i["weight"].shape[1]},
        padding_idx=0), then copy `weight` into its weight. Give `looked_up`, the embeddings of `idx`.
        Then, with the same table `weight`, treat `flat_idx` as bags that start at the positions in
        `offsets` (torch.nn.functional.embedding_bag) and give `bag_mean` and `bag_max`, each bag reduced
        with mode 'mean' and 'max'."""
    ),
    answer=lambda i: (
        {
            "looked_up": f32(*_dims(i["idx"]), i["weight"].shape[1]),
            "bag_mean": f32(i["offsets"].shape[0], i["weight"].shape[1]),
            "bag_max": f32(i["offsets"].shape[0], i["weight"].shape[1]),
        },
    ),
    sample=_sample_embedding,
    levels="a (4..4+2*level, 2..2+level) table, idx (2..1+level, 2..2+level) using row 0, 2..1+level "
    "non-empty bags",
    refuse=_looks_up_padding_row,
)


def _sample_batch_norm(draw: Draw, level: int) -> dict:
    batch, features = draw.integer(3, 3 + level), draw.integer(2, 2 + level)
    x = dyadic_tensor(draw, (batch, features), -3, 4, 2)
    if any(len(set(column)) == 1 for column in transpose(values(x))):
        raise Reject("a constant feature has zero batch variance")
    return {
        "x": x,
        "weight": dyadic_tensor(draw, (features,), 0.25, 2, 2),
        "bias": dyadic_tensor(draw, (features,), -1, 1, 3),
    }


BATCH_NORM_TRAINING = pytorch_family(
    "batch_norm_training",
    "nn_modules",
    reference=batch_norm_training,
    independent=_batch_norm_training,
    question=lambda i: (
        f"""Create a fresh torch.nn.BatchNorm1d({i["x"].shape[1]}) (eps=1e-5, momentum=0.1),
        set its weight and bias to `weight` and `bias`, and run one forward pass on the batch `x` in
        training mode. Give the output `y` and the module's `running_mean` and `running_var` after that
        pass."""
    ),
    answer=lambda i: (
        {"y": f32(*_dims(i["x"])), "running_mean": f32(i["x"].shape[1]), "running_var": f32(i["x"].shape[1])},
    ),
    sample=_sample_batch_norm,
    levels="a batch of 3..3+level samples of 2..2+level features on the 1/4 grid (no constant feature)",
)


def _sample_cnn(draw: Draw, level: int) -> dict:
    batch, c_in, c_out = draw.integer(1, level), draw.integer(1, 1 + level // 3), draw.integer(2, 1 + level)
    height, width = 2 * draw.integer(2, 1 + (level + 1) // 2), 2 * draw.integer(2, 1 + (level + 1) // 2)
    size = 3 if level <= 3 else draw.choice((1, 3))
    features = c_out * (height // 2) * (width // 2)
    classes = draw.integer(2, 2 + level // 2)
    return {
        "x": dyadic_tensor(draw, (batch, c_in, height, width), -2, 2, 2),
        "conv_weight": dyadic_tensor(draw, (c_out, c_in, size, size), -1, 1, 2),
        "conv_bias": dyadic_tensor(draw, (c_out,), -0.5, 0.5, 3),
        "fc_weight": dyadic_tensor(draw, (classes, features), -1, 1, 3),
        "fc_bias": dyadic_tensor(draw, (classes,), -0.5, 0.5, 3),
    }


def _prediction_untied(inputs: Inputs) -> str | None:
    _, logits = _cnn_logits(**inputs)
    for n, row in enumerate(logits):
        if row.count(max(row)) > 1:
            return f"sample {n} has tied largest logits: its predicted class is ambiguous"
    return None


def _every_prediction_is_class_zero(inputs: Inputs) -> str | None:
    _, logits = _cnn_logits(**inputs)
    if all(row.index(max(row)) == 0 for row in logits):
        return "every sample's largest logit is class 0: predicted is all zeros"
    return None


CONV_RELU_POOL_LINEAR = pytorch_family(
    "conv_relu_pool_linear",
    "nn_modules",
    reference=conv_relu_pool_linear,
    independent=_conv_relu_pool_linear,
    question=lambda i: (
        f"""Build torch.nn.Sequential(Conv2d({i["conv_weight"].shape[1]},
        {i["conv_weight"].shape[0]}, kernel_size={i["conv_weight"].shape[2]},
        padding={i["conv_weight"].shape[2] // 2}), ReLU(), MaxPool2d(2), Flatten(),
        Linear({i["fc_weight"].shape[1]}, {i["fc_weight"].shape[0]})) with the convolution's weight and bias
        set to `conv_weight`, `conv_bias` and the Linear's to `fc_weight`, `fc_bias`, and apply it to the
        image batch `x` (N, C, H, W). Give `features`, the flattened output of the first four modules;
        `logits`, the model's output; and `predicted`, the index of the largest logit of each sample."""
    ),
    answer=lambda i: (
        {
            "features": f32(i["x"].shape[0], i["fc_weight"].shape[1]),
            "logits": f32(i["x"].shape[0], i["fc_weight"].shape[0]),
            "predicted": i64(i["x"].shape[0]),
        },
    ),
    sample=_sample_cnn,
    levels="a chain conv -> relu -> 2x2 max pool -> flatten -> linear at every level; batch 1..level, "
    "1..1+level//3 input and 2..1+level conv channels, even planes up to 2+2*((level+1)//2), "
    "1x1 or 3x3 kernels from level 4, 2..2+level//2 classes; tied top logits rejected",
    refuse=_prediction_untied,
    zero_reason=_every_prediction_is_class_zero,
)

# ------------------------------------------------------------------------------------ levels 2-5
# Level 1 is the canonical question (the call named). Level 2 describes the operation mathematically;
# level 3 chains it with a second operation (only the end asked); level 4 is a search or an inverse
# (the best of candidate parameters for targets, a parameter recovered from outputs, a smallest size);
# level 5 is a backward pass, a training step or a whole block reproduced from its mathematics.

_BEST = """For each target `targets[r]` (a row r of the answer), give `best`, the candidate k whose output is
    closest to that target (the smallest sum over all elements of the squared difference; on an exact tie,
    the smaller k), and `error`, that smallest sum."""


def _nn(name, **kwargs):
    return pytorch_family(name, "nn_modules", levels="", **kwargs)


def _flat(nested):
    return [e for item in nested for e in _flat(item)] if isinstance(nested, list) else [nested]


def _candidate_sampler(base, stacked, output, count=3):
    """The base inputs with the parameters in ``stacked`` (name -> (stacked name, low, high, bits))
    replaced by ``count`` candidates, and two targets near the outputs of two different candidates."""

    def sample(draw, level):
        inputs = dict(base(draw, min(level, 3)))
        for name, (plural, low, high, bits) in stacked.items():
            first = values(inputs.pop(name))
            rest = [values(dyadic_tensor(draw, _dims_of(first), low, high, bits)) for _ in range(count - 1)]
            inputs[plural] = tensor("float32", [first, *rest])
        outputs = _candidate_outputs(inputs, stacked, output)
        targets = [
            [rounded(e, 3) + noise(draw, 3) for e in outputs[k].values] for k in draw.sample(range(count), 2)
        ]
        inputs["targets"] = tensor("float32", [reshape(t, outputs[0].shape) for t in targets])
        return inputs

    return sample


def _dims_of(nested):
    return (len(nested), *_dims_of(nested[0])) if isinstance(nested, list) else ()


def _candidate_outputs(inputs, stacked, output):
    plurals = {plural: name for name, (plural, *_) in stacked.items()}
    count = next(iter(inputs[p].shape[0] for p in plurals))
    fixed = {k: v for k, v in inputs.items() if k not in plurals and k != "targets"}
    return [
        output({**fixed, **{name: tensor("float32", values(inputs[p])[k]) for p, name in plurals.items()}})
        for k in range(count)
    ]


def _candidate_errors(inputs, stacked, output):
    outputs = _candidate_outputs(inputs, stacked, output)
    return [
        [
            sum(((a - b) ** 2 for a, b in zip(o.values, _flat(target), strict=True)), Fraction(0))
            if all(type(a) is Fraction for a in o.values)
            else mpmath.fsum((hp(a) - hp(b)) ** 2 for a, b in zip(o.values, _flat(target), strict=True))
            for o in outputs
        ]
        for target in values(inputs["targets"])
    ]


def _best_of(stacked, output):
    """The independent key, the refusal and the zero reason of a best-candidate level."""

    def independent(**inputs):
        rows = []
        for errors in _candidate_errors(inputs, stacked, output):
            k = min(range(len(errors)), key=lambda i: (errors[i], i))
            rows.append({"best": k, "error": ExactTensor.of("float32", errors[k])})
        return rows

    def refuse(inputs):
        for errors in _candidate_errors(inputs, stacked, output):
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


# linear_layer ------------------------------------------------------------------------------------
_LINEAR_MATH = """A fully connected layer maps each row v of its input to the vector whose entry o is the sum
    over i of W[o, i] * v[i], plus c[o], with W (out_features, in_features) and c (out_features,)."""


def linear_confidence(x, weight, bias):
    import torch

    scores = x @ weight.T + bias
    return {"rows": [{"confidence": torch.softmax(scores, dim=1).max(dim=1).values}]}


def _linear_confidence(x, weight, bias):
    scores = _affine(values(x), values(weight), values(bias))
    return [{"confidence": ExactTensor.of("float32", [max(softmax(row)) for row in scores])}]


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
    y = _affine(values(x), values(weight), values(bias))
    return {"x": x, "y": tensor("float32", [[float(e) for e in row] for row in y])}


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
    out = _affine(vx, w, b)
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


LINEAR_LAYER = leveled(
    LINEAR_LAYER,
    {
        2: _nn(
            "linear_layer",
            reference=linear_layer,
            independent=_linear_layer,
            sample=_sample_linear,
            question=lambda i: (
                f"""{_LINEAR_MATH} Apply such a layer with W = `weight` and c = `bias` to every
               row of the batch `x`. Give the output `y`."""
            ),
            answer=lambda i: ({"y": f32(i["x"].shape[0], i["weight"].shape[0])},),
        ),
        3: _nn(
            "linear_layer",
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
        ),
        4: _nn(
            "linear_layer",
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
        ),
        5: _nn(
            "linear_layer",
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
                {"loss": f32(), "weight": f32(*_dims(i["weight"])), "bias": f32(*_dims(i["bias"]))},
            ),
        ),
    },
    levels="L1 the nn.Linear call; L2 the affine map described; L3 the probability of each row's top class "
    "(softmax of the layer's scores); L4 the layer recovered from input/output rows (exactly determined); "
    "L5 one gradient-descent step of the layer on a mean squared error, loss and updated parameters",
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
                [[mean([max(e, Fraction(0)) for e in _flat(plane)]) for plane in image] for image in planes],
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


_CONV_BEST = _best_of(_CONV_STACK, _CONV_OUT)


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
    grad_b = [sum((e for n in range(len(images)) for e in _flat(up[n][o])), Fraction(0)) for o in range(out)]
    return [
        {"grad_weight": ExactTensor.of("float32", grad_w), "grad_bias": ExactTensor.of("float32", grad_b)}
    ]


def _sample_conv_upstream(draw, level):
    inputs = _sample_conv(draw, 3)
    n, _, h, w = inputs["x"].shape
    return {**inputs, "upstream": dyadic_tensor(draw, (n, inputs["weight"].shape[0], h, w), -1, 1, 2)}


def _conv_out(i):
    return f32(i["x"].shape[0], i["weight"].shape[0], *_dims(i["x"])[2:])


CONV_SAME_PADDING = leveled(
    CONV_SAME_PADDING,
    {
        2: _nn(
            "conv_same_padding",
            reference=conv_same_padding,
            independent=_conv_same_padding,
            sample=_sample_conv,
            question=lambda i: (
                f"""{_conv_math(i)} Compute this with K = `weight` and c = `bias`. Give the
               output `y` (N, {i["weight"].shape[0]}, H, W)."""
            ),
            answer=lambda i: ({"y": _conv_out(i)},),
        ),
        3: _nn(
            "conv_same_padding",
            reference=conv_relu_mean,
            independent=_conv_relu_mean,
            sample=_sample_conv,
            question=lambda i: (
                f"""{_conv_math(i)} Compute this with K = `weight` and c = `bias`, replace every
               negative output by 0, and give `channel_means`: for each image and output channel, the mean of
               the resulting H x W plane (shape (N, {i["weight"].shape[0]}))."""
            ),
            answer=lambda i: ({"channel_means": f32(i["x"].shape[0], i["weight"].shape[0])},),
        ),
        4: _nn(
            "conv_same_padding",
            reference=conv_best,
            sample=_candidate_sampler(_sample_conv, _CONV_STACK, _CONV_OUT),
            question=lambda i: (
                f"""{_conv_math(i)} Candidate k (k = 0..{i["weights"].shape[0] - 1}) uses
               K = `weights[k]` and c = `bias`, applied to `x`. {_BEST}"""
            ),
            **_CONV_BEST,
        ),
        5: _nn(
            "conv_same_padding",
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
                {"grad_weight": f32(*_dims(i["weight"])), "grad_bias": f32(i["weight"].shape[0])},
            ),
        ),
    },
    levels="L1 the Conv2d call; L2 the zero-padded cross-correlation described; L3 convolution, ReLU and "
    "the mean of each plane; L4 the candidate kernel set closest to each of two targets; L5 the "
    "gradient of a weighted sum of the outputs with respect to the kernels and offsets",
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
                "float32", [[max(max(_flat(p)), Fraction(0)) for p in image] for image in planes]
            )
        }
    ]


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
_GROUPED_BEST = _best_of(_GROUPED_STACK, _GROUPED_OUT)


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


GROUPED_STRIDED_CONV = leveled(
    GROUPED_STRIDED_CONV,
    {
        2: _nn(
            "grouped_strided_conv",
            reference=grouped_strided_conv,
            independent=_grouped_strided_conv,
            sample=_sample_grouped,
            question=lambda i: f"""{_grouped_math(i)} Compute this with K = `weight`. Give the output `y`.""",
            answer=lambda i: ({"y": f32(*_grouped_output(i))},),
        ),
        3: _nn(
            "grouped_strided_conv",
            reference=grouped_relu_max,
            independent=_grouped_relu_max,
            sample=_sample_grouped,
            question=lambda i: (
                f"""{_grouped_math(i)} Compute this with K = `weight`, replace every negative
               output by 0, and give `channel_max`: for each image and output channel, the largest value of
               the resulting plane (shape (N, {i["weight"].shape[0]}))."""
            ),
            answer=lambda i: ({"channel_max": f32(i["x"].shape[0], i["weight"].shape[0])},),
        ),
        4: _nn(
            "grouped_strided_conv",
            reference=grouped_best,
            sample=_candidate_sampler(_sample_grouped, _GROUPED_STACK, _GROUPED_OUT),
            question=lambda i: (
                f"""{_grouped_math(i)} Candidate k (k = 0..{i["weights"].shape[0] - 1}) uses
               K = `weights[k]`, applied to `x`. {_BEST}"""
            ),
            **_GROUPED_BEST,
        ),
        5: _nn(
            "grouped_strided_conv",
            reference=grouped_input_gradient,
            independent=_grouped_input_gradient,
            sample=_sample_grouped_upstream,
            question=lambda i: (
                f"""{_grouped_math(i)} With K = `weight` and the output y computed this way
               from `x`, let L = the sum over all elements of y * `upstream`. Give `grad_x`, the gradient of L
               with respect to `x` (shape {shape_text(i["x"].shape)}; pixels no window covers get 0)."""
            ),
            answer=lambda i: ({"grad_x": f32(*_dims(i["x"]))},),
        ),
    },
    levels="L1 the grouped, strided Conv2d call; L2 the channel blocks and the stride described; L3 "
    "convolution, ReLU and the maximum of each plane; L4 the candidate kernels closest to each of two "
    "targets; L5 the gradient with respect to the input (the transposed operation, not named)",
)


# pointwise_activations and gelu_variants ---------------------------------------------------------
_ACTIVATIONS_MATH = """`f1`: max(x, 0); `f2`: x where x > 0, else 0.1 * x; `f3`: 1 / (1 + exp(-x)); `f4`: x /
    (1 + exp(-x)); and `f5`: ln(1 + exp(x))."""
_ACTIVATION_KEYS = {"f1": "relu", "f2": "leaky_relu", "f3": "sigmoid", "f4": "silu", "f5": "softplus"}


def activation_formulas(x):
    import torch

    return {"rows": [{"f1": torch.clamp(x, min=0), "f2": torch.where(x > 0, x, 0.1 * x),
                      "f3": 1 / (1 + torch.exp(-x)), "f4": x * torch.sigmoid(x),
                      "f5": torch.nn.functional.softplus(x)}]}


def _activation_formulas(x):
    row = _pointwise_activations(x)[0]
    return [{key: row[name] for key, name in _ACTIVATION_KEYS.items()}]


def silu_softplus_chain(x):
    import torch.nn.functional as F

    z = x.clone().requires_grad_(True)
    value = F.softplus(F.silu(z))
    value.sum().backward()
    return {"rows": [{"value": value.detach(), "slope": z.grad}]}


def _silu_softplus_chain(x):
    def silu(e):
        return hp(e) * sigmoid(e)

    def slope(e):
        s = sigmoid(e)
        return sigmoid(silu(e)) * s * (1 + hp(e) * (1 - s))

    v = values(x)
    return [
        {
            "value": ExactTensor.of("float32", elementwise(lambda e: mpmath.log(1 + mpmath.exp(silu(e))), v)),
            "slope": ExactTensor.of("float32", elementwise(slope, v)),
        }
    ]


def activation_inverses(s, p):
    import torch

    return {
        "rows": [
            {
                "z_of_s": torch.logit(s.double()).to(s.dtype),
                "z_of_p": torch.log(torch.expm1(p.double())).to(p.dtype),
            }
        ]
    }


def _activation_inverses(s, p):
    return [
        {
            "z_of_s": ExactTensor.of(
                "float32", elementwise(lambda e: mpmath.log(hp(e) / (1 - hp(e))), values(s))
            ),
            "z_of_p": ExactTensor.of(
                "float32", elementwise(lambda e: mpmath.log(mpmath.expm1(hp(e))), values(p))
            ),
        }
    ]


def _sample_inverses(draw, level):
    count = draw.integer(5, 8)
    s = [k / 64 for k in draw.sample([k for k in range(3, 62) if k != 32], count)]
    return {"s": tensor("float32", s), "p": dyadic_tensor(draw, (count,), 0.125, 4, 3)}


def silu_window_min(x):
    import math

    import torch
    import torch.nn.functional as F

    t = (
        -1.0
    )  # the minimiser solves d/dt [t sigmoid(t)] = 0, i.e. 1 + t + exp(t) = 0 ... by Newton, in float64
    for _ in range(60):
        t -= (1 + t + math.exp(t)) / (1 + math.exp(t))
    low, high = x.double() - 1, x.double() + 1
    inside = (low <= t) & (t <= high)
    ends = torch.minimum(F.silu(low), F.silu(high))
    floor = torch.full_like(low, t / (1 + math.exp(-t)))
    return {"rows": [{"window_min": torch.where(inside, floor, ends).to(x.dtype)}]}


def _silu_window_min(x):
    star = mpmath.findroot(lambda t: 1 + t + mpmath.exp(t), -1.3)

    def f(t):
        return t * sigmoid(t) if isinstance(t, mpmath.mpf) else hp(t) * sigmoid(t)

    def window(e):
        low, high = hp(e) - 1, hp(e) + 1
        return f(star) if low <= star <= high else min(f(low), f(high))

    return [{"window_min": ExactTensor.of("float32", elementwise(window, values(x)))}]


def _window_cases(inputs, reach):
    xs = [to_fraction(e) for e in _flat(values(inputs["x"]))]
    star = reach
    inside = [abs(e - star) <= 1 for e in xs]
    if all(inside) or not any(inside):
        return "every window holds the minimiser, or none does: one case of the answer goes untested"
    return None


POINTWISE_ACTIVATIONS = leveled(
    POINTWISE_ACTIVATIONS,
    {
        2: _nn(
            "pointwise_activations",
            reference=activation_formulas,
            independent=_activation_formulas,
            sample=_sample_elementwise(-3, 3, 0.5),
            question=f"""Apply five functions to `x` elementwise: {_ACTIVATIONS_MATH}""",
            answer=lambda i: ({key: f32(*_dims(i["x"])) for key in _ACTIVATION_KEYS},),
        ),
        3: _nn(
            "pointwise_activations",
            reference=silu_softplus_chain,
            independent=_silu_softplus_chain,
            sample=_sample_elementwise(-3, 3, 0.5),
            question="""Let u = x / (1 + exp(-x)) and f(x) = ln(1 + exp(u)), elementwise on `x`. Give `value`,
               f at each element of `x`, and `slope`, the derivative df/dx at each element.""",
            answer=lambda i: ({"value": f32(*_dims(i["x"])), "slope": f32(*_dims(i["x"]))},),
        ),
        4: _nn(
            "pointwise_activations",
            reference=activation_inverses,
            independent=_activation_inverses,
            sample=_sample_inverses,
            question="""`s` holds outputs of the function 1 / (1 + exp(-z)) and `p` outputs of ln(1 + exp(z)).
               Give `z_of_s` and `z_of_p`, the inputs z that produced each element of `s` and of
               `p` (each function is one-to-one).""",
            answer=lambda i: ({"z_of_s": f32(*_dims(i["s"])), "z_of_p": f32(*_dims(i["p"]))},),
        ),
        5: _nn(
            "pointwise_activations",
            reference=silu_window_min,
            independent=_silu_window_min,
            sample=_sample_elementwise(-3, 3, 0.5),
            question="""Let f(t) = t / (1 + exp(-t)). For each element x of `x`, give the smallest
                value f takes
               on the closed interval [x - 1, x + 1], as `window_min`.""",
            answer=lambda i: ({"window_min": f32(*_dims(i["x"]))},),
            refuse=lambda i: _window_cases(i, Fraction(-1278, 1000)),
        ),
    },
    levels="L1 the activations named; L2 their formulas, not their names; L3 the value and derivative of a "
    "composition; L4 the inputs recovered from outputs (inverse functions); L5 the minimum of x*sigmoid(x) "
    "over a window around each element (needs the function's minimiser)",
)


_GELU_MATH = """`exact`: x * P(Z <= x) for a standard normal Z; and `approximate`: 0.5 * x * (1 +
    tanh(sqrt(2 /
    pi) * (x + 0.044715 * x^3)))."""


def gelu_forms(x):
    import torch.nn.functional as F

    return {"rows": [{"exact": F.gelu(x), "approximate": F.gelu(x, approximate="tanh")}]}


def _gelu_forms(x):
    row = _gelu_variants(x)[0]
    return [{"exact": row["gelu_erf"], "approximate": row["gelu_tanh"]}]


def _gelu_exact(e):
    e = hp(e)
    return e / 2 * (1 + mpmath.erf(e / mpmath.sqrt(2)))


def _gelu_slope(e):
    e = hp(e)
    return (1 + mpmath.erf(e / mpmath.sqrt(2))) / 2 + e * mpmath.exp(-e * e / 2) / mpmath.sqrt(2 * mpmath.pi)


def gelu_twice(x):
    import torch.nn.functional as F

    z = x.double().requires_grad_(True)
    value = F.gelu(F.gelu(z))
    value.sum().backward()
    return {"rows": [{"value": value.detach().to(x.dtype), "slope": z.grad.to(x.dtype)}]}


def _gelu_twice(x):
    v = values(x)
    return [
        {
            "value": ExactTensor.of("float32", elementwise(lambda e: _gelu_exact(_gelu_exact(e)), v)),
            "slope": ExactTensor.of(
                "float32", elementwise(lambda e: _gelu_slope(_gelu_exact(e)) * _gelu_slope(e), v)
            ),
        }
    ]


def gelu_inverse(y):
    import torch

    z = torch.ones_like(y, dtype=torch.float64)  # Newton on z * Phi(z) = y, in float64 (increasing for z > 0)
    for _ in range(60):
        phi = torch.exp(-z * z / 2) / (2 * torch.pi) ** 0.5
        cdf = (1 + torch.erf(z / 2**0.5)) / 2
        z = z - (z * cdf - y.double()) / (cdf + z * phi)
    return {"rows": [{"x": z.to(y.dtype)}]}


def _gelu_inverse(y):
    return [
        {
            "x": ExactTensor.of(
                "float32",
                elementwise(
                    lambda e: mpmath.findroot(lambda t: _gelu_exact(t) - hp(e), 1 + hp(e)), values(y)
                ),
            )
        }
    ]


def _sample_gelu_inverse(draw, level):
    return {"y": dyadic_tensor(draw, (draw.integer(5, 8),), 0.125, 3, 3)}


def gelu_window_min(x):
    import torch
    import torch.nn.functional as F

    t = torch.tensor(
        -0.75, dtype=torch.float64
    )  # the minimiser: Phi(t) + t * phi(t) = 0, by Newton in float64
    for _ in range(60):
        phi = torch.exp(-t * t / 2) / (2 * torch.pi) ** 0.5
        cdf = (1 + torch.erf(t / 2**0.5)) / 2
        t = t - (cdf + t * phi) / (phi * (2 - t * t))
    low, high = x.double() - 0.5, x.double() + 0.5
    inside = (low <= t) & (t <= high)
    ends = torch.minimum(F.gelu(low), F.gelu(high))
    return {"rows": [{"window_min": torch.where(inside, F.gelu(t), ends).to(x.dtype)}]}


def _gelu_window_min(x):
    star = mpmath.findroot(_gelu_slope, -0.75)

    def window(e):
        low, high = hp(e) - mpmath.mpf(1) / 2, hp(e) + mpmath.mpf(1) / 2
        return _gelu_exact(star) if low <= star <= high else min(_gelu_exact(low), _gelu_exact(high))

    return [{"window_min": ExactTensor.of("float32", elementwise(window, values(x)))}]


def _gelu_window_cases(inputs):
    xs = [to_fraction(e) for e in _flat(values(inputs["x"]))]
    inside = [abs(e + Fraction(7518, 10000)) <= Fraction(1, 2) for e in xs]
    if all(inside) or not any(inside):
        return "every window holds the minimiser, or none does: one case of the answer goes untested"
    return None


def _away_from_gelu_minimum(sample):
    def draw_inputs(draw, level):
        inputs = sample(draw, level)
        if any(abs(to_fraction(e) + Fraction(3, 4)) < Fraction(1, 8) for e in _flat(values(inputs["x"]))):
            raise Reject("an element sits where GELU's slope nearly vanishes: float32 loses the slope there")
        return inputs

    return draw_inputs


GELU_VARIANTS = leveled(
    GELU_VARIANTS,
    {
        2: _nn(
            "gelu_variants",
            reference=gelu_forms,
            independent=_gelu_forms,
            sample=_sample_elementwise(-2.5, 2.5, 0.0),
            question=f"""Apply two functions to `x` elementwise: {_GELU_MATH}""",
            answer=lambda i: ({"exact": f32(*_dims(i["x"])), "approximate": f32(*_dims(i["x"]))},),
        ),
        3: _nn(
            "gelu_variants",
            reference=gelu_twice,
            independent=_gelu_twice,
            sample=_away_from_gelu_minimum(_sample_elementwise(-2.5, 2.5, 0.0)),
            question="""Let g(t) = t * P(Z <= t) for a standard normal Z, and f(x) = g(g(x)). Give `value`, f
               at each element of `x`, and `slope`, the derivative df/dx at each element.""",
            answer=lambda i: ({"value": f32(*_dims(i["x"])), "slope": f32(*_dims(i["x"]))},),
        ),
        4: _nn(
            "gelu_variants",
            reference=gelu_inverse,
            independent=_gelu_inverse,
            sample=_sample_gelu_inverse,
            question="""Let g(t) = t * P(Z <= t) for a standard normal Z. Every element of `y` is g(t) for
               exactly one t > 0. Give `x`, those t, elementwise.""",
            answer=lambda i: ({"x": f32(*_dims(i["y"]))},),
        ),
        5: _nn(
            "gelu_variants",
            reference=gelu_window_min,
            independent=_gelu_window_min,
            sample=_sample_elementwise(-2.5, 2.5, 0.0),
            question="""Let g(t) = t * P(Z <= t) for a standard normal Z. For each element x of `x`, give the
               smallest value g takes on the closed interval [x - 0.5, x + 0.5], as `window_min`.""",
            answer=lambda i: ({"window_min": f32(*_dims(i["x"]))},),
            refuse=_gelu_window_cases,
        ),
    },
    levels="L1 the two GELU forms named; L2 their formulas; L3 the value and derivative of GELU applied "
    "twice; L4 the positive input recovered from an output; L5 the minimum of GELU over a window around each "
    "element (needs the function's minimiser)",
)


# softmax_rows ------------------------------------------------------------------------------------
_SOFTMAX_MATH = """Row i of `logits` defines the distribution p[i, j] = exp(logits[i, j]) / (sum over k of
    exp(logits[i, k]))."""


def softmax_entropy(logits):
    import torch

    log_p = torch.log_softmax(logits, dim=1)
    return {"rows": [{"entropy": -(log_p.exp() * log_p).sum(dim=1)}]}


def _softmax_entropy(logits):
    return [
        {
            "entropy": ExactTensor.of(
                "float32",
                [-mpmath.fsum(mpmath.exp(q) * q for q in log_softmax(row)) for row in values(logits)],
            )
        }
    ]


def nucleus_sizes(logits, mass):
    import torch

    p = torch.softmax(logits.double(), dim=1).sort(dim=1, descending=True).values
    return {"rows": [{"size": (p.cumsum(dim=1) < mass).sum(dim=1) + 1}]}


def _nucleus_sizes(logits, mass):
    sizes = []
    for row in values(logits):
        total, count = mpmath.mpf(0), 0
        for q in sorted(softmax(row), reverse=True):
            total, count = total + q, count + 1
            if total >= hp(mass):
                break
        sizes.append(count)
    return [{"size": ExactTensor.of("int64", sizes)}]


def _sample_nucleus(draw, level):
    rows, cols = draw.integer(3, 4), draw.integer(5, 7)
    return {"logits": distinct_dyadic_tensor(draw, (rows, cols), 2), "mass": draw.choice((0.75, 0.8, 0.9))}


def _nucleus_clear(inputs):
    sizes = []
    for row in values(inputs["logits"]):
        total = mpmath.mpf(0)
        for q in sorted(softmax(row), reverse=True):
            total += q
            if abs(total - hp(inputs["mass"])) < mpmath.mpf("1e-4"):
                return ("a running total of the sorted probabilities lies within 1e-4 of the mass: "
                        "too close to call")
        sizes.append(_nucleus_sizes(tensor("float32", [row]), inputs["mass"])[0]["size"].values[0])
    if len(set(sizes)) < 2:
        return "every row keeps the same number of classes: a constant answer passes"
    return None


# L5: a decoding step's logit pipeline, described not named: a sign-dependent penalty on the classes a row
# has already produced (each class once, however often it occurs), a temperature, a top-k cut and then a
# probability-mass cut measured on the renormalised top-k distribution. The rules (levels_modules): most
# rows keep at least two classes after the mass cut, the kept counts differ between rows, and each named
# misreading (the penalty per occurrence, dividing a negative logit, the mass cut on the uncut softmax)
# changes the answer of the instance.
def decoding_distribution(logits, previous, penalty, temperature, top_k, top_p):
    import torch

    z = logits.double().clone()
    for i in range(z.shape[0]):
        seen = torch.unique(previous[i])
        row = z[i, seen]
        z[i, seen] = torch.where(row > 0, row / penalty, row * penalty)
    z = z / temperature
    top = z.topk(top_k, dim=1)
    p = torch.softmax(top.values, dim=1)  # sorted descending
    keep = (p.cumsum(dim=1) - p) < top_p
    kept = torch.where(keep, p, torch.zeros_like(p))
    kept = kept / kept.sum(dim=1, keepdim=True)
    out = torch.zeros_like(z).scatter(1, top.indices, kept)
    return {"rows": [{"probabilities": out.to(logits.dtype), "kept": keep.sum(dim=1)}]}


def _decoding_rows(logits, previous, penalty, temperature, top_k, top_p, mistake=None):
    """(distribution, kept count) of each row in mpmath. ``mistake``: 'per_occurrence' penalises a class
    once per occurrence; 'divide_all' divides every penalised logit; 'mass_on_full' measures the mass cut
    on the softmax of all classes (then renormalises the kept ones)."""
    rows = []
    for row, seen in zip(values(logits), values(previous), strict=True):
        z = [hp(e) for e in row]
        for j in (seen if mistake == "per_occurrence" else sorted(set(seen))):
            z[j] = z[j] / hp(penalty) if z[j] > 0 or mistake == "divide_all" else z[j] * hp(penalty)
        z = [e / hp(temperature) for e in z]
        order = sorted(range(len(z)), key=lambda j: -z[j])
        top = order[:top_k]
        weights = softmax([z[j] for j in (order if mistake == "mass_on_full" else top)])
        kept, total = [], mpmath.mpf(0)
        for j, q in zip(order if mistake == "mass_on_full" else top, weights, strict=False):
            if total >= hp(top_p) or j not in top:
                break
            kept.append(j)
            total += q
        norm = mpmath.fsum(mpmath.exp(z[j]) for j in kept)
        rows.append(([mpmath.exp(z[j]) / norm if j in kept else mpmath.mpf(0) for j in range(len(z))],
                     len(kept)))
    return rows


def _decoding_distribution(logits, previous, penalty, temperature, top_k, top_p):
    rows = _decoding_rows(logits, previous, penalty, temperature, top_k, top_p)
    return [{"probabilities": ExactTensor.of("float32", [p for p, _ in rows]),
             "kept": ExactTensor.of("int64", [k for _, k in rows])}]


def _sample_decoding(draw, level):
    rows, cols = 4, 8
    logits, previous = [], []
    for _ in range(rows):
        row = [k / 8 for k in draw.sample(range(-36, 13), cols)]  # distinct, mostly negative
        leaders = sorted(range(cols), key=lambda j: -row[j])[:4]
        first, second = draw.sample(leaders, 2)  # leading classes already produced: the penalty moves the cut
        logits.append(row)
        previous.append(draw.shuffled([first, first, second]))  # one class twice: once is what counts
    return {
        "logits": tensor("float32", logits),
        "previous": tensor("int64", previous),
        "penalty": draw.choice((1.25, 1.5, 2.0)),
        "temperature": draw.choice((0.75, 1.25, 1.5, 2.0)),
        "top_k": draw.integer(4, 6),
        "top_p": draw.choice((0.6, 0.7, 0.8)),
    }


def _decoding_rules(inputs):
    """Refuse ties and near-ties the float arithmetic could cut the other way, rows that keep one class,
    counts equal across rows, and instances a named misreading would still pass."""
    from exactgrade.domains.pytorch.levels_modules import distributions_differ, near_cut

    args = {k: inputs[k] for k in ("logits", "previous", "penalty", "temperature", "top_k", "top_p")}
    rows = _decoding_rows(**args)
    for (_, count), row, seen in zip(rows, values(inputs["logits"]), values(inputs["previous"]), strict=True):
        z = [hp(e) for e in row]
        for j in set(seen):
            z[j] = z[j] / hp(inputs["penalty"]) if z[j] > 0 else z[j] * hp(inputs["penalty"])
        ordered = sorted(z, reverse=True)
        if any(ordered[cut - 1] == ordered[cut] for cut in (inputs["top_k"], count)):
            return "two penalised logits tie where a cut falls: which class is kept is ambiguous"
        problem = near_cut(softmax([e / hp(inputs["temperature"]) for e in ordered[: inputs["top_k"]]]),
                           hp(inputs["top_p"]))
        if problem is not None:
            return problem
    counts = [k for _, k in rows]
    if sum(k >= 2 for k in counts) < 3:
        return f"kept counts {counts}: most rows must keep at least two classes"
    if len(set(counts)) < 2:
        return "every row keeps the same number of classes: a constant answer passes"
    for mistake in ("per_occurrence", "divide_all", "mass_on_full"):
        wrong = _decoding_rows(**args, mistake=mistake)
        if not distributions_differ([p for p, _ in rows], [p for p, _ in wrong]):
            return f"the misreading {mistake!r} gives the same distribution: it would pass"
    return None


_DECODING_QUESTION = """A text generator turns each row of `logits` (one row per sequence, one column per
    class) into a sampling distribution in four stages. (1) Penalty: every class that occurs in the row's
    entry of `previous` (the classes that sequence already produced; a class counts once however often it
    occurs) has its logit z replaced by z / `penalty` if z > 0 and by z * `penalty` otherwise; the other
    logits are unchanged. (2) Every logit is divided by `temperature`. (3) Only the `top_k` largest logits
    of the row are kept, and q is the softmax over those `top_k` classes alone. (4) Sorting the kept
    classes by q from largest to smallest, the generator keeps the shortest prefix whose q values sum to
    at least `top_p`; the classes of that prefix share probability in proportion to their q values (so
    they sum to 1) and every other class gets 0. Give `probabilities` (the final distribution, shape of
    `logits`) and `kept`, the number of classes with nonzero probability in each row (int64, one per
    row)."""


SOFTMAX_ROWS = leveled(
    SOFTMAX_ROWS,
    {
        2: _nn(
            "softmax_rows",
            reference=softmax_rows,
            independent=_softmax_rows,
            sample=_sample_softmax,
            question=f"""{_SOFTMAX_MATH} Give `probabilities`, p, and `log_probabilities`, ln p,
                both as float32
               tensors of the shape of `logits`.""",
            answer=lambda i: (
                {"probabilities": f32(*_dims(i["logits"])), "log_probabilities": f32(*_dims(i["logits"]))},
            ),
        ),
        3: _nn(
            "softmax_rows",
            reference=softmax_entropy,
            independent=_softmax_entropy,
            sample=_sample_softmax,
            question=f"""{_SOFTMAX_MATH} Give `entropy`: for each row i, the Shannon entropy of p[i] in nats,
               -sum over j of p[i, j] ln p[i, j].""",
            answer=lambda i: ({"entropy": f32(i["logits"].shape[0])},),
        ),
        4: _nn(
            "softmax_rows",
            reference=nucleus_sizes,
            independent=_nucleus_sizes,
            sample=_sample_nucleus,
            question=f"""{_SOFTMAX_MATH} For each row, give in `size` the smallest number k such that the k
               largest probabilities of the row add up to at least `mass` (an int64 tensor, one per row).""",
            answer=lambda i: ({"size": i64(i["logits"].shape[0])},),
            refuse=_nucleus_clear,
        ),
        5: _nn(
            "softmax_rows",
            reference=decoding_distribution,
            independent=_decoding_distribution,
            sample=_sample_decoding,
            question=_DECODING_QUESTION,
            answer=lambda i: ({"probabilities": f32(*_dims(i["logits"])),
                               "kept": i64(i["logits"].shape[0])},),
            refuse=_decoding_rules,
        ),
    },
    levels="L1 softmax and log-softmax named; L2 the distribution described; L3 the entropy of each row; L4 "
    "the smallest number of top classes that reach a probability mass; L5 a decoding step's pipeline "
    "(a sign-dependent penalty on already produced classes, temperature, a top-k cut, then a mass cut on "
    "the renormalised top-k distribution), described not named, with each misreading changing the answer",
)


# layer_norm --------------------------------------------------------------------------------------
_NORM_MATH = """N(v) normalises a vector v of D features: with m the mean of v and s2 the mean of (v - m)^2
    (dividing by D), entry j of N(v) is (v[j] - m) / sqrt(s2 + 1e-5) * gamma[j] + beta[j]."""


def _norm_rows(rows, weight, bias):
    """N applied to each row of a list of rows (mpmath)."""
    out = []
    for row in rows:
        v = [hp(e) for e in row]
        m = mpmath.fsum(v) / len(v)
        scale = 1 / mpmath.sqrt(mpmath.fsum((e - m) ** 2 for e in v) / len(v) + hp(1e-5))
        out.append([(e - m) * scale * hp(w) + hp(b) for e, w, b in zip(v, weight, bias, strict=True)])
    return out


def layer_norm_twice(x, weight, bias):
    import torch.nn.functional as F

    first = F.layer_norm(x, x.shape[-1:], weight, bias, eps=1e-5)
    return {"rows": [{"y": F.layer_norm(x + first, x.shape[-1:], weight, bias, eps=1e-5)}]}


def _layer_norm_twice(x, weight, bias):
    w, b = values(weight), values(bias)
    rows = innermost_rows(values(x))
    first = _norm_rows(rows, w, b)
    summed = [[hp(e) + f for e, f in zip(r, fr, strict=True)] for r, fr in zip(rows, first, strict=True)]
    return [
        {
            "y": ExactTensor.of(
                "float32", reshape([e for r in _norm_rows(summed, w, b) for e in r], tuple(x.shape))
            )
        }
    ]


def layer_norm_best(x, weights, biases, targets):
    import torch
    import torch.nn.functional as F

    rows = []
    for target in targets:
        errors = torch.stack(
            [
                ((F.layer_norm(x, x.shape[-1:], w, b, eps=1e-5) - target) ** 2).sum()
                for w, b in zip(weights, biases, strict=True)
            ]
        )
        k = int(torch.argmin(errors))
        rows.append({"best": k, "error": errors[k]})
    return {"rows": rows}


def _NORM_OUT(i):
    return _layer_norm(**i)[0]["y"]


_NORM_STACK = {"weight": ("weights", 0.25, 2, 2), "bias": ("biases", -1, 1, 3)}
_NORM_BEST = _best_of(_NORM_STACK, _NORM_OUT)


# L5: the normalisation inverted. The output alone fixes the normalised vector; its spread is below 1 only
# because of the 1e-5 under the root, and that shortfall fixes the row's variance: s2 = 1e-5 * V / (1 - V)
# for V the (biased) spread of the normalised row. Rows have variances near 1e-5, where that term matters in
# float32. Reference: the closed form in float64; independent: mpmath, a root of the self-consistency
# equation for the row's scale, then a forward pass that must reproduce `y`.
def invert_layer_norm(y, weight, bias, means):
    import torch

    xh = (y.double() - bias.double()) / weight.double()
    spread = xh.var(dim=1, unbiased=False)
    variance = 1e-5 * spread / (1 - spread)
    x = means.double()[:, None] + xh * torch.sqrt(variance + 1e-5)[:, None]
    return {"rows": [{"x": x.float(), "variance": variance.float()}]}


def _invert_layer_norm(y, weight, bias, means):
    eps, gamma, beta = hp(1e-5), [hp(e) for e in values(weight)], [hp(e) for e in values(bias)]
    xs, variances = [], []
    for row, m in zip(values(y), values(means), strict=True):
        xh = [(hp(e) - b) / g for e, g, b in zip(row, gamma, beta, strict=True)]
        centre = mpmath.fsum(xh) / len(xh)
        spread = mpmath.fsum((e - centre) ** 2 for e in xh) / len(xh)
        # the scale s of the row: normalising m + s * xh must give xh back, s / sqrt(s^2 spread + eps) = 1
        scale = mpmath.findroot(lambda t, sp=spread: t * t * (1 - sp) - eps, mpmath.sqrt(eps))
        x = [hp(m) + e * scale for e in xh]
        if max(abs(a - hp(b)) for a, b in zip(_norm_rows([x], gamma, beta)[0], row, strict=True)) > hp(1e-20):
            raise ValueError("the recovered row does not normalise back to y")
        xs.append(x)
        variances.append(mpmath.fsum((e - hp(m)) ** 2 for e in x) / len(x))
    return [{"x": ExactTensor.of("float32", xs), "variance": ExactTensor.of("float32", variances)}]


def _sample_inverse_norm(draw, level):
    rows, width = draw.integer(3, 4), 6
    gamma = [draw.choice((-1, 1)) * float(draw.dyadic(Fraction(1, 4), 2, 2)) for _ in range(width)]
    beta = [float(draw.dyadic(-1, 1, 3)) for _ in range(width)]
    ys = []
    for _ in range(rows):
        while True:  # integers with sum 0, scaled by a power of two so that the spread V is in (0.2, 0.95)
            a = [draw.integer(-6, 6) for _ in range(width - 1)]
            a.append(-sum(a))
            power = [Fraction(1, 2**k) for k in range(0, 6)
                     if Fraction(1, 5) < Fraction(sum(e * e for e in a), width) / 4**k < Fraction(19, 20)]
            if power:
                break
        c = draw.choice(power)
        ys.append([float(g * Fraction(e) * c + Fraction(b)) for e, g, b in zip(a, gamma, beta, strict=True)])
    return {
        "y": tensor("float32", ys),
        "weight": tensor("float32", gamma),
        "bias": tensor("float32", beta),
        "means": tensor("float32", [float(draw.dyadic(-2, 2, 3)) for _ in range(rows)]),
    }


def _inverse_norm_question(i):
    return f"""{_NORM_MATH} Each row of `y` ({i["y"].shape[0]} rows, D =
    {i["y"].shape[1]}) is N(v) for an unknown row v, with gamma = `weight` and beta = `bias`; the mean of that
    v is the row's entry of `means`. Give `x`, the rows v (the shape of `y`), and `variance`, each v's s2 (one
    per row)."""


LAYER_NORM = leveled(
    LAYER_NORM,
    {
        2: _nn(
            "layer_norm",
            reference=layer_norm,
            independent=_layer_norm,
            sample=_sample_layer_norm,
            question=lambda i: (
                f"""{_NORM_MATH} Apply N with gamma = `weight` and beta = `bias` to every
               vector along the last dimension of `x` (D = {i["x"].shape[-1]}). Give the output `y`."""
            ),
            answer=lambda i: ({"y": f32(*_dims(i["x"]))},),
        ),
        3: _nn(
            "layer_norm",
            reference=layer_norm_twice,
            independent=_layer_norm_twice,
            sample=_sample_layer_norm,
            question=lambda i: (
                f"""{_NORM_MATH} With gamma = `weight` and beta = `bias`, applied to every vector
               v along the last dimension of `x` (D = {i["x"].shape[-1]}), give `y` = N(v + N(v)) for every
               such vector (the shape of `x`)."""
            ),
            answer=lambda i: ({"y": f32(*_dims(i["x"]))},),
        ),
        4: _nn(
            "layer_norm",
            reference=layer_norm_best,
            sample=_candidate_sampler(_sample_layer_norm, _NORM_STACK, _NORM_OUT),
            question=lambda i: (
                f"""{_NORM_MATH} Candidate k (k = 0..{i["weights"].shape[0] - 1}) uses gamma =
               `weights[k]` and beta = `biases[k]` and applies N to every vector along the last dimension of
               `x` (D = {i["x"].shape[-1]}). {_BEST}"""
            ),
            **_NORM_BEST,
        ),
        5: _nn(
            "layer_norm",
            reference=invert_layer_norm,
            independent=_invert_layer_norm,
            sample=_sample_inverse_norm,
            question=_inverse_norm_question,
            answer=lambda i: ({"x": f32(*_dims(i["y"])), "variance": f32(i["y"].shape[0])},),
        ),
    },
    levels="L1 the nn.LayerNorm call; L2 the normalisation described; L3 the normalisation applied to v + "
    "N(v); L4 the candidate scale and shift closest to each of two targets; L5 the normalisation inverted: "
    "each input row from its output and its mean (the 1e-5 under the root is what fixes the variance)",
)


# pooling -----------------------------------------------------------------------------------------
_POOL_MATH = """every plane is pooled separately. `max_floor`: the maximum of each
    2x2 block of cells (rows 2i, 2i+1, columns 2j, 2j+1), for the blocks that fit wholly inside the plane;
    `max_ceil`: the same, but blocks that stick out past the last row or column are kept and take the
    maximum of their cells inside the plane; `max_ceil_indices`: for each `max_ceil` block, the position
    r * W + c (int64) of the cell holding its maximum; `avg_with_pad`: at every cell, the sum of the 3x3
    neighbourhood centred on it (cells outside the plane count as 0) divided by 9; `avg_without_pad`: the
    same sum divided by the number of neighbourhood cells that lie inside the plane."""


def pool_chain(x):
    import torch.nn.functional as F

    pooled = F.max_pool2d(x, kernel_size=2)
    return {
        "rows": [{"y": F.avg_pool2d(pooled, kernel_size=3, stride=1, padding=1, count_include_pad=False)}]
    }


def _pool_chain(x):
    out = []
    for sample in values(x):
        out.append([])
        for plane in sample:
            m = _pool_plane(plane)["max_floor"]
            out[-1].append(_pool_plane(m)["avg_without_pad"])
    return [{"y": ExactTensor.of("float32", out)}]


def _sample_pool_chain(draw, level):
    batch, channels = draw.integer(1, 2), draw.integer(1, 2)
    shape = (batch, channels, 2 * draw.integer(2, 4) + draw.integer(0, 1), 2 * draw.integer(2, 4) + 1)
    return {"x": distinct_dyadic_tensor(draw, shape, 3)}


def smallest_pool_window(x, thresholds):
    import torch.nn.functional as F

    rows = []
    for t in thresholds.tolist():
        found = -1
        for k in range(1, min(x.shape[2], x.shape[3]) + 1):
            if bool((F.max_pool2d(x, kernel_size=k) >= t).all()):
                found = k
                break
        rows.append({"window": found})
    return {"rows": rows}


def _window_minimax(x, k):
    """The smallest, over all planes and whole k x k blocks, of the block maximum (exact)."""
    worst = None
    for sample in values(x):
        for plane in sample:
            for i in range(len(plane) // k):
                for j in range(len(plane[0]) // k):
                    top = max(plane[a][b] for a in range(i * k, i * k + k) for b in range(j * k, j * k + k))
                    worst = top if worst is None else min(worst, top)
    return worst


def _smallest_pool_window(x, thresholds):
    sizes = range(1, min(x.shape[2], x.shape[3]) + 1)
    return [
        {"window": next((k for k in sizes if _window_minimax(x, k) >= t), -1)} for t in values(thresholds)
    ]


def _sample_pool_windows(draw, level):
    inputs = _sample_pool_chain(draw, level)
    levels = sorted({_window_minimax(inputs["x"], k) for k in range(1, min(inputs["x"].shape[2:]) + 1)})
    above = max(_flat(values(inputs["x"]))) + Fraction(1, 8)
    picks = [*draw.sample(levels, min(2, len(levels))), above]
    return {**inputs, "thresholds": tensor("float32", [float(t) for t in draw.shuffled(picks)])}


def _pool_windows_vary(task):
    if len({row["window"] for row in task.expected["rows"]}) < 2:
        return "every threshold gives the same window: a constant answer passes"
    return None


def pool_backward(x, up_max, up_avg):
    import torch.nn.functional as F

    a = x.clone().requires_grad_(True)
    b = x.clone().requires_grad_(True)
    (F.max_pool2d(a, kernel_size=2, ceil_mode=True) * up_max).sum().backward()
    (F.avg_pool2d(b, kernel_size=3, stride=1, padding=1, count_include_pad=False) * up_avg).sum().backward()
    return {"rows": [{"grad_max": a.grad, "grad_avg": b.grad}]}


def _pool_backward(x, up_max, up_avg):
    grad_max, grad_avg = [], []
    for sample, ups_max, ups_avg in zip(values(x), values(up_max), values(up_avg), strict=True):
        grad_max.append([])
        grad_avg.append([])
        for plane, gm, ga in zip(sample, ups_max, ups_avg, strict=True):
            h, w = len(plane), len(plane[0])
            routed = [[Fraction(0)] * w for _ in range(h)]
            for i, row in enumerate(_pool_plane(plane)["max_ceil_indices"]):
                for j, k in enumerate(row):
                    routed[k // w][k % w] += gm[i][j]
            spread = [[Fraction(0)] * w for _ in range(h)]
            for i in range(h):
                for j in range(w):
                    cells = [
                        (a, b)
                        for a in range(i - 1, i + 2)
                        for b in range(j - 1, j + 2)
                        if 0 <= a < h and 0 <= b < w
                    ]
                    for a, b in cells:
                        spread[a][b] += ga[i][j] / len(cells)
            grad_max[-1].append(routed)
            grad_avg[-1].append(spread)
    return [
        {"grad_max": ExactTensor.of("float32", grad_max), "grad_avg": ExactTensor.of("float32", grad_avg)}
    ]


def _sample_pool_backward(draw, level):
    x = _sample_pooling(draw, 3)["x"]
    inputs = {"x": x}
    return {
        **inputs,
        "up_max": dyadic_tensor(draw, _pooled(inputs, True), -1, 1, 2, nonzero=True),
        "up_avg": dyadic_tensor(draw, _dims(x), -1, 1, 2, nonzero=True),
    }


POOLING = leveled(
    POOLING,
    {
        2: _nn(
            "pooling",
            reference=pooling,
            independent=_pooling,
            sample=_sample_pooling,
            refuse=_pool_windows_untied,
            question=lambda i: (
                f"""For the image batch `x` (N, C, H, W) = {shape_text(i["x"].shape)},
               {_POOL_MATH}"""
            ),
            answer=lambda i: (
                {
                    "max_floor": f32(*_pooled(i, False)),
                    "max_ceil": f32(*_pooled(i, True)),
                    "max_ceil_indices": i64(*_pooled(i, True)),
                    "avg_with_pad": f32(*_dims(i["x"])),
                    "avg_without_pad": f32(*_dims(i["x"])),
                },
            ),
        ),
        3: _nn(
            "pooling",
            reference=pool_chain,
            independent=_pool_chain,
            sample=_sample_pool_chain,
            question=lambda i: (
                f"""Each plane of `x` (N, C, H, W) = {shape_text(i["x"].shape)} is reduced to
               m, the maximum of each 2x2 block of cells (rows 2i, 2i+1, columns 2j, 2j+1) that fits wholly
               inside the plane; then every cell of m is replaced by the mean of the cells of its 3x3
               neighbourhood in m that lie inside m. Give the result `y`."""
            ),
            answer=lambda i: ({"y": f32(*_pooled(i, False))},),
        ),
        4: _nn(
            "pooling",
            reference=smallest_pool_window,
            independent=_smallest_pool_window,
            sample=_sample_pool_windows,
            reject=_pool_windows_vary,
            question=lambda i: (
                f"""Reduce every plane of `x` (N, C, H, W) = {shape_text(i["x"].shape)} with
               window k: the maximum of each k x k block of cells (rows k*i..k*i+k-1, columns
               k*j..k*j+k-1), for the blocks that fit wholly inside the plane. For each threshold t in
               `thresholds` (a row of the answer each, in order), give `window`, the smallest k from 1 to
               {min(i["x"].shape[2:])} for which every block maximum of every plane is at least t, or -1 if
               no such k exists."""
            ),
            answer=lambda i: tuple({"window": PY_INT} for _ in range(i["thresholds"].shape[0])),
        ),
        5: _nn(
            "pooling",
            reference=pool_backward,
            independent=_pool_backward,
            sample=_sample_pool_backward,
            refuse=_pool_windows_untied,
            question=lambda i: (
                f"""For the image batch `x` (N, C, H, W) = {shape_text(i["x"].shape)}, let M be
               the maximum of each 2x2 block of cells (rows 2i, 2i+1, columns 2j, 2j+1), keeping the blocks
               that stick out past the last row or column (their maximum is over their cells inside the
               plane), and A, at every cell, the mean of the cells of its 3x3 neighbourhood that lie inside
               the plane. Give `grad_max`, the gradient with respect to `x` of the sum of M * `up_max`, and
               `grad_avg`, the gradient with respect to `x` of the sum of A * `up_avg`."""
            ),
            answer=lambda i: ({"grad_max": f32(*_dims(i["x"])), "grad_avg": f32(*_dims(i["x"]))},),
        ),
    },
    levels="L1 the pooling calls and options named; L2 the windows, the divisors and the index convention "
    "described; L3 max pooling then a neighbourhood mean of the result; L4 the smallest window whose block "
    "maxima all reach each of three thresholds (-1 when none does); L5 the gradients of both poolings "
    "(routing to the maximum, spreading over the neighbourhood)",
    branches=(
        Branch(
            "no window reaches the threshold",
            lambda t: any(r["window"] == -1 for r in t.expected["rows"]),
            Fraction(1, 2),
            (4,),
        ),
    ),
)


# adaptive_pooling --------------------------------------------------------------------------------
_ADAPTIVE_MATH = """To pool a plane of height H and width W to (R, S): bin (r, s) covers rows floor(r * H / R)
    to ceil((r + 1) * H / R) - 1 and columns floor(s * W / S) to ceil((s + 1) * W / S) - 1 (neighbouring bins
    may share cells)."""


def _adaptive_bins(size, out):
    return [range(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _adaptive_plane(plane, rows, cols, reduce):
    return [
        [reduce([plane[i][j] for i in r for j in c]) for c in _adaptive_bins(len(plane[0]), cols)]
        for r in _adaptive_bins(len(plane), rows)
    ]


def adaptive_chain(x):
    import torch.nn.functional as F

    return {"rows": [{"y": F.adaptive_max_pool2d(F.adaptive_avg_pool2d(x, (3, 4)), (2, 3))}]}


def _adaptive_chain(x):
    return [
        {
            "y": ExactTensor.of(
                "float32",
                [
                    [_adaptive_plane(_adaptive_plane(p, 3, 4, mean), 2, 3, max) for p in sample]
                    for sample in values(x)
                ],
            )
        }
    ]


def largest_adaptive_grid(x, thresholds):
    import torch.nn.functional as F

    rows = []
    for t in thresholds.tolist():
        found = -1
        for s in range(1, min(x.shape[2], x.shape[3]) + 1):
            if bool((F.adaptive_max_pool2d(x, (s, s)) >= t).all()):
                found = s
        rows.append({"grid": found})
    return {"rows": rows}


def _grid_minimax(x, s):
    return min(
        e for sample in values(x) for plane in sample for e in _flat(_adaptive_plane(plane, s, s, max))
    )


def _largest_adaptive_grid(x, thresholds):
    sizes = range(1, min(x.shape[2], x.shape[3]) + 1)
    return [
        {"grid": max((s for s in sizes if _grid_minimax(x, s) >= t), default=-1)} for t in values(thresholds)
    ]


def _sample_adaptive_grid(draw, level):
    shape = (1, draw.integer(1, 2), draw.integer(4, 6), draw.integer(4, 7))
    x = distinct_dyadic_tensor(draw, shape, 3)
    levels = sorted({_grid_minimax(x, s) for s in range(1, min(shape[2:]) + 1)})
    picks = [*draw.sample(levels, min(2, len(levels))), max(_flat(values(x))) + Fraction(1, 8)]
    return {"x": x, "thresholds": tensor("float32", [float(t) for t in draw.shuffled(picks)])}


def _grids_vary(task):
    if len({row["grid"] for row in task.expected["rows"]}) < 2:
        return "every threshold gives the same grid: a constant answer passes"
    return None


def adaptive_backward(x, upstream):
    import torch.nn.functional as F

    z = x.clone().requires_grad_(True)
    (F.adaptive_avg_pool2d(z, (3, 4)) * upstream).sum().backward()
    return {"rows": [{"grad_x": z.grad}]}


def _adaptive_backward(x, upstream):
    out = []
    for sample, ups in zip(values(x), values(upstream), strict=True):
        out.append([])
        for plane, up in zip(sample, ups, strict=True):
            grad = [[Fraction(0)] * len(plane[0]) for _ in plane]
            for r, rows in enumerate(_adaptive_bins(len(plane), 3)):
                for s, cols in enumerate(_adaptive_bins(len(plane[0]), 4)):
                    for i in rows:
                        for j in cols:
                            grad[i][j] += up[r][s] / (len(rows) * len(cols))
            out[-1].append(grad)
    return [{"grad_x": ExactTensor.of("float32", out)}]


def _sample_adaptive_backward(draw, level):
    x = _sample_adaptive(draw, 3)["x"]
    return {"x": x, "upstream": dyadic_tensor(draw, (*_dims(x)[:2], 3, 4), -1, 1, 2, nonzero=True)}


ADAPTIVE_POOLING = leveled(
    ADAPTIVE_POOLING,
    {
        2: _nn(
            "adaptive_pooling",
            reference=adaptive_pooling,
            independent=_adaptive_pooling,
            sample=_sample_adaptive,
            question=lambda i: (
                f"""{_ADAPTIVE_MATH} Pool every plane of `x` (N, C, H, W) =
               {shape_text(i["x"].shape)} to (3, 4): `adaptive_avg`, the mean of each bin's cells, and
               `adaptive_max`, their maximum."""
            ),
            answer=lambda i: (
                {
                    "adaptive_avg": f32(*_dims(i["x"])[:2], 3, 4),
                    "adaptive_max": f32(*_dims(i["x"])[:2], 3, 4),
                },
            ),
        ),
        3: _nn(
            "adaptive_pooling",
            reference=adaptive_chain,
            independent=_adaptive_chain,
            sample=_sample_adaptive,
            question=lambda i: (
                f"""{_ADAPTIVE_MATH} Pool every plane of `x` (N, C, H, W) =
               {shape_text(i["x"].shape)} to (3, 4) by the mean of each bin, then pool that (3, 4) result to
               (2, 3) by the maximum of each bin. Give the result `y`."""
            ),
            answer=lambda i: ({"y": f32(*_dims(i["x"])[:2], 2, 3)},),
        ),
        4: _nn(
            "adaptive_pooling",
            reference=largest_adaptive_grid,
            independent=_largest_adaptive_grid,
            sample=_sample_adaptive_grid,
            reject=_grids_vary,
            question=lambda i: (
                f"""{_ADAPTIVE_MATH} Pool every plane of `x` (N, C, H, W) =
               {shape_text(i["x"].shape)} to (s, s) by the maximum of each bin. For each threshold t in
               `thresholds` (a row of the answer each, in order), give `grid`, the largest s from 1 to
               {min(i["x"].shape[2:])} for which every bin maximum of every plane is at least t, or -1 if no
               such s exists."""
            ),
            answer=lambda i: tuple({"grid": PY_INT} for _ in range(i["thresholds"].shape[0])),
        ),
        5: _nn(
            "adaptive_pooling",
            reference=adaptive_backward,
            independent=_adaptive_backward,
            sample=_sample_adaptive_backward,
            question=lambda i: (
                f"""{_ADAPTIVE_MATH} Let P be every plane of `x` (N, C, H, W) =
               {shape_text(i["x"].shape)} pooled to (3, 4) by the mean of each bin. Give `grad_x`,
               the gradient
               with respect to `x` of the sum over all elements of P * `upstream`."""
            ),
            answer=lambda i: ({"grad_x": f32(*_dims(i["x"]))},),
        ),
    },
    levels="L1 adaptive pooling named; L2 the bins described; L3 average pooling to (3, 4) then max "
    "pooling to (2, 3); L4 the largest grid whose bin maxima all reach each of three thresholds (-1 "
    "when none); L5 the gradient of the average pooling with overlapping bins",
    branches=(
        Branch(
            "no grid reaches the threshold",
            lambda t: any(r["grid"] == -1 for r in t.expected["rows"]),
            Fraction(1, 2),
            (4,),
        ),
    ),
)


# flatten_mlp -------------------------------------------------------------------------------------
def _mlp_math(i):
    w1, w2 = (i["w1"].shape, i["w2"].shape if "w2" in i else i["w2s"].shape[1:])
    return f"""A network flattens each sample of `x` (a {i["x"].shape[1]}x{i["x"].shape[2]} array) row by row
        into a vector v of {w1[1]} entries, computes h = max(W1 v + c1, 0) elementwise ({w1[0]} hidden units)
        and outputs W2 h + c2 ({w2[0]} values), with W1 = `w1`, c1 = `b1`, c2 = `b2`"""


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
_MLP_BEST = _best_of(_MLP_STACK, _MLP_OUT)


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
    flat = [_flat(sample) for sample in values(x)]
    vw1, vb1, vw2, vb2 = values(w1), values(b1), values(w2), values(b2)
    pre = _affine(flat, vw1, vb1)
    hidden = [[max(e, Fraction(0)) for e in row] for row in pre]
    out = _affine(hidden, vw2, vb2)
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
    flat = [_flat(s) for s in values(inputs["x"])]
    pre = [e for row in _affine(flat, values(inputs["w1"]), values(inputs["b1"])) for e in row]
    if 0 in pre:
        return "a hidden pre-activation is exactly 0: the ReLU's gradient would sit on its kink"
    if 2 * sum(1 for e in pre if e < 0) >= len(pre) or all(e > 0 for e in pre):
        return "half or more of the hidden pre-activations are negative, or none is: a degenerate instance"
    return None


FLATTEN_MLP = leveled(
    FLATTEN_MLP,
    {
        2: _nn(
            "flatten_mlp",
            reference=flatten_mlp,
            independent=_flatten_mlp,
            sample=_sample_mlp,
            refuse=_relu_clips,
            question=lambda i: (
                f"""{_mlp_math(i)} and W2 = `w2`. Give the outputs `y` for the batch of
               {word(i["x"].shape[0])} samples."""
            ),
            answer=lambda i: ({"y": f32(i["x"].shape[0], i["w2"].shape[0])},),
        ),
        3: _nn(
            "flatten_mlp",
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
        ),
        4: _nn(
            "flatten_mlp",
            reference=mlp_best,
            sample=_candidate_sampler(_sample_mlp, _MLP_STACK, _MLP_OUT),
            question=lambda i: (
                f"""{_mlp_math(i)}. Candidate k (k = 0..{i["w2s"].shape[0] - 1}) uses W2 =
               `w2s[k]`, applied to `x`. {_BEST}"""
            ),
            **_MLP_BEST,
        ),
        5: _nn(
            "flatten_mlp",
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
                    "w1": f32(*_dims(i["w1"])),
                    "b1": f32(*_dims(i["b1"])),
                    "w2": f32(*_dims(i["w2"])),
                    "b2": f32(*_dims(i["b2"])),
                },
            ),
        ),
    },
    levels="L1 the Sequential named; L2 the network's mathematics; L3 its mean cross-entropy on class "
    "targets; L4 the candidate output layer closest to each of two targets; L5 one gradient-descent step "
    "through the ReLU (backpropagation, not named)",
)


# embedding_lookup --------------------------------------------------------------------------------
_BAG_MATH = """`flat_idx` is cut into bags: bag b holds the entries from position offsets[b] up to (not
    including) offsets[b + 1], the last bag running to the end."""


def _bags(flat_idx, offsets):
    ids, starts = values(flat_idx), values(offsets)
    return [ids[s:e] for s, e in zip(starts, [*starts[1:], len(ids)], strict=True)]


def _bag_means(weight, flat_idx, offsets):
    table = values(weight)
    return [[mean(col) for col in transpose([table[i] for i in bag])] for bag in _bags(flat_idx, offsets)]


def bag_scores(weight, idx, flat_idx, offsets):
    import torch.nn.functional as F

    return {"rows": [{"scores": F.embedding_bag(flat_idx, weight, offsets, mode="mean") @ weight.T}]}


def _bag_scores(weight, idx, flat_idx, offsets):
    return [
        {
            "scores": ExactTensor.of(
                "float32", matmul(_bag_means(weight, flat_idx, offsets), transpose(values(weight)))
            )
        }
    ]


def nearest_rows(weight, idx, flat_idx, offsets):
    import torch
    import torch.nn.functional as F

    means = F.embedding_bag(flat_idx, weight, offsets, mode="mean")
    return {"rows": [{"nearest": torch.cdist(means.double(), weight.double()).argmin(dim=1)}]}


def _nearest_distances(weight, flat_idx, offsets):
    return [
        [sum(((a - b) ** 2 for a, b in zip(m, row, strict=True)), Fraction(0)) for row in values(weight)]
        for m in _bag_means(weight, flat_idx, offsets)
    ]


def _nearest_rows(weight, idx, flat_idx, offsets):
    return [
        {
            "nearest": ExactTensor.of(
                "int64", [d.index(min(d)) for d in _nearest_distances(weight, flat_idx, offsets)]
            )
        }
    ]


def _nearest_clear(inputs):
    rows = _nearest_distances(inputs["weight"], inputs["flat_idx"], inputs["offsets"])
    for d in rows:
        problem = clear_winner(d)
        if problem is not None:
            return problem
    if len({d.index(min(d)) for d in rows}) < 2:
        return "every bag has the same nearest row: a constant answer passes"
    return None


def embedding_sgd(weight, idx, upstream):
    import torch

    table = torch.nn.Embedding(weight.shape[0], weight.shape[1], padding_idx=0, dtype=weight.dtype)
    with torch.no_grad():
        table.weight.copy_(weight)
    optimizer = torch.optim.SGD(table.parameters(), lr=0.5)
    (table(idx) * upstream).sum().backward()
    optimizer.step()
    return {"rows": [{"weight": table.weight.detach()}]}


def _embedding_sgd(weight, idx, upstream):
    table = [list(row) for row in values(weight)]
    for ids, ups in zip(values(idx), values(upstream), strict=True):
        for i, up in zip(ids, ups, strict=True):
            if i != 0:  # the padding row receives no gradient
                table[i] = [e - Fraction(1, 2) * u for e, u in zip(table[i], up, strict=True)]
    return [{"weight": ExactTensor.of("float32", table)}]


def _sample_embedding_sgd(draw, level):
    inputs = _sample_embedding(draw, 3)
    idx = inputs["idx"]
    return {
        "weight": inputs["weight"],
        "idx": idx,
        "upstream": dyadic_tensor(draw, (*_dims(idx), inputs["weight"].shape[1]), -1, 1, 2, nonzero=True),
    }


EMBEDDING_LOOKUP = leveled(
    EMBEDDING_LOOKUP,
    {
        2: _nn(
            "embedding_lookup",
            reference=embedding_lookup,
            independent=_embedding_lookup,
            sample=_sample_embedding,
            refuse=_looks_up_padding_row,
            question=f"""`weight` is a table of embeddings, one row per id. Give `looked_up`: for every id in
               `idx`, its row of the table (ids equal to 0 included: they look up row 0). {_BAG_MATH} Give
               `bag_mean` and `bag_max`: for each bag, the elementwise mean and the elementwise maximum of the
               table rows of its ids.""",
            answer=lambda i: (
                {
                    "looked_up": f32(*_dims(i["idx"]), i["weight"].shape[1]),
                    "bag_mean": f32(i["offsets"].shape[0], i["weight"].shape[1]),
                    "bag_max": f32(i["offsets"].shape[0], i["weight"].shape[1]),
                },
            ),
        ),
        3: _nn(
            "embedding_lookup",
            reference=bag_scores,
            independent=_bag_scores,
            sample=_sample_embedding,
            question=f"""`weight` is a table of embeddings, one row per id. {_BAG_MATH} Each bag is
                summarised by
               the elementwise mean of the table rows of its ids. Give `scores`: for each bag b and id v, the
               dot product of bag b's summary with row v of the table (shape (bags, ids)). (`idx` is not
               used.)""",
            answer=lambda i: ({"scores": f32(i["offsets"].shape[0], i["weight"].shape[0])},),
        ),
        4: _nn(
            "embedding_lookup",
            reference=nearest_rows,
            independent=_nearest_rows,
            sample=_sample_embedding,
            refuse=_nearest_clear,
            question=f"""`weight` is a table of embeddings, one row per id. {_BAG_MATH} Each bag is
                summarised by
               the elementwise mean of the table rows of its ids. Give `nearest`: for each bag, the id whose
               row is closest to the bag's summary in Euclidean distance (int64, one per bag). (`idx` is not
               used.)""",
            answer=lambda i: ({"nearest": i64(i["offsets"].shape[0])},),
        ),
        5: _nn(
            "embedding_lookup",
            reference=embedding_sgd,
            independent=_embedding_sgd,
            sample=_sample_embedding_sgd,
            refuse=_looks_up_padding_row,
            question="""`weight` is a trainable table of embeddings, one row per id; id 0 is reserved for
               padding, and its row never receives a gradient. Every id in `idx` looks up its row, giving e of
               shape idx.shape + (dim,). Take one step of plain gradient descent (step size 0.5) on
               L = the sum
               over all elements of e * `upstream`. Give the table `weight` after the step.""",
            answer=lambda i: ({"weight": f32(*_dims(i["weight"]))},),
        ),
    },
    levels="L1 nn.Embedding and embedding_bag named; L2 the lookup and the bags described; L3 dot-product "
    "scores of each bag's mean against the table; L4 the table row nearest to each bag's mean; L5 one "
    "gradient step on the table with a padding row that never learns",
)


# batch_norm_training -----------------------------------------------------------------------------
_BN_MATH = """A batch normalisation layer in training mode normalises each feature (column) j of a batch x of
    n rows: with mu_j the column mean and s2_j the mean of (x[:, j] - mu_j)^2 (dividing by n), y[:, j] =
    (x[:, j] - mu_j) / sqrt(s2_j + 1e-5) * gamma[j] + beta[j]. It also keeps running estimates, starting at
    mean 0 and variance 1, and after each such pass sets running_mean = 0.9 * running_mean + 0.1 * mu and
    running_var = 0.9 * running_var + 0.1 * v, where v_j is the column variance dividing by n - 1."""


def batch_norm_eval(x, weight, bias, x_test):
    import torch

    norm = torch.nn.BatchNorm1d(x.shape[1], eps=1e-5, momentum=0.1, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        norm.train()
        norm(x)
        norm.eval()
        y = norm(x_test)
    return {"rows": [{"y_test": y}]}


def _batch_norm_eval(x, weight, bias, x_test):
    rows = _batch_norm_training(x, weight, bias)[0]
    rm, rv = rows["running_mean"].values, rows["running_var"].values
    return [
        {
            "y_test": ExactTensor.of(
                "float32",
                [
                    [
                        hp(e - m) / mpmath.sqrt(hp(v) + hp(1e-5)) * hp(w) + hp(b)
                        for e, m, v, w, b in zip(row, rm, rv, values(weight), values(bias), strict=True)
                    ]
                    for row in values(x_test)
                ],
            )
        }
    ]


def _sample_batch_norm_eval(draw, level):
    inputs = _sample_batch_norm(draw, level)
    return {**inputs, "x_test": dyadic_tensor(draw, (draw.integer(2, 3), inputs["x"].shape[1]), -3, 4, 2)}


def batch_norm_passes(x, tolerance):
    import torch

    norm = torch.nn.BatchNorm1d(x.shape[1], eps=1e-5, momentum=0.1, dtype=torch.float64)
    target = x.double().var(dim=0)
    passes = torch.zeros(x.shape[1], dtype=torch.int64)
    norm.train()
    for k in range(1, 401):
        with torch.no_grad():
            norm(x.double())
        close = (norm.running_var - target).abs() <= tolerance * target
        passes = torch.where((passes == 0) & close, torch.full_like(passes, k), passes)
        if bool((passes > 0).all()):
            break
    return {"rows": [{"passes": passes}]}


def _batch_norm_passes(x, tolerance):
    out = []
    for column in transpose(values(x)):
        out.append(int(mpmath.ceil(_passes_needed(column, tolerance))))
    return [{"passes": ExactTensor.of("int64", out)}]


def _passes_needed(column, tolerance):
    """log(gap) / log(10/9): after k passes running_var - v = (1 - v) * 0.9^k, so the smallest k with
    |1 - v| * 0.9^k <= tolerance * v is the ceiling of this (exact gap, mpmath logarithm)."""
    m = mean(column)
    v = sum(((e - m) ** 2 for e in column), Fraction(0)) / (len(column) - 1)
    gap = abs(1 - v) / (to_fraction(tolerance) * v)
    return mpmath.log(hp(gap)) / mpmath.log(mpmath.mpf(10) / 9)


def _sample_batch_norm_passes(draw, level):
    x = _sample_batch_norm(draw, level)["x"]
    return {"x": x, "tolerance": draw.choice((0.01, 0.02, 0.05))}


def _passes_clear(inputs):
    counts = []
    for column in transpose(values(inputs["x"])):
        needed = _passes_needed(column, inputs["tolerance"])
        if needed <= 0:
            return "a feature's unbiased variance is already within the tolerance of 1 (no pass needed)"
        if needed > 399 or not mpmath.mpf("0.01") < needed - mpmath.floor(needed) < mpmath.mpf("0.99"):
            return "a feature reaches the tolerance within 0.1% of the bound, or not in 400 passes"
        counts.append(int(mpmath.ceil(needed)))
    if len(set(counts)) < 2:
        return "every feature needs the same number of passes: a constant answer passes"
    return None


def batch_norm_backward(x, weight, bias, upstream):
    import torch

    norm = torch.nn.BatchNorm1d(x.shape[1], eps=1e-5, momentum=0.1, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
    z = x.clone().requires_grad_(True)
    norm.train()
    (norm(z) * upstream).sum().backward()
    return {"rows": [{"grad_x": z.grad, "grad_weight": norm.weight.grad, "grad_bias": norm.bias.grad}]}


def _batch_norm_backward(x, weight, bias, upstream):
    columns, ups = transpose(values(x)), transpose(values(upstream))
    n = len(columns[0])
    gx, gw, gb = [], [], []
    for c, u, w in zip(columns, ups, values(weight), strict=True):
        m = mean(c)
        sigma = mpmath.sqrt(hp(sum(((e - m) ** 2 for e in c), Fraction(0)) / n) + hp(1e-5))
        xhat = [hp(e - m) / sigma for e in c]
        su, sux = mpmath.fsum(hp(a) for a in u), mpmath.fsum(hp(a) * h for a, h in zip(u, xhat, strict=True))
        gx.append([hp(w) / (n * sigma) * (n * hp(a) - su - h * sux) for a, h in zip(u, xhat, strict=True)])
        gw.append(sux)
        gb.append(su)
    return [
        {
            "grad_x": ExactTensor.of("float32", transpose(gx)),
            "grad_weight": ExactTensor.of("float32", gw),
            "grad_bias": ExactTensor.of("float32", gb),
        }
    ]


def _sample_batch_norm_backward(draw, level):
    inputs = _sample_batch_norm(draw, level)
    return {**inputs, "upstream": dyadic_tensor(draw, _dims(inputs["x"]), -1, 1, 2, nonzero=True)}


BATCH_NORM_TRAINING = leveled(
    BATCH_NORM_TRAINING,
    {
        2: _nn(
            "batch_norm_training",
            reference=batch_norm_training,
            independent=_batch_norm_training,
            sample=_sample_batch_norm,
            question=f"""{_BN_MATH} Run one such pass on the batch `x` with gamma = `weight` and
                beta = `bias`.
               Give the output `y` and the `running_mean` and `running_var` after the pass.""",
            answer=lambda i: (
                {
                    "y": f32(*_dims(i["x"])),
                    "running_mean": f32(i["x"].shape[1]),
                    "running_var": f32(i["x"].shape[1]),
                },
            ),
        ),
        3: _nn(
            "batch_norm_training",
            reference=batch_norm_eval,
            independent=_batch_norm_eval,
            sample=_sample_batch_norm_eval,
            question=f"""{_BN_MATH} In evaluation mode the layer instead uses its running estimates:
               y[:, j] = (x[:, j] - running_mean_j) / sqrt(running_var_j + 1e-5) * gamma[j] + beta[j], and
               leaves them unchanged. A fresh layer with gamma = `weight` and beta = `bias` makes one training
               pass on `x`, then evaluates `x_test`. Give `y_test`.""",
            answer=lambda i: ({"y_test": f32(*_dims(i["x_test"]))},),
        ),
        4: _nn(
            "batch_norm_training",
            reference=batch_norm_passes,
            independent=_batch_norm_passes,
            sample=_sample_batch_norm_passes,
            refuse=_passes_clear,
            question=f"""{_BN_MATH} A fresh layer makes training passes on the same batch `x` again and again.
               For each feature j, give in `passes` the smallest number of passes after which
               |running_var_j - v_j| <= `tolerance` * v_j (int64, one per feature).""",
            answer=lambda i: ({"passes": i64(i["x"].shape[1])},),
        ),
        5: _nn(
            "batch_norm_training",
            reference=batch_norm_backward,
            independent=_batch_norm_backward,
            sample=_sample_batch_norm_backward,
            question=f"""{_BN_MATH} With gamma = `weight`, beta = `bias` and y the output of one training pass
               on `x`, let L = the sum over all elements of y * `upstream` (the batch statistics mu and s2 are
               functions of x). Give `grad_x`, the gradient of L with respect to `x`, and `grad_weight` and
               `grad_bias`, its gradients with respect to gamma and beta.""",
            answer=lambda i: (
                {
                    "grad_x": f32(*_dims(i["x"])),
                    "grad_weight": f32(i["x"].shape[1]),
                    "grad_bias": f32(i["x"].shape[1]),
                },
            ),
        ),
    },
    levels="L1 BatchNorm1d named; L2 the training-mode statistics and running estimates described; L3 a "
    "training pass then an evaluation pass on other data; L4 the number of passes until each running "
    "variance is within a tolerance; L5 the backward pass through the batch statistics",
)


# conv_relu_pool_linear ---------------------------------------------------------------------------
def _cnn_math(i):
    size = i["conv_weight"].shape[2] if "conv_weight" in i else i["conv_weights"].shape[-1]
    return f"""A network maps each image of `x` (N, C, H, W): a convolution (output channel o at (r, s) is
        conv_bias[o] plus the sum over channels ch and offsets a, b in 0..{size - 1} of K[o, ch, a, b] *
        x~[ch, r + a, s + b], x~ the image extended by {size // 2} zero pixel(s) on every side, so planes keep
        their size; the kernel is not flipped), then max(., 0), then the maximum of each 2x2 block (rows 2r,
        2r+1, columns 2s, 2s+1), then the pooled planes flattened in (channel, row, column) order into a
        feature vector f, then logits fc_weight @ f + fc_bias"""


def cnn_loss(x, conv_weight, conv_bias, fc_weight, fc_bias, target):
    import torch.nn.functional as F

    f = F.max_pool2d(
        F.relu(F.conv2d(x, conv_weight, conv_bias, padding=conv_weight.shape[2] // 2)), 2
    ).flatten(1)
    return {"rows": [{"loss": F.cross_entropy(f @ fc_weight.T + fc_bias, target)}]}


def _cnn_loss(x, conv_weight, conv_bias, fc_weight, fc_bias, target):
    _, logits = _cnn_logits(x, conv_weight, conv_bias, fc_weight, fc_bias)
    return [
        {
            "loss": ExactTensor.of(
                "float32",
                mpmath.fsum(-log_softmax(r)[t] for r, t in zip(logits, values(target), strict=True))
                / len(logits),
            )
        }
    ]


def _sample_cnn_target(draw, level):
    inputs = _sample_cnn(draw, level)
    return {
        **inputs,
        "target": int_tensor(draw, (inputs["x"].shape[0],), 0, inputs["fc_weight"].shape[0] - 1),
    }


def cnn_best(x, conv_weights, conv_bias, fc_weight, fc_bias, targets):
    import torch
    import torch.nn.functional as F

    rows = []
    for target in targets:
        errors = []
        for w in conv_weights:
            f = F.max_pool2d(F.relu(F.conv2d(x, w, conv_bias, padding=w.shape[2] // 2)), 2).flatten(1)
            errors.append(((f @ fc_weight.T + fc_bias - target) ** 2).sum())
        errors = torch.stack(errors)
        k = int(torch.argmin(errors))
        rows.append({"best": k, "error": errors[k]})
    return {"rows": rows}


def _CNN_OUT(i):
    return ExactTensor.of("float32", _cnn_logits(**i)[1])


_CNN_STACK = {"conv_weight": ("conv_weights", -1, 1, 2)}
_CNN_BEST = _best_of(_CNN_STACK, _CNN_OUT)


def cnn_head_gradients(x, conv_weight, conv_bias, fc_weight, fc_bias, target):
    import torch.nn.functional as F

    params = [p.clone().requires_grad_(True) for p in (conv_bias, fc_weight, fc_bias)]
    f = F.max_pool2d(
        F.relu(F.conv2d(x, conv_weight, params[0], padding=conv_weight.shape[2] // 2)), 2
    ).flatten(1)
    F.cross_entropy(f @ params[1].T + params[2], target).backward()
    return {
        "rows": [
            {
                "grad_conv_bias": params[0].grad,
                "grad_fc_weight": params[1].grad,
                "grad_fc_bias": params[2].grad,
            }
        ]
    }


def _cnn_head_gradients(x, conv_weight, conv_bias, fc_weight, fc_bias, target):
    kernels, offsets, pad = values(conv_weight), values(conv_bias), conv_weight.shape[2] // 2
    features, logits = _cnn_logits(x, conv_weight, conv_bias, fc_weight, fc_bias)
    n, fc = len(logits), values(fc_weight)
    g_logits = [
        [q - (1 if c == t else 0) for c, q in enumerate(softmax(row))]
        for row, t in zip(logits, values(target), strict=True)
    ]
    g_logits = [[e / n for e in row] for row in g_logits]
    g_fc_w = [
        [mpmath.fsum(g_logits[s][c] * hp(features[s][k]) for s in range(n)) for k in range(len(fc[0]))]
        for c in range(len(fc))
    ]
    g_fc_b = [mpmath.fsum(g_logits[s][c] for s in range(n)) for c in range(len(fc))]
    g_bias = [mpmath.mpf(0)] * len(offsets)
    for s, image in enumerate(values(x)):
        maps = _cross_correlate(image, kernels, offsets, 1, pad)
        g_feat = [
            mpmath.fsum(g_logits[s][c] * hp(fc[c][k]) for c in range(len(fc))) for k in range(len(fc[0]))
        ]
        k = 0
        for o, m in enumerate(maps):
            for r in range(len(m) // 2):
                for q in range(len(m[0]) // 2):
                    if (
                        max(
                            m[2 * r][2 * q], m[2 * r][2 * q + 1], m[2 * r + 1][2 * q], m[2 * r + 1][2 * q + 1]
                        )
                        > 0
                    ):
                        g_bias[o] += g_feat[k]  # the block's maximum passes the ReLU: d/d bias = 1
                    k += 1
    return [
        {
            "grad_conv_bias": ExactTensor.of("float32", g_bias),
            "grad_fc_weight": ExactTensor.of("float32", g_fc_w),
            "grad_fc_bias": ExactTensor.of("float32", g_fc_b),
        }
    ]


def _cnn_kinks(inputs):
    kernels, offsets, pad = (
        values(inputs["conv_weight"]),
        values(inputs["conv_bias"]),
        inputs["conv_weight"].shape[2] // 2,
    )
    for image in values(inputs["x"]):
        for m in _cross_correlate(image, kernels, offsets, 1, pad):
            for r in range(len(m) // 2):
                for q in range(len(m[0]) // 2):
                    block = [
                        m[2 * r][2 * q],
                        m[2 * r][2 * q + 1],
                        m[2 * r + 1][2 * q],
                        m[2 * r + 1][2 * q + 1],
                    ]
                    if max(block) == 0 or block.count(max(block)) > 1:
                        return "a pooling block has a tied or zero maximum: its gradient is ambiguous"
    return None


CONV_RELU_POOL_LINEAR = leveled(
    CONV_RELU_POOL_LINEAR,
    {
        2: _nn(
            "conv_relu_pool_linear",
            reference=conv_relu_pool_linear,
            independent=_conv_relu_pool_linear,
            sample=_sample_cnn,
            refuse=_prediction_untied,
            zero_reason=_every_prediction_is_class_zero,
            question=lambda i: (
                f"""{_cnn_math(i)}, with K = `conv_weight`. Give `features`, the vectors f of
               the batch; `logits`; and `predicted`, the index of the largest logit of each image."""
            ),
            answer=lambda i: (
                {
                    "features": f32(i["x"].shape[0], i["fc_weight"].shape[1]),
                    "logits": f32(i["x"].shape[0], i["fc_weight"].shape[0]),
                    "predicted": i64(i["x"].shape[0]),
                },
            ),
        ),
        3: _nn(
            "conv_relu_pool_linear",
            reference=cnn_loss,
            independent=_cnn_loss,
            sample=_sample_cnn_target,
            question=lambda i: (
                f"""{_cnn_math(i)}, with K = `conv_weight`. The probability of class c is
               exp(logit_c) / sum_k exp(logit_k). Give `loss`, the mean over the batch of -ln(probability of
               the class `target` names for that image)."""
            ),
            answer=({"loss": f32()},),
        ),
        4: _nn(
            "conv_relu_pool_linear",
            reference=cnn_best,
            sample=_candidate_sampler(_sample_cnn, _CNN_STACK, _CNN_OUT),
            question=lambda i: (
                f"""{_cnn_math(i)}. Candidate k (k = 0..{i["conv_weights"].shape[0] - 1}) uses
               K = `conv_weights[k]`; its output is the logits of the batch `x`. {_BEST}"""
            ),
            **_CNN_BEST,
        ),
        5: _nn(
            "conv_relu_pool_linear",
            reference=cnn_head_gradients,
            independent=_cnn_head_gradients,
            sample=_sample_cnn_target,
            refuse=_cnn_kinks,
            question=lambda i: (
                f"""{_cnn_math(i)}, with K = `conv_weight`. The probability of class c is
               exp(logit_c) / sum_k exp(logit_k); L is the mean over the batch of -ln(probability of the class
               `target` names for that image). Give the gradients of L with respect to conv_bias
               (`grad_conv_bias`), fc_weight (`grad_fc_weight`) and fc_bias (`grad_fc_bias`)."""
            ),
            answer=lambda i: (
                {
                    "grad_conv_bias": f32(i["conv_bias"].shape[0]),
                    "grad_fc_weight": f32(*_dims(i["fc_weight"])),
                    "grad_fc_bias": f32(i["fc_bias"].shape[0]),
                },
            ),
        ),
    },
    levels="L1 the Sequential named; L2 the chain described; L3 its mean cross-entropy; L4 the candidate "
    "kernels whose logits are closest to each of two targets; L5 the gradients of the cross-entropy with "
    "respect to the head and the convolution offsets (through pooling and ReLU)",
)

FAMILIES = (
    LINEAR_LAYER,
    CONV_SAME_PADDING,
    GROUPED_STRIDED_CONV,
    POINTWISE_ACTIVATIONS,
    GELU_VARIANTS,
    SOFTMAX_ROWS,
    LAYER_NORM,
    POOLING,
    ADAPTIVE_POOLING,
    FLATTEN_MLP,
    EMBEDDING_LOOKUP,
    BATCH_NORM_TRAINING,
    CONV_RELU_POOL_LINEAR,
)

TASKS = (
    LINEAR_LAYER.task(
        "pt-016",
        {
            "x": tensor("float32", [[1.0, -2.0, 0.5, 3.0], [2.5, 0.25, -1.5, 1.0]]),
            "weight": tensor("float32", reshape([(i - 6) / 8 for i in range(12)], (3, 4))),
            "bias": tensor("float32", [0.5, -0.25, 1.0]),
        },
    ),
    CONV_SAME_PADDING.task(
        "pt-017",
        {
            "x": tensor("float32", reshape([(2 * i - 19) / 8 for i in range(20)], (1, 1, 4, 5))),
            "weight": tensor(
                "float32",
                [
                    [[[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]]],
                    [[[0.5, 0.25, 0.0], [0.25, 0.5, 0.25], [0.0, 0.25, 0.5]]],
                ],
            ),
            "bias": tensor("float32", [0.125, -0.5]),
        },
    ),
    GROUPED_STRIDED_CONV.task(
        "pt-018",
        {
            "x": tensor("float32", reshape([(3 * i % 11 - 4.5) / 4 for i in range(100)], (1, 4, 5, 5))),
            "weight": tensor("float32", reshape([(i - 16) / 8 for i in range(32)], (4, 2, 2, 2))),
        },
    ),
    POINTWISE_ACTIVATIONS.task(
        "pt-019", {"x": tensor("float32", [-3.0, -1.5, -0.5, -0.25, 0.25, 0.5, 1.5, 3.0])}
    ),
    GELU_VARIANTS.task("pt-020", {"x": tensor("float32", [-2.0, -1.0, -0.5, 0.25, 0.5, 1.0, 2.5])}),
    SOFTMAX_ROWS.task(
        "pt-021", {"logits": tensor("float32", [[1.0, 2.0, 0.5, -1.0], [100.0, 101.0, 102.0, 99.0]])}
    ),
    LAYER_NORM.task(
        "pt-022",
        {
            "x": tensor("float32", [[1.0, 2.0, 4.0, -1.0, 0.5], [10.0, 10.5, 9.0, 12.0, 11.25]]),
            "weight": tensor("float32", [0.5, 0.75, 1.0, 1.25, 1.5]),
            "bias": tensor("float32", [0.5, -0.5, 0.75, 0.125, -0.25]),
        },
    ),
    POOLING.task(
        "pt-023",
        {"x": tensor("float32", reshape([(7 * i % 20 - 10.5) / 4 for i in range(20)], (1, 1, 4, 5)))},
    ),
    ADAPTIVE_POOLING.task(
        "pt-024", {"x": tensor("float32", reshape([((3 * i) % 13 - 6) / 4 for i in range(70)], (1, 2, 5, 7)))}
    ),
    FLATTEN_MLP.task(
        "pt-025",
        {
            "x": tensor("float32", reshape([(2 * i - 11) / 4 for i in range(12)], (2, 2, 3))),
            "w1": tensor("float32", reshape([((5 * i) % 9 - 4) / 4 for i in range(24)], (4, 6))),
            "b1": tensor("float32", [0.5, -1.0, 0.25, -0.5]),
            "w2": tensor("float32", [[1.0, -0.5, 0.75, 2.0], [-1.5, 0.25, 1.0, 0.5]]),
            "b2": tensor("float32", [0.125, -0.375]),
        },
    ),
    EMBEDDING_LOOKUP.task(
        "pt-026",
        {
            "weight": tensor("float32", reshape([(2 * i - 15) / 8 for i in range(15)], (5, 3))),
            "idx": tensor("int64", [[0, 3, 1], [4, 0, 2]]),
            "flat_idx": tensor("int64", [1, 3, 0, 4, 1, 4]),
            "offsets": tensor("int64", [0, 2]),
        },
    ),
    BATCH_NORM_TRAINING.task(
        "pt-027",
        {
            "x": tensor("float32", [[1.0, -2.0, 0.5], [3.0, 0.0, 1.5], [2.0, 1.0, -0.5], [-1.0, 4.0, 2.5]]),
            "weight": tensor("float32", [1.5, 0.5, 2.0]),
            "bias": tensor("float32", [0.5, -0.25, 0.75]),
        },
    ),
)
