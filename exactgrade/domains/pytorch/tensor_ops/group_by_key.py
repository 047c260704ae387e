"""The group_by_key family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, mean, values
from exactgrade.domains.pytorch.sampling import dyadic_list, first_duplicate
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Draw, five_levels


# pt-015 -------------------------------------------------------------------------------------------
def group_by_key(keys, vals):
    import torch

    unique_keys, inverse, counts = torch.unique(keys, sorted=True, return_inverse=True, return_counts=True)
    sums = torch.zeros(unique_keys.shape[0], dtype=vals.dtype).index_add_(0, inverse, vals)
    return {"rows": [{
        "unique_keys": unique_keys,
        "inverse": inverse,
        "counts": counts,
        "group_means": sums / counts,
    }]}


def _group_by_key(keys, vals):
    vk, vv = values(keys), values(vals)
    unique = sorted(set(vk))
    members = [[v for k, v in zip(vk, vv, strict=True) if k == u] for u in unique]
    return [{
        "unique_keys": ExactTensor.of("int64", unique),
        "inverse": ExactTensor.of("int64", [unique.index(k) for k in vk]),
        "counts": ExactTensor.of("int64", [len(m) for m in members]),
        "group_means": ExactTensor.of("float32", [mean(m) for m in members]),
    }]


def _sample_groups(draw: Draw, level: int) -> dict:
    n = 8 + 3 * (level - 1)
    pool = draw.sample(range(0, 10 + 10 * level), 3 + level)
    keys = [draw.choice(pool) for _ in range(n)]
    return {"keys": tensor("int64", keys), "vals": tensor("float32", dyadic_list(draw, n, -3, 3, 2))}


def _a_group_repeats(inputs: Inputs) -> str | None:
    keys = values(inputs["keys"])
    if first_duplicate(keys) is None:
        return "every key is distinct: there is nothing to group"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=group_by_key,
    independent=_group_by_key,
    question="""Group `vals` by `keys`. Give `unique_keys`, the distinct keys in ascending order;
        `inverse`, for each element the position of its key in unique_keys; `counts`, how many elements
        each key has; and `group_means`, the mean of vals within each group (in unique_keys order).""",
    answer=lambda i: ({"unique_keys": i64(len(set(values(i["keys"])))), "inverse": i64(*dims(i["keys"])),
                       "counts": i64(len(set(values(i["keys"])))),
                       "group_means": f32(len(set(values(i["keys"]))))},),
    sample=_sample_groups,
    refuse=_a_group_repeats,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    group_by_key,
    _group_by_key,
    """The elements of `vals` are labelled by the integers in `keys` (same length). Give
        `unique_keys`, every label that occurs, once each, in increasing order; `inverse`, for each
        element the 0-based position of its label in unique_keys; `counts`, for each label in
        unique_keys the number of elements carrying it; and `group_means`, for each label in
        unique_keys the average of the vals carrying it.""",
    lambda i: ({"unique_keys": i64(len(set(values(i["keys"])))), "inverse": i64(*dims(i["keys"])),
                "counts": i64(len(set(values(i["keys"])))),
                "group_means": f32(len(set(values(i["keys"]))))},),
    _sample_groups,
    refuse=_a_group_repeats,
)


# group_by_key L3: each element's deviation from its group mean, and the best group ---------------
def group_deviation(keys, vals):
    import torch

    unique, inverse, counts = torch.unique(keys, return_inverse=True, return_counts=True)
    means = torch.zeros(unique.shape[0], dtype=vals.dtype).index_add_(0, inverse, vals) / counts
    return {"rows": [{"deviation": vals - means[inverse], "best_key": int(unique[means.argmax()])}]}


def _group_means(vk, vv):
    groups: dict = {}
    for k, v in zip(vk, vv, strict=True):
        groups.setdefault(k, []).append(v)
    return {k: mean(m) for k, m in groups.items()}


def _group_deviation(keys, vals):
    vk, vv = values(keys), values(vals)
    means = _group_means(vk, vv)
    best = max(sorted(means), key=lambda k: means[k])
    return [{"deviation": ExactTensor.of("float32", [v - means[k] for k, v in zip(vk, vv, strict=True)]),
             "best_key": best}]


def _best_group_unique(inputs: Inputs) -> str | None:
    means = _group_means(values(inputs["keys"]), values(inputs["vals"]))
    top = max(means.values())
    if list(means.values()).count(top) > 1:
        return "two groups share the largest mean: the key would be ambiguous"
    return _a_group_repeats(inputs)


LEVEL_3 = pytorch_level(
    "tensor_ops",
    group_deviation,
    _group_deviation,
    """The elements of `vals` are labelled by the integers in `keys`. Give `deviation`, each element
        of vals minus the average of the vals carrying the same label, and `best_key`, the label whose
        elements have the largest average.""",
    lambda i: ({"deviation": f32(*dims(i["vals"])), "best_key": PY_INT},),
    _sample_groups,
    refuse=_best_group_unique,
)


# group_by_key L4: the shortest prefix that holds every key twice ---------------------------------
def prefix_with_pairs(keys):
    import torch

    everyone = torch.unique(keys)
    for m in range(1, keys.shape[0] + 1):
        if bool(((keys[:m].unsqueeze(0) == everyone.unsqueeze(1)).sum(dim=1) >= 2).all()):
            return {"rows": [{"length": m}]}
    return {"rows": [{"length": -1}]}


def _prefix_with_pairs(keys):
    vk = values(keys)
    for m in range(1, len(vk) + 1):
        if all(vk[:m].count(k) >= 2 for k in set(vk)):
            return [{"length": m}]
    return [{"length": -1}]


def _sample_pairs(draw: Draw, level: int) -> dict:
    n = 8 + 3 * (level - 1)
    pool = draw.sample(range(0, 10 + 10 * level), 2 + level // 2)
    keys = [draw.choice(pool) for _ in range(n)]
    return {"keys": tensor("int64", keys)}


LEVEL_4 = pytorch_level(
    "tensor_ops",
    prefix_with_pairs,
    _prefix_with_pairs,
    """Give `length`, the smallest m >= 1 such that every label that occurs anywhere in `keys`
        occurs at least twice among the first m elements of keys, or -1 if even the whole of keys does
        not hold some label twice.""",
    lambda i: ({"length": PY_INT},),
    _sample_pairs,
)


# group_by_key L5: a running mean within each group, and each element's place in its group ---------
def grouped_running_mean(keys, vals):
    import torch

    same = (keys.unsqueeze(0) == keys.unsqueeze(1)) & torch.ones(keys.shape[0], keys.shape[0]).tril().bool()
    counts = same.sum(dim=1)
    return {"rows": [{"running_mean": (same.to(vals.dtype) @ vals) / counts, "place": counts - 1}]}


def _grouped_running_mean(keys, vals):
    vk, vv = values(keys), values(vals)
    seen: dict = {}
    means, places = [], []
    for k, v in zip(vk, vv, strict=True):
        seen.setdefault(k, []).append(v)
        means.append(mean(seen[k]))
        places.append(len(seen[k]) - 1)
    return [{"running_mean": ExactTensor.of("float32", means), "place": ExactTensor.of("int64", places)}]


LEVEL_5 = pytorch_level(
    "tensor_ops",
    grouped_running_mean,
    _grouped_running_mean,
    """Walk through `keys` and `vals` together, in order. For each element, give in `running_mean`
        the average of the vals of all elements so far (this one included) that carry the same key,
        and in `place` how many earlier elements carry that key (an int64 vector).""",
    lambda i: ({"running_mean": f32(*dims(i["vals"])), "place": i64(*dims(i["keys"]))},),
    _sample_groups,
    refuse=_a_group_repeats,
)


GROUP_BY_KEY = five_levels(
    "group_by_key",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 grouping described by its outputs; L2 the same with every output defined; L3 deviations "
          "from group means and the best group; L4 the shortest prefix holding every key twice, or -1; "
          "L5 a running mean within each group and each element's place in it",
)
