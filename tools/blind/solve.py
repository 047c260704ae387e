#!/usr/bin/env python
"""Blind-solver harness: a solver plays the model on generated tasks, seeing only what the model sees.

  solve.py list DOMAIN SEED [LEVEL|all]  task ids: one per family (LEVEL, or all five levels), index 0
  solve.py show ID                       the system prompt, the user prompt and the preloaded inputs
  solve.py grade ID FILE                 run FILE in a real sandbox (inputs preloaded), grade `result`
  solve.py reveal ID                     the answer key and the reference program (only after grading)

Under the environments' own rollout budget (the model has max_turns = 5 turns, each one tool call
into one persistent sandbox, and no other computer), a solver uses instead:

  solve.py call ID FILE [--bash] DIR     one tool call: FILE's code (or shell command) as the next call
                                         of the session DIR/ID.calls/; prints that call's output only;
                                         refused after the budget
  solve.py final ID DIR                  grade `result` as the session left it (what the reward reads)

A session replays its earlier calls in a fresh sandbox before the new one, so every variable persists
as it does in a rollout; only the new call's output is shown.

Run it with the project's interpreter from the project root. It uses the public API
(get_task, families, generate, compare, the sandbox, the environments' prompts); adapt it when that API moves.
The prompts are exactly what the environments show a model: each task's own system prompt
(system_prompt: only the conventions that apply to its answer) and the user prompt without the
`Task id:` line (shown only to the scripted policies).
"""
import sys
from pathlib import Path

from exactgrade import compare, families, generate, get_task
from exactgrade.env.taskset import ExactgradeTaskConfig, generated_prompt, system_prompt
from exactgrade.task import domain_module

BUDGET = ExactgradeTaskConfig.model_fields["max_turns"].default
"""Tool calls a session may make: the environments' default max_turns (each turn one call)."""


def list_ids(domain, seed, level="all"):
    levels = range(1, 6) if level == "all" else [int(level)]
    for lv in levels:
        for fam in families(domain):
            print(generate(domain, seed=int(seed), index=0, level=lv, family=fam).id)


def show(task_id):
    task = get_task(task_id)
    print("=== SYSTEM PROMPT ===\n" + system_prompt(task.expected, task.policy))
    print("\n=== USER PROMPT ===\n" + generated_prompt(task))
    print("\n=== PRELOADED INPUTS (already defined in the sandbox) ===")
    for name, value in task.inputs.items():
        text = repr(value)
        print(f"{name} = {text[:3000]}{' ...' if len(text) > 3000 else ''}")
    print(f"\n(sandbox profile: {domain_module(task.domain).PROFILE}; budget: {BUDGET} tool calls)")


def _sandbox(task):
    from exactgrade.sandbox import Sandbox

    return Sandbox(inputs=dict(task.inputs), profile=domain_module(task.domain).PROFILE)


def _verdict(task, sandbox):
    from exactgrade.sandbox import NoResult, ResultNotEncodable

    try:
        value = sandbox.result()
    except (NoResult, ResultNotEncodable) as error:
        print(f"VERDICT: FAIL ({error})")
        return
    verdict = compare(task.expected, value, task.policy)
    print(f"VERDICT: {'PASS' if verdict.ok else 'FAIL'}  reason: {verdict.reason}")


def grade(task_id, path):
    task = get_task(task_id)
    with _sandbox(task) as sandbox:
        print("--- sandbox output ---\n" + sandbox.execute_code(open(path).read())[-2000:])
        _verdict(task, sandbox)


def _calls(task_id, folder):
    calls = Path(folder) / f"{task_id}.calls"
    calls.mkdir(parents=True, exist_ok=True)
    return calls, sorted(calls.iterdir())


def _replay(sandbox, made):
    output = ""
    for path in made:
        tool = sandbox.bash if path.suffix == ".sh" else sandbox.execute_code
        output = tool(path.read_text())
    return output


def call(task_id, path, *rest):
    *flags, folder = rest
    calls, made = _calls(task_id, folder)
    if len(made) >= BUDGET:
        sys.exit(f"refused: the budget of {BUDGET} tool calls is spent; `final {task_id} {folder}` grades it")
    new = calls / f"{len(made) + 1:02d}{'.sh' if '--bash' in flags else '.py'}"
    new.write_text(Path(path).read_text())
    with _sandbox(get_task(task_id)) as sandbox:
        _replay(sandbox, made)
        print(f"--- call {len(made) + 1} of {BUDGET}: output ---\n" + _replay(sandbox, [new])[-4000:])


def final(task_id, folder):
    task = get_task(task_id)
    _, made = _calls(task_id, folder)
    with _sandbox(task) as sandbox:
        _replay(sandbox, made)
        print(f"({len(made)} of {BUDGET} tool calls made)")
        _verdict(task, sandbox)


def reveal(task_id):
    task = get_task(task_id)
    print("=== KEY ===\n" + repr(task.expected)[:4000])
    print("policy:", task.policy)
    print("\n=== REFERENCE PROGRAM ===\n" + task.program)


if __name__ == "__main__":
    command, *args = sys.argv[1:] or ["--help"]
    commands = {"list": list_ids, "show": show, "grade": grade, "call": call, "final": final,
                "reveal": reveal}
    if command not in commands:
        sys.exit(__doc__)
    commands[command](*args)
