"""Text answer mode: which tasks it serves, its prompts, and the reward on real traces of the scripted
replies (reference, each named mistake, each hostile text) and of broken ones (exactgrade.env.modes,
env.taskset, scripted.text_replies)."""

from __future__ import annotations

import asyncio
import logging

import deeplearning_env
import pytest
import pytorch_env
import scaling_env
from one_turn import graded, trace_with_reply

from exactgrade.env import modes
from exactgrade.env.taskset import ExactgradeTasksetConfig, HarnessFailure
from exactgrade.family import families
from exactgrade.lookup import get_task
from exactgrade.scripted.policies import TEXT_ATTACKS
from exactgrade.scripted.text_replies import (
    MUTANT_KINDS,
    answer_text,
    mutant_text,
    reference_text,
    text_attack_reply,
)
from exactgrade.values import TensorValue

TASKSETS = {"scaling": scaling_env.ScalingTaskset, "deeplearning": deeplearning_env.DeeplearningTaskset,
            "pytorch": pytorch_env.PytorchTaskset}  # fmt: skip
TEXT = ExactgradeTasksetConfig(answer_mode="text")


def test_text_mode_offers_no_tool_and_one_turn() -> None:
    assert TEXT.max_turns == 1 and TEXT.task.max_turns == 1
    assert all(taskset.toolsets(TEXT) == [] for taskset in TASKSETS.values())


@pytest.mark.parametrize(("domain", "served"), [("scaling", 35), ("deeplearning", 36), ("pytorch", 2)])
def test_text_mode_serves_the_tasks_whose_keys_hold_no_floating_tensor(domain, served, caplog) -> None:
    """Every scaling and deeplearning task; of pytorch's 45, the two whose keys hold no floating tensor,
    and the load says why the others are left out."""
    with caplog.at_level(logging.WARNING):
        tasks = list(TASKSETS[domain](TEXT))
    assert len(tasks) == served
    for task in tasks:
        assert modes.text_refusal(get_task(task.data.id).expected) is None
    said = [record.getMessage() for record in caplog.records if "text mode serves" in record.getMessage()]
    if domain == "pytorch":
        assert said == [
            "pytorch text mode serves 2 of 45 tasks: the other 43 keys hold floating-point "
            "tensors, which a text answer cannot write exactly (code or tools mode serves them)"
        ]
    else:
        assert said == []


@pytest.mark.parametrize(("expected", "refusal"), [
    ({"rows": [{"y": TensorValue("int64", (2,), (1, 2)), "n": 3}]}, None),
    ({"rows": [{"y": TensorValue("bool", (1,), (True,))}]}, None),
    ({"rows": [{"loss": 0.25}]}, None),  # a Python float is written as a decimal
    ({"rows": [{"ok": 1}, {"y": TensorValue("float32", (1,), (0.5,))}]}, "its key holds a float32 tensor"),
    ([TensorValue("bfloat16", (), (1.0,))], "its key holds a bfloat16 tensor"),
])  # fmt: skip
def test_what_text_mode_refuses(expected, refusal) -> None:
    assert modes.text_refusal(expected) == refusal


def test_a_generated_text_pool_holds_size_served_tasks() -> None:
    """A pytorch pool in text mode skips the tasks it cannot serve and still holds `size` tasks."""
    config = ExactgradeTasksetConfig(answer_mode="text", source="generated", size=6, levels="4")
    tasks = list(pytorch_env.PytorchTaskset(config))
    assert len(tasks) == 6 and len({task.data.id for task in tasks}) == 6
    assert all(modes.text_refusal(get_task(task.data.id).expected) is None for task in tasks)


@pytest.mark.parametrize("domain", list(TASKSETS))
def test_no_text_mode_prompt_speaks_of_tools_result_sandbox_or_solve(domain) -> None:
    for task in TASKSETS[domain](TEXT):
        for text in (task.data.prompt, task.data.system_prompt):
            assert modes.leftover(text, "text") is None, (task.data.id, modes.leftover(text, "text"))
        assert "```json" in task.data.system_prompt and "\\boxed{" in task.data.system_prompt


PYTHON_WORDS = ["sympy", "Fraction(", "fractions.", "math.", "numpy", "torch."]
"""What a small model copies into its text answer when the prompt says it (it wrote sympy.log(2)
inside its JSON because the prompt asked for "exact sympy values (e.g. 7*sympy.log(2)/4)")."""


def every_text_prompt(domain: str):
    """(task id, text) of the user and system prompts of every canonical task text mode serves and
    of a generated pool of one task per family and level (pytorch: the first 120 its text mode serves,
    which span the 32 families whose keys hold no floating tensor; a larger pool takes minutes)."""
    cells = len(families(domain)) * 5
    pool = ExactgradeTasksetConfig(answer_mode="text", source="generated", size=min(cells, 120))
    for config in (TEXT, pool):
        for task in TASKSETS[domain](config):
            yield task.data.id, task.data.prompt
            yield task.data.id, task.data.system_prompt


@pytest.mark.parametrize("domain", list(TASKSETS))
def test_no_text_mode_prompt_names_a_python_library_or_call(domain) -> None:
    said = {}
    for task_id, text in every_text_prompt(domain):
        for word in PYTHON_WORDS:
            at = text.find(word)
            if at >= 0:
                said.setdefault(word, (task_id, text[max(0, at - 60) : at + 60]))
    assert said == {}


@pytest.mark.parametrize(("tools_text", "text_text"), [
    ("- `target_share` = Fraction(3, 25)", "- `target_share` = 3/25"),
    ("- `hbm_fractions` = [Fraction(-3, 25), Fraction(13, 20)]", "- `hbm_fractions` = [-3/25, 13/20]"),
    ('{"rows": [{"b": Fraction, "loss": Fraction}]}', '{"rows": [{"b": fraction, "loss": fraction}]}'),
    ("list of fractions.Fraction probabilities", "list of fraction probabilities"),
    ("give nats as exact sympy values (e.g. 7*sympy.log(2)/4), never math.log.",
     "give nats as exact values (e.g. 7*log(2)/4), never a rounded logarithm."),
    ('"perplexity": exact sympy value}', '"perplexity": exact value}'),
    ("Use sympy.cos and sympy.pi so the values stay exact.", "Use cos and pi so the values stay exact."),
    ("- `T` (sympy Symbol: the number of training steps, left free) = T",
     "- `T` (symbol: the number of training steps, left free) = T"),
    ("- `lr`: sympy Symbol, the same as sympy.Symbol('lr', real=True)", "- `lr`: a real symbol"),
    ("a `<sympy expression in lr>` is an exact sympy expression",
     "a `<exact expression in lr>` is an exact expression"),
    ("SGD (torch.optim.SGD, dampening 0)", "SGD (PyTorch's SGD, dampening 0)"),
    ("- `x`: torch.Tensor, dtype torch.int64, shape (2,)", "- `x`: tensor, dtype int64, shape (2,)"),
    ("The semantics are IEEE's, as in numpy or torch, not Python's math module: exp",
     "The semantics are IEEE's, as floating-point hardware computes them (never an error): exp"),
])  # fmt: skip
def test_text_mode_writes_a_python_spelling_as_math_and_the_other_modes_keep_it(
    tools_text, text_text
) -> None:
    assert modes.rewrite(tools_text, "text") == text_text
    assert modes.rewrite(tools_text, "tools") == tools_text


def text_task(domain: str, task_id: str):
    (task,) = [task for task in TASKSETS[domain](TEXT) if task.data.id == task_id]
    return task


CASES = [("scaling", "sc-003"), ("deeplearning", "dl-020"), ("pytorch", "pt-000")]


@pytest.mark.parametrize(("domain", "task_id"), CASES)
def test_the_key_written_as_text_passes(domain: str, task_id: str) -> None:
    task = text_task(domain, task_id)
    expected = get_task(task_id).expected
    score, trace = asyncio.run(graded(task, reference_text(expected).text))
    assert (score, trace.info["reason"]) == (1.0, "passed")
    score, trace = asyncio.run(graded(task, f"Therefore \\boxed{{{answer_text(expected)}}}."))
    assert (score, trace.info["reason"]) == (1.0, "passed")


@pytest.mark.parametrize(("domain", "task_id"), CASES)
@pytest.mark.parametrize("kind", range(len(MUTANT_KINDS)))
def test_a_named_mistake_is_a_wrong_answer_with_its_reason(domain: str, task_id: str, kind: int) -> None:
    score, trace = asyncio.run(
        graded(text_task(domain, task_id), mutant_text(get_task(task_id).expected, kind).text)
    )
    assert score == 0.0 and trace.info["reason"] not in ("", "passed")
    assert "scoring_error" not in trace.info


@pytest.mark.parametrize(("domain", "task_id"), CASES)
@pytest.mark.parametrize("kind", TEXT_ATTACKS)
def test_a_hostile_text_is_a_wrong_answer_never_a_crash_nor_flagged(
    domain: str, task_id: str, kind: str
) -> None:
    expected = get_task(task_id).expected
    reply = text_attack_reply(expected, TEXT_ATTACKS.index(kind))
    assert reply.kind == kind
    score, trace = asyncio.run(graded(text_task(domain, task_id), reply.text))
    reasons = ("no answer: ", "unreadable answer: ", "rows", "value: ")  # value: a confusable key is missing
    assert score == 0.0 and trace.info["reason"].startswith(reasons)
    assert "scoring_error" not in trace.info


@pytest.mark.parametrize(("reply", "reason"), [
    ("", "no answer: "),
    ("I could not work it out.", "no answer: "),
    ("```json\n{\"rows\": [\n```", "unreadable answer: "),
    ("```json\n{\"rows\": []}\n```", "rows: "),
])  # fmt: skip
def test_an_unreadable_or_missing_answer_is_wrong_with_its_reason(reply: str, reason: str) -> None:
    score, trace = asyncio.run(graded(text_task("scaling", "sc-003"), reply))
    assert score == 0.0 and trace.info["reason"].startswith(reason), trace.info["reason"]


def test_a_task_the_host_cannot_key_is_flagged_not_wrong() -> None:
    """A generated task whose carried inputs are not the instance its id names cannot be keyed: the
    harness failed (flagged), whatever the reply."""
    config = ExactgradeTasksetConfig(answer_mode="text", source="generated", size=1, levels="1")
    (task,) = list(scaling_env.ScalingTaskset(config))
    other = next(iter(scaling_env.ScalingTaskset(config.model_copy(update={"seed": 1}))))
    forged = type(task)(task.data.model_copy(update={"inputs": other.data.inputs}), task.config)
    trace = trace_with_reply(forged, reference_text(get_task(task.data.id).expected).text)
    with pytest.raises(HarnessFailure):
        asyncio.run(forged.correctness(trace))
    assert trace.info["scoring_error"]


@pytest.mark.parametrize(("domain", "task_id"), CASES)
def test_the_gold_check_writes_the_key_as_text_and_it_passes(domain: str, task_id: str) -> None:
    """vf-validate's gold check in text mode: the key written out reads back as the key."""
    assert asyncio.run(text_task(domain, task_id).validate(None)) is True
