"""The blind-solver harness (tools/blind/solve.py) under the rollout budget: what the difficulty
panels of BENCHMARKS.md ran. A session's calls share state as a rollout's do, only the newest
call's output is shown, the call after the budget is refused, and `final` grades what is left."""

import importlib.util
from pathlib import Path

import pytest

from exactgrade import generate
from exactgrade.env.taskset import ExactgradeTaskConfig

HARNESS = Path(__file__).resolve().parents[2] / "tools" / "blind" / "solve.py"
BUDGET = ExactgradeTaskConfig.model_fields["max_turns"].default


@pytest.fixture(scope="module")
def solve():
    spec = importlib.util.spec_from_file_location("blind_solve", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def task_id() -> str:
    return generate("deeplearning", seed=3, index=0, level=1, family="entropy").id


def test_the_budget_is_the_environments_max_turns(solve):
    assert solve.BUDGET == BUDGET == 5


def test_a_session_keeps_state_shows_the_newest_call_and_refuses_past_the_budget(solve, task_id, tmp_path,
                                                                                capsys):
    def call(name: str, text: str, *flags: str) -> str:
        (tmp_path / name).write_text(text)
        solve.call(task_id, str(tmp_path / name), *flags, str(tmp_path))
        return capsys.readouterr().out

    first = call("set.py", "seen = sorted(distributions)[:0]\nprint('first call')")
    assert f"call 1 of {BUDGET}" in first and "first call" in first
    shell = call("echo.sh", "echo from bash", "--bash")
    assert "from bash" in shell and "first call" not in shell
    kept = call("use.py", "print('state kept:', seen == [])")
    assert "state kept: True" in kept and "first call" not in kept
    for _ in range(BUDGET - 3):
        assert "state kept: True" in call("use.py", "print('state kept:', seen == [])")
    with pytest.raises(SystemExit, match=f"budget of {BUDGET} tool calls is spent"):
        call("use.py", "print('one too many')")
    assert len(list((tmp_path / f"{task_id}.calls").iterdir())) == BUDGET


def test_final_grades_what_the_session_left(solve, task_id, tmp_path, capsys):
    (tmp_path / "wrong.py").write_text("result = 3")
    solve.call(task_id, str(tmp_path / "wrong.py"), str(tmp_path))
    solve.final(task_id, str(tmp_path))
    out = capsys.readouterr().out
    assert f"(1 of {BUDGET} tool calls made)" in out
    assert "VERDICT: FAIL" in out and "expected dict" in out
