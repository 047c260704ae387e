"""Shared prompt pieces for the deeplearning domain: the sandbox conventions, exactness rules,
and how input values are shown in prompts (fractions as ``1/2``, never as decimals)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from exactgrade.policy import Exact

POLICY = Exact()

EXACTNESS = (
    "Sandbox: Python with the standard library and sympy (numpy is not installed). The task inputs are "
    "preloaded as Python variables holding exact values: int, fractions.Fraction, exact sympy expressions, "
    "str, and lists/dicts of these. Leave the answer in a variable named `result`: a dict "
    '{"rows": [...]} in exactly the shape the question gives (same keys, same order of rows). '
    "Exactness rules: every number in the answer must be exact: an int, a fractions.Fraction, or an "
    "exact sympy expression (sympy.Rational(7, 4), sympy.sqrt(2), 7*sympy.log(2)/4); a float such as "
    "0.75 or 1e-8 is never accepted, however close. Grading is exact equality (policy Exact()): "
    "sympy expressions are compared by value, not by form, so any exact form of the right number passes; "
    "strings must match exactly. Build sympy values from ints (sympy.Rational(p, q)), never from strings "
    "or floats."
)


def show(value: Any) -> str:
    """A value as it appears in a prompt: Fraction(1, 2) -> 1/2, lists and dicts recursively."""
    if type(value) is Fraction:
        return str(value)
    if type(value) is int or type(value) is str:
        return repr(value) if type(value) is str else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k!r}: {show(v)}" for k, v in value.items()) + "}"
    return str(value)  # trusted sympy values written by the task author


def prompt(question: str, variables: Mapping[str, tuple[str, Any]], shape: str, units: str,
           exact: bool = True) -> str:
    """The full prompt: question, preloaded variables (description and value; a value of ``...``
    is not shown, for inputs the question already lists), answer shape, units; the exactness
    line only when the answer holds numbers (``exact``)."""
    lines = [question.strip(), "", "Preloaded variables:"]
    lines += [f"- `{name}` ({description})" + ("" if value is ... else f" = {show(value)}")
              for name, (description, value) in variables.items()]
    lines += [
        "",
        "Leave the answer in the variable `result`, exactly in this shape:",
        f"result = {shape}",
        f"Units: {units}." + (" Every number must be exact (int, fractions.Fraction or exact sympy), "
                              "never a float." if exact else ""),
    ]
    return "\n".join(lines)


CATEGORICAL = (
    "Sandbox: Python with the standard library and sympy (numpy is not installed). The task inputs are "
    "preloaded as Python variables holding exact values: int, fractions.Fraction, str, and lists/dicts of "
    "these. Leave the answer in a variable named `result`: a dict {\"rows\": [...]} in exactly the shape "
    "the question gives (same keys, same order of rows). Grading is exact equality: strings must match "
    "exactly."
)


def api(conventions: str, exact: bool = True) -> str:
    """The api_description of a task: its category's conventions, then the exactness rules
    (for an answer of categories only, the rules of that answer instead)."""
    return f"{conventions.strip()}\n\n{EXACTNESS if exact else CATEGORICAL}"
