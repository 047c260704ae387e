"""The utilization_by_counting family of flops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import sample_utilization_by_counting
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level
from exactgrade.domains.scaling.hardware import HBM_CAPACITY, require
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def utilization_by_counting(
    n_params, layers, n_heads, head_dim, seq_len, tokens_per_step, step_time_s, chips, peak_flops
):
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
        rows.append(
            {
                "counting": counting,
                "flops_per_token": Fraction(flops),
                "utilization": flops * achieved_tokens_per_s / (chips * peak_flops),
            }
        )
    return {"rows": rows}


def utilization_by_counting_float(
    n_params,
    layers,
    n_heads,
    head_dim,
    seq_len,
    tokens_per_step,
    step_time_s,
    chips,
    peak_flops,
    mistake=None,
):
    known_mistake(mistake, "attention_forward_only")
    attention = 4.0 * seq_len * head_dim * n_heads * layers
    training_attention = attention if mistake == "attention_forward_only" else 3 * attention
    capacity = peak_flops * chips * step_time_s / tokens_per_step  # FLOPs per token at 100%
    rows = []
    for name, flops in (
        ("6N", 6.0 * n_params),
        ("6N+attention", 6.0 * n_params + training_attention),
        ("recompute_8N+attention", 8.0 * n_params + training_attention * 4 / 3),
    ):
        rows.append({"counting": name, "flops_per_token": flops, "utilization": flops / capacity})
    return {"rows": rows}


def _utilization_physical(task: Task) -> str | None:
    for row in task.expected["rows"]:
        if not 0 < row["utilization"] < 1:
            return f"{row['counting']}: utilization {float(row['utilization']):.4g} is outside (0, 1)"
    return None


_UTILIZATION_ROW = (
    '{"rows": [{"counting": "6N", "flops_per_token": <number>, "utilization": <number>}, '
    '{"counting": "6N+attention", ...}, {"counting": "recompute_8N+attention", ...}]}'
)


LEVEL_1 = scaling_level(
    "flops",
    utilization_by_counting,
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
    utilization_by_counting_float,
    "attention_forward_only",
    sample=sample_utilization_by_counting,
    reject=_utilization_physical,
)


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


LEVEL_2 = scaling_level(
    "flops",
    utilization_by_counting,
    _UTILIZATION_L2,
    _UTILIZATION_ROW,
    utilization_by_counting_float,
    "attention_forward_only",
    reject=_utilization_physical,
    sample=sample_utilization_by_counting,
)


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


def sample_contexts(draw: Draw, level: int) -> dict:
    """Level 1's measured step, and other context lengths to predict (shorter and longer)."""
    inputs = dict(sample_utilization_by_counting(draw, level))
    lengths = {max(128, inputs["seq_len"] * draw.integer(5, 400) // 100) for _ in range(1 + level)}
    inputs["new_seq_lens"] = sorted(lengths - {inputs["seq_len"]})
    if not inputs["new_seq_lens"]:
        raise Reject("no other context length drawn")
    return inputs


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


LEVEL_3 = scaling_level(
    "flops",
    utilization_at_contexts,
    UTILIZATION_L3,
    '{"rows": [{"seq_len": <int>, "step_time_s": <number>, "mfu": <number>}, ...]}'
    "  # one row per entry of `new_seq_lens`, in order",
    utilization_at_contexts_float,
    "hardware_without_recompute",
    sample=sample_contexts,
)


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


LEVEL_4 = scaling_level(
    "flops",
    longest_context_for_mfu,
    UTILIZATION_L4,
    '{"rows": [{"target_mfu": <number>, "max_seq_len": <int> | None}, ...]}  # one row per target, in order',
    longest_context_for_mfu_float,
    "no_recompute",
    sample=sample_longest_context,
    reject=_longest_context_edges,
)


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


def recompute_activation_bytes(n_heads: int, head_dim: int, seq_len: int) -> dict[str, int]:
    """Bytes per token per layer each policy keeps, 16-bit activations (Korthikanti et al. 2022, as
    activation_memory states it): 34*d_model without the attention scores' 5*n_heads*seq_len
    (softmax output, dropout mask and output), which selective recomputation drops; full keeps
    only the layer's bf16 input."""
    d_model = n_heads * head_dim
    return {"none": 34 * d_model + 5 * n_heads * seq_len, "selective": 34 * d_model, "full": 2 * d_model}


def sample_recompute(draw: Draw, level: int) -> dict:
    """Activation footprints of the Korthikanti formula, and an HBM capacity that lets full
    recomputation run a microbatch several times larger than no recomputation, so the efficiency
    curve trades against the recomputed FLOPs."""
    params = draw.integer(10**9, 10**11)
    layers, n_heads = draw.integer(16, 96), draw.integer(16, 96)
    head_dim = draw.choice((64, 80, 96, 128))
    seq_len = 512 * draw.integer(1, 8)
    activation_bytes = recompute_activation_bytes(n_heads, head_dim, seq_len)
    none, selective, full = (activation_bytes[policy] for policy in _POLICIES)
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
        "activation_bytes_per_token_layer": activation_bytes,
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


UTILIZATION_L5 = """\
Choose how to train a dense model with `n_params` parameters and `layers` layers of `n_heads`
attention heads of size `head_dim`, at context length `seq_len`, on `chips` chips. A forward pass
costs 2 FLOPs per parameter per token plus attention: in every layer each head of a token dots its
query with the keys of all seq_len positions and sums their value vectors weighted by the scores (2
FLOPs per multiply-add, full context); the backward pass costs twice the forward. Three activation
policies: "none" keeps every activation; "selective" keeps all but attention's per-score activations
(softmax output, dropout mask and output), which the backward pass rebuilds by recomputing the score
and weighted-sum products once (their forward FLOPs run again); "full" keeps only each layer's input
and runs the whole forward pass a second time during the backward pass.
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


LEVEL_5 = scaling_level(
    "flops",
    recompute_plan,
    UTILIZATION_L5,
    '{"rows": [{"policy": "none" | "selective" | "full", "microbatch": <int>, "mfu": <number>}]}',
    recompute_plan_float,
    "mfu_counts_6n_only",
    sample=sample_recompute,
    reject=_recompute_rules,
)


def _some_context_none(task: Task) -> bool:
    return any(row["max_seq_len"] is None for row in task.expected["rows"])


def _policy_is(name: str):
    return lambda task: task.expected["rows"][0]["policy"] == name


UTILIZATION_BRANCHES = (
    Branch("none", _some_context_none, Fraction(1, 4), (4,)),
    Branch("no recomputation wins", _policy_is("none"), Fraction(1, 10), (5,)),
    Branch("full recomputation wins", _policy_is("full"), Fraction(1, 10), (5,)),
)


UTILIZATION_BY_COUNTING = five_levels(
    "utilization_by_counting",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: attention and recomputation described, their FLOPs derived; L3: from one measured "
    "step under selective recomputation, the step time and MFU at other contexts; L4: the "
    "longest context keeping a reported 6N MFU under full recomputation (None); L5: the "
    "recomputation policy and microbatch of the highest MFU under an HBM capacity and a "
    "microbatch efficiency curve",
    branches=UTILIZATION_BRANCHES,
)
