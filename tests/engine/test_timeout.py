"""The worker process that puts a hard time limit on work that may never finish."""

from __future__ import annotations

import os
import time

import pytest

from exactgrade import _timeout

FOREVER = 10**6  # seconds: a sleep no test outlives, so its outcome never depends on the machine's speed

pytestmark = pytest.mark.timing  # every test here is about a deadline or waits on a worker


def test_call_returns_the_result() -> None:
    assert _timeout.call("math:factorial", [20], 30.0) == 2432902008176640000


def test_deadline_kills_the_worker_and_the_next_call_works() -> None:
    _timeout.call("math:factorial", [1], 30.0)  # worker started: startup is not part of a deadline
    sleeper = _timeout._idle[-1]  # the worker the next call takes
    with pytest.raises(_timeout.DeadlineExceeded):
        _timeout.call("time:sleep", [FOREVER], 0.5)  # cannot finish: the deadline always passes first
    assert sleeper.process.poll() is not None and sleeper not in _timeout._idle  # killed, not waited for
    assert _timeout.call("math:gcd", [12, 18], 30.0) == 6


def test_exceptions_in_the_worker_become_worker_error() -> None:
    with pytest.raises(_timeout.WorkerError, match="ValueError: invalid literal"):
        _timeout.call("builtins:int", ["not a number"], 30.0)
    assert _timeout.call("builtins:abs", [-3], 30.0) == 3


def test_a_crashed_worker_is_replaced() -> None:
    with pytest.raises(_timeout.WorkerError, match="worker exited"):
        _timeout.call("os:_exit", [3], 30.0)
    assert _timeout.call("builtins:len", ["abc"], 30.0) == 3


def test_shutdown_then_call_starts_a_new_worker() -> None:
    _timeout.call("builtins:len", [""], 30.0)
    idle = list(_timeout._idle)
    assert idle
    _timeout.shutdown()
    assert _timeout._idle == [] and all(worker.process.poll() is not None for worker in idle)
    assert _timeout.call("builtins:len", ["ab"], 30.0) == 2


def test_a_call_never_waits_for_another_callers_worker() -> None:
    import threading

    outcome: list[BaseException] = []

    def hold() -> None:
        try:
            _timeout.call("time:sleep", [FOREVER], FOREVER)  # only shutdown() ends it
        except BaseException as error:
            outcome.append(error)

    holder = threading.Thread(target=hold)
    holder.start()
    while _timeout.in_use() == 0 and holder.is_alive():
        time.sleep(0.01)
    assert _timeout.call("math:gcd", [12, 18], 60.0) == 6  # its own worker, while the other sleeps
    assert _timeout.in_use() == 1 and holder.is_alive()
    _timeout.shutdown()  # ends the sleeping call too
    holder.join()
    assert len(outcome) == 1 and isinstance(outcome[0], _timeout.WorkerError)


def test_no_time_left_sends_nothing_and_spends_no_worker() -> None:
    _timeout.call("builtins:len", [""], 30.0)
    idle = list(_timeout._idle)
    with pytest.raises(_timeout.DeadlineExceeded):
        _timeout.call("builtins:len", [""], 0.0)
    assert _timeout._idle == idle and all(worker.process.poll() is None for worker in idle)


def test_a_forked_child_starts_its_own_worker() -> None:
    _timeout.call("builtins:len", [""], 30.0)
    parent_idle = list(_timeout._idle)
    pid = os.fork()
    if pid == 0:  # child: must not touch the parent's workers
        code = 3
        try:
            fresh = _timeout._idle == [] and _timeout.in_use() == 0
            code = 0 if fresh and _timeout.call("builtins:len", ["abc"], 30.0) == 3 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _timeout._idle == parent_idle and all(worker.process.poll() is None for worker in parent_idle)
    assert _timeout.call("builtins:len", ["ab"], 30.0) == 2
