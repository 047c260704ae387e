"""The softmax_rows family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mpmath

from exactgrade.domains.pytorch.common import f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, log_softmax, softmax, values
from exactgrade.domains.pytorch.sampling import distinct_dyadic_tensor, dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


# pt-021 -------------------------------------------------------------------------------------------
def softmax_rows(logits):
    import torch

    return {"rows": [{
        "probabilities": torch.softmax(logits, dim=1),
        "log_probabilities": torch.log_softmax(logits, dim=1),
    }]}


def _softmax_rows(logits):
    v = values(logits)
    return [{
        "probabilities": ExactTensor.of("float32", [softmax(row) for row in v]),
        "log_probabilities": ExactTensor.of("float32", [log_softmax(row) for row in v]),
    }]


def _sample_softmax(draw: Draw, level: int) -> dict:
    rows, cols = draw.integer(2, 1 + level), draw.integer(4, 3 + level)
    logits = values(dyadic_tensor(draw, (rows, cols), -3, 3, 2))
    large = draw.below(rows)
    shift = draw.integer(90, 110)  # one row of logits around 100: exp overflows float32 there
    return {
        "logits": tensor(
            "float32",
            [[float(e + shift) if r == large else float(e) for e in row] for r, row in enumerate(logits)],
        )
    }


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=softmax_rows,
    independent=_softmax_rows,
    question="""Give `probabilities`, the softmax of each row of `logits`, and `log_probabilities`, the
        log of the softmax of each row, both in float32. (exp(x) overflows float32 once x exceeds
        about 88.7: compute stably.)""",
    answer=lambda i: (
        {"probabilities": f32(*dims(i["logits"])), "log_probabilities": f32(*dims(i["logits"]))},
    ),
    sample=_sample_softmax,
)


# softmax_rows ------------------------------------------------------------------------------------
_SOFTMAX_MATH = """Row i of `logits` defines the distribution p[i, j] = exp(logits[i, j]) / (sum over k of
    exp(logits[i, k]))."""


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=softmax_rows,
    independent=_softmax_rows,
    sample=_sample_softmax,
    question=f"""{_SOFTMAX_MATH} Give `probabilities`, p, and `log_probabilities`, ln p,
        both as float32
       tensors of the shape of `logits`.""",
    answer=lambda i: (
        {"probabilities": f32(*dims(i["logits"])), "log_probabilities": f32(*dims(i["logits"]))},
    ),
)


def softmax_entropy(logits):
    import torch

    log_p = torch.log_softmax(logits, dim=1)
    return {"rows": [{"entropy": -(log_p.exp() * log_p).sum(dim=1)}]}


def _softmax_entropy(logits):
    return [
        {
            "entropy": ExactTensor.of(
                "float32",
                [-mpmath.fsum(mpmath.exp(q) * q for q in log_softmax(row)) for row in values(logits)],
            )
        }
    ]


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=softmax_entropy,
    independent=_softmax_entropy,
    sample=_sample_softmax,
    question=f"""{_SOFTMAX_MATH} Give `entropy`: for each row i, the Shannon entropy of p[i] in nats,
       -sum over j of p[i, j] ln p[i, j].""",
    answer=lambda i: ({"entropy": f32(i["logits"].shape[0])},),
)


def nucleus_sizes(logits, mass):
    import torch

    p = torch.softmax(logits.double(), dim=1).sort(dim=1, descending=True).values
    return {"rows": [{"size": (p.cumsum(dim=1) < mass).sum(dim=1) + 1}]}


def _nucleus_sizes(logits, mass):
    sizes = []
    for row in values(logits):
        total, count = mpmath.mpf(0), 0
        for q in sorted(softmax(row), reverse=True):
            total, count = total + q, count + 1
            if total >= hp(mass):
                break
        sizes.append(count)
    return [{"size": ExactTensor.of("int64", sizes)}]


def _sample_nucleus(draw, level):
    rows, cols = draw.integer(3, 4), draw.integer(5, 7)
    return {"logits": distinct_dyadic_tensor(draw, (rows, cols), 2), "mass": draw.choice((0.75, 0.8, 0.9))}


def _nucleus_clear(inputs):
    sizes = []
    for row in values(inputs["logits"]):
        total = mpmath.mpf(0)
        for q in sorted(softmax(row), reverse=True):
            total += q
            if abs(total - hp(inputs["mass"])) < mpmath.mpf("1e-4"):
                return ("a running total of the sorted probabilities lies within 1e-4 of the mass: "
                        "too close to call")
        sizes.append(_nucleus_sizes(tensor("float32", [row]), inputs["mass"])[0]["size"].values[0])
    if len(set(sizes)) < 2:
        return "every row keeps the same number of classes: a constant answer passes"
    return None


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=nucleus_sizes,
    independent=_nucleus_sizes,
    sample=_sample_nucleus,
    question=f"""{_SOFTMAX_MATH} For each row, give in `size` the smallest number k such that the k
       largest probabilities of the row add up to at least `mass` (an int64 tensor, one per row).""",
    answer=lambda i: ({"size": i64(i["logits"].shape[0])},),
    refuse=_nucleus_clear,
)


# L5: a decoding step's logit pipeline, described not named: a sign-dependent penalty on the classes a row
# has already produced (each class once, however often it occurs), a temperature, a top-k cut and then a
# probability-mass cut measured on the renormalised top-k distribution. The rules: most
# rows keep at least two classes after the mass cut, the kept counts differ between rows, and each named
# misreading (the penalty per occurrence, dividing a negative logit, the mass cut on the uncut softmax)
# changes the answer of the instance.
def decoding_distribution(logits, previous, penalty, temperature, top_k, top_p):
    import torch

    z = logits.double().clone()
    for i in range(z.shape[0]):
        seen = torch.unique(previous[i])
        row = z[i, seen]
        z[i, seen] = torch.where(row > 0, row / penalty, row * penalty)
    z = z / temperature
    top = z.topk(top_k, dim=1)
    p = torch.softmax(top.values, dim=1)  # sorted descending
    keep = (p.cumsum(dim=1) - p) < top_p
    kept = torch.where(keep, p, torch.zeros_like(p))
    kept = kept / kept.sum(dim=1, keepdim=True)
    out = torch.zeros_like(z).scatter(1, top.indices, kept)
    return {"rows": [{"probabilities": out.to(logits.dtype), "kept": keep.sum(dim=1)}]}


def _decoding_rows(logits, previous, penalty, temperature, top_k, top_p, mistake=None):
    """(distribution, kept count) of each row in mpmath. ``mistake``: 'per_occurrence' penalises a class
    once per occurrence; 'divide_all' divides every penalised logit; 'mass_on_full' measures the mass cut
    on the softmax of all classes (then renormalises the kept ones)."""
    rows = []
    for row, seen in zip(values(logits), values(previous), strict=True):
        z = [hp(e) for e in row]
        for j in (seen if mistake == "per_occurrence" else sorted(set(seen))):
            z[j] = z[j] / hp(penalty) if z[j] > 0 or mistake == "divide_all" else z[j] * hp(penalty)
        z = [e / hp(temperature) for e in z]
        order = sorted(range(len(z)), key=lambda j: -z[j])
        top = order[:top_k]
        weights = softmax([z[j] for j in (order if mistake == "mass_on_full" else top)])
        kept, total = [], mpmath.mpf(0)
        for j, q in zip(order if mistake == "mass_on_full" else top, weights, strict=False):
            if total >= hp(top_p) or j not in top:
                break
            kept.append(j)
            total += q
        norm = mpmath.fsum(mpmath.exp(z[j]) for j in kept)
        rows.append(([mpmath.exp(z[j]) / norm if j in kept else mpmath.mpf(0) for j in range(len(z))],
                     len(kept)))
    return rows


def _decoding_distribution(logits, previous, penalty, temperature, top_k, top_p):
    rows = _decoding_rows(logits, previous, penalty, temperature, top_k, top_p)
    return [{"probabilities": ExactTensor.of("float32", [p for p, _ in rows]),
             "kept": ExactTensor.of("int64", [k for _, k in rows])}]


def _sample_decoding(draw, level):
    rows, cols = 4, 8
    logits, previous = [], []
    for _ in range(rows):
        row = [k / 8 for k in draw.sample(range(-36, 13), cols)]  # distinct, mostly negative
        leaders = sorted(range(cols), key=lambda j: -row[j])[:4]
        first, second = draw.sample(leaders, 2)  # leading classes already produced: the penalty moves the cut
        logits.append(row)
        previous.append(draw.shuffled([first, first, second]))  # one class twice: once is what counts
    return {
        "logits": tensor("float32", logits),
        "previous": tensor("int64", previous),
        "penalty": draw.choice((1.25, 1.5, 2.0)),
        "temperature": draw.choice((0.75, 1.25, 1.5, 2.0)),
        "top_k": draw.integer(4, 6),
        "top_p": draw.choice((0.6, 0.7, 0.8)),
    }

def near_cut(ordered: Sequence[Any], mass: Any, margin: str = "1e-4") -> str | None:
    """Why a cut at cumulative ``mass`` over the descending probabilities ``ordered`` is too close to call
    in float arithmetic (a running total within ``margin`` of the mass), or None."""
    total = mpmath.mpf(0)
    for q in ordered:
        total += q
        if abs(total - mass) < mpmath.mpf(margin):
            return "a running total of the sorted probabilities lies within 1e-4 of the mass: too close"
    return None


def distributions_differ(a: Sequence[Sequence[Any]], b: Sequence[Sequence[Any]], gap: float = 1e-3) -> bool:
    """Whether two nested lists of probabilities differ by more than ``gap`` somewhere (far beyond the
    grading tolerance, so an answer built the other way fails)."""
    return any(abs(x - y) > gap for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))



def _decoding_rules(inputs):
    """Refuse ties and near-ties the float arithmetic could cut the other way, rows that keep one class,
    counts equal across rows, and instances a named misreading would still pass."""
    args = {k: inputs[k] for k in ("logits", "previous", "penalty", "temperature", "top_k", "top_p")}
    rows = _decoding_rows(**args)
    for (_, count), row, seen in zip(rows, values(inputs["logits"]), values(inputs["previous"]), strict=True):
        z = [hp(e) for e in row]
        for j in set(seen):
            z[j] = z[j] / hp(inputs["penalty"]) if z[j] > 0 else z[j] * hp(inputs["penalty"])
        ordered = sorted(z, reverse=True)
        if any(ordered[cut - 1] == ordered[cut] for cut in (inputs["top_k"], count)):
            return "two penalised logits tie where a cut falls: which class is kept is ambiguous"
        problem = near_cut(softmax([e / hp(inputs["temperature"]) for e in ordered[: inputs["top_k"]]]),
                           hp(inputs["top_p"]))
        if problem is not None:
            return problem
    counts = [k for _, k in rows]
    if sum(k >= 2 for k in counts) < 3:
        return f"kept counts {counts}: most rows must keep at least two classes"
    if len(set(counts)) < 2:
        return "every row keeps the same number of classes: a constant answer passes"
    for mistake in ("per_occurrence", "divide_all", "mass_on_full"):
        wrong = _decoding_rows(**args, mistake=mistake)
        if not distributions_differ([p for p, _ in rows], [p for p, _ in wrong]):
            return f"the misreading {mistake!r} gives the same distribution: it would pass"
    return None


_DECODING_QUESTION = """A text generator turns each row of `logits` (one row per sequence, one column per
    class) into a sampling distribution in four stages. (1) Penalty: every class that occurs in the row's
    entry of `previous` (the classes that sequence already produced; a class counts once however often it
    occurs) has its logit z replaced by z / `penalty` if z > 0 and by z * `penalty` otherwise; the other
    logits are unchanged. (2) Every logit is divided by `temperature`. (3) Only the `top_k` largest logits
    of the row are kept, and q is the softmax over those `top_k` classes alone. (4) Sorting the kept
    classes by q from largest to smallest, the generator keeps the shortest prefix whose q values sum to
    at least `top_p`; the classes of that prefix share probability in proportion to their q values (so
    they sum to 1) and every other class gets 0. Give `probabilities` (the final distribution, shape of
    `logits`) and `kept`, the number of classes with nonzero probability in each row (int64, one per
    row)."""


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=decoding_distribution,
    independent=_decoding_distribution,
    sample=_sample_decoding,
    question=_DECODING_QUESTION,
    answer=lambda i: ({"probabilities": f32(*dims(i["logits"])),
                       "kept": i64(i["logits"].shape[0])},),
    refuse=_decoding_rules,
)


SOFTMAX_ROWS = five_levels(
    "softmax_rows",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 softmax and log-softmax named; L2 the distribution described; L3 the entropy of each row; L4 "
   "the smallest number of top classes that reach a probability mass; L5 a decoding step's pipeline "
   "(a sign-dependent penalty on already produced classes, temperature, a top-k cut, then a mass cut on "
   "the renormalised top-k distribution), described not named, with each misreading changing the answer",
)
