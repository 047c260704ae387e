"""Memory tasks (sc-015..sc-020): Adam state, KV cache, activations, what fits in HBM.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import (
    levels_admission,
    levels_inverse,
    levels_inverse2,
    levels_memory,
    levels_memory5,
)
from exactgrade.domains.scaling._sample import (
    attention_shape,
    hbm_capacity,
    letters,
    n_params,
    round_numbers,
    rows,
    sample_kv_cache_size,
    sample_max_batch_for_kv_cache,
    sorted_sample,
)
from exactgrade.domains.scaling._task import (
    Level,
    known_mistake,
    near_integer,
    rounding_edge,
    scaling_family,
    with_tags,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def adam_memory(models, weight_bytes, master_bytes, first_moment_bytes, second_moment_bytes,
                hbm_bytes_per_chip):
    """Training state of Adam per model, and the chips needed just to hold it."""
    import math
    from fractions import Fraction

    rows = []
    for model in models:
        weights = model["n_params"] * weight_bytes
        optimizer = model["n_params"] * (master_bytes + first_moment_bytes + second_moment_bytes)
        rows.append({
            "model": model["name"],
            "weights_gib": Fraction(weights, 2**30),
            "optimizer_gib": Fraction(optimizer, 2**30),
            "optimizer_to_weights": Fraction(optimizer, weights),
            "min_chips": math.ceil(Fraction(weights + optimizer, hbm_bytes_per_chip)),
        })
    return {"rows": rows}


def kv_cache_size(configs, seq_len, batch, bytes_per_value):
    """K and V for every layer, KV head and position of every sequence."""
    from fractions import Fraction

    rows = []
    for config in configs:
        per_token = 2 * config["layers"] * config["n_kv_heads"] * config["head_dim"] * bytes_per_value
        rows.append({
            "config": config["name"],
            "bytes_per_token": Fraction(per_token),
            "total_gib": Fraction(per_token * seq_len * batch, 2**30),
        })
    return {"rows": rows}


def max_batch_for_kv_cache(hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes,
                           seq_lens):
    """How many full-length sequences fit in the HBM the weights leave free."""
    from fractions import Fraction

    free = hbm_bytes - n_params * weight_bytes
    rows = []
    for seq_len in seq_lens:
        per_sequence = 2 * layers * n_kv_heads * head_dim * kv_bytes * seq_len
        rows.append({
            "seq_len": seq_len,
            "kv_bytes_per_sequence": Fraction(per_sequence),
            "max_batch": free // per_sequence,
        })
    return {"rows": rows}


def activation_memory(layers, d_model, n_heads, batch, seq_lens):
    """Stored activations for the backward pass, with and without full recomputation."""
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        stored = layers * seq_len * batch * (34 * d_model + 5 * n_heads * seq_len)
        checkpointed = layers * 2 * seq_len * batch * d_model
        rows.append({
            "seq_len": seq_len,
            "no_recompute_gib": Fraction(stored, 2**30),
            "full_recompute_gib": Fraction(checkpointed, 2**30),
            "saving_factor": Fraction(stored, checkpointed),
        })
    return {"rows": rows}


def largest_model(hbm_bytes_per_chip, chips, uses):
    """The most parameters a group of chips can hold at a given number of bytes per parameter."""
    import math
    from fractions import Fraction

    capacity = hbm_bytes_per_chip * chips
    rows = []
    for use in uses:
        max_params = math.floor(Fraction(capacity) / use["bytes_per_param"])
        rows.append({"use": use["name"], "max_params": max_params})
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def adam_memory_float(models, weight_bytes, master_bytes, first_moment_bytes, second_moment_bytes,
                      hbm_bytes_per_chip, mistake=None):
    known_mistake(mistake, "gb_for_gib")
    unit = 1e9 if mistake == "gb_for_gib" else 1024.0**3
    state = master_bytes + second_moment_bytes + first_moment_bytes
    rows = []
    for m in models:
        n = m["n_params"]
        rows.append({"model": m["name"], "weights_gib": weight_bytes / unit * n,
                     "optimizer_gib": state / unit * n,
                     "optimizer_to_weights": state / weight_bytes,
                     "min_chips": math.ceil(n / hbm_bytes_per_chip * (state + weight_bytes))})
    return {"rows": rows}


def kv_cache_size_float(configs, seq_len, batch, bytes_per_value, mistake=None):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for c in configs:
        per_token = float(tensors * bytes_per_value * c["head_dim"] * c["n_kv_heads"] * c["layers"])
        rows.append({"config": c["name"], "bytes_per_token": per_token,
                     "total_gib": batch * (seq_len / 2.0**30) * per_token})
    return {"rows": rows}


def max_batch_for_kv_cache_float(hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes,
                                 seq_lens, mistake=None):
    known_mistake(mistake, "ignore_weights")
    free = float(hbm_bytes) if mistake == "ignore_weights" else hbm_bytes - float(n_params) * weight_bytes
    rows = []
    for s in seq_lens:
        per_sequence = 2.0 * s * kv_bytes * head_dim * n_kv_heads * layers
        rows.append({"seq_len": s, "kv_bytes_per_sequence": per_sequence,
                     "max_batch": math.floor(free / per_sequence)})
    return {"rows": rows}


def activation_memory_float(layers, d_model, n_heads, batch, seq_lens, mistake=None):
    known_mistake(mistake, "drop_attention_scores")
    rows = []
    for s in seq_lens:
        per_element = 34.0 + (0.0 if mistake == "drop_attention_scores" else 5.0 * n_heads * s / d_model)
        checkpointed = 2.0 * d_model * batch * s * layers / 2**30
        rows.append({"seq_len": s, "no_recompute_gib": checkpointed * per_element / 2,
                     "full_recompute_gib": checkpointed, "saving_factor": per_element / 2})
    return {"rows": rows}


def largest_model_float(hbm_bytes_per_chip, chips, uses, mistake=None):
    known_mistake(mistake, "gib_for_gb")
    per_chip = hbm_bytes_per_chip / 1e9 * 2**30 if mistake == "gib_for_gb" else float(hbm_bytes_per_chip)
    return {"rows": [{"use": u["name"], "max_params": math.floor(chips / u["bytes_per_param"] * per_chip)}
                     for u in uses]}


# ---------------------------------------------------------------- families and tasks

_PRECISIONS = ((2, 4, 4, 4), (2, 4, 1, 1), (2, 4, 2, 2), (4, 4, 4, 4), (2, 2, 2, 2))


def sample_adam_memory(draw: Draw, level: int) -> dict:
    weight, master, first, second = draw.choice(_PRECISIONS[:2] if round_numbers(level) else _PRECISIONS)
    models = [{"name": name, "n_params": n_params(draw, level)} for name in letters("model", rows(level, 3))]
    return {"models": models, "weight_bytes": weight, "master_bytes": master, "first_moment_bytes": first,
            "second_moment_bytes": second, "hbm_bytes_per_chip": hbm_capacity(draw, level)}


def _min_chips_edges(task: Task) -> str | None:
    i = task.inputs
    per_param = i["weight_bytes"] + i["master_bytes"] + i["first_moment_bytes"] + i["second_moment_bytes"]
    for model in i["models"]:
        problem = rounding_edge(f"{model['name']}: the chips needed",
                                Fraction(model["n_params"] * per_param, i["hbm_bytes_per_chip"]))
        if problem:
            return problem
    return None


ADAM_MEMORY = scaling_family(
    "adam_memory", "memory", adam_memory,
    """\
Training with Adam keeps, per parameter, the weights (`weight_bytes`), a master copy
(`master_bytes`), the first moment (`first_moment_bytes`) and the second moment
(`second_moment_bytes`). For each model in `models`, give the weights in GiB, the optimizer state
(master copy + both moments) in GiB, the ratio of optimizer state to weights, and the smallest
number of chips of `hbm_bytes_per_chip` bytes of HBM each that can hold weights plus optimizer
state (ignore gradients, activations and any other memory).""",
    '{"rows": [{"model": <str>, "weights_gib": <number>, "optimizer_gib": <number>, '
    '"optimizer_to_weights": <number>, "min_chips": <int>}, ...]}  # one row per model, in order',
    adam_memory_float, "gb_for_gib",
    sample=sample_adam_memory,
    upper={**levels_memory5.ADAM_LEVELS_R2, 4: levels_inverse2.ADAM},
    branches=levels_memory5.ADAM_BRANCHES_R2,
    levels="L2: precision recipes described per row (bits of weights, master copy, moments), the state "
           "and chips derived; L3: the per-chip memory under ZeRO-1 (replicated weights and gradients, "
           "sharded optimizer state, activations) and whether it fits; L4: the most parameters whose "
           "Adam state fits each chip count; L5: the ZeRO stage and chip count of the fewest "
           "chip-seconds per step under HBM and a step-time limit (stage 3 fits on fewer chips but "
           "moves more bytes)",
    reject=_min_chips_edges,
)


KV_CACHE_SIZE = scaling_family(
    "kv_cache_size", "memory", kv_cache_size,
    """\
A decoder caches a key and a value vector of size `head_dim` for every layer, every KV head and
every position, `bytes_per_value` bytes per value. For each attention variant in `configs` (for
example multi-head, grouped-query and multi-query attention of the same model), give the KV-cache
bytes per token and the total KV cache in GiB for `batch` sequences of `seq_len` tokens each.""",
    '{"rows": [{"config": <str>, "bytes_per_token": <number>, "total_gib": <number>}, ...]}'
    "  # one row per config, in order",
    kv_cache_size_float, "keys_only",
    sample=sample_kv_cache_size,
    upper={**levels_memory5.KV_CACHE_LEVELS_R2, 4: levels_inverse.CACHE},
    branches=levels_memory5.KV_CACHE_BRANCHES_R2,
    levels="L2: the KV heads derived from the query-head grouping; L3: a paged cache for sequences of "
           "different lengths; L4: the largest batch per variant under a cache budget (None); L5: a "
           "paged cache of global and sliding-window layers, and how many more sequences fit a budget "
           "(None when the batch alone exceeds it)",
)


def _max_batch_edges(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes"] - i["n_params"] * i["weight_bytes"]
    for seq_len in i["seq_lens"]:
        per_sequence = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["kv_bytes"] * seq_len
        problem = rounding_edge(f"seq_len {seq_len}: the sequences that fit", Fraction(free, per_sequence))
        if problem:
            return problem
    return None


MAX_BATCH_FOR_KV_CACHE = scaling_family(
    "max_batch_for_kv_cache", "memory", max_batch_for_kv_cache,
    """\
A server with `hbm_bytes` bytes of HBM in total holds a model of `n_params` parameters at
`weight_bytes` bytes each; all remaining HBM holds KV cache. The model caches a key and a value of
`head_dim` values for each of `layers` layers and `n_kv_heads` KV heads per token, `kv_bytes` bytes
per value. For each sequence length in `seq_lens`, give the KV-cache bytes of one full-length
sequence and the largest number of such sequences (the batch) whose KV cache fits (ignore
activations and fragmentation).""",
    '{"rows": [{"seq_len": <int>, "kv_bytes_per_sequence": <number>, "max_batch": <int>}, ...]}'
    "  # one row per entry of `seq_lens`, in order",
    max_batch_for_kv_cache_float, "ignore_weights",
    sample=sample_max_batch_for_kv_cache,
    upper={**levels_memory5.MAX_BATCH_LEVELS_R2, 4: levels_inverse2.LONGEST, 5: levels_admission.ADMISSION},
    branches=(*levels_memory5.MAX_BATCH_BRANCHES_R2,
              Branch("below the limits", levels_admission.below_limit, Fraction(1, 1), (5,)),
              Branch("at a limit", levels_admission.at_limit, Fraction(2, 5), (5,))),
    levels="L2: the KV heads derived from the query-head grouping; L3: tensor-parallel degrees splitting the "
           "weights and the KV heads (copies past the head count; None); L4: the longest length per "
           "batch (None); L5: which requests of a pool of mixed context lengths, too many to enumerate, "
           "to decode together for the most tokens per second under the HBM and a step budget "
           "(the shortest first, by an exchange argument; a long request lowers the throughput, so "
           "the best count is often below the limits, and at them in others)",
    reject=_max_batch_edges,
)


def sample_activation_memory(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    seq_lens = [512 * s for s in sorted_sample(draw, 1, 16 * 2**level, rows(level, 3))]
    if not round_numbers(level):
        seq_lens = sorted({s - draw.integer(0, 511) for s in seq_lens})
    return {"layers": draw.integer(8, 40 * level), "d_model": shape["d_model"], "n_heads": shape["n_heads"],
            "batch": draw.integer(1, 4 * level), "seq_lens": seq_lens}


_ACTIVATION_ROW = ('{"rows": [{"seq_len": <int>, "no_recompute_gib": <number>, '
                   '"full_recompute_gib": <number>, "saving_factor": <number>}, ...]}'
                   "  # one row per entry of `seq_lens`, in order")

ACTIVATION_MEMORY = scaling_family(
    "activation_memory", "memory", activation_memory,
    """\
Without recomputation, a transformer layer stores seq_len*batch*(34*d_model + 5*n_heads*seq_len)
bytes of activations for the backward pass (16-bit activations, the attention scores being the
second term). With full activation recomputation it stores only its bf16 input,
2*seq_len*batch*d_model bytes per layer. For a model of `layers` layers, `d_model` and `n_heads`,
at batch size `batch`, give for each sequence length in `seq_lens` the stored activations of all
layers in GiB without and with recomputation, and the ratio of the two (without / with).""",
    _ACTIVATION_ROW,
    activation_memory_float, "drop_attention_scores",
    sample=sample_activation_memory,
    levels="L2: the stored tensors described, the bytes per token derived; L3: plus the training "
           "state against one device's HBM (fits varies); L4: the largest batch that fits with and "
           "without full recomputation (None when not one sequence fits); L5: the recomputation "
           "choice and batch of the highest throughput, with a fixed step overhead",
    upper={2: Level(activation_memory, levels_memory.L2_QUESTION, _ACTIVATION_ROW, activation_memory_float,
                    "drop_attention_scores"), **levels_memory.LEVELS},
    branches=levels_memory.BRANCHES,
)

# Bytes per parameter of some uses; a use that divides a decimal capacity evenly would put the
# floor on an exact integer (refused), so levels 1-2 draw from the uneven ones only.
_USES = (("inference_int4_g32_scales", Fraction(9, 16)), ("inference_int4_g128_scales", Fraction(33, 64)),
         ("inference_fp8_g128_scales", Fraction(65, 64)), ("training_adam_state_no_grads", 14),
         ("training_adam_fp32_grads", 18), ("inference_int3_g64_scales", Fraction(7, 16)))
_EVEN_USES = (("inference_bf16", 2), ("inference_fp32", 4), ("training_adam_bf16_grads", 16))


def sample_largest_model(draw: Draw, level: int) -> dict:
    hbm, chips = hbm_capacity(draw, level), draw.integer(1, 4 * level)
    pool = _USES if round_numbers(level) else _USES + _EVEN_USES
    pool = [use for use in pool if not near_integer(Fraction(hbm * chips) / use[1])]
    k = rows(level, 5) - 2
    if len(pool) < k:
        raise Reject("too few uses leave the parameter count off an integer")
    return {"hbm_bytes_per_chip": hbm, "chips": chips,
            "uses": [{"name": name, "bytes_per_param": size} for name, size in draw.sample(pool, k)]}


def _largest_model_edges(task: Task) -> str | None:
    capacity = task.inputs["hbm_bytes_per_chip"] * task.inputs["chips"]
    for use in task.inputs["uses"]:
        problem = rounding_edge(f"{use['name']}: the parameters that fit",
                                Fraction(capacity) / use["bytes_per_param"])
        if problem:
            return problem
    return None


LARGEST_MODEL = scaling_family(
    "largest_model", "memory", largest_model,
    """\
A node has `chips` chips with `hbm_bytes_per_chip` bytes of HBM each. For each use in `uses`, with
its bytes per parameter (weights only for inference, with any quantization scales; Adam state,
and gradients where named, for training), give the largest whole number of parameters the node can
hold, all `chips` chips together (ignore everything else in memory).""",
    '{"rows": [{"use": <str>, "max_params": <int>}, ...]}  # one row per use, in order',
    largest_model_float, "gib_for_gb",
    sample=sample_largest_model,
    upper={**levels_memory5.LARGEST_LEVELS_R2, 4: levels_inverse2.CHIPS},
    branches=levels_memory5.LARGEST_BRANCHES_R2,
    levels="L2: bytes per parameter derived from weight bits and group scales; L3: the largest model "
           "per ZeRO stage; L4: the fewest chips per use for a given model (None above the cap); L5: "
           "the most layers a pipeline of chips holds (uneven split, embeddings on the first and last "
           "stages) and the model's parameters",
    reject=_largest_model_edges,
)

FAMILIES = (ADAM_MEMORY, KV_CACHE_SIZE, MAX_BATCH_FOR_KV_CACHE, ACTIVATION_MEMORY, LARGEST_MODEL)

TASKS = (
    with_tags(ADAM_MEMORY.task(
        "sc-015",
        {"models": [{"name": "8B", "n_params": 8 * 10**9}, {"name": "70B", "n_params": 70 * 10**9},
                    {"name": "405B", "n_params": 405 * 10**9}],
         "weight_bytes": 2, "master_bytes": 4, "first_moment_bytes": 4, "second_moment_bytes": 4,
         "hbm_bytes_per_chip": 96 * 10**9},
    ), "headline:adam_state_multiple"),
    KV_CACHE_SIZE.task(
        "sc-016",
        {"configs": [{"name": "mha", "layers": 80, "n_kv_heads": 64, "head_dim": 128},
                     {"name": "gqa", "layers": 80, "n_kv_heads": 8, "head_dim": 128},
                     {"name": "mqa", "layers": 80, "n_kv_heads": 1, "head_dim": 128}],
         "seq_len": 32768, "batch": 16, "bytes_per_value": 2},
    ),
    MAX_BATCH_FOR_KV_CACHE.task(
        "sc-017",
        {"hbm_bytes": 8 * 80 * 10**9, "n_params": 70 * 10**9, "weight_bytes": 2, "layers": 80,
         "n_kv_heads": 8, "head_dim": 128, "kv_bytes": 2, "seq_lens": [8192, 32768, 131072]},
    ),
    ACTIVATION_MEMORY.task(
        "sc-018",
        {"layers": 32, "d_model": 4096, "n_heads": 32, "batch": 1, "seq_lens": [2048, 8192, 32768]},
    ),
    LARGEST_MODEL.task(
        "sc-019",
        {"hbm_bytes_per_chip": 80 * 10**9, "chips": 8, "uses": [
            {"name": "inference_bf16", "bytes_per_param": 2},
            {"name": "inference_int8", "bytes_per_param": 1},
            {"name": "inference_int4", "bytes_per_param": Fraction(1, 2)},
            {"name": "training_adam_state_no_grads", "bytes_per_param": 14},
            {"name": "training_adam_fp32_grads", "bytes_per_param": 18},
        ]},
    ),
    # 8-bit moments (2 + 4 + 1 + 1 bytes per parameter) on 16 GiB chips: the same family as sc-015.
    ADAM_MEMORY.task(
        "sc-020",
        {"models": [{"name": "1.3B", "n_params": 1_300_000_000}, {"name": "7B", "n_params": 7 * 10**9},
                    {"name": "13B", "n_params": 13 * 10**9}],
         "weight_bytes": 2, "master_bytes": 4, "first_moment_bytes": 1, "second_moment_bytes": 1,
         "hbm_bytes_per_chip": 16 * 2**30},
    ),
)
