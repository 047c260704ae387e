"""scaling-env task families: every family generates at every level, every generated instance
discriminates (the float twin passes, the named mistake fails, both by their verdict reasons),
the rejection rules refuse the edges they exist for, streams vary, and every canonical task is
an instance of exactly one family."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from functools import cache
from statistics import mean

import pytest

import exactgrade
from exactgrade import compare, wire
from exactgrade.domains import scaling
from exactgrade.domains.scaling import flops
from exactgrade.domains.scaling._task import (
    MAX_KEY_DIGITS,
    as_floats,
    discriminates,
    near_integer,
    near_tie,
    screen,
)
from exactgrade.domains.scaling.roofline.shared import _intensity_not_tied
from exactgrade.domains.scaling.sharding.shared import _min_microbatches_edges
from exactgrade.family import LEVELS, family_of
from exactgrade.task import Task, materialise

FAMILIES = exactgrade.families("scaling")
GRID = [(name, level) for name in FAMILIES for level in LEVELS]


def generated(name: str, level: int, index: int) -> Task:
    return exactgrade.generate("scaling", seed=7, index=index, level=level, family=name)


def float_answer(task: Task, mistake: str | None = None):
    """The twin's answer: on float inputs, or on the exact ones for a closed form in symbols."""
    inputs = dict(task.inputs) if task.meta["symbolic"] else as_floats(dict(task.inputs))
    return task.meta["independent"](**inputs, mistake=mistake)


def instance(name: str, inputs: dict) -> Task:
    """A family's task with chosen inputs, materialised as generation would (unchecked)."""
    return materialise(family_of("scaling", name).task("sc-edge", inputs), "scaling", scaling.PROFILE)


# ------------------------------------------------------------------------ canonical tasks


def test_every_canonical_task_is_an_instance_of_exactly_one_family():
    assert FAMILIES == tuple(f.name for f in scaling.FAMILIES) and len(set(FAMILIES)) == len(FAMILIES)
    covered = {name: [d.id for d in scaling.TASKS if d.family == name] for name in FAMILIES}
    assert sorted(i for ids in covered.values() for i in ids) == [d.id for d in scaling.TASKS]
    for definition in scaling.TASKS:
        rebuilt = family_of("scaling", definition.family).task(definition.id, definition.inputs)
        # One question text: the family's template renders the canonical prompt.
        assert rebuilt.render(rebuilt.inputs) == definition.render(definition.inputs), definition.id
        assert (rebuilt.reference, rebuilt.meta) == (definition.reference, definition.meta)
    # A family without canonical tasks is allowed (a chained form of another family).
    assert [name for name, ids in covered.items() if not ids] == ["pipeline_step_time"]
    assert covered["matmul_roofline"] == ["sc-000", "sc-003"]
    assert covered["layer_flops"] == ["sc-007", "sc-014"] and covered["adam_memory"] == ["sc-015", "sc-020"]


def test_headlines_stay_tagged_and_only_sampled_phenomena_tag_a_family():
    assert scaling.check(exactgrade.get_task("sc-000")) == []  # the domain-level headline check
    family_tags = {f.name: f.task("sc-x", d.inputs).tags for f in scaling.FAMILIES for d in scaling.TASKS
                   if d.family == f.name}
    assert {name: tags for name, tags in family_tags.items() if tags} == {
        "matmul_roofline": ("headline:matmul_roofline_crossover",),
        "time_to_train": ("headline:time_to_train",), "model_flops_utilization": ("headline:mfu",),
        "pipeline_bubble": ("headline:pipeline_bubble",)}
    assert exactgrade.get_task("sc-028").tags == ("headline:decode_memory_bound",)


# ------------------------------------------------------------------------ every family, every level


@pytest.mark.parametrize(("name", "level"), GRID, ids=[f"{n}-L{lv}" for n, lv in GRID])
def test_generated_instances_discriminate(name, level):
    for index in (0, 1):
        task = generated(name, level, index)
        assert (task.family, task.level, task.seed, task.index) == (name, level, 7, index)
        assert scaling.check(task) == []
        twin = compare(task.expected, float_answer(task), task.policy)
        assert twin.ok and twin.reason == "", twin.reason
        mistake = task.meta["mistake"]
        wrong = compare(task.expected, float_answer(task, mistake), task.policy)
        assert not wrong.ok
        assert re.match(r"rows\[\d+\]\['\w+'\]: expected ", wrong.reason), wrong.reason
        assert ("not close: relative difference" in wrong.reason or ", got str " in wrong.reason
                or ", got bool " in wrong.reason
                or wrong.reason.endswith(("exact values differ", "None only equals None"))
                or (task.meta["symbolic"] and ": they differ at " in wrong.reason)), wrong.reason
        # The cheap screen never contradicts compare (it only settles what is plain).
        for answer, verdict in ((float_answer(task), twin), (float_answer(task, mistake), wrong)):
            assert screen(task.expected, answer) in (verdict.ok, None)


@cache
def stream(name: str, level: int, count: int) -> tuple[Task, ...]:
    return tuple(generated(name, level, index) for index in range(count))


@pytest.mark.parametrize("name", FAMILIES)
def test_variety_and_no_canonical_inputs_at_level_2(name):
    tasks = stream(name, 2, 200)
    assert len({wire.encode(t.expected) for t in tasks}) >= 190
    canonical = {wire.encode(dict(d.inputs)) for d in scaling.TASKS}
    assert not [t.id for t in tasks if wire.encode(dict(t.inputs)) in canonical]


@pytest.mark.parametrize("name", FAMILIES)
def test_higher_levels_are_at_least_as_large(name):
    """Where level 5 asks level 1's question (the same reference), it is at least as large; a
    level with a question of its own adds reasoning instead (the ladder)."""

    def size(task: Task) -> int:
        return len(task.expected["rows"]) + len(wire.encode(dict(task.inputs)))

    def question(level: int) -> str:
        return generated(name, level, 0).program.rsplit("result = ", 1)[1].split("(")[0]

    if question(5) != question(1):
        return  # level 5 asks a question of its own: no size order to hold
    sizes = [mean(size(generated(name, level, index)) for index in range(4)) for level in (1, 5)]
    assert sizes[0] <= sizes[1]


def test_the_same_ids_rebuild_identically_in_fresh_processes_with_other_hash_seeds():
    ids = [generated(name, 3, 5).id for name in FAMILIES]
    script = ("import json, sys; from exactgrade import get_task, wire\n"
              "print(json.dumps([[wire.encode(t.prompt), wire.encode(dict(t.inputs)),\n"
              "                   wire.encode(t.expected)] for t in map(get_task, sys.argv[1:])]))")
    here = [[wire.encode(t.prompt), wire.encode(dict(t.inputs)), wire.encode(t.expected)]
            for t in map(exactgrade.get_task, ids)]
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run([sys.executable, "-c", script, *ids], env=env, capture_output=True, text=True,
                             check=True, timeout=300)
        assert json.loads(out.stdout) == here


# ------------------------------------------------------------------------ rejection at the edges


def test_a_bound_on_the_compute_memory_tie_is_refused():
    # batch 2 of a 4 x 4 matmul in bf16: 64 FLOPs over 64 bytes = critical intensity 1.
    inputs = {"batches": [2], "d_model": 4, "d_ff": 4, "weight_bytes": 2, "activation_bytes": 2,
              "peak_flops": 10**12, "hbm_bandwidth": 10**12}
    task = instance("matmul_roofline", inputs)
    assert task.expected["rows"][0]["intensity"] == 1
    reason = family_of("scaling", "matmul_roofline").reject(task)
    assert reason == ("row 0: the intensity against the critical intensity sits within 1e-9 of the tie "
                      "(1 vs 1)")
    off_tie = instance("matmul_roofline", dict(inputs, hbm_bandwidth=10**12 + 10**5))  # 1e-7 away
    assert _intensity_not_tied(off_tie) is None


@pytest.mark.parametrize(("limit", "stages", "why"), [
    (Fraction(2, 25), 3, "the sc-025 case: (3 - 1) * 23/25 / (2/25) is exactly 23"),
    (Fraction(10**12, 3 * 10**12 + 1), 2, "2 + 1e-12: a float ceil may give 2 or 3"),
])
def test_an_integer_answer_at_a_rounding_edge_is_refused(limit, stages, why):
    task = instance("min_microbatches", {"stage_counts": [stages], "max_bubble_fraction": limit})
    reason = family_of("scaling", "min_microbatches").reject(task)
    assert reason is not None and reason.startswith(f"{stages} stages: the microbatch bound = ") and \
        reason.endswith("is too close to an integer: a float method could round it the other way"), why
    assert _min_microbatches_edges(instance("min_microbatches", {
        "stage_counts": [stages], "max_bubble_fraction": Fraction(3, 40)})) is None


def test_a_key_beyond_the_digit_limit_is_refused():
    inputs = dict(scaling.TASKS[9].inputs)  # sc-009, time to train
    inputs["clusters"] = [dict(inputs["clusters"][0], mfu=Fraction(10**61 + 1, 10**62))]
    task = instance("time_to_train", inputs)
    assert discriminates(task) == f"a key number needs more than {MAX_KEY_DIGITS} digits"


def test_an_instance_the_mistake_gets_right_is_refused():
    tied = dict(flops.TASKS[6].inputs, tied_embeddings=True)  # sc-013 with one shared embedding
    assert discriminates(instance("dense_param_count", tied)) == \
        "the mistake 'embeddings_counted_once' gives the right answer"
    assert discriminates(instance("dense_param_count", dict(flops.TASKS[6].inputs))) is None


@pytest.mark.parametrize(("value", "near"), [
    (5, True), (Fraction(7, 2), False), (Fraction(10**12, 10**12 - 1), True),   # 1 + 1e-12
    (Fraction(2 * 10**11 + 1, 2), False),          # 1e11 + 1/2: far from both neighbours
    (Fraction(10**11 * 10**6 + 1, 10**6), True),   # 1e11 + 1e-6: inside the 1e-5 margin
    (Fraction(10**13 + 1, 10), False),             # 1e12 + 0.1: outside 1e-5 + 1e-14 * 1e12
    (Fraction(10**14 + 1, 100), True),             # 1e12 + 0.01: inside it
])
def test_near_integer_margins(value, near):
    assert near_integer(value) is near


def test_near_tie_is_relative():
    assert near_tie(10**12, 10**12 + 999) and not near_tie(10**12, 10**12 + 10**4)
    assert near_tie(Fraction(1, 3), Fraction(1, 3)) and not near_tie(1, 2)


@pytest.mark.parametrize(("expected", "answer", "settled"), [
    (Fraction(1, 3), 1 / 3, True),
    (Fraction(1, 3), (1 / 3) * (1 + 1e-6), False),
    (Fraction(1, 3), (1 / 3) * (1 + 1e-9), None),    # near the tolerance: left to compare
    (Fraction(1, 3), Fraction(1, 3), None),          # exact answers: left to compare
    (5, 5, True), (5, 5.0, False), (5, True, False),
    ("compute", "memory", False), (None, None, True), (True, 1, False),
    ({"rows": [1]}, {"rows": [1], "extra": 2}, False), ([1], [1, 2], False), ([1], (1,), None),
])
def test_the_screen_agrees_with_compare(expected, answer, settled):
    assert screen(expected, answer) is settled
    if settled is not None:
        assert compare(expected, answer, scaling.TASKS[0].policy).ok is settled
