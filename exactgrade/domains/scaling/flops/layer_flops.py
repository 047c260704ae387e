"""The layer_flops family of flops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import attention_shape, letters, round_numbers, rows, sorted_sample
from exactgrade.domains.scaling._task import known_mistake, near_tie, rounding_edge, scaling_level
from exactgrade.domains.scaling.flops.shared import LAYER
from exactgrade.family import Branch, Draw, five_levels
from exactgrade.task import Task


def layer_flops_per_token(d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, seq_lens):
    """Forward FLOPs per token of one transformer layer, split into attention and dense matmuls."""
    from fractions import Fraction

    projections = 2 * d_model * (n_heads + 2 * n_kv_heads) * head_dim + 2 * n_heads * head_dim * d_model
    mlp = 2 * mlp_matrices * d_model * d_ff
    dense = projections + mlp
    rows = []
    for seq_len in seq_lens:
        attention = 2 * 2 * seq_len * n_heads * head_dim  # q.K^T and p.V over the whole context
        rows.append(
            {
                "seq_len": seq_len,
                "attention_flops": Fraction(attention),
                "dense_flops": Fraction(dense),
                "attention_fraction": Fraction(attention, attention + dense),
            }
        )
    return {"rows": rows}


def layer_flops_per_token_float(
    d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, seq_lens, mistake=None
):
    known_mistake(mistake, "scores_only")
    dense = 2.0 * d_model * (mlp_matrices * d_ff + 2 * head_dim * (n_heads + n_kv_heads))
    rows = []
    for s in seq_lens:
        attention = (2.0 if mistake == "scores_only" else 4.0) * head_dim * n_heads * s
        rows.append(
            {
                "seq_len": s,
                "attention_flops": attention,
                "dense_flops": dense,
                "attention_fraction": 1.0 / (1.0 + dense / attention),
            }
        )
    return {"rows": rows}


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


_LAYER_ROW = (
    '{"rows": [{"seq_len": <int>, "attention_flops": <number>, "dense_flops": <number>, '
    '"attention_fraction": <number>}, ...]}  # one row per entry of `seq_lens`, in order'
)


LEVEL_1 = scaling_level(
    "flops",
    layer_flops_per_token,
    _LAYER_QUESTION,
    _LAYER_ROW,
    layer_flops_per_token_float,
    "scores_only",
    sample=sample_layer_flops,
)


LAYER_L2 = (
    LAYER
    + """
For each context length in `seq_lens`, give the layer's attention FLOPs per token, its other
(dense) FLOPs per token and attention's fraction of the layer's total."""
)


LEVEL_2 = scaling_level(
    "flops",
    layer_flops_per_token,
    LAYER_L2,
    _LAYER_ROW,
    layer_flops_per_token_float,
    "scores_only",
    sample=sample_layer_flops,
)


def model_training_flops(
    layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, vocab_size, seq_lens
):
    """Training FLOPs per token of the whole model (3x forward) and attention's share of them."""
    from fractions import Fraction

    dense = (
        2 * d_model * (n_heads + 2 * n_kv_heads) * head_dim
        + 2 * n_heads * head_dim * d_model
        + 2 * mlp_matrices * d_model * d_ff
    )
    unembed = 2 * d_model * vocab_size
    rows = []
    for seq_len in seq_lens:
        attention = layers * 4 * seq_len * n_heads * head_dim
        forward = layers * dense + attention + unembed
        rows.append(
            {
                "seq_len": seq_len,
                "training_flops_per_token": Fraction(3 * forward),
                "attention_fraction": Fraction(attention, forward),
            }
        )
    return {"rows": rows}


def _dense_float(m):
    return (
        2.0
        * m["d_model"]
        * (m["mlp_matrices"] * m["d_ff"] + 2 * m["head_dim"] * (m["n_heads"] + m["n_kv_heads"]))
    )


def model_training_flops_float(
    layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, vocab_size, seq_lens, mistake=None
):
    known_mistake(mistake, "scores_only")
    dense = _dense_float(
        {
            "d_model": d_model,
            "d_ff": d_ff,
            "n_heads": n_heads,
            "n_kv_heads": n_kv_heads,
            "head_dim": head_dim,
            "mlp_matrices": mlp_matrices,
        }
    )
    rows = []
    for s in seq_lens:
        attention = (2.0 if mistake == "scores_only" else 4.0) * head_dim * n_heads * s * layers
        forward = attention + (dense * layers + 2.0 * vocab_size * d_model)
        rows.append(
            {
                "seq_len": s,
                "training_flops_per_token": forward * 3,
                "attention_fraction": 1.0 / (1.0 + (forward - attention) / attention),
            }
        )
    return {"rows": rows}


def sample_model_training(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    seq_lens = [512 * s for s in sorted_sample(draw, 1, 64 * 2**level, 2 + level)]
    if level >= 3:
        seq_lens = sorted({s - draw.integer(0, 511) for s in seq_lens})
    return {
        "layers": draw.integer(8, 40 * level),
        **shape,
        "vocab_size": draw.integer(16_000, 260_000),
        "seq_lens": seq_lens,
    }


_L3 = (
    LAYER
    + """
The model stacks `layers` such layers and ends with an output projection from d_model to
`vocab_size` logits per token (ignore the input embedding lookup); training costs 3 times the
forward FLOPs (forward once, backward twice). For each context length in `seq_lens`, give the
training FLOPs per token of the whole model and attention's fraction of them."""
)


LEVEL_3 = scaling_level(
    "flops",
    model_training_flops,
    _L3,
    '{"rows": [{"seq_len": <int>, "training_flops_per_token": <number>, "attention_fraction": <number>},'
    " ...]}  # one row per entry of `seq_lens`, in order",
    model_training_flops_float,
    "scores_only",
    sample=sample_model_training,
)


def max_context_for_share(d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, attention_limits):
    """Largest context S with attention(S) / (attention(S) + dense) at most each limit."""
    import math
    from fractions import Fraction

    dense = (
        2 * d_model * (n_heads + 2 * n_kv_heads) * head_dim
        + 2 * n_heads * head_dim * d_model
        + 2 * mlp_matrices * d_model * d_ff
    )
    rows = []
    for limit in attention_limits:
        # 4*S*h*d <= limit * (4*S*h*d + dense)  <=>  S <= limit * dense / ((1 - limit) * 4*h*d)
        rows.append(
            {
                "limit": limit,
                "max_seq_len": math.floor(Fraction(limit) * dense / ((1 - limit) * 4 * n_heads * head_dim)),
            }
        )
    return {"rows": rows}


def max_context_for_share_float(
    d_model, d_ff, n_heads, n_kv_heads, head_dim, mlp_matrices, attention_limits, mistake=None
):
    known_mistake(mistake, "scores_only")
    dense = _dense_float(
        {
            "d_model": d_model,
            "d_ff": d_ff,
            "n_heads": n_heads,
            "n_kv_heads": n_kv_heads,
            "head_dim": head_dim,
            "mlp_matrices": mlp_matrices,
        }
    )
    per_position = (2.0 if mistake == "scores_only" else 4.0) * head_dim * n_heads
    return {
        "rows": [
            {"limit": f, "max_seq_len": math.floor(dense / per_position * f / (1 - f))}
            for f in attention_limits
        ]
    }


def sample_context_share(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    limits = sorted(
        {
            Fraction(draw.integer(1, 90), 100) if level <= 3 else Fraction(draw.integer(1, 9000), 10_000)
            for _ in range(2 + level)
        }
    )
    return {**shape, "attention_limits": limits}


def _share_edges(task: Task) -> str | None:
    i = task.inputs
    dense = (
        2 * i["d_model"] * (i["n_heads"] + 2 * i["n_kv_heads"]) * i["head_dim"]
        + 2 * i["n_heads"] * i["head_dim"] * i["d_model"]
        + 2 * i["mlp_matrices"] * i["d_model"] * i["d_ff"]
    )
    for limit in i["attention_limits"]:
        bound = limit * dense / ((1 - limit) * 4 * i["n_heads"] * i["head_dim"])
        problem = rounding_edge(f"limit {limit}: the longest context", bound)
        if problem:
            return problem
        if bound < 1:
            return f"limit {limit}: not even one position"
    return None


_L4 = (
    LAYER
    + """
For each limit in `attention_limits`, give the longest integer context length S at which
attention is at most that fraction of the layer's forward FLOPs per token."""
)


LEVEL_4 = scaling_level(
    "flops",
    max_context_for_share,
    _L4,
    '{"rows": [{"limit": <number>, "max_seq_len": <int>}, ...]}  # one row per limit, in order',
    max_context_for_share_float,
    "scores_only",
    sample=sample_context_share,
    reject=_share_edges,
)


def largest_layer_under_budget(candidates, seq_len, kv_bytes, max_flops_per_token, max_kv_bytes_per_token):
    """The candidate with the most weights whose forward FLOPs per token at seq_len and KV-cache
    bytes per token fit both budgets; ties: fewer FLOPs, then the earlier candidate."""
    from fractions import Fraction

    best = None
    for c in candidates:
        params = (
            c["d_model"] * (c["n_heads"] + 2 * c["n_kv_heads"]) * c["head_dim"]
            + c["n_heads"] * c["head_dim"] * c["d_model"]
            + c["mlp_matrices"] * c["d_model"] * c["d_ff"]
        )
        flops = 2 * params + 4 * seq_len * c["n_heads"] * c["head_dim"]
        kv = 2 * c["n_kv_heads"] * c["head_dim"] * kv_bytes
        if flops > max_flops_per_token or kv > max_kv_bytes_per_token:
            continue
        if best is None or (params, -flops) > (best[1], -best[2]):
            best = (c["name"], params, flops)
    name, params, flops = best if best is not None else (None, None, None)
    return {
        "rows": [
            {
                "config": name,
                "params_per_layer": params,
                "flops_per_token": None if flops is None else Fraction(flops),
            }
        ]
    }


def largest_layer_under_budget_float(
    candidates, seq_len, kv_bytes, max_flops_per_token, max_kv_bytes_per_token, mistake=None
):
    known_mistake(mistake, "scores_only")
    fitting = []
    for c in candidates:
        params = _dense_float(c) / 2
        attention = (2.0 if mistake == "scores_only" else 4.0) * c["head_dim"] * c["n_heads"] * seq_len
        flops = attention + 2 * params
        if (
            flops <= max_flops_per_token
            and kv_bytes * 2.0 * c["head_dim"] * c["n_kv_heads"] <= max_kv_bytes_per_token
        ):
            fitting.append((params, -flops, c["name"]))
    if not fitting:
        return {"rows": [{"config": None, "params_per_layer": None, "flops_per_token": None}]}
    params, neg, name = max(fitting, key=lambda f: (f[0], f[1]))
    return {"rows": [{"config": name, "params_per_layer": round(params), "flops_per_token": -neg}]}


def _candidate_numbers(c: dict, seq_len: int, kv_bytes: int) -> tuple[int, int, int]:
    params = (
        c["d_model"] * (c["n_heads"] + 2 * c["n_kv_heads"]) * c["head_dim"]
        + c["n_heads"] * c["head_dim"] * c["d_model"]
        + c["mlp_matrices"] * c["d_model"] * c["d_ff"]
    )
    return (
        params,
        2 * params + 4 * seq_len * c["n_heads"] * c["head_dim"],
        2 * c["n_kv_heads"] * c["head_dim"] * kv_bytes,
    )


def sample_budget(draw: Draw, level: int) -> dict:
    """Budgets between the candidates' smallest and largest needs (a fifth of the instances below
    the smallest FLOPs: None). The widths are shared by pairs of candidates so the longer context
    or the wider KV cache decides between them."""
    seq_len = 1024 * draw.integer(1, 64 * level) - draw.integer(0, 1023)
    kv_bytes = draw.choice((1, 2))
    base = [attention_shape(draw, level) for _ in range(2 + level // 2)]
    candidates = []
    for shape in base:
        candidates.append(dict(shape))
        other = dict(
            shape, n_heads=shape["n_heads"] * 2, d_ff=max(64, shape["d_ff"] - 64 * draw.integer(1, 16))
        )
        candidates.append(other)
    order = draw.shuffled(candidates)
    named = [{"name": name, **c} for name, c in zip(letters("config", len(order)), order, strict=True)]
    numbers = [_candidate_numbers(c, seq_len, kv_bytes) for c in named]
    flops = sorted(n[1] for n in numbers)
    kvs = sorted(n[2] for n in numbers)
    if draw.chance(1, 5):
        budget = flops[0] - draw.integer(1, flops[0] // 10)
    else:
        budget = draw.integer(flops[0], flops[-1])
    kv_budget = draw.integer(kvs[0], kvs[-1])
    return {
        "candidates": named,
        "seq_len": seq_len,
        "kv_bytes": kv_bytes,
        "max_flops_per_token": budget,
        "max_kv_bytes_per_token": kv_budget,
    }


def _budget_rules(task: Task) -> str | None:
    i = task.inputs
    for c in i["candidates"]:
        params, flops, kv = _candidate_numbers(c, i["seq_len"], i["kv_bytes"])
        if near_tie(flops, i["max_flops_per_token"]) and flops != i["max_flops_per_token"]:
            return f"{c['name']}: its FLOPs sit on the budget"
    best = task.expected["rows"][0]
    if best["config"] is None:
        return None
    fitting = [_candidate_numbers(c, i["seq_len"], i["kv_bytes"]) for c in i["candidates"]]
    if (
        sum(1 for p, f, k in fitting if f <= i["max_flops_per_token"] and k <= i["max_kv_bytes_per_token"])
        < 2
    ):
        return "fewer than two candidates fit: the search decides nothing"
    return None


_L5 = (
    LAYER
    + """
Each of the `candidates` is one layer's widths. A candidate is allowed when its forward FLOPs per
token at context length `seq_len` are at most `max_flops_per_token` and its KV cache (a key and a
value of head_dim values per KV head per token, `kv_bytes` bytes per value) takes at most
`max_kv_bytes_per_token` bytes per token. Give the allowed candidate with the most weights (the
matrices listed above; no biases or norms), its weight count and its forward FLOPs per token; on a
tie in weights, the fewer FLOPs, then the earlier candidate. None for all three if no candidate is
allowed."""
)


LEVEL_5 = scaling_level(
    "flops",
    largest_layer_under_budget,
    _L5,
    '{"rows": [{"config": <str> | None, "params_per_layer": <int> | None, '
    '"flops_per_token": <number> | None}]}',
    largest_layer_under_budget_float,
    "scores_only",
    sample=sample_budget,
    reject=_budget_rules,
)


def _none_fits(task: Task) -> bool:
    return task.expected["rows"][0]["config"] is None


BRANCHES = (Branch("none", _none_fits, Fraction(1, 20), (5,)),)  # rare: about one in ten


LAYER_FLOPS = five_levels(
    "layer_flops",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the layer described, its FLOPs derived; L3: the whole model's training FLOPs per token "
    "with the output projection, and attention's share; L4: the longest context under each "
    "attention share; L5: the candidate layer with the most weights under a FLOP and a "
    "KV-cache budget (None when none fits)",
    branches=BRANCHES,
)
