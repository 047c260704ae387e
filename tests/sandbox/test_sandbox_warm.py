"""What the tool server does up front so that dozens of rollouts starting together do not queue:
warm() starts the zygote the next sandbox of that profile forks from, and parallel sandboxes of
one process claim distinct uids without retrying every held one from the start."""

from __future__ import annotations

import threading

import pytest

from exactgrade.sandbox import Sandbox, backends, uids, warm
from exactgrade.sandbox.runtime import default_state_dir


def test_warm_starts_the_zygote_the_next_sandbox_forks_from(backend: str) -> None:
    warm("python", backend)
    started = {key: zygote for key, zygote in backends._zygotes.items() if key[:2] == (backend, "python")}
    assert len(started) == 1 and next(iter(started.values())).alive()
    with Sandbox(inputs={"x": 3}, backend=backend) as sandbox:
        assert sandbox._zygote is next(iter(started.values()))
        assert sandbox.execute_code("print(x * 2)") == "6\n"


@pytest.mark.parametrize(("profile", "backend_name", "error"), [
    ("gpu", "auto", "profile='gpu' must be one of"),
    ("python", "chroot", "chroot"),
])
def test_warm_refuses_what_a_sandbox_would_refuse(profile: str, backend_name: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        warm(profile, backend_name)


def test_the_uid_search_goes_on_after_the_last_claimed_uid() -> None:
    state = default_state_dir()
    first = uids.acquire(state)
    second = uids.acquire(state)
    first.release()
    third = uids.acquire(state)  # the released uid is free again, but the search starts after `second`
    try:
        assert len({first.uid, second.uid, third.uid}) == 3
        in_range = range(uids.UID_BASE, uids.UID_BASE + uids.UID_COUNT)
        assert all(slot.uid in in_range for slot in (first, second, third))
    finally:
        second.release()
        third.release()


def test_parallel_sandboxes_get_distinct_uids_and_all_work(backend: str) -> None:
    sandboxes: list[Sandbox] = []
    errors: list[BaseException] = []

    def open_one(value: int) -> None:
        try:
            sandbox = Sandbox(inputs={"v": value}, backend=backend)
            sandboxes.append(sandbox)
            sandbox.execute_code("result = v + 1")
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        assert len({sandbox.uid for sandbox in sandboxes}) == 8
        assert sorted(sandbox.result() for sandbox in sandboxes) == list(range(1, 9))
    finally:
        for sandbox in sandboxes:
            sandbox.close()
