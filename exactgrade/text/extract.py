"""Finding the answer in a model's final message: extract_answer(message) -> Extraction.

The rule, in order:

  1. Only the text after the last ``</think>`` counts (reasoning before it is never graded).
  2. Candidates are every ``\\boxed{...}`` (or ``\\fbox{...}``) outside fenced code blocks, with
     balanced braces (``\\{`` and ``\\}`` do not count), and every fenced block whose info string
     is ``json``. A box inside a box is part of the outer box's text (and the grammar refuses it).
  3. The last candidate in the message decides the kind (box or json). Every candidate of that
     kind must have the same text up to whitespace: two different boxed answers (or two
     different json blocks) are refused as ambiguous, never resolved by picking one.
  4. More than MAX_CANDIDATES candidates are refused. With no candidate, a message that is
     itself one short line (at most BARE_ANSWER_CHARS, optionally wrapped in ``$...$``,
     ``$$...$$``, ``\\(...\\)`` or ``\\[...\\]``) is the answer; anything else is refused
     ("no \\boxed{...} answer or ```json block").

A refusal is an Extraction with text None and a one-line reason; nothing here raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from exactgrade.text.limits import MAX_MESSAGE_CHARS

BARE_ANSWER_CHARS = 200
MAX_CANDIDATES = 1000  # boxes and json blocks in one message
TOO_MANY = f"more than {MAX_CANDIDATES} answers (boxes and json blocks) in the message"
NO_CANDIDATE = "no \\boxed{...} answer or ```json block in the message"

_THINK_END = "</think>"
_FENCE = re.compile(r"```([^\n`]*)\n(.*?)(?:```|\Z)", re.DOTALL)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_MATH_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_SPACE = re.compile(r"\s+")
_BRACE_OR_ESCAPE = re.compile(
    r"\\.|[{}]", re.DOTALL
)  # an escaped character, \{ and \} included, never counts


@dataclass(frozen=True, slots=True)
class Extraction:
    """The answer text found in a message (reason "") or None and why not."""

    text: str | None
    reason: str
    source: str = ""  # "box", "json" or "message" (rule 4) when found

    @property
    def ok(self) -> bool:
        return self.reason == ""


@dataclass(frozen=True, slots=True)
class _Candidate:
    kind: str  # "box" or "json"
    start: int
    text: str


def extract_answer(message: str) -> Extraction:
    """The answer in a final message, by the rule in this module's docstring."""
    if type(message) is not str:
        return Extraction(None, f"the message must be a str, got {type(message).__name__}")
    if len(message) > MAX_MESSAGE_CHARS:
        return Extraction(None, f"the message is longer than {MAX_MESSAGE_CHARS} characters")
    cut = message.rfind(_THINK_END)
    if cut >= 0:
        message = message[cut + len(_THINK_END) :]
    candidates: list[_Candidate] = []
    outside: list[tuple[int, str]] = []  # (offset, text) of the stretches outside fences
    last = 0
    for fence in _FENCE.finditer(message):
        outside.append((last, message[last : fence.start()]))
        last = fence.end()
        if fence.group(1).strip().lower() == "json":
            candidates.append(_Candidate("json", fence.start(), fence.group(2)))
            if len(candidates) > MAX_CANDIDATES:
                return Extraction(None, TOO_MANY)
    outside.append((last, message[last:]))
    for offset, stretch in outside:
        boxes = _boxes(stretch)
        if isinstance(boxes, str):
            return Extraction(None, boxes)
        candidates.extend(_Candidate("box", offset + start, text) for start, text in boxes)
        if len(candidates) > MAX_CANDIDATES:
            return Extraction(None, TOO_MANY)
    if not candidates:
        return _bare(message)
    kind = max(candidates, key=lambda c: c.start).kind
    texts = [c.text for c in candidates if c.kind == kind]
    distinct = {_SPACE.sub(" ", t).strip() for t in texts}
    if len(distinct) > 1:
        shown = ", ".join(repr(t[:40]) for t in sorted(distinct)[:3])
        what = "boxed answers" if kind == "box" else "```json blocks"
        return Extraction(None, f"{len(distinct)} different {what} ({shown}): the answer is ambiguous")
    return Extraction(texts[-1].strip(), "", kind)


def _boxes(text: str) -> list[tuple[int, str]] | str:
    """(start, content) of each outermost box in text, or the reason a box is malformed."""
    found: list[tuple[int, str]] = []
    position = 0
    while True:
        match = _BOX.search(text, position)
        if match is None:
            return found
        end = _closing_brace(text, match.end())
        if end < 0:
            return f"unbalanced braces in the \\boxed{{...}} at character {match.start()}"
        found.append((match.start(), text[match.end() : end]))
        if len(found) > MAX_CANDIDATES:
            return TOO_MANY
        position = end + 1


def _closing_brace(text: str, start: int) -> int:
    """Index of the brace closing the group opened just before start, or -1."""
    depth = 1
    for match in _BRACE_OR_ESCAPE.finditer(text, start):
        char = match.group()
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return match.start()
    return -1


def _bare(message: str) -> Extraction:
    text = message.strip()
    for opening, closing in _MATH_WRAPPERS:
        if len(text) >= len(opening) + len(closing) and text.startswith(opening) and text.endswith(closing):
            text = text[len(opening) : -len(closing)].strip()
            break
    if text and len(text) <= BARE_ANSWER_CHARS and "\n" not in text:
        return Extraction(text, "", "message")
    return Extraction(None, NO_CANDIDATE)
