"""The adam_step family of optim: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, f32, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, hp, values
from exactgrade.domains.pytorch.optim.shared import goals_between, goals_clear, steps_vary
from exactgrade.domains.pytorch.sampling import dyadic_list
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Branch, Draw, five_levels


# pt-042 -------------------------------------------------------------------------------------------
def adam_step(w0, scales):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([w], lr=0.01)
    loss = (scales * w ** 2).sum()
    loss.backward()
    optimizer.step()
    state = optimizer.state[w]
    return {"rows": [{"w": w.detach(), "exp_avg": state["exp_avg"], "exp_avg_sq": state["exp_avg_sq"]}]}


def _adam_step(w0, scales):
    w = [hp(e) for e in values(w0)]
    grad = [2 * hp(s) * p for s, p in zip(values(scales), w, strict=True)]
    lr, beta1, beta2, eps = hp(0.01), hp(0.9), hp(0.999), hp(1e-8)
    m = [(1 - beta1) * g for g in grad]
    v = [(1 - beta2) * g * g for g in grad]
    m_hat = [e / (1 - beta1) for e in m]
    v_hat = [e / (1 - beta2) for e in v]
    return [{
        # after one step m_hat / sqrt(v_hat) = sign(g): every coordinate moves by about lr, whatever |g|
        "w": ExactTensor.of("float32", [p - lr * a / (mpmath.sqrt(b) + eps)
                                        for p, a, b in zip(w, m_hat, v_hat, strict=True)]),
        "exp_avg": ExactTensor.of("float32", m),
        "exp_avg_sq": ExactTensor.of("float32", v),
    }]


def _sample_adam(draw: Draw, level: int) -> dict:
    n = 2 + level
    scales = [
        float(draw.integer(1, 7) * draw.choice((-1, 1)) * Fraction(2) ** draw.integer(-9, 8))
        for _ in range(n)
    ]
    return {
        "w0": tensor("float32", dyadic_list(draw, n, -2, 2, 2, nonzero=True)),
        "scales": tensor("float32", scales),
    }


LEVEL_1 = pytorch_level(
    "optim",
    reference=adam_step,
    independent=_adam_step,
    question="""Make a leaf tensor w from `w0` that requires gradients and an optimiser
        torch.optim.Adam([w], lr=0.01) (default betas and eps). Compute loss = sum(scales * w^2), call
        backward and take one optimiser step. Give the updated `w` and the optimiser state tensors
        `exp_avg` and `exp_avg_sq` for w.""",
    answer=lambda i: (
        {"w": f32(*dims(i["w0"])), "exp_avg": f32(*dims(i["w0"])), "exp_avg_sq": f32(*dims(i["w0"]))},
    ),
    sample=_sample_adam,
)


# adam_step ---------------------------------------------------------------------------------------
_QUAD_MATH = """The loss is L(w) = sum(scales * w^2) (elementwise product, summed); w starts at
`w0`; g denotes
    the gradient of L at the current w."""

_ADAM_RULE = """Each step t = 1, 2, ... updates m <- 0.9 * m + 0.1 * g and v <- 0.999 * v + 0.001 * g^2
    (elementwise, both starting at 0), then w <- w - 0.01 * m_hat / (sqrt(v_hat) + 1e-8) with m_hat = m / (1 -
    0.9^t) and v_hat = v / (1 - 0.999^t)."""


LEVEL_2 = pytorch_level(
    "optim",
    reference=adam_step,
    independent=_adam_step,
    sample=_sample_adam,
    question=f"""{_QUAD_MATH} {_ADAM_RULE} Take one step (t = 1) from `w0`. Give the
    updated `w` and the
        moment vectors after it, `exp_avg` (m) and `exp_avg_sq` (v).""",
    answer=lambda i: (
        {
            "w": f32(*dims(i["w0"])),
            "exp_avg": f32(*dims(i["w0"])),
            "exp_avg_sq": f32(*dims(i["w0"])),
        },
    ),
)


def adam_three_steps(w0, scales):
    import torch

    w = w0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([w], lr=0.01)
    for _ in range(3):
        optimizer.zero_grad()
        (scales * w**2).sum().backward()
        optimizer.step()
    return {"rows": [{"w": w.detach(), "exp_avg_sq": optimizer.state[w]["exp_avg_sq"]}]}


def _adam_run(w0, scales, steps, *, decay=0, amsgrad=False, beta2=0.999):
    w, s = [hp(e) for e in values(w0)], [hp(e) for e in values(scales)]
    m, v, top = [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w)
    b1, b2, lr, eps = hp(0.9), hp(beta2), hp(0.01), hp(1e-8)
    trail = []
    for t in range(1, steps + 1):
        grad = [2 * a * p + hp(decay) * p for a, p in zip(s, w, strict=True)]
        m = [b1 * a + (1 - b1) * g for a, g in zip(m, grad, strict=True)]
        v = [b2 * a + (1 - b2) * g * g for a, g in zip(v, grad, strict=True)]
        top = [max(a, b) for a, b in zip(top, v, strict=True)] if amsgrad else v
        c1, c2 = 1 - b1**t, 1 - b2**t
        w = [
            p - lr / c1 * a / (mpmath.sqrt(b) / mpmath.sqrt(c2) + eps)
            for p, a, b in zip(w, m, top, strict=True)
        ]
        trail.append(mpmath.fsum(a * p * p for a, p in zip(s, w, strict=True)))
    return w, v, top, trail


def _adam_three_steps(w0, scales):
    w, v, _, _ = _adam_run(w0, scales, 3)
    return [{"w": ExactTensor.of("float32", w), "exp_avg_sq": ExactTensor.of("float32", v)}]


LEVEL_3 = pytorch_level(
    "optim",
    reference=adam_three_steps,
    independent=_adam_three_steps,
    sample=_sample_adam,
    question=f"""{_QUAD_MATH} {_ADAM_RULE} Take three steps (t = 1, 2, 3) from `w0`, recomputing g at
        the current w before each. Give `w` after them and `exp_avg_sq`, the vector v.""",
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "exp_avg_sq": f32(*dims(i["w0"]))},),
)


def adam_steps_to_goal(w0, scales, goals):
    import torch

    w = w0.double().requires_grad_(True)
    s = scales.double()
    optimizer = torch.optim.Adam([w], lr=0.01)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        (s * w**2).sum().backward()
        optimizer.step()
        with torch.no_grad():
            losses.append(float((s * w**2).sum()))
    return {
        "rows": [
            {"steps": next((k + 1 for k, loss in enumerate(losses) if loss <= goal), -1)}
            for goal in goals.tolist()
        ]
    }


def _adam_steps_to_goal(w0, scales, goals):
    trail = _adam_run(w0, scales, 30)[3]
    return [
        {"steps": next((k + 1 for k, loss in enumerate(trail) if loss <= hp(goal)), -1)}
        for goal in values(goals)
    ]


def _sample_adam_goals(draw, level):
    n = draw.integer(3, 4)
    scales = [float(draw.integer(1, 7) * Fraction(2) ** draw.integer(-3, 2)) for _ in range(n)]
    inputs = {
        "w0": tensor("float32", dyadic_list(draw, n, -1, 1, 3, nonzero=True)),
        "scales": tensor("float32", scales),
    }
    return {
        **inputs,
        "goals": tensor("float32", goals_between(draw, _adam_run(inputs["w0"], inputs["scales"], 30)[3])),
    }


LEVEL_4 = pytorch_level(
    "optim",
    reference=adam_steps_to_goal,
    independent=_adam_steps_to_goal,
    sample=_sample_adam_goals,
    refuse=goals_clear(lambda i: _adam_run(i["w0"], i["scales"], 30)[3]),
    reject=steps_vary,
    question=f"""{_QUAD_MATH} {_ADAM_RULE} Run up to 30 steps from `w0`. For each goal in `goals` (a
        row of the answer each, in order), give `steps`, the smallest number of steps k (1..30) after
        which L(w) <= goal, or -1 if no k up to 30 reaches it.""",
    answer=lambda i: tuple({"steps": PY_INT} for _ in range(i["goals"].shape[0])),
)


# L5: two vectors, one of which joins the training at step 3. The bias correction is not given: it is fixed
# by a property the solver must turn into 1 - beta^k, with k the updates that vector has received (not the
# global step: the named misreading, which the rules require to change the answer).
def late_parameter_adam(w0, u0, scales, lr):
    import torch

    w = w0.clone().requires_grad_(True)
    u = u0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([w, u], lr=lr, betas=(0.9, 0.99), eps=1e-8)
    for step in range(1, 6):
        optimizer.zero_grad()
        loss = (scales * w**2).sum()
        if step >= 3:
            loss = loss + 0.5 * ((u - w) ** 2).sum()
        loss.backward()
        optimizer.step()
    return {"rows": [{"w": w.detach(), "u": u.detach()}]}


def _late_adam(w0, u0, scales, lr, mistake=None, steps=5):
    """(w, u) after ``steps`` steps, an mpmath replay with each vector's own update count k in its bias
    correction (``mistake``: 'global_step' uses the step number instead)."""
    w, u, s = [hp(e) for e in values(w0)], [hp(e) for e in values(u0)], [hp(e) for e in values(scales)]
    state = {"w": ([mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w), 0),
             "u": ([mpmath.mpf(0)] * len(u), [mpmath.mpf(0)] * len(u), 0)}
    b1, b2, eps = hp(0.9), hp(0.99), hp(1e-8)
    for step in range(1, steps + 1):
        grads = {"w": [2 * a * p for a, p in zip(s, w, strict=True)]}
        if step >= 3:
            grads["w"] = [g - (q - p) for g, p, q in zip(grads["w"], w, u, strict=True)]
            grads["u"] = [q - p for p, q in zip(w, u, strict=True)]
        params = {"w": w, "u": u}
        for name, grad in grads.items():
            m, v, k = state[name]
            m = [b1 * a + (1 - b1) * g for a, g in zip(m, grad, strict=True)]
            v = [b2 * a + (1 - b2) * g * g for a, g in zip(v, grad, strict=True)]
            k += 1
            t = step if mistake == "global_step" else k
            state[name] = (m, v, k)
            params[name] = [p - hp(lr) * (a / (1 - b1**t)) / (mpmath.sqrt(b / (1 - b2**t)) + eps)
                            for p, a, b in zip(params[name], m, v, strict=True)]
        w, u = params["w"], params["u"]
    return w, u


def _late_parameter_adam(w0, u0, scales, lr):
    w, u = _late_adam(w0, u0, scales, lr)
    return [{"w": ExactTensor.of("float32", w), "u": ExactTensor.of("float32", u)}]


def _sample_late_adam(draw, level):
    n = 3
    return {
        "w0": tensor("float32", dyadic_list(draw, n, -1, 1, 3, nonzero=True)),
        "u0": tensor("float32", dyadic_list(draw, n, -1, 1, 3, nonzero=True)),
        "scales": tensor("float32", [float(draw.integer(1, 7) * Fraction(2) ** draw.integer(-3, 1))
                                     for _ in range(n)]),
        "lr": draw.choice((0.05, 0.1, 0.2)),
    }


def _late_adam_rules(inputs):
    """Refuse a u that starts (at step 3) almost where w is (its gradient would be tiny and its sign
    fragile), and instances where counting the global step instead of u's own would still pass."""
    args = {k: inputs[k] for k in ("w0", "u0", "scales", "lr")}
    w, u = _late_adam(**args, steps=2)
    if any(abs(q - p) < mpmath.mpf(1) / 64 for p, q in zip(w, u, strict=True)):
        return "u starts within 1/64 of w at step 3: its first gradient is too small to call"
    right, wrong = _late_adam(**args), _late_adam(**args, mistake="global_step")
    if not any(abs(a - b) > mpmath.mpf("1e-3") for r, q in zip(right, wrong, strict=True)
               for a, b in zip(r, q, strict=True)):
        return "counting the global step gives the same answer: the misreading would pass"
    return None


_LATE_ADAM_QUESTION = """Two parameter vectors are trained together: w (starting at `w0`) and u (starting at
    `u0`), each of length 3. Steps 1 and 2 minimise L1(w) = sum(scales * w^2) (`scales` elementwise, then
    summed); u does not appear in L1, and at these two steps u and everything the method keeps for u are left
    untouched. Steps 3, 4 and 5 minimise L2(w, u) = sum(scales * w^2) + 0.5 * sum((u - w)^2), and both
    vectors take part. At each step, every vector p that takes part, with g the gradient of that step's loss
    with respect to p at the current parameters, is updated elementwise: m <- 0.9 * m + 0.1 * g and v <-
    0.99 * v + 0.01 * g^2 (m and v belong to p and are 0 before p's first update), then p <- p - `lr` * mh
    / (sqrt(vh) + 1e-8), where mh = m / a and vh = v / b. The positive scalars a and b are set at each update
    so that, had every gradient p has received up to and including this one been the same vector g, mh
    would equal g and vh would equal g^2 exactly. Both vectors' gradients at a step are taken before either
    is updated. Give `w` and `u` after step 5."""


LEVEL_5 = pytorch_level(
    "optim",
    reference=late_parameter_adam,
    independent=_late_parameter_adam,
    sample=_sample_late_adam,
    refuse=_late_adam_rules,
    question=_LATE_ADAM_QUESTION,
    answer=lambda i: ({"w": f32(*dims(i["w0"])), "u": f32(*dims(i["u0"]))},),
)


ADAM_STEP = five_levels(
    "adam_step",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 torch.optim.Adam named; L2 the moment estimates and bias correction described; L3 three steps "
   "with the gradient recomputed; L4 the first step at which the loss reaches each of three goals (-1 "
   "when none within 30 steps); L5 two vectors, one joining at step 3, under an adaptive rule whose bias "
   "correction is fixed by a property to derive (it counts each vector's own updates, not the step)",
    branches=(
        Branch(
            "a goal is never reached",
            lambda t: any(r.get("steps") == -1 for r in t.expected["rows"]),
            Fraction(1, 2),
            (4,),
        ),
    ),
)
