"""Builds a scaling TaskDef from its parts, so every task carries the same policy, api_description
and test metadata (an independently written float formula and a named mistake)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from exactgrade.domains.scaling._text import api_description, renderer
from exactgrade.family import Level, Rule, Sampler, constant_fields
from exactgrade.policy import Exact, RelTol
from exactgrade.task import Task, TaskDef

POLICY = RelTol(1e-9)
SYMBOLIC_POLICY = Exact()


def scaling_task(
    id: str,
    category: str,
    reference: Callable[..., Any],
    inputs: Mapping[str, Any],
    question: str,
    answer_shape: str,
    float_formula: Callable[..., Any],
    mistake: str,
    tags: tuple[str, ...] = (),
    symbolic: bool = False,
) -> TaskDef:
    """A TaskDef graded under RelTol(1e-9) (Exact() for a closed form in symbols).

    ``float_formula(**float_inputs, mistake=None)`` recomputes the answer in floats with the
    operations in another order (for a symbolic task: derives it another way from the exact
    inputs); ``mistake`` names the error it reproduces when asked (a common slip that the grader
    must reject). It is the task's independent check, ``meta["independent"]``, as in the other
    domains; ``discriminates`` runs it.
    """
    return TaskDef(
        id=id,
        category=category,
        inputs=dict(inputs),
        reference=reference,
        render=renderer(question, answer_shape),
        api_description=api_description(category, symbolic=symbolic),
        policy=SYMBOLIC_POLICY if symbolic else POLICY,
        tags=tags,
        meta={"independent": float_formula, "mistake": mistake, "symbolic": symbolic},
    )


def known_mistake(mistake: str | None, *known: str) -> None:
    """Raise on a mistake name a float formula does not implement (a typo must not silently
    produce the correct answer)."""
    if mistake is not None and mistake not in known:
        raise ValueError(f"unknown mistake {mistake!r}; this formula knows {known}")


MAX_KEY_DIGITS = 60
"""A generated key whose numerators or denominators need more digits than this is rejected."""


def scaling_level(
    category: str,
    reference: Callable[..., Any],
    question: str,
    answer_shape: str,
    float_formula: Callable[..., Any],
    mistake: str,
    *,
    sample: Sampler,
    reject: Rule | None = None,
    varying: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    symbolic: bool = False,
) -> Level:
    """One level of a scaling family: its question (reference, prompt, answer shape), the float
    twin and named mistake every instance is checked against (``discriminates``), its sampler,
    and its own rules: ``reject`` (ties, rounding edges) and ``varying`` (key paths that must take
    two values in one instance). ``symbolic``: a closed form in declared symbols (sympy Symbol
    inputs), graded Exact(), whose twin is a second derivation run on the exact inputs (floats
    would make it inexact)."""

    def build(task_id: str, inputs: Mapping[str, Any]) -> TaskDef:
        return scaling_task(
            task_id,
            category,
            reference,
            inputs,
            question,
            answer_shape,
            float_formula,
            mistake,
            tags,
            symbolic=symbolic,
        )

    def refuse(task: Task) -> str | None:
        problem = discriminates(task) or (reject(task) if reject is not None else None)
        return problem if problem is not None else constant_fields(task.expected, varying)

    return Level(build, sample, refuse)


def discriminates(task: Task) -> str | None:
    """Why a scaling instance would not discriminate, or None: the float twin (operations
    reordered) must pass, the named mistake must fail, and no key number may need more than
    MAX_KEY_DIGITS digits.

    A cheap leaf-by-leaf screen settles the clear cases (a float within half the tolerance, or
    off by more than twice it); only an undecided answer goes through the exact compare()."""
    for number in _key_numbers(task.expected):
        if type(number) is Fraction and max(abs(number.numerator), number.denominator) >= 10**MAX_KEY_DIGITS:
            return f"a key number needs more than {MAX_KEY_DIGITS} digits"
    floats = dict(task.inputs) if task.meta.get("symbolic") else as_floats(dict(task.inputs))
    formula, mistake = task.meta["independent"], task.meta["mistake"]
    try:
        twin, wrong = formula(**floats), formula(**floats, mistake=mistake)
    except (ArithmeticError, ValueError) as error:
        return f"the float twin failed: {type(error).__name__}: {error}"
    if not _passes(task, twin):
        return f"the float twin disagrees with the key: {_reason(task, twin)}"
    if _passes(task, wrong):
        return f"the mistake {mistake!r} gives the right answer"
    return None


def _passes(task: Task, answer: Any) -> bool:
    screened = screen(task.expected, answer)
    if screened is not None:
        return screened
    from exactgrade.compare import compare

    return compare(task.expected, answer, task.policy).ok


def _reason(task: Task, answer: Any) -> str:
    from exactgrade.compare import compare

    return compare(task.expected, answer, task.policy).reason


_SURE_PASS, _SURE_FAIL = 0.5 * POLICY.rtol, 2.0 * POLICY.rtol


def screen(expected: Any, answer: Any) -> bool | None:
    """What compare(expected, answer, RelTol(1e-9)) says, when that is plain without exact
    arithmetic: True (passes), False (fails), None (undecided: ask compare). Strict on kinds:
    an int key needs an equal int, None/bool/str the identical value, a Fraction key a float
    clearly inside or outside the tolerance (float rounding is far below the margins)."""
    verdict: bool | None = True
    stack = [(expected, answer)]
    while stack:
        e, a = stack.pop()
        te, ta = type(e), type(a)
        if te is dict:
            if ta is not dict or e.keys() != a.keys():
                return False
            stack.extend((e[k], a[k]) for k in e)
        elif te is list:
            if ta is tuple:  # compare reads a tuple as a list: not plain enough to settle here
                verdict = None
                continue
            if ta is not list or len(e) != len(a):
                return False
            stack.extend(zip(e, a, strict=True))
        elif e is None or te is bool or te is str:
            if ta is not te or e != a:
                return False
        elif te is int:
            if ta is not int:
                return False if ta in (float, bool, str, dict, list) or a is None else None
            if e != a:
                return False
        elif te is Fraction and ta is float:
            try:
                exact = float(e)
            except OverflowError:
                verdict = None
                continue
            scale = abs(exact)
            if not (math.isfinite(a) and 1e-290 < scale < 1e290):
                verdict = None
                continue
            off = abs(a - exact)
            if off > _SURE_FAIL * scale:
                return False
            if off > _SURE_PASS * scale:
                verdict = None
        else:
            verdict = None
    return verdict


# ---------------------------------------------------------------- rejection rules of the families


def near_integer(value: Fraction | int) -> bool:
    """Whether an exact value that a task rounds (ceil, floor) is too close to an integer, exact
    integers included: a correct float method may land on the other side. The margin is a
    relative 1e-9 up to 10**4 (batches, chips, lengths), then 1e-5 plus a relative 1e-14: a
    relative 1e-9 would refuse every parameter count above 10**9, while the error of a short
    float formula is a few parts in 10**16, far inside this margin. (Values above about 10**13
    are always refused: a double cannot place them between two integers reliably.)"""
    # |x - round(x)| <= 1e-9 * min(|x|, 1e4) + 1e-14 * |x|, in integers (x = n/d, d > 0).
    n, d = value.numerator, value.denominator
    rest = n % d
    gap, size = min(rest, d - rest), abs(n)
    return gap * 10**14 <= 10**5 * min(size, 10**4 * d) + size


def near_tie(a: Fraction | int, b: Fraction | int) -> bool:
    """Whether two exact quantities a task compares (compute vs memory time, size vs capacity)
    are within a relative 1e-9 of each other: a float method may order them either way."""
    # |a - b| <= 1e-9 * max(|a|, |b|), cross-multiplied into integers.
    an, ad, bn, bd = a.numerator, a.denominator, b.numerator, b.denominator
    return abs(an * bd - bn * ad) * 10**9 <= max(abs(an) * bd, abs(bn) * ad)


def rounding_edge(what: str, value: Fraction | int) -> str | None:
    """The rejection reason for a rounded quantity at an integer edge, or None."""
    if near_integer(value):
        return (
            f"{what} = {float(value):.12g} is too close to an integer: a float method could round "
            "it the other way"
        )
    return None


def tie_edge(what: str, a: Fraction | int, b: Fraction | int) -> str | None:
    """The rejection reason for a comparison sitting on its tie, or None."""
    if near_tie(a, b):
        return f"{what} sits within 1e-9 of the tie ({float(a):.12g} vs {float(b):.12g})"
    return None


def some_none(task: Task) -> bool:
    """Some row of the key holds None (an inverse with no solution in range): a branch the
    families' L4 and L5 must reach."""
    return any(None in row.values() for row in task.expected["rows"])


def smallest_satisfying(ok: Callable[[int], bool], high: int) -> int | None:
    """The smallest n in [1, high] with ok(n) (monotone), or None."""
    if not ok(high):
        return None
    low = 0
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if ok(middle) else (middle, high)
    return high


def with_tags(definition: TaskDef, *tags: str) -> TaskDef:
    """A canonical task with headline tags its family does not carry (the phenomenon holds for
    this task's inputs, not for every sampled instance)."""
    return dataclasses.replace(definition, tags=definition.tags + tags)


def as_floats(value: Any) -> Any:
    """Inputs as a float-minded model holds them: every Fraction converted to float."""
    if type(value) is Fraction:
        return float(value)
    if isinstance(value, list):
        return [as_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: as_floats(v) for k, v in value.items()}
    return value


def _key_numbers(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _key_numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _key_numbers(item)
    else:
        yield value
