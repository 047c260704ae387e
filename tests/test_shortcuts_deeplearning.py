"""deeplearning shortcut rules, table-driven: for every (family, level), the first instances of the
rule stream break none of the family's rules (varying fields, degenerate-instance test, branch
shares). EXACTGRADE_RULE_INSTANCES=200 is the full check; the suite default keeps this file fast."""

from __future__ import annotations

import pytest
from shortcut_rules import instances, rule_problems

import exactgrade
from exactgrade.family import LEVELS

SUITE_DEFAULT = 10
TABLE = [(family, level) for family in exactgrade.families("deeplearning") for level in LEVELS]


@pytest.mark.parametrize(("family", "level"), TABLE)
def test_no_shortcut_passes(family, level):
    assert rule_problems("deeplearning", family, level, instances(SUITE_DEFAULT)) == []


@pytest.mark.parametrize(("family", "reason"), [
    ("mlp_gradient", "gradients are exactly zero"),
    ("mlp_forward", "the last layer's bias"),
])
def test_degenerate_backprop_instances_are_refused(family, reason):
    """A network with every hidden unit dead: its gradients are zero and its output is the bias."""
    import dataclasses
    from fractions import Fraction as F

    from exactgrade.family import family_of
    from exactgrade.task import materialise

    fam = family_of("deeplearning", family)
    task = exactgrade.generate("deeplearning", seed=3, index=0, level=1, family=family)
    network = {"layers": [dict(layer) for layer in task.inputs["network"]["layers"]]}
    for layer in network["layers"][:-1]:
        layer["b"] = [F(-1000)] * len(layer["b"])
    inputs = {**task.inputs, "network": network}
    dead = materialise(dataclasses.replace(fam.task(task.id, inputs, 1), level=1), "deeplearning", "python")
    assert reason in (fam.reject(dead) or "")
