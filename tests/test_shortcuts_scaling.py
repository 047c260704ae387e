"""scaling-env shortcut rules, per family and level: no varying field constant within an
instance, no instance the family's own degenerate test refuses, every branch of the reference
reached by its stated share (tests/shortcut_rules.py counts; the rules are on each Family).

The suite default checks the first 40 instances of each (family, level);
EXACTGRADE_RULE_INSTANCES=200 is the full check."""

from __future__ import annotations

import pytest
from shortcut_rules import LEVELS, instances, rule_problems

import exactgrade
from exactgrade.family import family_of

FAMILIES = exactgrade.families("scaling")
GRID = [(name, level) for name in FAMILIES for level in LEVELS]
COUNT = instances(40)


@pytest.mark.parametrize(("name", "level"), GRID, ids=[f"{n}-L{lv}" for n, lv in GRID])
def test_no_shortcut_passes(name, level):
    assert rule_problems("scaling", name, level, COUNT) == []


# The families the issue named: their rules are declared, not left to chance.
@pytest.mark.parametrize(("name", "field"), [
    ("data_parallel_step", "rows[].allreduce_exceeds_compute"),
    ("tensor_parallel_layer", "rows[].comm_bound"),
    ("sharded_decode_latency", "rows[].fits"),
    ("matmul_roofline", "rows[].bound"),
])
def test_named_booleans_are_varying(name, field):
    assert field in family_of("scaling", name).varying


@pytest.mark.parametrize("name", ["decode_compute_bound_batch", "min_compute_bound_batch"])
def test_none_branches_are_declared(name):
    assert "none" in {branch.name for branch in family_of("scaling", name).branches}


def test_elementwise_bound_is_constant_by_physics():
    reason = family_of("scaling", "elementwise_roofline").constant["rows[].bound"]
    assert "memory" in reason
    task = exactgrade.generate("scaling", seed=1, index=0, level=1, family="elementwise_roofline")
    assert "memory-bound" in task.prompt
