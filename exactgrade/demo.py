"""`python -m exactgrade demo`: run the three environments under real `vf-eval`, offline.

By default it plays the embedded scripted policies through the policy server: reference
(every task must score 1.0), then mutant and adversarial (nothing may pass, no escape, no
harness failure: a sandbox the attack's own code ended scores 0, never voided). With
--model/--base-url it evaluates a real model instead. Prints a per-environment, per-category
table and writes report.json plus a bar chart per policy (pass rate per category) beside the
vf-eval outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactgrade.cli_args import (
    env_var_name,
    http_url,
    non_empty,
    non_negative_int,
    positive_int,
    writable_dir,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.table import Table

HELP = "Run vf-eval on the three environments against the scripted policies (or a real model)."

ENVS = {"scaling-env": "scaling", "pytorch-env": "pytorch", "deeplearning-env": "deeplearning"}
POLICIES = ("reference", "mutant", "adversarial")


EPILOG = """\
Without --model: starts `python -m exactgrade policy-server` for each policy, runs
`vf-eval <env> -m <policy> --client.base-url <server> --env.agent.runtime.type subprocess
--no-push` on each environment, prints a table per environment and category, and writes
report.json and <policy>/pass_rate_by_category.png into --out beside the vf-eval runs
(<policy>/<env>/traces.jsonl). Exit status 1 unless reference scores 1.0 on every selected
task (116/116 on a full run) and mutant and adversarial pass nothing, with no escape and no
rollout flagged as a harness failure: a sandbox the attack's own code killed scores 0 with
the death as its reason (a flagged rollout is dropped by trainers: it would void itself).

With --model and --base-url (and --api-key-var NAME if the endpoint needs a key): the same
runs against that model; the exit status is 0 once every run completed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--envs", nargs="+", choices=list(ENVS), default=list(ENVS),
                        help="environments to run (default: all three)")
    parser.add_argument("--policies", nargs="+", choices=POLICIES, default=None,
                        help="scripted policies to play, in order (default: reference mutant adversarial); "
                             "not with --model")
    parser.add_argument("--limit", type=positive_int, default=None, metavar="N",
                        help="only the first N tasks of each environment (a quick run)")
    parser.add_argument("--concurrency", type=positive_int, default=8, metavar="N",
                        help="rollouts in flight per vf-eval run (8)")
    parser.add_argument("--out", type=writable_dir, default="outputs/exactgrade-demo", metavar="DIR",
                        help="output directory (vf-eval runs, report.json, charts)")
    parser.add_argument("--model", type=non_empty, default=None,
                        help="evaluate this real model instead of the scripted policies (needs --base-url)")
    parser.add_argument("--base-url", type=http_url, default=None,
                        help="OpenAI-compatible base URL of --model")
    parser.add_argument("--api-key-var", type=env_var_name, default=None, metavar="NAME",
                        help="name of the environment variable holding the API key for --base-url")
    parser.add_argument("--max-turns", type=positive_int, default=None, metavar="N",
                        help="model turns per rollout (env default 5)")
    parser.add_argument("--generated", type=positive_int, default=None, metavar="N",
                        help="run N generated tasks per environment (levels 1-5 mixed, all families; "
                             "--env.taskset.source generated: a pool of N) instead of the canonical tasks")
    parser.add_argument("--seed", type=non_negative_int, default=0, metavar="S",
                        help="with --generated: the pool's seed (default 0)")
    parser.add_argument("--answer-mode", choices=("tools", "code", "text"), default="tools",
                        help="how the model answers (--env.taskset.answer-mode): tools (execute_code/bash, "
                             "multi-turn; the default), code (one python block defining solve) or text (the "
                             "answer written out; pytorch serves only the tasks whose keys hold no floating "
                             "tensor)")


@dataclass
class Tally:
    rollouts: int = 0
    passed: int = 0
    wrong: int = 0
    flagged: int = 0
    reasons: Counter = field(default_factory=Counter)


@dataclass
class RunResult:
    label: str
    env: str
    run_dir: str
    seconds: float
    by_category: dict[str, Tally]
    by_attack: dict[str, Tally]
    escapes: list[dict[str, str]]
    voided_self_kills: list[str]
    """Rollouts of SELF_KILLS attacks flagged as harness failures instead of scored 0."""
    mode: str = "tools"
    """The answer mode the run was in."""


def run(args: argparse.Namespace) -> int:
    problem = _argument_problem(args)
    if problem is not None:
        print(f"python -m exactgrade demo: error: {problem} (see --help)", file=sys.stderr)
        return 2
    if args.policies is None:
        args.policies = list(POLICIES)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        results = _run_all(args)
    except (RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    _print_table(results)
    verdicts = [] if args.model is not None else _verdicts(results)
    _write_report(args.out, results, verdicts)
    for line in verdicts:
        print(line)
    return 1 if any(line.startswith("FAIL") for line in verdicts) else 0


def _argument_problem(args: argparse.Namespace) -> str | None:
    """What argparse cannot check alone: options that go together, and repeated values."""
    repeated = _repeated("--envs", args.envs) or _repeated("--policies", args.policies or [])
    if repeated is not None:
        return repeated
    if (args.model is None) != (args.base_url is None):
        return "--model and --base-url go together"
    if args.model is not None and args.policies is not None:
        return "--policies chooses scripted policies; with --model the model plays"
    if args.api_key_var is not None and args.model is None:
        return "--api-key-var needs --model and --base-url (the scripted policies need no key)"
    if shutil.which("vf-eval") is None:
        return "vf-eval is not on PATH (pip install verifiers)"
    return None


def _repeated(option: str, values: list[str]) -> str | None:
    """A repeated value would run (and count) the same vf-eval twice."""
    twice = sorted({v for v in values if values.count(v) > 1})
    return f"{option} lists {', '.join(twice)} more than once" if twice else None


def _run_all(args: argparse.Namespace) -> list[RunResult]:
    results: list[RunResult] = []
    if args.model is not None:
        for env in args.envs:
            results.append(_eval(args, env, args.model, args.model, args.base_url, args.api_key_var, {}))
    else:
        with tempfile.TemporaryDirectory(prefix="exactgrade-canary-") as tmp:
            canary = secrets.token_hex(16)
            canary_file = Path(tmp) / "canary.txt"
            canary_file.write_text(canary)
            for policy in args.policies:
                with _policy_server(policy, canary_file, args.out / policy / "policy-server.jsonl") as url:
                    for env in args.envs:
                        result = _eval(args, env, policy, policy, url, None, {"EXACTGRADE_CANARY": canary})
                        result.escapes = _stats(url)["escapes"]
                        results.append(result)
    return results


class _policy_server:
    """Context manager: a policy server subprocess; yields its base URL."""

    def __init__(self, policy: str, canary_file: Path, log: Path) -> None:
        self.policy, self.canary_file, self.log = policy, canary_file, log

    def __enter__(self) -> str:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exactgrade", "policy-server", "--policy", self.policy, "--port", "0",
             "--canary-file", str(self.canary_file), "--log", str(self.log)],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if " on http://" not in line:
            self.proc.kill()
            raise RuntimeError(f"policy server did not start: {line!r}")
        print(line.strip(), file=sys.stderr)
        return line.rsplit(" on ", 1)[1].strip()

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _stats(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as response:
        return json.loads(response.read())


def vf_eval_command(env: str, model: str, base_url: str, out_dir: Path, run_dir: str, *,
                    limit: int | None = None, concurrency: int = 8, api_key_var: str | None = None,
                    max_turns: int | None = None, extra: tuple[str, ...] = (),
                    rollouts: int = 1) -> list[str]:
    """The documented offline vf-eval invocation for one environment."""
    command = ["vf-eval", env, "-m", model, "-r", str(rollouts), "-c", str(concurrency),
               "--client.base-url", base_url, "--env.agent.runtime.type", "subprocess",
               "--no-push", "--no-rich", "-o", str(out_dir), "--run.dir", run_dir]
    if limit is not None:
        command += ["-n", str(limit)]
    if api_key_var is not None:
        command += ["--client.api-key-var", api_key_var]
    if max_turns is not None:
        command += ["--env.taskset.max-turns", str(max_turns)]
    return command + list(extra)


def _eval(args: argparse.Namespace, env: str, label: str, model: str, base_url: str,
          api_key_var: str | None, extra_env: dict[str, str]) -> RunResult:
    from exactgrade.console import Progress

    out_dir = args.out / _safe(label)
    run_dir = out_dir / env
    if run_dir.exists():
        shutil.rmtree(run_dir)  # this demo's own previous output for the same run
    generated, mode = args.generated, args.answer_mode
    limit = generated if generated is not None else args.limit
    expected = generated if generated is not None else _task_count(env, args.limit, mode)
    extra = (("--env.taskset.source", "generated", "--env.taskset.seed", str(args.seed),
              "--env.taskset.size", str(generated))
             + (("--env.taskset.show-task-id", "True") if args.model is None else ())  # the scripted policies
             if generated is not None else ()) + ("--env.taskset.answer-mode", mode)
    command = vf_eval_command(env, model, base_url, out_dir, env, limit=limit, concurrency=args.concurrency,
                              api_key_var=api_key_var, max_turns=args.max_turns, extra=extra)
    log_path = out_dir / f"{env}.vf-eval.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("w") as log, Progress(f"[{label}] {env}", expected) as bar:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **extra_env})
        try:
            while proc.poll() is None:
                bar.update(_count_lines(run_dir / "traces.jsonl"))
                time.sleep(0.5)
        except KeyboardInterrupt:
            _stop(proc)
            raise
        done = _count_lines(run_dir / "traces.jsonl")
        bar.update(done)
    seconds = time.monotonic() - started
    if proc.returncode != 0 or done == 0:
        tail = log_path.read_text()[-3000:]
        raise RuntimeError(f"vf-eval {env} ({label}) exited {proc.returncode} with {done} traces; "
                           f"see {log_path}:\n{tail}")
    return summarize(label, env, run_dir, seconds, mode)


def _stop(proc: subprocess.Popen) -> None:
    """Ctrl-C reached vf-eval too (same process group): give it a moment to stop its tool
    server, then make sure it is gone, so the demo never exits with a vf-eval still running."""
    for signal_it in (lambda: None, proc.terminate, proc.kill):
        signal_it()
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def summarize(label: str, env: str, run_dir: Path, seconds: float = 0.0, mode: str = "tools") -> RunResult:
    """Tally one vf-eval run's traces.jsonl (answered in `mode`) per category (and per adversarial
    attack)."""
    from exactgrade.scripted.policies import SELF_KILLS, attack_kind, script_index

    by_category: dict[str, Tally] = defaultdict(Tally)
    by_attack: dict[str, Tally] = defaultdict(Tally)
    voided_self_kills = []
    for trace in read_traces(run_dir / "traces.jsonl"):
        data = trace["task"]["data"]
        outcome, reason = classify(trace)
        kind = attack_kind(mode, script_index(data["id"])) if label == "adversarial" else ""
        for tally in (by_category[data["category"]], *( (by_attack[kind],) if kind else ())):
            tally.rollouts += 1
            setattr(tally, outcome, getattr(tally, outcome) + 1)
            tally.reasons[reason[:80]] += 1
        if kind in SELF_KILLS and outcome == "flagged":
            voided_self_kills.append(data["id"])
    return RunResult(label, env, str(run_dir), seconds, dict(by_category), dict(by_attack), [],
                     voided_self_kills, mode)


def read_traces(path: Path) -> list[dict[str, Any]]:
    traces = []
    for line in path.read_text().splitlines():
        if line.strip():
            traces.extend(json.loads(line)["traces"])
    return traces


def classify(trace: dict[str, Any]) -> tuple[str, str]:
    """("passed" | "wrong" | "flagged", reason) for one trace from traces.jsonl."""
    info = trace.get("info") or {}
    if not trace.get("ok", False) or trace.get("errors"):
        errors = trace.get("errors") or [{}]
        return "flagged", str(info.get("scoring_error") or errors[-1].get("type") or "error")
    if trace_reward(trace) == 1.0:
        return "passed", "passed"
    return "wrong", str(info.get("reason") or "no reason recorded")


def trace_reward(trace: dict[str, Any]) -> float:
    """The trace's reward: every reward's score times its weight, summed."""
    rewards = trace.get("rewards") or {}
    return sum((r.get("score") or 0.0) * r.get("weight", 1.0) for r in rewards.values())


def trace_latency(trace: dict[str, Any]) -> tuple[float, float]:
    """(seconds from boot start to scoring end minus the model's own time, the model's time) of a
    trace; KeyError when the trace has no such timing."""
    timing = trace["timing"]
    model = (timing["agent"].get("model") or {}).get("duration") or 0.0
    return timing["scoring"]["end"] - timing["boot"]["start"] - model, model


def _task_count(env: str, limit: int | None, mode: str = "tools") -> int:
    """How many of the environment's shipped tasks a run in `mode` serves (text mode: not the tasks
    whose keys hold floating tensors), at most `limit`."""
    import datasets

    from exactgrade.dataset import load_split
    from exactgrade.env.keys import key_from_row
    from exactgrade.env.modes import text_refusal

    datasets.disable_progress_bars()

    rows = load_split(ENVS[env])
    count = sum(mode != "text" or text_refusal(key_from_row(row).expected) is None for row in rows)
    return min(count, limit) if limit is not None else count


def _count_lines(path: Path) -> int:
    try:
        return sum(len(json.loads(line)["traces"]) for line in path.read_text().splitlines() if line.strip())
    except (OSError, json.JSONDecodeError, KeyError):
        return 0


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


def _print_table(results: list[RunResult]) -> None:
    """One row per environment and category, a TOTAL row per run (with its time and directory),
    and the adversarial runs' rows per attack."""
    from exactgrade.console import print_table

    print()
    print_table(results_table(results))


def results_table(results: list[RunResult]) -> Table:
    """The demo's table of results (exactgrade.console draws it for a terminal or a log)."""
    from exactgrade.console import table

    grid = table(["policy/model", "environment", "category", "passed", "wrong", "flagged", "time", "run"],
                 numeric={"passed", "wrong", "flagged", "time"})
    for result in results:
        rows = sorted(result.by_category.items())
        total = Tally()
        for category, tally in rows:
            grid.add_row(result.label, result.env, category, f"{tally.passed}/{tally.rollouts}",
                         str(tally.wrong), str(tally.flagged), "", "")
            total.rollouts += tally.rollouts
            total.passed += tally.passed
            total.wrong += tally.wrong
            total.flagged += tally.flagged
        grid.add_row(result.label, result.env, "TOTAL", f"{total.passed}/{total.rollouts}", str(total.wrong),
                     str(total.flagged), f"{result.seconds:.0f}s", result.run_dir)
        for attack, tally in sorted(result.by_attack.items()):
            grid.add_row("", "", f"attack {attack}", f"{tally.passed}/{tally.rollouts}", "",
                         str(tally.flagged), "", "")
        grid.add_section()
    return grid


def _verdicts(results: list[RunResult]) -> list[str]:
    """One PASS/FAIL line per policy: the demo's acceptance criteria."""
    lines = []
    by_policy: dict[str, list[RunResult]] = defaultdict(list)
    for result in results:
        by_policy[result.label].append(result)
    for policy, runs in by_policy.items():
        tallies = [t for r in runs for t in r.by_category.values()]
        n, passed = sum(t.rollouts for t in tallies), sum(t.passed for t in tallies)
        if policy == "reference":
            ok = passed == n
            full = sum(_task_count(env, None, runs[0].mode) for env in ENVS)
            note = "" if n == full else f" ({full} expected for the full run; {n} selected)"
            lines.append(f"{'PASS' if ok else 'FAIL'} reference: {passed}/{n} scored 1.0{note}")
        else:
            escapes = sum(len(r.escapes) for r in runs)
            voided = [t for r in runs for t in r.voided_self_kills]
            flagged = sum(t.flagged for t in tallies)
            ok = passed == 0 and escapes == 0 and flagged == 0
            lines.append(f"{'PASS' if ok else 'FAIL'} {policy}: {passed}/{n} passed, {escapes} escapes, "
                         f"{flagged} harness failures flagged"
                         + (f", self-killed sandboxes voided, not scored 0: {voided}" if voided else ""))
    return lines


def _write_report(out: Path, results: list[RunResult], verdicts: list[str]) -> None:
    report = {"verdicts": verdicts, "runs": [
        {**asdict(r), "by_category": {c: _tally_dict(t) for c, t in r.by_category.items()},
         "by_attack": {a: _tally_dict(t) for a, t in r.by_attack.items()}} for r in results]}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    for label in dict.fromkeys(r.label for r in results):
        runs = [r for r in results if r.label == label]
        _chart(out / _safe(label) / "pass_rate_by_category.png", label, runs)
    print(f"\nreport: {out / 'report.json'}")


def _tally_dict(tally: Tally) -> dict[str, Any]:
    return {**asdict(tally), "reasons": dict(tally.reasons)}


def _chart(path: Path, label: str, runs: list[RunResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    chart_figure(label, runs).savefig(path, dpi=100)


def chart_figure(label: str, runs: list[RunResult]) -> Figure:
    """Stacked bars per environment/category: passed, flagged harness failures, wrong answers
    (scored 0), so a mutant run shows full red bars, not empty ones. The legend sits below the
    axes, so it hides no bar."""
    from matplotlib.figure import Figure

    names = [f"{r.env.removesuffix('-env')}/{c}" for r in runs for c in sorted(r.by_category)]
    tallies = [r.by_category[c] for r in runs for c in sorted(r.by_category)]
    passed = [t.passed / t.rollouts for t in tallies]
    flagged = [t.flagged / t.rollouts for t in tallies]
    wrong = [t.wrong / t.rollouts for t in tallies]
    fig = Figure(figsize=(max(6.0, 0.45 * len(names) + 2), 4.5), layout="constrained")
    ax = fig.subplots()
    ax.bar(names, passed, color="tab:green", label="passed")
    ax.bar(names, flagged, bottom=passed, color="tab:orange", label="harness failure (flagged)")
    ax.bar(names, wrong, bottom=[p + f for p, f in zip(passed, flagged, strict=True)], color="tab:red",
           label="wrong (scored 0)")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction of rollouts")
    ax.set_title(f"{label}: pass rate per category")
    for tick in ax.get_xticklabels():
        tick.set(rotation=60, horizontalalignment="right", rotation_mode="anchor")
    fig.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return fig
