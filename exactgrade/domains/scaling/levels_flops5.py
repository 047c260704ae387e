"""Round-2 upper levels of the FLOP families (dense_param_count, utilization_by_counting,
attention_crossover, time_to_train, model_flops_utilization, moe_training_flops).

dense_param_count: the architecture described (L2); days from matmul and attention FLOPs (L3); the
largest candidate trainable within a day budget and HBM (L5). utilization_by_counting: step time and
MFU at other contexts under selective recomputation (L3); the longest context for a 6N MFU (L4,
None); the recomputation policy and microbatch of the highest MFU (L5). attention_crossover: the
causal crossover (L3); the widest MLP (L4, None); global and sliding-window layers (L5, None).
time_to_train: checkpoint pauses (L3); the fewest chips when the all-reduce overlaps the backward
(L5, None). model_flops_utilization: MFU at other chip counts with fixed communication (L3); a
step model fitted to two runs, then the most chips per MFU floor (L5, None). moe_training_flops:
padded expert capacity and a router (L3); the expert-parallel degree of the shortest step (L5).

References are self-contained; the ``*_float`` twins compute in floats by another route and can
reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    fraction,
    letters,
    n_tokens,
    peak_flops,
    sample_moe_training_flops,
    sample_utilization_by_counting,
)
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer, near_tie
from exactgrade.domains.scaling.hardware import HBM_CAPACITY, SHARED_STORAGE, draw_in, require
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

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


def _dense_per_layer(m: dict) -> int:
    return (
        m["d_model"] * (m["n_heads"] + 2 * m["n_kv_heads"]) * m["head_dim"]
        + m["n_heads"] * m["head_dim"] * m["d_model"]
        + m["mlp_matrices"] * m["d_model"] * m["d_ff"]
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

DENSE_LEVELS_R2 = {
    3: Level(
        dense_train_days,
        DENSE_L3,
        '{"rows": [{"cluster": <str>, "time_days": <number>}, ...]}  # one row per cluster, in order',
        dense_train_days_float,
        "six_n_with_embeddings",
        sample=sample_dense_train,
    ),
    5: Level(
        design_largest_trainable,
        DENSE_L5,
        '{"rows": [{"model": <str> | None, "total_params": <int> | None, "time_days": <number> | None}]}',
        design_largest_trainable_float,
        "six_n_flops",
        sample=sample_design_trainable,
        reject=_design_trainable_rules,
    ),
}


# ================================================================ utilization_by_counting


def utilization_at_contexts(
    n_params,
    layers,
    n_heads,
    head_dim,
    seq_len,
    tokens_per_step,
    step_time_s,
    chips,
    peak_flops,
    new_seq_lens,
):
    """From one measured step under selective recomputation (attention's forward runs twice): the
    hardware's achieved FLOP/s on the FLOPs it runs, then the step time and the MFU (model FLOPs:
    no recomputation) at other contexts."""
    from fractions import Fraction

    def attention(s):  # forward attention FLOPs per token
        return 4 * layers * n_heads * head_dim * s

    def executed(s):
        return 6 * n_params + 4 * attention(s)

    achieved = Fraction(executed(seq_len) * tokens_per_step) / step_time_s
    rows = []
    for s in new_seq_lens:
        step = executed(s) * tokens_per_step / achieved
        model = 6 * n_params + 3 * attention(s)
        rows.append(
            {"seq_len": s, "step_time_s": step, "mfu": model * tokens_per_step / step / (chips * peak_flops)}
        )
    return {"rows": rows}


def utilization_at_contexts_float(
    n_params,
    layers,
    n_heads,
    head_dim,
    seq_len,
    tokens_per_step,
    step_time_s,
    chips,
    peak_flops,
    new_seq_lens,
    mistake=None,
):
    known_mistake(mistake, "hardware_without_recompute")
    per_position = 4.0 * layers * n_heads * head_dim
    passes = 3 if mistake == "hardware_without_recompute" else 4  # attention's forward, backward and rerun

    def executed(s):
        return 6.0 * n_params + passes * per_position * s

    hardware_fraction = executed(seq_len) * tokens_per_step / step_time_s / chips / peak_flops
    rows = []
    for s in new_seq_lens:
        step = step_time_s * executed(s) / executed(seq_len)
        model = 6.0 * n_params + 3 * per_position * s
        rows.append({"seq_len": s, "step_time_s": step, "mfu": hardware_fraction * model / executed(s)})
    return {"rows": rows}


def longest_context_for_mfu(n_params, layers, n_heads, head_dim, hardware_fraction, target_mfus):
    """Longest context keeping the 6N MFU at a target when the hardware runs full recomputation at
    a fixed fraction of peak; None when not even one position does."""
    import math
    from fractions import Fraction

    rows = []
    for target in target_mfus:
        # 6N * u / (8N + 16 L H d S) >= target
        bound = (Fraction(6 * n_params) * hardware_fraction / target - 8 * n_params) / (
            16 * layers * n_heads * head_dim
        )
        s = math.floor(bound)
        rows.append({"target_mfu": target, "max_seq_len": s if s >= 1 else None})
    return {"rows": rows}


def longest_context_for_mfu_float(
    n_params, layers, n_heads, head_dim, hardware_fraction, target_mfus, mistake=None
):
    known_mistake(mistake, "no_recompute")
    rows = []
    for t in target_mfus:

        def mfu(s):
            if mistake == "no_recompute":
                return (
                    6.0
                    * n_params
                    * hardware_fraction
                    / (6.0 * n_params + 12.0 * layers * n_heads * head_dim * s)
                )
            return (
                6.0 * n_params * hardware_fraction / (8.0 * n_params + 16.0 * layers * n_heads * head_dim * s)
            )

        if mfu(1) < t:
            rows.append({"target_mfu": t, "max_seq_len": None})
            continue
        low, high = 1, 2
        while mfu(high) >= t:
            low, high = high, 2 * high
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if mfu(middle) >= t else (low, middle)
        rows.append({"target_mfu": t, "max_seq_len": low})
    return {"rows": rows}


def sample_longest_context(draw: Draw, level: int) -> dict:
    """Targets from the MFU at drawn contexts, rounded to a basis point; about one in four above the
    MFU at one position (None)."""
    params = draw.integer(10**9, 10**11 * level)
    layers, n_heads = draw.integer(8, 120), draw.integer(8, 128)
    head_dim = draw.choice((64, 80, 96, 128))
    u = Fraction(draw.integer(3000, 7500), 10_000)
    targets = set()
    for _ in range(2 + level):
        if draw.chance(1, 4):
            top = Fraction(6, 8) * u
            targets.add(Fraction(math.ceil(top * 10_000) + draw.integer(1, 200), 10_000))
        else:
            s = draw.integer(1, 2**18)
            mfu = Fraction(6 * params) * u / (8 * params + 16 * layers * n_heads * head_dim * s)
            targets.add(Fraction(max(1, round(mfu * 10_000)), 10_000))
    return {
        "n_params": params,
        "layers": layers,
        "n_heads": n_heads,
        "head_dim": head_dim,
        "hardware_fraction": u,
        "target_mfus": sorted(targets),
    }


def _longest_context_edges(task: Task) -> str | None:
    i = task.inputs
    for t in i["target_mfus"]:
        bound = (Fraction(6 * i["n_params"]) * i["hardware_fraction"] / t - 8 * i["n_params"]) / (
            16 * i["layers"] * i["n_heads"] * i["head_dim"]
        )
        if near_integer(bound):
            return f"target {t}: the longest context sits on an integer"
    return None


def _some_context_none(task: Task) -> bool:
    return any(row["max_seq_len"] is None for row in task.expected["rows"])


def sample_contexts(draw: Draw, level: int) -> dict:
    """Level 1's measured step, and other context lengths to predict (shorter and longer)."""
    inputs = dict(sample_utilization_by_counting(draw, level))
    lengths = {max(128, inputs["seq_len"] * draw.integer(5, 400) // 100) for _ in range(1 + level)}
    inputs["new_seq_lens"] = sorted(lengths - {inputs["seq_len"]})
    if not inputs["new_seq_lens"]:
        raise Reject("no other context length drawn")
    return inputs


_POLICIES = ("none", "selective", "full")


def recompute_plan(
    n_params,
    layers,
    n_heads,
    head_dim,
    seq_len,
    chips,
    hbm_bytes_per_chip,
    activation_bytes_per_token_layer,
    max_efficiency,
    half_efficiency_microbatch,
    max_microbatch,
):
    """The recomputation policy and microbatch of the highest MFU: each policy's executed FLOPs,
    its largest microbatch fitting in HBM, the efficiency there, and useful over executed FLOPs."""
    import math
    from fractions import Fraction

    attention = 4 * layers * n_heads * head_dim * seq_len  # forward attention FLOPs per token
    useful = 6 * n_params + 3 * attention
    executed = {"none": useful, "selective": useful + attention, "full": useful + 2 * n_params + attention}
    free = hbm_bytes_per_chip - Fraction(16 * n_params, chips)
    best = None
    for policy in ("none", "selective", "full"):
        per_sequence = seq_len * layers * activation_bytes_per_token_layer[policy]
        microbatch = min(max_microbatch, math.floor(free / per_sequence))
        if microbatch < 1:
            continue
        efficiency = max_efficiency * Fraction(microbatch, microbatch + half_efficiency_microbatch)
        mfu = efficiency * Fraction(useful, executed[policy])
        if best is None or mfu > best[2]:
            best = (policy, microbatch, mfu)
    policy, microbatch, mfu = best if best is not None else (None, None, None)
    return {"rows": [{"policy": policy, "microbatch": microbatch, "mfu": mfu}]}


def recompute_plan_float(
    n_params,
    layers,
    n_heads,
    head_dim,
    seq_len,
    chips,
    hbm_bytes_per_chip,
    activation_bytes_per_token_layer,
    max_efficiency,
    half_efficiency_microbatch,
    max_microbatch,
    mistake=None,
):
    """Every microbatch of every policy tried, in floats."""
    known_mistake(mistake, "mfu_counts_6n_only")
    a = 4.0 * seq_len * head_dim * n_heads * layers
    runs = {"none": (0.0, 0.0), "selective": (0.0, 1.0), "full": (2.0, 1.0)}
    options = []
    for order, policy in enumerate(_POLICIES):
        extra_n, extra_a = runs[policy]
        useful = 6.0 * n_params + (0.0 if mistake == "mfu_counts_6n_only" else 3 * a)
        ratio = useful / ((6.0 + extra_n) * n_params + (3 + extra_a) * a)
        for mb in range(1, max_microbatch + 1):
            memory = (
                16.0 * n_params / chips + mb * seq_len * layers * activation_bytes_per_token_layer[policy]
            )
            if memory > hbm_bytes_per_chip:
                break
            options.append(
                (max_efficiency * mb / (mb + half_efficiency_microbatch) * ratio, -order, policy, mb)
            )
    if not options:
        return {"rows": [{"policy": None, "microbatch": None, "mfu": None}]}
    mfu, _, policy, mb = max(options)
    return {"rows": [{"policy": policy, "microbatch": mb, "mfu": mfu}]}


def sample_recompute(draw: Draw, level: int) -> dict:
    """Activation footprints that fall steeply from no recomputation to full, and an HBM capacity
    that lets full recomputation run a microbatch several times larger than no recomputation, so
    the efficiency curve trades against the recomputed FLOPs."""
    params = draw.integer(10**9, 10**11)
    layers, n_heads = draw.integer(16, 96), draw.integer(16, 96)
    head_dim = draw.choice((64, 80, 96, 128))
    seq_len = 512 * draw.integer(1, 8)
    d_model = n_heads * head_dim
    full = 2 * d_model
    selective = full * draw.integer(3, 10)
    none = selective + full * draw.integer(1, 8)
    chips = draw.integer(8, 2048)
    static = Fraction(16 * params, chips)
    cap = draw.integer(2, 16)
    roomy = draw.chance(1, 3)  # every policy reaches the microbatch cap: nothing to recompute for
    per_sequence = seq_len * layers * (none if roomy else draw.choice((selective, full)))
    low = cap if roomy else 1
    most = math.floor((HBM_CAPACITY.high - static) / per_sequence) - 1  # keep the HBM real
    if most < low:
        raise Reject("too few sequences fit in a real HBM")
    room = per_sequence * draw.integer(low, min(2 * cap, most)) + draw.integer(0, per_sequence)
    hbm = require("hbm_bytes_per_chip", math.ceil(static + room), HBM_CAPACITY)
    return {
        "n_params": params,
        "layers": layers,
        "n_heads": n_heads,
        "head_dim": head_dim,
        "seq_len": seq_len,
        "chips": chips,
        "hbm_bytes_per_chip": hbm,
        "activation_bytes_per_token_layer": {"none": none, "selective": selective, "full": full},
        "max_efficiency": Fraction(draw.integer(50, 90), 100),
        "half_efficiency_microbatch": draw.integer(1, 8),
        "max_microbatch": cap,
    }


def _recompute_rules(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes_per_chip"] - Fraction(16 * i["n_params"], i["chips"])
    mfus = []
    for policy in _POLICIES:
        per_sequence = i["seq_len"] * i["layers"] * i["activation_bytes_per_token_layer"][policy]
        if near_integer(free / per_sequence):
            return f"{policy}: the microbatch bound sits on an integer"
    if task.expected["rows"][0]["policy"] is None:
        return "no policy fits a single sequence"
    plan = task.expected["rows"][0]
    attention = 4 * i["layers"] * i["n_heads"] * i["head_dim"] * i["seq_len"]
    useful = 6 * i["n_params"] + 3 * attention
    executed = {
        "none": useful,
        "selective": useful + attention,
        "full": useful + 2 * i["n_params"] + attention,
    }
    for policy in _POLICIES:
        per_sequence = i["seq_len"] * i["layers"] * i["activation_bytes_per_token_layer"][policy]
        mb = min(i["max_microbatch"], math.floor(free / per_sequence))
        if mb >= 1:
            mfus.append(
                i["max_efficiency"]
                * Fraction(mb, mb + i["half_efficiency_microbatch"])
                * Fraction(useful, executed[policy])
            )
    if any(m != plan["mfu"] and near_tie(m, plan["mfu"]) for m in mfus):
        return "two policies' best MFUs sit within 1e-9"
    if len(mfus) < 2:
        return "only one policy fits"
    return None


def some_none(task: Task) -> bool:
    """Some row of the key is None (an inverse with no solution in range)."""
    return any(None in row.values() for row in task.expected["rows"])


def _policy_is(name: str):
    return lambda task: task.expected["rows"][0]["policy"] == name


UTILIZATION_L3 = """\
A training step of a dense model with `n_params` parameters, `layers` layers of `n_heads` attention
heads of size `head_dim`, at context length `seq_len`, processed `tokens_per_step` tokens in
`step_time_s` seconds on `chips` chips of `peak_flops` FLOP/s each. The run uses selective
activation recomputation: during the backward pass, attention's score and weighted-sum products are
computed a second time (their forward FLOPs run again); nothing else is recomputed. A forward pass
costs 2 FLOPs per parameter per token plus attention: in every layer each head of a token dots its
query with the keys of all the context's positions and sums their value vectors weighted by the
scores (2 FLOPs per multiply-add, full context, no causal savings); the backward pass costs twice
the forward. The hardware sustains the same FLOP/s on the FLOPs it actually runs at every context
length. For each context length in `new_seq_lens`, with the same tokens per step, give the step time
in seconds and the MFU: the model's training FLOPs per token without recomputation (forward plus
backward, attention included) x tokens per second / (chips*peak_flops)."""

UTILIZATION_L4 = """\
A dense model with `n_params` parameters has `layers` layers of `n_heads` attention heads of size
`head_dim`. A forward pass costs 2 FLOPs per parameter per token plus attention: at context length
S, in every layer each head of a token dots its query with the keys of all S positions and sums
their S value vectors weighted by the scores (2 FLOPs per multiply-add, full context); the backward
pass costs twice the forward. Training uses full activation recomputation (the forward pass runs a
second time during the backward pass), and the hardware runs the FLOPs it executes at the fraction
`hardware_fraction` of its peak at every context length. The reported MFU counts only 6*n_params
FLOPs per token (tokens per second x 6*n_params / peak FLOP/s of all chips). For each target in
`target_mfus`, give the longest integer context length S (at least 1) at which the reported MFU is
at least the target, or None if not even S = 1 reaches it."""

UTILIZATION_L5 = """\
Choose how to train a dense model with `n_params` parameters and `layers` layers of `n_heads`
attention heads of size `head_dim`, at context length `seq_len`, on `chips` chips. A forward pass
costs 2 FLOPs per parameter per token plus attention: in every layer each head of a token dots its
query with the keys of all seq_len positions and sums their value vectors weighted by the scores (2
FLOPs per multiply-add, full context); the backward pass costs twice the forward. Three activation
policies: "none" keeps every activation; "selective" keeps all but attention's score and weighted
sum products, which the backward pass recomputes once (their forward FLOPs run again); "full" keeps
only each layer's input and runs the whole forward pass a second time during the backward pass.
Each chip holds an equal 1/chips share of the training state (16 bytes per parameter) plus the
activations of its microbatch: activation_bytes_per_token_layer[policy] bytes per token per layer,
for every token of the microbatch's sequences (each seq_len tokens); all of it must fit in
`hbm_bytes_per_chip` bytes. A microbatch is a whole number of sequences, from 1 to
`max_microbatch`. With a microbatch of m sequences the chips run the FLOPs they execute at the
fraction max_efficiency * m / (m + half_efficiency_microbatch) of peak (`max_efficiency`,
`half_efficiency_microbatch` given). The MFU counts the model's training FLOPs without any
recomputation (forward plus backward, attention included) per second, over the chips' peak. Give
the policy and microbatch of the highest MFU, and that MFU; on a tie the policy listed first above,
then the smaller microbatch."""

UTILIZATION_LEVELS_R2 = {
    3: Level(
        utilization_at_contexts,
        UTILIZATION_L3,
        '{"rows": [{"seq_len": <int>, "step_time_s": <number>, "mfu": <number>}, ...]}'
        "  # one row per entry of `new_seq_lens`, in order",
        utilization_at_contexts_float,
        "hardware_without_recompute",
        sample=sample_contexts,
    ),
    4: Level(
        longest_context_for_mfu,
        UTILIZATION_L4,
        '{"rows": [{"target_mfu": <number>, "max_seq_len": <int> | None}, ...]}'
        "  # one row per target, in order",
        longest_context_for_mfu_float,
        "no_recompute",
        sample=sample_longest_context,
        reject=_longest_context_edges,
    ),
    5: Level(
        recompute_plan,
        UTILIZATION_L5,
        '{"rows": [{"policy": "none" | "selective" | "full", "microbatch": <int>, "mfu": <number>}]}',
        recompute_plan_float,
        "mfu_counts_6n_only",
        sample=sample_recompute,
        reject=_recompute_rules,
    ),
}
UTILIZATION_BRANCHES_R2 = (
    Branch("none", _some_context_none, Fraction(1, 4), (4,)),
    Branch("no recomputation wins", _policy_is("none"), Fraction(1, 10), (5,)),
    Branch("full recomputation wins", _policy_is("full"), Fraction(1, 10), (5,)),
)


# ================================================================ attention_crossover


def _layer_dense(m: dict) -> int:
    """Forward FLOPs per token of a layer's dense matmuls."""
    return (
        2
        * m["d_model"]
        * (2 * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"] + m["mlp_matrices"] * m["d_ff"])
    )


def causal_crossover(models, target_share):
    """Smallest causally masked sequence length whose attention FLOPs are at least target_share of
    the sequence's forward FLOPs (one layer)."""
    import math
    from fractions import Fraction

    rows = []
    for m in models:
        dense = (
            2
            * m["d_model"]
            * (2 * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"] + m["mlp_matrices"] * m["d_ff"])
        )
        per_key = 4 * m["n_heads"] * m["head_dim"]  # FLOPs per (query, key) pair
        ratio = Fraction(target_share) / (1 - target_share)
        # attention of S tokens = per_key * S(S+1)/2 >= ratio * dense * S
        #   <=>  S + 1 >= 2 ratio dense / per_key
        rows.append(
            {"model": m["name"], "crossover_seq_len": max(1, math.ceil(2 * ratio * dense / per_key - 1))}
        )
    return {"rows": rows}


def causal_crossover_float(models, target_share, mistake=None):
    known_mistake(mistake, "full_context")
    rows = []
    for m in models:
        dense = float(_layer_dense(m))
        per_key = 4.0 * m["n_heads"] * m["head_dim"]

        def share(s, per_key=per_key, dense=dense):
            pairs = s * s if mistake == "full_context" else s * (s + 1) / 2
            return per_key * pairs / (per_key * pairs + dense * s)

        high = 1
        while share(high) < target_share:
            high *= 2
        low = high // 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if share(middle) >= target_share else (middle, high)
        rows.append({"model": m["name"], "crossover_seq_len": high})
    return {"rows": rows}


def _crossover_layer(draw: Draw, level: int, name: str) -> dict:
    shape = attention_shape(draw, max(level, 3))
    n_heads = draw.integer(4, 64)
    n_kv_heads = draw.choice([d for d in range(1, n_heads + 1) if n_heads % d == 0])
    shape.update(name=name, n_heads=n_heads, n_kv_heads=n_kv_heads)
    return {
        "name": name,
        **{k: shape[k] for k in ("d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "mlp_matrices")},
    }


def sample_causal(draw: Draw, level: int) -> dict:
    return {
        "models": [_crossover_layer(draw, level, name) for name in letters("model", 2 + level // 2)],
        "target_share": Fraction(draw.integer(500, 9500), 10_000),
    }


def _causal_edges(task: Task) -> str | None:
    p = task.inputs["target_share"]
    for m in task.inputs["models"]:
        bound = 2 * p / (1 - p) * _layer_dense(m) / (4 * m["n_heads"] * m["head_dim"]) - 1
        if bound < 2 or near_integer(bound):
            return f"{m['name']}: the crossover bound sits on an integer or below 2"
    return None


def widest_mlp(models, seq_len, d_ff_step):
    """Widest MLP (a multiple of d_ff_step) at which a layer's attention FLOPs per token at
    seq_len still reach its dense FLOPs; None if not even one step does."""
    rows = []
    for m in models:
        attention = 4 * seq_len * m["n_heads"] * m["head_dim"]
        projections = 2 * m["d_model"] * 2 * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"]
        # projections + 2 * mlp_matrices * d_model * d_ff <= attention
        steps = (attention - projections) // (2 * m["mlp_matrices"] * m["d_model"] * d_ff_step)
        rows.append({"model": m["name"], "max_d_ff": steps * d_ff_step if steps >= 1 else None})
    return {"rows": rows}


def widest_mlp_float(models, seq_len, d_ff_step, mistake=None):
    known_mistake(mistake, "mha_kv_projections")
    rows = []
    for m in models:
        kv = m["n_heads"] if mistake == "mha_kv_projections" else m["n_kv_heads"]
        width = (
            4.0 * seq_len * m["n_heads"] * m["head_dim"]
            - 4.0 * m["d_model"] * m["head_dim"] * (m["n_heads"] + kv)
        ) / (2.0 * m["mlp_matrices"] * m["d_model"])
        steps = math.floor(width / d_ff_step)
        rows.append({"model": m["name"], "max_d_ff": steps * d_ff_step if steps >= 1 else None})
    return {"rows": rows}


def sample_widest(draw: Draw, level: int) -> dict:
    models = []
    for name in letters("model", 2 + level // 2):
        layer = _crossover_layer(draw, level, name)
        del layer["d_ff"]
        models.append(layer)
    # a context where the first model's attention covers its projections and some MLP
    m = models[0]
    projections = 4 * m["d_model"] * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"]
    base = projections / (4 * m["n_heads"] * m["head_dim"])
    seq_len = max(16, math.floor(base * Fraction(draw.integer(105, 2000), 100)))
    return {"models": models, "seq_len": seq_len, "d_ff_step": draw.choice((64, 128, 256))}


def _widest_edges(task: Task) -> str | None:
    i = task.inputs
    for m in i["models"]:
        attention = 4 * i["seq_len"] * m["n_heads"] * m["head_dim"]
        projections = 4 * m["d_model"] * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"]
        if near_integer(
            Fraction(attention - projections, 2 * m["mlp_matrices"] * m["d_model"] * i["d_ff_step"])
        ):
            return f"{m['name']}: the widest MLP sits on a multiple of the step"
    if all(row["max_d_ff"] is None for row in task.expected["rows"]):
        return "no model fits any MLP"
    return None


def _some_mlp_none(task: Task) -> bool:
    return any(row["max_d_ff"] is None for row in task.expected["rows"])


def _window_pairs(s: int, window: int) -> int:
    """(query, key) pairs of a causally masked sliding-window layer over s tokens."""
    if s <= window:
        return s * (s + 1) // 2
    return window * (window + 1) // 2 + (s - window) * window


def hybrid_crossover(models, target_share, max_seq_len):
    """Smallest sequence length (up to max_seq_len) whose attention FLOPs are at least target_share
    of the model's forward FLOPs over the sequence, with global and sliding-window layers."""
    from fractions import Fraction

    def pairs(s, window):
        return s * (s + 1) // 2 if s <= window else window * (window + 1) // 2 + (s - window) * window

    rows = []
    for m in models:
        dense = (
            m["layers"]
            * 2
            * m["d_model"]
            * (2 * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"] + m["mlp_matrices"] * m["d_ff"])
            + 2 * m["d_model"] * m["vocab_size"]
        )
        per_pair = 4 * m["n_heads"] * m["head_dim"]

        def reaches(s, m=m, dense=dense, per_pair=per_pair):
            attention = per_pair * (
                m["global_layers"] * s * (s + 1) // 2
                + (m["layers"] - m["global_layers"]) * pairs(s, m["window"])
            )
            return Fraction(attention, attention + dense * s) >= target_share

        if not reaches(max_seq_len):  # the share grows with the length: search below the cap
            rows.append({"model": m["name"], "crossover_seq_len": None})
            continue
        low, high = 0, max_seq_len
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if reaches(middle) else (middle, high)
        rows.append({"model": m["name"], "crossover_seq_len": high})
    return {"rows": rows}


def hybrid_crossover_float(models, target_share, max_seq_len, mistake=None):
    """The closed form: below the window every layer attends to the whole prefix (a linear
    condition); beyond it, a quadratic in S (or a linear one without global layers)."""
    known_mistake(mistake, "every_layer_global")
    rows = []
    r = target_share / (1 - target_share)
    for m in models:
        dense = (
            2.0
            * m["d_model"]
            * (2 * (m["n_heads"] + m["n_kv_heads"]) * m["head_dim"] + m["mlp_matrices"] * m["d_ff"])
            * m["layers"]
            + 2.0 * m["d_model"] * m["vocab_size"]
        )
        p = 4.0 * m["n_heads"] * m["head_dim"]
        g, n, w = m["global_layers"], m["layers"], m["window"]
        if mistake == "every_layer_global":
            g, w = n, max_seq_len + 1
        # S <= w: p*n*S(S+1)/2 >= r*dense*S  <=>  S >= 2 r dense / (p n) - 1
        s = max(1, math.ceil(2 * r * dense / (p * n) - 1))
        if s > w:
            # p*(g*S(S+1)/2 + (n-g)*(w(w+1)/2 + (S-w)w)) >= r*dense*S
            a = p * g / 2
            b = p * g / 2 + p * (n - g) * w - r * dense
            c = p * (n - g) * (w * (w + 1) / 2 - w * w)
            if a == 0:
                s = math.ceil(-c / b) if b > 0 else None
            else:
                s = math.ceil((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a))
            if s is not None:
                s = max(s, w + 1)
        rows.append(
            {"model": m["name"], "crossover_seq_len": s if s is not None and s <= max_seq_len else None}
        )
    return {"rows": rows}


def _hybrid_condition(m: dict, p: Fraction, s: int) -> tuple[int, Fraction]:
    dense = m["layers"] * _layer_dense(m) + 2 * m["d_model"] * m["vocab_size"]
    attention = (
        4
        * m["n_heads"]
        * m["head_dim"]
        * (
            m["global_layers"] * s * (s + 1) // 2
            + (m["layers"] - m["global_layers"]) * _window_pairs(s, m["window"])
        )
    )
    return attention, p / (1 - p) * dense * s


def sample_hybrid(draw: Draw, level: int) -> dict:
    """Models whose crossover falls below the window, beyond it, and (a model without global
    layers whose windowed attention stays below the share, or one crossing beyond the cap) never:
    each window is drawn around the length where the model would cross with every layer global."""
    target = Fraction(draw.integer(500, 4000), 10_000)
    models = []
    for name in letters("model", 3 + level // 2):
        for _ in range(8):  # a model crossing far beyond any window is redrawn
            layer = _crossover_layer(draw, 3, name)
            layers, vocab = draw.integer(8, 64), draw.integer(32_000, 260_000)
            dense = layers * _layer_dense(layer) + 2 * layer["d_model"] * vocab
            full = (
                2 * target / (1 - target) * Fraction(dense, 4 * layer["n_heads"] * layer["head_dim"] * layers)
            )
            if full <= 2**16:
                break
        else:
            raise Reject("no model crosses at a drawable length")
        window = max(64, math.floor(full * Fraction(draw.integer(10, 150), 100)))
        global_layers = 0 if draw.chance(1, 4) else draw.integer(1, max(1, layers // 3))
        models.append(
            {**layer, "layers": layers, "global_layers": global_layers, "window": window, "vocab_size": vocab}
        )
    return {"models": models, "target_share": target, "max_seq_len": 2**18}


def _hybrid_rules(task: Task) -> str | None:
    """No length on the share's edge, and the crossovers fall in more than one regime."""
    p, regimes = task.inputs["target_share"], set()
    for m, row in zip(task.inputs["models"], task.expected["rows"], strict=True):
        s = row["crossover_seq_len"]
        if s is None:
            regimes.add("never")
            attention, need = _hybrid_condition(m, p, task.inputs["max_seq_len"])
            if near_tie(attention, need):
                return f"{m['name']}: the cap sits on the share"
            continue
        regimes.add("within the window" if s <= m["window"] else "beyond the window")
        for length in (s, s - 1):
            if length >= 1 and near_tie(*_hybrid_condition(m, p, length)):
                return f"{m['name']}: length {length} sits on the share"
    if len(regimes) < 2:
        return f"every crossover falls {regimes.pop()}"
    return None


def _some_hybrid_none(task: Task) -> bool:
    return any(row["crossover_seq_len"] is None for row in task.expected["rows"])


_CAUSAL_LAYER = """\
Each decoder layer in `models` has, per token, dense matmuls: a query projection from d_model
values to n_heads*head_dim, key and value projections from d_model to n_kv_heads*head_dim each, an
output projection from n_heads*head_dim back to d_model, and `mlp_matrices` MLP matrices of
d_model x d_ff, at 2 FLOPs per weight per token."""

CROSSOVER_L3 = (
    _CAUSAL_LAYER
    + """
The layer runs on a causally masked sequence of S tokens: the token at position t (t = 1..S)
attends to the t positions 1..t, itself included: each of its n_heads query heads dots its query
(head_dim values) with those t keys and sums those t value vectors weighted by the scores (2 FLOPs
per multiply-add). For each layer, give the smallest integer S at which attention's FLOPs over the
whole sequence are at least the fraction `target_share` of the layer's forward FLOPs over the
sequence (attention plus dense, all S tokens)."""
)

CROSSOVER_L4 = """\
Each decoder layer in `models` has, per token, dense matmuls: a query projection from d_model
values to n_heads*head_dim, key and value projections from d_model to n_kv_heads*head_dim each, an
output projection from n_heads*head_dim back to d_model, and `mlp_matrices` MLP matrices of
d_model x d_ff (d_ff to be chosen), at 2 FLOPs per weight per token. Attention at context length
`seq_len`: each of a token's n_heads query heads dots its query (head_dim values) with the keys of
all seq_len positions and sums their value vectors weighted by the scores (2 FLOPs per
multiply-add, full context). For each layer, give the largest d_ff, a multiple of `d_ff_step`, at
which the attention FLOPs per token are still at least the dense FLOPs per token, or None if not
even d_ff = d_ff_step allows it."""

CROSSOVER_L5 = """\
Each model in `models` is a decoder of `layers` identical-width layers; every layer has, per token,
dense matmuls: a query projection from d_model values to n_heads*head_dim, key and value
projections from d_model to n_kv_heads*head_dim each, an output projection from n_heads*head_dim
back to d_model, and `mlp_matrices` MLP matrices of d_model x d_ff; after the last layer an output
projection from d_model to `vocab_size` logits. Every matmul costs 2 FLOPs per weight per token. The
model runs on a causally masked sequence of S tokens (positions t = 1..S). In `global_layers` of
its layers, the token at position t attends to all t positions 1..t; in every other layer it
attends only to the min(t, window) most recent positions (itself included), `window` given per
model. Attending to a position means: each of the n_heads query heads dots its query (head_dim
values) with that position's key and adds that position's value vector, weighted by the score, to
its sum (2 FLOPs per multiply-add). For each model, give the smallest integer S (1 <= S <=
`max_seq_len`) at which the attention FLOPs over the whole sequence are at least the fraction
`target_share` of the model's forward FLOPs over the sequence (attention plus every matmul, all S
tokens), or None if no such S."""

_CROSSOVER_ROW = (
    '{"rows": [{"model": <str>, "crossover_seq_len": <int>}, ...]}  # one row per model, in order'
)

CROSSOVER_LEVELS_R2 = {
    3: Level(
        causal_crossover,
        CROSSOVER_L3,
        _CROSSOVER_ROW,
        causal_crossover_float,
        "full_context",
        sample=sample_causal,
        reject=_causal_edges,
    ),
    4: Level(
        widest_mlp,
        CROSSOVER_L4,
        '{"rows": [{"model": <str>, "max_d_ff": <int> | None}, ...]}  # one row per model, in order',
        widest_mlp_float,
        "mha_kv_projections",
        sample=sample_widest,
        reject=_widest_edges,
    ),
    5: Level(
        hybrid_crossover,
        CROSSOVER_L5,
        '{"rows": [{"model": <str>, "crossover_seq_len": <int> | None}, ...]}  # one row per model, in order',
        hybrid_crossover_float,
        "every_layer_global",
        sample=sample_hybrid,
        reject=_hybrid_rules,
    ),
}
CROSSOVER_BRANCHES_R2 = (
    Branch("none", _some_mlp_none, Fraction(1, 8), (4,)),
    Branch("none at L5", _some_hybrid_none, Fraction(1, 5), (5,)),
)


# ================================================================ time_to_train


def train_days_with_checkpoints(n_params, tokens_per_step, steps, checkpoint_every_steps, clusters):
    """Days per cluster: compute of every step, plus a pause to write the Adam state (14 bytes per
    parameter) after every checkpoint_every_steps-th step."""
    from fractions import Fraction

    rows = []
    for c in clusters:
        step = Fraction(6 * n_params * tokens_per_step) / (c["chips"] * c["peak_flops"] * c["mfu"])
        pause = Fraction(14 * n_params, c["checkpoint_write_bandwidth"])
        total = steps * step + steps // checkpoint_every_steps * pause
        rows.append({"cluster": c["name"], "time_days": total / 86400})
    return {"rows": rows}


def train_days_with_checkpoints_float(
    n_params, tokens_per_step, steps, checkpoint_every_steps, clusters, mistake=None
):
    known_mistake(mistake, "checkpoint_weights_only")
    state = 2.0 if mistake == "checkpoint_weights_only" else 14.0
    rows = []
    for c in clusters:
        compute = 6.0 * n_params * tokens_per_step * steps / c["peak_flops"] / c["mfu"] / c["chips"]
        writes = (
            math.floor(steps / checkpoint_every_steps) * state * n_params / c["checkpoint_write_bandwidth"]
        )
        rows.append({"cluster": c["name"], "time_days": (compute + writes) / 86400})
    return {"rows": rows}


def sample_checkpoints(draw: Draw, level: int) -> dict:
    steps, every = draw.integer(10_000, 500_000), draw.integer(100, 5000)
    if steps % every == 0:
        steps += draw.integer(1, every - 1)
    clusters = [
        {
            "name": name,
            "chips": draw.integer(64, 2**13),
            "peak_flops": peak_flops(draw, level),
            "mfu": fraction(draw, level, 20, 60),
            "checkpoint_write_bandwidth": draw_in(draw, SHARED_STORAGE.within(high=10**11), 10**6),
        }
        for name in letters("cluster", 2 + level // 2)
    ]
    return {
        "n_params": draw.integer(10**9, 2 * 10**11),
        "tokens_per_step": 1024 * draw.integer(256, 8192),
        "steps": steps,
        "checkpoint_every_steps": every,
        "clusters": clusters,
    }


def fewest_chips_for_deadline(
    n_params,
    tokens_per_step,
    steps,
    achieved_flops_per_chip,
    grad_bytes,
    link_bandwidth,
    max_chips,
    deadline_days,
):
    """Fewest data-parallel chips meeting each deadline: forward, then the backward overlapped with
    the ring all-reduce of the gradients (exposed once it outlasts the backward)."""
    from fractions import Fraction

    def step(n):
        forward = Fraction(2 * n_params * tokens_per_step, n * achieved_flops_per_chip)
        allreduce = Fraction(2 * grad_bytes * n_params * (n - 1), n * link_bandwidth)
        return forward + max(2 * forward, allreduce)

    rows = []
    for deadline in deadline_days:
        budget = deadline * 86400 / steps  # seconds per step
        if step(max_chips) > budget:  # the step time only falls with more chips: none is enough
            rows.append({"deadline_days": deadline, "min_chips": None, "time_days": None})
            continue
        low, high = 0, max_chips
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if step(middle) <= budget else (middle, high)
        rows.append({"deadline_days": deadline, "min_chips": high, "time_days": steps * step(high) / 86400})
    return {"rows": rows}


def fewest_chips_for_deadline_float(
    n_params,
    tokens_per_step,
    steps,
    achieved_flops_per_chip,
    grad_bytes,
    link_bandwidth,
    max_chips,
    deadline_days,
    mistake=None,
):
    """The closed form of each regime: the all-reduce hidden (step = 6NT/(n a)), or exposed (step =
    2NT/(n a) + 2V(n-1)/(n bw), which tends to 2V/bw)."""
    known_mistake(mistake, "allreduce_always_hidden")
    work = 2.0 * n_params * tokens_per_step / achieved_flops_per_chip  # forward chip-seconds
    ring = 2.0 * grad_bytes * n_params / link_bandwidth

    def step(n):
        exposed = ring * (n - 1) / n
        return work / n + (
            2 * work / n if mistake == "allreduce_always_hidden" else max(2 * work / n, exposed)
        )

    rows = []
    for d in deadline_days:
        target = d * 86400.0 / steps
        n = math.ceil(3 * work / target)
        if (
            mistake != "allreduce_always_hidden" and ring * (n - 1) / n > 2 * work / n
        ):  # exposed: solve the other form
            n = math.ceil((work - ring) / (target - ring)) if target > ring else max_chips + 1
        n = max(1, n)
        if n > max_chips:
            rows.append({"deadline_days": d, "min_chips": None, "time_days": None})
        else:
            rows.append({"deadline_days": d, "min_chips": n, "time_days": steps * step(n) / 86400})
    return {"rows": rows}


def sample_deadline_chips(draw: Draw, level: int) -> dict:
    """Deadlines on both sides of the chip count where the all-reduce stops hiding behind the
    backward pass, and one below the communication floor (None)."""
    params, tokens = draw.integer(10**9, 10**11), 1024 * draw.integer(64, 4096)
    achieved = 10**9 * draw.integer(50_000, 1_000_000)
    grad_bytes, bandwidth = draw.choice((2, 4)), 10**6 * draw.integer(10_000, 400_000)
    steps = draw.integer(10_000, 300_000)
    work = Fraction(2 * params * tokens, achieved)
    ring = Fraction(2 * grad_bytes * params, bandwidth)
    # hidden while ring*(n-1) <= 2*work: the crossover chip count
    cross = 2 * work / ring + 1
    if not 4 <= cross <= 2**14:
        raise Reject("the all-reduce crossover is out of range")
    max_chips = math.floor(cross * draw.integer(4, 40))
    deadlines = set()
    for _ in range(2 + level // 2):
        n = max(1, math.floor(cross * Fraction(draw.integer(10, 300), 100)))
        step = work / n + max(2 * work / n, ring * (n - 1) / n)
        deadlines.add(Fraction(math.ceil(step * steps / 86400 * 1000), 1000))
    floor_days = ring * steps / 86400
    deadlines.add(Fraction(math.floor(floor_days * Fraction(draw.integer(50, 99), 100) * 1000) + 1, 1000))
    return {
        "n_params": params,
        "tokens_per_step": tokens,
        "steps": steps,
        "achieved_flops_per_chip": achieved,
        "grad_bytes": grad_bytes,
        "link_bandwidth": bandwidth,
        "max_chips": max_chips,
        "deadline_days": sorted(deadlines),
    }


def _deadline_chip_rules(task: Task) -> str | None:
    i = task.inputs
    work = Fraction(2 * i["n_params"] * i["tokens_per_step"], i["achieved_flops_per_chip"])
    ring = Fraction(2 * i["grad_bytes"] * i["n_params"], i["link_bandwidth"])
    regimes = set()
    for d, row in zip(i["deadline_days"], task.expected["rows"], strict=True):
        target = d * 86400 / i["steps"]
        for bound in (3 * work / target, (work - ring) / (target - ring) if target > ring else Fraction(0)):
            if bound > 0 and near_integer(bound):
                return f"deadline {d}: a chip bound sits on an integer"
        n = row["min_chips"]
        if n is None:
            regimes.add("none")
        else:
            regimes.add("hidden" if ring * (n - 1) <= 2 * work else "exposed")
            if n > 1 and near_tie(
                *(lambda m: (work / m + max(2 * work / m, ring * (m - 1) / m), target))(n - 1)
            ):
                return f"deadline {d}: one chip fewer sits on the deadline"
    if len(regimes - {"none"}) < 2:
        return "every deadline falls in one regime"
    return None


_TTT_L3 = """\
A dense model with `n_params` parameters trains for `steps` optimizer steps of `tokens_per_step`
tokens each (6 FLOPs per parameter per token). On each cluster in `clusters` (`chips` chips of
`peak_flops` FLOP/s sustaining the fraction `mfu` of peak), training pauses after every
`checkpoint_every_steps`-th step (and never otherwise) to write a checkpoint of the full Adam
training state to storage at `checkpoint_write_bandwidth` bytes/s; nothing else stops training.
Give the wall-clock time to train on each cluster, in days (86400 s)."""

_TTT_L5 = """\
A dense model with `n_params` parameters trains with plain data parallelism for `steps` optimizer
steps of `tokens_per_step` tokens each, the tokens of a step split evenly over the n chips. Each
chip computes its share at `achieved_flops_per_chip` FLOP/s: the forward pass costs 2 FLOPs per
parameter per token and the backward pass 4. After its forward pass a chip starts the backward pass
and, at the same moment, a ring all-reduce of the full gradient (`grad_bytes` bytes per parameter)
over the n chips at `link_bandwidth` bytes/s per chip; the step ends when both the backward pass
and the all-reduce are done. For each deadline in `deadline_days`, give the fewest chips n (1 to
`max_chips`) that train within the deadline (1 day = 86400 s) and the training time with them, in
days; None for both if even `max_chips` chips are too slow."""


def days_from_measured_steps(n_params, n_tokens, clusters):
    """Days and MFU per cluster from a measured step (tokens per step and seconds per step)."""
    from fractions import Fraction

    rows = []
    for c in clusters:
        tokens_per_s = Fraction(c["tokens_per_step"]) / c["step_time_s"]
        rows.append(
            {
                "cluster": c["name"],
                "time_days": n_tokens / tokens_per_s / 86400,
                "mfu": 6 * n_params * tokens_per_s / (c["chips"] * c["peak_flops"]),
            }
        )
    return {"rows": rows}


def days_from_measured_steps_float(n_params, n_tokens, clusters, mistake=None):
    known_mistake(mistake, "forward_only_mfu")
    per_token = 2.0 if mistake == "forward_only_mfu" else 6.0
    rows = []
    for c in clusters:
        steps = n_tokens / c["tokens_per_step"]
        rows.append(
            {
                "cluster": c["name"],
                "time_days": steps * c["step_time_s"] / 86400,
                "mfu": per_token
                * n_params
                / c["step_time_s"]
                * c["tokens_per_step"]
                / c["peak_flops"]
                / c["chips"],
            }
        )
    return {"rows": rows}


def sample_measured_steps(draw: Draw, level: int) -> dict:
    params = draw.integer(10**9, 10**11)
    clusters = []
    for name in letters("cluster", 3):
        chips, peak = draw.integer(64, 8192), peak_flops(draw, level)
        tokens = 1024 * draw.integer(256, 4096)
        ideal = Fraction(6 * params * tokens, chips * peak) / fraction(draw, 3, 25, 60)
        step = Fraction(max(1, round(ideal * 1000)), 1000)
        clusters.append(
            {"name": name, "chips": chips, "peak_flops": peak, "tokens_per_step": tokens, "step_time_s": step}
        )
    return {"n_params": params, "n_tokens": n_tokens(draw, level), "clusters": clusters}


def _measured_physical(task: Task) -> str | None:
    if any(not 0 < row["mfu"] < 1 for row in task.expected["rows"]):
        return "an MFU outside (0, 1)"
    return None


_TTT_L2 = """\
A dense model with `n_params` parameters is to be trained on `n_tokens` tokens. Each cluster in
`clusters` has `chips` chips of `peak_flops` FLOP/s and was measured running this training:
`tokens_per_step` tokens per optimizer step in `step_time_s` seconds per step. Give for each
cluster the time to train in days (86400 s) at the measured speed, and its model FLOPs utilization
(training FLOPs of the parameters only)."""

TTT_L2 = Level(
    days_from_measured_steps,
    _TTT_L2,
    '{"rows": [{"cluster": <str>, "time_days": <number>, "mfu": <number>}, ...]}  # one row per cluster',
    days_from_measured_steps_float,
    "forward_only_mfu",
    sample=sample_measured_steps,
    reject=_measured_physical,
)


TIME_TO_TRAIN_LEVELS_R2 = {
    2: TTT_L2,
    3: Level(
        train_days_with_checkpoints,
        _TTT_L3,
        '{"rows": [{"cluster": <str>, "time_days": <number>}, ...]}  # one row per cluster, in order',
        train_days_with_checkpoints_float,
        "checkpoint_weights_only",
        sample=sample_checkpoints,
    ),
    5: Level(
        fewest_chips_for_deadline,
        _TTT_L5,
        '{"rows": [{"deadline_days": <number>, "min_chips": <int> | None, '
        '"time_days": <number> | None}, ...]}  # one row per deadline, in order',
        fewest_chips_for_deadline_float,
        "allreduce_always_hidden",
        sample=sample_deadline_chips,
        reject=_deadline_chip_rules,
    ),
}
TIME_TO_TRAIN_BRANCHES_R2 = (Branch("none", some_none, Fraction(1, 8), (4, 5)),)


# ================================================================ model_flops_utilization


def mfu_at_chip_counts(n_params, tokens_per_step, peak_flops, chips, mfu, comm_s, chip_counts):
    """From a reported MFU at one chip count: the compute chip-seconds of a step (the step minus its
    fixed communication time), then the step time and MFU at other chip counts."""
    from fractions import Fraction

    step = Fraction(6 * n_params * tokens_per_step) / (chips * peak_flops * mfu)
    work = (step - comm_s) * chips  # chip-seconds of compute per step
    rows = []
    for n in chip_counts:
        new_step = work / n + comm_s
        rows.append(
            {
                "chips": n,
                "step_time_s": new_step,
                "mfu": Fraction(6 * n_params * tokens_per_step) / (new_step * n * peak_flops),
            }
        )
    return {"rows": rows}


def mfu_at_chip_counts_float(
    n_params, tokens_per_step, peak_flops, chips, mfu, comm_s, chip_counts, mistake=None
):
    known_mistake(mistake, "communication_scales_too")
    step = 6.0 * n_params * tokens_per_step / peak_flops / mfu / chips
    rows = []
    for n in chip_counts:
        if mistake == "communication_scales_too":
            new_step = step * chips / n
        else:
            new_step = comm_s + (step - comm_s) * (chips / n)
        rows.append(
            {
                "chips": n,
                "step_time_s": new_step,
                "mfu": 6.0 * n_params * tokens_per_step / peak_flops / n / new_step,
            }
        )
    return {"rows": rows}


def sample_mfu_chips(draw: Draw, level: int) -> dict:
    params, tokens = draw.integer(10**9, 10**11), 1024 * draw.integer(256, 8192)
    chips, peak = draw.integer(64, 4096), peak_flops(draw, level)
    mfu = fraction(draw, level, 30, 60)
    step = Fraction(6 * params * tokens) / (chips * peak * mfu)
    comm = Fraction(math.floor(step * Fraction(draw.integer(5, 60), 100) * 1000), 1000)
    if comm <= 0:
        raise Reject("the communication time rounds to zero")
    counts = sorted({max(1, chips * draw.integer(10, 800) // 100) for _ in range(2 + level)} - {chips})
    return {
        "n_params": params,
        "tokens_per_step": tokens,
        "peak_flops": peak,
        "chips": chips,
        "mfu": mfu,
        "comm_s": comm,
        "chip_counts": counts,
    }


def most_chips_from_two_runs(n_params, tokens_per_step, peak_flops, runs, mfu_floors, max_chips):
    """The step time as compute split over the chips plus a fixed communication time, fitted to two
    measured runs; then the most chips keeping each MFU floor, and the throughput there."""
    import math
    from fractions import Fraction

    (n1, s1), (n2, s2) = ((r["chips"], r["step_time_s"]) for r in runs)
    work = (s1 - s2) / (Fraction(1, n1) - Fraction(1, n2))  # chip-seconds of compute per step
    comm = s1 - work / n1
    flops = 6 * n_params * tokens_per_step
    rows = []
    for floor in mfu_floors:
        # flops / ((work + comm * n) * peak) >= floor
        n = min(max_chips, math.floor((flops / (floor * peak_flops) - work) / comm))
        if n < 1:
            rows.append({"mfu_floor": floor, "max_chips": None, "tokens_per_s": None})
        else:
            rows.append(
                {"mfu_floor": floor, "max_chips": n, "tokens_per_s": tokens_per_step / (work / n + comm)}
            )
    return {"rows": rows}


def most_chips_from_two_runs_float(
    n_params, tokens_per_step, peak_flops, runs, mfu_floors, max_chips, mistake=None
):
    """Every chip count tried in floats, the model fitted by solving the two equations directly."""
    known_mistake(mistake, "perfect_scaling_from_first_run")
    n1, s1 = runs[0]["chips"], runs[0]["step_time_s"]
    n2, s2 = runs[1]["chips"], runs[1]["step_time_s"]
    comm = (s2 * n2 - s1 * n1) / (n2 - n1)
    work = (s1 - comm) * n1
    if mistake == "perfect_scaling_from_first_run":
        work, comm = s1 * n1, 0.0
    rows = []
    for f in mfu_floors:

        def keeps(n, f=f):
            return 6.0 * n_params * tokens_per_step / ((work / n + comm) * n * peak_flops) >= f

        best = None
        if keeps(1):  # the MFU falls with the chip count: bisect for the last count that keeps it
            low, high = 1, max_chips + 1
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if keeps(middle) else (low, middle)
            best = low
        rows.append(
            {
                "mfu_floor": f,
                "max_chips": best,
                "tokens_per_s": None if best is None else tokens_per_step / (work / best + comm),
            }
        )
    return {"rows": rows}


def sample_two_runs(draw: Draw, level: int) -> dict:
    params, tokens = draw.integer(10**9, 10**11), 1024 * draw.integer(256, 8192)
    peak = peak_flops(draw, level)
    flops = 6 * params * tokens
    work = Fraction(flops, peak) / fraction(draw, 3, 40, 70)  # chip-seconds at the kernels' efficiency
    comm = work / draw.integer(200, 20_000)
    n1 = draw.integer(16, 512)
    n2 = n1 * draw.integer(2, 8)
    s1 = Fraction(round((work / n1 + comm) * 10**6), 10**6)
    s2 = Fraction(round((work / n2 + comm) * 10**6), 10**6)
    fitted_work = (s1 - s2) / (Fraction(1, n1) - Fraction(1, n2))
    fitted_comm = s1 - fitted_work / n1
    if fitted_comm <= 0:
        raise Reject("the two runs fit no positive communication time")
    floors = set()
    for _ in range(2 + level // 2):
        n = draw.integer(1, 20 * n2)
        floors.add(
            Fraction(
                max(1, math.floor(Fraction(flops) / ((fitted_work + fitted_comm * n) * peak) * 10_000)),
                10_000,
            )
        )
    floors.add(
        Fraction(
            min(9999, math.floor(Fraction(flops) / ((fitted_work + fitted_comm) * peak) * 10_000) + 1), 10_000
        )
    )
    return {
        "n_params": params,
        "tokens_per_step": tokens,
        "peak_flops": peak,
        "runs": [{"chips": n1, "step_time_s": s1}, {"chips": n2, "step_time_s": s2}],
        "mfu_floors": sorted(floors),
        "max_chips": 50 * n2,
    }


def _two_runs_rules(task: Task) -> str | None:
    i = task.inputs
    (n1, s1), (n2, s2) = ((r["chips"], r["step_time_s"]) for r in i["runs"])
    work = (s1 - s2) / (Fraction(1, n1) - Fraction(1, n2))
    comm = s1 - work / n1
    if Fraction(6 * i["n_params"] * i["tokens_per_step"]) / ((work + comm) * i["peak_flops"]) >= 1:
        return "the fitted MFU on one chip is at least 1"
    for f in i["mfu_floors"]:
        bound = (Fraction(6 * i["n_params"] * i["tokens_per_step"]) / (f * i["peak_flops"]) - work) / comm
        if near_integer(bound):
            return f"floor {f}: the chip bound sits on an integer"
    if not any(
        row["max_chips"] is not None and row["max_chips"] < i["max_chips"] for row in task.expected["rows"]
    ):
        return "no floor binds below the chip cap"
    return None


_MFU_L3 = """\
A training run of a dense model with `n_params` parameters (6 FLOPs per parameter per token)
processes `tokens_per_step` tokens per step on `chips` chips of `peak_flops` FLOP/s and reports a
model FLOPs utilization of `mfu`. Each of its steps spends `comm_s` seconds in communication that
overlaps nothing and takes the same time at any chip count; the rest of the step is compute, split
evenly over the chips. With the same tokens per step, give for each chip count in `chip_counts`
the step time in seconds and the MFU."""

_MFU_L5 = """\
Two measured runs in `runs` train the same dense model of `n_params` parameters (6 FLOPs per
parameter per token) with the same `tokens_per_step` tokens per step on different chip counts, chips
of `peak_flops` FLOP/s, and give their measured step times. Model a step as a fixed amount of
compute split evenly over the chips plus a communication time that is the same at every chip count,
both fitted exactly to the two runs. MFU = 6 * n_params * tokens per second / (chips * peak_flops).
For each floor in `mfu_floors`, give the largest chip count (1 to `max_chips`) whose MFU under this
model is at least the floor, and the tokens per second at that count; None for both if not even
one chip reaches the floor."""


def mfu_from_batches(n_params, runs):
    """Level 1's question with the tokens per step derived from sequences per step and their length."""
    from fractions import Fraction

    rows = []
    for run in runs:
        tokens_per_s = Fraction(run["sequences_per_step"] * run["seq_len"]) / run["step_time_s"]
        rows.append(
            {
                "run": run["name"],
                "tokens_per_s": tokens_per_s,
                "mfu": 6 * n_params * tokens_per_s / (run["chips"] * run["peak_flops"]),
            }
        )
    return {"rows": rows}


def mfu_from_batches_float(n_params, runs, mistake=None):
    known_mistake(mistake, "sequences_as_tokens")
    rows = []
    for r in runs:
        tokens = r["sequences_per_step"] * (1 if mistake == "sequences_as_tokens" else r["seq_len"])
        rows.append(
            {
                "run": r["name"],
                "tokens_per_s": tokens / r["step_time_s"],
                "mfu": 6.0 * n_params / r["peak_flops"] * tokens / r["step_time_s"] / r["chips"],
            }
        )
    return {"rows": rows}


def sample_mfu_batches(draw: Draw, level: int) -> dict:
    params = draw.integer(10**9, 10**11)
    runs = []
    for name in letters("run", 3):
        chips, peak = draw.integer(64, 8192), peak_flops(draw, level)
        sequences, length = draw.integer(64, 4096), 1024 * draw.integer(1, 32)
        ideal = Fraction(6 * params * sequences * length, chips * peak) / fraction(draw, 3, 25, 65)
        runs.append(
            {
                "name": name,
                "chips": chips,
                "peak_flops": peak,
                "sequences_per_step": sequences,
                "seq_len": length,
                "step_time_s": Fraction(max(1, round(ideal * 1000)), 1000),
            }
        )
    return {"n_params": params, "runs": runs}


_MFU_L2 = """\
A dense model with `n_params` parameters trains on sequences of tokens. For each measured run in
`runs` (chips, peak FLOP/s per chip, sequences per optimizer step, the length `seq_len` of every
sequence in tokens, and measured seconds per step), give the training throughput in tokens per
second and the model FLOPs utilization (training FLOPs of the parameters only)."""

MFU_L2 = Level(
    mfu_from_batches,
    _MFU_L2,
    '{"rows": [{"run": <str>, "tokens_per_s": <number>, "mfu": <number>}, ...]}  # one row per run, in order',
    mfu_from_batches_float,
    "sequences_as_tokens",
    sample=sample_mfu_batches,
    reject=_measured_physical,
)


def moe_shared_experts(
    layers,
    d_model,
    n_heads,
    n_kv_heads,
    head_dim,
    expert_d_ff,
    n_experts,
    n_shared_experts,
    top_k,
    mlp_matrices,
    n_tokens,
):
    """Level 1's question with shared experts that every token passes through as well."""
    from fractions import Fraction

    attention = d_model * (n_heads + 2 * n_kv_heads) * head_dim + n_heads * head_dim * d_model
    expert = mlp_matrices * d_model * expert_d_ff
    total = layers * (attention + (n_experts + n_shared_experts) * expert)
    active = layers * (attention + (top_k + n_shared_experts) * expert)
    return {
        "rows": [
            {
                "total_params": total,
                "active_params": active,
                "training_flops": Fraction(6 * active * n_tokens),
                "total_to_active": Fraction(total, active),
            }
        ]
    }


def moe_shared_experts_float(
    layers,
    d_model,
    n_heads,
    n_kv_heads,
    head_dim,
    expert_d_ff,
    n_experts,
    n_shared_experts,
    top_k,
    mlp_matrices,
    n_tokens,
    mistake=None,
):
    known_mistake(mistake, "shared_experts_routed")
    attention = 2.0 * d_model * head_dim * (n_heads + n_kv_heads)
    expert = float(mlp_matrices) * d_model * expert_d_ff
    always = 0 if mistake == "shared_experts_routed" else n_shared_experts
    total = layers * (attention + (n_experts + n_shared_experts) * expert)
    active = layers * (attention + (top_k + always) * expert)
    return {
        "rows": [
            {
                "total_params": int(round(total)),
                "active_params": int(round(active)),
                "training_flops": 6.0 * active * n_tokens,
                "total_to_active": total / active,
            }
        ]
    }


def sample_moe_shared(draw: Draw, level: int) -> dict:
    base = dict(sample_moe_training_flops(draw, 2))
    order = ("layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "expert_d_ff", "n_experts")
    return {
        **{k: base[k] for k in order},
        "n_shared_experts": draw.integer(1, 4),
        "top_k": base["top_k"],
        "mlp_matrices": base["mlp_matrices"],
        "n_tokens": base["n_tokens"],
    }


_MOE_L2 = """\
A mixture-of-experts decoder has `layers` layers. Each layer has attention weights (query and
output projections of d_model x n_heads*head_dim each, key and value projections of d_model x
n_kv_heads*head_dim each), `n_experts` routed experts of which every token is sent to `top_k`, and
`n_shared_experts` shared experts that process every token; every expert, routed or shared, is an
MLP of `mlp_matrices` matrices of d_model x expert_d_ff. Count only these weights (ignore
embeddings, norms and the router). Give the total parameter count, the parameters a token passes
through, the training FLOPs on `n_tokens` tokens (6 FLOPs per parameter a token passes through,
per token) and the ratio of total to active parameters."""

MOE_L2 = Level(
    moe_shared_experts,
    _MOE_L2,
    '{"rows": [{"total_params": <int>, "active_params": <int>, "training_flops": <number>, '
    '"total_to_active": <number>}]}',
    moe_shared_experts_float,
    "shared_experts_routed",
    sample=sample_moe_shared,
)


MFU_LEVELS_R2 = {
    2: MFU_L2,
    3: Level(
        mfu_at_chip_counts,
        _MFU_L3,
        '{"rows": [{"chips": <int>, "step_time_s": <number>, "mfu": <number>}, ...]}'
        "  # one row per entry of `chip_counts`, in order",
        mfu_at_chip_counts_float,
        "communication_scales_too",
        sample=sample_mfu_chips,
    ),
    5: Level(
        most_chips_from_two_runs,
        _MFU_L5,
        '{"rows": [{"mfu_floor": <number>, "max_chips": <int> | None, "tokens_per_s": <number> | None}, ...]}'
        "  # one row per floor, in order",
        most_chips_from_two_runs_float,
        "perfect_scaling_from_first_run",
        sample=sample_two_runs,
        reject=_two_runs_rules,
    ),
}
MFU_BRANCHES_R2 = (
    Branch("none", some_none, Fraction(1, 8), (4,)),
    Branch("none at L5", some_none, Fraction(1, 4), (5,)),
)


# ================================================================ moe_training_flops


def moe_days_by_capacity(
    layers,
    d_model,
    n_heads,
    n_kv_heads,
    head_dim,
    expert_d_ff,
    n_experts,
    top_k,
    mlp_matrices,
    n_tokens,
    chips,
    peak_flops,
    mfu,
    capacity_factors,
):
    """Days to train when every expert computes its full capacity (padding included): a router
    matmul per layer, attention projections, and capacity_factor times the routed expert work."""

    attention = 2 * d_model * (n_heads + 2 * n_kv_heads) * head_dim + 2 * n_heads * head_dim * d_model
    router = 2 * d_model * n_experts
    expert = 2 * mlp_matrices * d_model * expert_d_ff  # per token routed to it
    rows = []
    for cf in capacity_factors:
        forward = layers * (attention + router + cf * top_k * expert)
        rows.append(
            {"capacity_factor": cf, "time_days": 3 * forward * n_tokens / (chips * peak_flops * mfu) / 86400}
        )
    return {"rows": rows}


def moe_days_by_capacity_float(
    layers,
    d_model,
    n_heads,
    n_kv_heads,
    head_dim,
    expert_d_ff,
    n_experts,
    top_k,
    mlp_matrices,
    n_tokens,
    chips,
    peak_flops,
    mfu,
    capacity_factors,
    mistake=None,
):
    known_mistake(mistake, "capacity_ignored")
    rows = []
    for cf in capacity_factors:
        slots = 1.0 if mistake == "capacity_ignored" else cf
        per_layer = (
            2.0
            * d_model
            * (
                head_dim * (2 * n_heads + 2 * n_kv_heads)
                + n_experts
                + slots * top_k * mlp_matrices * expert_d_ff
            )
        )
        rows.append(
            {
                "capacity_factor": cf,
                "time_days": 6.0 * per_layer * layers / 2 * n_tokens / peak_flops / chips / mfu / 86400,
            }
        )
    return {"rows": rows}


def sample_moe_capacity(draw: Draw, level: int) -> dict:
    base = dict(sample_moe_training_flops(draw, level))
    factors = sorted({Fraction(draw.integer(101, 300), 100) for _ in range(2 + level // 2)})
    return {
        **base,
        "chips": draw.integer(64, 8192),
        "peak_flops": peak_flops(draw, level),
        "mfu": fraction(draw, level, 20, 55),
        "capacity_factors": factors,
    }


def expert_parallel_plan(
    layers,
    d_model,
    n_heads,
    n_kv_heads,
    head_dim,
    expert_d_ff,
    n_experts,
    top_k,
    mlp_matrices,
    devices,
    tokens_per_device,
    achieved_flops,
    link_bandwidth,
    hbm_bytes_per_device,
    activation_bytes_per_device,
):
    """The expert-parallel degree of the shortest step: compute, the all-to-all of routed tokens,
    and the gradient all-reduces of the replicated weights (none overlapped), under HBM."""
    from fractions import Fraction

    attention = d_model * (n_heads + 2 * n_kv_heads) * head_dim + n_heads * head_dim * d_model
    router = d_model * n_experts
    expert = mlp_matrices * d_model * expert_d_ff
    dense = layers * (attention + router)  # replicated on every device
    compute = Fraction(6 * layers * (attention + router + top_k * expert) * tokens_per_device, achieved_flops)
    dense_sync = Fraction(2 * 2 * dense * (devices - 1), devices * link_bandwidth)
    best = None
    for ep in range(1, min(n_experts, devices) + 1):
        if n_experts % ep or devices % ep:
            continue
        local = layers * (n_experts // ep) * expert  # expert weights on one device
        if 16 * (dense + local) + activation_bytes_per_device > hbm_bytes_per_device:
            continue
        replicas = devices // ep
        all_to_all = Fraction(
            4 * layers * tokens_per_device * top_k * d_model * 2 * (ep - 1), ep * link_bandwidth
        )
        expert_sync = Fraction(2 * 2 * local * (replicas - 1), replicas * link_bandwidth)
        step = compute + all_to_all + dense_sync + expert_sync
        if best is None or step < best[1]:
            best = (ep, step)
    ep, step = best if best is not None else (None, None)
    return {"rows": [{"ep": ep, "step_time_s": step}]}


def expert_parallel_plan_float(
    layers,
    d_model,
    n_heads,
    n_kv_heads,
    head_dim,
    expert_d_ff,
    n_experts,
    top_k,
    mlp_matrices,
    devices,
    tokens_per_device,
    achieved_flops,
    link_bandwidth,
    hbm_bytes_per_device,
    activation_bytes_per_device,
    mistake=None,
):
    known_mistake(mistake, "expert_gradients_not_synchronised")
    per_layer_dense = 2.0 * d_model * head_dim * (n_heads + n_kv_heads) + d_model * n_experts
    expert = float(mlp_matrices) * d_model * expert_d_ff
    options = []
    for ep in (d for d in range(1, devices + 1) if devices % d == 0 and n_experts % d == 0):
        local = layers * expert * n_experts / ep
        if (layers * per_layer_dense + local) * 16 + activation_bytes_per_device > hbm_bytes_per_device:
            continue
        r = devices / ep
        step = (
            6.0 * layers * tokens_per_device * (per_layer_dense + top_k * expert) / achieved_flops
            + 8.0 * layers * tokens_per_device * top_k * d_model * (1 - 1 / ep) * 2 / link_bandwidth / 2
            + 4.0 * layers * per_layer_dense * (1 - 1 / devices) / link_bandwidth
            + (
                0.0
                if mistake == "expert_gradients_not_synchronised"
                else 4.0 * local * (1 - 1 / r) / link_bandwidth
            )
        )
        options.append((step, ep))
    if not options:
        return {"rows": [{"ep": None, "step_time_s": None}]}
    low = min(o[0] for o in options)
    step, ep = min((o for o in options if o[0] <= low * (1 + 1e-12)), key=lambda o: o[1])
    return {"rows": [{"ep": ep, "step_time_s": step}]}


def sample_expert_parallel(draw: Draw, level: int) -> dict:
    """Experts heavy enough that replicating them costs memory and gradient traffic, and enough
    routed tokens that a wide all-to-all costs too: the best degree lies inside the range."""
    d_model = 128 * draw.integer(8, 48)
    n_heads = d_model // 128
    n_experts = draw.choice((16, 32, 64, 128))
    devices = draw.choice((64, 128, 256, 512))
    inputs = {
        "layers": draw.integer(8, 48),
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": draw.choice([d for d in (1, 2, 4, 8) if n_heads % d == 0]),
        "head_dim": 128,
        "expert_d_ff": 128 * draw.integer(4, 32),
        "n_experts": n_experts,
        "top_k": draw.integer(1, 4),
        "mlp_matrices": draw.choice((2, 3)),
        "devices": devices,
        "tokens_per_device": 1024 * draw.integer(1, 64),
        "achieved_flops": 10**12 * draw.integer(100, 800),
        "link_bandwidth": 10**9 * draw.integer(25, 400),
    }
    attention = 2 * d_model * (n_heads + inputs["n_kv_heads"]) * 128
    dense = inputs["layers"] * (attention + d_model * n_experts)
    expert = inputs["layers"] * inputs["mlp_matrices"] * d_model * inputs["expert_d_ff"]
    need = [16 * (dense + n_experts // ep * expert) for ep in (1, 2, 4, 8, 16)]
    activation = draw.integer(10**9, 8 * 10**9)
    hbm = math.ceil(need[draw.integer(1, 4)] * Fraction(draw.integer(101, 300), 100)) + activation
    inputs["hbm_bytes_per_device"] = require("hbm_bytes_per_device", hbm, HBM_CAPACITY)
    inputs["activation_bytes_per_device"] = activation
    return inputs


def _expert_parallel_rules(task: Task) -> str | None:
    row = task.expected["rows"][0]
    if row["ep"] is None:
        return "no expert-parallel degree fits"
    i = task.inputs
    degrees = [d for d in range(1, i["devices"] + 1) if i["devices"] % d == 0 and i["n_experts"] % d == 0]
    if row["ep"] == max(degrees):
        return "the widest degree is best (the all-to-all never matters)"
    d, hd, experts = i["d_model"], i["head_dim"], i["n_experts"]
    dense = i["layers"] * (d * hd * (2 * i["n_heads"] + 2 * i["n_kv_heads"]) + d * experts)
    expert = i["mlp_matrices"] * d * i["expert_d_ff"]
    steps, excluded = [], False
    for ep in degrees:
        local = i["layers"] * (experts // ep) * expert
        if 16 * (dense + local) + i["activation_bytes_per_device"] > i["hbm_bytes_per_device"]:
            excluded = True
            continue
        r = i["devices"] // ep
        steps.append(
            Fraction(
                16 * i["layers"] * i["tokens_per_device"] * i["top_k"] * d * (ep - 1),
                2 * ep * i["link_bandwidth"],
            )
            + Fraction(4 * local * (r - 1), r * i["link_bandwidth"])
        )
    best = min(steps)
    if any(t != best and near_tie(t, best) for t in steps):
        return "two degrees' step times sit within 1e-9"
    if not excluded:
        return "memory excludes no degree"
    return None


_MOE_L3 = """\
A mixture-of-experts decoder has `layers` layers. Per layer: attention projections (query and output
of d_model x n_heads*head_dim weights each, key and value of d_model x n_kv_heads*head_dim each), a
router matmul of d_model x n_experts weights that every token goes through, and `n_experts` experts,
each an MLP of `mlp_matrices` matrices of d_model x expert_d_ff; each token is routed to `top_k`
experts. Every expert is given a fixed capacity of capacity_factor times its even share of the
routed tokens (taken exactly, not rounded to whole slots) and computes all its slots, padding
included (no token is dropped). Matmuls cost 2 FLOPs per weight per token (or per slot) in the
forward pass; the backward pass costs twice the forward. Training on `n_tokens` tokens runs on
`chips` chips of `peak_flops` FLOP/s sustaining the fraction `mfu` of peak on these FLOPs. For each
capacity factor in `capacity_factors`, give the time to train in days (86400 s)."""

_MOE_L5 = """\
A mixture-of-experts decoder of `layers` layers trains on `devices` devices. Per layer: attention
projections (query and output of d_model x n_heads*head_dim weights each, key and value of d_model x
n_kv_heads*head_dim each), a router of d_model x n_experts weights, and `n_experts` experts, each an
MLP of `mlp_matrices` matrices of d_model x expert_d_ff; each token is routed to `top_k` experts.
With expert-parallel degree ep (ep divides both n_experts and devices), the devices form groups of
ep; within a group each device holds n_experts/ep of the experts of every layer, and every group
holds a full copy of all experts; attention and router weights are on every device. Every device
processes `tokens_per_device` tokens per step at `achieved_flops` FLOP/s (6 FLOPs per weight a token
passes through: forward and backward) and holds 16 bytes of training state per weight it stores plus
`activation_bytes_per_device` bytes, within `hbm_bytes_per_device` bytes. In every layer, the
forward pass sends each routed copy of a token (d_model bf16 values) to the device of its expert
within the group and back, and the backward pass does the same again; a device sends only the copies
whose expert is on another device (and sends back as many results), and the routed copies of its
tokens are spread evenly over all the experts of the layer. After the backward pass, the gradients
(bf16) of every weight held on several devices are ring all-reduced among the devices holding copies
of it. All transfers run at `link_bandwidth` bytes/s per device, one after another, and nothing
overlaps compute. Give the degree ep of the shortest step that fits in HBM (on a tie the smaller),
and that step time in seconds."""

MOE_LEVELS_R2 = {
    2: MOE_L2,
    3: Level(
        moe_days_by_capacity,
        _MOE_L3,
        '{"rows": [{"capacity_factor": <number>, "time_days": <number>}, ...]}  # one row per factor',
        moe_days_by_capacity_float,
        "capacity_ignored",
        sample=sample_moe_capacity,
    ),
    5: Level(
        expert_parallel_plan,
        _MOE_L5,
        '{"rows": [{"ep": <int>, "step_time_s": <number>}]}',
        expert_parallel_plan_float,
        "expert_gradients_not_synchronised",
        sample=sample_expert_parallel,
        reject=_expert_parallel_rules,
    ),
}

__all__ = [
    "CROSSOVER_BRANCHES_R2",
    "CROSSOVER_LEVELS_R2",
    "DENSE_L2",
    "DENSE_LEVELS_R2",
    "UTILIZATION_BRANCHES_R2",
    "UTILIZATION_LEVELS_R2",
]
