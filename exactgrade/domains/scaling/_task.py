"""Builds a scaling TaskDef from its parts, so every task carries the same policy, api_description
and test metadata (an independently written float formula and a named mistake)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from exactgrade.domains.scaling._text import api_description, renderer
from exactgrade.policy import RelTol
from exactgrade.task import TaskDef

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
