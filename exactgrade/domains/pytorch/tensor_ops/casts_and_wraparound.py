"""The casts_and_wraparound family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    PY_INT,
    Inputs,
    TensorSpec,
    f32,
    i64,
    pytorch_level,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.domains.pytorch.sampling import dyadic_list, int_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


# pt-012 -------------------------------------------------------------------------------------------
def casts_and_wraparound(x, u):
    import torch

    return {"rows": [{
        "truncated": x.to(torch.int64),
        "rounded": torch.round(x),
        "floored": torch.floor(x).to(torch.int64),
        "wrapped": u + 10,
        "total": u.sum(),
    }]}


def _casts_and_wraparound(x, u):
    vx, vu = values(x), values(u)
    return [{
        "truncated": ExactTensor.of("int64", [int(e) for e in vx]),
        "rounded": ExactTensor.of("float32", [round(e) for e in vx]),  # Fraction rounds half to even
        "floored": ExactTensor.of("int64", [math.floor(e) for e in vx]),
        "wrapped": ExactTensor.of("uint8", [(e + 10) % 256 for e in vu]),
        "total": ExactTensor.of("int64", sum(vu)),
    }]


def _sample_casts(draw: Draw, level: int) -> dict:
    n = 8 + 2 * (level - 1)
    halves = [float(draw.integer(-4 - level, 4 + level)) + 0.5 for _ in range(n // 2)]
    quarters = dyadic_list(draw, n - n // 2, -4 - level, 4 + level, 2)
    u = [draw.integer(240, 255) if draw.chance(2, 3) else draw.integer(0, 30) for _ in range(3 + level)]
    return {"x": tensor("float32", draw.shuffled(halves + quarters)), "u": tensor("uint8", u)}


def _some_wrap(inputs: Inputs) -> str | None:
    if not any(e + 10 > 255 for e in values(inputs["u"])):
        return "no element of u wraps around when 10 is added"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=casts_and_wraparound,
    independent=_casts_and_wraparound,
    question="""Give `truncated`, x converted to int64 with .to(torch.int64); `rounded`, torch.round(x);
        `floored`, floor(x) as int64; `wrapped`, the uint8 tensor u + 10 computed in uint8; and `total`,
        u.sum() as torch computes it.""",
    answer=lambda i: ({"truncated": i64(*dims(i["x"])), "rounded": f32(*dims(i["x"])),
                       "floored": i64(*dims(i["x"])), "wrapped": TensorSpec("uint8", dims(i["u"])),
                       "total": i64()},),
    sample=_sample_casts,
    refuse=_some_wrap,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    casts_and_wraparound,
    _casts_and_wraparound,
    """Give `truncated`, each element of `x` with its fractional part dropped (toward zero), as
        int64; `rounded`, each element rounded to the nearest integer, halves going to the even
        neighbour, as float32; `floored`, the largest integer not above each element, as int64;
        `wrapped`, each element of the uint8 tensor `u` plus 10, reduced modulo 256, as uint8; and
        `total`, the exact sum of the elements of u as a 0-d int64 tensor.""",
    lambda i: ({"truncated": i64(*dims(i["x"])), "rounded": f32(*dims(i["x"])),
                "floored": i64(*dims(i["x"])), "wrapped": TensorSpec("uint8", dims(i["u"])),
                "total": i64()},),
    _sample_casts,
    refuse=_some_wrap,
)


# casts_and_wraparound L3: quantise to int8 with a scale, then the worst error ---------------------
def quantise_int8(x, scale):
    import torch

    q = torch.clamp(torch.round(x / scale), -128, 127)
    return {"rows": [{"q": q.to(torch.int64), "max_error": float((x - q * scale).abs().max())}]}


def _quantise_int8(x, scale):
    s = Fraction(scale)
    qs = [min(max(round(e / s), -128), 127) for e in values(x)]
    return [{"q": ExactTensor.of("int64", qs),
             "max_error": max(abs(e - q * s) for e, q in zip(values(x), qs, strict=True))}]


def _sample_quantise(draw: Draw, level: int) -> dict:
    x = _sample_casts(draw, level)["x"]
    return {"x": x, "scale": draw.choice((0.0625, 0.046875, 0.09375, 0.03125))}


def _quantise_clips_and_ties(inputs: Inputs) -> str | None:
    s = Fraction(inputs["scale"])
    ratios = [e / s for e in values(inputs["x"])]
    if not any(abs(r) > 128 for r in ratios):
        return "no element leaves the int8 range: the saturation would not be tested"
    return None


LEVEL_3 = pytorch_level(
    "tensor_ops",
    quantise_int8,
    _quantise_int8,
    """Quantise `x` to signed 8-bit codes with step `scale`: the code of an element e is e / scale
        rounded to the nearest integer (halves to the even neighbour), then limited to the range -128
        to 127. Give `q`, the codes as an int64 tensor, and `max_error`, the largest |e - code*scale|
        over the elements.""",
    lambda i: ({"q": i64(*dims(i["x"])), "max_error": PY_FLOAT},),
    _sample_quantise,
    refuse=_quantise_clips_and_ties,
)


# casts_and_wraparound L4: the smallest added constant that wraps enough elements -----------------
def smallest_wrapping_add(u, wraps):
    import torch

    for k in range(1, 256):
        if int(((u + k) < u).sum()) >= wraps:
            return {"rows": [{"k": k, "wrapped": u + torch.tensor(k, dtype=torch.uint8)}]}
    return {"rows": [{"k": -1, "wrapped": u}]}


def _smallest_wrapping_add(u, wraps):
    vu = values(u)
    for k in range(1, 256):
        if sum(1 for e in vu if e + k > 255) >= wraps:
            return [{"k": k, "wrapped": ExactTensor.of("uint8", [(e + k) % 256 for e in vu])}]
    return [{"k": -1, "wrapped": ExactTensor.of("uint8", vu)}]


def _sample_wraps(draw: Draw, level: int) -> dict:
    u = values(_sample_casts(draw, level)["u"])
    return {"u": tensor("uint8", u), "wraps": draw.integer(2, max(2, len(u) - 1))}


def _wrap_needs_search(inputs: Inputs) -> str | None:
    if sum(1 for e in values(inputs["u"]) if e > 0) < inputs["wraps"]:
        return "fewer non-zero elements than wraps asked: no constant wraps enough"
    return None


LEVEL_4 = pytorch_level(
    "tensor_ops",
    smallest_wrapping_add,
    _smallest_wrapping_add,
    """Adding a constant k to the uint8 tensor `u` in uint8 arithmetic wraps an element around (its
        true sum exceeds 255 and the stored result is the sum minus 256). Give `k`, the smallest k from
        1 to 255 for which at least `wraps` elements wrap, and `wrapped`, u plus that k computed in
        uint8 (a uint8 tensor).""",
    lambda i: ({"k": PY_INT, "wrapped": TensorSpec("uint8", dims(i["u"]))},),
    _sample_wraps,
    refuse=_wrap_needs_search,
)


# casts_and_wraparound L5: a 32-bit wrapping recurrence run 10^11..10^12 steps ---------------------
def wrapping_recurrence(pattern, seed, mult, n):
    import torch

    mask = (1 << 32) - 1

    def compose(f, g):             # g after f, each an affine map h -> a*h + c (mod 2^32)
        return (f[0] * g[0]) & mask, (f[1] * g[0] + g[1]) & mask

    def power(f, k):               # f applied k times, by repeated squaring
        out = (1, 0)
        while k:
            if k & 1:
                out = compose(out, f)
            f, k = compose(f, f), k >> 1
        return out

    def run(steps):
        period = (1, 0)
        for e in pattern.tolist():
            period = compose(period, (mult, e & mask))
        a, c = power(period, steps // pattern.numel())
        h = (a * (seed & mask) + c) & mask
        for e in pattern.tolist()[:steps % pattern.numel()]:
            h = (h * mult + e) & mask
        return int(torch.tensor(h, dtype=torch.int64).to(torch.int32))   # read as signed int32

    return {"rows": [{"halfway": run(n // 2), "final": run(n)}]}


def _wrapping_recurrence(pattern, seed, mult, n):
    """After k whole periods h = A^k*seed + c*(A^k - 1)/(A - 1), with A = mult^m and c the period's
    constant; the division is exact over the integers, so A^k is taken mod 2^32*(A - 1)."""
    v = list(values(pattern))
    m = len(v)
    A = mult ** m
    c = 0
    for e in v:
        c = c * mult + e
    modulus = (1 << 32) * (A - 1)

    def run(steps):
        k, rest = divmod(steps, m)
        power = pow(A, k, modulus)
        h = power * seed + c * ((power - 1) // (A - 1))
        for e in v[:rest]:
            h = h * mult + e
        h %= 1 << 32
        return h - (1 << 32) if h >= 1 << 31 else h

    return [{"halfway": run(n // 2), "final": run(n)}]


def _sample_wrapping(draw: Draw, level: int) -> dict:
    m = draw.integer(4, 7)
    pattern = int_tensor(draw, (m,), -(2**31), 2**31 - 1, "int32")
    n = draw.integer(10**11, 10**12)
    return {"pattern": pattern, "seed": draw.integer(-(2**31), 2**31 - 1),
            "mult": 2 * draw.integer(2, 500_000) + 1, "n": n}


def _wrapping_mistaken(task) -> str | None:
    """The named mistake: the unsigned reading of the 32 bits (the answer must be read as signed)."""
    row = task.expected["rows"][0]
    if row["halfway"] >= 0 and row["final"] >= 0:
        return "both answers are non-negative: the unsigned reading gives them too"
    return None


LEVEL_5 = pytorch_level(
    "tensor_ops",
    wrapping_recurrence,
    _wrapping_recurrence,
    lambda i: f"""A 32-bit signed integer register h (two's complement: every addition and multiplication
        keeps only the low 32 bits of the exact result, which are then read as a value from -2^31 to
        2^31 - 1, as int32 tensor arithmetic does) starts at h = `seed`. Step t, for t = 0, 1, 2, ...,
        sets h to h * `mult` + pattern[t mod {i["pattern"].shape[0]}], with `pattern` the given int32
        vector. Give `halfway`, the value of h after the first floor(n/2) steps, and `final`, its value
        after n steps, with n = `n` = {i["n"]} (both as Python ints from -2^31 to 2^31 - 1).""",
    lambda i: ({"halfway": PY_INT, "final": PY_INT},),
    _sample_wrapping,
    reject=_wrapping_mistaken,
)


CASTS_AND_WRAPAROUND = five_levels(
    "casts_and_wraparound",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the casts named; L2 each rounding and the wrap described; L3 int8 quantisation with "
          "saturation and the worst error; L4 the smallest constant that wraps enough uint8 elements; L5 "
          "a 32-bit wrapping multiply-add recurrence run 10^11..10^12 steps (affine maps composed, "
          "read as signed)",
)
