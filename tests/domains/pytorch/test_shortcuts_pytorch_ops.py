"""The shortcut rules of the pytorch families in tensor_ops.py and autograd.py, per level.

Table-driven: every (family, level) of this share must generate instances that break none of the
family's rules (varying fields, its degenerate-instance test, its branch shares), counted by
tests/shortcut_rules.py on the first SUITE_INSTANCES instances (EXACTGRADE_RULE_INSTANCES=200 for
the full check). Also: the prompts of levels 2-5 name no torch call and carry no hint.
"""

from __future__ import annotations

import importlib.util
import re
from fractions import Fraction

import pytest
from shortcut_rules import instances, pytorch_suite_count, rule_problems

import exactgrade
from exactgrade.domains.pytorch import autograd, tensor_ops
from exactgrade.domains.pytorch.autograd.accumulated_gradient import _overshoot_window
from exactgrade.domains.pytorch.common import tensor
from exactgrade.domains.pytorch.exact import ExactTensor
from exactgrade.domains.pytorch.tensor_ops.broadcast_arithmetic import _broadcast_product, broadcast_product
from exactgrade.domains.pytorch.tensor_ops.casts_and_wraparound import (
    _wrapping_recurrence,
    wrapping_recurrence,
)
from exactgrade.domains.pytorch.tensor_ops.clamp_and_select import _shrink_to_budget, shrink_to_budget
from exactgrade.domains.pytorch.tensor_ops.integer_division import _division_sums, division_sums
from exactgrade.domains.pytorch.tensor_ops.normalise import _periodic_standardise, periodic_standardise
from exactgrade.domains.pytorch.tensor_ops.permute_and_reshape import _view_chain, view_chain
from exactgrade.domains.pytorch.tensor_ops.running_statistics import _periodic_best_run, periodic_best_run
from exactgrade.domains.pytorch.tensor_ops.stable_sort import _periodic_stable_order, periodic_stable_order
from exactgrade.family import LEVELS
from exactgrade.values import TensorValue

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch==2.13.0)")

SUITE_INSTANCES = 6
OPS = tuple(f.name for f in tensor_ops.FAMILIES)
GRADS = tuple(f.name for f in autograd.FAMILIES)
TABLE = [(name, level) for name in OPS + GRADS for level in LEVELS]
# a torch call or option named in the question text (the inputs block names torch dtypes, not calls)
NAMED_CALL = re.compile(r"torch\.|\bF\.|\.backward|autograd|\bdetach\b|kthvalue|topk|normalize|cummax|"
                        r"create_graph|retain_graph|note the tie|count_include_pad")


def test_the_share_is_sixteen_tensor_ops_and_seven_autograd_families():
    assert len(OPS) == 16 and len(GRADS) == 7


@pytest.mark.parametrize(("name", "level"), TABLE)
def test_no_shortcut_passes(name, level):
    assert rule_problems("pytorch", name, level, instances(pytorch_suite_count(level, SUITE_INSTANCES))) == []


# Round 4: a level whose commonest key exceeded a quarter only beyond the suite's instances (the
# old detached_gradient L4, one k of four or -1 as the whole key: 3 of the first 12, 12 of 40).
WIDER_SHARE = [("detached_gradient", 4, 40)]


@pytest.mark.parametrize(("name", "level", "count"), WIDER_SHARE)
def test_no_key_is_the_answer_of_more_than_a_quarter_of_more_instances(name, level, count):
    assert rule_problems("pytorch", name, level, max(count, instances(0))) == []


@pytest.mark.parametrize(("w0", "window"), [
    ([0.75, 1.0, 0.25], "closed"),        # every element descends past the local minimum and back
    ([0.25, -0.5, 0.125, 0.5], "open"),   # every element climbs without bound: the sum rises for good
    ([-1.5, 1.0, 0.25, 0.75], None),      # -1.5 falls without bound and outweighs the rest
    ([1.5, 1.25], None),                  # the step jumps past the rise
], ids=["closed", "open", "a falling element", "too steep"])
def test_the_overshoot_window_is_where_the_trial_loss_rises(w0, window):
    ws = [Fraction(w) for w in w0]

    def rise(a):  # L(w0 - a * gradient) - L(w0), exactly
        return sum((w - a * (3 * w * w - 1)) ** 3 - (w - a * (3 * w * w - 1)) - w ** 3 + w for w in ws)

    found = _overshoot_window(ws)
    if window is None:
        assert found is None and all(rise(Fraction(k, 64)) < 0 for k in range(1, 1024))
        return
    low, high = Fraction(found[0]), Fraction(found[1]) if found[1] != float("inf") else None
    assert (window == "open") == (high is None)
    assert rise(low * Fraction(99, 100)) < 0 < rise(low * Fraction(101, 100))
    if high is not None:
        assert rise(high * Fraction(99, 100)) > 0 > rise(high * Fraction(101, 100))
    else:
        assert rise(low * 100) > 0


@pytest.mark.parametrize("name", OPS + GRADS)
def test_upper_levels_describe_the_operation_and_name_no_call(name):
    for level in LEVELS[1:]:
        task = exactgrade.generate("pytorch", seed=0, index=0, level=level, family=name)
        question = task.prompt.split("\n\nInputs (already defined in the sandbox):")[0]
        assert NAMED_CALL.search(question) is None, (task.id, NAMED_CALL.search(question))


@pytest.mark.parametrize("name", OPS + GRADS)
def test_every_level_asks_its_own_question(name):
    questions = {exactgrade.generate("pytorch", seed=0, index=0, level=level, family=name).prompt.split(
        "\n\nInputs")[0] for level in LEVELS}
    assert len(questions) == len(LEVELS), name


# The round-2 L5s describe objects too large to build (10^10..10^12 terms); their references and
# independent recomputations reason in closed form. On small sizes the object can be built: both
# must then agree with torch run on the whole thing (brute force), on every drawn instance.
def _small_cases(seed, count, make):
    import random

    rng = random.Random(seed)
    return [make(rng) for _ in range(count)]


def _brute_view_chain(rng):
    import torch

    A, B, C = rng.randint(2, 4), rng.randint(2, 4), rng.choice([2, 4])
    N = A * B * C
    R = rng.choice([d for d in range(2, N + 1, 2) if N % d == 0])
    T = rng.choice([d for d in range(1, N // 2 + 1) if (N // 2) % d == 0])
    x = torch.arange(N).reshape(A, B, C)
    z = x.permute(2, 1, 0).reshape(R, -1)
    v = z[1::2].T.reshape(T, -1)
    queries = [[rng.randrange(T), rng.randrange(v.shape[1])] for _ in range(3)]
    inputs = {"A": A, "B": B, "C": C, "R": R, "T": T, "queries": tensor("int64", queries)}
    return inputs, {"values": [int(v[t, c]) for t, c in queries]}


def _brute_standardise(rng):
    import torch

    m = rng.randint(3, 9)
    n = rng.randint(2, 5) * m + rng.randint(1, m - 1)
    v = torch.arange(n, dtype=torch.float64).remainder(m)
    z = (v - v.mean()) / v.std(unbiased=False)
    queries = [rng.randrange(n) for _ in range(3)]
    return {"n": n, "m": m, "queries": tensor("int64", queries)}, {
        "standardised": [float(z[q]) for q in queries], "above": int((z > 1).sum())}


def _brute_best_run(rng):
    m = rng.randint(5, 8)
    pattern = [rng.randint(-12, 12) / 4 for _ in range(m)]
    if rng.random() < 0.4:
        pattern[-1] = -sum(pattern[:-1])
    pattern[0] = abs(pattern[0]) + 0.25
    n = rng.randint(2, 5) * m + rng.randint(1, m - 1)
    s = [pattern[t % m] for t in range(n)]
    best = max((sum(s[a:b + 1]), -a, -b) for a in range(n) for b in range(a, n))
    return {"pattern": tensor("float32", pattern), "n": n}, {"best_sum": best[0], "start": -best[1],
                                                             "end": -best[2]}


def _brute_shrink(rng):
    import torch

    x = [[rng.randint(-16, 18) / 4 or 0.25 for _ in range(3)] for _ in range(3)]
    total = sum(abs(e) for row in x for e in row)
    budget = rng.randint(1, int(total * 4) - 1) / 4
    level = _bisect_level(x, budget)
    shrunk = torch.sign(torch.tensor(x)) * (torch.tensor(x).abs() - level).clamp(min=0)
    return {"x": tensor("float32", x), "budget": budget}, {"level": level,
                                                           "nonzero": int((shrunk != 0).sum())}


def _bisect_level(x, budget):
    low, high = 0.0, max(abs(e) for row in x for e in row)
    for _ in range(200):
        mid = (low + high) / 2
        if sum(max(abs(e) - mid, 0) for row in x for e in row) > budget:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _brute_wrapping(rng):
    import torch

    m = rng.randint(4, 7)
    pattern = [rng.randint(-(2**31), 2**31 - 1) for _ in range(m)]
    seed, mult, n = rng.randint(-(2**31), 2**31 - 1), 2 * rng.randint(2, 500_000) + 1, rng.randint(2, 60)
    h, states = torch.tensor(seed, dtype=torch.int32), []
    p = torch.tensor(pattern, dtype=torch.int32)
    for t in range(n):
        h = h * mult + p[t % m]                   # int32 tensor arithmetic wraps
        states.append(int(h))
    return {"pattern": tensor("int32", pattern), "seed": seed, "mult": mult, "n": n}, {
        "halfway": states[n // 2 - 1], "final": states[-1]}


def _brute_stable_order(rng):
    import torch

    m = rng.randint(6, 9)
    pattern = [rng.randint(0, 4) for _ in range(m)]
    n = rng.randint(1, 5) * m + rng.randint(1, m - 1)
    s = torch.tensor([pattern[t % m] for t in range(n)])
    order = torch.sort(s, descending=True, stable=True).indices
    place = torch.empty_like(order)
    place[order] = torch.arange(n)
    positions, places = [rng.randrange(n) for _ in range(3)], [rng.randrange(n) for _ in range(3)]
    return {"pattern": tensor("int64", pattern), "n": n, "positions": tensor("int64", positions),
            "places": tensor("int64", places)}, {"place": [int(place[i]) for i in positions],
                                                 "term": [int(order[k]) for k in places]}


def _brute_division(rng):
    import torch

    n, g = rng.randint(1, 60), rng.choice((1, 2, 4, 6))
    c, a = g * rng.randint(1, 20), g * rng.randint(1, 30)
    b = -a * rng.randint(0, n) - rng.randint(0, a - 1)
    v = torch.arange(n) * a + b
    return {"a": a, "b": b, "c": c, "n": n}, {
        "floor_sum": int(torch.div(v, c, rounding_mode="floor").sum()),
        "trunc_sum": int(torch.div(v, c, rounding_mode="trunc").sum())}


def _brute_broadcast(rng):
    import torch

    P, Q, R = rng.randint(1, 7), rng.randint(1, 7), rng.randint(1, 7)
    s, d = rng.randint(0, P), rng.randint(-R - 2, Q + 2)
    a = (torch.arange(P) - s).reshape(P, 1)
    b = (torch.arange(Q).reshape(Q, 1, 1) - torch.arange(R).reshape(1, 1, R) + d)
    out = a * b
    at = [rng.randrange(n) for n in out.shape]
    return {"P": P, "Q": Q, "R": R, "s": s, "d": d, "at": tensor("int64", at)}, {
        "shape": list(out.shape), "picked": int(out[tuple(at)]), "positive_count": int((out > 0).sum()),
        "positive_sum": int(out[out > 0].sum())}


BRUTE = [
    (view_chain, _view_chain, _brute_view_chain),
    (periodic_standardise, _periodic_standardise, _brute_standardise),
    (periodic_best_run, _periodic_best_run, _brute_best_run),
    (shrink_to_budget, _shrink_to_budget, _brute_shrink),
    (wrapping_recurrence, _wrapping_recurrence, _brute_wrapping),
    (periodic_stable_order, _periodic_stable_order, _brute_stable_order),
    (division_sums, _division_sums, _brute_division),
    (broadcast_product, _broadcast_product, _brute_broadcast),
]


def _plain(value):
    if isinstance(value, ExactTensor):
        return [float(e) if isinstance(e, Fraction) else e for e in value.values]
    if hasattr(value, "tolist"):
        return value.tolist()
    return float(value) if isinstance(value, Fraction) else value


@pytest.mark.parametrize(("reference", "independent", "brute"), BRUTE, ids=[r.__name__ for r, _, _ in BRUTE])
def test_closed_form_levels_agree_with_torch_on_the_whole_object_when_it_is_small(reference, independent,
                                                                                   brute):
    for inputs, expected in _small_cases(reference.__name__, 40, brute):
        torch_inputs = {k: v.to_torch() if isinstance(v, TensorValue) else v for k, v in inputs.items()}
        key = reference(**torch_inputs)["rows"][0]
        other = independent(**inputs)[0]
        for name, want in expected.items():  # float32 keys: within 1e-6 of the float64 brute force
            for got in (_plain(key[name]), _plain(other[name])):
                assert got == pytest.approx(want, rel=1e-6, abs=1e-9), (reference.__name__, inputs, name)


# Round 3: clamp_and_select L5 left only 2 of 15 elements nonzero on a panel instance; its reject
# refuses a shrunk tensor that is mostly zeros, and its sampler builds a third or more survivors.
_SHRINK_ROWS = [[4.0, 3.75, 0.5, -0.25, 1.0], [0.75, -1.0, 0.5, 0.25, 1.25], [-0.5, 1.0, 0.25, 0.75, 1.0]]
_SHRINK_MANY = [[4.0, 3.75, -3.5, 0.25, 3.0], [0.75, -3.25, 0.5, 3.5, 1.25], [-0.5, 3.0, 0.25, 4.25, 1.0]]


@pytest.mark.parametrize(("rows", "budget", "nonzero", "reason"), [
    (_SHRINK_ROWS, 3.75, 2, "only 2 of 15 elements stay nonzero: the shrunk tensor is mostly zeros"),
    (_SHRINK_MANY, 8.25, 8, None),
], ids=["two of fifteen", "eight of fifteen"])
def test_a_shrinkage_level_that_leaves_few_survivors_is_rejected(rows, budget, nonzero, reason):
    import dataclasses

    from exactgrade.family import family_of
    from exactgrade.task import materialise

    fam = family_of("pytorch", "clamp_and_select")
    definition = dataclasses.replace(fam.task("pt-test", {"x": tensor("float32", rows), "budget": budget}, 5),
                                     level=5)
    task = materialise(definition, "pytorch", "torch")
    assert task.expected["rows"][0]["nonzero"] == nonzero
    assert fam.reject(task) == reason
