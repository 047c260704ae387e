"""scaling-env shortcut rules, per family and level: no varying field constant within an
instance, no instance the family's own degenerate test refuses, every branch of the reference
reached by its stated share (tests/shortcut_rules.py counts; the rules are on each Family).

The suite default checks the first 40 instances of each (family, level);
EXACTGRADE_RULE_INSTANCES=200 is the full check."""

from __future__ import annotations

import pytest
from shortcut_rules import LEVELS, instances, rule_problems

import exactgrade
from exactgrade.domains import scaling
from exactgrade.family import constant_fields, family_of
from exactgrade.task import materialise

FAMILIES = exactgrade.families("scaling")
GRID = [(name, level) for name in FAMILIES for level in LEVELS]
COUNT = instances(40)


@pytest.mark.parametrize(("name", "level"), GRID, ids=[f"{n}-L{lv}" for n, lv in GRID])
def test_no_shortcut_passes(name, level):
    assert rule_problems("scaling", name, level, COUNT) == []


# The families the issue named: a level-1 instance cut down to one row (so its boolean is
# constant) is refused for that reason.
@pytest.mark.parametrize(("name", "rows_input", "field"), [
    ("data_parallel_step", "tokens_per_device", "rows[].allreduce_exceeds_backward"),
    ("tensor_parallel_layer", "tp_degrees", "rows[].comm_bound"),
    ("sharded_decode_latency", "chip_counts", "rows[].fits"),
    ("matmul_roofline", "batches", "rows[].bound"),
    ("decode_step", "chips", "rows[].bound"),
])
def test_a_constant_boolean_is_refused(name, rows_input, field):
    family = family_of("scaling", name)
    task = exactgrade.generate("scaling", seed=1, index=0, level=1, family=name)
    reasons = []
    for row in task.inputs[rows_input]:  # as generation judges it: the varying fields, then reject
        one_row = materialise(family.task("sc-edge", dict(task.inputs, **{rows_input: [row]})), "scaling",
                              scaling.PROFILE)
        reasons.append(constant_fields(one_row.expected, family.varying) or family.reject(one_row))
    assert None not in reasons
    assert any(r.startswith(f"a constant answer passes: {field} is ") for r in reasons), reasons


@pytest.mark.parametrize("name", ["decode_compute_bound_batch", "min_compute_bound_batch"])
def test_none_branches_are_declared(name):
    assert "none" in {branch.name for branch in family_of("scaling", name).branches}


def test_elementwise_bound_is_constant_by_physics():
    reason = family_of("scaling", "elementwise_roofline").constant["rows[].bound"]
    assert "memory" in reason
    task = exactgrade.generate("scaling", seed=1, index=0, level=1, family="elementwise_roofline")
    assert "memory-bound" in task.prompt
