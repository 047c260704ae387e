"""The pooling family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.domains.pytorch.sampling import distinct_dyadic_tensor, dyadic_tensor, shape_text
from exactgrade.domains.pytorch.shared import dims, leaves
from exactgrade.family import Branch, Draw, five_levels


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
    n, c, h, w = dims(i["x"])
    count = (lambda v: -(-v // 2)) if ceil else (lambda v: v // 2)
    return n, c, count(h - 2) + 1, count(w - 2) + 1


LEVEL_1 = pytorch_level(
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
            "avg_with_pad": f32(*dims(i["x"])),
            "avg_without_pad": f32(*dims(i["x"])),
        },
    ),
    sample=_sample_pooling,
    refuse=_pool_windows_untied,
)


# pooling -----------------------------------------------------------------------------------------
_POOL_MATH = """every plane is pooled separately. `max_floor`: the maximum of each
    2x2 block of cells (rows 2i, 2i+1, columns 2j, 2j+1), for the blocks that fit wholly inside the plane;
    `max_ceil`: the same, but blocks that stick out past the last row or column are kept and take the
    maximum of their cells inside the plane; `max_ceil_indices`: for each `max_ceil` block, the position
    r * W + c (int64) of the cell holding its maximum; `avg_with_pad`: at every cell, the sum of the 3x3
    neighbourhood centred on it (cells outside the plane count as 0) divided by 9; `avg_without_pad`: the
    same sum divided by the number of neighbourhood cells that lie inside the plane."""


LEVEL_2 = pytorch_level(
    "nn_modules",
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
            "avg_with_pad": f32(*dims(i["x"])),
            "avg_without_pad": f32(*dims(i["x"])),
        },
    ),
)


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


LEVEL_3 = pytorch_level(
    "nn_modules",
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
)


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
    above = max(leaves(values(inputs["x"]))) + Fraction(1, 8)
    picks = [*draw.sample(levels, min(2, len(levels))), above]
    return {**inputs, "thresholds": tensor("float32", [float(t) for t in draw.shuffled(picks)])}


def _pool_windows_vary(task):
    if len({row["window"] for row in task.expected["rows"]}) < 2:
        return "every threshold gives the same window: a constant answer passes"
    return None


LEVEL_4 = pytorch_level(
    "nn_modules",
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
)


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
        "up_avg": dyadic_tensor(draw, dims(x), -1, 1, 2, nonzero=True),
    }


LEVEL_5 = pytorch_level(
    "nn_modules",
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
    answer=lambda i: ({"grad_max": f32(*dims(i["x"])), "grad_avg": f32(*dims(i["x"]))},),
)


POOLING = five_levels(
    "pooling",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the pooling calls and options named; L2 the windows, the divisors and the index convention "
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
