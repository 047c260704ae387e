"""read_key(text): an answer key written as text (a dataset's gold answer) read as an engine value.

For datasets whose keys are strings (``"\\\\frac{1}{3}"``, ``"$2\\\\sqrt{2}$"``, ``"\\\\boxed{12}"``):
the gold's answer (its \\\\boxed{...}, or the whole line, by extract_answer's rule) is read as a
number or expression in which every single letter that is not a constant (``e``) is a declared
symbol without assumptions (graded over the reals), else as a list of those, else as a category
word. Sets, intervals, equations, inequalities and matrices are not engine values: refused with
the reason, so a dataset row that cannot be graded is flagged, never scored as a wrong answer.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from exactgrade.text.extract import extract_answer
from exactgrade.text.grammar import CONSTANTS
from exactgrade.text.read import ParsedAnswer, parse_answer

_COMMAND = re.compile(r"\\[A-Za-z]+")
_TEXT_GROUP = re.compile(r"\\(?:text|mathrm|textbf|mbox)\s*\{[^{}]*\}")
_LETTERS = re.compile(r"[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z][A-Za-z ]*")


def read_key(text: str) -> ParsedAnswer:
    """The engine value a gold answer text denotes, or the reason it has none; never raises."""
    extraction = extract_answer(text)
    if extraction.text is None:
        return ParsedAnswer(None, f"gold answer: {extraction.reason}")
    answer = extraction.text
    runs = _LETTERS.findall(_COMMAND.sub(" ", _TEXT_GROUP.sub(" ", answer)))
    letters = sorted({run for run in runs if len(run) == 1 and run not in CONSTANTS})
    template: Any = Fraction(0)
    if letters:
        import sympy

        template = (
            sympy.Add(*(sympy.Symbol(c) for c in letters), evaluate=False)
            if len(letters) > 1
            else sympy.Symbol(letters[0])
        )
    parsed = parse_answer(answer, template)
    if parsed.ok:
        return parsed
    items = parse_answer(answer, [template] * (answer.count(",") + 1))
    if items.ok and isinstance(items.value, list) and len(items.value) > 1:
        return items
    word = parse_answer(answer, "")
    if word.ok and _WORD.fullmatch(word.value):
        return word
    return ParsedAnswer(None, f"gold answer is not an engine value: {parsed.reason}")
