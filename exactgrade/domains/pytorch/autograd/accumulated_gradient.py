"""The accumulated_gradient family of autograd: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.pytorch.autograd.shared import elementwise_input
from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, elementwise, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Branch, Draw, Reject, five_levels


# pt-029 -------------------------------------------------------------------------------------------
def accumulated_gradient(w0):
    w = w0.clone().requires_grad_(True)
    loss = (w ** 3 - w).sum()
    loss.backward(retain_graph=True)
    after_one = w.grad.clone()
    loss.backward()
    return {"rows": [{"after_one": after_one, "after_two": w.grad}]}


def _accumulated_gradient(w0):
    grad = elementwise(lambda e: 3 * e * e - 1, values(w0))
    return [{
        "after_one": ExactTensor.of("float32", grad),
        "after_two": ExactTensor.of("float32", elementwise(lambda g: 2 * g, grad)),
    }]


def _renamed(sample, name: str):
    def renamed(draw: Draw, level: int) -> dict:
        return {name: sample(draw, level)["x0"]}

    return renamed

LEVEL_1 = pytorch_level(
    "autograd",
    reference=accumulated_gradient,
    independent=_accumulated_gradient,
    question="""Make a leaf tensor w from `w0` that requires gradients and let loss = sum(w^3 - w). Call
        loss.backward(retain_graph=True), record w.grad as `after_one`, then call loss.backward() once
        more on the same graph without zeroing anything and give w.grad as `after_two`.""",
    answer=lambda i: ({"after_one": f32(*dims(i["w0"])), "after_two": f32(*dims(i["w0"]))},),
    sample=_renamed(elementwise_input(-2.5, 2.5, 2), "w0"),
)


LEVEL_2 = pytorch_level(
    "autograd",
    accumulated_gradient,
    _accumulated_gradient,
    """Let L(w) be the sum over the elements of w of w^3 - w. A gradient buffer starts at zero, and
        each backward pass adds the gradient of L at w = `w0` to it, without the buffer ever being
        reset. Give `after_one`, the buffer after one pass, and `after_two`, the buffer after a second
        pass.""",
    lambda i: ({"after_one": f32(*dims(i["w0"])), "after_two": f32(*dims(i["w0"]))},),
    _renamed(elementwise_input(-2.5, 2.5, 2), "w0"),
)


# accumulated_gradient ----------------------------------------------------------------------------
def _cubic(ws):
    return sum((w ** 3 - w for w in ws), Fraction(0))


def accumulated_step(w0, lr):
    w = w0.clone().requires_grad_(True)
    loss = (w ** 3 - w).sum()
    loss.backward(retain_graph=True)
    (w ** 2).sum().backward()
    w1 = (w - lr * w.grad).detach()
    return {"rows": [{"w1": w1, "loss_after": (w1 ** 3 - w1).sum()}]}


def _accumulated_step(w0, lr):
    w1 = elementwise(lambda e: e - Fraction(lr) * (3 * e * e - 1 + 2 * e), values(w0))
    flat = [e for row in w1 for e in row] if isinstance(w1[0], list) else w1
    return [{"w1": ExactTensor.of("float32", w1), "loss_after": ExactTensor.of("float32", _cubic(flat))}]


def _sample_accumulated_lr(draw: Draw, level: int) -> dict:
    return {"w0": elementwise_input(-2.5, 2.5, 2)(draw, level)["x0"],
            "lr": draw.choice((0.125, 0.0625, 0.25))}


LEVEL_3 = pytorch_level(
    "autograd",
    accumulated_step,
    _accumulated_step,
    """A gradient buffer starts at zero. At w = `w0`, one backward pass adds the gradient of L1(w) =
        sum(w^3 - w) to it, and a second pass adds the gradient of L2(w) = sum(w^2), the buffer not
        being reset in between. Then one plain gradient-descent step uses the buffer: w1 = w0 - lr *
        buffer, with `lr` given. Give `w1` and `loss_after`, L1 at w1 (a 0-d tensor).""",
    lambda i: ({"w1": f32(*dims(i["w0"])), "loss_after": f32()},),
    _sample_accumulated_lr,
)


def overshoot_passes(w0, lrs):
    rows = []
    for lr in lrs:
        w = w0.clone().requires_grad_(True)
        loss = (w ** 3 - w).sum()
        start, found = float(loss.detach()), -1
        for passes in range(1, 13):
            loss.backward(retain_graph=True)
            stepped = (w - lr * w.grad).detach()
            if float((stepped ** 3 - stepped).sum()) > start:
                found = passes
                break
        rows.append({"passes": found})
    return {"rows": rows}


def _first_overshoot(ws, lr) -> int:
    start = _cubic(ws)
    return next((passes for passes in range(1, 13)
                 if _cubic([w - Fraction(lr) * passes * (3 * w * w - 1) for w in ws]) > start), -1)


def _overshoot_passes(w0, lrs):
    return [{"passes": _first_overshoot(values(w0), lr)} for lr in lrs]


OVERSHOOT_GRID = 12
"""The learning rates of accumulated_gradient L4 are multiples of 2**-OVERSHOOT_GRID (exact in
float32, and fine enough that every pass count from 2 to 12 has one)."""


def _overshoot_window(ws: list[Fraction]) -> tuple[float, float] | None:
    """The trial steps a (w0 - a * gradient) at which L rises above L(w0), as an open interval
    (a1, a2) in floats (a2 may be inf), or None. L(w0 - a g) - L(w0) = a * (3 a B - S2 - a^2 S3)
    with g = 3 w0^2 - 1, S2 = sum g^2, B = sum w0 g^2, S3 = sum g^3: the quadratic's roots."""
    g = [3 * w * w - 1 for w in ws]
    s2, s3 = sum(e * e for e in g), sum(e ** 3 for e in g)
    b = sum(w * e * e for w, e in zip(ws, g, strict=True))
    if s3 == 0:
        return (float(s2 / (3 * b)), math.inf) if b > 0 else None
    disc = 9 * b * b - 4 * s3 * s2
    if disc <= 0 or (s3 > 0 and b <= 0):
        return None
    root = math.sqrt(disc)
    return float((3 * b - root) / (2 * s3)), (math.inf if s3 < 0 else float((3 * b + root) / (2 * s3)))


OVERSHOOT_RATES = 3
"""Step sizes per accumulated_gradient L4 instance, a row of the answer each: with one, the -1 of
one instance in six was a whole key that the first 24 instances held 8 times."""


def _sample_overshoot(draw: Draw, level: int) -> dict:
    """w0 on [-1/2, 1] (below -1/sqrt(3) an element falls without bound, so the sum almost never
    rises: every instance of the old [-1.5, 1.5] sampler answered -1), refused unless the trial
    steps that end above L(w0) form a window at least half as wide as its start; only then are the
    branches drawn: for each step size, one in six an lr whose 12 passes all stop short of the
    window (-1), the rest an lr that first enters it at a pass count drawn from 2..12."""
    w0 = dyadic_tensor(draw, (3 + level,), -0.5, 1, 3, nonzero=True)
    window = _overshoot_window(values(w0))
    if window is None or window[1] < 1.5 * window[0]:
        raise Reject("no trial step rises over a window wide enough for a pass count to land in")
    lrs = []
    for _ in range(OVERSHOOT_RATES):
        passes = -1 if draw.chance(1, 6) else draw.integer(2, 12)
        target = window[0] / (draw.integer(13, 18) if passes == -1 else passes - 0.5)
        lr = math.floor(target * 2**OVERSHOOT_GRID) / 2**OVERSHOOT_GRID
        if _first_overshoot(values(w0), lr) != passes:  # float rounding of the window's roots
            raise Reject(f"the learning rate drawn for {passes} passes gives another count")
        lrs.append(lr)
    return {"w0": w0, "lrs": lrs}


def _overshoot_clear(inputs: Inputs) -> str | None:
    ws = values(inputs["w0"])
    start = _cubic(ws)
    for lr in map(Fraction, inputs["lrs"]):
        for passes in range(1, 13):
            if abs(_cubic([w - lr * passes * (3 * w * w - 1) for w in ws]) - start) < Fraction(1, 1000):
                return "a stepped loss is within 1/1000 of the start: the comparison would hinge on rounding"
        if _first_overshoot(ws, lr) == 1:
            return "the first pass already overshoots: no search"
    return None


LEVEL_4 = pytorch_level(
    "autograd",
    overshoot_passes,
    _overshoot_passes,
    """Let L(w) = sum(w^3 - w). Backward passes of L at w = `w0` accumulate into a gradient buffer
        that starts at zero and is never reset, so after n passes the buffer holds n times the
        gradient. After each pass, consider the trial step w0 - lr * buffer (w itself stays at w0).
        For each step size lr in `lrs` (a row of the answer each, in order, each with its own buffer
        starting at zero), give `passes`, the smallest n from 1 to 12 for which L at that trial step
        is strictly greater than L(w0), or -1 if there is none.""",
    lambda i: tuple({"passes": PY_INT} for _ in i["lrs"]),
    _sample_overshoot,
    refuse=_overshoot_clear,
)


def _passes_none(task) -> bool:
    return any(row["passes"] == -1 for row in task.expected["rows"])


def newton_iterations(w0):
    import torch

    w = w0.clone().requires_grad_(True)
    for _ in range(3):
        (g,) = torch.autograd.grad((w ** 3 - w).sum(), w, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), w)
        w = (w - g / h).detach().requires_grad_(True)
    w = w.detach()
    return {"rows": [{"w3": w, "loss_after": (w ** 3 - w).sum()}]}


def _newton_iterations(w0):
    def run(e):
        for _ in range(3):
            e = e - (3 * e * e - 1) / (6 * e)
        return e

    w3 = elementwise(run, values(w0))
    flat = [e for row in w3 for e in row] if isinstance(w3[0], list) else w3
    return [{"w3": ExactTensor.of("float32", w3), "loss_after": ExactTensor.of("float32", _cubic(flat))}]


def _newton_defined(inputs: Inputs) -> str | None:
    flat = values(inputs["w0"])
    flat = [e for row in flat for e in row] if isinstance(flat[0], list) else flat
    finals = []
    for e in flat:
        for _ in range(3):
            if abs(e) < Fraction(1, 8):
                return "an iterate comes within 1/8 of 0, where the second derivative vanishes"
            e = e - (3 * e * e - 1) / (6 * e)
        finals.append(e)
    if abs(_cubic(finals)) < Fraction(1, 2):
        return "the terms of the final loss nearly cancel: its float32 value would use much of the tolerance"
    return None


LEVEL_5 = pytorch_level(
    "autograd",
    newton_iterations,
    _newton_iterations,
    """Let L(w) = sum(w^3 - w), a sum of independent terms. Starting at w = `w0`, update every element
        three times by dividing the first derivative of its term by the second derivative of its term,
        at the current value, and subtracting the quotient. Give `w3`, the weights after the three
        updates, and `loss_after`, L at w3 (a 0-d tensor).""",
    lambda i: ({"w3": f32(*dims(i["w0"])), "loss_after": f32()},),
    _renamed(elementwise_input(-2.5, 2.5, 2), "w0"),
    refuse=_newton_defined,
)


ACCUMULATED_GRADIENT = five_levels(
    "accumulated_gradient",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 backward twice without zeroing; L2 accumulation described; L3 two losses accumulated, "
          "then a step and its loss; L4 the fewest accumulated passes whose step overshoots, at each of "
          "three step sizes, or -1; L5 "
          "three elementwise Newton updates from first and second derivatives",
    branches=(Branch("no pass count overshoots at some step size", _passes_none, Fraction(1, 10), (4,)),),
)
