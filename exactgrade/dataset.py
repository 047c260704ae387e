"""The shipped Hugging Face datasets: their rows, cards and canonical build (the `build` command,
exactgrade.build, writes them), and their loader.

One dataset per domain, at ``DIR/<domain>/``: ``train.jsonl`` (one task per line, columns
COLUMNS, the last three wire-encoded because Arrow has no exact types) and ``README.md`` (the
dataset card). JSON Lines written here with fixed settings (key order, separators, UTF-8, LF)
make the build byte-for-byte reproducible; ``datasets`` reads it back with string features.
The built datasets ship inside the package at ``exactgrade/data/<domain>/``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactgrade.policy import Policy, policy_from_value, policy_to_value
from exactgrade.task import DOMAINS, Task

if TYPE_CHECKING:
    import datasets

COLUMNS = ("task_id", "category", "prompt", "api_description", "inputs", "expected_output", "policy")
GENERATED_COLUMNS = (*COLUMNS, "family", "level", "seed", "index")
"""A generated build's columns: where each task comes from (exactgrade.dataset_generated)."""
RATE_COLUMN = re.compile(r"avg@[1-9][0-9]*_[a-z0-9][a-z0-9_]*")
"""A measured pass-rate column after the Hub's convention, ``avg@<k>_<model>`` (the mean reward of k
rollouts of that model per task, a float in [0, 1] or null): any number of them may follow the
canonical or generated columns (exactgrade.pass_rates writes them; a trainer filters by them)."""
SHIPPED = Path(__file__).parent / "data"
ENVIRONMENT_NAMES = {"deeplearning": "deeplearning-env", "scaling": "scaling-env", "pytorch": "pytorch-env"}
GRADING_RULES = {
    "Exact": ("`Exact()`: every value must equal the key exactly (int, Fraction, exact sympy values, "
              "strings, booleans, None). A float never matches an exact key, and an int key requires an "
              "int. Symbolic values (e.g. nats as multiples of `log(2)`) are compared exactly, not "
              "numerically."),
    "RelTol": ("`RelTol(rtol)`: a float answer passes when |answer - key| <= rtol * |key|, decided "
               "exactly against the exact key. Integer keys (counts of chips, devices, steps) require an "
               "int; strings, booleans and None compare exactly, so a wrong classification is never "
               "laundered by the tolerance."),
    "AllClose": ("`AllClose(rtol, atol)`: float tensors are compared elementwise, |a - e| <= atol + "
                 "rtol * |e|, after the dtype family and the exact shape (no broadcasting). Integer-valued "
                 "keys (argsort, counts, indices) require an integer dtype and compare exactly; a scalar "
                 "key is not matched by a one-element tensor."),
}


ACROSS_CPUS = [
    "",
    "## On another CPU",
    "",
    "The float values in `expected_output` (float tensor elements and Python floats) come from torch's "
    "CPU kernels (BLAS, oneDNN, vectorised math functions), whose last bits depend on the CPU they run "
    "on: a rebuild on another CPU may differ there in the last bits (the largest difference seen so far "
    "is 48 float32 ulps, a third of the tolerance, in one GELU element). Nothing else can differ: the "
    "other six columns, and every integer, integer tensor, dtype and shape in `expected_output`, are "
    "the same on every machine. This cannot change the verdict of a correct answer: `verify` confirms "
    "every key against an independent recomputation without torch (exact fractions or 50-digit "
    "mpmath) and requires the key to use at most half the tolerance, so an answer within the other "
    "half of the tolerance of the exact value passes against the key built on any CPU where `verify` "
    "passes (up to a margin of rtol/2 of the tolerance); only an answer already at the edge of the "
    "tolerance could pass against one CPU's key and fail against another's. The tests compare these "
    "float values with a fresh build under the row's own policy, and everything else byte for byte "
    "(`exactgrade.dataset.row_drift`).",
]
"""The dataset card's section for keys computed by torch kernels."""


class DatasetRowError(ValueError):
    """A dataset row that does not decode to a well-formed task."""


# ---------------------------------------------------------------------------- build


def task_row(task: Task) -> dict[str, str]:
    """A task as a dataset row: plain strings, the last three wire-encoded."""
    from exactgrade import wire

    return {
        "task_id": task.id,
        "category": task.category,
        "prompt": task.prompt,
        "api_description": task.api_description,
        "inputs": wire.encode(dict(task.inputs)),
        "expected_output": wire.encode(task.expected),
        "policy": wire.encode(policy_to_value(task.policy)),
    }


def jsonl_text(rows: Iterable[Mapping[str, Any]], columns: tuple[str, ...] = COLUMNS) -> str:
    """JSON Lines with fixed settings: column order, compact separators, UTF-8 kept as is."""
    return "".join(json.dumps({c: row[c] for c in columns}, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for row in rows)


def hub_header(pretty_name: str, features: Mapping[str, str], rows: int,
               extra: Iterable[str] = ()) -> list[str]:
    """The opening of a card's YAML header that the Hub reads: name, licence, the one train split
    in train.jsonl and its features (column -> dtype)."""
    return [
        "---",
        f"pretty_name: {json.dumps(pretty_name)}",
        "license: apache-2.0",
        "language:",
        "- en",
        *extra,
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        "    path: train.jsonl",
        "dataset_info:",
        "  features:",
        *[line for c, dtype in features.items() for line in (f"  - name: {c}", f"    dtype: {dtype}")],
        "  splits:",
        "  - name: train",
        f"    num_examples: {rows}",
    ]


def dataset_card(domain: str, tasks: list[Task], environment: Mapping[str, str]) -> str:
    """README.md for one domain's dataset: a YAML header the Hub reads, then the card text."""
    counts = Counter(t.category for t in tasks)
    categories = list(dict.fromkeys(t.category for t in tasks))
    policies = list(dict.fromkeys(t.policy.describe() for t in tasks))
    kinds = list(dict.fromkeys(type(t.policy).__name__ for t in tasks))
    q = json.dumps  # a JSON string (ASCII) is a valid YAML double-quoted scalar
    header = [
        *hub_header(f"exactgrade {domain} tasks", {c: "string" for c in COLUMNS}, len(tasks),
                    ["size_categories:", "- n<1K"]),
        "exactgrade:",
        f"  domain: {domain}",
        f"  environment: {ENVIRONMENT_NAMES[domain]}",
        f"  tasks: {len(tasks)}",
        "  categories:",
        *[f"    {c}: {counts[c]}" for c in categories],
        "  policies:",
        *[f"  - {q(p)}" for p in policies],
        *(["  software:"] if environment else []),
        *[f"    {k}: {q(v)}" for k, v in sorted(environment.items())],
        "---",
    ]
    table = ["| category | tasks |", "|---|---|", *[f"| {c} | {counts[c]} |" for c in categories],
             f"| **total** | **{len(tasks)}** |"]
    body = [
        f"# exactgrade {domain} tasks",
        "",
        f"The task set of the `{ENVIRONMENT_NAMES[domain]}` environment of exactgrade: {len(tasks)} tasks, "
        f"ids `{tasks[0].id}` to `{tasks[-1].id}`." if tasks else f"No {domain} tasks.",
        "",
        *table,
        "",
        "## Columns",
        "",
        "- `task_id`, `category`: the task's id and category.",
        "- `prompt`: the question, its units, the exact shape of the answer, and that the answer is left "
        "in the variable `result`.",
        "- `api_description`: the conventions, constants and exactness rules the task states.",
        "- `inputs`: the values preloaded by name into the sandbox (wire-encoded dict).",
        "- `expected_output`: the answer key, `{\"rows\": [...]}` (wire-encoded).",
        "- `policy`: the grading policy (wire-encoded).",
        "",
        "The last three columns are `exactgrade.wire` strings because Arrow has no exact types "
        "(fractions, exact symbolic values, typed tensors). Decode them with "
        "`exactgrade.dataset.row_to_task_fields(row)`, never with `eval`.",
        "",
        "## Grading",
        "",
        "Answers are graded by `exactgrade.compare(expected, answer, policy)` with the row's policy "
        f"({', '.join(f'`{p}`' for p in policies)}):",
        "",
        *[f"- {GRADING_RULES[k]}" for k in kinds],
        "",
        "## How it was built",
        "",
        "Each task is written as parameters (`inputs`) + a reference solution + a prompt renderer. The "
        "answer key is the executed output of the reference program (the exact code a perfect model "
        "would send to `execute_code`), pushed through the wire format: no key is hand-written. The "
        "file was written by `python -m exactgrade build --out DIR` and is byte-for-byte reproducible "
        "(a test rebuilds it and compares it with the shipped copy).",
        *(["", "Built with " + ", ".join(f"{k} {v}" for k, v in sorted(environment.items())) + "."]
          if environment else []),
        *(ACROSS_CPUS if "torch" in environment and any(_has_floats(t.expected) for t in tasks) else []),
        "",
        "## How it is verified",
        "",
        f"`python -m exactgrade verify --domain {domain}` re-checks every task: the reference runs cleanly "
        "in two fresh processes with byte-identical encoded output equal to the key (determinism); the "
        "key survives the wire round trip type- and value-identically; no NaN or infinity; no exactly-zero "
        "number unless the task declares why; the key matches itself under its policy; the prompt names "
        "`result`; plus this domain's own checks.",
        "",
        "## Rebuild",
        "",
        "```",
        f"python -m exactgrade build --out exactgrade/data --domain {domain}",
        f"python -m exactgrade verify --domain {domain}",
        "```",
        "",
        "Load it with `exactgrade.dataset.load_split(\"" + domain + "\")` (the shipped copy), "
        "`load_split(\"" + domain + "\", dataset_name=PATH)` (a local build) or a Hub id.",
    ]
    return "\n".join(header + [""] + body) + "\n"


def build_domain(domain: str, out: Path, progress: Callable[[], None] = lambda: None) -> list[Task]:
    """Write ``out/<domain>/train.jsonl`` and ``README.md``; return the tasks written
    (``progress`` is called once per task materialised)."""
    from exactgrade.task import domain_module, materialise, task_defs

    module = domain_module(domain)
    built = []
    for definition in task_defs(domain):
        built.append(materialise(definition, domain, module.PROFILE))
        progress()
    environment = dict(module.environment()) if hasattr(module, "environment") else {}
    target = out / domain
    target.mkdir(parents=True, exist_ok=True)
    rows = jsonl_text(task_row(t) for t in built)
    (target / "train.jsonl").write_text(rows, encoding="utf-8", newline="\n")
    card = dataset_card(domain, built, environment)
    (target / "README.md").write_text(card, encoding="utf-8", newline="\n")
    return built


# ---------------------------------------------------------------------------- drift across CPUs


def _without_floats(value: Any) -> Any:
    """``value`` with every float value blanked out: the part of a key that is the same on every
    machine (exact numbers, integer and bool tensors, strings, dtypes, shapes, structure)."""
    from exactgrade.values import TensorValue, dtype_family

    if type(value) is float:
        return float
    if type(value) is TensorValue and dtype_family(value.dtype) == "float":
        return (TensorValue, value.dtype, value.shape)
    if type(value) is list:
        return [_without_floats(item) for item in value]
    if type(value) is dict:
        return {key: _without_floats(item) for key, item in value.items()}
    return value


def _has_floats(value: Any) -> bool:
    from exactgrade.values import typed_equal

    return not typed_equal(_without_floats(value), value)


def key_drift(shipped: Any, fresh: Any, policy: Policy) -> str | None:
    """Why a shipped key and a fresh computation of the same key disagree, or None.

    Float values computed by torch kernels (BLAS, oneDNN, vectorised math) may differ in their
    last bits on another CPU, so they must agree under the task's own policy, both ways round.
    Everything else must be identical: exact numbers, integer tensors, strings, dtypes, shapes.
    """
    from exactgrade.compare import compare
    from exactgrade.values import typed_equal

    if typed_equal(shipped, fresh):
        return None
    if not typed_equal(_without_floats(shipped), _without_floats(fresh)):
        return "the keys differ in more than float values (structure, types, dtypes, shapes or exact values)"
    for expected, answer in ((fresh, shipped), (shipped, fresh)):
        verdict = compare(expected, answer, policy)
        if not verdict.ok:
            return f"float values differ beyond {policy.describe()}: {verdict.reason}"
    return None


def row_drift(shipped: Mapping[str, Any], fresh: Mapping[str, Any]) -> str | None:
    """Why a shipped dataset row and a fresh build's row disagree, or None: every column
    byte-identical except ``expected_output``, whose keys must pass ``key_drift``."""
    task_id = fresh.get("task_id")
    for column in COLUMNS:
        if column != "expected_output" and shipped.get(column) != fresh.get(column):
            return f"{task_id}: column {column!r} differs"
    if shipped["expected_output"] == fresh["expected_output"]:
        return None
    fields = row_to_task_fields(fresh)
    problem = key_drift(row_to_task_fields(shipped).expected, fields.expected, fields.policy)
    return None if problem is None else f"{task_id}: expected_output: {problem}"


# ---------------------------------------------------------------------------- load


def features(generated: bool = False, rates: tuple[str, ...] = ()) -> datasets.Features:
    """Every canonical column is a string; a generated build adds family (string) and level,
    seed, index (int64); pass-rate columns (RATE_COLUMN) are float64."""
    import datasets

    columns = GENERATED_COLUMNS if generated else COLUMNS
    kinds = {c: "int64" if c in ("level", "seed", "index") else "string" for c in columns}
    kinds |= dict.fromkeys(rates, "float64")
    return datasets.Features({c: datasets.Value(kind) for c, kind in kinds.items()})


def split_columns(names: Iterable[str]) -> tuple[bool, tuple[str, ...]] | None:
    """(whether the columns are a generated build's, the pass-rate columns after them), or None when
    they are neither the canonical nor the generated columns followed by pass-rate columns only."""
    names = tuple(names)
    for generated, base in ((True, GENERATED_COLUMNS), (False, COLUMNS)):
        rates = names[len(base):]
        if names[: len(base)] == base and all(RATE_COLUMN.fullmatch(c) for c in rates):
            if len(set(rates)) == len(rates):
                return generated, rates
    return None


def split_file(domain: str, split: str = "train", dataset_name: str | None = None) -> Path:
    """The JSON Lines file of a shipped or local dataset (``dataset_name`` None or a path)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {sorted(DOMAINS)}")
    if dataset_name is None:
        candidates = [SHIPPED / domain / f"{split}.jsonl"]
    else:
        root = Path(dataset_name)
        candidates = [root] if root.is_file() else [root / domain / f"{split}.jsonl", root / f"{split}.jsonl"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no {split!r} split of the {domain} dataset: looked for "
                            + ", ".join(str(c) for c in candidates))


def load_split(domain: str, split: str = "train", dataset_name: str | None = None) -> datasets.Dataset:
    """One domain's split as a ``datasets.Dataset``.

    ``dataset_name``: None for the copy shipped in the package; a local path (a build's OUT
    directory, one domain's directory, or the .jsonl file); otherwise a Hugging Face Hub id of
    one domain's dataset.
    """
    import datasets

    if dataset_name is not None and not Path(dataset_name).exists():
        loaded = datasets.load_dataset(dataset_name, split=split)
        layout = split_columns(loaded.column_names)
        if layout is not None:
            loaded = loaded.cast(features(*layout))
    else:
        path = split_file(domain, split, dataset_name)
        layout = split_columns(_first_row_columns(path)) or (False, ())
        loaded = datasets.Dataset.from_json(str(path), features=features(*layout), keep_in_memory=True)
    if split_columns(loaded.column_names) is None:
        raise DatasetRowError(f"the {domain} dataset has columns {loaded.column_names}, "
                              f"expected {list(COLUMNS)} (canonical) or {list(GENERATED_COLUMNS)} "
                              "(generated), each optionally followed by pass-rate columns avg@<k>_<model>")
    return loaded


def _first_row_columns(path: Path) -> tuple[str, ...]:
    """The keys of a JSON Lines file's first row, in order (() if it is not a JSON object)."""
    with path.open(encoding="utf-8") as lines:
        first = lines.readline()
    try:
        row = json.loads(first)
    except ValueError:
        return ()
    return tuple(row) if isinstance(row, dict) else ()


@dataclass(frozen=True)
class TaskFields:
    """A dataset row decoded: what an environment needs to pose and grade one task."""

    task_id: str
    category: str
    prompt: str
    api_description: str
    inputs: dict[str, Any]
    expected: Any
    policy: Policy


def row_to_task_fields(row: Mapping[str, Any]) -> TaskFields:
    """Decode a dataset row strictly: exact columns, strings only, wire columns through
    ``wire.decode`` (never eval), inputs a str-keyed dict, the key ``{"rows": [...]}``."""
    from exactgrade import wire

    base = {c for c in row if not RATE_COLUMN.fullmatch(c)} if isinstance(row, Mapping) else None
    if base not in (set(COLUMNS), set(GENERATED_COLUMNS)):
        got = sorted(row) if isinstance(row, Mapping) else type(row).__name__
        raise DatasetRowError(f"a row needs exactly the columns {list(COLUMNS)} (or those of a generated "
                              f"build), and pass-rate columns avg@<k>_<model>, got {got}")
    task_id = row["task_id"]
    for column in set(row) - base:
        rate = row[column]
        if rate is not None and (type(rate) is not float or not 0.0 <= rate <= 1.0):
            raise DatasetRowError(f"row {task_id!r}: pass-rate column {column!r} must be a float in [0, 1] "
                                  f"or null, got {rate!r}")
    for column in COLUMNS:
        if type(row[column]) is not str:
            raise DatasetRowError(f"row {task_id!r}: column {column!r} must be a string, "
                                  f"got {type(row[column]).__name__}")
    decoded = {}
    for column in ("inputs", "expected_output", "policy"):
        try:
            decoded[column] = wire.decode(row[column])
        except wire.WireError as error:
            raise DatasetRowError(f"row {task_id}: column {column!r} is not valid wire data: "
                                  f"{error}") from None
    inputs, expected = decoded["inputs"], decoded["expected_output"]
    if type(inputs) is not dict:
        raise DatasetRowError(f"row {task_id}: inputs must decode to a dict, got {type(inputs).__name__}")
    if type(expected) is not dict or list(expected) != ["rows"] or type(expected["rows"]) is not list:
        raise DatasetRowError(f"row {task_id}: expected_output must decode to {{\"rows\": [...]}}")
    try:
        policy = policy_from_value(decoded["policy"])
    except ValueError as error:
        raise DatasetRowError(f"row {task_id}: {error}") from None
    return TaskFields(task_id, row["category"], row["prompt"], row["api_description"], inputs, expected,
                      policy)
