"""The verifiers adapter shared by scaling-env, pytorch-env and deeplearning-env.

Rows come from the shipped Hugging Face dataset of a domain (or a local path / hub id).
TaskData carries what the model may see (prompt, inputs); the answer key stays on the host
(`exactgrade.env.keys`). The model's two tools run in an exactgrade Sandbox behind the shared
tool server (`exactgrade.env.toolset`); `correctness` reads `result` back from the rollout
state after the rollout, decodes it strictly and grades it with `exactgrade.compare`.
A harness failure (the zygote or jail died, the host closed the sandbox or failed its read-back,
tool calls the server never handled) scores 0.0, is recorded in `trace.info["scoring_error"]` and
raises, so verifiers marks the rollout as an error (`ok: false`) instead of a wrong answer. A
sandbox the model's own code ended (exit, kill, memory or time limit, a forged reply) is a wrong
answer: 0.0 with the reason, `ok: true`, or a policy could void its bad rollouts by crashing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar, Literal

import verifiers.v1 as vf
from pydantic import model_validator

from exactgrade import wire
from exactgrade.env import keys
from exactgrade.env.state import SandboxState
from exactgrade.env.toolset import SandboxToolset, SandboxToolsetConfig

SYSTEM_PROMPT = """\
You solve quantitative deep-learning problems whose answers are graded exactly.

You have two tools, both running in the same isolated sandbox (no network):
- execute_code(code): runs Python in a persistent interpreter. The task's inputs are already \
defined as variables with the names the task gives, and every variable persists across calls.
- bash(command): runs a shell command in the sandbox.

Put your final answer in the Python variable `result` with execute_code. Give exact values \
(int, fractions.Fraction, sympy expressions) wherever the task asks for an exact value; a float \
is accepted only where the task says so; give tensors as torch tensors of the stated shape and \
dtype. Once `result` holds your answer, reply with one short sentence and no tool call."""

TOOL_ARGUMENT = {"execute_code": "code", "bash": "command"}
logger = logging.getLogger(__name__)


class HarnessFailure(RuntimeError):
    """The rollout cannot be graded because the harness, not the model, failed."""


class ExactgradeData(vf.TaskData):
    category: str
    domain: str
    inputs: str
    """wire.encode of the inputs dict, preloaded by name into the sandbox."""
    split: str = "train"
    dataset_name: str | None = None
    """Where the row came from (None = the dataset shipped in the package)."""


class ExactgradeTaskConfig(vf.TaskConfig):
    max_turns: int = 5
    """Set from the taskset's `max_turns` (`--env.taskset.max-turns`)."""

    @model_validator(mode="after")
    def _fixed_grading(self) -> ExactgradeTaskConfig:
        if self.rewards or self.judges:
            raise ValueError("exactgrade environments grade with `correctness` only; "
                             "plugged rewards and judges are not accepted")
        return self


class ExactgradeTask(vf.Task[ExactgradeData, SandboxState, ExactgradeTaskConfig]):
    @property
    def key(self) -> str:
        return self.data.id or self.hash

    @property
    def source(self) -> keys.Source:
        return (self.data.domain, self.data.split, self.data.dataset_name)

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        from exactgrade.task import domain_module

        trace.state.inputs_wire = self.data.inputs
        trace.state.profile = domain_module(self.data.domain).PROFILE

    async def validate(self, runtime: vf.Runtime) -> bool:
        """vf-validate's gold check: the task's reference program, sent through the sandbox tool
        server's own `execute_code` (a real sandbox, the same read-back), is graded by the
        environment's own reward exactly as a rollout is. Valid iff it scores 1.0; a harness
        failure raises (reported as an error, not as an invalid key)."""
        from exactgrade import get_task

        program = get_task(self.data.id).program  # host-side, like the key; never in TaskData
        trace = await self.play([("execute_code", program)], runtime)
        score = trace.rewards["correctness"].score
        if score != 1.0:
            logger.warning("gold check of %s: the reference program scores %s (%s)", self.data.id, score,
                           trace.info.get("reason"))
        return score == 1.0

    async def play(self, calls: Sequence[tuple[str, str]], runtime: vf.Runtime | None = None) -> vf.Trace:
        """A rollout without a model: send `calls` ((tool, text) pairs) to a sandbox of this
        process's own tool server, then finalize and grade what they left with the reward, in
        order. The score is in `trace.rewards["correctness"]`; a harness failure raises."""
        task = vf.TraceTask(type=type(self).__name__, data=self.data, key=self.key, hash=self.hash)
        trace = vf.Trace(task=task, state=SandboxState(),
                         agent=vf.AgentInfo(config=vf.AgentConfig(), name="play", trainable=False))
        await self.setup(trace, runtime)
        tools = SandboxToolset(SandboxToolsetConfig())
        try:
            for tool, text in calls:
                await tools.call_for(trace.state, tool, text)
        finally:
            await tools.close()
        await self.finalize(trace, runtime)
        trace.rewards = {"correctness": vf.Reward(score=await self.correctness(trace))}
        return trace

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        # The state is not saved with the trace; the sandbox's outcome is, so that vf-replay
        # re-scores a saved run with exactly what the live reward saw.
        trace.info[OUTCOME] = trace.state.model_dump(include=OUTCOME_FIELDS)
        trace.info["env_pid"] = os.getpid()  # which env-server worker ran it (under a pool)

    @vf.stop
    async def max_turns_reached(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= self.config.max_turns

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(outcome(trace).tool_calls)

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        return float(trace.num_turns)

    @vf.metric
    async def sandbox_seconds(self, trace: vf.Trace) -> float:
        return float(outcome(trace).sandbox_seconds)

    @vf.reward(weight=1.0)
    async def correctness(self, trace: vf.Trace) -> float:
        from exactgrade.compare import compare
        from exactgrade.verdict import render_path

        state = outcome(trace)
        failure = harness_failure(trace, state)
        if failure is None and state.result_wire is not None:
            try:
                actual = wire.decode(state.result_wire)
            except wire.WireError as e:
                failure = f"read-back refused on the host: {e}"
        if failure is not None:
            trace.info["scoring_error"] = failure
            raise HarnessFailure(failure)
        if state.model_fault is not None:  # whatever `result` held before: the rollout ended it
            trace.info["reason"] = state.model_fault
            trace.info["path"] = "value"
            return 0.0
        if state.result_wire is None:
            trace.info["reason"] = (f"`result` is not a gradeable value: {state.result_error}"
                                    if state.result_error else "`result` was never set")
            trace.info["path"] = "value"
            return 0.0
        answer = keys.lookup(self.source, self.data.id)
        # off the event loop: an irrational key may wait seconds for the prover process, and the
        # other rollouts of the eval must not stall behind it
        verdict = await asyncio.to_thread(compare, answer.expected, actual, answer.policy)
        trace.info["reason"] = verdict.reason if not verdict.ok else "passed"
        trace.info["path"] = render_path(verdict.path)
        return 1.0 if verdict.ok else 0.0


OUTCOME = "sandbox"
"""trace.info key of the recorded sandbox outcome."""
OUTCOME_FIELDS = frozenset({"result_wire", "result_error", "tool_calls", "sandbox_seconds", "sandbox_uid",
                            "sandbox_error", "model_fault"})
"""Every state field the reward reads: a field left out here would be lost at finalize (a rollout
whose code killed its sandbox after a correct `result` would then be rewarded)."""


def outcome(trace: vf.Trace) -> SandboxState:
    """What the sandbox left for grading: the copy recorded in the trace at finalize (the only
    one a replayed trace has), else the live state."""
    recorded = trace.info.get(OUTCOME)
    return SandboxState.model_validate(recorded) if recorded is not None else trace.state


def harness_failure(trace: vf.Trace, state: SandboxState) -> str | None:
    """Why the rollout cannot be graded, or None: a sandbox the harness lost, a read-back the host
    failed, or well-formed tool calls the tool server never handled (it crashed or was unreachable)."""
    if state.sandbox_error is not None:
        return state.sandbox_error
    issued = sum(1 for message in trace.assistant_messages for call in message.tool_calls or ()
                 if _well_formed(call))
    if issued > state.tool_calls:
        return f"the tool server handled {state.tool_calls} of {issued} tool calls"
    return None


def _well_formed(call: vf.ToolCall) -> bool:
    argument = TOOL_ARGUMENT.get(call.name)
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return False
    return argument is not None and isinstance(arguments, dict) and isinstance(arguments.get(argument), str)


class ExactgradeTasksetConfig(vf.TasksetConfig):
    source: Literal["dataset", "generated"] = "dataset"
    """`dataset`: the rows of a dataset (below); `generated`: an infinite stream of generated
    tasks (exactgrade.generate), built lazily as the run reaches them; `-n` bounds a run."""
    seed: int = 0
    """With source=generated: the stream's seed (streams of two seeds share no task)."""
    levels: str = "1-5"
    """With source=generated: a level or a range (e.g. `3` or `1-5`), mixed round-robin."""
    families: str | None = None
    """With source=generated: a comma-separated filter of family names (default: all)."""
    split: str = "train"
    dataset_name: str | None = None
    """None = the dataset shipped in the package; else a local path or a Hugging Face hub id."""
    max_turns: int = 5
    """Model turns before the rollout is stopped (and graded as it stands)."""
    task: ExactgradeTaskConfig = ExactgradeTaskConfig()
    tools: SandboxToolsetConfig = SandboxToolsetConfig()
    """Where the shared sandbox tool server runs (default: a subprocess on this host)."""

    @model_validator(mode="after")
    def _fixed_prompts(self) -> ExactgradeTasksetConfig:
        if self.system_prompt is not None:
            raise ValueError("exactgrade environments have one system prompt; it is not configurable")
        if "max_turns" not in self.model_fields_set and "max_turns" in self.task.model_fields_set:
            self.max_turns = self.task.max_turns  # --env.taskset.task.max-turns alone also works
        if self.task.max_turns != self.max_turns:
            self.task = self.task.model_copy(update={"max_turns": self.max_turns})
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        from exactgrade.family import parse_levels

        parse_levels(self.levels)  # a bad range is refused here, with the reason
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        return self

    def level_list(self) -> tuple[int, ...]:
        from exactgrade.family import parse_levels

        return parse_levels(self.levels)

    def family_list(self, domain: str) -> tuple[str, ...]:
        """The families the stream draws from, validated against the domain's."""
        from exactgrade.family import families, family_of

        if self.families is None:
            return families(domain)
        names = tuple(name.strip() for name in self.families.split(",") if name.strip())
        for name in names:
            family_of(domain, name)  # ValueError naming the known families
        if not names:
            raise ValueError("--env.taskset.families names no family")
        return names


class ExactgradeTaskset(vf.Taskset[ExactgradeTask, ExactgradeTasksetConfig]):
    """One domain's tasks. Subclasses set DOMAIN."""

    DOMAIN: ClassVar[str] = ""

    def __init__(self, config: ExactgradeTasksetConfig) -> None:
        super().__init__(config)
        self.INFINITE = config.source == "generated"
        if self.INFINITE:  # refuse an unknown family before the run starts, not at the first task
            config.family_list(self.DOMAIN)

    @classmethod
    def toolsets(cls, config: ExactgradeTasksetConfig) -> list[vf.Toolset]:
        from exactgrade.task import domain_module

        tools = config.tools
        if tools.warm_profile is None:  # the server starts this domain's zygote before the first call
            tools = tools.model_copy(update={"warm_profile": domain_module(cls.DOMAIN).PROFILE})
        return [SandboxToolset(tools)]  # one server for the whole eval

    def load(self) -> Iterable[ExactgradeTask]:
        if self.config.source == "generated":
            return self._generated()
        return self._dataset()

    def _generated(self) -> Iterator[ExactgradeTask]:
        """Position i: level i mod L, then family j mod F and index j // F (j = i // L).
        Each task and its key are built only when the run reaches it; the key stays here."""
        from exactgrade.family import generate

        levels = self.config.level_list()
        names = self.config.family_list(self.DOMAIN)
        for position in itertools.count():
            level, j = levels[position % len(levels)], position // len(levels)
            task = generate(self.DOMAIN, seed=self.config.seed, index=j // len(names), level=level,
                            family=names[j % len(names)])
            yield ExactgradeTask(ExactgradeData(
                id=task.id, name=task.id, category=task.category, domain=self.DOMAIN,
                prompt=generated_prompt(task), system_prompt=SYSTEM_PROMPT,
                inputs=wire.encode(dict(task.inputs)), split="generated",
            ), self.config.task)  # fmt: skip

    def _dataset(self) -> list[ExactgradeTask]:
        from exactgrade.dataset import load_split

        split, dataset_name = self.config.split, self.config.dataset_name
        rows = load_split(self.DOMAIN, split, dataset_name)
        keys.record((self.DOMAIN, split, dataset_name),
                    {row["task_id"]: keys.key_from_row(row) for row in rows})
        return [ExactgradeTask(ExactgradeData(
            id=row["task_id"], name=row["task_id"], category=row["category"], domain=self.DOMAIN,
            prompt=user_prompt(row), system_prompt=SYSTEM_PROMPT, inputs=row["inputs"],
            split=split, dataset_name=dataset_name,
        ), self.config.task) for row in rows]  # fmt: skip


def generated_prompt(task) -> str:
    """A generated task's question and conventions, ending with its id (which names the task,
    not its answer: a host rebuilds the key from it, the sandbox cannot)."""
    return (f"{user_prompt({'prompt': task.prompt, 'api_description': task.api_description})}\n\n"
            f"Task id: {task.id}")


def user_prompt(row) -> str:
    """The task's question followed by its stated conventions."""
    conventions = (row.get("api_description") or "").strip()
    return f"{row['prompt'].strip()}\n\n{conventions}" if conventions else row["prompt"].strip()
