"""scaling-env: every answer key against an independently written float formula, the grading
contract of the issue (reassociated floats pass, a dropped factor or 1e-6 fails), and the domain
checks catching what they exist to catch."""

from __future__ import annotations

import dataclasses
from collections import Counter
from fractions import Fraction
from typing import Any

import pytest

from exactgrade import compare, get_task
from exactgrade.domains import scaling
from exactgrade.domains.scaling._task import as_floats, known_mistake
from exactgrade.domains.scaling._text import api_description, renderer
from exactgrade.domains.scaling.checks import HEADLINES, missing_headlines, task_problems
from exactgrade.policy import RelTol
from exactgrade.task import Task, TaskDef

IDS = [definition.id for definition in scaling.TASKS]
DEFINITIONS = {definition.id: definition for definition in scaling.TASKS}


def float_answer(task_id: str, mistake: str | None = None) -> Any:
    definition = DEFINITIONS[task_id]
    return definition.meta["independent"](**as_floats(dict(definition.inputs)), mistake=mistake)


def paired_leaves(expected: Any, actual: Any, path: str = "result"):
    if isinstance(expected, dict):
        for key in expected:
            yield from paired_leaves(expected[key], actual[key], f"{path}[{key!r}]")
    elif isinstance(expected, list):
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            yield from paired_leaves(e, a, f"{path}[{index}]")
    else:
        yield path, expected, actual


def scaled_first_number(answer: Any, factor: float) -> Any:
    """A copy of a float answer with its first float leaf multiplied by factor."""
    done = False

    def walk(value: Any) -> Any:
        nonlocal done
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if type(value) is float and not done:
            done = True
            return value * factor
        return value

    scaled = walk(answer)
    assert done, "the answer has no float to perturb"
    return scaled


# ------------------------------------------------------------------------ registry shape


def test_thirty_five_tasks_in_category_order():
    assert IDS == [f"sc-{i:03d}" for i in range(35)]
    assert Counter(d.category for d in scaling.TASKS) == {
        "roofline": 7, "flops": 8, "memory": 6, "sharding": 7, "inference": 7}
    categories = [d.category for d in scaling.TASKS]
    order = ["roofline", "flops", "memory", "sharding", "inference"]
    assert categories == sorted(categories, key=order.index)
    assert scaling.PROFILE == "python"


def test_references_are_shared_between_tasks():
    uses = Counter(d.reference.__name__ for d in scaling.TASKS)
    assert len(uses) < len(IDS)
    assert [name for name, count in uses.items() if count > 1]


# ------------------------------------------------------------------------ the grading contract


@pytest.mark.parametrize("task_id", IDS)
def test_reassociated_float_formula_passes(task_id):
    task = get_task(task_id)
    answer = float_answer(task_id)
    verdict = compare(task.expected, answer, task.policy)
    assert verdict.ok, verdict.reason
    # Not a tautology: every exact non-integer field really was answered with a float.
    for path, expected, actual in paired_leaves(task.expected, answer):
        if type(expected) is Fraction:
            assert type(actual) is float, path
        else:
            assert type(actual) is type(expected), path


def test_reassociation_actually_moves_some_floats():
    """Some reordered float answers differ from float(key) in the last bits, so the tolerance is
    what lets them pass (not bit-identical arithmetic)."""
    moved = 0
    for task_id in IDS:
        for _, expected, actual in paired_leaves(get_task(task_id).expected, float_answer(task_id)):
            if type(expected) is Fraction and actual != float(expected):
                assert abs(Fraction(actual) - expected) <= Fraction(1, 10**12) * abs(expected)
                moved += 1
    assert moved >= 5


@pytest.mark.parametrize("task_id", IDS)
def test_named_mistake_fails(task_id):
    task = get_task(task_id)
    mistake = DEFINITIONS[task_id].meta["mistake"]
    verdict = compare(task.expected, float_answer(task_id, mistake), task.policy)
    assert not verdict.ok, f"the mistake {mistake!r} was accepted"
    assert verdict.reason.startswith("rows[") or verdict.reason.startswith("value['rows']"), verdict.reason


def has_float(task_id: str) -> bool:
    leaves = paired_leaves(get_task(task_id).expected, float_answer(task_id))
    return any(type(actual) is float for _, _, actual in leaves)


FLOAT_IDS = [task_id for task_id in IDS if has_float(task_id)]
COUNT_ONLY_IDS = [task_id for task_id in IDS if task_id not in FLOAT_IDS]


def test_only_pure_count_tasks_lack_a_float_answer():
    assert COUNT_ONLY_IDS == ["sc-019", "sc-025", "sc-030"]


@pytest.mark.parametrize("task_id", FLOAT_IDS)
def test_one_part_in_a_million_fails_and_one_in_a_trillion_passes(task_id):
    task = get_task(task_id)
    answer = float_answer(task_id)
    off = compare(task.expected, scaled_first_number(answer, 1 + 1e-6), task.policy)
    assert not off.ok
    assert "not close" in off.reason and "rtol 1e-09" in off.reason
    assert compare(task.expected, scaled_first_number(answer, 1 + 1e-12), task.policy).ok


@pytest.mark.parametrize("task_id", COUNT_ONLY_IDS)
def test_a_count_off_by_one_or_given_as_float_fails(task_id):
    task = get_task(task_id)
    answer = float_answer(task_id)
    row = answer["rows"][0]
    field = next(k for k, v in row.items() if type(v) is int and not k.startswith("stage") and k != "seq_len")
    cases = ((row[field] + 1, "exact values differ"), (float(row[field]), "integer reference"))
    for wrong, reason_part in cases:
        bad = {"rows": [dict(row, **{field: wrong})] + answer["rows"][1:]}
        verdict = compare(task.expected, bad, task.policy)
        assert not verdict.ok and reason_part in verdict.reason, verdict.reason


@pytest.mark.parametrize("task_id, field, wrong, reason_part", [
    ("sc-000", "bound", "Compute", "expected str"),           # classification is exact text
    ("sc-001", "min_batch", 261.0, "integer reference"),      # a count must be an int
    ("sc-015", "min_chips", 2.0, "integer reference"),
    ("sc-021", "allreduce_exceeds_backward", 1, "expected bool"),  # a bool is not an int
    ("sc-030", "min_batch", 0, "expected None"),              # None is only None
])
def test_wrong_kind_in_a_row_fails(task_id, field, wrong, reason_part):
    task = get_task(task_id)
    answer = float_answer(task_id)
    row = 3 if task_id == "sc-030" else 0
    answer["rows"][row][field] = wrong
    verdict = compare(task.expected, answer, task.policy)
    assert not verdict.ok
    assert reason_part in verdict.reason and field in verdict.reason


def test_known_mistake_rejects_a_typo():
    with pytest.raises(ValueError, match="unknown mistake"):
        float_answer("sc-021", "allreduce_twice")
    known_mistake(None, "anything")


# ------------------------------------------------------------------------ the domain checks


@pytest.mark.parametrize("task_id", IDS)
def test_every_task_passes_the_domain_checks(task_id):
    task = get_task(task_id)
    assert scaling.check(task) == []
    assert task.policy == RelTol(1e-9)
    assert "result" in task.prompt and '{"rows": [' in task.prompt


def _zero_reference(peak_flops):
    from fractions import Fraction

    return {"rows": [{"time_s": Fraction(peak_flops) - peak_flops}]}


def _materialise(definition) -> Task:
    expected = definition.reference(**definition.inputs)
    return Task(id=definition.id, domain="scaling", category=definition.category,
                prompt=definition.render(definition.inputs), api_description=definition.api_description,
                inputs=definition.inputs, expected=expected, policy=definition.policy,
                program=definition.program, tags=definition.tags, meta=definition.meta)


def _broken(reference, inputs, question="Give the time for `peak_flops`.", tags=()) -> Task:
    """A real roofline TaskDef around a (possibly deliberately wrong) reference."""
    return _materialise(TaskDef(
        id="sc-900", category="roofline", inputs=inputs, reference=reference,
        render=renderer(question, '{"rows": [{"time_s": <number>}]}'),
        api_description=api_description("roofline"), policy=RelTol(1e-9), tags=tags))


def test_check_reports_an_unexplained_zero():
    problems = task_problems(_broken(_zero_reference, {"peak_flops": 7}))
    assert problems == ["result['rows'][0]['time_s'] is exactly zero (a cancelled formula?) and the task "
                        "gives no zero_reason"]


def test_check_reports_an_input_the_prompt_never_names():
    from exactgrade.domains.scaling.roofline.elementwise_roofline import elementwise_roofline

    inputs = dict(DEFINITIONS["sc-002"].inputs)
    explained = " ".join(f"`{name}`" for name in inputs)
    assert task_problems(_broken(elementwise_roofline, inputs, question=explained)) == []
    # The generated input listing names every input; it does not count as explaining one.
    forgetful = explained.replace("`flops_per_element`", "the FLOPs")
    problems = task_problems(_broken(elementwise_roofline, inputs, question=forgetful))
    assert problems == ["input 'flops_per_element' is named neither in the question nor in the "
                        "api_description"]


def test_check_reports_a_non_finite_float_and_a_bad_shape():
    task = _broken(_zero_reference, {"peak_flops": 7})
    inf_task = dataclasses.replace(task, expected={"rows": [{"time_s": float("inf")}]})
    assert "result['rows'][0]['time_s'] is inf, not finite" in task_problems(inf_task)
    flat = dataclasses.replace(task, expected={"time_s": Fraction(1, 3)})
    assert task_problems(flat) == ['the key is not {"rows": [<dict>, ...]} with at least one row']


def test_check_reports_a_headline_tag_the_key_does_not_show():
    from exactgrade.domains.scaling.roofline.matmul_roofline import matmul_roofline

    inputs = dict(DEFINITIONS["sc-000"].inputs, batches=[1, 8])  # both memory-bound
    task = _broken(matmul_roofline, inputs, question=" ".join(f"`{n}`" for n in inputs),
                   tags=("headline:matmul_roofline_crossover",))
    problems = task_problems(task)
    assert problems == ["tagged headline:matmul_roofline_crossover but its key does not show it: "
                        + HEADLINES["headline:matmul_roofline_crossover"][0]]


def test_a_missing_headline_fails_the_first_task(monkeypatch):
    without_decode = tuple(d for d in scaling.TASKS if d.id != "sc-028")
    assert missing_headlines(without_decode) == ["headline:decode_memory_bound"]
    monkeypatch.setattr(scaling, "TASKS", without_decode)
    assert scaling.check(get_task("sc-000")) == ["no task is tagged headline:decode_memory_bound"]
    assert scaling.check(get_task("sc-001")) == []
    summary = scaling.summary([get_task(task_id) for task_id in IDS if task_id != "sc-028"])
    assert summary[0].startswith(f"headline phenomena tagged: {len(HEADLINES) - 1}/{len(HEADLINES)}: ")
    assert summary[1:] == ["MISSING headline headline:decode_memory_bound: "
                           + HEADLINES["headline:decode_memory_bound"][0]]


def test_summary_lists_every_headline_with_its_task():
    (line,) = scaling.summary([get_task(task_id) for task_id in IDS])
    assert line.startswith(f"headline phenomena tagged: {len(HEADLINES)}/{len(HEADLINES)}: ")
    assert "decode_memory_bound (sc-028)" in line and "attention_minority (sc-007)" in line


# ------------------------------------------------------------------------ the headline numbers


def test_headline_numbers():
    """The counterintuitive results the README quotes for scaling-env, read from the keys themselves."""
    rows = {task_id: get_task(task_id).expected["rows"] for task_id in IDS}
    # sc-000: batch 256 is still memory-bound although the critical intensity is 250.
    assert [r["bound"] for r in rows["sc-000"]] == ["memory", "memory", "memory", "compute", "compute"]
    assert rows["sc-001"][0]["min_batch"] == 261
    # sc-007: attention is 38.6% of the layer's FLOPs at 32k context.
    assert rows["sc-007"][-1]["attention_fraction"] == Fraction(32, 83)
    # sc-015: 8B needs 2 chips of 96 GB just for its Adam state; the state is 6x the weights.
    assert [r["min_chips"] for r in rows["sc-015"]] == [2, 11, 60]
    assert {r["optimizer_to_weights"] for r in rows["sc-015"]} == {6}
    # sc-021: at 2048 tokens per device the all-reduce (0.6375 s) outlasts the backward pass (0.4096 s),
    # the only compute it can overlap; at 4096 tokens the backward (0.8192 s) hides it.
    assert [r["allreduce_exceeds_backward"] for r in rows["sc-021"]] == [True, True, False]
    assert rows["sc-021"][1]["backward_s"] == Fraction(256, 625)
    # sc-028: 2.5x the peak FLOPs, same tokens per second.
    assert rows["sc-028"][0]["tokens_per_s"] == rows["sc-028"][1]["tokens_per_s"] == Fraction(80, 7)
    # sc-030: past ~1.7k tokens of context no batch size makes decode compute-bound.
    assert [r["min_batch"] for r in rows["sc-030"]] == [271, 624, None, None]


# ------------------------------------------------------------------------ through the real sandbox

MODEL_STYLE_SC009 = """
rows = []
for c in clusters:
    seconds = ((6 * n_params) / c["chips"]) * (n_tokens / c["peak_flops"]) / float(c["mfu"])
    rows.append({"cluster": c["name"], "training_flops": 6.0 * n_params * n_tokens,
                 "time_days": seconds / 86400})
result = {"rows": rows}
"""


@pytest.fixture(scope="module")
def sandbox_factory():
    from exactgrade.sandbox import Sandbox, SandboxUnavailable

    try:
        Sandbox(inputs={}, profile="python").close()
    except SandboxUnavailable as error:
        pytest.skip(f"no sandbox backend on this machine: {error}")
    return Sandbox


def test_every_reference_program_grades_ok_in_the_sandbox(sandbox_factory):
    """The program a perfect model would send, run where a model's code runs (stdlib only)."""
    for task_id in IDS:
        task = get_task(task_id)
        with sandbox_factory(inputs=dict(task.inputs), profile="python") as sandbox:
            sandbox.execute_code(task.program)
            verdict = compare(task.expected, sandbox.result(), task.policy)
        assert verdict.ok, f"{task_id}: {verdict.reason}"


@pytest.mark.parametrize("program, ok", [
    (MODEL_STYLE_SC009, True),
    (MODEL_STYLE_SC009.replace("(6 * n_params)", "(2 * n_params)"), False),        # forward FLOPs only
    (MODEL_STYLE_SC009.replace("/ 86400", "/ 86400 * (1 + 1e-6)"), False),        # one part in a million
], ids=["reassociated", "forward_only", "one_in_a_million"])
def test_a_model_style_float_program_in_the_sandbox(sandbox_factory, program, ok):
    task = get_task("sc-009")
    with sandbox_factory(inputs=dict(task.inputs), profile="python") as sandbox:
        sandbox.execute_code(program)
        verdict = compare(task.expected, sandbox.result(), task.policy)
    assert verdict.ok is ok, verdict.reason
