"""A one-turn rollout without a model: a trace holding one assistant reply, graded by the task's
own setup, finalize and reward (the code and text answer modes' tests share it)."""

from __future__ import annotations

import verifiers.v1 as vf
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.graph import MessageNode
from verifiers.v1.trace import AgentInfo, Trace, TraceTask

from exactgrade.env.state import SandboxState
from exactgrade.env.taskset import ExactgradeTask, ExactgradeTasksetConfig, generated_data
from exactgrade.lookup import get_task


def trace_with_reply(task, text: str) -> Trace:
    trace = Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=SandboxState(),
        agent=AgentInfo(config=AgentConfig()),
    )
    trace.nodes.append(MessageNode(message=vf.AssistantMessage(content=text), sampled=True))
    return trace


async def graded(task, text: str) -> tuple[float, Trace]:
    trace = trace_with_reply(task, text)
    await task.setup(trace, None)
    await task.finalize(trace, None)
    return await task.correctness(trace), trace


def served(task_id: str, mode: str) -> ExactgradeTask:
    """The generated task `task_id` as a pool in answer mode `mode` serves it, built from its id."""
    task = get_task(task_id)
    return ExactgradeTask(generated_data(task.domain, task, mode=mode),
                          ExactgradeTasksetConfig(answer_mode=mode).task)
