"""The verifiers adapter shared by scaling-env, pytorch-env, deeplearning-env and their streams.

ExactgradeTaskset is finite: the rows of a domain's dataset (shipped, a local path or a hub id),
or a pool of `size` generated tasks in a fixed order. ExactgradeStream is the infinite stream of
the same generated tasks, its own class (verifiers and prime-rl read `type(taskset).INFINITE`)
and so its own environment id. TaskData carries what the model may see (prompt, inputs) and the
task's difficulty (family, level, seed, index); the answer key stays on the host
(`exactgrade.env.keys`; a generated task is keyed from the instance its TaskData carries,
`exactgrade.env.instances`). The model's two tools run in an exactgrade Sandbox behind the shared
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
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import verifiers.v1 as vf
from pydantic import model_validator

from exactgrade import wire
from exactgrade.env import instances, keys
from exactgrade.env.state import SandboxState
from exactgrade.env.toolset import SandboxToolset, SandboxToolsetConfig

if TYPE_CHECKING:
    from exactgrade.policy import Policy
    from exactgrade.task import Task

SYSTEM_PROMPT_HEAD = """\
You solve quantitative deep-learning problems whose answers are graded exactly.

You have two tools, both running in the same isolated sandbox (no network):
- execute_code(code): runs Python in a persistent interpreter. The task's inputs are already \
defined as variables with the names the task gives, and every variable persists across calls.
- bash(command): runs a shell command in the sandbox.

Put your final answer in the Python variable `result` with execute_code."""
EXACT_VALUES = ("Give exact values (int, fractions.Fraction, sympy expressions) wherever the task asks for "
                "an exact value; a float is accepted only where the task says so.")
"""Shown only to tasks whose answer holds a value a float cannot match (see system_prompt)."""
TENSORS = "Give tensors as torch tensors of the stated shape and dtype."
"""Shown only to tasks whose answer holds a tensor."""
SYSTEM_PROMPT_TAIL = "Once `result` holds your answer, reply with one short sentence and no tool call."


def system_prompt(expected: Any, policy: Policy) -> str:
    """The system prompt of one task: how to answer, with only the conventions that apply to its
    answer (the exact-values sentence where a float would fail, the tensor sentence where the
    answer holds a tensor)."""
    kinds = _answer_kinds(expected, policy)
    sentences = [EXACT_VALUES] * ("exact" in kinds) + [TENSORS] * ("tensor" in kinds)
    return " ".join([SYSTEM_PROMPT_HEAD, *sentences, SYSTEM_PROMPT_TAIL])


def _answer_kinds(value: Any, policy: Policy) -> set[str]:
    """"exact" if some leaf needs an exact value (an int always: 11.0 fails an int key; a Fraction or
    an exact sympy value under Exact()), "tensor" if some leaf is a tensor."""
    import sympy

    from exactgrade.policy import Exact
    from exactgrade.values import TensorValue

    if isinstance(value, dict):
        return set().union(*(_answer_kinds(v, policy) for v in value.values()))
    if isinstance(value, list | tuple):
        return set().union(*(_answer_kinds(v, policy) for v in value))
    if isinstance(value, TensorValue):
        return {"tensor"}
    if type(value) is int:
        return {"exact"}
    if isinstance(value, Fraction | sympy.Basic) and isinstance(policy, Exact):
        return {"exact"}
    return set()


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
    """The dataset split, or GENERATED for a task of the generated source."""
    dataset_name: str | None = None
    """Where the row came from (None = the dataset shipped in the package)."""
    family: str | None = None
    """The task's family (exactgrade.family): with level, what a trainer's logs group rewards by."""
    level: int | None = None
    """Difficulty level 1..5 (the canonical tasks are level 1)."""
    seed: int | None = None
    """A generated task's stream seed and its index in the stream of (family, level, seed)."""
    index: int | None = None
    attempt: int | None = None
    """A generated task: the draw its inputs came from; with `stream`, what lets a worker check that
    `inputs` are the instance the id names, without sampling again (exactgrade.env.instances)."""
    stream: str | None = None
    """A generated task: the stream version it was drawn under (exactgrade.family.STREAM_VERSION)."""


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

    def instance(self) -> Task:
        """A generated task as its TaskData carries it, keyed by its reference (never re-drawn);
        InstanceRefused when the data is not the instance its id names."""
        return instances.instance(self.data.id, self.data.domain, self.data.inputs, self.data.attempt,
                                  self.data.stream)

    def answer(self) -> keys.AnswerKey:
        """The answer key: from the carried instance (generated source) or the dataset's row."""
        if self.data.split == GENERATED:
            task = self.instance()
            return keys.AnswerKey(task.expected, task.policy)
        return keys.lookup(self.source, self.data.id)

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        from exactgrade.task import domain_module

        if self.data.split == GENERATED:  # refuse a task that cannot be keyed before the model runs
            try:
                await asyncio.to_thread(self.instance)
            except instances.InstanceRefused as refused:
                trace.info["scoring_error"] = str(refused)
                raise HarnessFailure(str(refused)) from None
        trace.state.inputs_wire = self.data.inputs
        trace.state.profile = domain_module(self.data.domain).PROFILE

    async def validate(self, runtime: vf.Runtime) -> bool:
        """vf-validate's gold check: the task's reference program, sent through the sandbox tool
        server's own `execute_code` (a real sandbox, the same read-back), is graded by the
        environment's own reward exactly as a rollout is. Valid iff it scores 1.0; a harness
        failure raises (reported as an error, not as an invalid key)."""
        from exactgrade import get_task

        # host-side, like the key; never in TaskData
        program = self.instance().program if self.data.split == GENERATED else get_task(self.data.id).program
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

    @vf.metric
    async def difficulty(self, trace: vf.Trace) -> dict[str, float]:
        """`level`, `seed`, `index`, and the rollout's score as `passed_level_<L>` and
        `passed_family_<family>`: a trainer averages each metric over the rollouts that have it,
        so its logs show the pass rate per level and per family. None of the pass metrics on a
        harness failure (the reward raises it; the rollout is not graded)."""
        data, shown = self.data, {}
        for name in ("level", "seed", "index"):
            if getattr(data, name) is not None:
                shown[name] = float(getattr(data, name))
        try:
            score = await self._grade(trace)
        except HarnessFailure as failure:
            self._graded()[trace.id] = failure
            return shown
        self._graded()[trace.id] = score
        if data.level is not None:
            shown[f"passed_level_{data.level}"] = score
        if data.family is not None:
            shown[f"passed_family_{data.family}"] = score
        return shown

    @vf.reward(weight=1.0)
    async def correctness(self, trace: vf.Trace) -> float:
        """1.0 iff the verdict passes (graded once: the `difficulty` metric, which runs first, may
        already have graded this trace)."""
        graded = self._graded().pop(trace.id, None)
        if isinstance(graded, HarnessFailure):
            raise graded
        return graded if graded is not None else await self._grade(trace)

    def _graded(self) -> dict[str, float | HarnessFailure]:
        return self.__dict__.setdefault("_graded_traces", {})

    async def _grade(self, trace: vf.Trace) -> float:
        from exactgrade.compare import compare
        from exactgrade.verdict import render_path

        state = outcome(trace)
        failure = harness_failure(trace, state)
        if failure is None and state.result_wire is not None:
            try:
                actual = wire.decode(state.result_wire)
            except wire.WireError as e:
                failure = f"read-back refused on the host: {e}"
        if failure is None and state.model_fault is None and state.result_wire is not None:
            try:  # a generated key runs the reference (off the loop); a dataset's is a lookup (on it)
                generated = self.data.split == GENERATED
                answer = await asyncio.to_thread(self.answer) if generated else self.answer()
            except instances.InstanceRefused as refused:
                failure = str(refused)
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


GENERATED = "generated"
"""TaskData.split of a task of the generated source (a finite pool or an infinite stream)."""
DEFAULT_POOL_SIZE = 1000


class _GeneratedConfig(vf.TasksetConfig):
    """What every exactgrade taskset shares, and how its generated tasks are drawn."""

    seed: int = 0
    """Generated tasks: the seed (pools and streams of two seeds share no task)."""
    levels: str = "1-5"
    """Generated tasks: a level or a range (e.g. `3` or `1-5`), mixed round-robin."""
    families: str | None = None
    """Generated tasks: a comma-separated filter of family names (default: all)."""
    show_task_id: bool = False
    """Generated tasks: end the prompt with a `Task id: ...` line (the scripted policies of the demo
    and the tests find a generated task by it; a real model needs no such line)."""
    max_turns: int = 5
    """Model turns before the rollout is stopped (and graded as it stands)."""
    task: ExactgradeTaskConfig = ExactgradeTaskConfig()
    tools: SandboxToolsetConfig = SandboxToolsetConfig()
    """Where the shared sandbox tool server runs (default: a subprocess on this host)."""

    @model_validator(mode="after")
    def _fixed_prompts(self) -> _GeneratedConfig:
        if self.system_prompt is not None:
            raise ValueError("exactgrade environments set each task's system prompt; it is not configurable")
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
        """The families generated tasks are drawn from, validated against the domain's."""
        from exactgrade.family import parse_families

        return parse_families(domain, self.families)

    def cells(self, domain: str) -> tuple[tuple[int, str], ...]:
        """The (level, family) cells generated tasks cycle through, in position order: position p
        is cell p mod C, index p div C of that cell's stream (level fastest, then family)."""
        levels, names = self.level_list(), self.family_list(domain)
        count = len(levels) * len(names)
        return tuple((levels[k % len(levels)], names[k // len(levels)]) for k in range(count))


class ExactgradeTasksetConfig(_GeneratedConfig):
    source: Literal["dataset", "generated"] = "dataset"
    """`dataset`: the rows of a dataset (below); `generated`: a finite pool of `size` generated
    tasks (exactgrade.generate), in a fixed order, built lazily as the run reaches them."""
    size: int = DEFAULT_POOL_SIZE
    """With source=generated: how many tasks the pool holds (unique keys)."""
    calibration: str | None = None
    """With source=generated: a calibration.json (python -m exactgrade calibrate); the pool then
    keeps only the (family, level) cells whose measured pass rate lies within `band`."""
    band: str = "0-1"
    """With `calibration`: the pass-rate band `LOW-HIGH` a cell must lie in (e.g. 0.1-0.9)."""
    split: str = "train"
    dataset_name: str | None = None
    """None = the dataset shipped in the package; else a local path or a Hugging Face hub id."""

    @model_validator(mode="after")
    def _pool_options(self) -> ExactgradeTasksetConfig:
        from exactgrade.env.calibration import parse_band

        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")
        parse_band(self.band)
        if self.calibration is not None and self.source != GENERATED:
            raise ValueError("calibration selects cells of the generated pool: it needs source=generated")
        return self

    def cells(self, domain: str) -> tuple[tuple[int, str], ...]:
        cells = super().cells(domain)
        if self.calibration is None:
            return cells
        from exactgrade.env.calibration import cells_in_band, parse_band

        return cells_in_band(self.calibration, domain, cells, parse_band(self.band))


class ExactgradeStreamConfig(_GeneratedConfig):
    """An infinite stream of generated tasks: the seed, levels and families of its draws."""


def _toolsets(domain: str, config: _GeneratedConfig) -> list[vf.Toolset]:
    from exactgrade.task import domain_module

    tools = config.tools
    if tools.warm_profile is None:  # the server starts this domain's zygote before the first call
        tools = tools.model_copy(update={"warm_profile": domain_module(domain).PROFILE})
    return [SandboxToolset(tools)]  # one server for the whole eval


def generated_tasks(domain: str, config: _GeneratedConfig,
                    positions: Iterable[int]) -> Iterator[ExactgradeTask]:
    """The generated tasks at `positions` (ExactgradeTasksetConfig.cells says which task each is).
    Each task and its key are built only when the iteration reaches it; the key stays here."""
    from exactgrade.family import generate

    cells = config.cells(domain)
    for position in positions:
        level, family = cells[position % len(cells)]
        task = generate(domain, seed=config.seed, index=position // len(cells), level=level, family=family)
        yield ExactgradeTask(generated_data(domain, task, config.show_task_id), config.task)


def generated_data(domain: str, task: Task, show_task_id: bool = False) -> ExactgradeData:
    """The TaskData of a generated task: what the model sees, the instance (inputs, draw, stream
    version: what a worker keys it from) and its difficulty; never its key."""
    from exactgrade.family import STREAM_VERSION

    return ExactgradeData(
        id=task.id, name=task.id, category=task.category, domain=domain,
        prompt=generated_prompt(task, show_task_id), system_prompt=system_prompt(task.expected, task.policy),
        inputs=wire.encode(dict(task.inputs)), split=GENERATED, family=task.family, level=task.level,
        seed=task.seed, index=task.index, attempt=instances.attempt_of(task), stream=STREAM_VERSION,
    )  # fmt: skip


class ExactgradeTaskset(vf.Taskset[ExactgradeTask, ExactgradeTasksetConfig]):
    """One domain's tasks, a finite taskset: a dataset's rows, or a pool of generated tasks.
    Subclasses set DOMAIN."""

    DOMAIN: ClassVar[str] = ""

    def __init__(self, config: ExactgradeTasksetConfig) -> None:
        super().__init__(config)
        if config.source == GENERATED:  # refuse an unknown family or an empty band before the run starts
            config.cells(self.DOMAIN)

    @classmethod
    def toolsets(cls, config: ExactgradeTasksetConfig) -> list[vf.Toolset]:
        return _toolsets(cls.DOMAIN, config)

    def load(self) -> Iterable[ExactgradeTask]:
        if self.config.source == GENERATED:
            return generated_tasks(self.DOMAIN, self.config, range(self.config.size))
        return self._dataset()

    def _dataset(self) -> list[ExactgradeTask]:
        from exactgrade.dataset import load_split

        split, dataset_name = self.config.split, self.config.dataset_name
        rows = load_split(self.DOMAIN, split, dataset_name)
        answers = {row["task_id"]: keys.key_from_row(row) for row in rows}
        keys.record((self.DOMAIN, split, dataset_name), answers)
        families = _canonical_families(self.DOMAIN)
        tasks = []
        for row in rows:
            answer = answers[row["task_id"]]
            generated = "level" in row and row["level"] is not None
            tasks.append(ExactgradeTask(ExactgradeData(
                id=row["task_id"], name=row["task_id"], category=row["category"], domain=self.DOMAIN,
                prompt=user_prompt(row), system_prompt=system_prompt(answer.expected, answer.policy),
                inputs=row["inputs"], split=split, dataset_name=dataset_name,
                family=row["family"] if generated else families.get(row["task_id"]),
                level=row["level"] if generated else 1,
                seed=row["seed"] if generated else None, index=row["index"] if generated else None,
            ), self.config.task))  # fmt: skip
        return tasks


class ExactgradeStream(vf.Taskset[ExactgradeTask, ExactgradeStreamConfig]):
    """One domain's infinite stream of generated tasks (its own environment id: verifiers and
    prime-rl read infinity from the class). Subclasses set DOMAIN."""

    DOMAIN: ClassVar[str] = ""
    INFINITE: ClassVar[bool] = True

    def __init__(self, config: ExactgradeStreamConfig) -> None:
        super().__init__(config)
        config.cells(self.DOMAIN)  # refuse an unknown family before the run starts

    @classmethod
    def toolsets(cls, config: ExactgradeStreamConfig) -> list[vf.Toolset]:
        return _toolsets(cls.DOMAIN, config)

    def load(self) -> Iterator[ExactgradeTask]:
        return generated_tasks(self.DOMAIN, self.config, itertools.count())


def _canonical_families(domain: str) -> dict[str, str]:
    """Canonical task id -> its family (nothing is run)."""
    from exactgrade.task import task_defs

    return {d.id: d.family for d in task_defs(domain) if d.family is not None}


def generated_prompt(task: Task, show_task_id: bool = False) -> str:
    """A generated task's question and conventions; with `show_task_id`, ending with its id (which
    names the task, not its answer: the scripted policies find the task by it)."""
    text = user_prompt({"prompt": task.prompt, "api_description": task.api_description})
    return f"{text}\n\nTask id: {task.id}" if show_task_id else text


def user_prompt(row) -> str:
    """The task's question followed by its stated conventions."""
    conventions = (row.get("api_description") or "").strip()
    return f"{row['prompt'].strip()}\n\n{conventions}" if conventions else row["prompt"].strip()
