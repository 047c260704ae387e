"""The data_parallel_step family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    fraction,
    hbm_capacity_for_peak,
    link_bandwidth,
    n_params,
    peak_flops,
    round_numbers,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    scaling_level,
    smallest_satisfying,
    tie_edge,
)
from exactgrade.domains.scaling.hardware import ANY_LINK, NVLINK_DOMAIN, RING_LINK, require
from exactgrade.domains.scaling.sharding.shared import _device_count
from exactgrade.family import Draw, Level, Reject, five_levels
from exactgrade.task import Task


def data_parallel_step(n_params, grad_bytes, devices, link_bandwidth, tokens_per_device, peak_flops, mfu):
    """Gradient all-reduce time against the backward pass, the only compute it can overlap
    (synchronous data parallelism: the next step's forward needs the updated weights)."""
    from fractions import Fraction

    gradient = n_params * grad_bytes
    allreduce_s = 2 * gradient * Fraction(devices - 1, devices) / link_bandwidth
    rows = []
    for tokens in tokens_per_device:
        backward_s = Fraction(4 * n_params * tokens) / (peak_flops * mfu)
        rows.append(
            {
                "tokens_per_device": tokens,
                "backward_s": backward_s,
                "allreduce_s": allreduce_s,
                "allreduce_exceeds_backward": allreduce_s > backward_s,
            }
        )
    return {"rows": rows}


def data_parallel_step_float(
    n_params, grad_bytes, devices, link_bandwidth, tokens_per_device, peak_flops, mfu, mistake=None
):
    known_mistake(mistake, "allreduce_once")
    passes = 1 if mistake == "allreduce_once" else 2
    allreduce = grad_bytes * n_params / link_bandwidth * (1 - 1 / devices) * passes
    rows = []
    for t in tokens_per_device:
        backward = 4.0 * t / mfu * (n_params / peak_flops)
        rows.append(
            {
                "tokens_per_device": t,
                "backward_s": backward,
                "allreduce_s": allreduce,
                "allreduce_exceeds_backward": allreduce > backward,
            }
        )
    return {"rows": rows}


def sample_data_parallel_step(draw: Draw, level: int) -> dict:
    """The per-device batches straddle the batch at which the backward pass catches up with the
    all-reduce (the crossover), so the boolean takes both values in every instance."""
    inputs = {
        "n_params": n_params(draw, level),
        "grad_bytes": value_bytes(draw, level, (2, 4)),
        "devices": _device_count(draw, level),
        "link_bandwidth": link_bandwidth(draw, level),
        "peak_flops": peak_flops(draw, level),
        "mfu": fraction(draw, level, 20, 60),
    }
    devices = inputs["devices"]
    allreduce_s = (
        2
        * inputs["n_params"]
        * inputs["grad_bytes"]
        * Fraction(devices - 1, devices)
        / inputs["link_bandwidth"]
    )
    crossover = allreduce_s * inputs["peak_flops"] * inputs["mfu"] / (4 * inputs["n_params"]) / 512
    top = 16 * level
    if not 1 < crossover < top:
        raise Reject("the all-reduce crossover lies outside the batches drawn")
    below = draw.integer(1, math.ceil(crossover) - 1)
    above = draw.integer(math.floor(crossover) + 1, top)
    rest = draw.sample([t for t in range(1, top + 1) if t not in (below, above)], rows(level, 3) - 2)
    inputs["tokens_per_device"] = [512 * t for t in sorted({below, above, *rest})]
    return inputs


def _allreduce_not_tied(task: Task) -> str | None:
    for row in task.expected["rows"]:
        problem = tie_edge(
            f"{row['tokens_per_device']} tokens: the all-reduce against the backward pass",
            row["allreduce_s"],
            row["backward_s"],
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "sharding",
    data_parallel_step,
    """\
Synchronous data parallelism (as PyTorch DDP) over `devices` devices: every device holds the whole
model of `n_params` parameters and computes on `tokens_per_device` tokens per step, 2*N FLOPs per
token forward and 4*N backward, at `peak_flops` FLOP/s and utilization `mfu`. The gradients
(`grad_bytes` bytes per parameter) are summed by a ring all-reduce over links of `link_bandwidth`
bytes/s per device, which can overlap only the backward pass: gradients become ready during it,
and the next step's forward needs the updated weights. For each per-device batch in
`tokens_per_device`, give the backward time, the all-reduce time (both in seconds) and whether the
all-reduce takes strictly longer than the backward pass.""",
    '{"rows": [{"tokens_per_device": <int>, "backward_s": <number>, "allreduce_s": <number>, '
    '"allreduce_exceeds_backward": <bool>}, ...]}  # one row per entry of `tokens_per_device`, in order',
    data_parallel_step_float,
    "allreduce_once",
    sample=sample_data_parallel_step,
    reject=_allreduce_not_tied,
    varying=("rows[].allreduce_exceeds_backward",),
)


STEP = """\
Pure data parallelism: every device holds the whole model of `n_params` parameters and trains on
its own tokens. Per token, the forward pass costs 2 FLOPs per parameter and the backward pass twice
the forward; a device computes at `peak_flops` FLOP/s with utilization `mfu`. After the backward
pass the gradients (`grad_bytes` bytes per parameter) are summed over all devices by one ring
all-reduce over links of `link_bandwidth` bytes/s per device."""


def data_parallel_step_l2_float(
    n_params, grad_bytes, devices, link_bandwidth, tokens_per_device, peak_flops, mfu, mistake=None
):
    known_mistake(mistake, "overlap_whole_step")
    per_token = 6.0 if mistake == "overlap_whole_step" else 4.0
    allreduce = 2.0 * (devices - 1) / devices * n_params * grad_bytes / link_bandwidth
    out = []
    for t in tokens_per_device:
        backward = per_token * n_params / (peak_flops * mfu) * t
        out.append(
            {
                "tokens_per_device": t,
                "backward_s": backward,
                "allreduce_s": allreduce,
                "allreduce_exceeds_backward": allreduce > backward,
            }
        )
    return {"rows": out}


_L2 = (
    STEP
    + """
The all-reduce can overlap only the backward pass: gradients become ready during it, and the next
step's forward needs the updated weights. For each per-device batch in `tokens_per_device` (tokens
per device per step), with `devices` devices, give the time of the backward pass, the all-reduce
time (both in seconds) and whether the all-reduce takes strictly longer than the backward pass."""
)


_L2_ROW = (
    '{"rows": [{"tokens_per_device": <int>, "backward_s": <number>, "allreduce_s": <number>, '
    '"allreduce_exceeds_backward": <bool>}, ...]}'
    "  # one row per entry of `tokens_per_device`, in order"
)


def l2_level(reference, sample, reject) -> Level:
    """L1's question with the step described (L1's own reference and sampler)."""
    return scaling_level(
        "sharding",
        reference,
        _L2,
        _L2_ROW,
        data_parallel_step_l2_float,
        "overlap_whole_step",
        sample=sample,
        reject=reject,
        varying=("rows[].allreduce_exceeds_backward",),
    )


LEVEL_2 = l2_level(data_parallel_step, sample_data_parallel_step, _allreduce_not_tied)


def overlapped_step(n_params, grad_bytes, devices, link_bandwidth, tokens_per_device, peak_flops, mfu):
    """The all-reduce runs alongside the backward pass (it cannot start before it): a step is the
    forward plus the longer of the backward and the all-reduce; utilisation is 6 N T over the
    step's peak FLOPs."""
    from fractions import Fraction

    allreduce = 2 * n_params * grad_bytes * Fraction(devices - 1, devices) / link_bandwidth
    rows = []
    for tokens in tokens_per_device:
        forward = Fraction(2 * n_params * tokens) / (peak_flops * mfu)
        step = forward + max(2 * forward, allreduce)
        rows.append(
            {
                "tokens_per_device": tokens,
                "step_time_s": step,
                "utilization": 6 * n_params * tokens / (step * peak_flops),
            }
        )
    return {"rows": rows}


def overlapped_step_float(
    n_params, grad_bytes, devices, link_bandwidth, tokens_per_device, peak_flops, mfu, mistake=None
):
    known_mistake(mistake, "overlap_whole_step")
    allreduce = grad_bytes * n_params * 2.0 * (1 - 1 / devices) / link_bandwidth
    out = []
    for t in tokens_per_device:
        compute = 6.0 * n_params * t / (mfu * peak_flops)
        if mistake == "overlap_whole_step":
            step = max(compute, allreduce)
        else:
            step = compute / 3 + max(compute * 2 / 3, allreduce)
        out.append({"tokens_per_device": t, "step_time_s": step, "utilization": mfu * compute / step})
    return {"rows": out}


def _allreduce(i: dict, devices: int) -> Fraction:
    return 2 * i["n_params"] * i["grad_bytes"] * Fraction(devices - 1, devices) / i["link_bandwidth"]


def sample_overlap(draw: Draw, level: int) -> dict:
    """Per-device batches on both sides of the one whose backward pass just hides the all-reduce."""
    devices = 2 ** draw.integer(1, 8 + level) if round_numbers(level) else draw.integer(2, 2 ** (8 + level))
    inputs = {
        "n_params": n_params(draw, level),
        "grad_bytes": draw.choice((2, 4)),
        "devices": devices,
        "link_bandwidth": link_bandwidth(draw, level),
        "tokens_per_device": [],
        "peak_flops": peak_flops(draw, level),
        "mfu": fraction(draw, level, 20, 60),
    }
    crossover = _allreduce(inputs, devices) * inputs["peak_flops"] * inputs["mfu"] / (4 * inputs["n_params"])
    if not 4 < crossover < 10**7:
        raise Reject("the hiding batch is out of range")
    count = rows(level, 3)
    below = [draw.integer(1, math.floor(crossover) - 1) for _ in range(count // 2)]
    above = [
        math.ceil(crossover) + draw.integer(1, math.ceil(3 * crossover)) for _ in range(count - count // 2)
    ]
    inputs["tokens_per_device"] = sorted(set(below + above))
    return inputs


def _overlap_edges(task: Task) -> str | None:
    i = task.inputs
    allreduce = _allreduce(i, i["devices"])
    kinds = set()
    for t in i["tokens_per_device"]:
        backward = Fraction(4 * i["n_params"] * t) / (i["peak_flops"] * i["mfu"])
        problem = tie_edge(f"{t} tokens: the backward pass against the all-reduce", backward, allreduce)
        if problem:
            return problem
        kinds.add(backward >= allreduce)
    if len(kinds) < 2:
        return "every batch hides the all-reduce, or none does"
    return None


_L3 = (
    STEP
    + """
The all-reduce runs alongside the backward pass (gradients become ready during it), so it cannot
start before the backward pass starts; the step ends when both the backward pass and the
all-reduce have finished. With `devices` devices, for each per-device batch in
`tokens_per_device` (tokens per device per step), give the step time in seconds and the
utilization of the step: the model FLOPs of the step's tokens divided by (step time *
peak_flops), per device."""
)


LEVEL_3 = scaling_level(
    "sharding",
    overlapped_step,
    _L3,
    '{"rows": [{"tokens_per_device": <int>, "step_time_s": <number>, "utilization": <number>}, ...]}'
    "  # one row per entry of `tokens_per_device`, in order",
    overlapped_step_float,
    "overlap_whole_step",
    sample=sample_overlap,
    reject=_overlap_edges,
)


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


def min_hiding_batch_float(
    n_params, grad_bytes, device_counts, link_bandwidth, peak_flops, mfu, mistake=None
):
    known_mistake(mistake, "allreduce_once")
    rows = []
    for d in device_counts:
        allreduce = (
            (1 if mistake == "allreduce_once" else 2) * (1 - 1 / d) * grad_bytes * n_params / link_bandwidth
        )
        t = smallest_satisfying(lambda t, a=allreduce: 4.0 * n_params * t / (mfu * peak_flops) >= a, 10**12)
        rows.append({"devices": d, "allreduce_s": allreduce, "min_tokens_per_device": t})
    return {"rows": rows}


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


HIDING_L4 = """\
Synchronous data parallelism (as PyTorch DDP): every device holds the whole model of `n_params`
parameters and computes on a batch of tokens per step, 2*N FLOPs per token forward and 4*N
backward, at `peak_flops` FLOP/s and utilization `mfu`. The gradients (`grad_bytes` bytes per
parameter) are summed by a ring all-reduce over links of `link_bandwidth` bytes/s per device, which
overlaps only the backward pass: gradients become ready during it, and the next step's forward
needs the updated weights. For each device count in `device_counts`, give the all-reduce time in
seconds and the smallest integer number of tokens per device whose backward pass lasts at least
the all-reduce (so the overlap hides it)."""


LEVEL_4 = scaling_level(
    "sharding",
    min_hiding_batch,
    HIDING_L4,
    '{"rows": [{"devices": <int>, "allreduce_s": <number>, "min_tokens_per_device": <int>}, ...]}'
    "  # one row per entry of `device_counts`, in order",
    min_hiding_batch_float,
    "allreduce_once",
    sample=sample_hiding,
    reject=_hiding_edges,
    varying=("rows[].min_tokens_per_device",),
)


def accumulated_step(
    n_params,
    grad_bytes,
    state_bytes_per_param,
    act_bytes_per_token,
    hbm_bytes,
    global_batch_tokens,
    device_counts,
    link_bandwidth,
    peak_flops,
    mfu,
):
    """Per device count d: T = G / d tokens per device in the fewest microbatches k whose
    activations fit beside the state; the all-reduce overlaps only the last backward."""
    import math
    from fractions import Fraction

    room = hbm_bytes - n_params * state_bytes_per_param
    rows = []
    for devices in device_counts:
        tokens = Fraction(global_batch_tokens, devices)
        microbatches = max(1, math.ceil(tokens * act_bytes_per_token / room))
        forward = 2 * n_params * tokens / microbatches / (peak_flops * mfu)
        allreduce = 2 * n_params * grad_bytes * Fraction(devices - 1, devices) / link_bandwidth
        step = microbatches * 3 * forward - 2 * forward + max(2 * forward, allreduce)
        rows.append(
            {
                "devices": devices,
                "microbatches": microbatches,
                "step_time_s": step,
                "tokens_per_s": global_batch_tokens / step,
            }
        )
    return {"rows": rows}


def accumulated_step_float(
    n_params,
    grad_bytes,
    state_bytes_per_param,
    act_bytes_per_token,
    hbm_bytes,
    global_batch_tokens,
    device_counts,
    link_bandwidth,
    peak_flops,
    mfu,
    mistake=None,
):
    known_mistake(mistake, "overlap_whole_backward")
    room = hbm_bytes - float(n_params) * state_bytes_per_param
    out = []
    for d in device_counts:
        t = global_batch_tokens / d
        k = 1
        while t / k * act_bytes_per_token > room * (1 + 1e-12):  # the fewest microbatches, by search
            k += 1
        flops = 6.0 * n_params * t / (peak_flops * mfu)  # the whole per-device batch
        allreduce = 2.0 * (d - 1) / d * grad_bytes * n_params / link_bandwidth
        if mistake == "overlap_whole_backward":
            step = flops / 3 + max(flops * 2 / 3, allreduce)
        else:
            last_backward = flops * 2 / 3 / k
            step = flops - last_backward + max(last_backward, allreduce)
        out.append(
            {"devices": d, "microbatches": k, "step_time_s": step, "tokens_per_s": global_batch_tokens / step}
        )
    return {"rows": out}


def sample_accumulated(draw: Draw, level: int) -> dict:
    """Device counts over a factor of 32 or more: few devices need many microbatches (and hide
    the all-reduce behind one microbatch's backward only sometimes), many need one."""
    state = draw.choice((16, 18, 20))
    peak = peak_flops(draw, level)
    hbm = hbm_capacity_for_peak(draw, level, peak)
    params = draw.integer(3 * 10**8, hbm * 8 // (10 * state))  # the state takes at most 80 % of the HBM
    exponents = sorted(draw.sample(range(1, 13), rows(level, 1)))
    if exponents[-1] - exponents[0] < 5:
        raise Reject("device counts too close together")
    counts = [2**e + draw.integer(0, 2**e - 1) for e in exponents]  # over a factor of 32 or more
    inputs = {
        "n_params": params,
        "grad_bytes": draw.choice((2, 4)),
        "state_bytes_per_param": state,
        "act_bytes_per_token": 0,
        "hbm_bytes": hbm,
        "global_batch_tokens": 0,
        "device_counts": counts,
        "link_bandwidth": link_bandwidth(draw, level),
        "peak_flops": peak,
        "mfu": fraction(draw, level, 20, 60),
    }
    room = hbm - params * state
    # a microbatch that just fits holds room / act tokens; choose act so it is 256..16k tokens
    fit_tokens = 2 ** draw.integer(8, 14) + draw.integer(0, 255)
    inputs["act_bytes_per_token"] = max(1, room // fit_tokens)
    # the global batch: the middle device count runs about 1 to 4 microbatches
    middle = counts[len(counts) // 2]
    inputs["global_batch_tokens"] = middle * fit_tokens * draw.integer(1, 4) - draw.integer(0, 999)
    # The link that puts the microbatch just hiding the all-reduce (c tokens: 4 N c / (peak mfu)
    # = 2 N g / link, the ring factor aside) between half a microbatch that fits and a whole one:
    # accumulated microbatches (T / k tokens, between the two) then hide it or not.
    hiding = fit_tokens * Fraction(draw.integer(50, 100), 100)
    ideal = inputs["grad_bytes"] * inputs["peak_flops"] * inputs["mfu"] / (2 * hiding)
    links = ANY_LINK if max(counts) <= NVLINK_DOMAIN else RING_LINK  # past one NVLink domain, slower
    inputs["link_bandwidth"] = require("link_bandwidth", 10**6 * max(1, round(ideal / 10**6)), links)
    return inputs


def _accumulated_rules(task: Task) -> str | None:
    i = task.inputs
    room = i["hbm_bytes"] - i["n_params"] * i["state_bytes_per_param"]
    hidden = set()
    for d, row in zip(i["device_counts"], task.expected["rows"], strict=True):
        tokens = Fraction(i["global_batch_tokens"], d)
        if near_integer(tokens * i["act_bytes_per_token"] / room):
            return f"{d} devices: the microbatch count sits on an integer bound"
        k = row["microbatches"]
        backward = 4 * i["n_params"] * tokens / k / (i["peak_flops"] * i["mfu"])
        problem = tie_edge(
            f"{d} devices: the last backward against the all-reduce", backward, _allreduce(i, d)
        )
        if problem:
            return problem
        hidden.add(backward >= _allreduce(i, d))
    if len(hidden) < 2:
        return "the all-reduce is hidden at every device count, or at none"
    if len({row["microbatches"] for row in task.expected["rows"]}) < 2:
        return "the same microbatch count at every device count"
    return None


_L5 = (
    STEP
    + """
A step trains on `global_batch_tokens` tokens split evenly over the devices (a share need not be
a whole number of tokens). Each device holds
`state_bytes_per_param` bytes per parameter (weights, gradients, optimizer state) and, during a
forward and backward pass, `act_bytes_per_token` bytes of activations per token of that pass, in
`hbm_bytes` bytes of HBM. When a device's share does not fit at once, it runs k equal
microbatches one after another (forward then backward each, gradients accumulated; a microbatch
need not hold whole sequences), with k the fewest that fit. The all-reduce can only start once the
last microbatch's backward pass starts, and runs alongside it; the step ends when both have
finished. For each device count in `device_counts`, give k, the step time in seconds and the
training throughput in tokens per second."""
)


LEVEL_5 = scaling_level(
    "sharding",
    accumulated_step,
    _L5,
    '{"rows": [{"devices": <int>, "microbatches": <int>, "step_time_s": <number>, '
    '"tokens_per_s": <number>}, ...]}  # one row per entry of `device_counts`, in order',
    accumulated_step_float,
    "overlap_whole_backward",
    sample=sample_accumulated,
    reject=_accumulated_rules,
    varying=("rows[].microbatches",),
)


DATA_PARALLEL_STEP = five_levels(
    "data_parallel_step",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the step described, its FLOPs derived; L3: the all-reduce overlapping the backward "
    "pass, the step time and utilisation (some batches hide it, some do not); L4: the "
    "smallest per-device batch whose compute hides the all-reduce, per device count (it must "
    "differ between device counts); L5: a fixed global batch per device count, in the fewest "
    "microbatches whose activations fit, the all-reduce overlapping only the last "
    "microbatch's backward (memory, overlap and ring change regime across device counts)",
)
