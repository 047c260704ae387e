"""nn_modules (pt-016..pt-027): Linear, Conv2d, activations, GELU, softmax, LayerNorm, pooling,
Flatten in a Sequential, Embedding and BatchNorm, all with explicit deterministic weights.

Module weights are copied in from the inputs (never default initialisation under a seed).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import Inputs, f32, i64, pytorch_family, tensor
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
    transpose,
    values,
)
from exactgrade.domains.pytorch.sampling import (
    distinct_dyadic_tensor,
    dyadic_tensor,
    int_tensor,
    shape_text,
    word,
)
from exactgrade.family import Draw, Reject


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
        log of the softmax of each row, both in float32. (exp(100) overflows float32: compute stably.)""",
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
