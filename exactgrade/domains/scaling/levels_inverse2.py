"""Level 4 (inverse) of more families: decode_step (the smallest compute-bound batch per chip),
kv_read_share (the longest context under a KV share), largest_model (the fewest chips per use),
expert_parallel_all_to_all (the most tokens under a time budget), dense_param_count (the most
layers under a parameter budget). References solve in closed form; the ``*_float`` twins search
or compute in another order, and can reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import attention_shape, hbm_capacity, n_params
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer
from exactgrade.family import Branch, Draw
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def min_compute_bound_decode_batch(chips, n_params, bytes_per_param):
    """Smallest batch whose decode step (2N FLOPs per sequence, weights read once) is compute-bound."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        batch = max(1, math.ceil(Fraction(bytes_per_param * chip["peak_flops"], 2 * chip["hbm_bandwidth"])))
        rows.append(
            {
                "chip": chip["name"],
                "min_batch": batch,
                "step_time_s": Fraction(2 * n_params * batch, chip["peak_flops"]),
            }
        )
    return {"rows": rows}


def longest_context_for_share(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches, max_kv_share
):
    """Longest context at which the KV cache is at most the given share of the bytes a step reads."""
    import math
    from fractions import Fraction

    weights = n_params * weight_bytes
    per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for batch in batches:
        # kv / (kv + weights) <= f  <=>  kv <= f / (1 - f) * weights
        longest = math.floor(max_kv_share / (1 - max_kv_share) * weights / Fraction(per_token * batch))
        rows.append({"batch": batch, "max_seq_len": longest if longest >= 1 else None})
    return {"rows": rows}


def fewest_chips_per_use(model_params, hbm_bytes_per_chip, max_chips, uses):
    """Fewest chips whose HBM together holds the model at each use's bytes per parameter."""
    import math
    from fractions import Fraction

    rows = []
    for use in uses:
        chips = math.ceil(Fraction(model_params) * use["bytes_per_param"] / hbm_bytes_per_chip)
        rows.append({"use": use["name"], "min_chips": chips if chips <= max_chips else None})
    return {"rows": rows}


def max_tokens_for_all_to_all(d_model, bytes_per_value, top_k, ep_degrees, link_bandwidth, time_budget_s):
    """Most tokens per device whose dispatch and combine all-to-alls finish within the budget."""
    import math
    from fractions import Fraction

    rows = []
    for ep in ep_degrees:
        per_token = 2 * top_k * d_model * bytes_per_value * Fraction(ep - 1, ep)
        rows.append(
            {"ep": ep, "max_tokens_per_device": math.floor(time_budget_s * link_bandwidth / per_token)}
        )
    return {"rows": rows}


def most_layers_for_budget(
    d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab_size, mlp_matrices, tied_embeddings, param_budgets
):
    """Most layers whose parameters (with the embeddings) stay within each budget (None: not one)."""
    per_layer = (
        d_model * (n_heads + 2 * n_kv_heads) * head_dim
        + n_heads * head_dim * d_model
        + mlp_matrices * d_model * d_ff
    )
    embeddings = vocab_size * d_model * (1 if tied_embeddings else 2)
    rows = []
    for budget in param_budgets:
        layers = (budget - embeddings) // per_layer
        rows.append({"param_budget": budget, "max_layers": layers if layers >= 1 else None})
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def _smallest(ok, high):
    if not ok(high):
        return None
    low = 0
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if ok(middle) else (middle, high)
    return high


def min_compute_bound_decode_batch_float(chips, n_params, bytes_per_param, mistake=None):
    known_mistake(mistake, "one_flop_per_param")
    per_token = 1.0 if mistake == "one_flop_per_param" else 2.0
    rows = []
    for c in chips:
        b = _smallest(
            lambda b, c=c: (
                per_token * n_params * b / c["peak_flops"] >= bytes_per_param * n_params / c["hbm_bandwidth"]
            ),
            10**9,
        )
        rows.append({"chip": c["name"], "min_batch": b, "step_time_s": b / c["peak_flops"] * 2.0 * n_params})
    return {"rows": rows}


def longest_context_for_share_float(
    n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches, max_kv_share, mistake=None
):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for b in batches:
        s = math.floor(
            n_params
            * weight_bytes
            * max_kv_share
            / (1 - max_kv_share)
            / (tensors * layers * n_kv_heads * head_dim * kv_bytes * b)
        )
        rows.append({"batch": b, "max_seq_len": s if s >= 1 else None})
    return {"rows": rows}


def fewest_chips_per_use_float(model_params, hbm_bytes_per_chip, max_chips, uses, mistake=None):
    known_mistake(mistake, "gib_for_gb")
    capacity = hbm_bytes_per_chip / 1e9 * 2**30 if mistake == "gib_for_gb" else float(hbm_bytes_per_chip)
    return {
        "rows": [
            {
                "use": u["name"],
                "min_chips": _smallest(
                    lambda k, u=u: k * capacity >= u["bytes_per_param"] * model_params, max_chips
                ),
            }
            for u in uses
        ]
    }


def max_tokens_for_all_to_all_float(
    d_model, bytes_per_value, top_k, ep_degrees, link_bandwidth, time_budget_s, mistake=None
):
    known_mistake(mistake, "dispatch_only")
    collectives = 1 if mistake == "dispatch_only" else 2
    return {
        "rows": [
            {
                "ep": ep,
                "max_tokens_per_device": math.floor(
                    link_bandwidth
                    * time_budget_s
                    / (collectives * (1 - 1 / ep) * top_k * bytes_per_value * d_model)
                ),
            }
            for ep in ep_degrees
        ]
    }


def most_layers_for_budget_float(
    d_model,
    d_ff,
    n_heads,
    n_kv_heads,
    head_dim,
    vocab_size,
    mlp_matrices,
    tied_embeddings,
    param_budgets,
    mistake=None,
):
    known_mistake(mistake, "embeddings_counted_once")
    per_layer = d_model * (mlp_matrices * d_ff + head_dim * (2 * n_heads + 2 * n_kv_heads))
    copies = 1 if tied_embeddings or mistake == "embeddings_counted_once" else 2
    rows = []
    for budget in param_budgets:
        layers = math.floor((budget - copies * d_model * vocab_size) / per_layer)
        rows.append({"param_budget": budget, "max_layers": layers if layers >= 1 else None})
    return {"rows": rows}


# ---------------------------------------------------------------- samplers and rules


def sample_decode_batch(draw: Draw, level: int) -> dict:
    return {
        "chips": sample.chips(draw, level, 2 + level),
        "n_params": n_params(draw, level),
        "bytes_per_param": draw.choice((1, 2, 4)),
    }


def _decode_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for c in i["chips"]:
        if near_integer(Fraction(i["bytes_per_param"] * c["peak_flops"], 2 * c["hbm_bandwidth"])):
            return f"{c['name']}: the batch bound sits on an integer"
    return None


def sample_share(draw: Draw, level: int) -> dict:
    """A quarter of the instances set the share so low that the largest batch cannot cache even
    one position (None there)."""
    shape = attention_shape(draw, level)
    inputs = {
        "n_params": n_params(draw, level),
        "weight_bytes": draw.choice((1, 2)),
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": draw.choice((1, 2)),
        "batches": sorted(draw.sample(range(1, 1025), 2 + level)),
        "max_kv_share": Fraction(draw.integer(1, 90), 100),
    }
    if draw.chance(1, 4):
        largest = (
            2
            * inputs["layers"]
            * inputs["n_kv_heads"]
            * inputs["head_dim"]
            * inputs["kv_bytes"]
            * inputs["batches"][-1]
        )
        weights = inputs["n_params"] * inputs["weight_bytes"]
        inputs["max_kv_share"] = Fraction(largest, 2 * weights + largest)  # half a position at that batch
    return inputs


def _share_edges(task: Task) -> str | None:
    i = task.inputs
    per_token = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["kv_bytes"]
    f = i["max_kv_share"]
    for b in i["batches"]:
        if near_integer(f / (1 - f) * i["n_params"] * i["weight_bytes"] / (per_token * b)):
            return f"batch {b}: the longest context sits on an integer"
    return None


_USES = (
    ("inference_bf16", 2),
    ("inference_int8", 1),
    ("inference_int4_g32_scales", Fraction(9, 16)),
    ("training_adam_state_no_grads", 14),
    ("training_adam_fp32_grads", 18),
    ("inference_fp8_g128_scales", Fraction(65, 64)),
)


def sample_fewest_chips(draw: Draw, level: int) -> dict:
    """A chip cap that about a third of the uses exceed (None)."""
    hbm, params = hbm_capacity(draw, level), n_params(draw, level)
    uses = draw.sample(_USES, min(len(_USES), 2 + level))
    needs = sorted(math.ceil(Fraction(params) * size / hbm) for _, size in uses)
    cap = needs[len(needs) // 2 + draw.integer(0, len(needs) - len(needs) // 2 - 1)]
    return {
        "model_params": params,
        "hbm_bytes_per_chip": hbm,
        "max_chips": cap,
        "uses": [{"name": name, "bytes_per_param": size} for name, size in uses],
    }


def _fewest_chips_edges(task: Task) -> str | None:
    i = task.inputs
    for u in i["uses"]:
        if near_integer(Fraction(i["model_params"]) * u["bytes_per_param"] / i["hbm_bytes_per_chip"]):
            return f"{u['name']}: the chip count sits on an integer"
    return None


def sample_all_to_all(draw: Draw, level: int) -> dict:
    degrees = sorted(draw.sample(range(2, 64 * level + 1), 2 + level))
    return {
        "d_model": attention_shape(draw, level)["d_model"],
        "bytes_per_value": draw.choice((1, 2, 4)),
        "top_k": draw.integer(1, 8),
        "ep_degrees": degrees,
        "link_bandwidth": 10**6 * draw.integer(20_000, 450_000),
        "time_budget_s": Fraction(draw.integer(1, 5000), 10_000),
    }


def _all_to_all_edges(task: Task) -> str | None:
    i = task.inputs
    for ep in i["ep_degrees"]:
        per_token = 2 * i["top_k"] * i["d_model"] * i["bytes_per_value"] * Fraction(ep - 1, ep)
        if near_integer(i["time_budget_s"] * i["link_bandwidth"] / per_token):
            return f"ep {ep}: the token bound sits on an integer"
    return None


def sample_layers(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    vocab = draw.integer(16_000, 300_000)
    per_layer = (
        shape["d_model"] * (2 * shape["n_heads"] + 2 * shape["n_kv_heads"]) * shape["head_dim"]
        + shape["mlp_matrices"] * shape["d_model"] * shape["d_ff"]
    )
    embeddings = 2 * vocab * shape["d_model"]
    layers = [draw.integer(1, 120) for _ in range(2 + level)]
    if draw.chance(1, 3):  # one budget short of a single layer: None
        layers[0] = 0
    budgets = sorted({embeddings + per_layer * n + draw.integer(1, per_layer - 1) for n in layers})
    return {
        **{k: shape[k] for k in ("d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim")},
        "vocab_size": vocab,
        "mlp_matrices": shape["mlp_matrices"],
        "tied_embeddings": False,
        "param_budgets": [b for b in budgets if b > 0],
    }


def _some_none(task: Task) -> bool:
    return any(None in row.values() for row in task.expected["rows"])


# ---------------------------------------------------------------- levels

_DECODE = """\
A dense model of `n_params` parameters stored at `bytes_per_param` bytes each generates tokens for
a batch of B sequences. Each decode step runs the model on one new token per sequence (2 FLOPs per
parameter per token) and reads every weight from HBM once (ignore the KV cache and activations).
For each chip in `chips` (peak FLOP/s and HBM bytes/s), give the smallest batch at which the step
is compute-bound, and the step time in seconds at that batch."""

_SHARE = """\
A decode step of a model with `n_params` parameters (`weight_bytes` bytes each) reads every weight
once plus the whole KV cache of every sequence in the batch: a key and a value of `head_dim`
values for each of `layers` layers, `n_kv_heads` KV heads and every cached position, `kv_bytes`
bytes per value. For each batch size in `batches`, give the longest integer number of cached
positions per sequence at which the KV cache is at most `max_kv_share` of all bytes read per step,
or None if not even one position is."""

_CHIPS = """\
A model of `model_params` parameters is to be held on chips of `hbm_bytes_per_chip` bytes of HBM
each, pooled across the chips. For each use in `uses`, with its bytes per parameter (weights only
for inference, with any quantization scales; Adam state, and gradients where named, for
training), give the fewest chips whose HBM together holds the model (ignore everything else in
memory), or None if it takes more than `max_chips` chips."""

_TOKENS = """\
Expert parallelism spreads a mixture-of-experts layer's experts over `ep` devices. Each device
sends a copy of each of its tokens (d_model values, `bytes_per_value` bytes each) to each of its
`top_k` experts; with uniform routing, a fraction 1/ep of those copies stays on the device and the
rest is sent. The forward pass of one MoE layer needs two all-to-alls of that size: dispatch and
combine (results back). For each degree in `ep_degrees`, give the largest number of tokens per
device whose two all-to-alls take at most `time_budget_s` seconds over links of `link_bandwidth`
bytes/s per device."""

_LAYERS = """\
A dense decoder has layers each with query and output projections of d_model x n_heads*head_dim,
key and value projections of d_model x n_kv_heads*head_dim, and an MLP of `mlp_matrices` matrices
of d_model x d_ff; plus an input embedding of vocab_size x d_model and, unless `tied_embeddings`
is True, a separate output embedding of the same shape. Ignore norms and biases. For each budget
in `param_budgets`, give the most layers whose total parameter count is at most the budget, or
None if not even one layer fits."""

DECODE = Level(
    min_compute_bound_decode_batch,
    _DECODE,
    '{"rows": [{"chip": <str>, "min_batch": <int>, "step_time_s": <number>}, ...]}  # one row per chip',
    min_compute_bound_decode_batch_float,
    "one_flop_per_param",
    sample=sample_decode_batch,
    reject=_decode_batch_edges,
)
SHARE = Level(
    longest_context_for_share,
    _SHARE,
    '{"rows": [{"batch": <int>, "max_seq_len": <int> | None}, ...]}  # one row per batch, in order',
    longest_context_for_share_float,
    "keys_only",
    sample=sample_share,
    reject=_share_edges,
)
CHIPS = Level(
    fewest_chips_per_use,
    _CHIPS,
    '{"rows": [{"use": <str>, "min_chips": <int> | None}, ...]}  # one row per use, in order',
    fewest_chips_per_use_float,
    "gib_for_gb",
    sample=sample_fewest_chips,
    reject=_fewest_chips_edges,
)
TOKENS = Level(
    max_tokens_for_all_to_all,
    _TOKENS,
    '{"rows": [{"ep": <int>, "max_tokens_per_device": <int>}, ...]}  # one row per degree, in order',
    max_tokens_for_all_to_all_float,
    "dispatch_only",
    sample=sample_all_to_all,
    reject=_all_to_all_edges,
)
LAYERS = Level(
    most_layers_for_budget,
    _LAYERS,
    '{"rows": [{"param_budget": <int>, "max_layers": <int> | None}, ...]}  # one row per budget, in order',
    most_layers_for_budget_float,
    "embeddings_counted_once",
    sample=sample_layers,
)
NONE_AT_L4 = (Branch("none", _some_none, Fraction(1, 8), (4, 5)),)  # L5 asks L4's question


# ---------------------------------------------------------------- a third batch


def min_m_for_fraction(shapes, bytes_per_value, peak_flops, hbm_bandwidth, target_fraction):
    """Smallest m at which A[m, k] @ B[k, n] reaches the target fraction of peak (None: no m does)."""
    import math
    from fractions import Fraction

    critical = Fraction(peak_flops, hbm_bandwidth)
    rows = []
    for k, n in shapes:
        # 2*m*k*n / (bytes*(m*k + k*n + m*n)) >= f * critical  <=>  m * (2*k*n - g*(k + n)) >= g*k*n
        g = target_fraction * critical * bytes_per_value
        slope = 2 * k * n - g * (k + n)
        rows.append({"shape": [k, n], "min_m": math.ceil(g * k * n / slope) if slope > 0 else None})
    return {"rows": rows}


def longest_sequences_for_batch(
    hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches
):
    """Longest length at which each batch of full-length sequences still fits its KV cache."""
    free = hbm_bytes - n_params * weight_bytes
    per_token = 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for batch in batches:
        longest = free // (per_token * batch)
        rows.append({"batch": batch, "max_seq_len": longest if longest >= 1 else None})
    return {"rows": rows}


def min_m_for_fraction_float(
    shapes, bytes_per_value, peak_flops, hbm_bandwidth, target_fraction, mistake=None
):
    known_mistake(mistake, "ignore_output_write")
    rows = []
    for k, n in shapes:
        written = 0 if mistake == "ignore_output_write" else 1

        def reached(m, k=k, n=n, written=written):
            intensity = 2.0 * m * k * n / (bytes_per_value * (m * k + k * n + written * m * n))
            return min(1.0, intensity * hbm_bandwidth / peak_flops) >= target_fraction

        limit = 2.0 * k * n / (bytes_per_value * (k + written * n)) * hbm_bandwidth / peak_flops
        rows.append(
            {"shape": [k, n], "min_m": _smallest(reached, 10**12) if limit > target_fraction else None}
        )
    return {"rows": rows}


def longest_sequences_for_batch_float(
    hbm_bytes, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, batches, mistake=None
):
    known_mistake(mistake, "ignore_weights")
    free = hbm_bytes - (0 if mistake == "ignore_weights" else n_params * weight_bytes)
    rows = []
    for b in batches:
        s = math.floor(free / (b * kv_bytes * head_dim * n_kv_heads * layers * 2.0))
        rows.append({"batch": b, "max_seq_len": s if s >= 1 else None})
    return {"rows": rows}


def sample_fraction(draw: Draw, level: int) -> dict:
    """About half the instances hold a shape too small ever to reach the target (None)."""
    shapes = [
        [128 * draw.integer(1, 64 * level), 128 * draw.integer(1, 64 * level)] for _ in range(2 + level)
    ]
    if draw.chance(1, 2):
        shapes[draw.below(len(shapes))] = [draw.integer(16, 256), draw.integer(16, 256)]
    return {
        "shapes": shapes,
        "bytes_per_value": draw.choice((1, 2, 4)),
        **sample.chip_inputs(draw, level),
        "target_fraction": Fraction(draw.integer(50, 99), 100),
    }


def _fraction_edges(task: Task) -> str | None:
    i = task.inputs
    g = i["target_fraction"] * Fraction(i["peak_flops"], i["hbm_bandwidth"]) * i["bytes_per_value"]
    for k, n in i["shapes"]:
        slope = 2 * k * n - g * (k + n)
        if slope == 0 or (slope > 0 and near_integer(g * k * n / slope)):
            return f"shape {[k, n]}: the bound sits on an integer or on no bound"
    return None


def sample_longest(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    chips = draw.choice((1, 2, 4, 8))
    hbm = chips * hbm_capacity(draw, level)
    width = draw.choice((1, 2))
    params = draw.integer(10**9, hbm * 4 // (5 * width))
    inputs = {
        "hbm_bytes": hbm,
        "n_params": params,
        "weight_bytes": width,
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": draw.choice((1, 2)),
    }
    per_token = 2 * inputs["layers"] * inputs["n_kv_heads"] * inputs["head_dim"] * inputs["kv_bytes"]
    top = (hbm - params * width) // per_token  # the batch at which one position is all that fits
    inputs["batches"] = (
        sorted(draw.sample(range(1, max(3, top * 2)), 2 + level))
        if draw.chance(1, 3)
        else sorted(draw.sample(range(1, max(3, min(top, 4096))), 2 + level))
    )
    return inputs


def _longest_edges(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes"] - i["n_params"] * i["weight_bytes"]
    per_token = 2 * i["layers"] * i["n_kv_heads"] * i["head_dim"] * i["kv_bytes"]
    for b in i["batches"]:
        if near_integer(Fraction(free, per_token * b)):
            return f"batch {b}: the longest length sits on an integer"
    return None


_FRACTION = """\
For each matmul A[m, k] @ B[k, n] with [k, n] in `shapes`, A and B are read from HBM once and the
product written once, `bytes_per_value` bytes per value, on a chip with `peak_flops` FLOP/s and
`hbm_bandwidth` bytes/s; the matmul takes its roofline time. Give the smallest integer m at which
it achieves at least `target_fraction` of peak FLOP/s (its FLOPs / time / peak_flops), or None if
no m does."""

_LONGEST = """\
A server with `hbm_bytes` bytes of HBM in total holds a model of `n_params` parameters at
`weight_bytes` bytes each; all remaining HBM holds KV cache. The model caches a key and a value of
`head_dim` values for each of `layers` layers and `n_kv_heads` KV heads per token, `kv_bytes` bytes
per value. For each batch in `batches`, give the longest sequence length such that that many
full-length sequences fit their KV cache (ignore activations and fragmentation), or None if not
even one token per sequence fits."""

FRACTION = Level(
    min_m_for_fraction,
    _FRACTION,
    '{"rows": [{"shape": [<int>, <int>], "min_m": <int> | None}, ...]}  # one row per shape, in order',
    min_m_for_fraction_float,
    "ignore_output_write",
    sample=sample_fraction,
    reject=_fraction_edges,
)
LONGEST = Level(
    longest_sequences_for_batch,
    _LONGEST,
    '{"rows": [{"batch": <int>, "max_seq_len": <int> | None}, ...]}  # one row per batch, in order',
    longest_sequences_for_batch_float,
    "ignore_weights",
    sample=sample_longest,
    reject=_longest_edges,
)


# ---------------------------------------------------------------- a fourth batch


def min_bandwidth_for_compute_bound(batches, d_model, d_ff, bytes_per_value, peak_flops):
    """The least memory bandwidth at which the matmul is compute-bound, per batch."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = 2 * batch * d_model * d_ff
        traffic = bytes_per_value * (batch * d_model + d_model * d_ff + batch * d_ff)
        rows.append({"batch": batch, "min_bandwidth": Fraction(traffic * peak_flops, flops)})
    return {"rows": rows}


def most_experts_for_budget(
    layers, d_model, n_heads, n_kv_heads, head_dim, expert_d_ff, top_k, mlp_matrices, param_budgets
):
    """Most experts per layer (at least top_k) whose total parameters stay within each budget."""
    attention = d_model * (n_heads + 2 * n_kv_heads) * head_dim + n_heads * head_dim * d_model
    expert = mlp_matrices * d_model * expert_d_ff
    rows = []
    for budget in param_budgets:
        experts = (budget // layers - attention) // expert
        rows.append({"param_budget": budget, "max_experts": experts if experts >= top_k else None})
    return {"rows": rows}


def largest_model_for_chips(
    chip_counts, weight_bytes, master_bytes, first_moment_bytes, second_moment_bytes, hbm_bytes_per_chip
):
    """Most parameters whose weights and Adam state fit on each number of chips."""
    per_param = weight_bytes + master_bytes + first_moment_bytes + second_moment_bytes
    return {
        "rows": [
            {"chips": chips, "max_params": chips * hbm_bytes_per_chip // per_param} for chips in chip_counts
        ]
    }


def min_bandwidth_for_compute_bound_float(batches, d_model, d_ff, bytes_per_value, peak_flops, mistake=None):
    known_mistake(mistake, "weights_only_traffic")
    rows = []
    for b in batches:
        if mistake == "weights_only_traffic":
            traffic = float(d_model * d_ff * bytes_per_value)
        else:
            traffic = ((b + d_ff) * d_model + b * d_ff) * float(bytes_per_value)
        rows.append({"batch": b, "min_bandwidth": peak_flops / (2.0 * b * d_model * d_ff / traffic)})
    return {"rows": rows}


def most_experts_for_budget_float(
    layers,
    d_model,
    n_heads,
    n_kv_heads,
    head_dim,
    expert_d_ff,
    top_k,
    mlp_matrices,
    param_budgets,
    mistake=None,
):
    known_mistake(mistake, "attention_once")
    attention = 2 * d_model * head_dim * n_heads + 2 * d_model * head_dim * n_kv_heads
    rows = []
    for budget in param_budgets:
        if mistake == "attention_once":
            experts = math.floor((budget - attention) / (layers * mlp_matrices * expert_d_ff * d_model))
        else:
            experts = math.floor(
                (math.floor(budget / layers) - attention) / (mlp_matrices * expert_d_ff * d_model)
            )
        rows.append({"param_budget": budget, "max_experts": experts if experts >= top_k else None})
    return {"rows": rows}


def largest_model_for_chips_float(
    chip_counts,
    weight_bytes,
    master_bytes,
    first_moment_bytes,
    second_moment_bytes,
    hbm_bytes_per_chip,
    mistake=None,
):
    known_mistake(mistake, "optimizer_without_master")
    state = (
        first_moment_bytes
        + second_moment_bytes
        + (0 if mistake == "optimizer_without_master" else master_bytes)
    )
    return {
        "rows": [
            {"chips": c, "max_params": math.floor(hbm_bytes_per_chip / (state + weight_bytes) * c)}
            for c in chip_counts
        ]
    }


def sample_min_bandwidth(draw: Draw, level: int) -> dict:
    d_model = 1024 * draw.integer(2, 8 * level)
    return {
        "batches": sorted(draw.sample(range(1, 256 * level + 1), 2 + level)),
        "d_model": d_model,
        "d_ff": d_model * draw.choice((2, 3, 4)),
        "bytes_per_value": draw.choice((1, 2, 4)),
        "peak_flops": sample.peak_flops(draw, level),
    }


def sample_experts(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    layers = draw.integer(8, 40 * level)
    top_k = draw.integer(1, 4)
    attention = shape["d_model"] * (2 * shape["n_heads"] + 2 * shape["n_kv_heads"]) * shape["head_dim"]
    expert = shape["mlp_matrices"] * shape["d_model"] * shape["d_ff"]
    counts = [draw.integer(top_k, 256) for _ in range(2 + level)]
    if draw.chance(1, 3):  # one budget a little short of top_k experts: None
        counts[0] = top_k - 1
    budgets = sorted(
        {layers * (attention + expert * c) + draw.integer(1, layers * expert - 1) for c in counts}
    )
    return {
        "layers": layers,
        "d_model": shape["d_model"],
        "n_heads": shape["n_heads"],
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "expert_d_ff": shape["d_ff"],
        "top_k": top_k,
        "mlp_matrices": shape["mlp_matrices"],
        "param_budgets": [b for b in budgets if b > 0],
    }


def _experts_edges(task: Task) -> str | None:
    i = task.inputs
    attention = i["d_model"] * (2 * i["n_heads"] + 2 * i["n_kv_heads"]) * i["head_dim"]
    expert = i["mlp_matrices"] * i["d_model"] * i["expert_d_ff"]
    for b in i["param_budgets"]:
        if near_integer(Fraction(b, i["layers"])) or near_integer(
            (Fraction(b // i["layers"]) - attention) / expert
        ):
            return f"budget {b}: a floor sits on an integer"
    return None


def sample_adam_chips(draw: Draw, level: int) -> dict:
    return {
        "chip_counts": sorted(draw.sample(range(1, 64 * level + 1), 2 + level)),
        "weight_bytes": 2,
        "master_bytes": 4,
        "first_moment_bytes": draw.choice((1, 2, 4)),
        "second_moment_bytes": draw.choice((1, 2, 4)),
        "hbm_bytes_per_chip": hbm_capacity(draw, level),
    }


def _adam_chips_edges(task: Task) -> str | None:
    i = task.inputs
    per = i["weight_bytes"] + i["master_bytes"] + i["first_moment_bytes"] + i["second_moment_bytes"]
    for c in i["chip_counts"]:
        if near_integer(Fraction(c * i["hbm_bytes_per_chip"], per)):
            return f"{c} chips: the parameter count sits on an integer"
    return None


_BANDWIDTH = """\
The matmul x[batch, d_model] @ W[d_model, d_ff] (read x and W once, write y once, `bytes_per_value`
bytes per value) runs at `peak_flops` FLOP/s with its operands streamed from a memory tier. For
each batch size in `batches`, give the least tier bandwidth in bytes/s at which the matmul is
compute-bound (its compute time at least its memory time)."""

_EXPERTS = """\
A mixture-of-experts decoder has `layers` layers. Each layer has attention weights (query and output
projections of d_model x n_heads*head_dim each, key and value projections of d_model x
n_kv_heads*head_dim each) and some number of experts, each an MLP of `mlp_matrices` matrices of
d_model x expert_d_ff; every token is routed to `top_k` experts. Count only these weights. For each
budget in `param_budgets`, give the most experts per layer (the same in every layer) whose total
parameter count is at most the budget, or None if fewer than `top_k` experts fit."""

_ADAM = """\
Training with Adam keeps, per parameter, the weights (`weight_bytes`), a master copy
(`master_bytes`), the first moment (`first_moment_bytes`) and the second moment
(`second_moment_bytes`). For each chip count in `chip_counts`, give the most parameters whose
weights plus optimizer state fit in that many chips of `hbm_bytes_per_chip` bytes of HBM each,
pooled (ignore gradients, activations and any other memory)."""

BANDWIDTH = Level(
    min_bandwidth_for_compute_bound,
    _BANDWIDTH,
    '{"rows": [{"batch": <int>, "min_bandwidth": <number>}, ...]}  # one row per batch, in order',
    min_bandwidth_for_compute_bound_float,
    "weights_only_traffic",
    sample=sample_min_bandwidth,
)
EXPERTS = Level(
    most_experts_for_budget,
    _EXPERTS,
    '{"rows": [{"param_budget": <int>, "max_experts": <int> | None}, ...]}  # one row per budget',
    most_experts_for_budget_float,
    "attention_once",
    sample=sample_experts,
    reject=_experts_edges,
)
ADAM = Level(
    largest_model_for_chips,
    _ADAM,
    '{"rows": [{"chips": <int>, "max_params": <int>}, ...]}  # one row per chip count, in order',
    largest_model_for_chips_float,
    "optimizer_without_master",
    sample=sample_adam_chips,
    reject=_adam_chips_edges,
)


def most_chips_for_mfu(n_params, runs, min_mfu):
    """Most chips at which each run's measured throughput still means an MFU of at least min_mfu."""
    import math
    from fractions import Fraction

    rows = []
    for run in runs:
        flops_per_s = 6 * n_params * Fraction(run["tokens_per_step"]) / run["step_time_s"]
        chips = math.floor(flops_per_s / (run["peak_flops"] * min_mfu))
        rows.append({"run": run["name"], "max_chips": chips if chips >= 1 else None})
    return {"rows": rows}


def most_chips_for_mfu_float(n_params, runs, min_mfu, mistake=None):
    known_mistake(mistake, "inference_flops")
    per_token = 2.0 if mistake == "inference_flops" else 6.0
    rows = []
    for r in runs:
        c = math.floor(
            per_token * n_params * r["tokens_per_step"] / r["step_time_s"] / r["peak_flops"] / min_mfu
        )
        rows.append({"run": r["name"], "max_chips": c if c >= 1 else None})
    return {"rows": rows}


def sample_mfu_chips(draw: Draw, level: int) -> dict:
    """In a third of the instances the last run is so slow that even one chip stays below the
    floor (None)."""
    params = n_params(draw, level)
    min_mfu = Fraction(draw.integer(20, 60), 100)
    names = ("run_a", "run_b", "run_c", "run_d", "run_e")[: 2 + level // 2]
    slow = draw.chance(1, 3)
    runs = []
    for name in names:
        peak = sample.peak_flops(draw, level)
        tokens = 1024 * draw.integer(256, 4096 * level)
        chips = draw.integer(8, 4096)
        step = Fraction(6 * params * tokens, chips * peak) / Fraction(draw.integer(20, 70), 100)
        if slow and name == names[-1]:  # below the floor on a single chip
            step = Fraction(6 * params * tokens, peak) / (min_mfu * Fraction(draw.integer(50, 95), 100))
        runs.append(
            {
                "name": name,
                "peak_flops": peak,
                "tokens_per_step": tokens,
                "step_time_s": Fraction(max(1, round(step * 1000)), 1000),
            }
        )
    return {"n_params": params, "runs": runs, "min_mfu": min_mfu}


def _mfu_edges(task: Task) -> str | None:
    i = task.inputs
    for r in i["runs"]:
        if near_integer(
            6
            * i["n_params"]
            * Fraction(r["tokens_per_step"])
            / r["step_time_s"]
            / (r["peak_flops"] * i["min_mfu"])
        ):
            return f"{r['name']}: the chip count sits on an integer"
    return None


_MFU = """\
A dense model with `n_params` parameters counts 6*n_params training FLOPs per token. For each
measured run in `runs` (peak FLOP/s per chip, tokens per optimizer step, and measured seconds per
step), give the most chips the run could have used while its model FLOPs utilization is at least
`min_mfu` (same tokens per step and step time), or None if not even one chip would reach it."""

MFU = Level(
    most_chips_for_mfu,
    _MFU,
    '{"rows": [{"run": <str>, "max_chips": <int> | None}, ...]}  # one row per run, in order',
    most_chips_for_mfu_float,
    "inference_flops",
    sample=sample_mfu_chips,
    reject=_mfu_edges,
)

__all__ = [
    "ADAM",
    "BANDWIDTH",
    "CHIPS",
    "DECODE",
    "EXPERTS",
    "FRACTION",
    "LAYERS",
    "LONGEST",
    "MFU",
    "NONE_AT_L4",
    "SHARE",
    "TOKENS",
]
