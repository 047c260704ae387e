"""The wire format: exact round trips, canonical text, and strict rejection with WireError."""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest
import sympy
import torch

from exactgrade import TensorValue, wire

P, M = sympy.symbols("p m", positive=True, integer=True)
Y = sympy.Symbol("y", real=True)

# (id, value, canonical text)
ROUND_TRIPS = [
    ("none", None, "null"),
    ("true", True, "true"),
    ("int", 2, "2"),
    ("float-is-not-int", 2.0, "2.0"),
    ("negative-zero", -0.0, "-0.0"),
    ("float-repr-round-trips", 0.1 + 0.2, "0.30000000000000004"),
    ("tiny-float", 5e-324, "5e-324"),
    ("nan", math.nan, '{"$float":"nan"}'),
    ("minus-inf", -math.inf, '{"$float":"-inf"}'),
    ("str", "compute", '"compute"'),
    ("non-ascii-str", "é∑", '"\\u00e9\\u2211"'),
    ("fraction", F(-7, 4), '{"$frac":"-7/4"}'),
    ("integral-fraction-stays-fraction", F(2), '{"$frac":"2/1"}'),
    ("big-int", 10**999, str(10**999)),
    ("list", [1, [2.5, "x"]], '[1,[2.5,"x"]]'),
    ("dict-sorted-keys", {"b": 1, "a": 2}, '{"a":2,"b":1}'),
    ("dollar-keys-escaped", {"$frac": 1, "$$": 2}, '{"$$$":2,"$$frac":1}'),
    ("sympy-log", 7 * sympy.log(2) / 4, '{"$sym":["Mul",["Rational",7,4],["log",["Integer",2]]]}'),
    ("sympy-sqrt", sympy.sqrt(2) / 2,
     '{"$sym":["Mul",["Rational",1,2],["Pow",["Integer",2],["Rational",1,2]]]}'),
    ("sympy-integer", sympy.Integer(3), '{"$sym":["Integer",3]}'),
    ("sympy-constants", sympy.pi + sympy.E, '{"$sym":["Add",["E"],["pi"]]}'),
    ("sympy-exp", sympy.exp(sympy.Rational(1, 3)), '{"$sym":["exp",["Rational",1,3]]}'),
    ("sympy-unevaluated", sympy.Mul(2, 3, evaluate=False), '{"$sym":["Mul",["Integer",2],["Integer",3]]}'),
    ("sympy-symbols", (P - 1) / (M + P - 1),
     '{"$sym":["Mul",["Pow",["Add",["Integer",-1],["Symbol","m","integer","positive"],'
     '["Symbol","p","integer","positive"]],["Integer",-1]],["Add",["Integer",-1],'
     '["Symbol","p","integer","positive"]]]}'),
    ("sympy-symbol-no-assumptions", sympy.Symbol("x"), '{"$sym":["Symbol","x"]}'),
    ("sympy-symbol-real", sympy.Symbol("x_1", real=True), '{"$sym":["Symbol","x_1","real"]}'),
    ("sympy-symbol-integer", sympy.Symbol("k", integer=True), '{"$sym":["Symbol","k","integer"]}'),
    ("sympy-symbol-nonpositive", sympy.Symbol("t", nonpositive=True),
     '{"$sym":["Symbol","t","nonpositive"]}'),
    ("sympy-symbol-nonnegative-integer", sympy.Symbol("n", integer=True, nonnegative=True),
     '{"$sym":["Symbol","n","integer","nonnegative"]}'),
    ("sympy-trig", sympy.tan(Y) ** 2 + 1,
     '{"$sym":["Add",["Integer",1],["Pow",["tan",["Symbol","y","real"]],["Integer",2]]]}'),
    ("sympy-reciprocal-trig", sympy.sec(sympy.Rational(1, 3)), '{"$sym":["sec",["Rational",1,3]]}'),
    ("sympy-inverse-hyperbolic", sympy.acosh(P), '{"$sym":["acosh",["Symbol","p","integer","positive"]]}'),
    ("tensor", TensorValue("float32", (2, 2), (1.0, math.nan, -0.0, math.inf)),
     '{"$tensor":{"data":[1.0,{"$float":"nan"},-0.0,{"$float":"inf"}],"dtype":"float32","shape":[2,2]}}'),
    ("int-tensor", TensorValue("int8", (3,), (-128, 0, 127)),
     '{"$tensor":{"data":[-128,0,127],"dtype":"int8","shape":[3]}}'),
    ("bool-tensor-0d", TensorValue("bool", (), (True,)),
     '{"$tensor":{"data":[true],"dtype":"bool","shape":[]}}'),
    ("empty-tensor", TensorValue("float64", (0, 3), ()),
     '{"$tensor":{"data":[],"dtype":"float64","shape":[0,3]}}'),
    ("longest-dollar-key", {"$" + "k" * (wire.MAX_STR_CHARS - 1): 1},
     '{"$$' + "k" * (wire.MAX_STR_CHARS - 1) + '":1}'),
    ("tensor-most-dims", TensorValue("bool", (1,) * wire.MAX_DIMS, (True,)),
     '{"$tensor":{"data":[true],"dtype":"bool","shape":[' + ",".join(["1"] * wire.MAX_DIMS) + "]}}"),
    ("answer", {"rows": [{"loss": F(1, 3), "grad": [0.5]}]},
     '{"rows":[{"grad":[0.5],"loss":{"$frac":"1/3"}}]}'),
]


@pytest.mark.parametrize(("value", "text"), [c[1:] for c in ROUND_TRIPS], ids=[c[0] for c in ROUND_TRIPS])
def test_round_trip_and_canonical_text(value: object, text: str, typed_equal) -> None:
    assert wire.encode(value) == text
    decoded = wire.decode(text)
    assert typed_equal(decoded, value), decoded
    assert wire.encode(decoded) == text


def test_tuples_encode_as_lists(typed_equal) -> None:
    assert wire.encode((1, (2, 3))) == "[1,[2,3]]"
    assert typed_equal(wire.decode(wire.encode((1, (2, 3)))), [1, [2, 3]])


def test_encoding_is_independent_of_dict_insertion_order() -> None:
    assert wire.encode({"x": 1, "y": [F(1, 2)]}) == wire.encode({"y": [F(1, 2)], "x": 1})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.uint8, torch.bool])
def test_torch_tensors_encode_as_tensor_values(dtype: torch.dtype) -> None:
    tensor = torch.tensor([[0, 1, 2], [3, 4, 5]]).to(dtype)
    decoded = wire.decode(wire.encode(tensor))
    assert type(decoded) is TensorValue
    assert decoded.dtype == str(dtype).removeprefix("torch.") and decoded.shape == (2, 3)
    assert torch.equal(decoded.to_torch(), tensor)


def test_torch_parameter_and_grad_tensor_encode() -> None:
    parameter = torch.nn.Parameter(torch.ones(2))
    assert wire.decode(wire.encode(parameter)) == TensorValue("float32", (2,), (1.0, 1.0))
    assert wire.decode(wire.encode(parameter * 2)) == TensorValue("float32", (2,), (2.0, 2.0))


class SneakyTensor(torch.Tensor):
    def tolist(self):  # a subclass could lie; encode must not ask it
        return [42.0]


class SneakyInt(int):
    pass


class SneakyFloat(float):
    def __repr__(self) -> str:
        return "1.0"


class SneakyStr(str):
    pass


class SneakyDict(dict):
    pass


class SneakyAdd(sympy.Add):
    pass


# (id, value, fragment of the WireError)
ENCODE_REJECTS = [
    ("int-subclass", SneakyInt(3), "cannot encode a value of type"),
    ("float-subclass", SneakyFloat(2.0), "SneakyFloat"),
    ("str-subclass", SneakyStr("x"), "SneakyStr"),
    ("dict-subclass", SneakyDict(a=1), "SneakyDict"),
    ("tensor-subclass", torch.ones(1).as_subclass(SneakyTensor), "SneakyTensor"),
    ("complex-tensor", torch.ones(1, dtype=torch.complex64), "cannot encode torch tensor"),
    ("set", {1}, "set"),
    ("bytes", b"x", "bytes"),
    ("complex", 1j, "complex"),
    ("object", object(), "object"),
    ("sympy-float", sympy.Float(1.5), "sympy node Float is not allowed"),
    ("sympy-dummy", sympy.Dummy("x") + 1, "sympy node Dummy is not allowed"),
    ("sympy-symbol-zero", sympy.Symbol("x", zero=True), "symbol x has assumptions the wire cannot carry"),
    ("sympy-symbol-prime", sympy.Symbol("q", prime=True), "symbol q has assumptions the wire cannot carry"),
    ("sympy-symbol-complex-nonzero", sympy.Symbol("z", nonzero=True), "cannot carry"),
    ("sympy-symbol-noncommutative", sympy.Symbol("a", commutative=False), "cannot carry"),
    ("sympy-symbol-name-not-identifier", sympy.Symbol("x y"), "must be an identifier"),
    ("sympy-symbol-name-too-long", sympy.Symbol("x" * 33), "at most 32 characters"),
    ("sympy-symbol-two-domains", sympy.Add(sympy.Symbol("x"), sympy.Symbol("x", real=True)),
     "symbol x appears with two sets of assumptions"),
    ("sympy-too-many-symbols", sympy.Add(*sympy.symbols("s0:17")), "more than 16 symbols"),
    ("sympy-abs", sympy.Abs(sympy.Symbol("x")), "sympy node Abs is not allowed: a non-analytic function"),
    ("sympy-floor", sympy.floor(sympy.Symbol("x")), "sympy node floor is not allowed: a non-analytic"),
    ("sympy-sign", sympy.sign(sympy.Symbol("x")), "sympy node sign is not allowed: a non-analytic"),
    ("sympy-piecewise", sympy.Piecewise((1, sympy.Symbol("x") > 0), (0, True)),
     "sympy node Piecewise is not allowed: a non-analytic"),
    ("sympy-unlisted-function", sympy.gamma(sympy.Symbol("x")),
     "sympy node gamma is not allowed in the wire"),
    ("sympy-imaginary", sympy.I, "ImaginaryUnit"),
    ("sympy-subclass", SneakyAdd(sympy.pi, 1), "SneakyAdd"),
    ("non-str-key", {1: 2}, "dict keys must be str"),
    ("huge-int", 10**1000, "more than 1000 digits"),
    ("huge-fraction", F(1, 10**1000), "more than 1000 digits"),
    ("long-str", "x" * (wire.MAX_STR_CHARS + 1), "string longer than"),
    ("int8-out-of-range", TensorValue("int8", (1,), (128,)), "out of range"),
    # decode refuses these, so encode must too (or the value would not round-trip)
    ("sympy-huge-root", sympy.Pow(2, sympy.Rational(1, 20001)), "exponent 1/20001 is larger than 10000"),
    ("sympy-huge-power", sympy.pi**20000, "exponent 20000 is larger than 10000"),
    ("tensor-too-many-dims", TensorValue("bool", (1,) * 65, (True,)), "at most 64 dimensions"),
    ("sympy-two-argument-log", sympy.log(2, 3, evaluate=False), "sympy node log takes 1 arguments, got 2"),
]


@pytest.mark.parametrize(("value", "fragment"), [c[1:] for c in ENCODE_REJECTS],
                         ids=[c[0] for c in ENCODE_REJECTS])
def test_encode_rejects(value: object, fragment: str) -> None:
    with pytest.raises(wire.WireError) as error:
        wire.encode(value)
    assert fragment in str(error.value)


def test_encode_rejects_cycles() -> None:
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(wire.WireError, match="nested deeper"):
        wire.encode(cycle)


def _sym(tree: object) -> str:
    return json.dumps({"$sym": tree})


def _tensor(dtype: object, shape: object, data: object) -> str:
    return json.dumps({"$tensor": {"dtype": dtype, "shape": shape, "data": data}})


PRIMES = list(sympy.primerange(2**255, 2**255 + 20_000))[:50]

# (id, payload, fragment of the WireError)
DECODE_REJECTS = [
    ("oversized", "[" + "1," * (1 << 19) + "1]", "larger than 1048576 bytes"),
    ("deep", "[" * 65 + "]" * 65, "nested deeper than 64 levels"),
    ("deep-objects", '{"a":' * 65 + "1" + "}" * 65, "nested deeper than 64 levels"),
    ("long-int", "1" * 1001, "more than 1000 digits"),
    ("long-negative-int", "-" + "1" * 1001, "more than 1000 digits"),
    ("bare-nan", "NaN", "bare NaN is not allowed"),
    ("bare-infinity", "[-Infinity]", "bare -Infinity is not allowed"),
    ("float-overflow", "1e400", "out of range"),
    ("not-json", "{'a': 1}", "not JSON"),
    ("trailing-garbage", "1 2", "not JSON"),
    ("empty", "", "not JSON"),
    ("unknown-tag", '{"$pickle": "x"}', "unknown tag '$pickle'"),
    ("tag-with-extra-key", '{"$frac": "1/2", "a": 1}', "must be the only key"),
    ("duplicate-key", '{"a": 1, "a": 2}', "duplicate key 'a'"),
    ("duplicate-tag", '{"$frac": "1/2", "$frac": "1/3"}', "duplicate key"),
    ("zero-denominator", '{"$frac": "1/0"}', '"n/d"'),
    ("negative-denominator", '{"$frac": "1/-2"}', '"n/d"'),
    ("unreduced-fraction", '{"$frac": "2/4"}', "not in lowest terms"),
    ("fraction-not-string", '{"$frac": [1, 2]}', '"n/d"'),
    ("fraction-float-parts", '{"$frac": "1.5/2"}', '"n/d"'),
    ("fraction-huge", json.dumps({"$frac": "1/" + "1" * 1001}), "more than 1000 digits"),
    ("float-tag-value", '{"$float": "NaN"}', '"nan", "inf" or "-inf"'),
    ("tensor-length", _tensor("float32", [2, 2], [1.0, 2.0, 3.0]), "does not match shape [2, 2]"),
    ("tensor-int-in-float", _tensor("float32", [2], [1.0, 2]), "float tensor data must be floats"),
    ("tensor-bool-in-int", _tensor("int64", [1], [True]), "int64 tensor data must be ints"),
    ("tensor-int-in-bool", _tensor("bool", [1], [1]), "bool tensor data must be bools"),
    ("tensor-uint8-range", _tensor("uint8", [1], [256]), "out of range"),
    ("tensor-dtype", _tensor("complex64", [1], [1.0]), "unknown tensor dtype 'complex64'"),
    ("tensor-shape-negative", _tensor("float32", [-1], []), "non-negative ints"),
    ("tensor-shape-float", _tensor("float32", [1.0], [1.0]), "non-negative ints"),
    ("tensor-nested-data", _tensor("float32", [1], [[1.0]]), "float tensor data must be floats"),
    ("tensor-missing-key", json.dumps({"$tensor": {"dtype": "float32", "data": []}}), '"dtype": ...'),
    ("sympy-symbol-unsorted-assumptions", _sym(["Symbol", "x", "positive", "integer"]),
     "symbol x has assumptions ['positive', 'integer']; expected"),
    ("sympy-symbol-real-and-sign", _sym(["Symbol", "x", "positive", "real"]), "expected none, real"),
    ("sympy-symbol-integer-real", _sym(["Symbol", "x", "integer", "real"]), "expected none, real"),
    ("sympy-symbol-repeated-assumption", _sym(["Symbol", "x", "integer", "integer"]), "expected none"),
    ("sympy-symbol-unknown-assumption", _sym(["Symbol", "x", "prime"]), "expected none, real"),
    ("sympy-symbol-assumption-not-string", _sym(["Symbol", "x", True]), "expected none, real"),
    ("sympy-symbol-two-signs", _sym(["Symbol", "x", "negative", "positive"]), "expected none, real"),
    ("sympy-symbol-no-name", _sym(["Symbol"]), '["Symbol", name, assumption...]'),
    ("sympy-symbol-name-not-string", _sym(["Symbol", 1]), "must be an identifier"),
    ("sympy-symbol-name-code", _sym(["Symbol", "__import__('os')"]), "must be an identifier"),
    ("sympy-symbol-name-underscore", _sym(["Symbol", "_x"]), "must be an identifier"),
    ("sympy-symbol-name-too-long", _sym(["Symbol", "x" * 33]), "at most 32 characters"),
    ("sympy-symbol-two-domains", _sym(["Add", ["Symbol", "x"], ["Symbol", "x", "real"]]),
     "symbol x appears with two sets of assumptions"),
    ("sympy-too-many-symbols", _sym(["Add"] + [["Symbol", f"s{i}"] for i in range(17)]),
     "more than 16 symbols"),
    ("sympy-abs", _sym(["Abs", ["Symbol", "x"]]), "sympy node 'Abs' is not allowed: a non-analytic function"),
    ("sympy-piecewise", _sym(["Piecewise", ["Symbol", "x"]]), "'Piecewise' is not allowed: a non-analytic"),
    ("sympy-function-arity", _sym(["sin", ["Integer", 1], ["Integer", 2]]), "sin takes 1 arguments, got 2"),
    ("sympy-function-no-argument", _sym(["tan"]), "tan takes 1 arguments, got 0"),
    # one spelling per value: an escaped "$$float" is a plain dict, never a float, wherever it is
    ("tensor-escaped-float-tag", _tensor("float32", [1], [{"$$float": "nan"}]),
     "float tensor data must be floats"),
    ("tensor-escaped-float-tag-inf", _tensor("float64", [2], [1.0, {"$$float": "inf"}]),
     "float tensor data must be floats"),
    ("tensor-fraction-in-float", _tensor("float32", [1], [{"$frac": "1/2"}]),
     "float tensor data must be floats"),
    ("tensor-escaped-frac-in-int", _tensor("int64", [1], [{"$$frac": "1/1"}]),
     "int64 tensor data must be ints"),
    ("tensor-tagged-body", json.dumps({"$tensor": {"$$dtype": "float32", "shape": [0], "data": []}}),
     '"dtype": ...'),
    ("tensor-body-is-a-tag", json.dumps({"$tensor": {"$float": "nan"}}), '"dtype": ...'),
    ("tensor-dtype-is-a-tag", json.dumps({"$tensor": {"dtype": {"$sym": ["pi"]}, "shape": [0], "data": []}}),
     "unknown tensor dtype"),
    ("tensor-shape-has-a-tag", _tensor("bool", [{"$frac": "1/1"}], [True]), "non-negative ints"),
    ("frac-body-is-escaped-dict", json.dumps({"$frac": {"$$frac": "1/2"}}), '"n/d"'),
    ("float-body-is-a-tag", json.dumps({"$float": {"$float": "nan"}}), '"nan", "inf" or "-inf"'),
    ("sympy-node-is-a-tag", json.dumps({"$sym": {"$sym": ["pi"]}}), "a $sym node must be a list"),
    ("sympy-argument-is-a-tag", _sym(["Add", {"$sym": ["pi"]}, ["E"]]), "a $sym node must be a list"),
    ("sympy-argument-is-escaped-dict", _sym(["Add", {"$$sym": ["pi"]}, ["E"]]), "a $sym node must be a list"),
    ("sympy-integer-is-a-tag", _sym(["Integer", {"$frac": "2/1"}]), "must be JSON integers"),
    ("sympy-symbol-name-is-a-tag", _sym(["Symbol", {"$$x": 1}]), "must be an identifier"),
    ("sympy-float", _sym(["Float", "1.5"]), "sympy node 'Float' is not allowed"),
    ("sympy-function-call", _sym(["__import__", "os"]), "is not allowed"),
    ("sympy-string-payload", _sym("log(2)"), 'a $sym node must be a list'),
    ("sympy-arity", _sym(["Pow", ["Integer", 2]]), "takes 2 arguments, got 1"),
    ("sympy-integer-as-string", _sym(["Integer", "2"]), "must be JSON integers"),
    ("sympy-unreduced-rational", _sym(["Rational", 2, 4]), "lowest terms"),
    ("sympy-rational-denominator-1", _sym(["Rational", 2, 1]), "lowest terms"),
    ("sympy-huge-integer", _sym(["Integer", 10**1000]), "more than 1000 digits"),
    ("sympy-huge-exponent", _sym(["Pow", ["Integer", 10], ["Integer", 10**6]]), "larger than 10000"),
    ("sympy-huge-root", _sym(["Pow", ["Integer", 10], ["Rational", 1, 10**6]]), "larger than 10000"),
    ("sympy-one-term-add", _sym(["Add", ["Integer", 1]]), "at least two arguments"),
    ("sympy-too-many-nodes", _sym(["Add"] + [["pi"]] * 1001), "more than 1000 nodes"),
    # One unterminated string of escaped quotes: a depth pre-scan that retries a string match from
    # every quote is quadratic here (about an hour for this megabyte).
    ("unterminated-escaped-quotes", '"' + '\\"' * ((1 << 19) - 1), "Unterminated string"),
    ("tensor-too-many-dims", _tensor("bool", [1] * 65, [True]), "at most 64 dimensions"),
    # math.prod of a thousand 1000-digit dimensions (then 0) would take seconds
    ("tensor-huge-dims-then-zero", _tensor("bool", [10**999] * 1000 + [0], []), "at most 64 dimensions"),
    ("tensor-dim-beyond-int64", _tensor("bool", [0, 2**63], []), "each below 2**63"),
    ("sympy-huge-exponent-message-is-short", _sym(["Pow", ["Integer", 2], ["Integer", 10**999]]),
     "larger than 10000"),
    ("not-text", 3, "payload must be str"),
    ("invalid-utf8", b"\xff\xfe", "not valid UTF-8"),
    # string lengths are checked on the text: escapes shrink a literal, and only a "$$" key
    # (escaped from "$") may be one longer than the limit
    ("long-string-among-values", json.dumps([1, "x" * (wire.MAX_STR_CHARS + 1), 2]), "string longer than"),
    ("long-key", json.dumps({"k" * (wire.MAX_STR_CHARS + 1): 1}), "string longer than"),
    ("long-dollar-dollar-value", json.dumps(["$$" + "k" * (wire.MAX_STR_CHARS - 1)]), "string longer than"),
    ("long-escaped-dollar-key", json.dumps({"$$" + "k" * wire.MAX_STR_CHARS: 1}), "string longer than"),
    ("unicode-escaped-tag", '{"\\u0024pickle": 1}', "unknown tag '$pickle'"),
    ("tag-inside-tensor-data", _tensor("float32", [1], [{"$frac": "1/2"}]),
     "float tensor data must be floats"),
    ("tag-as-sympy-node", _sym({"$sym": ["pi"]}), 'a $sym node must be a list'),
]


@pytest.mark.parametrize(("payload", "fragment"), [c[1:] for c in DECODE_REJECTS],
                         ids=[c[0] for c in DECODE_REJECTS])
def test_decode_rejects(payload: str, fragment: str) -> None:
    with pytest.raises(wire.WireError) as error:
        wire.decode(payload)
    message = str(error.value)
    assert fragment in message
    assert "\n" not in message and len(message) < 300


@pytest.mark.parametrize(("text", "value"), [
    ('{"$$float":"nan"}', {"$float": "nan"}),
    ('[{"$$float":"nan"}]', [{"$float": "nan"}]),
    ('{"a":{"$$tensor":{"data":[true],"dtype":"bool","shape":[]}}}',
     {"a": {"$tensor": {"dtype": "bool", "shape": [], "data": [True]}}}),
    ('{"$$sym":["pi"]}', {"$sym": ["pi"]}),
], ids=["top-level", "in-a-list", "tensor-lookalike", "sym-lookalike"])
def test_an_escaped_tag_is_a_plain_dict_outside_tagged_bodies(text: str, value: object, typed_equal) -> None:
    """`$$tag` is the escape of a plain key; it decodes as that dict, and only there
    (inside a tagged body it is refused: see DECODE_REJECTS)."""
    assert typed_equal(wire.decode(text), value)
    assert wire.encode(value) == text


def test_escapes_make_a_long_literal_short_enough() -> None:
    text = json.dumps(["\u00e9" * wire.MAX_STR_CHARS])  # 6 characters of text for each one decoded
    assert len(text) > 5 * wire.MAX_STR_CHARS and wire.decode(text) == ["\u00e9" * wire.MAX_STR_CHARS]


def test_the_value_count_is_capped_when_max_bytes_allows_more(monkeypatch: pytest.MonkeyPatch) -> None:
    cap = 1000
    monkeypatch.setattr(wire, "MAX_ELEMENTS", cap)  # the count is exact: a small cap tests it as well
    over = ("[" + "0," * cap + "0]", "[" + "[]," * cap + "[]]", '{"a":[' + "{}," * (cap - 2) + "{}]}")
    for payload in over:
        with pytest.raises(wire.WireError, match=f"more than {cap} elements"):
            wire.decode(payload)
    at_most = ("[" + "0," * (cap - 2) + "0]", '{"a":[' + "{}," * (cap - 3) + "{}]}",
               '[[], {}, "a,b", [' + "1," * (cap - 7) + "1]]")
    for payload in at_most:
        assert wire.decode(payload) == json.loads(payload)


# The worst shapes for decode (benchmarks/bench_decode.py times a megabyte of each; here an
# eighth): each decodes to exactly what json.loads gives, or, with one tag appended, that plus the
# tagged value.
def _filled_with(item: str) -> str:
    return "[" + ",".join([item] * ((wire.MAX_BYTES // 8) // (len(item) + 1))) + "]"


WORST_SHAPES = [
    ("62-deep-nested-empty-lists", "[" * 61 + "]" * 61),
    ("empty-dicts", "{}"),
    ("one-key-dicts", '{"a":0}'),
    ("empty-strings", '""'),
    ("escaped-dollar-keys", '{"$$a":1}'),
]


@pytest.mark.parametrize("item", [shape[1] for shape in WORST_SHAPES],
                         ids=[shape[0] for shape in WORST_SHAPES])
def test_worst_shapes_decode_exactly(item: str) -> None:
    text = _filled_with(item)
    expected = json.loads(text.replace('"$$', '"$'))
    assert wire.decode(text) == expected
    tagged = text[:-1] + ',{"$frac":"1/3"}]'
    assert wire.decode(tagged) == [*expected, F(1, 3)]


def test_max_bytes_is_adjustable() -> None:
    assert wire.decode("[1, 2]", max_bytes=6) == [1, 2]
    with pytest.raises(wire.WireError, match="larger than 5 bytes"):
        wire.decode("[1, 2]", max_bytes=5)


def test_decode_does_no_sympy_arithmetic() -> None:
    # With sympy's evaluation this product of roots of large primes makes sympy factor a
    # 12,800-bit integer (minutes); decoded as sent, it is just a tree.
    payload = _sym(["Mul"] + [["Pow", ["Integer", p], ["Rational", 1, 2]] for p in PRIMES])
    value = wire.decode(payload)
    assert type(value) is sympy.Mul and len(value.args) == len(PRIMES)
    assert wire.encode(value) == payload.replace(" ", "")


def test_decoded_sympy_is_rebuilt_as_sent() -> None:
    value = wire.decode(_sym(["log", ["Integer", -2]]))  # sympy would rewrite this as log(2) + I*pi
    assert type(value) is sympy.log and value.args == (sympy.Integer(-2),)


def test_wire_source_names_no_unsafe_function() -> None:
    tree = ast.parse(Path(wire.__file__).read_text())
    bare_names, all_names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            bare_names.add(node.id)
        elif isinstance(node, ast.Attribute):
            all_names.add(node.attr)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            all_names.update(alias.name for alias in node.names)
            all_names.add(getattr(node, "module", None) or "")
    all_names |= bare_names
    assert bare_names.isdisjoint({"eval", "exec", "compile", "__import__"})
    assert all_names.isdisjoint({"pickle", "marshal", "sympify", "parse_expr", "literal_eval", "S"})


def test_wire_and_values_work_as_a_standalone_package(tmp_path: Path) -> None:
    package = tmp_path / "shipped"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("wire.py", "values.py"):
        (package / name).write_text((Path(wire.__file__).parent / name).read_text())
    script = (
        "import sys\n"
        "sys.modules['exactgrade'] = None  # importing exactgrade now fails\n"
        "from fractions import Fraction\n"
        "from shipped import wire\n"
        "value = {'rows': [Fraction(1, 3), 2.0, {'$x': None}]}\n"
        "text = wire.encode(value)\n"
        "assert wire.decode(text) == value, text\n"
        "assert 'sympy' not in sys.modules and 'torch' not in sys.modules\n"
        "print(text)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '{"rows":[{"$frac":"1/3"},2.0,{"$$x":null}]}'


@pytest.mark.parametrize("leaf", [1, F(1, 2), TensorValue("float32", (1,), (math.nan,)), sympy.sqrt(2) / 2])
def test_encode_refuses_what_decode_would_refuse_for_depth(leaf: object, typed_equal) -> None:
    value: object = leaf
    depth = 0
    while True:  # the deepest nesting of this leaf that still encodes
        try:
            wire.encode([value])
        except wire.WireError as error:
            assert "nested deeper than 64 levels" in str(error)
            break
        value, depth = [value], depth + 1
    assert depth >= 58
    assert typed_equal(wire.decode(wire.encode(value)), value)
