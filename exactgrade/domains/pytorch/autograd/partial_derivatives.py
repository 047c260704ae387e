"""The partial_derivatives family of autograd: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, Inputs, f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Branch, Draw, five_levels


# pt-030 -------------------------------------------------------------------------------------------
def partial_derivatives(a0, b0):
    import torch

    a = a0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    f = (a * b + a ** 2 * b - b ** 3).sum()
    grad_a, grad_b = torch.autograd.grad(f, (a, b))
    return {"rows": [{"f": f.detach(), "grad_a": grad_a, "grad_b": grad_b}]}


def _partial_derivatives(a0, b0):
    pairs = list(zip(values(a0), values(b0), strict=True))
    return [{
        "f": ExactTensor.of("float32", sum((a * b + a * a * b - b ** 3 for a, b in pairs), Fraction(0))),
        "grad_a": ExactTensor.of("float32", [b + 2 * a * b for a, b in pairs]),
        "grad_b": ExactTensor.of("float32", [a + a * a - 3 * b * b for a, b in pairs]),
    }]


def _sample_pair(draw: Draw, level: int) -> dict:
    shape = (2 + level,)
    return {"a0": dyadic_tensor(draw, shape, -2, 2, 2), "b0": dyadic_tensor(draw, shape, -1.5, 1.5, 2)}


LEVEL_1 = pytorch_level(
    "autograd",
    reference=partial_derivatives,
    independent=_partial_derivatives,
    question="""With leaf tensors a (from `a0`) and b (from `b0`) that require gradients, let f =
        sum(a*b + a^2*b - b^3). Use torch.autograd.grad to get the gradients of f with respect to a and
        b. Give `f` (a 0-d tensor), `grad_a` and `grad_b`.""",
    answer=lambda i: ({"f": f32(), "grad_a": f32(*dims(i["a0"])), "grad_b": f32(*dims(i["a0"]))},),
    sample=_sample_pair,
)

# partial_derivatives ------------------------------------------------------------------------------
def _partials(pairs):
    return [(b + 2 * a * b, a + a * a - 3 * b * b) for a, b in pairs]


def directional_slope(a0, b0):
    import torch

    a = a0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    grad_a, grad_b = torch.autograd.grad((a * b + a ** 2 * b - b ** 3).sum(), (a, b))
    return {"rows": [{"slope": float((grad_a - grad_b).sum()),
                      "squared_norm": float((grad_a ** 2).sum() + (grad_b ** 2).sum())}]}


def _directional_slope(a0, b0):
    grads = _partials(list(zip(values(a0), values(b0), strict=True)))
    return [{"slope": sum((ga - gb for ga, gb in grads), Fraction(0)),
             "squared_norm": sum((ga * ga + gb * gb for ga, gb in grads), Fraction(0))}]


def steepest_element(a0, b0):
    import torch

    a = a0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    grad_a, grad_b = torch.autograd.grad((a * b + a ** 2 * b - b ** 3).sum(), (a, b))
    norms = grad_a ** 2 + grad_b ** 2
    best = int(norms.argmax())
    return {"rows": [{"element": best, "squared_norm": float(norms[best])}]}


def _element_norms(a0, b0):
    return [ga * ga + gb * gb for ga, gb in _partials(list(zip(values(a0), values(b0), strict=True)))]


def _steepest_element(a0, b0):
    norms = _element_norms(a0, b0)
    best = norms.index(max(norms))
    return [{"element": best, "squared_norm": norms[best]}]


def _steepest_unique(inputs: Inputs) -> str | None:
    norms = _element_norms(inputs["a0"], inputs["b0"])
    return "two elements share the steepest gradient" if norms.count(max(norms)) > 1 else None


def _steepest_first(inputs: Inputs) -> str | None:
    norms = _element_norms(inputs["a0"], inputs["b0"])
    return "the first element is the steepest: element is 0" if norms.index(max(norms)) == 0 else None


_F_TEXT = "f(a, b) = sum over i of (a_i*b_i + a_i^2*b_i - b_i^3)"


LEVEL_2 = pytorch_level(
    "autograd",
    partial_derivatives,
    _partial_derivatives,
    f"""Let {_F_TEXT}, for vectors a and b of the same length. At a = `a0`, b = `b0`, give `f` (a 0-d
        tensor) and the vectors `grad_a` and `grad_b` of its partial derivatives with respect to each
        a_i and each b_i.""",
    lambda i: ({"f": f32(), "grad_a": f32(*dims(i["a0"])), "grad_b": f32(*dims(i["a0"]))},),
    _sample_pair,
)


LEVEL_3 = pytorch_level(
    "autograd",
    directional_slope,
    _directional_slope,
    f"""Let {_F_TEXT}. At a = `a0`, b = `b0`, give `slope`, the rate of change of f when every a_i
        increases and every b_i decreases at unit speed at the same time (the derivative of f(a0 + t,
        b0 - t) at t = 0, t added to every element), and `squared_norm`, the sum of the squares of all
        partial derivatives of f there.""",
    lambda i: ({"slope": PY_FLOAT, "squared_norm": PY_FLOAT},),
    _sample_pair,
)


LEVEL_4 = pytorch_level(
    "autograd",
    steepest_element,
    _steepest_element,
    f"""Let {_F_TEXT}. At a = `a0`, b = `b0`, give `element`, the index i for which the partial
        derivatives of f with respect to a_i and b_i have the largest sum of squares, and
        `squared_norm`, that sum of squares.""",
    lambda i: ({"element": PY_INT, "squared_norm": PY_FLOAT},),
    _sample_pair,
    refuse=_steepest_unique,
    zero_reason=_steepest_first,
)


# partial_derivatives L5: the gradient of the squared gradient norm, and the curvature's inertia -------
COUPLED_TEXT = ("f(a, b) = sum over i of (a_i^2*b_i + b_i^3) + sum over i from 0 to n-2 of a_i*b_(i+1)")


def gradient_norm_descent(a0, b0):
    import torch

    a, b = a0.double().requires_grad_(True), b0.double().requires_grad_(True)

    def f(a, b):
        return (a ** 2 * b + b ** 3).sum() + (a[:-1] * b[1:]).sum()

    grad_a, grad_b = torch.autograd.grad(f(a, b), (a, b), create_graph=True)
    norm = (grad_a ** 2).sum() + (grad_b ** 2).sum()
    of_a, of_b = torch.autograd.grad(norm, (a, b))
    n = a0.numel()
    hessian = torch.autograd.functional.hessian(lambda z: f(z[:n], z[n:]), torch.cat([a, b]).detach())
    negative = int((torch.linalg.eigvalsh(hessian) < 0).sum())
    return {"rows": [{"grad_a": of_a.float(), "grad_b": of_b.float(), "negative": negative}]}


def _coupled_hessian(va, vb):
    """The exact Hessian of f in the order (a_0..a_(n-1), b_0..b_(n-1)), and its gradient."""
    n = len(va)
    grad = [2 * va[i] * vb[i] + (vb[i + 1] if i < n - 1 else 0) for i in range(n)] + \
           [va[i] ** 2 + 3 * vb[i] ** 2 + (va[i - 1] if i > 0 else 0) for i in range(n)]
    h = [[Fraction(0)] * (2 * n) for _ in range(2 * n)]
    for i in range(n):
        h[i][i] = 2 * vb[i]
        h[i][n + i] = h[n + i][i] = 2 * va[i]
        h[n + i][n + i] = 6 * vb[i]
        if i < n - 1:
            h[i][n + i + 1] = h[n + i + 1][i] = Fraction(1)
    return h, grad


def _inertia(h, shift=Fraction(0)) -> int | None:
    """The number of negative eigenvalues of h + shift*I by symmetric elimination (Sylvester's law:
    the signs of the pivots), or None when a pivot is zero."""
    m = [[e + (shift if r == c else 0) for c, e in enumerate(row)] for r, row in enumerate(h)]
    negative = 0
    for k in range(len(m)):
        pivot = m[k][k]
        if pivot == 0:
            return None
        negative += pivot < 0
        for r in range(k + 1, len(m)):
            factor = m[r][k] / pivot
            m[r] = [x - factor * y for x, y in zip(m[r], m[k], strict=True)]
    return negative


def _gradient_norm_descent(a0, b0):
    h, grad = _coupled_hessian(values(a0), values(b0))
    n = len(grad) // 2
    of = [2 * sum((h[r][c] * grad[c] for c in range(2 * n)), Fraction(0)) for r in range(2 * n)]
    return [{"grad_a": ExactTensor.of("float32", of[:n]), "grad_b": ExactTensor.of("float32", of[n:]),
             "negative": _inertia(h)}]


def _sample_coupled(draw: Draw, level: int) -> dict:
    n = draw.integer(4, 6)
    return {"a0": dyadic_tensor(draw, (n,), -1.5, 1.5, 2),
            "b0": dyadic_tensor(draw, (n,), -1, 1, 3, nonzero=True)}


def _curvature_clear(inputs: Inputs) -> str | None:
    h, _ = _coupled_hessian(values(inputs["a0"]), values(inputs["b0"]))
    counts = {_inertia(h, s) for s in (Fraction(-1, 16), Fraction(0), Fraction(1, 16))}
    if None in counts or len(counts) > 1:
        return "an eigenvalue of the Hessian lies within 1/16 of zero: its sign would hinge on rounding"
    return None


def _coupling_mistaken(task) -> str | None:
    """The named mistakes: the coupling terms dropped from the Hessian, or 2*grad f taken for the
    gradient of the squared norm: neither may reproduce an element of the answer."""
    va, vb = values(task.inputs["a0"]), values(task.inputs["b0"])
    h, grad = _coupled_hessian(va, vb)
    n = len(va)
    for r in range(n):
        for c in range(n):
            if c != r:
                h[r][n + c] = h[n + c][r] = Fraction(0)
    uncoupled = [2 * sum((h[r][c] * grad[c] for c in range(2 * n)), Fraction(0)) for r in range(2 * n)]
    row = task.expected["rows"][0]
    key = [Fraction(e) for e in row["grad_a"].data + row["grad_b"].data]
    close = sum(1 for u, k in zip(uncoupled, key, strict=True) if abs(u - k) <= abs(k) / 10**4)
    doubled = sum(1 for g, k in zip(grad, key, strict=True) if abs(2 * g - k) <= abs(k) / 10**4)
    if close * 2 > len(key) or doubled * 2 > len(key):
        return "a named mistake reproduces most of the gradient"
    return None


LEVEL_5 = pytorch_level(
    "autograd",
    gradient_norm_descent,
    _gradient_norm_descent,
    lambda i: f"""Let {COUPLED_TEXT}, for vectors a and b of the same length n = {i["a0"].shape[0]}. Let
        g(a, b) be the sum of the squares of all 2n partial derivatives of f (the squared length of its
        gradient). At a = `a0`, b = `b0`, give `grad_a` and `grad_b`, the partial derivatives of g with
        respect to each a_i and each b_i, and `negative`, the number of negative eigenvalues of the
        2n x 2n matrix of second partial derivatives of f with respect to (a_0, ..., a_(n-1), b_0, ...,
        b_(n-1)) there.""",
    lambda i: ({"grad_a": f32(i["a0"].shape[0]), "grad_b": f32(i["a0"].shape[0]), "negative": PY_INT},),
    _sample_coupled,
    refuse=_curvature_clear,
    reject=_coupling_mistaken,
)


def negative_count(low: int, high: int):
    def reached(task) -> bool:
        return low <= task.expected["rows"][0]["negative"] - task.inputs["a0"].shape[0] <= high
    return reached


PARTIAL_DERIVATIVES = five_levels(
    "partial_derivatives",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 autograd.grad of the stated function; L2 the partial derivatives asked by their "
          "definition; L3 a directional derivative and the gradient's squared norm; L4 the element "
          "with the steepest gradient; L5 a coupled function: the gradient of its squared gradient "
          "norm (a Hessian-vector product) and the number of negative Hessian eigenvalues (varies: "
          "branches below)",
    branches=(Branch("fewer negative eigenvalues than n", negative_count(-99, -1), Fraction(1, 10), (5,)),
              Branch("more negative eigenvalues than n", negative_count(1, 99), Fraction(1, 10), (5,))),
)
