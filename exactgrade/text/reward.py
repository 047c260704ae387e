"""A verifiers 0.4 (v1) reward for text answers: one line replaces math-verify in a math environment.

    # a plugged reward (TOML or command line), reading the key from the task's `answer` field:
    --env.taskset.task.rewards.correct.fn exactgrade.text.reward:text_answer_correct

    # or on the Task class, with another field or policy:
    class MathTask(vf.Task[MathData]):
        correct = vf.reward(text_answer_reward(field="solution"))

The reward is 1.0 when the last assistant message's answer (exactgrade.text.extract_answer's
rule) equals the key exactly, else 0.0; the verdict's reason goes to ``trace.info["text_answer"]``.
The key is the task data's field: an engine value (int, Fraction, sympy, ...) as is, or a gold
text read by exactgrade.text.read_key. A key that cannot be read is a broken dataset row, not a
wrong answer: the reward raises (verifiers records a TaskError, the rollout is not ok) after
writing the reason to ``trace.info["scoring_error"]``. No signals: it works in any thread or
event loop; compare's work is bounded by time_limit, reading by the caps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from exactgrade.compare import DEFAULT_TIME_LIMIT
from exactgrade.policy import Exact, Policy, RelTol
from exactgrade.text.grade import grade_text
from exactgrade.text.key import read_key

INFO_KEY = "text_answer"
FLOAT_POLICY = RelTol(1e-9)  # for a key holding a float (a dataset of measured values)


class UnreadableKey(ValueError):
    """The task's answer key cannot be read: the dataset row is broken (never a wrong answer)."""


def text_answer_reward(
    field: str = "answer", policy: Policy | None = None, time_limit: float = DEFAULT_TIME_LIMIT
) -> Callable[..., Awaitable[float]]:
    """A reward `(task, trace) -> float` grading against the task data's `field`.

    policy None: Exact(), or RelTol(1e-9) when the key holds a float.
    """

    async def text_answer_correct(task: Any, trace: Any) -> float:
        data = getattr(task, "data", task)  # plugged: the TaskData; as a Task method: the Task
        key = _key(getattr(data, field), field, trace)
        chosen = policy if policy is not None else (FLOAT_POLICY if _holds_float(key) else Exact())
        verdict = await asyncio.to_thread(grade_text, _final_text(trace), key, chosen, time_limit=time_limit)
        if verdict.reason.startswith("internal error"):
            trace.info["scoring_error"] = verdict.reason
            raise RuntimeError(verdict.reason)
        trace.info[INFO_KEY] = verdict.reason or "correct"
        return 1.0 if verdict.ok else 0.0

    return text_answer_correct


text_answer_correct = text_answer_reward()


def _key(value: Any, field: str, trace: Any) -> Any:
    if type(value) is not str:
        return value
    parsed = read_key(value)
    if not parsed.ok:
        trace.info["scoring_error"] = f"task field {field!r}: {parsed.reason}"
        raise UnreadableKey(trace.info["scoring_error"])
    return parsed.value


def _holds_float(key: Any) -> bool:
    if type(key) is float:
        return True
    if type(key) in (list, tuple):
        return any(_holds_float(item) for item in key)
    if type(key) is dict:
        return any(_holds_float(item) for item in key.values())
    return False


def _final_text(trace: Any) -> str:
    """The text of the last assistant message ("" when there is none)."""
    messages = trace.assistant_messages
    if not messages:
        return ""
    content = messages[-1].content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(
        getattr(part, "text", None) or (part.get("text", "") if isinstance(part, dict) else "")
        for part in content
    )
