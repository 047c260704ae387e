"""Information tasks (dl-000..dl-008): entropy, cross-entropy, KL, mutual information.

Every probability used in a log is an integer power of two, so every value in bits is an exact
Fraction; nats are bits * log(2), exact sympy values. Joints are built with b a deterministic
function of a (a dyadic split of a binary axis would force independence and I = 0), with
marginals chosen dyadic.

Families (one per reference; a canonical task is an instance with fixed inputs): entropy,
divergence, kl_asymmetry, mutual_information, classification_loss. Their samplers build
distributions by repeatedly halving one outcome's probability, so every probability is a power
of two by construction (up to 16 outcomes at level 5); joints put all of P(A = a) on one b = f(a)
and draw P(B) first and then split each P(B = b) dyadically over f's preimage of b, so both
marginals are dyadic by construction and I(A; B) = H(B) > 0 (f invertible: I = H(A)).
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Draw, Reject
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


def _asymmetry_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        "`pairs` holds a pair of distributions (p, q) and then the same pair reversed, (q, p): the two rows "
        "compare the KL divergence in both directions, D(p || q) and D(q || p). For each listed pair (a, b) "
        f"give the entropy H(a), the cross-entropy H(a, b) and the KL divergence D(a || b), all in {unit}. "
        "D(a || b) weighs by a, the first distribution of the pair.",
        {"pairs": ("list of two dicts {'p': distribution, 'q': distribution}: (p, q), then (q, p)",
                   inputs["pairs"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_p_{unit}": value, "H_pq_{unit}": value, "KL_{unit}": value}}, ...]}}  '
        "(one row per listed pair, in the given order; H_p is H(a), H_pq is H(a, b))",
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

_API = api(CONVENTIONS)
MAX_OUTCOMES = {1: 6, 2: 8, 3: 10, 4: 12, 5: 16}
"""The largest support a level draws (level 5 always includes a 16-outcome distribution)."""


# ---------------------------------------------------------------------------- samplers


def dyadic_distribution(draw: Draw, outcomes: int, finest: int = 8) -> list[F]:
    """A distribution over ``outcomes`` outcomes whose probabilities are powers of two: start
    from [1] and halve a random outcome (never below 2**-finest) until there are enough."""
    p = [F(1)]
    while len(p) < outcomes:
        i = draw.choice([i for i, x in enumerate(p) if x.denominator < 2**finest])
        p[i:i + 1] = [p[i] / 2, p[i] / 2]
    return draw.shuffled(p)


def _support(draw: Draw, level: int, low: int = 2) -> int:
    return draw.integer(low, MAX_OUTCOMES[level])


def _unit(draw: Draw) -> str:
    return draw.choice(("bits", "nats"))


def _widest_last(draw: Draw, level: int, distributions: list[list[F]]) -> list[list[F]]:
    """At level 5 one distribution has the full 16 outcomes."""
    if level == 5:
        distributions[draw.below(len(distributions))] = dyadic_distribution(draw, MAX_OUTCOMES[5])
    return distributions


def sample_entropy(draw: Draw, level: int) -> dict:
    distributions = [dyadic_distribution(draw, _support(draw, level)) for _ in range(2 + level)]
    return {"distributions": _widest_last(draw, level, distributions), "unit": _unit(draw)}


def _pair(draw: Draw, outcomes: int) -> dict:
    """p and q != p (q = p makes D(p || q) an undeclared zero in the key: q is drawn again)."""
    p = dyadic_distribution(draw, outcomes)
    for _ in range(16):
        q = dyadic_distribution(draw, outcomes)
        if q != p:
            return {"p": p, "q": q}
    raise Reject("drew only q = p")


def sample_divergence(draw: Draw, level: int) -> dict:
    """At least 3 outcomes: over 2 the only dyadic distribution is (1/2, 1/2), so q = p."""
    pairs = [_pair(draw, _support(draw, level, low=3)) for _ in range(1 + level)]
    if level == 5:
        pairs[0] = _pair(draw, MAX_OUTCOMES[5])
    return {"pairs": pairs, "unit": _unit(draw)}


def sample_kl_asymmetry(draw: Draw, level: int) -> dict:
    """q is either a reordering of p (same entropy: the asymmetry is all in the cross terms) or
    an independent distribution; a symmetric pair is redrawn. At least 4 outcomes: every pair of
    dyadic distributions over 3 outcomes (orderings of 1/2, 1/4, 1/4) is symmetric."""
    widest = MAX_OUTCOMES[level] + (2 if level >= 2 else 0)
    for _ in range(8):  # a symmetric pair is drawn again (all of it, as a fresh attempt would)
        outcomes = draw.integer(max(4, widest - 4), widest)
        p = dyadic_distribution(draw, outcomes)
        q = draw.shuffled(p) if draw.chance(1, 3) else dyadic_distribution(draw, outcomes)
        if _asymmetric(p, q):
            break
    else:
        raise Reject("D(p || q) = D(q || p): not an asymmetric pair")
    return {"pairs": [{"p": p, "q": q}, {"p": q, "q": p}], "unit": "bits" if level == 1 else _unit(draw)}


def _asymmetric(p: list[F], q: list[F]) -> bool:
    """D(p || q) != D(q || p) for dyadic p and q with no zero, in integers: the difference is
    sum_i (p_i + q_i) (log2 p_i - log2 q_i), and with p_i = 2**-a_i, q_i = 2**-b_i, scaled by
    2**k for a k above every exponent, it is sum_i (2**(k - a_i) + 2**(k - b_i)) (b_i - a_i).
    (A cheap pre-screen; the builder confirms with exactgrade.rational.kl_bits.)"""
    a = [x.denominator.bit_length() - 1 for x in p]
    b = [x.denominator.bit_length() - 1 for x in q]
    k = max(a + b)
    return sum(((1 << (k - ai)) + (1 << (k - bi))) * (bi - ai) for ai, bi in zip(a, b, strict=True)) != 0


JOINT_OUTCOMES = {1: 6, 2: 14, 3: 16, 4: 18, 5: 20}
"""|A| per level: wider than MAX_OUTCOMES from level 2, since the key (H(A), H(B), H(A, B)) of a
narrow joint takes too few values to vary."""


def sample_joint(draw: Draw, level: int) -> dict:
    """B = f(A): P(B) first, then each P(B = b) split over the a with f(a) = b (one a each when f is
    invertible, an eighth of the joints, all of the widest support). Seven eighths of the
    others then pass through a noisy channel: a mixing move takes two equal cells (a1, b1), (a2,
    b2) whose crossed cells are empty and moves half of each to (a1, b2) and (a2, b1), which
    keeps every cell and both marginals dyadic while lowering I(A; B) (a joint that reaches I =
    0 is refused by the check)."""
    total = JOINT_OUTCOMES[level]
    invertible = draw.chance(1, 8)
    few = 2 if level == 1 else 3
    n_b = draw.integer(total - 2, total) if invertible else draw.integer(few, max(few, total // 2))
    p_b = dyadic_distribution(draw, n_b)
    preimages = [1] * n_b
    if not invertible:
        for _ in range(draw.integer(min(2, total - n_b), total - n_b)):
            preimages[draw.below(n_b)] += 1
    rows = []
    for b, (mass, count) in enumerate(zip(p_b, preimages, strict=True)):
        for part in dyadic_distribution(draw, count):
            rows.append([mass * part if column == b else 0 for column in range(n_b)])
    if not invertible and draw.chance(7, 8):
        for _ in range(draw.integer(1, level + 1)):
            _mix(draw, rows)
    return {"joint": draw.shuffled(rows), "unit": _unit(draw)}


def _mix(draw: Draw, rows: list[list]) -> None:
    cells = [(a, b) for a, row in enumerate(rows) for b, x in enumerate(row) if x != 0]
    moves = [(c, d) for c in cells for d in cells
             if c < d and c[0] != d[0] and c[1] != d[1] and rows[c[0]][c[1]] == rows[d[0]][d[1]]
             and rows[c[0]][d[1]] == 0 and rows[d[0]][c[1]] == 0]
    if moves:
        (a1, b1), (a2, b2) = draw.choice(moves)
        half = rows[a1][b1] / 2
        rows[a1][b1] = rows[a1][b2] = rows[a2][b2] = rows[a2][b1] = half


def sample_classification(draw: Draw, level: int) -> dict:
    """3..8 examples at level 1, 3..(6 + 5 * level) above, over 3..(2 + 2 * level) classes. Only the
    true class's probability enters a log, so it alone is a power of two, 2**-k with k up to 8
    at level 1 and min(80 * level, 200) above (the perplexity 2**loss must stay under the key-
    size limit) (confidently wrong predictions: without that range the mean loss takes too few
    values for the key to vary); the other classes share the rest as positive multiples of
    2**-(k + 5). The mean loss is never an integer, so the perplexity is irrational (2**(7/3))."""
    classes = draw.integer(3, 2 + 2 * level)
    predictions, labels, total = [], [], 0
    for _ in range(draw.integer(3, 8 if level == 1 else 6 + 5 * level)):
        k = draw.integer(1, 8 if level == 1 else min(80 * level, 200))
        units = 2 ** (k + 5) - 32  # 1 - 2**-k in units of 2**-(k + 5)
        cuts: set[int] = set()
        while len(cuts) < classes - 2:
            cuts.add(draw.integer(1, units - 1))
        cuts = sorted(cuts)
        parts = [F(b - a, 2 ** (k + 5)) for a, b in zip([0, *cuts], [*cuts, units], strict=True)]
        label = draw.below(classes)
        predictions.append([*parts[:label], F(1, 2**k), *parts[label:]])
        labels.append(label)
        total += k
    if total % len(labels) == 0:
        raise Reject("the mean loss is an integer: the perplexity would be rational")
    return {"predictions": predictions, "labels": labels}


# ---------------------------------------------------------------------------- builders


def _nats_tag(inputs):
    return ("nats",) if inputs["unit"] == "nats" else ()


def build_entropy(task_id, inputs):
    return TaskDef(task_id, "information", inputs, entropy_rows, _entropy_prompt, _API, POLICY,
                   tags=("entropy", *_nats_tag(inputs)), meta={"distributions": inputs["distributions"]})


def _pair_distributions(inputs):
    return [d for pair in inputs["pairs"] for d in (pair["p"], pair["q"])]


def build_divergence(task_id, inputs):
    tags = ("kl", "nats") if inputs["unit"] == "nats" else ("cross-entropy", "kl")
    return TaskDef(task_id, "information", inputs, divergence_rows, _divergence_prompt, _API, POLICY,
                   tags=tags, meta={"distributions": _pair_distributions(inputs)})


def build_kl_asymmetry(task_id, inputs):
    """The pair (p, q) and its reverse; a symmetric pair is refused."""
    p, q = inputs["pairs"][0]["p"], inputs["pairs"][0]["q"]
    if inputs["pairs"][1] != {"p": q, "q": p}:
        raise ValueError("a KL-asymmetry task lists (p, q) and then (q, p)")
    if kl_bits(p, q) == kl_bits(q, p):
        raise ValueError("the KL-asymmetry pair must have D(p || q) != D(q || p)")
    return TaskDef(task_id, "information", inputs, divergence_rows, _asymmetry_prompt, _API, POLICY,
                   tags=("kl", "kl-asymmetry", *_nats_tag(inputs)),
                   meta={"distributions": [p, q], "kl_asymmetry": {"p": p, "q": q}})


INVERTIBLE_REASON = ("B is an invertible function of A, so A is determined by B and H(A | B) = 0 exactly: "
                     "that is the point of the task (I(A; B) = H(A)).")


def build_joint(task_id, inputs):
    """Invertible when every row and every column has one non-zero cell; H(A | B) = 0 exactly
    when every column has one (A is then a function of B)."""
    joint = inputs["joint"]
    columns_single = all(sum(1 for row in joint if row[b] != 0) == 1 for b in range(len(joint[0])))
    rows_single = all(sum(1 for x in row if x != 0) == 1 for row in joint)
    invertible = columns_single and rows_single
    zero_reason = (INVERTIBLE_REASON if invertible else
                   "every column has one non-zero cell, so A is a function of B and H(A | B) = 0 exactly"
                   if columns_single else None)
    kind = "invertible" if invertible else "non-invertible"
    return TaskDef(task_id, "information", inputs, joint_information_rows, _joint_prompt, _API, POLICY,
                   tags=("mutual-information", *_nats_tag(inputs), kind),
                   zero_reason=zero_reason, meta={"joint": joint, "mutual_information": True})


def build_classification(task_id, inputs):
    return TaskDef(task_id, "information", inputs, classification_loss_rows, _classification_prompt, _API,
                   POLICY, tags=("cross-entropy", "perplexity"),
                   meta={"predictions": inputs["predictions"], "labels": inputs["labels"]})
