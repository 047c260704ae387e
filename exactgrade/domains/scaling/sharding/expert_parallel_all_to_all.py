"""The expert_parallel_all_to_all family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    attention_shape,
    jitter,
    link_bandwidth,
    peak_flops,
    rows,
    sorted_sample,
    value_bytes,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level, tie_edge
from exactgrade.domains.scaling.hardware import ANY_LINK, require
from exactgrade.family import Draw, Level, Reject, five_levels
from exactgrade.task import Task


def expert_parallel_all_to_all(
    tokens_per_device, d_model, bytes_per_value, top_k, ep_degrees, link_bandwidth
):
    """One MoE layer's forward: dispatch tokens to experts and combine them back (two all-to-alls)."""
    from fractions import Fraction

    routed = tokens_per_device * top_k * d_model * bytes_per_value
    rows = []
    for ep in ep_degrees:
        sent = 2 * routed * Fraction(ep - 1, ep)  # uniform routing keeps 1/ep of the copies local
        rows.append({"ep": ep, "bytes_per_device": sent, "time_s": sent / link_bandwidth})
    return {"rows": rows}


def expert_parallel_all_to_all_float(
    tokens_per_device, d_model, bytes_per_value, top_k, ep_degrees, link_bandwidth, mistake=None
):
    known_mistake(mistake, "dispatch_only")
    collectives = 1 if mistake == "dispatch_only" else 2
    rows = []
    for ep in ep_degrees:
        sent = (1 - 1 / ep) * collectives * d_model * top_k * tokens_per_device * bytes_per_value
        rows.append({"ep": ep, "bytes_per_device": sent, "time_s": sent / link_bandwidth})
    return {"rows": rows}


def sample_expert_parallel_all_to_all(draw: Draw, level: int) -> dict:
    degrees = (
        [2**e for e in sorted_sample(draw, 1, 5 + level, rows(level, 3))]
        if level < 3
        else sorted_sample(draw, 2, 64 * level, rows(level, 3))
    )
    tokens = 1024 * draw.integer(1, 32 * level) - jitter(draw, level, 1024)
    return {
        "tokens_per_device": tokens,
        "d_model": attention_shape(draw, level)["d_model"],
        "bytes_per_value": value_bytes(draw, level),
        "top_k": draw.integer(1, 2 + level),
        "ep_degrees": degrees,
        "link_bandwidth": link_bandwidth(draw, level),
    }


_EP_ROW = (
    '{"rows": [{"ep": <int>, "bytes_per_device": <number>, "time_s": <number>}, ...]}'
    "  # one row per entry of `ep_degrees`, in order"
)


LEVEL_1 = scaling_level(
    "sharding",
    expert_parallel_all_to_all,
    """\
Expert parallelism spreads a mixture-of-experts layer's experts over `ep` devices. Each device holds
`tokens_per_device` tokens of d_model values (`bytes_per_value` bytes each) and sends a copy of
each token to each of its `top_k` experts; with uniform routing, a fraction 1/ep of those copies
stays on the device and the rest is sent. The forward pass of one MoE layer needs two all-to-alls
of that size: dispatch (tokens to experts) and combine (results back). For each degree in
`ep_degrees`, give the bytes each device sends per MoE layer forward pass and the time in seconds
over links of `link_bandwidth` bytes/s per device.""",
    _EP_ROW,
    expert_parallel_all_to_all_float,
    "dispatch_only",
    sample=sample_expert_parallel_all_to_all,
)


_L2 = """\
Expert parallelism spreads a mixture-of-experts layer's experts evenly over ep devices. Each
device holds `tokens_per_device` tokens of d_model values (`bytes_per_value` bytes each) and the
router sends a copy of each token to each of its `top_k` experts, chosen uniformly at random over
all experts (so over all devices alike). A copy whose expert is on the token's own device is not
sent; the others must be sent to their expert's device, and after the expert has run its result
(the same size) must be sent back. Count the expected bytes. For each degree in `ep_degrees`, give
the bytes each device sends per MoE layer forward pass and the time in seconds over links of
`link_bandwidth` bytes/s per device."""


def l2_level(reference, sample, answer_shape) -> Level:
    return scaling_level(
        "sharding", reference, _L2, answer_shape, moe_layer_time_float_l2, "dispatch_only", sample=sample
    )


def moe_layer_time_float_l2(
    tokens_per_device, d_model, bytes_per_value, top_k, ep_degrees, link_bandwidth, mistake=None
):
    known_mistake(mistake, "dispatch_only")
    passes = 1 if mistake == "dispatch_only" else 2
    out = []
    for ep in ep_degrees:
        sent = passes * (ep - 1) / ep * tokens_per_device * top_k * d_model * bytes_per_value
        out.append({"ep": ep, "bytes_per_device": sent, "time_s": sent / link_bandwidth})
    return {"rows": out}


LEVEL_2 = l2_level(expert_parallel_all_to_all, sample_expert_parallel_all_to_all, _EP_ROW)


def moe_layer_time(
    tokens_per_device, d_model, d_ff, bytes_per_value, top_k, ep_degrees, peak_flops, link_bandwidth
):
    """Per degree: the expert MLPs of the device's top_k copies (uniform routing keeps the load
    even) against dispatch plus combine, each sending (ep - 1) / ep of the copies."""
    from fractions import Fraction

    copies = tokens_per_device * top_k
    compute = Fraction(copies * 4 * d_model * d_ff, peak_flops)  # up [d, f] and down [f, d] per copy
    rows = []
    for ep in ep_degrees:
        comm = 2 * copies * d_model * bytes_per_value * Fraction(ep - 1, ep) / link_bandwidth
        rows.append({"ep": ep, "time_s": compute + comm, "comm_bound": comm > compute})
    return {"rows": rows}


def moe_layer_time_float(
    tokens_per_device,
    d_model,
    d_ff,
    bytes_per_value,
    top_k,
    ep_degrees,
    peak_flops,
    link_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "dispatch_only")
    passes = 1 if mistake == "dispatch_only" else 2
    out = []
    for ep in ep_degrees:
        compute = 4.0 * d_ff * d_model * top_k * tokens_per_device / peak_flops
        comm = passes * (1 - 1 / ep) * bytes_per_value * d_model * top_k * tokens_per_device / link_bandwidth
        out.append({"ep": ep, "time_s": comm + compute, "comm_bound": comm > compute})
    return {"rows": out}


def sample_moe(draw: Draw, level: int) -> dict:
    """The degrees straddle the one at which the all-to-alls outlast the expert compute."""
    shape = attention_shape(draw, level)
    degrees = sorted_sample(draw, 2, 64 * level, rows(level, 3))
    inputs = {
        "tokens_per_device": 1024 * draw.integer(1, 32) - jitter(draw, level, 1024),
        "d_model": shape["d_model"],
        "d_ff": 0,
        "bytes_per_value": value_bytes(draw, level),
        "top_k": draw.integer(1, 8),
        "ep_degrees": degrees,
        "peak_flops": peak_flops(draw, level),
        "link_bandwidth": 0,
    }
    # comm / compute = 2 (ep - 1) / ep * bytes * peak / (4 d_ff * link): put the crossing inside,
    # with d_ff (a multiple of 64, 256 to 32k) such that the link it needs is a real one
    crossing = Fraction(draw.integer(degrees[0], degrees[-1] - 1)) + Fraction(1, 2)
    pull = 2 * (crossing - 1) / crossing * inputs["bytes_per_value"] * inputs["peak_flops"] / 4
    fewest = max(4, math.ceil(pull / (64 * ANY_LINK.high)))
    most = min(512, math.floor(pull / (64 * ANY_LINK.low)))
    if fewest > most:
        raise Reject("no expert width puts the crossing inside over a real link")
    inputs["d_ff"] = 64 * draw.integer(fewest, most)
    ideal = pull / inputs["d_ff"]
    inputs["link_bandwidth"] = require("link_bandwidth", 10**6 * max(1, round(ideal / 10**6)), ANY_LINK)
    return inputs


def _moe_edges(task: Task) -> str | None:
    i = task.inputs
    copies = i["tokens_per_device"] * i["top_k"]
    compute = Fraction(copies * 4 * i["d_model"] * i["d_ff"], i["peak_flops"])
    for ep in i["ep_degrees"]:
        comm = 2 * copies * i["d_model"] * i["bytes_per_value"] * Fraction(ep - 1, ep) / i["link_bandwidth"]
        problem = tie_edge(f"ep {ep}: communication against compute", comm, compute)
        if problem:
            return problem
    return None


_L3 = """\
Expert parallelism spreads a mixture-of-experts layer's experts evenly over ep devices. Each
device holds `tokens_per_device` tokens of d_model values (`bytes_per_value` bytes each) and the
router sends a copy of each token to each of its `top_k` experts, chosen uniformly at random over
all experts (so over all devices alike). A copy whose expert is on the token's own device is not
sent; the others must be sent to their expert's device, and after the expert has run its result
(the same size) must be sent back; count the expected bytes, over links of `link_bandwidth`
bytes/s per device. Each expert is an MLP of an up-projection [d_model, `d_ff`] and a
down-projection [`d_ff`, d_model]; routing is balanced, so every device runs its experts on as
many copies as it holds (tokens_per_device * top_k), at `peak_flops` FLOP/s. Nothing overlaps.
For each degree in `ep_degrees`, give the time of the layer's forward pass on one device
(sending, expert compute, sending back) in seconds, and whether the communication takes strictly
longer than the compute."""


LEVEL_3 = scaling_level(
    "sharding",
    moe_layer_time,
    _L3,
    '{"rows": [{"ep": <int>, "time_s": <number>, "comm_bound": <bool>}, ...]}'
    "  # one row per entry of `ep_degrees`, in order",
    moe_layer_time_float,
    "dispatch_only",
    sample=sample_moe,
    reject=_moe_edges,
    varying=("rows[].comm_bound",),
)


def max_tokens_for_all_to_all(d_model, bytes_per_value, top_k, ep_degrees, link_bandwidth, time_budget_s):
    """Most tokens per device whose dispatch and combine all-to-alls finish within the budget."""
    import math
    from fractions import Fraction

    rows = []
    for ep in ep_degrees:
        per_token = 2 * top_k * d_model * bytes_per_value * Fraction(ep - 1, ep)
        rows.append(
            {"ep": ep, "max_tokens_per_device": math.floor(time_budget_s * link_bandwidth / per_token)}
        )
    return {"rows": rows}


def max_tokens_for_all_to_all_float(
    d_model, bytes_per_value, top_k, ep_degrees, link_bandwidth, time_budget_s, mistake=None
):
    known_mistake(mistake, "dispatch_only")
    collectives = 1 if mistake == "dispatch_only" else 2
    return {
        "rows": [
            {
                "ep": ep,
                "max_tokens_per_device": math.floor(
                    link_bandwidth
                    * time_budget_s
                    / (collectives * (1 - 1 / ep) * top_k * bytes_per_value * d_model)
                ),
            }
            for ep in ep_degrees
        ]
    }


def sample_all_to_all(draw: Draw, level: int) -> dict:
    degrees = sorted(draw.sample(range(2, 64 * level + 1), 2 + level))
    return {
        "d_model": attention_shape(draw, level)["d_model"],
        "bytes_per_value": draw.choice((1, 2, 4)),
        "top_k": draw.integer(1, 8),
        "ep_degrees": degrees,
        "link_bandwidth": 10**6 * draw.integer(20_000, 450_000),
        "time_budget_s": Fraction(draw.integer(1, 5000), 10_000),
    }


def _all_to_all_edges(task: Task) -> str | None:
    i = task.inputs
    for ep in i["ep_degrees"]:
        per_token = 2 * i["top_k"] * i["d_model"] * i["bytes_per_value"] * Fraction(ep - 1, ep)
        if near_integer(i["time_budget_s"] * i["link_bandwidth"] / per_token):
            return f"ep {ep}: the token bound sits on an integer"
    return None


_TOKENS = """\
Expert parallelism spreads a mixture-of-experts layer's experts over `ep` devices. Each device
sends a copy of each of its tokens (d_model values, `bytes_per_value` bytes each) to each of its
`top_k` experts; with uniform routing, a fraction 1/ep of those copies stays on the device and the
rest is sent. The forward pass of one MoE layer needs two all-to-alls of that size: dispatch and
combine (results back). For each degree in `ep_degrees`, give the largest number of tokens per
device whose two all-to-alls take at most `time_budget_s` seconds over links of `link_bandwidth`
bytes/s per device."""


LEVEL_4 = scaling_level(
    "sharding",
    max_tokens_for_all_to_all,
    _TOKENS,
    '{"rows": [{"ep": <int>, "max_tokens_per_device": <int>}, ...]}  # one row per degree, in order',
    max_tokens_for_all_to_all_float,
    "dispatch_only",
    sample=sample_all_to_all,
    reject=_all_to_all_edges,
)


def capacity_factor(expert_loads, ep, d_model, d_ff, peak_flops, drop_limits):
    """Per limit: the smallest capacity factor C (capacity floor(C * copies / experts) per expert)
    whose dropped copies are at most the limit's share of all copies, and the busiest device's
    expert time at it (experts placed in contiguous blocks of experts / ep per device)."""
    from fractions import Fraction

    experts, total = len(expert_loads), sum(expert_loads)
    per_device = experts // ep
    rows = []
    for limit in drop_limits:
        low, high = -1, max(expert_loads)  # dropped copies fall as the capacity grows; none at the top
        while high - low > 1:
            middle = (low + high) // 2
            if sum(max(0, load - middle) for load in expert_loads) > limit * total:
                low = middle
            else:
                high = middle
        capacity = high
        factor = Fraction(capacity * experts, total)  # floor(C * total / experts) >= capacity
        busiest = max(
            sum(min(load, capacity) for load in expert_loads[d * per_device : (d + 1) * per_device])
            for d in range(ep)
        )
        rows.append(
            {
                "max_drop_fraction": limit,
                "capacity_factor": factor,
                "expert_time_s": Fraction(busiest * 4 * d_model * d_ff, peak_flops),
            }
        )
    return {"rows": rows}


def capacity_factor_float(expert_loads, ep, d_model, d_ff, peak_flops, drop_limits, mistake=None):
    """The capacity solved on the sorted loads (with the j largest loads over it, dropped =
    their sum - j * capacity); the busiest device by scanning blocks."""
    known_mistake(mistake, "busiest_expert")
    experts, total = len(expert_loads), float(sum(expert_loads))
    ordered = sorted(expert_loads, reverse=True) + [0]
    out = []
    for limit in drop_limits:
        allowed = limit * total * (1 + 1e-13)
        cap, top = ordered[0], 0.0
        for j in range(1, experts + 1):  # capacities between ordered[j] and ordered[j - 1]
            top += ordered[j - 1]
            need = math.ceil((top - allowed) / j - 1e-9)  # the smallest c with top - j * c <= allowed
            if need >= ordered[j]:
                cap = max(need, 0)
                break
        block = experts // ep
        loads = [min(load, cap) for load in expert_loads]
        if mistake == "busiest_expert":
            busiest = max(loads)
        else:
            busiest = max(sum(loads[i : i + block]) for i in range(0, experts, block))
        out.append(
            {
                "max_drop_fraction": limit,
                "capacity_factor": cap * experts / total,
                "expert_time_s": busiest * 4.0 * d_model * d_ff / peak_flops,
            }
        )
    return {"rows": out}


def sample_capacity(draw: Draw, level: int) -> dict:
    """Skewed loads (a few popular experts, a long tail), 8 to 64 experts over 2 to 16 devices;
    drop limits from 0 to 20 %."""
    ep = draw.choice((2, 4, 8, 16))
    experts = ep * draw.choice((1, 2, 4))
    if experts < 8:
        experts *= 2
    base = draw.integer(100, 2000)
    loads = [
        max(
            1,
            base * draw.integer(20, 100) // 100
            + (base * draw.integer(100, 400) // 100 if draw.chance(1, 5) else 0),
        )
        for _ in range(experts)
    ]
    limits = sorted({Fraction(draw.integer(0, 2000), 10_000) for _ in range(rows(level, 1))})
    if len(limits) < 3:
        raise Reject("too few distinct drop limits")
    return {
        "expert_loads": loads,
        "ep": ep,
        "d_model": 128 * draw.integer(8, 64),
        "d_ff": 128 * draw.integer(8, 128),
        "peak_flops": peak_flops(draw, level),
        "drop_limits": limits,
    }


def _capacity_rules(task: Task) -> str | None:
    found = task.expected["rows"]
    if len({row["capacity_factor"] for row in found}) < len(found):
        return "two drop limits give the same capacity factor"
    i = task.inputs
    loads, total = i["expert_loads"], sum(i["expert_loads"])
    for row in found:
        cap = row["capacity_factor"] * len(loads) / total
        allowed = row["max_drop_fraction"] * total
        for c in (cap, cap - 1):
            dropped = sum(max(0, load - c) for load in loads)
            if c >= 0 and dropped and near_tie(dropped, allowed):
                return f"limit {row['max_drop_fraction']}: the dropped copies sit on the limit"
    return None


_L5 = """\
A mixture-of-experts layer has one expert per entry of `expert_loads`, placed over `ep` devices in
contiguous blocks (experts 0 to E/ep - 1 on the first device, and so on; E = the number of
experts). In a step the router sends `expert_loads[e]` token copies to expert e. With a capacity
factor C (any real number >= 0), every expert processes at most floor(C * (total copies) / E)
copies and drops the rest. Each expert is an MLP of an up-projection [`d_model`, `d_ff`] and a
down-projection [`d_ff`, `d_model`], and a device runs its experts' processed copies at
`peak_flops` FLOP/s. For each limit in `drop_limits` (a fraction of all copies), give the smallest
C whose dropped copies are at most that fraction of all copies, and the expert compute time in
seconds of the busiest device at that C."""


LEVEL_5 = scaling_level(
    "sharding",
    capacity_factor,
    _L5,
    '{"rows": [{"max_drop_fraction": <number>, "capacity_factor": <number>, '
    '"expert_time_s": <number>}, ...]}'
    "  # one row per entry of `drop_limits`, in order",
    capacity_factor_float,
    "busiest_expert",
    sample=sample_capacity,
    reject=_capacity_rules,
)


EXPERT_PARALLEL_ALL_TO_ALL = five_levels(
    "expert_parallel_all_to_all",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the traffic derived from the routing (the local share, the return trip); L3: the "
    "layer's expert compute against its two all-to-alls per degree (communication-bound "
    "varies); L4: the most tokens per device under an all-to-all time budget; L5: the "
    "smallest capacity factor keeping dropped copies under a limit with skewed expert "
    "loads, and the busiest device's expert time at it (an exact capacity boundary)",
)
