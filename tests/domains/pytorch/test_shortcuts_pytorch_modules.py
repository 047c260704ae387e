"""The shortcut rules of the pytorch families of nn_modules, losses and optim, for every level: no
varying field constant within an instance, no instance its own reject test refuses, every branch
reached by its stated share (tests/shortcut_rules.py counts; the rules are stated on each Family).
EXACTGRADE_RULE_INSTANCES=200 runs the full check; the suite default keeps this file near a minute."""

from __future__ import annotations

import importlib.util

import pytest
from shortcut_rules import instances, pytorch_suite_count, rule_problems

from exactgrade.family import LEVELS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch==2.13.0)")

SUITE_DEFAULT = 3


def _names() -> tuple[str, ...]:
    if importlib.util.find_spec("torch") is None:
        return ()
    from exactgrade.domains.pytorch import losses, nn_modules, optim

    return tuple(f.name for module in (nn_modules, losses, optim) for f in module.FAMILIES)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", _names())
def test_generated_instances_keep_the_family_rules(name, level):
    assert rule_problems("pytorch", name, level, instances(pytorch_suite_count(level, SUITE_DEFAULT))) == []


# sgd_momentum_steps L5 is a closed form in lr, graded by the engine's symbolic decision.
@pytest.fixture(scope="module")
def lr_task():
    from exactgrade.family import generate

    return generate("pytorch", seed=2, index=0, level=5, family="sgd_momentum_steps")


def _rewritten(how):
    import sympy

    return {"horner": sympy.horner, "factored": sympy.factor, "as is": lambda e: e,
            "reassociated": lambda e: sympy.Add(*reversed(sympy.Add.make_args(e)), evaluate=False)}[how]


@pytest.mark.parametrize("how", ["as is", "horner", "factored", "reassociated"])
def test_an_equal_form_of_the_lr_polynomials_passes(lr_task, how):
    from exactgrade.compare import compare

    row = {key: _rewritten(how)(value) for key, value in lr_task.expected["rows"][0].items()}
    verdict = compare(lr_task.expected, {"rows": [row]}, lr_task.policy)
    assert (verdict.ok, verdict.reason) == (True, "")


@pytest.mark.parametrize(("answer", "path", "reason"), [
    ("first_step_dampened", "bias", "they differ at lr="),
    ("bias_decayed", "bias", "they differ at lr="),
    ("positive symbol", "bias", "symbol lr has assumptions (positive) other than the reference's"),
    ("other symbol", "bias", "eta"),
    ("number at lr=1/3", "bias", "they differ at lr="),
    ("float loss", "loss", "an expression in symbols only equals an exact value"),
])
def test_a_wrong_lr_polynomial_fails_with_its_reason(lr_task, answer, path, reason):
    import sympy

    from exactgrade.compare import compare
    from exactgrade.domains.pytorch.optim.sgd_momentum_steps import _momentum_lr_polynomial

    lr, row = lr_task.inputs["lr"], dict(lr_task.expected["rows"][0])
    if answer in ("first_step_dampened", "bias_decayed"):
        row = _momentum_lr_polynomial(**lr_task.inputs, mistake=answer)[0]
    elif answer == "positive symbol":
        row = {k: e.subs(lr, sympy.Symbol("lr", positive=True)) for k, e in row.items()}
    elif answer == "other symbol":
        row = {k: e.subs(lr, sympy.Symbol("eta", real=True)) for k, e in row.items()}
    elif answer == "number at lr=1/3":
        row = {k: e.subs(lr, sympy.Rational(1, 3)) for k, e in row.items()}
    else:
        row["loss"] = float(row["loss"].subs(lr, sympy.Rational(1, 10)))
    verdict = compare(lr_task.expected, {"rows": [row]}, lr_task.policy)
    assert verdict.ok is False
    assert verdict.path == ("rows", 0, path)
    assert reason in verdict.reason


def test_the_lr_task_is_graded_exactly_and_its_key_is_checked(lr_task):
    from exactgrade.domains.pytorch.checks import check
    from exactgrade.policy import Exact

    assert type(lr_task.policy) is Exact
    assert "Grading (exact, as functions of the symbols)" in lr_task.api_description
    assert "AllClose" not in lr_task.api_description
    assert check(lr_task) == []


@pytest.mark.parametrize(("leaf", "problem"), [
    ("extra symbol", "has free symbols ['eta'] beyond the declared ['lr']"),
    ("constant", "is a constant, but the prompt promises <sympy expression in lr>"),
    ("float", "is a Python float but the prompt promises <sympy expression in lr>"),
])
def test_the_domain_check_refuses_a_malformed_symbolic_key(lr_task, leaf, problem):
    import dataclasses

    import sympy

    from exactgrade.domains.pytorch.checks import check

    row = dict(lr_task.expected["rows"][0])
    row["bias"] = {"extra symbol": row["bias"] + sympy.Symbol("eta"), "constant": sympy.Rational(1, 3),
                   "float": 0.5}[leaf]
    broken = dataclasses.replace(lr_task, expected={"rows": [row]})
    assert any(problem in line for line in check(broken)), check(broken)


# Round 3: a scalar key field with one value on most instances answers itself (sgd_schedule_clipping
# L5 asked `clipped_at_half`, 1 on most instances; it now asks the loss that run ends at).
@pytest.mark.parametrize(("name", "level", "field"), [
    ("sgd_schedule_clipping", 5, "binding_step"),
    ("sgd_schedule_clipping", 5, "loss_at_half"),
])
def test_no_scalar_key_field_takes_one_value_on_most_instances(name, level, field):
    from collections import Counter

    from shortcut_rules import RULE_SEED

    from exactgrade.family import generate

    tasks = [generate("pytorch", seed=RULE_SEED, index=index, level=level, family=name)
             for index in range(instances(2 * SUITE_DEFAULT))]
    keys = [task.expected["rows"][0][field] for task in tasks]
    value, most = Counter(keys).most_common(1)[0]
    assert 2 * most <= len(keys), f"{field} is {value} on {most} of {len(keys)} instances"


@pytest.mark.parametrize(("mistake", "fields"), [
    ("the half-threshold run left unclipped", {"loss_at_half": "final_loss"}),
    ("the first gradient's norm taken as the threshold", {"binding_step": 0}),
])
def test_a_named_mistake_of_the_clip_boundary_fails(mistake, fields):
    from exactgrade.compare import compare
    from exactgrade.family import generate

    task = generate("pytorch", seed=2, index=0, level=5, family="sgd_schedule_clipping")
    row = dict(task.expected["rows"][0])
    for field, source in fields.items():
        row[field] = row[source] if isinstance(source, str) else source
    verdict = compare(task.expected, {"rows": [row]}, task.policy)
    assert verdict.ok is False, mistake
    assert verdict.path == ("rows", 0, next(iter(fields)))
