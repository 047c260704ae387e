"""The comparator: compare(expected, actual, policy) -> Verdict, never an exception.

An ordered chain of small comparers (modelled on PyTorch's torch/testing/_comparison.py). Each
takes (expected, actual, context, path) and either declines (returns None) because the pair is
not its kind, or decides with a Verdict. The order is the rule book:

  1. unsupported types fail; None, bool and str compare exactly and only with their own kind
     (bool before any number: True never equals 1);
  2. containers recurse (lists element-wise, dicts key-wise; the first difference wins);
  3. tensors: dtype family, then shape, then values;
  4. non-finite floats equal only the same non-finite category;
  4b. a sympy value with free symbols (either side): Exact() only, the answer's symbols among the
     reference's (same name, same assumptions), then equality as functions on the reference's
     domain (exactgrade._symbolic: exact for rational functions, else random points; its
     docstring states the false-pass bound);
  5. an int reference requires an exact integer answer (an integral Fraction or sympy value is
     an ordinary exact value);
  6. exact vs exact: exact equality under Exact, tolerance rule otherwise (decided exactly);
  7. exact reference vs float answer: refused under Exact, tolerance rule otherwise;
  8. float reference: exact equality under Exact, tolerance rule otherwise.

The reference (expected) comes first: the rules are deliberately not symmetric. Reasons name the
path (rows[2]['grad']), what differed, and the policy or tolerance used.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exactgrade import _real, _symbolic
from exactgrade.policy import AllClose, Exact, Policy, RelTol
from exactgrade.values import TensorValue, dtype_family
from exactgrade.verdict import PathPart, Verdict, render_path

Path = tuple[PathPart, ...]

DEFAULT_TIME_LIMIT = 5.0  # seconds for all irrational work of one compare call; "could not decide" fails
OUT_OF_TIME = "could not decide in time"


@dataclass(frozen=True, slots=True)
class _Context:
    policy: Policy
    deadline: float  # time.monotonic() by which every irrational question must be settled
    reference: Any = None  # the whole reference: its symbols are the allowed ones in every leaf
    symbols: list[dict[str, _symbolic.Domain]] = field(default_factory=list)  # computed once, on demand

    def reference_symbols(self) -> dict[str, _symbolic.Domain]:
        """Every symbol of the whole reference, by name (ValueError for one the wire cannot carry)."""
        if not self.symbols:
            self.symbols.append(_symbolic.symbols_of_value(self.reference))
        return self.symbols[0]


Comparer = Callable[[Any, Any, _Context, Path], "Verdict | None"]


def compare(expected: Any, actual: Any, policy: Policy | None = None, *,
            time_limit: float = DEFAULT_TIME_LIMIT) -> Verdict:
    """Grade actual against the reference expected under policy (None means Exact()).

    Never raises: a bug or an unsupported value becomes a failed Verdict whose reason says so.
    time_limit bounds the irrational work of the whole call, across all elements: interval
    refinement (the deadline is checked at every node evaluated, so it is overrun by at most one
    interval operation) and the rare sympy equality proof (in a worker process of the call's
    own, killed at the deadline; starting a worker when none is idle is not counted), and the
    decision for values with free symbols (exact rational-function arithmetic and evaluation at
    random points, checked at every polynomial product and every node evaluated). Rational and
    tensor work is linear in the size of the values and is not cut short.
    """
    if policy is None:
        policy = Exact()
    if not isinstance(policy, Exact | RelTol | AllClose):
        return Verdict(False, f"value: not a policy: {type(policy).__name__}")
    try:
        context = _Context(policy, time.monotonic() + time_limit, expected)
        return _compare(expected, actual, context, ())
    except RecursionError:
        return Verdict(False, "value: internal error: values nested too deeply to compare")
    except Exception as error:  # a comparer bug must not crash the grader
        return Verdict(False, f"value: internal error: {type(error).__name__}: {str(error)[:200]}")


def _compare(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict:
    for comparer in _COMPARERS:
        verdict = comparer(expected, actual, context, path)
        if verdict is not None:
            return verdict
    return _fail(path, f"cannot compare {_kind(expected)} with {_kind(actual)}")


# ---------------------------------------------------------------------------------------------
# Value kinds and messages

def _kind(x: Any) -> str:
    """A short name for the kind of x, as the value model names it."""
    if x is None:
        return "None"
    t = type(x)
    if t in (bool, str, int, float, list, dict, tuple):
        return t.__name__
    if t is Fraction:
        return "Fraction"
    if t is TensorValue:
        return "tensor"
    if _real.is_sympy(x):
        return "sympy expression"
    return f"unsupported type {t.__name__}"


def _is_exact(x: Any) -> bool:
    t = type(x)
    return t is int or t is Fraction or _real.is_sympy(x)


def _show(x: Any, limit: int = 80) -> str:
    """A short, safe rendering of a value for a reason (never the whole of a big value)."""
    try:
        if type(x) is Fraction:
            text = f"{x.numerator}/{x.denominator}"
        elif type(x) is int:
            digits = int(x.bit_length() * 0.30103)
            text = str(x) if x.bit_length() < 200 else f"<int with about {digits} digits>"
        elif type(x) is TensorValue:
            text = f"tensor(dtype={x.dtype}, shape={x.shape})"
        elif type(x) in (list, tuple):
            text = f"{type(x).__name__} of length {len(x)}"
        elif type(x) is dict:
            text = f"dict with keys {sorted(map(repr, x))}"
        elif _real.is_sympy(x):
            text = _show_sympy(x, [limit])
        else:
            text = repr(x)
    except Exception:
        text = f"<{type(x).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show_sympy(node: Any, room: list[int]) -> str:
    """Text for a sympy expression from its tree alone.

    Never str(), count_ops() or any other sympy method on an answer: those evaluate, and an
    unevaluated decoded tree can make them run for minutes. room[0] is the remaining length.
    """
    if room[0] <= 0:
        return "..."
    if node.is_Rational:
        p, q = int(node.p), int(node.q)
        text = _show(p) if q == 1 else f"{_show(p)}/{_show(q)}"
    elif node.is_Symbol:
        text = str(node.name)[:40]
    elif node.is_Atom:
        text = {"Pi": "pi", "Exp1": "E"}.get(type(node).__name__, type(node).__name__)
    elif node.is_Add:
        text = " + ".join(_show_sympy(arg, room) for arg in node.args)
    elif node.is_Mul:
        text = "*".join(_grouped(arg, room, arg.is_Add) for arg in node.args)
    elif node.is_Pow:
        base, exponent = (_grouped(arg, room, not _bare_in_power(arg)) for arg in node.args)
        text = f"{base}**{exponent}"
    else:
        text = f"{type(node).__name__}({', '.join(_show_sympy(arg, room) for arg in node.args)})"
    room[0] -= len(text)
    return text


def _bare_in_power(node: Any) -> bool:
    """pi, E and non-negative integers need no parentheses as a base or exponent; all else does."""
    if node.is_Rational:
        return node.is_Integer and node.p >= 0
    return node.is_Atom


def _grouped(node: Any, room: list[int], parenthesize: bool) -> str:
    text = _show_sympy(node, room)
    return f"({text})" if parenthesize else text


def _show_keys(mapping: dict) -> str:
    keys = sorted(mapping)
    shown = ", ".join(_show(key, 30) for key in keys[:8])
    return shown + (f", ... ({len(keys)} keys)" if len(keys) > 8 else "")


def _fail(path: Path, message: str) -> Verdict:
    return Verdict(False, f"{render_path(path)}: {message}", path)


def _pass(path: Path) -> Verdict:
    return Verdict(True, "", path)


def _mismatch(expected: Any, actual: Any, path: Path, why: str = "") -> Verdict:
    message = f"expected {_kind(expected)} {_show(expected)}, got {_kind(actual)} {_show(actual)}"
    return _fail(path, f"{message}: {why}" if why else message)


def _tolerances(policy: Policy) -> tuple[float, float]:
    """(rtol, atol) of a policy; Exact is (0, 0)."""
    if isinstance(policy, RelTol):
        return policy.rtol, 0.0
    if isinstance(policy, AllClose):
        return policy.rtol, policy.atol
    return 0.0, 0.0


# ---------------------------------------------------------------------------------------------
# Comparers, in chain order

def _compare_unsupported(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    for side, value in (("reference", expected), ("answer", actual)):
        if _kind(value).startswith("unsupported"):
            return _fail(path, f"the {side} has an {_kind(value)}")
    return None


def _categorical(kind: type | None) -> Comparer:
    """A comparer for None, bool or str: equal only to the same kind and value."""
    rule = "None only equals None" if kind is None else f"a {kind.__name__} only equals a {kind.__name__}"

    def same_kind(x: Any) -> bool:
        return x is None if kind is None else type(x) is kind

    def comparer(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
        if not (same_kind(expected) or same_kind(actual)):
            return None
        if not (same_kind(expected) and same_kind(actual)):
            return _mismatch(expected, actual, path, rule)
        return _pass(path) if expected == actual else _mismatch(expected, actual, path)

    return comparer


def _compare_sequences(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    def is_sequence(x: Any) -> bool:
        return type(x) is list or type(x) is tuple

    if not (is_sequence(expected) or is_sequence(actual)):
        return None
    if not (is_sequence(expected) and is_sequence(actual)):
        return _mismatch(expected, actual, path)
    if len(expected) != len(actual):
        return _fail(path, f"expected a list of length {len(expected)}, got length {len(actual)}")
    for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
        verdict = _compare(e, a, context, (*path, index))
        if not verdict.ok:
            return verdict
    return _pass(path)


def _compare_dicts(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    if type(expected) is not dict and type(actual) is not dict:
        return None
    if type(expected) is not dict or type(actual) is not dict:
        return _mismatch(expected, actual, path)
    for key in (*expected, *actual):
        if type(key) is not str:
            return _fail(path, f"dict keys must be str, found {_kind(key)} {_show(key)}")
    missing = [key for key in expected if key not in actual]
    if missing:
        return _fail(path, f"missing key {_show(missing[0], 40)} (answer keys: {_show_keys(actual)})")
    extra = [key for key in actual if key not in expected]
    if extra:
        return _fail(path, f"unexpected key {_show(extra[0], 40)} (expected keys: {_show_keys(expected)})")
    for key in expected:
        verdict = _compare(expected[key], actual[key], context, (*path, key))
        if not verdict.ok:
            return verdict
    return _pass(path)


def _compare_tensors(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    if type(expected) is not TensorValue and type(actual) is not TensorValue:
        return None
    if type(expected) is not TensorValue or type(actual) is not TensorValue:
        tensor, other = (expected, actual) if type(expected) is TensorValue else (actual, expected)
        same = type(other) in (int, float) and tensor.data == (other,)
        why = "a tensor only equals a tensor" + (_SAME_VALUES if same else "")
        return _mismatch(expected, actual, path, why)
    family, answer_family = dtype_family(expected.dtype), dtype_family(actual.dtype)
    if family != answer_family:
        same = expected.shape == actual.shape and expected.data == actual.data
        return _fail(path, f"dtype family differs: expected {expected.dtype} ({family}), "
                           f"got {actual.dtype} ({answer_family})" + (_SAME_VALUES if same else ""))
    if expected.shape != actual.shape:
        return _fail(path, f"shape differs: expected {expected.shape}, got {actual.shape} (no broadcasting)")
    if family == "float":
        rtol, atol = _tolerances(context.policy)
        return _compare_float_elements(expected, actual, rtol, atol, context.policy, path)
    mismatched = [i for i, (e, a) in enumerate(zip(expected.data, actual.data, strict=True)) if e != a]
    if not mismatched:
        return _pass(path)
    first, count = mismatched[0], _count(len(mismatched), len(expected.data))
    return _fail(path, f"{expected.dtype} tensors are not equal: {count}; "
                       f"first at index {_index(first, expected.shape)}: expected {expected.data[first]!r}, "
                       f"got {actual.data[first]!r}")


_SAME_VALUES = " (the values themselves are equal: only the kind is wrong)"
"""Said where only the kind fails a right number, so a reader of the reasons tells a misread form
from a wrong value (a small model's `.item()` on a loss that should stay a 0-d tensor)."""


def _compare_nonfinite(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    def nonfinite(x: Any) -> bool:
        return type(x) is float and not math.isfinite(x)

    if not (nonfinite(expected) or nonfinite(actual)):
        return None
    if _same_float_category(expected, actual):
        return _pass(path)
    return _mismatch(expected, actual, path, "a non-finite float only equals the same non-finite float")


def _compare_symbolic(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    try:
        here = _symbolic.symbols(expected) if _real.is_sympy(expected) else {}
        answer = _symbolic.symbols(actual) if _real.is_sympy(actual) else {}
        if not here and not answer:
            return None
        reference = context.reference_symbols()
    except ValueError as error:
        return _mismatch(expected, actual, path, str(error))
    if not isinstance(context.policy, Exact):
        return _mismatch(expected, actual, path, f"a value with free symbols is graded under Exact() only "
                                                  f"(policy {context.policy.describe()})")
    if not _is_exact(expected) or not _is_exact(actual):
        return _mismatch(expected, actual, path, "an expression in symbols only equals an exact value")
    wrong_symbol = _symbolic.check_symbols(reference, answer)
    if wrong_symbol is not None:
        return _mismatch(expected, actual, path, wrong_symbol)
    try:
        decision = _symbolic.decide(expected, actual, reference, context.deadline)
    except _real.OutOfTime as error:
        return _mismatch(expected, actual, path, f"{OUT_OF_TIME}: {error}")
    except _real.Undecidable as error:
        return _mismatch(expected, actual, path, f"could not decide equality: {error}")
    return _pass(path) if decision.equal else _mismatch(expected, actual, path, decision.reason)


def _compare_integer_reference(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    # The rule is about the int kind (counts, indices, sizes). A Fraction or sympy reference that
    # happens to be integral is an exact value like any other.
    if type(expected) is not int or _is_exact(actual):
        return None
    return _mismatch(expected, actual, path, "an integer reference needs an exact integer answer "
                                              f"(under {context.policy.describe()})")


def _compare_exact(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    # Under a tolerance an exact answer is graded like a float one (a Fraction built from float
    # literals carries float noise too); an int reference keeps its own rule: exact equality. A
    # zero tolerance is equality, which only the prover can decide for equal irrationals.
    if not (_is_exact(expected) and _is_exact(actual)):
        return None
    if type(expected) is not int and _tolerances(context.policy) != (0.0, 0.0):
        return _tolerance_verdict(expected, actual, context, path)
    return _equality_verdict(expected, actual, context, path, "exact values differ")


def _compare_exact_to_float(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    if not (_is_exact(expected) and type(actual) is float):
        return None
    if isinstance(context.policy, Exact):
        return _mismatch(expected, actual, path, "a float was given where an exact value is required "
                                                  "(policy Exact())")
    return _tolerance_verdict(expected, actual, context, path)


def _compare_float_reference(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict | None:
    if type(expected) is not float or not (type(actual) is float or _is_exact(actual)):
        return None
    if isinstance(context.policy, Exact):
        return _equality_verdict(Fraction(expected), actual, context, path, "values differ (policy Exact())")
    return _tolerance_verdict(expected, actual, context, path)


def _equality_verdict(expected: Any, actual: Any, context: _Context, path: Path, differ: str) -> Verdict:
    try:
        equal = _real.equal(expected, actual, context.deadline)
    except _real.OutOfTime as error:
        return _mismatch(expected, actual, path, f"{OUT_OF_TIME}: {error}")
    except _real.Undecidable as error:
        return _mismatch(expected, actual, path, f"could not decide equality: {error}")
    return _pass(path) if equal else _mismatch(expected, actual, path, differ)


_COMPARERS: tuple[Comparer, ...] = (
    _compare_unsupported,
    _categorical(None),
    _categorical(bool),
    _categorical(str),
    _compare_sequences,
    _compare_dicts,
    _compare_tensors,
    _compare_nonfinite,
    _compare_symbolic,
    _compare_integer_reference,
    _compare_exact,
    _compare_exact_to_float,
    _compare_float_reference,
)


# ---------------------------------------------------------------------------------------------
# Tolerance rule: |a - e| <= atol + rtol * |e|, decided exactly

def _tolerance_verdict(expected: Any, actual: Any, context: _Context, path: Path) -> Verdict:
    policy = context.policy
    rtol, atol = _tolerances(policy)
    try:
        close = _real.within(expected, actual, rtol, atol, context.deadline)
    except _real.OutOfTime as error:
        return _mismatch(expected, actual, path, f"{OUT_OF_TIME}: {error} (policy {policy.describe()})")
    except _real.Undecidable as error:
        return _mismatch(expected, actual, path, f"{error} (policy {policy.describe()})")
    if close:
        return _pass(path)
    e, a = _real.approx(expected), _real.approx(actual)
    difference = abs(a - e)
    if isinstance(policy, RelTol):
        relative = difference / abs(e) if e else math.inf
        detail = f"relative difference {relative:.3g} > rtol {rtol!r}"
    else:
        detail = f"absolute difference {difference:.3g} > atol + rtol*|expected| = {atol + rtol * abs(e):.3g}"
    return _mismatch(expected, actual, path, f"not close: {detail} (policy {policy.describe()})")


def _same_float_category(expected: Any, actual: Any) -> bool:
    """For non-finite floats: nan equals nan, inf equals the same-signed inf, nothing else."""
    if type(expected) is not float or type(actual) is not float:
        return False
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    return expected == actual


def _element_close(e: float, a: float, rtol: float, atol: float) -> bool:
    """One tensor element under |a - e| <= atol + rtol * |e|; exact near the boundary."""
    if not (math.isfinite(e) and math.isfinite(a)):
        return _same_float_category(e, a)
    difference, allowed = abs(a - e), atol + rtol * abs(e)
    # Float rounding moves both sides by far less than 1e-9 relative; only a near-tie needs
    # the exact Fraction test (and overflow to inf lands here too).
    if difference < allowed * (1 - 1e-9):
        return True
    if difference > allowed * (1 + 1e-9) + 1e-300:
        return False
    return abs(Fraction(a) - Fraction(e)) <= Fraction(atol) + Fraction(rtol) * abs(Fraction(e))


def _compare_float_elements(expected: TensorValue, actual: TensorValue, rtol: float, atol: float,
                            policy: Policy, path: Path) -> Verdict:
    mismatched = 0
    worst_index, worst_difference = -1, -1.0
    for index, (e, a) in enumerate(zip(expected.data, actual.data, strict=True)):
        if _element_close(e, a, rtol, atol):
            continue
        mismatched += 1
        difference = abs(a - e)
        difference = math.inf if math.isnan(difference) else difference
        if difference > worst_difference:
            worst_index, worst_difference = index, difference
    if not mismatched:
        return _pass(path)
    e, a = expected.data[worst_index], actual.data[worst_index]
    word = "equal" if rtol == 0 and atol == 0 else "close"
    return _fail(path, f"tensors are not {word} under {policy.describe()}: "
                       f"{_count(mismatched, len(expected.data))}; greatest absolute difference "
                       f"{worst_difference:.3g} at index {_index(worst_index, expected.shape)} "
                       f"(expected {e!r}, got {a!r}; up to {atol + rtol * abs(e):.3g} allowed)")


def _count(mismatched: int, total: int) -> str:
    return f"{mismatched} / {total} elements differ ({100 * mismatched / total:.1f}%)"


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major flat index -> multi-index."""
    index = []
    for size in reversed(shape):
        flat, position = divmod(flat, size)
        index.append(position)
    return tuple(reversed(index))
