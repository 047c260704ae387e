"""The gather_and_index family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    Inputs,
    f32,
    i64,
    pytorch_level,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, mean, reshape, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor, int_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Branch, Draw, five_levels


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


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=gather_and_index,
    independent=_gather_and_index,
    question=lambda i: f"""From the {i["x"].shape[0]}x{i["x"].shape[1]} matrix `x`: `gathered` =
        torch.gather(x, 1, idx) (row i takes the columns listed in idx[i]); `picked`, the elements
        x[rows[k], cols[k]] for k = {", ".join(map(str, range(i["rows"].shape[0])))} (advanced indexing; a
        negative column counts from the end); and `selected_rows`, the rows of x listed in `rows`, in that
        order.""",
    answer=lambda i: ({"gathered": f32(*dims(i["idx"])), "picked": f32(*dims(i["rows"])),
                       "selected_rows": f32(i["rows"].shape[0], i["x"].shape[1])},),
    sample=_sample_gather,
    refuse=_uses_negative_column,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    gather_and_index,
    _gather_and_index,
    lambda i: f"""From the {i["x"].shape[0]}x{i["x"].shape[1]} matrix `x`: `gathered`, of the shape of
        `idx`, with gathered[i, k] = x[i, idx[i, k]]; `picked`, the vector whose element k is the element
        of x in row rows[k] and column cols[k], for k = 0..{i["rows"].shape[0] - 1}, where a negative
        column c means column {i["x"].shape[1]} + c; and `selected_rows`, the matrix whose row k is row
        rows[k] of x.""",
    lambda i: ({"gathered": f32(*dims(i["idx"])), "picked": f32(*dims(i["rows"])),
                "selected_rows": f32(i["rows"].shape[0], i["x"].shape[1])},),
    _sample_gather,
    refuse=_uses_negative_column,
)

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


LEVEL_3 = pytorch_level(
    "tensor_ops",
    gather_chain,
    _gather_chain,
    lambda i: f"""`idx` lists, for every row of `x`, {i["idx"].shape[1]} column numbers. For each k =
        0..{i["rows"].shape[0] - 1}, let r = rows[k] and let c be entry number (k mod
        {i["idx"].shape[1]}) of the list of row r in idx; give in `chained` the element of x at row r,
        column c, and in `total` the sum of chained.""",
    lambda i: ({"chained": f32(*dims(i["rows"])), "total": PY_FLOAT},),
    _sample_gather_chain,
)


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


LEVEL_4 = pytorch_level(
    "tensor_ops",
    locate_values,
    _locate_values,
    """For each element of `wanted`, give the (row, column) of the first element of `x` in
        row-major order that equals it exactly, or (-1, -1) if no element of x does; `where` holds one
        such pair per element of wanted.""",
    lambda i: ({"where": i64(i["wanted"].shape[0], 2)},),
    _sample_locate,
)


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


LEVEL_5 = pytorch_level(
    "tensor_ops",
    bag_means,
    _bag_means,
    lambda i: f"""`x` is a table of {i["x"].shape[0]} rows. The list `ids` of row numbers is cut into
        {i["starts"].shape[0]} consecutive bags: bag b starts at position starts[b] of ids and ends just
        before starts[b + 1] (the last bag ends at the end of ids). Give `means`, one row per bag: the
        elementwise mean of the rows of x whose numbers the bag lists (a row listed twice counts
        twice).""",
    lambda i: ({"means": f32(i["starts"].shape[0], i["x"].shape[1])},),
    _sample_bags,
)


GATHER_AND_INDEX = five_levels(
    "gather_and_index",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 gather, advanced indexing and index_select named; L2 each by its index formula; L3 a "
          "gather through a picked row, reduced (intermediate not asked); L4 the inverse: where each "
          "wanted value sits, or (-1, -1); L5 mean pooling of table rows over bags given by offsets, "
          "described not named",
    branches=(Branch("a wanted value is absent", _located_some_missing, Fraction(1, 5), (4,)),),
)
