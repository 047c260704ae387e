"""The fsdp_step_communication family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    capacity_between,
    fraction,
    hbm_capacity,
    hbm_capacity_for_peak,
    link_bandwidth,
    n_params,
    n_params_between,
    overlaps_capacities,
    peak_flops,
    peak_for_capacity,
    rows,
    slower_link,
    value_bytes,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level, tie_edge
from exactgrade.domains.scaling.hardware import NETWORK, NVLINK, draw_in
from exactgrade.domains.scaling.sharding.shared import _device_count
from exactgrade.family import Branch, Draw, Level, Reject, five_levels
from exactgrade.task import Task


def fsdp_step_communication(n_params, param_bytes, device_counts, link_bandwidth):
    """FSDP: all-gather weights for forward and for backward, reduce-scatter the gradients."""
    from fractions import Fraction

    full = n_params * param_bytes
    rows = []
    for devices in device_counts:
        sent = 3 * full * Fraction(devices - 1, devices)
        rows.append(
            {
                "devices": devices,
                "params_gib_per_device": Fraction(full, devices * 2**30),
                "comm_bytes_per_device": sent,
                "comm_s": sent / link_bandwidth,
            }
        )
    return {"rows": rows}


def fsdp_step_communication_float(n_params, param_bytes, device_counts, link_bandwidth, mistake=None):
    known_mistake(mistake, "drop_ring_factor")
    rows = []
    for d in device_counts:
        ring = 1.0 if mistake == "drop_ring_factor" else (d - 1) / d
        sent = ring * 3 * param_bytes * n_params
        rows.append(
            {
                "devices": d,
                "params_gib_per_device": param_bytes * (n_params / d) / 1024**3,
                "comm_bytes_per_device": sent,
                "comm_s": ring * (3.0 * param_bytes / link_bandwidth) * n_params,
            }
        )
    return {"rows": rows}


def sample_fsdp_step_communication(draw: Draw, level: int) -> dict:
    counts = sorted({_device_count(draw, level) for _ in range(rows(level, 3))})
    return {
        "n_params": n_params(draw, level),
        "param_bytes": value_bytes(draw, level, (2, 4)),
        "device_counts": counts,
        "link_bandwidth": link_bandwidth(draw, level),
    }


_FSDP_ROW = (
    '{"rows": [{"devices": <int>, "params_gib_per_device": <number>, "comm_bytes_per_device": '
    '<number>, "comm_s": <number>}, ...]}  # one row per entry of `device_counts`, in order'
)


LEVEL_1 = scaling_level(
    "sharding",
    fsdp_step_communication,
    """\
Fully sharded data parallelism (FSDP / ZeRO-3) shards a model of `n_params` parameters, stored at
`param_bytes` bytes each, evenly over the devices. Each training step all-gathers the full weights
once for the forward pass and once more for the backward pass, and reduce-scatters the gradients
(same size as the weights) once, all with ring collectives over links of `link_bandwidth` bytes/s
per device. For each device count in `device_counts`, give the weights each device stores in GiB,
the bytes each device sends per step and that communication time in seconds.""",
    _FSDP_ROW,
    fsdp_step_communication_float,
    "drop_ring_factor",
    sample=sample_fsdp_step_communication,
)


def fsdp_l2_float(n_params, param_bytes, device_counts, link_bandwidth, mistake=None):
    known_mistake(mistake, "one_allgather")
    collectives = 2 if mistake == "one_allgather" else 3
    out = []
    for d in device_counts:
        sent = collectives * (1 - 1 / d) * param_bytes * float(n_params)
        out.append(
            {
                "devices": d,
                "params_gib_per_device": param_bytes * (n_params / d) / 1024**3,
                "comm_bytes_per_device": sent,
                "comm_s": sent / link_bandwidth,
            }
        )
    return {"rows": out}


_L2 = """\
Fully sharded data parallelism shards a model of `n_params` parameters, stored at `param_bytes`
bytes each, evenly over the devices: each device stores only its shard of the weights. To run the
forward pass a device needs the full weights, which it frees afterwards; the backward pass needs
them again; the backward pass produces full-size gradients (same size as the weights), which must
be summed over the devices, each device keeping only the sum for its own shard. All collectives
are rings over links of `link_bandwidth` bytes/s per device and use the smallest traffic that
does the job. For each device count in `device_counts`, give the weights each device stores in
GiB, the bytes each device sends per step and that communication time in seconds."""


def l2_level(reference, sample, answer_shape) -> Level:
    return scaling_level(
        "sharding", reference, _L2, answer_shape, fsdp_l2_float, "one_allgather", sample=sample
    )


LEVEL_2 = l2_level(fsdp_step_communication, sample_fsdp_step_communication, _FSDP_ROW)


def fsdp_batch_step(
    n_params,
    param_bytes,
    state_bytes_per_param,
    act_bytes_per_token,
    hbm_bytes_per_device,
    global_batch_tokens,
    device_counts,
    peak_flops,
    mfu,
    link_bandwidth,
):
    """Per device count: 6 N G / d FLOPs, then two all-gathers of the weights and a reduce-scatter
    of the gradients; the state's shard plus G / d tokens of activations must fit."""
    from fractions import Fraction

    rows = []
    for devices in device_counts:
        tokens = Fraction(global_batch_tokens, devices)
        compute = 6 * n_params * tokens / (peak_flops * mfu)
        comm = 3 * n_params * param_bytes * Fraction(devices - 1, devices) / link_bandwidth
        memory = Fraction(n_params * state_bytes_per_param, devices) + tokens * act_bytes_per_token
        rows.append(
            {"devices": devices, "step_time_s": compute + comm, "fits": memory <= hbm_bytes_per_device}
        )
    return {"rows": rows}


def fsdp_batch_step_float(
    n_params,
    param_bytes,
    state_bytes_per_param,
    act_bytes_per_token,
    hbm_bytes_per_device,
    global_batch_tokens,
    device_counts,
    peak_flops,
    mfu,
    link_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "one_allgather")
    collectives = 2 if mistake == "one_allgather" else 3
    out = []
    for d in device_counts:
        t = global_batch_tokens / d
        step = (
            t * 6.0 * n_params / mfu / peak_flops
            + collectives * (d - 1) / d * param_bytes * n_params / link_bandwidth
        )
        out.append(
            {
                "devices": d,
                "step_time_s": step,
                "fits": state_bytes_per_param * (n_params / d) + act_bytes_per_token * t
                <= hbm_bytes_per_device,
            }
        )
    return {"rows": out}


def sample_batch_step(draw: Draw, level: int) -> dict:
    """The HBM lies between two device counts' peak memory, so fits takes both values."""
    counts = sorted({draw.integer(2, 2 ** (6 + level)) for _ in range(rows(level, 2))})
    if len(counts) < 3:
        raise Reject("too few device counts")
    n = n_params(draw, level)
    inputs = {
        "n_params": n,
        "param_bytes": 2,
        "state_bytes_per_param": draw.choice((16, 18)),
        "act_bytes_per_token": 1024 * draw.integer(64, 4096),
        "hbm_bytes_per_device": 0,
        "global_batch_tokens": 1024 * draw.integer(256, 16384),
        "device_counts": counts,
        "peak_flops": 0,
        "mfu": fraction(draw, level, 20, 60),
        "link_bandwidth": link_bandwidth(draw, level),
    }
    memories = [
        Fraction(
            n * inputs["state_bytes_per_param"]
            + inputs["global_batch_tokens"] * inputs["act_bytes_per_token"],
            d,
        )
        for d in counts
    ]
    real = [k for k in range(1, len(counts)) if overlaps_capacities(memories[k], memories[k - 1])]
    if not real:
        raise Reject("no two neighbouring device counts leave a real HBM between their memories")
    k = draw.choice(real)
    inputs["hbm_bytes_per_device"] = capacity_between(draw, memories[k], memories[k - 1])
    # the chip of that HBM: its peak drawn for it (a peak drawn apart posed 20 GB at 1.6 PFLOP/s)
    inputs["peak_flops"] = peak_for_capacity(draw, level, inputs["hbm_bytes_per_device"])
    return inputs


def _batch_step_edges(task: Task) -> str | None:
    i = task.inputs
    for d in i["device_counts"]:
        memory = Fraction(
            i["n_params"] * i["state_bytes_per_param"] + i["global_batch_tokens"] * i["act_bytes_per_token"],
            d,
        )
        problem = tie_edge(f"{d} devices: memory against the HBM", memory, i["hbm_bytes_per_device"])
        if problem:
            return problem
    return None


_L3 = """\
Fully sharded data parallelism over d devices shards a model of `n_params` parameters evenly:
each device stores 1/d of the training state (`state_bytes_per_param` bytes per parameter). Each
step all-gathers the full bf16 weights (`param_bytes` bytes per parameter) before the forward
pass and again before the backward pass, and reduce-scatters the gradients (same size as the
weights), all as ring collectives over links of `link_bandwidth` bytes/s per device, after one
another and after no compute (nothing overlaps). A step trains on `global_batch_tokens` tokens
split evenly over the devices (a share need not be whole), 6 FLOPs per parameter per token at
`peak_flops` FLOP/s with utilization `mfu`; a device also holds `act_bytes_per_token` bytes of
activations per token of its share. For each device count in `device_counts`, give the step time
in seconds and whether a device's state shard plus activations fit in `hbm_bytes_per_device`."""


LEVEL_3 = scaling_level(
    "sharding",
    fsdp_batch_step,
    _L3,
    '{"rows": [{"devices": <int>, "step_time_s": <number>, "fits": <bool>}, ...]}'
    "  # one row per entry of `device_counts`, in order",
    fsdp_batch_step_float,
    "one_allgather",
    sample=sample_batch_step,
    reject=_batch_step_edges,
    varying=("rows[].fits",),
)


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


LEVEL_4 = scaling_level(
    "sharding",
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


def hybrid_shard_group(
    n_params,
    param_bytes,
    state_bytes_per_param,
    act_bytes_per_token,
    hbm_bytes_per_device,
    tokens_per_device,
    node_size,
    device_counts,
    peak_flops,
    mfu,
    intra_bandwidth,
    inter_bandwidth,
):
    """Per device count d: the group size s (a divisor of d) of the fastest step that fits; the
    weights are sharded over s devices (two all-gathers, one reduce-scatter over the fast link
    when s <= node_size, else the slow one) and the gradient shards all-reduced over d / s
    groups (the fast link only when all d devices share one node); ties: the smaller group."""
    from fractions import Fraction

    compute = 6 * n_params * tokens_per_device / (peak_flops * mfu)
    weights = n_params * param_bytes
    rows = []
    for devices in device_counts:
        best = None
        for group in range(1, devices + 1):
            if devices % group or (node_size % group and group % node_size):
                continue
            memory = (
                Fraction(n_params * state_bytes_per_param, group) + tokens_per_device * act_bytes_per_token
            )
            if memory > hbm_bytes_per_device:
                continue
            link = intra_bandwidth if group <= node_size else inter_bandwidth  # a group within a node
            shard = 3 * weights * Fraction(group - 1, group) / link
            replicas = devices // group
            across = intra_bandwidth if devices <= node_size else inter_bandwidth  # one node in all
            sync = 2 * Fraction(weights, group) * Fraction(replicas - 1, replicas) / across
            step = compute + shard + sync
            if best is None or step < best[1]:
                best = (group, step)
        if best is None:
            rows.append({"devices": devices, "group_size": None, "step_time_s": None})
        else:
            rows.append({"devices": devices, "group_size": best[0], "step_time_s": best[1]})
    return {"rows": rows}


def hybrid_shard_group_float(
    n_params,
    param_bytes,
    state_bytes_per_param,
    act_bytes_per_token,
    hbm_bytes_per_device,
    tokens_per_device,
    node_size,
    device_counts,
    peak_flops,
    mfu,
    intra_bandwidth,
    inter_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "all_on_fast_link")
    compute = 6.0 * n_params * tokens_per_device / (peak_flops * mfu)
    v = float(n_params) * param_bytes
    out = []
    for d in device_counts:
        found = []
        for s in (s for s in range(1, d + 1) if d % s == 0 and (node_size % s == 0 or s % node_size == 0)):
            if (
                state_bytes_per_param * n_params / s + act_bytes_per_token * tokens_per_device
                > hbm_bytes_per_device
            ):
                continue
            fast = s <= node_size or mistake == "all_on_fast_link"
            r = d // s
            step = compute + 3 * v * (1 - 1 / s) / (intra_bandwidth if fast else inter_bandwidth)
            step += 2 * v / s * (1 - 1 / r) / (intra_bandwidth if d <= node_size else inter_bandwidth)
            found.append((s, step))
        if not found:
            out.append({"devices": d, "group_size": None, "step_time_s": None})
            continue
        low = min(v_ for _, v_ in found)
        s, step = next((k, v_) for k, v_ in found if v_ <= low * (1 + 1e-12))
        out.append({"devices": d, "group_size": s, "step_time_s": step})
    return {"rows": out}


def sample_hybrid(draw: Draw, level: int) -> dict:
    """Device counts inside one node and across nodes, with many divisors, in two regimes of
    equal share. "across": the HBM needs a group larger than a node, not a multiple of it, and
    some device count has a divisor at or above that need that is no multiple of node_size (so
    ignoring the node rule picks it: NODE_RULE_BINDS). "in_node": the HBM needs at most half a
    node, so across nodes the fastest group is a whole node, larger than the smallest that fits
    (not_smallest). The slow link is 4x to 40x slower, so a group stays inside a node when
    memory allows."""
    node = draw.choice((4, 8, 8, 16))
    within = [d for d in (2, 4, 6, 8, 12, 16) if d <= node]  # counts inside one node
    across = [node * k for k in (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)]
    if draw.choice(("across", "in_node")) == "across":
        need = draw.integer(node + 1, 3 * node // 2)  # 3 node / 2 divides node * k when 3 | k
        # 3 node devices: the group 3 node / 2 is no multiple of the node, the allowed one 3 node;
        # every other count with an even k takes 2 node (so the group size varies)
        counts = sorted(
            {
                draw.choice(within),
                3 * node,
                *draw.sample([d for d in across if d != 3 * node], rows(level, 1) - 2),
            }
        )
        if not any(_rule_binds_at(d, need, node) for d in counts):
            raise Reject("no device count where the node rule binds")
    else:
        need = draw.integer(2, node // 2)
        counts = sorted({draw.choice(within), *draw.sample(across, rows(level, 1) - 1)})
    peak = peak_flops(draw, level)
    hbm, state = hbm_capacity_for_peak(draw, level, peak), draw.choice((16, 18))
    tokens = 1024 * draw.integer(1, 16)
    most = min(512, hbm // (2 * tokens * 1024))  # the activations take at most half the HBM
    if most < 16:
        raise Reject("the tokens' activations take over half the HBM")
    acts = tokens * 1024 * draw.integer(16, most)
    # the model size puts the real HBM between the memory of groups need - 1 and need
    room = hbm - acts
    n = n_params_between(draw, 4, Fraction(room * (need - 1), state), Fraction(room * need, state))
    fast = draw_in(draw, NVLINK, 10**6)
    return {
        "n_params": n,
        "param_bytes": 2,
        "state_bytes_per_param": state,
        "act_bytes_per_token": acts // tokens,
        "hbm_bytes_per_device": hbm,
        "tokens_per_device": tokens,
        "node_size": node,
        "device_counts": counts,
        "peak_flops": peak,
        "mfu": fraction(draw, level, 20, 60),
        "intra_bandwidth": fast,
        "inter_bandwidth": slower_link(draw, fast, 4, 40, NETWORK),
    }


def _rule_binds_at(devices: int, need: int, node: int) -> bool:
    """Whether a divisor of a multi-node device count at or above the need, no multiple of the
    node, lies below the smallest allowed one (all-gathers over the slow link either way, whose
    cost grows with the group: a solver ignoring the rule picks it)."""
    divisors = [s for s in range(need, devices + 1) if devices % s == 0]
    allowed = [s for s in divisors if s % node == 0]
    return bool(divisors) and (not allowed or divisors[0] < allowed[0]) and divisors[0] % node != 0


def _hybrid_rules(task: Task) -> str | None:
    i = task.inputs
    found = task.expected["rows"]
    if 2 * sum(row["group_size"] is None for row in found) > len(found):
        return "more than half of the rows are None"
    if len({row["group_size"] for row in found if row["group_size"] is not None}) < 2:
        return "the same group size for every device count"
    for d in i["device_counts"]:
        values = []
        for s in (
            s for s in range(1, d + 1) if d % s == 0 and (i["node_size"] % s == 0 or s % i["node_size"] == 0)
        ):
            memory = (
                Fraction(i["n_params"] * i["state_bytes_per_param"], s)
                + i["tokens_per_device"] * i["act_bytes_per_token"]
            )
            if near_tie(memory, i["hbm_bytes_per_device"]):
                return f"{d} devices, group {s}: memory on the HBM limit"
            if memory <= i["hbm_bytes_per_device"]:
                values.append(_group_step(i, d, s))
        values.sort()
        if len(values) > 1 and values[0] != values[1] and near_tie(values[0], values[1]):
            return f"{d} devices: two group sizes within 1e-9"
    return None


def _group_step(i: dict, devices: int, group: int, inside: bool | None = None) -> Fraction:
    """The step time of a group size; ``inside``: whether its all-gathers use the fast link
    (default: the key's rule, at most node_size devices)."""
    weights = i["n_params"] * i["param_bytes"]
    fast = group <= i["node_size"] if inside is None else inside
    link = i["intra_bandwidth"] if fast else i["inter_bandwidth"]
    replicas = devices // group
    return (
        6 * i["n_params"] * i["tokens_per_device"] / (i["peak_flops"] * i["mfu"])
        + 3 * weights * Fraction(group - 1, group) / link
        + 2
        * Fraction(weights, group)
        * Fraction(replicas - 1, replicas)
        / (i["intra_bandwidth"] if devices <= i["node_size"] else i["inter_bandwidth"])
    )


_L5 = """\
Hybrid sharded data parallelism on d devices, numbered in order and filling nodes of
`node_size` devices one after another (d <= node_size: all in one node): the devices form d / s
groups of s consecutive devices (s must divide d, and must also either divide node_size or be a
multiple of it, even when d <= node_size; across nodes a group thus lies within one node or spans
whole nodes). Inside a group the training state of a model of `n_params` parameters is sharded
evenly (`state_bytes_per_param` bytes per parameter in all); each step all-gathers the full bf16
weights (`param_bytes` bytes per parameter) within the group before the forward pass and again
before the backward pass, and reduce-scatters the gradients (same size as the weights) within the
group; then each device all-reduces its gradient shard with the devices holding the same shard in
the other groups. All collectives are
rings; a collective whose devices all lie in one node uses links of `intra_bandwidth` bytes/s per
device, any other `inter_bandwidth`; nothing overlaps. Each device trains on `tokens_per_device`
tokens per step (6 FLOPs per parameter per token, `peak_flops` FLOP/s, utilization `mfu`) and
holds `act_bytes_per_token` bytes of activations per token, plus its share of the state, in
`hbm_bytes_per_device` bytes. For each device count in `device_counts`, give the group size of
the fastest step that fits (on a tie, the smaller group) and that step time in seconds; None for
both if no group size fits."""


LEVEL_5 = scaling_level(
    "sharding",
    hybrid_shard_group,
    _L5,
    '{"rows": [{"devices": <int>, "group_size": <int> | None, "step_time_s": <number> | None}, ...]}'
    "  # one row per entry of `device_counts`, in order",
    hybrid_shard_group_float,
    "all_on_fast_link",
    sample=sample_hybrid,
    reject=_hybrid_rules,
    varying=("rows[].group_size",),
)


def _fits(i: dict, group: int) -> bool:
    memory = (
        Fraction(i["n_params"] * i["state_bytes_per_param"], group)
        + i["tokens_per_device"] * i["act_bytes_per_token"]
    )
    return memory <= i["hbm_bytes_per_device"]


def _best_ignoring_rule(i: dict, devices: int, aligned: bool) -> int | None:
    """The key's search over every divisor of the device count (the node rule dropped): a
    group's all-gathers on the fast link when it has at most node_size devices, or (aligned)
    only when each of its groups lies in one node."""
    node = i["node_size"]
    best = None
    for group in range(1, devices + 1):
        if devices % group or not _fits(i, group):
            continue
        inside = (node % group == 0 or devices <= node) if aligned else group <= node
        step = _group_step(i, devices, group, inside)
        if best is None or step < best[1]:
            best = (group, step)
    return None if best is None else best[0]


def node_rule_binds(task: Task) -> bool:
    """A row whose key differs from the group a solver ignoring the node rule picks (under
    either reading of which link a group that is no divisor of a node uses)."""
    i = task.inputs
    return any(
        row["group_size"]
        not in (_best_ignoring_rule(i, row["devices"], False), _best_ignoring_rule(i, row["devices"], True))
        for row in task.expected["rows"]
    )


def not_smallest(task: Task) -> bool:
    """A row whose group is not the smallest allowed group that fits."""
    i = task.inputs
    node = i["node_size"]
    for row in task.expected["rows"]:
        d = row["devices"]
        allowed = [
            s for s in range(1, d + 1) if d % s == 0 and (node % s == 0 or s % node == 0) and _fits(i, s)
        ]
        if allowed and row["group_size"] != allowed[0]:
            return True
    return False


FSDP_STEP_COMMUNICATION = five_levels(
    "fsdp_step_communication",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the collectives derived from what each device must hold when; L3: a fixed global "
    "batch per device count, compute and communication back to back, fits or not; L4: the "
    "largest model under memory and a communication budget, and which limits it; L5: "
    "hybrid sharding, the group size of the fastest step per device count (memory forces "
    "the group up, the slow link pulls it into a node, the groups' all-reduce shrinks with "
    "it; in about half the instances the rule that a group divide a node or span whole nodes "
    "decides a row, in the other half a whole node beats the smallest group that fits)",
    branches=(
        Branch("node_rule_binds", node_rule_binds, Fraction(1, 3), (5,)),
        Branch("not_smallest", not_smallest, Fraction(1, 3), (5,)),
    ),
)
