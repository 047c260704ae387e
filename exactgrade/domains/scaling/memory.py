"""Memory tasks (sc-015..sc-020): Adam state, KV cache, activations, what fits in HBM.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._task import known_mistake, scaling_task

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


# ---------------------------------------------------------------- tasks

_ADAM_QUESTION = """\
Training with Adam keeps, per parameter, the weights (`weight_bytes`), a master copy
(`master_bytes`), the first moment (`first_moment_bytes`) and the second moment
(`second_moment_bytes`). For each model in `models`, give the weights in GiB, the optimizer state
(master copy + both moments) in GiB, the ratio of optimizer state to weights, and the smallest
number of chips of `hbm_bytes_per_chip` bytes of HBM each that can hold weights plus optimizer
state (ignore gradients, activations and any other memory)."""

_ADAM_SHAPE = ('{"rows": [{"model": <str>, "weights_gib": <number>, "optimizer_gib": <number>, '
               '"optimizer_to_weights": <number>, "min_chips": <int>}, ...]}  # one row per model, in order')

TASKS = (
    scaling_task(
        "sc-015", "memory", adam_memory,
        {"models": [{"name": "8B", "n_params": 8 * 10**9}, {"name": "70B", "n_params": 70 * 10**9},
                    {"name": "405B", "n_params": 405 * 10**9}],
         "weight_bytes": 2, "master_bytes": 4, "first_moment_bytes": 4, "second_moment_bytes": 4,
         "hbm_bytes_per_chip": 96 * 10**9},
        _ADAM_QUESTION + "\nThis is standard mixed precision (2 + 4 + 4 + 4 bytes per parameter); the HBM "
        "capacity is 96 GB (decimal).",
        _ADAM_SHAPE, adam_memory_float, "gb_for_gib",
        tags=("headline:adam_state_multiple",),
    ),
    scaling_task(
        "sc-016", "memory", kv_cache_size,
        {"configs": [{"name": "mha", "layers": 80, "n_kv_heads": 64, "head_dim": 128},
                     {"name": "gqa", "layers": 80, "n_kv_heads": 8, "head_dim": 128},
                     {"name": "mqa", "layers": 80, "n_kv_heads": 1, "head_dim": 128}],
         "seq_len": 32768, "batch": 16, "bytes_per_value": 2},
        """\
A decoder caches a key and a value vector of size `head_dim` for every layer, every KV head and
every position, `bytes_per_value` bytes per value. For each attention variant in `configs`
(multi-head, grouped-query and multi-query attention of the same model), give the KV-cache bytes
per token and the total KV cache in GiB for `batch` sequences of `seq_len` tokens each.""",
        '{"rows": [{"config": <str>, "bytes_per_token": <number>, "total_gib": <number>}, ...]}'
        "  # one row per config, in order",
        kv_cache_size_float, "keys_only",
    ),
    scaling_task(
        "sc-017", "memory", max_batch_for_kv_cache,
        {"hbm_bytes": 8 * 80 * 10**9, "n_params": 70 * 10**9, "weight_bytes": 2, "layers": 80,
         "n_kv_heads": 8, "head_dim": 128, "kv_bytes": 2, "seq_lens": [8192, 32768, 131072]},
        """\
A server with `hbm_bytes` bytes of HBM in total (8 chips of 80 GB) holds a model of `n_params`
parameters at `weight_bytes` bytes each; all remaining HBM holds KV cache. The model caches a key
and a value of `head_dim` values for each of `layers` layers and `n_kv_heads` KV heads per token,
`kv_bytes` bytes per value. For each sequence length in `seq_lens`, give the KV-cache bytes of one
full-length sequence and the largest number of such sequences (the batch) whose KV cache fits
(ignore activations and fragmentation).""",
        '{"rows": [{"seq_len": <int>, "kv_bytes_per_sequence": <number>, "max_batch": <int>}, ...]}'
        "  # one row per entry of `seq_lens`, in order",
        max_batch_for_kv_cache_float, "ignore_weights",
    ),
    scaling_task(
        "sc-018", "memory", activation_memory,
        {"layers": 32, "d_model": 4096, "n_heads": 32, "batch": 1, "seq_lens": [2048, 8192, 32768]},
        """\
Without recomputation, a transformer layer stores seq_len*batch*(34*d_model + 5*n_heads*seq_len)
bytes of activations for the backward pass (16-bit activations, the attention scores being the
second term). With full activation recomputation it stores only its bf16 input,
2*seq_len*batch*d_model bytes per layer. For a model of `layers` layers, `d_model` and `n_heads`,
at batch size `batch`, give for each sequence length in `seq_lens` the stored activations of all
layers in GiB without and with recomputation, and the ratio of the two (without / with).""",
        '{"rows": [{"seq_len": <int>, "no_recompute_gib": <number>, "full_recompute_gib": <number>, '
        '"saving_factor": <number>}, ...]}  # one row per entry of `seq_lens`, in order',
        activation_memory_float, "drop_attention_scores",
    ),
    scaling_task(
        "sc-019", "memory", largest_model,
        {"hbm_bytes_per_chip": 80 * 10**9, "chips": 8, "uses": [
            {"name": "inference_bf16", "bytes_per_param": 2},
            {"name": "inference_int8", "bytes_per_param": 1},
            {"name": "inference_int4", "bytes_per_param": Fraction(1, 2)},
            {"name": "training_adam", "bytes_per_param": 14},
            {"name": "training_adam_fp32_grads", "bytes_per_param": 18},
        ]},
        """\
A node has `chips` chips with `hbm_bytes_per_chip` bytes of HBM each (80 GB, decimal). For each use
in `uses`, with its bytes per parameter (weights only for inference; Adam state, and fp32 gradients
where named, for training), give the largest whole number of parameters the node can hold (ignore
everything else in memory).""",
        '{"rows": [{"use": <str>, "max_params": <int>}, ...]}  # one row per use, in order',
        largest_model_float, "gib_for_gb",
    ),
    scaling_task(
        "sc-020", "memory", adam_memory,
        {"models": [{"name": "1.3B", "n_params": 1_300_000_000}, {"name": "7B", "n_params": 7 * 10**9},
                    {"name": "13B", "n_params": 13 * 10**9}],
         "weight_bytes": 2, "master_bytes": 4, "first_moment_bytes": 1, "second_moment_bytes": 1,
         "hbm_bytes_per_chip": 16 * 2**30},
        _ADAM_QUESTION + "\nHere the optimizer keeps 8-bit moments (2 + 4 + 1 + 1 bytes per parameter) and "
        "each chip has 16 GiB (binary) of HBM.",
        _ADAM_SHAPE, adam_memory_float, "gb_for_gib",
    ),
)
FAMILIES = ()
