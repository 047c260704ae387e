"""The family tables of docs/families.md say what each family's levels ask: the family's own `levels` text,
so the documentation cannot drift from the code."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import exactgrade
from exactgrade.family import family_of

README = Path(__file__).resolve().parents[2] / "docs" / "families.md"
SECTIONS = {"### scaling-env families": "scaling", "### deeplearning-env families": "deeplearning",
            "### pytorch-env families": "pytorch"}


@cache
def documented() -> dict[tuple[str, str], str]:
    """(domain, family) -> the last column of its row in the family tables of docs/families.md."""
    rows, domain = {}, None
    for line in README.read_text().splitlines():
        if line.startswith("#"):
            domain = SECTIONS.get(line.strip())
        elif domain and line.startswith("| `"):
            cells = line.split(" | ")
            rows[(domain, cells[0][3:-1])] = cells[-1].removesuffix(" |")
    return rows


GRID = [(domain, name) for domain in SECTIONS.values() for name in exactgrade.families(domain)]


@pytest.mark.parametrize(("domain", "name"), GRID, ids=[f"{d}-{n}" for d, n in GRID])
def test_the_readme_row_is_the_familys_levels_text(domain, name):
    expected = " ".join(family_of(domain, name).levels.split()).replace("|", "/")
    assert documented().get((domain, name)) == expected
