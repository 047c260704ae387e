"""The adaptive_pooling family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_INT, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, mean, values
from exactgrade.domains.pytorch.sampling import distinct_dyadic_tensor, dyadic_tensor, shape_text
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import Branch, Draw, five_levels


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


def _sample_adaptive(draw: Draw, level: int) -> dict:
    batch, channels = (1, 2) if level <= 2 else (draw.integer(1, level - 1), draw.integer(1, 3))
    shape = (batch, channels, draw.integer(4, 4 + level), draw.integer(5, 6 + level))
    return {"x": dyadic_tensor(draw, shape, -2, 2, 2)}


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=adaptive_pooling,
    independent=_adaptive_pooling,
    question=lambda i: (
        f"""Pool `x` (N, C, H, W) = {shape_text(i["x"].shape)} to an output of size (3, 4)
        with adaptive average pooling (`adaptive_avg`) and adaptive max pooling (`adaptive_max`), as torch
        defines them."""
    ),
    answer=lambda i: (
        {"adaptive_avg": f32(*dims(i["x"])[:2], 3, 4), "adaptive_max": f32(*dims(i["x"])[:2], 3, 4)},
    ),
    sample=_sample_adaptive,
)


# adaptive_pooling --------------------------------------------------------------------------------
_ADAPTIVE_MATH = """To pool a plane of height H and width W to (R, S): bin (r, s) covers rows floor(r * H / R)
    to ceil((r + 1) * H / R) - 1 and columns floor(s * W / S) to ceil((s + 1) * W / S) - 1 (neighbouring bins
    may share cells)."""


LEVEL_2 = pytorch_level(
    "nn_modules",
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
            "adaptive_avg": f32(*dims(i["x"])[:2], 3, 4),
            "adaptive_max": f32(*dims(i["x"])[:2], 3, 4),
        },
    ),
)


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


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=adaptive_chain,
    independent=_adaptive_chain,
    sample=_sample_adaptive,
    question=lambda i: (
        f"""{_ADAPTIVE_MATH} Pool every plane of `x` (N, C, H, W) =
       {shape_text(i["x"].shape)} to (3, 4) by the mean of each bin, then pool that (3, 4) result to
       (2, 3) by the maximum of each bin. Give the result `y`."""
    ),
    answer=lambda i: ({"y": f32(*dims(i["x"])[:2], 2, 3)},),
)


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
        e for sample in values(x) for plane in sample for e in leaves(_adaptive_plane(plane, s, s, max))
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
    picks = [*draw.sample(levels, min(2, len(levels))), max(leaves(values(x))) + Fraction(1, 8)]
    return {"x": x, "thresholds": tensor("float32", [float(t) for t in draw.shuffled(picks)])}


def _grids_vary(task):
    if len({row["grid"] for row in task.expected["rows"]}) < 2:
        return "every threshold gives the same grid: a constant answer passes"
    return None


LEVEL_4 = pytorch_level(
    "nn_modules",
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
)


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
    return {"x": x, "upstream": dyadic_tensor(draw, (*dims(x)[:2], 3, 4), -1, 1, 2, nonzero=True)}


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=adaptive_backward,
    independent=_adaptive_backward,
    sample=_sample_adaptive_backward,
    question=lambda i: (
        f"""{_ADAPTIVE_MATH} Let P be every plane of `x` (N, C, H, W) =
       {shape_text(i["x"].shape)} pooled to (3, 4) by the mean of each bin. Give `grad_x`,
       the gradient
       with respect to `x` of the sum over all elements of P * `upstream`."""
    ),
    answer=lambda i: ({"grad_x": f32(*dims(i["x"]))},),
)


ADAPTIVE_POOLING = five_levels(
    "adaptive_pooling",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 adaptive pooling named; L2 the bins described; L3 average pooling to (3, 4) then max "
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
