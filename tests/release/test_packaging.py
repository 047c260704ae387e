"""One distribution per environment, laid out where `prime env push` reads it, and the seven wheels
as their own build backends make them. What `prime env push` reads (PrimeIntellect-ai/prime-cli
`packages/prime/src/prime_cli/commands/env.py`, at bd27b0d): `./environments/<id_underscored>/
pyproject.toml`, the Hub name from `[project].name`, `description`, `tags`, `license`,
`dependencies`, `requires-python`, a content hash over `pyproject.toml`, `*.py` and `README.md`,
and a wheel built with `uv build --wheel` (or `python -m build --wheel`).

Installing the wheels the way a user does (a virtual environment that sees neither the checkout
nor this machine's packages, every dependency from the index) and grading real `vf-eval`
rollouts there is tools/release/check_install.py, which .ci/run runs after the tests: it needs
the package index and a few minutes, which this suite spends on nothing else."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from release_tools import load

from exactgrade import __version__

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENTS = ("scaling-env", "pytorch-env", "deeplearning-env",
                "scaling-env-stream", "pytorch-env-stream", "deeplearning-env-stream")
HUB_SECTIONS = ("## Overview", "**Tags**", "## Datasets", "## Task", "## Quickstart", "## Configuration",
                "## Metrics", "## Results")
BUILD = """
import importlib, os, sys, tomllib
out = sys.argv[1]
for source in sys.argv[2:]:
    os.chdir(source)
    with open("pyproject.toml", "rb") as f:
        backend = tomllib.load(f)["build-system"]["build-backend"]
    print(importlib.import_module(backend).build_wheel(out))
"""


def project(path: Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]


def folder(env: str) -> Path:
    return ROOT / "environments" / env.replace("-", "_")


def test_environments_sit_where_prime_env_push_reads_them():
    assert sorted(p.name for p in (ROOT / "environments").iterdir() if p.is_dir()) == sorted(
        e.replace("-", "_") for e in ENVIRONMENTS)
    for env in ENVIRONMENTS:
        meta = project(folder(env))
        assert meta["name"] == env and meta["version"] == __version__  # rule: test_release.py
        assert meta["description"] and meta["tags"] and meta["license"] == "Apache-2.0"
        assert [d.split("==")[0].split("[")[0] for d in meta["dependencies"]] == ["exactgrade"]
        assert all(d.endswith(f"=={__version__}") for d in meta["dependencies"])
        backend = tomllib.loads((folder(env) / "pyproject.toml").read_text())["build-system"]["build-backend"]
        assert backend == "hatchling.build"  # accepts [project].tags; setuptools refuses the key
        readme = (folder(env) / "README.md").read_text()
        positions = [readme.index(section) for section in HUB_SECTIONS]
        assert positions == sorted(positions), env
        assert (folder(env) / env.replace("-", "_") / "__init__.py").is_file()
    assert not any((ROOT / name).exists() for name in ("scaling_env", "pytorch_env", "deeplearning_env"))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """The seven wheels, each built by its own backend from a copy of its sources."""
    where = tmp_path_factory.mktemp("packaging")
    sources = load("check_install").copy_sources(where / "src")
    built = subprocess.run([sys.executable, "-c", BUILD, str(where), *map(str, sources)], capture_output=True,
                           text=True, timeout=600, cwd=where)
    assert built.returncode == 0, built.stderr[-3000:]
    return where


def test_every_wheel_holds_one_package_and_the_hub_metadata(wheels):
    names = {}
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            tops = {n.split("/")[0] for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")}
            metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith("/METADATA"))
        name = next(line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Name: "))
        names[name] = tops
        assert f"\nVersion: {__version__}\n" in metadata and "License-Expression: Apache-2.0" in metadata
        if name != "exactgrade":
            assert "Requires-Dist: exactgrade" in metadata and f"=={__version__}" in metadata
    assert names == {"exactgrade": {"exactgrade"}, **{e: {e.replace("-", "_")} for e in ENVIRONMENTS}}


def test_the_core_wheel_carries_what_an_index_page_shows(wheels):
    """License file, classifiers, project URLs and the README as a Markdown long description (that it
    renders is `twine check --strict` in tools/release/check_install.py)."""
    wheel = next(wheels.glob("exactgrade-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    headers, _, description = metadata.partition("\n\n")
    assert f"exactgrade-{__version__}.dist-info/licenses/LICENSE" in names
    assert "License-File: LICENSE" in headers and "Description-Content-Type: text/markdown" in headers
    assert "Classifier: Programming Language :: Python :: 3.11" in headers
    assert "Project-URL: Homepage, https://" in headers
    assert description.startswith("# exactgrade\n")
