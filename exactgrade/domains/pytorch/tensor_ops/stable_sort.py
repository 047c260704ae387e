"""The stable_sort family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.domains.pytorch.sampling import dyadic_list, first_duplicate
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, Reject, five_levels


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


def _sample_sort(draw: Draw, level: int) -> dict:
    n = 8 + 2 * (level - 1)
    return {"x": tensor("float32", dyadic_list(draw, n, -1 - level / 2, 3 + level / 2, 1))}


def _has_tie(inputs: Inputs) -> str | None:
    if first_duplicate(values(inputs["x"])) is None:
        return "no tied values: the stable order would not be tested"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=stable_sort,
    independent=_stable_sort,
    question="""Sort `x` in descending order so that equal elements keep their original order (a stable
        sort). Give the sorted `values`, the original `indices` in sorted order, and `ranks`: for each
        element of x, the 0-based position it takes in the sorted order.""",
    answer=lambda i: ({"values": f32(*dims(i["x"])), "indices": i64(*dims(i["x"])),
                       "ranks": i64(*dims(i["x"]))},),
    sample=_sample_sort,
    refuse=_has_tie,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    stable_sort,
    _stable_sort,
    """Arrange the elements of `x` from largest to smallest; where several elements are equal, the
        one with the smaller original index comes first. Give `values`, the arranged elements;
        `indices`, the original index of the element at each arranged position; and `ranks`, for each
        element of x (in its original order) the 0-based position it takes in the arrangement.""",
    lambda i: ({"values": f32(*dims(i["x"])), "indices": i64(*dims(i["x"])),
                "ranks": i64(*dims(i["x"]))},),
    _sample_sort,
    refuse=_has_tie,
)


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


LEVEL_3 = pytorch_level(
    "tensor_ops",
    tied_ranks,
    _tied_ranks,
    """Rank the elements of `x` from the largest (rank 1) downward. Give `average_rank`: for each
        element, the mean of the 1-based positions that the elements equal to it occupy when x is
        arranged from largest to smallest; and `dense_rank`: for each element, 1 plus the number of
        distinct values of x that are strictly larger than it.""",
    lambda i: ({"average_rank": f32(*dims(i["x"])), "dense_rank": i64(*dims(i["x"]))},),
    _sample_sort,
    refuse=_has_tie,
)


# stable_sort L4: fewest adjacent swaps to reach the stable descending order -----------------------
def adjacent_swaps(x):
    n = x.shape[0]
    return {"rows": [{"swaps": int(sum(int((x[i] < x[i + 1:]).sum()) for i in range(n)))}]}


def _adjacent_swaps(x):
    v = values(x)
    return [{"swaps": sum(1 for i in range(len(v)) for j in range(i + 1, len(v)) if v[i] < v[j])}]

def _needs_swaps(inputs: Inputs) -> str | None:
    v = values(inputs["x"])
    if all(v[i] >= v[i + 1] for i in range(len(v) - 1)):
        return "x is already in descending order"
    return _has_tie(inputs)


_STABLE_ORDER = """the descending order of `x` in which equal elements keep their original relative order
    (the one with the smaller index first)"""


LEVEL_4 = pytorch_level(
    "tensor_ops",
    adjacent_swaps,
    _adjacent_swaps,
    f"""Give `swaps`, the smallest number of exchanges of two neighbouring elements that turns `x`
        into {_STABLE_ORDER}.""",
    lambda i: ({"swaps": PY_INT},),
    _sample_sort,
    refuse=_needs_swaps,
)


# stable_sort L5: the stable order of a periodic sequence of 10^11..10^12 terms, both ways ----------
def periodic_stable_order(pattern, n, positions, places):
    import torch

    p = pattern.tolist()
    m = len(p)
    Q, r = divmod(n, m)
    count = {v: Q * p.count(v) + p[:r].count(v) for v in set(p)}        # occurrences in all n terms
    before = {v: sum(c for u, c in count.items() if u > v) for v in count}  # larger terms come first

    def place_of(i):               # larger first; equal terms keep their order (earlier first)
        k, t = divmod(i, m)
        v = p[t]
        return before[v] + k * p.count(v) + p[:t].count(v)

    def term_at(place):            # the inverse: which term lands at this place
        v = min(u for u in count if before[u] <= place)   # smaller values come later
        j = place - before[v]
        offsets = [t for t in range(m) if p[t] == v]
        k, e = divmod(j, len(offsets))
        return k * m + offsets[e]

    return {"rows": [{"place": torch.tensor([place_of(i) for i in positions.tolist()]),
                      "term": torch.tensor([term_at(k) for k in places.tolist()])}]}


def _periodic_stable_order(pattern, n, positions, places):
    """Places counted term by term over one period and scaled (no per-value table), and each
    term found by bisection on the place of the terms of its value (place is increasing along them)."""
    p = list(values(pattern))
    m = len(p)
    Q, r = divmod(n, m)

    def place_of(i):
        k, t = divmod(i, m)
        larger = sum(Q + (1 if s < r else 0) for s in range(m) if p[s] > p[t])
        equal_before = sum(k + (1 if s < t else 0) for s in range(m) if p[s] == p[t])
        return larger + equal_before

    def term_at(place):
        for v in sorted(set(p), reverse=True):
            ts = [t for t in range(m) if p[t] == v]
            first = place_of(ts[0])
            last_position = max(k * m + t for t in ts for k in (Q - 1, Q) if k * m + t < n)
            if first <= place <= place_of(last_position):
                low, high = 0, n // m + 1              # the last period index whose first v is <= place
                while low < high:
                    mid = (low + high + 1) // 2
                    if place_of(mid * m + ts[0]) <= place:
                        low = mid
                    else:
                        high = mid - 1
                for t in ts:
                    if low * m + t < n and place_of(low * m + t) == place:
                        return low * m + t
        raise AssertionError("no term at this place")

    return [{"place": ExactTensor.of("int64", [place_of(i) for i in values(positions)]),
             "term": ExactTensor.of("int64", [term_at(k) for k in values(places)])}]


def _sample_periodic_order(draw: Draw, level: int) -> dict:
    m = draw.integer(6, 9)
    pattern = [draw.integer(0, 4) for _ in range(m)]
    if len(set(pattern)) < 3 or max(pattern.count(v) for v in pattern) < 2:
        raise Reject("the pattern needs three values and a repeated one")
    n = draw.integer(10**11, 10**12) // m * m + draw.integer(1, m - 1)
    return {"pattern": tensor("int64", pattern), "n": n,
            "positions": tensor("int64", [draw.integer(0, n - 1) for _ in range(4)]),
            "places": tensor("int64", [draw.integer(0, n - 1) for _ in range(4)])}


def _order_mistaken(task) -> str | None:
    """The named mistakes: the partial last period ignored (every value occurring exactly Q times
    its count per period), or ties broken against the original order: each must miss most answers."""
    p, n = list(values(task.inputs["pattern"])), task.inputs["n"]
    m = len(p)
    Q = n // m
    places = task.expected["rows"][0]["place"].data
    partial_missed = sum(1 for i, k in zip(values(task.inputs["positions"]), places, strict=True)
                         if sum(Q for s in range(m) if p[s] > p[i % m]) + (i // m) * p.count(p[i % m])
                         + p[:i % m].count(p[i % m]) == k)
    if partial_missed * 2 > len(places):
        return "ignoring the partial last period gives most places"
    return None


LEVEL_5 = pytorch_level(
    "tensor_ops",
    periodic_stable_order,
    _periodic_stable_order,
    lambda i: f"""A sequence s has n = {i["n"]} terms (far too many to build): s[t] = pattern[t mod
        {i["pattern"].shape[0]}] for t = 0, 1, ..., n-1, where `pattern` is the given int64 vector
        (the pattern repeats; n need not be a multiple of its length). Arrange the n terms from largest to
        smallest, where equal terms keep their original relative order (the one at the smaller
        position first);
        the arranged places are numbered 0 to n-1. Give `place`, for each position listed in `positions`
        the place its term takes in the arrangement, and `term`, for each place listed in `places` the
        original position of the term that lands there.""",
    lambda i: ({"place": i64(i["positions"].shape[0]), "term": i64(i["places"].shape[0])},),
    _sample_periodic_order,
    reject=_order_mistaken,
)


STABLE_SORT = five_levels(
    "stable_sort",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 a stable descending sort, named; L2 the order described by its tie rule; L3 average and "
          "dense ranks of tied values; L4 the fewest neighbour exchanges to the stable order (inversions, "
          "ties not counted); L5 the stable order of a periodic "
          "sequence of 10^11..10^12 terms, both ways: the place of given terms and the term at given "
          "places (counts with a partial last period, then their inverse)",
)
