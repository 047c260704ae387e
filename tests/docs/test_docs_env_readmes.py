"""The six environment READMEs are what tools/docs/env_readmes.py renders from the code today: a new
family, canonical task, flag or text-mode change that is not re-rendered fails here, naming the command."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "docs" / "env_readmes.py"


def load_tool():
    if "env_readmes" not in sys.modules:
        spec = importlib.util.spec_from_file_location("env_readmes", TOOL)
        module = importlib.util.module_from_spec(spec)
        sys.modules["env_readmes"] = module
        spec.loader.exec_module(module)
    return sys.modules["env_readmes"]


tool = load_tool()
ENVIRONMENTS = tool.environments()


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=[env.env_id for env in ENVIRONMENTS])
def test_the_readme_is_current(env):
    readme = env.folder / "README.md"
    assert readme.read_text() == tool.render(env), (
        f"{readme.relative_to(ROOT)} is stale: run `{tool.COMMAND}`"
    )


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=[env.env_id for env in ENVIRONMENTS])
def test_the_package_publishes_that_readme(env):
    project = tomllib.loads((env.folder / "pyproject.toml").read_text())["project"]
    assert project["readme"] == "README.md"


def test_six_environments_two_per_domain():
    kinds = sorted((env.domain, env.stream) for env in ENVIRONMENTS)
    assert kinds == sorted((d, s) for d in ("scaling", "pytorch", "deeplearning") for s in (False, True))


@pytest.mark.parametrize(
    ("domain", "says"),
    [
        ("scaling", "served for every task."),
        ("deeplearning", "served for every task."),
        ("pytorch", "served for only the tasks whose keys hold no floating-point tensor: "),
    ],
)
def test_text_mode_is_described_by_what_it_serves(domain, says):
    """pytorch keys mostly hold float tensors, which text mode refuses (exactgrade.env.modes.text_refusal)."""
    assert f"{tool.text_served(tool.domain_facts(domain))}.".startswith(says)


def test_a_flag_without_a_row_is_an_error_naming_it(monkeypatch):
    monkeypatch.setattr(tool, "FLAGS", tuple(flag for flag in tool.FLAGS if flag.field != "hidden_check"))
    with pytest.raises(SystemExit, match="hidden_check"):
        tool.configuration(ENVIRONMENTS[0])
