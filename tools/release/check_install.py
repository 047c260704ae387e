"""Install the release the way a user does, then grade real rollouts with it.

    python tools/release/check_install.py [--rollouts N] [--work DIR] [--keep]

1. Builds the sdist and wheel of the core and of the six environment packages (`python -m build`
   in a tools venv of its own, from a copy of the sources, so the checkout gets no build files) and
   runs `twine check --strict` on all fourteen.
2. Creates a virtual environment that sees neither the checkout nor this machine's site-packages
   (`python -m venv`, no system site-packages, run from a temporary directory with PYTHONPATH
   unset), installs torch==2.13.0 there first (the CPU build; a looser requirement pulls a
   multi-GB CUDA one), then `pip install --find-links WHEELHOUSE scaling-env==VERSION` and the
   other five: the seven come from the wheelhouse (checked in pip's install report), every other
   dependency from the package index pip is configured with.
3. Starts the venv's `python -m exactgrade policy-server --policy reference` and runs the venv's
   real `vf-eval` on each of the six environments (subprocess runtime, --no-push, Hugging Face
   offline) with N rollouts each. The reference policy scores 1.0 on every task, so any rollout
   below 1.0, a flagged rollout or a missing trace fails the check.

Exit status 0 when all of it held, 1 when something failed (one line per failure, logs kept in
the work directory), 2 for bad arguments. Standard library only: the checkout need not be
importable. Network: the package indexes only (the policy server listens on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from set_version import ROOT, read_versions

ENVIRONMENTS = (
    "scaling-env",
    "pytorch-env",
    "deeplearning-env",
    "scaling-env-stream",
    "pytorch-env-stream",
    "deeplearning-env-stream",
)
TORCH = "torch==2.13.0"
BUILD_TOOLS = ("build", "twine")
# Never part of a built sdist: VCS data, caches, local outputs and earlier builds.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    "outputs",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "environments",
)
STEP_TIMEOUT = 1800  # seconds for one pip install or one vf-eval run (each takes a few minutes at most)
SERVER_START_TIMEOUT = 300  # seconds for the policy server to listen (it takes a few)


class CheckFailed(Exception):
    """A step of the check did not hold; the message says which and where its log is."""


@dataclass(frozen=True, slots=True)
class EvalOutcome:
    """One environment's vf-eval run: how many rollouts scored the reference's 1.0, and problems."""

    env: str
    seconds: float
    passed: int
    problems: tuple[str, ...]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rollouts",
        type=_positive,
        default=4,
        metavar="N",
        help="tasks evaluated per environment, one rollout each (default 4)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        metavar="DIR",
        help="work directory (default: a fresh temporary one, removed on success)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory on success too")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="exactgrade-install-")) if args.work is None else args.work.resolve()
    if work.is_relative_to(ROOT):
        parser.error(f"--work {work} is inside the checkout; the venv must not see it")
    work.mkdir(parents=True, exist_ok=True)
    try:
        outcomes = check(work, args.rollouts)
    except CheckFailed as failure:
        print(f"check_install: FAIL: {failure} (work directory kept: {work})", file=sys.stderr)
        return 1
    failed = [o for o in outcomes if o.problems]
    for outcome in outcomes:
        print(
            f"  {outcome.env:24} {outcome.passed}/{args.rollouts} scored 1.0  {outcome.seconds:5.0f} s"
            + "".join(f"\n    FAIL {p}" for p in outcome.problems)
        )
    if failed:
        print(
            f"check_install: FAIL: {len(failed)} of {len(outcomes)} environments (work directory kept: "
            f"{work})",
            file=sys.stderr,
        )
        return 1
    if not args.keep:
        _progress(f"removing the work directory {work}")
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"check_install: OK: {len(outcomes)} environments installed from the index, "
        f"{sum(o.passed for o in outcomes)} rollouts scored 1.0, {time.monotonic() - _STARTED:.0f} s in all"
    )
    return 0


def check(work: Path, rollouts: int) -> list[EvalOutcome]:
    try:
        version = _one_version()
    except (OSError, ValueError) as error:  # VersionError, or a pyproject that is not TOML
        raise CheckFailed(f"cannot read the release version: {error}") from None
    _progress(f"release {version}, work directory {work}")
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    wheelhouse = build_all(work, version, logs)
    venv = make_user_venv(work, logs)
    install(venv, wheelhouse, version, logs)
    assert_isolated(venv, version)
    _progress("the venv imports everything from itself; vf-eval on the six environments")
    return evaluate_all(venv, work, rollouts, logs)


def _one_version() -> str:
    versions = {site.version for site in read_versions(ROOT)}
    if len(versions) != 1:
        raise CheckFailed(
            f"the seven packages disagree on the version: {sorted(versions)} "
            f"(python tools/release/set_version.py)"
        )
    return versions.pop()


def copy_sources(destination: Path) -> list[Path]:
    """The core's and the six environments' source folders copied under `destination` (a build
    leaves build/ and an egg-info beside its sources, and a stale build/ would leak into the next)."""
    shutil.rmtree(destination, ignore_errors=True)
    folders = [("exactgrade", ROOT)] + [
        (e, ROOT / "environments" / e.replace("-", "_")) for e in ENVIRONMENTS
    ]
    return [shutil.copytree(source, destination / name, ignore=_NOT_SOURCES) for name, source in folders]


def build_all(work: Path, version: str, logs: Path) -> Path:
    """The fourteen distributions (sdist + wheel built from it, per package), twine-checked."""
    tools = _venv(work / "tools-venv", logs / "tools-venv.log")
    _run([tools / "bin" / "python", "-m", "pip", "install", *BUILD_TOOLS], logs / "tools-venv.log", work)
    sources = copy_sources(work / "src")
    wheelhouse = work / "wheelhouse"
    shutil.rmtree(wheelhouse, ignore_errors=True)

    def build(source: Path) -> None:
        _run(
            [tools / "bin" / "python", "-m", "build", "--outdir", wheelhouse, source],
            logs / f"build-{source.name}.log",
            work,
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(build, sources))
    built = sorted(p.name for p in wheelhouse.iterdir())
    expected = sorted(
        name
        for package in ("exactgrade", *ENVIRONMENTS)
        for name in (
            f"{package.replace('-', '_')}-{version}.tar.gz",
            f"{package.replace('-', '_')}-{version}-py3-none-any.whl",
        )
    )
    if built != expected:
        raise CheckFailed(f"the wheelhouse holds {built}, expected {expected}")
    _run(
        [tools / "bin" / "python", "-m", "twine", "check", "--strict", *sorted(wheelhouse.iterdir())],
        logs / "twine-check.log",
        work,
    )
    _progress(f"built and twine-checked {len(built)} distributions")
    return wheelhouse


def make_user_venv(work: Path, logs: Path) -> Path:
    venv = _venv(work / "user-venv", logs / "user-venv.log")
    _run([venv / "bin" / "python", "-m", "pip", "install", TORCH], logs / "install-torch.log", work, venv)
    return venv


def install(venv: Path, wheelhouse: Path, version: str, logs: Path) -> None:
    """scaling-env alone first (the commonest user command), then the other five; each report
    must show our packages coming from the wheelhouse and nothing else coming from it."""
    for name, requirements in (("scaling-env", ENVIRONMENTS[:1]), ("the-other-five", ENVIRONMENTS[1:])):
        report = logs / f"install-{name}.json"
        _run(
            [
                venv / "bin" / "python",
                "-m",
                "pip",
                "install",
                "--find-links",
                wheelhouse,
                "--report",
                report,
                *(f"{r}=={version}" for r in requirements),
            ],
            logs / f"install-{name}.log",
            venv.parent,
            venv,
        )
        for item in json.loads(report.read_text())["install"]:
            name_, url = item["metadata"]["name"], item["download_info"]["url"]
            ours = name_ in ("exactgrade", *ENVIRONMENTS)
            if ours != url.startswith(wheelhouse.as_uri()):
                raise CheckFailed(
                    f"pip installed {name_} from {url} (ours come from the wheelhouse, "
                    f"the rest from the index)"
                )
    _progress("installed torch, then the six environments with --find-links, into a fresh venv")


def assert_isolated(venv: Path, version: str) -> None:
    """The venv imports everything from itself: no path entry in the checkout or in this machine's
    site-packages, and exactgrade reports the built version."""
    modules = [
        "exactgrade",
        "exactgrade.env.toolset",
        "verifiers",
        "torch",
        *(e.replace("-", "_") for e in ENVIRONMENTS),
    ]
    probe = (
        "import importlib, json, sys; files = [importlib.import_module(m).__file__ for m in sys.argv[1:]]; "
        "import exactgrade; print(json.dumps({'path': sys.path, 'files': files, "
        "'version': exactgrade.__version__}))"
    )
    done = _run([venv / "bin" / "python", "-c", probe, *modules], None, venv.parent, venv)
    seen = json.loads(done.stdout)
    machine = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    leaks = [
        p
        for p in seen["path"]
        if p and (Path(p).resolve().is_relative_to(ROOT) or Path(p).resolve() in machine)
    ]
    outside = [f for f in seen["files"] if not Path(f).resolve().is_relative_to(venv.resolve())]
    if leaks or outside or seen["version"] != version:
        raise CheckFailed(
            f"the venv is not isolated: path entries {leaks}, modules from outside it {outside}, "
            f"exactgrade {seen['version']} (built {version})"
        )


def evaluate_all(venv: Path, work: Path, rollouts: int, logs: Path) -> list[EvalOutcome]:
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    # The sandbox keeps its default state directory: its uid locks live there, and a private one would
    # let this run's stale-uid sweep take live sandboxes of other processes on the machine for stale.
    environ = _user_environ(venv) | {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    server_log = logs / "policy-server.log"
    with server_log.open("w") as out:
        server = subprocess.Popen(
            [
                venv / "bin" / "python",
                "-m",
                "exactgrade",
                "policy-server",
                "--policy",
                "reference",
                "--port",
                "0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
            cwd=work,
        )
    try:
        url = _server_url(server, server_log)

        def run(env: str) -> EvalOutcome:
            return evaluate(env, venv, url, runs, rollouts, environ, logs)

        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(run, ENVIRONMENTS))
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _server_url(server: subprocess.Popen, log: Path) -> str:
    """The base URL the policy server prints once it listens (it answers in seconds; the bound is
    for a server that died or hangs)."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline and server.poll() is None:
        for line in log.read_text().splitlines():
            if line.startswith("policy server") and " on http://" in line:
                return line.rsplit(" on ", 1)[1].strip()
        time.sleep(0.2)
    raise CheckFailed(f"the venv's policy server did not start (exit {server.poll()}): see {log}")


def evaluate(
    env: str, venv: Path, url: str, runs: Path, rollouts: int, environ: dict[str, str], logs: Path
) -> EvalOutcome:
    """Real vf-eval of one environment against the reference policy; every trace must score 1.0."""
    command = [venv / "bin" / "vf-eval", env, "-m", "reference", "-n", rollouts, "-r", 1, "-c", 2]
    command += ["--client.base-url", url, "--env.agent.runtime.type", "subprocess", "--no-push", "--no-rich"]
    command += ["-o", runs, "--run.dir", env]
    if env.endswith("-stream"):
        command += ["--env.taskset.show-task-id", "True"]  # the scripted policy finds its script by task id
    log = logs / f"vf-eval-{env}.log"
    started = time.monotonic()
    with log.open("w") as out:
        try:
            done = subprocess.run(
                [str(c) for c in command],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environ,
                cwd=runs.parent,
                timeout=STEP_TIMEOUT,
                check=False,
            )
            status = f"exited {done.returncode}" if done.returncode else None
        except subprocess.TimeoutExpired:
            status = f"ran past {STEP_TIMEOUT} s and was killed"
    seconds = time.monotonic() - started
    problems = [] if status is None else [f"vf-eval {env} {status}: see {log}"]
    passed, judged = judge(env, _traces(runs / env / "traces.jsonl"), rollouts)
    return EvalOutcome(env, seconds, passed, (*problems, *judged))


def judge(env: str, traces: list[dict], expected: int) -> tuple[int, list[str]]:
    """(rollouts that scored the reference's 1.0, one line per problem): a missing trace, a
    flagged rollout (not ok, or errors) or a reward below 1.0 is a problem."""
    problems = [] if len(traces) == expected else [f"{env}: {len(traces)} traces, expected {expected}"]
    passed = 0
    for trace in traces:
        rewards = (trace.get("rewards") or {}).values()
        reward = sum((r.get("score") or 0.0) * r.get("weight", 1.0) for r in rewards)
        if trace.get("ok") is True and not trace.get("errors") and reward == 1.0:
            passed += 1
            continue
        info = trace.get("info") or {}
        task = ((trace.get("task") or {}).get("data") or {}).get("id")
        why = info.get("scoring_error") or info.get("reason") or trace.get("errors") or "no reason recorded"
        if trace.get("ok") is not True or trace.get("errors"):
            problems.append(f"{env} {task}: flagged as a harness failure ({why})")
        else:
            problems.append(f"{env} {task}: reward {reward}, below the reference's 1.0 ({why})")
    return passed, problems


_STARTED = time.monotonic()


def _progress(message: str) -> None:
    print(f"check_install: [{time.monotonic() - _STARTED:4.0f} s] {message}", flush=True)


def _traces(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [t for line in path.read_text().splitlines() if line.strip() for t in json.loads(line)["traces"]]


def _venv(where: Path, log: Path) -> Path:
    shutil.rmtree(where, ignore_errors=True)
    _run([sys.executable, "-m", "venv", where], log, where.parent)
    return where


def _user_environ(venv: Path | None) -> dict[str, str]:
    """This process's environment minus what would let a venv see the checkout or other packages."""
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV", "PYTHONUSERBASE")
    environ = {k: v for k, v in os.environ.items() if k not in drop}
    environ["PYTHONNOUSERSITE"] = "1"
    if venv is not None:
        environ["PATH"] = f"{venv / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
        environ["VIRTUAL_ENV"] = str(venv)
    return environ


def _run(command: list, log: Path | None, cwd: Path, venv: Path | None = None) -> subprocess.CompletedProcess:
    """Run one step from `cwd` (never the checkout); its output goes to `log` (kept on failure)."""
    try:
        done = subprocess.run(
            [str(c) for c in command],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=_user_environ(venv),
            timeout=STEP_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"`{' '.join(map(str, command[:4]))} ...` ran past {STEP_TIMEOUT} s") from None
    if log is not None:
        with log.open("a") as out:
            out.write(f"$ {' '.join(map(str, command))}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise CheckFailed(
            f"`{' '.join(map(str, command[:4]))} ...` exited {done.returncode}"
            f"{f' (log: {log})' if log else ''}: " + " | ".join(tail)
        )
    return done


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


if __name__ == "__main__":
    sys.exit(main())
