"""Answer modes: how a model hands in its answer, and the prompts that say so.

- `tools` (the default): multi-turn; the model runs code with `execute_code` / `bash` in the task's
  sandbox and leaves its answer in the variable `result` (what frontier tool-callers do);
- `code`: one turn, no tools; the model answers with one fenced python block defining
  `solve(<inputs by name>)`; the host runs the block in the task's sandbox and calls `solve` with the
  real inputs (how small models are trained to write code; exactgrade.env.code_answer);
- `text`: one turn, no sandbox; the final message's answer is parsed on the host and graded with the
  task's own policy (what single-turn trainers score; exactgrade.text).

A task's text (prompt and conventions) is written once, for `tools`; `rewrite` turns it into the
text of another mode by a table of the sentences that speak of the sandbox, the tools or `result`,
and `leftover` says which such words remain (a rewrite that leaves one is refused, never shown).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from exactgrade.policy import Policy

AnswerMode = Literal["tools", "code", "text"]
ANSWER_MODES: tuple[AnswerMode, ...] = ("tools", "code", "text")

HEAD = "You solve quantitative deep-learning problems whose answers are graded exactly."
TOOLS = """\
You have two tools, both running in the same isolated sandbox (no network):
- execute_code(code): runs Python in a persistent interpreter. The task's inputs are already \
defined as variables with the names the task gives, and every variable persists across calls.
- bash(command): runs a shell command in the sandbox.

Put your final answer in the Python variable `result` with execute_code."""
TOOLS_TAIL = "Once `result` holds your answer, reply with one short sentence and no tool call."
CODE_HOW = """\
Answer with exactly one fenced Python block (```python ... ```) that defines the function
    def solve({signature}):
which takes the task's inputs as arguments, by the names the task gives, and returns the answer in \
the form the task shows. Nothing else in your reply is run, and a reply with two python blocks is \
not graded. The block runs once in an isolated Python sandbox (no network); then `solve` is called \
with the task's real inputs"""
CODE = (
    CODE_HOW
    + """, and with the inputs of a hidden instance of the same task whose answer \
must be right too: compute from the arguments, never from example values or numbers copied from \
the question."""
)
CODE_NO_CHECK = CODE_HOW + ": compute from the arguments, never from example values."
TEXT = """\
Work the answer out by reasoning; no code is run. End your reply with the final answer, in the \
form the task shows, as one ```json block (or inside \\boxed{...}). Give the answer once: a reply \
whose answers differ is not graded, and nothing but the answer is read."""
TEXT_VALUES = (
    'Write an exact number as an integer, a fraction such as "7/4" or an exact decimal (read exactly: '
    '0.75 is 3/4); write an exact expression such as "7*log(2)/4" or "sqrt(2)/2" as a JSON string, '
    'or unquoted: {"H": 7*log(2)/4}. An answer is math, not code: no library names and no calls but '
    "functions such as log, exp and sqrt."
)
"""Shown in text mode to tasks whose answer holds an exact value (see system_prompt)."""
EXACT_VALUES = (
    "Give exact values (int, fractions.Fraction, sympy expressions) wherever the task asks for "
    "an exact value; a float is accepted only where the task says so."
)
"""Shown only to tasks whose answer holds a value a float cannot match (see system_prompt)."""
TENSORS = "Give tensors as torch tensors of the stated shape and dtype."
"""Shown only to tasks whose answer holds a tensor."""
TEXT_TENSORS = "Write a tensor as a nested JSON list of its elements, in the stated shape."


def system_prompt(
    expected: Any,
    policy: Policy,
    mode: AnswerMode = "tools",
    inputs: Iterable[str] = (),
    hidden_check: bool = True,
) -> str:
    """The system prompt of one task in `mode`: how to answer in that mode, with only the
    conventions that apply to its answer (exact values where a float would fail, tensors where the
    answer holds one); in code mode, `solve`'s signature from the task's input names."""
    kinds = answer_kinds(expected, policy)
    if mode == "text":
        sentences = [TEXT_VALUES] * ("exact" in kinds) + [TEXT_TENSORS] * ("tensor" in kinds)
        return " ".join([f"{HEAD}\n\n{TEXT}", *sentences])
    sentences = [EXACT_VALUES] * ("exact" in kinds) + [TENSORS] * ("tensor" in kinds)
    if mode == "code":
        how = (CODE if hidden_check else CODE_NO_CHECK).format(signature=", ".join(inputs))
        return " ".join([f"{HEAD}\n\n{how}", *sentences])
    return " ".join([f"{HEAD}\n\n{TOOLS}", *sentences, TOOLS_TAIL])


def text_refusal(expected: Any) -> str | None:
    """Why text mode does not serve a task with this key, or None: a floating-point tensor (its
    elements are the reference's float rounding, which no one writes out by hand)."""
    from exactgrade.values import FLOAT_DTYPES, TensorValue

    if isinstance(expected, dict):
        expected = list(expected.values())
    if isinstance(expected, list | tuple):
        return next((why for why in map(text_refusal, expected) if why is not None), None)
    if isinstance(expected, TensorValue) and expected.dtype in FLOAT_DTYPES:
        return f"its key holds a {expected.dtype} tensor"
    return None


def answer_kinds(value: Any, policy: Policy) -> set[str]:
    """ "exact" if some leaf needs an exact value (an int always: 11.0 fails an int key; a Fraction or
    an exact sympy value under Exact()), "tensor" if some leaf is a tensor."""
    import sympy

    from exactgrade.policy import Exact
    from exactgrade.values import TensorValue

    if isinstance(value, dict):
        return set().union(*(answer_kinds(v, policy) for v in value.values()))
    if isinstance(value, list | tuple):
        return set().union(*(answer_kinds(v, policy) for v in value))
    if isinstance(value, TensorValue):
        return {"tensor"}
    if type(value) is int:
        return {"exact"}
    if isinstance(value, Fraction | sympy.Basic) and isinstance(policy, Exact):
        return {"exact"}
    return set()


SOLVE_INPUTS = "Inputs (the arguments of `solve`, by name):"
TEXT_INPUTS = "Inputs:"

_REWRITES: tuple[tuple[str, str, str], ...] = (
    # (the tools-mode text, its code-mode text, its text-mode text); applied in this order.
    # scaling (exactgrade/domains/scaling/_text.py)
    (
        "You have a Python sandbox with the standard library only (`fractions`, `math`, ...). The task's\n"
        "inputs are already defined there as Python variables under the names listed in the prompt; exact\n"
        "values are given as `int` or `fractions.Fraction`.",
        "Your code runs in a Python sandbox with the standard library only (`fractions`, `math`, ...).\n"
        "`solve` receives the task's inputs as arguments under the names listed in the prompt; exact\n"
        "values are given as `int` or `fractions.Fraction`.",
        "The task's inputs are listed in the prompt under their names; exact values are given as\n"
        "integers or fractions (`Fraction(7, 4)` is 7/4).",
    ),
    (
        "You have a Python sandbox with the standard library (`fractions`, `math`, ...) and sympy. "
        "The task's\n"
        "inputs are already defined there as Python variables under the names listed in the prompt; exact\n"
        "values are given as `int` or `fractions.Fraction`.",
        "Your code runs in a Python sandbox with the standard library (`fractions`, `math`, ...) and sympy.\n"
        "`solve` receives the task's inputs as arguments under the names listed in the prompt; exact\n"
        "values are given as `int` or `fractions.Fraction`.",
        "The task's inputs are listed in the prompt under their names; exact values are given as\n"
        "integers or fractions (`Fraction(7, 4)` is 7/4).",
    ),
    (
        "Answer format: leave the answer in the variable `result` as a dict",
        "Answer format: `solve` returns the answer as a dict",
        "Answer format: the answer is a JSON object",
    ),
    ("Inputs (already defined as Python variables in the sandbox):", SOLVE_INPUTS, TEXT_INPUTS),
    # deeplearning (exactgrade/domains/deeplearning/common.py)
    (
        "Sandbox: Python with the standard library and sympy (numpy is not installed). The task inputs are "
        "preloaded as Python variables holding exact values:",
        "Sandbox: Python with the standard library and sympy (numpy is not installed). `solve` receives "
        "the task inputs as arguments holding exact values:",
        "The task inputs hold exact values:",
    ),
    (
        "Leave the answer in a variable named `result`: a dict",
        "`solve` returns the answer as a dict",
        "The answer is a JSON object",
    ),
    ("Preloaded variables:", SOLVE_INPUTS, TEXT_INPUTS),
    # pytorch (exactgrade/domains/pytorch/common.py)
    (
        "Run code with the execute_code tool. The task's inputs are already defined as variables: tensors as "
        "torch.Tensor with the stated dtype and shape, numbers as Python int/float. A numpy array is read "
        "back as a tensor of its dtype and shape, and a numpy scalar as the Python number it holds.",
        "`solve` receives the task's inputs as arguments: tensors as torch.Tensor with the stated dtype and "
        "shape, numbers as Python int/float. A numpy array is read back as a tensor of its dtype and shape, "
        "and a numpy scalar as the Python number it holds.",
        "The task's inputs are listed with their values: tensors as nested lists of their elements with the "
        "stated dtype and shape, numbers as plain numbers. No code is run: work the answer out by hand.",
    ),
    (
        "Leave the answer in the variable `result` as a dict",
        "`solve` returns the answer as a dict",
        "The answer is a JSON object",
    ),
    ("Inputs (already defined in the sandbox):", SOLVE_INPUTS, TEXT_INPUTS),
    ("Do not change the inputs in place. ", "Do not change the inputs in place. ", ""),
    (
        "is a torch.Tensor of that shape (shape () is a 0-d tensor, e.g. a loss), a `<Python float>` or "
        "`<Python int>` is a plain number (use .item()).",
        "is a torch.Tensor of that shape (shape () is a 0-d tensor, e.g. a loss), a `<Python float>` or "
        "`<Python int>` is a plain number (use .item()).",
        "is a nested list of that shape (shape () is a single number, e.g. a loss), a `<Python float>` or "
        "`<Python int>` is a plain number.",
    ),
    (
        "a one-element tensor never matches a 0-d tensor or a Python number). Integer results (indices, "
        "counts, integer arithmetic) must be integer-dtype tensors or Python ints and match exactly; a float "
        "tensor never matches an integer one. Float tensors may be float32 or float64.",
        "a one-element tensor never matches a 0-d tensor or a Python number). Integer results (indices, "
        "counts, integer arithmetic) must be integer-dtype tensors or Python ints and match exactly; a float "
        "tensor never matches an integer one. Float tensors may be float32 or float64.",
        "a one-element list never matches a single number). Integer results (indices, counts, integer "
        "arithmetic) must be integers and match exactly; a tensor's elements are read in the dtype the task "
        "shows.",
    ),
    # deeplearning: code advice that a text answer would misread (a decimal in text is exact)
    (
        "an int, a fractions.Fraction, or an exact sympy expression (sympy.Rational(7, 4), sympy.sqrt(2), "
        "7*sympy.log(2)/4); a float such as 0.75 or 1e-8 is never accepted, however close.",
        "an int, a fractions.Fraction, or an exact sympy expression (sympy.Rational(7, 4), sympy.sqrt(2), "
        "7*sympy.log(2)/4); a float such as 0.75 or 1e-8 is never accepted, however close.",
        'an integer, a fraction ("7/4"), an exact decimal (0.75 is read as 3/4) or an exact expression '
        '("sqrt(2)", "7*log(2)/4"); a rounded value is never accepted, however close.',
    ),
    (
        " Build sympy values from ints (sympy.Rational(p, q)), never from strings or floats.",
        " Build sympy values from ints (sympy.Rational(p, q)), never from strings or floats.",
        "",
    ),
    (
        "Every number must be exact (int, fractions.Fraction or exact sympy), never a float.",
        "Every number must be exact (int, fractions.Fraction or exact sympy), never a float.",
        "Every number must be exact (an integer, a fraction or an exact expression), never rounded.",
    ),
    # every domain: the line that shows the answer's shape, and symbols the task declares
    (
        "Leave the answer in the variable `result`, exactly in this shape:\nresult = ",
        "`solve` returns the answer exactly in this shape:\n",
        "Give the answer exactly in this shape:\n",
    ),
    (
        "Leave the answer in the variable `result`, exactly in this form:\nresult = ",
        "`solve` returns the answer exactly in this form:\n",
        "Give the answer exactly in this form:\n",
    ),
    (" preloaded as ", " given as ", " given as "),
    ("preloaded under their names", "given under their names", "given under their names"),
    ("which are preloaded as sympy\n", "which are given as sympy\n", "which are given as sympy\n"),
    ("are preloaded as\n", "are given as\n", "are given as\n"),
)

_TEXT_WORDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), plain)
    for pattern, plain in (
        # text mode only, in this order: a task's Python spellings, as a text answer writes them
        (r"\bFraction\((-?\d+), (\d+)\)", r"\1/\2"),  # an input's value: Fraction(309, 100) -> 309/100
        (r"\bfractions\.Fraction\b", "fraction"),
        (r"\bFraction(s?)\b", r"fraction\1"),  # a type in an answer's shape: {"b": Fraction}
        (r"\(sympy\.Matrix with sympy\.Rational entries, or fraction by hand\)", "(fractions, by hand)"),
        (r"built with sympy\.log and sympy\.Rational", "written with log and fractions"),
        (r"\(sympy\.Rational\(v\) gives it exactly\)", "(its decimal is its exact value)"),
        (
            r"No floats \(write sympy\.Rational\(3, 8\), "
            r"or convert an exact float with sympy\.Rational\(x\)\)",
            "No rounded numbers (write 3/8, or an exact decimal: 0.375 is 3/8)",
        ),
        (r"sympy Symbol, the same as sympy\.Symbol\('\w+', real=True\)", "a real symbol"),
        (
            r"building them with sympy\.Symbol and the same assumptions gives the same symbols",
            "an answer writes them by their names",
        ),
        (r"\bsympy\s+Symbol", "symbol"),
        (r"\bsympy\.(?=[a-z])", ""),  # 7*sympy.log(2)/4 -> 7*log(2)/4, sympy.pi -> pi
        (r"\bexact sympy\b ?", "exact "),  # exact sympy values / multiples / expression
        (r"\bsympy expression", "exact expression"),
        (r"as a sympy power of", "as a power of"),
        (r"\(sympy for square roots\)", "(square roots kept exact)"),
        (r"never math\.log\b", "never a rounded logarithm"),
        (r"PyTorch's torch\.optim definitions", "PyTorch's optimizer definitions"),
        (r"\btorch\.optim\.(\w+)", r"PyTorch's \1"),
        (
            r", as in numpy or torch, not Python's math module:",
            ", as floating-point hardware computes them (never an error):",
        ),
        (r"\btorch\.Tensor, dtype torch\.(\w+)", r"tensor, dtype \1"),
        (r"\ba Python int\b", "an integer"),
    )
)
"""Phrases of the tools-mode text that name a Python spelling where text mode writes plain math: a
model told "7*sympy.log(2)/4" or shown Fraction(3, 2) writes it so inside its JSON answer."""

_TOOLS_WORDS = re.compile(
    r"`result`|^result = |execute_code|\btools?\b|preloaded|already defined", re.IGNORECASE | re.MULTILINE
)
_SANDBOX_WORDS = re.compile(r"sandbox|execute_code|`solve`", re.IGNORECASE)
_PYTORCH_SANDBOX = re.compile(
    r"Environment: a Python sandbox with the standard library, sympy, numpy and "
    r"(PyTorch \S+ \(CPU build\))\. "
)


def rewrite(text: str, mode: AnswerMode) -> str:
    """A task's tools-mode text (prompt or conventions) as the text of `mode`."""
    if mode == "tools":
        return text
    column = 1 if mode == "code" else 2
    for row in _REWRITES:
        text = text.replace(row[0], row[column])
    if mode == "text":  # no sandbox: the torch version is the reference's
        text = _PYTORCH_SANDBOX.sub(r"The reference values are computed with \1. ", text)
        for pattern, plain in _TEXT_WORDS:
            text = pattern.sub(plain, text)
    return text


def leftover(text: str, mode: AnswerMode) -> str | None:
    """A phrase of `text` that speaks of what `mode` does not have (tools and `result` outside the
    tools mode; the sandbox and `solve` in text mode), or None. A Python library name left in a text
    prompt is not refused here, where a stream would stop on it, but pinned by a test over every
    family and level (tests/env/test_env_text_mode.py)."""
    if mode == "tools":
        return None
    found = _TOOLS_WORDS.search(text) or (_SANDBOX_WORDS.search(text) if mode == "text" else None)
    return found.group(0) if found else None


def text_inputs(text: str, inputs: Mapping[str, Any]) -> str:
    """A text-mode prompt with each tensor input's elements written out: the tools prompt lists a
    tensor by dtype and shape only (the model reads it in the sandbox), a text answer needs its values."""
    from exactgrade.values import TensorValue

    for name, value in inputs.items():
        if isinstance(value, TensorValue):
            line = re.compile(rf"^(- `{re.escape(name)}`: tensor, dtype \w+, shape \([^)]*\))$", re.MULTILINE)
            text = line.sub(lambda m, v=value: f"{m.group(1)} = {tensor_text(v)}", text, count=1)
    return text


def tensor_text(value: Any) -> str:
    """A TensorValue's elements as a nested list (floats in their shortest exact repr)."""
    flat = list(value.data)

    def nest(shape: tuple[int, ...], start: int) -> tuple[str, int]:
        if not shape:
            return repr(flat[start]), start + 1
        parts = []
        for _ in range(shape[0]):
            part, start = nest(shape[1:], start)
            parts.append(part)
        return "[" + ", ".join(parts) + "]", start

    return nest(tuple(value.shape), 0)[0]
