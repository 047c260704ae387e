"""Level 4 of six tensor_ops families asks one answer per setting (rows, totals, bounds, targets).

Round 4 found each of these searches answering a handful of values, its commonest whole key on
22-63% of 200 instances (-1, or the smallest answer): guessing it passed them. Each now asks
several settings at once, each setting's answer chosen first (-1 at NONE_SHARE, else a reachable
answer uniformly) and its threshold or target drawn for it; a key giving every setting the same
answer is refused. Table-driven: the key's form and the sentinel's share over the first instances
of the rule stream (cached with the rule test's), and the refusal's reason on fixed inputs.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections import Counter
from fractions import Fraction

import pytest
from shortcut_rules import RULE_SEED

import exactgrade
from exactgrade import wire
from exactgrade.domains.pytorch.common import tensor
from exactgrade.domains.pytorch.tensor_ops.shared import NONE_SHARE
from exactgrade.family import family_of
from exactgrade.task import materialise

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch==2.13.0)")

INSTANCES = 24
# family, key field, settings per instance (entries of the key), entry width (3 for an axis order)
SETTINGS = [("integer_division", "divisor", 4, 1), ("top_and_kth", "k", 4, 1),
            ("stack_and_concatenate", "join", 4, 1), ("normalise", "p", 4, 1),
            ("permute_and_reshape", "order", 3, 3), ("spread_statistics", "columns", 4, 1)]


@pytest.mark.parametrize(("name", "field", "settings", "width"), SETTINGS, ids=[s[0] for s in SETTINGS])
def test_level_4_answers_every_setting_and_no_whole_key_repeats_often(name, field, settings, width):
    tasks = [exactgrade.generate("pytorch", seed=RULE_SEED, index=index, level=4, family=name)
             for index in range(INSTANCES)]
    keys = Counter(wire.encode(task.expected) for task in tasks)
    assert keys.most_common(1)[0][1] <= INSTANCES // 10, keys.most_common(1)   # old samplers: 6-16 of 24
    entries = Counter()
    for task in tasks:
        value = task.expected["rows"][0][field]
        assert (value.dtype, value.shape) == ("int64", (settings, width)[:1 if width == 1 else 2]), task.id
        entries.update(value.data[i:i + width] for i in range(0, len(value.data), width))
    sentinel = Fraction(entries[(-1,) * width], settings * INSTANCES)
    assert NONE_SHARE / 2 <= sentinel <= NONE_SHARE * 2, (name, sentinel)   # drawn at NONE_SHARE per setting
    assert len(entries) >= 4, entries   # a handful of answers per setting, so the tuples spread


def f32(nested):
    return tensor("float32", nested)


def i64(nested):
    return tensor("int64", nested)


_CUBE = [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]
_ORDER_021, _ORDER_102 = [1, 3, 2, 4, 5, 7, 6, 8], [1, 2, 5, 6, 3, 4, 7, 8]
_AB = {"a": i64([[1, 2], [3, 4]]), "b": i64([[5, 6], [7, 8]])}
_BLOCKS, _ROWS = [[1, 2], [3, 4], [5, 6], [7, 8]], [[1, 2], [5, 6], [3, 4], [7, 8]]


@pytest.mark.parametrize(("name", "inputs", "field", "answer", "reason"), [
    ("integer_division", {"a": i64([[-3, 5, -9, 7], [-5, -15, 2, 4]]), "limit": 12}, "divisor", [3, 5], None),
    ("integer_division", {"a": i64([[-3, 5, -9, 7], [-6, -9, 2, 4]]), "limit": 12}, "divisor", [3, 3],
     "a constant answer passes: every entry of divisor is [3]"),
    ("top_and_kth", {"x": f32([[4.0, 1.0, -2.0], [3.0, 2.0, 0.5]]), "totals": f32([2.0, 4.5])}, "k", [1, 2],
     None),
    ("top_and_kth", {"x": f32([[4.0, 1.0, -2.0], [3.0, 2.0, 0.5]]), "totals": f32([2.0, 2.5])}, "k", [1, 1],
     "a constant answer passes: every entry of k is [1]"),
    ("stack_and_concatenate", {**_AB, "targets": i64([_BLOCKS, _ROWS])}, "join", [1, 2], None),
    ("stack_and_concatenate", {**_AB, "targets": i64([_BLOCKS, _BLOCKS])}, "join", [1, 1],
     "a constant answer passes: every entry of join is [1]"),
    ("normalise", {"x": f32([[3.0, 4.0], [1.0, 1.0]]), "bounds": f32([5.5, 4.75])}, "p", [2, 3], None),
    ("normalise", {"x": f32([[3.0, 4.0], [1.0, 1.0]]), "bounds": f32([5.5, 6.0])}, "p", [2, 2],
     "a constant answer passes: every entry of p is [2]"),
    ("permute_and_reshape", {"x": i64(_CUBE), "targets": i64([_ORDER_021, _ORDER_102])}, "order",
     [0, 2, 1, 1, 0, 2], None),
    ("permute_and_reshape", {"x": i64(_CUBE), "targets": i64([_ORDER_021, _ORDER_021])}, "order",
     [0, 2, 1, 0, 2, 1], "a constant answer passes: every entry of order is [0, 2, 1]"),
    ("spread_statistics", {"x": f32([[0.0, 2.0, 4.0], [1.0, 3.0, -1.0]]), "bounds": f32([0.5, 2.0])},
     "columns", [2, 3], None),
    ("spread_statistics", {"x": f32([[0.0, 2.0, 4.0], [1.0, 3.0, -1.0]]), "bounds": f32([0.5, 0.75])},
     "columns", [2, 2], "a constant answer passes: every entry of columns is [2]"),
], ids=lambda v: v if isinstance(v, str) and " " not in v else None)
def test_a_level_4_key_with_one_answer_for_every_setting_is_refused(name, inputs, field, answer, reason):
    fam = family_of("pytorch", name)
    task = materialise(dataclasses.replace(fam.task("pt-test", inputs, 4), level=4), "pytorch", "torch")
    assert list(task.expected["rows"][0][field].data) == answer
    assert fam.reject(task) == reason
