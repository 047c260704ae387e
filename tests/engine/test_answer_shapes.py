"""A key field that can be None is shown as `| None` in the answer shape of the prompt: a solver
reads the shape as the type of the answer (a blind solver found a prompt saying "None for both"
beside a shape of bare `<int>`). Scaling writes its shapes by hand, so each is checked against
the None values its generated keys actually hold."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

import exactgrade

INSTANCES = 8
GRID = [(name, level) for name in exactgrade.families("scaling") for level in range(1, 6)]


def none_fields(value: Any, name: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from none_fields(item, key)
    elif isinstance(value, list):
        for item in value:
            yield from none_fields(item, name)
    elif value is None:
        yield name


def shape_of(prompt: str) -> str:
    found = re.search(r"exactly in this shape:\n(.*?)(?:\n\n|\Z)", prompt, re.S)
    assert found, "the prompt shows no answer shape"
    return found.group(1)


def unmarked(shape: str, fields: set[str]) -> list[str]:
    """The fields whose shape entry does not admit None."""
    return sorted(f for f in fields if not re.search(rf'"{re.escape(f)}": [^,}}]*\| None', shape))


@pytest.mark.parametrize(("name", "level"), GRID, ids=[f"{n}-L{lv}" for n, lv in GRID])
def test_every_field_that_can_be_none_says_so_in_the_shape(name, level):
    tasks = [exactgrade.generate("scaling", seed=0, index=i, level=level, family=name)
             for i in range(INSTANCES)]
    shape = shape_of(tasks[0].prompt)
    fields = {field for task in tasks for field in none_fields(task.expected)}
    assert unmarked(shape, fields) == [], f"None in the key but not in the shape {shape!r}"


def test_the_check_finds_an_unmarked_field():
    shape = '{"rows": [{"max_layers": <int>, "total_params": <int> | None}]}'
    key = {"rows": [{"max_layers": None, "total_params": None}]}
    assert unmarked(shape, set(none_fields(key))) == ["max_layers"]
