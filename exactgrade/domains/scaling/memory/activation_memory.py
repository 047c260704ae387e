"""The activation_memory family of memory: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    hbm_capacity,
    peak_for_capacity,
    round_numbers,
    rows,
    sorted_sample,
)
from exactgrade.domains.scaling._task import known_mistake, rounding_edge, scaling_level, some_none, tie_edge
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def activation_memory(layers, d_model, n_heads, batch, seq_lens):
    """Stored activations for the backward pass, with and without full recomputation."""
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        stored = layers * seq_len * batch * (34 * d_model + 5 * n_heads * seq_len)
        checkpointed = layers * 2 * seq_len * batch * d_model
        rows.append(
            {
                "seq_len": seq_len,
                "no_recompute_gib": Fraction(stored, 2**30),
                "full_recompute_gib": Fraction(checkpointed, 2**30),
                "saving_factor": Fraction(stored, checkpointed),
            }
        )
    return {"rows": rows}


def activation_memory_float(layers, d_model, n_heads, batch, seq_lens, mistake=None):
    known_mistake(mistake, "drop_attention_scores")
    rows = []
    for s in seq_lens:
        per_element = 34.0 + (0.0 if mistake == "drop_attention_scores" else 5.0 * n_heads * s / d_model)
        checkpointed = 2.0 * d_model * batch * s * layers / 2**30
        rows.append(
            {
                "seq_len": s,
                "no_recompute_gib": checkpointed * per_element / 2,
                "full_recompute_gib": checkpointed,
                "saving_factor": per_element / 2,
            }
        )
    return {"rows": rows}


def sample_activation_memory(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    seq_lens = [512 * s for s in sorted_sample(draw, 1, 16 * 2**level, rows(level, 3))]
    if not round_numbers(level):
        seq_lens = sorted({s - draw.integer(0, 511) for s in seq_lens})
    return {
        "layers": draw.integer(8, 40 * level),
        "d_model": shape["d_model"],
        "n_heads": shape["n_heads"],
        "batch": draw.integer(1, 4 * level),
        "seq_lens": seq_lens,
    }


_ACTIVATION_ROW = (
    '{"rows": [{"seq_len": <int>, "no_recompute_gib": <number>, '
    '"full_recompute_gib": <number>, "saving_factor": <number>}, ...]}'
    "  # one row per entry of `seq_lens`, in order"
)


LEVEL_1 = scaling_level(
    "memory",
    activation_memory,
    """\
Without recomputation, a transformer layer stores seq_len*batch*(34*d_model + 5*n_heads*seq_len)
bytes of activations for the backward pass (16-bit activations, the attention scores being the
second term). With full activation recomputation it stores only its bf16 input,
2*seq_len*batch*d_model bytes per layer. For a model of `layers` layers, `d_model` and `n_heads`,
at batch size `batch`, give for each sequence length in `seq_lens` the stored activations of all
layers in GiB without and with recomputation, and the ratio of the two (without / with).""",
    _ACTIVATION_ROW,
    activation_memory_float,
    "drop_attention_scores",
    sample=sample_activation_memory,
)


STORED = """\
Training a transformer layer without recomputation stores these 16-bit (2-byte) activations for
the backward pass, per sequence of seq_len tokens, with hidden width `d_model`, `n_heads` heads and
an MLP of hidden width 4 * d_model: in the attention block, the input of the QKV projection, the
queries, the keys, the values and the input of the output projection (d_model values per token
each), a 1-byte dropout mask of d_model values per token after the output projection, and for
every head the seq_len x seq_len attention probabilities (2 bytes each), their 1-byte dropout mask
and the dropped-out probabilities (2 bytes each); in the MLP block, its input (d_model values per
token), the first linear layer's output and the GeLU output (4 * d_model values per token each)
and a 1-byte dropout mask of d_model values per token; and the inputs of the two layer norms
(d_model values per token each). With full activation recomputation a layer stores only its
2-byte input, d_model values per token."""


_L2 = (
    STORED
    + """
For a model of `layers` layers at batch size `batch`, give for each sequence length in
`seq_lens` the stored activations of all layers in GiB without and with recomputation, and the
ratio of the two (without / with)."""
)


L2_QUESTION = _L2


LEVEL_2 = scaling_level(
    "memory",
    activation_memory,
    L2_QUESTION,
    _ACTIVATION_ROW,
    activation_memory_float,
    "drop_attention_scores",
    sample=sample_activation_memory,
)


def training_memory(n_params, state_bytes_per_param, layers, d_model, n_heads, batch, seq_lens, hbm_bytes):
    """Training state plus activations stored without recomputation, against one device's HBM."""
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        activations = layers * seq_len * batch * (34 * d_model + 5 * n_heads * seq_len)
        total = n_params * state_bytes_per_param + activations
        rows.append({"seq_len": seq_len, "total_gib": Fraction(total, 2**30), "fits": total <= hbm_bytes})
    return {"rows": rows}


def _per_sequence(layers, d_model, n_heads, s, mistake):
    scores = 0.0 if mistake == "drop_attention_scores" else 5.0 * n_heads * s
    return float(layers) * s * (34.0 * d_model + scores), 2.0 * layers * s * d_model


def training_memory_float(
    n_params, state_bytes_per_param, layers, d_model, n_heads, batch, seq_lens, hbm_bytes, mistake=None
):
    known_mistake(mistake, "drop_attention_scores")
    rows = []
    for s in seq_lens:
        activations = _per_sequence(layers, d_model, n_heads, s, mistake)[0]
        total = batch * activations + state_bytes_per_param * n_params
        rows.append({"seq_len": s, "total_gib": total / 1024**3, "fits": hbm_bytes >= total})
    return {"rows": rows}


def _per_layer(i: dict, seq_len: int) -> int:
    """Bytes one layer stores for one sequence without recomputation."""
    return seq_len * (34 * i["d_model"] + 5 * i["n_heads"] * seq_len)


def _free(i: dict) -> int:
    return i["hbm_bytes"] - i["n_params"] * i["state_bytes_per_param"]


EMBEDDINGS_PER_WIDTH = (32_000, 2 * 256_000)

"""Embedding parameters per unit of d_model: a vocabulary of 32k (tied) to 256k (input and
output embeddings apart)."""


def _device(draw: Draw, level: int) -> dict:
    """One device of a real HBM capacity (hardware.HBM_CAPACITY) and a model whose training state
    takes 10-70% of it, with widths of level 2 narrow enough for 8 layers in n_params: the model
    is chosen to fit the device, never the device to fit the model. The sequence lengths come
    after (_seq_lens)."""
    shape = attention_shape(draw, 2)
    hbm = hbm_capacity(draw, level)
    state_bytes = draw.choice((16, 18, 20))
    params = draw.integer(hbm // (10 * state_bytes), 7 * hbm // (10 * state_bytes))
    # a width of which 8 layers and the smallest embeddings fit in n_params (_layers)
    widths = [w for w in range(1, 17) if 96 * (1024 * w) ** 2 + EMBEDDINGS_PER_WIDTH[0] * 1024 * w <= params]
    if not widths:
        raise Reject("n_params holds not 8 layers of the narrowest width")
    return {
        "n_params": params,
        "state_bytes_per_param": state_bytes,
        "d_model": 1024 * draw.choice(widths),
        "n_heads": shape["n_heads"],
        "hbm_bytes": hbm,
    }


def _seq_lens(draw: Draw, level: int, i: dict, longest_fits: bool = False) -> dict:
    """2 + level contexts of up to 32k (multiples of 512 from level 3 on, minus up to 511); with
    longest_fits, only those of which 8 layers store one unrecomputed sequence in the free HBM."""
    most = 64
    while longest_fits and most >= 1 and 8 * _per_layer(i, 512 * most) > _free(i):
        most -= 1
    if most < 2 + level:
        raise Reject("too few contexts fit the free HBM")
    seq_lens = [512 * s for s in sorted_sample(draw, 1, most, 2 + level)]
    if level >= 3:
        seq_lens = sorted({s - draw.integer(0, 511) for s in seq_lens})
    return {**i, "seq_lens": seq_lens}


def _layers(draw: Draw, i: dict, fewest: int, most: int) -> int:
    """A layer count of 8-80 in [fewest, most] (the counts that put the free HBM where a level
    needs it) whose weights, 12 * d_model**2 per layer (attention 4, MLP of width 4 * d_model 8),
    leave n_params an embedding share of a real vocabulary (EMBEDDINGS_PER_WIDTH): the stated
    parameter count is that of the stated shape. Reject when none is."""
    per_layer, d_model = 12 * i["d_model"] ** 2, i["d_model"]
    fewest = max(8, fewest, -(-(i["n_params"] - EMBEDDINGS_PER_WIDTH[1] * d_model) // per_layer))
    most = min(80, most, (i["n_params"] - EMBEDDINGS_PER_WIDTH[0] * d_model) // per_layer)
    if fewest > most:
        raise Reject("no layer count of 8-80 puts the free HBM between the activations and fits n_params")
    return draw.integer(fewest, most)


def _inputs(i: dict, layers: int, **more: int) -> dict:
    """The device's inputs with the layer count, in the order the prompt names them."""
    head = {key: i[key] for key in ("n_params", "state_bytes_per_param")}
    middle = {key: i[key] for key in ("d_model", "n_heads", "seq_lens")}
    return {**head, "layers": layers, **middle, **more, "hbm_bytes": i["hbm_bytes"]}


def sample_training_memory(draw: Draw, level: int) -> dict:
    """The layer count puts the free HBM between the activations of the shortest and the
    longest sequence: fits varies."""
    i = _seq_lens(draw, level, _device(draw, level))
    batch = draw.integer(1, 4 * level)
    shortest, longest = (batch * _per_layer(i, s) for s in (i["seq_lens"][0], i["seq_lens"][-1]))
    layers = _layers(draw, i, _free(i) // longest + 1, _free(i) // shortest)
    return _inputs(i, layers, batch=batch)


def _total_not_tied(task: Task) -> str | None:
    for row in task.expected["rows"]:
        problem = tie_edge(
            f"seq_len {row['seq_len']}: the total against the HBM",
            row["total_gib"] * 2**30,
            task.inputs["hbm_bytes"],
        )
        if problem:
            return problem
    return None


_L3 = (
    STORED
    + """
A model of `n_params` parameters (its `layers` layers of 12 * d_model**2 weights each, plus its
embeddings) trains on one device with `hbm_bytes` bytes of HBM, keeping `state_bytes_per_param`
bytes of weights, gradients and optimizer state per parameter, without recomputation, at batch
size `batch` (sequences). For each sequence length in `seq_lens`, give the device's total memory
(state plus stored activations) in GiB and whether it fits (at most `hbm_bytes`; nothing else in
memory)."""
)


LEVEL_3 = scaling_level(
    "memory",
    training_memory,
    _L3,
    '{"rows": [{"seq_len": <int>, "total_gib": <number>, "fits": <bool>}, ...]}'
    "  # one row per entry of `seq_lens`, in order",
    training_memory_float,
    "drop_attention_scores",
    sample=sample_training_memory,
    varying=("rows[].fits",),
    reject=_total_not_tied,
)


def max_training_batch(n_params, state_bytes_per_param, layers, d_model, n_heads, seq_lens, hbm_bytes):
    """Largest batch whose activations fit beside the training state, without and with full
    recomputation (None when not even one sequence fits)."""
    free = hbm_bytes - n_params * state_bytes_per_param
    rows = []
    for seq_len in seq_lens:
        stored = layers * seq_len * (34 * d_model + 5 * n_heads * seq_len)
        recomputed = layers * seq_len * 2 * d_model
        plain, recompute = free // stored, free // recomputed
        rows.append(
            {
                "seq_len": seq_len,
                "max_batch_no_recompute": plain if plain >= 1 else None,
                "max_batch_full_recompute": recompute if recompute >= 1 else None,
            }
        )
    return {"rows": rows}


def max_training_batch_float(
    n_params, state_bytes_per_param, layers, d_model, n_heads, seq_lens, hbm_bytes, mistake=None
):
    known_mistake(mistake, "drop_attention_scores")
    free = hbm_bytes - state_bytes_per_param * n_params
    rows = []
    for s in seq_lens:
        stored, recomputed = _per_sequence(layers, d_model, n_heads, s, mistake)
        plain, again = math.floor(free / stored), math.floor(free / recomputed)
        rows.append(
            {"seq_len": s, "max_batch_no_recompute": plain or None, "max_batch_full_recompute": again or None}
        )
    return {"rows": rows}


def _activations(i: dict, seq_len: int) -> tuple[int, int]:
    return (
        i["layers"] * _per_layer(i, seq_len),
        i["layers"] * seq_len * 2 * i["d_model"],
    )


def sample_max_training_batch(draw: Draw, level: int) -> dict:
    """Half the instances have too many layers for one unrecomputed longest sequence (None) but
    not for the shortest; the others fit at least one longest sequence."""
    none = draw.chance(1, 2)
    i = _seq_lens(draw, level, _device(draw, level), longest_fits=not none)
    shortest, longest = (_per_layer(i, s) for s in (i["seq_lens"][0], i["seq_lens"][-1]))
    if none:
        layers = _layers(draw, i, _free(i) // longest + 1, _free(i) // shortest)
    else:
        layers = _layers(draw, i, 8, _free(i) // longest)
    return _inputs(i, layers)


def _batch_edges(task: Task) -> str | None:
    i = task.inputs
    free = _free(i)
    for seq_len in i["seq_lens"]:
        for name, per in zip(("no recompute", "full recompute"), _activations(i, seq_len), strict=True):
            problem = rounding_edge(f"seq_len {seq_len}, {name}: the sequences that fit", Fraction(free, per))
            if problem:
                return problem
    return None


_L4 = (
    STORED
    + """
A model of `n_params` parameters (its `layers` layers of 12 * d_model**2 weights each, plus its
embeddings) trains on one device with `hbm_bytes` bytes of HBM, keeping `state_bytes_per_param`
bytes of weights, gradients and optimizer state per parameter; activations take the rest (nothing
else in memory). For each sequence length in `seq_lens`, give the largest batch (whole sequences)
whose activations fit without recomputation and with full recomputation; None where not even one
sequence fits."""
)


LEVEL_4 = scaling_level(
    "memory",
    max_training_batch,
    _L4,
    '{"rows": [{"seq_len": <int>, "max_batch_no_recompute": <int> | None, '
    '"max_batch_full_recompute": <int> | None}, ...]}  # one row per entry of `seq_lens`, in order',
    max_training_batch_float,
    "drop_attention_scores",
    sample=sample_max_training_batch,
    reject=_batch_edges,
)


def best_recompute(
    n_params,
    state_bytes_per_param,
    layers,
    d_model,
    n_heads,
    seq_lens,
    hbm_bytes,
    flops_per_token,
    peak_flops,
    step_overhead_s,
):
    """The recomputation choice and batch of the highest training throughput that fit."""
    from fractions import Fraction

    free = hbm_bytes - n_params * state_bytes_per_param
    rows = []
    for seq_len in seq_lens:
        best = None
        for mode, per_sequence, cost in (
            ("none", layers * seq_len * (34 * d_model + 5 * n_heads * seq_len), Fraction(1)),
            ("full", layers * seq_len * 2 * d_model, Fraction(4, 3)),
        ):
            batch = free // per_sequence
            if batch < 1:
                continue
            step_s = step_overhead_s + batch * seq_len * flops_per_token * cost / peak_flops
            tokens_per_s = batch * seq_len / step_s
            if best is None or tokens_per_s > best[2]:
                best = (mode, batch, tokens_per_s)
        mode, batch, tokens_per_s = best if best is not None else (None, None, None)
        rows.append({"seq_len": seq_len, "recompute": mode, "batch": batch, "tokens_per_s": tokens_per_s})
    return {"rows": rows}


def best_recompute_float(
    n_params,
    state_bytes_per_param,
    layers,
    d_model,
    n_heads,
    seq_lens,
    hbm_bytes,
    flops_per_token,
    peak_flops,
    step_overhead_s,
    mistake=None,
):
    known_mistake(mistake, "drop_attention_scores")
    free = hbm_bytes - state_bytes_per_param * n_params
    rows = []
    for s in seq_lens:
        options = []
        sizes = _per_sequence(layers, d_model, n_heads, s, mistake)
        for mode, per_sequence, cost in zip(("none", "full"), sizes, (1.0, 4.0 / 3.0), strict=True):
            b = math.floor(free / per_sequence)
            if b >= 1:
                seconds_per_token = step_overhead_s / (b * s) + cost * flops_per_token / peak_flops
                options.append((1.0 / seconds_per_token, mode, b))
        if not options:
            rows.append({"seq_len": s, "recompute": None, "batch": None, "tokens_per_s": None})
            continue
        top = max(o[0] for o in options)
        speed, mode, b = next(o for o in options if o[0] >= top * (1 - 1e-12))
        rows.append({"seq_len": s, "recompute": mode, "batch": b, "tokens_per_s": speed})
    return {"rows": rows}


def sample_best_recompute(draw: Draw, level: int) -> dict:
    i = sample_max_training_batch(draw, level)
    flops = 6 * i["n_params"]
    peak = peak_for_capacity(draw, level, i["hbm_bytes"])
    return {
        **i,
        "flops_per_token": flops,
        "peak_flops": peak,
        "step_overhead_s": Fraction(draw.integer(1, 2000), 1000),
    }


def _recompute_rules(task: Task) -> str | None:
    problem = _batch_edges(task)
    if problem:
        return problem
    i = task.inputs
    free = _free(i)
    for seq_len in i["seq_lens"]:
        speeds = []
        for per, cost in zip(_activations(i, seq_len), (Fraction(1), Fraction(4, 3)), strict=True):
            b = free // per
            if b >= 1:
                speeds.append(
                    b
                    * seq_len
                    / (i["step_overhead_s"] + b * seq_len * i["flops_per_token"] * cost / i["peak_flops"])
                )
        if len(speeds) == 2:
            problem = tie_edge(f"seq_len {seq_len}: the two recomputation choices", *speeds)
            if problem:
                return problem
    return None


_L5 = (
    _L4.rsplit("For each sequence length", 1)[0].rstrip()
    + """
A training step of batch B costs `step_overhead_s` seconds plus B * seq_len *
`flops_per_token` / `peak_flops` seconds without recomputation; full recomputation runs the
forward pass twice, which makes the compute 4/3 as long. For each sequence length in `seq_lens`,
choose recomputation ("none" or "full") and the batch (whole sequences that fit) with the highest
training throughput in tokens per second, and give them with that throughput; on a tie, "none".
None for all three where not even one sequence fits either way."""
)


LEVEL_5 = scaling_level(
    "memory",
    best_recompute,
    _L5,
    '{"rows": [{"seq_len": <int>, "recompute": "none" | "full" | None, "batch": <int> | None, '
    '"tokens_per_s": <number> | None}, ...]}  # one row per entry of `seq_lens`, in order',
    best_recompute_float,
    "drop_attention_scores",
    sample=sample_best_recompute,
    reject=_recompute_rules,
    varying=("rows[].recompute",),
)


BRANCHES = (Branch("none", some_none, Fraction(1, 4), (4,)),)


ACTIVATION_MEMORY = five_levels(
    "activation_memory",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the stored tensors described, the bytes per token derived; L3: plus the training "
    "state against one device's HBM (fits varies); L4: the largest batch that fits with and "
    "without full recomputation (None when not one sequence fits); L5: the recomputation "
    "choice and batch of the highest throughput, with a fixed step overhead",
    branches=BRANCHES,
)
