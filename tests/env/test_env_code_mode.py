"""Code answer mode: the block a reply holds, the host's call of `solve` in a real sandbox, the
prompts of the mode, and the reward on real traces (exactgrade.env.code_answer, env.modes)."""

from __future__ import annotations

import asyncio
from fractions import Fraction

import pytest
import pytorch_env
import scaling_env
from one_turn import graded

from exactgrade import wire
from exactgrade.env import modes
from exactgrade.env.code_answer import extract_block, run_block
from exactgrade.env.hidden import draft_kept, hidden_check_applies, hidden_instance, question
from exactgrade.env.taskset import ExactgradeTasksetConfig
from exactgrade.lookup import get_task
from exactgrade.scripted.policies import reference_reply

FENCE = "```"


@pytest.mark.parametrize(("message", "code", "reason"), [
    (f"{FENCE}python\ndef solve(x):\n    return x\n{FENCE}", "def solve(x):\n    return x", ""),
    (f"Sure.\n{FENCE}py\nA\n{FENCE}\nand a shell line:\n{FENCE}bash\nls\n{FENCE}", "A", ""),
    (f"<think>{FENCE}python\nX\n{FENCE}</think>\n{FENCE}python3\nY\n{FENCE}", "Y", ""),
    ("The answer is 42.", None, "the reply has no ```python block"),
    (f"{FENCE}json\n{{}}\n{FENCE}", None, "the reply has no ```python block"),
    (f"{FENCE}python\nA\n{FENCE}\n{FENCE}python\nB\n{FENCE}", None,
     "2 ```python blocks; exactly one is graded"),
    (f"{FENCE}python\ndef solve(x):\n    return", None, "never closed"),
    ("x" * 200_001, None, "over the limit of 200000"),
])  # fmt: skip
def test_the_one_python_block_of_a_reply(message: str, code: str | None, reason: str) -> None:
    block = extract_block(message)
    assert block.code == code
    assert reason in block.reason and bool(block.reason) == bool(reason)


CALLS = [{"x": Fraction(3, 2), "n": 4}, {"x": Fraction(1, 3), "n": 2}]


@pytest.mark.parametrize(("code", "returned", "fault"), [
    # the block's own example data cannot replace the inputs: solve gets the real ones
    ("x, n = 99, 99\ndef solve(x, n):\n    return {'rows': [x * n]}\nprint(solve(1, 2))",
     [{"rows": [Fraction(6)]}, {"rows": [Fraction(2, 3)]}], None),
    ("x = 1\n", [], "the block defines no function `solve`"),
    ("def solve(x, n:\n", [], "the block defines no function `solve` (the block raised SyntaxError"),
    ("solve = 3", [], "`solve` is of type int, not a function"),
    ("def solve(x):\n    return x", [], "solve raised on the task's inputs: TypeError"),
    ("def solve(x, n):\n    raise ValueError('nope')", [],
     "solve raised on the task's inputs: ValueError: nope"),
    ("def solve(x, n):\n    return object()", [], "is not a gradeable value: WireError"),
    ("def solve(x, n):\n    return n if n == 4 else 1 / 0", [4],
     "solve raised on the hidden instance's inputs: ZeroDivisionError"),
    ("import os\nos._exit(0)", [], "the block's code ended its sandbox"),
    ("def solve(x, n):\n    global result\n    result = {'returned': 1}\n    raise SystemExit(0)", [],
     "solve raised on the task's inputs: SystemExit"),
])  # fmt: skip
def test_the_host_calls_solve_with_the_real_inputs_and_says_why_it_failed(code, returned, fault) -> None:
    outcome = run_block(code, CALLS, "python")
    assert [wire.decode(text) for text in outcome.returned] == returned
    assert outcome.harness_error is None  # nothing the block does is the harness's failure
    assert (outcome.fault is None) == (fault is None)
    if fault is not None:
        assert fault in outcome.fault


def code_tasks(taskset, **config) -> list:
    return list(taskset(ExactgradeTasksetConfig(source="generated", answer_mode="code", **config)))


def test_code_mode_offers_no_tool_and_one_turn() -> None:
    config = ExactgradeTasksetConfig(answer_mode="code")
    assert config.max_turns == 1 and config.task.max_turns == 1
    assert scaling_env.ScalingTaskset.toolsets(config) == []
    assert ExactgradeTasksetConfig(answer_mode="code", max_turns=3).max_turns == 3  # asked for: kept


@pytest.mark.parametrize("taskset", [scaling_env.ScalingTaskset, pytorch_env.PytorchTaskset])
def test_the_reference_as_solve_passes_and_a_reply_without_a_block_is_wrong_not_flagged(taskset) -> None:
    (task,) = code_tasks(taskset, size=1, levels="1")
    names = tuple(get_task(task.data.id).inputs)
    score, trace = asyncio.run(graded(task, reference_reply(get_task(task.data.id).program, names).text))
    assert (score, trace.info["reason"]) == (1.0, "passed")
    score, trace = asyncio.run(graded(task, "I think the answer is 3."))
    assert (score, trace.info["reason"]) == (0.0, "the reply has no ```python block")
    assert "scoring_error" not in trace.info


def test_a_hard_coded_answer_fails_on_the_hidden_instance() -> None:
    """solve returns the task's own answer, whatever its arguments: right on the task, wrong on the
    hidden instance (scaling questions never state a number outside the inputs)."""
    (task,) = code_tasks(scaling_env.ScalingTaskset, size=1, levels="2")
    assert task.data.hidden_check and "hidden instance" in task.data.system_prompt
    answer = wire.encode(get_task(task.data.id).expected)
    hard = (f"{FENCE}python\nimport _egwire.wire as w\n\ndef solve(**inputs):\n"
            f"    return w.decode({answer!r})\n{FENCE}")
    score, trace = asyncio.run(graded(task, hard))
    assert score == 0.0 and trace.info["reason"].startswith("on the hidden instance: ")
    assert trace.info["path"].startswith("hidden:")


def test_the_hidden_check_applies_only_where_the_question_is_the_same() -> None:
    """pytorch permute_and_reshape L1 states its target shape in the question: another instance has
    another shape, which solve cannot know, so the task is graded on its own inputs only."""
    for name, applies in [("pt-permute_and_reshape-L1-s0-i0", False), ("sc-matmul_roofline-L3-s0-i5", True)]:
        task = get_task(name)
        address = (task.domain, task.family, task.level, task.seed, task.index)
        assert hidden_check_applies(task.prompt, task.inputs, *address) is applies
        hidden = hidden_instance(*address)
        assert hidden is not None and hidden.id != task.id and draft_kept(hidden)
        assert (question(hidden.prompt) == question(task.prompt)) is applies
    (data,) = [t.data for t in code_tasks(pytorch_env.PytorchTaskset, size=1, levels="1",
                                          families="permute_and_reshape")]
    assert not data.hidden_check and "hidden instance" not in data.system_prompt


@pytest.mark.parametrize("taskset", [scaling_env.ScalingTaskset, pytorch_env.PytorchTaskset,
                                     __import__("deeplearning_env").DeeplearningTaskset])
def test_no_code_mode_prompt_speaks_of_tools_or_result(taskset) -> None:
    for task in taskset(ExactgradeTasksetConfig(answer_mode="code")):
        for text in (task.data.prompt, task.data.system_prompt):
            assert modes.leftover(text, "code") is None, (task.data.id, modes.leftover(text, "code"))
        assert "def solve(" in task.data.system_prompt and "`solve`" in task.data.prompt


def test_loading_a_code_mode_dataset_builds_no_hidden_instance() -> None:
    """The hidden instances are built when a rollout is graded, not at load: a dataset's load decides
    the check from drafts (no reference runs), so code mode starts as fast as tools mode."""
    from exactgrade.family import generated_task

    before = generated_task.cache_info().currsize
    tasks = list(pytorch_env.PytorchTaskset(ExactgradeTasksetConfig(answer_mode="code")))
    assert sum(task.data.hidden_check for task in tasks) > len(tasks) // 2
    assert generated_task.cache_info().currsize == before


@pytest.mark.parametrize("taskset", [scaling_env.ScalingTaskset, pytorch_env.PytorchTaskset])
def test_the_gold_check_answers_with_the_reference_as_solve(taskset) -> None:
    """vf-validate's gold check in code mode: the reference program wrapped as `solve` passes, the
    hidden instance included."""
    (task,) = code_tasks(taskset, size=1, levels="2")
    assert asyncio.run(task.validate(None)) is True
