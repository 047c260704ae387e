"""Code mode: the model's one python block, run in the task's sandbox, and `solve` called by the host.

The block is the model's whole answer: exactly one fenced ```python block (``py`` and ``python3``
fences count too; blocks of other languages are ignored; a `<think>` section before the answer
is skipped). It runs once in a fresh sandbox of the task's profile, under the sandbox's own limits.
The inputs of every call are loaded into the sandbox before the block runs, under one private
name and never as globals, so example data the block assigns cannot replace them. Then the host
calls `solve(**inputs)` once per instance (the task's, then a hidden sibling's) and reads each
return value back through the wire, exactly as the tools mode reads `result`.

Every way the answer fails is a wrong answer with its reason (no block, two blocks, no `solve`,
`solve` raised, a value the wire refuses, a sandbox the block's own code ended); only a failure of
the harness itself (the sandbox could not start, or died of something other than the block) is
a harness failure, which the reward flags.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE_CHARS = 200_000
"""A longer final message is refused before any parsing (a block is capped by the sandbox too)."""
PYTHON_FENCES = frozenset({"python", "py", "python3"})
CALLS_NAME = "_exactgrade_calls"
"""The one sandbox global holding the inputs of every call (a list of dicts)."""
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n`]*$")


@dataclass(frozen=True)
class Block:
    """The python block of a reply, or why there is none to run (`reason`, "" when found)."""

    code: str | None
    reason: str


def final_text(content: Any) -> str:
    """The text of an assistant message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def extract_block(message: str) -> Block:
    """The one fenced python block of `message` (after its last `</think>`), or the reason it has
    none: no python block, an unclosed one, or more than one."""
    if len(message) > MAX_MESSAGE_CHARS:
        return Block(None, f"the reply has {len(message)} characters, over the limit of {MAX_MESSAGE_CHARS}")
    if "</think>" in message:
        message = message.rsplit("</think>", 1)[1]
    blocks: list[str] = []
    opened: tuple[str, str, list[str]] | None = None  # (fence, language, lines)
    for line in message.split("\n"):
        if opened is None:
            match = _FENCE.match(line)
            if match:
                opened = (match.group(1), match.group(2).lower(), [])
            continue
        fence, language, lines = opened
        stripped = line.strip()
        if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
            if language in PYTHON_FENCES:
                blocks.append("\n".join(lines))
            opened = None
        else:
            lines.append(line)
    if opened is not None and opened[1] in PYTHON_FENCES:
        return Block(None, "the reply's ```python block is never closed (cut off?)")
    if not blocks:
        return Block(None, "the reply has no ```python block")
    if len(blocks) > 1:
        return Block(None, f"the reply has {len(blocks)} ```python blocks; exactly one is graded")
    return Block(blocks[0], "")


CALL = """\
try:
    del result
except NameError:
    pass
_exactgrade_solve = globals().get("solve")
if not callable(_exactgrade_solve):
    result = {{"missing": type(_exactgrade_solve).__name__}}
else:
    try:
        result = {{"returned": _exactgrade_solve(**_exactgrade_calls[{index}])}}
    except BaseException as _exactgrade_error:
        result = {{"raised": (type(_exactgrade_error).__name__ + ": " + str(_exactgrade_error))[:400]}}
"""
"""Host code run in the sandbox after the block, once per call: `result` then holds what solve did."""


@dataclass(frozen=True)
class SolveOutcome:
    """What running a block left for grading: the wire text of each call's return value (None
    after the first call that failed), or the reason the answer is wrong (`fault`), or the reason
    the harness could not run it (`harness_error`)."""

    returned: tuple[str, ...]
    fault: str | None
    harness_error: str | None
    seconds: float
    sandbox_uid: int | None
    output: str
    """What the block printed (capped by the sandbox), for the trace."""


def run_block(
    code: str, calls: Sequence[Mapping[str, Any]], profile: str, backend: str = "auto"
) -> SolveOutcome:
    """Run `code` once in a fresh sandbox of `profile`, then `solve(**call)` for each call, in
    order, stopping at the first failure. Blocks (run it in a thread); never raises."""
    from exactgrade import wire
    from exactgrade.sandbox import NoResult, ResultNotEncodable, Sandbox, SandboxDied

    started = time.monotonic()
    returned: list[str] = []
    uid, output = None, ""

    def done(fault: str | None = None, harness_error: str | None = None) -> SolveOutcome:
        return SolveOutcome(tuple(returned), fault, harness_error, time.monotonic() - started, uid, output)

    try:
        inputs = {CALLS_NAME: [dict(call) for call in calls]}
        sandbox = Sandbox(inputs=inputs, profile=profile, backend=backend)
    except Exception as error:  # noqa: BLE001 - any failure to build the sandbox is the harness's
        return done(harness_error=f"sandbox could not start: {type(error).__name__}: {error}")
    uid = sandbox.uid
    try:
        output = sandbox.execute_code(code)
        for index in range(len(calls)):
            sandbox.execute_code(CALL.format(index=index))
            try:
                outcome = sandbox.result()
            except NoResult:
                return done(f"solve could not be called on {_which(index)} (the block broke the call)")
            except ResultNotEncodable as error:
                why = str(error).rsplit("cannot encode result: ", 1)[-1]
                return done(f"solve's return value on {_which(index)} is not a gradeable value: {why}")
            fault = _fault(outcome, index)
            if fault is not None:
                return done(fault if index or "returned" in outcome else _with_block_error(fault, output))
            returned.append(wire.encode(outcome["returned"]))
        return done()
    except SandboxDied as died:
        if died.by_model:
            return done(f"the block's code ended its sandbox: {died} ({died.death.evidence})")
        return done(harness_error=f"sandbox died: {died} ({died.death.evidence})")
    except wire.WireError as error:  # only model code in the worker can send what decode refuses
        return done(f"read-back refused: WireError: {error}")
    except Exception as error:  # noqa: BLE001 - anything else from the sandbox also fails closed
        return done(harness_error=f"sandbox failed: {type(error).__name__}: {error}")
    finally:
        sandbox.close()


def _with_block_error(fault: str, output: str) -> str:
    """A fault of the first call, with the error the block itself ended on (a SyntaxError, a name
    its example code used), when its output ends with one."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if re.match(r"^[A-Za-z_.]*(Error|Exception|Interrupt|Exit)\b", last):
        return f"{fault} (the block raised {last[:200]})"
    return fault


def _which(index: int) -> str:
    return "the task's inputs" if index == 0 else "the hidden instance's inputs"


def _fault(outcome: Any, index: int) -> str | None:
    """Why the host call's report says solve failed, or None when it returned a value."""
    if not isinstance(outcome, dict) or len(outcome) != 1:
        return f"the call of solve on {_which(index)} was tampered with (its report is not the host's)"
    ((kind, value),) = outcome.items()
    if kind == "returned":
        return None
    if kind == "missing" and isinstance(value, str):
        return (
            "the block defines no function `solve`"
            if value == "NoneType"
            else f"`solve` is of type {value}, not a function"
        )
    if kind == "raised" and isinstance(value, str):
        return f"solve raised on {_which(index)}: {value}"
    return f"the call of solve on {_which(index)} was tampered with (its report is not the host's)"
