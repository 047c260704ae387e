"""The zero_memory family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    hbm_capacity,
    link_bandwidth,
    n_params,
    n_params_between,
    peak_for_capacity,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    scaling_level,
    smallest_satisfying,
    some_none,
    tie_edge,
)
from exactgrade.domains.scaling.sharding.shared import _device_count
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def zero_memory(n_params, devices, hbm_bytes_per_device, param_bytes, grad_bytes, optimizer_bytes):
    """Per-device training memory under ZeRO stages (what is sharded over the devices)."""
    from fractions import Fraction

    n = Fraction(n_params)
    per_device = {
        "replicated": n * (param_bytes + grad_bytes + optimizer_bytes),
        "zero1_optimizer": n * (param_bytes + grad_bytes) + n * optimizer_bytes / devices,
        "zero2_gradients": n * param_bytes + n * (grad_bytes + optimizer_bytes) / devices,
        "zero3_parameters": n * (param_bytes + grad_bytes + optimizer_bytes) / devices,
    }
    rows = []
    for stage, size in per_device.items():
        rows.append({"stage": stage, "gib_per_device": size / 2**30, "fits": size <= hbm_bytes_per_device})
    return {"rows": rows}


def zero_memory_float(
    n_params, devices, hbm_bytes_per_device, param_bytes, grad_bytes, optimizer_bytes, mistake=None
):
    known_mistake(mistake, "optimizer_without_master")
    opt = optimizer_bytes - 4 if mistake == "optimizer_without_master" else optimizer_bytes
    p, g = param_bytes, grad_bytes
    sizes = (
        ("replicated", (p + g + opt) * float(n_params)),
        ("zero1_optimizer", (p + g + opt / devices) * float(n_params)),
        ("zero2_gradients", (p + (g + opt) / devices) * float(n_params)),
        ("zero3_parameters", float(n_params) / devices * (opt + g + p)),
    )
    return {
        "rows": [
            {"stage": name, "gib_per_device": size / 2**30, "fits": size <= hbm_bytes_per_device}
            for name, size in sizes
        ]
    }


def sample_zero_memory(draw: Draw, level: int) -> dict:
    return {
        "n_params": n_params(draw, level),
        "devices": _device_count(draw, level),
        "hbm_bytes_per_device": hbm_capacity(draw, level),
        "param_bytes": 2,
        "grad_bytes": value_bytes(draw, level, (2, 4)),
        "optimizer_bytes": 12,
    }


def _zero_fits_not_tied(task: Task) -> str | None:
    capacity = task.inputs["hbm_bytes_per_device"]
    for row in task.expected["rows"]:
        problem = tie_edge(
            f"{row['stage']}: the bytes per device against the HBM", row["gib_per_device"] * 2**30, capacity
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "sharding",
    zero_memory,
    """\
Data-parallel training of a model of `n_params` parameters over `devices` devices keeps bf16
weights (`param_bytes` per parameter), gradients (`grad_bytes`) and Adam optimizer state
(`optimizer_bytes`: fp32 master copy and two fp32 moments). ZeRO shards parts of this evenly over
the devices: "replicated" shards nothing, "zero1_optimizer" shards the optimizer state,
"zero2_gradients" the optimizer state and gradients, "zero3_parameters" all three. For each stage,
in that order, give the bytes per device in GiB and whether they fit in `hbm_bytes_per_device`
bytes, ignoring activations.""",
    '{"rows": [{"stage": "replicated", "gib_per_device": <number>, "fits": <bool>}, '
    '{"stage": "zero1_optimizer", ...}, {"stage": "zero2_gradients", ...}, '
    '{"stage": "zero3_parameters", ...}]}',
    zero_memory_float,
    "optimizer_without_master",
    sample=sample_zero_memory,
    reject=_zero_fits_not_tied,
    varying=("rows[].fits",),
)


STAGES = """\
ZeRO shards parts of the training state evenly over the devices: "replicated" shards nothing,
"zero1_optimizer" shards the optimizer state, "zero2_gradients" the optimizer state and the
gradients, "zero3_parameters" the optimizer state, the gradients and the bf16 weights."""


STATE = """\
Data-parallel training of a model of `n_params` parameters keeps bf16 weights, gradients of
`grad_bytes` bytes per parameter, and Adam optimizer state: an fp32 master copy of the weights and
two fp32 moments."""


def zero_memory_derived(n_params, devices, hbm_bytes_per_device, grad_bytes):
    """zero_memory with the bytes per parameter derived: bf16 weights 2, Adam state 3 * 4."""
    from fractions import Fraction

    n = Fraction(n_params)
    weights, optimizer = 2, 12
    per_device = {
        "replicated": n * (weights + grad_bytes + optimizer),
        "zero1_optimizer": n * (weights + grad_bytes) + n * optimizer / devices,
        "zero2_gradients": n * weights + n * (grad_bytes + optimizer) / devices,
        "zero3_parameters": n * (weights + grad_bytes + optimizer) / devices,
    }
    return {
        "rows": [
            {"stage": stage, "gib_per_device": size / 2**30, "fits": size <= hbm_bytes_per_device}
            for stage, size in per_device.items()
        ]
    }


def zero_memory_derived_float(n_params, devices, hbm_bytes_per_device, grad_bytes, mistake=None):
    known_mistake(mistake, "optimizer_without_master")
    opt = 8.0 if mistake == "optimizer_without_master" else 12.0
    g = grad_bytes
    sizes = (
        ("replicated", (2 + g + opt) * n_params),
        ("zero1_optimizer", (2 + g + opt / devices) * n_params),
        ("zero2_gradients", (2 + (g + opt) / devices) * n_params),
        ("zero3_parameters", n_params / devices * (opt + g + 2)),
    )
    return {
        "rows": [
            {"stage": s, "gib_per_device": b / 2**30, "fits": b <= hbm_bytes_per_device} for s, b in sizes
        ]
    }


def _state(n: int, g: int, d: int) -> dict[str, Fraction]:
    n_ = Fraction(n)
    return {
        "replicated": n_ * (14 + g),
        "zero1_optimizer": n_ * (2 + g) + n_ * 12 / d,
        "zero2_gradients": 2 * n_ + n_ * (g + 12) / d,
        "zero3_parameters": n_ * (14 + g) / d,
    }


def _between_stages(draw: Draw, level: int, room: int, per_param: dict[str, Fraction]) -> int:
    """A model size that puts `room` bytes between two stages' bytes per device (per_param: a
    stage's bytes per parameter), so fits takes both values on a real HBM."""
    sizes = sorted(per_param.values())
    k = draw.integer(1, 3)
    return n_params_between(draw, level, room / sizes[k], room / sizes[k - 1])


def sample_derived(draw: Draw, level: int) -> dict:
    """The HBM is a real capacity; the model size puts it between two stages' bytes per device."""
    hbm, devices, g = hbm_capacity(draw, level), draw.integer(2, 2 ** (8 + level)), draw.choice((2, 4))
    return {
        "n_params": _between_stages(draw, level, hbm, _state(1, g, devices)),
        "devices": devices,
        "hbm_bytes_per_device": hbm,
        "grad_bytes": g,
    }


def _derived_edges(task: Task) -> str | None:
    i = task.inputs
    for stage, size in _state(i["n_params"], i["grad_bytes"], i["devices"]).items():
        problem = tie_edge(f"{stage}: bytes against the HBM", size, i["hbm_bytes_per_device"])
        if problem:
            return problem
    return None


_ROWS = (
    '{"rows": [{"stage": "replicated", "gib_per_device": <number>, "fits": <bool>}, '
    '{"stage": "zero1_optimizer", ...}, {"stage": "zero2_gradients", ...}, '
    '{"stage": "zero3_parameters", ...}]}'
)


_L2 = (
    STATE
    + " It runs on `devices` devices. "
    + STAGES
    + """ For each stage, in that order, give
the bytes per device in GiB and whether they fit in `hbm_bytes_per_device` bytes, ignoring
activations."""
)


LEVEL_2 = scaling_level(
    "sharding",
    zero_memory_derived,
    _L2,
    _ROWS,
    zero_memory_derived_float,
    "optimizer_without_master",
    sample=sample_derived,
    reject=_derived_edges,
    varying=("rows[].fits",),
)


def zero_with_activations(
    n_params, layers, devices, hbm_bytes_per_device, grad_bytes, tokens_per_device, act_bytes_per_token_layer
):
    """Per stage: its state per device, plus the activations of the device's tokens for every
    layer, plus (ZeRO-3 only) one layer's full bf16 weights gathered while it runs."""
    from fractions import Fraction

    n = Fraction(n_params)
    activations = tokens_per_device * layers * act_bytes_per_token_layer
    per_device = {
        "replicated": n * (2 + grad_bytes + 12),
        "zero1_optimizer": n * (2 + grad_bytes) + n * 12 / devices,
        "zero2_gradients": n * 2 + n * (grad_bytes + 12) / devices,
        "zero3_parameters": n * (2 + grad_bytes + 12) / devices + 2 * n / layers,
    }
    return {
        "rows": [
            {
                "stage": stage,
                "gib_per_device": (size + activations) / 2**30,
                "fits": size + activations <= hbm_bytes_per_device,
            }
            for stage, size in per_device.items()
        ]
    }


def zero_with_activations_float(
    n_params,
    layers,
    devices,
    hbm_bytes_per_device,
    grad_bytes,
    tokens_per_device,
    act_bytes_per_token_layer,
    mistake=None,
):
    known_mistake(mistake, "no_gathered_layer")
    acts = float(tokens_per_device) * act_bytes_per_token_layer * layers
    gathered = 0.0 if mistake == "no_gathered_layer" else 2.0 * n_params / layers
    g = grad_bytes
    sizes = (
        ("replicated", (14 + g) * n_params),
        ("zero1_optimizer", (2 + g + 12 / devices) * n_params),
        ("zero2_gradients", (2 + (g + 12) / devices) * n_params),
        ("zero3_parameters", n_params * (14 + g) / devices + gathered),
    )
    return {
        "rows": [
            {"stage": s, "gib_per_device": (b + acts) / 2**30, "fits": b + acts <= hbm_bytes_per_device}
            for s, b in sizes
        ]
    }


def sample_activations(draw: Draw, level: int) -> dict:
    """The HBM is a real capacity, the activations at most half of it; the model size puts the
    rest between two stages' state per device."""
    hbm, devices, g = hbm_capacity(draw, level), draw.integer(2, 2 ** (8 + level)), draw.choice((2, 4))
    layers, act_bytes = draw.integer(12, 120), 1024 * draw.integer(4, 128)
    most_tokens = min(32 * 1024, hbm // (2 * layers * act_bytes))
    if most_tokens < 512:
        raise Reject("not 512 tokens of activations fit in half the HBM")
    tokens = draw.integer(512, most_tokens)
    state = _state(1, g, devices)
    state["zero3_parameters"] += Fraction(2, layers)
    return {
        "n_params": _between_stages(draw, level, hbm - tokens * layers * act_bytes, state),
        "layers": layers,
        "devices": devices,
        "hbm_bytes_per_device": hbm,
        "grad_bytes": g,
        "tokens_per_device": tokens,
        "act_bytes_per_token_layer": act_bytes,
    }


def _activations_edges(task: Task) -> str | None:
    i = task.inputs
    for row in task.expected["rows"]:
        problem = tie_edge(
            f"{row['stage']}: bytes against the HBM", row["gib_per_device"] * 2**30, i["hbm_bytes_per_device"]
        )
        if problem:
            return problem
    return None


_L3 = (
    STATE
    + " It runs on `devices` devices, each with `hbm_bytes_per_device` bytes of HBM. "
    + STAGES
    + """
The model has `layers` layers of equal size. Besides its share of the state, each device holds the
activations of its `tokens_per_device` tokens, `act_bytes_per_token_layer` bytes per token for
every layer, and under zero3_parameters also a buffer of the full bf16 weights of the one layer
it is running (all of that layer's parameters, its own shard included, on top of its share of the
state; other layers' buffers are freed). For each
stage, in that order, give a device's peak bytes in GiB and whether they fit."""
)


LEVEL_3 = scaling_level(
    "sharding",
    zero_with_activations,
    _L3,
    _ROWS,
    zero_with_activations_float,
    "no_gathered_layer",
    sample=sample_activations,
    reject=_activations_edges,
    varying=("rows[].fits",),
)


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
                "min_devices": smallest_satisfying(lambda d, f=f: f(d) <= hbm_bytes_per_device, max_devices),
            }
            for stage, f in sizes
        ]
    }


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


ZERO_L4 = """\
Data-parallel training of a model of `n_params` parameters keeps bf16 weights (`param_bytes` per
parameter), gradients (`grad_bytes`) and Adam optimizer state (`optimizer_bytes`: fp32 master copy
and two fp32 moments). ZeRO shards parts of this evenly over the devices: "replicated" shards
nothing, "zero1_optimizer" shards the optimizer state, "zero2_gradients" the optimizer state and
gradients, "zero3_parameters" all three. For each stage, in that order, give the fewest devices,
from 1 to `max_devices`, at which the bytes per device fit in `hbm_bytes_per_device` (at most it;
ignore activations), or None if no such count does."""


LEVEL_4 = scaling_level(
    "sharding",
    zero_min_devices,
    ZERO_L4,
    '{"rows": [{"stage": "replicated", "min_devices": <int> | None}, {"stage": "zero1_optimizer", ...}, '
    '{"stage": "zero2_gradients", ...}, {"stage": "zero3_parameters", ...}]}',
    zero_min_devices_float,
    "optimizer_without_master",
    sample=sample_zero,
    reject=_zero_edges,
)


def cheapest_zero_layout(
    n_params,
    grad_bytes,
    hbm_bytes_per_device,
    act_bytes_per_token,
    max_devices,
    peak_flops,
    mfu,
    link_bandwidth,
    global_batches,
):
    """Per global batch G: for each stage the fewest devices d that hold its state plus G / d
    tokens of activations; the device-seconds of a step, d * (6 N G / d / (peak mfu) + its
    collectives), grow with d for a stage, so the fewest is its best. Ties: the earlier stage."""
    import math
    from fractions import Fraction

    n = n_params
    weights = 2 * n
    stages = (  # (name, unsharded bytes, sharded bytes, bytes a device sends per step over d-1/d)
        ("replicated", n * (2 + grad_bytes + 12), 0, 2 * n * grad_bytes),
        ("zero1_optimizer", n * (2 + grad_bytes), 12 * n, n * grad_bytes + weights),
        ("zero2_gradients", weights, n * (grad_bytes + 12), n * grad_bytes + weights),
        ("zero3_parameters", 0, n * (2 + grad_bytes + 12), 2 * weights + n * grad_bytes),
    )
    rows = []
    for batch in global_batches:
        compute = Fraction(6 * n * batch) / (peak_flops * mfu)  # every device's share together
        best = None
        for name, whole, sharded, traffic in stages:
            room = hbm_bytes_per_device - whole
            if room <= 0:
                continue
            devices = max(1, math.ceil(Fraction(sharded + batch * act_bytes_per_token, room)))
            if devices > max_devices:
                continue
            cost = compute + devices * traffic * Fraction(devices - 1, devices) / link_bandwidth
            if best is None or cost < best[2]:
                best = (name, devices, cost)
        if best is None:
            rows.append({"global_batch": batch, "stage": None, "devices": None, "device_seconds": None})
        else:
            rows.append(
                {"global_batch": batch, "stage": best[0], "devices": best[1], "device_seconds": best[2]}
            )
    return {"rows": rows}


def cheapest_zero_layout_float(
    n_params,
    grad_bytes,
    hbm_bytes_per_device,
    act_bytes_per_token,
    max_devices,
    peak_flops,
    mfu,
    link_bandwidth,
    global_batches,
    mistake=None,
):
    """The fewest devices per stage by search, the collectives counted one by one."""
    known_mistake(mistake, "zero3_like_allreduce")
    n, g = float(n_params), grad_bytes
    out = []
    for batch in global_batches:
        found = []
        for name in ("replicated", "zero1_optimizer", "zero2_gradients", "zero3_parameters"):

            def memory(d, name=name, batch=batch):
                state = {
                    "replicated": n * (14 + g),
                    "zero1_optimizer": n * (2 + g) + 12 * n / d,
                    "zero2_gradients": 2 * n + n * (g + 12) / d,
                    "zero3_parameters": n * (14 + g) / d,
                }[name]
                return state + batch / d * act_bytes_per_token

            d = 1
            while d <= max_devices and memory(d) > hbm_bytes_per_device * (1 + 1e-13):
                d += 1 if d < 64 else max(1, d // 64)
            if d > max_devices:
                continue
            while d > 1 and memory(d - 1) <= hbm_bytes_per_device * (1 + 1e-13):  # back off the coarse steps
                d -= 1
            ring = (d - 1) / d
            if name == "replicated":
                sent = 2 * ring * n * g  # one all-reduce of the gradients
            elif name == "zero3_parameters" and mistake != "zero3_like_allreduce":
                sent = ring * (2 * n + 2 * n + n * g)  # two all-gathers of the weights, a reduce-scatter
            else:
                sent = ring * (
                    n * g + 2 * n
                )  # a reduce-scatter of the gradients, an all-gather of the weights
            found.append(((name, d), 6.0 * n * batch / (mfu * peak_flops) + d * sent / link_bandwidth))
        if not found:
            out.append({"global_batch": batch, "stage": None, "devices": None, "device_seconds": None})
            continue
        low = min(v for _, v in found)
        (name, d), v = next((k, v) for k, v in found if v <= low * (1 + 1e-12))
        out.append({"global_batch": batch, "stage": name, "devices": d, "device_seconds": v})
    return {"rows": out}


def sample_cheapest(draw: Draw, level: int) -> dict:
    """Global batches over a factor of 64: small batches fit the replicated or lightly sharded
    stages on few devices, large ones need the activations spread. Two model sizes of equal
    share: small enough that the replicated state fits one device (replicated, then zero1 or
    zero2 win), or weights so large that zero2's room per device is under 2/3 (3/4 with fp32
    gradients) of zero3's (zero3 wins the large batches: its extra all-gather costs less than
    the devices it saves)."""
    hbm = hbm_capacity(draw, level)
    grad = draw.choice((2, 4))
    if draw.choice(("small", "large")) == "small":  # the replicated state fits on one device
        n = draw.integer(hbm // 40, hbm // (15 + grad))
    else:  # the weights take over a third (a quarter) of the HBM: zero3 wins large batches
        n = draw.integer(hbm * 7 // 40, hbm * 6 // 25) if grad == 2 else draw.integer(hbm // 7, hbm * 4 // 25)
    exponents = sorted(draw.sample(range(10, 26), rows(level, 1)))
    if exponents[-1] - exponents[0] < 6:
        raise Reject("global batches too close together")
    return {
        "n_params": n,
        "grad_bytes": grad,
        "hbm_bytes_per_device": hbm,
        "act_bytes_per_token": 1024 * draw.integer(16, 4096),
        "max_devices": 4096,
        "peak_flops": peak_for_capacity(draw, level, hbm),
        "mfu": Fraction(draw.integer(2000, 6000), 10_000),
        "link_bandwidth": link_bandwidth(draw, level),
        "global_batches": [2**e + draw.integer(0, 2 ** (e - 1)) for e in exponents],
    }


def _cheapest_rules(task: Task) -> str | None:
    i = task.inputs
    found = task.expected["rows"]
    if any(row["stage"] is None for row in found):
        return "a global batch no stage fits"
    if len({row["stage"] for row in found}) < 2:
        return "the same stage for every global batch"
    n, g = i["n_params"], i["grad_bytes"]
    for row in found:
        costs = []
        for name, whole, sharded in (
            ("replicated", n * (14 + g), 0),
            ("zero1_optimizer", n * (2 + g), 12 * n),
            ("zero2_gradients", 2 * n, n * (g + 12)),
            ("zero3_parameters", 0, n * (14 + g)),
        ):
            room = i["hbm_bytes_per_device"] - whole
            if room <= 0:
                continue
            bound = Fraction(sharded + row["global_batch"] * i["act_bytes_per_token"], room)
            if near_integer(bound):
                return f"batch {row['global_batch']}, {name}: the device bound sits on an integer"
        for name in ("replicated", "zero1_optimizer", "zero2_gradients", "zero3_parameters"):
            value = _stage_cost(i, row["global_batch"], name)
            if value is not None:
                costs.append(value)
        costs.sort()
        if len(costs) > 1 and costs[0] != costs[1] and near_tie(costs[0], costs[1]):
            return f"batch {row['global_batch']}: two stages within 1e-9 (not an exact tie)"
    return None


def _stage_cost(i: dict, batch: int, stage: str) -> Fraction | None:
    n, g = i["n_params"], i["grad_bytes"]
    whole, sharded, traffic = {
        "replicated": (n * (14 + g), 0, 2 * n * g),
        "zero1_optimizer": (n * (2 + g), 12 * n, n * g + 2 * n),
        "zero2_gradients": (2 * n, n * (g + 12), n * g + 2 * n),
        "zero3_parameters": (0, n * (14 + g), 4 * n + n * g),
    }[stage]
    room = i["hbm_bytes_per_device"] - whole
    if room <= 0:
        return None
    d = max(1, math.ceil(Fraction(sharded + batch * i["act_bytes_per_token"], room)))
    if d > i["max_devices"]:
        return None
    return (
        Fraction(6 * n * batch) / (i["peak_flops"] * i["mfu"])
        + d * traffic * Fraction(d - 1, d) / i["link_bandwidth"]
    )


_L5 = (
    STATE
    + " "
    + STAGES
    + """
Each device has `hbm_bytes_per_device` bytes of HBM, holding its share of the state plus
`act_bytes_per_token` bytes of activations per token of its share of the step. A step trains on
a global batch of tokens split evenly over the devices (the share need not be whole), at 6 FLOPs
per parameter per token, `peak_flops` FLOP/s per device and utilization `mfu`. Each step's
collectives, ring collectives over links of `link_bandwidth` bytes/s per device, after (not
overlapping) the compute: replicated all-reduces the gradients; zero1_optimizer and
zero2_gradients reduce-scatter the gradients and then all-gather the updated bf16 weights;
zero3_parameters all-gathers the bf16 weights before the forward pass and again before the
backward pass, and reduce-scatters the gradients. For each global batch in `global_batches`, give
the stage and the device count (1 to `max_devices`) with the fewest device-seconds per step
(devices times the step time; on a tie, the stage listed first, then the fewer devices) and that
number; None for all three if nothing fits."""
)


LEVEL_5 = scaling_level(
    "sharding",
    cheapest_zero_layout,
    _L5,
    '{"rows": [{"global_batch": <int>, "stage": <str> | None, "devices": <int> | None, '
    '"device_seconds": <number> | None}, ...]}  # one row per entry of `global_batches`, in order',
    cheapest_zero_layout_float,
    "zero3_like_allreduce",
    sample=sample_cheapest,
    reject=_cheapest_rules,
    varying=("rows[].stage",),
)


def stage_wins(stage: str, task: Task) -> bool:
    """Whether some global batch's best layout uses this stage (a Branch of L5, via partial)."""
    return any(row["stage"] == stage for row in task.expected["rows"])


ZERO_MEMORY = five_levels(
    "zero_memory",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the bytes per parameter derived from the stated precisions; L3: the activations "
    "and ZeRO-3's gathered-layer buffer added, fits or not per stage; L4: the fewest devices "
    "per ZeRO stage (None); L5: the stage and device count of the fewest device-seconds "
    "per step for each global batch, each stage's memory and collective traffic derived "
    "(the best stage changes with the batch; each of the four stages is the best of some "
    "batch in a declared share of the instances, ties to the stage listed first)",
    branches=(
        Branch("none", some_none, Fraction(1, 8), (4,)),
        *(
            Branch(stage, functools.partial(stage_wins, stage), share, (5,))
            for stage, share in (
                ("replicated", Fraction(2, 5)),
                ("zero1_optimizer", Fraction(1, 4)),
                ("zero2_gradients", Fraction(1, 2)),
                ("zero3_parameters", Fraction(2, 5)),
            )
        ),
    ),
)
