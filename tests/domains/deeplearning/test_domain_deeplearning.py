"""deeplearning-env: the 36 tasks materialise exactly as the issue counts them, and every domain
check catches a task built to violate it, with the right reason."""

from __future__ import annotations

import dataclasses
from collections import Counter
from fractions import Fraction as F
from typing import Any

import pytest
import sympy

import exactgrade
from exactgrade import compare
from exactgrade.domains import deeplearning
from exactgrade.domains.deeplearning import check
from exactgrade.domains.deeplearning.ieee import outcome
from exactgrade.domains.deeplearning.numerical.shared import float_outcome_rows
from exactgrade.policy import Exact
from exactgrade.task import Task, TaskDef, materialise
from exactgrade.verify import iter_leaves

TASKS = {task.id: task for task in exactgrade.tasks("deeplearning")}
DEFINITIONS = {definition.id: definition for definition in deeplearning.TASKS}


def leaves(value: Any):
    """Every non-container value in a key (the walk verify itself uses)."""
    return (leaf for _, leaf in iter_leaves(value))


def build(definition: TaskDef, **changes: Any) -> Task:
    return materialise(dataclasses.replace(definition, **changes), "deeplearning", deeplearning.PROFILE)


def broken(task_id: str, **changes: Any) -> Task:
    """A materialised task with some fields replaced (meta, expected) behind the reference's back."""
    return dataclasses.replace(TASKS[task_id], **changes)


# ------------------------------------------------------------------------------ the task set

def test_ids_counts_and_order():
    assert list(TASKS) == [f"dl-{n:03d}" for n in range(36)]
    assert Counter(t.category for t in TASKS.values()) == deeplearning.CATEGORY_COUNTS
    assert deeplearning.CATEGORY_COUNTS == {"information": 9, "backprop": 8, "optimisation": 7, "linalg": 6,
                                            "numerical": 6}
    order = [t.category for t in TASKS.values()]
    assert order == sorted(order, key=list(deeplearning.CATEGORY_COUNTS).index)
    assert deeplearning.PROFILE == "python"


@pytest.mark.parametrize("task_id", list(TASKS))
def test_every_task_passes_its_checks_and_is_exact(task_id):
    task = TASKS[task_id]
    assert check(task) == []
    assert task.policy == Exact()
    assert isinstance(task.expected, dict) and list(task.expected) == ["rows"] and task.expected["rows"]
    for leaf in leaves(task.expected):
        assert type(leaf) is not float
        if isinstance(leaf, sympy.Basic):
            assert not leaf.atoms(sympy.Float)
        assert type(leaf) in (int, F, str, bool) or isinstance(leaf, sympy.Expr), type(leaf)
    assert compare(task.expected, task.expected).ok


@pytest.mark.parametrize("task_id", list(TASKS))
def test_prompt_names_result_and_every_input(task_id):
    task = TASKS[task_id]
    assert "`result`" in task.prompt and '{"rows":' in task.prompt
    for name in task.inputs:
        assert f"`{name}`" in task.prompt
    if task.category == "numerical":  # categorical answers: no exactness rules for numbers
        assert "strings must match exactly" in task.api_description
        assert "Every number must be exact" not in task.prompt
    else:
        assert "never accepted" in task.api_description and "float" in task.api_description
    assert "Units:" in task.prompt


def test_at_least_two_nat_tasks_and_nats_for_bits_fails():
    nat_tasks = [t for t in TASKS.values() if "nats" in t.tags]
    assert len(nat_tasks) >= 2
    task = TASKS["dl-001"]
    assert task.expected["rows"][0]["H_nats"] == 7 * sympy.log(2) / 4
    as_bits = {"rows": [{"H_nats": F(7, 4)}, {"H_nats": F(2)}, {"H_nats": F(2)}]}
    verdict = compare(task.expected, as_bits)
    assert not verdict.ok and "rows[0]['H_nats']" in verdict.reason


def test_headline_values():
    assert TASKS["dl-000"].expected["rows"][0] == {"H_bits": F(7, 4)}
    kl = [row["KL_bits"] for row in TASKS["dl-003"].expected["rows"]]
    assert kl == [F(1, 2), F(5, 8)]
    invertible, merging = TASKS["dl-005"].expected["rows"][0], TASKS["dl-006"].expected["rows"][0]
    assert invertible["I_bits"] == invertible["H_A_bits"] and invertible["H_A_given_B_bits"] == 0
    assert merging["I_bits"] == merging["H_B_bits"] < merging["H_A_bits"]
    adam = TASKS["dl-021"].expected["rows"][0]["w"]
    assert adam == [F(9, 10), F(9, 10)]  # gradients 1 and 100 move by the same lr
    outcomes = {row["case"]: row["outcome"] for row in TASKS["dl-035"].expected["rows"]}
    assert outcomes["max_plus_15_f16"] == "finite" and outcomes["max_plus_16_f16"] == "inf"


def test_zero_values_are_declared():
    for task in TASKS.values():
        numbers = [x for x in leaves(task.expected) if type(x) in (int, F) or isinstance(x, sympy.Expr)]
        if any(x == 0 for x in numbers if not isinstance(x, bool)):
            assert task.zero_reason, task.id


# ---------------------------------------------------------------------- each check catches a violation

NON_DYADIC = [F(3, 8), F(5, 8)]
SYMMETRIC_P = [F(1, 2), F(1, 4), F(1, 8), F(1, 8)]
UNIFORM4 = [F(1, 4)] * 4


def _wrong_gradient_rows(network, batch, wrt):
    """A buggy backprop: claims every gradient is 1/3."""
    from fractions import Fraction

    rows = []
    for name in wrt:
        rows.append({"param": name, "grad": Fraction(1, 3)})
    return {"rows": rows}


def _float_entropy_rows(distributions, unit):
    import math

    return {"rows": [{"H_bits": -sum(p * math.log2(p) for p in map(float, d))} for d in distributions]}


def _sgd_ignoring_nesterov(curvature, center, w0, lr, momentum, nesterov, weight_decay, steps):
    """A plausible slip: Nesterov silently run as heavy-ball momentum."""
    from exactgrade.domains.deeplearning.optimisation.sgd import sgd_trajectory

    return sgd_trajectory(curvature, center, w0, lr, momentum, False, weight_decay, steps)


def _adam_without_bias_correction(curvature, center, w0, lr, beta1, beta2, eps, steps):
    """A plausible slip: Adam without m_hat and v_hat."""
    from fractions import Fraction

    import sympy

    def exact(q):
        return sympy.Rational(Fraction(q).numerator, Fraction(q).denominator)

    a, c, w = [exact(x) for x in curvature], [exact(x) for x in center], [exact(x) for x in w0]
    m, v, rows = [0] * len(w), [0] * len(w), []
    for t in range(1, steps + 1):
        g = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
        m = [exact(beta1) * mi + (1 - exact(beta1)) * gi for mi, gi in zip(m, g, strict=True)]
        v = [exact(beta2) * vi + (1 - exact(beta2)) * gi**2 for vi, gi in zip(v, g, strict=True)]
        w = [wi - exact(lr) * mi / (sympy.sqrt(vi) + exact(eps)) for wi, mi, vi in zip(w, m, v, strict=True)]
        rows.append({"step": t, "w": w})
    return {"rows": rows}


def _schedule_warmup_off_by_one(peak_lr, min_lr, warmup_steps, decay_steps, steps):
    from exactgrade.domains.deeplearning.optimisation.warmup_cosine import warmup_cosine_rows

    return warmup_cosine_rows(peak_lr, min_lr, warmup_steps + 1, decay_steps, steps)


@pytest.mark.parametrize(("make", "reason"), [
    # every distribution is dyadic
    (lambda: broken("dl-000", meta={"distributions": [NON_DYADIC]}),
     "distribution 0 [3/8, 5/8] is not dyadic: 3/8 is not a power of two"),
    (lambda: broken("dl-000", meta={"distributions": [[F(1, 2), F(1, 4)]]}), "sum to 3/4, not exactly 1"),
    # every marginal used in a log is dyadic (the cells are)
    (lambda: broken("dl-006", meta={"joint": [[F(1, 4), F(1, 8)], [F(1, 8), F(1, 2)]]}),
     "marginal of A [3/8, 5/8] is not dyadic"),
    # the KL-asymmetry pair differs: a reversed distribution is structurally symmetric
    (lambda: broken("dl-003", meta={**TASKS["dl-003"].meta,
                                    "kl_asymmetry": {"p": SYMMETRIC_P, "q": SYMMETRIC_P[::-1]}}),
     "the KL-asymmetry pair is symmetric: D(p || q) = D(q || p) = 7/8 bits"),
    (lambda: broken("dl-003", expected={"rows": [{"KL_bits": F(1, 2)}, {"KL_bits": F(1, 2)}]}),
     "do not differ"),
    # mutual-information tasks are not identically zero
    (lambda: build(DEFINITIONS["dl-006"], inputs={"joint": [[F(1, 4)] * 2] * 2, "unit": "bits"},
                   meta={"joint": [[F(1, 4)] * 2] * 2, "mutual_information": True}),
     "I(A; B) is identically zero"),
    (lambda: broken("dl-008", expected={"rows": [{**TASKS["dl-008"].expected["rows"][0], "I_nats": 0}]}),
     "rows[0]['I_nats'] is 0"),
    (lambda: broken("dl-008", expected={"rows": [{**TASKS["dl-008"].expected["rows"][0],
                                                  "I_nats": F(3, 2)}]}),
     "rows[0]['I_nats'] is 3/2 but exactgrade.rational gives 3*log(2)/2"),
    # every gradient matches its exact finite difference
    (lambda: build(DEFINITIONS["dl-010"], reference=_wrong_gradient_rows),
     "rows[0]['grad'] for W1[0][0] is 1/3 but the exact symmetric finite difference (h = 1/1024) is -5/4"),
    (lambda: build(DEFINITIONS["dl-011"], meta={**DEFINITIONS["dl-011"].meta, "fd_step": F(1)}),
     "straddles a ReLU kink"),
    (lambda: broken("dl-010", meta={**TASKS["dl-010"].meta, "gradients_at": ["b2[0]"]}),
     "but meta['gradients_at'] is ['b2[0]']"),
    # a gradient at a kink (pre-activation exactly 0) has no finite difference to match
    (lambda: build(DEFINITIONS["dl-012"],
                   inputs={**DEFINITIONS["dl-012"].inputs, "batch": [{"x": [1, 0, F(9, 8)], "t": [F(1, 4)]}]},
                   meta={**DEFINITIONS["dl-012"].meta, "batch": [{"x": [1, 0, F(9, 8)], "t": [F(1, 4)]}]}),
     "finite difference refused"),
    (lambda: broken("dl-009", expected={"rows": [{**TASKS["dl-009"].expected["rows"][0], "loss": F(1, 16)},
                                                 TASKS["dl-009"].expected["rows"][1]]}),
     "rows[0]['loss'] is 1/16 but exactgrade.rational gives 1/32"),
    # no float anywhere in expected
    (lambda: build(DEFINITIONS["dl-000"], reference=_float_entropy_rows),
     "float 1.75 at rows[0]['H_bits']: the key must be exact"),
    (lambda: broken("dl-022", expected={"rows": [{"w": [sympy.Float(0.5) * sympy.sqrt(2)]}]}),
     "sympy Float inside rows[0]['w'][0]"),
    # float outcomes agree with numpy and are argued
    (lambda: broken("dl-035", expected={"rows": [
        {**row, "outcome": "finite"} if row["case"] == "max_plus_16_f16" else row
        for row in TASKS["dl-035"].expected["rows"]]}),
     "rows[1] (max_plus_16_f16): the key says 'finite' but numpy float16 arithmetic gives 'inf'"),
    (lambda: broken("dl-030", meta={**TASKS["dl-030"].meta, "argument": {}}),
     "rows[0] (exp88_f32): meta['argument'] does not say why"),
    # rational linear algebra agrees with Gauss-Jordan; eigenvalues with trace and determinant
    (lambda: broken("dl-024", expected={"rows": [{**TASKS["dl-024"].expected["rows"][0], "det": F(17)},
                                                 TASKS["dl-024"].expected["rows"][1]]}),
     "differ from exactgrade.rational.matrix"),
    (lambda: broken("dl-028", expected={"rows": [{"eigenvalues": [1, 3]},
                                                 *TASKS["dl-028"].expected["rows"][1:]]}),
     "rows[0]: the eigenvalues do not sum to the trace 3"),
    (lambda: broken("dl-028", expected={"rows": [{"eigenvalues": row["eigenvalues"][::-1]}
                                                 for row in TASKS["dl-028"].expected["rows"]]}),
     "not in ascending order"),
    # optimiser trajectories agree with an independent recomputation
    (lambda: build(DEFINITIONS["dl-019"], reference=_sgd_ignoring_nesterov),
     "but the linear state map gives w = [1963/800, -359/400], loss = 275893/256000"),
    (lambda: build(DEFINITIONS["dl-022"], reference=_adam_without_bias_correction),
     "rows[0]['w']: the key is 2.6837722589831600904 but 80-digit mpmath gives 2.9000000002499999994"),
    (lambda: build(DEFINITIONS["dl-023"], reference=_schedule_warmup_off_by_one),
     "rows[0]['lr']: the key is 0.0006 but 80-digit mpmath gives 0.00075"),
    # meta (what the checks read) describes the inputs (what the reference is given)
    (lambda: broken("dl-002", meta={"distributions": [UNIFORM4]}),
     "input distribution [1/2, 1/4, 1/8, 1/8] is missing from meta['distributions']"),
    (lambda: broken("dl-010", inputs={**TASKS["dl-010"].inputs, "batch": [{"x": [1, 1], "t": [1]}]}),
     "meta['batch'] differs from inputs['batch']"),
    (lambda: broken("dl-000", category="vision"), "unknown category 'vision'"),
    # a category's check cannot be skipped by leaving meta out
    (lambda: broken("dl-017", meta={}), "this optimisation task needs meta['independent']"),
    (lambda: broken("dl-013", meta={}),
     "this backprop task needs meta['independent']"),
    (lambda: broken("dl-031", meta={}), "this numerical task needs meta['independent']"),
])
def test_check_catches(make, reason):
    problems = check(make())
    assert any(reason in p for p in problems), problems


# ------------------------------------------------------------------------------ numerical semantics

@pytest.mark.parametrize(("expr", "fmt", "category"), [
    ({"op": "exp", "args": [710]}, "float64", "inf"),
    ({"op": "log", "args": [0]}, "float32", "inf"),
    ({"op": "log", "args": [-1]}, "float64", "nan"),
    ({"op": "div", "args": [0, 0]}, "float16", "nan"),
    ({"op": "div", "args": [1, 0]}, "float16", "inf"),
    ({"op": "mul", "args": [0, {"op": "exp", "args": [1000]}]}, "float64", "nan"),
    ({"op": "powi", "args": [F(1, 2), 150]}, "float32", "zero"),
    ({"op": "add", "args": [65504, 16]}, "float16", "inf"),
    ({"op": "max", "args": [1, {"op": "div", "args": [0, 0]}]}, "float64", "nan"),
])
def test_reference_and_numpy_agree_on_ieee_semantics(expr, fmt, category):
    reference = float_outcome_rows
    rows = reference([{"name": "case", "format": fmt, "expr": expr}])["rows"]
    assert rows == [{"case": "case", "outcome": category}]
    assert outcome(expr, fmt) == category
