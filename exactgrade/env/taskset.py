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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import verifiers.v1 as vf
from pydantic import model_validator

from exactgrade import wire
from exactgrade.env import instances, keys, modes
from exactgrade.env.hidden import draft_kept, hidden_check_applies, hidden_instance
from exactgrade.env.modes import EXACT_VALUES, TENSORS, AnswerMode, system_prompt  # noqa: F401 (re-exported)
from exactgrade.env.state import SandboxState
from exactgrade.env.toolset import SandboxToolset, SandboxToolsetConfig

if TYPE_CHECKING:
    from exactgrade.policy import Policy
    from exactgrade.task import Task

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
    answer_mode: AnswerMode = "tools"
    """How the model answers (exactgrade.env.modes); the prompt says so, and the task grades so."""
    hidden_check: bool = False
    """Code mode: `solve` is also called on a hidden instance of the same family and level, and both
    answers must pass (the prompt says so)."""


class ExactgradeTaskConfig(vf.TaskConfig):
    max_turns: int = 5
    """Set from the taskset's `max_turns` (`--env.taskset.max-turns`)."""
    backend: Literal["auto", "namespaces", "landlock"] = "auto"
    """The sandbox backend of code mode's host-run sandbox (set from `--env.taskset.tools.backend`)."""

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
        """vf-validate's gold check: the task's reference answer, given as the mode takes it (tools:
        the reference program through the sandbox tool server's own `execute_code`; code: it as
        `solve`; text: the key written out), is graded by the environment's own reward exactly as a
        rollout is. Valid iff it scores 1.0; a harness failure raises (reported as an error, not as
        an invalid key)."""
        from exactgrade import get_task
        from exactgrade.scripted.policies import reference_reply
        from exactgrade.scripted.text_replies import reference_text

        # host-side, like the key; never in TaskData
        program = self.instance().program if self.data.split == GENERATED else get_task(self.data.id).program
        mode = self.data.answer_mode
        if mode == "tools":
            trace = await self.play([("execute_code", program)], runtime)
        elif mode == "code":
            names = tuple(wire.decode(self.data.inputs))
            trace = await self.play([], runtime, reference_reply(program, names).text)
        else:
            trace = await self.play([], runtime, reference_text((await self._answer()).expected).text)
        score = trace.rewards["correctness"].score
        if score != 1.0:
            logger.warning("gold check of %s: the reference answer scores %s (%s)", self.data.id, score,
                           trace.info.get("reason"))
        return score == 1.0

    async def play(self, calls: Sequence[tuple[str, str]], runtime: vf.Runtime | None = None,
                   reply: str | None = None) -> vf.Trace:
        """A rollout without a model: send `calls` ((tool, text) pairs) to a sandbox of this
        process's own tool server, then (given a `reply`, the whole answer of a one-turn mode) end
        it with that assistant message, then finalize and grade it with the reward, in order. The
        score is in `trace.rewards["correctness"]`; a harness failure raises."""
        from verifiers.v1.graph import MessageNode

        task = vf.TraceTask(type=type(self).__name__, data=self.data, key=self.key, hash=self.hash)
        trace = vf.Trace(task=task, state=SandboxState(),
                         agent=vf.AgentInfo(config=vf.AgentConfig(), name="play", trainable=False))
        await self.setup(trace, runtime)
        if calls:
            tools = SandboxToolset(SandboxToolsetConfig())
            try:
                for tool, text in calls:
                    await tools.call_for(trace.state, tool, text)
            finally:
                await tools.close()
        if reply is not None:
            trace.nodes.append(MessageNode(message=vf.AssistantMessage(content=reply), sampled=True))
        await self.finalize(trace, runtime)
        trace.rewards = {"correctness": vf.Reward(score=await self.correctness(trace))}
        return trace

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        # The state is not saved with the trace; the sandbox's outcome is, so that vf-replay
        # re-scores a saved run with exactly what the live reward saw.
        if self.data.answer_mode == "code":
            await self._run_code_answer(trace)
        trace.info[OUTCOME] = trace.state.model_dump(include=OUTCOME_FIELDS)
        trace.info["env_pid"] = os.getpid()  # which env-server worker ran it (under a pool)

    async def _run_code_answer(self, trace: vf.Trace) -> None:
        """Code mode: run the final message's python block in a fresh sandbox and call `solve` on the
        task's inputs (and the hidden instance's); what it leaves goes into the state, as the tool
        server's calls leave it in tools mode."""
        from exactgrade.env import code_answer

        state: SandboxState = trace.state
        messages = trace.assistant_messages
        block = code_answer.extract_block(code_answer.final_text(messages[-1].content) if messages else "")
        if block.code is None:
            state.model_fault = block.reason
            return
        calls = [wire.decode(self.data.inputs)]
        if self.data.hidden_check:
            try:
                hidden = await asyncio.to_thread(self.hidden_instance)
            except Exception as error:  # noqa: BLE001 - the host could not build its own check
                why = f"{type(error).__name__}: {error}"
                state.sandbox_error = f"the hidden instance could not be built: {why}"
                return
            if draft_kept(hidden):
                calls.append(dict(hidden.inputs))
        outcome = await asyncio.to_thread(code_answer.run_block, block.code, calls, state.profile,
                                          self.config.backend)
        state.result_wire = outcome.returned[0] if outcome.returned else None
        state.check_wire = outcome.returned[1] if len(outcome.returned) > 1 else None
        state.model_fault, state.sandbox_error = outcome.fault, outcome.harness_error
        state.sandbox_seconds, state.sandbox_uid = outcome.seconds, outcome.sandbox_uid

    def hidden_instance(self) -> Task:
        """Code mode's hidden instance of this task (hidden_instance below); it blocks."""
        data = self.data
        hidden = hidden_instance(data.domain, data.family, data.level, data.seed, data.index)
        if hidden is None:
            raise ValueError(f"{data.id} has no family: no hidden instance of it exists")
        return hidden

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

    async def _answer(self) -> keys.AnswerKey:
        """The answer key: a generated key runs the reference (off the loop); a dataset's is a lookup."""
        return await asyncio.to_thread(self.answer) if self.data.split == GENERATED else self.answer()

    async def _grade(self, trace: vf.Trace) -> float:
        from exactgrade.compare import compare
        from exactgrade.verdict import render_path

        if self.data.answer_mode == "text":
            return await self._grade_text(trace)
        state = outcome(trace)
        failure = harness_failure(trace, state, tools=self.data.answer_mode == "tools")
        if failure is None and state.result_wire is not None:
            try:
                actual = wire.decode(state.result_wire)
            except wire.WireError as e:
                failure = f"read-back refused on the host: {e}"
        if failure is None and state.model_fault is None and state.result_wire is not None:
            try:
                answer = await self._answer()
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
        if verdict.ok and self.data.hidden_check:
            return await self._grade_hidden(trace, state)
        return 1.0 if verdict.ok else 0.0

    async def _grade_text(self, trace: vf.Trace) -> float:
        """Text mode: the final message's answer, read by the key and compared on the host
        (exactgrade.text.grade_text; no sandbox). Whatever the text is, it is a wrong answer with the
        reason; only the host failing to key the task or to grade at all is a harness failure."""
        from exactgrade.env.code_answer import final_text
        from exactgrade.text import grade_text
        from exactgrade.verdict import render_path

        messages = trace.assistant_messages
        message = final_text(messages[-1].content) if messages else ""
        try:
            answer = await self._answer()
            verdict = await asyncio.to_thread(grade_text, message, answer.expected, answer.policy)
            failure = verdict.reason if verdict.reason.startswith(GRADER_ERROR) else None
        except instances.InstanceRefused as refused:
            failure = str(refused)
        if failure is not None:
            trace.info["scoring_error"] = failure
            raise HarnessFailure(failure)
        trace.info["reason"] = "passed" if verdict.ok else verdict.reason
        trace.info["path"] = render_path(verdict.path)
        return 1.0 if verdict.ok else 0.0

    async def _grade_hidden(self, trace: vf.Trace, state: SandboxState) -> float:
        """Code mode, once the task's own answer passed: `solve`'s answer on the hidden instance."""
        from exactgrade.compare import compare
        from exactgrade.verdict import render_path

        try:
            hidden = await asyncio.to_thread(self.hidden_instance)
            kept = draft_kept(hidden)
            actual = wire.decode(state.check_wire) if kept and state.check_wire is not None else None
        except Exception as error:  # noqa: BLE001 - the host's own decode or build failed
            why = f"the hidden instance cannot be graded: {type(error).__name__}: {error}"
            trace.info["scoring_error"] = why
            raise HarnessFailure(trace.info["scoring_error"]) from None
        if not kept:  # the load promised a hidden question its built instance does not ask
            trace.info["hidden_check"] = f"skipped: {hidden.id} asks another question than its draft"
            return 1.0
        trace.info["path"] = "hidden"
        if actual is None:
            trace.info["reason"] = "solve returned nothing on the hidden instance"
            return 0.0
        verdict = await asyncio.to_thread(compare, hidden.expected, actual, hidden.policy)
        trace.info["reason"] = "passed" if verdict.ok else f"on the hidden instance: {verdict.reason}"
        trace.info["path"] = ("" if verdict.ok else "hidden:") + render_path(verdict.path)
        return 1.0 if verdict.ok else 0.0


GRADER_ERROR = "internal error"
"""How grade_text's verdict begins when the grader itself failed (a bug, never the text's doing)."""
OUTCOME = "sandbox"
"""trace.info key of the recorded sandbox outcome."""
OUTCOME_FIELDS = frozenset({"result_wire", "result_error", "tool_calls", "sandbox_seconds", "sandbox_uid",
                            "sandbox_error", "model_fault", "check_wire"})
"""Every state field the reward reads: a field left out here would be lost at finalize (a rollout
whose code killed its sandbox after a correct `result` would then be rewarded)."""


def outcome(trace: vf.Trace) -> SandboxState:
    """What the sandbox left for grading: the copy recorded in the trace at finalize (the only
    one a replayed trace has), else the live state."""
    recorded = trace.info.get(OUTCOME)
    return SandboxState.model_validate(recorded) if recorded is not None else trace.state


def harness_failure(trace: vf.Trace, state: SandboxState, tools: bool = True) -> str | None:
    """Why the rollout cannot be graded, or None: a sandbox the harness lost, a read-back the host
    failed, or (with `tools` offered) well-formed tool calls the tool server never handled (it
    crashed or was unreachable)."""
    if state.sandbox_error is not None:
        return state.sandbox_error
    if not tools:
        return None
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
    """Model turns before the rollout is stopped (and graded as it stands; code and text modes: 1)."""
    answer_mode: AnswerMode = "tools"
    """`tools`: execute_code/bash in a sandbox, the answer in `result` (multi-turn); `code`: one turn,
    one python block defining solve(<inputs>), run by the host in the sandbox; `text`: one turn, the
    answer written in the final message, parsed and graded on the host (exactgrade.env.modes)."""
    hidden_check: bool = True
    """Code mode: also call `solve` on a hidden instance of the same family and level, and require
    both answers (a hard-coded answer fails)."""
    task: ExactgradeTaskConfig = ExactgradeTaskConfig()
    tools: SandboxToolsetConfig = SandboxToolsetConfig()
    """Where the shared sandbox tool server runs (default: a subprocess on this host)."""

    @model_validator(mode="after")
    def _fixed_prompts(self) -> _GeneratedConfig:
        if self.system_prompt is not None:
            raise ValueError("exactgrade environments set each task's system prompt; it is not configurable")
        if "max_turns" not in self.model_fields_set and "max_turns" in self.task.model_fields_set:
            self.max_turns = self.task.max_turns  # --env.taskset.task.max-turns alone also works
        explicit = "max_turns" in self.model_fields_set or "max_turns" in self.task.model_fields_set
        if self.answer_mode != "tools" and not explicit:
            self.max_turns = 1  # one answer, no tools: a second turn has nothing to answer
        if (self.task.max_turns, self.task.backend) != (self.max_turns, self.tools.backend):
            update = {"max_turns": self.max_turns, "backend": self.tools.backend}
            self.task = self.task.model_copy(update=update)
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

    if config.answer_mode != "tools":
        return []  # code and text modes offer the model no tool
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
    refused = 0  # consecutive tasks text mode does not serve
    for position in positions:
        level, family = cells[position % len(cells)]
        task = generate(domain, seed=config.seed, index=position // len(cells), level=level, family=family)
        if config.answer_mode == "text" and modes.text_refusal(task.expected) is not None:
            refused += 1
            if refused >= MAX_REFUSED_RUN:
                raise ValueError(f"text mode serves none of {refused} consecutive generated {domain} tasks "
                                 "(their keys hold floating tensors): choose other families or another "
                                 "answer mode")
            continue
        refused = 0
        yield ExactgradeTask(generated_data(domain, task, config.show_task_id, config.answer_mode,
                                            config.hidden_check), config.task)


MAX_REFUSED_RUN = 1000
"""Text mode: generated tasks refused in a row before a pool or stream is declared empty."""


def generated_data(domain: str, task: Task, show_task_id: bool = False, mode: AnswerMode = "tools",
                   hidden_check: bool = True) -> ExactgradeData:
    """The TaskData of a generated task: what the model sees, the instance (inputs, draw, stream
    version: what a worker keys it from) and its difficulty; never its key."""
    from exactgrade.family import STREAM_VERSION

    if mode == "code" and hidden_check:
        hidden_check = hidden_check_applies(task.prompt, task.inputs, domain, task.family, task.level,
                                            task.seed, task.index)
    prompt, system = mode_prompts(task.id, generated_prompt(task, show_task_id), task.inputs, task.expected,
                                  task.policy, mode, hidden_check)
    return ExactgradeData(
        id=task.id, name=task.id, category=task.category, domain=domain, prompt=prompt, system_prompt=system,
        inputs=wire.encode(dict(task.inputs)), split=GENERATED, family=task.family, level=task.level,
        seed=task.seed, index=task.index, attempt=instances.attempt_of(task), stream=STREAM_VERSION,
        answer_mode=mode, hidden_check=mode == "code" and hidden_check,
    )  # fmt: skip


def mode_prompts(task_id: str, prompt: str, inputs: Mapping[str, Any], expected: Any, policy: Policy,
                 mode: AnswerMode, hidden_check: bool) -> tuple[str, str]:
    """(user prompt, system prompt) of a task in `mode`: the tools-mode text rewritten
    (exactgrade.env.modes); ValueError if the rewrite leaves a word of another mode."""

    text = modes.rewrite(prompt, mode)
    if mode == "text":
        text = modes.text_inputs(text, inputs)
    word = modes.leftover(text, mode)
    if word is not None:
        raise ValueError(f"{task_id}: its {mode}-mode prompt still speaks of {word!r} (exactgrade.env.modes)")
    return text, system_prompt(expected, policy, mode, inputs, hidden_check)


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
            if self.config.answer_mode == "text":  # the first `size` tasks text mode serves
                tasks = generated_tasks(self.DOMAIN, self.config, itertools.count())
                return itertools.islice(tasks, self.config.size)
            return generated_tasks(self.DOMAIN, self.config, range(self.config.size))
        return self._dataset()

    def _dataset(self) -> list[ExactgradeTask]:
        from exactgrade.dataset import load_split

        split, dataset_name = self.config.split, self.config.dataset_name
        rows = load_split(self.DOMAIN, split, dataset_name)
        answers = {row["task_id"]: keys.key_from_row(row) for row in rows}
        keys.record((self.DOMAIN, split, dataset_name), answers)
        families = _canonical_families(self.DOMAIN)
        mode, hidden_check = self.config.answer_mode, self.config.hidden_check
        if mode == "text":
            rows = served_rows(self.DOMAIN, rows, answers)
        tasks = []
        for row in rows:
            answer = answers[row["task_id"]]
            generated = "level" in row and row["level"] is not None
            inputs = wire.decode(row["inputs"])
            family = row["family"] if generated else families.get(row["task_id"])
            level = row["level"] if generated else 1
            seed, index = (row["seed"], row["index"]) if generated else (None, None)
            checked = mode == "code" and hidden_check and hidden_check_applies(
                row["prompt"], inputs, self.DOMAIN, family, level, seed, index)
            prompt, system = mode_prompts(row["task_id"], user_prompt(row), inputs, answer.expected,
                                          answer.policy, mode, checked)
            tasks.append(ExactgradeTask(ExactgradeData(
                id=row["task_id"], name=row["task_id"], category=row["category"], domain=self.DOMAIN,
                prompt=prompt, system_prompt=system, inputs=row["inputs"], split=split,
                dataset_name=dataset_name,
                family=family, level=level, seed=seed, index=index, answer_mode=mode, hidden_check=checked,
            ), self.config.task))  # fmt: skip
        return tasks


def served_rows(domain: str, rows: Sequence[Mapping[str, Any]],
                answers: Mapping[str, keys.AnswerKey]) -> list[Mapping[str, Any]]:
    """The rows text mode serves (exactgrade.env.modes.text_refusal), saying at load how many and
    why the others are left out."""
    served = [row for row in rows if modes.text_refusal(answers[row["task_id"]].expected) is None]
    if len(served) < len(rows):
        logger.warning("%s text mode serves %d of %d tasks: the other %d keys hold floating-point tensors, "
                       "which a text answer cannot write exactly (code or tools mode serves them)",
                       domain, len(served), len(rows), len(rows) - len(served))
    return served


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
