"""A sandbox's disk budget and its call limit in its own time, on every backend.

Disk: writing past `disk_bytes` (or `max_files`) ends the sandbox as the model's fault and leaves
nothing on disk, whether the budget is the namespaces tmpfs or the landlock accountant.
Time: the call limit is charged against the sandbox's own time (wall time minus what the host kept
it from a CPU), so the tests starve the host for real (cpu_hogs: one busy loop per CPU, each in a cpu
group 16 times a sandbox's on its own CPU, on cgroup v1 or v2) and decide by the mechanism's
accounting, never by speed: work is measured in the sandbox's own CPU seconds, and the hogs' weight
fixes how little of a CPU a sandbox gets. Where the hogs cannot be weighted, those tests skip.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from textwrap import dedent

import pytest
from sandbox_leftovers import FOREVER, cpu_hogs, hogs_unavailable_reason, leftovers

from exactgrade.sandbox import Limits, Sandbox, SandboxDied, backends, calltime, disk
from exactgrade.sandbox.runtime import default_state_dir

MiB = 1 << 20
DISK = Limits(memory_bytes=256 * MiB, disk_bytes=64 * MiB, max_file_bytes=32 * MiB, max_files=2000,
              call_timeout=60)
MANY_ENTRIES = Limits(memory_bytes=256 * MiB, disk_bytes=64 * MiB, max_file_bytes=32 * MiB, max_files=100_000,
                      call_timeout=60)  # room for 16 KiB files past 64 MiB: the bytes stop them

# Each writer ignores the refusals it meets (ENOSPC on a full tmpfs, EFBIG past RLIMIT_FSIZE), as a
# model that does not check errors would; none stops before it holds several times the budget.
SIX_32_MIB_FILES = dedent("""
    for i in range(6):  # once: 192 MiB in one call against 64 MiB, then the call returns
        try:
            open(f'f{i}', 'wb').write(b'x' * (32 << 20))
        except OSError:
            pass
    result = {'ok': 1}
""")
FILL_FILES = dedent("""
    chunk = b'x' * (1 << 20)
    i = 0
    while True:  # 16 MiB files, each under RLIMIT_FSIZE: only the total can stop this
        try:
            with open(f'f{i}', 'wb') as f:
                for _ in range(16):
                    f.write(chunk)
        except OSError as e:
            pass
        i += 1
""")
SLOW_WRITER = dedent("""
    import time
    chunk = b'x' * (1 << 20)
    i = 0
    while True:  # 1 MiB per 10 ms, for ever: every walk sees a little more
        try:
            with open(f's{i}', 'wb') as f:
                for _ in range(4):
                    f.write(chunk)
                    f.flush()
                    time.sleep(0.01)
        except OSError:
            pass
        i += 1
""")
SMALL_FILES = dedent("""
    block = b'x' * (16 << 10)
    i = 0
    while True:  # 16 KiB files for ever: 4096 of them fill 64 MiB
        try:
            open(f'm{i}', 'wb').write(block)
        except OSError:
            pass
        i += 1
""")
EMPTY_FILES = dedent("""
    i = 0
    while True:  # no bytes at all: only the entries count
        try:
            open(f'e{i}', 'w').close()
        except OSError:  # out of tmpfs inodes
            pass
        i += 1
""")
HOLD_DELETED = dedent("""
    import os, time
    chunk = b'x' * (1 << 20)
    held = []
    for i in range(100):  # deleted files still open keep their blocks: the work dir looks empty
        try:
            f = open(f'h{i}', 'wb')
            for _ in range(16):
                f.write(chunk)
            f.flush()
        except OSError:
            pass
        os.unlink(f'h{i}')
        held.append(f)
""") + f"time.sleep({FOREVER})\n"  # until the disk budget ends it
SIX_32_MIB_ALLOCATED = dedent("""
    import os
    for i in range(6):
        fd = os.open(f'f{i}', os.O_WRONLY | os.O_CREAT)
        os.posix_fallocate(fd, 0, 32 << 20)
        os.close(fd)
    result = {'ok': 1}
""")
WRITER = "i = 0\nwhile True:\n    open(f'b{i}', 'wb').write(b'x' * (16 << 20))\n    i += 1\n"
IN_BACKGROUND = f"import subprocess\nsubprocess.Popen(['python3', '-c', {WRITER!r}], start_new_session=True)"


@pytest.mark.timing
@pytest.mark.parametrize(("code", "limits"), [
    (SIX_32_MIB_FILES, DISK),
    (FILL_FILES, DISK),
    (SLOW_WRITER, DISK),
    (SMALL_FILES, MANY_ENTRIES),
    (EMPTY_FILES, DISK),
    (HOLD_DELETED, DISK),
], ids=["fast writer, six 32 MiB files in one call", "fast writer, 16 MiB files for ever",
        "slow writer, 1 MiB per 10 ms", "many small files, 16 KiB each", "many empty files, 2000 entries",
        "deleted files held open"])
def test_writing_past_the_disk_budget_kills_the_sandbox_as_the_models_fault(backend, code, limits):
    """However it writes, a sandbox that goes past its budget is killed, within a
    call or by the check after it (never which one: that is the machine's speed), and no call
    returns while it holds more than its budget."""
    with Sandbox(backend=backend, limits=limits) as sb:
        uid = sb.uid
        with pytest.raises(SandboxDied) as died:
            sb.execute_code(code)
    death = died.value.death
    assert death.cause == "model", death
    budget = f"({limits.disk_bytes} bytes, {limits.max_files} files)"
    assert death.reason == f"the sandbox wrote more than its disk budget {budget} and was killed", death
    size = {"namespaces": f"tmpfs of {limits.disk_bytes} bytes / {limits.max_files} inodes is full",
            "landlock": f"budget {limits.disk_bytes} bytes, {limits.max_files} entries"}[backend]
    assert size in death.evidence, death
    assert leftovers({uid}) == {}  # no process, no cgroup, no work dir
    assert not (default_state_dir() / "work" / str(uid)).exists()


@pytest.mark.timing
def test_deleted_files_held_open_count_without_a_cgroup_too(backend):
    """Without a cgroup the processes holding deleted files are found by the sandbox's uid."""
    with _sandbox(backend, DISK, use_cgroups=False) as sb, pytest.raises(SandboxDied) as died:
        sb.execute_code(HOLD_DELETED)
    death = died.value.death
    assert death.cause == "model" and "disk budget" in death.reason, death
    if backend == "landlock":  # its work dir holds one file at most: the deleted ones put it over
        assert int(re.search(r"\((\d+) bytes of them in deleted files", death.evidence)[1]) > 16 * MiB, death
    else:
        assert "tmpfs of 67108864 bytes / 2000 inodes is full" in death.evidence, death


@pytest.mark.timing
def test_no_call_returns_while_the_sandbox_holds_more_than_its_budget(backend, monkeypatch):
    """The check after a call is never skipped (one throttled to POLL let a call that wrote
    192 MiB against 64 MiB return {'ok': 1}). The stage is forced: POLL of a million seconds leaves
    no walk during the call, so only the check after it can end the sandbox."""
    monkeypatch.setattr(disk, "POLL", float(FOREVER))
    with Sandbox(backend=backend, limits=DISK) as sb:
        assert sb.execute_code("open('a', 'wb').write(b'x' * (24 << 20))") == ""
        with pytest.raises(SandboxDied) as died:
            sb.execute_code(SIX_32_MIB_FILES)
    assert died.value.death.cause == "model" and "disk budget" in died.value.death.reason, died.value.death


@pytest.mark.timing
def test_allocating_without_writing_is_refused_and_the_budget_holds():
    """landlock's work dir is on the host disk, where fallocate() gives any size at once, faster than
    any walk; seccomp refuses it (EOPNOTSUPP, as a filesystem without it), so posix_fallocate
    writes the blocks, and six 32 MiB of them in one call still end the sandbox after the call.
    (namespaces allows it: the tmpfs bounds it.)"""
    if backends.probe().unavailable("landlock") is not None:
        pytest.skip("landlock backend unavailable on this machine")
    code = dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open('raw', os.O_WRONLY | os.O_CREAT)
        refused = libc.fallocate(fd, 0, ctypes.c_long(0), ctypes.c_long(1 << 20))
        print(refused, os.strerror(ctypes.get_errno()))
        os.posix_fallocate(fd, 0, 1 << 20)
        print(os.stat('raw').st_blocks * 512)
    """)
    with Sandbox(backend="landlock", limits=DISK) as sb:
        assert sb.execute_code(code) == f"-1 Operation not supported\n{MiB}\n"
        with pytest.raises(SandboxDied) as died:
            sb.execute_code(SIX_32_MIB_ALLOCATED)
    assert died.value.death.cause == "model" and "disk budget" in died.value.death.reason, died.value.death


@pytest.mark.timing
def test_a_background_writer_between_calls_is_caught_by_the_next_call(backend):
    with Sandbox(backend=backend, limits=DISK) as sb:
        uid = sb.uid
        sb.execute_code(IN_BACKGROUND)
        with pytest.raises(SandboxDied) as died:
            for _ in range(600):  # it writes at IDLE_CPUS between calls; each call lets it run
                sb.execute_code("import time; time.sleep(0.05)")
    assert died.value.death.cause == "model" and "disk budget" in died.value.death.reason
    assert leftovers({uid}) == {}


@pytest.mark.timing
def test_writing_within_the_budget_is_fine(backend):
    """The budget bounds what the sandbox holds, not what it ever wrote: 60 MiB written, 40 MiB held."""
    code = dedent("""
        import os
        for name in ('a', 'b', 'c'):
            open(name, 'wb').write(b'x' * (20 << 20))
            if name == 'b':
                os.unlink('a')
        print(sorted(os.listdir('.')))
    """)
    with Sandbox(backend=backend, limits=DISK) as sb:
        assert sb.execute_code(code) == "['b', 'c']\n"
        assert sb.execute_code("print(len(open('c', 'rb').read()))") == f"{20 << 20}\n"


# ---- the call limit in the sandbox's own time ---------------------------------------------------------

SPIN = "while True:\n    pass"
SLEEP = f"import time\ntime.sleep({FOREVER})"
# 0.05 s of the sandbox's own CPU, however fast the CPU: a tenth of the limit (0.5 s) it must finish in,
# and under the hogs (at most 1/17 of a CPU) at least 0.85 s of wall time, past that limit
WORK = dedent("""
    import time
    start = time.process_time()
    while time.process_time() - start < 0.05:
        pass
    result = 42
""")
OWN_PROCESSES = dedent("""
    import subprocess
    spinners = [subprocess.Popen(['python3', '-c', 'while True: pass']) for _ in range(6)]
    while True:
        pass
""")
NICE_SPIN = "import os\nos.nice(19)\n" + SPIN  # asks to wait behind every host task
HOG_SECONDS = 20  # a bound on the hogs in case the test process dies: each test kills them sooner


def _hogs():
    """cpu_hogs, or a skip where they cannot be weighted: then the starved host is not established."""
    reason = hogs_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return cpu_hogs(HOG_SECONDS)


@pytest.mark.parametrize("use_cgroups", [True, False], ids=["cgroup", "no cgroup"])
@pytest.mark.timing
def test_a_starved_call_that_finishes_keeps_its_answer(backend, use_cgroups):
    """0.05 s of work at a limit of 0.5 s, on a host where it gets a small share of a CPU: it runs past
    the limit in wall time and is not killed for it."""
    if not use_cgroups and backend == "namespaces":
        pytest.skip("namespaces without a cgroup has no host pid of the worker: wall time (calltime.py)")
    limits = Limits(call_timeout=0.5, wall_factor=60)
    with _sandbox(backend, limits, use_cgroups) as sb, _hogs() as hogs:
        sb.execute_code(WORK)
        call, premise = sb.last_call, hogs.took()
        assert sb.result() == 42
    assert call.source == ("cgroup" if use_cgroups else "worker task")
    assert call.wall > limits.call_timeout > call.charged, (call, premise)  # wall time alone would kill it


@pytest.mark.parametrize("use_cgroups", [True, False], ids=["cgroup", "no cgroup"])
@pytest.mark.timing
def test_a_call_the_host_starves_to_the_wall_cap_is_the_harnesss(backend, use_cgroups):
    if not use_cgroups and backend == "namespaces":
        pytest.skip("namespaces without a cgroup has no host pid of the worker: wall time (calltime.py)")
    # at most 1/(HOG_WEIGHT + 1) = 1/17 of a CPU; a 1 s cap, so host lag (charged as its own time) adds little
    limits = Limits(call_timeout=0.5, wall_factor=2)
    with _sandbox(backend, limits, use_cgroups) as sb, _hogs() as hogs:
        with pytest.raises(SandboxDied) as died:
            sb.execute_code(SPIN)
        call, premise = sb.last_call, hogs.took()
    death = died.value.death
    assert death.cause == "harness" and not died.value.by_model, (death, premise)
    starved = "exec was starved by the host: it got less than 0.5 s of its own time in 1 s of wall time"
    assert death.reason.startswith(starved), (death, premise)
    cap = limits.call_timeout * limits.wall_factor
    assert call.wall >= cap - calltime.SLACK and call.charged < limits.call_timeout, (call, premise)


@pytest.mark.parametrize(("code", "cpus", "use_cgroups"), [
    (SLEEP, 1.0, True),  # on the starved host: sleeping is its own time
    (SPIN, 0.05, True),  # its own quota throttles it 95 % of the time: its own wait
    (OWN_PROCESSES, 1.0, True),  # 7 of its processes contend for 2 CPUs and its 1-CPU quota
    (SLEEP, 1.0, False),
    (OWN_PROCESSES, 1.0, False),  # no cgroup: other processes with CPU time make it wall time
    (NICE_SPIN, 1.0, False),  # no cgroup, starved host: a niced worker's waits are its own
], ids=["sleep, starved host", "own quota", "own processes", "sleep, no cgroup", "own processes, no cgroup",
        "niced, no cgroup, starved host"])
@pytest.mark.timing
def test_a_call_that_makes_its_own_waits_times_out_as_the_models(backend, code, cpus, use_cgroups):
    if not use_cgroups and backend == "namespaces":
        pytest.skip("namespaces without a cgroup has no host pid of the worker: wall time (calltime.py)")
    limits = Limits(call_timeout=0.5, cpus=cpus, wall_factor=40)  # the cap only if the host starves it
    starved = code in (SLEEP, NICE_SPIN)
    with _sandbox(backend, limits, use_cgroups) as sb, _hogs() if starved else nullcontext() as hogs:
        with pytest.raises(SandboxDied) as died:
            sb.execute_code(code)
        call, premise = sb.last_call, hogs.took() if hogs else "no hogs"
    death = died.value.death
    assert death.cause == "model" and died.value.by_model, (death, premise)
    assert death.reason == "exec timed out after 0.5 s; the sandbox was killed", (death, premise)
    assert "against the call limit of 0.5 s" in death.evidence, death
    assert call.charged >= limits.call_timeout - 0.01, (call, premise)
    if code in (NICE_SPIN, OWN_PROCESSES) and not use_cgroups:
        assert call.stolen == 0.0, (call, premise)  # none of its waits credited: charged its wall time


def _sandbox(backend, limits, use_cgroups):
    if use_cgroups:
        return Sandbox(backend=backend, limits=limits)
    with pytest.warns(RuntimeWarning, match="WITHOUT a cgroup"):
        return Sandbox(backend=backend, limits=limits, use_cgroups=False)


@pytest.mark.timing
def test_without_any_cpu_accounting_the_limit_is_wall_time():
    """namespaces without a cgroup: no host pid of the worker to read, so wall time (calltime.py)."""
    if backends.probe().unavailable("namespaces") is not None:
        pytest.skip("namespaces backend unavailable on this machine")
    with _sandbox("namespaces", Limits(call_timeout=0.5), False) as sb:
        with pytest.raises(SandboxDied, match="exec timed out after 0.5 s") as died:
            sb.execute_code(SPIN)
        assert sb.last_call.source == "wall"
    assert died.value.death.cause == "model"


def test_limits_refuse_a_wall_cap_below_the_limit():
    with pytest.raises(ValueError, match="wall_factor=0.5 must be at least 1"):
        Limits(wall_factor=0.5)
