"""scaling-env served the way a trainer serves it: verifiers' env-server pool (`serve_env`, a static
pool of 2 spawned workers on a TCP loopback address) in its own process, driven from this process
with `EnvClient` against the real scripted policy servers. Every reference episode scores 1.0,
every mutant 0, each verdict equals a serial in-process grading of the same task and script, both
workers serve, keys of generated tasks are built in the workers from the instance their TaskData
carries, and once the server is stopped nothing of its workers, tool servers or sandboxes is left."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_leftovers import alive, children, leftovers, tool_server

from exactgrade.env.serving import Episode, ServerProcess, TasksetOptions, drive, load_tasks, main
from exactgrade.env.taskset import ExactgradeData, ExactgradeTask, ExactgradeTaskConfig
from exactgrade.family import parse_generated_id
from exactgrade.scripted.server import find_task, serve

GENERATED = TasksetOptions(source="generated", seed=11, levels="1-5", show_task_id=True)
"""The server's taskset, as a trainer on a generated stream would configure it (workers never load it)."""
TASKS_PER_SOURCE = 4
POLICIES = {"reference": "passed", "mutant": "wrong"}


@pytest.fixture(scope="module")
def policy_servers() -> Iterator[dict]:
    servers = {policy: serve(policy) for policy in POLICIES}
    for httpd in servers.values():
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield servers
    for httpd in servers.values():
        httpd.shutdown()
        httpd.server_close()


def pool_workers(server: int) -> list[int]:
    """The spawned worker processes of the pool broker `server` (not its resource tracker)."""
    return [pid for pid in children(server) if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def serially(task_data: dict, httpd) -> tuple[float, str]:
    """The same task and script graded in this process, one call after the other: the policy
    server's own script for the task, sent to a real sandbox of an in-process tool server and
    graded by the environment's reward (no model loop, no pool)."""
    task = ExactgradeTask(ExactgradeData.model_validate(task_data), ExactgradeTaskConfig())
    script = httpd.model.script(find_task(httpd.model.catalog, task.data.prompt), httpd.model.policy)
    argument = {"execute_code": "code", "bash": "command"}
    trace = asyncio.run(task.play([(s.tool, s.arguments[argument[s.tool]]) for s in script.steps]))
    return trace.rewards["correctness"].score, trace.info["reason"]


def test_a_static_pool_of_two_workers_grades_like_a_serial_run_and_leaves_nothing(policy_servers, tmp_path):
    tasks = (load_tasks("scaling-env", GENERATED, TASKS_PER_SOURCE)
             + load_tasks("scaling-env", TasksetOptions(), TASKS_PER_SOURCE))
    assert sum(parse_generated_id(t["id"]) is not None for t in tasks) == TASKS_PER_SOURCE
    episodes = [Episode(task, f"http://127.0.0.1:{httpd.server_address[1]}/v1", policy)
                for task in tasks for policy, httpd in policy_servers.items()]
    log = (tmp_path / "server.log").open("w")
    with ServerProcess("scaling-env", 2, GENERATED, log=log) as server:
        assert server.address.startswith("tcp://127.0.0.1:")
        # bounded: a broken server must fail this test, not hang the suite
        results = asyncio.run(drive(server.address, episodes, concurrency=len(episodes), episode_timeout=300))
        workers = pool_workers(server.pid)
        tool_servers = [p for w in workers for p in (tool_server(w) or ())]
        assert len(workers) == 2 and len(tool_servers) == 4, (workers, tool_servers)
        code = server.stop()
    assert code == 0, (tmp_path / "server.log").read_text()[-3000:]

    assert len(results) == 16
    for result in results:
        expected = (POLICIES[result.model], float(result.model == "reference"))
        assert (result.outcome, result.reward) == expected, result
        assert (result.reason == "passed") == (result.model == "reference"), result
    assert {r.worker_pid for r in results} == set(workers)  # least-busy dispatch: 8 each
    assert sorted(Counter(r.worker_pid for r in results).values()) == [8, 8]
    serial = {(t["id"], policy): serially(t, httpd)
              for t in tasks for policy, httpd in policy_servers.items()}
    assert {(r.task_id, r.model): (r.reward, r.reason) for r in results} == serial
    for httpd in policy_servers.values():
        assert httpd.model.stats()["unknown_prompts"] == 0

    assert not [pid for pid in workers + tool_servers if alive(pid)]
    uids = {r.sandbox_uid for r in results}
    assert None not in uids  # a uid may serve two episodes one after the other
    assert leftovers(uids) == {}
    assert not [r.runtime_dir for r in results if Path(r.runtime_dir).exists()]


@pytest.mark.parametrize(("argv", "message"), [
    (["serve", "scaling-env", "--source", "generated", "--families", "nope"],
     "unknown family 'nope' of the scaling domain"),
    (["serve", "scaling-env", "--levels", "0-9"], "levels from 1 to 5"),
])
def test_a_bad_taskset_is_refused_before_any_worker_starts(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
