"""The model_flops_utilization family of flops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import (
    chip_count,
    fraction,
    letters,
    n_params,
    peak_flops,
    rows,
    step_time,
    tokens_per_step,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, scaling_level, some_none
from exactgrade.domains.scaling.flops.shared import _measured_physical
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def model_flops_utilization(n_params, runs):
    """MFU of measured training steps, counting 6N FLOPs per token."""
    from fractions import Fraction

    rows = []
    for run in runs:
        tokens_per_s = Fraction(run["tokens_per_step"]) / run["step_time_s"]
        rows.append(
            {
                "run": run["name"],
                "tokens_per_s": tokens_per_s,
                "mfu": 6 * n_params * tokens_per_s / (run["chips"] * run["peak_flops"]),
            }
        )
    return {"rows": rows}


def model_flops_utilization_float(n_params, runs, mistake=None):
    known_mistake(mistake, "inference_flops")
    per_token = 2.0 if mistake == "inference_flops" else 6.0
    rows = []
    for r in runs:
        step_flops = per_token * n_params * r["tokens_per_step"]
        rows.append(
            {
                "run": r["name"],
                "tokens_per_s": r["tokens_per_step"] / r["step_time_s"],
                "mfu": step_flops / r["step_time_s"] / r["peak_flops"] / r["chips"],
            }
        )
    return {"rows": rows}


def sample_model_flops_utilization(draw: Draw, level: int) -> dict:
    params = n_params(draw, level)
    runs = []
    for name in letters("run", rows(level, 2)):
        chips, peak = chip_count(draw, level), peak_flops(draw, level)
        tokens = tokens_per_step(draw, level)
        runs.append(
            {
                "name": name,
                "chips": chips,
                "peak_flops": peak,
                "tokens_per_step": tokens,
                "step_time_s": step_time(draw, level, 6 * params * tokens, chips * peak),
            }
        )
    return {"n_params": params, "runs": runs}


LEVEL_1 = scaling_level(
    "flops",
    model_flops_utilization,
    """\
A dense model with `n_params` parameters counts 6*n_params training FLOPs per token. For each
measured run in `runs` (chips, peak FLOP/s per chip, tokens per optimizer step, and measured
seconds per step), give the training throughput in tokens per second and the model FLOPs
utilization (MFU).""",
    '{"rows": [{"run": <str>, "tokens_per_s": <number>, "mfu": <number>}, ...]}  # one row per run, in order',
    model_flops_utilization_float,
    "inference_flops",
    sample=sample_model_flops_utilization,
    tags=("headline:mfu",),
)


def mfu_from_batches(n_params, runs):
    """Level 1's question with the tokens per step derived from sequences per step and their length."""
    from fractions import Fraction

    rows = []
    for run in runs:
        tokens_per_s = Fraction(run["sequences_per_step"] * run["seq_len"]) / run["step_time_s"]
        rows.append(
            {
                "run": run["name"],
                "tokens_per_s": tokens_per_s,
                "mfu": 6 * n_params * tokens_per_s / (run["chips"] * run["peak_flops"]),
            }
        )
    return {"rows": rows}


def mfu_from_batches_float(n_params, runs, mistake=None):
    known_mistake(mistake, "sequences_as_tokens")
    rows = []
    for r in runs:
        tokens = r["sequences_per_step"] * (1 if mistake == "sequences_as_tokens" else r["seq_len"])
        rows.append(
            {
                "run": r["name"],
                "tokens_per_s": tokens / r["step_time_s"],
                "mfu": 6.0 * n_params / r["peak_flops"] * tokens / r["step_time_s"] / r["chips"],
            }
        )
    return {"rows": rows}


def sample_mfu_batches(draw: Draw, level: int) -> dict:
    params = draw.integer(10**9, 10**11)
    runs = []
    for name in letters("run", 3):
        chips, peak = draw.integer(64, 8192), peak_flops(draw, level)
        sequences, length = draw.integer(64, 4096), 1024 * draw.integer(1, 32)
        ideal = Fraction(6 * params * sequences * length, chips * peak) / fraction(draw, 3, 25, 65)
        runs.append(
            {
                "name": name,
                "chips": chips,
                "peak_flops": peak,
                "sequences_per_step": sequences,
                "seq_len": length,
                "step_time_s": Fraction(max(1, round(ideal * 1000)), 1000),
            }
        )
    return {"n_params": params, "runs": runs}


_MFU_L2 = """\
A dense model with `n_params` parameters trains on sequences of tokens. For each measured run in
`runs` (chips, peak FLOP/s per chip, sequences per optimizer step, the length `seq_len` of every
sequence in tokens, and measured seconds per step), give the training throughput in tokens per
second and the model FLOPs utilization (training FLOPs of the parameters only)."""


LEVEL_2 = scaling_level(
    "flops",
    mfu_from_batches,
    _MFU_L2,
    '{"rows": [{"run": <str>, "tokens_per_s": <number>, "mfu": <number>}, ...]}  # one row per run, in order',
    mfu_from_batches_float,
    "sequences_as_tokens",
    sample=sample_mfu_batches,
    reject=_measured_physical,
)


# ================================================================ model_flops_utilization
def mfu_at_chip_counts(n_params, tokens_per_step, peak_flops, chips, mfu, comm_s, chip_counts):
    """From a reported MFU at one chip count: the compute chip-seconds of a step (the step minus its
    fixed communication time), then the step time and MFU at other chip counts."""
    from fractions import Fraction

    step = Fraction(6 * n_params * tokens_per_step) / (chips * peak_flops * mfu)
    work = (step - comm_s) * chips  # chip-seconds of compute per step
    rows = []
    for n in chip_counts:
        new_step = work / n + comm_s
        rows.append(
            {
                "chips": n,
                "step_time_s": new_step,
                "mfu": Fraction(6 * n_params * tokens_per_step) / (new_step * n * peak_flops),
            }
        )
    return {"rows": rows}


def mfu_at_chip_counts_float(
    n_params, tokens_per_step, peak_flops, chips, mfu, comm_s, chip_counts, mistake=None
):
    known_mistake(mistake, "communication_scales_too")
    step = 6.0 * n_params * tokens_per_step / peak_flops / mfu / chips
    rows = []
    for n in chip_counts:
        if mistake == "communication_scales_too":
            new_step = step * chips / n
        else:
            new_step = comm_s + (step - comm_s) * (chips / n)
        rows.append(
            {
                "chips": n,
                "step_time_s": new_step,
                "mfu": 6.0 * n_params * tokens_per_step / peak_flops / n / new_step,
            }
        )
    return {"rows": rows}


def sample_mfu_chips(draw: Draw, level: int) -> dict:
    params, tokens = draw.integer(10**9, 10**11), 1024 * draw.integer(256, 8192)
    chips, peak = draw.integer(64, 4096), peak_flops(draw, level)
    mfu = fraction(draw, level, 30, 60)
    step = Fraction(6 * params * tokens) / (chips * peak * mfu)
    comm = Fraction(math.floor(step * Fraction(draw.integer(5, 60), 100) * 1000), 1000)
    if comm <= 0:
        raise Reject("the communication time rounds to zero")
    counts = sorted({max(1, chips * draw.integer(10, 800) // 100) for _ in range(2 + level)} - {chips})
    return {
        "n_params": params,
        "tokens_per_step": tokens,
        "peak_flops": peak,
        "chips": chips,
        "mfu": mfu,
        "comm_s": comm,
        "chip_counts": counts,
    }


_MFU_L3 = """\
A training run of a dense model with `n_params` parameters (6 FLOPs per parameter per token)
processes `tokens_per_step` tokens per step on `chips` chips of `peak_flops` FLOP/s and reports a
model FLOPs utilization of `mfu`. Each of its steps spends `comm_s` seconds in communication that
overlaps nothing and takes the same time at any chip count; the rest of the step is compute, split
evenly over the chips. With the same tokens per step, give for each chip count in `chip_counts`
the step time in seconds and the MFU."""


LEVEL_3 = scaling_level(
    "flops",
    mfu_at_chip_counts,
    _MFU_L3,
    '{"rows": [{"chips": <int>, "step_time_s": <number>, "mfu": <number>}, ...]}'
    "  # one row per entry of `chip_counts`, in order",
    mfu_at_chip_counts_float,
    "communication_scales_too",
    sample=sample_mfu_chips,
)


def most_chips_for_mfu(n_params, runs, min_mfu):
    """Most chips at which each run's measured throughput still means an MFU of at least min_mfu."""
    import math
    from fractions import Fraction

    rows = []
    for run in runs:
        flops_per_s = 6 * n_params * Fraction(run["tokens_per_step"]) / run["step_time_s"]
        chips = math.floor(flops_per_s / (run["peak_flops"] * min_mfu))
        rows.append({"run": run["name"], "max_chips": chips if chips >= 1 else None})
    return {"rows": rows}


def most_chips_for_mfu_float(n_params, runs, min_mfu, mistake=None):
    known_mistake(mistake, "inference_flops")
    per_token = 2.0 if mistake == "inference_flops" else 6.0
    rows = []
    for r in runs:
        c = math.floor(
            per_token * n_params * r["tokens_per_step"] / r["step_time_s"] / r["peak_flops"] / min_mfu
        )
        rows.append({"run": r["name"], "max_chips": c if c >= 1 else None})
    return {"rows": rows}


def sample_mfu_floor(draw: Draw, level: int) -> dict:
    """In a third of the instances the last run is so slow that even one chip stays below the
    floor (None)."""
    params = n_params(draw, level)
    min_mfu = Fraction(draw.integer(20, 60), 100)
    names = ("run_a", "run_b", "run_c", "run_d", "run_e")[: 2 + level // 2]
    slow = draw.chance(1, 3)
    runs = []
    for name in names:
        peak = sample.peak_flops(draw, level)
        tokens = 1024 * draw.integer(256, 4096 * level)
        chips = draw.integer(8, 4096)
        step = Fraction(6 * params * tokens, chips * peak) / Fraction(draw.integer(20, 70), 100)
        if slow and name == names[-1]:  # below the floor on a single chip
            step = Fraction(6 * params * tokens, peak) / (min_mfu * Fraction(draw.integer(50, 95), 100))
        runs.append(
            {
                "name": name,
                "peak_flops": peak,
                "tokens_per_step": tokens,
                "step_time_s": Fraction(max(1, round(step * 1000)), 1000),
            }
        )
    return {"n_params": params, "runs": runs, "min_mfu": min_mfu}


def _mfu_edges(task: Task) -> str | None:
    i = task.inputs
    for r in i["runs"]:
        if near_integer(
            6
            * i["n_params"]
            * Fraction(r["tokens_per_step"])
            / r["step_time_s"]
            / (r["peak_flops"] * i["min_mfu"])
        ):
            return f"{r['name']}: the chip count sits on an integer"
    return None


_MFU = """\
A dense model with `n_params` parameters counts 6*n_params training FLOPs per token. For each
measured run in `runs` (peak FLOP/s per chip, tokens per optimizer step, and measured seconds per
step), give the most chips the run could have used while its model FLOPs utilization is at least
`min_mfu` (same tokens per step and step time), or None if not even one chip would reach it."""


LEVEL_4 = scaling_level(
    "flops",
    most_chips_for_mfu,
    _MFU,
    '{"rows": [{"run": <str>, "max_chips": <int> | None}, ...]}  # one row per run, in order',
    most_chips_for_mfu_float,
    "inference_flops",
    sample=sample_mfu_floor,
    reject=_mfu_edges,
)


def most_chips_from_two_runs(n_params, tokens_per_step, peak_flops, runs, mfu_floors, max_chips):
    """The step time as compute split over the chips plus a fixed communication time, fitted to two
    measured runs; then the most chips keeping each MFU floor, and the throughput there."""
    import math
    from fractions import Fraction

    (n1, s1), (n2, s2) = ((r["chips"], r["step_time_s"]) for r in runs)
    work = (s1 - s2) / (Fraction(1, n1) - Fraction(1, n2))  # chip-seconds of compute per step
    comm = s1 - work / n1
    flops = 6 * n_params * tokens_per_step
    rows = []
    for floor in mfu_floors:
        # flops / ((work + comm * n) * peak) >= floor
        n = min(max_chips, math.floor((flops / (floor * peak_flops) - work) / comm))
        if n < 1:
            rows.append({"mfu_floor": floor, "max_chips": None, "tokens_per_s": None})
        else:
            rows.append(
                {"mfu_floor": floor, "max_chips": n, "tokens_per_s": tokens_per_step / (work / n + comm)}
            )
    return {"rows": rows}


def most_chips_from_two_runs_float(
    n_params, tokens_per_step, peak_flops, runs, mfu_floors, max_chips, mistake=None
):
    """Every chip count tried in floats, the model fitted by solving the two equations directly."""
    known_mistake(mistake, "perfect_scaling_from_first_run")
    n1, s1 = runs[0]["chips"], runs[0]["step_time_s"]
    n2, s2 = runs[1]["chips"], runs[1]["step_time_s"]
    comm = (s2 * n2 - s1 * n1) / (n2 - n1)
    work = (s1 - comm) * n1
    if mistake == "perfect_scaling_from_first_run":
        work, comm = s1 * n1, 0.0
    rows = []
    for f in mfu_floors:

        def keeps(n, f=f):
            return 6.0 * n_params * tokens_per_step / ((work / n + comm) * n * peak_flops) >= f

        best = None
        if keeps(1):  # the MFU falls with the chip count: bisect for the last count that keeps it
            low, high = 1, max_chips + 1
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if keeps(middle) else (low, middle)
            best = low
        rows.append(
            {
                "mfu_floor": f,
                "max_chips": best,
                "tokens_per_s": None if best is None else tokens_per_step / (work / best + comm),
            }
        )
    return {"rows": rows}


def sample_two_runs(draw: Draw, level: int) -> dict:
    params, tokens = draw.integer(10**9, 10**11), 1024 * draw.integer(256, 8192)
    peak = peak_flops(draw, level)
    flops = 6 * params * tokens
    work = Fraction(flops, peak) / fraction(draw, 3, 40, 70)  # chip-seconds at the kernels' efficiency
    comm = work / draw.integer(200, 20_000)
    n1 = draw.integer(16, 512)
    n2 = n1 * draw.integer(2, 8)
    s1 = Fraction(round((work / n1 + comm) * 10**6), 10**6)
    s2 = Fraction(round((work / n2 + comm) * 10**6), 10**6)
    fitted_work = (s1 - s2) / (Fraction(1, n1) - Fraction(1, n2))
    fitted_comm = s1 - fitted_work / n1
    if fitted_comm <= 0:
        raise Reject("the two runs fit no positive communication time")
    floors = set()
    for _ in range(2 + level // 2):
        n = draw.integer(1, 20 * n2)
        floors.add(
            Fraction(
                max(1, math.floor(Fraction(flops) / ((fitted_work + fitted_comm * n) * peak) * 10_000)),
                10_000,
            )
        )
    floors.add(
        Fraction(
            min(9999, math.floor(Fraction(flops) / ((fitted_work + fitted_comm) * peak) * 10_000) + 1), 10_000
        )
    )
    return {
        "n_params": params,
        "tokens_per_step": tokens,
        "peak_flops": peak,
        "runs": [{"chips": n1, "step_time_s": s1}, {"chips": n2, "step_time_s": s2}],
        "mfu_floors": sorted(floors),
        "max_chips": 50 * n2,
    }


def _two_runs_rules(task: Task) -> str | None:
    i = task.inputs
    (n1, s1), (n2, s2) = ((r["chips"], r["step_time_s"]) for r in i["runs"])
    work = (s1 - s2) / (Fraction(1, n1) - Fraction(1, n2))
    comm = s1 - work / n1
    if Fraction(6 * i["n_params"] * i["tokens_per_step"]) / ((work + comm) * i["peak_flops"]) >= 1:
        return "the fitted MFU on one chip is at least 1"
    for f in i["mfu_floors"]:
        bound = (Fraction(6 * i["n_params"] * i["tokens_per_step"]) / (f * i["peak_flops"]) - work) / comm
        if near_integer(bound):
            return f"floor {f}: the chip bound sits on an integer"
    if not any(
        row["max_chips"] is not None and row["max_chips"] < i["max_chips"] for row in task.expected["rows"]
    ):
        return "no floor binds below the chip cap"
    return None


_MFU_L5 = """\
Two measured runs in `runs` train the same dense model of `n_params` parameters (6 FLOPs per
parameter per token) with the same `tokens_per_step` tokens per step on different chip counts, chips
of `peak_flops` FLOP/s, and give their measured step times. Model a step as a fixed amount of
compute split evenly over the chips plus a communication time that is the same at every chip count,
both fitted exactly to the two runs. MFU = 6 * n_params * tokens per second / (chips * peak_flops).
For each floor in `mfu_floors`, give the largest chip count (1 to `max_chips`) whose MFU under this
model is at least the floor, and the tokens per second at that count; None for both if not even
one chip reaches the floor."""


LEVEL_5 = scaling_level(
    "flops",
    most_chips_from_two_runs,
    _MFU_L5,
    '{"rows": [{"mfu_floor": <number>, "max_chips": <int> | None, "tokens_per_s": <number> | None}, ...]}'
    "  # one row per floor, in order",
    most_chips_from_two_runs_float,
    "perfect_scaling_from_first_run",
    sample=sample_two_runs,
    reject=_two_runs_rules,
)


MFU_BRANCHES = (
    Branch("none", some_none, Fraction(1, 8), (4,)),
    Branch("none at L5", some_none, Fraction(1, 4), (5,)),
)


MODEL_FLOPS_UTILIZATION = five_levels(
    "model_flops_utilization",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: tokens per step derived from sequences and their length; L3: from a reported MFU and a fixed "
    "communication time, the step time and MFU at other chip counts; L4: the most chips at which "
    "each run keeps an MFU floor (None); L5: a compute-plus-communication step model fitted to "
    "two measured runs, then the most chips keeping each MFU floor and their throughput (None)",
    branches=MFU_BRANCHES,
)
