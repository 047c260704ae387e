"""nn_modules (pt-016..pt-027): Linear, Conv2d, activations, GELU, softmax, LayerNorm, pooling,
Flatten in a Sequential, Embedding and BatchNorm, all with explicit deterministic weights.

Module weights are copied in from the inputs (never default initialisation under a seed).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import f32, i64, make_task, tensor
from exactgrade.domains.pytorch.exact import (
    ExactTensor,
    hp,
    log_softmax,
    matmul,
    mean,
    reshape,
    sigmoid,
    softmax,
    transpose,
    values,
)


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

    layer = torch.nn.Linear(weight.shape[1], weight.shape[0])
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

    conv = torch.nn.Conv2d(weight.shape[1], weight.shape[0], kernel_size=weight.shape[2], padding=1)
    with torch.no_grad():
        conv.weight.copy_(weight)
        conv.bias.copy_(bias)
        y = conv(x)
    return {"rows": [{"y": y}]}


def _conv_same_padding(x, weight, bias):
    image = values(x)[0]
    return [{"y": ExactTensor.of("float32", [_cross_correlate(image, values(weight), values(bias), 1, 1)])}]


# pt-018 -------------------------------------------------------------------------------------------
def grouped_strided_conv(x, weight):
    import torch

    conv = torch.nn.Conv2d(4, 4, kernel_size=2, stride=2, groups=2, bias=False)
    with torch.no_grad():
        conv.weight.copy_(weight)
        y = conv(x)
    return {"rows": [{"y": y}]}


def _grouped_strided_conv(x, weight):
    image, kernels = values(x)[0], values(weight)
    zero_bias = [Fraction(0), Fraction(0)]
    first = _cross_correlate(image[:2], kernels[:2], zero_bias, 2, 0)  # groups=2: channels 0-1 -> outputs 0-1
    second = _cross_correlate(image[2:], kernels[2:], zero_bias, 2, 0)
    return [{"y": ExactTensor.of("float32", [first + second])}]


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
        "relu": ExactTensor.of("float32", [max(e, Fraction(0)) for e in v]),
        "leaky_relu": ExactTensor.of("float32", [e if e > 0 else Fraction(1, 10) * e for e in v]),
        "sigmoid": ExactTensor.of("float32", [sigmoid(e) for e in v]),
        "silu": ExactTensor.of("float32", [hp(e) * sigmoid(e) for e in v]),
        "softplus": ExactTensor.of("float32", [mpmath.log(1 + mpmath.exp(hp(e))) for e in v]),
    }]


# pt-020 -------------------------------------------------------------------------------------------
def gelu_variants(x):
    import torch.nn.functional as F

    return {"rows": [{"gelu_erf": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh")}]}


def _gelu_variants(x):
    v = [hp(e) for e in values(x)]
    c, k = mpmath.sqrt(2 / mpmath.pi), mpmath.mpf("0.044715")
    return [{
        "gelu_erf": ExactTensor.of("float32", [e / 2 * (1 + mpmath.erf(e / mpmath.sqrt(2))) for e in v]),
        "gelu_tanh": ExactTensor.of("float32", [e / 2 * (1 + mpmath.tanh(c * (e + k * e ** 3))) for e in v]),
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

    norm = torch.nn.LayerNorm(x.shape[-1], eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
        y = norm(x)
    return {"rows": [{"y": y}]}


def _layer_norm(x, weight, bias):
    w, b = values(weight), values(bias)
    eps = hp(1e-5)  # the float nn.LayerNorm stores, exactly
    out = []
    for row in values(x):
        m = mean(row)
        var = mean([(e - m) ** 2 for e in row])  # biased variance, as LayerNorm uses
        scale = 1 / mpmath.sqrt(hp(var) + eps)
        out.append([hp(e - m) * scale * hp(wi) + hp(bi) for e, wi, bi in zip(row, w, b, strict=True)])
    return [{"y": ExactTensor.of("float32", out)}]


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
    image = values(x)[0][0]
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
    return [{
        "max_floor": ExactTensor.of("float32", [[[[v for v, _ in r] for r in max_pool(False)]]]),
        "max_ceil": ExactTensor.of("float32", [[[[v for v, _ in r] for r in ceil]]]),
        "max_ceil_indices": ExactTensor.of("int64", [[[[k for _, k in r] for r in ceil]]]),
        "avg_with_pad": ExactTensor.of("float32", [[avg_pool(True)]]),
        "avg_without_pad": ExactTensor.of("float32", [[avg_pool(False)]]),
    }]


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
    for channel in values(x)[0]:
        cells = [[[channel[i][j] for i in rows for j in cols] for cols in bins(len(channel[0]), 4)]
                 for rows in bins(len(channel), 3)]
        avg.append([[mean(c) for c in line] for line in cells])
        best.append([[max(c) for c in line] for line in cells])
    return [{
        "adaptive_avg": ExactTensor.of("float32", [avg]),
        "adaptive_max": ExactTensor.of("float32", [best]),
    }]


# pt-025 -------------------------------------------------------------------------------------------
def flatten_mlp(x, w1, b1, w2, b2):
    import torch

    model = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(w1.shape[1], w1.shape[0]),
        torch.nn.ReLU(),
        torch.nn.Linear(w2.shape[1], w2.shape[0]),
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

    embedding = torch.nn.Embedding(weight.shape[0], weight.shape[1], padding_idx=0)
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

    norm = torch.nn.BatchNorm1d(x.shape[1], eps=1e-5, momentum=0.1)
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


TASKS = (
    make_task(
        "pt-016", "nn_modules", reference=linear_layer, independent=_linear_layer,
        inputs={"x": tensor("float32", [[1.0, -2.0, 0.5, 3.0], [2.5, 0.25, -1.5, 1.0]]),
                "weight": tensor("float32", reshape([(i - 6) / 8 for i in range(12)], (3, 4))),
                "bias": tensor("float32", [0.5, -0.25, 1.0])},
        question="""Build torch.nn.Linear(4, 3), set its weight to `weight` (shape (out_features,
            in_features)) and its bias to `bias`, and apply it to the batch `x`. Give the output `y`.""",
        answer=({"y": f32(2, 3)},),
    ),
    make_task(
        "pt-017", "nn_modules", reference=conv_same_padding, independent=_conv_same_padding,
        inputs={"x": tensor("float32", reshape([(2 * i - 19) / 8 for i in range(20)], (1, 1, 4, 5))),
                "weight": tensor("float32", [[[[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]]],
                                             [[[0.5, 0.25, 0.0], [0.25, 0.5, 0.25], [0.0, 0.25, 0.5]]]]),
                "bias": tensor("float32", [0.125, -0.5])},
        question="""Apply torch.nn.Conv2d(1, 2, kernel_size=3, padding=1) with weight `weight` and bias
            `bias` to the image batch `x` (N, C, H, W). The first kernel is a Sobel-like edge filter; use it
            exactly as given, the way Conv2d applies kernels. Give the output `y`.""",
        answer=({"y": f32(1, 2, 4, 5)},),
    ),
    make_task(
        "pt-018", "nn_modules", reference=grouped_strided_conv, independent=_grouped_strided_conv,
        inputs={"x": tensor("float32", reshape([(3 * i % 11 - 4.5) / 4 for i in range(100)], (1, 4, 5, 5))),
                "weight": tensor("float32", reshape([(i - 16) / 8 for i in range(32)], (4, 2, 2, 2)))},
        question="""Apply torch.nn.Conv2d(4, 4, kernel_size=2, stride=2, groups=2, bias=False) with weight
            `weight` (shape (4, 2, 2, 2)) to `x`. Give the output `y`.""",
        answer=({"y": f32(1, 4, 2, 2)},),
    ),
    make_task(
        "pt-019", "nn_modules", reference=pointwise_activations, independent=_pointwise_activations,
        inputs={"x": tensor("float32", [-3.0, -1.5, -0.5, -0.25, 0.25, 0.5, 1.5, 3.0])},
        question="""Apply five activations to `x` elementwise: `relu`; `leaky_relu` with negative slope 0.1;
            `sigmoid`; `silu` (x * sigmoid(x)); and `softplus` with torch's default beta and threshold.""",
        answer=({"relu": f32(8), "leaky_relu": f32(8), "sigmoid": f32(8), "silu": f32(8),
                 "softplus": f32(8)},),
    ),
    make_task(
        "pt-020", "nn_modules", reference=gelu_variants, independent=_gelu_variants,
        inputs={"x": tensor("float32", [-2.0, -1.0, -0.5, 0.25, 0.5, 1.0, 2.5])},
        question="""Apply GELU to `x` twice: `gelu_erf`, the exact form x * Phi(x) with the Gaussian CDF
            (torch's default), and `gelu_tanh`, torch's tanh approximation.""",
        answer=({"gelu_erf": f32(7), "gelu_tanh": f32(7)},),
    ),
    make_task(
        "pt-021", "nn_modules", reference=softmax_rows, independent=_softmax_rows,
        inputs={"logits": tensor("float32", [[1.0, 2.0, 0.5, -1.0], [100.0, 101.0, 102.0, 99.0]])},
        question="""Give `probabilities`, the softmax of each row of `logits`, and `log_probabilities`, the
            log of the softmax of each row, both in float32. (exp(100) overflows float32: compute stably.)""",
        answer=({"probabilities": f32(2, 4), "log_probabilities": f32(2, 4)},),
    ),
    make_task(
        "pt-022", "nn_modules", reference=layer_norm, independent=_layer_norm,
        inputs={"x": tensor("float32", [[1.0, 2.0, 4.0, -1.0, 0.5], [10.0, 10.5, 9.0, 12.0, 11.25]]),
                "weight": tensor("float32", [0.5, 0.75, 1.0, 1.25, 1.5]),
                "bias": tensor("float32", [0.5, -0.5, 0.75, 0.125, -0.25])},
        question="""Apply torch.nn.LayerNorm over the last dimension (size 5, eps=1e-5) with elementwise
            affine weight `weight` and bias `bias` to `x`. Give the output `y`.""",
        answer=({"y": f32(2, 5)},),
    ),
    make_task(
        "pt-023", "nn_modules", reference=pooling, independent=_pooling,
        inputs={"x": tensor("float32", reshape([(7 * i % 20 - 10.5) / 4 for i in range(20)], (1, 1, 4, 5)))},
        question="""For the image batch `x` (N, C, H, W) = (1, 1, 4, 5), give: `max_floor`, 2x2 max pooling
            with stride 2 (torch defaults); `max_ceil`, the same with ceil_mode=True, and
            `max_ceil_indices`, the indices it returns (return_indices=True, flat positions in each H*W
            plane); `avg_with_pad`, 3x3 average pooling with stride 1 and padding 1 (torch defaults
            otherwise); and `avg_without_pad`, the same but excluding the padding from the divisor
            (count_include_pad=False).""",
        answer=({"max_floor": f32(1, 1, 2, 2), "max_ceil": f32(1, 1, 2, 3),
                 "max_ceil_indices": i64(1, 1, 2, 3), "avg_with_pad": f32(1, 1, 4, 5),
                 "avg_without_pad": f32(1, 1, 4, 5)},),
    ),
    make_task(
        "pt-024", "nn_modules", reference=adaptive_pooling, independent=_adaptive_pooling,
        inputs={"x": tensor("float32", reshape([((3 * i) % 13 - 6) / 4 for i in range(70)], (1, 2, 5, 7)))},
        question="""Pool `x` (N, C, H, W) = (1, 2, 5, 7) to an output of size (3, 4) with adaptive average
            pooling (`adaptive_avg`) and adaptive max pooling (`adaptive_max`), as torch defines them.""",
        answer=({"adaptive_avg": f32(1, 2, 3, 4), "adaptive_max": f32(1, 2, 3, 4)},),
    ),
    make_task(
        "pt-025", "nn_modules", reference=flatten_mlp, independent=_flatten_mlp,
        inputs={"x": tensor("float32", reshape([(2 * i - 11) / 4 for i in range(12)], (2, 2, 3))),
                "w1": tensor("float32", reshape([((5 * i) % 9 - 4) / 4 for i in range(24)], (4, 6))),
                "b1": tensor("float32", [0.5, -1.0, 0.25, -0.5]),
                "w2": tensor("float32", [[1.0, -0.5, 0.75, 2.0], [-1.5, 0.25, 1.0, 0.5]]),
                "b2": tensor("float32", [0.125, -0.375])},
        question="""Build torch.nn.Sequential(Flatten(), Linear(6, 4), ReLU(), Linear(4, 2)), set the first
            Linear's weight and bias to `w1`, `b1` and the second's to `w2`, `b2`, and apply it to `x` (a
            batch of two 2x3 samples). Give the output `y`.""",
        answer=({"y": f32(2, 2)},),
    ),
    make_task(
        "pt-026", "nn_modules", reference=embedding_lookup, independent=_embedding_lookup,
        inputs={"weight": tensor("float32", reshape([(2 * i - 15) / 8 for i in range(15)], (5, 3))),
                "idx": tensor("int64", [[0, 3, 1], [4, 0, 2]]),
                "flat_idx": tensor("int64", [1, 3, 0, 4, 1, 4]),
                "offsets": tensor("int64", [0, 2])},
        question="""Build torch.nn.Embedding(5, 3, padding_idx=0), then copy `weight` into its weight. Give
            `looked_up`, the embeddings of `idx`. Then, with the same table `weight`, treat `flat_idx` as
            bags that start at the positions in `offsets` (torch.nn.functional.embedding_bag) and give
            `bag_mean` and `bag_max`, each bag reduced with mode 'mean' and 'max'.""",
        answer=({"looked_up": f32(2, 3, 3), "bag_mean": f32(2, 3), "bag_max": f32(2, 3)},),
    ),
    make_task(
        "pt-027", "nn_modules", reference=batch_norm_training, independent=_batch_norm_training,
        inputs={"x": tensor("float32", [[1.0, -2.0, 0.5], [3.0, 0.0, 1.5], [2.0, 1.0, -0.5],
                                        [-1.0, 4.0, 2.5]]),
                "weight": tensor("float32", [1.5, 0.5, 2.0]),
                "bias": tensor("float32", [0.5, -0.25, 0.75])},
        question="""Create a fresh torch.nn.BatchNorm1d(3) (eps=1e-5, momentum=0.1), set its weight and bias
            to `weight` and `bias`, and run one forward pass on the batch `x` in training mode. Give the
            output `y` and the module's `running_mean` and `running_var` after that pass.""",
        answer=({"y": f32(4, 3), "running_mean": f32(3), "running_var": f32(3)},),
    ),
)
