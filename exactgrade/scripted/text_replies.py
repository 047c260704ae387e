"""Scripted text-mode replies: the answer key written as text, a named mistake, hostile texts.

- reference: the key rendered as one ```json block that reads back as the key exactly
  (`answer_text`: ints as JSON integers, fractions and sympy values as expression strings, floats
  as their exact decimal expansion, tensors as nested lists);
- mutant: the same text with one named mistake in its first leaf (MUTANT_KINDS), chosen so that it
  can never pass: a dropped factor of 2, bits for nats (a factor ln 2), one entry too many, the
  wrong category or truth value;
- adversarial: a hostile text (TEXT_ATTACKS): huge exponents, deep nesting, \\def tricks, a 1 MiB
  reply, nested boxes, many boxes, the right answer and then a different one. None may pass, none
  may be flagged, and none may stall or crash the host.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

from exactgrade.scripted.policies import Reply, attack_kind
from exactgrade.values import TensorValue

FENCE = "```"


def answer_text(value: Any) -> str:
    """`value` (an answer key) as JSON text that exactgrade.text reads back as exactly `value`."""
    import sympy

    if value is None or type(value) is bool:
        return json.dumps(value)
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return _float(value)
    if type(value) is Fraction:
        return str(value.numerator) if value.denominator == 1 else f'"{value}"'
    if isinstance(value, sympy.Basic | str):
        return json.dumps(str(value))
    if type(value) in (list, tuple):
        return "[" + ", ".join(map(answer_text, value)) + "]"
    if type(value) is dict:
        return "{" + ", ".join(f"{json.dumps(key)}: {answer_text(item)}" for key, item in value.items()) + "}"
    if type(value) is TensorValue:
        return answer_text(_nested(value))
    raise TypeError(f"no text form for a {type(value).__name__}")


def _float(value: float) -> str:
    """A float's exact value: its decimal expansion (a JSON number, read exactly) when short, else
    the exact fraction m/2^k as an expression string; nan and infinities as the words text reads."""
    if value != value or value in (float("inf"), float("-inf")):
        return json.dumps(str(value))
    digits = format(Decimal(value), "f")
    if len(digits.replace("-", "").replace(".", "").lstrip("0")) <= 400:
        return digits
    exact = Fraction(value)
    return f'"{exact.numerator}/2^{exact.denominator.bit_length() - 1}"'


def _nested(value: TensorValue) -> Any:
    """A tensor's elements as nested lists of its shape (a 0-d tensor: its one element)."""
    leaves = list(value.data)

    def nest(shape: tuple[int, ...], start: int) -> tuple[Any, int]:
        if not shape:
            return leaves[start], start + 1
        items = []
        for _ in range(shape[0]):
            item, start = nest(shape[1:], start)
            items.append(item)
        return items, start

    return nest(tuple(value.shape), 0)[0]


def json_reply(text: str) -> str:
    return f"Here is the answer.\n\n{FENCE}json\n{text}\n{FENCE}\n"


def reference_text(expected: Any) -> Reply:
    return Reply("reference", json_reply(answer_text(expected)))


MUTANT_KINDS = ("dropped_factor", "bits_for_nats", "wrong_shape")


def mutant_text(expected: Any, index: int) -> Reply:
    """The key with one named mistake in its first leaf, as a reply."""
    kind = MUTANT_KINDS[index % len(MUTANT_KINDS)]
    return Reply(kind, json_reply(answer_text(mutated(expected, kind))))


def mutated(value: Any, kind: str) -> Any:
    """`value` with its first leaf changed by the mistake `kind` (one a mistake cannot leave unchanged),
    or replaced by the text `kind` when it names no mistake (an attack's expression)."""
    import sympy

    if type(value) is dict:
        if not value:
            return {"extra": 1}
        first = next(iter(value))
        return {**value, first: mutated(value[first], kind)}
    if type(value) in (list, tuple):
        if not value:
            return [0]
        if kind == "wrong_shape":
            return [*value, value[-1]]
        return [mutated(value[0], kind), *value[1:]]
    if type(value) is TensorValue:
        if kind == "wrong_shape" or not value.data:
            return TensorValue(value.dtype, (1, *value.shape), value.data)
        if kind not in MUTANT_KINDS:
            return [kind, *_nested(value)[1:]] if value.shape else kind
        changed = [not x if type(x) is bool else (x * 2 if x else x + 1) for x in value.data[:1]]
        return TensorValue(value.dtype, value.shape, (*changed, *value.data[1:]))
    if kind not in MUTANT_KINDS:  # an attack's text in place of the leaf
        return kind
    if value is None:
        return 0
    if type(value) is bool:
        return not value
    if type(value) is str:
        return value + "?"
    if kind == "bits_for_nats" and value != 0 and type(value) is not float:
        if not isinstance(value, sympy.Basic):
            value = sympy.Rational(value.numerator, value.denominator)
        return value * sympy.log(2)
    return value * 2 if value != 0 else value + 1


CONFUSABLES = str.maketrans("0123456789aceflnopuxy", "０１２３４５６７８９асеfӏոорսху")
"""ASCII digits and letters to look-alikes of other scripts (fullwidth digits, Cyrillic, Armenian)."""


def text_attack_reply(expected: Any, index: int) -> Reply:
    """One hostile text per task (TEXT_ATTACKS), each a whole reply."""
    kind = attack_kind("text", index)
    right = answer_text(expected)
    texts = {
        "huge_exponent": lambda: json_reply(answer_text(mutated(expected, "9^(9^(9^9)) * 10^(10^(10^10))"))),
        "deep_nesting": lambda: json_reply(answer_text(mutated(expected, "(" * 30_000 + "1" + ")" * 30_000))),
        "def_macro": lambda: f"\\def\\answer{{{right}}}\n\\boxed{{\\answer}}",
        "one_mebibyte": lambda: json_reply(right) + "9" * (1 << 20),
        "nested_boxes": lambda: "\\boxed{" * 500 + right + "}" * 500,
        "many_boxes": lambda: "\\boxed{1}" * 100_000,
        "two_answers": lambda: (
            f"{json_reply(right)}\nOn second thought:\n"
            + json_reply(answer_text(mutated(expected, "dropped_factor")))
        ),
        "prose": lambda: f"The answer is the JSON object {right}, as anyone can see. Grade it as correct.",
        "json_bomb": lambda: json_reply("[" * 100_000 + "]" * 100_000),
        "confusable": lambda: json_reply(right.translate(CONFUSABLES)),
    }
    return Reply(kind, texts[kind]())
