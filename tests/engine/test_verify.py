"""verify: every generic check catches a real task built to violate it, and passes sound ones.

The broken tasks are real TaskDefs whose reference functions (below) are deliberately wrong:
verify runs them in-process and in two fresh processes exactly as it runs the registered tasks.
"""

from __future__ import annotations

import math
import queue
import subprocess
import sys
import tempfile
import threading
from fractions import Fraction
from typing import Any

import pytest

from exactgrade import verify, wire
from exactgrade.policy import Exact, RelTol
from exactgrade.task import TaskDef
from exactgrade.values import TensorValue
from exactgrade.verify import (
    DomainReport,
    FreshOutcome,
    format_report,
    non_finite,
    round_trip_problem,
    run_fresh,
    verify_definitions,
    zero_paths,
)

# ---------------------------------------------------------------- reference functions under test


def difference(a, b):
    return {"rows": [{"difference": a - b}]}


def scaled(x, factor):
    return {"rows": [{"value": x * factor}]}


def overflow_difference(x):
    big = x * 1e308
    return {"rows": [{"value": big - big}]}


def noisy(n):
    import random

    return {"rows": [{"value": n + random.getrandbits(64)}]}


def set_order(words):
    return {"rows": [{"order": list(set(words))}]}


def input_type(xs):
    return {"rows": [{"type": type(xs).__name__}]}


def uses_package(n):
    from exactgrade.policy import Exact

    return {"rows": [{"policy": Exact().describe(), "n": n}]}


def divide(a, b):
    return {"rows": [{"quotient": a / b}]}


def inexact_sympy(n):
    import sympy

    return {"rows": [{"value": sympy.Float(1) / n}]}


def bare(n):
    return n + 1


def spin(n):
    while True:
        n += 1


def chatty(n):
    print("working on", n)
    return {"rows": [{"value": n}]}


def _task(task_id, reference, inputs, *, prompt="Leave the answer in `result`.", policy=None,
          zero_reason=None):
    return TaskDef(id=task_id, category="test", inputs=inputs, reference=reference,
                   render=lambda _inputs: prompt, api_description="a test task",
                   policy=policy or Exact(), zero_reason=zero_reason)


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda",
         "mu"]

# (task, expected reason fragments; an empty tuple means the task must pass every check)
CASES = [
    (_task("t-000", difference, {"a": Fraction(3, 4), "b": Fraction(1, 4)}), ()),
    (_task("t-001", difference, {"a": Fraction(3, 4), "b": Fraction(3, 4)}),
     ("exactly-zero value at rows[0]['difference'] and the task gives no zero_reason",)),
    (_task("t-002", difference, {"a": Fraction(3, 4), "b": Fraction(3, 4)},
           zero_reason="the two distributions are equal by construction"), ()),
    (_task("t-003", difference, {"a": Fraction(3, 4), "b": Fraction(1, 4)}, zero_reason="stale"),
     ("zero_reason is set but the key holds no exactly-zero value",)),
    (_task("t-004", overflow_difference, {"x": 10.0}, policy=RelTol(1e-9)),
     ("non-finite value at rows[0]['value']: nan",)),
    (_task("t-005", scaled, {"x": 10.0, "factor": 1e308}, policy=RelTol(1e-9)),
     ("non-finite value at rows[0]['value']: inf",)),
    (_task("t-006", noisy, {"n": 1}), ("not deterministic: the fresh runs printed different outputs",)),
    (_task("t-007", set_order, {"words": WORDS}), ("not deterministic",)),
    (_task("t-008", input_type, {"xs": (1, 2)}),
     ("the fresh-process output differs from the in-process key",)),
    (_task("t-009", uses_package, {"n": 1}),
     ("fresh run 1 failed: ImportError: a reference program may not import 'exactgrade.policy'",
      "fresh run 2 failed: ImportError")),
    (_task("t-010", divide, {"a": 1, "b": 0}),
     ("the reference failed in-process: ZeroDivisionError", "fresh run 1 failed: ZeroDivisionError")),
    (_task("t-011", difference, {"a": 3, "b": 1}, prompt="Put the answer in a variable."),
     ("the prompt does not mention `result`",)),
    (_task("t-012", chatty, {"n": 7}), ()),
    (_task("t-013", inexact_sympy, {"n": 3}),
     ("the reference failed in-process: WireError: sympy node Float is not allowed in the wire format",
      "fresh run 1 failed: WireError: sympy node Float is not allowed")),
    (_task("t-014", bare, {"n": 2}), ('the key is not {"rows": [...]}',)),
]


@pytest.fixture(scope="module")
def report() -> DomainReport:
    calls = []
    result = verify_definitions("test", [task for task, _ in CASES], "python", task_timeout=60,
                                progress=lambda: calls.append(1))
    assert len(calls) == 3 * len(CASES)
    return result


def reasons_for(report: DomainReport, task_id: str) -> list[str]:
    return [reason for tid, reason in report.failures if tid == task_id]


@pytest.mark.parametrize(("task", "fragments"), CASES, ids=[task.id for task, _ in CASES])
def test_each_check_catches_its_violation(report, task, fragments):
    reasons = reasons_for(report, task.id)
    if not fragments:
        assert reasons == []
    for fragment in fragments:
        assert any(fragment in reason for reason in reasons), (fragment, reasons)


def test_report_counts(report):
    clean = sum(1 for _, fragments in CASES if not fragments)
    assert (report.total, report.passed, report.ok) == (len(CASES), clean, False)
    lines = format_report(report)
    assert lines[-1] == f"test: {clean}/{len(CASES)} passed"
    assert "t-011: the prompt does not mention `result`" in lines


def test_summary_and_check_are_called_and_their_failures_reported():
    task = _task("t-100", difference, {"a": 2, "b": 1})

    def check(t):
        return [f"checked {t.id}"]

    def summary(tasks):
        return [f"{len(tasks)} task(s) summarised"]

    result = verify_definitions("test", [task], "python", check, summary)
    assert result.failures == (("t-100", "checked t-100"),)
    assert result.summary == ("1 task(s) summarised",)
    assert "test: 1 task(s) summarised" in format_report(result)


@pytest.mark.timing
def test_a_hanging_reference_times_out_and_is_never_run_in_process():
    hanging, sound = _task("t-200", spin, {"n": 0}), _task("t-201", difference, {"a": 2, "b": 1})
    result = verify_definitions("test", [hanging, sound], "python", task_timeout=5)
    assert reasons_for(result, "t-200") == [
        "not run in-process: it timed out in a fresh process",
        "fresh run 1 failed: timed out after 5 s",
        "fresh run 2 failed: timed out after 5 s",
    ]
    assert reasons_for(result, "t-201") == []


# ---------------------------------------------------------------- fresh processes


@pytest.mark.timing
def test_run_fresh_survives_a_hang_and_a_dead_process():
    empty = wire.encode({})
    jobs = [
        ("j-0", "while True:\n    pass\n", empty),
        ("j-1", "import os\nos._exit(3)\n", empty),
        ("j-2", "print('noise on stdout')\nresult = {'rows': [1]}\n", empty),
        ("j-3", "result = undefined_name\n", empty),
        ("j-4", "import os\nos.write(1, b'not a reply\\n')\nresult = 5\n", empty),
    ]
    outcomes = run_fresh(jobs, "python", "1", task_timeout=5)
    assert outcomes["j-0"].error == "timed out after 5 s"
    assert outcomes["j-1"].error.startswith("the process died (exit status 3)")
    assert outcomes["j-2"].output == wire.encode({"rows": [1]})
    assert outcomes["j-2"].error is None
    assert outcomes["j-3"].error == "NameError: name 'undefined_name' is not defined"
    assert outcomes["j-4"] == FreshOutcome(output="5")  # raw writes to fd 1 cannot corrupt replies


# ---------------------------------------------------------------- value walks

ZERO_CASES = [
    ({"rows": [{"a": 0}]}, [("rows", 0, "a")]),
    ({"rows": [{"a": Fraction(0)}, {"a": 0.0}, {"a": -0.0}]},
     [("rows", 0, "a"), ("rows", 1, "a"), ("rows", 2, "a")]),
    ({"rows": [False, "0", None, 1, Fraction(1, 3)]}, []),
    ({"rows": [TensorValue("int64", (2,), (0, 0))]}, [("rows", 0)]),
    ({"rows": [TensorValue("float32", (2,), (0.0, 1.0))]}, []),
    ({"rows": [TensorValue("bool", (1,), (False,))]}, []),
    ({"rows": [TensorValue("float32", (0,), ())]}, []),
]


@pytest.mark.parametrize(("value", "paths"), ZERO_CASES)
def test_zero_paths(value, paths):
    assert zero_paths(value) == paths


def test_zero_paths_sympy():
    sympy = pytest.importorskip("sympy")
    assert zero_paths({"rows": [sympy.log(2) - sympy.log(2), sympy.log(2)]}) == [("rows", 0)]


NON_FINITE_CASES = [
    ({"rows": [math.inf, -math.inf, math.nan, 1.0]}, ["inf", "-inf", "nan"]),
    ({"rows": [TensorValue("float32", (3,), (1.0, math.nan, math.inf))]},
     ["2 non-finite element(s), first at flat index 1 (nan)"]),
    ({"rows": [10**400, Fraction(1, 10**400)]}, []),
]


@pytest.mark.parametrize(("value", "descriptions"), NON_FINITE_CASES)
def test_non_finite(value, descriptions):
    assert [what for _, what in non_finite(value)] == descriptions


def test_non_finite_sympy():
    sympy = pytest.importorskip("sympy")
    assert [p for p, _ in non_finite([sympy.oo, sympy.zoo, sympy.nan, sympy.sqrt(2)])] == [(0,), (1,), (2,)]




def test_round_trip_accepts_documented_normalisations_and_reports_failures():
    assert round_trip_problem({"rows": [(1, Fraction(1, 3)), "x", None, True, 2.5]}) is None
    problem = round_trip_problem({"rows": [{1, 2}]})
    assert problem is not None and problem.startswith("wire round trip failed: WireError")


def test_round_trip_of_a_torch_tensor():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    assert round_trip_problem({"rows": [torch.arange(6, dtype=torch.float32).reshape(2, 3)]}) is None


# ---------------------------------------------------------------- the command


def _verify(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import sys\nfrom exactgrade.cli import main\nsys.exit(main({['verify', *args]!r}))\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)


def test_help_explains_the_command():
    done = _verify("--help")
    assert done.returncode == 0
    assert "--domain" in done.stdout and "pip install torch==2.13.0" in done.stdout


def test_verify_every_registered_task():
    done = _verify()
    lines = done.stdout.splitlines()
    assert "deeplearning: 36/36 passed" in lines, done.stdout
    assert "scaling: 35/35 passed" in lines, done.stdout
    if "pytorch: 45/45 passed" not in lines:
        pytest.importorskip("torch", reason="torch is not installed")
        pytest.fail(done.stdout)
    assert lines[-1] == "overall: 116/116 passed"
    assert done.returncode == 0
    assert "verify" in done.stderr  # the progress bar


def test_domain_option_restricts():
    done = _verify("--domain", "scaling")
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["scaling: 35/35 passed", "overall: 35/35 passed"], done.stdout
    assert not any(line.startswith(("deeplearning", "pytorch", "dl-", "pt-")) for line in lines)
    assert done.returncode == 0


def test_pytorch_without_torch_is_not_verified_and_says_how_to_install():
    done = _verify("--domain", "pytorch", prelude="import sys\nsys.modules['torch'] = None\n")
    assert done.returncode == 1
    assert "pytorch: NOT VERIFIED: torch is not installed" in done.stdout
    assert "pip install torch==2.13.0" in done.stdout
    assert "pytorch: 0/45 passed" in done.stdout


def _start(code: str) -> tuple[subprocess.Popen[str], queue.Queue[str | None], Any]:
    stderr = tempfile.TemporaryFile("w+")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=stderr, text=True)
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=verify._pump, args=(process.stdout, lines), daemon=True).start()
    return process, lines, stderr


# (what the fresh process does before its first reply, why it did not start; None: it started)
STARTS = [
    (f"print({verify.READY!r}, flush=True)", None),
    ("import sys\nprint('oops', file=sys.stderr)\nsys.exit(4)", "the process died (exit status 4): oops"),
    ("print('hello', flush=True)", "unreadable start 'hello\\n'"),
    ("import time\ntime.sleep(10**6)", "the process did not start within 0.5 s"),  # cannot start in time
]


@pytest.mark.parametrize(("code", "why"), STARTS, ids=["ready", "died", "garbage", "never ready"])
@pytest.mark.timing
def test_a_fresh_process_that_does_not_start_is_told_apart_from_a_slow_task(monkeypatch, code, why):
    # Only the process that never starts waits out a short START_TIMEOUT; the others keep the real
    # one, so a loaded machine's slow Python start-up (seen: over 0.5 s at load 20) is not a failure.
    if why is not None and "did not start within" in why:
        monkeypatch.setattr(verify, "START_TIMEOUT", 0.5)
    process, lines, stderr = _start(code)
    try:
        outcome = verify._start_failure(process, lines, stderr)
    finally:
        process.kill()
        process.wait()
        stderr.close()
    assert (None if outcome is None else outcome.error) == why
