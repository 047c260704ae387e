"""The batch_norm_training family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import f32, i64, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, hp, mean, to_fraction, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, Reject, five_levels


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


LEVEL_1 = pytorch_level(
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
        {"y": f32(*dims(i["x"])), "running_mean": f32(i["x"].shape[1]), "running_var": f32(i["x"].shape[1])},
    ),
    sample=_sample_batch_norm,
)


# batch_norm_training -----------------------------------------------------------------------------
_BN_MATH = """A batch normalisation layer in training mode normalises each feature (column) j of a batch x of
    n rows: with mu_j the column mean and s2_j the mean of (x[:, j] - mu_j)^2 (dividing by n), y[:, j] =
    (x[:, j] - mu_j) / sqrt(s2_j + 1e-5) * gamma[j] + beta[j]. It also keeps running estimates, starting at
    mean 0 and variance 1, and after each such pass sets running_mean = 0.9 * running_mean + 0.1 * mu and
    running_var = 0.9 * running_var + 0.1 * v, where v_j is the column variance dividing by n - 1."""


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=batch_norm_training,
    independent=_batch_norm_training,
    sample=_sample_batch_norm,
    question=f"""{_BN_MATH} Run one such pass on the batch `x` with gamma = `weight` and
        beta = `bias`.
       Give the output `y` and the `running_mean` and `running_var` after the pass.""",
    answer=lambda i: (
        {
            "y": f32(*dims(i["x"])),
            "running_mean": f32(i["x"].shape[1]),
            "running_var": f32(i["x"].shape[1]),
        },
    ),
)


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


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=batch_norm_eval,
    independent=_batch_norm_eval,
    sample=_sample_batch_norm_eval,
    question=f"""{_BN_MATH} In evaluation mode the layer instead uses its running estimates:
       y[:, j] = (x[:, j] - running_mean_j) / sqrt(running_var_j + 1e-5) * gamma[j] + beta[j], and
       leaves them unchanged. A fresh layer with gamma = `weight` and beta = `bias` makes one training
       pass on `x`, then evaluates `x_test`. Give `y_test`.""",
    answer=lambda i: ({"y_test": f32(*dims(i["x_test"]))},),
)


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


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=batch_norm_passes,
    independent=_batch_norm_passes,
    sample=_sample_batch_norm_passes,
    refuse=_passes_clear,
    question=f"""{_BN_MATH} A fresh layer makes training passes on the same batch `x` again and again.
       For each feature j, give in `passes` the smallest number of passes after which
       |running_var_j - v_j| <= `tolerance` * v_j (int64, one per feature).""",
    answer=lambda i: ({"passes": i64(i["x"].shape[1])},),
)


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
    return {**inputs, "upstream": dyadic_tensor(draw, dims(inputs["x"]), -1, 1, 2, nonzero=True)}


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=batch_norm_backward,
    independent=_batch_norm_backward,
    sample=_sample_batch_norm_backward,
    question=f"""{_BN_MATH} With gamma = `weight`, beta = `bias` and y the output of one training pass
       on `x`, let L = the sum over all elements of y * `upstream` (the batch statistics mu and s2 are
       functions of x). Give `grad_x`, the gradient of L with respect to `x`, and `grad_weight` and
       `grad_bias`, its gradients with respect to gamma and beta.""",
    answer=lambda i: (
        {
            "grad_x": f32(*dims(i["x"])),
            "grad_weight": f32(i["x"].shape[1]),
            "grad_bias": f32(i["x"].shape[1]),
        },
    ),
)


BATCH_NORM_TRAINING = five_levels(
    "batch_norm_training",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 BatchNorm1d named; L2 the training-mode statistics and running estimates described; L3 a "
   "training pass then an evaluation pass on other data; L4 the number of passes until each running "
   "variance is within a tolerance; L5 the backward pass through the batch statistics",
)
