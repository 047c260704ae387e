"""Keys from the instance, never from a re-draw: a generated task's TaskData carries its inputs, the
draw they came from and the stream version; a worker checks them against the id (one sampler
call) and keys them with the family's reference, or refuses with the reason (flagged). An
orchestrator and a worker whose acceptance differs (here: the worker's rejects the very draw the
orchestrator accepted, as a CPU-dependent pytorch acceptance can) still grade the prompt's
instance, through a real env server and a real rollout."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from exactgrade import compare, generate, get_task, wire
from exactgrade.env.instances import InstanceRefused, attempt_of, instance
from exactgrade.env.serving import Episode, ServerProcess, TasksetOptions, drive
from exactgrade.env.taskset import ExactgradeData, ExactgradeTask, HarnessFailure, generated_data
from exactgrade.family import LEVELS, families
from exactgrade.scripted.server import serve

FAMILY = families("scaling")[0]
TASK = generate("scaling", seed=21, index=0, level=2, family=FAMILY)


@pytest.mark.parametrize("domain", ["scaling", "deeplearning", "pytorch"])
def test_the_carried_instance_gives_the_generators_key_at_every_level(domain):
    for level in LEVELS:
        task = generate(domain, seed=3, index=level, level=level)
        data = generated_data(domain, task)
        assert data.attempt == attempt_of(task)
        keyed = ExactgradeTask(data).instance()
        assert keyed.inputs == task.inputs and wire.encode(keyed.expected) == wire.encode(task.expected)
        assert keyed.policy == task.policy and keyed.program == task.program


OTHER = generate("scaling", seed=21, index=1, level=2, family=FAMILY)
DATA = generated_data("scaling", TASK)
REFUSALS = [  # (what the TaskData says instead, the reason given)
    ({"inputs": wire.encode(dict(OTHER.inputs))}, "the TaskData's inputs are not draw"),
    ({"stream": "exactgrade-families-v1"}, "was generated under stream 'exactgrade-families-v1'"),
    ({"attempt": None}, "TaskData names no draw"),
    ({"attempt": DATA.attempt + 1}, f"not draw {DATA.attempt + 1}|rejects draw {DATA.attempt + 1}"),
    ({"domain": "pytorch"}, "is a scaling task, but its TaskData says pytorch"),
    ({"id": "sc-000"}, "'sc-000' is not a generated task id"),
    ({"id": TASK.id.replace(FAMILY, "no_such_family")}, "unknown family 'no_such_family'"),
]


@pytest.mark.parametrize(("change", "reason"), REFUSALS, ids=[next(iter(c)) + str(i) for i, (c, _) in
                                                            enumerate(REFUSALS)])
def test_taskdata_that_is_not_the_named_instance_is_refused_with_the_reason(change, reason):
    task = ExactgradeTask(DATA.model_copy(update=change))
    with pytest.raises(InstanceRefused, match=reason):
        task.instance()
    with pytest.raises(HarnessFailure, match=reason):  # before the model runs: flagged, never graded
        asyncio.run(task.play([("execute_code", TASK.program)]))


def test_the_instance_is_never_sampled_again():
    """The key function takes the carried inputs: the generator's rejection loop is not entered."""
    import exactgrade.family as family

    calls = []
    original = family.build_instance
    family.build_instance = lambda *a, **k: calls.append(a) or original(*a, **k)
    try:
        instance.cache_clear()
        ExactgradeTask(DATA).instance()
    finally:
        family.build_instance = original
    assert calls == []


SITECUSTOMIZE = '''
"""This worker's acceptance differs from the orchestrator's: it rejects one draw the orchestrator accepted."""
import dataclasses

import exactgrade.domains.scaling as domain
from exactgrade import wire

REFUSED = {refused!r}


def _differently(family):
    original = family.reject

    def reject(task):
        if wire.encode(dict(task.inputs)) == REFUSED:
            return "this worker's acceptance rejects this draw"
        return original(task) if original is not None else None

    return dataclasses.replace(family, reject=reject)


domain.FAMILIES = tuple(_differently(f) if f.name == {family!r} else f for f in domain.FAMILIES)
'''


@pytest.fixture(scope="module")
def disagreeing_worker(tmp_path_factory) -> dict[str, str]:
    """The environment of a process whose acceptance rejects the orchestrator's draw of TASK."""
    where = tmp_path_factory.mktemp("worker")
    (where / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE).format(
        refused=wire.encode(dict(TASK.inputs)), family=FAMILY))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def reference_server() -> Iterator[str]:
    httpd = serve("reference")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_a_worker_that_accepts_another_draw_still_grades_the_prompts_instance(disagreeing_worker,
                                                                               reference_server, tmp_path):
    # the two sides really disagree: rebuilt from the id there, the task is another instance,
    # and the prompt's correct answer fails that instance's key
    redraw = ("import sys; from exactgrade import get_task, wire; t = get_task(sys.argv[1]); "
              "print(wire.encode(dict(t.inputs))); print(wire.encode(t.expected))")
    done = subprocess.run([sys.executable, "-c", redraw, TASK.id], env=disagreeing_worker,
                          capture_output=True, text=True, timeout=300, check=True)
    worker_inputs, worker_key = done.stdout.splitlines()
    assert worker_inputs != wire.encode(dict(TASK.inputs))
    assert not compare(wire.decode(worker_key), TASK.expected, TASK.policy).ok

    shown = generated_data("scaling", TASK, show_task_id=True)  # what the orchestrator renders and sends
    altered = shown.model_copy(update={"inputs": wire.encode(dict(OTHER.inputs))})
    episodes = [Episode(shown.model_dump(mode="json"), reference_server, "reference"),
                Episode(altered.model_dump(mode="json"), reference_server, "reference")]
    with (tmp_path / "server.log").open("w") as log, \
            ServerProcess("scaling-env", 1, TasksetOptions(source="generated", seed=21, show_task_id=True),
                          log=log, environ=disagreeing_worker) as server:
        graded, refused = asyncio.run(drive(server.address, episodes, concurrency=2, episode_timeout=600))
    assert (graded.outcome, graded.reward, graded.reason) == ("passed", 1.0, "passed"), graded
    assert refused.outcome == "flagged" and refused.reward == 0.0, refused
    assert "the TaskData's inputs are not draw" in refused.reason


def test_the_data_round_trips_through_the_wire_form_a_trainer_sends():
    again = ExactgradeData.model_validate(DATA.model_dump(mode="json"))
    assert again == DATA and ExactgradeTask(again).instance().id == TASK.id
    assert get_task(TASK.id).inputs == TASK.inputs  # this process's own acceptance: the orchestrator's
