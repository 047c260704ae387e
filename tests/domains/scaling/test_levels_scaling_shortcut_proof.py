"""Upper levels of four scaling families that no shortcut passes, each with a test that would catch
the shortcut: fsdp_step_communication L5's node rule decides rows and the smallest group that fits
is not the answer (two shortcut solvers fail on a share of the instances); zero_memory L5 picks
every stage on its declared share; the L2 of matmul_fraction_of_peak and weight_streaming_roofline
asks its own fields, withholds level 1's formulas, and its reference gives hand-derived keys; the
admission L5 limits bind."""

from __future__ import annotations

from fractions import Fraction

import pytest

import exactgrade
from exactgrade.compare import compare
from exactgrade.domains import scaling
from exactgrade.domains.scaling._text import INPUT_LISTING
from exactgrade.domains.scaling.memory.max_batch_for_kv_cache import at_limit, below_limit
from exactgrade.domains.scaling.roofline.matmul_fraction_of_peak import matmul_intensity_fraction
from exactgrade.domains.scaling.roofline.weight_streaming_roofline import streamed_matmul_rate
from exactgrade.domains.scaling.sharding import fsdp_step_communication
from exactgrade.family import family_of
from exactgrade.task import materialise

INSTANCES = 30  # generated L5 instances per shortcut (about a second in all)


def _instances(name: str, level: int) -> list:
    return [exactgrade.generate("scaling", seed=19, index=i, level=level, family=name)
            for i in range(INSTANCES)]


# ---------------------------------------------------------------- fsdp_step_communication L5


def _step(i: dict, devices: int, group: int, fast_gathers: bool) -> Fraction:
    weights = i["n_params"] * i["param_bytes"]
    gathers = 3 * weights * Fraction(group - 1, group) / (i["intra_bandwidth"] if fast_gathers else
                                                           i["inter_bandwidth"])
    replicas = devices // group
    sync = 2 * Fraction(weights, group) * Fraction(replicas - 1, replicas) / (
        i["intra_bandwidth"] if devices <= i["node_size"] else i["inter_bandwidth"])
    return 6 * i["n_params"] * i["tokens_per_device"] / (i["peak_flops"] * i["mfu"]) + gathers + sync


def _fits(i: dict, group: int) -> bool:
    return (Fraction(i["n_params"] * i["state_bytes_per_param"], group)
            + i["tokens_per_device"] * i["act_bytes_per_token"] <= i["hbm_bytes_per_device"])


def _rows(i: dict, choose) -> dict:
    rows = []
    for d in i["device_counts"]:
        group = choose(i, d, [s for s in range(1, d + 1) if d % s == 0 and _fits(i, s)])
        rows.append({"devices": d, "group_size": group,
                     "step_time_s": None if group is None else _step(i, d, group, group <= i["node_size"])})
    return {"rows": rows}


def ignore_node_rule(i, d, fitting):
    """Every divisor allowed; a group of at most node_size devices gathers on the fast link."""
    return min(fitting, key=lambda s: (_step(i, d, s, s <= i["node_size"]), s), default=None)


def smallest_fitting(i, d, fitting):
    """The smallest group that fits and obeys the node rule (memory decides alone)."""
    node = i["node_size"]
    return next((s for s in fitting if node % s == 0 or s % node == 0), None)


@pytest.mark.parametrize("shortcut", [ignore_node_rule, smallest_fitting], ids=lambda f: f.__name__)
def test_fsdp_l5_shortcuts_fail_on_a_third(shortcut):
    tasks = _instances("fsdp_step_communication", 5)
    wrong = [not compare(t.expected, _rows(t.inputs, shortcut), t.policy).ok for t in tasks]
    assert sum(wrong) >= len(tasks) // 3, f"{shortcut.__name__} passes {len(tasks) - sum(wrong)} times"


# node 4; the state needs a group of at least 5 (60 / s <= 12); compute 6 * 60 / 360 = 1 s; links 60
# and 6 B/s. d=12: the rule allows 1, 2, 4, 12: s=12 gathers 3 * 60 * 11/12 / 6 = 27.5 s over the slow
# link, no replicas: 57/2 (ignoring the rule, s=6: 1 + 25 + 2*10*(1/2)/6 = 83/3 < 57/2). d=8: s=8,
# 1 + 3 * 60 * 7/8 / 6 = 109/4. d=4: no allowed group fits.
BINDS = {"n_params": 60, "param_bytes": 1, "state_bytes_per_param": 1, "act_bytes_per_token": 0,
         "hbm_bytes_per_device": 12, "tokens_per_device": 1, "node_size": 4, "device_counts": [4, 8, 12],
         "peak_flops": 360, "mfu": 1, "intra_bandwidth": 60, "inter_bandwidth": 6}
# The same with groups of 2 fitting (60 / s <= 30). d=8: s=2: 1 + 1.5 + 2*30*(3/4)/6 = 10; s=4:
# 1 + 2.25 + 2*15*(1/2)/6 = 23/4 (the fastest: a whole node); s=8: 109/4. d=2: s=2, 1 + 1.5 = 5/2.
WHOLE_NODE = dict(BINDS, hbm_bytes_per_device=30, device_counts=[2, 8])


@pytest.mark.parametrize(("inputs", "rows", "binds", "not_smallest"), [
    (BINDS, [(4, None, None), (8, 8, Fraction(109, 4)), (12, 12, Fraction(57, 2))], True, False),
    (WHOLE_NODE, [(2, 2, Fraction(5, 2)), (8, 4, Fraction(23, 4))], False, True),
], ids=["node_rule_binds", "not_smallest"])
def test_fsdp_l5_hand_derived_keys_and_branches(inputs, rows, binds, not_smallest):
    task = materialise(family_of("scaling", "fsdp_step_communication").task("sc-edge", inputs, 5), "scaling",
                       scaling.PROFILE)
    assert task.expected["rows"] == [{"devices": d, "group_size": s, "step_time_s": t} for d, s, t in rows]
    assert (fsdp_step_communication.node_rule_binds(task), fsdp_step_communication.not_smallest(task)) == (
        binds, not_smallest)


def test_fsdp_l5_states_the_node_rule_inside_one_node():
    task = exactgrade.generate("scaling", seed=19, index=0, level=5, family="fsdp_step_communication")
    assert "even when d <= node_size" in task.prompt


# ---------------------------------------------------------------- zero_memory L5


@pytest.mark.parametrize("stage", ["replicated", "zero1_optimizer", "zero2_gradients", "zero3_parameters"])
def test_zero_l5_every_stage_wins_on_its_declared_share(stage):
    branch = next(b for b in family_of("scaling", "zero_memory").branches if b.name == stage)
    assert 5 in branch.levels and branch.share >= Fraction(1, 4)
    won = sum(any(row["stage"] == stage for row in t.expected["rows"]) for t in _instances("zero_memory", 5))
    assert won >= branch.share * INSTANCES, f"{stage} wins in {won} of {INSTANCES}"


# ---------------------------------------------------------------- L2s of the two roofline families

# [1, 4, 4]: 32 FLOPs over 24 bytes, 4 s of compute against 6 s of traffic: memory, 32/6/8 = 2/3.
# [4, 4, 4]: 128 FLOPs over 48 bytes, 16 s against 12 s: compute, 1.
# Streaming, batch 1 of [4, 4]: 32 FLOPs, 24 bytes, 4 s of compute; 16 B/s: 3/2 s, compute, 8 FLOP/s;
# 4 B/s: 6 s, memory, 16/3 FLOP/s.
L2_CASES = [
    ("matmul_fraction_of_peak", matmul_intensity_fraction,
     {"shapes": [[1, 4, 4], [4, 4, 4]], "bytes_per_value": 1, "peak_flops": 8, "hbm_bandwidth": 4},
     [{"shape": [1, 4, 4], "intensity": Fraction(4, 3), "bound": "memory",
       "fraction_of_peak": Fraction(2, 3)},
      {"shape": [4, 4, 4], "intensity": Fraction(8, 3), "bound": "compute", "fraction_of_peak": 1}],
     "(its FLOPs / time / peak_flops)"),
    ("weight_streaming_roofline", streamed_matmul_rate,
     {"batch": 1, "d_model": 4, "d_ff": 4, "bytes_per_value": 1, "peak_flops": 8,
      "tiers": [{"name": "hbm", "bandwidth": 16}, {"name": "host", "bandwidth": 4}]},
     [{"tier": "hbm", "time_s": 4, "bound": "compute", "achieved_flops": 8},
      {"tier": "host", "time_s": 6, "bound": "memory", "achieved_flops": Fraction(16, 3)}],
     "(peak_flops / bandwidth"),
]


@pytest.mark.parametrize(("name", "reference", "inputs", "rows", "level1_formula"), L2_CASES,
                         ids=[c[0] for c in L2_CASES])
def test_l2_asks_its_own_question(name, reference, inputs, rows, level1_formula):
    assert reference(**inputs)["rows"] == rows
    one, two = (exactgrade.generate("scaling", seed=19, index=0, level=lv, family=name) for lv in (1, 2))
    assert level1_formula in one.prompt and level1_formula not in two.prompt
    assert one.prompt.split(INPUT_LISTING)[0] != two.prompt.split(INPUT_LISTING)[0]
    assert set(one.expected["rows"][0]) != set(two.expected["rows"][0])
    assert "fused multiply-add" in two.prompt


def test_matmul_l2_puts_two_shapes_or_more_on_each_side_of_the_ridge():
    """L1's shapes are compute-bound 4 times in 5, where the fraction of peak is always 1: 89 of 100
    L2 instances had one memory-bound row."""
    for task in _instances("matmul_fraction_of_peak", 2):
        bounds = [row["bound"] for row in task.expected["rows"]]
        assert min(bounds.count("memory"), bounds.count("compute")) >= 2, (task.id, bounds)


# ---------------------------------------------------------------- max_batch_for_kv_cache L5

# 10 weight bytes, 2 bytes per cached position, 40 bytes of HBM and 40 bytes of budget at 1 B/s.
# [1, 2, 3, 5], shortest first: reads 12, 16, 22, 32 (all allowed); 1/12, 1/8, 3/22, 1/8: the
# length-5 request lowers the rate (5 * 2 * 3 = 30 > 22), best 3 below the limit. Twenty of
# length 1: reads 10 + 2B <= 40 allow 15, B / (10 + 2B) rises all the way: 15, 3/8, at the limit.
ADMISSION = {"hbm_bytes": 40, "n_params": 10, "weight_bytes": 1, "layers": 1, "n_kv_heads": 1, "head_dim": 1,
             "kv_bytes": 1, "hbm_bandwidth": 1, "latency_budget_s": Fraction(40),
             "pools": [[5, 1, 3, 2], [1] * 20]}


def test_admission_l5_hand_derived_key_and_branches():
    family = family_of("scaling", "max_batch_for_kv_cache")
    task = materialise(family.task("sc-edge", ADMISSION, 5), "scaling", scaling.PROFILE)
    assert task.expected["rows"] == [{"requests": 3, "tokens_per_s": Fraction(3, 22)},
                                     {"requests": 15, "tokens_per_s": Fraction(3, 8)}]
    assert below_limit(task) and at_limit(task)


def _largest_allowed(task) -> dict:
    """Round 2's pattern: the most shortest-first requests the HBM and the budget allow."""
    i = task.inputs
    weights, per_position = i["n_params"] * i["weight_bytes"], 2 * i["layers"] * i["n_kv_heads"] * i[
        "head_dim"] * i["kv_bytes"]
    rows = []
    for pool in i["pools"]:
        read, count = weights, 0
        for length in sorted(pool):
            if read + per_position * length > min(i["hbm_bytes"], i["latency_budget_s"] * i["hbm_bandwidth"]):
                break
            read, count = read + per_position * length, count + 1
        rows.append({"requests": count, "tokens_per_s": Fraction(count * i["hbm_bandwidth"], read)})
    return {"rows": rows}


def test_admission_l5_the_largest_allowed_batch_fails():
    tasks = _instances("max_batch_for_kv_cache", 5)
    assert not any(compare(t.expected, _largest_allowed(t), t.policy).ok for t in tasks)
    assert sum(at_limit(t) for t in tasks) >= INSTANCES // 3  # the limits still bind
