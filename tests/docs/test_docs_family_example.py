"""The worked example of docs/adding-a-family.md is real: the family module printed there builds every
level, its keys pass the pytorch domain's check() (the independent recomputations agree), its
stated branch is reached, and five_levels refuses it with a level missing. So the page stays true."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from exactgrade.family import LEVELS, build_instance, five_levels

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch==2.13.0)")

DOC = Path(__file__).resolve().parents[2] / "docs" / "adding-a-family.md"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The first python block under the page's "Worked example" heading, imported as a module."""
    section = DOC.read_text(encoding="utf-8").split("## Worked example", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    path = tmp_path_factory.mktemp("docs") / "running_sums.py"
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("running_sums", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_of_the_example_builds_and_is_confirmed_independently(example, level):
    from exactgrade.domains.pytorch import check

    for index in range(4):
        task = build_instance("pytorch", example.RUNNING_SUMS, level, 0, index)
        assert (task.family, task.level, task.id) == ("running_sums", level,
                                                      f"pt-running_sums-L{level}-s0-i{index}")
        assert check(task) == []


def test_the_example_reaches_its_stated_branch(example):
    branch = example.RUNNING_SUMS.branches[0]
    tasks = [build_instance("pytorch", example.RUNNING_SUMS, 4, 0, index) for index in range(40)]
    assert sum(map(branch.reached, tasks)) >= 4


def test_the_example_without_its_fifth_level_is_refused_where_it_is_declared(example):
    levels = (example.LEVEL_1, example.LEVEL_2, example.LEVEL_3, example.LEVEL_4)
    with pytest.raises(ValueError, match="family 'running_sums' declares 4 levels"):
        five_levels("running_sums", levels, about="four levels")
