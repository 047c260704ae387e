"""What the scaling tasks teach is true about the world (issue 28): each test states one mechanism
as the literature states it and checks generated instances (prompt and key) against it. Every one
of them fails on the samplers and texts before the issue's fix."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest

import exactgrade
from exactgrade.domains.scaling._text import api_description
from exactgrade.domains.scaling.hardware import (
    FULL_READ_MS,
    HBM_CAPACITY,
    HBM_PER_PEAK,
    NVLINK_DOMAIN,
    RIDGE,
    RING_LINK,
    TIERS,
    VECTOR_FLOPS,
    VECTOR_RIDGE,
)
from exactgrade.domains.scaling.inference.sharded_decode_latency import tp_degrees
from exactgrade.task import Task

SEED = 29
COUNT = 12


def generated(family: str, level: int, count: int = COUNT) -> list[Task]:
    return [
        exactgrade.generate("scaling", seed=SEED, index=i, level=level, family=family) for i in range(count)
    ]


# ---------------------------------------------------------------- 1. memory tiers in their real order


@pytest.mark.parametrize("level", [1, 2])
def test_memory_tiers_are_named_in_the_order_of_their_bandwidths(level):
    order = [name for name, _ in TIERS]
    for task in generated("weight_streaming_roofline", level):
        tiers = task.inputs["tiers"]
        names, speeds = [t["name"] for t in tiers], [t["bandwidth"] for t in tiers]
        assert names[0] == "hbm" and names == sorted(names, key=order.index), task.id
        assert speeds == sorted(speeds, reverse=True) and len(set(speeds)) == len(speeds), task.id


# ---------------------------------------------------------------- 2. GPipe and 1F1B as they run


def simulate(stages: int, microbatches: int, forward: Fraction, backward: Fraction, one_f_one_b: bool):
    """(step time, peak microbatches in flight per stage) of a pipeline run op by op: a forward
    waits for the previous stage's forward, a backward for the next stage's backward."""
    order = {}
    for s in range(1, stages + 1):
        if one_f_one_b:
            warm = min(stages - s, microbatches)
            ops = [("F", k) for k in range(1, warm + 1)]
            for k in range(warm + 1, microbatches + 1):
                ops += [("F", k), ("B", k - warm)]
            ops += [("B", k) for k in range(microbatches - warm + 1, microbatches + 1)]
        else:
            ops = [(op, k) for op in "FB" for k in range(1, microbatches + 1)]
        order[s] = ops
    done: dict = {}
    free = dict.fromkeys(order, Fraction(0))
    at = dict.fromkeys(order, 0)
    peak = dict.fromkeys(order, 0)
    held = dict.fromkeys(order, 0)  # microbatches whose forward ran here and backward did not
    while any(at[s] < len(order[s]) for s in order):
        for s in order:
            while at[s] < len(order[s]):
                op, k = order[s][at[s]]
                if op == "F":
                    needs = ("F", s - 1, k) if s > 1 else None
                else:
                    needs = ("B", s + 1, k) if s < stages else ("F", s, k)
                if needs is not None and needs not in done:
                    break
                start = max(free[s], done.get(needs, Fraction(0)))
                done[(op, s, k)] = free[s] = start + (forward if op == "F" else backward)
                at[s] += 1
                held[s] += 1 if op == "F" else -1
                peak[s] = max(peak[s], held[s])
    return max(done.values()), peak


@pytest.mark.parametrize(("forward", "backward"), [(Fraction(1, 3), Fraction(2, 3)), (Fraction(1, 2),) * 2])
def test_the_pipeline_keys_are_the_step_of_gpipe_and_of_1f1b(forward, backward):
    """The stated schedule run op by op gives the key's step time whatever the forward's share of
    a slot, and 1F1B's first stage holds min(M, P) microbatches, as the L4/L5 prompts say."""
    for task in generated("pipeline_bubble", 2, 6):
        i = task.inputs
        for m, row in zip(i["microbatch_counts"], task.expected["rows"], strict=True):
            slot = i["microbatch_stage_time_s"]
            for one_f_one_b in (False, True):
                step, peak = simulate(i["stages"], m, forward * slot, backward * slot, one_f_one_b)
                assert step == row["step_time_s"], (task.id, m, one_f_one_b)
                assert peak[1] == (min(m, i["stages"]) if one_f_one_b else m)


PIPELINE_LEVELS = [
    (family, level)
    for family in ("pipeline_bubble", "min_microbatches", "pipeline_step_time")
    for level in (2, 3, 4, 5)
]


@pytest.mark.parametrize(("family", "level"), PIPELINE_LEVELS)
def test_the_pipeline_prompts_state_the_backward_from_the_last_stage(family, level):
    task = generated(family, level, 1)[0]
    assert "stages" in task.prompt and "microbatch" in task.prompt, task.id  # every level poses one
    assert "its forward and backward together), and a microbatch enters stage s + 1" not in task.prompt
    assert "backward pass goes back through them in reverse order, from the last stage" in task.prompt
    if "min(M, P)" in task.prompt:
        assert "1F1B schedule" in task.prompt and "exactly as long" in task.prompt


# ---------------------------------------------------------------- 3. DP overlaps the backward pass only


@pytest.mark.parametrize("level", [1, 2])
def test_the_all_reduce_is_compared_with_the_backward_pass(level):
    tasks = generated("data_parallel_step", level) + [exactgrade.get_task("sc-021")] * (level == 1)
    for task in tasks:
        i = task.inputs
        assert "overlap only the backward pass" in task.prompt or "only the backward pass" in task.prompt
        for t, row in zip(i["tokens_per_device"], task.expected["rows"], strict=True):
            backward = Fraction(4 * i["n_params"] * t) / (i["peak_flops"] * i["mfu"])
            assert row["backward_s"] == backward
            assert row["allreduce_exceeds_backward"] is (row["allreduce_s"] > backward)


def test_the_smallest_hiding_batch_hides_the_all_reduce_behind_the_backward_pass():
    for task in generated("data_parallel_step", 4):
        i = task.inputs
        assert "next step's compute" not in task.prompt
        for row in task.expected["rows"]:
            tokens = math.ceil(row["allreduce_s"] * i["peak_flops"] * i["mfu"] / (4 * i["n_params"]))
            assert row["min_tokens_per_device"] == max(1, tokens)


# ---------------------------------------------------------------- 4. TP degrees divide the heads


def test_tensor_parallel_degrees_divide_the_heads_and_replicate_kv_heads():
    for task in generated("sharded_decode_latency", 3):
        i = task.inputs
        assert all(c in tp_degrees(i["n_heads"], i["n_kv_heads"], c) for c in i["chip_counts"]), task.id
        weights = i["n_params"] * i["weight_bytes"]
        kv = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["kv_bytes"] * i["seq_len"] * i["batch"]
        for c, row in zip(i["chip_counts"], task.expected["rows"], strict=True):
            share = Fraction(weights, c) + Fraction(kv, min(c, i["n_kv_heads"]))
            assert row["fits"] is (share <= i["hbm_bytes_per_chip"])
    for task in generated("sharded_decode_latency", 5, 6):
        i = task.inputs
        chosen = {row["chips"] for row in task.expected["rows"]} - {None}
        assert chosen <= set(tp_degrees(i["n_heads"], i["n_kv_heads"], i["max_chips"])), task.id
        assert "replicated on" in task.prompt


# ---------------------------------------------------------------- 5. the instances the issue named


@pytest.mark.parametrize(
    "task_id",
    ["sc-min_compute_bound_batch-L5-s0-i0", "sc-data_parallel_step-L5-s2-i0", "sc-decode_step-L5-s7-i0"],
)
def test_the_instances_the_review_found_pose_real_hardware(task_id):
    from test_scaling_hardware import hardware_problems

    assert hardware_problems(exactgrade.get_task(task_id)) == []


# ---------------------------------------------------------------- 6. simplifications said plainly


def test_the_adam_count_says_what_it_leaves_out():
    text = api_description("memory")
    assert "14 bytes per parameter" in text and "leaves out the gradients" in text and "16 bytes ZeRO" in text
    names = {u["name"] for u in exactgrade.get_task("sc-019").inputs["uses"]}
    assert "training_adam" not in names and "training_adam_state_no_grads" in names


@pytest.mark.parametrize("level", [1, 2, 4])
def test_quantized_decode_says_the_same_speed_is_a_simplification(level):
    prompt = generated("quantized_decode", level, 1)[0].prompt
    assert "a simplification" in prompt and "leaves out" in prompt
    assert "(the arithmetic runs at the same speed whatever the" not in prompt


# ---------------------------------------------------------------- the domain review's WRONG items (issue 28)


def words(prompt: str) -> str:
    """The prompt with every run of whitespace one space (a phrase may wrap anywhere)."""
    return " ".join(prompt.split())


def full_read_ms(capacity: int, bandwidth: int) -> Fraction:
    return Fraction(capacity * 1000, bandwidth)


def test_a_server_reads_its_hbm_at_its_chips_bandwidth_added_up():
    """max_batch_for_kv_cache L5 read a whole server's HBM at one chip's bandwidth (562 GB at
    5.5 TB/s: 101 ms, where real parts take 18-43 ms)."""
    for task in generated("max_batch_for_kv_cache", 5):
        i = task.inputs
        assert full_read_ms(i["hbm_bytes"], i["hbm_bandwidth"]) in FULL_READ_MS, task.id
        assert "its chips' bandwidths added up" in words(task.prompt)


def test_the_speculative_models_fit_the_one_chip_they_run_on():
    """decode_step L5 served a 723B bf16 target and its draft (1.45 TB) "on one chip"."""
    for task in generated("decode_step", 5):
        i = task.inputs
        weights = (i["n_params"] + i["draft_params"]) * i["bytes_per_param"]
        assert weights <= HBM_CAPACITY.high, task.id
        assert "on one chip whose HBM holds both" in words(task.prompt)
        slowest = min(chip["hbm_bandwidth"] for chip in i["chips"])
        # a chip that holds both models is one that reads its HBM whole as a real part does
        assert full_read_ms(weights, slowest) <= FULL_READ_MS.high, task.id


MATMUL_LEVELS = [
    (family, level)
    for family in ("matmul_roofline", "min_compute_bound_batch", "matmul_fraction_of_peak")
    for level in (2, 3, 4, 5)
]


@pytest.mark.parametrize(("family", "level"), MATMUL_LEVELS)
def test_a_matmul_at_the_bf16_peak_has_bf16_operands(family, level):
    """matmul_roofline L3-L5 posed fp32 operands (4 bytes) at the bf16 tensor-core peak, which an
    fp32 matmul reaches nowhere (H100: 67 of 989 TFLOP/s)."""
    for task in generated(family, level):
        i = task.inputs
        assert i.get("activation_bytes", 2) == i.get("bytes_per_value", 2) == 2, task.id
        assert i.get("weight_bytes", 2) in (1, 2), task.id
        if "weight_bytes" in i:
            assert "widened to bf16 before the multiply" in words(task.prompt), task.id


def test_a_real_chip_has_a_real_ridge_and_only_a_what_if_chip_beyond_it():
    """Ridges up to 650 FLOP/byte were posed as real chips (quantized_decode L5 622, serving_cost
    L5 589 is real but 622 is not): every part ends at TPU v6e's 560 (fp8 H100: 590)."""
    from test_scaling_hardware import ridge_problems

    assert ridge_problems({"name": "chip_a", "peak_flops": 622 * 10**12, "hbm_bandwidth": 10**12})
    assert not ridge_problems(
        {"name": "chip_a_2.5x_flops", "peak_flops": 625 * 10**12, "hbm_bandwidth": 10**12}
    )
    for family in ("quantized_decode", "serving_cost", "min_compute_bound_batch"):
        for task in generated(family, 5):
            chips = [c for c in task.inputs.get("chips", []) if "peak_flops" in c]
            assert all(Fraction(c["peak_flops"], c["hbm_bandwidth"]) in RIDGE for c in chips), task.id


def test_elementwise_ops_run_at_a_vector_unit_peak():
    """elementwise_roofline L5 timed elementwise ops at the tensor-core matmul peak (1.84 PFLOP/s)."""
    for task in generated("elementwise_roofline", 5):
        i = task.inputs
        assert "peak_flops" not in i and i["vector_flops"] in VECTOR_FLOPS, task.id
        assert Fraction(i["vector_flops"], i["hbm_bandwidth"]) in VECTOR_RIDGE, task.id
        assert "not on the tensor cores" in words(task.prompt)


@pytest.mark.parametrize("level", [3, 4, 5])
def test_the_stated_parameter_count_is_that_of_the_stated_shape(level):
    """activation_memory L5 stated 7.17B parameters for 11 layers of d_model 15,360 (31B of
    layer weights): n_params is the layers' 12 * d_model**2 each plus a real vocabulary's
    embeddings (32k tied ... 256k untied)."""
    for task in generated("activation_memory", level):
        i = task.inputs
        embeddings = i["n_params"] - 12 * i["layers"] * i["d_model"] ** 2
        assert 32_000 * i["d_model"] <= embeddings <= 512_000 * i["d_model"], task.id
        assert "layers of 12 * d_model**2 weights each, plus its embeddings" in words(task.prompt)


STATE_WITH_GRADIENTS = [
    ("pipeline_step_time", 4),
    ("pipeline_step_time", 5),
    ("tensor_parallel_layer", 3),
    ("tensor_parallel_layer", 5),
]


@pytest.mark.parametrize(("family", "level"), STATE_WITH_GRADIENTS)
def test_a_state_said_to_hold_the_gradients_holds_more_than_adams_14_bytes(family, level):
    """The global text counts 14 bytes without gradients; a per-parameter state the prompt says
    holds weights, gradients and optimizer state is at least the 16 bytes ZeRO counts."""
    for task in generated(family, level):
        assert "gradients" in task.prompt and task.inputs["state_bytes_per_param"] >= 16, task.id
        if "grad_bytes" in task.inputs:
            assert task.inputs["state_bytes_per_param"] == 14 + task.inputs["grad_bytes"], task.id


@pytest.mark.parametrize(
    ("family", "level"), [("pipeline_bubble", 5), ("pipeline_step_time", 4), ("pipeline_step_time", 5)]
)
def test_the_1f1b_paragraph_reads_whole_and_bounds_the_memory_not_the_microbatches(family, level):
    """The 1F1B paragraph was spliced into a sentence ("in flight; the stages run ...") and
    pipeline_step_time L5 then said the microbatch count must be at most hbm_bytes."""
    prompt = words(generated(family, level, 1)[0].prompt)
    assert "flight; the stages" not in prompt and "flight. The stages run the 1F1B schedule" in prompt
    assert "at its peak, which must be" not in prompt
    assert "first stage's peak memory (" in prompt and "at most `hbm_bytes`" in prompt


ONE_CHIP = [
    "prefill_vs_decode",
    "decode_compute_bound_batch",
    "kv_read_share",
    "quantized_decode",
    "decode_step",
    "serving_cost",
]


# Levels that state their own HBM capacity (checked where it is drawn) or no chip at all.
OWN_CAPACITY = {("decode_compute_bound_batch", 4), ("kv_read_share", 4)}


def weight_width(i: dict) -> Fraction:
    """Bytes per weight; of quantized formats the widest offered (the model must fit in each)."""
    if "formats" not in i:
        return Fraction(i.get("weight_bytes") or i["bytes_per_param"])
    bits = [
        Fraction(f["bits_per_weight"])
        if "bits_per_weight" in f
        else f["code_bits"] + (Fraction(f["scale_bits"], f["group_size"]) if f["group_size"] else 0)
        for f in i["formats"]
    ]
    return max(bits) / 8


def kv_per_token(i: dict) -> int | None:
    """KV-cache bytes per cached token, or None where the task has no KV shape."""
    if "kv_bytes_per_token" in i:
        return i["kv_bytes_per_token"]
    if "layers" not in i:
        return None
    kv_heads = i.get("n_kv_heads") or i["n_heads"] // i["group_size"]
    return 2 * i["layers"] * kv_heads * i["head_dim"] * i["kv_bytes"]


def resident_caches(i: dict, expected: dict) -> list[tuple[int, int]]:
    """(batch, cached tokens per sequence) of every KV cache the task keeps in HBM: its cases, its
    requests (prompt and generated tokens), and the batch or prompt its key answers with."""
    caches = [(c["batch"], c["seq_len"]) for c in i.get("cases", [])]
    caches += [(1, r["prompt_len"] + r["new_tokens"]) for r in i.get("requests", []) if "prompt_len" in r]
    for row in expected.get("rows", []):
        if row.get("min_batch") is not None and "seq_len" in row:
            caches.append((row["min_batch"], row["seq_len"]))
        if row.get("max_prompt_len") is not None:
            caches.append((1, row["max_prompt_len"] + row["new_tokens"]))
    if "seq_len" in i and ("batch" in i or "batches" in i):
        caches.append((i.get("batch") or max(i["batches"]), i["seq_len"]))
    return caches


@pytest.mark.parametrize(
    ("family", "level"),
    [(family, level) for level in (1, 2, 3, 4) for family in ONE_CHIP if (family, level) not in OWN_CAPACITY],
)
def test_a_model_served_on_one_chip_fits_the_hbm_of_a_chip_of_its_bandwidth(family, level):
    """The samplers drew the model apart from the chip: 65 GB of weights on a 0.8 TB/s chip
    (an 81 ms read; real parts take 18-43), decode compute-bound at batch 2012 with 624 GB of KV
    cache on one chip (review of seed 9191), 394 GB of weights on one chip at level 4."""
    for task in generated(family, level):
        i = task.inputs
        chips = i.get("chips") or [i]
        held = min(min(HBM_CAPACITY.high, c["hbm_bandwidth"] * FULL_READ_MS.high // 1000) for c in chips)
        weights = i["n_params"] * weight_width(i) + i.get("kv_cache_bytes", 0)
        per_token = kv_per_token(i)
        caches = resident_caches(i, task.expected) if per_token else []
        resident = max([weights] + [weights + b * s * per_token for b, s in caches])
        assert resident <= held, (task.id, float(resident) / 1e9, held / 1e9)


# ---------------------------------------------------------------- the second review's items (seed 7171)


REVIEW_SEED = 7171
BF16_ATTENTION = "matmul_fraction_of_peak"


def test_bf16_attention_matmuls_draw_a_head_that_turns_compute_bound_at_every_index():
    """With bf16 operands only, a head width drawn apart from the chip was never compute-bound on
    most real chips: index 10 of seed 7171 found no instance in 200 attempts."""
    for index in range(40):
        task = exactgrade.generate("scaling", seed=REVIEW_SEED, index=index, level=3, family=BF16_ATTENTION)
        i = task.inputs
        ridge = Fraction(i["peak_flops"], i["hbm_bandwidth"])
        assert 2 * i["head_dim"] > ridge * i["bytes_per_value"], task.id


@pytest.mark.parametrize(
    ("family", "level", "capacity"),
    [("data_parallel_step", 5, "hbm_bytes"), ("fsdp_step_communication", 5, "hbm_bytes_per_device")],
)
def test_a_chip_holds_as_much_hbm_per_flop_as_a_real_part(family, level, capacity):
    """data_parallel_step and fsdp L5 drew the HBM apart from the peak: 24-27 GB at 1.6 PFLOP/s,
    where real parts hold 35 (TPU v6e) to 354 (MI210) GB per PFLOP/s."""
    for index in range(30):
        task = exactgrade.generate("scaling", seed=REVIEW_SEED, index=index, level=level, family=family)
        i = task.inputs
        assert Fraction(i[capacity] * 10**6, i["peak_flops"]) in HBM_PER_PEAK, task.id


def test_an_elementwise_kernel_is_memory_bound_on_the_vector_units_it_runs_on():
    """elementwise_roofline L1 posed up to 40 FLOPs per element at 2 bytes moved (20 FLOP/byte)
    against the tensor-core peak alone: real vector units (ridge 8-50) would run that compute-bound."""
    tasks = [exactgrade.get_task("sc-002")] + [
        exactgrade.generate("scaling", seed=REVIEW_SEED, index=i, level=1, family="elementwise_roofline")
        for i in range(30)
    ]
    for task in tasks:
        i = task.inputs
        moved = i["bytes_read_per_element"] + i["bytes_written_per_element"]
        assert Fraction(i["flops_per_element"], moved) < VECTOR_RIDGE.low, task.id
        assert all(row["bound"] == "memory" for row in task.expected["rows"]), task.id
        assert "an elementwise kernel runs on the vector units" in words(task.prompt), task.id


QUANTIZED_BYTES = ("weight_bytes", "bytes_per_param", "bytes_per_value", "kv_bytes")
QUANTIZED_BITS = ("bits_per_weight", "bits_per_value", "weight_bits")
QUANTIZED_LEVELS = [
    ("max_batch_for_kv_cache", 1),
    ("largest_model", 2),
    ("decode_step", 3),
    ("weight_streaming_roofline", 3),
    ("sharded_decode_latency", 4),
    ("decode_attention_roofline", 5),
    ("decode_compute_bound_batch", 5),
    ("kv_read_share", 5),
    ("prefill_vs_decode", 5),
    ("serving_cost", 5),
]


def quantized_widths(inputs: dict) -> set[str]:
    """The inputs that pose a quantized format: 1 byte per value, or fewer than 16 bits."""
    from test_scaling_hardware import named_leaves

    found = set()
    for name, value in named_leaves(inputs):
        if (name in QUANTIZED_BYTES and value == 1) or (name in QUANTIZED_BITS and value < 16):
            found.add(name)
    return found


@pytest.mark.parametrize(("family", "level"), QUANTIZED_LEVELS)
def test_a_quantized_format_says_its_scales_and_dequantising_are_left_out(family, level):
    """int8/int4 weights and caches were counted at their bytes alone, at the matmul peak, with
    nothing saying the scales and the dequantising are a simplification."""
    posed = [task for task in generated(family, level) if quantized_widths(dict(task.inputs))]
    assert posed, f"no {family} L{level} instance of {COUNT} poses a quantized format"
    for task in posed:
        text = words(task.api_description)
        assert "scales and the work of dequantising are ignored (a simplification)" in text, task.id


# ---------------------------------------------------------------- the fourth review's items (seed 6464)


@pytest.mark.parametrize(
    ("family", "level"),
    [
        ("min_compute_bound_batch", 5),
        ("decode_attention_roofline", 5),
        ("quantized_decode", 3),
        ("quantized_decode", 5),
    ],
)
def test_dequantising_flops_at_the_tensor_peak_is_said_to_be_a_simplification(family, level):
    """These levels add dequantising FLOPs to the matmul's at `peak_flops`, where a real chip runs
    them on its vector units, several times slower (elementwise_roofline says so); unsaid, a task
    taught the opposite."""
    for task in generated(family, level, 3):
        assert "on a real chip they run on the vector units" in words(task.prompt), task.id


def test_a_grouped_format_counts_one_fp16_scale_per_group():
    """largest_model named 3.5 bits per weight (7/16 byte) "int3_g64": int3 with one fp16 scale per
    64 weights is 3.25 bits (13/32 byte); 3.5 bits is a group of 32."""
    from exactgrade.domains.scaling.memory.largest_model import _USES

    grouped = [(name, size) for name, size in _USES if name.endswith("_scales")]
    assert grouped
    for name, size in grouped:
        bits, group = re.search(r"(int|fp)(\d+)_g(\d+)", name).group(2, 3)
        assert size == Fraction(int(bits), 8) + Fraction(16, 8 * int(group)), name


# ---------------------------------------------------------------- recomputation's activation bytes (6464)


@pytest.mark.parametrize(
    ("policy", "bytes_per_token_layer"),
    [
        ("none", lambda d_model, n_heads, seq_len: 34 * d_model + 5 * n_heads * seq_len),
        ("selective", lambda d_model, n_heads, seq_len: 34 * d_model),
        ("full", lambda d_model, n_heads, seq_len: 2 * d_model),
    ],
)
def test_recomputation_policies_keep_the_korthikanti_activation_bytes(policy, bytes_per_token_layer):
    """utilization_by_counting L5 gave "none" only 2*d_model*k bytes more than "selective", fixed
    in seq_len, though the attention scores it says selective drops are n_heads*seq_len values per
    token per layer; Korthikanti et al. 2022 (as activation_memory states it) keep
    34*d_model + 5*n_heads*seq_len, 34*d_model and 2*d_model bytes with 16-bit activations."""
    for task in generated("utilization_by_counting", 5, 40):
        i = task.inputs
        expected = bytes_per_token_layer(i["n_heads"] * i["head_dim"], i["n_heads"], i["seq_len"])
        assert i["activation_bytes_per_token_layer"][policy] == expected, task.id


def test_a_plain_data_parallel_replica_fits_one_chip():
    """time_to_train L5 trained a 62B model with fp32 gradients "with plain data parallelism": the
    weights and gradient alone (371 GB) fit no chip (review seed 7777). Its replica with Adam's
    12 bytes of state now fits one chip's HBM."""
    for task in generated("time_to_train", 5, 40):
        i = task.inputs
        assert i["n_params"] * (2 + i["grad_bytes"] + 12) <= HBM_CAPACITY.high, task.id


@pytest.mark.parametrize(
    ("family", "level"),
    [
        ("data_parallel_step", 1),
        ("data_parallel_step", 5),
        ("fsdp_step_communication", 1),
        ("zero_memory", 5),
        ("time_to_train", 5),
    ],
)
def test_a_ring_past_one_nvlink_domain_runs_no_faster_than_a_tpu_pod(family, level):
    """data_parallel_step L5 ran a ring of 3,960 devices at 869 GB/s each (review seed 7777): NVLink's
    speeds end at one domain of 72 GPUs; past it the fastest fabric is a TPU v5p pod's ICI, 540 GB/s."""
    for task in generated(family, level, 40):
        i = task.inputs
        counts = i.get("device_counts") or [i[k] for k in ("devices", "n_devices") if k in i]
        if "link_bandwidth" in i and counts and max(counts) > NVLINK_DOMAIN:
            assert i["link_bandwidth"] <= RING_LINK.high, task.id
