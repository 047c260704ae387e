"""The attention_crossover family of flops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import attention_shape, letters, rows
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    rounding_edge,
    scaling_level,
)
from exactgrade.domains.scaling.flops.shared import LAYER
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def attention_crossover_seq_len(models):
    """Smallest context length at which a layer's attention FLOPs reach its dense FLOPs."""
    import math
    from fractions import Fraction

    rows = []
    for m in models:
        projections = (
            2 * m["d_model"] * (m["n_heads"] + 2 * m["n_kv_heads"]) * m["head_dim"]
            + 2 * m["n_heads"] * m["head_dim"] * m["d_model"]
        )
        dense = projections + 2 * m["mlp_matrices"] * m["d_model"] * m["d_ff"]
        attention_per_position = 2 * 2 * m["n_heads"] * m["head_dim"]
        rows.append(
            {
                "model": m["name"],
                "dense_flops": Fraction(dense),
                "crossover_seq_len": math.ceil(Fraction(dense, attention_per_position)),
            }
        )
    return {"rows": rows}


def attention_crossover_seq_len_float(models, mistake=None):
    known_mistake(mistake, "mha_kv_projections")
    rows = []
    for m in models:
        kv_heads = m["n_heads"] if mistake == "mha_kv_projections" else m["n_kv_heads"]
        dense = (
            2.0
            * m["d_model"]
            * (
                2 * m["n_heads"] * m["head_dim"]
                + 2 * kv_heads * m["head_dim"]
                + m["mlp_matrices"] * m["d_ff"]
            )
        )
        rows.append(
            {
                "model": m["name"],
                "dense_flops": dense,
                "crossover_seq_len": math.ceil(dense / m["head_dim"] / m["n_heads"] / 4),
            }
        )
    return {"rows": rows}


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
    return {
        "models": [
            {"name": name, **model} for name, model in zip(letters("model", len(models)), models, strict=True)
        ]
    }


def _crossover_edges(task: Task) -> str | None:
    for m in task.inputs["models"]:
        problem = rounding_edge(f"{m['name']}: the crossover length", _crossover_length(m))
        if problem:
            return problem
    return None


_CROSSOVER_ROW = (
    '{"rows": [{"model": <str>, "dense_flops": <number>, "crossover_seq_len": <int>}, ...]}'
    "  # one row per model, in order"
)


LEVEL_1 = scaling_level(
    "flops",
    attention_crossover_seq_len,
    """\
For each decoder layer in `models`, count its dense forward FLOPs per token: query projection
[d_model -> n_heads*head_dim], key and value projections [d_model -> n_kv_heads*head_dim] each,
output projection [n_heads*head_dim -> d_model], and `mlp_matrices` MLP matrices of shape
[d_model, d_ff], at 2 FLOPs per weight per token. Attention at context length S costs
2*2*S*n_heads*head_dim FLOPs per token (full context, no causal savings). Give the dense FLOPs per
token and the smallest integer context length S at which attention FLOPs are at least the dense
FLOPs.""",
    _CROSSOVER_ROW,
    attention_crossover_seq_len_float,
    "mha_kv_projections",
    sample=sample_attention_crossover,
    reject=_crossover_edges,
)


CROSSOVER_L2 = (
    """\
For each decoder layer in `models` (its widths given), count its forward FLOPs per token as
follows. """
    + LAYER
    + """
Give the dense (non-attention) FLOPs per token and the smallest integer context length S at which
the attention FLOPs per token are at least the dense FLOPs per token."""
)


LEVEL_2 = scaling_level(
    "flops",
    attention_crossover_seq_len,
    CROSSOVER_L2,
    _CROSSOVER_ROW,
    attention_crossover_seq_len_float,
    "mha_kv_projections",
    reject=_crossover_edges,
    sample=sample_attention_crossover,
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


_CROSSOVER_SEQ_LEN_ROW = (
    '{"rows": [{"model": <str>, "crossover_seq_len": <int>}, ...]}  # one row per model, in order'
)


LEVEL_3 = scaling_level(
    "flops",
    causal_crossover,
    CROSSOVER_L3,
    _CROSSOVER_SEQ_LEN_ROW,
    causal_crossover_float,
    "full_context",
    sample=sample_causal,
    reject=_causal_edges,
)


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


LEVEL_4 = scaling_level(
    "flops",
    widest_mlp,
    CROSSOVER_L4,
    '{"rows": [{"model": <str>, "max_d_ff": <int> | None}, ...]}  # one row per model, in order',
    widest_mlp_float,
    "mha_kv_projections",
    sample=sample_widest,
    reject=_widest_edges,
)


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


LEVEL_5 = scaling_level(
    "flops",
    hybrid_crossover,
    CROSSOVER_L5,
    '{"rows": [{"model": <str>, "crossover_seq_len": <int> | None}, ...]}  # one row per model, in order',
    hybrid_crossover_float,
    "every_layer_global",
    sample=sample_hybrid,
    reject=_hybrid_rules,
)


def _some_mlp_none(task: Task) -> bool:
    return any(row["max_d_ff"] is None for row in task.expected["rows"])


def _some_hybrid_none(task: Task) -> bool:
    return any(row["crossover_seq_len"] is None for row in task.expected["rows"])


CROSSOVER_BRANCHES = (
    Branch("none", _some_mlp_none, Fraction(1, 8), (4,)),
    Branch("none at L5", _some_hybrid_none, Fraction(1, 5), (5,)),
)


ATTENTION_CROSSOVER = five_levels(
    "attention_crossover",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the layer described, its FLOPs derived; L3: the shortest causally masked sequence where "
    "attention reaches a share of the layer's FLOPs; L4: the widest MLP at which attention still "
    "reaches the dense FLOPs at a context (None); L5: the crossover of whole models mixing global "
    "and sliding-window layers (below or beyond the window, or None below the cap)",
    branches=CROSSOVER_BRANCHES,
)
