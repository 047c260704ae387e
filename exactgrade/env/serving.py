"""Serve an environment the way a trainer does, and drive it: verifiers' env-server pool.

Trainers (prime-rl) do not run `vf-eval`: a launcher starts an env-server process that calls
`verifiers.v1.serve.serve_env` (a ZMQ broker over spawned worker processes, least-busy dispatch),
and the trainer, in another process, loads the taskset itself and sends each episode's TaskData
with `EnvClient.run`. This module does both halves for scaling-env, pytorch-env and
deeplearning-env, with the subprocess runtime (the harness and the sandbox tool server on this
host):

    python -m exactgrade.env.serving serve scaling-env --workers 2
    python -m exactgrade.env.serving run scaling-env --address tcp://127.0.0.1:PORT \\
        --base-url http://127.0.0.1:PORT/v1 --model reference -n 16 -c 8

Each worker re-imports the environment, rebuilds tasks from the TaskData it is sent (the answer
key is looked up in the worker from the task id) and launches its own shared sandbox tool
server. SIGTERM to the server stops the broker, which stops its workers; each worker stops its
tool server, which reclaims its sandboxes (exactgrade.env.supervise).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import functools
import itertools
import json
import logging
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from exactgrade.cli_args import http_url, non_empty, non_negative_int, positive_int

ENVS = ("scaling-env", "pytorch-env", "deeplearning-env",
        "scaling-env-stream", "pytorch-env-stream", "deeplearning-env-stream")
STOP_TIMEOUT = 60.0
"""Seconds a stopped server gets to stop its workers (verifiers joins each for up to 10 s)."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class TasksetOptions:
    """The `--env.taskset.*` knobs both halves must agree on (the client builds the tasks)."""

    source: str = "dataset"
    seed: int = 0
    levels: str = "1-5"
    families: str | None = None
    size: int | None = None
    """With source generated: the pool's size (None: the taskset's default)."""
    show_task_id: bool = False

    def config(self, env: str) -> dict[str, Any]:
        options: dict[str, Any] = {"id": env, "seed": self.seed, "levels": self.levels,
                                   "show_task_id": self.show_task_id}
        if not env.endswith("-stream"):  # a stream has no source and no size: it is generated, endless
            options["source"] = self.source
            if self.size is not None:
                options["size"] = self.size
        return options if self.families is None else {**options, "families": self.families}

    def arguments(self) -> list[str]:
        """These options as `python -m exactgrade.env.serving` arguments."""
        return (["--source", self.source, "--seed", str(self.seed), "--levels", self.levels]
                + (["--families", self.families] if self.families else [])
                + (["--size", str(self.size)] if self.size is not None else [])
                + (["--show-task-id"] if self.show_task_id else []))


def env_config(env: str, options: TasksetOptions = TasksetOptions(), backend: str = "auto"):
    """The resolved verifiers env config: the taskset, the subprocess runtime, the sandbox backend."""
    from verifiers.v1.utils.loaders import resolve_env_config

    return resolve_env_config({"taskset": {**options.config(env), "tools": {"backend": backend}},
                               "agent": {"runtime": {"type": "subprocess"}}})


def load_tasks(env: str, options: TasksetOptions, limit: int) -> list[dict[str, Any]]:
    """The first `limit` tasks' TaskData, dumped for the wire, as the trainer side loads them."""
    from verifiers.v1.utils.loaders import load_taskset

    taskset = load_taskset(env_config(env, options).taskset)
    return [task.data.model_dump(mode="json") for task in itertools.islice(iter(taskset), limit)]


# -- the server half -------------------------------------------------------------------------


class _PrintAddress:
    """serve_env's `address_queue`: the bound address (an OS-assigned port) on stdout's first line."""

    def __init__(self, env: str, workers: int) -> None:
        self.env, self.workers = env, workers

    def put(self, address: str) -> None:
        print(f"env server ({self.env}, {self.workers} workers) on {address}", flush=True)


def serve(env: str, workers: int, address: str, options: TasksetOptions, backend: str = "auto",
          max_concurrent: int | None = None, log_level: str = "WARNING") -> None:
    """Host `env` in a static pool of `workers` processes (1: verifiers' lone in-process server)
    until SIGTERM. Blocks; prints the bound address first."""
    from verifiers.v1.serve import env_config_data, serve_env

    with contextlib.suppress(Exception):  # the launcher died: stop, so the workers stop too
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    serve_env(max_workers=workers, elastic=False, address=address,
              address_queue=_PrintAddress(env, workers),
              log_setup=functools.partial(logging.basicConfig, level=log_level),
              config_data=env_config_data(env_config(env, options, backend)),
              max_concurrent=max_concurrent)


class ServerProcess:
    """`python -m exactgrade.env.serving serve ...` as a child process (a context manager)."""

    def __init__(self, env: str, workers: int, options: TasksetOptions = TasksetOptions(),
                 backend: str = "auto", log: Any = None, environ: Mapping[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "exactgrade.env.serving", "serve", env, "--workers", str(workers),
                   "--backend", backend, *options.arguments()]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True,
                                        env=None if environ is None else dict(environ))
        line = self.process.stdout.readline() if self.process.stdout else ""
        if " on tcp://" not in line:
            self.stop()
            raise RuntimeError(f"the env server did not start: {line!r} (exit {self.process.returncode})")
        self.address = line.rsplit(" on ", 1)[1].strip()

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> int | None:
        """SIGTERM (the way a launcher stops it); SIGKILL if it is still there after STOP_TIMEOUT.
        Returns its exit code, or None when it had to be killed."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                return self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return None
        return self.process.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the client half -------------------------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    """One episode to run: a task's wire TaskData and the model endpoint that plays it."""

    task: Mapping[str, Any]
    base_url: str
    model: str


@dataclass(frozen=True)
class EpisodeResult:
    task_id: str
    model: str
    outcome: str
    """"passed", "wrong" or "flagged" (exactgrade.demo.classify; "flagged": never rewarded)."""
    reason: str
    reward: float
    worker_pid: int | None
    """The env-server worker process that ran the rollout (recorded by the task at finalize)."""
    sandbox_uid: int | None
    runtime_dir: str | None
    """verifiers' per-rollout subprocess-runtime directory (deleted at the rollout's teardown)."""
    latency: float | None
    """Seconds from boot to the end of scoring, minus the model's own time (None: no timing)."""
    seconds: float
    """Wall time of the request, as the client saw it."""


def _result(episode: Episode, record: dict[str, Any] | None, error: str | None,
            seconds: float) -> EpisodeResult:
    from exactgrade.demo import classify, trace_latency, trace_reward

    task_id, model = str(episode.task.get("id")), episode.model
    traces = (record or {}).get("traces") or []
    if error is not None or not traces:
        errors = (record or {}).get("errors") or [{}]
        why = error or str(errors[-1].get("message") or errors[-1].get("type") or "the episode has no trace")
        return EpisodeResult(task_id, model, "flagged", why, 0.0, None, None, None, None, seconds)
    trace = traces[0]
    outcome, reason = classify(trace)
    reward = trace_reward(trace)
    info = trace.get("info") or {}
    try:
        latency: float | None = trace_latency(trace)[0]
    except (KeyError, TypeError, AttributeError):
        latency = None
    runtime = (trace.get("agent") or {}).get("runtime") or {}
    return EpisodeResult(task_id, model, outcome, reason, reward, info.get("env_pid"),
                         (info.get("sandbox") or {}).get("sandbox_uid"), runtime.get("id"), latency, seconds)


EPISODE_TIMEOUT = 900.0
"""Seconds an episode may wait for the server's reply. verifiers' EnvClient.run has no deadline,
and a worker that died (or a server that never got its tool server up) never replies."""


async def drive(address: str, episodes: Sequence[Episode], concurrency: int,
                startup_timeout: float = 600.0,
                episode_timeout: float = EPISODE_TIMEOUT) -> list[EpisodeResult]:
    """Run `episodes` through the env server at `address`, at most `concurrency` in flight, as a
    trainer's orchestrator does (EnvClient.run with the task's TaskData). Results in input order;
    a request the server failed, or did not answer within `episode_timeout` seconds, is a flagged
    result with the reason."""
    import verifiers.v1 as vf
    from verifiers.v1.serve import EnvClient

    client = EnvClient(address)
    gate = asyncio.Semaphore(concurrency)

    async def one(episode: Episode) -> EpisodeResult:
        async with gate:
            started = time.monotonic()
            try:
                record = await asyncio.wait_for(client.run(
                    client=vf.EvalClientConfig(base_url=episode.base_url, api_key_var="EXACTGRADE_NO_KEY"),
                    model=episode.model, sampling=vf.SamplingConfig(), task_data=dict(episode.task)),
                    episode_timeout)
            except RuntimeError as e:  # the server replied with an error
                return _result(episode, None, f"env server error: {e}", time.monotonic() - started)
            except TimeoutError:
                return _result(episode, None, f"no reply from the env server within {episode_timeout:g} s",
                               time.monotonic() - started)
            return _result(episode, record.model_dump(mode="json"), None, time.monotonic() - started)

    try:
        await client.wait_for_server_startup(timeout=startup_timeout, interval=0.2)
        return list(await asyncio.gather(*(one(e) for e in episodes)))
    finally:
        await client.close()


# -- the command line ------------------------------------------------------------------------


def _add_taskset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env", choices=ENVS)
    parser.add_argument("--source", choices=("dataset", "generated"), default="dataset",
                        help="--env.taskset.source: the canonical tasks or a generated stream")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="--env.taskset.seed (generated)")
    parser.add_argument("--levels", type=non_empty, default="1-5", help="--env.taskset.levels (generated)")
    parser.add_argument("--families", type=non_empty, default=None,
                        help="--env.taskset.families (generated; default all)")
    parser.add_argument("--size", type=positive_int, default=None,
                        help="--env.taskset.size (generated: the pool's size)")
    parser.add_argument("--show-task-id", action="store_true",
                        help="--env.taskset.show-task-id (generated: the scripted policies need it)")


def build_parser() -> argparse.ArgumentParser:
    from exactgrade.cli import OneLineParser

    parser = OneLineParser(prog="python -m exactgrade.env.serving", description=__doc__.splitlines()[0],
                           epilog=__doc__.split("\n\n", 1)[1],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    server = sub.add_parser("serve", help="host an environment in a static env-server pool until SIGTERM")
    _add_taskset_arguments(server)
    server.add_argument("--workers", type=positive_int, default=2,
                        help="worker processes (1: verifiers' lone in-process server, no broker)")
    server.add_argument("--address", type=non_empty, default="tcp://127.0.0.1:0",
                        help="ZMQ address to bind (default: a free loopback port, printed on stdout)")
    server.add_argument("--backend", choices=("auto", "namespaces", "landlock"), default="auto",
                        help="--env.taskset.tools.backend: the sandbox backend")
    server.add_argument("--max-concurrent", type=positive_int, default=None,
                        help="episodes in flight per worker (default: unbounded)")
    server.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="WARNING",
                        help="verifiers' log level in the broker and the workers (stderr)")
    client = sub.add_parser("run", help="drive episodes through a running env server with EnvClient")
    _add_taskset_arguments(client)
    client.add_argument("--address", type=non_empty, required=True, help="the env server's ZMQ address")
    client.add_argument("--base-url", type=http_url, required=True, help="OpenAI-compatible model endpoint")
    client.add_argument("--model", type=non_empty, required=True, help="model name sent to --base-url")
    client.add_argument("-n", "--num-tasks", type=positive_int, default=16,
                        help="tasks (first N of the taskset)")
    client.add_argument("-r", "--rollouts", type=positive_int, default=1, help="episodes per task")
    client.add_argument("-c", "--concurrency", type=positive_int, default=8, help="episodes in flight")
    return parser


def check_taskset(env: str, options: TasksetOptions) -> None:
    """Build (not load) the taskset, so a bad option is refused here, with its reason, and not
    by every spawned worker after the server has announced itself."""
    from verifiers.v1.utils.loaders import load_taskset

    load_taskset(env_config(env, options).taskset)


def _reason(error: ValueError) -> str:
    from pydantic import ValidationError

    if isinstance(error, ValidationError) and error.errors():
        return str(error.errors()[0]["msg"]).removeprefix("Value error, ")
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = TasksetOptions(args.source, args.seed, args.levels, args.families, args.size, args.show_task_id)
    try:
        check_taskset(args.env, options)
    except ValueError as e:
        print(f"{parser.prog} {args.command}: error: {_reason(e)}", file=sys.stderr)
        return 2
    if args.command == "serve":
        serve(args.env, args.workers, args.address, options, args.backend, args.max_concurrent,
              args.log_level)
        return 0
    tasks = load_tasks(args.env, options, args.num_tasks)
    episodes = [Episode(task, args.base_url, args.model) for task in tasks for _ in range(args.rollouts)]
    started = time.monotonic()
    results = asyncio.run(drive(args.address, episodes, args.concurrency))
    seconds = time.monotonic() - started
    for result in results:
        print(json.dumps(asdict(result)))
    outcomes = Counter(r.outcome for r in results)
    workers = Counter(r.worker_pid for r in results)
    tally = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    print(f"{len(results)} episodes in {seconds:.1f} s: {tally}"
          + f"; served by workers {dict(workers)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
