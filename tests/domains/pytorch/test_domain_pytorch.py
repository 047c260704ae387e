"""The pytorch domain: task list, keys, the domain checks (each shown to catch a task built to
violate it), the independent recomputation of every key, and behaviour without torch."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from collections import Counter
from fractions import Fraction

import mpmath
import pytest

from exactgrade import compare, get_task, tasks
from exactgrade.domains import pytorch
from exactgrade.domains.pytorch.checks import HEADROOM, independent_check
from exactgrade.domains.pytorch.common import (
    CATEGORIES,
    POLICY,
    PY_FLOAT,
    TensorSpec,
    f32,
    i64,
    make_task,
    render_answer,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, hp, to_fraction, values
from exactgrade.task import Task, TaskDef, run_program
from exactgrade.values import TensorValue

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed (pip install torch==2.13.0)")

EXPECTED_COUNTS = {"tensor_ops": 16, "nn_modules": 12, "autograd": 6, "losses": 6, "optim": 5}


def materialise(definition: TaskDef) -> Task:
    """A Task from a TaskDef, computed exactly as the registry does (reference run -> wire -> key)."""
    key = run_program(definition.program, definition.inputs, "torch")
    return Task(id=definition.id, domain="pytorch", category=definition.category,
                prompt=definition.render(definition.inputs), api_description=definition.api_description,
                inputs=definition.inputs, expected=key, policy=definition.policy, program=definition.program,
                tags=definition.tags, zero_reason=definition.zero_reason, meta=definition.meta)


# ------------------------------------------------------------------------------ the task list

def test_counts_per_category_and_ids_in_category_order():
    assert Counter(d.category for d in pytorch.TASKS) == EXPECTED_COUNTS
    assert [d.id for d in pytorch.TASKS] == [f"pt-{i:03d}" for i in range(45)]
    order = [CATEGORIES.index(d.category) for d in pytorch.TASKS]
    assert order == sorted(order)
    assert pytorch.PROFILE == "torch"


def test_every_task_declares_policy_answer_and_independent_computation():
    for definition in pytorch.TASKS:
        assert definition.policy == POLICY, definition.id
        assert definition.meta["answer"], definition.id
        assert callable(definition.meta["independent"]), definition.id
        parameters = definition.reference.__code__.co_varnames[:definition.reference.__code__.co_argcount]
        assert list(definition.inputs) == list(parameters), definition.id


@needs_torch
@pytest.mark.parametrize("task_id", [d.id for d in pytorch.TASKS])
def test_task_passes_domain_check_and_is_independently_confirmed(task_id):
    task = get_task(task_id)
    assert pytorch.check(task) == []
    result = independent_check(task)
    assert result.problems == []
    assert result.used <= HEADROOM


@needs_torch
def test_prompt_shows_inputs_answer_form_and_result():
    for task in tasks("pytorch"):
        assert render_answer(task.meta["answer"]) in task.prompt, task.id
        assert "`result`" in task.prompt, task.id
        for name in task.inputs:
            assert f"`{name}`" in task.prompt, (task.id, name)
        assert "rtol=1e-05, atol=1e-07" in task.api_description


@needs_torch
def test_summary_counts_confirmed_keys():
    lines = pytorch.summary(tasks("pytorch"))
    assert lines[0] == "independently confirmed: 45/45"
    assert lines[1].startswith("largest key error: ")
    assert not any(line.startswith("not confirmed") for line in lines)


@needs_torch
def test_environment_records_the_torch_version():
    import torch

    assert pytorch.environment() == {"torch": torch.__version__}


@needs_torch
def test_a_float64_recomputation_passes_every_key():
    """The tolerance admits a correct answer computed another way: the reference run on float64 inputs."""
    checked = 0
    for task in tasks("pytorch"):  # module references build their modules in the inputs' dtype
        inputs = {name: TensorValue("float64", v.shape, v.data) if getattr(v, "dtype", "") == "float32" else v
                  for name, v in task.inputs.items()}
        verdict = compare(task.expected, run_program(task.program, inputs, "torch"), task.policy)
        assert verdict.ok, (task.id, verdict.reason)
        checked += 1
    assert checked == 45


# ------------------------------------------------- tasks built to violate each domain check

def passthrough(x):
    return {"rows": [{"y": x.clone()}]}


def log_of_negative(x):
    import torch

    return {"rows": [{"y": torch.log(x)}]}


def argsort_as_float(x):
    import torch

    return {"rows": [{"order": torch.argsort(x).float()}]}


def sample_std(x):
    return {"rows": [{"std": x.std()}]}


def nothing_selected(x):
    return {"rows": [{"y": x[x > 100.0]}]}


def unseeded_noise(x):
    import torch

    return {"rows": [{"y": x + torch.rand(x.shape)}]}


def kl_mean_reduction(x):
    import torch
    import torch.nn.functional as F

    kl = F.kl_div(torch.log_softmax(x, dim=0), torch.softmax(2 * x, dim=0), reduction="mean")
    return {"rows": [{"kl": kl}]}


def boolean_mask(x):
    return {"rows": [{"y": x > 0}]}


def doubled(x):
    return {"rows": [{"y": 2 * x}]}


def _doubled_exactly(x):
    return [{"y": ExactTensor.of("float32", [2 * e for e in values(x)])}]


def _doubled_off_by(share):
    """2x shifted by `share` of the AllClose tolerance at every element."""
    def independent(x):
        shifted = []
        for e in values(x):
            key = 2 * e
            shifted.append(key - Fraction(share) * (Fraction(POLICY.atol) + Fraction(POLICY.rtol) * abs(key)))
        return [{"y": ExactTensor.of("float32", shifted)}]
    return independent


def _population_std(x):
    v = values(x)
    m = sum(v, Fraction(0)) / len(v)
    return [{"std": ExactTensor.of("float32", mpmath.sqrt(hp(sum((e - m) ** 2 for e in v) / len(v))))}]


def _same_as_input(x):
    return [{"y": ExactTensor.of("float32", values(x))}]


def _order(x):
    v = values(x)
    return [{"order": ExactTensor.of("int64", sorted(range(len(v)), key=v.__getitem__))}]


X = tensor("float32", [1.5, -0.5, 2.25, 0.75])


def broken(reference, independent, answer, x=X):
    return materialise(make_task("pt-900", "tensor_ops", reference=reference, inputs={"x": x},
                                 question="test", answer=answer, independent=independent))


@needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # kl_mean_reduction warns by design
@pytest.mark.parametrize(("reference", "independent", "answer", "fragment"), [
    (passthrough, _same_as_input, ({"y": f32(4)},), "is the input `x` passed through"),
    (log_of_negative, _same_as_input, ({"y": f32(4)},), "holds NaN or infinity"),
    (argsort_as_float, _order, ({"order": i64(4)},),
     "rows[0]['order'] is <float32 tensor of shape (4,)> but the prompt promises <int64 tensor of shape"),
    (argsort_as_float, _order, ({"order": i64(4)},), "dtype family differs"),
    (sample_std, _population_std, ({"std": f32()},), "the independent computation disagrees"),
    (doubled, _doubled_exactly, ({"y": f32(2, 2)},), "the prompt promises <float32 tensor of shape (2, 2)>"),
    (doubled, _doubled_exactly, ({"y": f32(4)}, {"y": f32(4)}), "has 1 rows but the prompt promises 2"),
    (doubled, _doubled_exactly, ({"z": f32(4)},), "rows[0] has keys ['y'] but the prompt promises ['z']"),
    (doubled, _doubled_exactly, ({"y": PY_FLOAT},), "is <float32 tensor of shape (4,)> but the prompt"),
    (doubled, _doubled_off_by(Fraction(7, 10)), ({"y": f32(4)},), "the key uses 70% of the tolerance"),
    (doubled, _doubled_off_by(Fraction(3, 2)), ({"y": f32(4)},), "tensors are not close"),
    (nothing_selected, _same_as_input, ({"y": f32(0)},), "rows[0]['y'] is an empty tensor"),
    (unseeded_noise, _same_as_input, ({"y": f32(4)},), "different output when run again"),
    (kl_mean_reduction, _same_as_input, ({"kl": f32()},), "the reference warned: UserWarning"),
    (boolean_mask, _same_as_input, ({"y": TensorSpec("bool", (4,))},), "is a bool tensor"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_check_catches_a_task_built_to_violate_it(reference, independent, answer, fragment):
    problems = pytorch.check(broken(reference, independent, answer))
    assert any(fragment in p for p in problems), problems


@needs_torch
def test_the_correct_version_of_the_broken_tasks_passes():
    assert pytorch.check(broken(doubled, _doubled_exactly, ({"y": f32(4)},))) == []
    assert pytorch.check(broken(doubled, _doubled_off_by(Fraction(2, 5)), ({"y": f32(4)},))) == []


@needs_torch
def test_check_catches_a_key_that_does_not_survive_the_wire():
    task = broken(doubled, _doubled_exactly, ({"y": f32(4)},))
    as_tuple = dataclasses.replace(task, expected={"rows": [{"y": TensorValue("float32", (2,), (1.0, 2.0))}],
                                                   "extra": (1, 2)})
    assert pytorch.check(as_tuple) == ['the key must be a dict {"rows": [...]}']
    tuple_leaf = dataclasses.replace(task, expected={"rows": [{"y": (1.0, 2.0)}]})
    assert pytorch.check(tuple_leaf)[0] == ("rows[0]['y'] is a tuple; expected a tensor, a number or a sympy "
                                            "expression")


@needs_torch
def test_summary_names_unconfirmed_tasks():
    good = broken(doubled, _doubled_exactly, ({"y": f32(4)},))
    bad = broken(sample_std, _population_std, ({"std": f32()},))
    lines = pytorch.summary([good, bad])
    assert lines[0] == "independently confirmed: 1/2"
    assert lines[-1].startswith("not confirmed: pt-900: the independent computation disagrees with the key")


# ---------------------------------------------------------------------------- helpers

@pytest.mark.parametrize(("dtype", "nested", "message"), [
    ("float32", [0.1, 0.5], "are not finite float32 values"),  # 0.1 is not a float32 number
    ("float32", [float("nan")], "are not finite float32 values"),
    ("int64", [1, 2.0], "integer tensors need int elements"),
    ("float32", [[1.0], [2.0, 3.0]], "ragged nested list"),
    ("bool", [True], "bool input tensors are not used"),
])
def test_tensor_refuses_inputs_that_would_break_exactness(dtype, nested, message):
    with pytest.raises(ValueError, match=message):
        tensor(dtype, nested)


def test_tensor_builds_shape_and_float_elements():
    assert tensor("float32", [[1, 2], [3, 4]]) == TensorValue("float32", (2, 2), (1.0, 2.0, 3.0, 4.0))
    assert tensor("int64", [[1], [2]]) == TensorValue("int64", (2, 1), (1, 2))


def test_exact_tensor_and_to_fraction():
    assert ExactTensor.of("int64", [[Fraction(4, 2), 3]]).values == (2, 3)
    with pytest.raises(ValueError, match="needs integer values"):
        ExactTensor.of("int64", [Fraction(1, 2)])
    with mpmath.workdps(30):
        third = mpmath.mpf(1) / 3
    assert abs(to_fraction(third) - Fraction(1, 3)) < Fraction(1, 10**29)
    assert to_fraction(0.1) == Fraction(3602879701896397, 2**55)
    assert to_fraction(-mpmath.mpf(3) / 8) == Fraction(-3, 8)
    assert ExactTensor.of("float32", Fraction(1, 3)).to_tensor_value() == TensorValue("float32", (), (1 / 3,))


def test_render_answer_spells_dtype_shape_and_python_numbers():
    assert render_answer(({"y": f32(2, 3), "n": PY_FLOAT, "i": i64(4)},)) == (
        'result = {"rows": [{"y": <float32 tensor of shape (2, 3)>, "n": <Python float>, '
        '"i": <int64 tensor of shape (4,)>}]}  (a single answer row: each key holds its whole value)')
    two_rows = render_answer(({"y": i64(2)}, {"y": i64(3)}))
    assert two_rows == ('result = {"rows": [{"y": <int64 tensor of shape (2,)>}, '
                        '{"y": <int64 tensor of shape (3,)>}]}')


# ---------------------------------------------------------------------------- without torch

NO_TORCH = """
import sys
sys.modules["torch"] = None  # `import torch` now raises ImportError, as on a machine without torch
from exactgrade.domains import pytorch
from exactgrade import get_task
print(len(pytorch.TASKS))
for call in (lambda: get_task("pt-000"), pytorch.environment):
    try:
        call()
    except ImportError as error:
        print(type(error).__name__, error)
"""


def test_the_domain_imports_without_torch_and_says_how_to_install_it():
    out = subprocess.run([sys.executable, "-c", NO_TORCH], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "45"
    assert len(lines) == 3
    for line in lines[1:]:
        assert line.startswith("TorchMissing ") and "pip install torch==2.13.0" in line
