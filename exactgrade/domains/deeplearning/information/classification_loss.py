"""The classification_loss family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import answer_field, deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import API, UPPER_API, log2, question_level
from exactgrade.family import Branch, Draw, Level, Reject
from exactgrade.task import TaskDef, uses


@uses(log2)
def classification_loss_rows(predictions, labels):
    from fractions import Fraction

    import sympy

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


LEVEL_1 = Level(build_classification, sample_classification)


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
    return TaskDef(task_id, "information", inputs, classification_loss_rows, _geometric_prompt, UPPER_API,
                   POLICY, tags=("cross-entropy", "perplexity"),
                   meta={"predictions": inputs["predictions"], "labels": inputs["labels"]})


LEVEL_2 = Level(build_geometric, lambda draw, level: sample_classification(draw, 1))


def _losses(inputs) -> list[int]:
    """Each example's loss in bits, -log2 of its true class's probability (rational, not the reference)."""
    examples = zip(inputs["predictions"], inputs["labels"], strict=True)
    return [-rational.log2_dyadic(F(q[y])) for q, y in examples]


# L3 (compose): the accuracy of the argmax and the mean loss of the examples it gets right
@uses(log2)
def accuracy_and_loss(predictions, labels, question=None):
    from fractions import Fraction

    losses = [-log2(q[y]) for q, y in zip(predictions, labels, strict=True)]
    top = [max(range(len(q)), key=lambda c: (Fraction(q[c]), -c)) for q in predictions]
    right = [loss for loss, t, y in zip(losses, top, labels, strict=True) if t == y]
    return {"rows": [{"accuracy": Fraction(len(right), len(labels)),
                      "loss_correct_bits": Fraction(sum(right), len(right)) if right else None}]}


def _check_accuracy_and_loss(task):
    """Correct means no smaller class reaches the true one's probability and no larger one passes it."""
    predictions, labels = task.inputs["predictions"], task.inputs["labels"]
    right = [loss for q, y, loss in zip(predictions, labels, _losses(task.inputs), strict=True)
             if all(F(q[c]) < F(q[y]) for c in range(len(q)) if c < y)
             and all(F(q[c]) <= F(q[y]) for c in range(len(q)) if c > y)]
    return key_agrees(task, {"accuracy": F(len(right), len(labels)),
                             "loss_correct_bits": F(sum(right), len(right)) if right else None})


LEVEL_3 = Level(question_level(
    "accuracy_loss", accuracy_and_loss, _check_accuracy_and_loss,
    "A classifier outputs the distribution predictions[i] over classes for example i, whose true class "
    "is labels[i]. It predicts the class of highest probability (on a tie, the smallest class index). "
    "Give its accuracy (the fraction of examples predicted right) and the mean log loss in bits (-log2 "
    "of the probability given to the true class) over the correctly predicted examples only (None if "
    "there are none).",
    '{"accuracy": Fraction, "loss_correct_bits": Fraction or None}',
    "accuracy is a fraction of examples; the loss is in bits per example"),
    lambda draw, level: {"question": "accuracy_loss", **sample_argmax(draw)})


# L4 (inverse): the fewest hardest examples to drop for each loss bound
@uses(log2)
def fewest_drops(predictions, labels, bounds, question=None):
    from fractions import Fraction

    losses = [-log2(q[y]) for q, y in zip(predictions, labels, strict=True)]
    ordered = sorted(losses, reverse=True)
    rows = []
    for bound in bounds:
        fits = [k for k in range(len(ordered))
                if Fraction(sum(ordered[k:]), len(ordered) - k) <= Fraction(bound)]
        rows.append({"k": fits[0] if fits else None})
    return {"rows": rows}


def _check_fewest_drops(task):
    losses, rows = _losses(task.inputs), []
    for bound in task.inputs["bounds"]:
        kept = [sorted(losses)[:len(losses) - k] for k in range(len(losses))]
        rows.append({"k": next((k for k, part in enumerate(kept) if F(sum(part), len(part)) <= F(bound)),
                               None)})
    return key_agrees(task, {"rows": rows})


def sample_drop_hardest(draw: Draw, level: int) -> dict:
    base = sample_classification(draw, 1)
    examples = zip(base["predictions"], base["labels"], strict=True)
    losses = sorted((-_log2(q[y]) for q, y in examples), reverse=True)
    if len(losses) < 5:  # three bounds from four or more drop counts (not every count of the N - 1)
        raise Reject("fewer than five examples")
    return {"question": "drop_hardest", **base, "bounds": drop_bounds(draw, losses)}


LEVEL_4 = Level(question_level(
    "drop_hardest", fewest_drops, _check_fewest_drops,
    "A classifier outputs the distribution predictions[i] over classes for example i, whose true class "
    "is labels[i]; an example's loss is -log2 of the probability given to its true class. For each "
    "bound in `bounds`, what is the smallest number k (0 <= k <= N - 1, for N examples) of examples to "
    "remove, always removing the k of largest loss, so that the mean loss of the remaining examples is "
    "at most that bound, in bits? None for a bound that no such k reaches.",
    '{"rows": [{"k": int or None}, ...]}  (one row per bound, in the order of `bounds`)',
    "k counts examples"), sample_drop_hardest)


# L5 (search): the smallest k whose top-k accuracy reaches a target, and the loss of those examples
@uses(log2)
def smallest_top_k(predictions, labels, target, question=None):
    from fractions import Fraction

    losses = [-log2(q[y]) for q, y in zip(predictions, labels, strict=True)]
    ranks = [1 + sum(1 for x in q if Fraction(x) > Fraction(q[y]))
             for q, y in zip(predictions, labels, strict=True)]
    for k in range(1, max(len(q) for q in predictions) + 1):
        hit = [loss for loss, r in zip(losses, ranks, strict=True) if r <= k]
        if Fraction(len(hit), len(labels)) >= Fraction(target):
            return {"rows": [{"k": k, "loss_bits": Fraction(sum(hit), len(hit))}]}
    return {"rows": [{"k": None, "loss_bits": None}]}


def _check_smallest_top_k(task):
    """Top-k correct by the true class's place in the sorted probabilities, not by counting."""
    predictions, labels = task.inputs["predictions"], task.inputs["labels"]
    for k in range(1, max(map(len, predictions)) + 1):
        hit = [loss for q, y, loss in zip(predictions, labels, _losses(task.inputs), strict=True)
               if sorted((F(x) for x in q), reverse=True).index(F(q[y])) < k]
        if F(len(hit), len(labels)) >= F(task.inputs["target"]):
            return key_agrees(task, {"k": k, "loss_bits": F(sum(hit), len(hit))})
    return key_agrees(task, {"k": None, "loss_bits": None})


def sample_top_k(draw: Draw, level: int) -> dict:
    base = sample_ranked(draw)
    return {"question": "top_k", **base, "target": top_k_target(draw, base)}


LEVEL_5 = Level(question_level(
    "top_k", smallest_top_k, _check_smallest_top_k,
    "A classifier outputs the distribution predictions[i] over classes for example i, whose true class "
    "is labels[i]. Example i is top-k correct when fewer than k classes have a probability strictly "
    "greater than that of its true class; its loss is -log2 of the probability of its true class. Give "
    "the smallest k for which at least the fraction `target` of the examples are top-k correct, and the "
    "mean loss in bits over the examples that are top-k correct at that k.",
    '{"k": int, "loss_bits": Fraction}', "k counts classes; the loss is in bits per example"), sample_top_k)


def _none_k(task):
    """A row of the key whose k is None (drop_hardest: a bound no number of drops reaches)."""
    return any(row.get("k", 0) is None for row in task.expected["rows"])


def _top_tie(task):
    """accuracy_loss: an example whose true class ties another for the largest probability (the
    stated tie rule, not the probabilities, decides whether it is predicted right)."""
    if task.level != 3:
        return False
    return any(sum(1 for x in q if F(x) == max(map(F, q))) > 1 and F(q[y]) == max(map(F, q))
               for q, y in zip(task.inputs["predictions"], task.inputs["labels"], strict=True))


def _every_example_counts(task):
    """top_k's smallest k is the largest rank of a true class: the loss is over every example."""
    if task.level != 5:
        return False
    predictions, labels = task.inputs["predictions"], task.inputs["labels"]
    return answer_field(task, "k") == max(1 + sum(1 for x in q if F(x) > F(q[y]))
                                          for q, y in zip(predictions, labels, strict=True))


CLASSIFICATION_LOSS = deeplearning_family(
    "classification_loss", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
        "L1: mean log loss and perplexity with formulas stated. L2 (derive): the same two numbers "
        "described as the geometric mean of the true-class probabilities. L3 (compose): accuracy (argmax,"
        " ties to the smallest class) and the mean loss of the correct examples, over 4-16 classes with "
        "the true class on top in about half the examples (a correct loss of 1-3 bits) and tied there in "
        "a third of those. L4 (inverse): for each of three loss bounds, the fewest hardest examples to "
        "drop to reach it, a None row in about a sixth. L5 (search): the smallest k whose top-k accuracy "
        "reaches a target, and the loss of the top-k correct examples, over 4-8 classes with each true "
        "class at a drawn rank; the target is met below the largest rank of a true class in 19 instances "
        "in 20 (k is not the number of classes, the loss not over every example)."),
    branches=(Branch("no number of drops reaches a bound", _none_k, F(1, 20), (4,)),
              Branch("a tie for the top probability", _top_tie, F(1, 2), (3,)),
              Branch("every example is top-k correct", _every_example_counts, F(1, 50), (5,))))
