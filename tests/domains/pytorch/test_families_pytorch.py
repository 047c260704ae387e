"""The pytorch task families: every family generates at every level, each generated key is
confirmed by the domain's independent computation with half the tolerance to spare, a float64
re-run of the reference passes the float32 key, ties that make an index ambiguous are refused,
streams vary and never pose a canonical task, and generation is the same in any process."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import exactgrade
from exactgrade import compare, family, wire
from exactgrade.domains import pytorch
from exactgrade.domains.pytorch.checks import HEADROOM, independent_check
from exactgrade.domains.pytorch.common import tensor
from exactgrade.task import materialise, run_program
from exactgrade.values import TensorValue

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch==2.13.0)")

NAMES = exactgrade.families("pytorch")
CHAINS = {"conv_relu_pool_linear", "mlp_loss_gradients", "sgd_schedule_clipping"}


def test_every_canonical_task_belongs_to_one_family_and_chains_add_three():
    assert NAMES == tuple(f.name for f in pytorch.FAMILIES)
    assert len(NAMES) == len(set(NAMES)) == 48
    covering = {d.family for d in pytorch.TASKS}
    assert all(d.family in NAMES for d in pytorch.TASKS)
    assert set(NAMES) - covering == CHAINS
    for definition in pytorch.TASKS:  # the family's builder gives the canonical task back
        again = family.family_of("pytorch", definition.family).task(definition.id, definition.inputs)
        assert again.render(again.inputs) == definition.render(definition.inputs), definition.id
        assert again.program == definition.program, definition.id


@pytest.mark.parametrize("name", NAMES)
def test_every_level_generates_a_confirmed_key_that_is_no_canonical_task(name):
    canonical = {wire.encode(dict(d.inputs)) for d in pytorch.TASKS}
    for level in family.LEVELS:
        task = exactgrade.generate("pytorch", seed=0, index=0, level=level, family=name)
        assert (task.family, task.level, task.seed, task.index) == (name, level, 0, 0)
        assert task.id == f"pt-{name}-L{level}-s0-i0"
        assert pytorch.check(task) == [], task.id
        result = independent_check(task)
        assert result.problems == [] and result.used <= HEADROOM, task.id
        assert wire.encode(dict(task.inputs)) not in canonical, task.id
        assert exactgrade.get_task(task.id) is task


def _as_float64(value):
    if type(value) is TensorValue and value.dtype == "float32":
        return TensorValue("float64", value.shape, value.data)
    return value


@pytest.mark.parametrize("level", [1, 3, 5])
def test_a_float64_rerun_of_every_generated_reference_passes_the_float32_key(level):
    """A correct answer computed another way (here: in float64) passes, so the keys hold on any CPU."""
    for name in NAMES:
        task = exactgrade.generate("pytorch", seed=0, index=0, level=level, family=name)
        inputs = {k: _as_float64(v) for k, v in task.inputs.items()}
        verdict = compare(task.expected, run_program(task.program, inputs, "torch"), task.policy)
        assert verdict.ok, (task.id, verdict.reason)


def _reason(name, inputs):
    fam = family.family_of("pytorch", name)
    return fam.reject(materialise(fam.task("pt-test", inputs), "pytorch", "torch"))


def f32(nested):
    return tensor("float32", nested)


def i64(nested):
    return tensor("int64", nested)


ZERO = [0.0] * 4


@pytest.mark.parametrize(("name", "inputs", "fragment"), [
    ("reductions", {"x": f32([[1.0, 3.0, 0.5], [3.0, -1.0, 2.0]])}, "argmax would be ambiguous"),
    ("top_and_kth", {"x": f32([[0.5, 4.0, -1.5, 4.0, 3.0], [1.75, -3.0, 5.5, 0.75, -2.0]])},
     "row 0 holds 4.0 twice"),
    ("running_statistics", {"x": f32([[1.0, 0.5, 1.0, 2.0, -1.0], [0.5, 2.0, -1.0, 3.0, 0.25]])},
     "ties the running maximum"),
    ("mask_above_mean", {"x": f32([[1.0, 2.0, 3.0], [0.0, 2.0, 4.0]])}, "equals the mean 2.0"),
    ("pooling", {"x": f32([[[[1.0, 2.0, 0.5, 0.25, 1.5], [2.0, 0.0, 0.75, 0.5, 1.0],
                             [0.5, 0.25, 3.0, 1.0, 2.5], [1.5, 1.25, 0.0, 2.0, 1.75]]]])},
     "has a tied maximum"),
    ("conv_relu_pool_linear", {"x": f32([[[[1.0, 2.0], [0.5, 1.5]]]]), "conv_weight": f32([[[[1.0]]]]),
                               "conv_bias": f32([0.0]), "fc_weight": f32([[1.0], [1.0]]),
                               "fc_bias": f32([0.25, 0.25])}, "tied largest logits"),
    ("mlp_loss_gradients", {"x": f32([[1.0, -1.0], [0.5, 2.0]]), "target": i64([0, 1]),
                            "w1": f32([[1.0, 1.0], [0.5, -0.25]]), "b1": f32([0.5, 0.25]),
                            "w2": f32([[1.0, -1.0], [0.5, 0.5]]), "b2": f32([0.0, 0.125])},
     "exactly 0: the ReLU gradient would sit on its kink"),
    ("stable_sort", {"x": f32([3.0, 1.0, 2.0, 0.5, 2.5])}, "no tied values"),
    ("kink_gradients", {"x0": f32([-1.0, 0.0, 2.0, 3.0, 1.5])}, "the maximum is not tied"),
    ("pointwise_activations", {"x": f32(ZERO)}, "the key is exactly zero at rows[0]"),
    ("clamp_and_select", {"x": f32([[0.5, 1.0], [-3.0, 1.5]])}, "the clamp would not clip"),
    ("sgd_schedule_clipping", {"w0": f32([0.0, 0.0]), "x": f32([[0.25, 0.0], [0.0, 0.25]]),
                               "y": f32([0.25, 0.25]), "steps": 2, "lr": 0.125, "momentum": 0.5,
                               "weight_decay": 0.015625, "max_norm": 4.0, "step_size": 1, "gamma": 0.5},
     "the clipping never acts"),
])
def test_an_instance_with_a_tie_or_without_its_point_is_rejected_with_the_reason(name, inputs, fragment):
    reason = _reason(name, inputs)
    assert reason is not None and fragment in reason, reason


def test_the_documented_tie_rules_are_kept_and_the_untied_instance_is_accepted():
    # stable sort and x.max()'s gradient split are documented: these families require a tie
    assert _reason("stable_sort", {"x": f32([3.0, 1.0, 2.0, 3.0, 0.5])}) is None
    assert _reason("kink_gradients", {"x0": f32([-1.0, 0.0, 2.0, 3.0, 3.0])}) is None
    assert _reason("reductions", {"x": f32([[1.0, 3.0, 0.5], [2.5, -1.0, 2.0]])}) is None


def test_an_index_that_is_exactly_zero_is_explained_not_refused():
    fam = family.family_of("pytorch", "reductions")
    inputs = {"x": f32([[3.5, 1.0, 0.5], [2.5, -1.0, 2.0]])}
    task = materialise(fam.task("pt-test", inputs), "pytorch", "torch")
    assert task.expected["rows"][0]["argmax"] == TensorValue("int64", (), (0,))
    assert task.zero_reason == "the largest element is the first one: argmax is index 0"
    assert fam.reject(task) is None and pytorch.check(task) == []
    # a zero float is never excused by it
    zeros = TensorValue("float32", (3,), (0.0,) * 3)
    row = {**task.expected["rows"][0], "column_sums": zeros}
    zero_float = dataclasses.replace(task, expected={"rows": [row]})
    assert "exactly zero at rows[0]['column_sums']" in fam.reject(zero_float)


def test_variety_at_level_2_inputs_of_200_indices_and_keys_of_25():
    """Cheap variety: the sampler's first draw for 200 indices (no torch), then 25 full keys."""
    for fam in pytorch.FAMILIES:
        drawn = set()
        for index in range(200):
            draw = family.Draw(f"{family.STREAM_VERSION}|pytorch|{fam.name}|0|{index}|2|0")
            try:
                drawn.add(wire.encode(dict(fam.sample(draw, 2))))
            except family.Reject:
                drawn.add(f"rejected {index}")
        assert len(drawn) >= 190, (fam.name, len(drawn))
        keys = {wire.encode(family.build_instance("pytorch", fam.name, 2, 0, i, checked=False).expected)
                for i in range(5)}
        assert len(keys) == 5, (fam.name, len(keys))


def _mean_size(fam, level):
    """The mean number of tensor elements of the sampler's accepted first draws of 20 indices."""
    sizes = []
    for index in range(20):
        try:
            inputs = fam.sample(family.Draw(f"size|{fam.name}|{index}|{level}"), level)
        except family.Reject:
            continue
        sizes.append(sum(len(v.data) for v in inputs.values() if type(v) is TensorValue))
    assert len(sizes) >= 10, (fam.name, level, "the sampler refuses most of its draws")
    return sum(sizes) / len(sizes)


def test_levels_grow_and_say_what_they_change():
    for fam in pytorch.FAMILIES:
        if fam.build_level is not None:  # the reasoning ladder: each level asks more, sizes need not grow
            assert all(f"L{level} " in fam.levels for level in family.LEVELS), fam.name
            continue
        assert fam.levels and "level" in fam.levels, fam.name
        sizes = [_mean_size(fam, level) for level in family.LEVELS]
        assert sizes[0] < sizes[-1] and sizes[2] <= sizes[4], (fam.name, sizes)


FRESH = """
import json, exactgrade
from exactgrade import wire
tasks = [exactgrade.generate("pytorch", seed=5, index=i, level=1 + i % 5) for i in range(3)]
print(json.dumps({t.id: [wire.encode(dict(t.inputs)), wire.encode(t.expected), t.prompt] for t in tasks}))
"""


def test_generation_is_identical_in_fresh_processes_under_two_hash_seeds():
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, env=env,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        outputs.append(json.loads(out.stdout))
    assert outputs[0] == outputs[1]
    # the mixed stream interleaves the families round-robin, and agrees with this process
    mixed = [exactgrade.generate("pytorch", seed=5, index=i, level=1).family for i in range(3)]
    assert mixed == list(NAMES[:3])
    here = exactgrade.generate("pytorch", seed=5, index=0, level=1)
    assert outputs[0][here.id][1] == wire.encode(here.expected)


def test_a_generated_definition_rebuilds_to_the_same_task():
    task = exactgrade.generate("pytorch", seed=1, index=4, level=3, family="conv_relu_pool_linear")
    fam = family.family_of("pytorch", task.family)
    definition = dataclasses.replace(fam.task(task.id, task.inputs, 3), level=3, seed=1, index=4)
    again = materialise(definition, "pytorch", "torch")
    assert again.prompt == task.prompt and wire.encode(again.expected) == wire.encode(task.expected)
