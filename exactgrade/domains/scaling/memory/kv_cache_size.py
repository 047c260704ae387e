"""The kv_cache_size family of memory: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import letters, sample_kv_cache_size
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level, some_none
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def kv_cache_size(configs, seq_len, batch, bytes_per_value):
    """K and V for every layer, KV head and position of every sequence."""
    from fractions import Fraction

    rows = []
    for config in configs:
        per_token = 2 * config["layers"] * config["n_kv_heads"] * config["head_dim"] * bytes_per_value
        rows.append(
            {
                "config": config["name"],
                "bytes_per_token": Fraction(per_token),
                "total_gib": Fraction(per_token * seq_len * batch, 2**30),
            }
        )
    return {"rows": rows}


def kv_cache_size_float(configs, seq_len, batch, bytes_per_value, mistake=None):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for c in configs:
        per_token = float(tensors * bytes_per_value * c["head_dim"] * c["n_kv_heads"] * c["layers"])
        rows.append(
            {
                "config": c["name"],
                "bytes_per_token": per_token,
                "total_gib": batch * (seq_len / 2.0**30) * per_token,
            }
        )
    return {"rows": rows}


LEVEL_1 = scaling_level(
    "memory",
    kv_cache_size,
    """\
A decoder caches a key and a value vector of size `head_dim` for every layer, every KV head and
every position, `bytes_per_value` bytes per value. For each attention variant in `configs` (for
example multi-head, grouped-query and multi-query attention of the same model), give the KV-cache
bytes per token and the total KV cache in GiB for `batch` sequences of `seq_len` tokens each.""",
    '{"rows": [{"config": <str>, "bytes_per_token": <number>, "total_gib": <number>}, ...]}'
    "  # one row per config, in order",
    kv_cache_size_float,
    "keys_only",
    sample=sample_kv_cache_size,
)


# ================================================================ kv_cache_size
def kv_cache_grouped(configs, seq_len, batch, bytes_per_value):
    """KV cache per token and in total, the KV heads derived from the query-head grouping."""
    from fractions import Fraction

    rows = []
    for c in configs:
        kv_heads = c["n_heads"] // c["query_heads_per_kv_head"]
        per_token = 2 * c["layers"] * kv_heads * c["head_dim"] * bytes_per_value
        rows.append(
            {
                "config": c["name"],
                "bytes_per_token": Fraction(per_token),
                "total_gib": Fraction(per_token * seq_len * batch, 2**30),
            }
        )
    return {"rows": rows}


def kv_cache_grouped_float(configs, seq_len, batch, bytes_per_value, mistake=None):
    known_mistake(mistake, "query_heads_cached")
    rows = []
    for c in configs:
        heads = (
            c["n_heads"] if mistake == "query_heads_cached" else c["n_heads"] / c["query_heads_per_kv_head"]
        )
        per_token = 2.0 * bytes_per_value * c["head_dim"] * heads * c["layers"]
        rows.append(
            {
                "config": c["name"],
                "bytes_per_token": per_token,
                "total_gib": per_token * batch / 2**30 * seq_len,
            }
        )
    return {"rows": rows}


def sample_kv_grouped(draw: Draw, level: int) -> dict:
    n_heads = draw.choice((16, 24, 32, 40, 48, 64, 96))
    groups = sorted({1, n_heads, *draw.sample([d for d in range(2, n_heads) if n_heads % d == 0], 2)})
    layers, head_dim = draw.integer(8, 96), draw.choice((64, 80, 96, 128))
    configs = [
        {
            "name": f"group_{g}",
            "layers": layers,
            "n_heads": n_heads,
            "query_heads_per_kv_head": g,
            "head_dim": head_dim,
        }
        for g in draw.sample(groups, min(len(groups), 2 + level // 2))
    ]
    return {
        "configs": configs,
        "seq_len": 1024 * draw.integer(1, 64) + draw.integer(0, 1023),
        "batch": draw.integer(1, 64),
        "bytes_per_value": draw.choice((1, 2)),
    }


_KV_GROUPED_L2 = """\
A decoder layer's attention has `n_heads` query heads of `head_dim` values; with grouped-query
attention, every group of `query_heads_per_kv_head` query heads shares one key head and one value
head (multi-head attention: groups of 1; multi-query: one group of all heads). During decoding the
model caches, for every one of its `layers` layers and every position, the keys and values of its
key and value heads, `bytes_per_value` bytes per value. For each variant in `configs`, give the
KV-cache bytes per token and the total KV cache in GiB for `batch` sequences of `seq_len` tokens
each."""


LEVEL_2 = scaling_level(
    "memory",
    kv_cache_grouped,
    _KV_GROUPED_L2,
    '{"rows": [{"config": <str>, "bytes_per_token": <number>, "total_gib": <number>}, ...]}'
    "  # one row per config, in order",
    kv_cache_grouped_float,
    "query_heads_cached",
    sample=sample_kv_grouped,
)


def kv_cache_paged(configs, seq_lens, page_tokens, bytes_per_value):
    """A paged cache: every sequence holds whole pages of page_tokens positions (all layers)."""
    from fractions import Fraction

    pages = sum(-(-length // page_tokens) for length in seq_lens)
    rows = []
    for c in configs:
        per_token = 2 * c["layers"] * c["n_kv_heads"] * c["head_dim"] * bytes_per_value
        rows.append({"config": c["name"], "allocated_gib": Fraction(pages * page_tokens * per_token, 2**30)})
    return {"rows": rows}


def kv_cache_paged_float(configs, seq_lens, page_tokens, bytes_per_value, mistake=None):
    known_mistake(mistake, "no_page_rounding")
    if mistake == "no_page_rounding":
        positions = float(sum(seq_lens))
    else:
        positions = float(sum(math.ceil(s / page_tokens) for s in seq_lens) * page_tokens)
    return {
        "rows": [
            {
                "config": c["name"],
                "allocated_gib": positions
                / 2**30
                * (2.0 * bytes_per_value * c["head_dim"] * c["n_kv_heads"] * c["layers"]),
            }
            for c in configs
        ]
    }


def sample_kv_paged(draw: Draw, level: int) -> dict:
    base = sample_kv_cache_size(draw, level)
    page = draw.choice((16, 32, 64, 128, 256))
    lengths = [draw.integer(1, 32_768) for _ in range(2 + level)]
    if all(length % page == 0 for length in lengths):
        raise Reject("every length fills whole pages")
    return {
        "configs": base["configs"],
        "seq_lens": lengths,
        "page_tokens": page,
        "bytes_per_value": base["bytes_per_value"],
    }


_KV_PAGED_L3 = """\
A decoder caches a key and a value vector of size `head_dim` for every layer, every KV head and
every position, `bytes_per_value` bytes per value (each config in `configs` gives `layers`,
`n_kv_heads` and `head_dim`). The cache is allocated in pages: a page holds the keys and values of
`page_tokens` consecutive positions of one sequence, for all layers and KV heads, and a sequence
holds as many whole pages as its positions need. For the batch of sequences whose lengths are
`seq_lens`, give for each config the KV-cache memory allocated, in GiB."""


LEVEL_3 = scaling_level(
    "memory",
    kv_cache_paged,
    _KV_PAGED_L3,
    '{"rows": [{"config": <str>, "allocated_gib": <number>}, ...]}  # one row per config, in order',
    kv_cache_paged_float,
    "no_page_rounding",
    sample=sample_kv_paged,
)


def max_batch_for_cache_budget(configs, seq_len, bytes_per_value, cache_budget_bytes):
    """Largest batch of seq_len-token sequences whose KV cache fits the budget (None: not one)."""
    rows = []
    for config in configs:
        per_sequence = (
            2 * config["layers"] * config["n_kv_heads"] * config["head_dim"] * bytes_per_value * seq_len
        )
        batch = cache_budget_bytes // per_sequence
        rows.append({"config": config["name"], "max_batch": batch if batch >= 1 else None})
    return {"rows": rows}


def max_batch_for_cache_budget_float(configs, seq_len, bytes_per_value, cache_budget_bytes, mistake=None):
    known_mistake(mistake, "keys_only")
    tensors = 1 if mistake == "keys_only" else 2
    rows = []
    for c in configs:
        b = math.floor(
            cache_budget_bytes
            / (seq_len * bytes_per_value * c["head_dim"] * c["n_kv_heads"] * c["layers"] * tensors)
        )
        rows.append({"config": c["name"], "max_batch": b if b >= 1 else None})
    return {"rows": rows}


def sample_cache_budget(draw: Draw, level: int) -> dict:
    head_dim = draw.choice((64, 80, 96, 128, 256))
    n_heads = draw.choice((8, 16, 32, 64))
    layers = draw.integer(8, 96)
    variants = sorted(
        {n_heads, 1, *draw.sample([d for d in range(2, n_heads) if n_heads % d == 0], 2)}, reverse=True
    )
    configs = [
        {
            "name": "mha" if h == n_heads else "mqa" if h == 1 else f"gqa_{h}",
            "layers": layers,
            "n_kv_heads": h,
            "head_dim": head_dim,
        }
        for h in variants
    ]
    seq_len = 1024 * draw.integer(1, 128) - draw.integer(0, 1023)
    width = draw.choice((1, 2, 4))
    largest = 2 * layers * n_heads * head_dim * width * seq_len
    budget = draw.integer(largest // 2, largest * 64) if draw.chance(3, 4) else draw.integer(1, largest - 1)
    return {"configs": configs, "seq_len": seq_len, "bytes_per_value": width, "cache_budget_bytes": budget}


def _cache_edges(task: Task) -> str | None:
    i = task.inputs
    for c in i["configs"]:
        per = 2 * c["layers"] * c["n_kv_heads"] * c["head_dim"] * i["bytes_per_value"] * i["seq_len"]
        if near_integer(Fraction(i["cache_budget_bytes"], per)):
            return f"{c['name']}: the batch that fits sits on an integer"
    return None


CACHE_L4 = """\
A decoder caches a key and a value vector of size `head_dim` for every layer, every KV head and
every position, `bytes_per_value` bytes per value. For each attention variant in `configs`, give
the largest number of sequences of `seq_len` tokens each whose KV cache fits in
`cache_budget_bytes` bytes, or None if not even one does."""


LEVEL_4 = scaling_level(
    "memory",
    max_batch_for_cache_budget,
    CACHE_L4,
    '{"rows": [{"config": <str>, "max_batch": <int> | None}, ...]}  # one row per config, in order',
    max_batch_for_cache_budget_float,
    "keys_only",
    sample=sample_cache_budget,
    reject=_cache_edges,
)


def hybrid_paged_cache(configs, seq_lens, new_len, page_tokens, bytes_per_value, cache_budget_bytes):
    """A paged cache of global and sliding-window layers: the bytes of the current sequences, and
    how many more sequences of new_len fit in the budget (None if the current ones already do not)."""
    from fractions import Fraction

    def sequence_bytes(c, length):
        page = page_tokens * 2 * c["n_kv_heads"] * c["head_dim"] * bytes_per_value  # one layer's page
        local = min(length, c["window"])
        return page * (
            c["global_layers"] * -(-length // page_tokens)
            + (c["layers"] - c["global_layers"]) * -(-local // page_tokens)
        )

    rows = []
    for c in configs:
        used = sum(sequence_bytes(c, length) for length in seq_lens)
        extra = (
            (cache_budget_bytes - used) // sequence_bytes(c, new_len) if used <= cache_budget_bytes else None
        )
        rows.append({"config": c["name"], "cache_gib": Fraction(used, 2**30), "extra_sequences": extra})
    return {"rows": rows}


def hybrid_paged_cache_float(
    configs, seq_lens, new_len, page_tokens, bytes_per_value, cache_budget_bytes, mistake=None
):
    known_mistake(mistake, "window_ignored")
    rows = []
    for c in configs:
        window = 10**12 if mistake == "window_ignored" else c["window"]
        per_position = 2.0 * c["n_kv_heads"] * c["head_dim"] * bytes_per_value

        def pages(length, c=c, window=window):
            return c["global_layers"] * math.ceil(length / page_tokens) + (
                c["layers"] - c["global_layers"]
            ) * math.ceil(min(length, window) / page_tokens)

        used = per_position * page_tokens * sum(pages(s) for s in seq_lens)
        extra = None
        if used <= cache_budget_bytes:
            extra = math.floor((cache_budget_bytes - used) / (per_position * page_tokens * pages(new_len)))
        rows.append({"config": c["name"], "cache_gib": used / 2**30, "extra_sequences": extra})
    return {"rows": rows}


def sample_hybrid_cache(draw: Draw, level: int) -> dict:
    """Configs of one model size: all-global, and mixes of global and sliding-window layers with
    windows inside the drawn lengths; a budget between the configs' needs (some None)."""
    layers, head_dim = draw.integer(16, 80), draw.choice((64, 128))
    configs = []
    for name in letters("config", 3 + level // 2):
        global_layers = draw.integer(0, layers // 2)
        configs.append(
            {
                "name": name,
                "layers": layers,
                "global_layers": global_layers,
                "window": 128 * draw.integer(4, 64),
                "n_kv_heads": draw.choice((1, 2, 4, 8)),
                "head_dim": head_dim,
            }
        )
    page = draw.choice((16, 32, 64, 128))
    inputs = {
        "configs": configs,
        "seq_lens": [draw.integer(64, 65_536) for _ in range(2 + level)],
        "new_len": draw.integer(1024, 32_768),
        "page_tokens": page,
        "bytes_per_value": draw.choice((1, 2)),
    }
    used = sorted(hybrid_paged_cache(**inputs, cache_budget_bytes=0)["rows"], key=lambda r: r["cache_gib"])
    middle = used[draw.integer(1, len(used) - 1)]["cache_gib"] * 2**30
    inputs["cache_budget_bytes"] = math.floor(middle * Fraction(draw.integer(100, 400), 100)) + draw.integer(
        1, 999
    )
    return inputs


def _hybrid_cache_rules(task: Task) -> str | None:
    i = task.inputs
    if not any(
        length > c["window"]
        for length in i["seq_lens"]
        for c in i["configs"]
        if c["global_layers"] < c["layers"]
    ):
        return "no sequence is longer than a window"
    for c, row in zip(i["configs"], task.expected["rows"], strict=True):
        used = row["cache_gib"] * 2**30
        if near_tie(used, i["cache_budget_bytes"]):
            return f"{c['name']}: the cache sits on the budget"
    if all(row["extra_sequences"] is None for row in task.expected["rows"]):
        return "no config fits the current sequences"
    if all(row["extra_sequences"] == 0 for row in task.expected["rows"]):
        return "no config fits one more sequence"
    return None


_HYBRID_CACHE_L5 = """\
Each config in `configs` is a decoder of `layers` layers with `n_kv_heads` key heads and as many
value heads of `head_dim` values, `bytes_per_value` bytes per value. In `global_layers` of its
layers attention looks at every earlier position, so the layer caches the keys and values of all
positions of a sequence; every other layer uses sliding-window attention and caches only the
`window` most recent positions (all of them while the sequence is shorter). Each layer allocates
its cache in pages: a page holds the keys and values of `page_tokens` positions of one sequence in
one layer, and a layer holds as many whole pages for a sequence as the positions it caches need.
The batch holds sequences of the lengths in `seq_lens`. For each config, give the cache memory
allocated for the batch in GiB, and the largest number of further sequences of `new_len` positions
that can be added with the whole cache staying within `cache_budget_bytes` bytes (None if the
batch alone already exceeds it)."""


LEVEL_5 = scaling_level(
    "memory",
    hybrid_paged_cache,
    _HYBRID_CACHE_L5,
    '{"rows": [{"config": <str>, "cache_gib": <number>, "extra_sequences": <int> | None}, ...]}'
    "  # one row per config, in order",
    hybrid_paged_cache_float,
    "window_ignored",
    sample=sample_hybrid_cache,
    reject=_hybrid_cache_rules,
)


KV_CACHE_BRANCHES = (
    Branch("none", some_none, Fraction(1, 8), (4,)),
    Branch("none at L5", some_none, Fraction(1, 10), (5,)),
)


KV_CACHE_SIZE = five_levels(
    "kv_cache_size",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the KV heads derived from the query-head grouping; L3: a paged cache for sequences of "
    "different lengths; L4: the largest batch per variant under a cache budget (None); L5: a "
    "paged cache of global and sliding-window layers, and how many more sequences fit a budget "
    "(None when the batch alone exceeds it)",
    branches=KV_CACHE_BRANCHES,
)
