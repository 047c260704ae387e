"""The permute_and_reshape family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_INT, Inputs, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, reshape, values
from exactgrade.domains.pytorch.sampling import first_duplicate, int_tensor, shape_text, word
from exactgrade.domains.pytorch.tensor_ops.shared import draws_none, one_answer_for_all, some_sentinel
from exactgrade.family import Branch, Draw, Reject, five_levels


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


def _sample_permute(draw: Draw, level: int) -> dict:
    d0, d1, d2 = (draw.integer(2, 2 + level) for _ in range(3))
    d2 = max(d2, 3 if level >= 3 else 2)
    return {"x": int_tensor(draw, (d0, d1, d2), -10 * (level + 2), 10 * (level + 2))}


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=permute_and_reshape,
    independent=_permute_and_reshape,
    question=lambda i: f"""Move the last axis of `x` to the front (the other two axes keep their order),
        then reshape the result to {shape_text((i["x"].shape[2], i["x"].shape[0] * i["x"].shape[1]))} in
        row-major order; call it y. Also give the element
        y[{i["x"].shape[2] - 2}, {i["x"].shape[0] * i["x"].shape[1] - 1}].""",
    answer=lambda i: ({"y": i64(i["x"].shape[2], i["x"].shape[0] * i["x"].shape[1]), "picked": PY_INT},),
    sample=_sample_permute,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    permute_and_reshape,
    _permute_and_reshape,
    lambda i: f"""`x` has shape {shape_text(i["x"].shape)} = (d0, d1, d2). Build the int64 matrix y with
        d2 rows and d0*d1 columns whose element y[k, i*d1 + j] is x[i, j, k], for every i, j, k. Give y
        and its element `picked` = y[{i["x"].shape[2] - 2}, {i["x"].shape[0] * i["x"].shape[1] - 1}].""",
    lambda i: ({"y": i64(i["x"].shape[2], i["x"].shape[0] * i["x"].shape[1]), "picked": PY_INT},),
    _sample_permute,
)


# permute_and_reshape L3: transpose, flatten, re-chunk, reduce -------------------------------------
def chunked_column_sums(x):
    y = x.permute(2, 0, 1).reshape(-1)
    return {"rows": [{"sums": y.reshape(-1, x.shape[2]).sum(dim=0)}]}


def _chunked_column_sums(x):
    v = values(x)
    d0, d1, d2 = x.shape
    seq = [v[i][j][k] for k in range(d2) for i in range(d0) for j in range(d1)]
    return [{"sums": ExactTensor.of("int64", [sum(seq[c::d2]) for c in range(d2)])}]


LEVEL_3 = pytorch_level(
    "tensor_ops",
    chunked_column_sums,
    _chunked_column_sums,
    lambda i: f"""`x` has shape {shape_text(i["x"].shape)} = (d0, d1, d2). List its elements x[i, j, k]
        in the order in which k varies slowest, then i, and j fastest. Cut that list into consecutive
        chunks of d2 = {i["x"].shape[2]} elements each. Give `sums`, the int64 vector of length d2 whose
        element c is the sum, over all chunks, of the chunk's element at position c (0-based).""",
    lambda i: ({"sums": i64(i["x"].shape[2])},),
    _sample_permute,
)


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
        if draws_none(draw):  # no order produces it
            a, b = draw.sample(range(len(seq)), 2)
            seq[a], seq[b] = seq[b], seq[a]
        targets.append(seq)
    return {"x": x, "targets": tensor("int64", targets)}


def _distinct_elements(inputs: Inputs) -> str | None:
    flat = [e for plane in values(inputs["x"]) for row in plane for e in row]
    if first_duplicate(flat) is not None:
        return "x repeats a value: two axis orders could both produce the target"
    return None


LEVEL_4 = pytorch_level(
    "tensor_ops",
    find_axis_order,
    _find_axis_order,
    lambda i: f"""`x` has shape {shape_text(i["x"].shape)}, and each of the {word(i["targets"].shape[0])}
        rows of `targets` (shape {shape_text(i["targets"].shape)}) is a sequence of
        {i["targets"].shape[1]} elements. Consider the six orders (p0, p1, p2) of the axes (0, 1, 2) of
        x: for an order, form the tensor whose element at (a, b, c) is the element of x whose index
        along axis p0 is a, along axis p1 is b and along axis p2 is c, and read it out in row-major
        order (last index fastest). Give `order`, an int64 matrix with one row per row t of targets:
        the order (three axis numbers) whose read-out equals targets[t], element for element; if
        several do, the lexicographically smallest; if none does, [-1, -1, -1].""",
    lambda i: ({"order": i64(i["targets"].shape[0], 3)},),
    _sample_axis_order,
    refuse=_distinct_elements,
    reject=one_answer_for_all("order"),
)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _smooth(draw: Draw, low: int, high: int) -> int:
    """A number in [low, high] made of the primes 2, 3, 5, 7 (so that it has many divisors)."""
    while True:
        n = 1
        while n < low:
            n *= draw.choice((2, 2, 3, 3, 5, 7))
        if n <= high:
            return n


# permute_and_reshape L5: a chain of re-indexings of a tensor too large to build ----------------------
def view_chain(A, B, C, R, T, queries):
    import torch

    # x[i, j, k] = i*B*C + j*C + k; follow each query position back through the chain
    S, half = A * B * C // R, R // 2
    U = S * half // T
    flat_v = queries[:, 0] * U + queries[:, 1]            # v is w read out row-major, regrouped
    q, p = flat_v // half, flat_v % half                  # w[q, p] = u[p, q]
    flat_y = (2 * p + 1) * S + q                          # u's row p is z's row 2p+1; z is y read out
    k, j, i = flat_y // (B * A), (flat_y // A) % B, flat_y % A   # y[k, j, i] = x[i, j, k]
    return {"rows": [{"values": (i * B * C + j * C + k).to(torch.int64)}]}


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, r = divmod(flat, size)
        index.append(r)
    return tuple(reversed(index))


def _ravel(index: tuple[int, ...], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, size in zip(index, shape, strict=True):
        flat = flat * size + i
    return flat


def _view_chain_value(A, B, C, R, T, t, c, *, copy_free=False):
    """The element of v at (t, c), stage by stage (copy_free: the named mistake, reading every
    regrouping off x's own storage order as if no axis had moved)."""
    N = A * B * C
    S, half = N // R, R // 2
    U = N // 2 // T
    q, p = _unravel(_ravel((t, c), (T, U)), (S, half))    # v -> w
    row, col = 2 * p + 1, q                               # w -> u -> z
    flat = _ravel((row, col), (R, S))
    if copy_free:
        return flat
    k, j, i = _unravel(flat, (C, B, A))                   # z -> y
    return _ravel((i, j, k), (A, B, C))                   # y -> x, whose value is its flat position


def _view_chain(A, B, C, R, T, queries):
    return [{"values": ExactTensor.of("int64", [_view_chain_value(A, B, C, R, T, t, c)
                                                for t, c in values(queries)])}]


def _sample_view_chain(draw: Draw, level: int) -> dict:
    A, B, C = (_smooth(draw, 600, 6000) for _ in range(3))
    N = A * B * C
    evens = [d for d in _divisors(N) if d % 2 == 0 and 40 <= d <= 10**6 and d not in (2 * A, 2 * B, 2 * C)]
    rows = [d for d in _divisors(N // 2) if 40 <= d <= 10**6]
    if not evens or len(rows) < 3:
        raise Reject("too few divisors in range for the two regroupings")
    R = draw.choice(evens)
    T = draw.choice([d for d in rows if d not in (R, N // R)])
    U = N // 2 // T
    queries = [[draw.integer(0, T - 1), draw.integer(0, U - 1)] for _ in range(6)]
    return {"A": A, "B": B, "C": C, "R": R, "T": T, "queries": tensor("int64", queries)}


def _view_chain_mistaken(task) -> str | None:
    i = task.inputs
    wrong = [_view_chain_value(i["A"], i["B"], i["C"], i["R"], i["T"], t, c, copy_free=True)
             for t, c in values(i["queries"])]
    right = task.expected["rows"][0]["values"].data
    if sum(a == b for a, b in zip(wrong, right, strict=True)) * 2 >= len(right):
        return "reading the regroupings off x's storage order gives the right values"
    return None


LEVEL_5 = pytorch_level(
    "tensor_ops",
    view_chain,
    _view_chain,
    lambda i: f"""Let x be an int64 tensor of shape (A, B, C) = ({i["A"]}, {i["B"]}, {i["C"]}) whose element
        x[i, j, k] is i*B*C + j*C + k (x is far too large to build: it is only described). Define, in order:
        y, of shape (C, B, A), with y[k, j, i] = x[i, j, k]; z, of shape (R, A*B*C/R) with R = {i["R"]}: the
        elements of y listed in row-major order (last index fastest) and laid out row after row; u: the
        rows of z with odd index (rows 1, 3, 5, ...), in order, so u has R/2 rows; w, the transpose of u
        (w[q, p] = u[p, q]); and v, of shape (T, A*B*C/(2T)) with T = {i["T"]}: the elements of w listed in
        row-major order and laid out row after row. Give `values`, the int64 vector whose element t is
        v[queries[t, 0], queries[t, 1]].""",
    lambda i: ({"values": i64(i["queries"].shape[0])},),
    _sample_view_chain,
    reject=_view_chain_mistaken,
)


PERMUTE_AND_RESHAPE = five_levels(
    "permute_and_reshape",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the permute and reshape stated as calls; L2 the same map given by its index formula; L3 "
          "a read-out order, re-chunked and reduced (nothing intermediate asked); L4 the inverse: which "
          "of six axis orders produced each of three targets, or none (a fifth of the targets); L5 "
          "a chain of re-indexings (axes swapped, regrouped, every other row, transposed, regrouped) of "
          "a tensor too large to build: the index arithmetic of each step derived and composed, at "
          "query positions",
    branches=(Branch("no order produces some target", some_sentinel("order"), Fraction(1, 4), (4,)),),
)
