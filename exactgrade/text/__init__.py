"""Text answers: found in a final message, read by the answer key, decided exactly.

    extract_answer(message) -> Extraction        the last \\boxed{...} or ```json block (extract.py)
    parse_answer(text, expected) -> ParsedAnswer  read by the key (read.py -> lexer, grammar, build)
    grade_text(message, expected, policy) -> Verdict   both, then exactgrade.compare
    read_key(text) -> ParsedAnswer               a dataset's gold answer text as a key (key.py)
    exactgrade.text.reward.text_answer_correct   a verifiers 0.4 reward (imports nothing of verifiers)

Nothing here evaluates, sympifies or parses model text with a general-purpose parser; every
size is capped (limits.py) and a refusal is a value with a one-line reason.
"""

from exactgrade.text.extract import Extraction, extract_answer
from exactgrade.text.grade import grade_text
from exactgrade.text.key import read_key
from exactgrade.text.read import ParsedAnswer, parse_answer

__all__ = ["Extraction", "ParsedAnswer", "extract_answer", "grade_text", "parse_answer", "read_key"]
