"""The task model: TaskDef.program, run_program, materialise, tasks() and get_task()."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from exactgrade import get_task, wire
from exactgrade.policy import Exact
from exactgrade.task import (
    DOMAINS,
    ID_PREFIX,
    Task,
    TaskDef,
    UnknownTask,
    materialise,
    preload,
    run_program,
    task_defs,
    tasks,
    uses,
)
from exactgrade.values import TensorValue


def mean_of(values, weight):
    from fractions import Fraction

    total = sum(values, Fraction(0))
    return {"rows": [{"mean": total / len(values) * weight, "pair": (1, 2)}]}


DEFINITION = TaskDef(
    id="t-000",
    category="test",
    inputs={"values": [Fraction(1, 2), Fraction(1, 3)], "weight": 3},
    reference=mean_of,
    render=lambda inputs: f"Average {inputs['values']} times {inputs['weight']}; leave it in `result`.",
    api_description="exact arithmetic",
    policy=Exact(),
    tags=("demo",),
    meta={"note": 1},
)


def test_program_is_the_reference_source_plus_the_call():
    program = DEFINITION.program
    assert program.startswith("def mean_of(values, weight):\n    from fractions import Fraction\n")
    assert program.endswith("\n\n\nresult = mean_of(values=values, weight=weight)\n")


def halve(x):
    from fractions import Fraction

    return Fraction(x, 2)


@uses(halve)
def quarter(x):
    return halve(halve(x))


@uses(halve, quarter)
def eighth_rows(x):
    return {"rows": [{"eighth": halve(quarter(x))}]}


def test_a_reference_that_uses_helpers_defines_each_once_before_itself_without_the_mark():
    definition = dataclasses.replace(DEFINITION, inputs={"x": 3}, reference=eighth_rows)
    program = definition.program
    assert "@uses" not in program
    assert program.count("def halve(") == 1 and program.count("def quarter(") == 1
    assert program.index("def halve(") < program.index("def quarter(") < program.index("def eighth_rows(")
    assert run_program(program, definition.inputs) == {"rows": [{"eighth": Fraction(3, 8)}]}


def test_run_program_returns_the_wire_round_tripped_result():
    result = run_program(DEFINITION.program, DEFINITION.inputs)
    assert result == {"rows": [{"mean": Fraction(5, 4), "pair": [1, 2]}]}
    assert type(result["rows"][0]["mean"]) is Fraction
    assert type(result["rows"][0]["pair"]) is list  # tuples cross the wire as lists


@pytest.mark.parametrize(("program", "error", "message"), [
    ("x = 1\n", ValueError, "did not set `result`"),
    ("result = {1, 2}\n", wire.WireError, "cannot encode a value of type builtins.set"),
    ("result = 1 / 0\n", ZeroDivisionError, "division by zero"),
])
def test_run_program_errors(program, error, message):
    with pytest.raises(error, match=message):
        run_program(program, {})


def test_preload_rejects_an_unknown_profile():
    with pytest.raises(ValueError, match="unknown sandbox profile 'numpy'"):
        preload({}, "numpy")


def test_preload_torch_profile_turns_tensor_values_into_tensors():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    value = TensorValue("float32", (2,), (1.0, 2.0))
    namespace = preload({"x": value, "xs": [value], "n": 3}, "torch")
    assert isinstance(namespace["x"], torch.Tensor) and namespace["x"].dtype == torch.float32
    assert isinstance(namespace["xs"][0], torch.Tensor)
    assert namespace["n"] == 3 and namespace["__name__"] == "__main__"


def test_materialise_runs_the_reference_and_copies_the_fields():
    task = materialise(DEFINITION, "scaling", "python")
    assert task.expected == {"rows": [{"mean": Fraction(5, 4), "pair": [1, 2]}]}
    assert task.prompt == "Average [Fraction(1, 2), Fraction(1, 3)] times 3; leave it in `result`."
    assert (task.id, task.domain, task.category, task.tags, task.meta) == ("t-000", "scaling", "test",
                                                                           ("demo",), {"note": 1})
    assert task.program == DEFINITION.program and task.policy == Exact()
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.prompt = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_tasks_of_a_domain_match_their_definitions(domain):
    if domain == "pytorch":
        pytest.importorskip("torch", reason="torch is not installed")
    materialised = tasks(domain)
    assert [t.id for t in materialised] == [d.id for d in task_defs(domain)]
    assert all(type(t) is Task and t.domain == domain for t in materialised)
    assert all(t.id.startswith(ID_PREFIX[domain] + "-") for t in materialised)
    first = materialised[0]
    assert get_task(first.id) is first  # cached: the key is computed once per process


def test_tasks_without_a_domain_is_every_domain_in_order():
    pytest.importorskip("torch", reason="torch is not installed")
    assert [t.id for t in tasks()] == [t.id for d in DOMAINS for t in tasks(d)]


@pytest.mark.parametrize("task_id", ["dl-999", "sc-9999", "xx-000", "", "sc"])
def test_get_task_rejects_unknown_ids(task_id):
    with pytest.raises(UnknownTask, match="ids look like dl-000"):
        get_task(task_id)
    assert issubclass(UnknownTask, KeyError)


def test_tasks_rejects_an_unknown_domain():
    with pytest.raises(ValueError, match="unknown domain 'chemistry'"):
        tasks("chemistry")
