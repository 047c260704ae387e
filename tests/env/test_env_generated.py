"""Generated tasks in the environments: `--env.taskset.source generated` is a finite, lazy pool,
`<env>-stream` an infinite one; TaskData never carries a key but carries the instance and its
difficulty; the `Task id:` line is shown only when asked; and real `vf-eval` on generated tasks
rewards the reference and no mutant, with level and family in every trace's metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from scaling_env import ScalingTaskset

from exactgrade import generate, get_task, wire
from exactgrade.demo import read_traces, vf_eval_command
from exactgrade.env.taskset import ExactgradeTasksetConfig
from exactgrade.family import families, parse_generated_id
from exactgrade.scripted.server import find_task, serve


def test_the_generated_pool_is_finite_lazy_and_without_keys():
    taskset = ScalingTaskset(ExactgradeTasksetConfig(source="generated", seed=4, levels="2-3", size=6))
    assert type(taskset).INFINITE is False and taskset.bounded
    first = list(taskset)
    names = families("scaling")
    expected_ids = [generate("scaling", seed=4, index=(p // 2) // len(names), level=(2, 3)[p % 2],
                             family=names[(p // 2) % len(names)]).id for p in range(6)]
    assert [t.data.id for t in first] == expected_ids
    for task in first:
        truth = get_task(task.data.id)
        key = wire.encode(truth.expected)
        dumped = task.data.model_dump_json()
        assert key not in dumped and "expected" not in json.loads(dumped)
        assert "Task id:" not in task.data.prompt  # shown only where an option asks for it
        assert wire.decode(task.data.inputs) == dict(truth.inputs)
        assert (task.data.family, task.data.level, task.data.seed, task.data.index) == (
            truth.family, truth.level, truth.seed, truth.index)
    shown = next(iter(ScalingTaskset(ExactgradeTasksetConfig(source="generated", seed=4, show_task_id=True))))
    assert shown.data.prompt.endswith(f"\n\nTask id: {shown.data.id}")
    assert ScalingTaskset(ExactgradeTasksetConfig()).INFINITE is False  # the dataset stays the default


def test_a_filter_keeps_only_the_named_families():
    name = families("scaling")[-1]
    taskset = ScalingTaskset(ExactgradeTasksetConfig(source="generated", families=name, levels="5", size=4))
    assert {parse_generated_id(t.data.id)[1] for t in taskset} == {name}


@pytest.mark.parametrize(("config", "message"), [
    ({"levels": "0-2"}, "levels from 1 to 5"),
    ({"levels": "two"}, "levels from 1 to 5"),
    ({"seed": -1}, "seed must be >= 0"),
])
def test_bad_stream_options_are_refused_with_the_reason(config, message):
    with pytest.raises(ValueError, match=message):
        ExactgradeTasksetConfig(source="generated", **config)


def test_an_unknown_family_is_refused_before_the_run_starts():
    with pytest.raises(ValueError, match="unknown family 'nope' of the scaling domain; known: "):
        ScalingTaskset(ExactgradeTasksetConfig(source="generated", families="nope"))


def test_a_worker_that_never_loaded_the_taskset_keys_the_instance_its_taskdata_carries():
    task = next(iter(ScalingTaskset(ExactgradeTasksetConfig(source="generated", seed=8, levels="4"))))
    code = ("import sys; from exactgrade import wire; from exactgrade.env.taskset import ExactgradeData, "
            "ExactgradeTask; t = ExactgradeTask(ExactgradeData.model_validate_json(sys.stdin.read())); "
            "print(wire.encode(t.answer().expected))")
    done = subprocess.run([sys.executable, "-c", code], input=task.data.model_dump_json(),
                          capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip() == wire.encode(get_task(task.data.id).expected)


def test_the_scripted_policies_find_a_generated_task_from_its_prompt_alone():
    task = next(iter(ScalingTaskset(ExactgradeTasksetConfig(source="generated", seed=2, show_task_id=True))))
    entry = find_task([], task.data.prompt)
    assert entry is not None and entry.task_id == task.data.id
    assert entry.program == get_task(task.data.id).program
    assert find_task([], "Task id: sc-not_a_family-L1-s0-i0") is None


def test_vf_eval_on_a_generated_stream_rewards_the_reference_and_no_mutant(tmp_path):
    servers = {policy: serve(policy) for policy in ("reference", "mutant")}
    for httpd in servers.values():
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
    runs = {}
    try:
        for policy, httpd in servers.items():
            url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
            command = vf_eval_command("scaling-env", policy, url, tmp_path / policy, "scaling-env", limit=4,
                                      concurrency=4, extra=("--env.taskset.source", "generated",
                                                            "--env.taskset.seed", "5",
                                                            "--env.taskset.show-task-id", "True"))
            runs[policy] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True, env=os.environ.copy())
        for process in runs.values():
            output, _ = process.communicate(timeout=600)
            assert process.returncode == 0, output[-3000:]
        stats = {policy: httpd.model.stats() for policy, httpd in servers.items()}
    finally:
        for httpd in servers.values():
            httpd.shutdown()
            httpd.server_close()
    for policy, score in (("reference", 1.0), ("mutant", 0.0)):
        traces = read_traces(tmp_path / policy / "scaling-env" / "traces.jsonl")
        assert len(traces) == 4
        for trace in traces:
            data = trace["task"]["data"]
            level, family = get_task(data["id"]).level, get_task(data["id"]).family
            assert (data["level"], data["family"]) == (level, family)
            assert trace["metrics"]["level"] == level
            assert trace["metrics"][f"passed_level_{level}"] == score
            assert trace["metrics"][f"passed_family_{family}"] == score
            assert trace["ok"] and trace["rewards"]["correctness"]["score"] == score, trace["info"]
            assert (trace["info"]["reason"] == "passed") == (score == 1.0)
        assert stats[policy]["unknown_prompts"] == 0
