"""The batched_products family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_FLOAT, PY_INT, Inputs, f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, matmul, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor, shape_text, word
from exactgrade.family import Draw, five_levels


# pt-009 -------------------------------------------------------------------------------------------
def batched_products(a, b):
    import torch

    return {"rows": [{"product": a @ b, "gram": torch.einsum("bij,bkj->bik", a, a)}]}


def _batched_products(a, b):
    va, vb = values(a), values(b)
    return [{
        "product": ExactTensor.of("float32", [matmul(m, vb) for m in va]),
        "gram": ExactTensor.of("float32", [matmul(m, transpose(m)) for m in va]),
    }]


def _sample_batched(draw: Draw, level: int) -> dict:
    batch = draw.integer(2, 1 + level)
    m, k, n = (draw.integer(2, 2 + level) for _ in range(3))
    return {"a": dyadic_tensor(draw, (batch, m, k), -3, 3, 3), "b": dyadic_tensor(draw, (k, n), -2, 2, 2)}


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=batched_products,
    independent=_batched_products,
    question=lambda i: f"""`a` is a batch of {word(i["a"].shape[0])} {i["a"].shape[1]}x{i["a"].shape[2]}
        matrices and `b` is one {i["b"].shape[0]}x{i["b"].shape[1]} matrix. Give `product`, each
        matrix of a multiplied by b (batched matrix product), and `gram`, each matrix of a multiplied by
        its own transpose (A @ A^T per batch element).""",
    answer=lambda i: ({"product": f32(i["a"].shape[0], i["a"].shape[1], i["b"].shape[1]),
                       "gram": f32(i["a"].shape[0], i["a"].shape[1], i["a"].shape[1])},),
    sample=_sample_batched,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    batched_products,
    _batched_products,
    lambda i: f"""`a` has shape {shape_text(i["a"].shape)} = (B, M, K) and `b` has shape
        {shape_text(i["b"].shape)} = (K, N). Give `product`, of shape (B, M, N), with product[t, i, j] =
        sum over l of a[t, i, l] * b[l, j]; and `gram`, of shape (B, M, M), with gram[t, i, j] = sum
        over l of a[t, i, l] * a[t, j, l].""",
    lambda i: ({"product": f32(i["a"].shape[0], i["a"].shape[1], i["b"].shape[1]),
                "gram": f32(i["a"].shape[0], i["a"].shape[1], i["a"].shape[1])},),
    _sample_batched,
)

# batched_products L3: squared Frobenius norms and the grand total --------------------------------
def product_summary(a, b):
    gram = a @ a.transpose(1, 2)
    return {"rows": [{"traces": gram.diagonal(dim1=1, dim2=2).sum(dim=1), "total": float((a @ b).sum())}]}


def _product_summary(a, b):
    va, vb = values(a), values(b)
    return [{"traces": ExactTensor.of("float32", [sum((e * e for row in m for e in row), Fraction(0))
                                                  for m in va]),
             "total": sum((e for m in va for row in matmul(m, vb) for e in row), Fraction(0))}]


LEVEL_3 = pytorch_level(
    "tensor_ops",
    product_summary,
    _product_summary,
    lambda i: f"""`a` is a batch of {i["a"].shape[0]} matrices A_t of shape
        {i["a"].shape[1]}x{i["a"].shape[2]} and `b` a {i["b"].shape[0]}x{i["b"].shape[1]} matrix.
        Give `traces`, for every t the trace of A_t times its own transpose, and `total`, the sum of
        all elements of all the matrix products A_t b.""",
    lambda i: ({"traces": f32(i["a"].shape[0]), "total": PY_FLOAT},),
    _sample_batched,
)


# batched_products L4: the batch element whose product is largest ---------------------------------
def largest_product(a, b):
    norms = ((a @ b) ** 2).sum(dim=(1, 2))
    best = int(norms.argmax())
    return {"rows": [{"best": best, "squared_norm": float(norms[best])}]}


def _product_norms(va, vb):
    return [sum((e * e for row in matmul(m, vb) for e in row), Fraction(0)) for m in va]


def _largest_product(a, b):
    norms = _product_norms(values(a), values(b))
    best = norms.index(max(norms))
    return [{"best": best, "squared_norm": norms[best]}]


def _largest_unique(inputs: Inputs) -> str | None:
    norms = _product_norms(values(inputs["a"]), values(inputs["b"]))
    if norms.count(max(norms)) > 1:
        return "two batch elements tie for the largest product: the index would be ambiguous"
    return None


def _largest_first(inputs: Inputs) -> str | None:
    norms = _product_norms(values(inputs["a"]), values(inputs["b"]))
    return "the first batch element is the largest: best is 0" if norms.index(max(norms)) == 0 else None


LEVEL_4 = pytorch_level(
    "tensor_ops",
    largest_product,
    _largest_product,
    lambda i: f"""`a` is a batch of {i["a"].shape[0]} matrices A_t and `b` one matrix. Give `best`, the
        index t whose matrix product A_t b has the largest sum of squared elements, and
        `squared_norm`, that sum.""",
    lambda i: ({"best": PY_INT, "squared_norm": PY_FLOAT},),
    _sample_batched,
    refuse=_largest_unique,
    zero_reason=_largest_first,
)


# batched_products L5: three steps of max-normalised power iteration on each Gram matrix -----------
def gram_power_iteration(a):
    import torch

    gram = a @ a.transpose(1, 2)
    v = torch.ones(a.shape[0], a.shape[1], 1, dtype=a.dtype)
    for _ in range(3):
        w = gram @ v
        scale = w.abs().amax(dim=1, keepdim=True)
        v = w / scale
    return {"rows": [{"vector": v.squeeze(2), "scale": scale.reshape(-1)}]}


def _power_steps(va):
    vectors, scales = [], []
    for m in va:
        gram = matmul(m, transpose(m))
        v = [Fraction(1)] * len(gram)
        for _ in range(3):
            w = [sum((g * e for g, e in zip(row, v, strict=True)), Fraction(0)) for row in gram]
            scale = max(abs(e) for e in w)
            v = [e / scale for e in w]
        vectors.append(v)
        scales.append(scale)
    return vectors, scales


def _gram_power_iteration(a):
    vectors, scales = _power_steps(values(a))
    return [{"vector": ExactTensor.of("float32", vectors), "scale": ExactTensor.of("float32", scales)}]


def _power_well_scaled(inputs: Inputs) -> str | None:
    vectors, _ = _power_steps(values(inputs["a"]))
    if any(abs(e) < Fraction(1, 16) for v in vectors for e in v):
        return "an iterate element is within 1/16 of zero: its float32 error would use much of the tolerance"
    return None


def _sample_power(draw: Draw, level: int) -> dict:
    batch, m, k = draw.integer(2, 1 + max(level, 2)), draw.integer(2, 2 + level), draw.integer(2, 2 + level)
    return {"a": dyadic_tensor(draw, (batch, m, k), -3, 3, 2)}


LEVEL_5 = pytorch_level(
    "tensor_ops",
    gram_power_iteration,
    _gram_power_iteration,
    lambda i: f"""For each of the {i["a"].shape[0]} matrices A_t of `a` (shape
        {i["a"].shape[1]}x{i["a"].shape[2]}), let G be A_t times its own transpose. Start from the vector
        v of {i["a"].shape[1]} ones and repeat three times: w = G v, s = the largest absolute value of an
        element of w, v = w / s. Give `vector`, the final v of every t (one row per t), and `scale`,
        the final s of every t.""",
    lambda i: ({"vector": f32(i["a"].shape[0], i["a"].shape[1]), "scale": f32(i["a"].shape[0])},),
    _sample_power,
    refuse=_power_well_scaled,
)


BATCHED_PRODUCTS = five_levels(
    "batched_products",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the batched product and Gram matrix named; L2 both by their index sums; L3 traces and a "
          "grand total of the products (intermediates not asked); L4 the batch element with the largest "
          "product; L5 three steps of max-normalised power iteration on every Gram matrix",
)
