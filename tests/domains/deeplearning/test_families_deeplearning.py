"""deeplearning-env families: every family generates at every level and its instances pass the
domain's independent checks; each check catches a broken generated instance, with its reason;
canonical tasks are family instances; streams are deterministic across processes and vary."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from fractions import Fraction as F
from functools import cache

import pytest
import sympy

import exactgrade
from exactgrade import wire
from exactgrade.domains import deeplearning
from exactgrade.domains.deeplearning import check
from exactgrade.domains.deeplearning.backprop.mlp_gradient import own_unit_range
from exactgrade.domains.deeplearning.ieee import outcome, stable_outcome
from exactgrade.family import LEVELS, family_of
from exactgrade.task import materialise
from exactgrade.verify import key_problems

FAMILIES = exactgrade.families("deeplearning")


@cache
def generated(family: str, level: int = 1, index: int = 0):
    return exactgrade.generate("deeplearning", seed=3, index=index, level=level, family=family)


def first_with_tag(family: str, tag: str, level: int = 1):
    return next(t for t in (generated(family, level, i) for i in range(40)) if tag in t.tags)


def replaced_rows(task, transform):
    """The task with its key rows passed through transform (behind the reference's back)."""
    return dataclasses.replace(task, expected={"rows": transform([dict(r) for r in task.expected["rows"]])})


def test_every_canonical_task_is_an_instance_of_one_family():
    assert FAMILIES == tuple(f.name for f in deeplearning.FAMILIES)
    assert len(FAMILIES) == len(set(FAMILIES)) == 22
    covered = {t.family for t in exactgrade.tasks("deeplearning")}
    assert covered == set(FAMILIES)
    for task in exactgrade.tasks("deeplearning"):
        rebuilt = family_of("deeplearning", task.family).task(task.id, task.inputs)
        again = materialise(rebuilt, "deeplearning", deeplearning.PROFILE)
        assert (again.prompt, wire.encode(again.expected), again.tags) == (
            task.prompt, wire.encode(task.expected), task.tags), task.id


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_and_level_generates_instances_that_pass_every_check(family, level):
    task = generated(family, level)
    assert (task.family, task.level, task.seed, task.index) == (family, level, 3, 0)
    assert task.id == f"dl-{family}-L{level}-s3-i0"
    assert check(task) == []
    assert key_problems(task) == []
    canonical = {wire.encode(dict(t.inputs)) for t in exactgrade.tasks("deeplearning")}
    assert wire.encode(dict(task.inputs)) not in canonical
    assert exactgrade.get_task(task.id) is task or wire.encode(exactgrade.get_task(task.id).expected) == \
        wire.encode(task.expected)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_level_asks_its_own_question(family):
    """The ladder adds reasoning, not size: the five levels of a family pose five different
    questions (the question text, before the preloaded variables, differs between any two levels)."""
    questions = [generated(family, level).prompt.split("Preloaded variables:")[0] for level in LEVELS]
    assert len(set(questions)) == len(LEVELS), [q[:80] for q in questions]


def test_the_exactness_line_only_where_the_answer_is_exact():
    """A categorical answer (float outcomes) is not told that every number must be exact."""
    outcomes = generated("softmax", 1)
    assert "Every number must be exact" not in outcomes.prompt
    assert "every number in the answer must be exact" not in outcomes.api_description
    assert "Every number must be exact" in generated("entropy", 1).prompt


def test_same_id_same_task_in_fresh_processes_with_other_hash_seeds():
    ids = [f"dl-{family}-L{level}-s5-i{index}" for family, level, index in
           (("entropy", 2, 0), ("mlp_gradient", 3, 1), ("sgd", 4, 2), ("rank", 2, 3), ("softmax", 5, 4))]
    program = ("import sys, exactgrade\nfrom exactgrade import wire\n"
               "for i in sys.argv[1:]:\n"
               "    t = exactgrade.get_task(i)\n"
               "    print(wire.encode([dict(t.inputs), t.expected, t.prompt]))\n")
    outputs = []
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run([sys.executable, "-c", program, *ids], env=env, capture_output=True, text=True,
                             timeout=300, check=True)
        outputs.append(run.stdout)
    here = "".join(wire.encode([dict(t.inputs), t.expected, t.prompt]) + "\n"
                   for t in map(exactgrade.get_task, ids))
    assert outputs[0] == outputs[1] == here


# ------------------------------------------------------------------ each check catches a generated break


def each_row(change):
    """A breaker that changes every key row."""
    return lambda task: replaced_rows(task, lambda rows: [change(r) for r in rows])


def _broken_cases():
    def meta(task, **changes):
        return dataclasses.replace(task, meta={**task.meta, **changes})

    def first_gradient_wrong(rows):
        rows[0]["grad"] += F(1, 3)
        return rows

    def flip_outcome(rows):
        rows[0]["outcome"] = "nan" if rows[0]["outcome"] != "nan" else "finite"
        return rows

    def bump(key):
        def change(rows):
            value = rows[-1][key]
            rows[-1][key] = [v + F(1, 7) for v in value] if isinstance(value, list) else value + F(1, 7)
            return rows
        return change

    return [
        ("entropy", lambda t: meta(t, distributions=[[F(3, 8), F(5, 8)]]), "is not dyadic"),
        ("divergence", lambda t: meta(t, distributions=[]), "is missing from meta['distributions']"),
        ("kl_asymmetry", lambda t: meta(t, kl_asymmetry={"p": [F(1, 2), F(1, 2)], "q": [F(1, 2), F(1, 2)]}),
         "the KL-asymmetry pair is symmetric"),
        ("mutual_information", lambda t: dataclasses.replace(
            t, meta={**t.meta, "joint": [[F(1, 4), F(1, 8)], [F(1, 8), F(1, 2)]]},
            inputs={**t.inputs, "joint": [[F(1, 4), F(1, 8)], [F(1, 8), F(1, 2)]]}), "marginal of A"),
        ("mutual_information", lambda t: replaced_rows(t, lambda rows: [{**rows[0], next(
            k for k in rows[0] if k.startswith("I_")): 0}]), "the mutual information must not be zero"),
        ("classification_loss", lambda t: dataclasses.replace(
            t, meta={**t.meta, "predictions": [[F(3, 8), F(5, 8)]] * len(t.meta["labels"]),
                     "labels": [0] * len(t.meta["labels"])},
            inputs={**t.inputs, "predictions": [[F(3, 8), F(5, 8)]] * len(t.meta["labels"]),
                    "labels": [0] * len(t.meta["labels"])}), "is not a power of two"),
        ("mlp_forward", lambda t: replaced_rows(t, bump("loss")), "but exactgrade.rational gives"),
        ("mlp_gradient", lambda t: replaced_rows(t, first_gradient_wrong),
         "exact symmetric finite difference"),
        ("mlp_gradient", lambda t: meta(t, fd_step=F(64)), "straddles a ReLU kink"),
        ("sgd", lambda t: replaced_rows(t, bump("w")), "the linear state map gives"),
        ("adam", lambda t: replaced_rows(t, bump("w")), "80-digit mpmath gives"),
        ("warmup_cosine", lambda t: replaced_rows(t, bump("lr")), "80-digit mpmath gives"),
        ("inverse", lambda t: replaced_rows(t, bump("det")), "differ from exactgrade.rational.matrix"),
        ("least_squares", lambda t: replaced_rows(t, bump("rss")), "differ from exactgrade.rational.matrix"),
        ("rank", lambda t: replaced_rows(t, lambda rows: [{"rank": r["rank"] + 1} for r in rows]),
         "differ from exactgrade.rational.matrix"),
        ("projection", lambda t: replaced_rows(t, bump("residual")),
         "differ from exactgrade.rational.matrix"),
        ("eigenvalues", each_row(lambda r: {"eigenvalues": r["eigenvalues"][::-1]}),
         "not in ascending order"),
        ("eigenvalues", each_row(lambda r: {"eigenvalues": [v + 1 for v in r["eigenvalues"]]}),
         "do not sum to the trace"),
        ("pca", each_row(lambda r: {**r, "eigenvalues": r["eigenvalues"][::-1]}), "not in ascending order"),
        ("softmax", lambda t: replaced_rows(t, flip_outcome), "arithmetic gives"),
        ("exp_range", lambda t: meta(t, argument={}), "meta['argument'] does not say why"),
        ("entropy", lambda t: replaced_rows(t, lambda rows: [{k: 1.75 for k in r} for r in rows]),
         "the key must be exact"),
    ]


@pytest.mark.parametrize(("family", "breaker", "reason"), _broken_cases())
def test_each_check_catches_a_broken_generated_instance(family, breaker, reason):
    task = generated(family)
    assert check(task) == []
    problems = check(breaker(task))
    assert any(reason in p for p in problems), problems


def test_identical_units_must_get_identical_gradients():
    task = first_with_tag("mlp_gradient", "symmetry")
    first, second = task.meta["equal_gradients"][0]
    rows = [{**r, "grad": r["grad"] + 1} if r["param"] == second else r for r in task.expected["rows"]]
    problems = check(dataclasses.replace(task, expected={"rows": rows}))
    assert any(f"{first} and {second} belong to identical units" in p for p in problems), problems


def test_a_non_robust_float_case_is_refused():
    task = generated("exp_range")
    edge = {"name": "edge", "format": "float32", "expr": {"op": "exp", "args": [F(88722839, 10**6)]}}
    cases = [*task.meta["float_cases"], edge]
    rows = [*task.expected["rows"], {"case": "edge", "outcome": outcome(edge["expr"], "float32")}]
    broken = dataclasses.replace(task, meta={**task.meta, "float_cases": cases,
                                             "argument": {**task.meta["argument"], "edge": "near max"}},
                                 expected={"rows": rows})
    assert any("edge): the outcome is not robust" in p for p in check(broken))


def test_family_rules_refuse_an_undeclared_zero_and_a_huge_key():
    fam = family_of("deeplearning", "inverse")
    task = generated("inverse")
    zero = replaced_rows(task, lambda rows: [{**rows[0], "det": F(0)}, *rows[1:]])
    assert fam.reject(zero) == "an exact zero in the key that the builder did not declare"
    huge = replaced_rows(task, lambda rows: [{**rows[0], "det": F(1, 10**50)}, *rows[1:]])
    assert "digits" in fam.reject(huge)
    nested = replaced_rows(task, lambda rows: [{**rows[0], "det": sympy.sqrt(sum(sympy.sqrt(n) for n in
                                                                                 range(2, 200)))}, *rows[1:]])
    assert "nodes" in fam.reject(nested)


@pytest.mark.parametrize(("expr", "fmt", "stable"), [
    ({"op": "exp", "args": [88]}, "float32", "finite"),
    ({"op": "exp", "args": [F(88722839, 10**6)]}, "float32", None),  # within a few ulps of float32 max
    ({"op": "exp", "args": [F(-1109, 64)]}, "float16", None),  # at half the smallest float16 subnormal
    ({"op": "powi", "args": [F(1, 2), 150]}, "float32", "zero"),  # an exact tie: every implementation agrees
    ({"op": "add", "args": [65504, 16]}, "float16", "inf"),
    # 1 + 2**-24 + 2**-60 is rounded to a double tie first, then to 1 in float32: single rounding
    # gives 1 + 2**-23, so the two paths disagree and the case is not robust
    ({"op": "sub", "args": [F(2**60 + 2**36 + 1, 2**60), 1]}, "float32", None),
    ({"op": "div", "args": [{"op": "exp", "args": [1000]}, {"op": "exp", "args": [999]}]}, "float64", "nan"),
])
def test_stable_outcome_marks_threshold_cases(expr, fmt, stable):
    assert stable_outcome(expr, fmt) == stable
    if stable is not None:
        assert outcome(expr, fmt) == stable


def test_the_kl_asymmetry_builder_refuses_a_symmetric_pair():
    from exactgrade.domains.deeplearning.information.kl_asymmetry import KL_ASYMMETRY

    p = [F(1, 2), F(1, 4), F(1, 8), F(1, 8)]
    with pytest.raises(ValueError, match=r"must have D\(p \|\| q\) != D\(q \|\| p\)"):
        KL_ASYMMETRY.task("dl-x", {"pairs": [{"p": p, "q": p[::-1]}, {"p": p[::-1], "q": p}], "unit": "bits"})


DIVERGENCE_L5 = range(12)


@pytest.mark.parametrize("index", DIVERGENCE_L5)
def test_divergence_l5_directions_need_their_own_derivations(index):
    """Round 2's floored model was the same in both KL directions, so half the key came free: now
    the two optimal models differ on every instance (means against geometric means of the pooled
    blocks), and the two divergences are different numbers."""
    task = exactgrade.generate("deeplearning", seed=0, index=index, level=5, family="divergence")
    row = task.expected["rows"][0]
    assert row["q_forward"] != row["q_reverse"]
    assert sympy.N(row["forward_bits"] - row["reverse_bits"], 30) != 0


def test_divergence_l5_pools_apart_in_a_share_of_instances():
    from exactgrade.domains.deeplearning.information.divergence import monotone_blocks

    tasks = [exactgrade.generate("deeplearning", seed=0, index=i, level=5, family="divergence")
             for i in DIVERGENCE_L5]
    apart = [monotone_blocks(t.inputs["data"]) for t in tasks]
    assert 6 <= sum(forward != reverse for forward, reverse in apart) <= 11  # about three quarters apart


@pytest.mark.parametrize(("name", "change", "reason"), [
    ("means in both directions", lambda row: {"q_reverse": row["q_forward"]},
     "the named mistake (means in both directions) gives q_reverse"),
    ("the data sorted", lambda row: {"q_forward": None},
     "the named mistake (the data sorted) gives q_forward"),
    ("the reverse minimum as the forward one", lambda row: {"reverse_bits": row["forward_bits"]},
     "reverse_bits is"),
    ("an increasing model", lambda row: {"q_forward": row["q_forward"][::-1]}, "not a non-increasing"),
])
def test_the_divergence_l5_check_refuses_a_broken_key(name, change, reason):
    task = exactgrade.generate("deeplearning", seed=0, index=0, level=5, family="divergence")
    row = dict(task.expected["rows"][0])
    changed = change(row)
    if changed.get("q_forward", 0) is None:
        changed["q_forward"] = sorted(task.inputs["data"], reverse=True)
    broken = dataclasses.replace(task, expected={"rows": [{**row, **changed}]})
    assert check(task) == []
    assert any(reason in problem for problem in check(broken)), check(broken)


def _mlp_gradient_l5(deeper: bool):
    """The first mlp_gradient L5 instance of seed 0 whose exact range a deeper unit ends (or the
    parameter's own unit)."""
    for index in range(12):
        task = exactgrade.generate("deeplearning", seed=0, index=index, level=5, family="mlp_gradient")
        row = task.expected["rows"][0]
        if (row["layer"] > int(task.inputs["param"][1:].split("[")[0])) is deeper:
            return task
    raise AssertionError("no such instance in the first 12")


@pytest.mark.parametrize(("deeper", "change", "reason"), [
    (True, lambda t, row: {"H": row["H"] / 2}, "stays exact just past"),
    (True, lambda t, row: {"H": row["H"] * 2}, "is not at 0"),
    (True, lambda t, row: {"H": own_unit_range(t.inputs)}, "the symmetric difference at h ="),
    (False, lambda t, row: {"side": "-" if row["side"] == "+" else "+"}, "is not at 0"),
    (False, lambda t, row: {"example": (row["example"] + 1) % len(t.inputs["batch"])}, "is not at 0"),
    (False, lambda t, row: {"grad": row["grad"] + F(1, 1024)}, "exactgrade.rational's backprop gives"),
])
def test_the_mlp_gradient_l5_check_refuses_a_broken_key(deeper, change, reason):
    """Round 1's L5 asked which of the steps 2**-k is exact (a brute force over a stated grid); the
    range is now continuous, so H is a rational at a piece boundary, which a later layer's unit
    sets in about half the instances (there the parameter's own unit gives a wrong, larger H)."""
    task = _mlp_gradient_l5(deeper)
    row = dict(task.expected["rows"][0])
    assert check(task) == []
    broken = dataclasses.replace(task, expected={"rows": [{**row, **change(task, row)}]})
    assert any(reason in problem for problem in check(broken)), check(broken)


# ------------------------------------------------------------------ the fast paths agree with the slow ones


@pytest.mark.parametrize(("value", "is_zero"), [
    (sympy.sqrt(2) - 1, False),
    (7 * sympy.log(2) / 4, False),
    (sympy.Integer(2) ** sympy.Rational(7, 3), False),
    (sympy.Rational(3, 2) - sympy.sqrt(5) / 2, False),
    (sympy.Integer(0), True),
    # zero, but not written as 0: evalf cannot settle it, so sympy's is_zero decides (as in verify)
    (sympy.sqrt(5 + 2 * sympy.sqrt(6)) - sympy.sqrt(2) - sympy.sqrt(3), True),
    (sympy.cos(sympy.pi / 5) - (1 + sympy.sqrt(5)) / 4, True),
])
def test_the_declared_zero_rule_finds_the_zeros_verify_finds(value, is_zero):
    from exactgrade.domains.deeplearning._family import _has_zero
    from exactgrade.verify import zero_paths

    key = {"rows": [{"a": F(1, 2), "b": value}]}
    assert _has_zero(key) is is_zero
    assert bool(zero_paths(key)) is is_zero


def test_the_kl_asymmetry_prescreen_agrees_with_exact_kl():
    from exactgrade.domains.deeplearning.information.kl_asymmetry import _asymmetric
    from exactgrade.domains.deeplearning.information.shared import dyadic_distribution
    from exactgrade.family import Draw
    from exactgrade.rational import kl_bits

    pairs = []
    for i in range(300):
        draw = Draw(f"kl-prescreen-{i}")
        n = draw.integer(2, 10)
        pairs.append((dyadic_distribution(draw, n), dyadic_distribution(draw, n)))
    verdicts = [(_asymmetric(p, q), kl_bits(p, q) != kl_bits(q, p)) for p, q in pairs]
    assert all(fast == exact for fast, exact in verdicts)
    assert {fast for fast, _ in verdicts} == {True, False}  # both kinds occur


def test_sampler_matrix_products_equal_exactgrade_rational():
    from exactgrade.domains.deeplearning.linalg.shared import _matmul
    from exactgrade.family import Draw
    from exactgrade.rational import matmul

    for i in range(100):
        draw = Draw(f"matmul-{i}")
        m, k, n = draw.integer(1, 4), draw.integer(1, 4), draw.integer(1, 4)
        a = [[draw.dyadic(-3, 3, draw.integer(0, 3)) / draw.integer(1, 7) for _ in range(k)]
             for _ in range(m)]
        b = [[draw.integer(-3, 3) for _ in range(n)] for _ in range(k)]
        assert _matmul(a, b) == [list(row) for row in matmul(a, b)]


@pytest.mark.parametrize(("q", "square"), [(F(0), True), (F(9, 4), True), (F(2), False), (F(1, 2), False),
                                           (F(-4), False), (F(49, 36), True), (F(12, 3), True)])
def test_rational_squares(q, square):
    from exactgrade.domains.deeplearning.linalg.shared import is_rational_square

    assert is_rational_square(q) is square


@pytest.mark.parametrize("level", LEVELS)
def test_linalg_samplers_build_the_property_instead_of_rejecting_it(level):
    """Sampled inputs already have what the key rules demand: non-singular symmetric matrices
    with an irrational eigenvalue, projections and residuals without a zero coordinate."""
    from exactgrade.domains.deeplearning.linalg.eigenvalues import sample_eigenvalues
    from exactgrade.domains.deeplearning.linalg.projection import sample_projection
    from exactgrade.family import Draw, Reject
    from exactgrade.rational import determinant, matmul, matvec, solve, transpose

    for i in range(6):
        try:
            matrices = sample_eigenvalues(Draw(f"eig-{level}-{i}"), level)["matrices"]
        except Reject:
            continue
        for m in matrices:
            assert determinant(m) != 0
            assert not all(v.is_rational for v in sympy.Matrix(m).eigenvals())
        projection = sample_projection(Draw(f"proj-{level}-{i}"), level)
        a = projection["A"]
        for v in projection["vectors"]:
            projected = matvec(a, solve(matmul(transpose(a), a), matvec(transpose(a), v)))
            assert all(p != 0 and p != x for p, x in zip(projected, v, strict=True))
