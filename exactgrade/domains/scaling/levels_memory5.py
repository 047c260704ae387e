"""Round-2 upper levels of the memory families kv_cache_size, adam_memory, max_batch_for_kv_cache and
largest_model.

kv_cache_size: variants described by their query-head grouping (L2); a paged cache for sequences of
different lengths (L3); a cache of global and sliding-window layers in pages under a budget, and how
many more sequences fit (L5). adam_memory: training recipes of different precisions (L2; level 1's
ratio was the same in every row); the per-chip memory under ZeRO-1 and whether it fits (L3); the
ZeRO stage and chip count of the fewest chip-seconds per step (L5). max_batch_for_kv_cache:
tensor-parallel degrees that split weights and KV heads (L3); its L5 is in levels_admission.
largest_model: bytes per parameter derived from formats (L2); the largest model per ZeRO stage (L3);
the most layers a pipeline of chips holds, the first and last stages also holding the embeddings
(L5).

References are self-contained; the ``*_float`` twins compute in floats by another route and can
reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    hbm_capacity,
    letters,
    sample_kv_cache_size,
    sample_max_batch_for_kv_cache,
)
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer, near_tie
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

# ================================================================ kv_cache_size


def kv_cache_grouped(configs, seq_len, batch, bytes_per_value):
    """KV cache per token and in total, the KV heads derived from the query-head grouping."""
    from fractions import Fraction

    rows = []
    for c in configs:
        kv_heads = c["n_heads"] // c["query_heads_per_kv_head"]
        per_token = 2 * c["layers"] * kv_heads * c["head_dim"] * bytes_per_value
        rows.append(
            {
                "config": c["name"],
                "bytes_per_token": Fraction(per_token),
                "total_gib": Fraction(per_token * seq_len * batch, 2**30),
            }
        )
    return {"rows": rows}


def kv_cache_grouped_float(configs, seq_len, batch, bytes_per_value, mistake=None):
    known_mistake(mistake, "query_heads_cached")
    rows = []
    for c in configs:
        heads = (
            c["n_heads"] if mistake == "query_heads_cached" else c["n_heads"] / c["query_heads_per_kv_head"]
        )
        per_token = 2.0 * bytes_per_value * c["head_dim"] * heads * c["layers"]
        rows.append(
            {
                "config": c["name"],
                "bytes_per_token": per_token,
                "total_gib": per_token * batch / 2**30 * seq_len,
            }
        )
    return {"rows": rows}


def sample_kv_grouped(draw: Draw, level: int) -> dict:
    n_heads = draw.choice((16, 24, 32, 40, 48, 64, 96))
    groups = sorted({1, n_heads, *draw.sample([d for d in range(2, n_heads) if n_heads % d == 0], 2)})
    layers, head_dim = draw.integer(8, 96), draw.choice((64, 80, 96, 128))
    configs = [
        {
            "name": f"group_{g}",
            "layers": layers,
            "n_heads": n_heads,
            "query_heads_per_kv_head": g,
            "head_dim": head_dim,
        }
        for g in draw.sample(groups, min(len(groups), 2 + level // 2))
    ]
    return {
        "configs": configs,
        "seq_len": 1024 * draw.integer(1, 64) + draw.integer(0, 1023),
        "batch": draw.integer(1, 64),
        "bytes_per_value": draw.choice((1, 2)),
    }


def kv_cache_paged(configs, seq_lens, page_tokens, bytes_per_value):
    """A paged cache: every sequence holds whole pages of page_tokens positions (all layers)."""
    from fractions import Fraction

    pages = sum(-(-length // page_tokens) for length in seq_lens)
    rows = []
    for c in configs:
        per_token = 2 * c["layers"] * c["n_kv_heads"] * c["head_dim"] * bytes_per_value
        rows.append({"config": c["name"], "allocated_gib": Fraction(pages * page_tokens * per_token, 2**30)})
    return {"rows": rows}


def kv_cache_paged_float(configs, seq_lens, page_tokens, bytes_per_value, mistake=None):
    known_mistake(mistake, "no_page_rounding")
    if mistake == "no_page_rounding":
        positions = float(sum(seq_lens))
    else:
        positions = float(sum(math.ceil(s / page_tokens) for s in seq_lens) * page_tokens)
    return {
        "rows": [
            {
                "config": c["name"],
                "allocated_gib": positions
                / 2**30
                * (2.0 * bytes_per_value * c["head_dim"] * c["n_kv_heads"] * c["layers"]),
            }
            for c in configs
        ]
    }


def sample_kv_paged(draw: Draw, level: int) -> dict:
    base = sample_kv_cache_size(draw, level)
    page = draw.choice((16, 32, 64, 128, 256))
    lengths = [draw.integer(1, 32_768) for _ in range(2 + level)]
    if all(length % page == 0 for length in lengths):
        raise Reject("every length fills whole pages")
    return {
        "configs": base["configs"],
        "seq_lens": lengths,
        "page_tokens": page,
        "bytes_per_value": base["bytes_per_value"],
    }


def hybrid_paged_cache(configs, seq_lens, new_len, page_tokens, bytes_per_value, cache_budget_bytes):
    """A paged cache of global and sliding-window layers: the bytes of the current sequences, and
    how many more sequences of new_len fit in the budget (None if the current ones already do not)."""
    from fractions import Fraction

    def sequence_bytes(c, length):
        page = page_tokens * 2 * c["n_kv_heads"] * c["head_dim"] * bytes_per_value  # one layer's page
        local = min(length, c["window"])
        return page * (
            c["global_layers"] * -(-length // page_tokens)
            + (c["layers"] - c["global_layers"]) * -(-local // page_tokens)
        )

    rows = []
    for c in configs:
        used = sum(sequence_bytes(c, length) for length in seq_lens)
        extra = (
            (cache_budget_bytes - used) // sequence_bytes(c, new_len) if used <= cache_budget_bytes else None
        )
        rows.append({"config": c["name"], "cache_gib": Fraction(used, 2**30), "extra_sequences": extra})
    return {"rows": rows}


def hybrid_paged_cache_float(
    configs, seq_lens, new_len, page_tokens, bytes_per_value, cache_budget_bytes, mistake=None
):
    known_mistake(mistake, "window_ignored")
    rows = []
    for c in configs:
        window = 10**12 if mistake == "window_ignored" else c["window"]
        per_position = 2.0 * c["n_kv_heads"] * c["head_dim"] * bytes_per_value

        def pages(length, c=c, window=window):
            return c["global_layers"] * math.ceil(length / page_tokens) + (
                c["layers"] - c["global_layers"]
            ) * math.ceil(min(length, window) / page_tokens)

        used = per_position * page_tokens * sum(pages(s) for s in seq_lens)
        extra = None
        if used <= cache_budget_bytes:
            extra = math.floor((cache_budget_bytes - used) / (per_position * page_tokens * pages(new_len)))
        rows.append({"config": c["name"], "cache_gib": used / 2**30, "extra_sequences": extra})
    return {"rows": rows}


def sample_hybrid_cache(draw: Draw, level: int) -> dict:
    """Configs of one model size: all-global, and mixes of global and sliding-window layers with
    windows inside the drawn lengths; a budget between the configs' needs (some None)."""
    layers, head_dim = draw.integer(16, 80), draw.choice((64, 128))
    configs = []
    for name in letters("config", 3 + level // 2):
        global_layers = draw.integer(0, layers // 2)
        configs.append(
            {
                "name": name,
                "layers": layers,
                "global_layers": global_layers,
                "window": 128 * draw.integer(4, 64),
                "n_kv_heads": draw.choice((1, 2, 4, 8)),
                "head_dim": head_dim,
            }
        )
    page = draw.choice((16, 32, 64, 128))
    inputs = {
        "configs": configs,
        "seq_lens": [draw.integer(64, 65_536) for _ in range(2 + level)],
        "new_len": draw.integer(1024, 32_768),
        "page_tokens": page,
        "bytes_per_value": draw.choice((1, 2)),
    }
    used = sorted(hybrid_paged_cache(**inputs, cache_budget_bytes=0)["rows"], key=lambda r: r["cache_gib"])
    middle = used[draw.integer(1, len(used) - 1)]["cache_gib"] * 2**30
    inputs["cache_budget_bytes"] = math.floor(middle * Fraction(draw.integer(100, 400), 100)) + draw.integer(
        1, 999
    )
    return inputs


def _hybrid_cache_rules(task: Task) -> str | None:
    i = task.inputs
    if not any(
        length > c["window"]
        for length in i["seq_lens"]
        for c in i["configs"]
        if c["global_layers"] < c["layers"]
    ):
        return "no sequence is longer than a window"
    for c, row in zip(i["configs"], task.expected["rows"], strict=True):
        used = row["cache_gib"] * 2**30
        if near_tie(used, i["cache_budget_bytes"]):
            return f"{c['name']}: the cache sits on the budget"
    if all(row["extra_sequences"] is None for row in task.expected["rows"]):
        return "no config fits the current sequences"
    if all(row["extra_sequences"] == 0 for row in task.expected["rows"]):
        return "no config fits one more sequence"
    return None


_KV_GROUPED_L2 = """\
A decoder layer's attention has `n_heads` query heads of `head_dim` values; with grouped-query
attention, every group of `query_heads_per_kv_head` query heads shares one key head and one value
head (multi-head attention: groups of 1; multi-query: one group of all heads). During decoding the
model caches, for every one of its `layers` layers and every position, the keys and values of its
key and value heads, `bytes_per_value` bytes per value. For each variant in `configs`, give the
KV-cache bytes per token and the total KV cache in GiB for `batch` sequences of `seq_len` tokens
each."""

_KV_PAGED_L3 = """\
A decoder caches a key and a value vector of size `head_dim` for every layer, every KV head and
every position, `bytes_per_value` bytes per value (each config in `configs` gives `layers`,
`n_kv_heads` and `head_dim`). The cache is allocated in pages: a page holds the keys and values of
`page_tokens` consecutive positions of one sequence, for all layers and KV heads, and a sequence
holds as many whole pages as its positions need. For the batch of sequences whose lengths are
`seq_lens`, give for each config the KV-cache memory allocated, in GiB."""

_HYBRID_CACHE_L5 = """\
Each config in `configs` is a decoder of `layers` layers with `n_kv_heads` key heads and as many
value heads of `head_dim` values, `bytes_per_value` bytes per value. In `global_layers` of its
layers attention looks at every earlier position, so the layer caches the keys and values of all
positions of a sequence; every other layer uses sliding-window attention and caches only the
`window` most recent positions (all of them while the sequence is shorter). Each layer allocates
its cache in pages: a page holds the keys and values of `page_tokens` positions of one sequence in
one layer, and a layer holds as many whole pages for a sequence as the positions it caches need.
The batch holds sequences of the lengths in `seq_lens`. For each config, give the cache memory
allocated for the batch in GiB, and the largest number of further sequences of `new_len` positions
that can be added with the whole cache staying within `cache_budget_bytes` bytes (None if the
batch alone already exceeds it)."""

KV_CACHE_LEVELS_R2 = {
    2: Level(
        kv_cache_grouped,
        _KV_GROUPED_L2,
        '{"rows": [{"config": <str>, "bytes_per_token": <number>, "total_gib": <number>}, ...]}'
        "  # one row per config, in order",
        kv_cache_grouped_float,
        "query_heads_cached",
        sample=sample_kv_grouped,
    ),
    3: Level(
        kv_cache_paged,
        _KV_PAGED_L3,
        '{"rows": [{"config": <str>, "allocated_gib": <number>}, ...]}  # one row per config, in order',
        kv_cache_paged_float,
        "no_page_rounding",
        sample=sample_kv_paged,
    ),
    5: Level(
        hybrid_paged_cache,
        _HYBRID_CACHE_L5,
        '{"rows": [{"config": <str>, "cache_gib": <number>, "extra_sequences": <int> | None}, ...]}'
        "  # one row per config, in order",
        hybrid_paged_cache_float,
        "window_ignored",
        sample=sample_hybrid_cache,
        reject=_hybrid_cache_rules,
    ),
}


def _some_none(task: Task) -> bool:
    return any(None in row.values() for row in task.expected["rows"])


KV_CACHE_BRANCHES_R2 = (
    Branch("none", _some_none, Fraction(1, 8), (4,)),
    Branch("none at L5", _some_none, Fraction(1, 10), (5,)),
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


_ADAM_L2 = """\
Training with Adam keeps, for every parameter, its weight, optionally a master copy of the weight
in higher precision, and two optimizer moments (a running mean of the gradient and a running mean
of its square). Each recipe in `recipes` gives the bits of the weight (`weight_bits`), of the
master copy (`master_bits`, 0 when there is none) and of each moment (`moment_bits`). For a model of
`n_params` parameters, give for each recipe the training state (weights, master copy and moments;
ignore gradients and activations) in GiB, and the smallest number of chips of `hbm_bytes_per_chip`
bytes of HBM each that can hold it."""

_ADAM_L3 = """\
Models in `models` train with Adam and ZeRO-1 data parallelism over `chips` chips: every chip
keeps a full copy of the weights (`weight_bytes` per parameter) and of the gradients (`grad_bytes`
per parameter), while the optimizer state (master weights and moments, `optimizer_bytes` per
parameter) is split evenly, each chip holding an equal share. Every chip also needs
`activation_bytes_per_chip` bytes of activations. For each model, give the memory one chip needs,
in GiB, and whether it fits in `hbm_bytes_per_chip` bytes."""


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


ADAM_LEVELS_R2 = {
    2: Level(
        adam_recipes,
        _ADAM_L2,
        '{"rows": [{"recipe": <str>, "state_gib": <number>, "min_chips": <int>}, ...]}'
        "  # one row per recipe, in order",
        adam_recipes_float,
        "one_moment",
        sample=sample_adam_recipes,
        reject=_adam_recipe_edges,
    ),
    3: Level(
        zero1_memory,
        _ADAM_L3,
        '{"rows": [{"model": <str>, "per_chip_gib": <number>, "fits": <bool>}, ...]}  # one row per model',
        zero1_memory_float,
        "gradients_sharded",
        sample=sample_zero1,
        reject=_zero1_edges,
        varying=("rows[].fits",),
    ),
    5: Level(
        zero_plan,
        _ADAM_L5,
        '{"rows": [{"stage": 1 | 2 | 3, "chips": <int>, "chip_seconds_per_step": <number>}]}',
        zero_plan_float,
        "collectives_ignored",
        sample=sample_zero_plan,
        reject=_zero_plan_rules,
    ),
}
ADAM_BRANCHES_R2 = (
    Branch("stage 3 wins", lambda t: t.expected["rows"][0]["stage"] == 3, Fraction(1, 10), (5,)),
    Branch("stage 1 or 2 wins", lambda t: t.expected["rows"][0]["stage"] in (1, 2), Fraction(1, 10), (5,)),
)


# ================================================================ max_batch_for_kv_cache


def tp_max_batch(
    hbm_bytes_per_chip, n_params, weight_bytes, layers, n_kv_heads, head_dim, kv_bytes, seq_len, tp_degrees
):
    """Per tensor-parallel degree: weights split evenly over the chips, KV heads split over them
    (a KV head is never split: with more chips than KV heads each chip keeps a copy of one)."""
    from fractions import Fraction

    rows = []
    for tp in tp_degrees:
        free = hbm_bytes_per_chip - Fraction(n_params * weight_bytes, tp)
        heads = -(-n_kv_heads // tp)  # KV heads per chip
        per_sequence = 2 * layers * heads * head_dim * kv_bytes * seq_len
        batch = free // per_sequence if free > 0 else None
        rows.append({"tp": tp, "max_batch": None if batch is None or batch < 1 else int(batch)})
    return {"rows": rows}


def tp_max_batch_float(
    hbm_bytes_per_chip,
    n_params,
    weight_bytes,
    layers,
    n_kv_heads,
    head_dim,
    kv_bytes,
    seq_len,
    tp_degrees,
    mistake=None,
):
    known_mistake(mistake, "kv_heads_split_fractionally")
    rows = []
    for tp in tp_degrees:
        heads = n_kv_heads / tp if mistake == "kv_heads_split_fractionally" else math.ceil(n_kv_heads / tp)
        free = hbm_bytes_per_chip - n_params * float(weight_bytes) / tp
        batch = math.floor(free / (2.0 * layers * heads * head_dim * kv_bytes * seq_len)) if free > 0 else 0
        rows.append({"tp": tp, "max_batch": batch if batch >= 1 else None})
    return {"rows": rows}


def sample_tp_batch(draw: Draw, level: int) -> dict:
    """Degrees past the KV-head count (copies) and a model that needs several chips (None at 1)."""
    n_kv_heads = draw.choice((1, 2, 4, 8))
    hbm = hbm_capacity(draw, level)
    weight_bytes = draw.choice((1, 2))
    params = math.floor(Fraction(hbm, weight_bytes) * Fraction(draw.integer(60, 300), 100))
    degrees = sorted({1, 2, 4, 8, 16} - {draw.choice((2, 4))})
    return {
        "hbm_bytes_per_chip": hbm,
        "n_params": params,
        "weight_bytes": weight_bytes,
        "layers": draw.integer(16, 96),
        "n_kv_heads": n_kv_heads,
        "head_dim": draw.choice((64, 128)),
        "kv_bytes": draw.choice((1, 2)),
        "seq_len": 1024 * draw.integer(1, 64) + draw.integer(0, 1023),
        "tp_degrees": degrees,
    }


def _tp_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for tp in i["tp_degrees"]:
        free = i["hbm_bytes_per_chip"] - Fraction(i["n_params"] * i["weight_bytes"], tp)
        heads = -(-i["n_kv_heads"] // tp)
        per_sequence = 2 * i["layers"] * heads * i["head_dim"] * i["kv_bytes"] * i["seq_len"]
        if free > 0 and near_integer(free / per_sequence):
            return f"tp {tp}: the batch sits on an integer"
    if all(row["max_batch"] is None for row in task.expected["rows"]):
        return "no degree fits a sequence"
    if not any(
        tp > i["n_kv_heads"] and row["max_batch"] is not None
        for tp, row in zip(i["tp_degrees"], task.expected["rows"], strict=True)
    ):
        return "no fitting degree goes past the KV-head count"
    return None


_TP_L3 = """\
A model of `n_params` parameters (`weight_bytes` bytes each) is served with tensor parallelism over
tp chips of `hbm_bytes_per_chip` bytes of HBM each: every chip holds an equal 1/tp share of the
weights. The model caches a key and a value of `head_dim` values for each of its `layers` layers
and `n_kv_heads` KV heads per position, `kv_bytes` bytes per value. The KV heads are divided among
the tp chips as evenly as possible without splitting a head: when tp exceeds n_kv_heads, each
chip keeps a full copy of one KV head's cache (so a chip holds ceil(n_kv_heads / tp) heads). All HBM
a chip has left after its weights holds KV cache. For each degree tp in `tp_degrees`, give the
largest number of sequences of `seq_len` tokens whose cache fits on every chip, or None if not
one fits."""

def grouped_max_batch(
    hbm_bytes, n_params, weight_bytes, layers, n_heads, query_heads_per_kv_head, head_dim, kv_bytes, seq_lens
):
    """Level 1's question with the KV heads derived from the query-head grouping."""
    from fractions import Fraction

    free = hbm_bytes - n_params * weight_bytes
    kv_heads = n_heads // query_heads_per_kv_head
    rows = []
    for seq_len in seq_lens:
        per_sequence = 2 * layers * kv_heads * head_dim * kv_bytes * seq_len
        rows.append(
            {
                "seq_len": seq_len,
                "kv_bytes_per_sequence": Fraction(per_sequence),
                "max_batch": free // per_sequence,
            }
        )
    return {"rows": rows}


def grouped_max_batch_float(
    hbm_bytes,
    n_params,
    weight_bytes,
    layers,
    n_heads,
    query_heads_per_kv_head,
    head_dim,
    kv_bytes,
    seq_lens,
    mistake=None,
):
    known_mistake(mistake, "query_heads_cached")
    heads = n_heads if mistake == "query_heads_cached" else n_heads / query_heads_per_kv_head
    free = hbm_bytes - float(n_params) * weight_bytes
    rows = []
    for s in seq_lens:
        per_sequence = 2.0 * s * kv_bytes * head_dim * heads * layers
        rows.append(
            {
                "seq_len": s,
                "kv_bytes_per_sequence": per_sequence,
                "max_batch": math.floor(free / per_sequence),
            }
        )
    return {"rows": rows}


def sample_grouped_max_batch(draw: Draw, level: int) -> dict:
    base = dict(sample_max_batch_for_kv_cache(draw, level))
    group = draw.choice((1, 2, 4, 8))
    kv_heads = base.pop("n_kv_heads")
    order = ("hbm_bytes", "n_params", "weight_bytes", "layers")
    return {
        **{k: base[k] for k in order},
        "n_heads": kv_heads * group,
        "query_heads_per_kv_head": group,
        "head_dim": base["head_dim"],
        "kv_bytes": base["kv_bytes"],
        "seq_lens": base["seq_lens"],
    }


def _grouped_max_batch_edges(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes"] - i["n_params"] * i["weight_bytes"]
    kv_heads = i["n_heads"] // i["query_heads_per_kv_head"]
    for s in i["seq_lens"]:
        if near_integer(Fraction(free, 2 * i["layers"] * kv_heads * i["head_dim"] * i["kv_bytes"] * s)):
            return f"seq_len {s}: the sequences that fit sit on an integer"
    return None


_GROUPED_MAX_BATCH_L2 = """\
A server with `hbm_bytes` bytes of HBM in total holds a model of `n_params` parameters at
`weight_bytes` bytes each; all remaining HBM holds KV cache. The model has `layers` layers; in each,
attention has `n_heads` query heads of `head_dim` values, and every group of
`query_heads_per_kv_head` query heads shares one key head and one value head (grouped-query
attention). During decoding every layer caches the keys and values of its key and value heads for
every position, `kv_bytes` bytes per value. For each sequence length in `seq_lens`, give the
KV-cache bytes of one full-length sequence and the largest number of such sequences (the batch)
whose KV cache fits (ignore activations and fragmentation)."""

MAX_BATCH_L2 = Level(
    grouped_max_batch,
    _GROUPED_MAX_BATCH_L2,
    '{"rows": [{"seq_len": <int>, "kv_bytes_per_sequence": <number>, "max_batch": <int>}, ...]}'
    "  # one row per entry of `seq_lens`, in order",
    grouped_max_batch_float,
    "query_heads_cached",
    sample=sample_grouped_max_batch,
    reject=_grouped_max_batch_edges,
)


MAX_BATCH_LEVELS_R2 = {
    2: MAX_BATCH_L2,
    3: Level(
        tp_max_batch,
        _TP_L3,
        '{"rows": [{"tp": <int>, "max_batch": <int> | None}, ...]}  # one row per entry of `tp_degrees`',
        tp_max_batch_float,
        "kv_heads_split_fractionally",
        sample=sample_tp_batch,
        reject=_tp_batch_edges,
    ),
}
MAX_BATCH_BRANCHES_R2 = (
    Branch("none", _some_none, Fraction(1, 8), (4,)),
    Branch("none at L3", _some_none, Fraction(1, 5), (3,)),
)


# ================================================================ largest_model


def largest_by_format(hbm_bytes_per_chip, chips, formats):
    """The most parameters per format, bytes per parameter derived from its bits and scales."""
    import math
    from fractions import Fraction

    capacity = hbm_bytes_per_chip * chips
    rows = []
    for f in formats:
        bits = f["weight_bits"] + Fraction(f["scale_bits"], f["group_size"])
        rows.append({"format": f["name"], "max_params": math.floor(capacity * 8 / bits)})
    return {"rows": rows}


def largest_by_format_float(hbm_bytes_per_chip, chips, formats, mistake=None):
    known_mistake(mistake, "scales_ignored")
    rows = []
    for f in formats:
        scale = 0.0 if mistake == "scales_ignored" else f["scale_bits"] / f["group_size"]
        rows.append(
            {
                "format": f["name"],
                "max_params": math.floor(chips * (hbm_bytes_per_chip / ((f["weight_bits"] + scale) / 8))),
            }
        )
    return {"rows": rows}


_FORMATS = (
    ("int4_g32_fp16", 4, 32, 16),
    ("int4_g128_fp16", 4, 128, 16),
    ("int8_g64_fp32", 8, 64, 32),
    ("fp8_g128_fp32", 8, 128, 32),
    ("int3_g64_fp16", 3, 64, 16),
    ("int2_g16_fp16", 2, 16, 16),
    ("nf4_g64_fp8", 4, 64, 8),
)


def sample_largest_format(draw: Draw, level: int) -> dict:
    formats = [
        {"name": n, "weight_bits": w, "group_size": g, "scale_bits": s}
        for n, w, g, s in draw.sample(_FORMATS, 2 + level // 2)
    ]
    return {"hbm_bytes_per_chip": hbm_capacity(draw, 3), "chips": draw.integer(1, 16), "formats": formats}


def _largest_format_edges(task: Task) -> str | None:
    i = task.inputs
    for f in i["formats"]:
        if near_integer(
            i["hbm_bytes_per_chip"]
            * i["chips"]
            * 8
            / (f["weight_bits"] + Fraction(f["scale_bits"], f["group_size"]))
        ):
            return f"{f['name']}: the parameter count sits on an integer"
    return None


def largest_by_zero_stage(
    hbm_bytes_per_chip, chips, weight_bytes, grad_bytes, optimizer_bytes, reserved_bytes_per_chip
):
    """The most parameters trainable per ZeRO stage: stage 1 shards the optimizer state, stage 2 also
    the gradients, stage 3 also the weights, each over all the chips."""
    import math
    from fractions import Fraction

    free = hbm_bytes_per_chip - reserved_bytes_per_chip
    per_param = {
        1: weight_bytes + grad_bytes + Fraction(optimizer_bytes, chips),
        2: weight_bytes + Fraction(grad_bytes + optimizer_bytes, chips),
        3: Fraction(weight_bytes + grad_bytes + optimizer_bytes, chips),
    }
    return {
        "rows": [{"stage": stage, "max_params": math.floor(free / per_param[stage])} for stage in (1, 2, 3)]
    }


def largest_by_zero_stage_float(
    hbm_bytes_per_chip,
    chips,
    weight_bytes,
    grad_bytes,
    optimizer_bytes,
    reserved_bytes_per_chip,
    mistake=None,
):
    known_mistake(mistake, "reserve_ignored")
    free = float(hbm_bytes_per_chip) - (0 if mistake == "reserve_ignored" else reserved_bytes_per_chip)
    totals = weight_bytes + grad_bytes + optimizer_bytes
    rows = []
    for stage, replicated in ((1, weight_bytes + grad_bytes), (2, weight_bytes), (3, 0)):
        rows.append(
            {
                "stage": stage,
                "max_params": math.floor(chips * free / (chips * replicated + totals - replicated)),
            }
        )
    return {"rows": rows}


def sample_zero_stage(draw: Draw, level: int) -> dict:
    hbm = hbm_capacity(draw, 3)
    return {
        "hbm_bytes_per_chip": hbm,
        "chips": draw.integer(2, 1024),
        "weight_bytes": 2,
        "grad_bytes": draw.choice((2, 4)),
        "optimizer_bytes": draw.choice((12, 8, 6)),
        "reserved_bytes_per_chip": draw.integer(hbm // 50, hbm // 5),
    }


def _zero_stage_edges(task: Task) -> str | None:
    i = task.inputs
    free = i["hbm_bytes_per_chip"] - i["reserved_bytes_per_chip"]
    w, g, o, n = i["weight_bytes"], i["grad_bytes"], i["optimizer_bytes"], i["chips"]
    for per_param in (w + g + Fraction(o, n), w + Fraction(g + o, n), Fraction(w + g + o, n)):
        if near_integer(free / per_param):
            return "a parameter count sits on an integer"
    return None


def pipeline_layers(
    hbm_bytes_per_chip,
    stages,
    d_model,
    d_ff,
    n_heads,
    n_kv_heads,
    head_dim,
    vocab_size,
    weight_bytes,
    kv_bytes_per_layer,
    activation_bytes_per_stage,
):
    """The most layers a pipeline holds: layers split as evenly as possible (the first stages take
    the extra ones), the first stage also holding the input embedding, the last the output one."""
    per_layer = (
        d_model * (n_heads + 2 * n_kv_heads) * head_dim + n_heads * head_dim * d_model + 3 * d_model * d_ff
    ) * weight_bytes + kv_bytes_per_layer
    embedding = vocab_size * d_model * weight_bytes
    room = hbm_bytes_per_chip - activation_bytes_per_stage

    def fits(layers):
        for stage in range(stages):
            count = layers // stages + (1 if stage < layers % stages else 0)
            extra = (embedding if stage == 0 else 0) + (embedding if stage == stages - 1 else 0)
            if count * per_layer + extra > room:
                return False
        return True

    best = None
    low = 0 if fits(0) else None
    if low is not None:
        high = 1
        while fits(high):
            high *= 2
        low = high // 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        best = low if low >= 1 else None
    total = (
        None
        if best is None
        else best * (per_layer - kv_bytes_per_layer) // weight_bytes + 2 * vocab_size * d_model
    )
    return {"rows": [{"max_layers": best, "total_params": total}]}


def pipeline_layers_float(
    hbm_bytes_per_chip,
    stages,
    d_model,
    d_ff,
    n_heads,
    n_kv_heads,
    head_dim,
    vocab_size,
    weight_bytes,
    kv_bytes_per_layer,
    activation_bytes_per_stage,
    mistake=None,
):
    """The binding stage found by formula: stage 0 holds ceil(L/p) layers and the input embedding;
    the last holds floor(L/p) (or ceil, when p divides L... checked by counting) and the output one."""
    known_mistake(mistake, "even_split")
    per_layer = (
        float(d_model * head_dim * (2 * n_heads + 2 * n_kv_heads) + 3 * d_model * d_ff) * weight_bytes
        + kv_bytes_per_layer
    )
    embedding = float(vocab_size) * d_model * weight_bytes
    room = float(hbm_bytes_per_chip) - activation_bytes_per_stage
    best = None
    for layers in range(1, 100_000):
        if mistake == "even_split":
            loads = [
                layers / stages * per_layer + embedding * ((s == 0) + (s == stages - 1))
                for s in range(stages)
            ]
        else:
            loads = [
                (math.ceil((layers - s) / stages)) * per_layer + embedding * ((s == 0) + (s == stages - 1))
                for s in range(stages)
            ]
        if max(loads) > room:
            break
        best = layers
    total = (
        None
        if best is None
        else int(round(best * (per_layer - kv_bytes_per_layer) / weight_bytes)) + 2 * vocab_size * d_model
    )
    return {"rows": [{"max_layers": best, "total_params": total}]}


def sample_pipeline(draw: Draw, level: int) -> dict:
    """A real HBM per chip (hardware.HBM_CAPACITY) holding, besides the activations, 2 to 64
    layers per stage and part of an embedding (the layers' KV cache fills the rest), so the first
    or the last stage binds, or a middle one."""
    head_dim = draw.choice((64, 128))
    n_heads = draw.integer(8, 64)
    n_kv_heads = draw.choice([d for d in range(1, n_heads + 1) if n_heads % d == 0 and d <= 8])
    d_model = n_heads * head_dim
    d_ff = 128 * draw.integer(2 * d_model // 128, 4 * d_model // 128)
    weight_bytes, vocab = draw.choice((1, 2)), draw.integer(32_000, 260_000)
    per_layer = (2 * d_model * (n_heads + n_kv_heads) * head_dim + 3 * d_model * d_ff) * weight_bytes
    stages = draw.integer(2, 16)
    embedding = vocab * d_model * weight_bytes
    activation = draw.integer(10**8, 4 * 10**9)
    hbm = hbm_capacity(draw, level)
    layers_room = hbm - activation - embedding * Fraction(draw.integer(30, 180), 100)
    fewest = max(2, math.ceil(layers_room * 2 / (3 * per_layer)))
    most = min(64, math.floor(layers_room / per_layer))
    if fewest > most:
        raise Reject("no 2 to 64 layers with a KV cache of up to half a layer's weights fill the HBM")
    kv = math.floor(layers_room / draw.integer(fewest, most)) - per_layer
    return {
        "hbm_bytes_per_chip": hbm,
        "stages": stages,
        "d_model": d_model,
        "d_ff": d_ff,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "weight_bytes": weight_bytes,
        "kv_bytes_per_layer": kv,
        "activation_bytes_per_stage": activation,
    }


def _pipeline_rules(task: Task) -> str | None:
    if task.expected["rows"][0]["max_layers"] is None:
        return "not even one layer fits"
    return None


_LARGEST_L2 = """\
A node has `chips` chips with `hbm_bytes_per_chip` bytes of HBM each. Each inference format in
`formats` stores a weight in `weight_bits` bits and, for every group of `group_size` consecutive
weights, one scale of `scale_bits` bits. For each format, give the largest whole number of
parameters whose weights and scales fit in the node's HBM, all chips together (ignore everything
else in memory)."""

_LARGEST_L3 = """\
A model trains with data parallelism and ZeRO over `chips` chips of `hbm_bytes_per_chip` bytes of
HBM each; `reserved_bytes_per_chip` bytes of every chip are taken by activations and buffers. Per
parameter, training keeps weights (`weight_bytes`), gradients (`grad_bytes`) and optimizer state
(`optimizer_bytes`). ZeRO stage 1 splits the optimizer state evenly over the chips (everything else
replicated on every chip), stage 2 also splits the gradients, stage 3 also the weights. For each
stage 1, 2, 3, give the largest whole number of parameters that fits on every chip."""

_LARGEST_L5 = """\
A decoder is served by a pipeline of `stages` chips of `hbm_bytes_per_chip` bytes of HBM each. Its
layers have identical shapes: query and output projections of d_model x n_heads*head_dim, key and
value projections of d_model x n_kv_heads*head_dim and a gated MLP of three d_model x d_ff
matrices, `weight_bytes` bytes per weight; each layer also needs `kv_bytes_per_layer` bytes of KV
cache on the chip that holds it. The layers are split over the stages in order, as evenly as
possible, the earlier stages taking one layer more when the count does not divide evenly. The first
stage also holds the input embedding (vocab_size x d_model weights) and the last stage the separate
output projection (d_model x vocab_size weights). Every chip also needs
`activation_bytes_per_stage` bytes. Give the largest number of layers for which every chip's
memory fits (at least one layer always does), and the model's parameter count with that many
layers (layers and both embeddings)."""

LARGEST_LEVELS_R2 = {
    2: Level(
        largest_by_format,
        _LARGEST_L2,
        '{"rows": [{"format": <str>, "max_params": <int>}, ...]}  # one row per format, in order',
        largest_by_format_float,
        "scales_ignored",
        sample=sample_largest_format,
        reject=_largest_format_edges,
    ),
    3: Level(
        largest_by_zero_stage,
        _LARGEST_L3,
        '{"rows": [{"stage": 1, "max_params": <int>}, {"stage": 2, ...}, {"stage": 3, ...}]}',
        largest_by_zero_stage_float,
        "reserve_ignored",
        sample=sample_zero_stage,
        reject=_zero_stage_edges,
    ),
    5: Level(
        pipeline_layers,
        _LARGEST_L5,
        '{"rows": [{"max_layers": <int>, "total_params": <int>}]}',
        pipeline_layers_float,
        "even_split",
        sample=sample_pipeline,
        reject=_pipeline_rules,
    ),
}
LARGEST_BRANCHES_R2 = (Branch("none", _some_none, Fraction(1, 8), (4,)),)

__all__ = [
    "ADAM_BRANCHES_R2",
    "ADAM_LEVELS_R2",
    "KV_CACHE_BRANCHES_R2",
    "KV_CACHE_LEVELS_R2",
    "LARGEST_BRANCHES_R2",
    "LARGEST_LEVELS_R2",
    "MAX_BATCH_BRANCHES_R2",
    "MAX_BATCH_LEVELS_R2",
]
