"""The matmul_fraction_of_peak family of roofline: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import (
    BF16_ONLY,
    chip_inputs,
    peak_and_bandwidth,
    round_numbers,
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
from exactgrade.domains.scaling.hardware import SHARED_MEMORY, require
from exactgrade.family import Branch, Draw, Level, Reject, five_levels
from exactgrade.task import Task


def matmul_fraction_of_peak(shapes, bytes_per_value, peak_flops, hbm_bandwidth):
    """A[m, k] @ B[k, n]: roofline time and the fraction of peak FLOP/s it achieves."""
    from fractions import Fraction

    rows = []
    for m, k, n in shapes:
        flops = 2 * m * k * n
        traffic = bytes_per_value * (m * k + k * n + m * n)
        time_s = max(Fraction(flops) / peak_flops, Fraction(traffic) / hbm_bandwidth)
        rows.append(
            {
                "shape": [m, k, n],
                "time_s": time_s,
                "fraction_of_peak": Fraction(flops) / time_s / peak_flops,
            }
        )
    return {"rows": rows}


def matmul_fraction_of_peak_float(shapes, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "uncapped_fraction")
    rows = []
    for m, k, n in shapes:
        intensity = 2.0 * m * k * n / (bytes_per_value * (m * k + k * n + m * n))
        fraction = intensity / (peak_flops / hbm_bandwidth)
        if mistake != "uncapped_fraction":
            fraction = min(1.0, fraction)
        time = (2.0 * m * k * n / peak_flops) / fraction
        rows.append({"shape": [m, k, n], "time_s": time, "fraction_of_peak": fraction})
    return {"rows": rows}


def sample_matmul_fraction_of_peak(draw: Draw, level: int) -> dict:
    top = 64 * 2**level
    shapes = [[draw.choice((1, 2, 4, 8, 16)), 128 * draw.integer(1, top), 128 * draw.integer(1, top)]]
    for _ in range(rows(level, 4) - 1):
        shapes.append([128 * draw.integer(1, top), 128 * draw.integer(1, top), 128 * draw.integer(1, top)])
    if not round_numbers(level):
        shapes = [[m + draw.integer(0, 127) * (m > 16), k, n] for m, k, n in shapes]
    width = value_bytes(draw, level, BF16_ONLY)
    return {"shapes": shapes, "bytes_per_value": width, **chip_inputs(draw, level)}


LEVEL_1 = scaling_level(
    "roofline",
    matmul_fraction_of_peak,
    """\
For each matmul A[m, k] @ B[k, n] in `shapes` (given as [m, k, n]), A and B are read from HBM once
and the product written once, `bytes_per_value` bytes per value, on a chip with `peak_flops` FLOP/s
and `hbm_bandwidth` bytes/s. Give the roofline time in seconds and the fraction of peak FLOP/s the
matmul achieves (its FLOPs / time / peak_flops).""",
    '{"rows": [{"shape": [<int>, <int>, <int>], "time_s": <number>, "fraction_of_peak": <number>}, ...]}'
    "  # one row per shape, in order",
    matmul_fraction_of_peak_float,
    "uncapped_fraction",
    sample=sample_matmul_fraction_of_peak,
)


def matmul_intensity_fraction(shapes, bytes_per_value, peak_flops, hbm_bandwidth):
    """Per [m, k, n]: 2 m k n FLOPs over the bytes of A, B and C; the longer of compute and
    traffic sets the time (compute on a tie); the sustained share of peak."""
    from fractions import Fraction

    rows = []
    for m, k, n in shapes:
        flops = 2 * m * k * n
        traffic = bytes_per_value * (m * k + k * n + m * n)
        compute_s = Fraction(flops, peak_flops)
        memory_s = Fraction(traffic, hbm_bandwidth)
        time_s = max(compute_s, memory_s)
        rows.append(
            {
                "shape": [m, k, n],
                "intensity": Fraction(flops, traffic),
                "bound": "compute" if compute_s >= memory_s else "memory",
                "fraction_of_peak": flops / time_s / peak_flops,
            }
        )
    return {"rows": rows}


def matmul_intensity_fraction_float(shapes, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None):
    """Against the critical intensity: the fraction is intensity / critical, capped at 1."""
    known_mistake(mistake, "one_flop_per_multiply_add")
    per_fma = 1.0 if mistake == "one_flop_per_multiply_add" else 2.0
    critical = peak_flops / hbm_bandwidth
    out = []
    for m, k, n in shapes:
        intensity = per_fma * m / bytes_per_value * (k * n) / (m * k + k * n + m * n)
        compute = intensity >= critical
        out.append(
            {
                "shape": [m, k, n],
                "intensity": intensity,
                "bound": "compute" if compute else "memory",
                "fraction_of_peak": 1.0 if compute else intensity / critical,
            }
        )
    return {"rows": out}


def _matmul_rules(task: Task) -> str | None:
    """No shape on the compute/memory tie, and at least two shapes on each side of it: L1's shapes
    are compute-bound 4 times in 5, and every compute-bound row's fraction of peak is 1."""
    i = task.inputs
    memory_bound = 0
    for m, k, n in i["shapes"]:
        compute = Fraction(2 * m * k * n, i["peak_flops"])
        memory = Fraction(i["bytes_per_value"] * (m * k + k * n + m * n), i["hbm_bandwidth"])
        problem = tie_edge(f"shape {[m, k, n]}: compute time against memory time", compute, memory)
        if problem:
            return problem
        memory_bound += memory > compute
    if min(memory_bound, len(i["shapes"]) - memory_bound) < 2:
        return f"{memory_bound} of {len(i['shapes'])} shapes memory-bound: fewer than two on one side"
    return None


_FRACTION_L2 = """\
Each matmul A[m, k] @ B[k, n] in `shapes` (given as [m, k, n]) computes every entry of its product
as k fused multiply-adds into an accumulator that starts at zero, each fused multiply-add counting
as 2 FLOPs. The kernel reads A and B from HBM once and writes the product to HBM once,
`bytes_per_value` bytes per value, on a chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s;
it moves data and computes at the same time, so it takes as long as the slower of the two. For each
shape give its arithmetic intensity (FLOPs per byte of HBM traffic), which of the two sets its time
("compute" or "memory"; "compute" if they take equally long) and the fraction of the chip's peak
FLOP/s it sustains over its run."""


def fraction_level(sample) -> Level:
    return scaling_level(
        "roofline",
        matmul_intensity_fraction,
        _FRACTION_L2,
        '{"rows": [{"shape": [<int>, <int>, <int>], "intensity": <number>, "bound": "compute" | "memory", '
        '"fraction_of_peak": <number>}, ...]}  # one row per shape, in order',
        matmul_intensity_fraction_float,
        "one_flop_per_multiply_add",
        sample=sample,
        reject=_matmul_rules,
        varying=("rows[].bound",),
    )


LEVEL_2 = fraction_level(sample_matmul_fraction_of_peak)


# ================================================================ matmul_fraction_of_peak
def attention_matmuls_fraction(seq_lens, head_dim, bytes_per_value, peak_flops, hbm_bandwidth):
    """One head's attention as two kernels, scores S = Q @ K^T and output O = P @ V, each on the
    roofline (S written and P read in full): the fraction of peak of the pair."""
    from fractions import Fraction

    rows = []
    for s in seq_lens:
        flops = 2 * (2 * s * head_dim * s)  # both matmuls
        scores = max(
            Fraction(2 * s * head_dim * s, peak_flops),
            Fraction(bytes_per_value * (2 * s * head_dim + s * s), hbm_bandwidth),
        )
        output = max(
            Fraction(2 * s * s * head_dim, peak_flops),
            Fraction(bytes_per_value * (s * s + 2 * s * head_dim), hbm_bandwidth),
        )
        rows.append({"seq_len": s, "fraction_of_peak": Fraction(flops, peak_flops) / (scores + output)})
    return {"rows": rows}


def attention_matmuls_fraction_float(
    seq_lens, head_dim, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "scores_not_stored")
    rows = []
    for s in seq_lens:
        square = 0.0 if mistake == "scores_not_stored" else float(s) * s
        kernel = max(
            2.0 * head_dim * s * s / peak_flops,
            (2.0 * head_dim * s + square) * bytes_per_value / hbm_bandwidth,
        )
        rows.append({"seq_len": s, "fraction_of_peak": 4.0 * head_dim * s * s / peak_flops / (2 * kernel)})
    return {"rows": rows}


def sample_attention_matmuls(draw: Draw, level: int) -> dict:
    """Lengths on both sides of where the kernels turn compute-bound. The head width is one that
    turns compute-bound on the chip (2 * head_dim above its ridge times the bytes per value): with
    bf16 operands only a 128 or 256 head does on most real chips, and a width drawn apart from the
    chip left an index with no instance in 200 attempts."""
    peak, bandwidth = peak_and_bandwidth(draw, level)
    width = value_bytes(draw, level, BF16_ONLY)
    # compute-bound once 2*s*d*s / peak >= b*(2*s*d + s*s) / bw, i.e. s*(2*d - c*b) >= 2*c*b*d
    critical = Fraction(peak, bandwidth)
    widths = [d for d in (64, 80, 96, 128, 256) if 2 * d > critical * width]
    if not widths:
        raise Reject("these attention matmuls are never compute-bound on this chip")
    head_dim = draw.choice(widths)
    gain = 2 * head_dim - critical * width
    edge = 2 * critical * width * head_dim / gain
    if not 16 <= edge <= 2**16:
        raise Reject("the crossover length is out of range")
    lengths = sorted(
        {max(2, math.floor(edge * Fraction(draw.integer(10, 1000), 100))) for _ in range(2 + level)}
    )
    return {
        "seq_lens": lengths,
        "head_dim": head_dim,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


_ATTENTION_MATMULS_L3 = """\
One attention head at sequence length S runs two matmuls as two kernels: the scores S_mat = Q @ K^T
(Q and K of shape [S, head_dim]) and the output O = P @ V (P of shape [S, S], the softmaxed scores,
V of shape [S, head_dim]). Each kernel reads its two operands from HBM once and writes its result
once, `bytes_per_value` bytes per value (ignore the softmax itself and its FLOPs), and follows the
roofline on a chip of `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s; the kernels run one after
the other. For each length in `seq_lens`, give the fraction of peak FLOP/s the pair achieves (both
matmuls' FLOPs / their total time / peak_flops)."""


LEVEL_3 = scaling_level(
    "roofline",
    attention_matmuls_fraction,
    _ATTENTION_MATMULS_L3,
    '{"rows": [{"seq_len": <int>, "fraction_of_peak": <number>}, ...]}  # one row per length, in order',
    attention_matmuls_fraction_float,
    "scores_not_stored",
    sample=sample_attention_matmuls,
)


def min_m_for_fraction(shapes, bytes_per_value, peak_flops, hbm_bandwidth, target_fraction):
    """Smallest m at which A[m, k] @ B[k, n] reaches the target fraction of peak (None: no m does)."""
    import math
    from fractions import Fraction

    critical = Fraction(peak_flops, hbm_bandwidth)
    rows = []
    for k, n in shapes:
        # 2*m*k*n / (bytes*(m*k + k*n + m*n)) >= f * critical  <=>  m * (2*k*n - g*(k + n)) >= g*k*n
        g = target_fraction * critical * bytes_per_value
        slope = 2 * k * n - g * (k + n)
        rows.append({"shape": [k, n], "min_m": math.ceil(g * k * n / slope) if slope > 0 else None})
    return {"rows": rows}


def min_m_for_fraction_float(
    shapes, bytes_per_value, peak_flops, hbm_bandwidth, target_fraction, mistake=None
):
    known_mistake(mistake, "ignore_output_write")
    rows = []
    for k, n in shapes:
        written = 0 if mistake == "ignore_output_write" else 1

        def reached(m, k=k, n=n, written=written):
            intensity = 2.0 * m * k * n / (bytes_per_value * (m * k + k * n + written * m * n))
            return min(1.0, intensity * hbm_bandwidth / peak_flops) >= target_fraction

        limit = 2.0 * k * n / (bytes_per_value * (k + written * n)) * hbm_bandwidth / peak_flops
        rows.append(
            {
                "shape": [k, n],
                "min_m": smallest_satisfying(reached, 10**12) if limit > target_fraction else None,
            }
        )
    return {"rows": rows}


def sample_fraction(draw: Draw, level: int) -> dict:
    """About half the instances hold a shape too small ever to reach the target (None)."""
    shapes = [
        [128 * draw.integer(1, 64 * level), 128 * draw.integer(1, 64 * level)] for _ in range(2 + level)
    ]
    if draw.chance(1, 2):
        shapes[draw.below(len(shapes))] = [draw.integer(16, 256), draw.integer(16, 256)]
    return {
        "shapes": shapes,
        "bytes_per_value": value_bytes(draw, level, BF16_ONLY),
        **sample.chip_inputs(draw, level),
        "target_fraction": Fraction(draw.integer(50, 99), 100),
    }


def _fraction_edges(task: Task) -> str | None:
    i = task.inputs
    g = i["target_fraction"] * Fraction(i["peak_flops"], i["hbm_bandwidth"]) * i["bytes_per_value"]
    for k, n in i["shapes"]:
        slope = 2 * k * n - g * (k + n)
        if slope == 0 or (slope > 0 and near_integer(g * k * n / slope)):
            return f"shape {[k, n]}: the bound sits on an integer or on no bound"
    return None


_FRACTION = """\
For each matmul A[m, k] @ B[k, n] with [k, n] in `shapes`, A and B are read from HBM once and the
product written once, `bytes_per_value` bytes per value, on a chip with `peak_flops` FLOP/s and
`hbm_bandwidth` bytes/s; the matmul takes its roofline time. Give the smallest integer m at which
it achieves at least `target_fraction` of peak FLOP/s (its FLOPs / time / peak_flops), or None if
no m does."""


LEVEL_4 = scaling_level(
    "roofline",
    min_m_for_fraction,
    _FRACTION,
    '{"rows": [{"shape": [<int>, <int>], "min_m": <int> | None}, ...]}  # one row per shape, in order',
    min_m_for_fraction_float,
    "ignore_output_write",
    sample=sample_fraction,
    reject=_fraction_edges,
)


def best_tile(shapes, tiles, bytes_per_value, sram_bytes, peak_flops, hbm_bandwidth):
    """Per shape: the tile of the highest useful fraction of peak. A tiled kernel computes padded
    tiles, reads A once per column of tiles and B once per row of tiles, writes C once."""
    from fractions import Fraction

    rows = []
    for m, k, n in shapes:
        best = None
        for tile in tiles:
            tm, tn, tk = tile["tile_m"], tile["tile_n"], tile["tile_k"]
            if bytes_per_value * (tm * tk + tk * tn) + 4 * tm * tn > sram_bytes:
                continue
            row_tiles, col_tiles, depth = -(-m // tm), -(-n // tn), -(-k // tk)
            flops = 2 * (row_tiles * tm) * (depth * tk) * (col_tiles * tn)
            traffic = bytes_per_value * (m * k * col_tiles + k * n * row_tiles + m * n)
            time_s = max(Fraction(flops, peak_flops), Fraction(traffic, hbm_bandwidth))
            fraction = Fraction(2 * m * k * n, peak_flops) / time_s
            if best is None or fraction > best[1]:
                best = (tile["name"], fraction)
        rows.append({"shape": [m, k, n], "tile": best[0], "fraction_of_peak": best[1]})
    return {"rows": rows}


def _tile_fractions(m, k, n, tiles, width, sram, peak, bandwidth, mistake=None):
    out = []
    for t in tiles:
        tm, tn, tk = t["tile_m"], t["tile_n"], t["tile_k"]
        if width * (tm * tk + tk * tn) + 4.0 * tm * tn > sram:
            continue
        padded = 2.0 * math.ceil(m / tm) * tm * math.ceil(k / tk) * tk * math.ceil(n / tn) * tn
        if mistake == "operands_read_once":
            traffic = width * (m * k + k * n + m * n)
        else:
            traffic = width * (m * k * math.ceil(n / tn) + k * n * math.ceil(m / tm) + m * n)
        out.append((2.0 * m * k * n / peak / max(padded / peak, traffic / bandwidth), t["name"]))
    return out


def best_tile_float(shapes, tiles, bytes_per_value, sram_bytes, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "operands_read_once")
    rows = []
    for m, k, n in shapes:
        options = _tile_fractions(
            m, k, n, tiles, bytes_per_value, sram_bytes, peak_flops, hbm_bandwidth, mistake
        )
        top = max(f for f, _ in options)
        name = next(name for f, name in options if f >= top * (1 - 1e-12))
        rows.append({"shape": [m, k, n], "tile": name, "fraction_of_peak": top})
    return {"rows": rows}


_TILES = (
    (64, 64, 32),
    (128, 128, 32),
    (128, 256, 64),
    (256, 128, 64),
    (256, 256, 32),
    (64, 256, 128),
    (32, 512, 64),
    (512, 64, 64),
    (128, 64, 128),
    (16, 256, 256),
)


def sample_tiles(draw: Draw, level: int) -> dict:
    """Shapes from skinny to square, dims off the tile multiples, and an SRAM that rules the
    largest tiles out: which tile wins changes with the shape."""
    width = value_bytes(draw, level, BF16_ONLY)
    tiles = [
        {"name": f"t{tm}x{tn}x{tk}", "tile_m": tm, "tile_n": tn, "tile_k": tk}
        for tm, tn, tk in draw.sample(_TILES, 3 + level // 2)
    ]
    needs = sorted(
        width * (t["tile_m"] * t["tile_k"] + t["tile_k"] * t["tile_n"]) + 4 * t["tile_m"] * t["tile_n"]
        for t in tiles
    )
    sram = needs[-2] + draw.integer(0, needs[-1] - needs[-2] - 1) if needs[-1] > needs[-2] else needs[-1]
    shapes = []
    for _ in range(2 + level):
        m = draw.choice((draw.integer(1, 64), draw.integer(65, 1024), draw.integer(1025, 16_384)))
        shapes.append([m, draw.integer(256, 16_384), draw.integer(256, 16_384)])
    return {
        "shapes": shapes,
        "tiles": tiles,
        "bytes_per_value": width,
        "sram_bytes": require("sram_bytes", sram, SHARED_MEMORY),
        **chip_inputs(draw, level),
    }


def _tile_rules(task: Task) -> str | None:
    i = task.inputs
    for (m, k, n), row in zip(i["shapes"], task.expected["rows"], strict=True):
        fractions = []
        for t in i["tiles"]:
            tm, tn, tk = t["tile_m"], t["tile_n"], t["tile_k"]
            if i["bytes_per_value"] * (tm * tk + tk * tn) + 4 * tm * tn > i["sram_bytes"]:
                continue
            flops = 2 * (-(-m // tm) * tm) * (-(-k // tk) * tk) * (-(-n // tn) * tn)
            traffic = i["bytes_per_value"] * (m * k * -(-n // tn) + k * n * -(-m // tm) + m * n)
            fractions.append(
                Fraction(2 * m * k * n, i["peak_flops"])
                / max(Fraction(flops, i["peak_flops"]), Fraction(traffic, i["hbm_bandwidth"]))
            )
            if near_tie(Fraction(flops, i["peak_flops"]), Fraction(traffic, i["hbm_bandwidth"])):
                return f"shape {[m, k, n]} tile {t['name']}: compute time sits on memory time"
        if any(f != row["fraction_of_peak"] and near_tie(f, row["fraction_of_peak"]) for f in fractions):
            return f"shape {[m, k, n]}: two tiles sit within 1e-9"
    return None


_TILES_L5 = """\
A matmul C = A @ B with A of shape [m, k] and B of shape [k, n] (each entry of `shapes` is [m, k, n],
`bytes_per_value` bytes per value) runs as a tiled kernel with one of the tile shapes in `tiles`. C
is divided into tiles of tile_m rows by tile_n columns; m and n are padded up to whole tiles, and
the k dimension is walked in steps of tile_k, padded up to a whole step. The kernel computes every
padded tile in full (2 FLOPs per multiply-add, padding included), reads from HBM the tile_m rows of
A that a C tile needs once for every C tile of that row band, and the tile_n columns of B once for
every C tile of that column band (so A is read once per column of tiles and B once per row of
tiles), and writes C once; the padding itself is never read or written. A tile fits on chip when
its A block [tile_m, tile_k] and B block [tile_k, tile_n] (`bytes_per_value` bytes per value) and
an fp32 accumulator [tile_m, tile_n] (4 bytes per value) together take at most `sram_bytes` bytes;
a tile that does not fit cannot be used. The kernel's time follows the roofline on a chip of
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s. For each shape, give the tile (by name) with the
highest useful fraction of peak (2*m*k*n / time / peak_flops, padding not counted as useful) and that
fraction; on a tie, the tile listed first."""


LEVEL_5 = scaling_level(
    "roofline",
    best_tile,
    _TILES_L5,
    '{"rows": [{"shape": [<int>, <int>, <int>], "tile": <str>, "fraction_of_peak": <number>}, ...]}'
    "  # one row per shape, in order",
    best_tile_float,
    "operands_read_once",
    sample=sample_tiles,
    reject=_tile_rules,
    varying=("rows[].tile",),
)


MATMUL_FRACTION_OF_PEAK = five_levels(
    "matmul_fraction_of_peak",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the FLOPs (fused multiply-adds), the traffic and the roofline derived from the "
    "described kernel: the intensity, the bound and the fraction of peak, no formula given; "
    "L3: one attention head's two matmuls (scores written, probabilities read) and the "
    "pair's fraction of peak; L4: the smallest m reaching a "
    "target fraction of peak per [k, n] (None); L5: per shape, the tile (padding computed, "
    "operands re-read per band of tiles, an SRAM limit) of the highest useful fraction of peak",
    branches=(Branch("none", some_none, Fraction(1, 8), (4,)),),
)
