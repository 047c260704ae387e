"""The shortcut rules of the pytorch families of nn_modules, losses and optim, for every level: no
varying field constant within an instance, no instance its own reject test refuses, every branch
reached by its stated share (tests/shortcut_rules.py counts; the rules are stated on each Family).
EXACTGRADE_RULE_INSTANCES=200 runs the full check; the suite default keeps this file near a minute."""

from __future__ import annotations

import importlib.util

import pytest
from shortcut_rules import instances, rule_problems

from exactgrade.family import LEVELS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch==2.13.0)")

SUITE_DEFAULT = 3


def _names() -> tuple[str, ...]:
    if importlib.util.find_spec("torch") is None:
        return ()
    from exactgrade.domains.pytorch import losses, nn_modules, optim

    return tuple(f.name for module in (nn_modules, losses, optim) for f in module.FAMILIES)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", _names())
def test_generated_instances_keep_the_family_rules(name, level):
    assert rule_problems("pytorch", name, level, instances(SUITE_DEFAULT)) == []
