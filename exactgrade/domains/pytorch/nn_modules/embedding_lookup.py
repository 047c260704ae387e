"""The embedding_lookup family of nn_modules: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.pytorch.common import Inputs, f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, matmul, mean, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor, int_tensor
from exactgrade.domains.pytorch.shared import clear_winner, dims
from exactgrade.family import Draw, five_levels


# pt-026 -------------------------------------------------------------------------------------------
def embedding_lookup(weight, idx, flat_idx, offsets):
    import torch
    import torch.nn.functional as F

    embedding = torch.nn.Embedding(weight.shape[0], weight.shape[1], padding_idx=0, dtype=weight.dtype)
    with torch.no_grad():
        embedding.weight.copy_(weight)
        looked_up = embedding(idx)
    return {"rows": [{
        "looked_up": looked_up,
        "bag_mean": F.embedding_bag(flat_idx, weight, offsets, mode="mean"),
        "bag_max": F.embedding_bag(flat_idx, weight, offsets, mode="max"),
    }]}


def _embedding_lookup(weight, idx, flat_idx, offsets):
    table, ids, starts = values(weight), values(flat_idx), values(offsets)
    bags = [ids[start:end] for start, end in zip(starts, [*starts[1:], len(ids)], strict=True)]
    return [{
        # padding_idx only zeroes the row at initialisation and blocks its gradient: the copied row comes back
        "looked_up": ExactTensor.of("float32", [[table[i] for i in row] for row in values(idx)]),
        "bag_mean": ExactTensor.of("float32", [[mean(col) for col in transpose([table[i] for i in bag])]
                                               for bag in bags]),
        "bag_max": ExactTensor.of("float32", [[max(col) for col in transpose([table[i] for i in bag])]
                                              for bag in bags]),
    }]


def _sample_embedding(draw: Draw, level: int) -> dict:
    vocab, dim = draw.integer(4, 4 + 2 * level), draw.integer(2, 2 + level)
    idx = int_tensor(draw, (draw.integer(2, 1 + level), draw.integer(2, 2 + level)), 0, vocab - 1)
    bags = draw.integer(2, 1 + level)
    flat = [draw.integer(0, vocab - 1) for _ in range(bags + draw.integer(bags, 2 * bags + level))]
    offsets = [0, *sorted(draw.sample(range(1, len(flat)), bags - 1))]
    return {
        "weight": dyadic_tensor(draw, (vocab, dim), -2, 2, 3),
        "idx": idx,
        "flat_idx": tensor("int64", flat),
        "offsets": tensor("int64", offsets),
    }


def _looks_up_padding_row(inputs: Inputs) -> str | None:
    if 0 not in [e for row in values(inputs["idx"]) for e in row]:
        return "idx never looks up the padding row 0"
    return None


LEVEL_1 = pytorch_level(
    "nn_modules",
    reference=embedding_lookup,
    independent=_embedding_lookup,
    question=lambda i: (
        f"""Build torch.nn.Embedding({i["weight"].shape[0]}, {i["weight"].shape[1]},
        padding_idx=0), then copy `weight` into its weight. Give `looked_up`, the embeddings of `idx`.
        Then, with the same table `weight`, treat `flat_idx` as bags that start at the positions in
        `offsets` (torch.nn.functional.embedding_bag) and give `bag_mean` and `bag_max`, each bag reduced
        with mode 'mean' and 'max'."""
    ),
    answer=lambda i: (
        {
            "looked_up": f32(*dims(i["idx"]), i["weight"].shape[1]),
            "bag_mean": f32(i["offsets"].shape[0], i["weight"].shape[1]),
            "bag_max": f32(i["offsets"].shape[0], i["weight"].shape[1]),
        },
    ),
    sample=_sample_embedding,
    refuse=_looks_up_padding_row,
)


# embedding_lookup --------------------------------------------------------------------------------
_BAG_MATH = """`flat_idx` is cut into bags: bag b holds the entries from position offsets[b] up to (not
    including) offsets[b + 1], the last bag running to the end."""


LEVEL_2 = pytorch_level(
    "nn_modules",
    reference=embedding_lookup,
    independent=_embedding_lookup,
    sample=_sample_embedding,
    refuse=_looks_up_padding_row,
    question=f"""`weight` is a table of embeddings, one row per id. Give `looked_up`: for every id in
       `idx`, its row of the table (ids equal to 0 included: they look up row 0). {_BAG_MATH} Give
       `bag_mean` and `bag_max`: for each bag, the elementwise mean and the elementwise maximum of the
       table rows of its ids.""",
    answer=lambda i: (
        {
            "looked_up": f32(*dims(i["idx"]), i["weight"].shape[1]),
            "bag_mean": f32(i["offsets"].shape[0], i["weight"].shape[1]),
            "bag_max": f32(i["offsets"].shape[0], i["weight"].shape[1]),
        },
    ),
)


def _bags(flat_idx, offsets):
    ids, starts = values(flat_idx), values(offsets)
    return [ids[s:e] for s, e in zip(starts, [*starts[1:], len(ids)], strict=True)]


def _bag_means(weight, flat_idx, offsets):
    table = values(weight)
    return [[mean(col) for col in transpose([table[i] for i in bag])] for bag in _bags(flat_idx, offsets)]


def bag_scores(weight, idx, flat_idx, offsets):
    import torch.nn.functional as F

    return {"rows": [{"scores": F.embedding_bag(flat_idx, weight, offsets, mode="mean") @ weight.T}]}


def _bag_scores(weight, idx, flat_idx, offsets):
    return [
        {
            "scores": ExactTensor.of(
                "float32", matmul(_bag_means(weight, flat_idx, offsets), transpose(values(weight)))
            )
        }
    ]


LEVEL_3 = pytorch_level(
    "nn_modules",
    reference=bag_scores,
    independent=_bag_scores,
    sample=_sample_embedding,
    question=f"""`weight` is a table of embeddings, one row per id. {_BAG_MATH} Each bag is
        summarised by
       the elementwise mean of the table rows of its ids. Give `scores`: for each bag b and id v, the
       dot product of bag b's summary with row v of the table (shape (bags, ids)). (`idx` is not
       used.)""",
    answer=lambda i: ({"scores": f32(i["offsets"].shape[0], i["weight"].shape[0])},),
)


def nearest_rows(weight, idx, flat_idx, offsets):
    import torch
    import torch.nn.functional as F

    means = F.embedding_bag(flat_idx, weight, offsets, mode="mean")
    return {"rows": [{"nearest": torch.cdist(means.double(), weight.double()).argmin(dim=1)}]}


def _nearest_distances(weight, flat_idx, offsets):
    return [
        [sum(((a - b) ** 2 for a, b in zip(m, row, strict=True)), Fraction(0)) for row in values(weight)]
        for m in _bag_means(weight, flat_idx, offsets)
    ]


def _nearest_rows(weight, idx, flat_idx, offsets):
    return [
        {
            "nearest": ExactTensor.of(
                "int64", [d.index(min(d)) for d in _nearest_distances(weight, flat_idx, offsets)]
            )
        }
    ]


def _nearest_clear(inputs):
    rows = _nearest_distances(inputs["weight"], inputs["flat_idx"], inputs["offsets"])
    for d in rows:
        problem = clear_winner(d)
        if problem is not None:
            return problem
    if len({d.index(min(d)) for d in rows}) < 2:
        return "every bag has the same nearest row: a constant answer passes"
    return None


LEVEL_4 = pytorch_level(
    "nn_modules",
    reference=nearest_rows,
    independent=_nearest_rows,
    sample=_sample_embedding,
    refuse=_nearest_clear,
    question=f"""`weight` is a table of embeddings, one row per id. {_BAG_MATH} Each bag is
        summarised by
       the elementwise mean of the table rows of its ids. Give `nearest`: for each bag, the id whose
       row is closest to the bag's summary in Euclidean distance (int64, one per bag). (`idx` is not
       used.)""",
    answer=lambda i: ({"nearest": i64(i["offsets"].shape[0])},),
)


def embedding_sgd(weight, idx, upstream):
    import torch

    table = torch.nn.Embedding(weight.shape[0], weight.shape[1], padding_idx=0, dtype=weight.dtype)
    with torch.no_grad():
        table.weight.copy_(weight)
    optimizer = torch.optim.SGD(table.parameters(), lr=0.5)
    (table(idx) * upstream).sum().backward()
    optimizer.step()
    return {"rows": [{"weight": table.weight.detach()}]}


def _embedding_sgd(weight, idx, upstream):
    table = [list(row) for row in values(weight)]
    for ids, ups in zip(values(idx), values(upstream), strict=True):
        for i, up in zip(ids, ups, strict=True):
            if i != 0:  # the padding row receives no gradient
                table[i] = [e - Fraction(1, 2) * u for e, u in zip(table[i], up, strict=True)]
    return [{"weight": ExactTensor.of("float32", table)}]


def _sample_embedding_sgd(draw, level):
    inputs = _sample_embedding(draw, 3)
    idx = inputs["idx"]
    return {
        "weight": inputs["weight"],
        "idx": idx,
        "upstream": dyadic_tensor(draw, (*dims(idx), inputs["weight"].shape[1]), -1, 1, 2, nonzero=True),
    }


LEVEL_5 = pytorch_level(
    "nn_modules",
    reference=embedding_sgd,
    independent=_embedding_sgd,
    sample=_sample_embedding_sgd,
    refuse=_looks_up_padding_row,
    question="""`weight` is a trainable table of embeddings, one row per id; id 0 is reserved for
       padding, and its row never receives a gradient. Every id in `idx` looks up its row, giving e of
       shape idx.shape + (dim,). Take one step of plain gradient descent (step size 0.5) on
       L = the sum
       over all elements of e * `upstream`. Give the table `weight` after the step.""",
    answer=lambda i: ({"weight": f32(*dims(i["weight"]))},),
)


EMBEDDING_LOOKUP = five_levels(
    "embedding_lookup",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 nn.Embedding and embedding_bag named; L2 the lookup and the bags described; L3 dot-product "
   "scores of each bag's mean against the table; L4 the table row nearest to each bag's mean; L5 one "
   "gradient step on the table with a padding row that never learns",
)
