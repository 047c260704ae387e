"""The deeplearning closed forms in symbols: sgd L5's key is decided by the engine as a
function of the symbols eta and mu, so any algebraically equal form passes and each named mistake
fails, with a reason. Host-side compare only (the sandbox read-back of symbols has its own tests)."""

from __future__ import annotations

import re

import pytest
import sympy

import exactgrade
from exactgrade.compare import compare
from exactgrade.policy import Exact


def _sgd_task(nesterov: bool, decay: bool):
    """The first sgd L5 instance of seed 0 with this momentum kind and weight decay (or none)."""
    for index in range(40):
        task = exactgrade.generate("deeplearning", seed=0, index=index, level=5, family="sgd")
        if task.inputs["nesterov"] is nesterov and (task.inputs["weight_decay"] != 0) is decay:
            return task
    raise AssertionError("no such instance in the first 40")


def _parts(task):
    row = task.expected["rows"][0]
    eta, mu = task.inputs["eta"], task.inputs["mu"]
    lam = sympy.Rational(max(task.inputs["curvature"])) + sympy.Rational(task.inputs["weight_decay"])
    return row, eta, mu, lam


def _answer(task, **changed):
    row = dict(task.expected["rows"][0])
    row.update(changed)
    return {"rows": [row]}


EQUAL = {
    "loss collected by powers of eta": lambda row, eta, mu, lam: {
        "loss_after_two_steps": sympy.collect(row["loss_after_two_steps"], eta, evaluate=True)},
    "loss in Horner form": lambda row, eta, mu, lam: {
        "loss_after_two_steps": sympy.horner(row["loss_after_two_steps"], eta, mu)},
    "limit expanded over a common denominator": lambda row, eta, mu, lam: {
        "lr_limit": sympy.expand(sympy.numer(sympy.together(row["lr_limit"]))) /
        sympy.expand(sympy.denom(sympy.together(row["lr_limit"])))},
    "limit as partial fractions": lambda row, eta, mu, lam: {"lr_limit": sympy.apart(row["lr_limit"], mu)},
    "best rate or momentum times (s + 1) / (s + 1)": lambda row, eta, mu, lam: {
        _best(row): sympy.Mul(row[_best(row)], _symbol(row, eta, mu) + 1, evaluate=False) /
        (_symbol(row, eta, mu) + 1)},
}


def _best(row):
    """The field of the best rate (Nesterov, in mu) or of the best momentum (heavy ball, in eta)."""
    return "best_first_lr" if "best_first_lr" in row else "best_momentum"


def _symbol(row, eta, mu):
    return mu if _best(row) == "best_first_lr" else eta

WRONG = {
    "the heavy-ball limit for Nesterov": (lambda row, eta, mu, lam: {"lr_limit": 2 * (1 + mu) / lam}, True),
    "the Nesterov limit for heavy ball": (
        lambda row, eta, mu, lam: {"lr_limit": 2 * (1 + mu) / ((1 + 2 * mu) * lam)}, False),
    "Nesterov's first step taken as g": (
        lambda row, eta, mu, lam: {"best_first_lr": row["best_first_lr"] * (1 + mu)}, True),
    "the loss with the weight-decay term": (lambda row, eta, mu, lam: {
        "loss_after_two_steps": row["loss_after_two_steps"] + eta * mu / 1000}, True),
    "the limit in the wrong symbol": (lambda row, eta, mu, lam: {"lr_limit": row["lr_limit"].subs(mu, eta)},
                                      True),
    "heavy ball's best momentum in the wrong symbol": (
        lambda row, eta, mu, lam: {"best_momentum": row["best_momentum"].subs(eta, mu)}, False),
    "heavy ball's best momentum without its eta**2 term (the second gradient taken at w0)": (
        lambda row, eta, mu, lam: {"best_momentum": sympy.expand(row["best_momentum"] * eta).subs(
            eta**2, 0) / eta}, False),
}


@pytest.mark.parametrize("name", sorted(EQUAL))
@pytest.mark.parametrize("nesterov", [True, False])
def test_equal_forms_pass(name, nesterov):
    task = _sgd_task(nesterov, decay=True)
    changed = EQUAL[name](*_parts(task))
    verdict = compare(task.expected, _answer(task, **changed), Exact())
    assert verdict.ok, verdict.reason


@pytest.mark.parametrize("name", sorted(WRONG))
def test_named_mistakes_fail(name):
    make, nesterov = WRONG[name]
    task = _sgd_task(nesterov, decay=True)
    changed = make(*_parts(task))
    verdict = compare(task.expected, _answer(task, **changed), Exact())
    assert not verdict.ok
    field = next(iter(changed))
    assert field in verdict.reason, verdict.reason


def test_a_symbol_of_other_assumptions_fails():
    task = _sgd_task(True, decay=False)
    row, eta, mu, lam = _parts(task)
    plain_mu = sympy.Symbol("mu")  # no positivity: another symbol for the engine
    verdict = compare(task.expected, _answer(task, lr_limit=row["lr_limit"].subs(mu, plain_mu)), Exact())
    assert not verdict.ok and "mu" in verdict.reason, verdict.reason


def _schedule_task():
    return exactgrade.generate("deeplearning", seed=0, index=0, level=5, family="warmup_cosine")


def _schedule_parts(task):
    peak, low = (sympy.Rational(task.inputs[k]) for k in ("peak_lr", "min_lr"))
    return task.expected["rows"][0], task.inputs["W"], task.inputs["D"], task.inputs["T"], peak, low


SCHEDULE_EQUAL = {
    "both sums expanded": lambda row, W, D, T, peak, low: {
        "total": sympy.expand(row["total"]), "total_squares": sympy.expand(row["total_squares"])},
    "squares over a common denominator": lambda row, W, D, T, peak, low: {
        "total_squares": sympy.cancel(row["total_squares"])},
    "total written as its three stretches": lambda row, W, D, T, peak, low: {
        "total": peak * (W - 1) / 2 + (D + 1) * (peak + low) / 2 + low * (T - W - D)},
}

SCHEDULE_WRONG = {
    "the cosine over D steps, not D + 1": lambda row, W, D, T, peak, low: {
        "total": row["total"] - (peak + low) / 2},
    "the squared cosines summed to (D + 1)/2": lambda row, W, D, T, peak, low: {
        "total_squares": row["total_squares"] - (peak - low) ** 2 / 8},
    "step W counted in the warmup too": lambda row, W, D, T, peak, low: {"total": row["total"] + peak},
    "the tail after the decay forgotten": lambda row, W, D, T, peak, low: {
        "total": row["total"] - low * (T - W - D)},
}


@pytest.mark.parametrize("name", sorted(SCHEDULE_EQUAL))
def test_schedule_equal_forms_pass(name):
    task = _schedule_task()
    changed = SCHEDULE_EQUAL[name](*_schedule_parts(task))
    verdict = compare(task.expected, _answer(task, **changed), Exact())
    assert verdict.ok, verdict.reason


@pytest.mark.parametrize("name", sorted(SCHEDULE_WRONG))
def test_schedule_mistakes_fail(name):
    task = _schedule_task()
    changed = SCHEDULE_WRONG[name](*_schedule_parts(task))
    verdict = compare(task.expected, _answer(task, **changed), Exact())
    assert not verdict.ok
    assert next(iter(changed)) in verdict.reason, verdict.reason


PROMISED = re.compile(r'"(\w+)": <expression in ([\w, ]+)>')
"""A closed-form field of an answer shape and the symbols the prompt says it is a function of."""
SYMBOLIC_L5 = [("sgd", index) for index in range(8)] + [("warmup_cosine", index) for index in range(2)]


@pytest.mark.parametrize(("family", "index"), SYMBOLIC_L5)
def test_every_closed_form_depends_on_the_symbols_it_is_asked_in(family, index):
    """"As a function of mu" must mean what it says: a field whose key lacks a promised symbol is
    free of it (round 2's sgd L5 asked heavy ball's best first rate "as a function of mu", and it
    never depends on mu); the first 8 sgd instances reach both momentum kinds."""
    task = exactgrade.generate("deeplearning", seed=0, index=index, level=5, family=family)
    promised = {field: {s.strip() for s in symbols.split(",")}
                for field, symbols in PROMISED.findall(task.prompt)}
    row = task.expected["rows"][0]
    assert promised and set(promised) <= set(row)
    for field, symbols in promised.items():
        assert {s.name for s in row[field].free_symbols} == symbols, (field, row[field])


def test_the_first_sgd_instances_reach_both_momentum_kinds():
    kinds = {exactgrade.generate("deeplearning", seed=0, index=i, level=5, family="sgd").inputs["nesterov"]
             for family, i in SYMBOLIC_L5 if family == "sgd"}
    assert kinds == {True, False}


@pytest.mark.parametrize(("change", "reason"), [
    (lambda best, eta: sympy.expand(best * eta).subs(eta**2, 0) / eta, "but the vertex of f(w2) in mu is"),
    (lambda best, eta: best + 1, "but the vertex of f(w2) in mu is"),
    (lambda best, eta: best.subs(eta, sympy.Symbol("mu", positive=True)),
     "is not a rational function of eta"),
])
def test_the_check_refuses_a_wrong_best_momentum(change, reason):
    import dataclasses

    from exactgrade.domains.deeplearning import check

    task = _sgd_task(False, decay=True)
    assert check(task) == []
    row = task.expected["rows"][0]
    broken = dataclasses.replace(task, expected={"rows": [{**row, "best_momentum": change(
        row["best_momentum"], task.inputs["eta"])}]})
    assert any(reason in problem for problem in check(broken)), check(broken)
