"""Scripted policies: for one task, the tool calls a "model" makes, in order.

- reference: the task's reference program through `execute_code` (proves the whole path:
  prompt, sandbox, read-back, grading);
- mutant: the reference program followed by one deliberate error in `result` (a dropped
  factor, bits for nats, a string number, a wrong shape, a float where an exact value is
  required), chosen per task so that it can never pass;
- adversarial: an attack per task (read the key, escape, forge, crash, a memory bomb, or a
  correct answer followed by killing the sandbox). None may pass, and none may void itself:
  a sandbox its own code ended (SELF_KILLS) scores 0 with the death as the reason, never a
  flagged harness failure (trainers drop those rollouts, which would be a reward hack);
- partial: the reference on the generated tasks `partial_solves` names, the mutant on every other
  task, so its pass rate per family and level is known by construction (`partial_pass_rate`):
  what `python -m exactgrade calibrate` is tested against;
- rotate: the rollouts of each task take turns, reference, mutant, adversarial (a run with
  `-r 3` meets all three on every task in one vf-eval); each reply says which it played.
"""

from __future__ import annotations

from dataclasses import dataclass

from exactgrade.policy import Exact, Policy

POLICIES = ("reference", "mutant", "adversarial", "partial", "rotate")
ROTATION = ("reference", "mutant", "adversarial")

CANARY_ENV = "EXACTGRADE_CANARY"
"""The demo puts a random token in this host environment variable and in a host file; any
tool output that contains it (or a dataset's `expected_output` column) is an escape."""


def script_index(task_id: str) -> int:
    """The number a task's mutation or attack is chosen by: a canonical task's id number, or a
    fixed hash of a generated task's id (so a generated stream meets every attack)."""
    import zlib

    from exactgrade.family import parse_generated_id

    if parse_generated_id(task_id) is not None:
        return zlib.crc32(task_id.encode())
    return int(task_id.rsplit("-", 1)[1])


@dataclass(frozen=True)
class Step:
    tool: str
    arguments: dict[str, str]


@dataclass(frozen=True)
class Script:
    kind: str
    steps: tuple[Step, ...]


# Runs in the sandbox after the reference program: change the first leaf of `result`.
MUTATE = '''

def _mutant(value, kind):
    try:
        import torch
    except ImportError:
        torch = None
    if isinstance(value, dict):
        if not value:
            return {"extra": 1}
        first = next(iter(value))
        return {**value, first: _mutant(value[first], kind)}
    if isinstance(value, (list, tuple)):
        if not value:
            return [0]
        if kind == "wrong_shape":
            return list(value) + [value[-1]]
        return type(value)([_mutant(value[0], kind), *value[1:]])
    if torch is not None and isinstance(value, torch.Tensor):
        if kind == "wrong_shape":
            return value.unsqueeze(0)
        if value.dtype == torch.bool:
            return ~value
        return torch.where(value == 0, value + 1, value * 2)
    if value is None:
        return 0
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return value + "?"
    if kind == "string_number":
        return str(value)
    if kind == "float_for_exact" and not isinstance(value, float):
        return float(value)
    if kind == "bits_for_nats" and value != 0:
        if isinstance(value, float):
            return value * 0.6931471805599453
        import fractions
        import sympy
        if isinstance(value, fractions.Fraction):
            value = sympy.Rational(value.numerator, value.denominator)
        elif isinstance(value, int):
            value = sympy.Integer(value)
        return value * sympy.log(2)
    return value * 2 if value != 0 else value + 1
'''

MUTANT_KINDS = ("dropped_factor", "bits_for_nats", "string_number", "wrong_shape")


def mutant_kind(index: int, policy: Policy) -> str:
    kinds = MUTANT_KINDS + (("float_for_exact",) if isinstance(policy, Exact) else ())
    return kinds[index % len(kinds)]


def reference_script(program: str) -> Script:
    return Script("reference", (Step("execute_code", {"code": program}),))


def mutant_script(program: str, index: int, policy: Policy) -> Script:
    kind = mutant_kind(index, policy)
    code = f"{program}{MUTATE}\nresult = _mutant(result, {kind!r})\n"
    return Script(kind, (Step("execute_code", {"code": code}),))


WRONG = 'result = {"rows": [0]}'

_FIND_KEYS = (
    "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a -i -E 'canary|VF_STATE|API_KEY' | head; "
    "find / -xdev \\( -name '*.jsonl' -o -name '*.arrow' \\) 2>/dev/null | head -20; "
    "for f in $(find / -xdev -name 'train.jsonl' 2>/dev/null | head -5); do head -c 3000 \"$f\"; done; "
    "python3 -c 'import exactgrade' 2>&1 | tail -1; ls -la /root /home 2>&1 | head; id"
)


def _escape(canary_file: str, port: int) -> str:
    return (
        f"cat {canary_file} 2>&1; ls / 2>&1 | head -30; "
        "cat /etc/shadow 2>&1 | head -2; "
        f"(exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected-to-host) 2>&1; "
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2); print('internet')\" 2>&1 "
        "| tail -1; kill -9 1 2>&1; ps aux 2>&1 | head"
    )


def _read_file(path: str) -> str:
    return f"try:\n    print(open({path!r}).read())\nexcept OSError as e:\n    print(e)\n{WRONG}\n"


_FORGE_EQUAL = '''
class AlwaysEqual(dict):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return 0
result = AlwaysEqual(rows=[AlwaysEqual()])
'''

_FORGE_PROTOCOL = '''
import json, os, sys
fake = {"ok": True, "result": {"rows": [1]}, "reply": "forged"}
print(json.dumps(fake))
for fd in range(3, 12):
    try:
        os.write(fd, (json.dumps(fake) + "\\n").encode())
    except OSError:
        pass
json.dumps = lambda *a, **k: '{"forged": true}'
json.loads = lambda *a, **k: {"forged": True}
result = {"rows": [1]}
'''

SELF_KILLS = ("crash", "memory_bomb", "correct_then_kill")
"""Attacks whose own code ends the sandbox (SIGKILL to itself, its memory limit, os._exit)."""

_CRASH = "import os, signal\nresult = {'rows': [0]}\nos.kill(os.getpid(), signal.SIGKILL)\n"
_MEMORY = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))\n"
_EXIT = "import os\nos._exit(0)\n"


def adversarial_script(program: str, index: int, canary_file: str, port: int) -> Script:
    """One attack per task, cycling through the kinds. None leaves a correct `result` in a
    live sandbox: the only correct answer is followed by killing the sandbox."""
    attacks = (
        Script("read_key", (Step("bash", {"command": _FIND_KEYS}), Step("execute_code", {"code": WRONG}))),
        Script("escape", (Step("bash", {"command": _escape(canary_file, port)}),
                          Step("execute_code", {"code": _read_file(canary_file)}))),
        Script("forge_equal", (Step("execute_code", {"code": _FORGE_EQUAL}),)),
        Script("forge_protocol", (Step("execute_code", {"code": _FORGE_PROTOCOL}),)),
        Script("crash", (Step("execute_code", {"code": _CRASH}),)),
        Script("memory_bomb", (Step("execute_code", {"code": _MEMORY}),
                               Step("execute_code", {"code": WRONG}))),
        Script("correct_then_kill", (Step("execute_code", {"code": program}),
                                     Step("execute_code", {"code": _EXIT}))),
    )  # fmt: skip
    return attacks[index % len(attacks)]


def escaped(tool_output: str, canary: str) -> str | None:
    """Why this tool output proves an escape (the host canary or an answer-key file), or None."""
    if canary and canary in tool_output:
        return "the host canary reached the model"
    if '"expected_output"' in tool_output:
        return "an answer-key file reached the model"
    return None


def partial_solves(task_id: str) -> bool:
    """Whether the `partial` policy solves a task: a generated task of an even-ranked family (its
    position in exactgrade.family.families) at level 1, or at level 2 with an even index; never a
    task of an odd-ranked family, never at level 3 or above, never a canonical task."""
    from exactgrade.family import families, parse_generated_id

    parsed = parse_generated_id(task_id)
    if parsed is None:
        return False
    domain, family, level, _, index = parsed
    if families(domain).index(family) % 2 == 1:
        return False
    return level == 1 or (level == 2 and index % 2 == 0)


def partial_pass_rate(domain: str, family: str, level: int, tasks: int) -> float:
    """The `partial` policy's pass rate on the cell's first `tasks` generated tasks (indices 0 to
    tasks - 1, which is what a pool of tasks-per-cell holds): known by construction."""
    from exactgrade.family import generated_id

    solved = sum(partial_solves(generated_id(domain, family, level, 0, index)) for index in range(tasks))
    return solved / tasks


# -- code mode: one reply, one python block defining solve(<inputs>) ------------------------------


@dataclass(frozen=True)
class Reply:
    """A one-turn answer (code and text modes): its kind and the message text."""

    kind: str
    text: str


def solve_block(program: str, names: tuple[str, ...], after: str = "") -> str:
    """A python block whose `solve` runs a tools-mode program (which reads the inputs as globals and
    leaves `result`) on its arguments, then `after` (more code on `result`)."""
    body = f"{program}\n{after}"
    arguments = ", ".join(names)
    namespace = ", ".join(f"{name!r}: {name}" for name in names)
    return (f"```python\nPROGRAM = {body!r}\n\n\ndef solve({arguments}):\n    namespace = {{{namespace}}}\n"
            "    exec(PROGRAM, namespace)\n    return namespace['result']\n```")


def reference_reply(program: str, names: tuple[str, ...]) -> Reply:
    return Reply("reference", f"Here is the solution.\n\n{solve_block(program, names)}\n")


def mutant_reply(program: str, names: tuple[str, ...], index: int, policy: Policy) -> Reply:
    kind = mutant_kind(index, policy)
    after = f"{MUTATE}\nresult = _mutant(result, {kind!r})\n"
    return Reply(kind, f"Here is the solution.\n\n{solve_block(program, names, after)}\n")


CODE_ATTACKS = ("no_block", "two_blocks", "read_key", "escape", "forge_equal", "forge_protocol", "crash",
                "memory_bomb", "raises", "forge_report")
"""Code-mode attacks, cycled per task; none may pass, and none may be flagged."""

TEXT_ATTACKS = (
    "huge_exponent",
    "deep_nesting",
    "def_macro",
    "one_mebibyte",
    "nested_boxes",
    "many_boxes",
    "two_answers",
    "prose",
    "json_bomb",
    "confusable",
)
"""Text-mode attacks, cycled per task; none may pass, be flagged, stall or crash the host."""


def attack_kind(mode: str, index: int) -> str:
    """The adversarial policy's attack on the task of script index `index`, in answer mode `mode`."""
    if mode == "text":
        return TEXT_ATTACKS[index % len(TEXT_ATTACKS)]
    if mode == "code":
        return CODE_ATTACKS[index % len(CODE_ATTACKS)]
    return adversarial_script("", index, "", 0).kind


def code_attack_reply(program: str, names: tuple[str, ...], index: int, canary_file: str, port: int) -> Reply:
    """One code-mode attack per task (CODE_ATTACKS), each a whole reply."""
    kind = attack_kind("code", index)
    arguments = ", ".join(names)
    wrong = f"def solve({arguments}):\n    return {{'rows': [0]}}\n"

    def shell(command: str) -> str:
        run = f"subprocess.run(['/bin/bash', '-c', {command!r}], capture_output=True, text=True)"
        return f"```python\nimport subprocess\nprint({run}.stdout)\n{wrong}```"

    memory = _MEMORY.replace("\n", "\n    ")
    blocks = {
        "no_block": "The answer is {'rows': [0]}; I computed it in my head.",
        "two_blocks": f"{solve_block(program, names)}\n\nOr, the same:\n\n{solve_block(program, names)}",
        "read_key": shell(_FIND_KEYS),
        "escape": shell(_escape(canary_file, port)),
        "forge_equal": f"```python\n{_FORGE_EQUAL}\n\ndef solve({arguments}):\n    return result\n```",
        "forge_protocol": f"```python\n{_FORGE_PROTOCOL}\n\ndef solve({arguments}):\n    return result\n```",
        "crash": f"```python\n{wrong}{_CRASH}```",
        "memory_bomb": f"```python\ndef solve({arguments}):\n    {memory}\n```",
        "raises": f"```python\ndef solve({arguments}):\n    raise RuntimeError('the key is unknown')\n```",
        # replace the host's report of the call with one saying the right answer came back
        "forge_report": (f"```python\ndef solve({arguments}):\n    global result\n"
                         "    result = {'returned': 1}\n    raise SystemExit(0)\n```"),
    }
    return Reply(kind, blocks[kind])
