"""Information tasks (dl-000..dl-008): entropy, cross-entropy, KL, mutual information.

Every probability used in a log is an integer power of two, so every value in bits is an exact
Fraction; nats are bits * log(2), exact sympy values. Joints are built with b a deterministic
function of a (a dyadic split of a binary axis would force independence and I = 0), with
marginals chosen dyadic.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.rational import kl_bits
from exactgrade.task import TaskDef

CONVENTIONS = (
    "Information theory conventions. Bits use log base 2; nats use the natural log, so a value in nats "
    "is the value in bits times log(2): give nats as exact sympy values (e.g. 7*sympy.log(2)/4), never "
    "math.log. Terms with probability 0 contribute 0 (0 * log 0 = 0). Every probability that appears "
    "inside a log in these tasks is an integer power of two, so values in bits are exact rationals. "
    "Entropy H(p) = -sum_i p_i log p_i; cross-entropy H(p, q) = -sum_i p_i log q_i; "
    "KL divergence D(p || q) = sum_i p_i log(p_i / q_i) = H(p, q) - H(p). A joint table joint[a][b] is "
    "P(A = a, B = b) (rows indexed by a, columns by b); H(A, B) is the entropy of all cells; "
    "H(A | B) = H(A, B) - H(B); I(A; B) = H(A) + H(B) - H(A, B)."
)


def entropy_rows(distributions, unit):
    from fractions import Fraction

    import sympy

    def log2(p):
        n, d = p.numerator, p.denominator
        if n == 1 and d & (d - 1) == 0:
            return -(d.bit_length() - 1)
        if d == 1 and n & (n - 1) == 0:
            return n.bit_length() - 1
        raise ValueError(f"{p} is not a power of two")

    def in_unit(bits):
        if unit == "bits":
            return bits
        return sympy.Rational(bits.numerator, bits.denominator) * sympy.log(2)

    rows = []
    for p in distributions:
        h = sum((-Fraction(x) * log2(Fraction(x)) for x in p if x != 0), Fraction(0))
        rows.append({f"H_{unit}": in_unit(h)})
    return {"rows": rows}


def divergence_rows(pairs, unit):
    from fractions import Fraction

    import sympy

    def log2(p):
        n, d = p.numerator, p.denominator
        if n == 1 and d & (d - 1) == 0:
            return -(d.bit_length() - 1)
        if d == 1 and n & (n - 1) == 0:
            return n.bit_length() - 1
        raise ValueError(f"{p} is not a power of two")

    def in_unit(bits):
        if unit == "bits":
            return bits
        return sympy.Rational(bits.numerator, bits.denominator) * sympy.log(2)

    rows = []
    for pair in pairs:
        p = [Fraction(x) for x in pair["p"]]
        q = [Fraction(x) for x in pair["q"]]
        h_p = sum((-pi * log2(pi) for pi in p if pi != 0), Fraction(0))
        h_pq = sum((-pi * log2(qi) for pi, qi in zip(p, q, strict=True) if pi != 0), Fraction(0))
        rows.append({f"H_p_{unit}": in_unit(h_p), f"H_pq_{unit}": in_unit(h_pq),
                     f"KL_{unit}": in_unit(h_pq - h_p)})
    return {"rows": rows}


def joint_information_rows(joint, unit):
    from fractions import Fraction

    import sympy

    def log2(p):
        n, d = p.numerator, p.denominator
        if n == 1 and d & (d - 1) == 0:
            return -(d.bit_length() - 1)
        if d == 1 and n & (n - 1) == 0:
            return n.bit_length() - 1
        raise ValueError(f"{p} is not a power of two")

    def entropy(p):
        return sum((-x * log2(x) for x in p if x != 0), Fraction(0))

    def in_unit(bits):
        if unit == "bits":
            return bits
        return sympy.Rational(bits.numerator, bits.denominator) * sympy.log(2)

    table = [[Fraction(x) for x in row] for row in joint]
    h_a = entropy([sum(row) for row in table])
    h_b = entropy([sum(column) for column in zip(*table, strict=True)])
    h_ab = entropy([x for row in table for x in row])
    return {"rows": [{
        f"H_A_{unit}": in_unit(h_a),
        f"H_B_{unit}": in_unit(h_b),
        f"H_AB_{unit}": in_unit(h_ab),
        f"H_A_given_B_{unit}": in_unit(h_ab - h_b),
        f"I_{unit}": in_unit(h_a + h_b - h_ab),
    }]}


def classification_loss_rows(predictions, labels):
    from fractions import Fraction

    import sympy

    def log2(p):
        n, d = p.numerator, p.denominator
        if n == 1 and d & (d - 1) == 0:
            return -(d.bit_length() - 1)
        if d == 1 and n & (n - 1) == 0:
            return n.bit_length() - 1
        raise ValueError(f"{p} is not a power of two")

    losses = [-log2(Fraction(q[y])) for q, y in zip(predictions, labels, strict=True)]
    mean = Fraction(sum(losses), len(losses))
    perplexity = sympy.Integer(2) ** sympy.Rational(mean.numerator, mean.denominator)
    return {"rows": [{"loss_bits": mean, "perplexity": perplexity}]}


def _entropy_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        f"For each probability distribution in `distributions`, compute its Shannon entropy in {unit}.",
        {"distributions": ("list of distributions, each a list of fractions.Fraction probabilities",
                           inputs["distributions"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_{unit}": value}}, ...]}}  (one row per distribution, in the given order)',
        unit + (" (exact sympy multiples of log(2))" if unit == "nats" else " (exact Fractions)"),
    )


def _divergence_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        f"For each pair (p, q) in `pairs`, compute the entropy H(p), the cross-entropy H(p, q) and the "
        f"KL divergence D(p || q), all in {unit}. Note the order: D(p || q) weighs by p.",
        {"pairs": ("list of dicts {'p': distribution, 'q': distribution} over the same outcomes",
                   inputs["pairs"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_p_{unit}": value, "H_pq_{unit}": value, "KL_{unit}": value}}, ...]}}  '
        "(one row per pair, in the given order)",
        unit + (" (exact sympy multiples of log(2))" if unit == "nats" else " (exact Fractions)"),
    )


def _joint_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). "
        f"Compute H(A), H(B), H(A, B), H(A | B) and the mutual information I(A; B), all in {unit}.",
        {"joint": ("list of rows of fractions.Fraction, rows indexed by a, columns by b", inputs["joint"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_A_{unit}": value, "H_B_{unit}": value, "H_AB_{unit}": value, '
        f'"H_A_given_B_{unit}": value, "I_{unit}": value}}]}}  (a single row)',
        unit + (" (exact sympy multiples of log(2))" if unit == "nats" else " (exact Fractions)"),
    )


def _classification_prompt(inputs):
    return prompt(
        "A classifier outputs the predicted distribution predictions[i] over classes for example i, whose "
        "true class is labels[i]. Compute the mean cross-entropy loss over the batch in bits, "
        "-(1/N) sum_i log2 predictions[i][labels[i]], and the perplexity 2**loss (exact, e.g. as a sympy "
        "power of 2).",
        {"predictions": ("list of distributions, each a list of fractions.Fraction", inputs["predictions"]),
         "labels": ("list of int class indices", inputs["labels"])},
        '{"rows": [{"loss_bits": Fraction, "perplexity": exact sympy value}]}  (a single row)',
        "loss in bits per example; perplexity is dimensionless",
    )


HALF_QUARTER_EIGHTHS = [F(1, 2), F(1, 4), F(1, 8), F(1, 8)]
UNIFORM4 = [F(1, 4)] * 4

_ENTROPY = [HALF_QUARTER_EIGHTHS, [F(1, 2)] + [F(1, 8)] * 4, UNIFORM4,
            [F(1, 2), F(1, 4), F(1, 8), F(1, 16), F(1, 32), F(1, 32)]]
_PAIRS = [{"p": HALF_QUARTER_EIGHTHS, "q": UNIFORM4},
          {"p": UNIFORM4, "q": HALF_QUARTER_EIGHTHS},
          {"p": [F(1, 2), F(1, 4), F(1, 4)], "q": [F(1, 4), F(1, 4), F(1, 2)]}]
# q is p rotated by one place (not reversed): D(p || q) = 1/2 bit but D(q || p) = 5/8 bit.
_ASYMMETRIC_P = HALF_QUARTER_EIGHTHS
_ASYMMETRIC_Q = [F(1, 4), F(1, 8), F(1, 8), F(1, 2)]
if kl_bits(_ASYMMETRIC_P, _ASYMMETRIC_Q) == kl_bits(_ASYMMETRIC_Q, _ASYMMETRIC_P):
    raise ValueError("the KL-asymmetry pair must have D(p || q) != D(q || p)")
_NATS_PAIRS = [{"p": [F(1, 2), F(1, 8), F(1, 8), F(1, 8), F(1, 8)],
                "q": [F(1, 16), F(1, 2), F(1, 16), F(1, 8), F(1, 4)]}]

# B = (A + 1) mod 4: invertible, so I(A; B) = H(A) and H(A | B) = 0.
_JOINT_INVERTIBLE = [[0, F(1, 2), 0, 0], [0, 0, F(1, 4), 0], [0, 0, 0, F(1, 8)], [F(1, 8), 0, 0, 0]]
# B = f(A) with f = (0, 0, 1, 1, 2): not invertible, so I(A; B) = H(B) < H(A).
_JOINT_MERGING = [[F(1, 4), 0, 0], [F(1, 4), 0, 0], [0, F(1, 8), 0], [0, F(1, 8), 0], [0, 0, F(1, 4)]]
# B = f(A) with f = (0, 1, 1, 0, 2, 2) over P(A) = (1/4, 1/8, 1/8, 1/4, 1/8, 1/8).
_JOINT_SIX = [[F(1, 4), 0, 0], [0, F(1, 8), 0], [0, F(1, 8), 0], [F(1, 4), 0, 0], [0, 0, F(1, 8)],
              [0, 0, F(1, 8)]]

_API = api(CONVENTIONS)


def _joint_task(task_id, joint, unit, tags, zero_reason=None):
    return TaskDef(task_id, "information", {"joint": joint, "unit": unit}, joint_information_rows,
                   _joint_prompt, _API, POLICY, tags=tags, zero_reason=zero_reason,
                   meta={"joint": joint, "mutual_information": True})


TASKS = (
    TaskDef("dl-000", "information", {"distributions": _ENTROPY, "unit": "bits"}, entropy_rows,
            _entropy_prompt, _API, POLICY, tags=("entropy",), meta={"distributions": _ENTROPY}),
    TaskDef("dl-001", "information", {"distributions": _ENTROPY[:3], "unit": "nats"}, entropy_rows,
            _entropy_prompt, _API, POLICY, tags=("entropy", "nats"), meta={"distributions": _ENTROPY[:3]}),
    TaskDef("dl-002", "information", {"pairs": _PAIRS, "unit": "bits"}, divergence_rows,
            _divergence_prompt, _API, POLICY, tags=("cross-entropy", "kl"),
            meta={"distributions": [d for pair in _PAIRS for d in (pair["p"], pair["q"])]}),
    TaskDef("dl-003", "information",
            {"pairs": [{"p": _ASYMMETRIC_P, "q": _ASYMMETRIC_Q}, {"p": _ASYMMETRIC_Q, "q": _ASYMMETRIC_P}],
             "unit": "bits"},
            divergence_rows, _divergence_prompt, _API, POLICY, tags=("kl", "kl-asymmetry"),
            meta={"distributions": [_ASYMMETRIC_P, _ASYMMETRIC_Q],
                  "kl_asymmetry": {"p": _ASYMMETRIC_P, "q": _ASYMMETRIC_Q}}),
    TaskDef("dl-004", "information", {"pairs": _NATS_PAIRS, "unit": "nats"}, divergence_rows,
            _divergence_prompt, _API, POLICY, tags=("kl", "nats"),
            meta={"distributions": [d for pair in _NATS_PAIRS for d in (pair["p"], pair["q"])]}),
    _joint_task("dl-005", _JOINT_INVERTIBLE, "bits", ("mutual-information", "invertible"),
                zero_reason="B is an invertible function of A, so A is determined by B and H(A | B) = 0 "
                            "exactly: that is the point of the task (I(A; B) = H(A))."),
    _joint_task("dl-006", _JOINT_MERGING, "bits", ("mutual-information", "non-invertible")),
    TaskDef("dl-007", "information",
            {"predictions": [HALF_QUARTER_EIGHTHS, UNIFORM4, [F(1, 8), F(1, 8), F(1, 4), F(1, 2)]],
             "labels": [1, 2, 0]},
            classification_loss_rows, _classification_prompt, _API, POLICY,
            tags=("cross-entropy", "perplexity"),
            meta={"distributions": [HALF_QUARTER_EIGHTHS, UNIFORM4, [F(1, 8), F(1, 8), F(1, 4), F(1, 2)]]}),
    _joint_task("dl-008", _JOINT_SIX, "nats", ("mutual-information", "nats", "non-invertible")),
)
