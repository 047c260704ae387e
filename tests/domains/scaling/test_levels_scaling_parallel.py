"""The sharding and inference families' own upper levels: every level asks
its own question (no level repeats another's), the new references give hand-derived keys on
small inputs (each key below is worked out in the comment beside it), and the rules refuse the
degenerate instances (mostly-None rows)."""

from __future__ import annotations

from fractions import Fraction

import pytest

import exactgrade
from exactgrade.domains import scaling
from exactgrade.domains.scaling._text import INPUT_LISTING
from exactgrade.domains.scaling.inference.decode_step import speculative_draft_length
from exactgrade.domains.scaling.inference.kv_read_share import windowed_context
from exactgrade.domains.scaling.inference.sharded_decode_latency import at_most_half_none
from exactgrade.domains.scaling.sharding.data_parallel_step import accumulated_step
from exactgrade.domains.scaling.sharding.expert_parallel_all_to_all import capacity_factor
from exactgrade.family import family_of
from exactgrade.task import materialise

FAMILIES = ("data_parallel_step", "fsdp_step_communication", "tensor_parallel_layer", "pipeline_step_time",
            "min_microbatches", "expert_parallel_all_to_all", "zero_memory", "decode_step", "kv_read_share",
            "prefill_vs_decode", "sharded_decode_latency", "quantized_decode", "serving_cost")


def question(name: str, level: int) -> str:
    task = exactgrade.generate("scaling", seed=3, index=0, level=level, family=name)
    return task.prompt.split(INPUT_LISTING)[0]


@pytest.mark.parametrize("name", FAMILIES)
def test_every_level_asks_its_own_question(name):
    texts = [question(name, level) for level in range(1, 6)]
    assert len(set(texts)) == 5, [i + 1 for i, t in enumerate(texts) if texts.count(t) > 1]


def _chip(name, peak, bandwidth):
    return {"name": name, "peak_flops": peak, "hbm_bandwidth": bandwidth}


# (reference, inputs, expected rows): small inputs whose keys are derived by hand.
CASES = [
    # Speculative decoding, acceptance 1/2: E(k) = 1 + 1/2 + ... + 1/2**k. Draft pass = max(2/20,
    # 1/10) = 1/10 on chip_a; target pass over t tokens = max(t, 1). k=1: (3/2) / (1/10 + 2) = 5/7;
    # k=2: (7/4) / (2/10 + 3) = 35/64 < 5/7. chip_b (peak 200): target max(t/10, 1), draft 1/10:
    # k=1: (3/2) / 1.1 = 15/11; k=2: (7/4) / 1.2 = 35/24, the larger.
    (speculative_draft_length,
     {"chips": [_chip("chip_a", 20, 10), _chip("chip_b", 200, 10)], "n_params": 10, "draft_params": 1,
      "bytes_per_param": 1, "batch": 1, "acceptance": Fraction(1, 2), "max_draft": 2},
     [{"chip": "chip_a", "draft_tokens": 1, "tokens_per_s": Fraction(5, 7)},
      {"chip": "chip_b", "draft_tokens": 2, "tokens_per_s": Fraction(35, 24)}]),
    # Loads [10, 2, 2, 2] (16 copies, 4 experts, 2 per device; 4 FLOPs per copy at 4 FLOP/s: one
    # second per copy). Limit 0: capacity 10, C = 10 * 4 / 16 = 5/2, device 0 runs 10 + 2.
    # Limit 1/4 (4 copies): capacity 6 drops 4, capacity 5 drops 5; C = 6 * 4 / 16 = 3/2, 6 + 2.
    (capacity_factor,
     {"expert_loads": [10, 2, 2, 2], "ep": 2, "d_model": 1, "d_ff": 1, "peak_flops": 4,
      "drop_limits": [Fraction(0), Fraction(1, 4)]},
     [{"max_drop_fraction": 0, "capacity_factor": Fraction(5, 2), "expert_time_s": 12},
      {"max_drop_fraction": Fraction(1, 4), "capacity_factor": Fraction(3, 2), "expert_time_s": 8}]),
    # 1000 weight bytes, share 1/2: the cache may hold 1000 bytes. 4 layers, 2 global; 2 bytes per
    # position per layer. Batch 1: the window (10) costs 4 * 2 * 10 = 80, then 4 bytes per
    # position: 10 + 920 / 4 = 240. Batch 100: 800 bytes per position in all layers: S = 1.
    # Batch 200: 1600 > 1000 already at S = 1: None.
    (windowed_context,
     {"n_params": 1000, "weight_bytes": 1, "layers": 4, "global_every": 2, "window": 10, "n_kv_heads": 1,
      "head_dim": 1, "kv_bytes": 1, "batches": [1, 100, 200], "max_kv_share": Fraction(1, 2)},
     [{"batch": 1, "max_seq_len": 240}, {"batch": 100, "max_seq_len": 1},
      {"batch": 200, "max_seq_len": None}]),
    # Room 10 bytes of activations at 1 byte per token. 2 devices: 20 tokens in 2 microbatches of
    # 10, forward 20 s each, backward 40 s; the all-reduce (1 s) hides under the last backward:
    # 60 + 20 + 40 = 120 s, 40 / 120 tokens/s. 4 devices: one microbatch of 10: 60 s.
    (accumulated_step,
     {"n_params": 1, "grad_bytes": 1, "state_bytes_per_param": 1, "act_bytes_per_token": 1, "hbm_bytes": 11,
      "global_batch_tokens": 40, "device_counts": [2, 4], "link_bandwidth": 1, "peak_flops": 1, "mfu": 1},
     [{"devices": 2, "microbatches": 2, "step_time_s": 120, "tokens_per_s": Fraction(1, 3)},
      {"devices": 4, "microbatches": 1, "step_time_s": 60, "tokens_per_s": Fraction(2, 3)}]),
]


COUNT_KEYS = {"draft_tokens", "max_seq_len", "microbatches", "devices", "batch"}


@pytest.mark.parametrize(("reference", "inputs", "rows"), CASES, ids=[c[0].__name__ for c in CASES])
def test_hand_derived_keys(reference, inputs, rows):
    got = reference(**inputs)["rows"]
    assert got == rows
    counts = [row[key] for row in got for key in row if key in COUNT_KEYS]
    assert all(type(value) is int or value is None for value in counts)  # <int> fields stay int


def test_a_mostly_none_answer_is_refused():
    """sharded_decode_latency L4 with budgets no chip count meets in most rows."""
    inputs = {"n_params": 10**9, "weight_bytes": 2, "kv_cache_bytes": 10**9, "hbm_bytes_per_chip": 10**9,
              "hbm_bandwidth": 10**12, "max_chips": 8,
              "step_budgets_s": [Fraction(1, 10**6), Fraction(1, 10**5), Fraction(1, 100)]}
    task = materialise(family_of("scaling", "sharded_decode_latency").task("sc-edge", inputs, 4), "scaling",
                       scaling.PROFILE)
    assert [row["min_chips"] for row in task.expected["rows"]] == [None, None, 3]
    assert at_most_half_none(task) == "more than half of the rows are None"


@pytest.mark.parametrize(("name", "level"), [("kv_read_share", 4), ("kv_read_share", 5),
                                             ("sharded_decode_latency", 4), ("serving_cost", 4),
                                             ("zero_memory", 4), ("prefill_vs_decode", 4),
                                             ("pipeline_step_time", 4), ("pipeline_bubble", 5)])
def test_none_branches_are_declared_where_reached(name, level):
    assert any(b.name == "none" and level in b.levels for b in family_of("scaling", name).branches)
