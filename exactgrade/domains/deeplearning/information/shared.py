"""What two or more information families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import answer_field, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Builder, Draw
from exactgrade.task import TaskDef, uses

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


API = api(CONVENTIONS)


MAX_OUTCOMES = {1: 6, 2: 8, 3: 10, 4: 12, 5: 16}
"""The largest support a level draws (level 5 always includes a 16-outcome distribution)."""


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


def nats_tag(inputs):
    return ("nats",) if inputs["unit"] == "nats" else ()

BASICS = (
    "Information conventions. Bits use log base 2, nats the natural log. Terms with probability 0 contribute "
    "0 (0 * log 0 = 0). A distribution is a list of probabilities (fractions.Fraction) over outcomes "
    "0, 1, 2, ...; every probability that appears inside a log in these tasks is a power of two unless the "
    "question says otherwise. Give values in nats as exact sympy multiples of log(2) (e.g. "
    "7*sympy.log(2)/4), never math.log."
)
"""Level 2+ conventions: the notation, not the formulas of entropy, cross-entropy, KL or I."""

UPPER_API = api(BASICS)


# The helpers of the levels 2-5 references, written once: each is self-contained (a reference
# that calls one names it with ``uses``, and its program defines it), so it runs in the sandbox.
def log2(p):
    from fractions import Fraction

    p = Fraction(p)
    n, d = p.numerator, p.denominator
    if n == 1 and d & (d - 1) == 0:
        return -(d.bit_length() - 1)
    if d == 1 and n & (n - 1) == 0:
        return n.bit_length() - 1
    raise ValueError(f"{p} is not a power of two")


@uses(log2)
def entropy(p):
    from fractions import Fraction

    return sum((-Fraction(x) * log2(x) for x in p if x != 0), Fraction(0))


@uses(log2)
def cross(p, q):
    from fractions import Fraction

    return sum((-Fraction(x) * log2(y) for x, y in zip(p, q, strict=True) if x != 0), Fraction(0))


@uses(entropy, cross)
def kl(p, q):
    return cross(p, q) - entropy(p)


@uses(entropy)
def mutual(joint):
    from fractions import Fraction

    table = [[Fraction(x) for x in row] for row in joint]
    pa = [sum(row) for row in table]
    pb = [sum(col) for col in zip(*table, strict=True)]
    return entropy(pa) + entropy(pb) - entropy([x for row in table for x in row])


def merged(joint, groups):
    """The joint of A and C, C the group of B's value (the columns of each group summed)."""
    from fractions import Fraction

    return [[sum((Fraction(row[b]) for b in group), Fraction(0)) for group in groups] for row in joint]


@uses(log2)
def divergence_rows(pairs, unit):
    from fractions import Fraction

    import sympy

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


GIVEN = {"distributions": "list of distributions (lists of Fraction)",
          "sources": "list of dicts "
          "{'groups': distribution over groups, 'within': one distribution per group}",
          "candidates": "list of distributions", "cap": "the largest probability allowed",
          "pairs": "list of dicts {'p': distribution, 'q': distribution}", "products": "list of lists of "
          "{'p', 'q'} pairs, one per coordinate", "p": "the true distribution", "q": "the model's "
                                                                                     "probabilities",
          "budget": "the largest divergence allowed, in bits", "joint": "rows indexed by a, columns by b",
          "groups": "list of lists of B's values (a partition of 0..len(joint[0]) - 1)",
          "data": "the data distribution (list of Fraction, not powers of two)",
          "p0": "the distribution at t = 0 (list of Fraction)",
          "p1": "the distribution at t = 1 (list of Fraction)",
          "predictions": "list of distributions over classes", "labels": "list of int class indices",
          "bounds": "list of the largest mean losses allowed, in bits, each asked on its own",
          "target": "the fraction of examples to reach"}


def question_level(word, reference, independent, question, shape, units) -> Builder:
    """The builder of one levels 2-5 question: its text, answer shape and units, its reference and
    its independent check (``meta["independent"]``); the inputs carry the question's ``word``,
    which the prompt shows."""

    def render(inputs):
        variables = {k: (d, inputs[k]) for k, d in GIVEN.items() if k in inputs}
        return prompt(question, {**variables, "question": ("the question asked, as a word", word)},
                      single_row(shape), units)

    def build(task_id, inputs):
        if inputs.get("question") != word:
            raise ValueError(f"this level asks {word!r}; the inputs say {inputs.get('question')!r}")
        meta: dict = {"independent": independent}
        listed = [*inputs.get("distributions", []), *inputs.get("candidates", []),
                  *(d for pair in inputs.get("pairs", []) for d in (pair["p"], pair["q"])),
                  *(d for pairs in inputs.get("products", []) for pair in pairs
                    for d in (pair["p"], pair["q"])),
                  *(d for source in inputs.get("sources", []) for d in (source["groups"], *source["within"])),
                  *([inputs["p"]] if "p" in inputs else []), *([inputs["q"]] if "q" in inputs else [])]
        if listed:
            meta["distributions"] = listed
        if "joint" in inputs:
            meta["joint"] = inputs["joint"]
        if "labels" in inputs:
            meta.update(predictions=inputs["predictions"], labels=inputs["labels"])
        return TaskDef(task_id, "information", inputs, reference, render, UPPER_API, POLICY,
                       tags=("information", word), meta=meta)

    return build


def none_best(task):
    return task.level == 4 and answer_field(task, "best") is None
