"""The conv_relu_pool_linear family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import Inputs, f32, i64, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, hp, log_softmax, softmax, values
from exactgrade.domains.pytorch.nn_modules.shared import (
    BEST,
    affine,
    best_of,
    candidate_sampler,
    cross_correlate,
)
from exactgrade.domains.pytorch.sampling import dyadic_tensor, int_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


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
        maps = cross_correlate(image, kernels, offsets, 1, padding)
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
    return features, affine(features, values(fc_weight), values(fc_bias))


def _conv_relu_pool_linear(x, conv_weight, conv_bias, fc_weight, fc_bias):
    features, logits = _cnn_logits(x, conv_weight, conv_bias, fc_weight, fc_bias)
    return [
        {
            "features": ExactTensor.of("float32", features),
            "logits": ExactTensor.of("float32", logits),
            "predicted": ExactTensor.of("int64", [row.index(max(row)) for row in logits]),
        }
    ]


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


LEVEL_1 = pytorch_level(
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
    refuse=_prediction_untied,
    zero_reason=_every_prediction_is_class_zero,
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


LEVEL_2 = pytorch_level(
    "nn_modules",
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
)


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


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=cnn_loss,
    independent=_cnn_loss,
    sample=_sample_cnn_target,
    question=lambda i: (
        f"""{_cnn_math(i)}, with K = `conv_weight`. The probability of class c is
       exp(logit_c) / sum_k exp(logit_k). Give `loss`, the mean over the batch of -ln(probability of
       the class `target` names for that image)."""
    ),
    answer=({"loss": f32()},),
)


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


_CNN_BEST = best_of(_CNN_STACK, _CNN_OUT)


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=cnn_best,
    sample=candidate_sampler(_sample_cnn, _CNN_STACK, _CNN_OUT),
    question=lambda i: (
        f"""{_cnn_math(i)}. Candidate k (k = 0..{i["conv_weights"].shape[0] - 1}) uses
       K = `conv_weights[k]`; its output is the logits of the batch `x`. {BEST}"""
    ),
    **_CNN_BEST,
)


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
        maps = cross_correlate(image, kernels, offsets, 1, pad)
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
        for m in cross_correlate(image, kernels, offsets, 1, pad):
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


LEVEL_5 = pytorch_level(
    "nn_modules",
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
            "grad_fc_weight": f32(*dims(i["fc_weight"])),
            "grad_fc_bias": f32(i["fc_bias"].shape[0]),
        },
    ),
)


CONV_RELU_POOL_LINEAR = five_levels(
    "conv_relu_pool_linear",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the Sequential named; L2 the chain described; L3 its mean cross-entropy; L4 the candidate "
   "kernels whose logits are closest to each of two targets; L5 the gradients of the cross-entropy with "
   "respect to the head and the convolution offsets (through pooling and ReLU)",
)
