"""The dense_param_count family of flops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    fraction,
    letters,
    n_tokens,
    peak_flops,
    round_numbers,
)
from exactgrade.domains.scaling._task import known_mistake, near_tie, scaling_level, some_none
from exactgrade.domains.scaling.hardware import HBM_CAPACITY, require, require_capacity_per_peak
from exactgrade.family import Branch, Draw, five_levels
from exactgrade.task import Task


def dense_param_count(
    layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab_size, mlp_matrices, tied_embeddings, n_tokens
):
    """Parameters of a dense decoder (matmul weights and embeddings only) and its 6ND cost."""
    from fractions import Fraction

    per_layer = (
        d_model * (n_heads + 2 * n_kv_heads) * head_dim
        + n_heads * head_dim * d_model
        + mlp_matrices * d_model * d_ff
    )
    embeddings = vocab_size * d_model * (1 if tied_embeddings else 2)
    total = layers * per_layer + embeddings
    return {
        "rows": [
            {
                "params_per_layer": per_layer,
                "total_params": total,
                "training_flops": Fraction(6 * total * n_tokens),
            }
        ]
    }


def dense_param_count_float(
    layers,
    d_model,
    d_ff,
    n_heads,
    n_kv_heads,
    head_dim,
    vocab_size,
    mlp_matrices,
    tied_embeddings,
    n_tokens,
    mistake=None,
):
    known_mistake(mistake, "embeddings_counted_once")
    per_layer = d_model * (mlp_matrices * d_ff + head_dim * (2 * n_heads + 2 * n_kv_heads))
    copies = 1 if tied_embeddings or mistake == "embeddings_counted_once" else 2
    total = per_layer * layers + copies * d_model * vocab_size
    return {
        "rows": [
            {"params_per_layer": per_layer, "total_params": total, "training_flops": 6.0 * n_tokens * total}
        ]
    }


def sample_dense_param_count(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    vocab = draw.choice((32000, 50257, 65536, 128256, 151936, 256000))
    if not round_numbers(level):
        vocab = draw.integer(16_000, 300_000)
    return {
        "layers": draw.integer(8, 40 * level),
        **{k: shape[k] for k in ("d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim")},
        "vocab_size": vocab,
        "mlp_matrices": shape["mlp_matrices"],
        "tied_embeddings": False,
        "n_tokens": n_tokens(draw, level),
    }


_DENSE_ROW = '{"rows": [{"params_per_layer": <int>, "total_params": <int>, "training_flops": <number>}]}'


LEVEL_1 = scaling_level(
    "flops",
    dense_param_count,
    """\
Count the parameters of a dense decoder: `layers` layers, each with query and output projections of
d_model x n_heads*head_dim, key and value projections of d_model x n_kv_heads*head_dim, and an MLP
of `mlp_matrices` matrices of d_model x d_ff; plus an input embedding of vocab_size x d_model and,
unless `tied_embeddings` is True, a separate output embedding of the same shape. Ignore norms and
biases. Give the parameters per layer, the total parameter count and the training FLOPs on
`n_tokens` tokens (6*N*D).""",
    _DENSE_ROW,
    dense_param_count_float,
    "embeddings_counted_once",
    sample=sample_dense_param_count,
)


# ================================================================ dense_param_count
DENSE_L2 = """\
A dense decoder has `layers` identical layers of width `d_model` and a vocabulary of `vocab_size`
tokens. In every layer, attention has `n_heads` query heads of `head_dim` values each and uses
grouped-query attention: `n_kv_heads` key heads and as many value heads, each of `head_dim` values;
every head is a linear projection of the layer's d_model-wide input, and the concatenated outputs of
the query heads are projected back to d_model. The MLP has `mlp_matrices` weight matrices, each
linking the d_model-wide input or output to the d_ff-wide hidden layer (`d_ff` values). Tokens
enter through an embedding table holding one d_model vector per vocabulary token; the logits come
from an output projection from d_model to vocab_size, which shares the embedding table's weights
when `tied_embeddings` is True and has weights of its own otherwise. Count only these weights (no
norms, no biases). Give the parameters per layer, the total parameter count and the training FLOPs
on `n_tokens` tokens (6 FLOPs per parameter per token)."""


LEVEL_2 = scaling_level(
    "flops",
    dense_param_count,
    DENSE_L2,
    _DENSE_ROW,
    dense_param_count_float,
    "embeddings_counted_once",
    sample=sample_dense_param_count,
)


def dense_train_days(
    layers,
    d_model,
    d_ff,
    n_heads,
    n_kv_heads,
    head_dim,
    vocab_size,
    mlp_matrices,
    tied_embeddings,
    seq_len,
    n_tokens,
    clusters,
):
    """Days to train on each cluster: forward FLOPs per token from every matmul (the output
    projection included, the embedding lookup free) and attention, training 3x forward."""
    from fractions import Fraction

    per_layer = (
        d_model * (n_heads + 2 * n_kv_heads) * head_dim
        + n_heads * head_dim * d_model
        + mlp_matrices * d_model * d_ff
    )
    forward = 2 * (layers * per_layer + vocab_size * d_model) + 4 * layers * n_heads * head_dim * seq_len
    flops = 3 * forward * n_tokens
    return {
        "rows": [
            {
                "cluster": c["name"],
                "time_days": Fraction(flops) / (c["chips"] * c["peak_flops"] * c["mfu"]) / 86400,
            }
            for c in clusters
        ]
    }


def dense_train_days_float(
    layers,
    d_model,
    d_ff,
    n_heads,
    n_kv_heads,
    head_dim,
    vocab_size,
    mlp_matrices,
    tied_embeddings,
    seq_len,
    n_tokens,
    clusters,
    mistake=None,
):
    known_mistake(mistake, "six_n_with_embeddings")
    weights = layers * d_model * (head_dim * (2 * n_heads + 2 * n_kv_heads) + mlp_matrices * d_ff)
    if mistake == "six_n_with_embeddings":
        per_token = 6.0 * (weights + d_model * vocab_size * (1 if tied_embeddings else 2))
    else:
        per_token = 6.0 * (weights + d_model * vocab_size) + 12.0 * seq_len * head_dim * n_heads * layers
    return {
        "rows": [
            {
                "cluster": c["name"],
                "time_days": per_token / c["peak_flops"] * (n_tokens / c["chips"]) / c["mfu"] / 86400,
            }
            for c in clusters
        ]
    }


def sample_dense_train(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    clusters = [
        {
            "name": name,
            "chips": draw.integer(64, 2**14),
            "peak_flops": peak_flops(draw, level),
            "mfu": fraction(draw, level, 20, 60),
        }
        for name in letters("cluster", 2 + level // 2)
    ]
    return {
        "layers": draw.integer(8, 40 * level),
        **{k: shape[k] for k in ("d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim")},
        "vocab_size": draw.integer(16_000, 300_000),
        "mlp_matrices": shape["mlp_matrices"],
        "tied_embeddings": draw.chance(1, 2),
        "seq_len": 1024 * draw.integer(1, 64),
        "n_tokens": n_tokens(draw, level),
        "clusters": clusters,
    }


DENSE_L3 = """\
A dense decoder has `layers` layers. In every layer: query and output projections of
d_model x n_heads*head_dim weights each, key and value projections of d_model x n_kv_heads*head_dim
each, and an MLP of `mlp_matrices` matrices of d_model x d_ff. The input embedding is a table of
vocab_size x d_model weights looked up per token (no FLOPs); the output projection to the
`vocab_size` logits is a d_model x vocab_size matmul that reuses the embedding table when
`tied_embeddings` is True and has its own weights otherwise (it costs FLOPs either way). Every matmul
costs 2 FLOPs per weight per token. Attention at context length `seq_len`: in every layer, each of
a token's `n_heads` query heads dots its query (`head_dim` values) with the keys of all seq_len
positions and sums their value vectors weighted by the scores, 2 FLOPs per multiply-add (full
context, no causal savings). The backward pass costs twice the forward pass. The model trains on
`n_tokens` tokens; each cluster in `clusters` has `chips` chips of `peak_flops` FLOP/s and sustains
the fraction `mfu` of its peak on these FLOPs. Give the time to train on each cluster, in days
(86400 s)."""


LEVEL_3 = scaling_level(
    "flops",
    dense_train_days,
    DENSE_L3,
    '{"rows": [{"cluster": <str>, "time_days": <number>}, ...]}  # one row per cluster, in order',
    dense_train_days_float,
    "six_n_with_embeddings",
    sample=sample_dense_train,
)


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


_LAYERS = """\
A dense decoder has layers each with query and output projections of d_model x n_heads*head_dim,
key and value projections of d_model x n_kv_heads*head_dim, and an MLP of `mlp_matrices` matrices
of d_model x d_ff; plus an input embedding of vocab_size x d_model and, unless `tied_embeddings`
is True, a separate output embedding of the same shape. Ignore norms and biases. For each budget
in `param_budgets`, give the most layers whose total parameter count is at most the budget, or
None if not even one layer fits."""


LEVEL_4 = scaling_level(
    "flops",
    most_layers_for_budget,
    _LAYERS,
    '{"rows": [{"param_budget": <int>, "max_layers": <int> | None}, ...]}  # one row per budget, in order',
    most_layers_for_budget_float,
    "embeddings_counted_once",
    sample=sample_layers,
)


def _dense_per_layer(m: dict) -> int:
    return (
        m["d_model"] * (m["n_heads"] + 2 * m["n_kv_heads"]) * m["head_dim"]
        + m["n_heads"] * m["head_dim"] * m["d_model"]
        + m["mlp_matrices"] * m["d_model"] * m["d_ff"]
    )


def design_largest_trainable(
    candidates,
    seq_len,
    tokens_per_param,
    microbatch_tokens,
    chips,
    peak_flops,
    mfu,
    budget_days,
    hbm_bytes_per_chip,
):
    """The candidate with the most parameters that trains on tokens_per_param tokens per parameter
    within the budget and fits its sharded training state and its activations in HBM."""
    from fractions import Fraction

    best = None
    for c in candidates:
        per_layer = (
            c["d_model"] * (c["n_heads"] + 2 * c["n_kv_heads"]) * c["head_dim"]
            + c["n_heads"] * c["head_dim"] * c["d_model"]
            + c["mlp_matrices"] * c["d_model"] * c["d_ff"]
        )
        embeddings = c["vocab_size"] * c["d_model"] * (1 if c["tied_embeddings"] else 2)
        params = c["layers"] * per_layer + embeddings
        forward = (
            2 * (c["layers"] * per_layer + c["vocab_size"] * c["d_model"])
            + 4 * c["layers"] * c["n_heads"] * c["head_dim"] * seq_len
        )
        days = Fraction(3 * forward * tokens_per_param * params) / (chips * peak_flops * mfu) / 86400
        memory = Fraction(16 * params, chips) + 2 * c["layers"] * c["d_model"] * microbatch_tokens
        if days <= budget_days and memory <= hbm_bytes_per_chip and (best is None or params > best[1]):
            best = (c["name"], params, days)
    name, params, days = best if best is not None else (None, None, None)
    return {"rows": [{"model": name, "total_params": params, "time_days": days}]}


def _candidate_numbers(c: dict, inputs: dict, exact: bool = True) -> tuple:
    per_layer = _dense_per_layer(c)
    params = c["layers"] * per_layer + c["vocab_size"] * c["d_model"] * (1 if c["tied_embeddings"] else 2)
    forward = (
        2 * (c["layers"] * per_layer + c["vocab_size"] * c["d_model"])
        + 4 * c["layers"] * c["n_heads"] * c["head_dim"] * inputs["seq_len"]
    )
    rate = inputs["chips"] * inputs["peak_flops"] * inputs["mfu"] * 86400
    days = Fraction(3 * forward * inputs["tokens_per_param"] * params) / rate
    memory = (
        Fraction(16 * params, inputs["chips"]) + 2 * c["layers"] * c["d_model"] * inputs["microbatch_tokens"]
    )
    return params, days, memory


def design_largest_trainable_float(
    candidates,
    seq_len,
    tokens_per_param,
    microbatch_tokens,
    chips,
    peak_flops,
    mfu,
    budget_days,
    hbm_bytes_per_chip,
    mistake=None,
):
    known_mistake(mistake, "six_n_flops")
    fits = []
    for c in candidates:
        n = float(c["layers"]) * _dense_per_layer(c) + c["d_model"] * c["vocab_size"] * (
            1 + (not c["tied_embeddings"])
        )
        if mistake == "six_n_flops":
            per_token = 6.0 * n
        else:
            per_token = (
                6.0 * (n - (0 if c["tied_embeddings"] else c["d_model"] * c["vocab_size"]))
                + 12.0 * c["layers"] * seq_len * c["n_heads"] * c["head_dim"]
            )
        days = per_token * n * tokens_per_param / peak_flops / chips / mfu / 86400
        memory = n / chips * 16 + 2.0 * microbatch_tokens * c["d_model"] * c["layers"]
        if days <= budget_days and memory <= hbm_bytes_per_chip:
            fits.append((n, c["name"], days))
    if not fits:
        return {"rows": [{"model": None, "total_params": None, "time_days": None}]}
    n, name, days = max(fits, key=lambda f: f[0])
    return {"rows": [{"model": name, "total_params": int(round(n)), "time_days": days}]}


def _design_candidate(draw: Draw) -> dict:
    head_dim = draw.choice((64, 128))
    n_heads = draw.integer(8, 64)
    n_kv_heads = draw.choice([d for d in range(1, n_heads + 1) if n_heads % d == 0 and d <= 16])
    d_model = 128 * draw.integer(8, 96)
    return {
        "layers": draw.integer(12, 96),
        "d_model": d_model,
        "d_ff": 128 * draw.integer(16, 320),
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "head_dim": head_dim,
        "mlp_matrices": draw.choice((2, 3)),
        "vocab_size": draw.integer(32_000, 260_000),
        "tied_embeddings": draw.chance(1, 2),
    }


def sample_design_trainable(draw: Draw, level: int) -> dict:
    """Candidates on both sides of both constraints: the budget and the capacity are each set
    just above one candidate's need, so some candidates fail by time and others by memory."""
    candidates = [{"name": name, **_design_candidate(draw)} for name in letters("model", 3 + level // 2 + 1)]
    seq_len = 1024 * draw.integer(2, 32)
    inputs = {
        "candidates": candidates,
        "seq_len": seq_len,
        "tokens_per_param": draw.integer(10, 40),
        "microbatch_tokens": seq_len * draw.integer(1, 16),
        "chips": draw.integer(64, 2048),
        "peak_flops": peak_flops(draw, level),
        "mfu": fraction(draw, level, 25, 55),
    }
    numbers = [_candidate_numbers(c, inputs) for c in candidates]
    _, days, _ = numbers[draw.below(len(numbers))]
    _, _, memory = numbers[draw.below(len(numbers))]
    inputs["budget_days"] = Fraction(math.ceil(days * Fraction(draw.integer(1001, 1400), 1000) * 1000), 1000)
    hbm = math.ceil(memory * Fraction(draw.integer(1001, 1400), 1000))
    inputs["hbm_bytes_per_chip"] = require("hbm_bytes_per_chip", hbm, HBM_CAPACITY)
    require_capacity_per_peak(hbm, inputs["peak_flops"])
    return inputs


def _design_trainable_rules(task: Task) -> str | None:
    """Both constraints bind somewhere, no candidate on an edge, and the answer is neither the
    largest candidate nor none."""
    i = task.inputs
    by_time = by_memory = False
    for c in i["candidates"]:
        _, days, memory = _candidate_numbers(c, i)
        if near_tie(days, i["budget_days"]) or near_tie(memory, i["hbm_bytes_per_chip"]):
            return f"{c['name']}: a need sits on its limit"
        fits_time, fits_memory = days <= i["budget_days"], memory <= i["hbm_bytes_per_chip"]
        by_time |= fits_memory and not fits_time
        by_memory |= fits_time and not fits_memory
    if not (by_time and by_memory):
        return "only one constraint binds (no candidate fails by time alone and another by memory alone)"
    row = task.expected["rows"][0]
    if row["model"] is None:
        return "no candidate trains within the limits"
    params = [_candidate_numbers(c, i)[0] for c in i["candidates"]]
    if row["total_params"] == max(params):
        return "the largest candidate is the answer"
    if params.count(row["total_params"]) > 1:
        return "two candidates share the answer's parameter count"
    return None


DENSE_L5 = """\
Pick the model to train. Each candidate in `candidates` is a dense decoder of `layers` layers: in
every layer, query and output projections of d_model x n_heads*head_dim weights each, key and value
projections of d_model x n_kv_heads*head_dim each, and an MLP of `mlp_matrices` matrices of
d_model x d_ff; an input embedding table of vocab_size x d_model weights (a lookup: no FLOPs) and an
output projection to the vocab_size logits, a d_model x vocab_size matmul that reuses the embedding
table when `tied_embeddings` is True and has its own weights otherwise. A candidate's parameter
count N counts every weight once (no norms or biases). It trains on `tokens_per_param` * N tokens
at context length `seq_len`. Every matmul costs 2 FLOPs per weight per token; attention, in every
layer, dots each of a token's n_heads queries (head_dim values) with the keys of all seq_len
positions and sums their value vectors weighted by the scores, 2 FLOPs per multiply-add (full
context); the backward pass costs twice the forward. The cluster has `chips` chips of `peak_flops`
FLOP/s and sustains the fraction `mfu` of peak on these FLOPs; training must take at most
`budget_days` days (86400 s). Every chip holds an equal 1/chips share of the training state, 16
bytes per parameter, plus, for the `microbatch_tokens` tokens it processes at once, the input of
every layer (d_model bf16 values per token per layer); this must fit in `hbm_bytes_per_chip` bytes.
Give the candidate with the largest N that meets both limits (on equal N, the earlier one), its N
and its training time in days; None for all three if no candidate does."""


LEVEL_5 = scaling_level(
    "flops",
    design_largest_trainable,
    DENSE_L5,
    '{"rows": [{"model": <str> | None, "total_params": <int> | None, "time_days": <number> | None}]}',
    design_largest_trainable_float,
    "six_n_flops",
    sample=sample_design_trainable,
    reject=_design_trainable_rules,
)


DENSE_PARAM_COUNT = five_levels(
    "dense_param_count",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the architecture described, its weights derived; L3: days to train per cluster with "
    "FLOPs counted from the matmuls (output projection included, lookup free, tied or not) and "
    "attention; L4: the most layers under each parameter budget (None); L5: the candidate with "
    "the most parameters that trains within a day budget and fits its sharded state and "
    "activations in HBM (some fail by time, others by memory)",
    branches=(Branch("none", some_none, Fraction(1, 8), (4,)),),
)
