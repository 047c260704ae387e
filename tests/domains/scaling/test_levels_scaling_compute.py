"""The upper levels of the roofline, flops and memory families: every level asks its own question
(none repeats L1's at L3 or L4's at L5), the keys of the searches agree with an exhaustive exact
search written here, and the degenerate instances stay refused (a whole-None layer_flops L5, a
constant ratio in adam_memory L2, unreached None branches)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

import exactgrade
from exactgrade import compare
from exactgrade.domains.scaling._task import as_floats
from exactgrade.domains.scaling._text import INPUT_LISTING
from exactgrade.domains.scaling.flops.attention_crossover import hybrid_crossover
from exactgrade.domains.scaling.roofline.decode_attention_roofline import kv_serving_plan
from exactgrade.domains.scaling.roofline.elementwise_roofline import fusion_plan
from exactgrade.domains.scaling.roofline.min_compute_bound_batch import format_min_batch
from exactgrade.family import LEVELS, family_of

SEED = 23


def task(family: str, level: int, index: int = 0):
    return exactgrade.generate("scaling", seed=SEED, index=index, level=level, family=family)


def question(family: str, level: int) -> str:
    return task(family, level).prompt.split(INPUT_LISTING)[0]


# family -> the levels that still share a question (each tuple: levels asking one question)
SHARED = {
    "elementwise_roofline": (),
    "decode_attention_roofline": (),
    "dense_param_count": (),
    "utilization_by_counting": (),
    "attention_crossover": (),
    "min_compute_bound_batch": (),
    "kv_cache_size": (),
    "largest_model": (),
    "adam_memory": (),
    "max_batch_for_kv_cache": (),
    "time_to_train": (),
    "model_flops_utilization": (),
    "moe_training_flops": (),
    "matmul_fraction_of_peak": (),
    "weight_streaming_roofline": (),
}


@pytest.mark.parametrize("family", sorted(SHARED))
def test_each_level_asks_its_own_question(family):
    texts = {level: question(family, level) for level in LEVELS}
    for group in SHARED[family]:
        assert len({texts[level] for level in group}) == 1, (family, group)
    distinct = [lv for lv in LEVELS if not any(lv in g and lv != min(g) for g in SHARED[family])]
    assert len({texts[lv] for lv in distinct}) == len(distinct), family  # no other level repeats


def _passes(t, answer) -> bool:
    return compare(t.expected, answer, t.policy).ok


# ---------------------------------------------------------------- exhaustive exact searches


def _fusion_plan_by_enumeration(i: dict) -> dict:
    """Every split of the chain (itertools over the n-1 boundaries), exact."""
    ops, n = i["ops"], len(i["ops"])
    best = None
    for cuts in itertools.product((False, True), repeat=n - 1):
        groups, start = [], 0
        for position, cut in enumerate(cuts, start=1):
            if cut:
                groups.append((start, position))
                start = position
        groups.append((start, n))
        if max(b - a for a, b in groups) > i["max_ops_per_kernel"]:
            continue
        total = Fraction(0)
        for a, b in groups:
            read = i["input_bytes"] if a == 0 else ops[a - 1]["output_bytes"]
            flops = i["n_elements"] * sum(op["flops_per_element"] for op in ops[a:b])
            moved = i["n_elements"] * (read + ops[b - 1]["output_bytes"])
            total += i["launch_overhead_s"] + max(
                Fraction(flops, i["vector_flops"]), Fraction(moved, i["hbm_bandwidth"])
            )
        if best is None or (total, len(groups)) < best:
            best = (total, len(groups))
    return {"rows": [{"min_time_s": best[0], "kernels": best[1]}]}


def _hybrid_by_scan(i: dict) -> dict:
    """The first S (counting up) whose attention share reaches the target, exact."""
    rows = []
    for m in i["models"]:
        dense = (
            m["layers"]
            * 2
            * m["d_model"]
            * (2 * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"] + m["mlp_matrices"] * m["d_ff"])
            + 2 * m["d_model"] * m["vocab_size"]
        )
        per_pair = 4 * m["n_heads"] * m["head_dim"]
        pairs_global = pairs_local = 0
        found = None
        for s in range(1, i["max_seq_len"] + 1):
            pairs_global += s
            pairs_local += min(s, m["window"])
            attention = per_pair * (
                m["global_layers"] * pairs_global + (m["layers"] - m["global_layers"]) * pairs_local
            )
            if Fraction(attention, attention + dense * s) >= i["target_share"]:
                found = s
                break
        rows.append({"model": m["name"], "crossover_seq_len": found})
    return {"rows": rows}


def _kv_plan_by_enumeration(i: dict) -> dict:
    """Every format and every batch up to the HBM capacity, exact; ties to the smaller batch."""
    weights = i["weight_bytes"] * i["n_params"]
    best = None
    for order, fmt in enumerate(i["kv_formats"]):
        values = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["seq_len"]
        kv = Fraction(fmt["bits_per_value"] * values, 8)
        flops = (
            2 * i["n_params"]
            + 4 * i["layers"] * i["n_heads"] * i["head_dim"] * i["seq_len"]
            + fmt["dequant_flops_per_value"] * values
        )
        batch = 1
        while weights + batch * kv <= i["hbm_capacity"]:
            step = max(Fraction(batch * flops, i["peak_flops"]), (weights + batch * kv) / i["hbm_bandwidth"])
            if step > i["latency_budget_s"]:
                break
            option = (batch / step, -batch, -order)
            if best is None or option > best[0]:
                best = (option, fmt["name"], batch)
            batch += 1
    return {"rows": [{"kv_format": best[1], "batch": best[2], "tokens_per_s": best[0][0]}]}


EXHAUSTIVE = [
    ("elementwise_roofline", 5, _fusion_plan_by_enumeration),
    ("attention_crossover", 5, _hybrid_by_scan),
    ("decode_attention_roofline", 5, _kv_plan_by_enumeration),
]


@pytest.mark.parametrize(
    ("family", "level", "search"), EXHAUSTIVE, ids=[f"{f}-L{lv}" for f, lv, _ in EXHAUSTIVE]
)
def test_new_search_keys_agree_with_an_exhaustive_search(family, level, search):
    for index in range(3):
        t = task(family, level, index)
        assert _passes(t, search(dict(t.inputs))), t.id


# ---------------------------------------------------------------- regimes and branches, by construction


def test_fusion_plan_kernel_limit_and_launch_cost_change_the_split():
    ops = [
        {"op": "op_a", "flops_per_element": 10, "output_bytes": 2},
        {"op": "op_b", "flops_per_element": 10, "output_bytes": 2},
        {"op": "op_c", "flops_per_element": 10, "output_bytes": 2},
    ]
    base = {"n_elements": 1000, "input_bytes": 2, "ops": ops, "vector_flops": 10**6, "hbm_bandwidth": 10**5}
    # every kernel memory-bound (4 bytes against 10-30 FLOPs per element): fusing saves traffic, and
    # the limit of two ops per kernel forces two kernels
    two = fusion_plan(**base, max_ops_per_kernel=2, launch_overhead_s=Fraction(0))
    assert two == {"rows": [{"min_time_s": Fraction(2 * 1000 * 4, 10**5), "kernels": 2}]}
    one = fusion_plan(**base, max_ops_per_kernel=3, launch_overhead_s=Fraction(1, 100))
    assert one == {"rows": [{"min_time_s": Fraction(1, 100) + Fraction(1000 * 4, 10**5), "kernels": 1}]}


def test_kv_serving_tie_goes_to_the_compute_bound_crossover_batch():
    inputs = {
        "n_params": 10**9,
        "layers": 1,
        "n_heads": 1,
        "n_kv_heads": 1,
        "head_dim": 1,
        "seq_len": 1,
        "weight_bytes": 1,
        "kv_formats": [{"name": "bf16", "bits_per_value": 16, "dequant_flops_per_value": 0}],
        "peak_flops": 10**12,
        "hbm_bandwidth": 10**11,
        "hbm_capacity": 10**12,
        "latency_budget_s": 1,
    }
    # compute (2e9 + 4) * b / 1e12 against memory (1e9 + 4 b) / 1e11: memory-bound at b = 5 by a hair,
    # compute-bound from b = 6 on, where every batch gives peak / FLOPs per token
    row = kv_serving_plan(**inputs)["rows"][0]
    assert row == {"kv_format": "bf16", "batch": 6, "tokens_per_s": Fraction(10**12, 2 * 10**9 + 4)}
    assert kv_serving_plan(**inputs) == _kv_plan_by_enumeration(inputs)


def test_format_min_batch_covers_batch_one_and_never():
    chip = {"name": "chip_a", "peak_flops": 10**12, "hbm_bandwidth": 10**12}
    formats = [
        {"name": "heavy", "bits_per_weight": 8, "dequant_flops_per_weight": 4},
        {"name": "bf16", "bits_per_weight": 16, "dequant_flops_per_weight": 0},
    ]
    wide = format_min_batch([chip], 4096, 4096, 2, formats)["rows"][0]
    assert wide == {"chip": "chip_a", "format": "heavy", "min_batch": 1}  # decode FLOPs outweigh its bytes
    narrow = format_min_batch([chip], 1, 1, 2, formats[1:])["rows"][0]
    assert narrow == {"chip": "chip_a", "format": None, "min_batch": None}


def test_hybrid_crossover_changes_regime_at_the_window():
    model = {
        "name": "m",
        "d_model": 64,
        "d_ff": 256,
        "n_heads": 1,
        "n_kv_heads": 1,
        "head_dim": 64,
        "mlp_matrices": 2,
        "layers": 2,
        "global_layers": 1,
        "window": 1,
        "vocab_size": 1000,
    }
    inputs = {"models": [model], "target_share": Fraction(1, 2), "max_seq_len": 10**5}
    assert hybrid_crossover(**inputs) == _hybrid_by_scan(inputs)
    local_only = dict(model, global_layers=0)
    never = {"models": [local_only], "target_share": Fraction(1, 2), "max_seq_len": 10**5}
    assert hybrid_crossover(**never)["rows"][0]["crossover_seq_len"] is None


def test_layer_flops_l5_poses_fitting_layers_and_takes_float_answers():
    """Round 1 keyed flops_per_token as an int, so every float answer (and the float twin) failed
    and only all-None instances were posed."""
    answers = [task("layer_flops", 5, index) for index in range(12)]
    fitting = [t for t in answers if t.expected["rows"][0]["config"] is not None]
    assert len(fitting) >= 8
    t = fitting[0]
    assert type(t.expected["rows"][0]["flops_per_token"]) is Fraction
    assert _passes(t, t.meta["independent"](**as_floats(dict(t.inputs))))


def test_adam_memory_l2_bytes_per_parameter_differ_within_an_instance():
    for index in range(5):
        t = task("adam_memory", 2, index)
        ratios = {row["state_gib"] / t.inputs["n_params"] for row in t.expected["rows"]}
        assert len(ratios) == len(t.expected["rows"]) >= 2


@pytest.mark.parametrize(
    ("family", "level", "branch"),
    [
        ("min_compute_bound_batch", 3, "none"),
        ("min_compute_bound_batch", 4, "none at L4"),
        ("model_flops_utilization", 4, "none"),
        ("model_flops_utilization", 5, "none at L5"),
        ("dense_param_count", 4, "none"),
        ("kv_cache_size", 5, "none at L5"),
        ("largest_model", 4, "none"),
        ("max_batch_for_kv_cache", 3, "none at L3"),
        ("attention_crossover", 5, "none at L5"),
        ("decode_attention_roofline", 5, "compute-bound tie"),
        ("utilization_by_counting", 5, "no recomputation wins"),
    ],
)
def test_declared_branches_are_reached(family, level, branch):
    declared = {b.name: b for b in family_of("scaling", family).branches}
    assert level in declared[branch].levels
    assert any(declared[branch].reached(task(family, level, index)) for index in range(20))
