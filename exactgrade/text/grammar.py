"""Tokens -> an expression tree, by recursive descent.

Why recursive descent and not a parsing library (lark): the grammar is small (about fifteen
productions), needs no dependency, and the parser is plain Python whose every loop and recursion
is bounded here (MAX_DEPTH, MAX_NODES, MAX_TOKENS), so its cost is linear in the text. The
rules that matter most are not context-free anyway: implicit multiplication is refused where it
is ambiguous (after a division, a bare exponent or a bare function argument, and before a
number), a name is read by the declared symbols, and words are units only at the end.

    answer   := [label "="] sum [unit]            label: a name that is not a declared symbol
    sum      := term (("+" | "-") term)*
    term     := signed (("*" | "/" | \\cdot | \\times | \\div | <implicit>) signed)*
    signed   := ("-" | "+") signed | power
    power    := postfix ["^" exponent]             right-associative; ** is ^
    exponent := ("-" | "+") exponent | postfix ["^" exponent]
    postfix  := primary "!"*
    primary  := number | name | "(" sum ")" | "[" sum "]" | "{" sum "}" | \\frac{}{} | \\sqrt[n]{}
              | function [^power] argument | \\log_b argument | \\pi | \\mathrm{name} | \\mathbf{...}

The tree is tuples: ("num", Fraction), ("pi",), ("e",), ("sym", name), ("add", terms),
("neg", x), ("mul", factors), ("div", x, y), ("pow", x, y), ("func", name, x), ("log", x, base),
("root", x, n), ("fact", x). exactgrade.text.build turns it into a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from exactgrade.text.lexer import Token
from exactgrade.text.limits import MAX_DEPTH, MAX_NODES, TextError

Node = tuple[Any, ...]

# Function names as written (plain or after a backslash) -> the wire's function name.
FUNCTIONS: dict[str, str] = {"exp": "exp", "ln": "log", "log": "log"}
for _name in ("sin", "cos", "tan", "cot", "sec", "csc"):
    FUNCTIONS[_name] = _name
    FUNCTIONS[f"a{_name}"] = FUNCTIONS[f"arc{_name}"] = f"a{_name}"
    FUNCTIONS[f"{_name}h"] = f"{_name}h"
    FUNCTIONS[f"a{_name}h"] = FUNCTIONS[f"arc{_name}h"] = FUNCTIONS[f"ar{_name}h"] = f"a{_name}h"
CONSTANTS = {"pi": ("pi",), "e": ("e",), "E": ("e",)}
_NOT_VALUES = {
    "=": "an equation or a second '=' is not an answer (write the value only)",
    "<": "an inequality is not an answer",
    ">": "an inequality is not an answer",
    "le": "an inequality is not an answer",
    "ge": "an inequality is not an answer",
    "leq": "an inequality is not an answer",
    "geq": "an inequality is not an answer",
    "lt": "an inequality is not an answer",
    "gt": "an inequality is not an answer",
    "neq": "an inequality is not an answer",
    "ne": "an inequality is not an answer",
    "approx": "an approximation sign is not an answer (give the exact value)",
    "pm": "\\pm gives two values; an answer is one value",
    "mp": "\\mp gives two values; an answer is one value",
    "|": "absolute values are not read (Abs is not analytic): write the value",
    "infty": "infinity is read only as a whole answer (a float key), not inside an expression",
    "{": "a set is not an answer",
    "}": "a set is not an answer",
    "&": "a matrix or aligned environment is not read (write a list)",
    "\\": "a line break or matrix row is not read (write a list)",
    "circ": "degrees are not read (write radians, or the number alone)",
    "%": "a percent sign is read only where the answer key names a percentage",
    ",": "a comma inside a number or expression is not read (a decimal comma is not allowed, "
    "and thousands separators need groups of three digits)",
}
_UNIT_WORDS = re.compile(r"[A-Za-z][A-Za-z /.\-]*(?:\^[0-9])?")
_MULTIPLY = {"*": "*", "cdot": "*", "times": "*", "ast": "*", "/": "/", "div": "/"}
_FRACTIONS = frozenset({"frac", "dfrac", "tfrac", "cfrac"})
_TRANSPARENT = frozenset({"mathbf", "boldsymbol", "bm", "mathbb", "mathcal", "mathnormal"})


def parse_expression(tokens: list[Token], symbols: Mapping[str, Any]) -> Node:
    """The tree of one expression; symbols are the declared names (TextError otherwise)."""
    tokens = _drop_unit(tokens, symbols)
    tokens = _drop_label(tokens, symbols)
    parser = _Parser(tokens, symbols)
    node = parser.sum()
    token = parser.peek()
    if token.kind != "end":
        raise TextError(parser.unexpected(token))
    return node


def _known(name: str, symbols: Mapping[str, Any]) -> bool:
    return name in symbols or name in FUNCTIONS or name in CONSTANTS or name in ("sqrt", "pi")


def _drop_unit(tokens: list[Token], symbols: Mapping[str, Any]) -> list[Token]:
    """Tokens without a trailing unit: \\text{...} groups of words, joined by / or * or powers."""
    end = len(tokens) - 1  # the "end" token
    start = end
    index = end - 1
    while index >= 0:
        token = tokens[index]
        if token.kind == "text" and _UNIT_WORDS.fullmatch(token.value) and not _known(token.value, symbols):
            start = index
        elif token.kind == "num" and index > 0 and tokens[index - 1].text == "^":
            index -= 1  # the "^" before it
        elif not (
            (token.kind == "op" and token.text in "/*") or (token.kind == "cmd" and token.text == "cdot")
        ):
            break
        index -= 1
    if start == end or start == 0:
        return tokens
    return tokens[:start] + tokens[end:]


def _drop_label(tokens: list[Token], symbols: Mapping[str, Any]) -> list[Token]:
    """`x = 5` -> `5` when x is a name that is not a declared symbol (a label, not the answer)."""
    if (
        len(tokens) > 2
        and tokens[0].kind == "name"
        and tokens[1].text == "="
        and tokens[0].text not in symbols
    ):
        return tokens[2:]
    return tokens


class _Parser:
    def __init__(self, tokens: list[Token], symbols: Mapping[str, Any]) -> None:
        self.tokens = tokens
        self.symbols = symbols
        self.index = 0
        self.depth = 0
        self.nodes = 0
        self.open_tail = ""  # why a factor just parsed may not take an implicit multiplication

    # -- helpers
    def peek(self, offset: int = 0) -> Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def take(self) -> Token:
        token = self.peek()
        self.index += 1
        return token

    def node(self, *parts: Any) -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise TextError(f"an expression with more than {MAX_NODES} nodes")
        return parts

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TextError(f"an expression nested deeper than {MAX_DEPTH} levels")

    def is_op(self, text: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token.kind == "op" and token.text == text

    def expect(self, text: str) -> Token:
        token = self.take()
        if token.kind != "op" or token.text != text:
            if token.text in _NOT_VALUES and token.kind in ("op", "cmd"):
                raise TextError(_NOT_VALUES[token.text])
            raise TextError(f"expected '{text}' at position {token.start}, found {_shown(token)}")
        return token

    def unexpected(self, token: Token) -> str:
        key = token.text if token.kind in ("op", "cmd") else ""
        if key in _NOT_VALUES:
            return _NOT_VALUES[key]
        if token.kind == "end":
            return "the expression ends too early"
        return f"unexpected {_shown(token)} at position {token.start}"

    # -- productions
    def sum(self) -> Node:
        self.enter()
        terms = [self.term()]
        while self.peek().kind == "op" and self.peek().text in "+-":
            sign = self.take().text
            term = self.term()
            terms.append(term if sign == "+" else self.node("neg", term))
        self.depth -= 1
        return terms[0] if len(terms) == 1 else self.node("add", tuple(terms))

    def term(self) -> Node:
        node = self.signed()
        divided = False
        while True:
            token = self.peek()
            operator = _MULTIPLY.get(token.text) if token.kind in ("op", "cmd") else None
            if operator is not None:
                self.take()
                right = self.signed()
                node = self.node("mul", (node, right)) if operator == "*" else self.node("div", node, right)
                divided = operator == "/"
                continue
            if not self.starts_factor(token):
                return node
            self.check_implicit(token, divided)
            node = self.node("mul", (node, self.signed()))

    def starts_factor(self, token: Token) -> bool:
        if token.kind in ("num", "name", "text"):
            return True
        if token.kind == "op":
            return token.text in "([{"
        return token.kind == "cmd" and token.text not in _MULTIPLY and token.text not in _NOT_VALUES

    def check_implicit(self, token: Token, divided: bool) -> None:
        if token.kind == "num":
            raise TextError(
                f"a number right after a factor (position {token.start}) without an operator "
                f"is ambiguous: write * between them"
            )
        if divided:
            raise TextError(
                f"a product right after a division (position {token.start}) is ambiguous: "
                f"write a/(b c) or (a/b) c"
            )
        if self.open_tail:
            raise TextError(
                f"{self.open_tail} followed by a product (position {token.start}) is ambiguous: "
                f"use braces or parentheses"
            )

    def signed(self) -> Node:
        self.open_tail = ""
        token = self.peek()
        if token.kind == "op" and token.text in "+-":
            self.take()
            self.enter()
            operand = self.signed()
            self.depth -= 1
            return operand if token.text == "+" else self.node("neg", operand)
        return self.power()

    def power(self) -> Node:
        base = self.postfix()
        if not self.is_op("^"):
            return base
        self.take()
        self.enter()
        exponent, delimited = self.exponent()
        self.depth -= 1
        self.open_tail = "" if delimited else "an exponent without braces"
        return self.pow_node(base, exponent)

    def pow_node(self, base: Node, exponent: Node) -> Node:
        return self.node("func", "exp", exponent) if base == ("e",) else self.node("pow", base, exponent)

    def exponent(self) -> tuple[Node, bool]:
        token = self.peek()
        if token.kind == "op" and token.text in "+-":
            self.take()
            self.enter()
            inner, delimited = self.exponent()
            self.depth -= 1
            return (inner if token.text == "+" else self.node("neg", inner)), delimited
        delimited = token.kind == "op" and token.text in "({["
        base = self.postfix()
        if self.is_op("^"):
            self.take()
            self.enter()
            inner, delimited = self.exponent()
            self.depth -= 1
            return self.pow_node(base, inner), delimited
        return base, delimited and self.tokens[self.index - 1].text in ")}]"

    def postfix(self) -> Node:
        node = self.primary()
        while self.is_op("!"):
            self.take()
            node = self.node("fact", node)
            self.open_tail = ""
        return node

    def primary(self) -> Node:
        token = self.peek()
        self.enter()
        try:
            if token.kind == "num":
                self.take()
                return self.node("num", token.value)
            if token.kind == "op" and token.text in "([{":
                return self.group()
            if token.kind == "name":
                return self.name()
            if token.kind == "text":
                return self.text_name()
            if token.kind == "cmd":
                return self.command()
            raise TextError(self.unexpected(token))
        finally:
            self.depth -= 1

    def group(self) -> Node:
        opening = self.take().text
        inner = self.sum()
        self.expect({"(": ")", "[": "]", "{": "}"}[opening])
        self.open_tail = ""
        return inner

    def braced(self, command: str) -> Node:
        """A LaTeX argument: {...}, or a single digit, letter or command."""
        token = self.peek()
        if token.kind == "op" and (token.text == "{" or (token.text == "(" and command in ("sqrt", "surd"))):
            return self.group()
        if token.kind == "num" and (len(token.text) == 1 or command == "surd"):  # √10 covers all its digits
            self.take()
            return self.node("num", token.value)
        if token.kind == "name" and len(token.text) == 1:
            self.take()
            return self.name_value(token.text, token)
        if token.kind == "cmd":
            return self.command()
        raise TextError(f"\\{command} needs a braced argument, found {_shown(token)}")

    def name(self) -> Node:
        token = self.take()
        name = token.text
        if self.is_op("_"):
            return self.subscripted(name, token)
        if name in self.symbols:
            return self.node("sym", name)
        if name == "sqrt":
            return self.node("root", self.argument(name), 2)
        if (
            name == "log"
            and self.peek().kind == "num"
            and self.peek().text in ("2", "10")
            and self.peek().start == token.end
            and self.is_op("(", 1)
        ):
            base = self.take().value
            return self.node("log", self.argument(name), self.node("num", base))
        if name in FUNCTIONS:
            return self.function(name)
        return self.name_value(name, token)

    def name_value(self, name: str, token: Token) -> Node:
        if name in self.symbols:
            return self.node("sym", name)
        if name in CONSTANTS:
            return self.node(*CONSTANTS[name])
        parts = _segment(name, self.symbols)
        if parts is None:
            raise TextError(_unknown_name(name, self.symbols))
        if isinstance(parts, str):
            raise TextError(parts)
        node = self.node("sym", parts[0]) if parts[0] != "pi" else self.node("pi")
        for part in parts[1:]:
            node = self.node("mul", (node, self.node("sym", part) if part != "pi" else self.node("pi")))
        return node

    def subscripted(self, name: str, token: Token) -> Node:
        self.take()  # "_"
        sub = self.take()
        if sub.kind == "op" and sub.text == "{":
            if name == "log":
                base = self.sum()
                self.expect("}")
                return self.node("log", self.argument("log"), base)
            parts = []
            while not self.is_op("}"):
                part = self.take()
                if part.kind not in ("num", "name"):
                    raise TextError(f"a subscript holds letters and digits only, found {_shown(part)}")
                parts.append(part.text)
            self.take()
            subscript = "".join(parts)
        elif sub.kind in ("num", "name"):
            subscript = sub.text
            if name == "log":
                return self.node(
                    "log",
                    self.argument("log"),
                    self.node("num", sub.value) if sub.kind == "num" else self.name_value(sub.text, sub),
                )
        else:
            raise TextError(f"a subscript after {name} must be a name or digits, found {_shown(sub)}")
        full = f"{name}_{subscript}"
        if full in self.symbols:
            return self.node("sym", full)
        raise TextError(_unknown_name(full, self.symbols))

    def text_name(self) -> Node:
        token = self.take()
        content = token.value
        if content in self.symbols or content in CONSTANTS:
            return self.name_value(content, token)
        if content in FUNCTIONS:
            return self.function(content)
        if content == "sqrt":
            return self.node("root", self.argument(content), 2)
        raise TextError(
            f"text {content[:40]!r} inside an expression is not read (units go last, in \\text{{...}})"
        )

    def command(self) -> Node:
        token = self.take()
        name = token.text
        if name in _FRACTIONS:
            return self.fraction(name, token)
        if name == "sqrt":
            return self.root()
        if name == "surd":  # the character √
            node = self.node("root", self.braced(name), 2)
            self.open_tail = ""
            return node
        if name == "pi":
            return self.node("pi")
        if name == "log" and self.is_op("_"):
            return self.subscripted("log", token)
        if name in FUNCTIONS:
            return self.function(name)
        if name in _TRANSPARENT:
            return self.braced(name)
        if name in _NOT_VALUES:
            raise TextError(_NOT_VALUES[name])
        raise TextError(f"the command \\{name[:40]} is not read")

    def fraction(self, name: str, token: Token) -> Node:
        first = self.peek()
        if first.kind == "num" and len(first.text) == 2 and first.text.isdigit():  # \frac12
            self.take()
            return self.node(
                "div",
                self.node("num", Fraction(int(first.text[0]))),
                self.node("num", Fraction(int(first.text[1]))),
            )
        numerator = self.braced(name)
        denominator = self.braced(name)
        self.open_tail = ""
        return self.node("div", numerator, denominator)

    def root(self) -> Node:
        degree = 2
        if self.is_op("["):
            self.take()
            token = self.take()
            if token.kind != "num" or not token.text.isdigit() or not 2 <= token.value <= 10_000:
                raise TextError("\\sqrt[n]{...} needs an integer n from 2 to 10000")
            degree = int(token.value)
            self.expect("]")
        argument = self.braced("sqrt")
        self.open_tail = ""
        return self.node("root", argument, degree)

    def function(self, name: str) -> Node:
        wire_name = FUNCTIONS[name]
        power = None
        if self.is_op("^"):  # \sin^2 x is (sin x)^2
            self.take()
            token = self.take()
            if token.kind == "op" and token.text == "{":
                token = self.take()
                if not self.is_op("}"):
                    token = Token("op", "", token.start, token.end)
                self.take()
            if token.kind != "num" or not token.text.isdigit():
                raise TextError(
                    f"\\{name}^{{...}} is read only with a positive integer power "
                    f"(\\{name}^{{-1}} is ambiguous: write the inverse function's name)"
                )
            power = self.node("num", token.value)
        argument = self.argument(name)
        if argument[0] == "logbase":
            node = self.node("log", argument[1], argument[2])
        else:
            node = self.node("func", wire_name, argument)
        if power is not None:
            node = self.node("pow", node, power)
        return node

    def argument(self, name: str) -> Node:
        """A function's argument: (...), {...} or [...], or one power-level factor (then marked bare)."""
        token = self.peek()
        if token.kind == "op" and token.text in "({[":
            self.take()
            inner = self.sum()
            if (
                token.text == "(" and self.is_op(",") and name in ("log", "\\log")
            ):  # log(x, b), as sympy writes it
                self.take()
                base = self.sum()
                self.expect(")")
                self.open_tail = ""
                return self.node("logbase", inner, base)
            self.expect({"(": ")", "[": "]", "{": "}"}[token.text])
            self.open_tail = ""
            return inner
        if token.kind == "end" or (token.kind == "op" and token.text not in "+-"):
            raise TextError(f"{name} needs an argument")
        node = self.power()
        self.open_tail = f"a function argument without parentheses ({name} ...)"
        return node


def _segment(name: str, symbols: Mapping[str, Any]) -> list[str] | str | None:
    """`xy` -> ["x", "y"] when the letters split into declared symbols (and pi) one way only;
    None when they do not split; a reason when they split in several ways."""
    parts = [*symbols, "pi"]
    ways: list[list[list[str]]] = [[] for _ in range(len(name) + 1)]
    ways[0] = [[]]
    for end in range(1, len(name) + 1):
        for part in parts:
            if name.endswith(part, 0, end) and ways[end - len(part)]:
                ways[end].extend([*way, part] for way in ways[end - len(part)][:2])
        ways[end] = ways[end][:2]
    if not ways[-1]:
        return None
    if len(ways[-1]) > 1:
        return f"the name {name!r} splits into declared symbols in several ways: write * between them"
    return ways[-1][0]


def _unknown_name(name: str, symbols: Mapping[str, Any]) -> str:
    declared = ", ".join(sorted(symbols)) if symbols else "none"
    return f"unknown name {name[:40]!r} (declared symbols: {declared}; units go last, in \\text{{...}})"


def _shown(token: Token) -> str:
    if token.kind == "end":
        return "the end"
    if token.kind == "cmd":
        return f"\\{token.text[:40]}"
    if token.kind == "text":
        return f"\\{token.text}{{{str(token.value)[:40]}}}"
    return repr(token.text[:40])
