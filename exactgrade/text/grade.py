"""grade_text(message, expected, policy) -> Verdict: extract, read by the key, compare exactly."""

from __future__ import annotations

from typing import Any

from exactgrade.compare import DEFAULT_TIME_LIMIT, compare
from exactgrade.policy import Policy
from exactgrade.text.extract import NO_CANDIDATE, extract_answer
from exactgrade.text.read import parse_answer
from exactgrade.verdict import Verdict

NO_ANSWER = "no answer"
UNREADABLE = "unreadable answer"


def grade_text(
    message: str, expected: Any, policy: Policy | None = None, *, time_limit: float = DEFAULT_TIME_LIMIT
) -> Verdict:
    """The verdict on a final message's answer against the key expected; never raises.

    Reasons start with "no answer: " (extraction refused), "unreadable answer: " (the text is not
    a value the key can take) or are compare()'s own. time_limit bounds compare's irrational
    work; reading is bounded by the caps in exactgrade.text.limits.
    """
    try:
        extraction = extract_answer(message)
        if extraction.text is None:
            return Verdict(False, f"{NO_ANSWER}: {extraction.reason}")
        parsed = parse_answer(extraction.text, expected)
        if not parsed.ok and extraction.source == "message":
            return Verdict(
                False,
                f"{NO_ANSWER}: {NO_CANDIDATE}, and the message is not an answer by itself ({parsed.reason})",
            )
        if not parsed.ok:
            return Verdict(False, f"{UNREADABLE}: {parsed.reason}")
        return compare(expected, parsed.value, policy, time_limit=time_limit)
    except Exception as error:  # a bug here must not crash the grader
        return Verdict(False, f"internal error: {type(error).__name__}: {str(error)[:200]}")
