"""Shared fixtures for the unit tests."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sandbox_leftovers

from exactgrade.sandbox import backends
from exactgrade.strategies import typed_equal as _typed_equal


@pytest.fixture(scope="session")
def typed_equal() -> Callable[[Any, Any], bool]:
    """exactgrade.strategies.typed_equal: same types and values all the way down (2 != 2.0)."""
    return _typed_equal


@pytest.fixture(params=("namespaces", "landlock"))
def backend(request: pytest.FixtureRequest) -> str:
    """Each isolating sandbox backend in turn; skipped where this machine cannot run it."""
    reason = backends.probe().unavailable(request.param)
    if reason is not None:
        pytest.skip(f"{request.param} backend unavailable on this machine: {reason}")
    return request.param


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `alone` every test of a module that starves the host on purpose (it uses cpu_hogs):
    a test beside it would get a small share of a CPU and could run out of its own time limits."""
    for item in items:
        if getattr(getattr(item, "module", None), "cpu_hogs", None) is sandbox_leftovers.cpu_hogs:
            item.add_marker(pytest.mark.alone)


def _locks() -> tuple[Path, Path] | None:
    """(gate, run) lock files shared by the workers of this pytest-xdist run; None without xdist."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id is None:
        return None
    base = Path(tempfile.gettempdir()) / f"exactgrade-pytest-{run_id}"
    return base.with_suffix(".gate"), base.with_suffix(".run")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under `-n 2`, an `alone` test (setup, call, teardown) runs while no other test does: every
    test holds the run lock shared, an `alone` one exclusive. It holds the gate while it waits, so
    the other worker starts no new test meanwhile and the wait ends with that worker's current test."""
    locks = _locks()
    if locks is None:
        yield
        return
    alone = item.get_closest_marker("alone") is not None
    with locks[0].open("a") as gate, locks[1].open("a") as run:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(run, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


_RUNS: list[str] = []
"""The xdist run this process controls (its workers' PYTEST_XDIST_TESTRUNUID), for the clean-up."""


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    _RUNS.append(node.workerinput["testrunuid"])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller, once every worker is done, removes the run's lock files."""
    for run_id in set(_RUNS):
        for end in ("gate", "run"):
            (Path(tempfile.gettempdir()) / f"exactgrade-pytest-{run_id}.{end}").unlink(missing_ok=True)
