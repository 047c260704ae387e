"""Every hardware number a scaling task poses is one a real part has (exactgrade/domains/scaling/
hardware.py): each input that names a hardware quantity lies in its table range, every chip has a
ridge point of a real order, named memory tiers come in the table's order, and a name that looks
like hardware but has no range fails (a new family cannot slip an unchecked number in).

EXACTGRADE_HARDWARE_INSTANCES sets the instances per (family, level): the suite default keeps the
suite fast; 200 is the full check (docs/scaling-hardware.md gives the command)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

import exactgrade
from exactgrade.domains import scaling
from exactgrade.domains.scaling import hardware
from exactgrade.domains.scaling.hardware import (
    HBM_PER_PEAK,
    INPUT_RANGES,
    TIER_RANGES,
    TIERS,
    capacity_per_peak_ok,
    full_read_ok,
    input_range,
)
from exactgrade.family import LEVELS
from exactgrade.task import Task, TaskDef

FAMILIES = exactgrade.families("scaling")
COUNT = int(os.environ.get("EXACTGRADE_HARDWARE_INSTANCES", "") or 6)
SEED = 23

CAPACITIES = ("hbm_bytes", "hbm_bytes_per_chip", "hbm_bytes_per_device", "hbm_capacity")
LOOKS_LIKE_HARDWARE = re.compile(r"bandwidth|hbm|peak_flops|achieved_flops|memor|sram")
NOT_HARDWARE = {
    "hbm_fractions": "shares of a weight matrix kept in HBM, not a hardware number",
    "bandwidth": "a memory tier's bandwidth: checked against its tier's range below",
}


def named_leaves(value: Any, name: str = "") -> Iterator[tuple[str, Any]]:
    """(input name, value) of every number in the inputs; a list element keeps its list's name
    and a dict entry its own key."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from named_leaves(item, key)
    elif isinstance(value, list):
        for item in value:
            yield from named_leaves(item, name)
    elif isinstance(value, (int, Fraction)) and not isinstance(value, bool):
        yield name, value


def dicts(value: Any) -> Iterator[dict]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from dicts(item)


WHAT_IF = re.compile(r"_\d+(\.\d+)?x_")
"""A chip named for its scaling of another (sc-028's `chip_a_2.5x_flops`): a what-if the prompt names."""


def ridge_problems(chip: dict) -> list[str]:
    """A chip's ridge point outside the real range (hardware.RIDGE), or for a chip named as a
    what-if variant, outside hardware.WHAT_IF_RIDGE."""
    if not chip.get("hbm_bandwidth") or "peak_flops" not in chip:
        return []
    ridges = hardware.WHAT_IF_RIDGE if WHAT_IF.search(str(chip.get("name", ""))) else hardware.RIDGE
    ridge = Fraction(chip["peak_flops"]) / chip["hbm_bandwidth"]
    return [] if ridge in ridges else [f"ridge point {float(ridge):.4g} FLOP/byte outside {ridges.parts}"]


def capacity_per_peak_problems(family: str, chip: dict) -> list[str]:
    """A chip's HBM (of one chip: a name whose range is hardware.HBM_CAPACITY, not a family's whole
    server) outside hardware.HBM_PER_PEAK of its peak FLOP/s: 36 GB at 1.77 PFLOP/s is no part's."""
    if not chip.get("peak_flops"):
        return []
    return [
        f"{name} = {float(chip[name]):.4g} bytes at {float(chip['peak_flops']):.4g} FLOP/s: "
        f"{float(Fraction(chip[name] * 10**6, chip['peak_flops'])):.4g} GB per PFLOP/s outside "
        f"{HBM_PER_PEAK.parts}"
        for name in CAPACITIES
        if chip.get(name)
        and input_range(family, name) is INPUT_RANGES[name]
        and not capacity_per_peak_ok(chip[name], chip["peak_flops"])
    ]


def hardware_problems(task: Task | TaskDef) -> list[str]:
    """Every way one task's hardware inputs leave the table."""
    family = task.family or ""
    problems = []
    for name, value in named_leaves(dict(task.inputs)):
        rng = input_range(family, name)
        if rng is None:
            if LOOKS_LIKE_HARDWARE.search(name) and name not in NOT_HARDWARE and value != 0:
                problems.append(f"{name} = {value} looks like hardware but has no range in hardware.py")
        elif value not in rng:
            problems.append(
                f"{name} = {float(value):.4g} {rng.unit} outside [{rng.low:.3g}, {rng.high:.3g}] "
                f"({rng.parts})"
            )
    for chip in dicts(dict(task.inputs)):
        problems += ridge_problems(chip)
        if "vector_flops" in chip and chip.get("hbm_bandwidth"):
            ridge = Fraction(chip["vector_flops"]) / chip["hbm_bandwidth"]
            if ridge not in hardware.VECTOR_RIDGE:
                problems.append(
                    f"vector ridge {float(ridge):.4g} FLOP/byte outside {hardware.VECTOR_RIDGE.parts}"
                )
        for name in CAPACITIES:
            if chip.get(name) and chip.get("hbm_bandwidth"):
                if not full_read_ok(chip[name], chip["hbm_bandwidth"]):
                    ms = float(Fraction(chip[name] * 1000, chip["hbm_bandwidth"]))
                    problems.append(f"full HBM read {ms:.4g} ms outside {hardware.FULL_READ_MS.parts}")
        problems += capacity_per_peak_problems(family, chip)
    tiers = task.inputs.get("tiers")
    if tiers is not None:
        order = [name for name, _ in TIERS]
        for tier in tiers:
            if tier["name"] not in TIER_RANGES:
                problems.append(f"tier {tier['name']!r} is not in the table")
            elif tier["bandwidth"] not in TIER_RANGES[tier["name"]]:
                problems.append(f"tier {tier['name']} at {tier['bandwidth']} bytes/s is outside its range")
        names = [tier["name"] for tier in tiers if tier["name"] in order]
        if names != sorted(names, key=order.index):
            problems.append(f"tiers {names} are not in the table's order {order}")
    return problems


@pytest.mark.parametrize(("name", "level"), [(name, level) for name in FAMILIES for level in LEVELS])
def test_every_hardware_input_lies_in_its_table_range(name, level):
    found = []
    for index in range(COUNT):
        task = exactgrade.generate("scaling", seed=SEED, index=index, level=level, family=name)
        found += [f"{task.id}: {problem}" for problem in hardware_problems(task)]
    assert found == []


def test_canonical_tasks_pose_real_hardware():
    found = [f"{d.id}: {p}" for d in scaling.TASKS for p in hardware_problems(d)]
    assert found == []


SERVER = "max_batch_for_kv_cache"


@pytest.mark.parametrize(
    ("inputs", "problem", "family"),
    [
        ({"peak_flops": 169 * 10**15, "hbm_bandwidth": 3 * 10**12}, "peak_flops", "matmul_roofline"),
        ({"peak_flops": 10**15, "hbm_bandwidth": 169 * 10**12}, "hbm_bandwidth", "matmul_roofline"),
        ({"peak_flops": 2 * 10**14, "hbm_bandwidth": 8 * 10**12}, "ridge point 25", "matmul_roofline"),
        ({"hbm_bytes": 82 * 10**12}, "hbm_bytes", "matmul_roofline"),
        ({"link_bandwidth": 43 * 10**11}, "link_bandwidth", "matmul_roofline"),
        (
            {"chips": [{"name": "chip_a", "peak_flops": 10**15, "hbm_bandwidth": 2 * 10**11}]},
            "hbm_bandwidth",
            "matmul_roofline",
        ),
        (
            {
                "tiers": [
                    {"name": "hbm", "bandwidth": 2 * 10**12},
                    {"name": "nvme_offload", "bandwidth": 15 * 10**11},
                ]
            },
            "tier nvme_offload",
            "matmul_roofline",
        ),
        (
            {
                "tiers": [
                    {"name": "nvme_offload", "bandwidth": 7 * 10**9},
                    {"name": "hbm", "bandwidth": 2 * 10**12},
                ]
            },
            "not in the table's order",
            "matmul_roofline",
        ),
        ({"weird_bandwidth": 10**9}, "looks like hardware", "matmul_roofline"),
        ({"hbm_bytes": 16 * 10**9, "hbm_bandwidth": 8 * 10**12}, "full HBM read 2 ms", "matmul_roofline"),
        ({"hbm_bytes": 192 * 10**9, "hbm_bandwidth": 10**12}, "full HBM read 192 ms", "matmul_roofline"),
        ({"peak_flops": 10**14, "hbm_bandwidth": 15 * 10**11}, "ridge point 66.67", "matmul_roofline"),
        ({"peak_flops": 2 * 10**15, "hbm_bandwidth": 3 * 10**12}, "ridge point 666.7", "matmul_roofline"),
        ({"tiers": [{"name": "hard_disk", "bandwidth": 3 * 10**8}]}, "tier hard_disk", "matmul_roofline"),
        # elementwise ops at a tensor-core peak (1.84 PFLOP/s): not a vector unit's
        (
            {"vector_flops": 1838 * 10**12, "hbm_bandwidth": 5 * 10**12},
            "vector_flops",
            "elementwise_roofline",
        ),
        (
            {"vector_flops": 30 * 10**12, "hbm_bandwidth": 6 * 10**12},
            "vector ridge 5 FLOP",
            "elementwise_roofline",
        ),
        # the review's instances: a server's HBM read at one chip's bandwidth, 16 chips of 192 GB,
        # a tensor-parallel group over a 25 GB/s network link
        ({"hbm_bytes": 562 * 10**9, "hbm_bandwidth": 5542 * 10**9}, "full HBM read 101.4 ms", SERVER),
        ({"hbm_bytes": 3072 * 10**9}, "hbm_bytes = 3.072e+12", SERVER),
        ({"link_bandwidth": 25 * 10**9}, "link_bandwidth = 2.5e+10", "tensor_parallel_layer"),
        ({"link_bandwidth": 25 * 10**9}, "link_bandwidth = 2.5e+10", "sharded_decode_latency"),
        # seed 6464's review: 36.2 GB at 1.77 PFLOP/s, 171 GB at 138 TFLOP/s (20.5 and 1239 GB per
        # PFLOP/s); a whole server's HBM is not one chip's
        (
            {"hbm_bytes_per_device": 362 * 10**8, "peak_flops": 177 * 10**13},
            "20.45 GB per PFLOP/s",
            "zero_memory",
        ),
        (
            {"chips": [{"name": "chip_a", "hbm_capacity": 171 * 10**9, "peak_flops": 138 * 10**12}]},
            "1239 GB per PFLOP/s",
            "tensor_parallel_layer",
        ),
    ],
)
def test_the_range_check_refuses_what_does_not_exist(inputs, problem, family):
    task = Task(
        id="sc-x",
        domain="scaling",
        category="roofline",
        prompt="",
        api_description="",
        inputs=inputs,
        expected=None,
        policy=None,
        program="",
        family=family,
    )
    problems = hardware_problems(task)
    assert any(problem in p for p in problems), problems
