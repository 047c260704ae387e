"""The decode_step family of inference: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import (
    attention_shape,
    kv_bytes_per_token,
    model_on_chip,
    resident_bytes,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    scaling_level,
    smallest_satisfying,
    tie_edge,
)
from exactgrade.domains.scaling.hardware import FULL_READ_MS, HBM_CAPACITY, PEAK_FLOPS, ridge_ok
from exactgrade.family import Draw, Level, Reject, five_levels
from exactgrade.task import Task


def decode_step(chips, n_params, bytes_per_param, batch):
    """One decode step per chip: 2*N*batch FLOPs against reading every weight once."""
    from fractions import Fraction

    rows = []
    for chip in chips:
        compute_s = Fraction(2 * n_params * batch, chip["peak_flops"])
        memory_s = Fraction(n_params * bytes_per_param) / chip["hbm_bandwidth"]
        step_s = max(compute_s, memory_s)
        rows.append(
            {
                "chip": chip["name"],
                "time_s": step_s,
                "tokens_per_s": batch / step_s,
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def decode_step_float(chips, n_params, bytes_per_param, batch, mistake=None):
    known_mistake(mistake, "compute_only")
    rows = []
    for c in chips:
        weights_per_s = c["hbm_bandwidth"] / (bytes_per_param * float(n_params))  # weight sweeps per second
        flops_limited = c["peak_flops"] / (2.0 * n_params)  # token passes per second
        memory = weights_per_s < flops_limited / batch and mistake != "compute_only"
        steps_per_s = weights_per_s if memory else flops_limited / batch
        rows.append(
            {
                "chip": c["name"],
                "time_s": 1 / steps_per_s,
                "tokens_per_s": steps_per_s * batch,
                "bound": "memory" if memory else "compute",
            }
        )
    return {"rows": rows}


def _model_on_chips(draw: Draw, level: int, width: int, chips: list[dict]) -> int:
    """A model size whose weights fit every chip, each of which runs the whole model (model_on_chip
    at the slowest chip's bandwidth)."""
    return model_on_chip(draw, level, width, min(c["hbm_bandwidth"] for c in chips))


def sample_decode_step(draw: Draw, level: int) -> dict:
    """The batch lies between the chips' compute-bound thresholds (batch >= bytes_per_param *
    peak / (2 * bandwidth)), so the bound differs between chips in every instance."""
    chips, width = sample.chips(draw, level, rows(level, 3)), value_bytes(draw, level)
    thresholds = sorted(Fraction(width * c["peak_flops"], 2 * c["hbm_bandwidth"]) for c in chips)
    low, high = math.floor(thresholds[0]) + 1, math.ceil(thresholds[-1]) - 1
    if low > high:
        raise Reject("no batch between the chips' thresholds")
    return {
        "chips": chips,
        "n_params": _model_on_chips(draw, level, width, chips),
        "bytes_per_param": width,
        "batch": draw.integer(low, high),
    }


def _decode_step_not_tied(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        problem = tie_edge(
            f"{chip['name']}: compute time against memory time",
            Fraction(2 * i["n_params"] * i["batch"], chip["peak_flops"]),
            Fraction(i["n_params"] * i["bytes_per_param"], chip["hbm_bandwidth"]),
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "inference",
    decode_step,
    """\
A dense model of `n_params` parameters stored at `bytes_per_param` bytes each generates tokens
for `batch` sequence(s). Each decode step costs 2*n_params FLOPs per sequence and reads every
weight from HBM once (ignore the KV cache and activations). For each chip in `chips` (peak FLOP/s
and HBM bytes/s), give the decode step time in seconds, the throughput in tokens per second and
the bound.""",
    '{"rows": [{"chip": <str>, "time_s": <number>, "tokens_per_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per chip, in order',
    decode_step_float,
    "compute_only",
    sample=sample_decode_step,
    reject=_decode_step_not_tied,
    varying=("rows[].bound",),
)


def decode_step_l2_float(chips, n_params, bytes_per_param, batch, mistake=None):
    known_mistake(mistake, "compute_only")
    out = []
    for c in chips:
        compute = 2.0 * batch * n_params / c["peak_flops"]
        memory = float(n_params) * bytes_per_param / c["hbm_bandwidth"]
        time = compute if mistake == "compute_only" or compute >= memory else memory
        out.append(
            {
                "chip": c["name"],
                "time_s": time,
                "tokens_per_s": batch / time,
                "bound": "compute" if compute >= memory else "memory",
            }
        )
    return {"rows": out}


_L2 = """\
A dense model of `n_params` parameters stored at `bytes_per_param` bytes each generates tokens
for `batch` sequence(s). A decode step runs the model on one new token of every sequence (2 FLOPs
per parameter per token) and reads every weight from HBM once (ignore the KV cache and
activations); the chip's compute and its HBM reads overlap. For each chip in `chips` (peak FLOP/s
and HBM bytes/s), give the decode step time in seconds, the throughput in tokens per second and
whether the step is "compute"- or "memory"-bound (compute-bound when its compute time is at least
its read time)."""


_CHIP_ROWS = "  # one row per chip, in order"


def l2_level(reference, sample_, reject) -> Level:
    """L1's question with the step described, not its formula (L1's reference and sampler)."""
    return scaling_level(
        "inference",
        reference,
        _L2,
        '{"rows": [{"chip": <str>, "time_s": <number>, "tokens_per_s": <number>, '
        '"bound": "compute" | "memory"}, ...]}' + _CHIP_ROWS,
        decode_step_l2_float,
        "compute_only",
        sample=sample_,
        reject=reject,
        varying=("rows[].bound",),
    )


LEVEL_2 = l2_level(decode_step, sample_decode_step, _decode_step_not_tied)


def attention_decode_step(
    chips, n_params, bytes_per_param, batch, seq_len, layers, n_heads, n_kv_heads, head_dim, kv_bytes
):
    """Per chip: the roofline of 2N + attention's 4 * layers * n_heads * head_dim * seq_len FLOPs
    per sequence against the weights plus every sequence's cache."""
    from fractions import Fraction

    flops = batch * (2 * n_params + 4 * layers * n_heads * head_dim * seq_len)
    reads = n_params * bytes_per_param + batch * seq_len * 2 * layers * n_kv_heads * head_dim * kv_bytes
    rows = []
    for chip in chips:
        compute, memory = Fraction(flops, chip["peak_flops"]), Fraction(reads, chip["hbm_bandwidth"])
        step = max(compute, memory)
        rows.append(
            {
                "chip": chip["name"],
                "time_s": step,
                "tokens_per_s": batch / step,
                "bound": "compute" if compute >= memory else "memory",
            }
        )
    return {"rows": rows}


def attention_decode_step_float(
    chips,
    n_params,
    bytes_per_param,
    batch,
    seq_len,
    layers,
    n_heads,
    n_kv_heads,
    head_dim,
    kv_bytes,
    mistake=None,
):
    known_mistake(mistake, "ignore_attention_flops")
    attention = 0.0 if mistake == "ignore_attention_flops" else 4.0 * seq_len * head_dim * n_heads * layers
    out = []
    for c in chips:
        compute = (2.0 * n_params + attention) * batch / c["peak_flops"]
        cache = 2.0 * kv_bytes * head_dim * n_kv_heads * layers * seq_len * batch
        memory = (cache + bytes_per_param * float(n_params)) / c["hbm_bandwidth"]
        step = max(memory, compute)
        out.append(
            {
                "chip": c["name"],
                "time_s": step,
                "tokens_per_s": batch / step,
                "bound": "memory" if memory > compute else "compute",
            }
        )
    return {"rows": out}


def _chip_pool(draw: Draw, level: int, count: int) -> list[dict]:
    return sample.chips(draw, level, count)


def sample_attention(draw: Draw, level: int) -> dict:
    """The batch lies between two chips' compute-bound thresholds at the drawn context; the
    weights and that batch's caches fit every chip (each runs the whole model)."""
    shape, chips, width = (
        attention_shape(draw, level),
        _chip_pool(draw, level, rows(level, 2)),
        value_bytes(draw, level),
    )
    inputs = {
        "chips": chips,
        "n_params": _model_on_chips(draw, level, width, chips),
        "bytes_per_param": width,
        "batch": 1,
        "seq_len": draw.integer(64, 8192),
        "layers": draw.integer(8, 96),
        "n_heads": shape["n_heads"],
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
    }
    per_seq_flops = (
        2 * inputs["n_params"]
        + 4 * inputs["layers"] * inputs["n_heads"] * inputs["head_dim"] * inputs["seq_len"]
    )
    per_seq_bytes = (
        inputs["seq_len"]
        * 2
        * inputs["layers"]
        * inputs["n_kv_heads"]
        * inputs["head_dim"]
        * inputs["kv_bytes"]
    )
    weights = inputs["n_params"] * inputs["bytes_per_param"]
    thresholds = []
    for c in inputs["chips"]:
        slope = Fraction(per_seq_flops, c["peak_flops"]) - Fraction(per_seq_bytes, c["hbm_bandwidth"])
        if slope > 0:
            thresholds.append(Fraction(weights, c["hbm_bandwidth"]) / slope)
    if len(thresholds) < 2:
        raise Reject("too few chips can turn compute-bound at this context")
    thresholds.sort()
    room = resident_bytes(min(c["hbm_bandwidth"] for c in chips)) - weights
    low, high = math.floor(thresholds[0]) + 1, min(math.ceil(thresholds[-1]) - 1, room // per_seq_bytes)
    if low > high:
        raise Reject("no batch between the chips' thresholds caches beside the weights")
    inputs["batch"] = draw.integer(low, high)
    return inputs


def _attention_edges(task: Task) -> str | None:
    i = task.inputs
    if len({row["bound"] for row in task.expected["rows"]}) < 2:
        return "every chip has the same bound"
    flops = i["batch"] * (2 * i["n_params"] + 4 * i["layers"] * i["n_heads"] * i["head_dim"] * i["seq_len"])
    reads = (
        i["n_params"] * i["bytes_per_param"]
        + i["batch"] * i["seq_len"] * kv_bytes_per_token(i)
    )
    for c in i["chips"]:
        problem = tie_edge(
            f"{c['name']}: compute against memory",
            Fraction(flops, c["peak_flops"]),
            Fraction(reads, c["hbm_bandwidth"]),
        )
        if problem:
            return problem
    return None


_L3 = """\
A dense model of `n_params` parameters stored at `bytes_per_param` bytes each decodes `batch`
sequences that each have `seq_len` cached positions. A decode step runs the model on one new token
of every sequence: 2 FLOPs per parameter per token for the weight matmuls, plus attention, which
in each of `layers` layers and each of `n_heads` query heads scores the new token's query against
the `seq_len` cached keys and sums the `seq_len` cached values weighted by those scores (vectors of
`head_dim` values; a multiply-add is 2 FLOPs; count nothing else of attention). It reads
every weight once and every sequence's cache: a key and a value of `head_dim` values per
position, layer and each of `n_kv_heads` KV heads, `kv_bytes` bytes per value; compute and reads
overlap. For each chip in `chips` (peak FLOP/s and HBM bytes/s), give the step time in seconds,
the throughput in tokens per second and the bound ("compute" when the compute time is at least
the read time)."""


LEVEL_3 = scaling_level(
    "inference",
    attention_decode_step,
    _L3,
    '{"rows": [{"chip": <str>, "time_s": <number>, "tokens_per_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}' + _CHIP_ROWS,
    attention_decode_step_float,
    "ignore_attention_flops",
    sample=sample_attention,
    reject=_attention_edges,
)


def min_compute_bound_decode_batch(chips, n_params, bytes_per_param):
    """Smallest batch whose decode step (2N FLOPs per sequence, weights read once) is compute-bound."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        batch = max(1, math.ceil(Fraction(bytes_per_param * chip["peak_flops"], 2 * chip["hbm_bandwidth"])))
        rows.append(
            {
                "chip": chip["name"],
                "min_batch": batch,
                "step_time_s": Fraction(2 * n_params * batch, chip["peak_flops"]),
            }
        )
    return {"rows": rows}


def min_compute_bound_decode_batch_float(chips, n_params, bytes_per_param, mistake=None):
    known_mistake(mistake, "one_flop_per_param")
    per_token = 1.0 if mistake == "one_flop_per_param" else 2.0
    rows = []
    for c in chips:
        b = smallest_satisfying(
            lambda b, c=c: (
                per_token * n_params * b / c["peak_flops"] >= bytes_per_param * n_params / c["hbm_bandwidth"]
            ),
            10**9,
        )
        rows.append({"chip": c["name"], "min_batch": b, "step_time_s": b / c["peak_flops"] * 2.0 * n_params})
    return {"rows": rows}


def sample_decode_batch(draw: Draw, level: int) -> dict:
    chips, width = sample.chips(draw, level, 2 + level), draw.choice((1, 2, 4))
    return {"chips": chips, "n_params": _model_on_chips(draw, level, width, chips), "bytes_per_param": width}


def _decode_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for c in i["chips"]:
        if near_integer(Fraction(i["bytes_per_param"] * c["peak_flops"], 2 * c["hbm_bandwidth"])):
            return f"{c['name']}: the batch bound sits on an integer"
    return None


_DECODE = """\
A dense model of `n_params` parameters stored at `bytes_per_param` bytes each generates tokens for
a batch of B sequences. Each decode step runs the model on one new token per sequence (2 FLOPs per
parameter per token) and reads every weight from HBM once (ignore the KV cache and activations).
For each chip in `chips` (peak FLOP/s and HBM bytes/s), give the smallest batch at which the step
is compute-bound, and the step time in seconds at that batch."""


LEVEL_4 = scaling_level(
    "inference",
    min_compute_bound_decode_batch,
    _DECODE,
    '{"rows": [{"chip": <str>, "min_batch": <int>, "step_time_s": <number>}, ...]}  # one row per chip',
    min_compute_bound_decode_batch_float,
    "one_flop_per_param",
    sample=sample_decode_batch,
    reject=_decode_batch_edges,
)


def speculative_draft_length(chips, n_params, draft_params, bytes_per_param, batch, acceptance, max_draft):
    """Per chip: the k (1..max_draft) of the most expected tokens per second: a cycle is k draft
    steps and one verification pass over k + 1 tokens per sequence, and yields
    1 + a + ... + a**k tokens per sequence on average; ties: the smaller k."""
    from fractions import Fraction

    rows = []
    for chip in chips:

        def roofline(params, tokens, chip=chip):
            return max(
                Fraction(2 * params * tokens, chip["peak_flops"]),
                Fraction(params * bytes_per_param, chip["hbm_bandwidth"]),
            )

        best = None
        for k in range(1, max_draft + 1):
            expected = sum(acceptance**j for j in range(k + 1))
            cycle = k * roofline(draft_params, batch) + roofline(n_params, batch * (k + 1))
            rate = batch * expected / cycle
            if best is None or rate > best[1]:
                best = (k, rate)
        rows.append({"chip": chip["name"], "draft_tokens": best[0], "tokens_per_s": best[1]})
    return {"rows": rows}


def speculative_draft_length_float(
    chips, n_params, draft_params, bytes_per_param, batch, acceptance, max_draft, mistake=None
):
    """The expected tokens as a closed geometric sum, the cycle in floats."""
    known_mistake(mistake, "no_bonus_token")
    a = float(acceptance)
    out = []
    for c in chips:
        found = []
        for k in range(1, max_draft + 1):
            expected = (1 - a ** (k + 1)) / (1 - a)
            if mistake == "no_bonus_token":
                expected -= 1
            draft = max(
                2.0 * draft_params * batch / c["peak_flops"],
                draft_params * bytes_per_param / c["hbm_bandwidth"],
            )
            verify = max(
                2.0 * n_params * batch * (k + 1) / c["peak_flops"],
                n_params * bytes_per_param / c["hbm_bandwidth"],
            )
            found.append((k, expected * batch / (verify + draft * k)))
        top = max(v for _, v in found)
        k, v = next((k, v) for k, v in found if v >= top * (1 - 1e-12))
        out.append({"chip": c["name"], "draft_tokens": k, "tokens_per_s": v})
    return {"rows": out}


def sample_speculative(draw: Draw, level: int) -> dict:
    """Chips whose verification pass turns compute-bound after about 1 to 12 drafted tokens
    (their ridge over the batch), so the best draft length differs between chips."""
    width = value_bytes(draw, level)
    batch = draw.integer(8, 48)  # with 2..13 tokens each, a ridge of a real order (hardware.RIDGE)
    chips = []
    for name in sample.letters("chip", rows(level, 2)):
        for _ in range(100):  # redraw a chip whose peak or ridge no real part has
            bandwidth = sample.hbm_bandwidth(draw, 3)
            tokens = batch * draw.integer(2, 13)  # the verify pass's compute-bound token count
            ideal = Fraction(2 * bandwidth * tokens, width)  # peak = 2 bw tokens / width at the ridge
            peak = 10**9 * max(1, round(ideal / 10**9) + draw.integer(-50, 50))
            if peak in PEAK_FLOPS and ridge_ok(peak, bandwidth):
                break
        else:
            raise Reject("no real chip turns compute-bound within 13 tokens per sequence")
        chips.append({"name": name, "peak_flops": peak, "hbm_bandwidth": bandwidth})
    # both models fit with a tenth to spare (the draft at most 1/8 of the target) in the HBM a real
    # part of the slowest chip's bandwidth holds: one that reads it whole in hardware.FULL_READ_MS
    capacity = min(HBM_CAPACITY.high, min(c["hbm_bandwidth"] for c in chips) * FULL_READ_MS.high // 1000)
    room = Fraction(capacity * 9, 10 * width) * Fraction(8, 9)
    target = sample.n_params_between(draw, max(level, 3), 0, room)
    return {
        "chips": chips,
        "n_params": target,
        "draft_params": target // draw.integer(8, 100),
        "bytes_per_param": width,
        "batch": batch,
        "acceptance": Fraction(draw.integer(50, 95), 100)
        if level < 5
        else Fraction(draw.integer(500, 950), 1000),
        "max_draft": draw.integer(8, 16),
    }


def _rates(i: dict, chip: dict) -> list[Fraction]:
    """The exact expected throughput of every draft length on one chip (the rule's arithmetic)."""

    def roofline(params: int, tokens: int) -> Fraction:
        return max(
            Fraction(2 * params * tokens, chip["peak_flops"]),
            Fraction(params * i["bytes_per_param"], chip["hbm_bandwidth"]),
        )

    a, b = i["acceptance"], i["batch"]
    return [
        b
        * (1 - a ** (k + 1))
        / (1 - a)
        / (k * roofline(i["draft_params"], b) + roofline(i["n_params"], b * (k + 1)))
        for k in range(1, i["max_draft"] + 1)
    ]


def _speculative_rules(task: Task) -> str | None:
    i = task.inputs
    if len({row["draft_tokens"] for row in task.expected["rows"]}) < 2:
        return "the same draft length on every chip"
    for c in i["chips"]:
        values = sorted(_rates(i, c), reverse=True)
        if values[0] == values[1] or near_tie(values[0], values[1]):
            return f"{c['name']}: the two best draft lengths are within 1e-9"
    return None


_L5 = """\
Speculative decoding of `batch` sequences with a target model of `n_params` parameters and a draft
model of `draft_params` parameters, both stored at `bytes_per_param` bytes per parameter, on one
chip whose HBM holds both. A cycle: the draft model proposes k tokens per sequence, one decode step
at a time (each step runs it on one token per sequence); then the target model runs one verification
pass over k + 1 tokens per sequence. Every forward pass costs 2 FLOPs per parameter per token it
processes and reads all of its model's weights once (ignore the KV cache); its time is max(FLOPs /
peak_flops, bytes / hbm_bandwidth). The target checks a sequence's proposals in order and accepts
each with probability `acceptance`, independently, until the first rejection; it then emits the
accepted tokens plus one token of its own (the correction at the rejected position, or a further
token when all k were accepted). For each chip in `chips`, give the k from 1 to `max_draft` with the
highest expected number of generated tokens per second over all `batch` sequences together (on a
tie, the smaller k) and that expected throughput."""


LEVEL_5 = scaling_level(
    "inference",
    speculative_draft_length,
    _L5,
    '{"rows": [{"chip": <str>, "draft_tokens": <int>, "tokens_per_s": <number>}, ...]}' + _CHIP_ROWS,
    speculative_draft_length_float,
    "no_bonus_token",
    sample=sample_speculative,
    reject=_speculative_rules,
    varying=("rows[].draft_tokens",),
)


DECODE_STEP = five_levels(
    "decode_step",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the step described, its FLOPs and reads derived; L3: the KV cache read and "
    "attention's FLOPs derived from the shape, the bound differing between chips; L4: the "
    "smallest compute-bound batch per chip and its step time; L5: speculative decoding, "
    "the draft length of the most expected tokens per second per chip (the expected tokens "
    "of a cycle derived from the acceptance rule; the verification pass turns compute-bound "
    "at a different length on each chip)",
)
