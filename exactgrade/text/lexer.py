"""Text -> tokens: numbers as exact values, names, LaTeX commands, text groups, operators.

ASCII only, plus a short list of mathematical characters read as their ASCII meaning (the minus
sign, times, middle dot, division sign, pi, square root, infinity, superscript two and three,
and non-breaking and thin spaces). Every other character is refused by its Unicode name, so a
look-alike (a Cyrillic "е", a fullwidth "１", a Greek "ο") never stands for a letter or digit.

Numbers are exact: ``0.1`` is 1/10, ``1.5e12`` is 1500000000000, ``2e-3`` is 1/500 (an ``e``
directly followed by digits, or by a sign and digits, is an exponent; ``2e + 3`` is 2*e + 3).
Thousands separators: ``1{,}000``, ``1\\,000``, ``1,\\!000``, ``1,000`` and Python's ``1_000`` (the
prompts print large inputs so, and a model copies them), only in groups of exactly
three digits after a first group of one to three digits not starting with 0, so ``1,5`` and
``0,111`` are refused, never read as 1.5 or 15. (A list's commas are split off before an item is
read, so a comma here can only be inside one number.)
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction
from typing import NamedTuple

from exactgrade.text.limits import MAX_EXPRESSION_CHARS, MAX_INT_DIGITS, MAX_TOKENS, TextError


class Token(NamedTuple):
    kind: str  # "num", "name", "cmd", "text", "op" or "end"
    text: str  # the operator, name or command (without its backslash) as written
    start: int
    end: int
    value: Fraction | str | None = None  # a number's exact value; a text group's content


_SEPARATOR = r"(?:\{,\}|\\,|,\\!\s?)"  # 1{,}000, 1\,000, 1,\!000 (LaTeX's own thousands forms)
_NUMBER = re.compile(
    rf"(?P<int>[1-9][0-9]{{0,2}}(?:(?:{_SEPARATOR}|,|_)[0-9]{{3}})+(?![0-9])|[0-9]+)?"
    r"(?:\.(?P<frac>[0-9]+))?(?:[eE](?P<exp>[+-]?[0-9]+))?"
)
_JSON_NUMBER = re.compile(r"(?P<int>[0-9]+)?(?:\.(?P<frac>[0-9]+))?(?:[eE](?P<exp>[+-]?[0-9]+))?")
_NAME = re.compile(r"[A-Za-z]+")
_COMMAND = re.compile(r"\\(?:[A-Za-z]+|.)", re.DOTALL)
_DIGITS = re.compile(r"[0-9]")

# Commands that only space or size things: skipped.
_IGNORED = frozenset(
    {
        ",",
        ";",
        ":",
        "!",
        " ",
        "quad",
        "qquad",
        "displaystyle",
        "textstyle",
        "left",
        "right",
        "big",
        "Big",
        "bigg",
        "Bigg",
        "bigl",
        "bigr",
        "Bigl",
        "Bigr",
        "biggl",
        "biggr",
        "Biggl",
        "Biggr",
        "middle",
        "limits",
    }
)
# Commands whose braced argument is words, not mathematics: read as one "text" token.
TEXT_COMMANDS = frozenset(
    {
        "text",
        "textrm",
        "textnormal",
        "textit",
        "textbf",
        "textsf",
        "mbox",
        "mathrm",
        "operatorname",
        "mathit",
        "mathsf",
        "rm",
    }
)
_CHARACTER_MEANINGS = {
    "\u2212": "-",
    "\u00d7": "*",
    "\u00b7": "*",
    "\u22c5": "*",
    "\u2219": "*",
    "\u00f7": "/",
    "\u03c0": "\\pi ",
    "\u221a": "\\surd ",
    "\u221e": "\\infty ",
    "\u00b2": "^2",
    "\u00b3": "^3",
}
_SPACES = frozenset(" \t\n\r\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f$")
_OPERATORS = frozenset("+-*/^()[]{},=!%|_'<>&:;?")


def tokenize(text: str) -> list[Token]:
    """The tokens of text (ending with an "end" token); TextError with the reason otherwise."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise TextError(f"an expression longer than {MAX_EXPRESSION_CHARS} characters")
    text = _replace_characters(text)
    tokens: list[Token] = []
    index, length = 0, len(text)
    while index < length:
        if len(tokens) > MAX_TOKENS:
            raise TextError(f"an expression with more than {MAX_TOKENS} tokens")
        char = text[index]
        if char in _SPACES or char == "~":
            index += 1
            continue
        if char.isascii() and (char.isdigit() or (char == "." and _DIGITS.match(text, index + 1))):
            match = _NUMBER.match(text, index)
            tokens.append(Token("num", match.group(), index, match.end(), _exact_number(match)))
            index = match.end()
            continue
        if char.isascii() and char.isalpha():
            match = _NAME.match(text, index)
            tokens.append(Token("name", match.group(), index, match.end()))
            index = match.end()
            continue
        if char == "\\":
            index = _command(text, index, tokens)
            continue
        if char == "*" and text.startswith("**", index):
            tokens.append(Token("op", "^", index, index + 2))
            index += 2
            continue
        if char in _OPERATORS:
            tokens.append(Token("op", char, index, index + 1))
            index += 1
            continue
        raise TextError(f"character {_describe(char)} at position {index} is not allowed")
    tokens.append(Token("end", "", length, length))
    return tokens


def _replace_characters(text: str) -> str:
    if text.isascii():
        return text
    return "".join(_CHARACTER_MEANINGS.get(char, char) for char in text)


def _describe(char: str) -> str:
    name = unicodedata.name(char, "")
    code = f"U+{ord(char):04X}"
    return f"{code} {name}" if name else code


def _command(text: str, index: int, tokens: list[Token]) -> int:
    match = _COMMAND.match(text, index)
    if match is None:
        raise TextError("a backslash at the end of the expression")
    name = match.group()[1:]
    end = match.end()
    if name in _IGNORED:
        return end
    if name == "%":
        tokens.append(Token("op", "%", index, end))
        return end
    if name in TEXT_COMMANDS:
        return _text_group(text, index, end, name, tokens)
    tokens.append(Token("cmd", name, index, end))
    return end


def _text_group(text: str, index: int, end: int, name: str, tokens: list[Token]) -> int:
    """\\text{...} and its kin: the braced content, taken as words (no nested braces)."""
    while end < len(text) and text[end] in " \t":
        end += 1
    if end >= len(text) or text[end] != "{":
        raise TextError(f"\\{name} must be followed by {{...}}")
    close = text.find("}", end + 1)
    if close < 0 or "{" in text[end + 1 : close] or "\\" in text[end + 1 : close]:
        raise TextError(f"\\{name}{{...}} must hold plain words (no braces or commands)")
    tokens.append(Token("text", name, index, close + 1, text[end + 1 : close].strip()))
    return close + 1


def _exact_number(match: re.Match[str]) -> Fraction:
    """The exact value of a decimal literal, refusing one with more than MAX_INT_DIGITS digits."""
    whole = re.sub(r"[^0-9]", "", match["int"] or "")
    fraction = match["frac"] or ""
    exponent_text = match["exp"]
    if len(whole) + len(fraction) > MAX_INT_DIGITS or (exponent_text and len(exponent_text) > 8):
        raise TextError(f"a number with more than {MAX_INT_DIGITS} digits")
    exponent = int(exponent_text) if exponent_text else 0
    digits = (whole + fraction).lstrip("0")
    scale = exponent - len(fraction)
    # The value is int(digits) * 10**scale: its numerator or denominator has this many digits.
    size = len(digits) + scale if scale >= 0 else max(len(digits), -scale)
    if digits and size > MAX_INT_DIGITS:
        raise TextError(f"the number {match.group()[:40]} has more than {MAX_INT_DIGITS} digits")
    mantissa = int(digits) if digits else 0
    return Fraction(mantissa * 10**scale) if scale >= 0 else Fraction(mantissa, 10**-scale)


def exact_decimal(literal: str) -> Fraction:
    """A JSON number literal (``-12``, ``0.1``, ``1.5e12``) as the exact value it denotes."""
    sign = -1 if literal.startswith("-") else 1
    body = literal[1:] if sign < 0 else literal
    match = _JSON_NUMBER.fullmatch(body)
    if match is None or not body:
        raise TextError(f"not a number: {literal[:40]!r}")
    return sign * _exact_number(match)
