"""The shipped datasets: reproducible builds, no drift, strict loading, and the dataset cards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from fractions import Fraction
from pathlib import Path

import datasets
import pytest
import yaml

from exactgrade import wire
from exactgrade.dataset import (
    COLUMNS,
    SHIPPED,
    DatasetRowError,
    TaskFields,
    key_drift,
    load_split,
    row_drift,
    row_to_task_fields,
    split_file,
)
from exactgrade.policy import AllClose, Exact, RelTol
from exactgrade.task import DOMAINS, tasks
from exactgrade.values import TensorValue, typed_equal

COUNTS = {"deeplearning": 36, "scaling": 35, "pytorch": 45}
FILES = ("README.md", "train.jsonl")
REPO = Path(__file__).resolve().parents[2]


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _needs_domain(domain: str) -> None:
    if domain == "pytorch" and not _torch_available():
        pytest.skip("torch is not installed: the pytorch domain cannot be built or checked")


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> tuple[Path, Path]:
    """Two builds in two fresh processes with different hash seeds, run concurrently."""
    outs = (tmp_path_factory.mktemp("build-a"), tmp_path_factory.mktemp("build-b"))
    processes = [
        subprocess.Popen([sys.executable, "-m", "exactgrade", "build", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONHASHSEED": seed})
        for out, seed in zip(outs, ("1", "2"), strict=True)
    ]
    for process in processes:
        stdout, stderr = process.communicate(timeout=900)
        expected_status = 0 if _torch_available() else 1
        assert process.returncode == expected_status, stdout + stderr
        for domain in DOMAINS:
            if domain != "pytorch" or _torch_available():
                assert f"{domain}: wrote {COUNTS[domain]} rows to " in stdout
    return outs


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_two_builds_are_byte_identical(builds, domain):
    _needs_domain(domain)
    first, second = (out / domain for out in builds)
    assert sorted(p.name for p in first.iterdir()) == sorted(FILES)
    for name in FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def _rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_shipped_dataset_matches_a_fresh_build(builds, domain):
    """Byte for byte, except the last bits of torch-computed floats in expected_output, which
    may differ on another CPU: those must agree under the task's own policy (row_drift)."""
    _needs_domain(domain)
    fresh, shipped = builds[0] / domain, SHIPPED / domain
    rebuild = "rebuild with: python -m exactgrade build --out exactgrade/data"
    assert (shipped / "README.md").read_bytes() == (fresh / "README.md").read_bytes(), rebuild
    shipped_rows, fresh_rows = _rows(shipped / "train.jsonl"), _rows(fresh / "train.jsonl")
    assert len(shipped_rows) == len(fresh_rows), rebuild
    for old, new in zip(shipped_rows, fresh_rows, strict=True):
        problem = row_drift(old, new)
        assert problem is None, f"{problem}; {rebuild}"


# pt-020's first GELU element on two CPUs: the shipped row and an AMD EPYC (48 float32 ulps apart).
GELU_HERE, GELU_SHIPPED = -0.045500099658966064, -0.04550027847290039
TORCH_POLICY = AllClose(rtol=1e-5, atol=1e-7)


def _key(*leaves: object) -> dict:
    return {"rows": [{f"k{i}": leaf for i, leaf in enumerate(leaves)}]}


def _f32(*data: float, dtype: str = "float32") -> TensorValue:
    return TensorValue(dtype, (len(data),), tuple(data))


KEY_DRIFT = [
    # (shipped, fresh, policy, None when they agree, else a fragment of the reason)
    (_key(_f32(GELU_SHIPPED, 1.0), 3), _key(_f32(GELU_HERE, 1.0), 3), TORCH_POLICY, None),
    (_key(_f32(1.0, 2.0)), _key(_f32(1.0, 2.0)), TORCH_POLICY, None),
    (_key(GELU_SHIPPED), _key(GELU_HERE), TORCH_POLICY, None),
    (_key(1.0), _key(1.0 + 2**-52), RelTol(1e-9), None),
    (_key(Fraction(1, 3)), _key(Fraction(1, 3)), Exact(), None),
    (_key(_f32(1.0, 2.0)), _key(_f32(1.0, 2.001)), TORCH_POLICY, "float values differ beyond AllClose"),
    (_key(1.0), _key(1.0 + 2**-52), Exact(), "float values differ beyond Exact()"),
    (_key(TensorValue("int64", (2,), (1, 2))), _key(TensorValue("int64", (2,), (1, 3))), TORCH_POLICY,
     "more than float values"),
    (_key(_f32(1.0, 2.0)), _key(_f32(1.0, 2.0, dtype="float64")), TORCH_POLICY, "more than float values"),
    (_key(_f32(1.0, 2.0)), _key(TensorValue("float32", (2, 1), (1.0, 2.0))), TORCH_POLICY,
     "more than float values"),
    (_key(Fraction(1, 3)), _key(Fraction(1, 4)), RelTol(1e-9), "more than float values"),
    (_key(2), _key(2.0), TORCH_POLICY, "more than float values"),
    (_key("a"), _key("b"), TORCH_POLICY, "more than float values"),
    (_key(1.0), {"rows": [{"k0": 1.0, "k1": 2.0}]}, TORCH_POLICY, "more than float values"),
]


@pytest.mark.parametrize(("shipped", "fresh", "policy", "reason"), KEY_DRIFT)
def test_key_drift_allows_only_float_last_bits_within_the_policy(shipped, fresh, policy, reason):
    problem = key_drift(shipped, fresh, policy)
    if reason is None:
        assert problem is None
    else:
        assert type(problem) is str and reason in problem


def _torch_row(key: dict, **change: str) -> dict[str, str]:
    return {"task_id": "pt-020", "category": "nn_modules", "prompt": "p", "api_description": "a",
            "inputs": wire.encode({"x": _f32(-0.1)}), "expected_output": wire.encode(key),
            "policy": wire.encode({"kind": "AllClose", "rtol": 1e-5, "atol": 1e-7}), **change}


@pytest.mark.parametrize(("shipped", "fresh", "reason"), [
    (_torch_row(_key(_f32(GELU_SHIPPED))), _torch_row(_key(_f32(GELU_HERE))), None),
    (_torch_row(_key(_f32(GELU_SHIPPED))), _torch_row(_key(_f32(0.5))),
     "pt-020: expected_output: float values"),
    (_torch_row(_key(_f32(GELU_SHIPPED))), _torch_row(_key(_f32(GELU_SHIPPED)), prompt="q"),
     "pt-020: column 'prompt' differs"),
    (_torch_row(_key(_f32(GELU_SHIPPED))), _torch_row(_key(_f32(GELU_HERE)), inputs=wire.encode({"x": 1})),
     "pt-020: column 'inputs' differs"),
    (_torch_row(_key(_f32(GELU_SHIPPED))),
     _torch_row(_key(_f32(GELU_HERE)), policy=wire.encode({"kind": "AllClose", "rtol": 1e-4, "atol": 1e-7})),
     "pt-020: column 'policy' differs"),
])  # fmt: skip
def test_row_drift_keeps_every_column_but_the_float_keys_byte_exact(shipped, fresh, reason):
    problem = row_drift(shipped, fresh)
    if reason is None:
        assert problem is None
    else:
        assert type(problem) is str and problem.startswith(reason)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_rows_decode_to_the_registered_tasks(domain):
    _needs_domain(domain)
    loaded = load_split(domain)
    assert isinstance(loaded, datasets.Dataset)
    assert tuple(loaded.column_names) == COLUMNS
    assert all(feature.dtype == "string" for feature in loaded.features.values())
    registered = tasks(domain)
    assert loaded.num_rows == len(registered) == COUNTS[domain]
    assert Counter(loaded["category"]) == Counter(t.category for t in registered)
    for row, task in zip(loaded, registered, strict=True):
        fields = row_to_task_fields(row)
        assert type(fields) is TaskFields
        assert (fields.task_id, fields.category, fields.prompt, fields.api_description) == \
               (task.id, task.category, task.prompt, task.api_description)
        assert key_drift(fields.expected, task.expected, task.policy) is None, task.id
        assert typed_equal(fields.inputs, wire.decode(wire.encode(dict(task.inputs))))
        assert fields.policy == task.policy


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_load_split_accepts_a_build_directory_a_domain_directory_and_a_file(builds, domain):
    _needs_domain(domain)
    root = builds[0]
    expected = load_split(domain, dataset_name=str(root)).to_list()
    assert load_split(domain, dataset_name=str(root / domain)).to_list() == expected
    assert load_split(domain, dataset_name=str(root / domain / "train.jsonl")).to_list() == expected
    shipped = load_split(domain).to_list()
    assert len(shipped) == len(expected)
    assert [row_drift(old, new) for old, new in zip(shipped, expected, strict=True)] == [None] * len(shipped)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_the_card_lets_datasets_load_the_directory_as_the_hub_would(builds, domain, tmp_path):
    _needs_domain(domain)
    directory = builds[0] / domain
    # a fresh cache: datasets keys a local directory's cache by its name and card, not its contents
    loaded = datasets.load_dataset(str(directory), split="train", cache_dir=str(tmp_path))
    assert loaded.to_list() == load_split(domain, dataset_name=str(directory)).to_list()


@pytest.mark.parametrize(("domain", "dataset_name", "error", "message"), [
    ("chemistry", None, ValueError, "unknown domain 'chemistry'"),
    ("scaling", "/nonexistent/exactgrade-build", FileNotFoundError, None),
])
def test_split_file_errors(domain, dataset_name, error, message):
    with pytest.raises(error, match=message):
        split_file(domain, dataset_name=dataset_name)


def test_missing_split_is_reported_with_the_paths_tried(tmp_path):
    with pytest.raises(FileNotFoundError, match="no 'test' split of the scaling dataset: looked for"):
        load_split("scaling", split="test", dataset_name=str(tmp_path))


def test_build_without_torch_says_how_to_install(tmp_path):
    code = ("import sys\nsys.modules['torch'] = None\nfrom exactgrade.cli import main\n"
            f"sys.exit(main(['build', '--out', {str(tmp_path)!r}, '--domain', 'pytorch']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stdout.startswith("pytorch: NOT BUILT: ")
    assert "pip install torch==2.13.0" in done.stdout
    assert list(tmp_path.iterdir()) == []


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    header, _ = card[4:].split("\n---\n", 1)
    return yaml.safe_load(header)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_dataset_card(domain):
    _needs_domain(domain)
    card = (SHIPPED / domain / "README.md").read_text(encoding="utf-8")
    meta = _front_matter(card)
    registered = tasks(domain)
    assert meta["exactgrade"]["domain"] == domain
    assert meta["exactgrade"]["tasks"] == COUNTS[domain]
    assert meta["exactgrade"]["categories"] == dict(Counter(t.category for t in registered))
    assert meta["exactgrade"]["policies"] == list(dict.fromkeys(t.policy.describe() for t in registered))
    assert meta["configs"] == [{"config_name": "default",
                                "data_files": [{"split": "train", "path": "train.jsonl"}]}]
    assert meta["dataset_info"]["splits"] == [{"name": "train", "num_examples": COUNTS[domain]}]
    assert [f["name"] for f in meta["dataset_info"]["features"]] == list(COLUMNS)
    for heading in ("## Grading", "## How it was built", "## How it is verified", "## Rebuild"):
        assert heading in card
    assert f"python -m exactgrade verify --domain {domain}" in card
    if domain == "pytorch":
        import torch

        assert meta["exactgrade"]["software"] == {"torch": torch.__version__}
        assert f"torch {torch.__version__}" in card
        assert "## On another CPU" in card and "at most half the tolerance" in card
    else:
        assert "software" not in meta["exactgrade"]
        assert "## On another CPU" not in card  # exact keys: byte-identical on every machine


def _good_row() -> dict[str, str]:
    return {"task_id": "sc-000", "category": "roofline", "prompt": "p", "api_description": "a",
            "inputs": wire.encode({"n": 1}), "expected_output": wire.encode({"rows": [1]}),
            "policy": wire.encode({"kind": "Exact"})}


BAD_ROWS = [
    ({"task_id": None}, "must be a string, got NoneType"),
    ({"inputs": "{"}, "column 'inputs' is not valid wire data"),
    ({"expected_output": '{"$frac": "2/4"}'}, "column 'expected_output' is not valid wire data"),
    ({"policy": "[" * 100_000}, "column 'policy' is not valid wire data"),
    ({"inputs": wire.encode([1])}, "inputs must decode to a dict, got list"),
    ({"expected_output": wire.encode({"answer": 1})}, 'expected_output must decode to {"rows": [...]}'),
    ({"expected_output": wire.encode({"rows": 1})}, 'expected_output must decode to {"rows": [...]}'),
    ({"policy": wire.encode({"kind": "Exact", "rtol": 1e-9})}, "malformed policy"),
    ({"policy": wire.encode({"kind": "RelTol", "rtol": 1})}, "policy tolerances must be floats"),
    ({"extra": "x"}, "a row needs exactly the columns"),
]


def test_a_good_row_decodes():
    fields = row_to_task_fields(_good_row())
    assert fields == TaskFields("sc-000", "roofline", "p", "a", {"n": 1}, {"rows": [1]}, Exact())


@pytest.mark.parametrize(("change", "message"), BAD_ROWS)
def test_row_to_task_fields_rejects_malformed_rows(change, message):
    row = {**_good_row(), **change}
    with pytest.raises(DatasetRowError, match=message.replace("[", r"\[").replace("{", r"\{")):
        row_to_task_fields(row)


def test_row_missing_a_column_is_rejected():
    row = _good_row()
    del row["policy"]
    with pytest.raises(DatasetRowError, match="a row needs exactly the columns"):
        row_to_task_fields(row)


def test_the_wheel_ships_the_datasets(tmp_path):
    """package-data in pyproject.toml must carry every shipped file into the wheel. Built from a
    copy, because setuptools writes build/ and *.egg-info/ into the tree it builds."""
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".*cache*",
                                    "outputs")
    shutil.copytree(REPO, source, ignore=ignore)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("exactgrade-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for domain in DOMAINS:
        for name in FILES:
            assert f"exactgrade/data/{domain}/{name}" in names
