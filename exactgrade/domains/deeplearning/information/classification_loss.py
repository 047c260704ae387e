"""The classification_loss family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import answer_field
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import API, UPPER_API, info_family
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef


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


def build_classification(task_id, inputs):
    return TaskDef(task_id, "information", inputs, classification_loss_rows, _classification_prompt, API,
                   POLICY, tags=("cross-entropy", "perplexity"),
                   meta={"predictions": inputs["predictions"], "labels": inputs["labels"]})


def sample_classification_upper(draw: Draw, level: int) -> dict:
    if level == 5:
        base = sample_ranked(draw)
        return {"question": "top_k", **base, "target": top_k_target(draw, base)}
    if level == 3:
        return {"question": "accuracy_loss", **sample_argmax(draw)}
    base = sample_classification(draw, 1)
    if level == 2:
        return base
    examples = zip(base["predictions"], base["labels"], strict=True)
    losses = sorted((-_log2(q[y]) for q, y in examples), reverse=True)
    if len(losses) < 5:  # three bounds from four or more drop counts (not every count of the N - 1)
        raise Reject("fewer than five examples")
    return {"question": "drop_hardest", **base, "bounds": drop_bounds(draw, losses)}


def drop_bounds(draw: Draw, losses: list[int]) -> list[F]:
    """Level 4's bounds, one question each (so the key is a tuple of answers, not one of a handful
    of counts): three of them, each the mean loss left after dropping a distinct drawn
    number of the hardest examples (that number, or fewer where losses tie, is the answer), in
    random order; in a sixth of the instances (decided first, never redrawn) one of them is below
    every loss, so that row is None."""
    n = len(losses)  # sorted, largest first
    unreachable = draw.chance(1, 6)
    drops = draw.sample(range(1, n), 3)
    bounds = [F(sum(losses[k:]), n - k) for k in drops]
    if unreachable:
        bounds[draw.below(len(bounds))] = F(min(losses), 2)
    return bounds


def sample_argmax(draw: Draw) -> dict:
    """Level 3: sample_ranked over 4-16 classes with the true class ranked first in about half the
    examples (so a correct example's loss is 1, 2 or 3 bits: more classes allow a less confident
    winner), and in about a third of those another class tied with it at the top: moved from two
    parts a + b (33..63 units) to 32 and a + b - 32, so the sum stays 1 and the stated tie rule
    (the smallest class index) decides whether the example is predicted right."""
    base = sample_ranked(draw, classes_range=(4, 16), first_share=(1, 2))
    predictions = []
    for q, y in zip(base["predictions"], base["labels"], strict=True):
        q = list(q)
        others = [c for c in range(len(q)) if c != y]
        top = F(q[y])
        if all(F(q[c]) < top for c in others) and draw.chance(1, 3):
            unit = top / 32
            pairs = [(a, b) for a in others for b in others if a < b and 33 <= (q[a] + q[b]) / unit <= 63]
            if pairs:
                a, b = draw.choice(pairs)
                tied, rest = (a, b) if draw.chance(1, 2) else (b, a)
                q[rest], q[tied] = q[a] + q[b] - top, top
        predictions.append(q)
    return {"predictions": predictions, "labels": base["labels"]}


def sample_ranked(draw: Draw, classes_range: tuple[int, int] = (4, 8),
                  first_share: tuple[int, int] | None = None) -> dict:
    """6-12 examples over 4-8 classes (``classes_range``), each true class at a drawn rank r (1 +
    the classes more probable than it; uniform, or 1 with the chance ``first_share`` and else
    uniform over the others): its probability p = 2**-e (e from 1..10, as far as the rank allows)
    with r - 1 classes above p and the rest below, in units of 2**-(e + 5) (p is 32 units, the
    others at most 31 or at least 33: no ties). Level 1's sampler puts nearly every true class
    last, so only confident examples (loss 1 or 2 bits) rank higher and a top-k answer comes free."""
    classes = draw.integer(*classes_range)
    predictions, labels = [], []
    for _ in range(draw.integer(6, 12)):
        if first_share is None:
            rank = draw.integer(1, classes)
        else:
            rank = 1 if draw.chance(*first_share) else draw.integer(2, classes)
        below = classes - rank
        e = draw.choice([e for e in range(1, 11) if _rank_fits(e, rank, classes)])
        rest = 2 ** (e + 5) - 32  # 1 - p in units
        if rank == 1:  # every other class below p, filling the rest exactly
            parts, excess = [31] * (classes - 1), 31 * (classes - 1) - rest
            while excess:
                i = draw.choice([i for i, x in enumerate(parts) if x > 1])
                cut = draw.integer(1, min(excess, parts[i] - 1))
                parts[i], excess = parts[i] - cut, excess - cut
        else:
            parts = [draw.integer(1, 31) for _ in range(below)]
            spare = rest - sum(parts) - 33 * (rank - 1)
            cuts = sorted(draw.integer(0, spare) for _ in range(rank - 2))
            parts += [33 + b - a for a, b in zip([0, *cuts], [*cuts, spare], strict=True)]
        parts = [F(x, 2 ** (e + 5)) for x in draw.shuffled(parts)]
        label = draw.below(classes)
        predictions.append([*parts[:label], F(1, 2**e), *parts[label:]])
        labels.append(label)
    return {"predictions": predictions, "labels": labels}


def _rank_fits(e: int, rank: int, classes: int) -> bool:
    """Whether a true class of probability 2**-e can have this rank with no ties: the other classes
    (1 - p in units of 2**-(e + 5)) all below p at rank 1, else rank - 1 above and the rest below."""
    rest = 2 ** (e + 5) - 32
    return rest <= 31 * (classes - 1) if rank == 1 else rest >= 31 * (classes - rank) + 33 * (rank - 1)


def top_k_target(draw: Draw, base) -> F:
    """A target met below the largest rank of a true class (so the smallest k is not the number
    of classes and the loss is not over every example), except in one instance in twenty, where it
    is only met there; the rank of example i is 1 + the number of classes more probable than its
    true class."""
    ranks = [1 + sum(1 for x in q if F(x) > F(q[y])) for q, y in zip(base["predictions"], base["labels"],
                                                                      strict=True)]
    n, below = len(ranks), sum(1 for r in ranks if r < max(ranks))
    if below == 0:
        raise Reject("every true class has the same rank")
    if draw.chance(1, 20):
        return F(draw.integer(below + 1, n), n)
    return F(draw.integer(1, below), n)


def _log2(p) -> int:
    p = F(p)
    return p.numerator.bit_length() - p.denominator.bit_length()


def _geometric_prompt(inputs):
    return prompt(
        "A classifier outputs the predicted distribution predictions[i] over classes for example i, whose "
        "true "
        "class is labels[i]. Let g be the geometric mean, over the examples, of the probability the "
        "classifier "
        "gives the true class. Give log2(1/g) (bits per example) and 1/g (the classifier is as uncertain as "
        "a "
        "uniform choice among 1/g classes), both exact.",
        {"predictions": ("list of distributions, each a list of fractions.Fraction", inputs["predictions"]),
         "labels": ("list of int class indices", inputs["labels"])},
        '{"rows": [{"loss_bits": Fraction, "perplexity": exact sympy value}]}  (a single row; loss_bits is '
        "log2(1/g), perplexity is 1/g)",
        "loss in bits per example; perplexity is dimensionless",
    )


def build_geometric(task_id, inputs):
    basics = UPPER_API

    return TaskDef(task_id, "information", inputs, classification_loss_rows, _geometric_prompt, basics,
                   POLICY, tags=("cross-entropy", "perplexity"),
                   meta={"predictions": inputs["predictions"], "labels": inputs["labels"]})


def _none_k(task):
    """A row of the key whose k is None (drop_hardest: a bound no number of drops reaches)."""
    return any(row.get("k", 0) is None for row in task.expected["rows"])


def _top_tie(task):
    """accuracy_loss: an example whose true class ties another for the largest probability (the
    stated tie rule, not the probabilities, decides whether it is predicted right)."""
    if task.inputs.get("question") != "accuracy_loss":
        return False
    return any(sum(1 for x in q if F(x) == max(map(F, q))) > 1 and F(q[y]) == max(map(F, q))
               for q, y in zip(task.inputs["predictions"], task.inputs["labels"], strict=True))


def _every_example_counts(task):
    """top_k's smallest k is the largest rank of a true class: the loss is over every example."""
    if task.inputs.get("question") != "top_k":
        return False
    predictions, labels = task.inputs["predictions"], task.inputs["labels"]
    return answer_field(task, "k") == max(1 + sum(1 for x in q if F(x) > F(q[y]))
                                          for q, y in zip(predictions, labels, strict=True))


CLASSIFICATION_LOSS = info_family(
    "classification_loss", build_classification, sample_classification,
    "L1: mean log loss and perplexity with formulas stated. L2 (derive): the same two numbers described as "
    "the "
    "geometric mean of the true-class probabilities. L3 (compose): accuracy (argmax, ties to the smallest "
    "class) and the mean loss of the correct examples, over 4-16 classes with the true class on top in "
    "about half the examples (a correct loss of 1-3 bits) and tied there in a third of those. L4 "
    "(inverse): for each of three loss bounds, the fewest hardest examples to drop to reach it, "
    "a None row in about a sixth. L5 (search): the smallest k whose top-k accuracy reaches a "
    "target, and the loss of the top-k correct examples, over 4-8 classes with each true class at a drawn "
    "rank; the target is met below the largest rank of a true class in 19 instances in 20 (k is not the "
    "number of classes, the loss not over every example).",
    sample_classification_upper, level_two=build_geometric,
    branches=(Branch("no number of drops reaches a bound", _none_k, F(1, 20), (4,)),
              Branch("a tie for the top probability", _top_tie, F(1, 2), (3,)),
              Branch("every example is top-k correct", _every_example_counts, F(1, 50), (5,))))
