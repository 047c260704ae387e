"""The stack_and_concatenate family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_INT, Inputs, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, reshape, values
from exactgrade.domains.pytorch.sampling import first_duplicate, int_tensor, shape_text, word
from exactgrade.domains.pytorch.tensor_ops.shared import draws_none, one_answer_for_all, some_sentinel
from exactgrade.family import Branch, Draw, five_levels


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


def _sample_two_int_matrices(draw: Draw, level: int) -> dict:
    shape = (draw.integer(2, 1 + level), draw.integer(2, 2 + level))
    bound = 20 * level + 40
    return {"a": int_tensor(draw, shape, -bound, bound), "b": int_tensor(draw, shape, -bound, bound)}


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=stack_and_concatenate,
    independent=_stack_and_concatenate,
    question=lambda i: f"""Join `a` and `b` (both of shape {shape_text(i["a"].shape)}) three ways:
        `stacked`, stacked along a new axis 1; `concatenated`, joined along the existing axis 1; and
        `interleaved`, each row alternating a[i, 0], b[i, 0], a[i, 1], b[i, 1], ...""",
    answer=lambda i: ({"stacked": i64(i["a"].shape[0], 2, i["a"].shape[1]),
                       "concatenated": i64(i["a"].shape[0], 2 * i["a"].shape[1]),
                       "interleaved": i64(i["a"].shape[0], 2 * i["a"].shape[1])},),
    sample=_sample_two_int_matrices,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    stack_and_concatenate,
    _stack_and_concatenate,
    lambda i: f"""`a` and `b` are int64 matrices of shape {shape_text(i["a"].shape)} = (R, C). Give
        `stacked`, of shape (R, 2, C), with stacked[i, 0, j] = a[i, j] and stacked[i, 1, j] = b[i, j];
        `concatenated`, of shape (R, 2C), with a[i, j] at column j and b[i, j] at column C + j of row
        i; and `interleaved`, of shape (R, 2C), with a[i, j] at column 2j and b[i, j] at column 2j + 1
        of row i.""",
    lambda i: ({"stacked": i64(i["a"].shape[0], 2, i["a"].shape[1]),
                "concatenated": i64(i["a"].shape[0], 2 * i["a"].shape[1]),
                "interleaved": i64(i["a"].shape[0], 2 * i["a"].shape[1])},),
    _sample_two_int_matrices,
)


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


LEVEL_3 = pytorch_level(
    "tensor_ops",
    interleaved_walk,
    _interleaved_walk,
    lambda i: f"""Form the matrix M whose rows are a[0], b[0], a[1], b[1], ... (the rows of `a` and `b`
        alternating, {2 * i["a"].shape[0]} rows of {i["a"].shape[1]}). Give `walk`, the int64 vector
        whose element r is M[r, r mod {i["a"].shape[1]}] for every row r of M, and `total`, the sum of
        walk.""",
    lambda i: ({"walk": i64(2 * i["a"].shape[0]), "total": PY_INT},),
    _sample_two_int_matrices,
)


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
        if draws_none(draw):  # no join produces it
            i, j = draw.sample(range(len(joined)), 2)
            joined[i], joined[j] = joined[j], joined[i]
        targets.append(reshape(joined, shape))
    return {**inputs, "targets": tensor("int64", targets)}


def _distinct_joins(inputs: Inputs) -> str | None:
    flat = [e for row in values(inputs["a"]) + values(inputs["b"]) for e in row]
    if first_duplicate(flat) is not None:
        return "a and b repeat a value: a swapped target could still match a join"
    return None


LEVEL_4 = pytorch_level(
    "tensor_ops",
    which_join,
    _which_join,
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
    lambda i: ({"join": i64(i["targets"].shape[0])},),
    _sample_which_join,
    refuse=_distinct_joins,
    reject=one_answer_for_all("join"),
)


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


LEVEL_5 = pytorch_level(
    "tensor_ops",
    riffle_period,
    _riffle_period,
    lambda i: f"""Let s be the sequence of the elements of `a` in row-major order followed by those of
        `b` in row-major order ({2 * len(i["a"].data)} elements). One shuffle splits the current
        sequence into its first and second halves and interleaves them: first element of the first
        half, first of the second half, second of the first half, second of the second half, and so
        on. Give `once`, the sequence after one shuffle of s (an int64 vector), and `period`, the
        smallest number of shuffles, starting from s, after which the sequence of values equals s
        again.""",
    lambda i: ({"once": i64(2 * len(i["a"].data)), "period": PY_INT},),
    _sample_riffle,
)


STACK_AND_CONCATENATE = five_levels(
    "stack_and_concatenate",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 stack and cat named; L2 the joins given by their index maps; L3 rows interleaved and walked "
          "(intermediate not asked); L4 which of five joins produced each of four targets, by memory "
          "order, or -1 (a fifth of the targets); L5 a perfect shuffle and its period on the values, "
          "described not named",
    branches=(Branch("no join produces some target", some_sentinel("join"), Fraction(1, 4), (4,)),),
)
