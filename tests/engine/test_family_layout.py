"""The layout docs/families.md describes, pinned: in every domain each family of a category's
FAMILIES is declared in its own module, <domain>/<category>/<family>.py, the categories' FAMILIES
are the domain's, and no module of a domain is named after a level, a round or a batch (a
scaling levels_*.py would fail)."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

from exactgrade.domains.deeplearning import CATEGORY_COUNTS
from exactgrade.domains.pytorch.common import CATEGORIES as PYTORCH_CATEGORIES
from exactgrade.domains.scaling import CATEGORIES as SCALING_CATEGORIES
from exactgrade.family import families

CATEGORIES = {"pytorch": PYTORCH_CATEGORIES, "deeplearning": tuple(CATEGORY_COUNTS),
              "scaling": SCALING_CATEGORIES}
HISTORY = re.compile(r"(^|_)(levels?|round\d*|batch\d+|r\d+)(_|$)|\d")
"""A module name that records when it was written (a level kind, a round, a batch, a number)."""
TABLE = [(domain, category) for domain, categories in CATEGORIES.items() for category in categories]


@pytest.mark.parametrize(("domain", "category"), TABLE)
def test_each_family_is_declared_in_its_own_module(domain, category):
    package = importlib.import_module(f"exactgrade.domains.{domain}.{category}")
    assert package.FAMILIES, f"{domain}/{category} lists no family"
    for family in package.FAMILIES:
        module = importlib.import_module(f"{package.__name__}.{family.name}")
        declared = [name for name, value in vars(module).items() if value is family]
        assert declared == [family.name.upper()], (module.__name__, declared)


@pytest.mark.parametrize("domain", sorted(CATEGORIES))
def test_no_module_is_named_after_a_level_a_round_or_a_batch(domain):
    root = importlib.import_module(f"exactgrade.domains.{domain}")
    names = [info.name for info in pkgutil.walk_packages(root.__path__, f"{root.__name__}.")]
    assert len(names) > len(CATEGORIES[domain])
    bad = [name for name in names if HISTORY.search(name.rsplit(".", 1)[-1])]
    assert bad == []


@pytest.mark.parametrize("domain", sorted(CATEGORIES))
def test_the_categories_families_are_the_domains_in_order(domain):
    listed = [family.name for category in CATEGORIES[domain]
              for family in importlib.import_module(f"exactgrade.domains.{domain}.{category}").FAMILIES]
    assert tuple(listed) == families(domain)


@pytest.mark.parametrize("name", ["levels_compute5", "levels_inverse2", "levels_roofline2", "levels_kv",
                                  "round3", "memory_r2"])
def test_a_module_named_by_history_fails_the_layout(name):
    assert HISTORY.search(name)
