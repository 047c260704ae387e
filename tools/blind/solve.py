#!/usr/bin/env python
"""Blind-solver harness: a solver plays the model on generated tasks, seeing only what the model sees.

  solve.py list DOMAIN SEED [LEVEL|all]  task ids: one per family (LEVEL, or all five levels), index 0
  solve.py show ID                       the system prompt, the user prompt and the preloaded inputs
  solve.py grade ID FILE                 run FILE in a real sandbox (inputs preloaded), grade `result`
  solve.py reveal ID                     the answer key and the reference program (only after grading)

Run it with the project's interpreter from the project root. It uses the public API
(get_task, families, generate, compare, the sandbox, the environments' prompts); adapt it when that API moves.
The prompts are exactly what the environments show a model: each task's own system prompt
(system_prompt: only the conventions that apply to its answer) and the user prompt without the
`Task id:` line (shown only to the scripted policies).
"""
import sys

from exactgrade import compare, families, generate, get_task
from exactgrade.env.taskset import generated_prompt, system_prompt
from exactgrade.task import domain_module


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
    print(f"\n(sandbox profile: {domain_module(task.domain).PROFILE})")


def grade(task_id, path):
    from exactgrade.sandbox import NoResult, ResultNotEncodable, Sandbox

    task = get_task(task_id)
    with Sandbox(inputs=dict(task.inputs), profile=domain_module(task.domain).PROFILE) as sandbox:
        print("--- sandbox output ---\n" + sandbox.execute_code(open(path).read())[-2000:])
        try:
            value = sandbox.result()
        except (NoResult, ResultNotEncodable) as error:
            print(f"VERDICT: FAIL ({error})")
            return
    verdict = compare(task.expected, value, task.policy)
    print(f"VERDICT: {'PASS' if verdict.ok else 'FAIL'}  reason: {verdict.reason}")


def reveal(task_id):
    task = get_task(task_id)
    print("=== KEY ===\n" + repr(task.expected)[:4000])
    print("policy:", task.policy)
    print("\n=== REFERENCE PROGRAM ===\n" + task.program)


if __name__ == "__main__":
    command, *args = sys.argv[1:] or ["--help"]
    commands = {"list": list_ids, "show": show, "grade": grade, "reveal": reveal}
    if command not in commands:
        sys.exit(__doc__)
    commands[command](*args)
