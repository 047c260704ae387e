"""The wire format: tagged JSON for graded values, the only door from a sandbox into the host.

encode(value) -> str is canonical (sorted keys, no spaces, ASCII): equal values built the same
way give identical bytes, so dataset builds are reproducible. decode(text) -> value is strict:
it never evals, unpickles or sympifies; it checks size, nesting, value count, string lengths and
digit runs on the text before parsing and every tag while parsing (never walking the tree again,
so any 1 MiB shape costs a small multiple of json.loads); and it raises only WireError (a
ValueError with a one-line reason), whatever the input.

    null, true, false, "text", 12, 2.5     None, bool, str, int, finite float (2.0 is a float, 2 an int)
    [v, ...]                               list (tuples encode as lists)
    {"key": v, ...}                        dict with str keys; a key starting with "$" gets one extra "$"
    {"$float": "nan" | "inf" | "-inf"}     non-finite float
    {"$frac": "-7/4"}                      Fraction, in lowest terms, denominator >= 1
    {"$sym": node}                         sympy expression; node is ["Integer", n] | ["Rational", p, q]
                                           | ["pi"] | ["E"] | ["Add", node...] | ["Mul", node...]
                                           | ["Pow", base, exp] | [F, node] for F in FUNCTIONS
                                           | ["Symbol", name, assumption...]
    {"$tensor": {"dtype": d, "shape": [..], "data": [..]}}   TensorValue (flat row-major data)

Sympy whitelist: exactly what exact answers in this project are made of (rationals, pi, e, sums,
products, powers incl. roots, log, exp, the trigonometric and hyperbolic functions, their
reciprocals and inverses) and the free symbols a task declares. No Float (inexact), and no
non-analytic function (Abs, sign, floor, Piecewise, ...: refused with a reason saying so).
A symbol is its name (an identifier of at most MAX_NAME_CHARS characters) and its domain, spelled
one way only: "integer" and/or one sign among negative, nonnegative, nonpositive, positive, or
"real" alone, or nothing (a sympy Symbol without assumptions); any other sympy assumption is
refused. One expression holds at most MAX_SYMBOLS names, each with one domain.
Nodes are rebuilt as sent, without evaluation (so decoding does no arithmetic: `Pow(10, 10000)`
stays a power); integer sizes, node count and rational exponents are capped, and so are tensor
dimensions (at most 64, each below 2**63). encode() refuses every value that decode() would refuse
to rebuild (the byte size of the text is left to the caller, who may pass a larger max_bytes).
Every value has one spelling: a tag is a tag only as the single key of its object, and nowhere is
a decoded plain dict read again as a tag (an escaped `{"$$float": "nan"}` inside tensor data is
refused, not taken for a float).

This module imports only the standard library, `.values` (relatively: the sandbox ships wire.py
and values.py as a standalone package), sympy lazily and torch only if already imported.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from fractions import Fraction
from itertools import accumulate
from typing import Any

from .values import DTYPES, TensorValue, dtype_family

MAX_BYTES = 1 << 20
MAX_DEPTH = 64  # JSON nesting levels, checked before json.loads
MAX_INT_DIGITS = 1000
MAX_STR_CHARS = 1 << 16
MAX_ELEMENTS = 1 << 20  # values of any kind, tensor elements included
MAX_SYMPY_NODES = 1000
MAX_EXPONENT = 10_000  # |p| and q of a rational exponent: bounds the work of evaluating a power
MAX_SYMBOLS = 16  # distinct symbol names in one sympy expression
MAX_NAME_CHARS = 32
MAX_DIMS = 64  # tensor dimensions, each below 2**63 (torch's own bound): the element count is cheap
_INT_LIMIT = 10**MAX_INT_DIGITS  # an int has more than MAX_INT_DIGITS digits iff abs(n) >= this

_INT_RANGES = {
    "uint8": (0, 255), "int8": (-128, 127), "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
}
_FRACTION = re.compile(r"(-?(?:0|[1-9][0-9]*))/([1-9][0-9]*)")
# A JSON string (an unterminated one runs to the end of the text: matching it must never be
# retried from a later quote, which made the scan quadratic).
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_NOT_STRUCTURE = re.compile(r"[^\[\]{},]+")
_LONG_NUMBER = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1}}}")
_KEY_END = re.compile(r"[ \t\n\r]*:")
_NESTING_STEP = {"[": 1, "{": 1, "]": -1, "}": -1, ",": 0}
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_TAGS = ("$float", "$frac", "$sym", "$tensor")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
SIGNS = ("negative", "nonnegative", "nonpositive", "positive")
FUNCTIONS = ("exp", "log", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "acot",
             "asec", "acsc", "sinh", "cosh", "tanh", "coth", "sech", "csch", "asinh", "acosh", "atanh",
             "acoth", "asech", "acsch")
# Named in the refusal: they are not analytic (no identity test by evaluation at points holds).
NON_ANALYTIC = frozenset({"Abs", "sign", "floor", "ceiling", "frac", "Piecewise", "Min", "Max",
                           "Heaviside", "DiracDelta", "Mod", "re", "im", "arg", "conjugate"})


class WireError(ValueError):
    """A value that cannot be encoded, or a payload that is not a valid encoding (one-line reason)."""


# ---------------------------------------------------------------------------------------------
# encode

def encode(value: Any) -> str:
    """The canonical tagged-JSON text of value; WireError for anything outside the value model."""
    counter = [0]
    tree = _to_json(value, 0, counter)
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    _check_depth(text)  # tags add JSON levels: refuse what decode would refuse
    return text


def _count(counter: list[int], n: int = 1) -> None:
    counter[0] += n
    if counter[0] > MAX_ELEMENTS:
        raise WireError(f"more than {MAX_ELEMENTS} elements")


def _to_json(x: Any, depth: int, counter: list[int]) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels (or a cycle)")
    _count(counter)
    t = type(x)
    if x is None or t is bool:
        return x
    if t is int:
        _check_int(x)
        return x
    if t is float:
        return x if math.isfinite(x) else {"$float": _float_tag(x)}
    if t is str:
        _check_str(x)
        return x
    if t is Fraction:
        _check_int(x.numerator)
        _check_int(x.denominator)
        return {"$frac": f"{x.numerator}/{x.denominator}"}
    if t is list or t is tuple:
        return [_to_json(item, depth + 1, counter) for item in x]
    if t is dict:
        return _dict_to_json(x, depth, counter)
    if t is TensorValue:
        return _tensor_to_json(x, counter)
    torch = sys.modules.get("torch")
    if torch is not None and (t is torch.Tensor or t is torch.nn.Parameter):
        return _tensor_to_json(_from_torch(x), counter)
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(x, sympy.Basic):
        return {"$sym": _sympy_to_json(x, sympy, depth + 2, _SympyState())}
    raise WireError(f"cannot encode a value of type {t.__module__}.{t.__qualname__}")


def _float_tag(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _dict_to_json(x: dict, depth: int, counter: list[int]) -> dict[str, Any]:
    out = {}
    for key, item in x.items():
        if type(key) is not str:
            raise WireError(f"dict keys must be str, got {type(key).__name__}")
        _check_str(key)
        out["$" + key if key.startswith("$") else key] = _to_json(item, depth + 1, counter)
    return out


def _tensor_to_json(x: TensorValue, counter: list[int]) -> dict[str, Any]:
    _count(counter, len(x.data))
    _check_shape(list(x.shape))
    family = dtype_family(x.dtype)
    if family == "float":
        data = [v if math.isfinite(v) else {"$float": _float_tag(v)} for v in x.data]
    else:
        data = list(x.data)
        _check_int_range(x.dtype, data)
    return {"$tensor": {"dtype": x.dtype, "shape": list(x.shape), "data": data}}


def _from_torch(tensor: Any) -> TensorValue:
    try:
        return TensorValue.from_torch(tensor)
    except Exception as error:  # unsupported dtype, sparse/meta tensors, ...
        raise WireError(f"cannot encode torch tensor: {str(error)[:200]}") from None


def _sympy_to_json(node: Any, sympy: Any, depth: int, state: _SympyState) -> list[Any]:
    state.nodes += 1
    if state.nodes > MAX_SYMPY_NODES:
        raise WireError(f"sympy expression has more than {MAX_SYMPY_NODES} nodes")
    if depth > MAX_DEPTH:
        raise WireError(f"sympy expression nested deeper than {MAX_DEPTH} levels")
    name = _sympy_names(sympy).get(type(node))
    if name is None:
        raise WireError(_not_allowed(type(node).__name__, type(node).__name__))
    if name == "Symbol":
        tokens = symbol_domain(node)
        state.add_symbol(node.name, tokens)
        return ["Symbol", node.name, *tokens]
    if name == "Integer":
        _check_int(int(node.p))
        return ["Integer", int(node.p)]
    if name == "Rational":
        _check_int(int(node.p))
        _check_int(int(node.q))
        return ["Rational", int(node.p), int(node.q)]
    if name in ("pi", "E"):
        return [name]
    _check_arity(name, len(node.args))  # an unevaluated log(2, 3) exists; decode refuses it
    if name == "Pow":
        _check_exponent(node.exp)
    return [name, *(_sympy_to_json(arg, sympy, depth + 1, state) for arg in node.args)]


_SYMPY_NAMES: dict[type, str] = {}


def _sympy_names(sympy: Any) -> dict[type, str]:
    """Exact sympy classes allowed -> wire node name (subclasses are not allowed)."""
    if not _SYMPY_NAMES:
        numbers = sympy.core.numbers
        _SYMPY_NAMES.update({
            sympy.Integer: "Integer", numbers.Zero: "Integer", numbers.One: "Integer",
            numbers.NegativeOne: "Integer", sympy.Rational: "Rational", numbers.Half: "Rational",
            numbers.Pi: "pi", numbers.Exp1: "E", sympy.Add: "Add", sympy.Mul: "Mul", sympy.Pow: "Pow",
            sympy.Symbol: "Symbol",
        })
        _SYMPY_NAMES.update({getattr(sympy, name): name for name in FUNCTIONS})
    return _SYMPY_NAMES


def _not_allowed(name: str, shown: str) -> str:
    if name in NON_ANALYTIC:
        return (f"sympy node {shown} is not allowed: a non-analytic function (Abs, sign, floor, "
                f"ceiling, Piecewise, Min, Max, ...) has no wire form; write the expression that holds "
                f"on the declared domain")
    return f"sympy node {shown} is not allowed in the wire format"


def symbol_domain(symbol: Any) -> tuple[str, ...]:
    """The wire spelling of a sympy Symbol's assumptions: () | ("real",) | ("integer",) |
    (sign,) | ("integer", sign). WireError for a name or an assumption the wire cannot carry."""
    import sympy

    if type(symbol) is not sympy.Symbol:  # Dummy, Wild, subclasses: not one name, one meaning
        raise WireError(f"sympy node {type(symbol).__name__} is not allowed: only sympy.Symbol")
    name = symbol.name
    _check_name(name)
    integer = symbol.is_integer is True
    sign = next((s for s in ("positive", "negative", "nonnegative", "nonpositive")
                 if getattr(symbol, f"is_{s}") is True), None)
    tokens: tuple[str, ...] = (("integer",) if integer else ()) + ((sign,) if sign else ())
    if not tokens and symbol.is_real is True:
        tokens = ("real",)
    if sympy.Symbol(name, **dict.fromkeys(tokens, True)) != symbol:
        raise WireError(f"symbol {name} has assumptions the wire cannot carry (only integer, real, "
                        f"positive, negative, nonnegative, nonpositive)")
    return tokens


def _check_name(name: Any) -> None:
    if type(name) is not str or len(name) > MAX_NAME_CHARS or _NAME.fullmatch(name) is None:
        raise WireError(f"a symbol name must be an identifier of at most {MAX_NAME_CHARS} characters, "
                        f"got {str(name)[:40]!r}")


def _check_int(n: int) -> None:
    if abs(n) >= _INT_LIMIT:
        raise WireError(f"integer with more than {MAX_INT_DIGITS} digits")


def _check_str(s: str) -> None:
    if len(s) > MAX_STR_CHARS:
        raise WireError(f"string longer than {MAX_STR_CHARS} characters")


def _check_shape(shape: list[int]) -> None:
    """Bound the dimensions before math.prod(shape): [10**999] * 1000 + [0] takes seconds."""
    if len(shape) > MAX_DIMS or any(n >= 1 << 63 for n in shape):
        raise WireError(f"tensor shape must have at most {MAX_DIMS} dimensions, each below 2**63")


def _check_arity(name: str, count: int) -> None:
    arity = _SYMPY_BUILDERS[name][0]
    if arity is not None and count != arity:
        raise WireError(f"sympy node {name} takes {arity} arguments, got {count}")
    if arity is None and count < 2:
        raise WireError(f"{name} needs at least two arguments")


def _check_exponent(exponent: Any) -> None:
    if exponent.is_Rational and max(abs(exponent.p), exponent.q) > MAX_EXPONENT:
        raise WireError(f"exponent {str(exponent)[:40]} is larger than {MAX_EXPONENT}")


def _check_int_range(dtype: str, data: list[Any]) -> None:
    low, high = _INT_RANGES.get(dtype, (0, 1))
    if dtype != "bool" and any(not low <= v <= high for v in data):
        raise WireError(f"{dtype} tensor element out of range [{low}, {high}]")


# ---------------------------------------------------------------------------------------------
# decode

def decode(text: str, *, max_bytes: int = MAX_BYTES) -> Any:
    """The value encoded by text; WireError (and no other exception) for anything invalid."""
    try:
        return _decode(text, max_bytes)
    except WireError:
        raise
    except RecursionError:
        raise WireError("nested too deeply") from None
    except (ValueError, TypeError, ArithmeticError, MemoryError) as error:
        raise WireError(f"invalid payload: {type(error).__name__}: {str(error)[:200]}") from None


def _decode(text: Any, max_bytes: int) -> Any:
    if type(text) is bytes:
        raw = text
    elif type(text) is str:
        if len(text) > max_bytes:
            raise WireError(f"payload larger than {max_bytes} bytes")
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            raise WireError("payload is not valid Unicode text") from None
    else:
        raise WireError(f"payload must be str, got {type(text).__name__}")
    if len(raw) > max_bytes:
        raise WireError(f"payload larger than {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("payload is not valid UTF-8") from None
    _check_structure(text)
    try:
        return json.loads(text, object_pairs_hook=_object, parse_float=_parse_float,
                          parse_constant=_parse_constant)
    except json.JSONDecodeError as error:
        raise WireError(f"not JSON: {error.msg} at position {error.pos}") from None


# Every check runs on the text or inside json.loads' own hooks (numbers, objects): the decoded
# tree is never walked again, since a megabyte holds half a million values and a walk in Python
# costs a microsecond or more for each. The text checks are regular expressions and C loops.

def _check_structure(text: str) -> None:
    """Nesting depth, value count and string lengths, from the text alone (before json.loads)."""
    if max(map(len, _STRING.findall(text)), default=0) > MAX_STR_CHARS + 2:
        _check_long_strings(text)
    outside_strings = _STRING.sub("", text)
    if _LONG_NUMBER.search(outside_strings):  # before json.loads converts it (no hook per int)
        raise WireError(f"number with more than {MAX_INT_DIGITS} digits")
    skeleton = _NOT_STRUCTURE.sub("", outside_strings)
    _check_nesting(skeleton)
    # Values: the root, and in each non-empty container one more than its commas.
    values = (1 + skeleton.count(",") + skeleton.count("[") + skeleton.count("{")
              - skeleton.count("[]") - skeleton.count("{}"))
    if values > MAX_ELEMENTS:
        raise WireError(f"more than {MAX_ELEMENTS} elements")


def _check_long_strings(text: str) -> None:
    """The exact length of each string literal that may be too long (escapes shrink a literal;
    an escaped "$$" key may be one longer than the limit, which applies to the key encoded)."""
    for match in _STRING.finditer(text):
        literal = match.group()
        if len(literal) <= MAX_STR_CHARS + 2:
            continue
        try:
            value = json.loads(literal)
        except json.JSONDecodeError:
            continue  # unterminated: the parse of the whole text says so
        is_key = _KEY_END.match(text, match.end()) is not None
        if len(value) > MAX_STR_CHARS + (is_key and value.startswith("$$")):
            raise WireError(f"string longer than {MAX_STR_CHARS} characters")


def _check_depth(text: str) -> None:
    """Maximum bracket nesting outside strings, without recursion (before json.loads recurses)."""
    _check_nesting(_NOT_STRUCTURE.sub("", _STRING.sub("", text)))


def _check_nesting(skeleton: str) -> None:
    """skeleton: the brackets and commas outside strings."""
    if skeleton and max(accumulate(map(_NESTING_STEP.__getitem__, skeleton))) > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")


def _object(pairs: list[tuple[str, Any]]) -> Any:
    """One JSON object, its members already decoded: a tagged value, or a dict."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise WireError(f"duplicate key {duplicate[:40]!r}")
    for key in out:
        if key[:1] == "$":
            if len(out) == 1 and key in _TAG_DECODERS:  # the common case, without another scan
                return _TAG_DECODERS[key](out[key])
            return _dollar_object(out)
    return out


def _dollar_object(out: dict[str, Any]) -> Any:
    """An object with a key starting with "$": a tagged value, or a dict with escaped keys."""
    tag = next((key for key in out if key.startswith("$") and not key.startswith("$$")), None)
    if tag is None:
        return {key[1:] if key.startswith("$$") else key: value for key, value in out.items()}
    if len(out) != 1:
        raise WireError(f"tag {tag[:40]!r} must be the only key of its object")
    decoder = _TAG_DECODERS.get(tag)
    if decoder is None:
        raise WireError(f"unknown tag {tag[:40]!r}")
    return decoder(out[tag])


def _parse_int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_INT_DIGITS:
        raise WireError(f"integer with more than {MAX_INT_DIGITS} digits")
    return int(token)


def _parse_float(token: str) -> float:
    if len(token) > 64 + MAX_INT_DIGITS:
        raise WireError("number literal too long")
    value = float(token)
    if not math.isfinite(value):
        raise WireError(f"float literal {token[:40]} is out of range")
    return value


def _parse_constant(token: str) -> Any:
    raise WireError(f"bare {token} is not allowed; use {{\"$float\": ...}}")


def _decode_float(body: Any) -> float:
    if type(body) is not str or body not in _NONFINITE:
        raise WireError('$float must be "nan", "inf" or "-inf"')
    return _NONFINITE[body]


def _decode_fraction(body: Any) -> Fraction:
    match = _FRACTION.fullmatch(body) if type(body) is str else None
    if match is None:
        raise WireError('$frac must be a string "n/d" with integer n and d >= 1')
    numerator, denominator = _parse_int(match[1]), _parse_int(match[2])
    if math.gcd(numerator, denominator) != 1:
        raise WireError(f"$frac {body[:40]} is not in lowest terms")
    return Fraction(numerator, denominator)


def _decode_tensor(body: Any) -> TensorValue:
    if type(body) is not dict or set(body) != {"dtype", "shape", "data"}:
        raise WireError('$tensor must be {"dtype": ..., "shape": [...], "data": [...]}')
    dtype, shape, data = body["dtype"], body["shape"], body["data"]
    if type(dtype) is not str or dtype not in DTYPES:
        raise WireError(f"unknown tensor dtype {str(dtype)[:40]!r}")
    if type(shape) is not list or any(type(n) is not int or n < 0 for n in shape):
        raise WireError("tensor shape must be a list of non-negative ints")
    _check_shape(shape)
    if type(data) is not list or len(data) != math.prod(shape):
        raise WireError(f"tensor data length does not match shape {shape}")
    family = dtype_family(dtype)
    if family == "float":
        elements = [_float_element(v) for v in data]
    else:
        element_type = int if family == "int" else bool
        if any(type(v) is not element_type for v in data):
            raise WireError(f"{dtype} tensor data must be {element_type.__name__}s")
        _check_int_range(dtype, data)
        elements = data
    return TensorValue(dtype, tuple(shape), tuple(elements))


def _float_element(v: Any) -> float:
    # A {"$float": ...} element was already decoded to a float by the object hook; a dict here is
    # the escaped plain dict {"$$float": ...}, which is not a number (one spelling per value).
    if type(v) is float:
        return v
    raise WireError("float tensor data must be floats (non-finite ones tagged with $float)")


class _SympyState:
    """Per-expression bounds while decoding: nodes so far, and each symbol name's domain."""

    __slots__ = ("nodes", "symbols")

    def __init__(self) -> None:
        self.nodes = 0
        self.symbols: dict[str, tuple[str, ...]] = {}

    def add_symbol(self, name: str, tokens: tuple[str, ...]) -> None:
        known = self.symbols.setdefault(name, tokens)
        if known != tokens:
            raise WireError(f"symbol {name} appears with two sets of assumptions")
        if len(self.symbols) > MAX_SYMBOLS:
            raise WireError(f"sympy expression has more than {MAX_SYMBOLS} symbols")


def _decode_sympy(body: Any) -> Any:
    import sympy

    return _build_sympy(body, sympy, _SympyState())


def _build_symbol(args: list[Any], sympy: Any, state: _SympyState) -> Any:
    if not args:
        raise WireError('a Symbol node is ["Symbol", name, assumption...]')
    name, tokens = args[0], tuple(args[1:])
    _check_name(name)
    if not _canonical_domain(tokens):
        shown = str(list(tokens))[:80]
        raise WireError(f"symbol {name} has assumptions {shown}; expected none, real, integer, a sign "
                        f"or integer and a sign, in that order (signs: {', '.join(SIGNS)})")
    state.add_symbol(name, tokens)
    return sympy.Symbol(name, **dict.fromkeys(tokens, True))


def _canonical_domain(tokens: tuple[Any, ...]) -> bool:
    if tokens in ((), ("real",), ("integer",)):
        return True
    if len(tokens) == 1:
        return tokens[0] in SIGNS
    return len(tokens) == 2 and tokens[0] == "integer" and tokens[1] in SIGNS


def _build_sympy(node: Any, sympy: Any, state: _SympyState) -> Any:
    state.nodes += 1
    if state.nodes > MAX_SYMPY_NODES:
        raise WireError(f"sympy expression has more than {MAX_SYMPY_NODES} nodes")
    if type(node) is not list or not node or type(node[0]) is not str:
        raise WireError('a $sym node must be a list ["Name", ...]')
    name, args = node[0], node[1:]
    if name == "Symbol":
        return _build_symbol(args, sympy, state)
    builder = _SYMPY_BUILDERS.get(name)
    if builder is None:
        raise WireError(_not_allowed(name, repr(name[:40])))
    _check_arity(name, len(args))
    build = builder[1]
    if name in ("Integer", "Rational"):
        if any(type(a) is not int for a in args):
            raise WireError(f"{name} arguments must be JSON integers")
        for a in args:
            _check_int(a)
        if name == "Rational" and (args[1] < 2 or math.gcd(args[0], args[1]) != 1):
            raise WireError("Rational must be in lowest terms with denominator >= 2")
        return build(sympy, *args)
    built = [_build_sympy(arg, sympy, state) for arg in args]
    if name == "Pow":
        _check_exponent(built[1])
    try:
        return build(sympy, *built)
    except Exception as error:  # sympy's own argument checks; nothing else may escape decode
        raise WireError(f"sympy refused to build {name}: {type(error).__name__}") from None


# Nodes are rebuilt exactly as sent, with evaluate=False: decoding does no arithmetic at all, so
# no payload can make it slow (with evaluation, a product of a few hundred square roots of large
# primes makes sympy factor a huge integer for minutes). encode() writes the args of an
# already-evaluated expression, so the round trip gives a structurally identical expression.
_SYMPY_BUILDERS: dict[str, tuple[int | None, Callable[..., Any]]] = {
    "Integer": (1, lambda sympy, n: sympy.Integer(n)),
    "Rational": (2, lambda sympy, p, q: sympy.Rational(p, q)),
    "pi": (0, lambda sympy: sympy.pi),
    "E": (0, lambda sympy: sympy.E),
    "Add": (None, lambda sympy, *args: sympy.Add(*args, evaluate=False)),
    "Mul": (None, lambda sympy, *args: sympy.Mul(*args, evaluate=False)),
    "Pow": (2, lambda sympy, base, exponent: sympy.Pow(base, exponent, evaluate=False)),
}
for _function in FUNCTIONS:
    _SYMPY_BUILDERS[_function] = (1, lambda sympy, x, _f=_function: getattr(sympy, _f)(x, evaluate=False))


_TAG_DECODERS: dict[str, Callable[[Any], Any]] = {
    "$float": _decode_float,
    "$frac": _decode_fraction,
    "$sym": _decode_sympy,
    "$tensor": _decode_tensor,
}
assert set(_TAG_DECODERS) == set(_TAGS)
