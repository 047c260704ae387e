"""The top_and_kth family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    PY_INT,
    Inputs,
    f32,
    i64,
    pytorch_level,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, mean, values
from exactgrade.domains.pytorch.sampling import first_duplicate
from exactgrade.domains.pytorch.shared import dims
from exactgrade.domains.pytorch.tensor_ops.shared import (
    one_answer_for_all,
    sample_matrix,
    softmax_row,
    some_sentinel,
    thresholds,
)
from exactgrade.family import Branch, Draw, five_levels


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


def _second_smallest_in_column_zero(inputs: Inputs) -> str | None:
    for row in values(inputs["x"]):
        if sorted(range(len(row)), key=lambda j: row[j])[1] == 0:
            return "a row's second-smallest value is in column 0: its index is 0"
    return None


def _rows_without_ties(inputs: Inputs) -> str | None:
    for r, row in enumerate(values(inputs["x"])):
        tie = first_duplicate(row)
        if tie is not None:
            return f"row {r} holds {float(tie)} twice: topk/kthvalue indices would be ambiguous"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=top_and_kth,
    independent=_top_and_kth,
    question="""For each row of `x` (one answer row per row of x, in order), give the three largest
        values in descending order (`top_values`) with their column indices (`top_indices`), and the
        second-smallest value of the row (`second_smallest`, as torch.kthvalue with k=2 defines it) with
        its column index (`second_smallest_index`).""",
    answer=lambda i: tuple({"top_values": f32(3), "top_indices": i64(3), "second_smallest": PY_FLOAT,
                            "second_smallest_index": PY_INT} for _ in range(i["x"].shape[0])),
    sample=sample_matrix((2, 0), (5, 4), -4, 6, 2),
    refuse=_rows_without_ties,
    zero_reason=_second_smallest_in_column_zero,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    top_and_kth,
    _top_and_kth,
    """For each row of `x` (one answer row per row of x, in order), give the three largest values
        in descending order (`top_values`) with their column indices (`top_indices`), and the
        second-smallest value of the row (`second_smallest`: the value that comes second when the row
        is arranged in increasing order) with its column index (`second_smallest_index`).""",
    lambda i: tuple({"top_values": f32(3), "top_indices": i64(3), "second_smallest": PY_FLOAT,
                     "second_smallest_index": PY_INT} for _ in range(i["x"].shape[0])),
    sample_matrix((2, 0), (5, 4), -4, 6, 2),
    refuse=_rows_without_ties,
    zero_reason=_second_smallest_in_column_zero,
)

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


LEVEL_3 = pytorch_level(
    "tensor_ops",
    top_gap,
    _top_gap,
    """For each row of `x`, let its gap be the mean of its three largest values minus the value that
        comes second when the row is arranged in increasing order. Give `gap`, one per row, and
        `widest_row`, the index of the row with the largest gap.""",
    lambda i: ({"gap": f32(i["x"].shape[0]), "widest_row": PY_INT},),
    sample_matrix((2, 0), (5, 4), -4, 6, 2),
    refuse=_gap_unique,
    zero_reason=_widest_first,
)


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
    x = sample_matrix((2, 0), (5, 4), -4, 6, 2)(draw, level)["x"]
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
    return {"x": x, "totals": tensor("float32", thresholds(draw, answer_of, intervals, TOTALS, 2))}


LEVEL_4 = pytorch_level(
    "tensor_ops",
    fewest_for_total,
    _fewest_for_total,
    """For each element t of `totals`, give in `k` (an int64 vector, one entry per total, in
        order) the smallest k >= 1 for which one and the same k works in every row of `x`: the sum of
        the row's k largest values is at least t in each row at that k. Give -1 if no k up to the row
        length works.""",
    lambda i: ({"k": i64(i["totals"].shape[0])},),
    _sample_fewest,
    reject=one_answer_for_all("k"),
)


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
        weights = softmax_row([row[first], row[second]])
        line = [mpmath.mpf(0)] * len(row)
        line[first], line[second] = weights
        load[first] += 1
        load[second] += 1
        gates.append(line)
    return [{"gates": ExactTensor.of("float32", gates), "load": ExactTensor.of("int64", load)}]


LEVEL_5 = pytorch_level(
    "tensor_ops",
    top_two_routing,
    _top_two_routing,
    """Each row of `x` scores one input against the columns (experts). Route every row to its two
        highest-scoring columns: their weights are e^(score) of each of the two divided by the sum of
        e^(score) over those two; every other column of the row gets weight 0. Give `gates`, the
        weights (same shape as x), and `load`, for each column the number of rows routed to it (an
        int64 vector).""",
    lambda i: ({"gates": f32(*dims(i["x"])), "load": i64(i["x"].shape[1])},),
    sample_matrix((2, 2), (5, 4), -4, 6, 2),
    refuse=_rows_without_ties,
)


TOP_AND_KTH = five_levels(
    "top_and_kth",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 topk and kthvalue named; L2 the same order statistics described; L3 a gap between order "
          "statistics, then the widest row; L4 the fewest largest values of every row reaching each of "
          "four totals, or -1 (a fifth of the totals); L5 top-two routing with renormalised weights and "
          "per-column load, described not named",
    branches=(Branch("no k reaches some total", some_sentinel("k"), Fraction(1, 4), (4,)),),
)
