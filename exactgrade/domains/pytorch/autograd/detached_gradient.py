"""The detached_gradient family of autograd: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.autograd.shared import elementwise_input
from exactgrade.domains.pytorch.common import (
    PY_FLOAT,
    PY_INT,
    Inputs,
    f32,
    pytorch_level,
    tensor,
)
from exactgrade.domains.pytorch.exact import ExactTensor, elementwise, reshape, shape_and_flat, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor, word
from exactgrade.domains.pytorch.shared import dims, solve
from exactgrade.family import Branch, Draw, five_levels


# pt-031 -------------------------------------------------------------------------------------------
def detached_gradient(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    y = x ** 2
    z = (y.detach() * x + y).sum()
    (grad_z,) = torch.autograd.grad(z, x)
    w = (x ** 3 * x.detach()).sum()
    (grad_w,) = torch.autograd.grad(w, x)
    return {"rows": [{"grad_z": grad_z, "grad_w": grad_w}]}


def _detached_gradient(x0):
    v = values(x0)
    return [{
        # the detached x**2 is a constant
        "grad_z": ExactTensor.of("float32", elementwise(lambda e: e * e + 2 * e, v)),
        "grad_w": ExactTensor.of("float32", elementwise(lambda e: 3 * e ** 3, v)),  # d/dx (x**3 * c) at c = x
    }]

LEVEL_1 = pytorch_level(
    "autograd",
    reference=detached_gradient,
    independent=_detached_gradient,
    question="""Let x be a leaf tensor from `x0` that requires gradients and y = x**2. Give `grad_z`,
        the gradient with respect to x of z = sum(y.detach() * x + y), and `grad_w`, the gradient with
        respect to x of w = sum(x**3 * x.detach()).""",
    answer=lambda i: ({"grad_z": f32(*dims(i["x0"])), "grad_w": f32(*dims(i["x0"]))},),
    sample=elementwise_input(-2.5, 2.5, 2),
)


LEVEL_2 = pytorch_level(
    "autograd",
    detached_gradient,
    _detached_gradient,
    """Write sg(.) for a value that is used in the forward computation but treated as a constant
        when differentiating (no gradient flows through it). With x = `x0` and y = x^2 elementwise,
        give `grad_z`, the gradient with respect to x of z = sum(sg(y) * x + y), and `grad_w`, the
        gradient with respect to x of w = sum(x^3 * sg(x)).""",
    lambda i: ({"grad_z": f32(*dims(i["x0"])), "grad_w": f32(*dims(i["x0"]))},),
    elementwise_input(-2.5, 2.5, 2),
)


# detached_gradient --------------------------------------------------------------------------------
def straight_through(x0):
    import torch

    x = x0.clone().requires_grad_(True)
    y = x + (torch.round(x) - x).detach()
    loss = (y ** 2).sum()
    (grad,) = torch.autograd.grad(loss, x)
    return {"rows": [{"loss": loss.detach(), "grad": grad}]}


def _straight_through(x0):
    v = values(x0)
    flat = [e for row in v for e in row] if isinstance(v[0], list) else v
    return [{"loss": ExactTensor.of("float32", sum((Fraction(round(e)) ** 2 for e in flat), Fraction(0))),
             "grad": ExactTensor.of("float32", elementwise(lambda e: Fraction(2 * round(e)), v))}]


def _sample_straight(draw: Draw, level: int) -> dict:
    x = values(elementwise_input(-3.5, 3.5, 2)(draw, level)["x0"])
    return {"x0": tensor("float32", x)}


def _straight_has_halves(inputs: Inputs) -> str | None:
    v = values(inputs["x0"])
    flat = [e for row in v for e in row] if isinstance(v[0], list) else v
    if not any(e.denominator == 2 for e in flat):
        return "no element is an exact half: the rounding rule is not tested"
    if sum(1 for e in flat if round(e) == 0) * 2 >= len(flat):
        return "half or more of the elements round to 0: most gradients would be 0"
    return None


LEVEL_3 = pytorch_level(
    "autograd",
    straight_through,
    _straight_through,
    """Write sg(.) for a value used in the forward computation but treated as a constant when
        differentiating. With x = `x0`, let y = x + sg(r(x) - x), where r rounds to the nearest integer
        with halves going to the even neighbour, so y's values are the rounded x. Give `loss` = sum(y^2)
        (a 0-d tensor) and `grad`, its gradient with respect to x.""",
    lambda i: ({"loss": f32(), "grad": f32(*dims(i["x0"]))},),
    _sample_straight,
    refuse=_straight_has_halves,
)


def detached_power(x0, targets):
    import torch

    x = x0.clone().requires_grad_(True)
    grads = [torch.autograd.grad((x ** k * x.detach() ** (4 - k)).sum(), x)[0] for k in range(1, 5)]
    return {"rows": [{"k": next((k for k, g in enumerate(grads, 1) if torch.equal(g, target)), -1)}
                     for target in targets]}


def _detached_power(x0, targets):
    v = values(x0)
    grads = [elementwise(lambda e, k=k: k * e ** 3, v) for k in range(1, 5)]
    return [{"k": next((k for k, g in enumerate(grads, 1) if g == t), -1)} for t in values(targets)]


DETACHED_TARGETS = 3
"""Targets per detached_gradient L4 instance, a row of the answer each: with one target, one k of
four (or -1) was the whole key, so guessing it passed a quarter of the instances or more."""


def _sample_detached_power(draw: Draw, level: int) -> dict:
    """Each target is g_k for a k drawn from 1..4, or (1 in 8) g_k with one element moved by 1/4,
    which no k gives."""
    x = elementwise_input(-2.5, 2.5, 2)(draw, level)["x0"]
    targets = []
    for _ in range(DETACHED_TARGETS):
        k = draw.integer(1, 4)
        flat = [k * e ** 3 for e in shape_and_flat(values(x))[1]]
        if draw.chance(1, 8):
            flat[draw.below(len(flat))] += Fraction(1, 4)
        targets.append(reshape([float(e) for e in flat], x.shape))
    return {"x0": x, "targets": tensor("float32", targets)}


LEVEL_4 = pytorch_level(
    "autograd",
    detached_power,
    _detached_power,
    lambda i: f"""Write sg(.) for a value used in the forward computation but treated as a constant
        when differentiating. With x = `x0`, for k = 1, 2, 3, 4 let g_k be the gradient with respect to
        x of sum(x^k * sg(x)^(4 - k)). `targets` stacks {word(DETACHED_TARGETS)} tensors of x's shape
        along its first dimension (targets[0], targets[1], ...). For each of them (a row of the
        answer each, in order), give `k`, the k for which g_k equals that target exactly (element for
        element), the smallest if several do, or -1 if none does.""",
    lambda i: tuple({"k": PY_INT} for _ in range(DETACHED_TARGETS)),
    _sample_detached_power,
)


def _k_none(task) -> bool:
    return any(row["k"] == -1 for row in task.expected["rows"])


# detached_gradient L5: the fixed point of a bootstrapped (constant-target) regression ---------------
def bootstrapped_fixed_point(phi, phi_next, reward, gamma):
    import torch

    f, f2, r = phi.double(), phi_next.double(), reward.double()

    def loss(w, constant_target):
        target = r + gamma * (f2 @ w)
        if constant_target:
            target = target.detach()
        return ((target - f @ w) ** 2).mean()

    def direction(w):           # the gradient with the target held constant (affine in w, since the
        w = w.clone().requires_grad_(True)    # held target's value still moves with w)
        return torch.autograd.grad(loss(w, True), w)[0]

    k = phi.shape[1]
    at_zero = direction(torch.zeros(k, dtype=torch.float64))
    columns = [direction(torch.eye(k, dtype=torch.float64)[p]) - at_zero for p in range(k)]
    w_star = torch.linalg.solve(torch.stack(columns, dim=1), -at_zero)
    w = w_star.clone().requires_grad_(True)
    (full,) = torch.autograd.grad(loss(w, False), w)
    return {"rows": [{"w_star": w_star.float(), "loss_star": float(loss(w_star, True)),
                      "full_gradient": full.float()}]}


def _bootstrapped_fixed_point(phi, phi_next, reward, gamma):
    """The held-constant gradient is -(2/T) * sum_t delta_t * phi_t with delta_t = r_t + gamma*phi'_t.w
    - phi_t.w: it vanishes where sum_t phi_t (phi_t - gamma*phi'_t)^T w = sum_t r_t phi_t."""
    f, f2, r, g = values(phi), values(phi_next), values(reward), Fraction(gamma)
    T, k = len(f), len(f[0])
    matrix = [[sum((f[t][p] * (f[t][q] - g * f2[t][q]) for t in range(T)), Fraction(0)) for q in range(k)]
              for p in range(k)]
    w = solve(matrix, [sum((r[t] * f[t][p] for t in range(T)), Fraction(0)) for p in range(k)])
    delta = [r[t] + sum(((g * f2[t][q] - f[t][q]) * w[q] for q in range(k)), Fraction(0)) for t in range(T)]
    full = [Fraction(2, T) * sum((delta[t] * (g * f2[t][p] - f[t][p]) for t in range(T)), Fraction(0))
            for p in range(k)]
    loss = sum((d * d for d in delta), Fraction(0)) / T
    return [{"w_star": ExactTensor.of("float32", w), "loss_star": loss,
             "full_gradient": ExactTensor.of("float32", full)}]


def _sample_bootstrapped(draw: Draw, level: int) -> dict:
    T, k = draw.integer(5, 7), draw.integer(2, 3)
    return {"phi": tensor("float32", [[float(draw.integer(-2, 2)) for _ in range(k)] for _ in range(T)]),
            "phi_next": tensor("float32", [[float(draw.integer(-2, 2)) for _ in range(k)] for _ in range(T)]),
            "reward": dyadic_tensor(draw, (T,), -2, 2, 2),
            "gamma": draw.choice((0.5, 0.75, 0.875, 0.9375))}


def _bootstrapped_clear(inputs: Inputs) -> str | None:
    """A unique, well-scaled fixed point that is not the least-squares fit of the full gradient
    (the named mistake: minimising the loss with the target differentiated too)."""
    f, f2, g = values(inputs["phi"]), values(inputs["phi_next"]), Fraction(inputs["gamma"])
    T, k = len(f), len(f[0])
    matrix = [[sum((f[t][p] * (f[t][q] - g * f2[t][q]) for t in range(T)), Fraction(0)) for q in range(k)]
              for p in range(k)]
    w = solve(matrix, [sum((values(inputs["reward"])[t] * f[t][p] for t in range(T)), Fraction(0))
                       for p in range(k)])
    if w is None or any(abs(e) > 32 for e in w) or max(abs(e) for e in w) < Fraction(1, 8):
        return "the fixed point is not unique, or too large or too small to carry float32 digits"
    residual = [[f[t][q] - g * f2[t][q] for q in range(k)] for t in range(T)]
    normal = [[sum((residual[t][p] * residual[t][q] for t in range(T)), Fraction(0)) for q in range(k)]
              for p in range(k)]
    least = solve(normal, [sum((values(inputs["reward"])[t] * residual[t][p] for t in range(T)), Fraction(0))
                           for p in range(k)])
    if least is None or max(abs(a - b) for a, b in zip(least, w, strict=True)) < Fraction(1, 16):
        return "the fixed point nearly equals the full-gradient minimiser: the named mistake would pass"
    return None


LEVEL_5 = pytorch_level(
    "autograd",
    bootstrapped_fixed_point,
    _bootstrapped_fixed_point,
    lambda i: f"""Row t of `phi` and of `phi_next` are the features of the state at step t and of the state
        after it, for T = {i["phi"].shape[0]} transitions with rewards `reward`; a value estimate of a state
        is the dot product of its features with a weight vector w. The loss of w is the mean over t of
        (reward_t + gamma * (phi_next_t . w) - phi_t . w)^2 with gamma = `gamma`, where, when
        differentiating, the bootstrapped part reward_t + gamma * (phi_next_t . w) is held constant (its
        value is used, no derivative flows through it). Let w_star be the weight vector at which that
        gradient is zero (there is exactly one here). Give `w_star`, `loss_star`, the loss at w_star,
        and `full_gradient`, the gradient of the same loss at w_star when nothing is held constant.""",
    lambda i: ({"w_star": f32(i["phi"].shape[1]), "loss_star": PY_FLOAT,
                "full_gradient": f32(i["phi"].shape[1])},),
    _sample_bootstrapped,
    refuse=_bootstrapped_clear,
)


DETACHED_GRADIENT = five_levels(
    "detached_gradient",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 detach named in the expressions; L2 stop-gradient described; L3 a straight-through "
          "rounding estimator; L4 which power split reproduces each of three target gradients, or -1; "
          "L5 the "
          "fixed point of a regression whose bootstrapped target is held constant (derived as a linear "
          "system, not the loss minimiser) and the full gradient there",
    branches=(Branch("no k gives a target", _k_none, Fraction(1, 10), (4,)),),
)
