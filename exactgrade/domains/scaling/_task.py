"""Builds a scaling TaskDef from its parts, so every task carries the same policy, api_description
and test metadata (an independently written float formula and a named mistake)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from exactgrade.domains.scaling._text import api_description, renderer
from exactgrade.family import Draw, Family
from exactgrade.policy import RelTol
from exactgrade.task import Task, TaskDef

POLICY = RelTol(1e-9)


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
) -> TaskDef:
    """A TaskDef graded under RelTol(1e-9).

    ``float_formula(**float_inputs, mistake=None)`` recomputes the answer in floats with the
    operations in another order; ``mistake`` names the error it reproduces when asked (a common
    slip that the grader must reject).
    """
    return TaskDef(
        id=id,
        category=category,
        inputs=dict(inputs),
        reference=reference,
        render=renderer(question, answer_shape),
        api_description=api_description(category),
        policy=POLICY,
        tags=tags,
        meta={"float_formula": float_formula, "mistake": mistake},
    )


def known_mistake(mistake: str | None, *known: str) -> None:
    """Raise on a mistake name a float formula does not implement (a typo must not silently
    produce the correct answer)."""
    if mistake is not None and mistake not in known:
        raise ValueError(f"unknown mistake {mistake!r}; this formula knows {known}")


MAX_KEY_DIGITS = 60
"""A generated key whose numerators or denominators need more digits than this is rejected."""


def scaling_family(
    name: str,
    category: str,
    reference: Callable[..., Any],
    question: str,
    answer_shape: str,
    float_formula: Callable[..., Any],
    mistake: str,
    sample: Callable[[Draw, int], Mapping[str, Any]],
    levels: str,
    tags: tuple[str, ...] = (),
    reject: Callable[[Task], str | None] | None = None,
) -> Family:
    """A scaling Family: one question text for its canonical and generated tasks, and the
    discrimination rules every generated instance must pass (see ``discriminates``); ``reject``
    adds family-specific rules (ties of a classification, integers a float method could round
    the other way)."""

    def build(task_id: str, inputs: Mapping[str, Any]) -> TaskDef:
        return scaling_task(task_id, category, reference, inputs, question, answer_shape, float_formula,
                            mistake, tags)

    def reject_instance(task: Task) -> str | None:
        return discriminates(task) or (reject(task) if reject is not None else None)

    return Family(name=name, build=build, sample=sample, levels=levels, reject=reject_instance)


def discriminates(task: Task) -> str | None:
    """Why a scaling instance would not discriminate, or None: the float twin (operations
    reordered) must pass, the named mistake must fail, and no key number may need more than
    MAX_KEY_DIGITS digits."""
    from exactgrade.compare import compare

    for number in _key_numbers(task.expected):
        if type(number) is Fraction and max(abs(number.numerator), number.denominator) >= 10**MAX_KEY_DIGITS:
            return f"a key number needs more than {MAX_KEY_DIGITS} digits"
    floats = as_floats(dict(task.inputs))
    formula, mistake = task.meta["float_formula"], task.meta["mistake"]
    try:
        twin = compare(task.expected, formula(**floats), task.policy)
        wrong = compare(task.expected, formula(**floats, mistake=mistake), task.policy)
    except (ArithmeticError, ValueError) as error:
        return f"the float twin failed: {type(error).__name__}: {error}"
    if not twin.ok:
        return f"the float twin disagrees with the key: {twin.reason}"
    if wrong.ok:
        return f"the mistake {mistake!r} gives the right answer"
    return None


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
