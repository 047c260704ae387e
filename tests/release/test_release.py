"""The release rules (docs/release.md): one version for the core and the six environment packages,
a tool that sets all seven, a release note and a license for the index, and the install check's
answers to bad arguments. The install check itself runs in .ci/run after the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from release_tools import TOOLS, load

import exactgrade

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENTS = sorted(e.replace("-", "_") for e in load("check_install").ENVIRONMENTS)


set_version = load("set_version")


def copy_version_sites(root: Path) -> Path:
    """The files that state the version, copied under `root` in their checkout layout."""
    for relative in [
        set_version.VERSION_FILE,
        *(Path("environments", e, "pyproject.toml") for e in ENVIRONMENTS),
    ]:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, root / relative)
    return root


def test_the_seven_packages_state_one_version():
    sites = set_version.read_versions(ROOT)
    assert [(str(s.path), s.what) for s in sites] == [("exactgrade/_version.py", "__version__")] + [
        (f"environments/{e}/pyproject.toml", what)
        for e in ENVIRONMENTS
        for what in ("[project].version", "exactgrade pin")
    ]
    assert {s.version for s in sites} == {exactgrade.__version__}


def test_the_core_reads_its_version_from_the_one_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "exactgrade._version.__version__"}


def test_set_version_rewrites_every_site_and_nothing_else(tmp_path):
    root = copy_version_sites(tmp_path)
    before = {p: p.read_text().splitlines() for p in root.rglob("*.*")}
    sites = set_version.set_version("0.4.0rc1", root)
    assert len(sites) == 13 and {s.version for s in sites} == {"0.4.0rc1"}
    changed = [
        (old, new)
        for p, lines in before.items()
        for old, new in zip(lines, p.read_text().splitlines(), strict=True)
        if old != new
    ]
    assert len(changed) == 13
    assert all(exactgrade.__version__ in old and "0.4.0rc1" in new for old, new in changed)
    pins = [
        tomllib.loads((root / "environments" / e / "pyproject.toml").read_text())["project"]["dependencies"]
        for e in ENVIRONMENTS
    ]
    assert sorted(p for deps in pins for p in deps) == sorted(
        ["exactgrade==0.4.0rc1"] * 4 + ["exactgrade[torch]==0.4.0rc1"] * 2
    )


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("0.4", "is not a release version"),
        ("v0.4.0", "is not a release version"),
        ("0.4.0.dev1", "is not a release version"),
        ("0.4.0+cpu", "is not a release version"),
        ("01.4.0", "is not a release version"),
        ("0.4.0 ", "is not a release version"),
    ],
)
def test_set_version_refuses_what_is_not_a_release(tmp_path, version, reason):
    root = copy_version_sites(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*.*")}
    with pytest.raises(set_version.VersionError, match=reason):
        set_version.set_version(version, root)
    assert {p: p.read_bytes() for p in root.rglob("*.*")} == before


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda t: t.replace('dependencies = ["exactgrade', 'dependencies = ["numpy", "exactgrade'), None),
        (
            lambda t: t.replace('dependencies = ["', 'dependencies = ["exactgrade>=0.1", "'),
            "wants one `exactgrade==VERSION` dependency",
        ),
        (lambda t: t.replace("==", ">="), "wants one `exactgrade==VERSION` dependency"),
        (lambda t: t.replace('version = "', 'oldversion = "'), r"no \[project\].version"),
        (lambda t: t + '\n[tool.x]\nversion = "9"\n', "expected one line matching"),
    ],
)
def test_set_version_refuses_a_pyproject_it_cannot_rewrite_safely(tmp_path, edit, reason):
    """A pyproject whose version or pin is not where the rule says is refused before any file is
    written (a second `version = ` line would otherwise be rewritten blindly); another dependency
    beside the pin is fine."""
    root = copy_version_sites(tmp_path)
    pyproject = root / "environments" / "scaling_env" / "pyproject.toml"
    pyproject.write_text(edit(pyproject.read_text()))
    before = {p: p.read_bytes() for p in root.rglob("*.*")}
    if reason is None:
        assert {s.version for s in set_version.set_version("0.4.0", root)} == {"0.4.0"}
        return
    with pytest.raises(set_version.VersionError, match=reason):
        set_version.set_version("0.4.0", root)
    assert {p: p.read_bytes() for p in root.rglob("*.*")} == before


def test_set_version_command_reports_disagreement_in_one_line(tmp_path):
    root = copy_version_sites(tmp_path)
    pyproject = root / "environments" / "pytorch_env" / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(f'version = "{exactgrade.__version__}"', 'version = "9.9.9"')
    )
    command = [sys.executable, str(TOOLS / "set_version.py"), "--root", str(root)]
    agreed = subprocess.run([*command[:2], "--root", str(ROOT)], capture_output=True, text=True, timeout=120)
    disagree = subprocess.run(command, capture_output=True, text=True, timeout=120)
    refused = subprocess.run([*command, "1.0"], capture_output=True, text=True, timeout=120)
    assert agreed.returncode == 0 and len(agreed.stdout.splitlines()) == 13, agreed.stderr
    assert disagree.returncode == 1
    assert disagree.stderr == f"set_version: the packages disagree: ['{exactgrade.__version__}', '9.9.9']\n"
    assert refused.returncode == 2
    assert (
        refused.stderr == "set_version: error: '1.0' is not a release version (X.Y.Z, optionally aN/bN/rcN)\n"
    )


def test_the_release_note_starts_with_this_version():
    """Changes not yet released sit under "## Unreleased" above it (set_version's caller renames it)."""
    headings = [line for line in (ROOT / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    released = headings[1:] if headings[0] == "## Unreleased" else headings
    assert released[0].startswith(f"## {exactgrade.__version__} (") and released[-1].startswith("## 0.1.0 (")
    assert "## Unreleased" not in released


def test_the_license_file_is_the_one_pyproject_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639: the expression only


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--rollouts", "0"], ["argument --rollouts", "'0' must be at least 1"]),
        (["--rollouts", "many"], ["argument --rollouts", "'many' is not a whole number"]),
        (["--work", str(ROOT / "outputs" / "install")], ["is inside the checkout"]),
        (["--nope"], ["unrecognized arguments: --nope"]),
    ],
)
def test_check_install_answers_bad_arguments_in_one_line(arguments, words):
    done = subprocess.run(
        [sys.executable, str(TOOLS / "check_install.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert done.returncode == 2 and done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), done.stderr
    assert "Traceback" not in done.stderr


def trace(score: float | None = 1.0, *, ok: bool = True, errors: tuple = (), **info: str) -> dict:
    """A traces.jsonl trace as vf-eval writes it, reduced to what the check reads."""
    rewards = {} if score is None else {"correctness": {"score": score, "weight": 1.0}}
    return {"ok": ok, "errors": list(errors), "rewards": rewards, "info": info, "task": {"data": {"id": "t"}}}


HARNESS_ERROR = ({"type": "HarnessError"},)


@pytest.mark.parametrize(
    ("traces", "passed", "problems"),
    [
        ([trace(), trace()], 2, []),
        ([trace()], 1, ["env: 1 traces, expected 2"]),
        ([trace(), trace(0.0, reason="differs")], 1,
         ["env t: reward 0.0, below the reference's 1.0 (differs)"]),
        ([trace(), trace(0.5)], 1, ["env t: reward 0.5, below the reference's 1.0 (no reason recorded)"]),
        ([trace(), trace(None, ok=False, scoring_error="died")], 1,
         ["env t: flagged as a harness failure (died)"]),
        ([trace(), trace(1.0, errors=HARNESS_ERROR)], 1,
         ["env t: flagged as a harness failure ([{'type': 'HarnessError'}])"]),
        ([trace(0.0), trace(0.0), trace(1.0)], 1, ["env: 3 traces, expected 2",
         "env t: reward 0.0, below the reference's 1.0 (no reason recorded)",
         "env t: reward 0.0, below the reference's 1.0 (no reason recorded)"]),
    ],
)  # fmt: skip
def test_the_install_check_fails_on_a_rollout_below_the_reference(traces, passed, problems):
    assert load("check_install").judge("env", traces, 2) == (passed, problems)
