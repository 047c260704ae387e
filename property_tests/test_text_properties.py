"""Properties of text answers: one exact value written many ways passes; a small
change to it fails.

A value is drawn, then rendered as text in several forms: plain and LaTeX, reduced and unreduced,
reassociated (split into a sum or a product), factored and expanded, as a terminating decimal or in
scientific notation. Each rendering, boxed in a message, must pass grade_text against the engine's
key for the value. Mutations (a dropped factor, a flipped sign, a changed exponent or digit, a
swapped symbol) must fail, with the reason compare() gives. Every label holds by construction.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import sympy
from hypothesis import assume, given
from hypothesis import strategies as st

from exactgrade import Exact, RelTol, grade_text, parse_answer
from exactgrade import strategies as egst
from exactgrade.values import TensorValue

X, Y = sympy.symbols("x y")  # declared by the key, no assumptions: graded over the reals
NON_SQUARES = [n for n in range(2, 60) if int(n**0.5) ** 2 != n]
SMALL = st.integers(1, 40)


def boxed(text: str) -> str:
    return f"The answer is \\boxed{{{text}}}."


def passes(text: str, key: object, policy: object = None) -> None:
    verdict = grade_text(boxed(text), key, policy or Exact(), time_limit=60.0)
    assert verdict.ok, (text, verdict.reason)


def fails(text: str, key: object) -> None:
    verdict = grade_text(boxed(text), key, Exact(), time_limit=60.0)
    assert not verdict.ok, text
    assert verdict.reason.startswith("value") and "could not decide" not in verdict.reason, verdict.reason


def signed(q: Fraction, latex: bool = True) -> str:
    """q as text, in parentheses when negative (so it can follow an operator)."""
    if q.denominator == 1:
        text = str(q.numerator)
    elif latex:
        text = f"\\frac{{{abs(q.numerator)}}}{{{q.denominator}}}"
        text = f"-{text}" if q < 0 else text
    else:
        text = f"{q.numerator}/{q.denominator}"
    return f"({text})" if q < 0 else text


def terminating(q: Fraction) -> bool:
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def decimal_text(q: Fraction) -> str:
    """The exact decimal expansion of a terminating fraction."""
    digits = 0
    while (q * 10**digits).denominator != 1:
        digits += 1
    return format(Decimal(q.numerator) / Decimal(q.denominator), f".{digits}f")


@st.composite
def rational_renderings(draw: st.DrawFn, q: Fraction) -> str:
    """One of many texts for the rational q."""
    n, d = q.numerator, q.denominator
    k = draw(st.integers(2, 9))
    a = draw(egst.fractions(max_digits=3))
    forms = [
        f"{n}/{d}",
        f"\\frac{{{n}}}{{{d}}}",
        f"\\dfrac{{{k * n}}}{{{k * d}}}",  # unreduced
        f"-\\tfrac{{{-n}}}{{{d}}}",
        f"{signed(a)} + {signed(q - a)}",  # reassociated as a sum
        f"{signed(q - a, latex=False)} + {signed(a, latex=False)}",
        f"{k} \\cdot {signed(q / k)}",  # factored
        f"\\left({signed(q / k)}\\right) \\times {k}",
        f"{k}\\left({signed(q / k - a)} + {signed(a)}\\right)",  # factored around a sum
        f"({n})*({d})**(-1)",
    ]
    if terminating(q):
        text = decimal_text(q)
        forms += [text, f"{text}e0", f"{decimal_text(q * 1000)}e-3"]
    if d == 1 and abs(n) >= 1000:
        forms.append(f"{n:,}".replace(",", "{,}"))
    return draw(st.sampled_from(forms))


@given(st.data(), egst.fractions(max_digits=12))
def test_a_rational_written_any_way_passes(data: st.DataObject, q: Fraction) -> None:
    key = q.numerator if q.denominator == 1 else q
    passes(data.draw(rational_renderings(q)), key)


@given(st.data(), egst.fractions(max_digits=12))
def test_a_rational_answer_to_a_float_key_passes_under_reltol(data: st.DataObject, q: Fraction) -> None:
    assume(q != 0)
    passes(data.draw(rational_renderings(q)), float(q), RelTol(1e-9))


@given(st.data(), egst.fractions(max_digits=12), st.integers(2, 9))
def test_a_dropped_or_changed_factor_fails(data: st.DataObject, q: Fraction, k: int) -> None:
    assume(q != 0)
    key = q * k
    wrong = data.draw(
        st.sampled_from(
            [
                signed(q),  # the factor k dropped
                f"{k + 1} \\cdot {signed(q)}",  # a changed digit
                f"-{k} \\cdot {signed(q)}",  # a flipped sign
                f"{k}^{{2}} \\cdot {signed(q)}",  # a changed exponent
            ]
        )
    )
    fails(wrong, key.numerator if key.denominator == 1 else key)


@given(egst.fractions(max_digits=12), st.integers(0, 11))
def test_a_changed_digit_of_a_decimal_fails(q: Fraction, position: int) -> None:
    assume(terminating(q))
    text = decimal_text(q)
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    i = digits[position % len(digits)]
    wrong = text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]
    fails(wrong, q.numerator if q.denominator == 1 else q)


@given(st.data(), SMALL, st.sampled_from(NON_SQUARES), egst.fractions(max_digits=2))
def test_an_irrational_written_any_way_passes(data: st.DataObject, m: int, s: int, r: Fraction) -> None:
    key = m * sympy.sqrt(s) + sympy.Rational(r.numerator, r.denominator)
    text = data.draw(
        st.sampled_from(
            [
                f"{m}\\sqrt{{{s}}} + {signed(r)}",
                f"\\sqrt{{{m * m * s}}} + {signed(r)}",  # the square moved under the root
                f"{signed(r)} + \\sqrt{{{s}}} \\cdot {m}",
                f"{m}*{s}^(1/2) + {signed(r, latex=False)}",
                f"\\frac{{{m * s}}}{{\\sqrt{{{s}}}}} + {signed(r)}",
                f"{signed(r)} + {m}\u221a{s}",
            ]
        )
    )
    passes(text, key)


@given(st.data(), SMALL, SMALL, st.integers(1, 6))
def test_constants_and_functions_written_any_way_pass(data: st.DataObject, a: int, b: int, k: int) -> None:
    key, text = data.draw(
        st.sampled_from(
            [
                (sympy.Rational(a, b) * sympy.pi, f"\\frac{{{a}\\pi}}{{{b}}}"),
                (sympy.Rational(a, b) * sympy.pi, f"\\frac{{{a}}}{{{b}}}\\pi"),
                (sympy.Rational(a, b) * sympy.pi, f"{a}*pi/{b}"),
                (sympy.exp(k) - a, f"e^{{{k}}} - {a}"),
                (sympy.exp(k) - a, f"-{a} + \\exp({k})"),
                (sympy.exp(k) - a, f"\\mathrm{{e}}^{{{k}}} - {a}"),
                (k * sympy.log(2), f"{k}\\ln 2"),
                (k * sympy.log(2), f"\\ln\\left(2^{{{k}}}\\right)"),
                (sympy.log(a + 1) / sympy.log(2), f"\\log_2({a + 1})"),
            ]
        )
    )
    passes(text, key)


@given(st.data(), SMALL, SMALL, st.integers(1, 6))
def test_a_mutated_irrational_fails(data: st.DataObject, a: int, b: int, k: int) -> None:
    key, wrong = data.draw(
        st.sampled_from(
            [
                (sympy.Rational(a, b) * sympy.pi, f"\\frac{{{a}\\pi}}{{{b + 1}}}"),  # changed digit
                (sympy.Rational(a, b) * sympy.pi, f"-\\frac{{{a}}}{{{b}}}\\pi"),  # flipped sign
                (sympy.Rational(a, b) * sympy.pi, f"\\frac{{{a}}}{{{b}}}\\pi^{{2}}"),  # changed exponent
                (sympy.exp(k) - a, f"e^{{{k + 1}}} - {a}"),  # changed exponent
                (sympy.exp(k) - a, f"e^{{{k}}}"),  # dropped term
                (k * sympy.log(2), f"{k}\\ln 3"),  # changed digit
                (a * sympy.sqrt(2), f"\\sqrt{{{a * a * 2 + 1}}}"),  # changed digit
            ]
        )
    )
    fails(wrong, key)


@given(st.data(), st.integers(-9, 9), st.integers(-9, 9))
def test_a_polynomial_factored_or_expanded_passes(data: st.DataObject, a: int, b: int) -> None:
    key = sympy.expand((X + a) * (X + b))
    text = data.draw(
        st.sampled_from(
            [
                f"(x + {signed(Fraction(a))})(x + {signed(Fraction(b))})",
                f"(x + {signed(Fraction(b))}) \\cdot (x + {signed(Fraction(a))})",
                f"x^2 + {signed(Fraction(a + b))}x + {signed(Fraction(a * b))}",
                f"x^{{2}} + {signed(Fraction(a * b))} + x \\cdot {signed(Fraction(a + b))}",
            ]
        )
    )
    passes(text, key)


@given(st.data(), st.integers(-9, 9), st.integers(-9, 9).filter(bool))
def test_a_mutated_polynomial_fails(data: st.DataObject, a: int, b: int) -> None:
    key = sympy.expand((X + a) * (X + b))
    wrong = data.draw(
        st.sampled_from(
            [
                f"(x + {signed(Fraction(a))})(x - {signed(Fraction(b))})",  # flipped sign
                f"(x + {signed(Fraction(a))})(x + {signed(Fraction(b))})^{{2}}",  # changed exponent
                f"(x + {signed(Fraction(a))})",  # dropped factor
            ]
        )
    )
    fails(wrong, key)


@given(st.integers(1, 9), st.integers(1, 9))
def test_a_swapped_symbol_fails(a: int, b: int) -> None:
    assume(a != b)
    fails(f"{a}y + {b}x", a * X + b * Y)
    passes(f"{b}y + {a}x", a * X + b * Y)


@given(egst.fractions(max_digits=6), egst.fractions(max_digits=6))
def test_json_rows_read_every_leaf_by_its_key(p: Fraction, q: Fraction) -> None:
    key = {
        "rows": [{"bound": "memory", "time": p, "count": 3}, {"bound": "compute", "time": q, "count": None}]
    }
    text = (
        f'{{"rows": [{{"bound": "memory", "time": "{signed(p, latex=False)}", "count": 3}}, '
        f'{{"bound": "compute", "time": "{signed(q, latex=False)}", "count": null}}]}}'
    )
    passes(text, key)
    assert parse_answer(text.replace('"memory"', '"Memory"'), key).value["rows"][0]["bound"] == "Memory"


@given(st.data(), egst.fractions(max_digits=6), SMALL, st.integers(2, 9))
def test_bare_json_leaves_read_as_quoted_ones(data: st.DataObject, p: Fraction, n: int, k: int) -> None:
    """A leaf left unquoted ({"H": 3*log(2)/2}, as small models write JSON) passes where the quoted
    leaf passes; the same leaf without its factor k fails with compare()'s reason."""
    key = {"rows": [{"H": k * sympy.log(2) * p, "n": n}]}
    q = signed(p, latex=False)
    right = data.draw(st.sampled_from([f"{k}*{q}*log(2)", f"log(2**{k})*{q}", f"{q}*{k}*log(2)"]))
    for leaf in (right, f'"{right}"'):
        passes(f'{{"rows": [{{"H": {leaf}, "n": {n}}}]}}', key)
    assume(p != 0)
    verdict = grade_text(f'{{"rows": [{{"H": {q}*log(2), "n": {n}}}]}}', key, Exact(), time_limit=60.0)
    assert not verdict.ok and verdict.reason.startswith("rows[0]['H']: expected sympy expression"), verdict


PIECES = [
    "1",
    "23",
    ".5",
    "e",
    "x",
    "y",
    "pi",
    "\\pi",
    "+",
    "-",
    "*",
    "/",
    "^",
    "**",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    "!",
    "=",
    "%",
    "\\frac",
    "\\sqrt",
    "\\log_",
    "\\ln",
    "\\sin",
    "\\cdot",
    "\\left(",
    "\\right)",
    "\\text{m}",
    "\\boxed{",
    "```json\n",
    "\n```",
    '"',
    ":",
    " ",
    "\u2212",
    "\u221a",
    "1e5",
    "null",
    "true",
]
KEYS = st.sampled_from(
    [
        1,
        Fraction(1, 3),
        0.5,
        "memory",
        True,
        None,
        X + Y,
        [1, 2],
        {"a": 1},
        TensorValue("int64", (2,), (1, 2)),
    ]
)


@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(PIECES), max_size=60).map("".join)), KEYS)
def test_any_text_is_read_or_refused_with_a_reason(text: str, key: object) -> None:
    parsed = parse_answer(text, key)
    assert parsed.ok == (parsed.reason == "")
    assert parsed.ok or (parsed.value is None and "\n" not in parsed.reason)
    verdict = grade_text(text, key, Exact(), time_limit=60.0)
    assert verdict.ok or verdict.reason
