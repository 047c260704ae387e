"""Level 4 (inverse) of families whose level 1 asks a quantity of a given size: the smallest
size that meets a requirement, or None. zero_memory: the fewest devices per ZeRO stage;
data_parallel_step: the smallest per-device batch whose compute hides the all-reduce;
time_to_train: the fewest chips per cluster for a deadline; kv_cache_size: the largest batch per
attention variant under a cache budget. References solve in closed form; the ``*_float`` twins
search, and can reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    bandwidth_for_capacity,
    chip_inputs,
    fraction,
    hbm_capacity,
    n_params,
    n_tokens,
    peak_and_bandwidth,
    peak_flops,
)
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer, near_tie
from exactgrade.domains.scaling._text import SAME_SPEED_ANY_FORMAT
from exactgrade.family import Branch, Draw
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def zero_min_devices(n_params, hbm_bytes_per_device, param_bytes, grad_bytes, optimizer_bytes, max_devices):
    """Fewest devices (1..max_devices) at which each ZeRO stage's bytes per device fit."""
    import math
    from fractions import Fraction

    rows = []
    for stage, kept, sharded in (
        ("replicated", param_bytes + grad_bytes + optimizer_bytes, 0),
        ("zero1_optimizer", param_bytes + grad_bytes, optimizer_bytes),
        ("zero2_gradients", param_bytes, grad_bytes + optimizer_bytes),
        ("zero3_parameters", 0, param_bytes + grad_bytes + optimizer_bytes),
    ):
        room = hbm_bytes_per_device - n_params * kept  # what the sharded part may take per device
        if sharded == 0:
            devices = 1 if room >= 0 else None
        elif room <= 0:
            devices = None
        else:
            devices = max(1, math.ceil(Fraction(n_params * sharded, room)))
        rows.append(
            {
                "stage": stage,
                "min_devices": devices if devices is not None and devices <= max_devices else None,
            }
        )
    return {"rows": rows}


def min_hiding_batch(n_params, grad_bytes, device_counts, link_bandwidth, peak_flops, mfu):
    """Smallest tokens per device whose backward pass lasts at least the gradient all-reduce (the
    all-reduce overlaps only the backward pass)."""
    import math
    from fractions import Fraction

    rows = []
    for devices in device_counts:
        allreduce_s = 2 * n_params * grad_bytes * Fraction(devices - 1, devices) / link_bandwidth
        tokens = math.ceil(allreduce_s * peak_flops * mfu / (4 * n_params))
        rows.append({"devices": devices, "allreduce_s": allreduce_s, "min_tokens_per_device": max(1, tokens)})
    return {"rows": rows}


def chips_for_deadline(n_params, n_tokens, deadline_days, clusters):
    """Fewest chips of each kind that train 6ND FLOPs within the deadline (None above the cap)."""
    import math
    from fractions import Fraction

    rows = []
    for cluster in clusters:
        chips = math.ceil(
            Fraction(6 * n_params * n_tokens)
            / (cluster["peak_flops"] * cluster["mfu"] * 86400 * deadline_days)
        )
        rows.append(
            {"cluster": cluster["name"], "min_chips": chips if chips <= cluster["max_chips"] else None}
        )
    return {"rows": rows}


def max_batch_for_cache_budget(configs, seq_len, bytes_per_value, cache_budget_bytes):
    """Largest batch of seq_len-token sequences whose KV cache fits the budget (None: not one)."""
    rows = []
    for config in configs:
        per_sequence = (
            2 * config["layers"] * config["n_kv_heads"] * config["head_dim"] * bytes_per_value * seq_len
        )
        batch = cache_budget_bytes // per_sequence
        rows.append({"config": config["name"], "max_batch": batch if batch >= 1 else None})
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def _smallest(ok, high):
    """The smallest n in [1, high] with ok(n) (monotone), or None."""
    if not ok(high):
        return None
    low = 0
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if ok(middle) else (middle, high)
    return high


def zero_min_devices_float(
    n_params, hbm_bytes_per_device, param_bytes, grad_bytes, optimizer_bytes, max_devices, mistake=None
):
    known_mistake(mistake, "optimizer_without_master")
    o = optimizer_bytes - 4 if mistake == "optimizer_without_master" else optimizer_bytes
    p, g, n = param_bytes, grad_bytes, float(n_params)
    sizes = (
        ("replicated", lambda d: (p + g + o) * n),
        ("zero1_optimizer", lambda d: (p + g + o / d) * n),
        ("zero2_gradients", lambda d: (p + (g + o) / d) * n),
        ("zero3_parameters", lambda d: (p + g + o) * n / d),
    )
    return {
        "rows": [
            {
                "stage": stage,
                "min_devices": _smallest(lambda d, f=f: f(d) <= hbm_bytes_per_device, max_devices),
            }
            for stage, f in sizes
        ]
    }


def min_hiding_batch_float(
    n_params, grad_bytes, device_counts, link_bandwidth, peak_flops, mfu, mistake=None
):
    known_mistake(mistake, "allreduce_once")
    rows = []
    for d in device_counts:
        allreduce = (
            (1 if mistake == "allreduce_once" else 2) * (1 - 1 / d) * grad_bytes * n_params / link_bandwidth
        )
        t = _smallest(lambda t, a=allreduce: 4.0 * n_params * t / (mfu * peak_flops) >= a, 10**12)
        rows.append({"devices": d, "allreduce_s": allreduce, "min_tokens_per_device": t})
    return {"rows": rows}


def chips_for_deadline_float(n_params, n_tokens, deadline_days, clusters, mistake=None):
    known_mistake(mistake, "forward_only")
    per_token = 2.0 if mistake == "forward_only" else 6.0
    seconds = deadline_days * 24 * 3600
    rows = []
    for c in clusters:
        chips = _smallest(
            lambda k, c=c: k * c["peak_flops"] * c["mfu"] * seconds >= per_token * n_params * n_tokens,
            c["max_chips"],
        )
        rows.append({"cluster": c["name"], "min_chips": chips})
    return {"rows": rows}


def max_batch_for_cache_budget_float(configs, seq_len, bytes_per_value, cache_budget_bytes, mistake=None):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for c in configs:
        b = math.floor(
            cache_budget_bytes
            / (seq_len * bytes_per_value * c["head_dim"] * c["n_kv_heads"] * c["layers"] * tensors)
        )
        rows.append({"config": c["name"], "max_batch": b if b >= 1 else None})
    return {"rows": rows}


# ---------------------------------------------------------------- samplers and rules


def sample_zero(draw: Draw, level: int) -> dict:
    """The model size is drawn against the HBM so that the first stage that fits varies: all
    four, from zero1, from zero2, or only zero3 (the earlier stages None)."""
    hbm, grad = hbm_capacity(draw, level), draw.choice((2, 4))
    kept = draw.choice((2 + grad + 12, 2 + grad, 2, 1))  # bytes per parameter that must stay whole
    params = max(10**8, hbm * draw.integer(50, 99) // (100 * kept))
    return {
        "n_params": params,
        "hbm_bytes_per_device": hbm,
        "param_bytes": 2,
        "grad_bytes": grad,
        "optimizer_bytes": 12,
        "max_devices": 2 ** draw.integer(6, 12),
    }


def _zero_edges(task: Task) -> str | None:
    i = task.inputs
    n, h, p, g, o = (
        i[k] for k in ("n_params", "hbm_bytes_per_device", "param_bytes", "grad_bytes", "optimizer_bytes")
    )
    for kept, sharded in ((p + g, o), (p, g + o), (0, p + g + o)):
        room = h - n * kept
        if room > 0 and near_integer(Fraction(n * sharded, room)):
            return "a device count bound sits on an integer"
    if all(row["min_devices"] is None for row in task.expected["rows"]):
        return "no stage fits at any device count"
    return None


def _some_none(task: Task) -> bool:
    return any(None in row.values() for row in task.expected["rows"])


def sample_hiding(draw: Draw, level: int) -> dict:
    counts = sorted(
        {2 ** draw.integer(1, 12) if level <= 2 else draw.integer(2, 4096) for _ in range(2 + level)}
    )
    return {
        "n_params": n_params(draw, level),
        "grad_bytes": draw.choice((2, 4)),
        "device_counts": counts,
        "link_bandwidth": 25 * 10**9 * draw.integer(1, 16),
        "peak_flops": peak_flops(draw, level),
        "mfu": fraction(draw, level, 20, 60),
    }


def _hiding_edges(task: Task) -> str | None:
    i = task.inputs
    for row in task.expected["rows"]:
        if near_integer(row["allreduce_s"] * i["peak_flops"] * i["mfu"] / (4 * i["n_params"])):
            return f"{row['devices']} devices: the batch bound sits on an integer"
    return None


def sample_deadline(draw: Draw, level: int) -> dict:
    """Chip caps around the need: about a third of the clusters cannot meet the deadline."""
    params, tokens = n_params(draw, level), n_tokens(draw, level)
    days = Fraction(draw.integer(7, 180))
    clusters = []
    for name in ("cluster_a", "cluster_b", "cluster_c", "cluster_d")[: 2 + level // 2]:
        peak, mfu = peak_flops(draw, level), fraction(draw, level, 20, 60)
        need = Fraction(6 * params * tokens) / (peak * mfu * 86400 * days)
        cap = max(1, math.floor(need * Fraction(draw.integer(50, 300), 100)))
        clusters.append({"name": name, "peak_flops": peak, "mfu": mfu, "max_chips": cap})
    return {"n_params": params, "n_tokens": tokens, "deadline_days": days, "clusters": clusters}


def _deadline_edges(task: Task) -> str | None:
    i = task.inputs
    for c in i["clusters"]:
        need = Fraction(6 * i["n_params"] * i["n_tokens"]) / (
            c["peak_flops"] * c["mfu"] * 86400 * i["deadline_days"]
        )
        if (
            near_integer(need)
            or near_integer(need / c["max_chips"])
            and need > c["max_chips"] * Fraction(99, 100)
        ):
            return f"{c['name']}: the chip count sits on an integer or on the cap"
    return None


def sample_cache_budget(draw: Draw, level: int) -> dict:
    head_dim = draw.choice((64, 80, 96, 128, 256))
    n_heads = draw.choice((8, 16, 32, 64))
    layers = draw.integer(8, 96)
    variants = sorted(
        {n_heads, 1, *draw.sample([d for d in range(2, n_heads) if n_heads % d == 0], 2)}, reverse=True
    )
    configs = [
        {
            "name": "mha" if h == n_heads else "mqa" if h == 1 else f"gqa_{h}",
            "layers": layers,
            "n_kv_heads": h,
            "head_dim": head_dim,
        }
        for h in variants
    ]
    seq_len = 1024 * draw.integer(1, 128) - draw.integer(0, 1023)
    width = draw.choice((1, 2, 4))
    largest = 2 * layers * n_heads * head_dim * width * seq_len
    budget = draw.integer(largest // 2, largest * 64) if draw.chance(3, 4) else draw.integer(1, largest - 1)
    return {"configs": configs, "seq_len": seq_len, "bytes_per_value": width, "cache_budget_bytes": budget}


def _cache_edges(task: Task) -> str | None:
    i = task.inputs
    for c in i["configs"]:
        per = 2 * c["layers"] * c["n_kv_heads"] * c["head_dim"] * i["bytes_per_value"] * i["seq_len"]
        if near_integer(Fraction(i["cache_budget_bytes"], per)):
            return f"{c['name']}: the batch that fits sits on an integer"
    return None


# ---------------------------------------------------------------- levels

ZERO_L4 = """\
Data-parallel training of a model of `n_params` parameters keeps bf16 weights (`param_bytes` per
parameter), gradients (`grad_bytes`) and Adam optimizer state (`optimizer_bytes`: fp32 master copy
and two fp32 moments). ZeRO shards parts of this evenly over the devices: "replicated" shards
nothing, "zero1_optimizer" shards the optimizer state, "zero2_gradients" the optimizer state and
gradients, "zero3_parameters" all three. For each stage, in that order, give the fewest devices,
from 1 to `max_devices`, at which the bytes per device fit in `hbm_bytes_per_device` (at most it;
ignore activations), or None if no such count does."""

HIDING_L4 = """\
Synchronous data parallelism (as PyTorch DDP): every device holds the whole model of `n_params`
parameters and computes on a batch of tokens per step, 2*N FLOPs per token forward and 4*N
backward, at `peak_flops` FLOP/s and utilization `mfu`. The gradients (`grad_bytes` bytes per
parameter) are summed by a ring all-reduce over links of `link_bandwidth` bytes/s per device, which
overlaps only the backward pass: gradients become ready during it, and the next step's forward
needs the updated weights. For each device count in `device_counts`, give the all-reduce time in
seconds and the smallest integer number of tokens per device whose backward pass lasts at least
the all-reduce (so the overlap hides it)."""

DEADLINE_L4 = """\
A dense model with `n_params` parameters is to be trained on `n_tokens` tokens (6*N*D training
FLOPs) within `deadline_days` days (1 day = 86400 s). For each cluster type in `clusters` (peak
FLOP/s per chip, the model FLOPs utilization `mfu` it sustains, and the most chips `max_chips`
available), give the fewest chips that finish in time, or None if even `max_chips` chips cannot."""

CACHE_L4 = """\
A decoder caches a key and a value vector of size `head_dim` for every layer, every KV head and
every position, `bytes_per_value` bytes per value. For each attention variant in `configs`, give
the largest number of sequences of `seq_len` tokens each whose KV cache fits in
`cache_budget_bytes` bytes, or None if not even one does."""

ZERO = Level(
    zero_min_devices,
    ZERO_L4,
    '{"rows": [{"stage": "replicated", "min_devices": <int> | None}, {"stage": "zero1_optimizer", ...}, '
    '{"stage": "zero2_gradients", ...}, {"stage": "zero3_parameters", ...}]}',
    zero_min_devices_float,
    "optimizer_without_master",
    sample=sample_zero,
    reject=_zero_edges,
)
HIDING = Level(
    min_hiding_batch,
    HIDING_L4,
    '{"rows": [{"devices": <int>, "allreduce_s": <number>, "min_tokens_per_device": <int>}, ...]}'
    "  # one row per entry of `device_counts`, in order",
    min_hiding_batch_float,
    "allreduce_once",
    sample=sample_hiding,
    reject=_hiding_edges,
)
DEADLINE = Level(
    chips_for_deadline,
    DEADLINE_L4,
    '{"rows": [{"cluster": <str>, "min_chips": <int> | None}, ...]}  # one row per cluster, in order',
    chips_for_deadline_float,
    "forward_only",
    sample=sample_deadline,
    reject=_deadline_edges,
)
CACHE = Level(
    max_batch_for_cache_budget,
    CACHE_L4,
    '{"rows": [{"config": <str>, "max_batch": <int> | None}, ...]}  # one row per config, in order',
    max_batch_for_cache_budget_float,
    "keys_only",
    sample=sample_cache_budget,
    reject=_cache_edges,
)
NONE_AT_L4 = (Branch("none", _some_none, Fraction(1, 8), (4, 5)),)  # L5 asks L4's question

__all__ = ["CACHE", "DEADLINE", "DECODE_CHIPS", "FSDP", "HIDING", "NONE_AT_L4", "PRICE", "QUANTIZED", "ZERO"]


# ---------------------------------------------------------------- a second batch of inverses


def fewest_decode_chips(
    n_params, weight_bytes, kv_cache_bytes, hbm_bytes_per_chip, hbm_bandwidth, max_chips, step_budgets_s
):
    """Fewest chips (1..max_chips) that hold weights plus cache and read them within each budget."""
    import math
    from fractions import Fraction

    total = n_params * weight_bytes + kv_cache_bytes
    need = max(math.ceil(Fraction(total, hbm_bytes_per_chip)), 1)
    rows = []
    for budget in step_budgets_s:
        chips = max(need, math.ceil(Fraction(total) / (hbm_bandwidth * budget)))
        rows.append({"step_budget_s": budget, "min_chips": chips if chips <= max_chips else None})
    return {"rows": rows}


def fsdp_largest_model(
    param_bytes, state_bytes_per_param, device_counts, hbm_bytes_per_device, link_bandwidth, comm_budget_s
):
    """Most parameters FSDP trains on N devices: the state fits and a step's collectives meet the budget."""
    import math
    from fractions import Fraction

    rows = []
    for devices in device_counts:
        by_memory = Fraction(hbm_bytes_per_device * devices, state_bytes_per_param)
        by_comm = comm_budget_s * link_bandwidth / (3 * param_bytes * Fraction(devices - 1, devices))
        rows.append(
            {
                "devices": devices,
                "max_params": math.floor(min(by_memory, by_comm)),
                "limit": "memory" if by_memory <= by_comm else "communication",
            }
        )
    return {"rows": rows}


def largest_memory_bound_batch(n_params, formats, peak_flops, hbm_bandwidth):
    """Per format, the largest batch whose decode step is still strictly memory-bound."""
    import math
    from fractions import Fraction

    rows = []
    for fmt in formats:
        # 2*N*B/peak < N*bits/8/bw  <=>  B < bits * peak / (16 * bw)
        bound = Fraction(fmt["bits_per_weight"]) * peak_flops / (16 * hbm_bandwidth)
        batch = math.ceil(bound) - 1
        rows.append({"format": fmt["name"], "max_batch": batch if batch >= 1 else None})
    return {"rows": rows}


def batch_for_price(n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, price_targets):
    """Smallest batch whose cost per million tokens is at most each target (None if none reaches it)."""
    import math
    from fractions import Fraction

    # cost(B) = price * max(2N/peak, N*w/(bw*B)) / 3600 * 1e6 falls with B to the compute-bound floor
    floor_cost = dollars_per_chip_hour * Fraction(2 * n_params, peak_flops) / 3600 * 10**6
    rows = []
    for target in price_targets:
        batch = None
        if target >= floor_cost:  # then only the weight-read term must come under the target
            reads = dollars_per_chip_hour * Fraction(n_params * weight_bytes, hbm_bandwidth) * 10**6
            batch = max(1, math.ceil(reads / (3600 * target)))
        rows.append({"target_dollars_per_million": target, "min_batch": batch})
    return {"rows": rows}


# ---------------------------------------------------------------- twins of the second batch


def fewest_decode_chips_float(
    n_params,
    weight_bytes,
    kv_cache_bytes,
    hbm_bytes_per_chip,
    hbm_bandwidth,
    max_chips,
    step_budgets_s,
    mistake=None,
):
    known_mistake(mistake, "weights_only")
    total = float(n_params) * weight_bytes + (0 if mistake == "weights_only" else kv_cache_bytes)
    return {
        "rows": [
            {
                "step_budget_s": t,
                "min_chips": _smallest(
                    lambda c, t=t: c * hbm_bytes_per_chip >= total and total / c / hbm_bandwidth <= t,
                    max_chips,
                ),
            }
            for t in step_budgets_s
        ]
    }


def fsdp_largest_model_float(
    param_bytes,
    state_bytes_per_param,
    device_counts,
    hbm_bytes_per_device,
    link_bandwidth,
    comm_budget_s,
    mistake=None,
):
    known_mistake(mistake, "drop_ring_factor")
    rows = []
    for n in device_counts:
        ring = 1.0 if mistake == "drop_ring_factor" else (n - 1) / n
        memory, comm = (
            hbm_bytes_per_device / state_bytes_per_param * n,
            comm_budget_s / (3 * ring * param_bytes) * link_bandwidth,
        )
        rows.append(
            {
                "devices": n,
                "max_params": math.floor(min(memory, comm)),
                "limit": "memory" if memory <= comm else "communication",
            }
        )
    return {"rows": rows}


def largest_memory_bound_batch_float(n_params, formats, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "bits_as_bytes")
    per_byte = 1 if mistake == "bits_as_bytes" else 8
    rows = []
    for f in formats:
        memory = f["bits_per_weight"] / per_byte * n_params / hbm_bandwidth
        b = _smallest(lambda b, m=memory: 2.0 * n_params * b / peak_flops >= m, 10**9)
        rows.append({"format": f["name"], "max_batch": (b - 1) if b and b > 1 else None})
    return {"rows": rows}


def batch_for_price_float(
    n_params, weight_bytes, peak_flops, hbm_bandwidth, dollars_per_chip_hour, price_targets, mistake=None
):
    known_mistake(mistake, "per_sequence_throughput")

    def cost(b):
        step = max(2.0 * n_params * b / peak_flops, weight_bytes * n_params / hbm_bandwidth)
        tokens = 1 if mistake == "per_sequence_throughput" else b
        return dollars_per_chip_hour / (tokens / step * 3600) * 1e6

    return {
        "rows": [
            {
                "target_dollars_per_million": t,
                "min_batch": _smallest(lambda b, t=t: cost(b) <= t * (1 + 1e-12), 10**7),
            }
            for t in price_targets
        ]
    }


# ---------------------------------------------------------------- samplers of the second batch


def sample_decode_chips(draw: Draw, level: int) -> dict:
    params, width = n_params(draw, level), draw.choice((1, 2))
    kv = draw.integer(10**9, 10**11)
    hbm = hbm_capacity(draw, level)
    bandwidth = bandwidth_for_capacity(draw, level, hbm)
    total = params * width + kv
    budgets = sorted(
        {
            Fraction(math.ceil(Fraction(total, bandwidth * draw.integer(1, 64)) * 10**6), 10**6)
            for _ in range(2 + level)
        }
    )
    return {
        "n_params": params,
        "weight_bytes": width,
        "kv_cache_bytes": kv,
        "hbm_bytes_per_chip": hbm,
        "hbm_bandwidth": bandwidth,
        "max_chips": draw.choice((8, 16, 32, 64)),
        "step_budgets_s": budgets,
    }


def _decode_chip_edges(task: Task) -> str | None:
    i = task.inputs
    total = i["n_params"] * i["weight_bytes"] + i["kv_cache_bytes"]
    if near_integer(Fraction(total, i["hbm_bytes_per_chip"])):
        return "the chips that hold the model sit on an integer"
    for t in i["step_budgets_s"]:
        if near_integer(Fraction(total) / (i["hbm_bandwidth"] * t)):
            return f"budget {t}: the chips that meet it sit on an integer"
    return None


def sample_fsdp_model(draw: Draw, level: int) -> dict:
    counts = sorted(
        {2 ** draw.integer(1, 10) if level <= 2 else draw.integer(2, 2048) for _ in range(2 + level)}
    )
    return {
        "param_bytes": draw.choice((2, 4)),
        "state_bytes_per_param": draw.choice((16, 18, 20)),
        "device_counts": counts,
        "hbm_bytes_per_device": hbm_capacity(draw, level),
        "link_bandwidth": 25 * 10**9 * draw.integer(1, 16),
        "comm_budget_s": Fraction(draw.integer(1, 200), 10),
    }


def _fsdp_edges(task: Task) -> str | None:
    i = task.inputs
    for n in i["device_counts"]:
        memory = Fraction(i["hbm_bytes_per_device"] * n, i["state_bytes_per_param"])
        comm = i["comm_budget_s"] * i["link_bandwidth"] / (3 * i["param_bytes"] * Fraction(n - 1, n))
        if near_integer(min(memory, comm)) or near_tie(memory, comm):
            return f"{n} devices: the bound sits on an integer or the two limits tie"
    return None


def sample_quantized_batch(draw: Draw, level: int) -> dict:
    formats = [
        ("bf16", 16),
        ("fp8", 8),
        ("int4", 4),
        ("int4_g32_scales", Fraction(9, 2)),
        ("int3", 3),
        ("int2", 2),
        ("int8_g64_scales", Fraction(33, 4)),
    ]
    picked = [("bf16", 16), *draw.sample(formats[1:], 1 + level)]
    return {
        "n_params": n_params(draw, level),
        "formats": [{"name": name, "bits_per_weight": bits} for name, bits in picked],
        **chip_inputs(draw, level),
    }


def _quantized_edges(task: Task) -> str | None:
    i = task.inputs
    for f in i["formats"]:
        if near_integer(Fraction(f["bits_per_weight"]) * i["peak_flops"] / (16 * i["hbm_bandwidth"])):
            return f"{f['name']}: the memory-bound batches end on an integer"
    return None


def sample_price(draw: Draw, level: int) -> dict:
    """Targets from below the compute-bound floor (None) to the batch-1 cost."""
    params, width = n_params(draw, level), draw.choice((1, 2))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    price = Fraction(draw.integer(50, 1000), 100)
    floor_cost = price * Fraction(2 * params, peak) / 3600 * 10**6
    batch_one = price * Fraction(params * width, bandwidth) / 3600 * 10**6
    targets = set()
    for _ in range(2 + level):
        if draw.chance(1, 4):  # below the compute-bound floor: no batch reaches it
            target = floor_cost * Fraction(draw.integer(50, 99), 100)
        else:
            target = floor_cost + (batch_one - floor_cost) * Fraction(draw.integer(1, 100), 100)
        targets.add(Fraction(math.ceil(target * 10**6), 10**6))
    targets = sorted(targets)
    return {
        "n_params": params,
        "weight_bytes": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
        "dollars_per_chip_hour": price,
        "price_targets": targets,
    }


def _price_edges(task: Task) -> str | None:
    i = task.inputs
    for t in i["price_targets"]:
        bound = (
            i["dollars_per_chip_hour"]
            * Fraction(i["n_params"] * i["weight_bytes"], i["hbm_bandwidth"])
            * 10**6
            / (3600 * t)
        )
        if near_integer(bound) or near_tie(
            t, i["dollars_per_chip_hour"] * Fraction(2 * i["n_params"], i["peak_flops"]) / 3600 * 10**6
        ):
            return f"target {t}: the batch bound sits on an integer or the target on the floor"
    return None


DECODE_CHIPS_L4 = """\
A model of `n_params` parameters (`weight_bytes` bytes each) with a KV cache of `kv_cache_bytes`
bytes is split evenly over some number of chips, each with `hbm_bytes_per_chip` bytes of HBM and
`hbm_bandwidth` bytes/s. A decode step is memory-bound: each chip reads its share of the weights
and KV cache once, all chips in parallel (ignore communication). For each step-time budget in
`step_budgets_s`, give the fewest chips, from 1 to `max_chips`, that hold weights plus KV cache
and finish a step within the budget, or None if no such count does."""

FSDP_L4 = """\
Fully sharded data parallelism (FSDP / ZeRO-3) shards a model's training state,
`state_bytes_per_param` bytes per parameter, evenly over the devices, each with
`hbm_bytes_per_device` bytes of HBM (ignore activations). Each training step all-gathers the full
weights (`param_bytes` bytes per parameter) once for the forward pass and once more for the
backward pass, and reduce-scatters the gradients (same size as the weights) once, all with ring
collectives over links of `link_bandwidth` bytes/s per device. For each device count in
`device_counts`, give the largest whole number of parameters whose state fits and whose step
communication takes at most `comm_budget_s` seconds, and which of the two limits it ("memory" or
"communication"; "memory" when both bind equally)."""

QUANTIZED_L4 = (
    """\
A model of `n_params` parameters decodes a batch of B sequences; each step costs 2*n_params*B
FLOPs at `peak_flops` FLOP/s
"""
    + SAME_SPEED_ANY_FORMAT
    + """
and reads every weight once at `hbm_bandwidth` bytes/s, a weight taking bits_per_weight / 8 bytes
(bits_per_weight already includes any quantization scales; ignore the KV cache). For each format
in `formats`, give the largest batch at which the step is still strictly memory-bound, or None if
even batch 1 is not."""
)

PRICE_L4 = """\
One chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s serves a model of `n_params`
parameters (`weight_bytes` bytes each) and costs `dollars_per_chip_hour` dollars per hour. A decode
step for a batch of B sequences runs the model on one new token per sequence (2 FLOPs per
parameter per token), reads every weight from HBM once (ignore the KV cache), takes its roofline
time and yields B tokens. For each target in `price_targets` (dollars per million generated
tokens), give the smallest batch whose cost is at most the target, or None if no batch reaches
it."""

DECODE_CHIPS = Level(
    fewest_decode_chips,
    DECODE_CHIPS_L4,
    '{"rows": [{"step_budget_s": <number>, "min_chips": <int> | None}, ...]}  # one row per budget',
    fewest_decode_chips_float,
    "weights_only",
    sample=sample_decode_chips,
    reject=_decode_chip_edges,
)
FSDP = Level(
    fsdp_largest_model,
    FSDP_L4,
    '{"rows": [{"devices": <int>, "max_params": <int>, "limit": "memory" | "communication"}, ...]}'
    "  # one row per entry of `device_counts`, in order",
    fsdp_largest_model_float,
    "drop_ring_factor",
    sample=sample_fsdp_model,
    reject=_fsdp_edges,
    varying=("rows[].limit",),
)
QUANTIZED = Level(
    largest_memory_bound_batch,
    QUANTIZED_L4,
    '{"rows": [{"format": <str>, "max_batch": <int> | None}, ...]}  # one row per format, in order',
    largest_memory_bound_batch_float,
    "bits_as_bytes",
    sample=sample_quantized_batch,
    reject=_quantized_edges,
)
PRICE = Level(
    batch_for_price,
    PRICE_L4,
    '{"rows": [{"target_dollars_per_million": <number>, "min_batch": <int> | None}, ...]}'
    "  # one row per target, in order",
    batch_for_price_float,
    "per_sequence_throughput",
    sample=sample_price,
    reject=_price_edges,
)
