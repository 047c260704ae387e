"""Numerical tasks (dl-030..dl-035): which failure a float computation hits.

The answer is a category ("inf", "nan", "zero", "finite"), never the float itself. A case is an
expression tree evaluated in a stated IEEE 754 format with round-to-nearest-even after every
operation; the reference computes the category by running the float computation with the
standard library (struct for float16/float32 rounding), and meta["argument"] says, per case,
why that category is right. verify recomputes every case independently with numpy scalars.

Families, one per canonical task: exp_range (dl-030), softmax (dl-031), logsumexp (dl-032),
underflow (dl-033), cancellation (dl-034), format_limits (dl-035). Samplers draw cases around
the real thresholds of each format (x near ln(max) and ln(smallest subnormal / 2), logits
around them, powers whose value crosses half the smallest subnormal, increments at the
ties-to-even boundaries 2**-p, large integers 2**p + 1, squares near sqrt(max), max + half an
ulp). A case is kept only if ieee.stable_outcome gives it one category under every correct
implementation (exp/log a few ulps off, literals rounded once), so the reference's
struct-rounded path and numpy cannot disagree; the check re-derives each category with numpy
and re-runs the robustness test. Generated arguments state the exact real value, the format's
limits and the outcome.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.numerical.cancellation import CANCELLATION
from exactgrade.domains.deeplearning.numerical.exp_range import EXP_RANGE
from exactgrade.domains.deeplearning.numerical.format_limits import FORMAT_LIMITS
from exactgrade.domains.deeplearning.numerical.logsumexp import LOGSUMEXP, logsumexp_shifted
from exactgrade.domains.deeplearning.numerical.shared import _ARGUMENTS, logsumexp_naive, op, softmax_naive
from exactgrade.domains.deeplearning.numerical.softmax import SOFTMAX, softmax_shifted
from exactgrade.domains.deeplearning.numerical.underflow import UNDERFLOW


def _case(name, fmt, expr, argument):
    return {"name": name, "format": fmt, "expr": expr}, argument


_MEAN_SQUARE_300 = op("div", op("add", op("mul", 300, 300), op("mul", 300, 300)), 2)

FAMILIES = (EXP_RANGE, SOFTMAX, LOGSUMEXP, UNDERFLOW, CANCELLATION, FORMAT_LIMITS)


def _canonical(task_id, family, cases_with_arguments):
    _ARGUMENTS[task_id] = {c["name"]: why for c, why in cases_with_arguments}
    return family.task(task_id, {"cases": [c for c, _ in cases_with_arguments]})


TASKS = (
    _canonical("dl-030", EXP_RANGE, [
        _case("exp88_f32", "float32", op("exp", 88), "e**88 = 1.65e38 < float32 max 3.40e38"),
        _case("exp89_f32", "float32", op("exp", 89), "e**89 = 4.49e38 > float32 max 3.40e38: overflow"),
        _case("exp709_f64", "float64", op("exp", 709), "e**709 = 8.2e307 < float64 max 1.80e308"),
        _case("exp710_f64", "float64", op("exp", 710), "e**710 = 2.2e308 > float64 max 1.80e308: overflow"),
        _case("exp11_f16", "float16", op("exp", 11), "e**11 = 59874 < float16 max 65504"),
        _case("exp12_f16", "float16", op("exp", 12), "e**12 = 162755 > float16 max 65504: overflow"),
        _case("exp_neg100_f32", "float32", op("exp", -100),
              "e**-100 = 3.7e-44 is below the float32 normal range but above the smallest subnormal 1.4e-45"),
        _case("exp_neg110_f32", "float32", op("exp", -110),
              "e**-110 = 1.7e-48 < half the smallest float32 subnormal (7.0e-46): underflows to 0"),
    ]),
    _canonical("dl-031", SOFTMAX, [
        _case("naive_p0_big", "float64", softmax_naive([1000, 999], 0),
              "exp(1000) and exp(999) overflow to inf, so p0 = inf / (inf + inf) = inf / inf = nan"),
        _case("shifted_p0_big", "float64", softmax_shifted([1000, 999], 0),
              "after subtracting the max the exponents are 0 and -1: p0 = 1 / (1 + e**-1), finite"),
        _case("naive_p0_very_negative", "float64", softmax_naive([-1000, -1001], 0),
              "exp(-1000) and exp(-1001) underflow to 0, so p0 = 0 / 0 = nan"),
        _case("shifted_p0_very_negative", "float64", softmax_shifted([-1000, -1001], 0),
              "shifted exponents 0 and -1 again: p0 = 1 / (1 + e**-1), finite"),
        _case("naive_p0_f16", "float16", softmax_naive([10, 12], 0),
              "exp(10) = 22026 fits float16 but exp(12) = 162755 overflows: p0 = 22026 / inf = 0"),
        _case("naive_p1_f16", "float16", softmax_naive([10, 12], 1),
              "p1 = exp(12) / (exp(10) + exp(12)) = inf / inf = nan"),
        _case("shifted_p0_f16", "float16", softmax_shifted([10, 12], 0),
              "shifted exponents -2 and 0: p0 = e**-2 / (e**-2 + 1) = 0.119, finite"),
    ]),
    _canonical("dl-032", LOGSUMEXP, [
        _case("naive_lse_big", "float64", logsumexp_naive([1000, 1000]),
              "exp(1000) overflows, inf + inf = inf, log(inf) = inf, though the true value is 1000.69"),
        _case("shifted_lse_big", "float64", logsumexp_shifted([1000, 1000]),
              "1000 + log(e**0 + e**0) = 1000 + log 2, finite"),
        _case("naive_lse_very_negative", "float64", logsumexp_naive([-1000, -1000]),
              "exp(-1000) underflows to 0, so log(0 + 0) = log(0) = -inf (true value -999.31)"),
        _case("shifted_lse_very_negative", "float64", logsumexp_shifted([-1000, -1000]),
              "-1000 + log 2, finite"),
        _case("naive_lse_f32_ok", "float32", logsumexp_naive([80, 80]),
              "exp(80) = 5.5e34 and the sum 1.1e35 are below float32 max 3.4e38: log gives 80.69, finite"),
        _case("naive_lse_f32_overflow", "float32", logsumexp_naive([89, 0]),
              "exp(89) = 4.5e38 overflows float32, log(inf) = inf"),
    ]),
    _canonical("dl-033", UNDERFLOW, [
        _case("half_pow149_f32", "float32", op("powi", F(1, 2), 149),
              "2**-149 is exactly the smallest float32 subnormal: representable, finite"),
        _case("half_pow150_f32", "float32", op("powi", F(1, 2), 150),
              "2**-150 is exactly half the smallest subnormal: a tie, rounded to the even neighbour 0"),
        _case("half_pow24_f16", "float16", op("powi", F(1, 2), 24),
              "2**-24 is the smallest float16 subnormal"),
        _case("half_pow25_f16", "float16", op("powi", F(1, 2), 25),
              "2**-25 is a tie between 0 and 2**-24: ties-to-even gives 0"),
        _case("likelihood_100_f64", "float64", op("powi", F(1, 1000), 100),
              "1e-300 is above the float64 normal minimum 2.2e-308: finite"),
        _case("likelihood_110_f64", "float64", op("powi", F(1, 1000), 110),
              "1e-330 is below half the smallest float64 subnormal (2.5e-324): underflows to 0"),
        _case("log_likelihood_110_f64", "float64", op("mul", 110, op("log", F(1, 1000))),
              "in log space the same likelihood is 110 * log(1/1000) = -759.8, finite"),
    ]),
    _canonical("dl-034", CANCELLATION, [
        _case("one_plus_2m24_f32", "float32", op("sub", op("add", 1, F(1, 2**24)), 1),
              "1 + 2**-24 is a tie between 1 and 1 + 2**-23; ties-to-even gives 1, and 1 - 1 = 0"),
        _case("one_plus_2m23_f32", "float32", op("sub", op("add", 1, F(1, 2**23)), 1),
              "1 + 2**-23 is the next float32 after 1, so the difference is 2**-23, finite"),
        _case("one_plus_1e-8_f64", "float64", op("sub", op("add", 1, F(1, 10**8)), 1),
              "float64 has 52 fraction bits (ulp 2.2e-16 at 1): 1 + 1e-8 keeps the increment, finite"),
        _case("one_plus_1e-8_f32", "float32", op("sub", op("add", 1, F(1, 10**8)), 1),
              "1e-8 is below half the float32 ulp at 1 (6e-8): 1 + 1e-8 rounds to 1, difference 0"),
        _case("one_plus_1e-3_f16", "float16", op("sub", op("add", 1, F(1, 1000)), 1),
              "the float16 ulp at 1 is 2**-10 = 9.8e-4: 1 + 0.001 rounds to 1 + 2**-10, difference finite"),
        _case("one_plus_1e-4_f16", "float16", op("sub", op("add", 1, F(1, 10**4)), 1),
              "1e-4 is below half the float16 ulp at 1 (4.9e-4): rounds to 1, difference 0"),
        _case("variance_one_pass_f32", "float32",
              op("sub", op("div", op("add", op("mul", 4097, 4097), op("mul", 4099, 4099)), 2),
                 op("mul", op("div", op("add", 4097, 4099), 2), op("div", op("add", 4097, 4099), 2))),
              "E[x^2] - E[x]^2 for x = (4097, 4099): the true variance is 1, but 4097**2 = 16785409 and "
              "4099**2 = 16801801 exceed 2**24 and are odd, so float32 rounds them to even neighbours; "
              "their mean 16793604 is exact, 4098**2 = 16793604 is exact, and the difference is 0"),
    ]),
    _canonical("dl-035", FORMAT_LIMITS, [
        _case("max_plus_15_f16", "float16", op("add", 65504, 15),
              "65519 is below the rounding boundary 65520 between 65504 and 2**16: rounds to 65504"),
        _case("max_plus_16_f16", "float16", op("add", 65504, 16),
              "65520 is exactly halfway between 65504 (odd significand) and 65536: ties-to-even rounds up to "
              "2**16, which overflows to inf"),
        _case("square_255_f16", "float16", op("mul", 255, 255), "255**2 = 65025 <= 65504: finite"),
        _case("square_256_f16", "float16", op("mul", 256, 256), "256**2 = 65536 > 65504: inf"),
        _case("reciprocal_min_subnormal_f16", "float16", op("div", 1, F(1, 2**24)),
              "1 / 2**-24 = 2**24 = 16777216 > 65504: inf"),
        _case("mean_square_300_f16", "float16", _MEAN_SQUARE_300,
              "300**2 = 90000 overflows before the mean is taken: inf / 2 = inf (a LayerNorm variance in "
              "float16 overflows for activations of only 300)"),
        _case("mean_square_300_f32", "float32", _MEAN_SQUARE_300,
              "90000 is tiny for float32: finite"),
    ]),
)
