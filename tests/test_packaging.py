"""One distribution per environment, installed from wheels into a fresh virtual environment and run
by real `vf-eval` there. What `prime env push` reads (PrimeIntellect-ai/prime-cli
`packages/prime/src/prime_cli/commands/env.py`, at bd27b0d): `./environments/<id_underscored>/
pyproject.toml`, the Hub name from `[project].name`, `description`, `tags`, `license`,
`dependencies`, `requires-python`, a content hash over `pyproject.toml`, `*.py` and `README.md`,
and a wheel built with `uv build --wheel` (or `python -m build --wheel`).

The virtual environment has none of the checkout: the seven wheels are installed into it with no
index and no dependencies, and verifiers, torch and the other dependencies come from this machine's
site-packages through a path entry (a `.pth` line naming the directory). A path entry only adds the
directory: the `.pth` files inside it are not run, so the machine's editable install of exactgrade
(an import hook installed by such a `.pth` file) is not active there, and every exactgrade module
comes from the wheels (checked: no module of the venv's processes is imported from the checkout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import threading
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from exactgrade import __version__
from exactgrade.demo import read_traces
from exactgrade.scripted.server import serve

ROOT = Path(__file__).resolve().parents[1]
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
        assert meta["name"] == env and meta["version"] == __version__  # the rule: tests/test_release.py
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
def venv(tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("packaging")
    wheels = where / "wheels"
    wheels.mkdir()
    sources = [str(ROOT), *(str(folder(env)) for env in ENVIRONMENTS)]
    built = subprocess.run([sys.executable, "-c", BUILD, str(wheels), *sources], capture_output=True,
                           text=True, timeout=600, cwd=where)
    assert built.returncode == 0, built.stderr[-3000:]
    env_dir = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    clean["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{clean['PATH']}"
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                *map(str, sorted(wheels.glob("*.whl")))], capture_output=True, text=True,
                               timeout=600, env=clean, cwd=where)
    assert installed.returncode == 0, installed.stderr[-3000:]
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(python), "-c", purelib], capture_output=True, text=True, check=True,
                               env=clean).stdout.strip())
    (site / "machine-site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (env_dir / "bin" / "vf-eval").write_text(  # the console script verifiers would have installed
        f"#!{python}\nimport sys\nfrom verifiers.v1.cli.eval.main import main\nsys.exit(main())\n")
    (env_dir / "bin" / "vf-eval").chmod(0o755)
    return {"dir": where, "wheels": wheels, "python": python, "environ": clean}


def test_every_wheel_holds_one_package_and_the_hub_metadata(venv):
    names = {}
    for wheel in venv["wheels"].glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            tops = {n.split("/")[0] for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")}
            metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith("/METADATA"))
        name = next(line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Name: "))
        names[name] = tops
        if name != "exactgrade":
            assert "Requires-Dist: exactgrade" in metadata and "License-Expression: Apache-2.0" in metadata
    assert names == {"exactgrade": {"exactgrade"}, **{e: {e.replace("-", "_")} for e in ENVIRONMENTS}}


def test_the_venv_imports_everything_from_the_wheels_not_the_checkout(venv):
    modules = ["exactgrade", "exactgrade.env.toolset", *(e.replace("-", "_") for e in ENVIRONMENTS)]
    probe = ("import importlib, json, sys; "
             "files = [importlib.import_module(m).__file__ for m in sys.argv[1:]]; "
             "print(json.dumps({'path': sys.path, 'files': files}))")
    done = subprocess.run([str(venv["python"]), "-c", probe, *modules], capture_output=True, text=True,
                          timeout=300, env=venv["environ"], cwd=venv["dir"], check=True)
    seen = json.loads(done.stdout)
    assert all(f.startswith(str(venv["dir"] / "venv")) for f in seen["files"]), seen["files"]
    assert not [p for p in seen["path"] if p and Path(p).resolve().is_relative_to(ROOT)]


@pytest.fixture(scope="module")
def reference_url():
    httpd = serve("reference")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_vf_eval_runs_every_environment_from_the_fresh_venv(venv, reference_url):
    def run(env: str) -> subprocess.CompletedProcess:
        extra = ["--env.taskset.show-task-id", "True"] if env.endswith("-stream") else []
        return subprocess.run(["vf-eval", env, "-m", "reference", "-n", "1", "-r", "1", "-c", "1",
                               "--client.base-url", reference_url, "--env.agent.runtime.type", "subprocess",
                               "--no-push", "--no-rich", "-o", str(venv["dir"] / "runs"), "--run.dir", env,
                               *extra], capture_output=True, text=True, timeout=900, env=venv["environ"],
                              cwd=venv["dir"])

    with ThreadPoolExecutor(max_workers=3) as pool:
        done = dict(zip(ENVIRONMENTS, pool.map(run, ENVIRONMENTS), strict=True))
    for env, process in done.items():
        assert process.returncode == 0, (env, process.stdout[-2000:], process.stderr[-2000:])
        traces = read_traces(venv["dir"] / "runs" / env / "traces.jsonl")
        assert len(traces) == 1, env
        trace = traces[0]
        assert trace["ok"] and trace["rewards"]["correctness"]["score"] == 1.0, (env, trace["info"])
        assert trace["metrics"]["level"] >= 1 and trace["task"]["data"]["family"]
