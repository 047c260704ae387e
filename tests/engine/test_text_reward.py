"""The verifiers 0.4 text-answer reward, run through verifiers' own scoring (Task.score).

Both ways a math environment uses it: plugged by import path in the task config, and as a
@vf.reward on the Task class. Wrong answers score 0.0 with the reason in trace.info; a key that
cannot be read is a TaskError (the rollout is not ok), never a 0.0.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import verifiers.v1 as vf
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.task import RewardFunctionConfig
from verifiers.v1.errors import TaskError
from verifiers.v1.graph import MessageNode
from verifiers.v1.trace import AgentInfo, Trace, TraceTask

from exactgrade.text.reward import text_answer_correct, text_answer_reward


class MathData(vf.TaskData):
    answer: Any = None
    solution: Any = None


class PluggedTask(vf.Task[MathData]):
    """No reward of its own: the config plugs exactgrade's by import path."""


class DecoratedTask(vf.Task[MathData]):
    correct = vf.reward(text_answer_reward(field="solution"))


PLUGGED = vf.TaskConfig(
    rewards={"correct": RewardFunctionConfig(fn="exactgrade.text.reward:text_answer_correct")}
)


def scored(task: vf.Task, reply: str | None) -> Trace:
    trace = Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=AgentConfig()),
    )
    trace.nodes.append(MessageNode(message=vf.UserMessage(content="What is 1/2 + 1/3?")))
    if reply is not None:
        trace.nodes.append(MessageNode(message=vf.AssistantMessage(content=reply), sampled=True))
    try:
        asyncio.run(task.score(trace))
    except TaskError as error:  # what a rollout does with a scoring failure
        trace.record_error(error)
    return trace


# (id, answer key in the dataset, reply, reward, fragment of trace.info["text_answer"])
CASES = [
    ("gold-text-correct", r"$\frac{5}{6}$", r"So the sum is \boxed{\dfrac{5}{6}}.", 1.0, "correct"),
    ("gold-text-decimal-wrong", r"$\frac{5}{6}$", r"\boxed{0.833333}", 0.0, "exact values differ"),
    ("int-key", 12, r"\boxed{\frac{24}{2}}", 1.0, "correct"),
    ("int-key-needs-an-integer", 12, r"\boxed{12.5}", 0.0, "exact values differ"),
    ("float-key-reltol", 0.8333333333333334, r"\boxed{\frac{5}{6}}", 1.0, "correct"),
    ("symbolic-gold", "$x^2 - 1$", r"\boxed{(x-1)(x+1)}", 1.0, "correct"),
    ("two-boxes", "5/6", r"\boxed{5/6} or \boxed{1}", 0.0, "ambiguous"),
    ("prose", "5/6", "It is five sixths.", 0.0, "no answer"),
    ("no-reply", "5/6", None, 0.0, "no answer"),
]


@pytest.mark.parametrize(
    ("answer", "reply", "reward", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_plugged_reward(answer: Any, reply: str | None, reward: float, fragment: str) -> None:
    trace = scored(PluggedTask(MathData(prompt="q", answer=answer), PLUGGED), reply)
    assert not trace.errors
    assert trace.rewards["correct"].score == reward
    assert fragment in trace.info["text_answer"]


def test_decorated_reward_reads_its_own_field() -> None:
    trace = scored(
        DecoratedTask(MathData(prompt="q", answer="1", solution=r"\sqrt{8}")), r"\boxed{2\sqrt{2}}"
    )
    assert trace.rewards["text_answer_correct"].score == 1.0  # a reward is named by its function


@pytest.mark.parametrize("answer", [r"$[0, 1)$", "$x^2 + y^2 = 1$", r"\boxed{1} \boxed{2}"])
def test_an_unreadable_key_is_flagged_not_scored(answer: str) -> None:
    trace = scored(PluggedTask(MathData(prompt="q", answer=answer), PLUGGED), r"\boxed{1}")
    assert not trace.ok
    assert trace.errors and trace.errors[0].type == "TaskError"
    assert "task field 'answer'" in trace.info["scoring_error"]
    assert trace.rewards.get("correct") is None


def test_the_default_reward_is_the_plugged_function() -> None:
    assert text_answer_correct.__name__ == "text_answer_correct"
