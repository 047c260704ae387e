"""tensor_ops (pt-000..pt-015): reshape, reductions, clamp, masking, sorting, joins, matmul,
normalisation, cumulative ops, casts, indexing, broadcasting and grouping.

Each task is a reference (the program a perfect model runs; torch imported inside), an
independent recomputation without torch (leading underscore), and a make_task call.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, TensorSpec, f32, i64, make_task, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, matmul, mean, reshape, transpose, values


# pt-000 -------------------------------------------------------------------------------------------
def permute_and_reshape(x):
    y = x.permute(2, 0, 1).reshape(4, 6)
    return {"rows": [{"y": y, "picked": int(y[2, 5])}]}


def _permute_and_reshape(x):
    v = values(x)
    d0, d1, d2 = x.shape
    moved = [v[i][j][k] for k in range(d2) for i in range(d0) for j in range(d1)]
    y = reshape(moved, (4, 6))
    return [{"y": ExactTensor.of("int64", y), "picked": y[2][5]}]


# pt-001 -------------------------------------------------------------------------------------------
def reductions(x):
    import torch

    return {"rows": [{
        "column_sums": x.sum(dim=0),
        "row_means": x.mean(dim=1),
        "row_logsumexp": torch.logsumexp(x, dim=1),
        "argmax": x.argmax(),
    }]}


def _reductions(x):
    v = values(x)
    elements = [e for row in v for e in row]
    return [{
        "column_sums": ExactTensor.of("float32", [sum(col, Fraction(0)) for col in transpose(v)]),
        "row_means": ExactTensor.of("float32", [mean(row) for row in v]),
        "row_logsumexp": ExactTensor.of("float32", [mpmath.log(mpmath.fsum(mpmath.exp(hp(e)) for e in row))
                                                    for row in v]),
        "argmax": ExactTensor.of("int64", elements.index(max(elements))),
    }]


# pt-002 -------------------------------------------------------------------------------------------
def spread_statistics(x):
    return {"rows": [{
        "row_std": x.std(dim=1),
        "row_population_var": x.var(dim=1, correction=0),
        "overall_std": x.std(),
    }]}


def _spread_statistics(x):
    v = values(x)

    def squared_deviations(xs):
        m = mean(xs)
        return sum(((e - m) ** 2 for e in xs), Fraction(0))

    def sample_std(xs):  # torch's default correction=1 (Bessel)
        return mpmath.sqrt(hp(squared_deviations(xs) / (len(xs) - 1)))

    everything = [e for row in v for e in row]
    return [{
        "row_std": ExactTensor.of("float32", [sample_std(r) for r in v]),
        "row_population_var": ExactTensor.of("float32", [squared_deviations(r) / len(r) for r in v]),
        "overall_std": ExactTensor.of("float32", sample_std(everything)),
    }]


# pt-003 -------------------------------------------------------------------------------------------
def clamp_and_select(x):
    import torch

    return {"rows": [{
        "clipped": torch.clamp(x, min=-1.5, max=2.0),
        "inverted_bounds": torch.clamp(x, min=2.0, max=1.0),
        "leaky": torch.where(x > 0, x, 0.1 * x),
    }]}


def _clamp_and_select(x):
    v = values(x)
    low, high = Fraction(-3, 2), Fraction(2)
    return [{
        "clipped": ExactTensor.of("float32", [[min(max(e, low), high) for e in row] for row in v]),
        # torch.clamp documents that min > max sets every element to max
        "inverted_bounds": ExactTensor.of("float32", [[Fraction(1) for _ in row] for row in v]),
        "leaky": ExactTensor.of("float32", [[e if e > 0 else Fraction(1, 10) * e for e in row] for row in v]),
    }]


# pt-004 -------------------------------------------------------------------------------------------
def integer_division(a, b):
    import torch

    return {"rows": [{
        "floor_quotient": torch.div(a, b, rounding_mode="floor"),
        "trunc_quotient": torch.div(a, b, rounding_mode="trunc"),
        "remainder": torch.remainder(a, b),
        "fmod": torch.fmod(a, b),
        "true_quotient": a / b,
    }]}


def _integer_division(a, b):
    pairs = list(zip(values(a), values(b), strict=True))
    floor = [p // q for p, q in pairs]
    trunc = [int(Fraction(p, q)) for p, q in pairs]  # int() of a Fraction rounds toward zero
    return [{
        "floor_quotient": ExactTensor.of("int64", floor),
        "trunc_quotient": ExactTensor.of("int64", trunc),
        "remainder": ExactTensor.of("int64", [p - q * f for (p, q), f in zip(pairs, floor, strict=True)]),
        "fmod": ExactTensor.of("int64", [p - q * t for (p, q), t in zip(pairs, trunc, strict=True)]),
        "true_quotient": ExactTensor.of("float32", [Fraction(p, q) for p, q in pairs]),
    }]


# pt-005 -------------------------------------------------------------------------------------------
def mask_above_mean(x):
    mask = x > x.mean()
    return {"rows": [{
        "filled": x.masked_fill(~mask, -1.0),
        "selected": x[mask],
        "positions": mask.nonzero(),
    }]}


def _mask_above_mean(x):
    v = values(x)
    m = mean([e for row in v for e in row])
    above = [(i, j) for i, row in enumerate(v) for j, e in enumerate(row) if e > m]
    return [{
        "filled": ExactTensor.of("float32", [[e if e > m else Fraction(-1) for e in row] for row in v]),
        "selected": ExactTensor.of("float32", [v[i][j] for i, j in above]),
        "positions": ExactTensor.of("int64", [[i, j] for i, j in above]),
    }]


# pt-006 -------------------------------------------------------------------------------------------
def stable_sort(x):
    import torch

    sorted_values, order = torch.sort(x, descending=True, stable=True)
    return {"rows": [{"values": sorted_values, "indices": order, "ranks": torch.argsort(order)}]}


def _stable_sort(x):
    v = values(x)
    order = sorted(range(len(v)), key=lambda i: (-v[i], i))
    ranks = [order.index(i) for i in range(len(v))]
    return [{
        "values": ExactTensor.of("float32", [v[i] for i in order]),
        "indices": ExactTensor.of("int64", order),
        "ranks": ExactTensor.of("int64", ranks),
    }]


# pt-007 -------------------------------------------------------------------------------------------
def top_and_kth(x):
    import torch

    top = torch.topk(x, k=3, dim=1)
    kth = torch.kthvalue(x, k=2, dim=1)
    return {"rows": [{
        "top_values": top.values[i],
        "top_indices": top.indices[i],
        "second_smallest": kth.values[i].item(),
        "second_smallest_index": kth.indices[i].item(),
    } for i in range(x.shape[0])]}


def _top_and_kth(x):
    rows = []
    for row in values(x):
        descending = sorted(range(len(row)), key=lambda j: -row[j])[:3]
        second = sorted(range(len(row)), key=lambda j: row[j])[1]
        rows.append({
            "top_values": ExactTensor.of("float32", [row[j] for j in descending]),
            "top_indices": ExactTensor.of("int64", descending),
            "second_smallest": row[second],
            "second_smallest_index": second,
        })
    return rows


# pt-008 -------------------------------------------------------------------------------------------
def stack_and_concatenate(a, b):
    import torch

    return {"rows": [{
        "stacked": torch.stack([a, b], dim=1),
        "concatenated": torch.cat([a, b], dim=1),
        "interleaved": torch.stack([a, b], dim=2).reshape(a.shape[0], -1),
    }]}


def _stack_and_concatenate(a, b):
    va, vb = values(a), values(b)
    return [{
        "stacked": ExactTensor.of("int64", [[ra, rb] for ra, rb in zip(va, vb, strict=True)]),
        "concatenated": ExactTensor.of("int64", [ra + rb for ra, rb in zip(va, vb, strict=True)]),
        "interleaved": ExactTensor.of("int64", [[e for pair in zip(ra, rb, strict=True) for e in pair]
                                                for ra, rb in zip(va, vb, strict=True)]),
    }]


# pt-009 -------------------------------------------------------------------------------------------
def batched_products(a, b):
    import torch

    return {"rows": [{"product": a @ b, "gram": torch.einsum("bij,bkj->bik", a, a)}]}


def _batched_products(a, b):
    va, vb = values(a), values(b)
    return [{
        "product": ExactTensor.of("float32", [matmul(m, vb) for m in va]),
        "gram": ExactTensor.of("float32", [matmul(m, transpose(m)) for m in va]),
    }]


# pt-010 -------------------------------------------------------------------------------------------
def normalise(x):
    import torch.nn.functional as F

    return {"rows": [{
        "rows_unit_l2": F.normalize(x, p=2.0, dim=1),
        "columns_unit_l1": F.normalize(x, p=1.0, dim=0),
    }]}


def _normalise(x):
    v = values(x)
    l2 = [mpmath.sqrt(hp(sum((e * e for e in row), Fraction(0)))) for row in v]
    l1 = [sum((abs(e) for e in col), Fraction(0)) for col in transpose(v)]
    return [{
        "rows_unit_l2": ExactTensor.of("float32", [[hp(e) / n for e in row]
                                                   for row, n in zip(v, l2, strict=True)]),
        "columns_unit_l1": ExactTensor.of("float32", [[e / l1[j] for j, e in enumerate(row)] for row in v]),
    }]


# pt-011 -------------------------------------------------------------------------------------------
def running_statistics(x):
    import torch

    running_max = torch.cummax(x, dim=1)
    return {"rows": [{
        "cumsum": torch.cumsum(x, dim=1),
        "cumprod": torch.cumprod(x, dim=1),
        "running_max": running_max.values,
        "running_max_index": running_max.indices,
    }]}


def _running_statistics(x):
    sums, products, maxima, where = [], [], [], []
    for row in values(x):
        total, product, best, best_at = Fraction(0), Fraction(1), None, -1
        for output in (sums, products, maxima, where):
            output.append([])
        for j, e in enumerate(row):
            total += e
            product *= e
            if best is None or e >= best:  # torch 2.13 CPU reports the last of tied maxima
                best, best_at = e, j
            for output, value in ((sums, total), (products, product), (maxima, best), (where, best_at)):
                output[-1].append(value)
    return [{
        "cumsum": ExactTensor.of("float32", sums),
        "cumprod": ExactTensor.of("float32", products),
        "running_max": ExactTensor.of("float32", maxima),
        "running_max_index": ExactTensor.of("int64", where),
    }]


# pt-012 -------------------------------------------------------------------------------------------
def casts_and_wraparound(x, u):
    import torch

    return {"rows": [{
        "truncated": x.to(torch.int64),
        "rounded": torch.round(x),
        "floored": torch.floor(x).to(torch.int64),
        "wrapped": u + 10,
        "total": u.sum(),
    }]}


def _casts_and_wraparound(x, u):
    vx, vu = values(x), values(u)
    return [{
        "truncated": ExactTensor.of("int64", [int(e) for e in vx]),
        "rounded": ExactTensor.of("float32", [round(e) for e in vx]),  # Fraction rounds half to even
        "floored": ExactTensor.of("int64", [math.floor(e) for e in vx]),
        "wrapped": ExactTensor.of("uint8", [(e + 10) % 256 for e in vu]),
        "total": ExactTensor.of("int64", sum(vu)),
    }]


# pt-013 -------------------------------------------------------------------------------------------
def gather_and_index(x, idx, rows, cols):
    import torch

    return {"rows": [{
        "gathered": torch.gather(x, 1, idx),
        "picked": x[rows, cols],
        "selected_rows": torch.index_select(x, 0, rows),
    }]}


def _gather_and_index(x, idx, rows, cols):
    v, vi, vr, vc = values(x), values(idx), values(rows), values(cols)
    width = len(v[0])
    return [{
        "gathered": ExactTensor.of("float32", [[v[i][j] for j in row] for i, row in enumerate(vi)]),
        "picked": ExactTensor.of("float32", [v[r][c % width] for r, c in zip(vr, vc, strict=True)]),
        "selected_rows": ExactTensor.of("float32", [v[r] for r in vr]),
    }]


# pt-014 -------------------------------------------------------------------------------------------
def broadcast_arithmetic(a, b, c):
    return {"rows": [{"affine": a * b + c, "difference": a - c, "column_totals": (a * b).sum(dim=0)}]}


def _broadcast_arithmetic(a, b, c):
    column = [row[0] for row in values(a)]
    line = values(b)[0]
    vc = values(c)
    return [{
        "affine": ExactTensor.of("float32", [[p * q + r for q, r in zip(line, vc, strict=True)]
                                             for p in column]),
        "difference": ExactTensor.of("float32", [[p - r for r in vc] for p in column]),
        "column_totals": ExactTensor.of("float32", [sum((p * q for p in column), Fraction(0)) for q in line]),
    }]


# pt-015 -------------------------------------------------------------------------------------------
def group_by_key(keys, vals):
    import torch

    unique_keys, inverse, counts = torch.unique(keys, sorted=True, return_inverse=True, return_counts=True)
    sums = torch.zeros(unique_keys.shape[0], dtype=vals.dtype).index_add_(0, inverse, vals)
    return {"rows": [{
        "unique_keys": unique_keys,
        "inverse": inverse,
        "counts": counts,
        "group_means": sums / counts,
    }]}


def _group_by_key(keys, vals):
    vk, vv = values(keys), values(vals)
    unique = sorted(set(vk))
    members = [[v for k, v in zip(vk, vv, strict=True) if k == u] for u in unique]
    return [{
        "unique_keys": ExactTensor.of("int64", unique),
        "inverse": ExactTensor.of("int64", [unique.index(k) for k in vk]),
        "counts": ExactTensor.of("int64", [len(m) for m in members]),
        "group_means": ExactTensor.of("float32", [mean(m) for m in members]),
    }]


TASKS = (
    make_task(
        "pt-000", "tensor_ops", reference=permute_and_reshape, independent=_permute_and_reshape,
        inputs={"x": tensor("int64", reshape([3 * i - 35 for i in range(24)], (2, 3, 4)))},
        question="""Move the last axis of `x` to the front (the other two axes keep their order), then
            reshape the result to (4, 6) in row-major order; call it y. Also give the element y[2, 5].""",
        answer=({"y": i64(4, 6), "picked": PY_INT},),
    ),
    make_task(
        "pt-001", "tensor_ops", reference=reductions, independent=_reductions,
        inputs={"x": tensor("float32", [[0.5, -1.25, 2.0, 3.5], [-0.75, 4.25, 1.5, -2.0],
                                        [2.25, 0.25, -3.75, 1.0]])},
        question="""For the matrix `x`, compute: `column_sums`, the sum of each column; `row_means`, the
            mean of each row; `row_logsumexp`, log(sum(exp(.))) of each row; and `argmax`, the index of the
            largest element of the flattened matrix (row-major), as torch's argmax returns it.""",
        answer=({"column_sums": f32(4), "row_means": f32(3), "row_logsumexp": f32(3), "argmax": i64()},),
    ),
    make_task(
        "pt-002", "tensor_ops", reference=spread_statistics, independent=_spread_statistics,
        inputs={"x": tensor("float32", [[1.0, 2.5, -0.5, 4.0, 3.0], [2.0, 2.0, 2.25, 1.75, 6.0]])},
        question="""For `x`, compute `row_std`, the standard deviation of each row with torch's default
            `std` settings; `row_population_var`, the population variance of each row (dividing by the
            number of elements); and `overall_std`, torch's default standard deviation of all ten
            elements.""",
        answer=({"row_std": f32(2), "row_population_var": f32(2), "overall_std": f32()},),
    ),
    make_task(
        "pt-003", "tensor_ops", reference=clamp_and_select, independent=_clamp_and_select,
        inputs={"x": tensor("float32", [[-3.0, -1.25, 0.5, 1.75], [2.5, -0.75, 4.0, 1.0]])},
        question="""From `x`, compute `clipped` = torch.clamp(x, min=-1.5, max=2.0); `inverted_bounds` =
            torch.clamp(x, min=2.0, max=1.0) (the bounds are deliberately the wrong way round; report what
            torch returns); and `leaky`, which keeps the positive elements of x and multiplies the others by
            0.1 (use torch.where).""",
        answer=({"clipped": f32(2, 4), "inverted_bounds": f32(2, 4), "leaky": f32(2, 4)},),
    ),
    make_task(
        "pt-004", "tensor_ops", reference=integer_division, independent=_integer_division,
        inputs={"a": tensor("int64", [7, -7, 7, -7, 13, -13]), "b": tensor("int64", [3, 3, -3, -3, 5, 5])},
        question="""Divide the integer tensor `a` by `b` elementwise in five ways: `floor_quotient` (rounded
            toward negative infinity), `trunc_quotient` (rounded toward zero), `remainder` =
            torch.remainder(a, b), `fmod` = torch.fmod(a, b), and `true_quotient` = a / b with torch's true
            division of the two int64 tensors.""",
        answer=({"floor_quotient": i64(6), "trunc_quotient": i64(6), "remainder": i64(6), "fmod": i64(6),
                 "true_quotient": f32(6)},),
    ),
    make_task(
        "pt-005", "tensor_ops", reference=mask_above_mean, independent=_mask_above_mean,
        inputs={"x": tensor("float32", [[1.5, -0.5, 3.25, 0.75], [2.0, -2.5, 0.25, 4.5],
                                        [-1.0, 1.25, 3.0, -0.75]])},
        question="""Let mask mark the elements of `x` strictly greater than the mean of all of x. Give
            `filled`, x with every element outside the mask replaced by -1.0; `selected`, the masked
            elements in row-major order; and `positions`, their (row, column) indices, one row per element,
            in the same order.""",
        answer=({"filled": f32(3, 4), "selected": f32(6), "positions": i64(6, 2)},),
    ),
    make_task(
        "pt-006", "tensor_ops", reference=stable_sort, independent=_stable_sort,
        inputs={"x": tensor("float32", [3.0, 1.0, 2.0, 3.0, 1.0, 2.5, 3.0, 0.5])},
        question="""Sort `x` in descending order so that equal elements keep their original order (a stable
            sort). Give the sorted `values`, the original `indices` in sorted order, and `ranks`: for each
            element of x, its position in the sorted order.""",
        answer=({"values": f32(8), "indices": i64(8), "ranks": i64(8)},),
    ),
    make_task(
        "pt-007", "tensor_ops", reference=top_and_kth, independent=_top_and_kth,
        inputs={"x": tensor("float32", [[0.5, 4.0, -1.5, 2.25, 3.0, -0.25],
                                        [1.75, -3.0, 5.5, 0.75, -2.0, 2.5]])},
        question="""For each row of `x` (one answer row per row of x, in order), give the three largest
            values in descending order (`top_values`) with their column indices (`top_indices`), and the
            second-smallest value of the row (`second_smallest`, as torch.kthvalue with k=2 defines it) with
            its column index (`second_smallest_index`).""",
        answer=tuple({"top_values": f32(3), "top_indices": i64(3), "second_smallest": PY_FLOAT,
                      "second_smallest_index": PY_INT} for _ in range(2)),
    ),
    make_task(
        "pt-008", "tensor_ops", reference=stack_and_concatenate, independent=_stack_and_concatenate,
        inputs={"a": tensor("int64", [[1, 2, 3], [4, 5, 6]]),
                "b": tensor("int64", [[10, 20, 30], [40, 50, 60]])},
        question="""Join `a` and `b` (both of shape (2, 3)) three ways: `stacked`, stacked along a new axis
            1; `concatenated`, joined along the existing axis 1; and `interleaved`, each row alternating
            a[i, 0], b[i, 0], a[i, 1], b[i, 1], ...""",
        answer=({"stacked": i64(2, 2, 3), "concatenated": i64(2, 6), "interleaved": i64(2, 6)},),
    ),
    make_task(
        "pt-009", "tensor_ops", reference=batched_products, independent=_batched_products,
        inputs={"a": tensor("float32", reshape([(2 * i - 23) / 8 for i in range(24)], (2, 3, 4))),
                "b": tensor("float32", [[0.5, -1.0], [1.5, 2.0], [-0.25, 0.75], [1.0, -0.5]])},
        question="""`a` is a batch of two 3x4 matrices and `b` is one 4x2 matrix. Give `product`, each
            matrix of a multiplied by b (batched matrix product), and `gram`, each matrix of a multiplied by
            its own transpose (A @ A^T per batch element).""",
        answer=({"product": f32(2, 3, 2), "gram": f32(2, 3, 3)},),
    ),
    make_task(
        "pt-010", "tensor_ops", reference=normalise, independent=_normalise,
        inputs={"x": tensor("float32", [[3.0, -4.0, 1.0, 2.0], [0.5, 1.5, -2.5, 1.0],
                                        [-1.0, 2.0, 2.0, -0.25]])},
        question="""Give `rows_unit_l2`, each row of `x` divided by its Euclidean (L2) norm, and
            `columns_unit_l1`, each column of x divided by the sum of the absolute values of that column
            (torch.nn.functional.normalize semantics).""",
        answer=({"rows_unit_l2": f32(3, 4), "columns_unit_l1": f32(3, 4)},),
    ),
    make_task(
        "pt-011", "tensor_ops", reference=running_statistics, independent=_running_statistics,
        inputs={"x": tensor("float32", [[1.5, -2.0, 1.5, 0.5, 3.0], [0.5, 2.0, -1.0, 2.0, 0.25]])},
        question="""Along each row of `x`, give the running sum (`cumsum`), the running product (`cumprod`),
            the running maximum (`running_max`) and, for every position, the index that torch.cummax reports
            for that running maximum (`running_max_index`).""",
        answer=({"cumsum": f32(2, 5), "cumprod": f32(2, 5), "running_max": f32(2, 5),
                 "running_max_index": i64(2, 5)},),
    ),
    make_task(
        "pt-012", "tensor_ops", reference=casts_and_wraparound, independent=_casts_and_wraparound,
        inputs={"x": tensor("float32", [-2.75, -2.5, -1.5, 1.5, 2.5, 3.5, 3.75, 1.25]),
                "u": tensor("uint8", [250, 251, 252, 5])},
        question="""Give `truncated`, x converted to int64 with .to(torch.int64); `rounded`, torch.round(x);
            `floored`, floor(x) as int64; `wrapped`, the uint8 tensor u + 10 computed in uint8; and `total`,
            u.sum() as torch computes it.""",
        answer=({"truncated": i64(8), "rounded": f32(8), "floored": i64(8),
                 "wrapped": TensorSpec("uint8", (4,)), "total": i64()},),
    ),
    make_task(
        "pt-013", "tensor_ops", reference=gather_and_index, independent=_gather_and_index,
        inputs={"x": tensor("float32", reshape([i / 2 + 0.25 for i in range(12)], (3, 4))),
                "idx": tensor("int64", [[3, 0], [1, 1], [2, 0]]),
                "rows": tensor("int64", [2, 0, 2]), "cols": tensor("int64", [-1, 0, 2])},
        question="""From the 3x4 matrix `x`: `gathered` = torch.gather(x, 1, idx) (row i takes the columns
            listed in idx[i]); `picked`, the elements x[rows[k], cols[k]] for k = 0, 1, 2 (advanced
            indexing; a negative column counts from the end); and `selected_rows`, the rows of x listed in
            `rows`, in that order.""",
        answer=({"gathered": f32(3, 2), "picked": f32(3), "selected_rows": f32(3, 4)},),
    ),
    make_task(
        "pt-014", "tensor_ops", reference=broadcast_arithmetic, independent=_broadcast_arithmetic,
        inputs={"a": tensor("float32", [[0.5], [-1.5], [2.25]]),
                "b": tensor("float32", [[1.0, -2.0, 0.25, 3.0]]),
                "c": tensor("float32", [0.75, 1.25, -0.625, 2.5])},
        question="""With broadcasting (`a` is 3x1, `b` is 1x4, `c` has 4 elements), give `affine` = a * b +
            c, `difference` = a - c, and `column_totals`, the sum over the first axis of a * b.""",
        answer=({"affine": f32(3, 4), "difference": f32(3, 4), "column_totals": f32(4)},),
    ),
    make_task(
        "pt-015", "tensor_ops", reference=group_by_key, independent=_group_by_key,
        inputs={"keys": tensor("int64", [8, 3, 12, 3, 5, 8, 8, 12]),
                "vals": tensor("float32", [1.5, -0.5, 2.0, 2.5, 0.75, 3.0, -1.25, 1.0])},
        question="""Group `vals` by `keys`. Give `unique_keys`, the distinct keys in ascending order;
            `inverse`, for each element the position of its key in unique_keys; `counts`, how many elements
            each key has; and `group_means`, the mean of vals within each group (in unique_keys order).""",
        answer=({"unique_keys": i64(4), "inverse": i64(8), "counts": i64(4), "group_means": f32(4)},),
    ),
)
