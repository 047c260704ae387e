"""The family contract, from outside the package: families(), generate(), get_task() on
generated ids, hash seeding, determinism across processes and hash seeds, bounded rejection,
and clear errors for bad arguments. Domain-specific soundness lives in test_families_<domain>."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter

import pytest

import exactgrade
from exactgrade import GenerationError, families, generate, get_task, wire
from exactgrade.family import (
    Draw,
    Family,
    Level,
    Reject,
    build_instance,
    family_of,
    five_levels,
    parse_generated_id,
)
from exactgrade.task import DOMAINS, TaskDef, UnknownTask, materialise, task_defs

DOMAINS_WITH_FAMILIES = [d for d in DOMAINS if families(d)]


def encoded(task: exactgrade.Task) -> dict[str, str]:
    """Everything of a task that must be identical wherever it is generated."""
    return {"id": task.id, "prompt": task.prompt, "api": task.api_description,
            "inputs": wire.encode(dict(task.inputs)), "expected": wire.encode(task.expected),
            "policy": task.policy.describe(), "program": task.program}


# ------------------------------------------------------------------------------ the draw


def test_draw_is_a_fixed_function_of_its_key():
    a, b = Draw("k"), Draw("k")
    assert [a.below(1000) for _ in range(50)] == [b.below(1000) for _ in range(50)]
    assert [Draw("k").integer(5, 9) for _ in range(3)] == [Draw("k").integer(5, 9)] * 3
    assert Draw("k").below(10**30) != Draw("l").below(10**30)


def test_draw_choices_stay_in_range_and_cover_it():
    draw = Draw("range")
    values = [draw.integer(-3, 3) for _ in range(2000)]
    assert set(values) == set(range(-3, 4))
    assert max(Counter(values).values()) < 2 * min(Counter(values).values())
    picked = draw.sample(range(10**6), 5)
    assert len(set(picked)) == 5 and all(0 <= p < 10**6 for p in picked)
    assert sorted(draw.shuffled(range(20))) == list(range(20))
    assert all(value.denominator <= 16 and 0 <= value <= 1 for value in
               (draw.dyadic(0, 1, 4) for _ in range(100)))


@pytest.mark.parametrize(("call", "message"), [
    (lambda d: d.below(0), "positive int"),
    (lambda d: d.integer(3, 2), "empty range"),
    (lambda d: d.choice([]), "empty sequence"),
    (lambda d: d.sample([1, 2], 3), "sample of 3 from 2"),
])
def test_draw_refuses_impossible_requests(call, message):
    with pytest.raises(ValueError, match=message):
        call(Draw("x"))


# ------------------------------------------------------------------------------ registry


@pytest.mark.parametrize("domain", DOMAINS_WITH_FAMILIES)
def test_every_canonical_task_belongs_to_one_known_family(domain):
    names = families(domain)
    assert len(set(names)) == len(names)
    for definition in task_defs(domain):
        assert definition.family in names, f"{definition.id} has family {definition.family!r}"
        assert definition.level is None and definition.seed is None and definition.index is None


@pytest.mark.parametrize("domain", DOMAINS_WITH_FAMILIES)
def test_every_family_documents_its_levels(domain):
    for name in families(domain):
        assert len(family_of(domain, name).levels) > 20, name


# ------------------------------------------------------------------------------ generate


@pytest.mark.parametrize("domain", DOMAINS_WITH_FAMILIES)
def test_generated_task_describes_itself_and_rebuilds_from_its_id(domain):
    name = families(domain)[0]
    task = generate(domain, seed=7, index=3, level=2, family=name)
    assert (task.domain, task.family, task.level, task.seed, task.index) == (domain, name, 2, 7, 3)
    assert parse_generated_id(task.id) == (domain, name, 2, 7, 3)
    assert get_task(task.id) is task
    rebuilt = build_instance(domain, name, 2, 7, 3)  # not the cached object: built again
    assert rebuilt is not task and encoded(rebuilt) == encoded(task)


@pytest.mark.parametrize("domain", DOMAINS_WITH_FAMILIES)
def test_the_mixed_stream_interleaves_every_family(domain):
    names = families(domain)
    stream = [generate(domain, seed=0, index=i, level=1) for i in range(2 * len(names))]
    assert [t.family for t in stream] == list(names) * 2
    assert stream[len(names)].id == generate(domain, seed=0, index=1, level=1, family=names[0]).id
    assert len({t.id for t in stream}) == len(stream)


@pytest.mark.parametrize("domain", DOMAINS_WITH_FAMILIES)
def test_adjacent_seeds_share_no_task(domain):
    """Unlike Random(seed + i), where seed 43's stream is seed 42's shifted by one."""
    count = 3 * len(families(domain))
    first = {encoded(generate(domain, seed=42, index=i, level=2))["inputs"] for i in range(count)}
    second = {encoded(generate(domain, seed=43, index=i, level=2))["inputs"] for i in range(count)}
    assert not first & second


@pytest.mark.parametrize("domain", DOMAINS_WITH_FAMILIES)
def test_no_generated_task_has_canonical_inputs(domain):
    canonical = {wire.encode(dict(d.inputs)) for d in task_defs(domain)}
    for level in (1, 2):
        for index in range(2 * len(families(domain))):
            task = generate(domain, seed=0, index=index, level=level)
            assert wire.encode(dict(task.inputs)) not in canonical, task.id


_GENERATE_IN_A_FRESH_PROCESS = """
import json, sys
from exactgrade import families, generate, wire
out = []
for domain in sys.argv[1:]:
    for name in families(domain):
        for level in (1, 3, 5):
            t = generate(domain, seed=11, index=2, level=level, family=name)
            out.append([t.id, t.prompt, wire.encode(dict(t.inputs)), wire.encode(t.expected),
                        t.policy.describe()])
print(json.dumps(out))
"""


def test_generation_is_identical_in_fresh_processes_with_different_hash_seeds():
    command = [sys.executable, "-c", _GENERATE_IN_A_FRESH_PROCESS, *DOMAINS_WITH_FAMILIES]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONHASHSEED": hash_seed})
                 for hash_seed in ("1", "2")]  # at once: two cores
    outputs = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr[-3000:]
        outputs.append(json.loads(stdout))
    assert outputs[0] == outputs[1]
    here = [[t.id, t.prompt, wire.encode(dict(t.inputs)), wire.encode(t.expected), t.policy.describe()]
            for domain in DOMAINS_WITH_FAMILIES for name in families(domain) for level in (1, 3, 5)
            for t in [generate(domain, seed=11, index=2, level=level, family=name)]]
    assert outputs[0] == here


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"level": 0}, ValueError, "level must be an int from 1 to 5"),
    ({"level": 6}, ValueError, "level must be an int from 1 to 5"),
    ({"level": 2.0}, ValueError, "level must be an int from 1 to 5"),
    ({"level": True}, ValueError, "level must be an int from 1 to 5"),
    ({"seed": -1}, ValueError, "seed must be an int from 0"),
    ({"seed": "0"}, ValueError, "seed must be an int from 0"),
    ({"index": -5}, ValueError, "index must be an int from 0"),
    ({"index": 2**63}, ValueError, "index must be an int from 0"),
    ({"family": "no_such_family"}, ValueError,
     "unknown family 'no_such_family' of the scaling domain; known: "),
    ({"domain": "chemistry"}, ValueError, "unknown domain 'chemistry'"),
])
def test_bad_arguments_are_refused_with_a_reason(kwargs, error, message):
    arguments = {"domain": "scaling", "seed": 0, "index": 0, "level": 1, **kwargs}
    domain = arguments.pop("domain")
    with pytest.raises(error, match=message.replace("(", r"\(").replace("*", r"\*")):
        generate(domain, **arguments)


@pytest.mark.parametrize("task_id", [
    "sc-matmul_roofline-L6-s0-i0",      # level out of range: not an id at all
    "sc-no_such_family-L1-s0-i0",       # unknown family
    "zz-matmul_roofline-L1-s0-i0",      # unknown domain prefix
    "sc-matmul_roofline-L1-s01-i0",     # a non-canonical number
    "sc-999",
])
def test_get_task_refuses_ids_that_name_no_task(task_id):
    with pytest.raises(UnknownTask):
        get_task(task_id)


def test_a_family_that_finds_no_instance_says_which_and_why():
    """Rejection is bounded: a family whose every draw is refused names itself and its stream."""
    real = family_of("scaling", "matmul_roofline")
    sc_000 = dict(task_defs("scaling")[0].inputs)
    canonical_only = dataclasses.replace(real, sample=lambda draw, level: sc_000)
    with pytest.raises(GenerationError, match=r"family 'matmul_roofline' of the scaling domain found no "
                                              r"valid instance in \d+ attempts \(seed 4, index 9, level 2\); "
                                              r"most common rejections: the inputs of a canonical task"):
        build_instance("scaling", canonical_only, 2, 4, 9)

    def refuse(draw: Draw, level: int) -> dict:
        raise Reject("nothing fits")

    with pytest.raises(GenerationError, match="nothing fits"):
        build_instance("scaling", dataclasses.replace(real, sample=refuse), 1, 0, 0)


def test_family_names_must_fit_in_ids():
    real = family_of("scaling", "matmul_roofline")
    with pytest.raises(ValueError, match="lower_snake_case"):
        Family("Bad-Name", real.build, real.sample, real.levels)


# ------------------------------------------------------------------------------ declaring five levels


def _level(question: str, refusal: str | None = None) -> Level:
    """A Level whose builder asks ``question`` through the real matmul_roofline builder and whose
    sampler gives a canonical task's inputs (a real, buildable level)."""
    real = family_of("scaling", "matmul_roofline")
    canonical = next(d for d in task_defs("scaling") if d.family == "matmul_roofline")

    def build(task_id: str, inputs: dict) -> TaskDef:
        return dataclasses.replace(real.build(task_id, inputs), tags=(question,))

    return Level(build, lambda draw, level: canonical.inputs, (lambda task: refusal) if refusal else None)


@pytest.mark.parametrize("count", [0, 4, 6])
def test_five_levels_refuses_another_count_where_the_family_is_declared(count):
    with pytest.raises(ValueError, match=rf"family 'short' declares {count} levels: every family has"):
        five_levels("short", [_level(f"L{n}") for n in range(count)], about="levels")


def test_five_levels_refuses_what_is_not_a_level():
    real = family_of("scaling", "matmul_roofline")
    with pytest.raises(ValueError, match="one Level each"):
        five_levels("mixed", [_level("L1"), _level("L2"), _level("L3"), _level("L4"), real], about="levels")


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
def test_five_levels_asks_each_level_its_own_question_and_rule(level):
    family = five_levels("five", [_level(f"L{n}", f"refused by L{n}") for n in range(1, 6)], about="levels",
                         reject=lambda task: "refused by all" if task.level == 3 else None)
    inputs = family.sample(Draw(f"five|{level}"), level)
    definition = family.task("sc-five-x", inputs, level)
    assert (definition.family, definition.tags) == ("five", (f"L{level}",))
    task = materialise(dataclasses.replace(definition, level=level), "scaling", "python")
    assert family.reject(task) == ("refused by all" if level == 3 else f"refused by L{level}")
    assert family.task("sc-five-c", inputs).tags == ("L1",)  # a canonical task asks level 1's question
