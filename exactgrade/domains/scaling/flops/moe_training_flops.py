"""The moe_training_flops family of flops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    fraction,
    peak_flops,
    sample_moe_training_flops,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level, some_none
from exactgrade.domains.scaling.hardware import HBM_CAPACITY, require
from exactgrade.family import Branch, Draw, five_levels
from exactgrade.task import Task


def moe_training_flops(
    layers, d_model, n_heads, n_kv_heads, head_dim, expert_d_ff, n_experts, top_k, mlp_matrices, n_tokens
):
    """A mixture-of-experts model trains at the cost of its active parameters only."""
    from fractions import Fraction

    attention = d_model * (n_heads + 2 * n_kv_heads) * head_dim + n_heads * head_dim * d_model
    expert = mlp_matrices * d_model * expert_d_ff
    total = layers * (attention + n_experts * expert)
    active = layers * (attention + top_k * expert)
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


def moe_training_flops_float(
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
    mistake=None,
):
    known_mistake(mistake, "flops_from_total_params")
    attention = 2 * d_model * head_dim * n_heads + 2 * d_model * head_dim * n_kv_heads
    expert = mlp_matrices * expert_d_ff * d_model
    total = layers * attention + layers * n_experts * expert
    active = layers * attention + layers * top_k * expert
    flops_params = total if mistake == "flops_from_total_params" else active
    return {
        "rows": [
            {
                "total_params": total,
                "active_params": active,
                "training_flops": 6.0 * n_tokens * flops_params,
                "total_to_active": total / active,
            }
        ]
    }


LEVEL_1 = scaling_level(
    "flops",
    moe_training_flops,
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
    moe_training_flops_float,
    "flops_from_total_params",
    sample=sample_moe_training_flops,
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


LEVEL_2 = scaling_level(
    "flops",
    moe_shared_experts,
    _MOE_L2,
    '{"rows": [{"total_params": <int>, "active_params": <int>, "training_flops": <number>, '
    '"total_to_active": <number>}]}',
    moe_shared_experts_float,
    "shared_experts_routed",
    sample=sample_moe_shared,
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


LEVEL_3 = scaling_level(
    "flops",
    moe_days_by_capacity,
    _MOE_L3,
    '{"rows": [{"capacity_factor": <number>, "time_days": <number>}, ...]}  # one row per factor',
    moe_days_by_capacity_float,
    "capacity_ignored",
    sample=sample_moe_capacity,
)


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


_EXPERTS = """\
A mixture-of-experts decoder has `layers` layers. Each layer has attention weights (query and output
projections of d_model x n_heads*head_dim each, key and value projections of d_model x
n_kv_heads*head_dim each) and some number of experts, each an MLP of `mlp_matrices` matrices of
d_model x expert_d_ff; every token is routed to `top_k` experts. Count only these weights. For each
budget in `param_budgets`, give the most experts per layer (the same in every layer) whose total
parameter count is at most the budget, or None if fewer than `top_k` experts fit."""


LEVEL_4 = scaling_level(
    "flops",
    most_experts_for_budget,
    _EXPERTS,
    '{"rows": [{"param_budget": <int>, "max_experts": <int> | None}, ...]}  # one row per budget',
    most_experts_for_budget_float,
    "attention_once",
    sample=sample_experts,
    reject=_experts_edges,
)


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


LEVEL_5 = scaling_level(
    "flops",
    expert_parallel_plan,
    _MOE_L5,
    '{"rows": [{"ep": <int>, "step_time_s": <number>}]}',
    expert_parallel_plan_float,
    "expert_gradients_not_synchronised",
    sample=sample_expert_parallel,
    reject=_expert_parallel_rules,
)


MOE_TRAINING_FLOPS = five_levels(
    "moe_training_flops",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: shared experts every token passes through beside the routed ones; L3: days to train "
    "when experts compute a capacity of padded slots and every token passes a router; L4: the "
    "most experts per layer under each parameter budget (None below top_k); L5: the "
    "expert-parallel degree of the shortest step (all-to-all against the gradient all-reduce "
    "of replicated experts) within HBM",
    branches=(Branch("none", some_none, Fraction(1, 8), (4,)),),
)
