"""The shortcut rules of the pytorch families in tensor_ops.py and autograd.py, per level.

Table-driven: every (family, level) of this share must generate instances that break none of the
family's rules (varying fields, its degenerate-instance test, its branch shares), counted by
tests/shortcut_rules.py on the first SUITE_INSTANCES instances (EXACTGRADE_RULE_INSTANCES=200 for
the full check). Also: the prompts of levels 2-5 name no torch call and carry no hint.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
from shortcut_rules import instances, rule_problems

import exactgrade
from exactgrade.domains.pytorch import autograd, tensor_ops
from exactgrade.family import LEVELS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch==2.13.0)")

SUITE_INSTANCES = 6
OPS = tuple(f.name for f in tensor_ops.FAMILIES)
GRADS = tuple(f.name for f in autograd.FAMILIES)
TABLE = [(name, level) for name in OPS + GRADS for level in LEVELS]
# a torch call or option named in the question text (the inputs block names torch dtypes, not calls)
NAMED_CALL = re.compile(r"torch\.|\bF\.|\.backward|autograd|\bdetach\b|kthvalue|topk|normalize|cummax|"
                        r"create_graph|retain_graph|note the tie|count_include_pad")


def test_the_share_is_sixteen_tensor_ops_and_seven_autograd_families():
    assert len(OPS) == 16 and len(GRADS) == 7


@pytest.mark.parametrize(("name", "level"), TABLE)
def test_no_shortcut_passes(name, level):
    assert rule_problems("pytorch", name, level, instances(SUITE_INSTANCES)) == []


@pytest.mark.parametrize("name", OPS + GRADS)
def test_upper_levels_describe_the_operation_and_name_no_call(name):
    for level in LEVELS[1:]:
        task = exactgrade.generate("pytorch", seed=0, index=0, level=level, family=name)
        question = task.prompt.split("\n\nInputs (already defined in the sandbox):")[0]
        assert NAMED_CALL.search(question) is None, (task.id, NAMED_CALL.search(question))


@pytest.mark.parametrize("name", OPS + GRADS)
def test_every_level_asks_its_own_question(name):
    questions = {exactgrade.generate("pytorch", seed=0, index=0, level=level, family=name).prompt.split(
        "\n\nInputs")[0] for level in LEVELS}
    assert len(questions) == len(LEVELS), name
