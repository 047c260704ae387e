"""The adam_memory family of memory: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import hbm_capacity, letters, n_params, round_numbers, rows
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    rounding_edge,
    scaling_level,
)
from exactgrade.family import Branch, Draw, five_levels
from exactgrade.task import Task


def adam_memory(
    models, weight_bytes, master_bytes, first_moment_bytes, second_moment_bytes, hbm_bytes_per_chip
):
    """Training state of Adam per model, and the chips needed just to hold it."""
    import math
    from fractions import Fraction

    rows = []
    for model in models:
        weights = model["n_params"] * weight_bytes
        optimizer = model["n_params"] * (master_bytes + first_moment_bytes + second_moment_bytes)
        rows.append(
            {
                "model": model["name"],
                "weights_gib": Fraction(weights, 2**30),
                "optimizer_gib": Fraction(optimizer, 2**30),
                "optimizer_to_weights": Fraction(optimizer, weights),
                "min_chips": math.ceil(Fraction(weights + optimizer, hbm_bytes_per_chip)),
            }
        )
    return {"rows": rows}


def adam_memory_float(
    models,
    weight_bytes,
    master_bytes,
    first_moment_bytes,
    second_moment_bytes,
    hbm_bytes_per_chip,
    mistake=None,
):
    known_mistake(mistake, "gb_for_gib")
    unit = 1e9 if mistake == "gb_for_gib" else 1024.0**3
    state = master_bytes + second_moment_bytes + first_moment_bytes
    rows = []
    for m in models:
        n = m["n_params"]
        rows.append(
            {
                "model": m["name"],
                "weights_gib": weight_bytes / unit * n,
                "optimizer_gib": state / unit * n,
                "optimizer_to_weights": state / weight_bytes,
                "min_chips": math.ceil(n / hbm_bytes_per_chip * (state + weight_bytes)),
            }
        )
    return {"rows": rows}


_PRECISIONS = ((2, 4, 4, 4), (2, 4, 1, 1), (2, 4, 2, 2), (4, 4, 4, 4), (2, 2, 2, 2))


def sample_adam_memory(draw: Draw, level: int) -> dict:
    weight, master, first, second = draw.choice(_PRECISIONS[:2] if round_numbers(level) else _PRECISIONS)
    models = [{"name": name, "n_params": n_params(draw, level)} for name in letters("model", rows(level, 3))]
    return {
        "models": models,
        "weight_bytes": weight,
        "master_bytes": master,
        "first_moment_bytes": first,
        "second_moment_bytes": second,
        "hbm_bytes_per_chip": hbm_capacity(draw, level),
    }


def _min_chips_edges(task: Task) -> str | None:
    i = task.inputs
    per_param = i["weight_bytes"] + i["master_bytes"] + i["first_moment_bytes"] + i["second_moment_bytes"]
    for model in i["models"]:
        problem = rounding_edge(
            f"{model['name']}: the chips needed",
            Fraction(model["n_params"] * per_param, i["hbm_bytes_per_chip"]),
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "memory",
    adam_memory,
    """\
Training with Adam keeps, per parameter, the weights (`weight_bytes`), a master copy
(`master_bytes`), the first moment (`first_moment_bytes`) and the second moment
(`second_moment_bytes`). For each model in `models`, give the weights in GiB, the optimizer state
(master copy + both moments) in GiB, the ratio of optimizer state to weights, and the smallest
number of chips of `hbm_bytes_per_chip` bytes of HBM each that can hold weights plus optimizer
state (ignore gradients, activations and any other memory).""",
    '{"rows": [{"model": <str>, "weights_gib": <number>, "optimizer_gib": <number>, '
    '"optimizer_to_weights": <number>, "min_chips": <int>}, ...]}  # one row per model, in order',
    adam_memory_float,
    "gb_for_gib",
    sample=sample_adam_memory,
    reject=_min_chips_edges,
)


# ================================================================ adam_memory
def adam_recipes(n_params, recipes, hbm_bytes_per_chip):
    """Adam training state under each precision recipe, and the chips needed to hold it."""
    import math
    from fractions import Fraction

    rows = []
    for r in recipes:
        state = Fraction(n_params * (r["weight_bits"] + r["master_bits"] + 2 * r["moment_bits"]), 8)
        rows.append(
            {
                "recipe": r["name"],
                "state_gib": state / 2**30,
                "min_chips": math.ceil(state / hbm_bytes_per_chip),
            }
        )
    return {"rows": rows}


def adam_recipes_float(n_params, recipes, hbm_bytes_per_chip, mistake=None):
    known_mistake(mistake, "one_moment")
    rows = []
    for r in recipes:
        moments = 1 if mistake == "one_moment" else 2
        bits = r["weight_bits"] + r["master_bits"] + moments * r["moment_bits"]
        state = bits / 8.0 * n_params
        rows.append(
            {
                "recipe": r["name"],
                "state_gib": state / 1024**3,
                "min_chips": math.ceil(n_params / hbm_bytes_per_chip * bits / 8),
            }
        )
    return {"rows": rows}


_RECIPES = (
    ("bf16_with_fp32_master", 16, 32, 32),
    ("fp32", 32, 0, 32),
    ("bf16_8bit_moments", 16, 32, 8),
    ("pure_bf16", 16, 0, 16),
    ("fp8_with_bf16_master", 8, 16, 16),
    ("bf16_fp32_moments_no_master", 16, 0, 32),
)


def sample_adam_recipes(draw: Draw, level: int) -> dict:
    recipes = [
        {"name": n, "weight_bits": w, "master_bits": m, "moment_bits": mo}
        for n, w, m, mo in draw.sample(_RECIPES, 2 + level // 2)
    ]
    return {
        "n_params": 10**8 * draw.integer(10, 1000),
        "recipes": recipes,
        "hbm_bytes_per_chip": hbm_capacity(draw, level),
    }


def _adam_recipe_edges(task: Task) -> str | None:
    i = task.inputs
    for r in i["recipes"]:
        state = Fraction(i["n_params"] * (r["weight_bits"] + r["master_bits"] + 2 * r["moment_bits"]), 8)
        if near_integer(state / i["hbm_bytes_per_chip"]):
            return f"{r['name']}: the chips needed sit on an integer"
    return None


_ADAM_L2 = """\
Training with Adam keeps, for every parameter, its weight, optionally a master copy of the weight
in higher precision, and two optimizer moments (a running mean of the gradient and a running mean
of its square). Each recipe in `recipes` gives the bits of the weight (`weight_bits`), of the
master copy (`master_bits`, 0 when there is none) and of each moment (`moment_bits`). For a model of
`n_params` parameters, give for each recipe the training state (weights, master copy and moments;
ignore gradients and activations) in GiB, and the smallest number of chips of `hbm_bytes_per_chip`
bytes of HBM each that can hold it."""


LEVEL_2 = scaling_level(
    "memory",
    adam_recipes,
    _ADAM_L2,
    '{"rows": [{"recipe": <str>, "state_gib": <number>, "min_chips": <int>}, ...]}'
    "  # one row per recipe, in order",
    adam_recipes_float,
    "one_moment",
    sample=sample_adam_recipes,
    reject=_adam_recipe_edges,
)


def zero1_memory(
    models, weight_bytes, grad_bytes, optimizer_bytes, activation_bytes_per_chip, chips, hbm_bytes_per_chip
):
    """Per-chip memory under ZeRO-1 data parallelism (optimizer state sharded, weights and
    gradients replicated) and whether it fits."""
    from fractions import Fraction

    rows = []
    for m in models:
        per_chip = (
            m["n_params"] * (weight_bytes + grad_bytes)
            + Fraction(m["n_params"] * optimizer_bytes, chips)
            + activation_bytes_per_chip
        )
        rows.append(
            {"model": m["name"], "per_chip_gib": per_chip / 2**30, "fits": per_chip <= hbm_bytes_per_chip}
        )
    return {"rows": rows}


def zero1_memory_float(
    models,
    weight_bytes,
    grad_bytes,
    optimizer_bytes,
    activation_bytes_per_chip,
    chips,
    hbm_bytes_per_chip,
    mistake=None,
):
    known_mistake(mistake, "gradients_sharded")
    rows = []
    for m in models:
        n = float(m["n_params"])
        sharded = optimizer_bytes + (grad_bytes if mistake == "gradients_sharded" else 0)
        replicated = weight_bytes + (0 if mistake == "gradients_sharded" else grad_bytes)
        per_chip = n * replicated + n / chips * sharded + activation_bytes_per_chip
        rows.append(
            {"model": m["name"], "per_chip_gib": per_chip / 1024**3, "fits": per_chip <= hbm_bytes_per_chip}
        )
    return {"rows": rows}


def sample_zero1(draw: Draw, level: int) -> dict:
    hbm = hbm_capacity(draw, level)
    chips = draw.choice((8, 16, 32, 64, 128, 256))
    activation = draw.integer(hbm // 20, hbm // 4)
    weight_bytes, grad_bytes = 2, draw.choice((2, 4))
    fit = Fraction(hbm - activation) / (weight_bytes + grad_bytes + Fraction(12, chips))  # params at the edge
    models = [
        {"name": name, "n_params": max(10**8, math.floor(fit * Fraction(draw.integer(30, 200), 100)))}
        for name in letters("model", 2 + level // 2)
    ]
    return {
        "models": models,
        "weight_bytes": weight_bytes,
        "grad_bytes": grad_bytes,
        "optimizer_bytes": 12,
        "activation_bytes_per_chip": activation,
        "chips": chips,
        "hbm_bytes_per_chip": hbm,
    }


def _zero1_edges(task: Task) -> str | None:
    i = task.inputs
    for m, row in zip(i["models"], task.expected["rows"], strict=True):
        if near_tie(row["per_chip_gib"] * 2**30, i["hbm_bytes_per_chip"]):
            return f"{m['name']}: the per-chip memory sits on the capacity"
    return None


_ADAM_L3 = """\
Models in `models` train with Adam and ZeRO-1 data parallelism over `chips` chips: every chip
keeps a full copy of the weights (`weight_bytes` per parameter) and of the gradients (`grad_bytes`
per parameter), while the optimizer state (master weights and moments, `optimizer_bytes` per
parameter) is split evenly, each chip holding an equal share. Every chip also needs
`activation_bytes_per_chip` bytes of activations. For each model, give the memory one chip needs,
in GiB, and whether it fits in `hbm_bytes_per_chip` bytes."""


LEVEL_3 = scaling_level(
    "memory",
    zero1_memory,
    _ADAM_L3,
    '{"rows": [{"model": <str>, "per_chip_gib": <number>, "fits": <bool>}, ...]}  # one row per model',
    zero1_memory_float,
    "gradients_sharded",
    sample=sample_zero1,
    reject=_zero1_edges,
    varying=("rows[].fits",),
)


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


_ADAM = """\
Training with Adam keeps, per parameter, the weights (`weight_bytes`), a master copy
(`master_bytes`), the first moment (`first_moment_bytes`) and the second moment
(`second_moment_bytes`). For each chip count in `chip_counts`, give the most parameters whose
weights plus optimizer state fit in that many chips of `hbm_bytes_per_chip` bytes of HBM each,
pooled (ignore gradients, activations and any other memory)."""


LEVEL_4 = scaling_level(
    "memory",
    largest_model_for_chips,
    _ADAM,
    '{"rows": [{"chips": <int>, "max_params": <int>}, ...]}  # one row per chip count, in order',
    largest_model_for_chips_float,
    "optimizer_without_master",
    sample=sample_adam_chips,
    reject=_adam_chips_edges,
)


def zero_plan(
    n_params,
    weight_bytes,
    grad_bytes,
    optimizer_bytes,
    activation_bytes_per_chip,
    hbm_bytes_per_chip,
    tokens_per_step,
    achieved_flops_per_chip,
    link_bandwidth,
    max_step_time_s,
    max_chips,
):
    """The ZeRO stage and chip count of the fewest chip-seconds per step: per stage, the fewest chips
    that fit in HBM and meet the step time (compute shrinks with the chips, collectives do not)."""
    import math
    from fractions import Fraction

    weights, grads, state = n_params * weight_bytes, n_params * grad_bytes, n_params * optimizer_bytes
    room = hbm_bytes_per_chip - activation_bytes_per_chip
    compute = Fraction(6 * n_params * tokens_per_step, achieved_flops_per_chip)  # chip-seconds per step
    plans = {  # stage: (bytes every chip keeps whole, bytes split over the chips, bytes its collectives move)
        1: (weights + grads, state, grads + weights),  # reduce-scatter gradients, all-gather weights
        2: (weights, grads + state, grads + weights),
        3: (0, weights + grads + state, 2 * weights + grads),  # weights gathered for forward and backward
    }
    best = None
    for stage, (whole, split, moved) in plans.items():
        if room <= whole:
            continue
        ring = Fraction(moved, link_bandwidth)  # a collective moves moved * (n - 1) / n bytes per chip
        if max_step_time_s <= ring:
            continue
        # n * (room - whole) >= split; compute / n + ring * (n - 1) / n <= budget
        chips = max(
            1,
            math.ceil(Fraction(split, room - whole)),
            math.ceil((compute - ring) / (max_step_time_s - ring)),
        )
        if chips > max_chips:
            continue
        cost = compute + ring * (chips - 1)  # chips * step time
        if best is None or cost < best[2]:
            best = (stage, chips, cost)
    stage, chips, cost = best if best is not None else (None, None, None)
    return {"rows": [{"stage": stage, "chips": chips, "chip_seconds_per_step": cost}]}


def zero_plan_float(
    n_params,
    weight_bytes,
    grad_bytes,
    optimizer_bytes,
    activation_bytes_per_chip,
    hbm_bytes_per_chip,
    tokens_per_step,
    achieved_flops_per_chip,
    link_bandwidth,
    max_step_time_s,
    max_chips,
    mistake=None,
):
    """Every chip count of every stage tried, in floats."""
    known_mistake(mistake, "collectives_ignored")
    n = float(n_params)
    options = []
    for stage in (1, 2, 3):
        for chips in range(1, max_chips + 1):
            if stage == 1:
                memory = n * (weight_bytes + grad_bytes) + n * optimizer_bytes / chips
                moved = n * (grad_bytes + weight_bytes)
            elif stage == 2:
                memory = n * weight_bytes + n * (grad_bytes + optimizer_bytes) / chips
                moved = n * (grad_bytes + weight_bytes)
            else:
                memory = n * (weight_bytes + grad_bytes + optimizer_bytes) / chips
                moved = n * (2 * weight_bytes + grad_bytes)
            if memory + activation_bytes_per_chip > hbm_bytes_per_chip:
                continue
            comm = 0.0 if mistake == "collectives_ignored" else moved * (chips - 1) / chips / link_bandwidth
            step = 6.0 * n * tokens_per_step / achieved_flops_per_chip / chips + comm
            if step <= max_step_time_s:
                options.append((chips * step, stage, chips))
                break  # more chips of this stage only cost more chip-seconds
    if not options:
        return {"rows": [{"stage": None, "chips": None, "chip_seconds_per_step": None}]}
    low = min(o[0] for o in options)
    cost, stage, chips = min((o for o in options if o[0] <= low * (1 + 1e-12)), key=lambda o: o[1])
    return {"rows": [{"stage": stage, "chips": chips, "chip_seconds_per_step": cost}]}


def sample_zero_plan(draw: Draw, level: int) -> dict:
    """A model several times larger than one chip, and a step budget near the time its stage-1
    chip count would give, so memory binds some stages and the step time others."""
    params = draw.integer(10**9, 10**11)
    hbm = hbm_capacity(draw, 3)
    activation = draw.integer(hbm // 50, hbm // 10)
    grad_bytes = draw.choice((2, 4))
    inputs = {
        "n_params": params,
        "weight_bytes": 2,
        "grad_bytes": grad_bytes,
        "optimizer_bytes": 12,
        "activation_bytes_per_chip": activation,
        "hbm_bytes_per_chip": hbm,
        "tokens_per_step": 1024 * draw.integer(256, 4096),
        "achieved_flops_per_chip": 10**12 * draw.integer(100, 900),
        "link_bandwidth": 10**9 * draw.integer(25, 400),
        "max_chips": draw.integer(256, 4096),
    }
    compute = Fraction(6 * params * inputs["tokens_per_step"], inputs["achieved_flops_per_chip"])
    chips = math.ceil(Fraction(params * (16 + grad_bytes), hbm - activation)) * draw.integer(1, 8)
    ring = Fraction(params * (2 + grad_bytes), inputs["link_bandwidth"])
    budget = (compute / chips + ring) * Fraction(draw.integer(80, 200), 100)
    inputs["max_step_time_s"] = Fraction(math.ceil(budget * 1000), 1000)
    return inputs


def _zero_plan_rules(task: Task) -> str | None:
    row = task.expected["rows"][0]
    if row["stage"] is None:
        return "no stage fits within the chip cap"
    i = task.inputs
    weights, grads, state = (i["n_params"] * i[k] for k in ("weight_bytes", "grad_bytes", "optimizer_bytes"))
    room = i["hbm_bytes_per_chip"] - i["activation_bytes_per_chip"]
    compute = Fraction(6 * i["n_params"] * i["tokens_per_step"], i["achieved_flops_per_chip"])
    costs = []
    for whole, split, moved in (
        (weights + grads, state, grads + weights),
        (weights, grads + state, grads + weights),
        (0, weights + grads + state, 2 * weights + grads),
    ):
        ring = Fraction(moved, i["link_bandwidth"])
        if room > whole and near_integer(Fraction(split, room - whole)):
            return "a memory chip bound sits on an integer"
        if i["max_step_time_s"] > ring:
            bound = (compute - ring) / (i["max_step_time_s"] - ring)
            if near_integer(bound):
                return "a step-time chip bound sits on an integer"
            if room > whole:
                n = max(1, math.ceil(Fraction(split, room - whole)), math.ceil(bound))
                if n <= i["max_chips"]:
                    costs.append(compute + ring * (n - 1))
    if any(c != row["chip_seconds_per_step"] and near_tie(c, row["chip_seconds_per_step"]) for c in costs):
        return "two stages' costs sit within 1e-9"
    return None


_ADAM_L5 = """\
A dense model of `n_params` parameters trains with Adam and ZeRO data parallelism on n chips (n from
1 to `max_chips`). Per parameter it keeps weights (`weight_bytes`), gradients (`grad_bytes`) and
optimizer state (`optimizer_bytes`). ZeRO stage 1 splits the optimizer state evenly over the chips,
stage 2 also the gradients, stage 3 also the weights (what is not split is kept whole on every
chip); every chip also needs `activation_bytes_per_chip` bytes, all within `hbm_bytes_per_chip`
bytes. Each step processes `tokens_per_step` tokens split evenly over the chips, each chip computing
its share (6 FLOPs per parameter per token) at `achieved_flops_per_chip` FLOP/s. Then, at stages 1
and 2, the gradients are reduce-scattered and, after each chip updates its share, the updated
weights are all-gathered; at stage 3 the weights are all-gathered once before the forward pass and
once more before the backward pass, and the gradients reduce-scattered. Collectives are ring
collectives at `link_bandwidth` bytes/s per chip, none overlapping compute or each other. A step may
take at most `max_step_time_s` seconds. Give the stage and chip count that train at the fewest
chip-seconds per step (chips x step time), and that number; on a tie, the lower stage, then the
fewer chips."""


LEVEL_5 = scaling_level(
    "memory",
    zero_plan,
    _ADAM_L5,
    '{"rows": [{"stage": 1 | 2 | 3, "chips": <int>, "chip_seconds_per_step": <number>}]}',
    zero_plan_float,
    "collectives_ignored",
    sample=sample_zero_plan,
    reject=_zero_plan_rules,
)


ADAM_BRANCHES = (
    Branch("stage 3 wins", lambda t: t.expected["rows"][0]["stage"] == 3, Fraction(1, 10), (5,)),
    Branch("stage 1 or 2 wins", lambda t: t.expected["rows"][0]["stage"] in (1, 2), Fraction(1, 10), (5,)),
)


ADAM_MEMORY = five_levels(
    "adam_memory",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: precision recipes described per row (bits of weights, master copy, moments), the state "
    "and chips derived; L3: the per-chip memory under ZeRO-1 (replicated weights and gradients, "
    "sharded optimizer state, activations) and whether it fits; L4: the most parameters whose "
    "Adam state fits each chip count; L5: the ZeRO stage and chip count of the fewest "
    "chip-seconds per step under HBM and a step-time limit (stage 3 fits on fewer chips but "
    "moves more bytes)",
    branches=ADAM_BRANCHES,
)
