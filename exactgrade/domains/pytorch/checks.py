"""The pytorch domain's own verify checks (on top of the generic ones in exactgrade.verify).

check(task) returns one line per problem: the key has the declared structure (rows of real or
integer tensors and Python numbers, with the dtypes and shapes the prompt promises, or exact sympy
expressions in the declared symbols where the prompt promises one), is finite and non-empty, is
not an input passed through, the reference reruns cleanly (no exception, no warning, same output),
and an independent recomputation without torch agrees with the key under the task's policy, with
room to spare (HEADROOM; a symbolic key is decided exactly by compare). The exact wire round trip
(dtype and shape included) is one of verify's generic checks, run for every domain.

A key over HEADROOM, an empty, non-finite or passed-through output and a symbolic answer that came
out constant are ``Degenerate`` draws (generation redraws them); an independent value outside the
tolerance, a broken promise of the prompt, a reference that raises, warns or changes its answer
are defects, on which generation fails closed (exactgrade.family). One disagreement is told apart:
when the reference re-run on float64 inputs agrees with the independent value, the reference's
logic is right and float32 rounding alone took the key outside the tolerance (a cancellation, a
near tie that float32 flips): the draw is degenerate, not the reference wrong.
"""

from __future__ import annotations

import gc
import math
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath

from exactgrade._real import is_sympy
from exactgrade.compare import compare
from exactgrade.domains.pytorch.common import PROFILE, ExprSpec, ScalarSpec, TensorSpec, require_torch
from exactgrade.domains.pytorch.exact import DIGITS, ExactTensor, to_fraction
from exactgrade.family import Degenerate
from exactgrade.policy import AllClose
from exactgrade.task import Task, run_program
from exactgrade.values import TensorValue, dtype_family, typed_equal
from exactgrade.verdict import render_path

# A key may use at most this fraction of the tolerance (|key - exact| <= HEADROOM * (atol + rtol*|exact|)):
# a correct answer computed another way (float64, another kernel) has its own error, which must fit too.
HEADROOM = Fraction(1, 2)

Path = tuple[str | int, ...]


def check(task: Task) -> list[str]:
    """Every problem with one task's key; an empty list means it passed."""
    problems = _structure(task.expected)
    if problems:
        return problems  # the remaining checks walk the rows
    problems += _schema(task.expected, task.meta["answer"])
    problems += _finite_and_non_empty(task.expected)
    problems += _not_an_input(task.expected, task.inputs)
    problems += _clean_rerun(task)
    problems += independent_check(task).problems
    return problems


def _leaves(expected: Mapping[str, Any]) -> Iterator[tuple[Path, Any]]:
    for i, row in enumerate(expected["rows"]):
        for key, value in row.items():
            yield ("rows", i, key), value


def _structure(expected: Any) -> list[str]:
    if type(expected) is not dict or set(expected) != {"rows"}:
        return ['the key must be a dict {"rows": [...]}']
    rows = expected["rows"]
    if type(rows) is not list or not rows:
        return ["rows must be a non-empty list"]
    if any(type(row) is not dict or not row or any(type(k) is not str for k in row) for row in rows):
        return ["every row must be a non-empty dict with str keys"]
    problems = []
    for path, value in _leaves(expected):
        if type(value) is TensorValue:
            if dtype_family(value.dtype) == "bool":
                problems.append(f"{render_path(path)} is a bool tensor; expected a real or integer tensor")
        elif type(value) not in (int, float) and not is_sympy(value):
            problems.append(f"{render_path(path)} is a {type(value).__name__}; expected a tensor, a number "
                            "or a sympy expression")
    return problems


def _schema(expected: Mapping[str, Any], answer: tuple[Mapping[str, Any], ...]) -> list[str]:
    """The key has exactly the keys, dtypes and shapes the prompt promises."""
    rows = expected["rows"]
    if len(rows) != len(answer):
        return [f"the key has {len(rows)} rows but the prompt promises {len(answer)}"]
    problems = []
    for i, (row, spec_row) in enumerate(zip(rows, answer, strict=True)):
        if set(row) != set(spec_row):
            problems.append(f"rows[{i}] has keys {sorted(row)} but the prompt promises {sorted(spec_row)}")
            continue
        for key, spec in spec_row.items():
            value, where = row[key], render_path(("rows", i, key))
            if type(spec) is TensorSpec:
                if type(value) is not TensorValue or (value.dtype, value.shape) != (spec.dtype, spec.shape):
                    problems.append(f"{where} is {_describe(value)} but the prompt promises {spec.render()}")
            elif type(spec) is ScalarSpec and type(value).__name__ != spec.kind:
                problems.append(f"{where} is {_describe(value)} but the prompt promises {spec.render()}")
            elif type(spec) is ExprSpec:
                problems += _expression_schema(value, spec, where)
    return problems


def _expression_schema(value: Any, spec: ExprSpec, where: str) -> list[str]:
    """A symbolic leaf: a sympy expression whose free symbols are among the declared names, and
    which really depends on a symbol (a constant would be a number question dressed up)."""
    if not is_sympy(value):
        return [f"{where} is {_describe(value)} but the prompt promises {spec.render()}"]
    names = sorted(s.name for s in value.free_symbols)
    extra = sorted(set(names) - set(spec.symbols))
    if extra:
        return [f"{where} has free symbols {extra} beyond the declared {list(spec.symbols)}"]
    if not names:
        return [Degenerate(f"{where} is a constant, but the prompt promises {spec.render()}")]
    return []


def _describe(value: Any) -> str:
    if type(value) is TensorValue:
        return TensorSpec(value.dtype, value.shape).render()
    if is_sympy(value):
        return "a sympy expression"
    return f"a Python {type(value).__name__}"


def _finite_and_non_empty(expected: Mapping[str, Any]) -> list[str]:
    problems = []
    for path, value in _leaves(expected):
        if is_sympy(value):
            continue  # verify's generic checks refuse nan/oo/zoo inside an expression
        elements = value.data if type(value) is TensorValue else (value,)
        if not elements:
            problems.append(Degenerate(f"{render_path(path)} is an empty tensor"))
        if any(type(x) is float and not math.isfinite(x) for x in elements):
            problems.append(Degenerate(f"{render_path(path)} holds NaN or infinity"))
    return problems


def _not_an_input(expected: Mapping[str, Any], inputs: Mapping[str, Any]) -> list[str]:
    """An output holding exactly an input's elements (same dtype, any shape) is a pass-through."""
    tensors = {name: value for name, value in inputs.items() if type(value) is TensorValue}
    problems = []
    for path, value in _leaves(expected):
        for name, original in tensors.items():
            if type(value) is TensorValue and (value.dtype, value.data) == (original.dtype, original.data):
                problems.append(Degenerate(f"{render_path(path)} is the input `{name}` passed through"))
    return problems


def _clean_rerun(task: Task) -> list[str]:
    """The reference runs again without an exception or a warning and reproduces the key."""
    # No cyclic GC while recording: a collection could finalise another thread's garbage (a pipe's
    # ResourceWarning) inside the recording. (A gc.collect() before it did the same at ~0.1 s a call,
    # more on a large heap: most of a generated pytorch task's cost, seconds in a test process.)
    collecting = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                again = run_program(task.program, task.inputs, PROFILE)
            except Exception as error:
                return [f"the reference raised {type(error).__name__}: {str(error)[:200]}"]
    finally:
        if collecting:
            gc.enable()
    # verify.run_fresh closes its pipes itself now, so a ResourceWarning here is the reference's own.
    problems = [f"the reference warned: {w.category.__name__}: {str(w.message)[:200]}" for w in caught]
    if not typed_equal(again, task.expected):
        problems.append("the reference gave a different output when run again in the same process")
    return problems


@dataclass(frozen=True)
class IndependentResult:
    """The independent check of one task: problems (empty if confirmed) and how much of the
    tolerance the key used at its worst element (``used``, a fraction; ``where``, its path)."""

    problems: list[str]
    used: Fraction = Fraction(0)
    where: str = ""


def _reference(value: Any) -> Any:
    """An independent value as compare() takes it: TensorValue, int, exact Fraction or an exact
    sympy expression (decided symbolically by compare under the task's Exact() policy)."""
    if type(value) is ExactTensor:
        return value.to_tensor_value()
    if type(value) is int or is_sympy(value):
        return value
    return to_fraction(value)


def _exact_elements(value: Any) -> tuple[Any, ...]:
    if type(value) is ExactTensor:
        return value.values
    return (value if type(value) is int else to_fraction(value),)


def _used(key: Any, exact: Any, policy: AllClose) -> Fraction:
    """max over elements of |key - exact| / (atol + rtol*|exact|), exactly (0 for equal integers,
    and under an exact policy, where compare() has already required equality)."""
    if type(policy) is not AllClose:
        return Fraction(0)
    keys = key.data if type(key) is TensorValue else (key,)
    worst = Fraction(0)
    for a, e in zip(keys, _exact_elements(exact), strict=True):
        allowed = Fraction(policy.atol) + Fraction(policy.rtol) * abs(Fraction(e))
        worst = max(worst, abs(Fraction(a) - Fraction(e)) / allowed)
    return worst


def independent_check(task: Task) -> IndependentResult:
    """Recompute the rows without torch and require agreement with the key, with HEADROOM."""
    independent = task.meta.get("independent")
    if independent is None:
        return IndependentResult(["the task has no independent computation"])
    try:
        with mpmath.workdps(DIGITS):
            rows = independent(**task.inputs)
    except Exception as error:
        return IndependentResult([f"the independent computation raised {type(error).__name__}: {error}"])
    reference = {"rows": [{key: _reference(value) for key, value in row.items()} for row in rows]}
    verdict = compare(reference, task.expected, task.policy)
    if not verdict.ok:
        problem = f"the independent computation disagrees with the key: {verdict.reason}"
        if _float64_agrees(task, reference):
            return IndependentResult([Degenerate(f"{problem}; the reference run in float64 agrees with the "
                                                 "independent computation: float32 rounding, not the "
                                                 "reference, is off on this draw")])
        return IndependentResult([problem])
    used, where = Fraction(0), ""
    for i, row in enumerate(rows):
        for key, value in row.items():
            share = _used(task.expected["rows"][i][key], value, task.policy)
            if share > used:
                used, where = share, render_path(("rows", i, key))
    if used > HEADROOM:
        return IndependentResult([Degenerate(f"the key uses {float(used):.0%} of the tolerance at {where} "
                                             f"(at most {float(HEADROOM):.0%} allowed): a correct answer "
                                             "computed another way could fail")], used, where)
    return IndependentResult([], used, where)


def _as_float64(value: Any) -> Any:
    if type(value) is TensorValue and value.dtype == "float32":
        return TensorValue("float64", value.shape, value.data)
    return value


def _float64_agrees(task: Task, reference: Any) -> bool:
    """The reference re-run with its float32 inputs as float64 agrees with the independent value
    under the task's policy (False if it raises or no input is float32: nothing then tells the
    disagreement from a wrong reference)."""
    inputs = {name: _as_float64(value) for name, value in task.inputs.items()}
    if inputs == dict(task.inputs):
        return False
    try:
        again = run_program(task.program, inputs, PROFILE)
    except Exception:
        return False
    return compare(reference, again, task.policy).ok


def summary(tasks: list[Task]) -> list[str]:
    """How many keys the independent computation confirmed, the tightest one, and any failures."""
    results = [(task.id, independent_check(task)) for task in tasks]
    confirmed = [(task_id, r) for task_id, r in results if not r.problems]
    lines = [f"independently confirmed: {len(confirmed)}/{len(tasks)}"]
    if confirmed:
        task_id, tightest = max(confirmed, key=lambda item: item[1].used)
        lines.append(f"largest key error: {float(tightest.used):.2%} of the tolerance "
                     f"({task_id} {tightest.where})")
    lines += [f"not confirmed: {task_id}: {r.problems[0]}" for task_id, r in results if r.problems]
    return lines


def environment() -> dict[str, str]:
    """The torch version the keys were computed with, for the dataset card."""
    return {"torch": require_torch().__version__}
