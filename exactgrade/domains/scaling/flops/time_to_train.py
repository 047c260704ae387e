"""The time_to_train family of flops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    chip_count,
    fraction,
    letters,
    n_params,
    n_tokens,
    peak_flops,
    rows,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    scaling_level,
    smallest_satisfying,
    some_none,
)
from exactgrade.domains.scaling.flops.shared import _measured_physical
from exactgrade.domains.scaling.hardware import HBM_CAPACITY, SHARED_STORAGE, draw_in
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def time_to_train(n_params, n_tokens, clusters):
    """6ND training FLOPs divided by what each cluster sustains."""
    from fractions import Fraction

    flops = 6 * n_params * n_tokens
    rows = []
    for cluster in clusters:
        sustained = cluster["chips"] * cluster["peak_flops"] * cluster["mfu"]
        rows.append(
            {
                "cluster": cluster["name"],
                "training_flops": Fraction(flops),
                "time_days": Fraction(flops) / sustained / 86400,
            }
        )
    return {"rows": rows}


def time_to_train_float(n_params, n_tokens, clusters, mistake=None):
    known_mistake(mistake, "forward_only")
    per_token = 2.0 if mistake == "forward_only" else 6.0
    rows = []
    for c in clusters:
        days = (per_token * n_params / c["chips"]) * (n_tokens / c["peak_flops"]) / c["mfu"] / 24 / 3600
        rows.append(
            {"cluster": c["name"], "training_flops": per_token * n_tokens * n_params, "time_days": days}
        )
    return {"rows": rows}


def sample_time_to_train(draw: Draw, level: int) -> dict:
    clusters = [
        {
            "name": name,
            "chips": chip_count(draw, level),
            "peak_flops": peak_flops(draw, level),
            "mfu": fraction(draw, level, 20, 60),
        }
        for name in letters("cluster", rows(level, 2))
    ]
    return {"n_params": n_params(draw, level), "n_tokens": n_tokens(draw, level), "clusters": clusters}


LEVEL_1 = scaling_level(
    "flops",
    time_to_train,
    """\
A dense model with `n_params` parameters is trained on `n_tokens` tokens (6*N*D training FLOPs).
For each cluster in `clusters` (number of chips, peak FLOP/s per chip, and the model FLOPs
utilization `mfu` it sustains), give the total training FLOPs and the time to train in days
(1 day = 86400 s).""",
    '{"rows": [{"cluster": <str>, "training_flops": <number>, "time_days": <number>}, ...]}'
    "  # one row per cluster, in order",
    time_to_train_float,
    "forward_only",
    sample=sample_time_to_train,
    tags=("headline:time_to_train",),
)


def days_from_measured_steps(n_params, n_tokens, clusters):
    """Days and MFU per cluster from a measured step (tokens per step and seconds per step)."""
    from fractions import Fraction

    rows = []
    for c in clusters:
        tokens_per_s = Fraction(c["tokens_per_step"]) / c["step_time_s"]
        rows.append(
            {
                "cluster": c["name"],
                "time_days": n_tokens / tokens_per_s / 86400,
                "mfu": 6 * n_params * tokens_per_s / (c["chips"] * c["peak_flops"]),
            }
        )
    return {"rows": rows}


def days_from_measured_steps_float(n_params, n_tokens, clusters, mistake=None):
    known_mistake(mistake, "forward_only_mfu")
    per_token = 2.0 if mistake == "forward_only_mfu" else 6.0
    rows = []
    for c in clusters:
        steps = n_tokens / c["tokens_per_step"]
        rows.append(
            {
                "cluster": c["name"],
                "time_days": steps * c["step_time_s"] / 86400,
                "mfu": per_token
                * n_params
                / c["step_time_s"]
                * c["tokens_per_step"]
                / c["peak_flops"]
                / c["chips"],
            }
        )
    return {"rows": rows}


def sample_measured_steps(draw: Draw, level: int) -> dict:
    params = draw.integer(10**9, 10**11)
    clusters = []
    for name in letters("cluster", 3):
        chips, peak = draw.integer(64, 8192), peak_flops(draw, level)
        tokens = 1024 * draw.integer(256, 4096)
        ideal = Fraction(6 * params * tokens, chips * peak) / fraction(draw, 3, 25, 60)
        step = Fraction(max(1, round(ideal * 1000)), 1000)
        clusters.append(
            {"name": name, "chips": chips, "peak_flops": peak, "tokens_per_step": tokens, "step_time_s": step}
        )
    return {"n_params": params, "n_tokens": n_tokens(draw, level), "clusters": clusters}


_TTT_L2 = """\
A dense model with `n_params` parameters is to be trained on `n_tokens` tokens. Each cluster in
`clusters` has `chips` chips of `peak_flops` FLOP/s and was measured running this training:
`tokens_per_step` tokens per optimizer step in `step_time_s` seconds per step. Give for each
cluster the time to train in days (86400 s) at the measured speed, and its model FLOPs utilization
(training FLOPs of the parameters only)."""


LEVEL_2 = scaling_level(
    "flops",
    days_from_measured_steps,
    _TTT_L2,
    '{"rows": [{"cluster": <str>, "time_days": <number>, "mfu": <number>}, ...]}  # one row per cluster',
    days_from_measured_steps_float,
    "forward_only_mfu",
    sample=sample_measured_steps,
    reject=_measured_physical,
)


# ================================================================ time_to_train
def train_days_with_checkpoints(n_params, tokens_per_step, steps, checkpoint_every_steps, clusters):
    """Days per cluster: compute of every step, plus a pause to write the Adam state (14 bytes per
    parameter) after every checkpoint_every_steps-th step."""
    from fractions import Fraction

    rows = []
    for c in clusters:
        step = Fraction(6 * n_params * tokens_per_step) / (c["chips"] * c["peak_flops"] * c["mfu"])
        pause = Fraction(14 * n_params, c["checkpoint_write_bandwidth"])
        total = steps * step + steps // checkpoint_every_steps * pause
        rows.append({"cluster": c["name"], "time_days": total / 86400})
    return {"rows": rows}


def train_days_with_checkpoints_float(
    n_params, tokens_per_step, steps, checkpoint_every_steps, clusters, mistake=None
):
    known_mistake(mistake, "checkpoint_weights_only")
    state = 2.0 if mistake == "checkpoint_weights_only" else 14.0
    rows = []
    for c in clusters:
        compute = 6.0 * n_params * tokens_per_step * steps / c["peak_flops"] / c["mfu"] / c["chips"]
        writes = (
            math.floor(steps / checkpoint_every_steps) * state * n_params / c["checkpoint_write_bandwidth"]
        )
        rows.append({"cluster": c["name"], "time_days": (compute + writes) / 86400})
    return {"rows": rows}


def sample_checkpoints(draw: Draw, level: int) -> dict:
    steps, every = draw.integer(10_000, 500_000), draw.integer(100, 5000)
    if steps % every == 0:
        steps += draw.integer(1, every - 1)
    clusters = [
        {
            "name": name,
            "chips": draw.integer(64, 2**13),
            "peak_flops": peak_flops(draw, level),
            "mfu": fraction(draw, level, 20, 60),
            "checkpoint_write_bandwidth": draw_in(draw, SHARED_STORAGE.within(high=10**11), 10**6),
        }
        for name in letters("cluster", 2 + level // 2)
    ]
    return {
        "n_params": draw.integer(10**9, 2 * 10**11),
        "tokens_per_step": 1024 * draw.integer(256, 8192),
        "steps": steps,
        "checkpoint_every_steps": every,
        "clusters": clusters,
    }


_TTT_L3 = """\
A dense model with `n_params` parameters trains for `steps` optimizer steps of `tokens_per_step`
tokens each (6 FLOPs per parameter per token). On each cluster in `clusters` (`chips` chips of
`peak_flops` FLOP/s sustaining the fraction `mfu` of peak), training pauses after every
`checkpoint_every_steps`-th step (and never otherwise) to write a checkpoint of the full Adam
training state to storage at `checkpoint_write_bandwidth` bytes/s; nothing else stops training.
Give the wall-clock time to train on each cluster, in days (86400 s)."""


LEVEL_3 = scaling_level(
    "flops",
    train_days_with_checkpoints,
    _TTT_L3,
    '{"rows": [{"cluster": <str>, "time_days": <number>}, ...]}  # one row per cluster, in order',
    train_days_with_checkpoints_float,
    "checkpoint_weights_only",
    sample=sample_checkpoints,
)


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


def chips_for_deadline_float(n_params, n_tokens, deadline_days, clusters, mistake=None):
    known_mistake(mistake, "forward_only")
    per_token = 2.0 if mistake == "forward_only" else 6.0
    seconds = deadline_days * 24 * 3600
    rows = []
    for c in clusters:
        chips = smallest_satisfying(
            lambda k, c=c: k * c["peak_flops"] * c["mfu"] * seconds >= per_token * n_params * n_tokens,
            c["max_chips"],
        )
        rows.append({"cluster": c["name"], "min_chips": chips})
    return {"rows": rows}


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


DEADLINE_L4 = """\
A dense model with `n_params` parameters is to be trained on `n_tokens` tokens (6*N*D training
FLOPs) within `deadline_days` days (1 day = 86400 s). For each cluster type in `clusters` (peak
FLOP/s per chip, the model FLOPs utilization `mfu` it sustains, and the most chips `max_chips`
available), give the fewest chips that finish in time, or None if even `max_chips` chips cannot."""


LEVEL_4 = scaling_level(
    "flops",
    chips_for_deadline,
    DEADLINE_L4,
    '{"rows": [{"cluster": <str>, "min_chips": <int> | None}, ...]}  # one row per cluster, in order',
    chips_for_deadline_float,
    "forward_only",
    sample=sample_deadline,
    reject=_deadline_edges,
)


def fewest_chips_for_deadline(
    n_params,
    tokens_per_step,
    steps,
    achieved_flops_per_chip,
    grad_bytes,
    link_bandwidth,
    max_chips,
    deadline_days,
):
    """Fewest data-parallel chips meeting each deadline: forward, then the backward overlapped with
    the ring all-reduce of the gradients (exposed once it outlasts the backward)."""
    from fractions import Fraction

    def step(n):
        forward = Fraction(2 * n_params * tokens_per_step, n * achieved_flops_per_chip)
        allreduce = Fraction(2 * grad_bytes * n_params * (n - 1), n * link_bandwidth)
        return forward + max(2 * forward, allreduce)

    rows = []
    for deadline in deadline_days:
        budget = deadline * 86400 / steps  # seconds per step
        if step(max_chips) > budget:  # the step time only falls with more chips: none is enough
            rows.append({"deadline_days": deadline, "min_chips": None, "time_days": None})
            continue
        low, high = 0, max_chips
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if step(middle) <= budget else (middle, high)
        rows.append({"deadline_days": deadline, "min_chips": high, "time_days": steps * step(high) / 86400})
    return {"rows": rows}


def fewest_chips_for_deadline_float(
    n_params,
    tokens_per_step,
    steps,
    achieved_flops_per_chip,
    grad_bytes,
    link_bandwidth,
    max_chips,
    deadline_days,
    mistake=None,
):
    """The closed form of each regime: the all-reduce hidden (step = 6NT/(n a)), or exposed (step =
    2NT/(n a) + 2V(n-1)/(n bw), which tends to 2V/bw)."""
    known_mistake(mistake, "allreduce_always_hidden")
    work = 2.0 * n_params * tokens_per_step / achieved_flops_per_chip  # forward chip-seconds
    ring = 2.0 * grad_bytes * n_params / link_bandwidth

    def step(n):
        exposed = ring * (n - 1) / n
        return work / n + (
            2 * work / n if mistake == "allreduce_always_hidden" else max(2 * work / n, exposed)
        )

    rows = []
    for d in deadline_days:
        target = d * 86400.0 / steps
        n = math.ceil(3 * work / target)
        if (
            mistake != "allreduce_always_hidden" and ring * (n - 1) / n > 2 * work / n
        ):  # exposed: solve the other form
            n = math.ceil((work - ring) / (target - ring)) if target > ring else max_chips + 1
        n = max(1, n)
        if n > max_chips:
            rows.append({"deadline_days": d, "min_chips": None, "time_days": None})
        else:
            rows.append({"deadline_days": d, "min_chips": n, "time_days": steps * step(n) / 86400})
    return {"rows": rows}


def sample_deadline_chips(draw: Draw, level: int) -> dict:
    """Deadlines on both sides of the chip count where the all-reduce stops hiding behind the
    backward pass, and one below the communication floor (None)."""
    grad_bytes, bandwidth = draw.choice((2, 4)), 10**6 * draw.integer(10_000, 400_000)
    # plain data parallelism keeps a whole replica on every chip: bf16 weights, the gradient and
    # Adam's 12 bytes of fp32 state fit one chip's HBM (a 62B replica with fp32 gradients is 371 GB
    # before any optimizer state, more than any part holds; the crossover below is free of params)
    params = draw.integer(10**9, HBM_CAPACITY.high // (2 + grad_bytes + 12))
    tokens = 1024 * draw.integer(64, 4096)
    achieved = 10**9 * draw.integer(50_000, 1_000_000)
    steps = draw.integer(10_000, 300_000)
    work = Fraction(2 * params * tokens, achieved)
    ring = Fraction(2 * grad_bytes * params, bandwidth)
    # hidden while ring*(n-1) <= 2*work: the crossover chip count
    cross = 2 * work / ring + 1
    if not 4 <= cross <= 2**14:
        raise Reject("the all-reduce crossover is out of range")
    max_chips = math.floor(cross * draw.integer(4, 40))
    deadlines = set()
    for _ in range(2 + level // 2):
        n = max(1, math.floor(cross * Fraction(draw.integer(10, 300), 100)))
        step = work / n + max(2 * work / n, ring * (n - 1) / n)
        deadlines.add(Fraction(math.ceil(step * steps / 86400 * 1000), 1000))
    floor_days = ring * steps / 86400
    deadlines.add(Fraction(math.floor(floor_days * Fraction(draw.integer(50, 99), 100) * 1000) + 1, 1000))
    return {
        "n_params": params,
        "tokens_per_step": tokens,
        "steps": steps,
        "achieved_flops_per_chip": achieved,
        "grad_bytes": grad_bytes,
        "link_bandwidth": bandwidth,
        "max_chips": max_chips,
        "deadline_days": sorted(deadlines),
    }


def _deadline_chip_rules(task: Task) -> str | None:
    i = task.inputs
    work = Fraction(2 * i["n_params"] * i["tokens_per_step"], i["achieved_flops_per_chip"])
    ring = Fraction(2 * i["grad_bytes"] * i["n_params"], i["link_bandwidth"])
    regimes = set()
    for d, row in zip(i["deadline_days"], task.expected["rows"], strict=True):
        target = d * 86400 / i["steps"]
        for bound in (3 * work / target, (work - ring) / (target - ring) if target > ring else Fraction(0)):
            if bound > 0 and near_integer(bound):
                return f"deadline {d}: a chip bound sits on an integer"
        n = row["min_chips"]
        if n is None:
            regimes.add("none")
        else:
            regimes.add("hidden" if ring * (n - 1) <= 2 * work else "exposed")
            if n > 1 and near_tie(
                *(lambda m: (work / m + max(2 * work / m, ring * (m - 1) / m), target))(n - 1)
            ):
                return f"deadline {d}: one chip fewer sits on the deadline"
    if len(regimes - {"none"}) < 2:
        return "every deadline falls in one regime"
    return None


_TTT_L5 = """\
A dense model with `n_params` parameters trains with plain data parallelism for `steps` optimizer
steps of `tokens_per_step` tokens each, the tokens of a step split evenly over the n chips. Each
chip computes its share at `achieved_flops_per_chip` FLOP/s: the forward pass costs 2 FLOPs per
parameter per token and the backward pass 4. After its forward pass a chip starts the backward pass
and, at the same moment, a ring all-reduce of the full gradient (`grad_bytes` bytes per parameter)
over the n chips at `link_bandwidth` bytes/s per chip; the step ends when both the backward pass
and the all-reduce are done. For each deadline in `deadline_days`, give the fewest chips n (1 to
`max_chips`) that train within the deadline (1 day = 86400 s) and the training time with them, in
days; None for both if even `max_chips` chips are too slow."""


LEVEL_5 = scaling_level(
    "flops",
    fewest_chips_for_deadline,
    _TTT_L5,
    '{"rows": [{"deadline_days": <number>, "min_chips": <int> | None, '
    '"time_days": <number> | None}, ...]}  # one row per deadline, in order',
    fewest_chips_for_deadline_float,
    "allreduce_always_hidden",
    sample=sample_deadline_chips,
    reject=_deadline_chip_rules,
)


TIME_TO_TRAIN_BRANCHES = (Branch("none", some_none, Fraction(1, 8), (4, 5)),)


TIME_TO_TRAIN = five_levels(
    "time_to_train",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: days and MFU from a measured step per cluster; L3: wall-clock days with pauses to write the "
    "Adam state every k steps; L4: the fewest chips per cluster for a deadline (None above the "
    "cap); L5: the fewest data-parallel chips per deadline when the gradient all-reduce overlaps "
    "the backward pass (hidden at few chips, exposed at many; None below the communication floor)",
    branches=TIME_TO_TRAIN_BRANCHES,
)
