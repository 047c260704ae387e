"""The largest_model family of memory: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import hbm_capacity, n_params, round_numbers, rows
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    rounding_edge,
    scaling_level,
    smallest_satisfying,
    some_none,
)
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


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


def largest_model_float(hbm_bytes_per_chip, chips, uses, mistake=None):
    known_mistake(mistake, "gib_for_gb")
    per_chip = hbm_bytes_per_chip / 1e9 * 2**30 if mistake == "gib_for_gb" else float(hbm_bytes_per_chip)
    return {
        "rows": [
            {"use": u["name"], "max_params": math.floor(chips / u["bytes_per_param"] * per_chip)}
            for u in uses
        ]
    }


# Bytes per parameter of some uses; a use that divides a decimal capacity evenly would put the
# floor on an exact integer (refused), so levels 1-2 draw from the uneven ones only.
_USES = (
    ("inference_int4_g32_scales", Fraction(9, 16)),
    ("inference_int4_g128_scales", Fraction(33, 64)),
    ("inference_fp8_g128_scales", Fraction(65, 64)),
    ("training_adam_state_no_grads", 14),
    ("training_adam_fp32_grads", 18),
    ("inference_int3_g32_scales", Fraction(7, 16)),  # 3 bits + one fp16 scale per 32: 3.5 bits
)


_EVEN_USES = (("inference_bf16", 2), ("inference_fp32", 4), ("training_adam_bf16_grads", 16))


def sample_largest_model(draw: Draw, level: int) -> dict:
    hbm, chips = hbm_capacity(draw, level), draw.integer(1, 4 * level)
    pool = _USES if round_numbers(level) else _USES + _EVEN_USES
    pool = [use for use in pool if not near_integer(Fraction(hbm * chips) / use[1])]
    k = rows(level, 5) - 2
    if len(pool) < k:
        raise Reject("too few uses leave the parameter count off an integer")
    return {
        "hbm_bytes_per_chip": hbm,
        "chips": chips,
        "uses": [{"name": name, "bytes_per_param": size} for name, size in draw.sample(pool, k)],
    }


def _largest_model_edges(task: Task) -> str | None:
    capacity = task.inputs["hbm_bytes_per_chip"] * task.inputs["chips"]
    for use in task.inputs["uses"]:
        problem = rounding_edge(
            f"{use['name']}: the parameters that fit", Fraction(capacity) / use["bytes_per_param"]
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "memory",
    largest_model,
    """\
A node has `chips` chips with `hbm_bytes_per_chip` bytes of HBM each. For each use in `uses`, with
its bytes per parameter (weights only for inference, with any quantization scales; Adam state,
and gradients where named, for training), give the largest whole number of parameters the node can
hold, all `chips` chips together (ignore everything else in memory).""",
    '{"rows": [{"use": <str>, "max_params": <int>}, ...]}  # one row per use, in order',
    largest_model_float,
    "gib_for_gb",
    sample=sample_largest_model,
    reject=_largest_model_edges,
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


_LARGEST_L2 = """\
A node has `chips` chips with `hbm_bytes_per_chip` bytes of HBM each. Each inference format in
`formats` stores a weight in `weight_bits` bits and, for every group of `group_size` consecutive
weights, one scale of `scale_bits` bits. For each format, give the largest whole number of
parameters whose weights and scales fit in the node's HBM, all chips together (ignore everything
else in memory)."""


LEVEL_2 = scaling_level(
    "memory",
    largest_by_format,
    _LARGEST_L2,
    '{"rows": [{"format": <str>, "max_params": <int>}, ...]}  # one row per format, in order',
    largest_by_format_float,
    "scales_ignored",
    sample=sample_largest_format,
    reject=_largest_format_edges,
)


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


_LARGEST_L3 = """\
A model trains with data parallelism and ZeRO over `chips` chips of `hbm_bytes_per_chip` bytes of
HBM each; `reserved_bytes_per_chip` bytes of every chip are taken by activations and buffers. Per
parameter, training keeps weights (`weight_bytes`), gradients (`grad_bytes`) and optimizer state
(`optimizer_bytes`). ZeRO stage 1 splits the optimizer state evenly over the chips (everything else
replicated on every chip), stage 2 also splits the gradients, stage 3 also the weights. For each
stage 1, 2, 3, give the largest whole number of parameters that fits on every chip."""


LEVEL_3 = scaling_level(
    "memory",
    largest_by_zero_stage,
    _LARGEST_L3,
    '{"rows": [{"stage": 1, "max_params": <int>}, {"stage": 2, ...}, {"stage": 3, ...}]}',
    largest_by_zero_stage_float,
    "reserve_ignored",
    sample=sample_zero_stage,
    reject=_zero_stage_edges,
)


def fewest_chips_per_use(model_params, hbm_bytes_per_chip, max_chips, uses):
    """Fewest chips whose HBM together holds the model at each use's bytes per parameter."""
    import math
    from fractions import Fraction

    rows = []
    for use in uses:
        chips = math.ceil(Fraction(model_params) * use["bytes_per_param"] / hbm_bytes_per_chip)
        rows.append({"use": use["name"], "min_chips": chips if chips <= max_chips else None})
    return {"rows": rows}


def fewest_chips_per_use_float(model_params, hbm_bytes_per_chip, max_chips, uses, mistake=None):
    known_mistake(mistake, "gib_for_gb")
    capacity = hbm_bytes_per_chip / 1e9 * 2**30 if mistake == "gib_for_gb" else float(hbm_bytes_per_chip)
    return {
        "rows": [
            {
                "use": u["name"],
                "min_chips": smallest_satisfying(
                    lambda k, u=u: k * capacity >= u["bytes_per_param"] * model_params, max_chips
                ),
            }
            for u in uses
        ]
    }


_CHIP_COUNT_USES = (
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
    uses = draw.sample(_CHIP_COUNT_USES, min(len(_CHIP_COUNT_USES), 2 + level))
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


_CHIPS = """\
A model of `model_params` parameters is to be held on chips of `hbm_bytes_per_chip` bytes of HBM
each, pooled across the chips. For each use in `uses`, with its bytes per parameter (weights only
for inference, with any quantization scales; Adam state, and gradients where named, for
training), give the fewest chips whose HBM together holds the model (ignore everything else in
memory), or None if it takes more than `max_chips` chips."""


LEVEL_4 = scaling_level(
    "memory",
    fewest_chips_per_use,
    _CHIPS,
    '{"rows": [{"use": <str>, "min_chips": <int> | None}, ...]}  # one row per use, in order',
    fewest_chips_per_use_float,
    "gib_for_gb",
    sample=sample_fewest_chips,
    reject=_fewest_chips_edges,
)


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


LEVEL_5 = scaling_level(
    "memory",
    pipeline_layers,
    _LARGEST_L5,
    '{"rows": [{"max_layers": <int>, "total_params": <int>}]}',
    pipeline_layers_float,
    "even_split",
    sample=sample_pipeline,
    reject=_pipeline_rules,
)


LARGEST_BRANCHES = (Branch("none", some_none, Fraction(1, 8), (4,)),)


LARGEST_MODEL = five_levels(
    "largest_model",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: bytes per parameter derived from weight bits and group scales; L3: the largest model "
    "per ZeRO stage; L4: the fewest chips per use for a given model (None above the cap); L5: "
    "the most layers a pipeline of chips holds (uneven split, embeddings on the first and last "
    "stages) and the model's parameters",
    branches=LARGEST_BRANCHES,
)
