"""Every source as prime-rl's orchestrator consumes it, step by step as its source does them
(PrimeIntellect-ai/prime-rl `src/prime_rl/orchestrator/envs.py`, `Env.start`, at 559b447):

    taskset = vf.load_taskset(self.config.env.taskset)
    if type(taskset).INFINITE:
        self.tasks = iter(taskset); self.num_tasks = None
    else:
        materialized = await asyncio.to_thread(lambda: list(taskset))

and its `DifficultyPoolSampler` (`orchestrator/curriculum/samplers/pool.py`), which needs a finite
Sequence of tasks with unique `Task.key`s. The class decides: the datasets and the generated pools
are finite and their list ends; the streams are infinite and yield lazily."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter

import pytest
import verifiers.v1 as vf
from verifiers.v1.utils.loaders import resolve_env_config

from exactgrade.env.taskset import ExactgradeStream, ExactgradeTaskset
from exactgrade.family import families, generate

POOL = {"source": "generated", "size": 24, "seed": 5, "levels": "2-4"}
SOURCES = [  # (environment id, taskset options, finite, tasks a finite list holds)
    ("scaling-env", {}, True, 35),
    ("pytorch-env", {}, True, 45),
    ("deeplearning-env", {}, True, 36),
    ("scaling-env", POOL, True, 24),
    ("pytorch-env", {**POOL, "families": "linear_layer,softmax_rows"}, True, 24),
    ("deeplearning-env", POOL, True, 24),
    ("scaling-env-stream", {"seed": 5}, False, None),
    ("pytorch-env-stream", {"levels": "1"}, False, None),
    ("deeplearning-env-stream", {"levels": "5"}, False, None),
]


def orchestrator_start(env_id: str, options: dict) -> tuple[list[vf.Task] | None, object]:
    """`Env.start`'s taskset half: load the taskset, then let the class decide."""
    config = resolve_env_config({"taskset": {"id": env_id, **options}}).taskset
    taskset = vf.load_taskset(config)
    if type(taskset).INFINITE:
        return None, iter(taskset)
    return asyncio.run(asyncio.to_thread(lambda: list(taskset))), taskset


@pytest.mark.parametrize(("env_id", "options", "finite", "count"), SOURCES,
                         ids=[f"{e}-{o.get('source', 'stream' if e.endswith('stream') else 'dataset')}"
                              for e, o, _, _ in SOURCES])
@pytest.mark.timing
def test_the_orchestrator_materialises_finite_sources_and_streams_infinite_ones(env_id, options, finite,
                                                                                 count):
    listed, tasks = (None, None)
    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.update(result=orchestrator_start(env_id, options)),
                              daemon=True)
    worker.start()
    worker.join(600)  # a list(load()) on an endless generator would never return: fail, not hang
    assert not worker.is_alive(), f"{env_id}: list(taskset) did not end"
    listed, tasks = outcome["result"]
    if finite:
        assert listed is not None and len(listed) == count
        keys = [task.key for task in listed]
        assert not [k for k, n in Counter(keys).items() if n > 1], "Task.key must be unique (difficulty_pool)"
        again = orchestrator_start(env_id, options)[0]
        assert [t.data.model_dump() for t in again] == [t.data.model_dump() for t in listed]  # fixed order
    else:
        assert listed is None
        started = time.monotonic()
        first = list(itertools.islice(tasks, 3))  # lazily: three tasks are three generations, not a list
        assert len(first) == 3 and len({t.key for t in first}) == 3
        assert time.monotonic() - started < 300


def test_infinity_is_a_class_property_and_the_pool_keeps_the_stream_order():
    assert ExactgradeTaskset.INFINITE is False and ExactgradeStream.INFINITE is True
    config = resolve_env_config({"taskset": {"id": "scaling-env", **POOL}}).taskset
    pool = list(vf.load_taskset(config))
    stream = vf.load_taskset(resolve_env_config({"taskset": {
        "id": "scaling-env-stream", "seed": 5, "levels": "2-4"}}).taskset)
    names, levels = families("scaling"), (2, 3, 4)
    for position, (a, b) in enumerate(zip(pool, itertools.islice(iter(stream), len(pool)), strict=True)):
        level, j = levels[position % 3], position // 3  # level fastest, then family, then index
        expected = generate("scaling", seed=5, index=j // len(names), level=level,
                            family=names[j % len(names)])
        assert a.data.id == b.data.id == expected.id
        assert (a.data.family, a.data.level, a.data.seed, a.data.index) == (expected.family, level, 5,
                                                                            j // len(names))


@pytest.mark.parametrize(("options", "message"), [
    ({"size": 0}, "size must be >= 1"),
    ({"band": "0.9-0.1"}, "band must be LOW-HIGH"),
    ({"band": "half"}, "band must be LOW-HIGH"),
    ({"levels": "0-2"}, "levels from 1 to 5"),
    ({"seed": -1}, "seed must be >= 0"),
])
def test_bad_pool_options_are_refused_with_the_reason(options, message):
    with pytest.raises(ValueError, match=message):
        resolve_env_config({"taskset": {"id": "scaling-env", "source": "generated", **options}})


def test_calibration_needs_the_generated_source():
    with pytest.raises(ValueError, match="calibration selects cells of the generated pool"):
        resolve_env_config({"taskset": {"id": "scaling-env", "calibration": "calibration.json"}})
