"""FLOP-counting tasks (sc-007..sc-014): per-layer FLOPs, attention share, 6ND, MFU, time to train.

References are self-contained (imports inside, no globals); the ``*_float`` twins recompute each
answer in floats in another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import levels_flops, levels_flops5, levels_inverse, levels_inverse2
from exactgrade.domains.scaling._sample import (
    attention_shape,
    chip_count,
    fraction,
    letters,
    n_params,
    n_tokens,
    peak_flops,
    round_numbers,
    rows,
    sample_moe_training_flops,
    sample_utilization_by_counting,
    sorted_sample,
    step_time,
    tokens_per_step,
)
from exactgrade.domains.scaling._task import (
    Level,
    known_mistake,
    near_integer,
    rounding_edge,
    scaling_family,
    with_tags,
)
from exactgrade.family import Branch, Draw
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def layer_flops_per_token(d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, seq_lens):
    """Forward FLOPs per token of one transformer layer, split into attention and dense matmuls."""
    from fractions import Fraction

    projections = 2 * d_model * (n_heads + 2 * n_kv_heads) * head_dim + 2 * n_heads * head_dim * d_model
    mlp = 2 * mlp_matrices * d_model * d_ff
    dense = projections + mlp
    rows = []
    for seq_len in seq_lens:
        attention = 2 * 2 * seq_len * n_heads * head_dim  # q.K^T and p.V over the whole context
        rows.append({
            "seq_len": seq_len,
            "attention_flops": Fraction(attention),
            "dense_flops": Fraction(dense),
            "attention_fraction": Fraction(attention, attention + dense),
        })
    return {"rows": rows}


def attention_crossover_seq_len(models):
    """Smallest context length at which a layer's attention FLOPs reach its dense FLOPs."""
    import math
    from fractions import Fraction

    rows = []
    for m in models:
        projections = (2 * m["d_model"] * (m["n_heads"] + 2 * m["n_kv_heads"]) * m["head_dim"]
                       + 2 * m["n_heads"] * m["head_dim"] * m["d_model"])
        dense = projections + 2 * m["mlp_matrices"] * m["d_model"] * m["d_ff"]
        attention_per_position = 2 * 2 * m["n_heads"] * m["head_dim"]
        rows.append({
            "model": m["name"],
            "dense_flops": Fraction(dense),
            "crossover_seq_len": math.ceil(Fraction(dense, attention_per_position)),
        })
    return {"rows": rows}


def time_to_train(n_params, n_tokens, clusters):
    """6ND training FLOPs divided by what each cluster sustains."""
    from fractions import Fraction

    flops = 6 * n_params * n_tokens
    rows = []
    for cluster in clusters:
        sustained = cluster["chips"] * cluster["peak_flops"] * cluster["mfu"]
        rows.append({
            "cluster": cluster["name"],
            "training_flops": Fraction(flops),
            "time_days": Fraction(flops) / sustained / 86400,
        })
    return {"rows": rows}


def model_flops_utilization(n_params, runs):
    """MFU of measured training steps, counting 6N FLOPs per token."""
    from fractions import Fraction

    rows = []
    for run in runs:
        tokens_per_s = Fraction(run["tokens_per_step"]) / run["step_time_s"]
        rows.append({
            "run": run["name"],
            "tokens_per_s": tokens_per_s,
            "mfu": 6 * n_params * tokens_per_s / (run["chips"] * run["peak_flops"]),
        })
    return {"rows": rows}


def utilization_by_counting(n_params, layers, n_heads, head_dim, seq_len, tokens_per_step, step_time_s,
                            chips, peak_flops):
    """One measured step, its utilization under three FLOP-counting conventions."""
    from fractions import Fraction

    attention_forward = 4 * layers * n_heads * head_dim * seq_len  # per token, q.K^T and p.V
    per_token = {
        "6N": 6 * n_params,
        "6N+attention": 6 * n_params + 3 * attention_forward,
        "recompute_8N+attention": 8 * n_params + 4 * attention_forward,
    }
    achieved_tokens_per_s = Fraction(tokens_per_step) / step_time_s
    rows = []
    for counting, flops in per_token.items():
        rows.append({
            "counting": counting,
            "flops_per_token": Fraction(flops),
            "utilization": flops * achieved_tokens_per_s / (chips * peak_flops),
        })
    return {"rows": rows}


def moe_training_flops(layers, d_model, n_heads, n_kv_heads, head_dim, expert_d_ff, n_experts, top_k,
                       mlp_matrices, n_tokens):
    """A mixture-of-experts model trains at the cost of its active parameters only."""
    from fractions import Fraction

    attention = d_model * (n_heads + 2 * n_kv_heads) * head_dim + n_heads * head_dim * d_model
    expert = mlp_matrices * d_model * expert_d_ff
    total = layers * (attention + n_experts * expert)
    active = layers * (attention + top_k * expert)
    return {"rows": [{
        "total_params": total,
        "active_params": active,
        "training_flops": Fraction(6 * active * n_tokens),
        "total_to_active": Fraction(total, active),
    }]}


def dense_param_count(layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab_size, mlp_matrices,
                      tied_embeddings, n_tokens):
    """Parameters of a dense decoder (matmul weights and embeddings only) and its 6ND cost."""
    from fractions import Fraction

    per_layer = (d_model * (n_heads + 2 * n_kv_heads) * head_dim + n_heads * head_dim * d_model
                 + mlp_matrices * d_model * d_ff)
    embeddings = vocab_size * d_model * (1 if tied_embeddings else 2)
    total = layers * per_layer + embeddings
    return {"rows": [{
        "params_per_layer": per_layer,
        "total_params": total,
        "training_flops": Fraction(6 * total * n_tokens),
    }]}


# ---------------------------------------------------------------- float twins (tests only)


def layer_flops_per_token_float(d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, seq_lens,
                                mistake=None):
    known_mistake(mistake, "scores_only")
    dense = 2.0 * d_model * (mlp_matrices * d_ff + 2 * head_dim * (n_heads + n_kv_heads))
    rows = []
    for s in seq_lens:
        attention = (2.0 if mistake == "scores_only" else 4.0) * head_dim * n_heads * s
        rows.append({"seq_len": s, "attention_flops": attention, "dense_flops": dense,
                     "attention_fraction": 1.0 / (1.0 + dense / attention)})
    return {"rows": rows}


def attention_crossover_seq_len_float(models, mistake=None):
    known_mistake(mistake, "mha_kv_projections")
    rows = []
    for m in models:
        kv_heads = m["n_heads"] if mistake == "mha_kv_projections" else m["n_kv_heads"]
        dense = 2.0 * m["d_model"] * (2 * m["n_heads"] * m["head_dim"] + 2 * kv_heads * m["head_dim"]
                                      + m["mlp_matrices"] * m["d_ff"])
        rows.append({"model": m["name"], "dense_flops": dense,
                     "crossover_seq_len": math.ceil(dense / m["head_dim"] / m["n_heads"] / 4)})
    return {"rows": rows}


def time_to_train_float(n_params, n_tokens, clusters, mistake=None):
    known_mistake(mistake, "forward_only")
    per_token = 2.0 if mistake == "forward_only" else 6.0
    rows = []
    for c in clusters:
        days = (per_token * n_params / c["chips"]) * (n_tokens / c["peak_flops"]) / c["mfu"] / 24 / 3600
        rows.append({"cluster": c["name"], "training_flops": per_token * n_tokens * n_params,
                     "time_days": days})
    return {"rows": rows}


def model_flops_utilization_float(n_params, runs, mistake=None):
    known_mistake(mistake, "inference_flops")
    per_token = 2.0 if mistake == "inference_flops" else 6.0
    rows = []
    for r in runs:
        step_flops = per_token * n_params * r["tokens_per_step"]
        rows.append({"run": r["name"], "tokens_per_s": r["tokens_per_step"] / r["step_time_s"],
                     "mfu": step_flops / r["step_time_s"] / r["peak_flops"] / r["chips"]})
    return {"rows": rows}


def utilization_by_counting_float(n_params, layers, n_heads, head_dim, seq_len, tokens_per_step, step_time_s,
                                  chips, peak_flops, mistake=None):
    known_mistake(mistake, "attention_forward_only")
    attention = 4.0 * seq_len * head_dim * n_heads * layers
    training_attention = attention if mistake == "attention_forward_only" else 3 * attention
    capacity = peak_flops * chips * step_time_s / tokens_per_step  # FLOPs per token at 100%
    rows = []
    for name, flops in (("6N", 6.0 * n_params), ("6N+attention", 6.0 * n_params + training_attention),
                        ("recompute_8N+attention", 8.0 * n_params + training_attention * 4 / 3)):
        rows.append({"counting": name, "flops_per_token": flops, "utilization": flops / capacity})
    return {"rows": rows}


def moe_training_flops_float(layers, d_model, n_heads, n_kv_heads, head_dim, expert_d_ff, n_experts, top_k,
                             mlp_matrices, n_tokens, mistake=None):
    known_mistake(mistake, "flops_from_total_params")
    attention = 2 * d_model * head_dim * n_heads + 2 * d_model * head_dim * n_kv_heads
    expert = mlp_matrices * expert_d_ff * d_model
    total = layers * attention + layers * n_experts * expert
    active = layers * attention + layers * top_k * expert
    flops_params = total if mistake == "flops_from_total_params" else active
    return {"rows": [{"total_params": total, "active_params": active,
                      "training_flops": 6.0 * n_tokens * flops_params, "total_to_active": total / active}]}


def dense_param_count_float(layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab_size, mlp_matrices,
                            tied_embeddings, n_tokens, mistake=None):
    known_mistake(mistake, "embeddings_counted_once")
    per_layer = d_model * (mlp_matrices * d_ff + head_dim * (2 * n_heads + 2 * n_kv_heads))
    copies = 1 if tied_embeddings or mistake == "embeddings_counted_once" else 2
    total = per_layer * layers + copies * d_model * vocab_size
    return {"rows": [{"params_per_layer": per_layer, "total_params": total,
                      "training_flops": 6.0 * n_tokens * total}]}


# ---------------------------------------------------------------- families and tasks

_LAYER_QUESTION = """\
Count the forward FLOPs per token of one decoder layer. Its dense matmuls: the query projection
[d_model -> n_heads*head_dim], key and value projections [d_model -> n_kv_heads*head_dim] each, the
output projection [n_heads*head_dim -> d_model], and an MLP of `mlp_matrices` matrices of shape
[d_model, d_ff] (2 FLOPs per weight per token each). Attention for a token at context length S
scores its query against S keys and sums S values in every head: 2*2*S*n_heads*head_dim FLOPs
(count the full context, no causal-mask savings). For each context length in `seq_lens`, give the
attention FLOPs, the dense FLOPs and attention's fraction of the layer's total."""


def sample_layer_flops(draw: Draw, level: int) -> dict:
    top = 64 * 2**level
    seq_lens = [512 * s for s in sorted_sample(draw, 1, top, rows(level, 3))]
    if not round_numbers(level):
        seq_lens = sorted({s - draw.integer(0, 511) for s in seq_lens})
    return {**attention_shape(draw, level), "seq_lens": seq_lens}


_LAYER_ROW = ('{"rows": [{"seq_len": <int>, "attention_flops": <number>, "dense_flops": <number>, '
              '"attention_fraction": <number>}, ...]}  # one row per entry of `seq_lens`, in order')

LAYER_FLOPS = scaling_family(
    "layer_flops", "flops", layer_flops_per_token, _LAYER_QUESTION,
    _LAYER_ROW,
    layer_flops_per_token_float, "scores_only",
    sample=sample_layer_flops,
    levels="L2: the layer described, its FLOPs derived; L3: the whole model's training FLOPs per token "
           "with the output projection, and attention's share; L4: the longest context under each "
           "attention share; L5: the candidate layer with the most weights under a FLOP and a "
           "KV-cache budget (None when none fits)",
    upper={2: Level(layer_flops_per_token, levels_flops.LAYER_L2, _LAYER_ROW, layer_flops_per_token_float,
                    "scores_only"), **levels_flops.LEVELS},
    branches=levels_flops.BRANCHES,
)


def _crossover_model(draw: Draw, level: int, grouped: bool) -> dict:
    """A layer whose head count need not be a power of two (else the crossover length is
    nearly always a whole number, an integer edge the generator refuses)."""
    shape = attention_shape(draw, level)
    n_heads = draw.integer(4, 24 * level)
    divisors = [d for d in range(1, n_heads + (not grouped)) if n_heads % d == 0]
    shape.update(n_heads=n_heads, n_kv_heads=draw.choice(divisors))
    return shape


def _crossover_length(m: dict) -> Fraction:
    projections = 2 * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"]
    dense = 2 * m["d_model"] * (projections + m["mlp_matrices"] * m["d_ff"])
    return Fraction(dense, 4 * m["n_heads"] * m["head_dim"])


def sample_attention_crossover(draw: Draw, level: int) -> dict:
    models = []
    for i in range(rows(level, 3)):
        model = _crossover_model(draw, level, i == 0)
        for _ in range(8):  # redraw a model on an integer edge here, cheaper than a rejected instance
            if not near_integer(_crossover_length(model)):
                break
            model = _crossover_model(draw, level, i == 0)
        models.append(model)
    return {"models": [{"name": name, **model} for name, model in zip(letters("model", len(models)), models,
                                                                       strict=True)]}


def _crossover_edges(task: Task) -> str | None:
    for m in task.inputs["models"]:
        problem = rounding_edge(f"{m['name']}: the crossover length", _crossover_length(m))
        if problem:
            return problem
    return None


_CROSSOVER_ROW = ('{"rows": [{"model": <str>, "dense_flops": <number>, "crossover_seq_len": <int>}, ...]}'
                  "  # one row per model, in order")

ATTENTION_CROSSOVER = scaling_family(
    "attention_crossover", "flops", attention_crossover_seq_len,
    """\
For each decoder layer in `models`, count its dense forward FLOPs per token: query projection
[d_model -> n_heads*head_dim], key and value projections [d_model -> n_kv_heads*head_dim] each,
output projection [n_heads*head_dim -> d_model], and `mlp_matrices` MLP matrices of shape
[d_model, d_ff], at 2 FLOPs per weight per token. Attention at context length S costs
2*2*S*n_heads*head_dim FLOPs per token (full context, no causal savings). Give the dense FLOPs per
token and the smallest integer context length S at which attention FLOPs are at least the dense
FLOPs.""",
    _CROSSOVER_ROW,
    attention_crossover_seq_len_float, "mha_kv_projections",
    sample=sample_attention_crossover,
    levels="L2: the layer described, its FLOPs derived; L3: the shortest causally masked sequence where "
           "attention reaches a share of the layer's FLOPs; L4: the widest MLP at which attention still "
           "reaches the dense FLOPs at a context (None); L5: the crossover of whole models mixing global "
           "and sliding-window layers (below or beyond the window, or None below the cap)",
    reject=_crossover_edges,
    upper={2: Level(attention_crossover_seq_len, levels_flops.CROSSOVER_L2, _CROSSOVER_ROW,
                    attention_crossover_seq_len_float, "mha_kv_projections", reject=_crossover_edges),
           **levels_flops5.CROSSOVER_LEVELS_R2},
    branches=levels_flops5.CROSSOVER_BRANCHES_R2,
)


def sample_time_to_train(draw: Draw, level: int) -> dict:
    clusters = [{"name": name, "chips": chip_count(draw, level), "peak_flops": peak_flops(draw, level),
                 "mfu": fraction(draw, level, 20, 60)} for name in letters("cluster", rows(level, 2))]
    return {"n_params": n_params(draw, level), "n_tokens": n_tokens(draw, level), "clusters": clusters}


TIME_TO_TRAIN = scaling_family(
    "time_to_train", "flops", time_to_train,
    """\
A dense model with `n_params` parameters is trained on `n_tokens` tokens (6*N*D training FLOPs).
For each cluster in `clusters` (number of chips, peak FLOP/s per chip, and the model FLOPs
utilization `mfu` it sustains), give the total training FLOPs and the time to train in days
(1 day = 86400 s).""",
    '{"rows": [{"cluster": <str>, "training_flops": <number>, "time_days": <number>}, ...]}'
    "  # one row per cluster, in order",
    time_to_train_float, "forward_only",
    sample=sample_time_to_train,
    upper={**levels_flops5.TIME_TO_TRAIN_LEVELS_R2, 4: levels_inverse.DEADLINE},
    branches=levels_flops5.TIME_TO_TRAIN_BRANCHES_R2,
    levels="L2: days and MFU from a measured step per cluster; L3: wall-clock days with pauses to write the "
           "Adam state every k steps; L4: the fewest chips per cluster for a deadline (None above the "
           "cap); L5: the fewest data-parallel chips per deadline when the gradient all-reduce overlaps "
           "the backward pass (hidden at few chips, exposed at many; None below the communication floor)",
    tags=("headline:time_to_train",),
)


def sample_model_flops_utilization(draw: Draw, level: int) -> dict:
    params = n_params(draw, level)
    runs = []
    for name in letters("run", rows(level, 2)):
        chips, peak = chip_count(draw, level), peak_flops(draw, level)
        tokens = tokens_per_step(draw, level)
        runs.append({"name": name, "chips": chips, "peak_flops": peak, "tokens_per_step": tokens,
                     "step_time_s": step_time(draw, level, 6 * params * tokens, chips * peak)})
    return {"n_params": params, "runs": runs}


MODEL_FLOPS_UTILIZATION = scaling_family(
    "model_flops_utilization", "flops", model_flops_utilization,
    """\
A dense model with `n_params` parameters counts 6*n_params training FLOPs per token. For each
measured run in `runs` (chips, peak FLOP/s per chip, tokens per optimizer step, and measured
seconds per step), give the training throughput in tokens per second and the model FLOPs
utilization (MFU).""",
    '{"rows": [{"run": <str>, "tokens_per_s": <number>, "mfu": <number>}, ...]}'
    "  # one row per run, in order",
    model_flops_utilization_float, "inference_flops",
    sample=sample_model_flops_utilization,
    upper={**levels_flops5.MFU_LEVELS_R2, 4: levels_inverse2.MFU},
    branches=levels_flops5.MFU_BRANCHES_R2,
    levels="L2: tokens per step derived from sequences and their length; L3: from a reported MFU and a fixed "
           "communication time, the step time and MFU at other chip counts; L4: the most chips at which "
           "each run keeps an MFU floor (None); L5: a compute-plus-communication step model fitted to "
           "two measured runs, then the most chips keeping each MFU floor and their throughput (None)",
    tags=("headline:mfu",),
)


def _utilization_physical(task: Task) -> str | None:
    for row in task.expected["rows"]:
        if not 0 < row["utilization"] < 1:
            return f"{row['counting']}: utilization {float(row['utilization']):.4g} is outside (0, 1)"
    return None


_UTILIZATION_ROW = ('{"rows": [{"counting": "6N", "flops_per_token": <number>, "utilization": <number>}, '
                    '{"counting": "6N+attention", ...}, {"counting": "recompute_8N+attention", ...}]}')

_UTILIZATION_L2 = """\
A training step of a dense model with `n_params` parameters, `layers` layers of `n_heads` attention
heads of size `head_dim`, at context length `seq_len`, processes `tokens_per_step` tokens in
`step_time_s` seconds on `chips` chips of `peak_flops` FLOP/s each. A forward pass costs 2 FLOPs
per parameter per token, plus attention: in every layer each head of a token dots its query with
the keys of all seq_len positions and sums the seq_len value vectors weighted by the scores (2
FLOPs per multiply-add, full context, no causal savings); the backward pass costs twice the
forward. Give the utilization (FLOPs counted per token x tokens per second / (chips*peak_flops))
under three conventions, in this order: "6N" (the parameters' training FLOPs only);
"6N+attention" (plus attention's training FLOPs); "recompute_8N+attention" (the FLOPs the hardware
runs with full activation recomputation, where the forward pass runs a second time during the
backward pass, for the parameters and for attention)."""

UTILIZATION_BY_COUNTING = scaling_family(
    "utilization_by_counting", "flops", utilization_by_counting,
    """\
A training step of a dense model with `n_params` parameters, `layers` layers of `n_heads` attention
heads of size `head_dim`, at context length `seq_len`, processes `tokens_per_step` tokens in
`step_time_s` seconds on `chips` chips of `peak_flops` FLOP/s each. Attention's forward FLOPs per
token are 4*layers*n_heads*head_dim*seq_len (full context); training costs 3x forward. Give the
utilization (FLOPs counted per token x tokens per second / (chips*peak_flops)) under three
conventions, in this order: "6N" (parameters only); "6N+attention" (6N plus the training attention
FLOPs); "recompute_8N+attention" (the hardware FLOPs with full activation recomputation, where the
forward pass runs twice: 8N plus 4x the attention forward FLOPs).""",
    _UTILIZATION_ROW,
    utilization_by_counting_float, "attention_forward_only",
    sample=sample_utilization_by_counting,
    upper={2: Level(utilization_by_counting, _UTILIZATION_L2, _UTILIZATION_ROW, utilization_by_counting_float,
                    "attention_forward_only", reject=_utilization_physical),
           **levels_flops5.UTILIZATION_LEVELS_R2},
    branches=levels_flops5.UTILIZATION_BRANCHES_R2,
    reject=_utilization_physical,
    levels="L2: attention and recomputation described, their FLOPs derived; L3: from one measured "
           "step under selective recomputation, the step time and MFU at other contexts; L4: the "
           "longest context keeping a reported 6N MFU under full recomputation (None); L5: the "
           "recomputation policy and microbatch of the highest MFU under an HBM capacity and a "
           "microbatch efficiency curve",
)


MOE_TRAINING_FLOPS = scaling_family(
    "moe_training_flops", "flops", moe_training_flops,
    """\
A mixture-of-experts decoder has `layers` layers. Each layer has attention weights (query and output
projections of d_model x n_heads*head_dim each, key and value projections of d_model x
n_kv_heads*head_dim each) and `n_experts` experts, each an MLP of `mlp_matrices` matrices of
d_model x expert_d_ff; every token is routed to `top_k` experts. Count only these weights (ignore
embeddings, norms and the router). Give the total parameter count, the parameters active per
token, the training FLOPs on `n_tokens` tokens (6 x active parameters x tokens) and the ratio of
total to active parameters.""",
    '{"rows": [{"total_params": <int>, "active_params": <int>, "training_flops": <number>, '
    '"total_to_active": <number>}]}',
    moe_training_flops_float, "flops_from_total_params",
    sample=sample_moe_training_flops,
    upper={**levels_flops5.MOE_LEVELS_R2, 4: levels_inverse2.EXPERTS},
    branches=(Branch("none", levels_flops5.some_none, Fraction(1, 8), (4,)),),
    levels="L2: shared experts every token passes through beside the routed ones; L3: days to train "
           "when experts compute a capacity of padded slots and every token passes a router; L4: the "
           "most experts per layer under each parameter budget (None below top_k); L5: the "
           "expert-parallel degree of the shortest step (all-to-all against the gradient all-reduce "
           "of replicated experts) within HBM",
)


def sample_dense_param_count(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    vocab = draw.choice((32000, 50257, 65536, 128256, 151936, 256000))
    if not round_numbers(level):
        vocab = draw.integer(16_000, 300_000)
    return {"layers": draw.integer(8, 40 * level), **{k: shape[k] for k in ("d_model", "d_ff", "n_heads",
                                                                           "n_kv_heads", "head_dim")},
            "vocab_size": vocab, "mlp_matrices": shape["mlp_matrices"], "tied_embeddings": False,
            "n_tokens": n_tokens(draw, level)}


_DENSE_ROW = '{"rows": [{"params_per_layer": <int>, "total_params": <int>, "training_flops": <number>}]}'

DENSE_PARAM_COUNT = scaling_family(
    "dense_param_count", "flops", dense_param_count,
    """\
Count the parameters of a dense decoder: `layers` layers, each with query and output projections of
d_model x n_heads*head_dim, key and value projections of d_model x n_kv_heads*head_dim, and an MLP
of `mlp_matrices` matrices of d_model x d_ff; plus an input embedding of vocab_size x d_model and,
unless `tied_embeddings` is True, a separate output embedding of the same shape. Ignore norms and
biases. Give the parameters per layer, the total parameter count and the training FLOPs on
`n_tokens` tokens (6*N*D).""",
    _DENSE_ROW,
    dense_param_count_float, "embeddings_counted_once",
    sample=sample_dense_param_count,
    upper={2: Level(dense_param_count, levels_flops5.DENSE_L2, _DENSE_ROW, dense_param_count_float,
                    "embeddings_counted_once"),
           **levels_flops5.DENSE_LEVELS_R2, 4: levels_inverse2.LAYERS},
    branches=(Branch("none", levels_flops5.some_none, Fraction(1, 8), (4,)),),
    levels="L2: the architecture described, its weights derived; L3: days to train per cluster with "
           "FLOPs counted from the matmuls (output projection included, lookup free, tied or not) and "
           "attention; L4: the most layers under each parameter budget (None); L5: the candidate with "
           "the most parameters that trains within a day budget and fits its sharded state and "
           "activations in HBM (some fail by time, others by memory)",
)

FAMILIES = (LAYER_FLOPS, ATTENTION_CROSSOVER, TIME_TO_TRAIN, MODEL_FLOPS_UTILIZATION, UTILIZATION_BY_COUNTING,
            MOE_TRAINING_FLOPS, DENSE_PARAM_COUNT)

TASKS = (
    with_tags(LAYER_FLOPS.task(
        "sc-007",
        {"d_model": 8192, "d_ff": 28672, "n_heads": 64, "n_kv_heads": 8, "head_dim": 128, "mlp_matrices": 3,
         "seq_lens": [4096, 8192, 32768]},
    ), "headline:attention_minority"),
    ATTENTION_CROSSOVER.task(
        "sc-008",
        {"models": [
            {"name": "small", "d_model": 768, "d_ff": 3072, "n_heads": 12, "n_kv_heads": 12, "head_dim": 64,
             "mlp_matrices": 2},
            {"name": "medium", "d_model": 4096, "d_ff": 14336, "n_heads": 32, "n_kv_heads": 8,
             "head_dim": 128, "mlp_matrices": 3},
            {"name": "large", "d_model": 8192, "d_ff": 28672, "n_heads": 64, "n_kv_heads": 8,
             "head_dim": 128, "mlp_matrices": 3},
        ]},
    ),
    TIME_TO_TRAIN.task(
        "sc-009",
        {"n_params": 70 * 10**9, "n_tokens": 15 * 10**12, "clusters": [
            {"name": "cluster_a", "chips": 8192, "peak_flops": 400 * 10**12, "mfu": Fraction(2, 5)},
            {"name": "cluster_b", "chips": 2048, "peak_flops": 990 * 10**12, "mfu": Fraction(7, 20)},
        ]},
    ),
    MODEL_FLOPS_UTILIZATION.task(
        "sc-010",
        {"n_params": 8 * 10**9, "runs": [
            {"name": "run_a", "chips": 256, "peak_flops": 400 * 10**12, "tokens_per_step": 4 * 2**20,
             "step_time_s": Fraction(53, 10)},
            {"name": "run_b", "chips": 1024, "peak_flops": 400 * 10**12, "tokens_per_step": 4 * 2**20,
             "step_time_s": Fraction(19, 10)},
        ]},
    ),
    UTILIZATION_BY_COUNTING.task(
        "sc-011",
        {"n_params": 8 * 10**9, "layers": 32, "n_heads": 32, "head_dim": 128, "seq_len": 32768,
         "tokens_per_step": 4 * 2**20, "step_time_s": Fraction(79, 10), "chips": 256,
         "peak_flops": 400 * 10**12},
    ),
    MOE_TRAINING_FLOPS.task(
        "sc-012",
        {"layers": 32, "d_model": 4096, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "expert_d_ff": 14336,
         "n_experts": 8, "top_k": 2, "mlp_matrices": 3, "n_tokens": 2 * 10**12},
    ),
    DENSE_PARAM_COUNT.task(
        "sc-013",
        {"layers": 80, "d_model": 8192, "d_ff": 28672, "n_heads": 64, "n_kv_heads": 8, "head_dim": 128,
         "vocab_size": 128256, "mlp_matrices": 3, "tied_embeddings": False, "n_tokens": 15 * 10**12},
    ),
    # A small multi-head-attention layer with a plain 2-matrix MLP: the same family as sc-007.
    LAYER_FLOPS.task(
        "sc-014",
        {"d_model": 768, "d_ff": 3072, "n_heads": 12, "n_kv_heads": 12, "head_dim": 64, "mlp_matrices": 2,
         "seq_lens": [1024, 8192, 32768]},
    ),
)
