"""Level 4 (inverse) of families whose level 1 asks a quantity of a given size: the smallest
size that meets a requirement, or None. zero_memory: the fewest devices per ZeRO stage;
data_parallel_step: the smallest per-device batch whose compute hides the all-reduce;
time_to_train: the fewest chips per cluster for a deadline; kv_cache_size: the largest batch per
attention variant under a cache budget. References solve in closed form; the ``*_float`` twins
search, and can reproduce one named mistake (tests only)."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import fraction, hbm_capacity, n_params, n_tokens, peak_flops
from exactgrade.domains.scaling._task import Level, known_mistake, near_integer
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
    """Smallest tokens per device whose compute time is at least the gradient all-reduce."""
    import math
    from fractions import Fraction

    rows = []
    for devices in device_counts:
        allreduce_s = 2 * n_params * grad_bytes * Fraction(devices - 1, devices) / link_bandwidth
        tokens = math.ceil(allreduce_s * peak_flops * mfu / (6 * n_params))
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
        t = _smallest(lambda t, a=allreduce: 6.0 * n_params * t / (mfu * peak_flops) >= a, 10**12)
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
    """A fifth of the instances leave the replicated stage unable to fit (None there)."""
    params, hbm = n_params(draw, level), hbm_capacity(draw, level)
    grad = draw.choice((2, 4))
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
        if near_integer(row["allreduce_s"] * i["peak_flops"] * i["mfu"] / (6 * i["n_params"])):
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
Pure data parallelism: every device holds the whole model of `n_params` parameters, computes on a
batch of tokens per step (6*N FLOPs per token, at `peak_flops` FLOP/s and utilization `mfu`), then
all-reduces the gradients (`grad_bytes` bytes per parameter) with a ring all-reduce over links of
`link_bandwidth` bytes/s per device, overlapped with the next step's compute. For each device count
in `device_counts`, give the all-reduce time in seconds and the smallest integer number of tokens
per device whose compute time is at least the all-reduce time (so the overlap hides it)."""

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
NONE_AT_L4 = (Branch("none", _some_none, Fraction(1, 8), (4,)),)

__all__ = ["CACHE", "DEADLINE", "HIDING", "NONE_AT_L4", "ZERO"]
