"""Text answers as tables: extraction, reading by the key, the issue's math-verify cases, hostile text.

Every row asserts the value and its type, or the refusal and a fragment of its reason.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction as F
from typing import Any

import pytest
import sympy

from exactgrade import (
    AllClose,
    Exact,
    Extraction,
    ParsedAnswer,
    RelTol,
    TensorValue,
    Verdict,
    compare,
    extract_answer,
    grade_text,
    parse_answer,
)

N_POS = sympy.Symbol("n", positive=True)
W_POS = sympy.Symbol("W", positive=True)
X = sympy.Symbol("x")
Y = sympy.Symbol("y")
ROWS_KEY = {
    "rows": [
        {"chip": "chip_a", "critical_intensity": F(250), "min_batch": 261},
        {"chip": "chip_b", "critical_intensity": F(19800, 67), "min_batch": None},
    ]
}

# (id, message, expected text or None, reason fragment when refused)
EXTRACTIONS = [
    ("last-box", r"so \boxed{3}.", "3", ""),
    ("balanced-braces", r"\boxed{\frac{1}{2}}", r"\frac{1}{2}", ""),
    ("escaped-braces-do-not-count", r"\boxed{\{1\}}", r"\{1\}", ""),
    ("same-box-twice", r"\boxed{3} ... so \boxed{ 3 }", "3", ""),
    ("two-different-boxes", r"\boxed{3} or maybe \boxed{4}", None, "2 different boxed answers"),
    ("self-correction-is-two-answers", r"\boxed{4} wait no \boxed{3}", None, "ambiguous"),
    ("fbox", r"\fbox{7}", "7", ""),
    ("only-after-think", "<think>\\boxed{1}</think> final: \\boxed{2}", "2", ""),
    ("think-box-ignored", "<think>\\boxed{1}</think> 2", "2", ""),
    ("json-block", 'text\n```json\n{"a": 1}\n```\n', '{"a": 1}', ""),
    ("last-candidate-decides-kind", '\\boxed{9}\n```json\n{"a": 1}\n```', '{"a": 1}', ""),
    ("box-after-json", '```json\n{"a": 1}\n```\n\\boxed{9}', "9", ""),
    ("box-inside-python-fence-ignored", "```python\nprint('\\boxed{1}')\n```\n\\boxed{2}", "2", ""),
    ("two-different-json", "```json\n[1]\n```\n```json\n[2]\n```", None, "2 different ```json blocks"),
    ("bare-line", r"$\dfrac{9}{7}$", r"\dfrac{9}{7}", ""),
    ("bare-display", r"\[ 42 \]", "42", ""),
    ("prose-without-box", "I think the answer is 3 because\nof the reasons above.", None, "no \\boxed"),
    ("unbalanced-box", r"\boxed{3", None, "unbalanced braces"),
    ("nested-box-is-outer-text", r"\boxed{\boxed{3}}", r"\boxed{3}", ""),
    ("not-a-str", 3, None, "must be a str"),
    ("too-long", "1" * (1 << 20) + "1", None, "longer than"),
]


@pytest.mark.parametrize(
    ("message", "text", "fragment"), [c[1:] for c in EXTRACTIONS], ids=[c[0] for c in EXTRACTIONS]
)
def test_extraction(message: Any, text: str | None, fragment: str) -> None:
    extraction = extract_answer(message)
    assert type(extraction) is Extraction
    assert extraction.text == text
    assert (extraction.reason == "") == (text is not None)
    assert fragment in extraction.reason


def tv(dtype: str, shape: tuple[int, ...], *data: Any) -> TensorValue:
    return TensorValue(dtype, shape, tuple(data))


# (id, text, key, expected value or None, reason fragment when refused). A sympy value is compared
# as a value (the parsed tree is unevaluated, so its shape differs from sympy's canonical one).
READINGS = [
    # numbers are exact decimals
    ("decimal", "0.1", F(1, 3), F(1, 10), ""),
    ("scientific", "1.5e12", 7, 1500000000000, ""),
    ("negative-exponent", "2e-3", F(1), F(1, 500), ""),
    ("e-with-spaces-is-euler", "2e + 3", F(1), 2 * sympy.E + 3, ""),
    ("leading-point", ".4", F(1), F(2, 5), ""),
    ("integral-decimal-is-int", "250.0", 250, 250, ""),
    ("thousands-commas", "7,425,000", 1, 7425000, ""),
    ("thousands-latex", "1{,}000", 1, 1000, ""),
    ("thousands-thin-space", r"1\,000", 1, 1000, ""),
    ("thousands-underscores", "640_000_000_000_000", 1, 640000000000000, ""),  # as the prompts print
    ("underscore-groups-of-three", "1_0000", 1, None, "unexpected '_'"),
    ("decimal-comma-refused", "1,5", 1, None, "comma"),
    ("leading-zero-group-refused", "0,111", 1, None, "comma"),
    ("thousands-negative-space", r"11,\! 111,\! 100", 1, 11111100, ""),
    ("currency-sign-dropped", r"\$16386.20", F(1), F(81931, 5), ""),
    ("unicode-root-covers-digits", "2\u221a10", 1, 2 * sympy.sqrt(10), ""),
    ("two-numbers-refused", "1 000", 1, None, "a number right after a factor"),
    # LaTeX
    ("frac", r"\frac{6}{4}", F(1), F(3, 2), ""),
    ("dfrac-tfrac", r"\dfrac{1}{2} + \tfrac{1}{2}", 1, 1, ""),
    ("frac-digits", r"\frac12", F(1), F(1, 2), ""),
    ("sqrt-perfect", r"\sqrt{9/4}", F(1), F(3, 2), ""),
    ("cube-root-real", r"\sqrt[3]{-8}", 1, -2, ""),
    ("even-root-negative", r"\sqrt{-4}", 1, None, "not a real number"),
    ("power-folds", "2^{10}", 1, 1024, ""),
    ("python-power", "2**10", 1, 1024, ""),
    ("power-right-assoc", "2^3^2", 1, 512, ""),
    ("minus-binds-looser", "-2^2", 1, -4, ""),
    ("cdot-times", r"2 \cdot 3 \times 4", 1, 24, ""),
    ("left-right", r"\left(1+2\right)^2", 1, 9, ""),
    ("log-base-folds", r"\log_2 8", 1, 3, ""),
    ("log-base-braced", r"\log_{10}(1000)", 1, 3, ""),
    ("log-python-base", "log(8, 2)", 1, 3, ""),
    ("log2-plain", "log2(8)", 1, 3, ""),
    ("factorial", "5!", 1, 120, ""),
    ("unicode-math", "\u22122\u00d73", 1, -6, ""),
    ("markdown-bold", "**73**", 1, 73, ""),
    ("label-dropped", "x = 5", 1, 5, ""),
    ("unit-dropped", r"8 \text{ GB}", 1, 8, ""),
    ("unit-with-power", r"3\,\mathrm{m}/\mathrm{s}^2", 1, 3, ""),
    ("mathrm-e-is-euler", r"\mathrm{e}^{2}", F(1), sympy.exp(2), ""),
    ("full-stop", "42.", 1, 42, ""),
    # refused, with reasons
    ("hedge", r"3 \text{ or } 4", 1, None, "text 'or' inside an expression"),
    ("plain-word-unit", "1.75 bits", F(7, 4), None, "unknown name 'bits'"),
    ("equation", "3x - y + 13 = 0", 3 * X - Y + 13, None, "equation"),
    ("inequality", "x < 3", X, None, "inequality"),
    ("pm", r"\pm 2", 1, None, "two values"),
    ("abs", "|x|", 1, None, "absolute values"),
    ("division-then-implicit", "1/2x", sympy.Integer(1) / 2 * X, None, "after a division"),
    ("bare-exponent-then-implicit", "e^2x", sympy.exp(2 * X), None, "exponent without braces"),
    ("bare-function-argument", r"\sin 2x", sympy.sin(2 * X), None, "function argument without parentheses"),
    ("inverse-power-ambiguous", r"\sin^{-1} x", sympy.asin(X), None, "ambiguous"),
    ("unknown-name", "y", 1, None, "unknown name 'y'"),
    ("imaginary-unit", "1 + i", 1, None, "unknown name 'i'"),
    ("percent-not-a-percentage-key", r"50\%", F(1, 2), None, "percent sign"),
    ("division-by-zero", r"\frac{1}{0}", 1, None, "division by zero"),
    ("zero-to-zero", "0^0", 1, None, "0 to a power"),
    ("infinity-inside", r"1 + \infty", 1.0, None, "infinity is read only as a whole answer"),
    ("degrees", r"90^\circ", 1, None, "degrees"),
    ("set", r"\{1, 2\}", 1, None, "a set"),
    # symbols: declared by the key
    (
        "declared-symbol",
        r"\frac{5\sqrt{1230}\sqrt{W}}{9}",
        5 * sympy.sqrt(1230) * sympy.sqrt(W_POS) / 9,
        5 * sympy.sqrt(1230) * sympy.sqrt(W_POS) / 9,
        "",
    ),
    ("implicit-symbols", "2xy", X * Y, 2 * X * Y, ""),
    ("label-is-not-a-declared-symbol", "x = 5", X, None, "equation"),
    # categories, booleans, None
    ("category", "memory", "memory", "memory", ""),
    ("category-text-wrapper", r"\text{compute}", "memory", "compute", ""),
    ("category-quoted", '"compute"', "memory", "compute", ""),
    ("category-case-kept", "Memory", "memory", "Memory", ""),
    ("bool", "True", False, True, ""),
    ("none", "None", 3, None, ""),
    ("number-under-none-key", "261", None, 261, ""),
    # floats
    ("float-key-exact-number", "0.1", 0.1, F(1, 10), ""),
    ("float-key-infinity", r"-\infty", 1.0, -math.inf, ""),
    # structures
    (
        "json-rows",
        '{"rows": [{"chip": "chip_a", "critical_intensity": 250, "min_batch": 261},'
        ' {"chip": "chip_b", "critical_intensity": "\\\\frac{19800}{67}", "min_batch": null}]}',
        ROWS_KEY,
        {
            "rows": [
                {"chip": "chip_a", "critical_intensity": 250, "min_batch": 261},
                {"chip": "chip_b", "critical_intensity": F(19800, 67), "min_batch": None},
            ]
        },
        "",
    ),
    ("json-number-exact", '{"v": 0.1}', {"v": 0.1}, {"v": F(1, 10)}, ""),
    ("json-percent-field", '{"mfu_percent": "45%"}', {"mfu_percent": 45}, {"mfu_percent": 45}, ""),
    ("json-duplicate-key", '{"a": 1, "a": 2}', {"a": 1}, None, "repeats a key"),
    ("json-invalid", '{"a": 1', {"a": 1}, None, "not valid JSON"),
    (
        "json-bad-leaf-path",
        '{"rows": [{"critical_intensity": "2x"}]}',
        ROWS_KEY,
        None,
        "rows[0]['critical_intensity']: unknown name 'x'",
    ),
    ("list-bracketed", r"[1, \frac{1}{2}]", [1, F(1, 2)], [1, F(1, 2)], ""),
    ("list-tuple", "(1, 2)", (1, 2), [1, 2], ""),
    ("list-bare", "1, 2, 3", [1, 2, 3], [1, 2, 3], ""),
    (
        "tensor-float32-rounded",
        "[0.1, 2.5]",
        tv("float32", (2,), 0.0, 0.0),
        tv("float32", (2,), 0.10000000149011612, 2.5),
        "",
    ),
    (
        "tensor-int-nested",
        "[[1, 2], [3, 4]]",
        tv("int64", (2, 2), 0, 0, 0, 0),
        tv("int64", (2, 2), 1, 2, 3, 4),
        "",
    ),
    ("tensor-answer-shape-kept", "[1, 2, 3]", tv("int64", (2,), 0, 0), tv("int64", (3,), 1, 2, 3), ""),
    ("tensor-int-needs-integers", "[1, 2.5]", tv("int64", (2,), 0, 0), None, "must be an integer"),
    ("tensor-uint8-range", "[256]", tv("uint8", (1,), 0), None, "outside the uint8 range"),
    ("tensor-bool", "[true, False]", tv("bool", (2,), True, True), tv("bool", (2,), True, False), ""),
    ("tensor-ragged", "[[1, 2], [3]]", tv("int64", (2, 2), 0, 0, 0, 0), None, "not rectangular"),
    ("tensor-float-irrational", r"[\sqrt{2}]", tv("float32", (1,), 0.0), None, "rational number"),
    (
        "tensor-json",
        "[[1, 2], [3, 4]]",
        tv("float64", (2, 2), 0.0, 0.0, 0.0, 0.0),
        tv("float64", (2, 2), 1.0, 2.0, 3.0, 4.0),
        "",
    ),
    # JSON whose leaves are bare expressions, as small models write it: read as if quoted
    ("bare-leaves", '{"H": log(2)/2, "x": [1/2, sqrt(2)]}', {"H": sympy.log(2), "x": [F(1), sympy.sqrt(3)]},
     {"H": sympy.log(2) / 2, "x": [F(1, 2), sympy.sqrt(2)]}, ""),
    ("bare-word-under-a-str-key", '{"bound": compute, "n": 3}', {"bound": "memory", "n": 1},
     {"bound": "compute", "n": 3}, ""),
    ("bare-literals-stay-literals", '{"a": null, "b": true, "c": 0.5, "d": 2/3}',
     {"a": None, "b": False, "c": F(1), "d": F(1)}, {"a": None, "b": True, "c": F(1, 2), "d": F(2, 3)}, ""),
    ("bare-python-call-refused", '{"H": sympy.log(2)}', {"H": sympy.log(2)}, None, "FULL STOP"),
    ("bare-constructor-refused", '{"H": Fraction(3, 2)}', {"H": F(3, 2)}, None, "Fraction"),
    ("bare-missing-comma-refused", '{"a": 1 "b": 2}', {"a": 1, "b": 2}, None, "not valid JSON"),
    ("bare-unclosed-call-refused", '{"a": log(2, "b": 2}', {"a": 1, "b": 2}, None, "not valid JSON"),
    ("bare-repeated-key-refused", '{"a": 1/2, "a": 1/3}', {"a": F(1)}, None, "not valid JSON"),
]


@pytest.mark.parametrize(
    ("text", "key", "value", "fragment"), [c[1:] for c in READINGS], ids=[c[0] for c in READINGS]
)
def test_reading(text: str, key: Any, value: Any, fragment: str, typed_equal: Any) -> None:
    parsed = parse_answer(text, key)
    assert type(parsed) is ParsedAnswer
    if fragment:
        assert not parsed.ok and parsed.value is None
        assert fragment in parsed.reason
    else:
        assert parsed.ok, parsed.reason
        if isinstance(value, sympy.Expr):
            assert isinstance(parsed.value, sympy.Expr) and compare(value, parsed.value).ok, parsed.value
        else:
            assert typed_equal(parsed.value, value), (parsed.value, value)


# math-verify's reported false passes and fails: (id, key, message, policy, ok, reason fragment, why).
MATH_VERIFY_ISSUES = [
    (
        "mv60-equations",
        3 * X - Y + 13,
        r"\boxed{3x+4y+14=0}",
        Exact(),
        False,
        "equation",
        "math-verify: True (false pass); an equation is not a value here",
    ),
    (
        "mv14-factorials",
        F(1, math.factorial(400)),
        r"\boxed{\frac{1}{402!}}",
        Exact(),
        False,
        "exact values differ",
        "math-verify: True for 1/2004! vs 1/2006! (evalf chop); exact Fractions differ",
    ),
    (
        "mv14-factorial-beyond-cap",
        F(1),
        r"\boxed{\frac{1}{2006!}}",
        Exact(),
        False,
        "factorials are read up to",
        "2006! has 5700+ digits: refused by the integer cap, never rounded",
    ),
    (
        "mv14-powers",
        F(1, 2**99),
        r"\boxed{\frac{1}{2^{98}}}",
        Exact(),
        False,
        "exact values differ",
        "math-verify: True (false pass)",
    ),
    (
        "mv41-sqrt",
        4,
        r"\boxed{4\sqrt(2)}",
        Exact(),
        False,
        "exact values differ",
        "math-verify: True (false pass)",
    ),
    (
        "mv64-positive-n",
        sympy.sqrt(1 / N_POS),
        r"\boxed{\frac{1}{\sqrt{n}}}",
        Exact(),
        True,
        "",
        "math-verify: False (false fail); equal as functions of positive n",
    ),
    (
        "mv69-exp",
        sympy.exp(16) - 1,
        r"\boxed{e^{16}-1}",
        Exact(),
        True,
        "",
        "math-verify: False vs -1+exp(16)",
    ),
    (
        "mv69-dfrac-pi",
        sympy.pi / 2,
        r"\boxed{\dfrac{\pi}{2}}",
        Exact(),
        True,
        "",
        "math-verify: False vs pi/2",
    ),
    ("mv70-unboxed", F(9, 7), r"\dfrac{9}{7}", Exact(), True, "", "math-verify: parses to nothing"),
    ("mv76-bold", 73, r"\boxed{**73**}", Exact(), True, "", "math-verify: parsed as 234"),
    (
        "float-key-reltol",
        0.1,
        r"\boxed{\frac{1}{10}}",
        RelTol(1e-9),
        True,
        "",
        "an exact answer vs a float key",
    ),
    ("float-key-reltol-off", 0.1, r"\boxed{0.1000001}", RelTol(1e-9), False, "relative difference", ""),
    (
        "allclose-tensor",
        tv("float32", (2,), 0.10000000149011612, 2.5),
        r"\boxed{[0.1, 2.5]}",
        AllClose(),
        True,
        "",
        "rounded to float32 like the key",
    ),
    ("int-key-needs-integer", 3, r"\boxed{\frac{7}{2}}", RelTol(1e-9), False, "exact values differ", ""),
    ("two-boxes", 3, r"\boxed{3} \boxed{4}", Exact(), False, "no answer", ""),
    ("symbol-swapped", 2 * X + Y, r"\boxed{2y + x}", Exact(), False, "", ""),
]


@pytest.mark.parametrize(
    ("key", "message", "policy", "ok", "fragment", "why"),
    [c[1:] for c in MATH_VERIFY_ISSUES],
    ids=[c[0] for c in MATH_VERIFY_ISSUES],
)
def test_math_verify_issue_cases(
    key: Any, message: str, policy: Any, ok: bool, fragment: str, why: str
) -> None:
    verdict = grade_text(message, key, policy)
    assert type(verdict) is Verdict
    assert verdict.ok is ok, verdict.reason
    assert fragment in verdict.reason


DEEP = "(" * 1000 + "1" + ")" * 1000
# (id, message, reason fragment): each is refused, within HOSTILE_SECONDS.
HOSTILE = [
    ("tower-of-exponents", r"\boxed{10^{10^{10^{10}}}}", "exponent larger than"),
    ("right-assoc-tower", r"\boxed{9^9^9^9}", "exponent larger than"),
    ("huge-scientific", r"\boxed{1e999999999}", "more than 1000 digits"),
    ("long-integer", "\\boxed{" + "9" * 5000 + "}", "more than 1000 digits"),
    ("deep-parentheses", "\\boxed{" + DEEP + "}", "nested deeper than"),
    ("deep-braces", "\\boxed{" + "{" * 500 + "1" + "}" * 500 + "}", "nested deeper than"),
    ("deep-sqrt", "\\boxed{" + "\\sqrt{" * 300 + "2" + "}" * 300 + "}", "nested deeper than"),
    ("many-terms", "\\boxed{" + "+".join(["1"] * 5000) + "}", "more than"),
    ("big-root", r"\boxed{\sqrt[99999]{2}}", "integer n from 2 to 10000"),
    ("big-factorial", r"\boxed{1000!}", "factorials are read up to"),
    ("factorial-of-fraction", r"\boxed{(3/2)!}", "non-negative integer"),
    ("def-macro", r"\boxed{\def\x{1}\x}", "\\def is not read"),
    ("newcommand", r"\boxed{\newcommand{\a}{2}\a}", "\\newcommand is not read"),
    ("input-file", r"\boxed{\input{/etc/passwd}}", "\\input is not read"),
    ("catcode", r"\boxed{\catcode94=12 2^3}", "\\catcode is not read"),
    ("cyrillic-e", "\\boxed{2\u0435}", "CYRILLIC SMALL LETTER IE"),
    ("fullwidth-digit", "\\boxed{\uff11}", "FULLWIDTH DIGIT ONE"),
    ("math-bold-digit", "\\boxed{\U0001d7cf}", "MATHEMATICAL BOLD DIGIT ONE"),
    ("zero-width-space", "\\boxed{1\u200b0}", "ZERO WIDTH SPACE"),
    ("rtl-override", "\\boxed{\u202e01}", "RIGHT-TO-LEFT OVERRIDE"),
    ("nested-boxes", r"\boxed{\boxed{3}}", "\\boxed is not read"),
    ("mib-message", "\\boxed{" + "1+" * (1 << 19) + "1}", "longer than"),
    ("mib-of-open-boxes", "\\boxed{" * ((1 << 20) // 8), "unbalanced braces"),
    ("mib-of-prose", "word " * ((1 << 20) // 5), "no \\boxed"),
    ("many-equal-boxes", "\\boxed{2}" * 100_000, "more than 1000 answers"),
    ("many-json-blocks", "```json\n1\n```\n" * 2000, "more than 1000 answers"),
    ("many-different-boxes", " ".join(f"\\boxed{{{i}}}" for i in range(1000)), "different boxed answers"),
    ("json-deep", "```json\n" + "[" * 100_000 + "]" * 100_000 + "\n```", "nested deeper than"),
    ("json-long-number", '```json\n{"v": ' + "7" * 2000 + "}\n```", "more than 1000 digits"),
    ("json-huge-exponent", '```json\n{"v": 1e99999999}\n```', "more than 1000 digits"),
]
HOSTILE_SECONDS = 10.0  # each case takes well under a second on a loaded 2-core machine


@pytest.mark.parametrize(("message", "fragment"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_text_is_refused_in_bounded_time(message: str, fragment: str) -> None:
    key: Any = {"v": F(1)} if "json" in message[:8] else F(1)
    start = time.monotonic()
    verdict = grade_text(message, key, Exact())
    elapsed = time.monotonic() - start
    assert type(verdict) is Verdict and not verdict.ok
    assert fragment in verdict.reason, verdict.reason
    assert elapsed < HOSTILE_SECONDS


def test_grade_text_never_raises_on_bad_arguments() -> None:
    assert grade_text(None, 1).reason == "no answer: the message must be a str, got NoneType"  # type: ignore[arg-type]
    assert "not a policy" in grade_text(r"\boxed{1}", 1, "exact").reason  # type: ignore[arg-type]
    assert parse_answer(b"1", 1).reason == "the answer must be a str, got bytes"  # type: ignore[arg-type]


def test_a_grade_works_from_worker_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    key = sympy.exp(16) - 1
    with ThreadPoolExecutor(8) as pool:
        verdicts = list(
            pool.map(lambda _: grade_text(r"\boxed{e^{16}-1}", key, Exact(), time_limit=30.0), range(16))
        )
    assert all(v.ok for v in verdicts), [v.reason for v in verdicts]
