"""tensor_ops (pt-000..pt-015): reshape, reductions, clamp, masking, sorting, joins, matmul,
normalisation, cumulative ops, casts, indexing, broadcasting and grouping.

Each task is a reference (the program a perfect model runs; torch imported inside), an
independent recomputation without torch (leading underscore), and a make_task call.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    PY_INT,
    Inputs,
    TensorSpec,
    f32,
    i64,
    pytorch_family,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, hp, matmul, mean, reshape, transpose, values
from exactgrade.domains.pytorch.levels import leveled
from exactgrade.domains.pytorch.levels_ops import (
    BROADCAST_PRODUCT,
    DIVISION_SUMS,
    PERIODIC_BEST_RUN,
    PERIODIC_STABLE_ORDER,
    PERIODIC_STANDARDISE,
    SHRINK_TO_BUDGET,
    VIEW_CHAIN,
    WRAPPING_RECURRENCE,
    division_exact_negatives,
    run_period_positive,
    run_tied,
)
from exactgrade.domains.pytorch.sampling import (
    dyadic_list,
    dyadic_tensor,
    first_duplicate,
    int_tensor,
    shape_text,
    word,
)
from exactgrade.family import Branch, Draw, Reject


# pt-000 -------------------------------------------------------------------------------------------
def permute_and_reshape(x):
    y = x.permute(2, 0, 1).reshape(x.shape[2], -1)
    return {"rows": [{"y": y, "picked": int(y[-2, -1])}]}


def _permute_and_reshape(x):
    v = values(x)
    d0, d1, d2 = x.shape
    moved = [v[i][j][k] for k in range(d2) for i in range(d0) for j in range(d1)]
    y = reshape(moved, (d2, d0 * d1))
    return [{"y": ExactTensor.of("int64", y), "picked": y[-2][-1]}]


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


# ------------------------------------------------------------------------------------ families
# Level 1 is about the canonical size; each level widens the shapes (and from level 3 on adds
# rows, batches or a wider value range), never shrinking below the level under it.


def _dims(x):
    return tuple(x.shape)


def _flat(x):
    return [e for row in values(x) for e in row] if len(x.shape) == 2 else values(x)


def _sample_permute(draw: Draw, level: int) -> dict:
    d0, d1, d2 = (draw.integer(2, 2 + level) for _ in range(3))
    d2 = max(d2, 3 if level >= 3 else 2)
    return {"x": int_tensor(draw, (d0, d1, d2), -10 * (level + 2), 10 * (level + 2))}


PERMUTE_AND_RESHAPE = pytorch_family(
    "permute_and_reshape", "tensor_ops", reference=permute_and_reshape, independent=_permute_and_reshape,
    question=lambda i: f"""Move the last axis of `x` to the front (the other two axes keep their order),
        then reshape the result to {shape_text((i["x"].shape[2], i["x"].shape[0] * i["x"].shape[1]))} in
        row-major order; call it y. Also give the element
        y[{i["x"].shape[2] - 2}, {i["x"].shape[0] * i["x"].shape[1] - 1}].""",
    answer=lambda i: ({"y": i64(i["x"].shape[2], i["x"].shape[0] * i["x"].shape[1]), "picked": PY_INT},),
    sample=_sample_permute,
    levels="int64 x of shape (d0, d1, d2), each dim 2..2+level, values within +-10*(level+2)",
)


def _sample_matrix(rows: tuple[int, int], cols: tuple[int, int], low: float, high: float, bits: int):
    def sample(draw: Draw, level: int) -> dict:
        shape = (draw.integer(rows[0], max(rows[0], rows[1] + level)),
                 draw.integer(cols[0], max(cols[0], cols[1] + level)))
        return {"x": dyadic_tensor(draw, shape, low * (1 + level) / 2, high * (1 + level) / 2, bits)}
    return sample


def _argmax_unique(inputs: Inputs) -> str | None:
    elements = _flat(inputs["x"])
    top = max(elements)
    if elements.count(top) > 1:
        return f"the maximum {float(top)} occurs {elements.count(top)} times: argmax would be ambiguous"
    return None


def _argmax_is_zero(inputs: Inputs) -> str | None:
    elements = _flat(inputs["x"])
    if elements.index(max(elements)) == 0:
        return "the largest element is the first one: argmax is index 0"
    return None


def _second_smallest_in_column_zero(inputs: Inputs) -> str | None:
    for row in values(inputs["x"]):
        if sorted(range(len(row)), key=lambda j: row[j])[1] == 0:
            return "a row's second-smallest value is in column 0: its index is 0"
    return None


REDUCTIONS = pytorch_family(
    "reductions", "tensor_ops", reference=reductions, independent=_reductions,
    question="""For the matrix `x`, compute: `column_sums`, the sum of each column; `row_means`, the
        mean of each row; `row_logsumexp`, log(sum(exp(.))) of each row; and `argmax`, the index of the
        largest element of the flattened matrix (row-major), as torch's argmax returns it.""",
    answer=lambda i: ({"column_sums": f32(i["x"].shape[1]), "row_means": f32(i["x"].shape[0]),
                       "row_logsumexp": f32(i["x"].shape[0]), "argmax": i64()},),
    sample=_sample_matrix((2, 2), (3, 3), -4, 4, 2),
    levels="x of shape (2..2+level, 3..3+level) on the 1/4 grid within +-2*(1+level); ties of the "
           "maximum rejected",
    refuse=_argmax_unique,
    zero_reason=_argmax_is_zero,
)

SPREAD_STATISTICS = pytorch_family(
    "spread_statistics", "tensor_ops", reference=spread_statistics, independent=_spread_statistics,
    question=lambda i: f"""For `x`, compute `row_std`, the standard deviation of each row with torch's
        default `std` settings; `row_population_var`, the population variance of each row (dividing by the
        number of elements); and `overall_std`, torch's default standard deviation of all
        {word(i["x"].shape[0] * i["x"].shape[1])} elements.""",
    answer=lambda i: ({"row_std": f32(i["x"].shape[0]), "row_population_var": f32(i["x"].shape[0]),
                       "overall_std": f32()},),
    sample=_sample_matrix((2, 1), (4, 4), -3, 6, 2),
    levels="x of shape (2..1+level, 4..4+level) on the 1/4 grid, the range widening with the level",
)


def _clamp_makes_its_point(inputs: Inputs) -> str | None:
    elements = _flat(inputs["x"])
    if not any(e < Fraction(-3, 2) for e in elements) or not any(e > 2 for e in elements):
        return "no element lies outside [-1.5, 2.0] on both sides: the clamp would not clip"
    return None


CLAMP_AND_SELECT = pytorch_family(
    "clamp_and_select", "tensor_ops", reference=clamp_and_select, independent=_clamp_and_select,
    question="""From `x`, compute `clipped` = torch.clamp(x, min=-1.5, max=2.0); `inverted_bounds` =
        torch.clamp(x, min=2.0, max=1.0) (the bounds are deliberately the wrong way round; report what
        torch returns); and `leaky`, which keeps the positive elements of x and multiplies the others by
        0.1 (use torch.where).""",
    answer=lambda i: ({"clipped": f32(*_dims(i["x"])), "inverted_bounds": f32(*_dims(i["x"])),
                       "leaky": f32(*_dims(i["x"]))},),
    sample=_sample_matrix((2, 0), (4, 2), -4, 4.5, 2),
    levels="x of shape (2..level, 4..2+level) on the 1/4 grid; instances that clip on only one side "
           "rejected",
    refuse=_clamp_makes_its_point,
)


def _sample_division(draw: Draw, level: int) -> dict:
    n = 6 + 2 * (level - 1)
    bound = 10 * level + 5
    a = [draw.integer(-bound, bound) for _ in range(n)]
    b = [draw.integer(1, 2 + 2 * level) * draw.choice((-1, 1)) for _ in range(n)]
    return {"a": tensor("int64", a), "b": tensor("int64", b)}


def _signs_mixed(inputs: Inputs) -> str | None:
    pairs = list(zip(values(inputs["a"]), values(inputs["b"]), strict=True))
    if not any(p % q != 0 and (p < 0) != (q < 0) for p, q in pairs):
        return "no inexact quotient of mixed signs: floor and trunc would agree everywhere"
    return None


INTEGER_DIVISION = pytorch_family(
    "integer_division", "tensor_ops", reference=integer_division, independent=_integer_division,
    question="""Divide the integer tensor `a` by `b` elementwise in five ways: `floor_quotient` (rounded
        toward negative infinity), `trunc_quotient` (rounded toward zero), `remainder` =
        torch.remainder(a, b), `fmod` = torch.fmod(a, b), and `true_quotient` = a / b with torch's true
        division of the two int64 tensors.""",
    answer=lambda i: ({"floor_quotient": i64(*_dims(i["a"])), "trunc_quotient": i64(*_dims(i["a"])),
                       "remainder": i64(*_dims(i["a"])), "fmod": i64(*_dims(i["a"])),
                       "true_quotient": f32(*_dims(i["a"]))},),
    sample=_sample_division,
    levels="6+2*(level-1) pairs, dividends within +-(10*level+5), non-zero divisors within "
           "+-(2+2*level); an instance must have an inexact quotient of mixed signs",
    refuse=_signs_mixed,
)


def _above_mean(x):
    elements = _flat(x)
    m = mean(elements)
    return sum(1 for e in elements if e > m)


def _no_element_at_mean(inputs: Inputs) -> str | None:
    elements = _flat(inputs["x"])
    m = mean(elements)
    if m in elements:
        return f"an element equals the mean {float(m)}: the strict mask would hinge on rounding"
    return None


MASK_ABOVE_MEAN = pytorch_family(
    "mask_above_mean", "tensor_ops", reference=mask_above_mean, independent=_mask_above_mean,
    question="""Let mask mark the elements of `x` strictly greater than the mean of all of x. Give
        `filled`, x with every element outside the mask replaced by -1.0; `selected`, the masked
        elements in row-major order; and `positions`, their (row, column) indices, one row per element,
        in the same order.""",
    answer=lambda i: ({"filled": f32(*_dims(i["x"])), "selected": f32(_above_mean(i["x"])),
                       "positions": i64(_above_mean(i["x"]), 2)},),
    sample=_sample_matrix((3, 2), (4, 3), -3, 5, 2),
    levels="x of shape (3..2+level, 4..3+level) on the 1/4 grid; an element equal to the mean rejected",
    refuse=_no_element_at_mean,
)


def _sample_sort(draw: Draw, level: int) -> dict:
    n = 8 + 2 * (level - 1)
    return {"x": tensor("float32", dyadic_list(draw, n, -1 - level / 2, 3 + level / 2, 1))}


def _has_tie(inputs: Inputs) -> str | None:
    if first_duplicate(values(inputs["x"])) is None:
        return "no tied values: the stable order would not be tested"
    return None


STABLE_SORT = pytorch_family(
    "stable_sort", "tensor_ops", reference=stable_sort, independent=_stable_sort,
    question="""Sort `x` in descending order so that equal elements keep their original order (a stable
        sort). Give the sorted `values`, the original `indices` in sorted order, and `ranks`: for each
        element of x, its position in the sorted order.""",
    answer=lambda i: ({"values": f32(*_dims(i["x"])), "indices": i64(*_dims(i["x"])),
                       "ranks": i64(*_dims(i["x"]))},),
    sample=_sample_sort,
    levels="8+2*(level-1) values on the 1/2 grid, so ties are common (the documented stable rule "
           "decides them; an instance needs one)",
    refuse=_has_tie,
)


def _rows_without_ties(inputs: Inputs) -> str | None:
    for r, row in enumerate(values(inputs["x"])):
        tie = first_duplicate(row)
        if tie is not None:
            return f"row {r} holds {float(tie)} twice: topk/kthvalue indices would be ambiguous"
    return None


TOP_AND_KTH = pytorch_family(
    "top_and_kth", "tensor_ops", reference=top_and_kth, independent=_top_and_kth,
    question="""For each row of `x` (one answer row per row of x, in order), give the three largest
        values in descending order (`top_values`) with their column indices (`top_indices`), and the
        second-smallest value of the row (`second_smallest`, as torch.kthvalue with k=2 defines it) with
        its column index (`second_smallest_index`).""",
    answer=lambda i: tuple({"top_values": f32(3), "top_indices": i64(3), "second_smallest": PY_FLOAT,
                            "second_smallest_index": PY_INT} for _ in range(i["x"].shape[0])),
    sample=_sample_matrix((2, 0), (5, 4), -4, 6, 2),
    levels="x of shape (2..level, 5..4+level) on the 1/4 grid; rows with a repeated value rejected",
    refuse=_rows_without_ties,
    zero_reason=_second_smallest_in_column_zero,
)


def _sample_two_int_matrices(draw: Draw, level: int) -> dict:
    shape = (draw.integer(2, 1 + level), draw.integer(2, 2 + level))
    bound = 20 * level + 40
    return {"a": int_tensor(draw, shape, -bound, bound), "b": int_tensor(draw, shape, -bound, bound)}


STACK_AND_CONCATENATE = pytorch_family(
    "stack_and_concatenate", "tensor_ops", reference=stack_and_concatenate,
    independent=_stack_and_concatenate,
    question=lambda i: f"""Join `a` and `b` (both of shape {shape_text(i["a"].shape)}) three ways:
        `stacked`, stacked along a new axis 1; `concatenated`, joined along the existing axis 1; and
        `interleaved`, each row alternating a[i, 0], b[i, 0], a[i, 1], b[i, 1], ...""",
    answer=lambda i: ({"stacked": i64(i["a"].shape[0], 2, i["a"].shape[1]),
                       "concatenated": i64(i["a"].shape[0], 2 * i["a"].shape[1]),
                       "interleaved": i64(i["a"].shape[0], 2 * i["a"].shape[1])},),
    sample=_sample_two_int_matrices,
    levels="int64 a, b of shape (2..1+level, 2..2+level), values within +-(20*level+40)",
)


def _sample_batched(draw: Draw, level: int) -> dict:
    batch = draw.integer(2, 1 + level)
    m, k, n = (draw.integer(2, 2 + level) for _ in range(3))
    return {"a": dyadic_tensor(draw, (batch, m, k), -3, 3, 3), "b": dyadic_tensor(draw, (k, n), -2, 2, 2)}


BATCHED_PRODUCTS = pytorch_family(
    "batched_products", "tensor_ops", reference=batched_products, independent=_batched_products,
    question=lambda i: f"""`a` is a batch of {word(i["a"].shape[0])} {i["a"].shape[1]}x{i["a"].shape[2]}
        matrices and `b` is one {i["b"].shape[0]}x{i["b"].shape[1]} matrix. Give `product`, each
        matrix of a multiplied by b (batched matrix product), and `gram`, each matrix of a multiplied by
        its own transpose (A @ A^T per batch element).""",
    answer=lambda i: ({"product": f32(i["a"].shape[0], i["a"].shape[1], i["b"].shape[1]),
                       "gram": f32(i["a"].shape[0], i["a"].shape[1], i["a"].shape[1])},),
    sample=_sample_batched,
    levels="batch 2..1+level of (m, k) @ (k, n) with m, k, n in 2..2+level, values on the 1/8 and 1/4 "
           "grids (products exact in float32)",
)


def _sample_normalise(draw: Draw, level: int) -> dict:
    x = _sample_matrix((3, 0), (4, 1), -4, 4, 2)(draw, level)["x"]
    v = values(x)
    if any(all(e == 0 for e in row) for row in v) or any(all(e == 0 for e in c) for c in transpose(v)):
        raise Reject("a zero row or column has no direction to normalise")
    return {"x": x}


NORMALISE = pytorch_family(
    "normalise", "tensor_ops", reference=normalise, independent=_normalise,
    question="""Give `rows_unit_l2`, each row of `x` divided by its Euclidean (L2) norm, and
        `columns_unit_l1`, each column of x divided by the sum of the absolute values of that column
        (torch.nn.functional.normalize semantics).""",
    answer=lambda i: ({"rows_unit_l2": f32(*_dims(i["x"])), "columns_unit_l1": f32(*_dims(i["x"]))},),
    sample=_sample_normalise,
    levels="x of shape (3..level, 4..1+level) on the 1/4 grid; zero rows or columns redrawn",
)


def _cummax_without_ties(inputs: Inputs) -> str | None:
    for r, row in enumerate(values(inputs["x"])):
        for j in range(1, len(row)):
            if row[j] == max(row[:j]):
                return (f"x[{r}, {j}] ties the running maximum: the index torch.cummax reports for ties is "
                        "not documented")
    return None


RUNNING_STATISTICS = pytorch_family(
    "running_statistics", "tensor_ops", reference=running_statistics, independent=_running_statistics,
    question="""Along each row of `x`, give the running sum (`cumsum`), the running product (`cumprod`),
        the running maximum (`running_max`) and, for every position, the index that torch.cummax reports
        for that running maximum (`running_max_index`).""",
    answer=lambda i: ({"cumsum": f32(*_dims(i["x"])), "cumprod": f32(*_dims(i["x"])),
                       "running_max": f32(*_dims(i["x"])), "running_max_index": i64(*_dims(i["x"]))},),
    sample=_sample_matrix((2, 0), (5, 1), -3, 3, 3),
    levels="x of shape (2..level, 5..1+level) on the 1/8 grid; ties with the running maximum rejected "
           "(the canonical task shows them; which index torch reports is observed, not documented)",
    refuse=_cummax_without_ties,
)


def _sample_casts(draw: Draw, level: int) -> dict:
    n = 8 + 2 * (level - 1)
    halves = [float(draw.integer(-4 - level, 4 + level)) + 0.5 for _ in range(n // 2)]
    quarters = dyadic_list(draw, n - n // 2, -4 - level, 4 + level, 2)
    u = [draw.integer(240, 255) if draw.chance(2, 3) else draw.integer(0, 30) for _ in range(3 + level)]
    return {"x": tensor("float32", draw.shuffled(halves + quarters)), "u": tensor("uint8", u)}


def _some_wrap(inputs: Inputs) -> str | None:
    if not any(e + 10 > 255 for e in values(inputs["u"])):
        return "no element of u wraps around when 10 is added"
    return None


CASTS_AND_WRAPAROUND = pytorch_family(
    "casts_and_wraparound", "tensor_ops", reference=casts_and_wraparound, independent=_casts_and_wraparound,
    question="""Give `truncated`, x converted to int64 with .to(torch.int64); `rounded`, torch.round(x);
        `floored`, floor(x) as int64; `wrapped`, the uint8 tensor u + 10 computed in uint8; and `total`,
        u.sum() as torch computes it.""",
    answer=lambda i: ({"truncated": i64(*_dims(i["x"])), "rounded": f32(*_dims(i["x"])),
                       "floored": i64(*_dims(i["x"])), "wrapped": TensorSpec("uint8", _dims(i["u"])),
                       "total": i64()},),
    sample=_sample_casts,
    levels="8+2*(level-1) values of x, half of them exact halves (torch.round's documented half-to-even "
           "rule), within +-(4+level); 3+level uint8 values, at least one of which wraps",
    refuse=_some_wrap,
)


def _sample_gather(draw: Draw, level: int) -> dict:
    r, c = draw.integer(3, 2 + level), draw.integer(4, 3 + level)
    start, step = draw.dyadic(-2, 2, 2), draw.choice((Fraction(1, 2), Fraction(1, 4), Fraction(3, 4)))
    x = tensor("float32", reshape([float(start + step * k) for k in range(r * c)], (r, c)))  # arange-style
    g, m = draw.integer(2, 1 + level), draw.integer(3, 2 + level)
    return {"x": x, "idx": int_tensor(draw, (r, g), 0, c - 1), "rows": int_tensor(draw, (m,), 0, r - 1),
            "cols": int_tensor(draw, (m,), -c, c - 1)}


def _uses_negative_column(inputs: Inputs) -> str | None:
    if not any(c < 0 for c in values(inputs["cols"])):
        return "no negative column index: the count-from-the-end rule would not be tested"
    return None


GATHER_AND_INDEX = pytorch_family(
    "gather_and_index", "tensor_ops", reference=gather_and_index, independent=_gather_and_index,
    question=lambda i: f"""From the {i["x"].shape[0]}x{i["x"].shape[1]} matrix `x`: `gathered` =
        torch.gather(x, 1, idx) (row i takes the columns listed in idx[i]); `picked`, the elements
        x[rows[k], cols[k]] for k = {", ".join(map(str, range(i["rows"].shape[0])))} (advanced indexing; a
        negative column counts from the end); and `selected_rows`, the rows of x listed in `rows`, in that
        order.""",
    answer=lambda i: ({"gathered": f32(*_dims(i["idx"])), "picked": f32(*_dims(i["rows"])),
                       "selected_rows": f32(i["rows"].shape[0], i["x"].shape[1])},),
    sample=_sample_gather,
    levels="arange-style x of shape (3..2+level, 4..3+level), 2..1+level gathered columns per row, "
           "3..2+level picked elements with at least one negative column",
    refuse=_uses_negative_column,
)


def _sample_broadcast(draw: Draw, level: int) -> dict:
    r, c = draw.integer(2, 2 + level), draw.integer(3, 3 + level)
    return {"a": dyadic_tensor(draw, (r, 1), -3, 3, 2), "b": dyadic_tensor(draw, (1, c), -3, 3, 2),
            "c": dyadic_tensor(draw, (c,), -3, 3, 3)}


BROADCAST_ARITHMETIC = pytorch_family(
    "broadcast_arithmetic", "tensor_ops", reference=broadcast_arithmetic, independent=_broadcast_arithmetic,
    question=lambda i: f"""With broadcasting (`a` is {i["a"].shape[0]}x1, `b` is 1x{i["b"].shape[1]}, `c`
        has {i["c"].shape[0]} elements), give `affine` = a * b + c, `difference` = a - c, and
        `column_totals`, the sum over the first axis of a * b.""",
    answer=lambda i: ({"affine": f32(i["a"].shape[0], i["b"].shape[1]),
                       "difference": f32(i["a"].shape[0], i["b"].shape[1]),
                       "column_totals": f32(i["b"].shape[1])},),
    sample=_sample_broadcast,
    levels="a (2..2+level, 1), b (1, 3..3+level), c matching, on the 1/4 and 1/8 grids",
)


def _sample_groups(draw: Draw, level: int) -> dict:
    n = 8 + 3 * (level - 1)
    pool = draw.sample(range(0, 10 + 10 * level), 3 + level)
    keys = [draw.choice(pool) for _ in range(n)]
    return {"keys": tensor("int64", keys), "vals": tensor("float32", dyadic_list(draw, n, -3, 3, 2))}


def _a_group_repeats(inputs: Inputs) -> str | None:
    keys = values(inputs["keys"])
    if first_duplicate(keys) is None:
        return "every key is distinct: there is nothing to group"
    return None


GROUP_BY_KEY = pytorch_family(
    "group_by_key", "tensor_ops", reference=group_by_key, independent=_group_by_key,
    question="""Group `vals` by `keys`. Give `unique_keys`, the distinct keys in ascending order;
        `inverse`, for each element the position of its key in unique_keys; `counts`, how many elements
        each key has; and `group_means`, the mean of vals within each group (in unique_keys order).""",
    answer=lambda i: ({"unique_keys": i64(len(set(values(i["keys"])))), "inverse": i64(*_dims(i["keys"])),
                       "counts": i64(len(set(values(i["keys"])))),
                       "group_means": f32(len(set(values(i["keys"]))))},),
    sample=_sample_groups,
    levels="8+3*(level-1) elements with keys from 3+level distinct values below 10+10*level",
    refuse=_a_group_repeats,
)

TASKS = (
    PERMUTE_AND_RESHAPE.task("pt-000", {"x": tensor("int64",
                                                    reshape([3 * i - 35 for i in range(24)], (2, 3, 4)))}),
    REDUCTIONS.task("pt-001", {"x": tensor("float32", [[0.5, -1.25, 2.0, 3.5], [-0.75, 4.25, 1.5, -2.0],
                                                       [2.25, 0.25, -3.75, 1.0]])}),
    SPREAD_STATISTICS.task("pt-002", {"x": tensor("float32", [[1.0, 2.5, -0.5, 4.0, 3.0],
                                                              [2.0, 2.0, 2.25, 1.75, 6.0]])}),
    CLAMP_AND_SELECT.task("pt-003", {"x": tensor("float32", [[-3.0, -1.25, 0.5, 1.75],
                                                             [2.5, -0.75, 4.0, 1.0]])}),
    INTEGER_DIVISION.task("pt-004", {"a": tensor("int64", [7, -7, 7, -7, 13, -13]),
                                     "b": tensor("int64", [3, 3, -3, -3, 5, 5])}),
    MASK_ABOVE_MEAN.task("pt-005", {"x": tensor("float32", [[1.5, -0.5, 3.25, 0.75], [2.0, -2.5, 0.25, 4.5],
                                                            [-1.0, 1.25, 3.0, -0.75]])}),
    STABLE_SORT.task("pt-006", {"x": tensor("float32", [3.0, 1.0, 2.0, 3.0, 1.0, 2.5, 3.0, 0.5])}),
    TOP_AND_KTH.task("pt-007", {"x": tensor("float32", [[0.5, 4.0, -1.5, 2.25, 3.0, -0.25],
                                                        [1.75, -3.0, 5.5, 0.75, -2.0, 2.5]])}),
    STACK_AND_CONCATENATE.task("pt-008", {"a": tensor("int64", [[1, 2, 3], [4, 5, 6]]),
                                          "b": tensor("int64", [[10, 20, 30], [40, 50, 60]])}),
    BATCHED_PRODUCTS.task("pt-009", {
        "a": tensor("float32", reshape([(2 * i - 23) / 8 for i in range(24)], (2, 3, 4))),
        "b": tensor("float32", [[0.5, -1.0], [1.5, 2.0], [-0.25, 0.75], [1.0, -0.5]])}),
    NORMALISE.task("pt-010", {"x": tensor("float32", [[3.0, -4.0, 1.0, 2.0], [0.5, 1.5, -2.5, 1.0],
                                                      [-1.0, 2.0, 2.0, -0.25]])}),
    RUNNING_STATISTICS.task("pt-011", {"x": tensor("float32", [[1.5, -2.0, 1.5, 0.5, 3.0],
                                                               [0.5, 2.0, -1.0, 2.0, 0.25]])}),
    CASTS_AND_WRAPAROUND.task("pt-012", {"x": tensor("float32",
                                                     [-2.75, -2.5, -1.5, 1.5, 2.5, 3.5, 3.75, 1.25]),
                                         "u": tensor("uint8", [250, 251, 252, 5])}),
    GATHER_AND_INDEX.task("pt-013", {
        "x": tensor("float32", reshape([i / 2 + 0.25 for i in range(12)], (3, 4))),
        "idx": tensor("int64", [[3, 0], [1, 1], [2, 0]]),
        "rows": tensor("int64", [2, 0, 2]), "cols": tensor("int64", [-1, 0, 2])}),
    BROADCAST_ARITHMETIC.task("pt-014", {"a": tensor("float32", [[0.5], [-1.5], [2.25]]),
                                         "b": tensor("float32", [[1.0, -2.0, 0.25, 3.0]]),
                                         "c": tensor("float32", [0.75, 1.25, -0.625, 2.5])}),
    GROUP_BY_KEY.task("pt-015", {"keys": tensor("int64", [8, 3, 12, 3, 5, 8, 8, 12]),
                                 "vals": tensor("float32", [1.5, -0.5, 2.0, 2.5, 0.75, 3.0, -1.25, 1.0])}),
)


# ------------------------------------------------------------------------------------ levels 2-5
# Level 2 restates a level-1 question mathematically (no torch call named) with the level-1
# reference; levels 3-5 ask new questions of the same kind of setting, each with its own torch
# reference and its own independent recomputation (exact Fractions, or mpmath).


def _restated(base_name: str, reference, independent, question, answer, sample, *, refuse=None,
              zero_reason=None, reject=None):
    """A level of ``base_name`` (any level): a pytorch_family under the family's name."""
    return pytorch_family(base_name, "tensor_ops", reference=reference, independent=independent,
                          question=question, answer=answer, sample=sample, levels="", refuse=refuse,
                          zero_reason=zero_reason, reject=reject)


def _not_constant(name: str):
    """refuse/reject helper: a key tensor whose elements are all equal passes a constant answer."""
    def problem(task) -> str | None:
        value = task.expected["rows"][0][name]
        if len(set(value.data)) < 2:
            return f"a constant answer passes: every element of {name} is {value.data[0]}"
        return None
    return problem


# Levels 4 that ask one answer per setting (several targets, bounds, totals or rows): a search over a
# handful of answers (a sentinel among them) would otherwise pass a constant guess on a large share
# of instances; the whole key is then a tuple of answers, each drawn at its own stated share.
NONE_SHARE = Fraction(1, 5)
"""The chance that one setting of such a level is drawn to have no answer (its -1 sentinel)."""


def _draws_none(draw: Draw) -> bool:
    """Whether this setting is drawn to have no answer (with probability NONE_SHARE)."""
    return draw.chance(NONE_SHARE.numerator, NONE_SHARE.denominator)


def _one_answer_for_all(name: str):
    """reject helper: every entry of the key tensor ``name`` (an element of a vector, a row of a
    matrix) is the same answer, so guessing that one answer for every setting would pass."""
    def problem(task) -> str | None:
        value = task.expected["rows"][0][name]
        width = len(value.data) // value.shape[0]
        entries = {value.data[i:i + width] for i in range(0, len(value.data), width)}
        if len(entries) < 2:
            return f"a constant answer passes: every entry of {name} is {list(value.data[:width])}"
        return None
    return problem


def _some_sentinel(name: str):
    """Branch helper: some setting's answer in the key tensor ``name`` is the -1 sentinel."""
    return lambda task: -1 in task.expected["rows"][0][name].data


def _grid_points(draw: Draw, low: Fraction, high: Fraction, bits: int, most: int = 24) -> list[Fraction]:
    """Multiples of 2**-bits in [low, high]: all of them, or ``most`` drawn ones where there are more."""
    scale = 2**bits
    ks = range(math.ceil(Fraction(low) * scale), math.floor(Fraction(high) * scale) + 1)
    return [Fraction(k, scale) for k in (ks if len(ks) <= most else draw.sample(ks, most))]


def _thresholds(draw: Draw, answer_of, intervals: dict, count: int, bits: int) -> list[float]:
    """``count`` distinct thresholds on the 2**-bits grid, each drawn for an answer chosen first:
    -1 with probability NONE_SHARE, else one of the reachable answers uniformly. ``intervals`` maps
    each answer to the range where its thresholds lie; ``answer_of(b)`` (exact) keeps the grid points
    that give that answer (it returns None for one too near an edge to decide in floating point).
    Choosing the answer before the threshold keeps the shares as stated, whatever is redrawn later."""
    pools = {answer: [b for b in _grid_points(draw, low, high, bits) if answer_of(b) == answer]
             for answer, (low, high) in intervals.items()}
    chosen = []
    for _ in range(count):
        reachable = [answer for answer, pool in pools.items() if answer != -1 and pool]
        if len(reachable) < 2:
            raise Reject("fewer than two answers are left for a threshold to reach")
        none = pools.get(-1) and _draws_none(draw)
        pool = pools[-1] if none else pools[draw.choice(reachable)]
        chosen.append(pool.pop(draw.below(len(pool))))
    return [float(b) for b in chosen]


# permute_and_reshape L3: transpose, flatten, re-chunk, reduce -------------------------------------
def chunked_column_sums(x):
    y = x.permute(2, 0, 1).reshape(-1)
    return {"rows": [{"sums": y.reshape(-1, x.shape[2]).sum(dim=0)}]}


def _chunked_column_sums(x):
    v = values(x)
    d0, d1, d2 = x.shape
    seq = [v[i][j][k] for k in range(d2) for i in range(d0) for j in range(d1)]
    return [{"sums": ExactTensor.of("int64", [sum(seq[c::d2]) for c in range(d2)])}]


# permute_and_reshape L4: which axis order produced each target -----------------------------------
def find_axis_order(x, targets):
    import itertools

    import torch

    orders = []
    for target in targets:
        found = [order for order in itertools.permutations(range(3))
                 if torch.equal(x.permute(*order).reshape(-1), target)]
        orders.append(found[0] if found else (-1, -1, -1))
    return {"rows": [{"order": torch.tensor(orders)}]}


def _read_out(v, order):
    """The elements of the nested 3-d list v, axes taken in ``order``, last index fastest."""
    d = (len(v), len(v[0]), len(v[0][0]))
    seq = []
    for p in range(d[order[0]]):
        for q in range(d[order[1]]):
            for r in range(d[order[2]]):
                index = [0, 0, 0]
                index[order[0]], index[order[1]], index[order[2]] = p, q, r
                seq.append(v[index[0]][index[1]][index[2]])
    return seq


def _find_axis_order(x, targets):
    import itertools

    v = values(x)
    orders = []
    for target in values(targets):
        found = [order for order in itertools.permutations(range(3)) if _read_out(v, order) == target]
        orders.append(list(found[0]) if found else [-1, -1, -1])
    return [{"order": ExactTensor.of("int64", orders)}]


AXIS_TARGETS = 3


def _sample_axis_order(draw: Draw, level: int) -> dict:
    d = tuple(draw.integer(2, 2 + level) for _ in range(3))
    n = math.prod(d)  # distinct values, so that no two axis orders read out alike by accident
    x = tensor("int64", reshape(draw.sample(range(-2 * n - 10, 2 * n + 11), n), d))
    targets = []
    for _ in range(AXIS_TARGETS):
        seq = _read_out(values(x), draw.choice([(0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]))
        if _draws_none(draw):  # no order produces it
            a, b = draw.sample(range(len(seq)), 2)
            seq[a], seq[b] = seq[b], seq[a]
        targets.append(seq)
    return {"x": x, "targets": tensor("int64", targets)}


def _distinct_elements(inputs: Inputs) -> str | None:
    flat = [e for plane in values(inputs["x"]) for row in plane for e in row]
    if first_duplicate(flat) is not None:
        return "x repeats a value: two axis orders could both produce the target"
    return None


PERMUTE_AND_RESHAPE = leveled(PERMUTE_AND_RESHAPE, {
    2: _restated(
        "permute_and_reshape", permute_and_reshape, _permute_and_reshape,
        lambda i: f"""`x` has shape {shape_text(i["x"].shape)} = (d0, d1, d2). Build the int64 matrix y with
            d2 rows and d0*d1 columns whose element y[k, i*d1 + j] is x[i, j, k], for every i, j, k. Give y
            and its element `picked` = y[{i["x"].shape[2] - 2}, {i["x"].shape[0] * i["x"].shape[1] - 1}].""",
        lambda i: ({"y": i64(i["x"].shape[2], i["x"].shape[0] * i["x"].shape[1]), "picked": PY_INT},),
        _sample_permute),
    3: _restated(
        "permute_and_reshape", chunked_column_sums, _chunked_column_sums,
        lambda i: f"""`x` has shape {shape_text(i["x"].shape)} = (d0, d1, d2). List its elements x[i, j, k]
            in the order in which k varies slowest, then i, and j fastest. Cut that list into consecutive
            chunks of d2 = {i["x"].shape[2]} elements each. Give `sums`, the int64 vector of length d2 whose
            element c is the sum, over all chunks, of the chunk's element at position c (0-based).""",
        lambda i: ({"sums": i64(i["x"].shape[2])},), _sample_permute),
    4: _restated(
        "permute_and_reshape", find_axis_order, _find_axis_order,
        lambda i: f"""`x` has shape {shape_text(i["x"].shape)}, and each of the {word(i["targets"].shape[0])}
            rows of `targets` (shape {shape_text(i["targets"].shape)}) is a sequence of
            {i["targets"].shape[1]} elements. Consider the six orders (p0, p1, p2) of the axes (0, 1, 2) of
            x: for an order, form the tensor whose element at (a, b, c) is the element of x whose index
            along axis p0 is a, along axis p1 is b and along axis p2 is c, and read it out in row-major
            order (last index fastest). Give `order`, an int64 matrix with one row per row t of targets:
            the order (three axis numbers) whose read-out equals targets[t], element for element; if
            several do, the lexicographically smallest; if none does, [-1, -1, -1].""",
        lambda i: ({"order": i64(i["targets"].shape[0], 3)},), _sample_axis_order, refuse=_distinct_elements,
        reject=_one_answer_for_all("order")),
    5: VIEW_CHAIN,
}, levels="L1 the permute and reshape stated as calls; L2 the same map given by its index formula; L3 "
          "a read-out order, re-chunked and reduced (nothing intermediate asked); L4 the inverse: which "
          "of six axis orders produced each of three targets, or none (a fifth of the targets); L5 "
          "a chain of re-indexings (axes swapped, regrouped, every other row, transposed, regrouped) of "
          "a tensor too large to build: the index arithmetic of each step derived and composed, at "
          "query positions",
   branches=(Branch("no order produces some target", _some_sentinel("order"), Fraction(1, 4), (4,)),))

# reductions L3: softmax-weighted row averages, then the best row ---------------------------------
def pooled_rows(x):
    import torch

    pooled = (torch.softmax(x, dim=1) * x).sum(dim=1)
    return {"rows": [{"pooled": pooled, "best_row": int(pooled.argmax())}]}


def _pooled(v):
    return [mpmath.fsum(p * hp(e) for p, e in zip(_softmax_row(row), row, strict=True)) for row in v]


def _softmax_row(row):
    exps = [mpmath.exp(hp(e)) for e in row]
    total = mpmath.fsum(exps)
    return [e / total for e in exps]


def _pooled_rows(x):
    pooled = _pooled(values(x))
    return [{"pooled": ExactTensor.of("float32", pooled), "best_row": pooled.index(max(pooled))}]


def _pooled_clear_winner(inputs: Inputs) -> str | None:
    pooled = sorted(_pooled(values(inputs["x"])), reverse=True)
    if pooled[0] - pooled[1] < mpmath.mpf("1e-3") * (1 + abs(pooled[0])):
        return "the two largest pooled rows are within 1e-3: the best row would hinge on rounding"
    return None


def _pooled_first_best(inputs: Inputs) -> str | None:
    pooled = _pooled(values(inputs["x"]))
    return "the first row pools highest: best_row is 0" if pooled.index(max(pooled)) == 0 else None


# reductions L4: per column, the shortest prefix whose sum passes a threshold ----------------------
def prefix_to_threshold(x, threshold):
    import torch

    above = x.cumsum(dim=0) > threshold
    first = torch.where(above.any(dim=0), above.int().argmax(dim=0) + 1, torch.tensor(-1))
    return {"rows": [{"rows_needed": first}]}


def _prefix_to_threshold(x, threshold):
    v, t = values(x), Fraction(threshold)
    out = []
    for column in transpose(v):
        total, found = Fraction(0), -1
        for m, e in enumerate(column, start=1):
            total += e
            if total > t:
                found = m
                break
        out.append(found)
    return [{"rows_needed": ExactTensor.of("int64", out)}]


def _sample_prefix(draw: Draw, level: int) -> dict:
    x = _sample_matrix((3, 2), (3, 2), -3, 4, 2)(draw, level)["x"]
    return {"x": x, "threshold": float(draw.dyadic(1, 2 + level, 2))}


def _some_column_never(task) -> bool:
    return -1 in task.expected["rows"][0]["rows_needed"].data


# reductions L5: the smallest set of most probable classes covering a mass ------------------------
def nucleus(x, mass):
    import torch

    probs = torch.softmax(x, dim=1)
    ordered, _ = torch.sort(probs, dim=1, descending=True)
    cumulative = ordered.cumsum(dim=1)
    kept = (cumulative < mass).sum(dim=1) + 1
    top = ordered[:, 0] / cumulative.gather(1, (kept - 1).unsqueeze(1)).squeeze(1)
    return {"rows": [{"kept": kept, "top_share": top}]}


def _nucleus_rows(x, mass):
    rows = []
    for row in values(x):
        ordered = sorted(_softmax_row(row), reverse=True)
        total, kept = mpmath.mpf(0), 0
        while total < mass:
            total += ordered[kept]
            kept += 1
        rows.append((kept, ordered[0] / total, ordered))
    return rows


def _nucleus(x, mass):
    rows = _nucleus_rows(x, mpmath.mpf(mass))
    return [{"kept": ExactTensor.of("int64", [k for k, _, _ in rows]),
             "top_share": ExactTensor.of("float32", [s for _, s, _ in rows])}]


def _nucleus_margin(inputs: Inputs) -> str | None:
    mass = mpmath.mpf(inputs["mass"])
    for row in values(inputs["x"]):
        total = mpmath.mpf(0)
        for p in sorted(_softmax_row(row), reverse=True):
            total += p
            if abs(total - mass) < mpmath.mpf("1e-4"):
                return "a cumulative probability is within 1e-4 of the mass: the cut would hinge on rounding"
    return None


def _sample_nucleus(draw: Draw, level: int) -> dict:
    # logits within +-2.5 over 4..7 columns: the most probable class rarely holds the mass alone
    x = dyadic_tensor(draw, (draw.integer(3, 5), draw.integer(4, 7)), -2.5, 2.5, 2)
    return {"x": x, "mass": draw.choice((0.75, 0.8125, 0.875, 0.9375))}


def _nucleus_keeps_several(task) -> str | None:
    """Top-p must keep at least two classes in most rows (else "keep one" passes most rows), and
    the kept counts must not all be equal."""
    kept = task.expected["rows"][0]["kept"].data
    if sum(1 for k in kept if k >= 2) * 2 <= len(kept):
        return f"at most half of the rows keep two or more classes: {kept}"
    return _not_constant("kept")(task)


REDUCTIONS = leveled(REDUCTIONS, {
    2: _restated(
        "reductions", reductions, _reductions,
        lambda i: f"""For the {i["x"].shape[0]}x{i["x"].shape[1]} matrix `x` with elements x[i, j], give:
            `column_sums`[j] = x[0, j] + ... + x[{i["x"].shape[0] - 1}, j]; `row_means`[i], the arithmetic
            mean of row i; `row_logsumexp`[i], the natural logarithm of the sum over j of e^(x[i, j]); and
            `argmax`, the position p = i*{i["x"].shape[1]} + j of the largest element x[i, j] (a 0-d int64
            tensor).""",
        lambda i: ({"column_sums": f32(i["x"].shape[1]), "row_means": f32(i["x"].shape[0]),
                    "row_logsumexp": f32(i["x"].shape[0]), "argmax": i64()},),
        _sample_matrix((2, 2), (3, 3), -4, 4, 2), refuse=_argmax_unique, zero_reason=_argmax_is_zero),
    3: _restated(
        "reductions", pooled_rows, _pooled_rows,
        lambda i: """Treat each row of `x` as scores over its columns. Weight every element of a row by
            e^(its score) divided by the sum of e^(score) over that row, and give `pooled`, for each row
            the weighted sum of the row's own elements, and `best_row`, the index of the row whose pooled
            value is largest.""",
        lambda i: ({"pooled": f32(i["x"].shape[0]), "best_row": PY_INT},),
        _sample_matrix((2, 2), (3, 3), -4, 4, 2), refuse=_pooled_clear_winner,
        zero_reason=_pooled_first_best),
    4: _restated(
        "reductions", prefix_to_threshold, _prefix_to_threshold,
        lambda i: """For every column j of `x`, give the smallest m >= 1 such that the sum of the first m
            elements of the column (rows 0 to m-1) is strictly greater than `threshold`, or -1 if no prefix
            of the column, the whole column included, is; `rows_needed` is the int64 vector of these
            numbers, one per column.""",
        lambda i: ({"rows_needed": i64(i["x"].shape[1])},), _sample_prefix,
        reject=_not_constant("rows_needed")),
    5: _restated(
        "reductions", nucleus, _nucleus,
        lambda i: """Each row of `x` holds the logits of a distribution over its columns (probability of a
            column: e^(logit) over the sum of e^(logit) across the row). For each row, keep the fewest
            most probable columns whose probabilities add up to at least `mass` (take columns in order of
            decreasing probability until the running total reaches `mass` or more). Give `kept`, the number
            of columns kept per row, and `top_share`, the probability of the row's most probable column
            divided by the total probability of the kept columns.""",
        lambda i: ({"kept": i64(i["x"].shape[0]), "top_share": f32(i["x"].shape[0])},), _sample_nucleus,
        refuse=_nucleus_margin, reject=_nucleus_keeps_several),
}, levels="L1 the four reductions named; L2 each given by its formula, no call named; L3 softmax-weighted "
          "row pooling, then the best row; L4 per column the shortest prefix passing a threshold, or -1 "
          "(the None branch); L5 the smallest top-probability set covering a mass, described not named",
   branches=(Branch("a column never passes the threshold", _some_column_never, Fraction(1, 5), (4,)),))


# spread_statistics L3: between-row against within-row spread -------------------------------------
def variance_ratio(x):
    within = x.var(dim=1).mean()
    between = x.mean(dim=1).var() * x.shape[1]
    return {"rows": [{"within": within, "between": between, "ratio": between / within}]}


def _squared_deviations(xs):
    m = mean(xs)
    return sum(((e - m) ** 2 for e in xs), Fraction(0))


def _variance_ratio(x):
    v = values(x)
    within = mean([_squared_deviations(r) / (len(r) - 1) for r in v])
    between = _squared_deviations([mean(r) for r in v]) / (len(v) - 1) * len(v[0])
    return [{"within": ExactTensor.of("float32", within), "between": ExactTensor.of("float32", between),
             "ratio": ExactTensor.of("float32", between / within)}]


# spread_statistics L4: the fewest leading columns whose spread passes each bound ------------------
def columns_for_spread(x, bounds):
    import torch

    columns = []
    for bound in bounds.tolist():
        passing = [m for m in range(2, x.shape[1] + 1)
                   if bool((x[:, :m].var(dim=1, correction=0) > bound).all())]
        columns.append(passing[0] if passing else -1)
    return {"rows": [{"columns": torch.tensor(columns)}]}


def _columns_for_spread(x, bounds):
    v = values(x)
    columns = []
    for bound in values(bounds):
        passing = [m for m in range(2, len(v[0]) + 1)
                   if all(_squared_deviations(r[:m]) / m > bound for r in v)]
        columns.append(passing[0] if passing else -1)
    return [{"columns": ExactTensor.of("int64", columns)}]


SPREAD_BOUNDS = 4


def _sample_spread_bound(draw: Draw, level: int) -> dict:
    x = _sample_matrix((2, 1), (4, 4), -3, 6, 2)(draw, level)["x"]
    v = values(x)
    spreads = {m: [_squared_deviations(r[:m]) / m for r in v] for m in range(2, len(v[0]) + 1)}
    least = {m: min(s) for m, s in spreads.items()}  # a bound below it is passed by every row
    every = sorted(s for row in spreads.values() for s in row)

    def answer_of(bound: Fraction) -> int | None:
        at = bisect.bisect_left(every, bound)  # the nearest variances are every[at - 1] and every[at]
        if bound <= 0 or any(abs(bound - s) <= max(s, Fraction(1, 16)) / 2**14
                             for s in every[max(at - 1, 0):at + 1]):
            return None  # float32 variances could fall on either side of a bound this close
        return next((m for m in least if least[m] > bound), -1)

    intervals, best = {}, Fraction(0)
    for m, spread in least.items():  # the bounds whose answer is m lie in [best spread before m, spread)
        if spread > best:
            intervals[m], best = (best, spread), spread
    intervals[-1] = (best, best * 5 / 4)
    return {"x": x, "bounds": tensor("float32", _thresholds(draw, answer_of, intervals, SPREAD_BOUNDS, 5))}


# spread_statistics L5: exponentially weighted mean and variance, by their recurrence --------------
def ew_statistics(x, alpha):
    m = x[:, 0].clone()
    var = x.new_zeros(x.shape[0])
    for t in range(1, x.shape[1]):
        d = x[:, t] - m
        m = m + alpha * d
        var = (1 - alpha) * (var + alpha * d * d)
    return {"rows": [{"mean": m, "var": var}]}


def _ew_statistics(x, alpha):
    a = Fraction(alpha)
    means, variances = [], []
    for row in values(x):
        m, var = row[0], Fraction(0)
        for e in row[1:]:
            d = e - m
            m, var = m + a * d, (1 - a) * (var + a * d * d)
        means.append(m)
        variances.append(var)
    return [{"mean": ExactTensor.of("float32", means), "var": ExactTensor.of("float32", variances)}]


def _sample_ew(draw: Draw, level: int) -> dict:
    x = _sample_matrix((2, 1), (4, 4), -3, 6, 2)(draw, level)["x"]
    return {"x": x, "alpha": draw.choice((0.25, 0.375, 0.5, 0.125))}


def _ew_mean_away_from_zero(inputs: Inputs) -> str | None:
    rows = _ew_statistics(inputs["x"], inputs["alpha"])[0]["mean"].values
    if any(abs(m) < Fraction(1, 16) for m in rows):
        return "a weighted mean is within 1/16 of zero: its float32 error would use much of the tolerance"
    return None


SPREAD_STATISTICS = leveled(SPREAD_STATISTICS, {
    2: _restated(
        "spread_statistics", spread_statistics, _spread_statistics,
        lambda i: f"""For each row of `x` ({i["x"].shape[1]} elements), let S be the sum of the squared
            differences between the row's elements and the row's mean. Give `row_std`, the square root of
            S / ({i["x"].shape[1]} - 1), per row; `row_population_var`, S / {i["x"].shape[1]}, per row;
            and `overall_std`, the square root of S' / (n - 1) where S' is the same sum of squares taken
            over all n = {i["x"].shape[0] * i["x"].shape[1]} elements about their common mean.""",
        lambda i: ({"row_std": f32(i["x"].shape[0]), "row_population_var": f32(i["x"].shape[0]),
                    "overall_std": f32()},), _sample_matrix((2, 1), (4, 4), -3, 6, 2)),
    3: _restated(
        "spread_statistics", variance_ratio, _variance_ratio,
        lambda i: f"""The {i["x"].shape[0]} rows of `x` are groups of {i["x"].shape[1]} measurements each.
            Give `within`, the average over the groups of each group's sample variance (sum of squared
            deviations from the group mean, divided by one less than the group size); `between`, the
            sample variance of the group means (same divisor rule, across the {i["x"].shape[0]} means)
            multiplied by the group size; and `ratio` = between / within. All three are 0-d tensors.""",
        lambda i: ({"within": f32(), "between": f32(), "ratio": f32()},),
        _sample_matrix((2, 1), (4, 4), -3, 6, 2)),
    4: _restated(
        "spread_statistics", columns_for_spread, _columns_for_spread,
        lambda i: """For each element b of `bounds`, give in `columns` (an int64 vector, one entry per
            bound, in order) the smallest m >= 2 for which one and the same m works in every row of `x`:
            the population variance (mean squared deviation from the mean, dividing by m) of the row's
            first m elements is strictly greater than b in each row at that m; -1 if no m up to the full
            width qualifies.""",
        lambda i: ({"columns": i64(i["bounds"].shape[0])},), _sample_spread_bound,
        reject=_one_answer_for_all("columns")),
    5: _restated(
        "spread_statistics", ew_statistics, _ew_statistics,
        lambda i: """Track an exponentially weighted mean m and variance v along each row of `x`, element
            by element: start with m = the row's first element and v = 0; then for each following
            element e, with d = e - m (m before the update), set m to m + alpha*d and v to
            (1 - alpha)*(v + alpha*d^2), where `alpha` is given. Give the final `mean` and `var` of every
            row.""",
        lambda i: ({"mean": f32(i["x"].shape[0]), "var": f32(i["x"].shape[0])},), _sample_ew,
        refuse=_ew_mean_away_from_zero),
}, levels="L1 torch's std/var defaults named; L2 the statistics by their sums of squares; L3 the "
          "between/within spread ratio of row groups (intermediates not asked); L4 the fewest leading "
          "columns whose spread passes each of four bounds, or -1 (a fifth of the bounds); L5 an "
          "exponentially weighted mean/variance recurrence to run",
   branches=(Branch("no prefix passes some bound", _some_sentinel("columns"), Fraction(1, 4), (4,)),))


def _few_survive(task) -> bool:
    return 2 * task.expected["rows"][0]["nonzero"] <= math.prod(task.inputs["x"].shape)


# clamp_and_select L3: clip, leak, then per-row means and the number clipped -----------------------
def clip_leak_summary(x):
    import torch

    clipped = torch.clamp(x, min=-1.5, max=2.0)
    leaky = torch.where(clipped > 0, clipped, 0.1 * clipped)
    return {"rows": [{"row_means": leaky.mean(dim=1), "changed": int((clipped != x).sum())}]}


def _clip_leak_summary(x):
    v = values(x)
    low, high = Fraction(-3, 2), Fraction(2)
    clipped = [[min(max(e, low), high) for e in row] for row in v]
    leaky = [[e if e > 0 else Fraction(1, 10) * e for e in row] for row in clipped]
    changed = sum(1 for row, c in zip(v, clipped, strict=True) for e, f in zip(row, c, strict=True) if e != f)
    return [{"row_means": ExactTensor.of("float32", [mean(row) for row in leaky]), "changed": changed}]


# clamp_and_select L4: the tightest symmetric bound that clips at most k elements -----------------
def tightest_bound(x, k):
    import torch

    magnitudes = torch.sort(x.abs().reshape(-1), descending=True).values
    bound = magnitudes[k]
    return {"rows": [{"bound": float(bound), "clipped_sum": float(torch.clamp(x, -bound, bound).sum())}]}


def _tightest_bound(x, k):
    flat = [e for row in values(x) for e in row]
    bound = sorted((abs(e) for e in flat), reverse=True)[k]
    return [{"bound": bound, "clipped_sum": sum((min(max(e, -bound), bound) for e in flat), Fraction(0))}]


def _sample_tightest(draw: Draw, level: int) -> dict:
    x = _sample_matrix((2, 0), (4, 2), -4, 4.5, 2)(draw, level)["x"]
    return {"x": x, "k": draw.integer(1, max(1, len(x.data) // 2))}


CLAMP_AND_SELECT = leveled(CLAMP_AND_SELECT, {
    2: _restated(
        "clamp_and_select", clamp_and_select, _clamp_and_select,
        """From `x`, give `clipped`, x with every element below -1.5 raised to -1.5 and every element
            above 2.0 lowered to 2.0; `inverted_bounds`, the result of first raising every element of x
            below 2.0 to 2.0 and then lowering every element above 1.0 to 1.0; and `leaky`, the function
            f(e) = e for e > 0 and f(e) = 0.1*e otherwise (0.1 as a float32 constant), applied to every
            element.""",
        lambda i: ({"clipped": f32(*_dims(i["x"])), "inverted_bounds": f32(*_dims(i["x"])),
                    "leaky": f32(*_dims(i["x"]))},),
        _sample_matrix((2, 0), (4, 2), -4, 4.5, 2), refuse=_clamp_makes_its_point),
    3: _restated(
        "clamp_and_select", clip_leak_summary, _clip_leak_summary,
        """Limit every element of `x` to the interval [-1.5, 2.0] (values outside move to the nearer
            end), then map each result e to e if e > 0 and to 0.1*e otherwise (0.1 as a float32 constant).
            Give `row_means`, the mean of each row of the final tensor, and `changed`, how many elements of
            x the limiting step altered.""",
        lambda i: ({"row_means": f32(i["x"].shape[0]), "changed": PY_INT},),
        _sample_matrix((2, 0), (4, 2), -4, 4.5, 2), refuse=_clamp_makes_its_point),
    4: _restated(
        "clamp_and_select", tightest_bound, _tightest_bound,
        """Limiting `x` to [-b, b] for a number b >= 0 moves every element e with |e| > b to the nearer
            end. Give `bound`, the smallest b >= 0 for which at most `k` elements of x move, and
            `clipped_sum`, the sum of all elements of x after limiting it to [-bound, bound].""",
        lambda i: ({"bound": PY_FLOAT, "clipped_sum": PY_FLOAT},), _sample_tightest),
    5: SHRINK_TO_BUDGET,
}, levels="L1 clamp and where named, with torch's inverted-bounds rule; L2 the same maps described "
          "elementwise; L3 clip then leak, reduced to row means and a count; L4 the tightest symmetric "
          "bound that clips at most k elements; L5 the inverse of soft "
          "thresholding: the level that leaves a given total magnitude (which elements stay nonzero "
          "decides the formula; exact rational level; from a third of the elements to all but two stay "
          "nonzero)",
   branches=(Branch("at most half of x stays nonzero", _few_survive, Fraction(1, 4), (5,)),
             Branch("more than half of x stays nonzero", lambda task: not _few_survive(task), Fraction(1, 4),
                    (5,))))

# integer_division L3: Euclidean division (remainder never negative) -------------------------------
def euclidean_division(a, b):
    import torch

    r = torch.remainder(a, b.abs())
    return {"rows": [{"q": (a - r) // b, "r": r}]}


def _euclidean_division(a, b):
    pairs = list(zip(values(a), values(b), strict=True))
    rs = [p % abs(q) for p, q in pairs]
    return [{"q": ExactTensor.of("int64", [(p - r) // q for (p, q), r in zip(pairs, rs, strict=True)]),
             "r": ExactTensor.of("int64", rs)}]


def _euclid_differs(inputs: Inputs) -> str | None:
    pairs = list(zip(values(inputs["a"]), values(inputs["b"]), strict=True))
    if not any(q < 0 and p % q != 0 for p, q in pairs):
        return "no inexact quotient by a negative divisor: Euclidean and floor division would agree"
    return _signs_mixed(inputs)


# integer_division L4: per row, the smallest divisor on which the two roundings agree -------------
def agreeing_divisor(a, limit):
    import torch

    divisors = []
    for row in a:
        agree = [d for d in range(2, limit + 1) if torch.equal(torch.div(row, d, rounding_mode="floor"),
                                                               torch.div(row, d, rounding_mode="trunc"))]
        divisors.append(agree[0] if agree else -1)
    return {"rows": [{"divisor": torch.tensor(divisors)}]}


def _agreeing_divisor(a, limit):
    divisors = []
    for row in values(a):
        agree = [d for d in range(2, limit + 1) if all(p // d == int(Fraction(p, d)) for p in row)]
        divisors.append(agree[0] if agree else -1)
    return [{"divisor": ExactTensor.of("int64", divisors)}]


def _smallest_agreeing(row: list[int], limit: int) -> int:
    """The smallest d in 2..limit on which floor and truncation agree for every element of row
    (they differ exactly on a negative element that d does not divide), or -1: the sampler draws
    each row for an answer chosen first."""
    negatives = math.gcd(*(p for p in row if p < 0))
    return next((d for d in range(2, limit + 1) if negatives % d == 0), -1)


DIVISION_ROWS = 4
_ODD_PRIMES = (3, 5, 7, 11, 13)


def _sample_agreeing(draw: Draw, level: int) -> dict:
    n, bound, limit = 2 + 2 * level, 10 * level + 5, draw.integer(10, 14)
    answers = [p for p in _ODD_PRIMES if p <= limit]
    rows = []
    for _ in range(DIVISION_ROWS):
        none = _draws_none(draw)
        # a row without an answer: negatives with no common factor, or all multiples of a prime above limit
        base = draw.choice((1, draw.choice([p for p in (13, 17, 19) if p > limit]))) if none else \
            draw.choice(answers)
        want = -1 if none else base
        for _ in range(50):
            negatives = draw.integer(2, n - 2)
            row = [-base * draw.integer(1, bound // base) for _ in range(negatives)]
            row += [draw.integer(1, bound) for _ in range(n - negatives)]
            if any(p % 2 for p in row if p < 0) and _smallest_agreeing(row, limit) == want:
                break
        else:
            raise Reject("no row with the drawn answer was found")
        rows.append(draw.shuffled(row))
    return {"a": tensor("int64", rows), "limit": limit}


def _has_negative_inexact_at_two(inputs: Inputs) -> str | None:
    if not all(any(p < 0 and p % 2 for p in row) for row in values(inputs["a"])):
        return "a row's negative elements are all even: its divisor would be 2 without any search"
    return None


INTEGER_DIVISION = leveled(INTEGER_DIVISION, {
    2: _restated(
        "integer_division", integer_division, _integer_division,
        """For every pair (a, b) of the int64 tensors `a` and `b` (elementwise), give: `floor_quotient`,
            the largest integer q with q <= a/b; `trunc_quotient`, a/b with its fractional part dropped
            (rounded toward zero); `remainder`, a - b*floor_quotient; `fmod`, a - b*trunc_quotient; and
            `true_quotient`, the real quotient a/b as a float32 tensor.""",
        lambda i: ({"floor_quotient": i64(*_dims(i["a"])), "trunc_quotient": i64(*_dims(i["a"])),
                    "remainder": i64(*_dims(i["a"])), "fmod": i64(*_dims(i["a"])),
                    "true_quotient": f32(*_dims(i["a"]))},),
        _sample_division, refuse=_signs_mixed),
    3: _restated(
        "integer_division", euclidean_division, _euclidean_division,
        """For every pair (a, b) of the int64 tensors `a` and `b` (elementwise), give the integers `q`
            and `r` with a = b*q + r and 0 <= r < |b| (both int64 tensors).""",
        lambda i: ({"q": i64(*_dims(i["a"])), "r": i64(*_dims(i["a"]))},),
        _sample_division, refuse=_euclid_differs),
    4: _restated(
        "integer_division", agreeing_divisor, _agreeing_divisor,
        """Dividing an integer by a positive integer d and rounding the quotient down (toward negative
            infinity) can differ from rounding it toward zero. Each row of the int64 matrix `a` is a
            separate set of integers. Give `divisor`, an int64 vector with one entry per row of a: the
            smallest integer d with 2 <= d <= `limit` for which the two roundings of e/d agree for every
            element e of that row, or -1 if no such d exists.""",
        lambda i: ({"divisor": i64(i["a"].shape[0])},), _sample_agreeing, refuse=_has_negative_inexact_at_two,
        reject=_one_answer_for_all("divisor")),
    5: DIVISION_SUMS,
}, levels="L1 the torch rounding modes named; L2 each quotient and remainder by its definition; L3 "
          "Euclidean division (a third convention, derived from the other two); L4 per row of four, the "
          "smallest divisor on which floor and truncation agree, or -1 (a fifth of the rows); L5 floor "
          "and truncating quotients of an arithmetic progression summed over 10^11..10^12 terms (a "
          "Euclid-like floor sum, then the negative terms that divide exactly: a linear congruence)",
   branches=(Branch("no divisor up to the limit for some row", _some_sentinel("divisor"), Fraction(1, 4),
                    (4,)),
             Branch("some negative term divides exactly", division_exact_negatives, Fraction(1, 3), (5,))))

# mask_above_mean L2: above the mean of the element's own row --------------------------------------
def above_row_mean(x):
    mask = x > x.mean(dim=1, keepdim=True)
    return {"rows": [{"filled": x.masked_fill(~mask, -1.0), "selected": x[mask],
                      "positions": mask.nonzero()}]}


def _above_row_mean_positions(v):
    means = [mean(row) for row in v]
    return [(i, j) for i, row in enumerate(v) for j, e in enumerate(row) if e > means[i]]


def _above_row_mean(x):
    v = values(x)
    above = set(_above_row_mean_positions(v))
    ordered = sorted(above)
    return [{
        "filled": ExactTensor.of("float32", [[e if (i, j) in above else Fraction(-1)
                                              for j, e in enumerate(row)] for i, row in enumerate(v)]),
        "selected": ExactTensor.of("float32", [v[i][j] for i, j in ordered]),
        "positions": ExactTensor.of("int64", [[i, j] for i, j in ordered]),
    }]


def _no_element_at_its_row_mean(inputs: Inputs) -> str | None:
    for r, row in enumerate(values(inputs["x"])):
        if mean(row) in row:
            return f"an element of row {r} equals the row's mean: the strict mask would hinge on rounding"
    return None


def _count_above_row_mean(x):
    return len(_above_row_mean_positions(values(x)))


# mask_above_mean L3: above both its row's and its column's mean -----------------------------------
def above_both_means(x):
    mask = (x > x.mean(dim=1, keepdim=True)) & (x > x.mean(dim=0, keepdim=True))
    return {"rows": [{"counts": mask.sum(dim=1), "masked_mean": float(x[mask].mean())}]}


def _both(v):
    rows, cols = [mean(r) for r in v], [mean(c) for c in transpose(v)]
    return [[e > rows[i] and e > cols[j] for j, e in enumerate(row)] for i, row in enumerate(v)]


def _above_both_means(x):
    v = values(x)
    mask = _both(v)
    chosen = [e for row, m in zip(v, mask, strict=True) for e, keep in zip(row, m, strict=True) if keep]
    return [{"counts": ExactTensor.of("int64", [sum(m) for m in mask]), "masked_mean": mean(chosen)}]


def _no_element_at_a_mean(inputs: Inputs) -> str | None:
    v = values(inputs["x"])
    rows, cols = [mean(r) for r in v], [mean(c) for c in transpose(v)]
    if any(e in (rows[i], cols[j]) for i, row in enumerate(v) for j, e in enumerate(row)):
        return "an element equals its row's or its column's mean: the strict mask would hinge on rounding"
    return None


# mask_above_mean L4: the fewest largest elements whose mean falls to a goal -----------------------
def top_mean_count(x, goal):
    import torch

    ordered = x.reshape(-1).sort(descending=True).values
    means = ordered.cumsum(dim=0) / torch.arange(1, ordered.numel() + 1)
    hits = (means <= goal).nonzero()
    return {"rows": [{"count": int(hits[0]) + 1 if hits.numel() else -1}]}


def _top_mean_count(x, goal):
    ordered = sorted((e for row in values(x) for e in row), reverse=True)
    total = Fraction(0)
    for k, e in enumerate(ordered, start=1):
        total += e
        if total / k <= Fraction(goal):
            return [{"count": k}]
    return [{"count": -1}]


def _sample_top_mean(draw: Draw, level: int) -> dict:
    x = _sample_matrix((3, 2), (4, 3), -3, 5, 2)(draw, level)["x"]
    flat = sorted(e for row in values(x) for e in row)
    low, high = mean(flat) - 1, flat[-2]
    return {"x": x, "goal": float(draw.dyadic(low, max(low, high), 2))}


def _count_none(task) -> bool:
    return task.expected["rows"][0]["count"] == -1


# mask_above_mean L5: iterated clipping of outliers ------------------------------------------------
def iterated_clipping(x, width):
    kept = x.reshape(-1).double()
    rounds = 0
    while True:
        m = kept.mean()
        var = ((kept - m) ** 2).mean()
        keep = (kept - m) ** 2 <= width * width * var
        if bool(keep.all()):
            break
        kept, rounds = kept[keep], rounds + 1
    return {"rows": [{"rounds": rounds, "kept": int(kept.numel()), "kept_mean": float(kept.mean())}]}


def _clipping_rounds(x, width):
    kept, rounds, w2 = [e for row in values(x) for e in row], 0, Fraction(width) ** 2
    while True:
        m = mean(kept)
        var = mean([(e - m) ** 2 for e in kept])
        survivors = [e for e in kept if (e - m) ** 2 <= w2 * var]
        if len(survivors) == len(kept):
            return rounds, kept
        kept, rounds = survivors, rounds + 1


def _iterated_clipping(x, width):
    rounds, kept = _clipping_rounds(x, width)
    return [{"rounds": rounds, "kept": len(kept), "kept_mean": mean(kept)}]


def _sample_outliers(draw: Draw, level: int) -> dict:
    shape = (draw.integer(3, 2 + level), draw.integer(4, 3 + level))
    n = shape[0] * shape[1]
    flat = dyadic_list(draw, n, -2, 2, 2)
    for j in draw.sample(range(n), draw.integer(1, 2)):
        flat[j] = float(draw.dyadic(5, 9, 2) * draw.choice((-1, 1)))
    return {"x": tensor("float32", reshape(flat, shape)), "width": draw.choice((1.5, 2.0, 2.5))}


def _clipping_does_something(inputs: Inputs) -> str | None:
    kept, w2 = [e for row in values(inputs["x"]) for e in row], Fraction(inputs["width"]) ** 2
    while True:  # every comparison of every pass must be clear of its boundary
        m = mean(kept)
        bound = w2 * mean([(e - m) ** 2 for e in kept])
        if any(abs((e - m) ** 2 - bound) < Fraction(1, 1000) * (1 + bound) for e in kept):
            return "an element sits on the clipping boundary: the pass would hinge on rounding"
        survivors = [e for e in kept if (e - m) ** 2 <= bound]
        if len(survivors) == len(kept):
            break
        kept = survivors
    rounds, kept = _clipping_rounds(inputs["x"], inputs["width"])
    if rounds < 1:
        return "no element is ever dropped: the iteration would not run"
    if len(kept) < 3:
        return "fewer than three elements survive"
    return None


_MASK_FILL_TEXT = """Mark the elements of `x` that are strictly greater than the mean of their own row.
    Give `filled`, x with every unmarked element replaced by -1.0; `selected`, the marked elements in
    row-major order; and `positions`, their (row, column) indices, one row per marked element, in the same
    order."""

MASK_ABOVE_MEAN = leveled(MASK_ABOVE_MEAN, {
    2: _restated(
        "mask_above_mean", above_row_mean, _above_row_mean, _MASK_FILL_TEXT,
        lambda i: ({"filled": f32(*_dims(i["x"])), "selected": f32(_count_above_row_mean(i["x"])),
                    "positions": i64(_count_above_row_mean(i["x"]), 2)},),
        _sample_matrix((3, 2), (4, 3), -3, 5, 2), refuse=_no_element_at_its_row_mean),
    3: _restated(
        "mask_above_mean", above_both_means, _above_both_means,
        """Mark the elements of `x` that are strictly greater than the mean of their row and also
            strictly greater than the mean of their column. Give `counts`, the number of marked elements in
            each row, and `masked_mean`, the mean of all marked elements.""",
        lambda i: ({"counts": i64(i["x"].shape[0]), "masked_mean": PY_FLOAT},),
        _sample_matrix((3, 2), (4, 3), -3, 5, 2), refuse=_no_element_at_a_mean),
    4: _restated(
        "mask_above_mean", top_mean_count, _top_mean_count,
        """Give `count`, the smallest k >= 1 such that the mean of the k largest elements of `x` is at
            most `goal` (ties among equal elements do not matter for the mean), or -1 if no k up to the
            number of elements of x has this property.""",
        lambda i: ({"count": PY_INT},), _sample_top_mean),
    5: _restated(
        "mask_above_mean", iterated_clipping, _iterated_clipping,
        """Start with all elements of `x` kept. Repeat: compute the mean m and the population variance
            v (mean squared deviation from m, dividing by the number kept) of the kept elements, and drop
            every kept element e with (e - m)^2 > width^2 * v, where `width` is given; stop at the first
            pass that drops nothing (that pass is not counted). Give `rounds`, the number of passes that
            dropped something; `kept`, how many elements remain; and `kept_mean`, their mean.""",
        lambda i: ({"rounds": PY_INT, "kept": PY_INT, "kept_mean": PY_FLOAT},), _sample_outliers,
        refuse=_clipping_does_something),
}, levels="L1 the mask against the overall mean; L2 against each element's row mean (broadcast derived); "
          "L3 against its row's and its column's means, reduced; L4 the fewest largest elements whose mean "
          "falls to a goal, or -1; L5 iterated outlier clipping described, to run to convergence",
   branches=(Branch("no count reaches the goal", _count_none, Fraction(1, 10), (4,)),))


# stable_sort L3: average and dense ranks ---------------------------------------------------------
def tied_ranks(x):
    import torch

    order = torch.sort(x, descending=True, stable=True).indices
    position = torch.argsort(order).double() + 1
    same = x.unsqueeze(0) == x.unsqueeze(1)
    average = (same.double() * position.unsqueeze(0)).sum(dim=1) / same.sum(dim=1)
    dense = (torch.unique(x).unsqueeze(0) > x.unsqueeze(1)).sum(dim=1) + 1
    return {"rows": [{"average_rank": average.float(), "dense_rank": dense}]}


def _tied_ranks(x):
    v = values(x)
    distinct = sorted(set(v), reverse=True)
    average = []
    for e in v:
        above = sum(1 for f in v if f > e)
        ties = v.count(e)
        average.append(Fraction(2 * above + ties + 1, 2))
    return [{"average_rank": ExactTensor.of("float32", average),
             "dense_rank": ExactTensor.of("int64", [distinct.index(e) + 1 for e in v])}]


# stable_sort L4: fewest adjacent swaps to reach the stable descending order -----------------------
def adjacent_swaps(x):
    n = x.shape[0]
    return {"rows": [{"swaps": int(sum(int((x[i] < x[i + 1:]).sum()) for i in range(n)))}]}


def _adjacent_swaps(x):
    v = values(x)
    return [{"swaps": sum(1 for i in range(len(v)) for j in range(i + 1, len(v)) if v[i] < v[j])}]


_STABLE_ORDER = """the descending order of `x` in which equal elements keep their original relative order
    (the one with the smaller index first)"""

def _needs_swaps(inputs: Inputs) -> str | None:
    v = values(inputs["x"])
    if all(v[i] >= v[i + 1] for i in range(len(v) - 1)):
        return "x is already in descending order"
    return _has_tie(inputs)


_STABLE_ORDER = """the descending order of `x` in which equal elements keep their original relative order
    (the one with the smaller index first)"""

STABLE_SORT = leveled(STABLE_SORT, {
    2: _restated(
        "stable_sort", stable_sort, _stable_sort,
        """Arrange the elements of `x` from largest to smallest; where several elements are equal, the
            one with the smaller original index comes first. Give `values`, the arranged elements;
            `indices`, the original index of the element at each arranged position; and `ranks`, for each
            element of x (in its original order) the 0-based position it takes in the arrangement.""",
        lambda i: ({"values": f32(*_dims(i["x"])), "indices": i64(*_dims(i["x"])),
                    "ranks": i64(*_dims(i["x"]))},),
        _sample_sort, refuse=_has_tie),
    3: _restated(
        "stable_sort", tied_ranks, _tied_ranks,
        """Rank the elements of `x` from the largest (rank 1) downward. Give `average_rank`: for each
            element, the mean of the 1-based positions that the elements equal to it occupy when x is
            arranged from largest to smallest; and `dense_rank`: for each element, 1 plus the number of
            distinct values of x that are strictly larger than it.""",
        lambda i: ({"average_rank": f32(*_dims(i["x"])), "dense_rank": i64(*_dims(i["x"]))},),
        _sample_sort, refuse=_has_tie),
    4: _restated(
        "stable_sort", adjacent_swaps, _adjacent_swaps,
        f"""Give `swaps`, the smallest number of exchanges of two neighbouring elements that turns `x`
            into {_STABLE_ORDER}.""",
        lambda i: ({"swaps": PY_INT},), _sample_sort, refuse=_needs_swaps),
    5: PERIODIC_STABLE_ORDER,
}, levels="L1 a stable descending sort, named; L2 the order described by its tie rule; L3 average and "
          "dense ranks of tied values; L4 the fewest neighbour exchanges to the stable order (inversions, "
          "ties not counted); L5 the stable order of a periodic "
          "sequence of 10^11..10^12 terms, both ways: the place of given terms and the term at given "
          "places (counts with a partial last period, then their inverse)")

# top_and_kth L3: the spread between the top three and the second smallest, then the widest row ----
def top_gap(x):
    import torch

    gap = torch.topk(x, 3, dim=1).values.mean(dim=1) - torch.kthvalue(x, 2, dim=1).values
    return {"rows": [{"gap": gap, "widest_row": int(gap.argmax())}]}


def _gaps(v):
    return [mean(sorted(row, reverse=True)[:3]) - sorted(row)[1] for row in v]


def _top_gap(x):
    gaps = _gaps(values(x))
    return [{"gap": ExactTensor.of("float32", gaps), "widest_row": gaps.index(max(gaps))}]


def _gap_unique(inputs: Inputs) -> str | None:
    gaps = _gaps(values(inputs["x"]))
    if gaps.count(max(gaps)) > 1:
        return "two rows share the widest gap: the row index would be ambiguous"
    return _rows_without_ties(inputs)


def _widest_first(inputs: Inputs) -> str | None:
    gaps = _gaps(values(inputs["x"]))
    return "the first row has the widest gap: widest_row is 0" if gaps.index(max(gaps)) == 0 else None


# top_and_kth L4: the fewest largest values of every row that reach each total -------------------
def fewest_for_total(x, totals):
    import torch

    ordered = torch.sort(x, dim=1, descending=True).values.cumsum(dim=1)
    ks = []
    for total in totals.tolist():
        passing = [k for k in range(1, x.shape[1] + 1) if bool((ordered[:, k - 1] >= total).all())]
        ks.append(passing[0] if passing else -1)
    return {"rows": [{"k": torch.tensor(ks)}]}


def _fewest_for_total(x, totals):
    v = values(x)
    ks = []
    for total in values(totals):
        passing = [k for k in range(1, len(v[0]) + 1) if all(sum(sorted(row, reverse=True)[:k]) >= total
                                                              for row in v)]
        ks.append(passing[0] if passing else -1)
    return [{"k": ExactTensor.of("int64", ks)}]


TOTALS = 4


def _sample_fewest(draw: Draw, level: int) -> dict:
    x = _sample_matrix((2, 0), (5, 4), -4, 6, 2)(draw, level)["x"]
    v = values(x)
    # reach[k - 1]: the least, over the rows, sum of a row's k largest values (a multiple of 1/4)
    reach = [min(sum(sorted(row, reverse=True)[:k]) for row in v) for k in range(1, len(v[0]) + 1)]

    def answer_of(total: Fraction) -> int:
        return next((k for k, r in enumerate(reach, start=1) if r >= total), -1)

    intervals, best = {}, None
    for k, r in enumerate(reach, start=1):  # the totals whose answer is k lie in (best before k, r]
        if best is None or r > best:
            intervals[k], best = (r - 3 if best is None else best + Fraction(1, 4), r), r
    intervals[-1] = (best + Fraction(1, 4), best + 2)
    return {"x": x, "totals": tensor("float32", _thresholds(draw, answer_of, intervals, TOTALS, 2))}


# top_and_kth L5: route every row to its two largest columns --------------------------------------
def top_two_routing(x):
    import torch

    top = torch.topk(x, 2, dim=1)
    gates = torch.zeros_like(x).scatter(1, top.indices, torch.softmax(top.values, dim=1))
    return {"rows": [{"gates": gates, "load": (gates > 0).sum(dim=0)}]}


def _top_two_routing(x):
    gates, load = [], [0] * x.shape[1]
    for row in values(x):
        first, second = sorted(range(len(row)), key=lambda j: -row[j])[:2]
        weights = _softmax_row([row[first], row[second]])
        line = [mpmath.mpf(0)] * len(row)
        line[first], line[second] = weights
        load[first] += 1
        load[second] += 1
        gates.append(line)
    return [{"gates": ExactTensor.of("float32", gates), "load": ExactTensor.of("int64", load)}]


TOP_AND_KTH = leveled(TOP_AND_KTH, {
    2: _restated(
        "top_and_kth", top_and_kth, _top_and_kth,
        """For each row of `x` (one answer row per row of x, in order), give the three largest values
            in descending order (`top_values`) with their column indices (`top_indices`), and the
            second-smallest value of the row (`second_smallest`: the value that comes second when the row
            is arranged in increasing order) with its column index (`second_smallest_index`).""",
        lambda i: tuple({"top_values": f32(3), "top_indices": i64(3), "second_smallest": PY_FLOAT,
                         "second_smallest_index": PY_INT} for _ in range(i["x"].shape[0])),
        _sample_matrix((2, 0), (5, 4), -4, 6, 2), refuse=_rows_without_ties,
        zero_reason=_second_smallest_in_column_zero),
    3: _restated(
        "top_and_kth", top_gap, _top_gap,
        """For each row of `x`, let its gap be the mean of its three largest values minus the value that
            comes second when the row is arranged in increasing order. Give `gap`, one per row, and
            `widest_row`, the index of the row with the largest gap.""",
        lambda i: ({"gap": f32(i["x"].shape[0]), "widest_row": PY_INT},),
        _sample_matrix((2, 0), (5, 4), -4, 6, 2), refuse=_gap_unique, zero_reason=_widest_first),
    4: _restated(
        "top_and_kth", fewest_for_total, _fewest_for_total,
        """For each element t of `totals`, give in `k` (an int64 vector, one entry per total, in
            order) the smallest k >= 1 for which one and the same k works in every row of `x`: the sum of
            the row's k largest values is at least t in each row at that k. Give -1 if no k up to the row
            length works.""",
        lambda i: ({"k": i64(i["totals"].shape[0])},), _sample_fewest, reject=_one_answer_for_all("k")),
    5: _restated(
        "top_and_kth", top_two_routing, _top_two_routing,
        """Each row of `x` scores one input against the columns (experts). Route every row to its two
            highest-scoring columns: their weights are e^(score) of each of the two divided by the sum of
            e^(score) over those two; every other column of the row gets weight 0. Give `gates`, the
            weights (same shape as x), and `load`, for each column the number of rows routed to it (an
            int64 vector).""",
        lambda i: ({"gates": f32(*_dims(i["x"])), "load": i64(i["x"].shape[1])},),
        _sample_matrix((2, 2), (5, 4), -4, 6, 2), refuse=_rows_without_ties),
}, levels="L1 topk and kthvalue named; L2 the same order statistics described; L3 a gap between order "
          "statistics, then the widest row; L4 the fewest largest values of every row reaching each of "
          "four totals, or -1 (a fifth of the totals); L5 top-two routing with renormalised weights and "
          "per-column load, described not named",
   branches=(Branch("no k reaches some total", _some_sentinel("k"), Fraction(1, 4), (4,)),))


# stack_and_concatenate L3: rows of a and b interleaved, then a diagonal walk ----------------------
def interleaved_walk(a, b):
    import torch

    rows = torch.stack([a, b], dim=1).reshape(-1, a.shape[1])
    picks = rows[torch.arange(rows.shape[0]), torch.arange(rows.shape[0]) % a.shape[1]]
    return {"rows": [{"walk": picks, "total": int(picks.sum())}]}


def _interleaved_walk(a, b):
    rows = [r for pair in zip(values(a), values(b), strict=True) for r in pair]
    picks = [row[i % len(row)] for i, row in enumerate(rows)]
    return [{"walk": ExactTensor.of("int64", picks), "total": sum(picks)}]


# stack_and_concatenate L4: which join produced each target --------------------------------------
def which_join(a, b, targets):
    import torch

    candidates = [torch.cat([a, b], dim=0), torch.cat([a, b], dim=1), torch.stack([a, b], dim=0),
                  torch.stack([a, b], dim=1), torch.stack([a, b], dim=2)]
    joins = []
    for target in targets:
        found = [number for number, joined in enumerate(candidates, start=1)
                 if torch.equal(joined.reshape(-1), target.reshape(-1))]
        joins.append(found[0] if found else -1)
    return {"rows": [{"join": torch.tensor(joins)}]}


def _joins(va, vb):
    by_blocks = [e for row in va for e in row] + [e for row in vb for e in row]
    by_rows = [e for ra, rb in zip(va, vb, strict=True) for e in ra + rb]
    by_elements = [e for ra, rb in zip(va, vb, strict=True)
                   for pair in zip(ra, rb, strict=True) for e in pair]
    return [by_blocks, by_rows, by_blocks, by_rows, by_elements]


def _which_join(a, b, targets):
    joins = []
    for target in values(targets):
        flat = [e for row in target for e in row]
        found = [number for number, joined in enumerate(_joins(values(a), values(b)), start=1)
                 if joined == flat]
        joins.append(found[0] if found else -1)
    return [{"join": ExactTensor.of("int64", joins)}]


JOIN_TARGETS = 4


def _sample_which_join(draw: Draw, level: int) -> dict:
    r, c = draw.integer(2, 1 + level), draw.integer(2, 2 + level)
    bound = 20 * level + 40  # as _sample_two_int_matrices, but a and b distinct by construction
    both = draw.sample(range(-bound, bound + 1), 2 * r * c)
    inputs = {"a": tensor("int64", reshape(both[:r * c], (r, c))),
              "b": tensor("int64", reshape(both[r * c:], (r, c)))}
    shape = draw.choice(((2 * r, c), (r, 2 * c), (2, r * c)))
    targets = []
    for _ in range(JOIN_TARGETS):
        joined = list(draw.choice(_joins(values(inputs["a"]), values(inputs["b"]))))
        if _draws_none(draw):  # no join produces it
            i, j = draw.sample(range(len(joined)), 2)
            joined[i], joined[j] = joined[j], joined[i]
        targets.append(reshape(joined, shape))
    return {**inputs, "targets": tensor("int64", targets)}


def _distinct_joins(inputs: Inputs) -> str | None:
    flat = [e for row in values(inputs["a"]) + values(inputs["b"]) for e in row]
    if first_duplicate(flat) is not None:
        return "a and b repeat a value: a swapped target could still match a join"
    return None


# stack_and_concatenate L5: repeated perfect interleaving until the sequence returns ---------------
def riffle_period(a, b):
    import torch

    start = torch.cat([a.reshape(-1), b.reshape(-1)])
    half = start.numel() // 2
    current, period = start, 0
    while True:
        current = torch.stack([current[:half], current[half:]], dim=1).reshape(-1)
        period += 1
        if period == 1:
            once = current
        if torch.equal(current, start):
            return {"rows": [{"once": once, "period": period}]}


def _riffle_period(a, b):
    start = [e for row in values(a) for e in row] + [e for row in values(b) for e in row]
    half = len(start) // 2
    current, period, once = start, 0, None
    while True:
        current = [e for pair in zip(current[:half], current[half:], strict=True) for e in pair]
        period += 1
        once = once or current
        if current == start:
            return [{"once": ExactTensor.of("int64", once), "period": period}]


def _sample_riffle(draw: Draw, level: int) -> dict:
    shape = (draw.integer(2, 1 + level), draw.integer(2, 2 + level))
    n = shape[0] * shape[1]
    bound = 20 * level + 40
    a = [draw.integer(-bound, bound) for _ in range(n)]
    b = [draw.choice(a) if draw.chance(1, 3) else draw.integer(-bound, bound) for _ in range(n)]
    return {"a": tensor("int64", reshape(a, shape)), "b": tensor("int64", reshape(b, shape))}


STACK_AND_CONCATENATE = leveled(STACK_AND_CONCATENATE, {
    2: _restated(
        "stack_and_concatenate", stack_and_concatenate, _stack_and_concatenate,
        lambda i: f"""`a` and `b` are int64 matrices of shape {shape_text(i["a"].shape)} = (R, C). Give
            `stacked`, of shape (R, 2, C), with stacked[i, 0, j] = a[i, j] and stacked[i, 1, j] = b[i, j];
            `concatenated`, of shape (R, 2C), with a[i, j] at column j and b[i, j] at column C + j of row
            i; and `interleaved`, of shape (R, 2C), with a[i, j] at column 2j and b[i, j] at column 2j + 1
            of row i.""",
        lambda i: ({"stacked": i64(i["a"].shape[0], 2, i["a"].shape[1]),
                    "concatenated": i64(i["a"].shape[0], 2 * i["a"].shape[1]),
                    "interleaved": i64(i["a"].shape[0], 2 * i["a"].shape[1])},),
        _sample_two_int_matrices),
    3: _restated(
        "stack_and_concatenate", interleaved_walk, _interleaved_walk,
        lambda i: f"""Form the matrix M whose rows are a[0], b[0], a[1], b[1], ... (the rows of `a` and `b`
            alternating, {2 * i["a"].shape[0]} rows of {i["a"].shape[1]}). Give `walk`, the int64 vector
            whose element r is M[r, r mod {i["a"].shape[1]}] for every row r of M, and `total`, the sum of
            walk.""",
        lambda i: ({"walk": i64(2 * i["a"].shape[0]), "total": PY_INT},), _sample_two_int_matrices),
    4: _restated(
        "stack_and_concatenate", which_join, _which_join,
        lambda i: f"""`a` and `b` have shape {shape_text(i["a"].shape)} = (R, C). The candidate joins are:
            1, the rows of b below the rows of a (shape (2R, C)); 2, each row of b appended to the right of
            the same row of a (shape (R, 2C)); 3, a and b as the two entries of a new first axis (shape (2,
            R, C)); 4, a new axis placed second, so that entry [i, 0, j] is a[i, j] and [i, 1, j] is b[i, j]
            (shape (R, 2, C)); 5, a new last axis, so that entry [i, j, 0] is a[i, j] and [i, j, 1] is b[i, j]
            (shape (R, C, 2)). `targets` holds {word(i["targets"].shape[0])} targets, targets[0],
            targets[1], ... (each of shape {shape_text(i["targets"].shape[1:])}). Give `join`, an int64
            vector with one entry per target t: the number of the first candidate whose elements, read in
            row-major order (last index fastest), equal those of targets[t] read the same way, or -1 if no
            candidate's do.""",
        lambda i: ({"join": i64(i["targets"].shape[0])},), _sample_which_join, refuse=_distinct_joins,
        reject=_one_answer_for_all("join")),
    5: _restated(
        "stack_and_concatenate", riffle_period, _riffle_period,
        lambda i: f"""Let s be the sequence of the elements of `a` in row-major order followed by those of
            `b` in row-major order ({2 * len(i["a"].data)} elements). One shuffle splits the current
            sequence into its first and second halves and interleaves them: first element of the first
            half, first of the second half, second of the first half, second of the second half, and so
            on. Give `once`, the sequence after one shuffle of s (an int64 vector), and `period`, the
            smallest number of shuffles, starting from s, after which the sequence of values equals s
            again.""",
        lambda i: ({"once": i64(2 * len(i["a"].data)), "period": PY_INT},), _sample_riffle),
}, levels="L1 stack and cat named; L2 the joins given by their index maps; L3 rows interleaved and walked "
          "(intermediate not asked); L4 which of five joins produced each of four targets, by memory "
          "order, or -1 (a fifth of the targets); L5 a perfect shuffle and its period on the values, "
          "described not named",
   branches=(Branch("no join produces some target", _some_sentinel("join"), Fraction(1, 4), (4,)),))

# batched_products L3: squared Frobenius norms and the grand total --------------------------------
def product_summary(a, b):
    gram = a @ a.transpose(1, 2)
    return {"rows": [{"traces": gram.diagonal(dim1=1, dim2=2).sum(dim=1), "total": float((a @ b).sum())}]}


def _product_summary(a, b):
    va, vb = values(a), values(b)
    return [{"traces": ExactTensor.of("float32", [sum((e * e for row in m for e in row), Fraction(0))
                                                  for m in va]),
             "total": sum((e for m in va for row in matmul(m, vb) for e in row), Fraction(0))}]


# batched_products L4: the batch element whose product is largest ---------------------------------
def largest_product(a, b):
    norms = ((a @ b) ** 2).sum(dim=(1, 2))
    best = int(norms.argmax())
    return {"rows": [{"best": best, "squared_norm": float(norms[best])}]}


def _product_norms(va, vb):
    return [sum((e * e for row in matmul(m, vb) for e in row), Fraction(0)) for m in va]


def _largest_product(a, b):
    norms = _product_norms(values(a), values(b))
    best = norms.index(max(norms))
    return [{"best": best, "squared_norm": norms[best]}]


def _largest_unique(inputs: Inputs) -> str | None:
    norms = _product_norms(values(inputs["a"]), values(inputs["b"]))
    if norms.count(max(norms)) > 1:
        return "two batch elements tie for the largest product: the index would be ambiguous"
    return None


def _largest_first(inputs: Inputs) -> str | None:
    norms = _product_norms(values(inputs["a"]), values(inputs["b"]))
    return "the first batch element is the largest: best is 0" if norms.index(max(norms)) == 0 else None


# batched_products L5: three steps of max-normalised power iteration on each Gram matrix -----------
def gram_power_iteration(a):
    import torch

    gram = a @ a.transpose(1, 2)
    v = torch.ones(a.shape[0], a.shape[1], 1, dtype=a.dtype)
    for _ in range(3):
        w = gram @ v
        scale = w.abs().amax(dim=1, keepdim=True)
        v = w / scale
    return {"rows": [{"vector": v.squeeze(2), "scale": scale.reshape(-1)}]}


def _power_steps(va):
    vectors, scales = [], []
    for m in va:
        gram = matmul(m, transpose(m))
        v = [Fraction(1)] * len(gram)
        for _ in range(3):
            w = [sum((g * e for g, e in zip(row, v, strict=True)), Fraction(0)) for row in gram]
            scale = max(abs(e) for e in w)
            v = [e / scale for e in w]
        vectors.append(v)
        scales.append(scale)
    return vectors, scales


def _gram_power_iteration(a):
    vectors, scales = _power_steps(values(a))
    return [{"vector": ExactTensor.of("float32", vectors), "scale": ExactTensor.of("float32", scales)}]


def _power_well_scaled(inputs: Inputs) -> str | None:
    vectors, _ = _power_steps(values(inputs["a"]))
    if any(abs(e) < Fraction(1, 16) for v in vectors for e in v):
        return "an iterate element is within 1/16 of zero: its float32 error would use much of the tolerance"
    return None


def _sample_power(draw: Draw, level: int) -> dict:
    batch, m, k = draw.integer(2, 1 + max(level, 2)), draw.integer(2, 2 + level), draw.integer(2, 2 + level)
    return {"a": dyadic_tensor(draw, (batch, m, k), -3, 3, 2)}


BATCHED_PRODUCTS = leveled(BATCHED_PRODUCTS, {
    2: _restated(
        "batched_products", batched_products, _batched_products,
        lambda i: f"""`a` has shape {shape_text(i["a"].shape)} = (B, M, K) and `b` has shape
            {shape_text(i["b"].shape)} = (K, N). Give `product`, of shape (B, M, N), with product[t, i, j] =
            sum over l of a[t, i, l] * b[l, j]; and `gram`, of shape (B, M, M), with gram[t, i, j] = sum
            over l of a[t, i, l] * a[t, j, l].""",
        lambda i: ({"product": f32(i["a"].shape[0], i["a"].shape[1], i["b"].shape[1]),
                    "gram": f32(i["a"].shape[0], i["a"].shape[1], i["a"].shape[1])},), _sample_batched),
    3: _restated(
        "batched_products", product_summary, _product_summary,
        lambda i: f"""`a` is a batch of {i["a"].shape[0]} matrices A_t of shape
            {i["a"].shape[1]}x{i["a"].shape[2]} and `b` a {i["b"].shape[0]}x{i["b"].shape[1]} matrix.
            Give `traces`, for every t the trace of A_t times its own transpose, and `total`, the sum of
            all elements of all the matrix products A_t b.""",
        lambda i: ({"traces": f32(i["a"].shape[0]), "total": PY_FLOAT},), _sample_batched),
    4: _restated(
        "batched_products", largest_product, _largest_product,
        lambda i: f"""`a` is a batch of {i["a"].shape[0]} matrices A_t and `b` one matrix. Give `best`, the
            index t whose matrix product A_t b has the largest sum of squared elements, and
            `squared_norm`, that sum.""",
        lambda i: ({"best": PY_INT, "squared_norm": PY_FLOAT},), _sample_batched, refuse=_largest_unique,
        zero_reason=_largest_first),
    5: _restated(
        "batched_products", gram_power_iteration, _gram_power_iteration,
        lambda i: f"""For each of the {i["a"].shape[0]} matrices A_t of `a` (shape
            {i["a"].shape[1]}x{i["a"].shape[2]}), let G be A_t times its own transpose. Start from the vector
            v of {i["a"].shape[1]} ones and repeat three times: w = G v, s = the largest absolute value of an
            element of w, v = w / s. Give `vector`, the final v of every t (one row per t), and `scale`,
            the final s of every t.""",
        lambda i: ({"vector": f32(i["a"].shape[0], i["a"].shape[1]), "scale": f32(i["a"].shape[0])},),
        _sample_power, refuse=_power_well_scaled),
}, levels="L1 the batched product and Gram matrix named; L2 both by their index sums; L3 traces and a "
          "grand total of the products (intermediates not asked); L4 the batch element with the largest "
          "product; L5 three steps of max-normalised power iteration on every Gram matrix")


# normalise L3: the most similar other row by cosine ----------------------------------------------
def nearest_rows(x):
    import torch
    import torch.nn.functional as F

    unit = F.normalize(x, dim=1)
    similarity = unit @ unit.T - 3 * torch.eye(x.shape[0])
    best = similarity.max(dim=1)
    return {"rows": [{"nearest": best.indices, "similarity": best.values}]}


def _cosines(v):
    norms = [mpmath.sqrt(hp(sum((e * e for e in row), Fraction(0)))) for row in v]
    return [[mpmath.fsum(hp(p) * hp(q) for p, q in zip(v[i], v[j], strict=True)) / (norms[i] * norms[j])
             if i != j else mpmath.mpf(-3) for j in range(len(v))] for i in range(len(v))]


def _nearest_rows(x):
    cos = _cosines(values(x))
    best = [row.index(max(row)) for row in cos]
    return [{"nearest": ExactTensor.of("int64", best),
             "similarity": ExactTensor.of("float32", [row[j] for row, j in zip(cos, best, strict=True)])}]


def _nearest_clear(inputs: Inputs) -> str | None:
    for row in _cosines(values(inputs["x"])):
        top = sorted(row, reverse=True)
        if top[0] - top[1] < mpmath.mpf("1e-4"):
            return "two rows are almost equally similar to a third: the index would hinge on rounding"
    return _nonzero_lines(inputs)


def _nonzero_lines(inputs: Inputs) -> str | None:
    v = values(inputs["x"])
    if any(all(e == 0 for e in row) for row in v) or any(all(e == 0 for e in c) for c in transpose(v)):
        return "a zero row or column has no direction to normalise"
    return None


# normalise L4: the smallest integer p whose norm of every row stays under each bound -------------
def smallest_norm_order(x, bounds):
    import torch

    magnitudes = x.double().abs()
    orders = []
    for bound in bounds.tolist():
        passing = [p for p in range(1, 9) if bool((magnitudes.pow(p).sum(dim=1) <= bound ** p).all())]
        orders.append(passing[0] if passing else -1)
    return {"rows": [{"p": torch.tensor(orders)}]}


def _smallest_norm_order(x, bounds):
    v = values(x)
    orders = []
    for b in values(bounds):
        passing = [p for p in range(1, 9) if all(sum((abs(e) ** p for e in row), Fraction(0)) <= b ** p
                                                 for row in v)]
        orders.append(passing[0] if passing else -1)
    return [{"p": ExactTensor.of("int64", orders)}]


NORM_BOUNDS = 4


def _sample_norm_bound(draw: Draw, level: int) -> dict:
    x = _sample_normalise(draw, level)["x"]
    v = values(x)
    den, bits = math.lcm(*(e.denominator for row in v for e in row)), 6
    # in integers (this runs on a hundred candidate bounds): sum |e|^p <= (k / 2^bits)^p, times (2^bits den)^p
    sums = {p: [sum(abs(int(e * den)) ** p for e in row) << (bits * p) for row in v] for p in range(1, 9)}
    norm = {p: max(float(Fraction(s, (den << bits) ** p)) ** (1 / p) for s in row) for p, row in sums.items()}

    def answer_of(bound: Fraction) -> int | None:
        power = {p: int(bound * 2**bits * den) ** p for p in sums}
        if any(abs(s - power[p]) <= power[p] >> 30 for p, row in sums.items() for s in row):
            return None  # float64 powers could fall on either side of a bound this close
        return next((p for p, row in sums.items() if all(s <= power[p] for s in row)), -1)

    # the bounds whose answer is p lie in [p-norm, (p-1)-norm); p = 1 (no search) is never drawn
    intervals = {p: (Fraction(norm[p]), Fraction(norm[p - 1])) for p in range(2, 9)}
    intervals[-1] = (Fraction(norm[8]) * 3 / 4, Fraction(norm[8]))
    return {"x": x, "bounds": tensor("float32", _thresholds(draw, answer_of, intervals, NORM_BOUNDS, bits))}


NORMALISE = leveled(NORMALISE, {
    2: _restated(
        "normalise", normalise, _normalise,
        """Give `rows_unit_l2`, each row of `x` divided by the square root of the sum of the squares of
            its elements, and `columns_unit_l1`, each column of x divided by the sum of the absolute values
            of its elements.""",
        lambda i: ({"rows_unit_l2": f32(*_dims(i["x"])), "columns_unit_l1": f32(*_dims(i["x"]))},),
        _sample_normalise),
    3: _restated(
        "normalise", nearest_rows, _nearest_rows,
        """Compare the rows of `x` by the cosine of the angle between them (their dot product divided
            by the product of their Euclidean lengths). For each row, give in `nearest` the index of the
            other row (never itself) with the largest cosine, and in `similarity` that cosine.""",
        lambda i: ({"nearest": i64(i["x"].shape[0]), "similarity": f32(i["x"].shape[0])},),
        _sample_normalise, refuse=_nearest_clear),
    4: _restated(
        "normalise", smallest_norm_order, _smallest_norm_order,
        """For an integer p >= 1, the p-norm of a row is (sum of |element|^p over the row)^(1/p). For
            each element b of `bounds`, give in `p` (an int64 vector, one entry per bound, in order) the
            smallest integer p from 1 to 8 for which the p-norm of every row of `x` is at most b, or -1 if
            none of them is.""",
        lambda i: ({"p": i64(i["bounds"].shape[0])},), _sample_norm_bound, refuse=_nonzero_lines,
        reject=_one_answer_for_all("p")),
    5: PERIODIC_STANDARDISE,
}, levels="L1 F.normalize named; L2 the two normalisations described; L3 cosine similarity between rows, "
          "then the nearest other row; L4 the smallest integer p whose p-norm of every row stays under "
          "each of four bounds, or -1 (a fifth of the bounds); L5 standardising a periodic vector of "
          "10^10..10^12 elements: its mean and "
          "deviation in closed form (a partial last period), values at queries and a strict count above "
          "one deviation",
   branches=(Branch("no p up to 8 for some bound", _some_sentinel("p"), Fraction(1, 4), (4,)),))

# running_statistics L3: the deepest fall of the running total below its running peak --------------
def deepest_fall(x):
    import torch

    path = torch.cumsum(x, dim=1)
    fall = torch.cummax(path, dim=1).values - path
    deepest = fall.max(dim=1)
    return {"rows": [{"fall": deepest.values, "at": deepest.indices}]}


def _falls(v):
    out = []
    for row in v:
        total, peak, falls = Fraction(0), None, []
        for e in row:
            total += e
            peak = total if peak is None else max(peak, total)
            falls.append(peak - total)
        out.append(falls)
    return out


def _deepest_fall(x):
    falls = _falls(values(x))
    return [{"fall": ExactTensor.of("float32", [max(f) for f in falls]),
             "at": ExactTensor.of("int64", [f.index(max(f)) for f in falls])}]


def _fall_unique(inputs: Inputs) -> str | None:
    for r, f in enumerate(_falls(values(inputs["x"]))):
        if max(f) == 0:
            return f"row {r} never falls below its running peak"
        if f.count(max(f)) > 1:
            return f"row {r} reaches its deepest fall twice: the position would be ambiguous"
    return None


# running_statistics L4: the first position where the running mean passes a level -----------------
def first_mean_above(x, level):
    import torch

    running = torch.cumsum(x, dim=1) / torch.arange(1, x.shape[1] + 1)
    above = running > level
    return {"rows": [{"first": torch.where(above.any(dim=1), above.int().argmax(dim=1), torch.tensor(-1))}]}


def _first_mean_above(x, level):
    out = []
    for row in values(x):
        total, found = Fraction(0), -1
        for j, e in enumerate(row):
            total += e
            if total / (j + 1) > Fraction(level):
                found = j
                break
        out.append(found)
    return [{"first": ExactTensor.of("int64", out)}]


def _sample_mean_level(draw: Draw, level: int) -> dict:
    x = _sample_matrix((2, 1), (5, 1), -3, 3, 3)(draw, level)["x"]
    return {"x": x, "level": float(draw.dyadic(-1, 2, 3))}


def _first_none(task) -> bool:
    return -1 in task.expected["rows"][0]["first"].data


def _mean_level_clear(inputs: Inputs) -> str | None:
    level = Fraction(inputs["level"])
    for row in values(inputs["x"]):
        total = Fraction(0)
        for j, e in enumerate(row):
            total += e
            if abs(total / (j + 1) - level) < Fraction(1, 2**20):
                return "a running mean sits on the level: the float32 division would decide it"
    return None


RUNNING_STATISTICS = leveled(RUNNING_STATISTICS, {
    2: _restated(
        "running_statistics", running_statistics, _running_statistics,
        """Along each row of `x`, for every position j give: `cumsum`, the sum of the row's elements at
            positions 0 to j; `cumprod`, their product; `running_max`, their largest value; and
            `running_max_index`, the position (0 to j) at which that largest value occurs.""",
        lambda i: ({"cumsum": f32(*_dims(i["x"])), "cumprod": f32(*_dims(i["x"])),
                    "running_max": f32(*_dims(i["x"])), "running_max_index": i64(*_dims(i["x"]))},),
        _sample_matrix((2, 0), (5, 1), -3, 3, 3), refuse=_cummax_without_ties),
    3: _restated(
        "running_statistics", deepest_fall, _deepest_fall,
        """Read each row of `x` as daily changes of a balance that starts at 0: the balance after day j
            is the sum of the changes of days 0 to j. For each row, give `fall`, the largest amount by which
            the balance after some day is below the highest balance reached after any day up to and
            including it, and `at`, the day (0-based) on which that largest fall is reached.""",
        lambda i: ({"fall": f32(i["x"].shape[0]), "at": i64(i["x"].shape[0])},),
        _sample_matrix((2, 1), (5, 1), -3, 3, 3), refuse=_fall_unique),
    4: _restated(
        "running_statistics", first_mean_above, _first_mean_above,
        """For each row of `x`, give the first position j (0-based) at which the mean of the row's
            elements at positions 0 to j is strictly greater than `level`, or -1 if there is none; `first`
            is the int64 vector of these positions, one per row.""",
        lambda i: ({"first": i64(i["x"].shape[0])},), _sample_mean_level, refuse=_mean_level_clear,
        reject=_not_constant("first")),
    5: PERIODIC_BEST_RUN,
}, levels="L1 cumsum, cumprod and cummax named; L2 the running quantities described; L3 the deepest fall "
          "of a running total below its running peak; L4 the first position where the running mean "
          "passes a level, or -1; L5 the best run of a "
          "periodic sequence of 10^11..10^12 terms: the period sum's sign decides whether the run spans "
          "every period or one boundary, and the stated tie rule picks among repeats",
   branches=(Branch("a row never passes the level", _first_none, Fraction(1, 10), (4,)),
             Branch("runs tie: the stated rule picks the first", run_tied, Fraction(1, 4), (5,)),
             Branch("the period sum is positive: the run spans every period", run_period_positive,
                    Fraction(1, 5), (5,))))


# casts_and_wraparound L3: quantise to int8 with a scale, then the worst error ---------------------
def quantise_int8(x, scale):
    import torch

    q = torch.clamp(torch.round(x / scale), -128, 127)
    return {"rows": [{"q": q.to(torch.int64), "max_error": float((x - q * scale).abs().max())}]}


def _quantise_int8(x, scale):
    s = Fraction(scale)
    qs = [min(max(round(e / s), -128), 127) for e in values(x)]
    return [{"q": ExactTensor.of("int64", qs),
             "max_error": max(abs(e - q * s) for e, q in zip(values(x), qs, strict=True))}]


def _sample_quantise(draw: Draw, level: int) -> dict:
    x = _sample_casts(draw, level)["x"]
    return {"x": x, "scale": draw.choice((0.0625, 0.046875, 0.09375, 0.03125))}


def _quantise_clips_and_ties(inputs: Inputs) -> str | None:
    s = Fraction(inputs["scale"])
    ratios = [e / s for e in values(inputs["x"])]
    if not any(abs(r) > 128 for r in ratios):
        return "no element leaves the int8 range: the saturation would not be tested"
    return None


# casts_and_wraparound L4: the smallest added constant that wraps enough elements -----------------
def smallest_wrapping_add(u, wraps):
    import torch

    for k in range(1, 256):
        if int(((u + k) < u).sum()) >= wraps:
            return {"rows": [{"k": k, "wrapped": u + torch.tensor(k, dtype=torch.uint8)}]}
    return {"rows": [{"k": -1, "wrapped": u}]}


def _smallest_wrapping_add(u, wraps):
    vu = values(u)
    for k in range(1, 256):
        if sum(1 for e in vu if e + k > 255) >= wraps:
            return [{"k": k, "wrapped": ExactTensor.of("uint8", [(e + k) % 256 for e in vu])}]
    return [{"k": -1, "wrapped": ExactTensor.of("uint8", vu)}]


def _sample_wraps(draw: Draw, level: int) -> dict:
    u = values(_sample_casts(draw, level)["u"])
    return {"u": tensor("uint8", u), "wraps": draw.integer(2, max(2, len(u) - 1))}


def _wrap_needs_search(inputs: Inputs) -> str | None:
    if sum(1 for e in values(inputs["u"]) if e > 0) < inputs["wraps"]:
        return "fewer non-zero elements than wraps asked: no constant wraps enough"
    return None


CASTS_AND_WRAPAROUND = leveled(CASTS_AND_WRAPAROUND, {
    2: _restated(
        "casts_and_wraparound", casts_and_wraparound, _casts_and_wraparound,
        """Give `truncated`, each element of `x` with its fractional part dropped (toward zero), as
            int64; `rounded`, each element rounded to the nearest integer, halves going to the even
            neighbour, as float32; `floored`, the largest integer not above each element, as int64;
            `wrapped`, each element of the uint8 tensor `u` plus 10, reduced modulo 256, as uint8; and
            `total`, the exact sum of the elements of u as a 0-d int64 tensor.""",
        lambda i: ({"truncated": i64(*_dims(i["x"])), "rounded": f32(*_dims(i["x"])),
                    "floored": i64(*_dims(i["x"])), "wrapped": TensorSpec("uint8", _dims(i["u"])),
                    "total": i64()},), _sample_casts, refuse=_some_wrap),
    3: _restated(
        "casts_and_wraparound", quantise_int8, _quantise_int8,
        """Quantise `x` to signed 8-bit codes with step `scale`: the code of an element e is e / scale
            rounded to the nearest integer (halves to the even neighbour), then limited to the range -128
            to 127. Give `q`, the codes as an int64 tensor, and `max_error`, the largest |e - code*scale|
            over the elements.""",
        lambda i: ({"q": i64(*_dims(i["x"])), "max_error": PY_FLOAT},), _sample_quantise,
        refuse=_quantise_clips_and_ties),
    4: _restated(
        "casts_and_wraparound", smallest_wrapping_add, _smallest_wrapping_add,
        """Adding a constant k to the uint8 tensor `u` in uint8 arithmetic wraps an element around (its
            true sum exceeds 255 and the stored result is the sum minus 256). Give `k`, the smallest k from
            1 to 255 for which at least `wraps` elements wrap, and `wrapped`, u plus that k computed in
            uint8 (a uint8 tensor).""",
        lambda i: ({"k": PY_INT, "wrapped": TensorSpec("uint8", _dims(i["u"]))},), _sample_wraps,
        refuse=_wrap_needs_search),
    5: WRAPPING_RECURRENCE,
}, levels="L1 the casts named; L2 each rounding and the wrap described; L3 int8 quantisation with "
          "saturation and the worst error; L4 the smallest constant that wraps enough uint8 elements; L5 "
          "a 32-bit wrapping multiply-add recurrence run 10^11..10^12 steps (affine maps composed, "
          "read as signed)")

# gather_and_index L3: gather through a picked row, then a total ----------------------------------
def gather_chain(x, idx, rows):
    import torch

    g = idx.shape[1]
    chosen = x[rows, idx[rows, torch.arange(rows.shape[0]) % g]]
    return {"rows": [{"chained": chosen, "total": float(chosen.sum())}]}


def _gather_chain(x, idx, rows):
    v, vi, vr = values(x), values(idx), values(rows)
    g = len(vi[0])
    chosen = [v[r][vi[r][k % g]] for k, r in enumerate(vr)]
    return [{"chained": ExactTensor.of("float32", chosen), "total": sum(chosen, Fraction(0))}]


def _sample_gather_chain(draw: Draw, level: int) -> dict:
    inputs = _sample_gather(draw, level)
    return {"x": inputs["x"], "idx": inputs["idx"], "rows": inputs["rows"]}


# gather_and_index L4: where in x each wanted value sits ------------------------------------------
def locate_values(x, wanted):
    import torch

    hits = x.unsqueeze(0) == wanted.reshape(-1, 1, 1)
    found = hits.flatten(1).any(dim=1)
    flat = hits.flatten(1).int().argmax(dim=1)
    where = torch.stack([flat // x.shape[1], flat % x.shape[1]], dim=1)
    return {"rows": [{"where": torch.where(found.unsqueeze(1), where, torch.tensor(-1))}]}


def _locate_values(x, wanted):
    v = values(x)
    out = []
    for w in values(wanted):
        spots = [[i, j] for i, row in enumerate(v) for j, e in enumerate(row) if e == w]
        out.append(spots[0] if spots else [-1, -1])
    return [{"where": ExactTensor.of("int64", out)}]


def _sample_locate(draw: Draw, level: int) -> dict:
    x = _sample_gather(draw, level)["x"]
    flat = [e for row in values(x) for e in row]
    step = abs(flat[1] - flat[0])
    wanted = []
    for _ in range(draw.integer(3, 2 + level)):
        e = draw.choice(flat)
        wanted.append(float(e + step / 2) if draw.chance(1, 5) else float(e))
    return {"x": x, "wanted": tensor("float32", wanted)}


def _located_some_missing(task) -> bool:
    return -1 in task.expected["rows"][0]["where"].data


# gather_and_index L5: the mean of the table rows listed in each bag ------------------------------
def bag_means(x, ids, starts):
    import torch

    ends = torch.cat([starts[1:], torch.tensor([ids.shape[0]])])
    means = [x[ids[s:e]].mean(dim=0) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    return {"rows": [{"means": torch.stack(means)}]}


def _bag_means(x, ids, starts):
    v, vi, vs = values(x), values(ids), values(starts)
    ends = vs[1:] + [len(vi)]
    return [{"means": ExactTensor.of("float32", [[mean([v[k][j] for k in vi[s:e]]) for j in range(len(v[0]))]
                                                 for s, e in zip(vs, ends, strict=True)])}]


def _sample_bags(draw: Draw, level: int) -> dict:
    r, c = draw.integer(3, 2 + level), draw.integer(3, 2 + level)
    bags = draw.integer(2, 1 + level)
    sizes = [draw.integer(1, 4) for _ in range(bags)]
    ids = [draw.integer(0, r - 1) for _ in range(sum(sizes))]
    starts = [sum(sizes[:b]) for b in range(bags)]
    return {"x": dyadic_tensor(draw, (r, c), -3, 3, 2), "ids": tensor("int64", ids),
            "starts": tensor("int64", starts)}


GATHER_AND_INDEX = leveled(GATHER_AND_INDEX, {
    2: _restated(
        "gather_and_index", gather_and_index, _gather_and_index,
        lambda i: f"""From the {i["x"].shape[0]}x{i["x"].shape[1]} matrix `x`: `gathered`, of the shape of
            `idx`, with gathered[i, k] = x[i, idx[i, k]]; `picked`, the vector whose element k is the element
            of x in row rows[k] and column cols[k], for k = 0..{i["rows"].shape[0] - 1}, where a negative
            column c means column {i["x"].shape[1]} + c; and `selected_rows`, the matrix whose row k is row
            rows[k] of x.""",
        lambda i: ({"gathered": f32(*_dims(i["idx"])), "picked": f32(*_dims(i["rows"])),
                    "selected_rows": f32(i["rows"].shape[0], i["x"].shape[1])},),
        _sample_gather, refuse=_uses_negative_column),
    3: _restated(
        "gather_and_index", gather_chain, _gather_chain,
        lambda i: f"""`idx` lists, for every row of `x`, {i["idx"].shape[1]} column numbers. For each k =
            0..{i["rows"].shape[0] - 1}, let r = rows[k] and let c be entry number (k mod
            {i["idx"].shape[1]}) of the list of row r in idx; give in `chained` the element of x at row r,
            column c, and in `total` the sum of chained.""",
        lambda i: ({"chained": f32(*_dims(i["rows"])), "total": PY_FLOAT},), _sample_gather_chain),
    4: _restated(
        "gather_and_index", locate_values, _locate_values,
        """For each element of `wanted`, give the (row, column) of the first element of `x` in
            row-major order that equals it exactly, or (-1, -1) if no element of x does; `where` holds one
            such pair per element of wanted.""",
        lambda i: ({"where": i64(i["wanted"].shape[0], 2)},), _sample_locate),
    5: _restated(
        "gather_and_index", bag_means, _bag_means,
        lambda i: f"""`x` is a table of {i["x"].shape[0]} rows. The list `ids` of row numbers is cut into
            {i["starts"].shape[0]} consecutive bags: bag b starts at position starts[b] of ids and ends just
            before starts[b + 1] (the last bag ends at the end of ids). Give `means`, one row per bag: the
            elementwise mean of the rows of x whose numbers the bag lists (a row listed twice counts
            twice).""",
        lambda i: ({"means": f32(i["starts"].shape[0], i["x"].shape[1])},), _sample_bags),
}, levels="L1 gather, advanced indexing and index_select named; L2 each by its index formula; L3 a "
          "gather through a picked row, reduced (intermediate not asked); L4 the inverse: where each "
          "wanted value sits, or (-1, -1); L5 mean pooling of table rows over bags given by offsets, "
          "described not named",
   branches=(Branch("a wanted value is absent", _located_some_missing, Fraction(1, 5), (4,)),))


# broadcast_arithmetic L3: for each point of a, the nearest point of c ----------------------------
def nearest_points(a, c):
    distance = (a - c) ** 2
    best = distance.min(dim=1)
    return {"rows": [{"nearest": best.indices, "total": float(best.values.sum())}]}


def _nearest_points(a, c):
    column, vc = [row[0] for row in values(a)], values(c)
    best = [min(range(len(vc)), key=lambda j: ((p - vc[j]) ** 2, j)) for p in column]
    return [{"nearest": ExactTensor.of("int64", best),
             "total": sum(((p - vc[j]) ** 2 for p, j in zip(column, best, strict=True)), Fraction(0))}]


def _nearest_unique(inputs: Inputs) -> str | None:
    vc = values(inputs["c"])
    for row in values(inputs["a"]):
        d = sorted((row[0] - e) ** 2 for e in vc)
        if d[0] == d[1]:
            return f"{float(row[0])} is equally near two points of c: the index would be ambiguous"
    return None


def _sample_points(draw: Draw, level: int) -> dict:
    inputs = _sample_broadcast(draw, level)
    return {"a": inputs["a"], "c": inputs["c"]}


# broadcast_arithmetic L4: the column of a*b + c with the largest minimum ------------------------
def best_worst_column(a, b, c):
    worst = (a * b + c).min(dim=0).values
    best = int(worst.argmax())
    return {"rows": [{"column": best, "worst": float(worst[best])}]}


def _column_minima(a, b, c):
    column, line, vc = [row[0] for row in values(a)], values(b)[0], values(c)
    return [min(p * q + r for p in column) for q, r in zip(line, vc, strict=True)]


def _best_worst_column(a, b, c):
    minima = _column_minima(a, b, c)
    best = minima.index(max(minima))
    return [{"column": best, "worst": minima[best]}]


def _best_worst_unique(inputs: Inputs) -> str | None:
    minima = _column_minima(inputs["a"], inputs["b"], inputs["c"])
    return "two columns share the largest minimum" if minima.count(max(minima)) > 1 else None


def _best_worst_first(inputs: Inputs) -> str | None:
    minima = _column_minima(inputs["a"], inputs["b"], inputs["c"])
    return "the first column is best: column is 0" if minima.index(max(minima)) == 0 else None


BROADCAST_ARITHMETIC = leveled(BROADCAST_ARITHMETIC, {
    2: _restated(
        "broadcast_arithmetic", broadcast_arithmetic, _broadcast_arithmetic,
        lambda i: f"""`a` has shape {shape_text(i["a"].shape)}, `b` has shape {shape_text(i["b"].shape)}
            and `c` has {i["c"].shape[0]} elements. Give `affine`, the {i["a"].shape[0]}x{i["b"].shape[1]}
            matrix with element [i, j] = a[i, 0]*b[0, j] + c[j]; `difference`, the matrix of the same shape
            with element [i, j] = a[i, 0] - c[j]; and `column_totals`, with element j = the sum over i of
            a[i, 0]*b[0, j].""",
        lambda i: ({"affine": f32(i["a"].shape[0], i["b"].shape[1]),
                    "difference": f32(i["a"].shape[0], i["b"].shape[1]),
                    "column_totals": f32(i["b"].shape[1])},), _sample_broadcast),
    3: _restated(
        "broadcast_arithmetic", nearest_points, _nearest_points,
        lambda i: f"""The {i["a"].shape[0]} values of `a` (shape {shape_text(i["a"].shape)}) and the
            {i["c"].shape[0]} values of `c` are points on a line. Give `nearest`, for each point of a the
            index of the nearest point of c, and `total`, the sum over the points of a of the squared
            distance to that nearest point.""",
        lambda i: ({"nearest": i64(i["a"].shape[0]), "total": PY_FLOAT},), _sample_points,
        refuse=_nearest_unique),
    4: _restated(
        "broadcast_arithmetic", best_worst_column, _best_worst_column,
        lambda i: f"""Let M be the {i["a"].shape[0]}x{i["b"].shape[1]} matrix with M[i, j] = a[i, 0]*b[0, j]
            + c[j] (`a`, `b` and `c` as given). Give `column`, the index j of the column of M whose smallest
            element is largest, and `worst`, that smallest element.""",
        lambda i: ({"column": PY_INT, "worst": PY_FLOAT},), _sample_broadcast, refuse=_best_worst_unique,
        zero_reason=_best_worst_first),
    5: BROADCAST_PRODUCT,
}, levels="L1 broadcasting expressions given; L2 the same results by their index formulas; L3 nearest "
          "points between two broadcast sets, reduced; L4 the column of a broadcast matrix with the best "
          "worst case; L5 a broadcast product too large to build: its "
          "shape by the alignment rule, an element, and the count and sum of its positive elements by "
          "factorising over the sign regions of the two factors")


# group_by_key L3: each element's deviation from its group mean, and the best group ---------------
def group_deviation(keys, vals):
    import torch

    unique, inverse, counts = torch.unique(keys, return_inverse=True, return_counts=True)
    means = torch.zeros(unique.shape[0], dtype=vals.dtype).index_add_(0, inverse, vals) / counts
    return {"rows": [{"deviation": vals - means[inverse], "best_key": int(unique[means.argmax()])}]}


def _group_means(vk, vv):
    groups: dict = {}
    for k, v in zip(vk, vv, strict=True):
        groups.setdefault(k, []).append(v)
    return {k: mean(m) for k, m in groups.items()}


def _group_deviation(keys, vals):
    vk, vv = values(keys), values(vals)
    means = _group_means(vk, vv)
    best = max(sorted(means), key=lambda k: means[k])
    return [{"deviation": ExactTensor.of("float32", [v - means[k] for k, v in zip(vk, vv, strict=True)]),
             "best_key": best}]


def _best_group_unique(inputs: Inputs) -> str | None:
    means = _group_means(values(inputs["keys"]), values(inputs["vals"]))
    top = max(means.values())
    if list(means.values()).count(top) > 1:
        return "two groups share the largest mean: the key would be ambiguous"
    return _a_group_repeats(inputs)


# group_by_key L4: the shortest prefix that holds every key twice ---------------------------------
def prefix_with_pairs(keys):
    import torch

    everyone = torch.unique(keys)
    for m in range(1, keys.shape[0] + 1):
        if bool(((keys[:m].unsqueeze(0) == everyone.unsqueeze(1)).sum(dim=1) >= 2).all()):
            return {"rows": [{"length": m}]}
    return {"rows": [{"length": -1}]}


def _prefix_with_pairs(keys):
    vk = values(keys)
    for m in range(1, len(vk) + 1):
        if all(vk[:m].count(k) >= 2 for k in set(vk)):
            return [{"length": m}]
    return [{"length": -1}]


def _sample_pairs(draw: Draw, level: int) -> dict:
    n = 8 + 3 * (level - 1)
    pool = draw.sample(range(0, 10 + 10 * level), 2 + level // 2)
    keys = [draw.choice(pool) for _ in range(n)]
    return {"keys": tensor("int64", keys)}


def _length_none(task) -> bool:
    return task.expected["rows"][0]["length"] == -1


# group_by_key L5: a running mean within each group, and each element's place in its group ---------
def grouped_running_mean(keys, vals):
    import torch

    same = (keys.unsqueeze(0) == keys.unsqueeze(1)) & torch.ones(keys.shape[0], keys.shape[0]).tril().bool()
    counts = same.sum(dim=1)
    return {"rows": [{"running_mean": (same.to(vals.dtype) @ vals) / counts, "place": counts - 1}]}


def _grouped_running_mean(keys, vals):
    vk, vv = values(keys), values(vals)
    seen: dict = {}
    means, places = [], []
    for k, v in zip(vk, vv, strict=True):
        seen.setdefault(k, []).append(v)
        means.append(mean(seen[k]))
        places.append(len(seen[k]) - 1)
    return [{"running_mean": ExactTensor.of("float32", means), "place": ExactTensor.of("int64", places)}]


GROUP_BY_KEY = leveled(GROUP_BY_KEY, {
    2: _restated(
        "group_by_key", group_by_key, _group_by_key,
        """The elements of `vals` are labelled by the integers in `keys` (same length). Give
            `unique_keys`, every label that occurs, once each, in increasing order; `inverse`, for each
            element the 0-based position of its label in unique_keys; `counts`, for each label in
            unique_keys the number of elements carrying it; and `group_means`, for each label in
            unique_keys the average of the vals carrying it.""",
        lambda i: ({"unique_keys": i64(len(set(values(i["keys"])))), "inverse": i64(*_dims(i["keys"])),
                    "counts": i64(len(set(values(i["keys"])))),
                    "group_means": f32(len(set(values(i["keys"]))))},),
        _sample_groups, refuse=_a_group_repeats),
    3: _restated(
        "group_by_key", group_deviation, _group_deviation,
        """The elements of `vals` are labelled by the integers in `keys`. Give `deviation`, each element
            of vals minus the average of the vals carrying the same label, and `best_key`, the label whose
            elements have the largest average.""",
        lambda i: ({"deviation": f32(*_dims(i["vals"])), "best_key": PY_INT},), _sample_groups,
        refuse=_best_group_unique),
    4: _restated(
        "group_by_key", prefix_with_pairs, _prefix_with_pairs,
        """Give `length`, the smallest m >= 1 such that every label that occurs anywhere in `keys`
            occurs at least twice among the first m elements of keys, or -1 if even the whole of keys does
            not hold some label twice.""",
        lambda i: ({"length": PY_INT},), _sample_pairs),
    5: _restated(
        "group_by_key", grouped_running_mean, _grouped_running_mean,
        """Walk through `keys` and `vals` together, in order. For each element, give in `running_mean`
            the average of the vals of all elements so far (this one included) that carry the same key,
            and in `place` how many earlier elements carry that key (an int64 vector).""",
        lambda i: ({"running_mean": f32(*_dims(i["vals"])), "place": i64(*_dims(i["keys"]))},),
        _sample_groups, refuse=_a_group_repeats),
}, levels="L1 grouping described by its outputs; L2 the same with every output defined; L3 deviations "
          "from group means and the best group; L4 the shortest prefix holding every key twice, or -1; "
          "L5 a running mean within each group and each element's place in it")


# ------------------------------------------------------------------------------------ the table
FAMILIES = (PERMUTE_AND_RESHAPE, REDUCTIONS, SPREAD_STATISTICS, CLAMP_AND_SELECT, INTEGER_DIVISION,
            MASK_ABOVE_MEAN, STABLE_SORT, TOP_AND_KTH, STACK_AND_CONCATENATE, BATCHED_PRODUCTS, NORMALISE,
            RUNNING_STATISTICS, CASTS_AND_WRAPAROUND, GATHER_AND_INDEX, BROADCAST_ARITHMETIC, GROUP_BY_KEY)
