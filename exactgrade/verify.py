"""`python -m exactgrade verify [--domain D]`: re-check every task's answer key.

A key is only as good as the program that produced it. For every task this re-runs the
reference program in two fresh Python processes (different hash seeds) and requires both
outputs to equal the in-process key byte for byte, then checks the key itself: it survives the
wire round trip type- and value-identically, holds no NaN or infinity, no exactly-zero number
unless the task says why, matches itself under its own policy, and the prompt names `result`.
Finally the domain's own `check(task)` and `summary(tasks)` run.

Prints one `task_id: reason` line per failure and ``N/N passed`` per domain and overall;
exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from exactgrade.cli_args import positive_seconds
from exactgrade.task import DOMAINS, TORCH_INSTALL_HINT, Task, TaskDef
from exactgrade.values import typed_equal

HELP = ("re-check every task's answer key: two fresh-process runs, wire round trip, no NaN/inf or "
        "unexplained zero, self-comparison, and the domain's own checks")

DEFAULT_TASK_TIMEOUT = 120.0
START_TIMEOUT = 600.0
"""Seconds a fresh process may take to start (interpreter, imports, torch) before it says it is
ready: generous, as a loaded machine may need it, and never counted against a task's timeout."""
READY = '{"ready": true}'
FRESH_HASH_SEEDS = ("1", "2")
TIMED_OUT = "timed out"
_WORKER = "from exactgrade.verify import _worker_main; _worker_main()"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n", 1)[1]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "Exit status: 0 when every task of every selected domain passed, 1 otherwise. "
        "The pytorch domain needs torch; without it that domain is reported as NOT VERIFIED "
        f"(counted as failed, exit 1) with the install command ({TORCH_INSTALL_HINT}); "
        "use --domain to verify only the others on a machine without torch."
    )
    parser.add_argument("--domain", choices=sorted(DOMAINS), help="verify only this domain")
    add_generation_arguments(parser, "verify N generated tasks per family per level instead of the "
                                     "canonical tasks (the same pipeline; see exactgrade.generate)")
    parser.add_argument("--task-timeout", type=positive_seconds, default=DEFAULT_TASK_TIMEOUT,
                        metavar="SECONDS",
                        help="kill a fresh run whose task takes longer than this "
                             f"(default {DEFAULT_TASK_TIMEOUT:g}; a process's start-up is not counted)")


def add_generation_arguments(parser: argparse.ArgumentParser, generated_help: str) -> None:
    """--generated N, --seed S, --levels L|A-B: the options that select a generated stream
    (shared by verify and build)."""
    from exactgrade.cli_args import levels_range, non_negative_int, positive_int

    parser.add_argument("--generated", type=positive_int, default=None, metavar="N", help=generated_help)
    parser.add_argument("--seed", type=non_negative_int, default=0, metavar="S",
                        help="with --generated: the stream's seed (default 0)")
    parser.add_argument("--levels", type=levels_range, default=(1, 2, 3, 4, 5), metavar="L|A-B|L,M",
                        help="with --generated: a level or a range of levels (default 1-5)")


# ---------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class DomainReport:
    """The outcome of verifying one domain: failures as (task_id, reason) in task order."""

    domain: str
    task_ids: tuple[str, ...]
    failures: tuple[tuple[str, str], ...]
    summary: tuple[str, ...] = ()
    not_verified: str | None = None

    @property
    def total(self) -> int:
        return len(self.task_ids)

    @property
    def passed(self) -> int:
        if self.not_verified is not None:
            return 0
        failed = {task_id for task_id, _ in self.failures}
        return sum(1 for task_id in self.task_ids if task_id not in failed)

    @property
    def ok(self) -> bool:
        return self.not_verified is None and not self.failures


# ---------------------------------------------------------------------------- value walks


def iter_leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every non-container value with its path (lists and dicts are containers; a TensorValue
    and a sympy expression are leaves)."""
    if type(value) in (list, tuple):
        for index, item in enumerate(value):
            yield from iter_leaves(item, (*path, index))
    elif type(value) is dict:
        for key, item in value.items():
            yield from iter_leaves(item, (*path, key))
    else:
        yield path, value


def _is_sympy(value: Any) -> bool:
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(value, sympy.Basic)


def zero_paths(value: Any) -> list[tuple[str | int, ...]]:
    """Paths of numbers that are exactly zero (bools are not numbers; a tensor counts as zero
    when it is non-empty and every element is zero)."""
    from exactgrade.values import TensorValue

    found = []
    for path, leaf in iter_leaves(value):
        if type(leaf) in (int, float, Fraction):
            is_zero = leaf == 0
        elif type(leaf) is TensorValue:
            is_zero = leaf.dtype != "bool" and len(leaf.data) > 0 and all(x == 0 for x in leaf.data)
        elif _is_sympy(leaf):
            is_zero = leaf.is_zero is True
        else:
            is_zero = False
        if is_zero:
            found.append(path)
    return found


def non_finite(value: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """(path, description) of every NaN or infinity, including inside tensors and sympy values."""
    from exactgrade.values import TensorValue

    found = []
    for path, leaf in iter_leaves(value):
        if type(leaf) is float and not math.isfinite(leaf):
            found.append((path, repr(leaf)))
        elif type(leaf) is TensorValue and leaf.dtype not in ("bool",) and any(
                type(x) is float and not math.isfinite(x) for x in leaf.data):
            bad = [i for i, x in enumerate(leaf.data) if not math.isfinite(x)]
            found.append((path, f"{len(bad)} non-finite element(s), first at flat index {bad[0]} "
                                f"({leaf.data[bad[0]]!r})"))
        elif _is_sympy(leaf):
            import sympy

            if leaf.has(sympy.nan, sympy.oo, -sympy.oo, sympy.zoo) or leaf.is_finite is False:
                found.append((path, str(leaf)))
    return found


def wire_normal_form(value: Any) -> Any:
    """What the wire is documented to turn a raw program output into: torch tensors become
    TensorValues and tuples become lists; everything else must come back unchanged."""
    from exactgrade.values import TensorValue

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return TensorValue.from_torch(value)
    if type(value) in (list, tuple):
        return [wire_normal_form(v) for v in value]
    if type(value) is dict:
        return {k: wire_normal_form(v) for k, v in value.items()}
    return value


def round_trip_problem(value: Any) -> str | None:
    """Why ``value`` does not survive encode -> decode exactly (None when it does)."""
    from exactgrade import wire

    try:
        text = wire.encode(value)
        back = wire.decode(text)
    except Exception as error:  # a WireError or a bug in the wire: either way the key is unusable
        return f"wire round trip failed: {type(error).__name__}: {error}"
    if not typed_equal(wire_normal_form(value), back):
        return "does not survive the wire round trip: decode(encode(value)) differs in type or value"
    if wire.encode(back) != text:
        return "wire encoding is not canonical: encode(decode(text)) != text"
    return None


# ---------------------------------------------------------------------------- per-task checks


def key_problems(task: Task) -> list[str]:
    """The generic checks on a materialised task's key and prompt."""
    from exactgrade.compare import compare
    from exactgrade.verdict import render_path

    problems = []
    expected = task.expected
    if type(expected) is not dict or list(expected) != ["rows"] or type(expected["rows"]) is not list:
        problems.append('the key is not {"rows": [...]}')
    trip = round_trip_problem(expected)
    if trip is not None:
        problems.append(f"key {trip}")
    for path, what in non_finite(task.expected):
        problems.append(f"non-finite value at {render_path(path)}: {what}")
    zeros = zero_paths(task.expected)
    if zeros and not task.zero_reason:
        where = ", ".join(render_path(p) for p in zeros[:5]) + (" ..." if len(zeros) > 5 else "")
        problems.append(f"exactly-zero value at {where} and the task gives no zero_reason")
    if task.zero_reason and not zeros:
        problems.append("zero_reason is set but the key holds no exactly-zero value")
    try:
        verdict = compare(task.expected, task.expected, task.policy)
        if not verdict.ok:
            problems.append(f"the key does not match itself under {task.policy.describe()}: {verdict.reason}")
    except Exception as error:
        problems.append(f"compare(key, key) raised {type(error).__name__}: {error}")
    if not re.search(r"\bresult\b", task.prompt):
        problems.append("the prompt does not mention `result`")
    return problems


@dataclass(frozen=True)
class FreshOutcome:
    """One task's run in a fresh process: its encoded output, or why there is none."""

    output: str | None = None
    error: str | None = None
    round_trip: str | None = None


def fresh_problems(key_text: str | None, outcomes: Sequence[FreshOutcome]) -> list[str]:
    """Compare the fresh-process runs with each other and with the in-process key."""
    problems = []
    for number, outcome in enumerate(outcomes, start=1):
        if outcome.error is not None:
            problems.append(f"fresh run {number} failed: {outcome.error}")
        elif outcome.round_trip is not None:
            problems.append(f"fresh run {number}: output {outcome.round_trip}")
    outputs = [o.output for o in outcomes if o.error is None]
    if len(outputs) == len(outcomes) and len(set(outputs)) > 1:
        problems.append("not deterministic: the fresh runs printed different outputs "
                        f"({_first_difference(outputs[0], outputs[1])})")
    elif key_text is not None and outputs and outputs[0] != key_text:
        problems.append("the fresh-process output differs from the in-process key "
                        f"({_first_difference(key_text, outputs[0])})")
    return problems


def _first_difference(a: str, b: str) -> str:
    index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"first difference at character {index}: {a[index:index + 40]!r} vs {b[index:index + 40]!r}"


# ---------------------------------------------------------------------------- fresh processes


def _worker_main() -> None:
    """Entry point of a fresh process: read jobs as JSON on stdin, run each program with its
    inputs preloaded and write one JSON line per task to stdout.

    Programs see builtins whose ``__import__`` refuses ``exactgrade``, as in the sandbox, so a
    reference that imports it fails here.
    """
    from exactgrade import wire
    from exactgrade.task import preload

    request = json.load(sys.stdin)
    # Replies go to a private copy of stdout; anything else written to fd 1 (a C extension's
    # printf included) goes to stderr, so it cannot corrupt the replies.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    if request["profile"] == "torch":  # its import is start-up, not the first task's time
        with contextlib.suppress(ImportError):  # a missing torch is reported per task by preload
            import torch  # noqa: F401
    out.write(READY + "\n")
    out.flush()
    for task_id, program, inputs_text in request["jobs"]:
        reply: dict[str, str] = {"id": task_id}
        try:
            namespace = preload(wire.decode(inputs_text), request["profile"])
            namespace["__builtins__"] = _builtins_without_exactgrade()
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(program, f"<{task_id}>", "exec"), namespace)
            if "result" not in namespace:
                raise ValueError("the program did not set `result`")
            raw = namespace["result"]
            reply["output"] = wire.encode(raw)
            problem = round_trip_problem(raw)
            if problem is not None:
                reply["round_trip"] = problem
        except BaseException as error:  # report and go on: one task's failure is not the run's
            reply["error"] = f"{type(error).__name__}: {error}"
        out.write(json.dumps(reply) + "\n")
        out.flush()


def _builtins_without_exactgrade() -> dict[str, Any]:
    import builtins

    real_import = builtins.__import__

    def guarded_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "exactgrade" or name.startswith("exactgrade."):
            raise ImportError(f"a reference program may not import {name!r}: the sandbox does not have it")
        return real_import(name, *args, **kwargs)

    return {**vars(builtins), "__import__": guarded_import}


def run_fresh(jobs: Sequence[tuple[str, str, str]], profile: str, hash_seed: str, task_timeout: float,
              on_done: Callable[[str, FreshOutcome], None] = lambda task_id, outcome: None,
              ) -> dict[str, FreshOutcome]:
    """Run (task_id, program, wire-encoded inputs) jobs in fresh processes, in order, calling
    ``on_done`` as each task finishes.

    One process runs all jobs; if a task exceeds ``task_timeout`` or kills the process, that
    task fails and a new process carries on with the rest. A process's start-up is not counted
    in a task's time: the clock starts when it says it is ready (within START_TIMEOUT).
    """
    results: dict[str, FreshOutcome] = {}

    def finish(task_id: str, outcome: FreshOutcome) -> None:
        results[task_id] = outcome
        on_done(task_id, outcome)

    remaining = list(jobs)
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    while remaining:
        with tempfile.TemporaryFile("w+") as stderr:
            process = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=stderr, env=env, text=True)
            lines: queue.Queue[str | None] = queue.Queue()
            reader = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
            reader.start()
            try:
                assert process.stdin is not None
                process.stdin.write(json.dumps({"profile": profile, "jobs": remaining}))
                process.stdin.close()
            except BrokenPipeError:
                pass
            done = 0
            failed_start = _start_failure(process, lines, stderr)
            if failed_start is not None:  # the first task takes it, so the run always moves on
                finish(remaining[0][0], failed_start)
                done = 1
            for task_id, _, _ in remaining if failed_start is None else ():
                done += 1
                try:
                    line = lines.get(timeout=task_timeout)
                except queue.Empty:
                    process.kill()
                    finish(task_id, FreshOutcome(error=f"{TIMED_OUT} after {task_timeout:g} s"))
                    break
                if line is None:
                    finish(task_id, _death(process, stderr))
                    break
                try:
                    reply = json.loads(line)
                    outcome = FreshOutcome(reply.get("output"), reply.get("error"), reply.get("round_trip"))
                except (ValueError, AttributeError):
                    outcome = FreshOutcome(error=f"unreadable reply {line[:80]!r}")
                finish(task_id, outcome)
            remaining = remaining[done:]
            process.kill()
            process.wait()
            reader.join()
            for pipe in (process.stdin, process.stdout):  # else a ResourceWarning lands in a check
                with contextlib.suppress(OSError):  # stdin after a broken pipe still holds the jobs
                    pipe.close()  # type: ignore[union-attr]
    return results


def _start_failure(process: subprocess.Popen[str], lines: queue.Queue[str | None],
                   stderr: Any) -> FreshOutcome | None:
    """None once the fresh process says it is ready, else why it did not."""
    try:
        line = lines.get(timeout=START_TIMEOUT)
    except queue.Empty:
        process.kill()
        return FreshOutcome(error=f"the process did not start within {START_TIMEOUT:g} s")
    if line is None:
        return _death(process, stderr)
    if line.strip() != READY:
        process.kill()
        return FreshOutcome(error=f"unreadable start {line[:80]!r}")
    return None


def _death(process: subprocess.Popen[str], stderr: Any) -> FreshOutcome:
    process.wait()
    stderr.seek(0)
    tail = stderr.read()[-500:].strip()
    return FreshOutcome(error=f"the process died (exit status {process.returncode}): {tail or 'no stderr'}")


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


# ---------------------------------------------------------------------------- domains


def verify_definitions(domain: str, definitions: Sequence[TaskDef], profile: str,
                       check: Callable[[Task], list[str]] | None = None,
                       summary: Callable[[list[Task]], list[str]] | None = None, *,
                       task_timeout: float = DEFAULT_TASK_TIMEOUT,
                       progress: Callable[[], None] = lambda: None) -> DomainReport:
    """Verify task definitions: fresh runs (started first, in the background), then the
    in-process key with the generic and domain checks. ``progress`` is called 3 times per task."""
    from exactgrade import wire
    from exactgrade.task import materialise

    failures: dict[str, list[str]] = {d.id: [] for d in definitions}
    jobs = []
    for definition in definitions:
        try:
            jobs.append((definition.id, definition.program, wire.encode(dict(definition.inputs))))
        except Exception as error:
            failures[definition.id].append(f"cannot prepare the program or encode the inputs: "
                                           f"{type(error).__name__}: {error}")
            progress()
            progress()

    # Fresh runs go first, in the background; the in-process run of a task waits until both
    # fresh runs have settled it, so a reference that hangs there is never run in this process.
    fresh: list[dict[str, FreshOutcome]] = [{} for _ in FRESH_HASH_SEEDS]
    settled = {task_id: threading.Event() for task_id, _, _ in jobs}
    lock = threading.Lock()

    def record(index: int, task_id: str, outcome: FreshOutcome) -> None:
        with lock:
            fresh[index][task_id] = outcome
            if all(task_id in runs for runs in fresh):
                settled[task_id].set()
        progress()

    def run_one(index: int, seed: str) -> None:
        try:
            run_fresh(jobs, profile, seed, task_timeout, lambda t, o: record(index, t, o))
        except Exception as error:  # e.g. the interpreter cannot be started: every task fails
            for task_id, _, _ in jobs:
                if task_id not in fresh[index]:
                    record(index, task_id, FreshOutcome(
                        error=f"cannot run a fresh process: {type(error).__name__}: {error}"))

    threads = [threading.Thread(target=run_one, args=(i, seed), daemon=True)
               for i, seed in enumerate(FRESH_HASH_SEEDS)]
    for thread in threads:
        thread.start()

    materialised: list[Task] = []
    key_texts: dict[str, str] = {}
    for definition in definitions:
        if definition.id in settled:
            settled[definition.id].wait()
            if any((runs[definition.id].error or "").startswith(TIMED_OUT) for runs in fresh):
                failures[definition.id].append("not run in-process: it timed out in a fresh process")
                progress()
                continue
        try:
            task = materialise(definition, domain, profile)
        except Exception as error:
            failures[definition.id].append(
                f"the reference failed in-process: {type(error).__name__}: {error}")
            progress()
            continue
        materialised.append(task)
        with contextlib.suppress(Exception):  # an unencodable key is reported by key_problems
            key_texts[task.id] = wire.encode(task.expected)
        failures[task.id].extend(key_problems(task))
        if check is not None:
            try:
                failures[task.id].extend(check(task))
            except Exception as error:
                failures[task.id].append(f"the domain check raised {type(error).__name__}: {error}")
        progress()

    for thread in threads:
        thread.join()
    for task_id, _, _ in jobs:
        outcomes = [runs[task_id] for runs in fresh]
        failures[task_id].extend(fresh_problems(key_texts.get(task_id), outcomes))

    summary_lines: tuple[str, ...] = ()
    if summary is not None:
        try:
            summary_lines = tuple(summary(materialised))
        except Exception as error:
            summary_lines = (f"the domain summary raised {type(error).__name__}: {error}",)
    return DomainReport(
        domain=domain,
        task_ids=tuple(d.id for d in definitions),
        failures=tuple((task_id, reason) for task_id, reasons in failures.items() for reason in reasons),
        summary=summary_lines,
    )


def torch_missing_reason() -> str | None:
    """Why the torch profile cannot run here, or None when torch imports."""
    try:
        import torch  # noqa: F401
    except ImportError as error:
        return f"torch is not installed ({error}); install it with: {TORCH_INSTALL_HINT}"
    return None


def verify_domain(domain: str, *, task_timeout: float = DEFAULT_TASK_TIMEOUT,
                  progress: Callable[[], None] = lambda: None) -> DomainReport:
    """Verify one registered domain."""
    from exactgrade.task import domain_module

    module = domain_module(domain)
    definitions = tuple(module.TASKS)
    if module.PROFILE == "torch":
        reason = torch_missing_reason()
        if reason is not None:
            for _ in range(3 * len(definitions)):
                progress()
            return DomainReport(domain, tuple(d.id for d in definitions), (), not_verified=reason)
    return verify_definitions(domain, definitions, module.PROFILE, module.check,
                              getattr(module, "summary", None), task_timeout=task_timeout, progress=progress)


def verify_generated(domain: str, count: int, seed: int, levels: Sequence[int], *,
                     task_timeout: float = DEFAULT_TASK_TIMEOUT,
                     progress: Callable[[], None] = lambda: None) -> DomainReport:
    """Generate ``count`` tasks per family per level of the stream ``seed`` and verify them
    exactly as canonical tasks are (progress: 4 calls per task, one for its generation)."""
    from exactgrade.family import GenerationError, definition_of, families, generate, generated_id
    from exactgrade.task import domain_module

    module = domain_module(domain)
    names = families(domain)
    ids = [generated_id(domain, name, level, seed, index)
           for name in names for level in levels for index in range(count)]
    if not names:
        return DomainReport(domain, (), (), not_verified="the domain has no task families")
    if module.PROFILE == "torch" and torch_missing_reason() is not None:
        for _ in range(4 * len(ids)):
            progress()
        return DomainReport(domain, tuple(ids), (), not_verified=torch_missing_reason())
    definitions, failures = [], []
    for name in names:
        for level in levels:
            for index in range(count):
                try:
                    definitions.append(definition_of(generate(domain, seed=seed, index=index, level=level,
                                                              family=name)))
                except GenerationError as error:
                    failures.append((generated_id(domain, name, level, seed, index), str(error)))
                    for _ in range(3):
                        progress()
                progress()
    # A domain's summary may speak of its canonical set (scaling's headline coverage); one that
    # holds for any set of tasks is offered as `generated_summary` (pytorch: independently confirmed).
    report = verify_definitions(domain, definitions, module.PROFILE, module.check,
                                getattr(module, "generated_summary", None), task_timeout=task_timeout,
                                progress=progress)
    return dataclasses.replace(report, task_ids=tuple(ids), failures=tuple(failures) + report.failures)


def format_report(report: DomainReport) -> list[str]:
    """The lines verify prints for one domain."""
    lines = [f"{task_id}: {reason}" for task_id, reason in report.failures]
    lines.extend(f"{report.domain}: {line}" for line in report.summary)
    if report.not_verified is not None:
        lines.append(f"{report.domain}: NOT VERIFIED: {report.not_verified}")
    lines.append(f"{report.domain}: {report.passed}/{report.total} passed")
    return lines


def run(args: argparse.Namespace) -> int:
    from exactgrade.console import Progress
    from exactgrade.family import families
    from exactgrade.task import domain_module

    domains = [args.domain] if args.domain else list(DOMAINS)
    generated = args.generated is not None
    reports: list[DomainReport] = []
    sizes: dict[str, int] = {}
    for domain in domains:
        try:
            sizes[domain] = (args.generated * len(args.levels) * len(families(domain)) if generated
                             else len(domain_module(domain).TASKS))
        except Exception as error:  # a domain that does not import cannot be verified
            reports.append(DomainReport(domain, (), (), not_verified=f"cannot load {DOMAINS[domain]}: "
                                                                       f"{type(error).__name__}: {error}"))
    runs_per_task = 4 if generated else 3
    with Progress("verify", runs_per_task * sum(sizes.values())) as bar:
        for domain in sizes:
            bar.update(description=f"verify {domain}")
            if generated:
                reports.append(verify_generated(domain, args.generated, args.seed, args.levels,
                                                task_timeout=args.task_timeout, progress=bar.advance))
            else:
                reports.append(verify_domain(domain, task_timeout=args.task_timeout, progress=bar.advance))
    reports.sort(key=lambda r: domains.index(r.domain))
    for report in reports:
        for line in format_report(report):
            print(line)
    print(f"overall: {sum(r.passed for r in reports)}/{sum(r.total for r in reports)} passed")
    return 0 if all(r.ok for r in reports) else 1
