"""parse_answer(text, expected) -> ParsedAnswer: answer text read the way its key says.

The key (the engine's answer key, exactly as compare() receives it) decides how each leaf is
read, so the value is what a sandbox read-back of the same answer would be:

  - a number key (int, Fraction, float, sympy) reads an expression (exactgrade.text.grammar) in
    the key's declared symbols; a float key also reads ``nan``, ``inf``, ``\\infty`` and their
    negatives as the whole leaf; an int key needs the value to be an integer (compare decides);
  - a str key (a category) reads the literal word: the text stripped of whitespace, one
    ``\\text{...}``-like wrapper and one pair of quotes; nothing is lower-cased;
  - a bool key reads ``true``/``false`` (or ``True``/``False``); a None key reads ``null``/``None``;
  - a list or tuple key reads a JSON array, or bracketed items ``[a, b]``/``(a, b)``/``a, b``;
  - a dict key reads a JSON object (a ``\\boxed{...}`` holding JSON is read the same way);
  - a TensorValue key reads nested lists; the shape is the answer's own (compare checks it),
    integer and bool dtypes need integers and booleans, float dtypes need rational numbers,
    rounded to the key's dtype as a torch tensor of that dtype would hold them.

Inside JSON, numbers are exact decimals (never floats) and a string leaf under a number key is
read as an expression. A leaf whose key does not say how to read it (a None key, a key of
another kind, an extra list element or dict entry) is read as null, a boolean, an expression or
else the literal string, and compare() says why it differs. A percent sign is read only under a
dict entry whose name says percent (``*percent*``, ``*_pct``), where it is the unit and dropped.
"""

from __future__ import annotations

import json
import math
import re
import struct
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from exactgrade import wire
from exactgrade.text.build import build
from exactgrade.text.grammar import parse_expression
from exactgrade.text.lexer import exact_decimal, tokenize
from exactgrade.text.limits import MAX_ANSWER_CHARS, TextError
from exactgrade.values import INT_DTYPES, TensorValue, dtype_family
from exactgrade.verdict import PathPart, render_path

Path = tuple[PathPart, ...]

_WRAPPER = re.compile(
    r"\\(?:text|textrm|textbf|textit|texttt|textsf|mathrm|mathbf|mathtt|mathit|mbox)\s*\{(.*)\}", re.DOTALL
)
_BOLD = re.compile(r"(\*\*|__)(.+)\1", re.DOTALL)
_QUOTED = re.compile(r"([\"'`])(.*)\1", re.DOTALL)
_NONFINITE = {
    "nan": math.nan,
    "NaN": math.nan,
    "inf": math.inf,
    "Infinity": math.inf,
    "infinity": math.inf,
    "\\infty": math.inf,
    "oo": math.inf,
}
_TRUE, _FALSE, _NONE = ("true", "True"), ("false", "False"), ("null", "None")
_INT_RANGES = {
    name: (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    for name, bits in (("int8", 8), ("int16", 16), ("int32", 32), ("int64", 64))
} | {"uint8": (0, 255)}
_OPEN = {"[": "]", "(": ")", "{": "}"}


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """The value read from an answer (reason "") or None and the one-line reason it was refused."""

    value: Any
    reason: str

    @property
    def ok(self) -> bool:
        return self.reason == ""


class _JsonNumber(str):
    """A JSON number literal, kept as text so that it is read exactly."""


class _Reader:
    def __init__(self, expected: Any) -> None:
        self.symbols = _symbols_of(expected)


def parse_answer(text: str, expected: Any) -> ParsedAnswer:
    """text read as the answer to the key expected; never raises."""
    if type(text) is not str:
        return ParsedAnswer(None, f"the answer must be a str, got {type(text).__name__}")
    if len(text) > MAX_ANSWER_CHARS:
        return ParsedAnswer(None, f"the answer is longer than {MAX_ANSWER_CHARS} characters")
    try:
        reader = _Reader(expected)
        return ParsedAnswer(_read_text(reader, text.strip(), expected, ()), "")
    except _PathError as error:
        return ParsedAnswer(None, f"{render_path(error.path)}: {error.reason}")
    except RecursionError:
        return ParsedAnswer(None, "value: nested too deeply")


class _PathError(Exception):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(reason)
        self.path, self.reason = path, reason


def _symbols_of(expected: Any) -> dict[str, Any]:
    """Name -> sympy Symbol for every free symbol of the key (the declared names)."""
    sympy = sys.modules.get("sympy")
    found: dict[str, Any] = {}
    stack = [expected]
    while stack:
        value = stack.pop()
        if type(value) in (list, tuple):
            stack.extend(value)
        elif type(value) is dict:
            stack.extend(value.values())
        elif sympy is not None and isinstance(value, sympy.Basic):
            for symbol in sorted(value.free_symbols, key=lambda s: s.name):
                found.setdefault(symbol.name, symbol)
    return found


# ---------------------------------------------------------------------------------------------
# text


def _read_text(reader: _Reader, text: str, key: Any, path: Path) -> Any:
    if type(key) is dict or _looks_like_json(text, key):
        return _read_json_text(reader, text, key, path)
    if type(key) in (list, tuple) or (type(key) is TensorValue and key.shape):
        items = _split(text, path)
        if isinstance(items, list):
            return _read_items(reader, items, key, path)
    return _read_leaf(reader, text, key, path)


def _looks_like_json(text: str, key: Any) -> bool:
    return text[:1] == "{" or (text[:1] == "[" and type(key) in (list, tuple, TensorValue) and _is_json(text))


def _is_json(text: str) -> bool:
    try:
        _load_json(text, ())
    except _PathError:
        return False
    return True


def _read_json_text(reader: _Reader, text: str, key: Any, path: Path) -> Any:
    try:
        value = _load_json(text, path)
    except _PathError as error:
        value = _relaxed_json(text)
        if value is None:
            raise error from None
    return _read_json(reader, value, key, path)


def _relaxed_json(text: str) -> Any:
    """JSON whose leaves may be bare expressions ({"H": log(2)/2, "x": [1/2, sqrt(2)]}, as models
    often write it): each bare leaf becomes the string a quoted leaf would be, read the same way
    after (a bare JSON literal stays that literal). None when text is not of that form. Only the
    brackets are parsed here; the leaves go through the same safe grammar as quoted ones."""
    try:
        wire._check_structure(text)
    except wire.WireError:
        return None
    decoder = json.JSONDecoder(parse_int=_JsonNumber, parse_float=_JsonNumber, parse_constant=_JsonNumber)

    def value(at: int) -> tuple[Any, int]:
        at = _skip_space(text, at)
        opening = text[at : at + 1]
        if opening in ("{", "["):
            closing = "}" if opening == "{" else "]"
            items: list[Any] = []
            at = _skip_space(text, at + 1)
            while text[at : at + 1] != closing:
                if opening == "{":
                    name, at = decoder.raw_decode(text, at)
                    if type(name) is not str:
                        raise ValueError("a key is not a string")
                    at = _skip_space(text, at)
                    if text[at : at + 1] != ":":
                        raise ValueError("no colon after a key")
                    item, at = value(at + 1)
                    items.append((name, item))
                else:
                    item, at = value(at)
                    items.append(item)
                at = _skip_space(text, at)
                if text[at : at + 1] == ",":
                    at = _skip_space(text, at + 1)
                elif text[at : at + 1] != closing:
                    raise ValueError("no comma between items")
            return (_object(items) if opening == "{" else items), at + 1
        if opening == '"':
            return decoder.raw_decode(text, at)
        end = _leaf_end(text, at)
        leaf = text[at:end].strip()
        if not leaf:
            raise ValueError("an empty leaf")
        try:
            return decoder.decode(leaf), end
        except json.JSONDecodeError:
            return leaf, end

    try:
        parsed, end = value(0)
    except (ValueError, IndexError, wire.WireError, RecursionError):
        return None
    return parsed if type(parsed) in (dict, list) and not text[end:].strip() else None


def _skip_space(text: str, at: int) -> int:
    while text[at : at + 1].isspace():
        at += 1
    return at


def _leaf_end(text: str, at: int) -> int:
    """Where a bare leaf starting at `at` ends: the first ',', '}' or ']' outside its parentheses."""
    depth = 0
    while at < len(text):
        char = text[at]
        if char in "([":
            depth += 1
        elif char in ")]" and depth > 0:
            depth -= 1
        elif char in ",}]" and depth == 0:
            return at
        elif char in "{\"" and depth == 0:
            raise ValueError("a bare leaf holds a brace or a quote")
        at += 1
    return at


def _load_json(text: str, path: Path) -> Any:
    try:
        wire._check_structure(text)
        return json.loads(
            text,
            parse_int=_JsonNumber,
            parse_float=_JsonNumber,
            parse_constant=_JsonNumber,
            object_pairs_hook=_object,
        )
    except wire.WireError as error:
        raise _PathError(path, f"the JSON answer is too large: {error}") from None
    except json.JSONDecodeError as error:
        raise _PathError(path, f"not valid JSON: {error.msg} at position {error.pos}") from None
    except RecursionError:
        raise _PathError(path, "the JSON answer is nested too deeply") from None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise wire.WireError("a JSON object repeats a key")
    return out


def _split(text: str, path: Path) -> list[Any] | str:
    """Bracketed items: "[1, [2, 3]]" -> ["1", ["2", "3"]]; "(1+2)" stays a string (no comma)."""
    inner, bracket = _unwrap(text)
    parts = _top_level_commas(inner)
    if bracket == "(" and len(parts) == 1:
        return text
    if bracket is None and len(parts) == 1:
        return text
    items: list[Any] = []
    for part in parts:
        part = part.strip()
        if not part:
            raise _PathError(path, "an empty item in a list")
        nested, nested_bracket = _unwrap(part)
        if nested_bracket == "[" or (nested_bracket == "(" and len(_top_level_commas(nested)) > 1):
            items.append(_split(part, path))
        else:
            items.append(part)
    return items


def _unwrap(text: str) -> tuple[str, str | None]:
    """The inside of text when one pair of brackets wraps all of it, and that bracket."""
    body = text.strip()
    body = re.sub(r"^\\left\s*([\[(])", r"\1", body)
    body = re.sub(r"\\right\s*([\])])$", r"\1", body)
    if body[:1] in ("[", "(") and body[-1:] == _OPEN[body[0]] and _matching(body) == len(body) - 1:
        return body[1:-1], body[0]
    return body, None


def _matching(text: str) -> int:
    """Index of the bracket closing text[0]."""
    depth = 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _top_level_commas(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _read_items(reader: _Reader, items: list[Any], key: Any, path: Path) -> Any:
    if type(key) is TensorValue:
        return _tensor(reader, items, key, path)
    out = []
    for index, item in enumerate(items):
        element_key = key[index] if type(key) in (list, tuple) and index < len(key) else None
        where = (*path, index)
        if isinstance(item, list):
            out.append(_read_items(reader, item, element_key, where))
        else:
            out.append(_read_text(reader, item, element_key, where))
    return out


def _read_leaf(reader: _Reader, text: str, key: Any, path: Path) -> Any:
    """One leaf written as text, read by its key."""
    if type(key) is str:
        return _literal(text)
    word = _literal(text)
    if word in _NONE:
        return None
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    if type(key) is float or (type(key) is TensorValue and dtype_family(key.dtype) == "float"):
        sign = -1.0 if text.startswith("-") else 1.0
        special = _NONFINITE.get(text.lstrip("+-").strip())
        if special is not None:
            return sign * special
    if not _is_number_key(key):
        try:
            return _expression(reader, text, path)
        except _PathError:
            return word
    return _expression(reader, text, path)


def _is_number_key(key: Any) -> bool:
    return type(key) in (int, float, Fraction, TensorValue) or _is_sympy(key)


def _is_sympy(x: Any) -> bool:
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(x, sympy.Basic)


def _literal(text: str) -> str:
    word = _unbold(text)
    match = _WRAPPER.fullmatch(word)
    if match is not None:
        word = match.group(1).strip()
    match = _QUOTED.fullmatch(word)
    return match.group(2) if match is not None else word


def _unbold(text: str) -> str:
    """Markdown emphasis around a whole leaf (**73**, __73__) is not part of it."""
    text = text.strip()
    match = _BOLD.fullmatch(text)
    return match.group(2).strip() if match is not None else text


def _expression(reader: _Reader, text: str, path: Path) -> Any:
    text = _unbold(text)
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]  # the full stop of a sentence
    if text.startswith("\\$"):
        text = text[2:]  # a currency sign before the number, like a unit after it
    if path and type(path[-1]) is str and _names_percent(path[-1]):
        text = re.sub(r"\\?%$", "", text.rstrip())
    try:
        tokens = tokenize(text)
        return build(parse_expression(tokens, reader.symbols), reader.symbols)
    except TextError as error:
        raise _PathError(path, str(error)) from None


def _names_percent(name: str) -> bool:
    lowered = name.lower()
    return "percent" in lowered or lowered.endswith("_pct")


# ---------------------------------------------------------------------------------------------
# JSON


def _read_json(reader: _Reader, value: Any, key: Any, path: Path) -> Any:
    if type(value) is dict:
        return {
            name: _read_json(reader, item, key.get(name) if type(key) is dict else None, (*path, name))
            for name, item in value.items()
        }
    if type(value) is list:
        if type(key) is TensorValue:
            return _tensor(reader, value, key, path)
        return [
            _read_json(
                reader,
                item,
                key[index] if type(key) in (list, tuple) and index < len(key) else None,
                (*path, index),
            )
            for index, item in enumerate(value)
        ]
    if type(value) is _JsonNumber:
        return _json_number(value, key, path)
    if type(value) is str:
        if type(key) is str:
            return value
        return _read_text(reader, value.strip(), key, path) if value.strip() else value
    return value  # None, bool


def _json_number(literal: str, key: Any, path: Path) -> Any:
    if literal in ("NaN", "Infinity", "-Infinity"):
        if type(key) is float or type(key) is TensorValue:
            return float(literal.replace("Infinity", "inf"))
        raise _PathError(path, f"{literal} is read only where the key is a float")
    try:
        value = exact_decimal(literal)
    except TextError as error:
        raise _PathError(path, str(error)) from None
    return value.numerator if value.denominator == 1 else value


# ---------------------------------------------------------------------------------------------
# tensors


def _tensor(reader: _Reader, items: list[Any], key: TensorValue, path: Path) -> TensorValue:
    shape: list[int] = []
    data: list[Any] = []
    _flatten(items, 0, shape, data, path)
    family = dtype_family(key.dtype)
    elements = tuple(_element(reader, item, key, family, (*path, index)) for index, item in enumerate(data))
    return TensorValue(key.dtype, tuple(shape), elements)


def _flatten(items: Any, level: int, shape: list[int], data: list[Any], path: Path) -> None:
    if isinstance(items, list):
        if len(shape) == level:
            shape.append(len(items))
        elif shape[level] != len(items) or len(shape) > level + 1 and not items:
            raise _PathError(path, "the nested lists are not rectangular (a tensor needs one shape)")
        for item in items:
            _flatten(item, level + 1, shape, data, path)
    else:
        if len(shape) != level:
            raise _PathError(path, "the nested lists are not rectangular (a tensor needs one shape)")
        data.append(items)
    if level == 0 and len(data) > wire.MAX_ELEMENTS:
        raise _PathError(path, f"more than {wire.MAX_ELEMENTS} tensor elements")


def _element(reader: _Reader, item: Any, key: TensorValue, family: str, path: Path) -> Any:
    if family == "bool":
        value = item if type(item) is bool else _read_leaf(reader, str(item), True, path)
        if type(value) is not bool:
            raise _PathError(path, f"a {key.dtype} tensor element must be true or false")
        return value
    if type(item) is _JsonNumber:
        value = _json_number(item, key, path)
    elif type(item) is str:
        value = _read_leaf(reader, item, key, path)
    else:
        raise _PathError(path, f"a {key.dtype} tensor element must be a number, got {type(item).__name__}")
    if family == "int":
        if type(value) is not int:
            raise _PathError(path, f"a {key.dtype} tensor element must be an integer")
        low, high = _INT_RANGES[key.dtype]
        if not low <= value <= high:
            raise _PathError(path, f"{value} is outside the {key.dtype} range [{low}, {high}]")
        return value
    if type(value) is float:
        return value
    if type(value) not in (int, Fraction):
        raise _PathError(
            path,
            f"a {key.dtype} tensor element must be a rational number or nan/inf (write its decimal value)",
        )
    return round_to_dtype(Fraction(value), key.dtype)


def round_to_dtype(q: Fraction, dtype: str) -> float:
    """q rounded to the nearest value of a float dtype (as a torch tensor of that dtype holds it)."""
    try:
        x = float(q)
    except OverflowError:
        return math.copysign(math.inf, q)
    if dtype == "float64":
        return x
    if dtype == "bfloat16":
        bits = struct.unpack("<I", struct.pack("<f", _to_float32(x)))[0]
        if (bits >> 23) & 0xFF == 0xFF:
            return _to_float32(x)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # round to nearest even
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    code = "e" if dtype == "float16" else "f"
    try:
        return struct.unpack(f"<{code}", struct.pack(f"<{code}", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _to_float32(x: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


assert set(_INT_RANGES) == set(INT_DTYPES)
