"""The host side of a sandbox: one confined, persistent worker per instance.

Everything the worker sends is hostile (model code shares its process). The host sends a random
id with each request and accepts exactly one reply line with that id, of bounded size, decoded
strictly; anything else (a timeout, EOF, extra bytes, a malformed or foreign line) kills the
sandbox and raises SandboxDied, now and on every later call, with whose failure it was (the
model's or the harness's, see deaths.py). Values come back only through exactgrade.wire.decode.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import select
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from exactgrade import wire
from exactgrade.sandbox import backends, calltime, cgroups, deaths, disk, uids, workdirs
from exactgrade.sandbox.errors import Death, NoResult, ResultNotEncodable, SandboxDied, SandboxUnavailable
from exactgrade.sandbox.runtime import default_state_dir, ensure_runtime

PROFILES = ("python", "torch")
_REPLY_KEYS = frozenset({"id", "ok", "output", "wire", "error"})
_TRUNCATED = "\n[output truncated by the host]"
_FORGED = "a reply only the worker's process (model code included) could have written broke the protocol"
# The worker writes a reply in one write(), which a pipe delivers in pieces of at least a page (4 KiB)
# but the last: far fewer bytes per read means a trickle costing the host a syscall per byte.
_FREE_READS = 8
_MIN_BYTES_PER_READ = 1024
CLOSE_WAIT = 10.0
"""Seconds close() waits at each step (the cgroup's processes gone and reaped, its groups removed, then
the uid's processes gone) before it gives up: killed processes need CPU to exit, a loaded host gives
little, and one that never exits (frozen, stuck in the kernel) must not hang the host."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one sandbox (defaults from the issue: 30 s per call, 1 GiB, 64 processes).

    call_timeout is charged in the sandbox's own time (calltime.py): a call the host starves runs
    on until call_timeout * wall_factor of wall time, then dies as the harness's failure."""

    call_timeout: float = 30.0  # the sandbox's own time per call: wall time minus what the host took
    memory_bytes: int = 1 << 30  # memory cgroup (RLIMIT_AS without)
    max_processes: int = 64  # pids cgroup (RLIMIT_NPROC of the sandbox's own uid without cgroups)
    cpu_seconds: int = 600  # RLIMIT_CPU of each process of the sandbox
    cpus: float = 1.0  # CFS quota of the sandbox's cpu cgroup, in CPUs (no bound without cgroups)
    max_output: int = 16 * 1024  # bytes of stdout+stderr returned per call
    max_result_bytes: int = 1 << 20  # encoded size of `result`
    max_file_bytes: int = 256 << 20  # RLIMIT_FSIZE (at most disk_bytes)
    max_code_bytes: int = 1 << 20  # size of one code/command string
    wall_factor: float = 4.0  # wall-clock cap per call, in call_timeouts: past it the host starved it
    disk_bytes: int = 1 << 30  # all the sandbox may hold in files (disk.py): tmpfs, or host work dir
    max_files: int = 10_000  # files, dirs and links it may hold (tmpfs inodes, or counted)

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if type(value) not in (int, float) or value <= 0:
                raise ValueError(f"Limits.{name}={value!r} must be a positive number")
        if self.wall_factor < 1:
            raise ValueError(f"Limits.wall_factor={self.wall_factor!r} must be at least 1")


_live: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_kept_out_of_use: list[uids.UidSlot] = []
"""Slots of closed sandboxes some process of which outlived close(): held (never released) so no
sandbox of this process or any other gets the uid while that process may live."""
_swept = threading.Event()
_sweep_lock = threading.Lock()  # sandboxes created in parallel: every one waits for the one sweep


def reclaim_stale(state_dir: Path | None = None) -> list[int]:
    """Clean up after hosts that were killed: every uid slot nobody holds that still has a cgroup or
    a work dir is reclaimed (reclaim_uid). Runs once per process before its first sandbox; returns
    the uids cleaned. One uid that cannot be cleaned is skipped, not fatal: it stays for next time."""
    state = state_dir or default_state_dir()
    work = state / "work"
    with_dirs = {int(d.name) for d in work.iterdir() if d.name.isdigit()} if work.is_dir() else set()
    cleaned = []
    for uid in sorted(cgroups.existing_uids() | with_dirs):
        try:
            if reclaim_uid(state, uid):
                cleaned.append(uid)
        except OSError as error:
            warnings.warn(f"exactgrade.sandbox: could not reclaim sandbox uid {uid}: {error}", RuntimeWarning,
                          stacklevel=2)
    return cleaned


def reclaim_uid(state: Path, uid: int) -> bool:
    """If nobody holds uid's slot: kill its processes (a landlock sandbox's daemons outlive its host;
    a namespaces sandbox already died with bwrap), remove its groups and its work dir. False if the
    slot is held (a live sandbox)."""
    slot = uids.try_claim(state, uid)
    if slot is None:
        return False
    try:
        if not cgroups.SandboxCgroup(f"sb-{uid}").destroy(alive=lambda: bool(uids.processes_of(uid))) \
                or uids.processes_of(uid):
            uids.kill_all(uid)
        workdirs.remove_tree(state / "work" / str(uid))
    finally:
        slot.release()
    return True


def warm(profile: str = "python", backend: str = "auto", state_dir: Path | None = None) -> None:
    """Do now what the first Sandbox(profile=profile) of this process would wait for: build the
    runtime, reclaim stale slots, start the zygote (seconds for torch)."""
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} must be one of {PROFILES}")
    state = state_dir or default_state_dir()
    runtime = ensure_runtime(state)
    _sweep_once(state)
    backends.zygote_for(backends.resolve(backend, False), profile, runtime)


def _sweep_once(state: Path) -> None:
    with _sweep_lock:
        if not _swept.is_set():
            reclaim_stale(state)
            _swept.set()


@atexit.register
def _close_all() -> None:
    for sandbox in list(_live):
        try:
            sandbox.close()
        except SandboxDied as died:  # the others must still be closed
            warnings.warn(f"exactgrade.sandbox: uid {sandbox.uid}: {died} ({died.death.evidence})",
                          RuntimeWarning, stacklevel=1)
    backends.shutdown_zygotes()


class Sandbox:
    """An isolated, persistent Python worker with a shell, preloaded with `inputs`.

    >>> with Sandbox(inputs={"x": Fraction(3, 2)}) as sb:
    ...     sb.execute_code("result = x * 2")
    ...     sb.result()
    Fraction(3, 1)

    Memory, process and CPU limits use a per-sandbox cgroup (v1, or v2 where v1 is absent); where
    none can be made, Sandbox() raises SandboxUnavailable unless use_cgroups=False is passed, which
    warns and falls back to RLIMIT_AS / RLIMIT_NPROC of the sandbox's own uid (no CPU bound), with
    cleanup by uid. Not thread-safe: one sandbox serves one rollout;
    run several sandboxes for concurrency (close() may be called from another thread).
    """

    def __init__(self, inputs: Mapping[str, Any] | None = None, *, profile: str = "python",
                 limits: Limits | None = None, backend: str = "auto", unsafe: bool = False,
                 use_cgroups: bool = True, state_dir: Path | None = None) -> None:
        started = time.monotonic()
        if profile not in PROFILES:
            raise ValueError(f"profile={profile!r} must be one of {PROFILES}")
        self.profile = profile
        self.limits = limits or Limits()
        inputs_text = wire.encode(dict(inputs or {}))  # WireError for values outside the wire model
        self.backend = backends.resolve(backend, unsafe)
        _check_cgroups(use_cgroups)
        self._death: Death | None = None
        self._model_ran = False  # set once model code may have run: from then on it can explain a death
        self._closed = False
        self._lock = threading.Lock()
        self._cgroup: cgroups.SandboxCgroup | None = None
        self._use_cgroups = use_cgroups
        self._workdir: Path | None = None
        self._clock: calltime.Clock = calltime.Clock()
        self._disk: disk.DiskBudget | None = None
        self.last_call: calltime.CallTime | None = None  # how long the last call took, and whose time
        self._request_fd = self._reply_fd = self._status_fd = -1
        self._buffer = bytearray()  # reply bytes read but not yet consumed
        self._max_line = max(self.limits.max_result_bytes, 6 * self.limits.max_output) + 4096
        state = state_dir or default_state_dir()
        runtime = ensure_runtime(state)
        _sweep_once(state)
        self._slot = uids.acquire(state)
        self.uid = self._slot.uid
        _live.add(self)
        try:
            self._zygote = zygote = backends.zygote_for(self.backend, profile, runtime)
            self._start_worker(zygote, state)
            self._call({"op": "init", "inputs": inputs_text})
            if self.backend == "namespaces" and self._disk is not None:
                self._disk.hold_tmpfs(self._pids())
        except BaseException:
            with contextlib.suppress(SandboxDied):  # the start-up failure is the one to report
                self.close()
            raise
        self.ready_seconds = time.monotonic() - started

    # -- public API --------------------------------------------------------------------------------
    def execute_code(self, code: str) -> str:
        """Run Python code in the persistent namespace; return its captured stdout+stderr (capped)."""
        return self._run("exec", "code", code)

    def bash(self, cmd: str) -> str:
        """Run a bash command in the same sandbox and work dir; return its stdout+stderr (capped)."""
        return self._run("bash", "cmd", cmd)

    def result(self) -> Any:
        """The model's `result`, decoded by exactgrade.wire: NoResult if unset, ResultNotEncodable if
        the sandbox cannot encode it, WireError if its reply does not decode, SandboxDied if the
        sandbox is gone."""
        reply = self._call({"op": "result"})
        if reply["ok"] is not True:
            raise ResultNotEncodable(f"the sandbox could not encode `result`: {reply['error']}")
        if "wire" not in reply:
            self._die("protocol violation: result reply without a wire field", _FORGED)
        text = reply["wire"]
        if text is None:
            raise NoResult("the code never set `result`")
        return wire.decode(text, max_bytes=self.limits.max_result_bytes)

    def close(self) -> None:
        """Kill every process of the sandbox and delete its work dir (idempotent). Returns once no
        process of the sandbox is left, so its uid can go to the next sandbox. If some survive the
        bounded wait, the uid stays out of use while this process lives and SandboxDied is raised
        with a harness Death (the host failed to end it; nothing the model did)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._death is None:
                self._death = Death("the sandbox was closed", "harness", "closed by the host")
            left: str | None = "the teardown did not finish"
            try:
                left = self._teardown()
            finally:  # the uid goes back unless a process of it lives (reclaim_stale retries the rest)
                alive = left is not None and uids.processes_of(self.uid)
                if alive:
                    _kept_out_of_use.append(self._slot)
                else:
                    self._slot.release()
                _live.discard(self)
            if alive:
                raise SandboxDied(Death("close() could not end every process of the sandbox; its uid is "
                                        "kept out of use while this host process lives", "harness",
                                        f"{left}: pids {sorted(alive)[:20]}"))

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_slot", None) is not None and not getattr(self, "_closed", True):
            self.close()

    # -- setup and teardown ------------------------------------------------------------------------
    def _start_worker(self, zygote: backends.Zygote, state: Path) -> None:
        if self._use_cgroups:  # creating it also kills leftovers
            self._cgroup = cgroups.SandboxCgroup.create(f"sb-{self.uid}", self.limits.memory_bytes,
                                                        self.limits.max_processes, self.limits.cpus,
                                                        self._uid_in_use)
        else:
            uids.kill_all(self.uid)  # leftovers of a crashed host that held this uid
        paths = zygote.paths()
        if self.backend == "namespaces":
            workdir = "/work"
        else:
            self._workdir = backends.work_root(state) / str(self.uid)
            workdirs.remove_tree(self._workdir)
            self._workdir.mkdir(mode=0o700)
            os.chown(self._workdir, self.uid, self.uid)
            workdir = str(self._workdir)
        env = {"PATH": f"{paths['prefix']}/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": f"{paths['prefix']}/lib",
               "PYTHONPATH": paths["site"], "PYTHONDONTWRITEBYTECODE": "1", "HOME": workdir,
               "TMPDIR": "/tmp" if self.backend == "namespaces" else workdir, "LANG": "C.UTF-8",
               "OMP_NUM_THREADS": "1", "USER": "sandbox", "LOGNAME": "sandbox"}
        spec = {
            "mode": self.backend, "uid": self.uid, "gid": self.uid, "profile": self.profile,
            "workdir": workdir, "env": env, "cgroup": self._cgroup is not None,
            "cpu_seconds": int(self.limits.cpu_seconds), "memory_bytes": self.limits.memory_bytes,
            "max_processes": self.limits.max_processes,
            "max_file_bytes": min(self.limits.max_file_bytes, self.limits.disk_bytes),
            "tmpfs_bytes": self.limits.disk_bytes, "tmpfs_inodes": self.limits.max_files,
            "max_output": self.limits.max_output,
            "max_reply": self.limits.max_result_bytes,
            "read_paths": [paths["prefix"], paths["site"], paths["lib"]]
            + (backends.system_view().landlock_paths() if self.backend == "landlock" else []),
        }
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        status_r, status_w = os.pipe()  # the namespaces init reports its worker's end here
        self._request_fd, self._reply_fd, self._status_fd = request_w, reply_r, status_r
        child_fds = [request_r, reply_w, status_w] + (self._cgroup.procs_fds() if self._cgroup else [])
        try:
            pid = zygote.fork(spec, child_fds)
        finally:
            for fd in child_fds:
                os.close(fd)
        if self._cgroup is not None and self._cgroup.cpu_waits() is not None:
            self._clock = calltime.CgroupClock(self._cgroup)
        elif self.backend != "namespaces":  # no cgroup, or no PSI for it; the zygote's pids are the host's
            self._clock = calltime.WorkerClock(pid, self.uid)
        self._disk = disk.DiskBudget(self._workdir, self.limits.disk_bytes, self.limits.max_files,
                                     spec["max_file_bytes"])
        os.set_blocking(self._request_fd, False)
        os.set_blocking(self._reply_fd, False)
        os.set_blocking(self._status_fd, False)

    def _uid_in_use(self) -> bool:
        """A process (not a zombie) of the sandbox's uid lives."""
        return bool(uids.processes_of(self.uid))

    def _pids(self) -> set[int]:
        return self._cgroup.pids() if self._cgroup is not None else set(uids.processes_of(self.uid))

    def _check_disk(self, during: bool, deep: bool = False) -> None:
        """End the sandbox (its own fault) if it holds more on disk than its budget: during a call at
        the disk budget's pace (DiskBudget.poll), after one always (DiskBudget.check)."""
        if self._disk is None:
            return
        found = self._disk.poll(self._pids) if during else self._disk.check(self._pids, deep)
        if found is not None:
            self._die(f"the sandbox wrote more than its disk budget ({self.limits.disk_bytes} bytes, "
                      f"{self.limits.max_files} files) and was killed", found)

    def _teardown(self) -> str | None:
        """Kill every process, close the pipes, drop the disk budget and the work dir. None once no
        process of the sandbox is left (the cgroup's or the uid's, waited for: cgroups.destroy and
        uids.kill_all, each bounded), else what was left."""
        # Kill first, close the pipes after: a call blocked in another thread then wakes on EOF.
        left = None
        if self._cgroup is None or not self._cgroup.destroy(CLOSE_WAIT, self._uid_in_use):
            # no cgroup, or one that could not be emptied: kill by uid
            if not uids.kill_all(self.uid, CLOSE_WAIT):
                left = f"processes of uid {self.uid} outlived SIGKILL for {CLOSE_WAIT:g} s"
        for fd in (self._request_fd, self._reply_fd, self._status_fd):
            if fd >= 0:
                os.close(fd)
        self._request_fd = self._reply_fd = self._status_fd = -1
        if self._disk is not None:
            self._disk.close()
        if self._workdir is not None:
            try:
                workdirs.remove_tree(self._workdir)
            except OSError as error:  # left for reclaim_stale, or the next sandbox of this uid
                message = f"exactgrade.sandbox: could not remove {self._workdir}: {error}"
                warnings.warn(message, RuntimeWarning, stacklevel=2)
        return left

    def _die(self, reason: str, evidence: str) -> NoReturn:
        """End the sandbox for a failure its model code can cause (a harness failure before any ran)."""
        self._end(Death(reason, "model" if self._model_ran else "harness", evidence))

    def _end(self, death: Death) -> NoReturn:
        with self._lock:
            if self._death is None:
                self._death = death
                self._teardown()
        raise SandboxDied(self._death)

    # -- protocol ----------------------------------------------------------------------------------
    def _run(self, op: str, field: str, text: str) -> str:
        if type(text) is not str:
            raise TypeError(f"{field} must be str, got {type(text).__name__}")
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if size > self.limits.max_code_bytes:  # the model's input, not the caller's bug: say so, stay alive
            return f"[refused: the {field} has {size} bytes, over the limit of {self.limits.max_code_bytes}]"
        if self._death is not None:
            raise SandboxDied(self._death)
        self._model_ran = True
        reply = self._call({"op": op, field: text})
        if reply["ok"] is not True:
            self._die(f"the sandbox worker failed: {reply['error']}", "the worker answered with an error")
        output = reply.get("output")
        if type(output) is not str:
            self._die("protocol violation: reply without output text", _FORGED)
        if len(output) > self.limits.max_output + 200:
            output = output[: self.limits.max_output] + _TRUNCATED
        return _clean(output)

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._death is not None:
            raise SandboxDied(self._death)
        if self._buffer or self._readable(0):  # between calls the channel must be silent
            try:
                stray = self._buffer or os.read(self._reply_fd, 1)
            except BlockingIOError:
                stray = b"?"
            except OSError:
                stray = b""
            if not stray:
                self._end(self._exit_death())
            self._die("protocol violation: unsolicited bytes on the reply channel", _FORGED)
        request_id = secrets.token_hex(16)
        line = json.dumps({"id": request_id, **request}) + "\n"
        if self._cgroup is not None:
            self._cgroup.limit_cpu(self.limits.cpus)
        budget = calltime.Budget(self._clock, self.limits.call_timeout, self.limits.wall_factor)
        self._send(line.encode("utf-8", "surrogatepass"), budget, request["op"])
        line = self._read_line(budget, request["op"])
        self.last_call = budget.time()
        if self._cgroup is not None:  # between calls processes left running get almost no CPU: 60
            self._cgroup.limit_cpu(cgroups.IDLE_CPUS)  # busy loops must not slow other sandboxes
        self._check_disk(during=False, deep=request["op"] in ("exec", "bash"))
        return self._check_reply(line, request_id)

    def _readable(self, timeout: float) -> bool:
        return _wait_for(self._reply_fd, select.POLLIN, timeout)

    def _wait(self, fd: int, event: int, budget: calltime.Budget, op: str, what: str) -> bool:
        """Wait for `event` on fd within the call's budget, polling the disk budget meanwhile; dies
        when either is spent."""
        while True:
            remaining = budget.remaining()
            if remaining <= 0:
                self._time_out(budget, op, what)
            if _wait_for(fd, event, min(remaining, disk.POLL)):
                return True
            self.last_call = budget.time()
            self._check_disk(during=True)

    def _time_out(self, budget: calltime.Budget, op: str, what: str) -> NoReturn:
        self.last_call = budget.time()
        evidence = budget.evidence() + deaths.pids_evidence(self._cgroup)
        limit = f"{self.limits.call_timeout:g} s"
        if budget.spent() == "harness":  # starved: whatever model code ran, this is not its failure
            self._end(Death(f"{op} was starved by the host: it got less than {limit} of its own time "
                            f"in {budget.cap:g} s of wall time; the sandbox was killed", "harness", evidence))
        self._die(f"{op} timed out after {limit}{what}; the sandbox was killed", evidence)

    def _send(self, data: bytes, budget: calltime.Budget, op: str) -> None:
        view = memoryview(data)
        while view:
            self._wait(self._request_fd, select.POLLOUT, budget, op, " sending a request")
            try:
                view = view[os.write(self._request_fd, view):]
            except BlockingIOError:
                continue
            except OSError:  # EPIPE: the worker is gone; EBADF: closed by close() in another thread
                self._end(self._exit_death())

    def _read_line(self, budget: calltime.Budget, op: str) -> bytes:
        """One reply line, within the call's budget however the bytes arrive (a reply trickled one
        byte per read must not hold the call, or the thread serving it, past its limit)."""
        buffer = self._buffer
        searched = reads = 0
        while (newline := buffer.find(b"\n", searched)) < 0:
            searched = len(buffer)
            if buffer[:1] not in (b"", b"{"):  # every reply is a JSON object, sent in one write
                self._die("protocol violation: reply does not start with '{'", _FORGED)
            if reads > _FREE_READS and len(buffer) < _MIN_BYTES_PER_READ * reads:
                self._die(f"protocol violation: reply trickled ({len(buffer)} bytes in {reads} reads)",
                          _FORGED)
            if len(buffer) > self._max_line:
                self._die(f"protocol violation: reply longer than {self._max_line} bytes", _FORGED)
            self._wait(self._reply_fd, select.POLLIN, budget, op, "")
            try:
                chunk = os.read(self._reply_fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:  # EBADF: closed by close() in another thread
                chunk = b""
            if not chunk:
                self._end(self._exit_death())
            reads += 1
            buffer += chunk
        if newline > self._max_line:
            self._die(f"protocol violation: reply longer than {self._max_line} bytes", _FORGED)
        line = bytes(buffer[:newline])
        del buffer[: newline + 1]
        return line

    def _exit_death(self) -> Death:
        if self._death is not None:  # closed (or killed) meanwhile by another thread
            return self._death
        return deaths.exit_death(model_ran=self._model_ran, zygote=self._zygote.process, cgroup=self._cgroup,
                                 memory_bytes=self.limits.memory_bytes,
                                 status_fd=self._status_fd if self.backend == "namespaces" else None)

    def _check_reply(self, line: bytes, request_id: str) -> dict[str, Any]:
        try:
            reply = json.loads(line.decode("ascii"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            self._die("protocol violation: reply is not a JSON line", _FORGED)
        if type(reply) is not dict or not set(reply) <= _REPLY_KEYS or type(reply.get("ok")) is not bool:
            self._die("protocol violation: malformed reply", _FORGED)
        if reply.get("id") is None and reply["ok"] is False and type(reply.get("error")) is str:
            self._die(_clean(reply["error"][:500]), "a reply without a request id (set-up failures look so)")
        if reply.get("id") != request_id or type(reply["id"]) is not str:
            self._die("protocol violation: reply with a wrong request id", _FORGED)
        if reply["ok"] is False and type(reply.get("error")) is not str:
            self._die("protocol violation: failure reply without an error text", _FORGED)
        if reply["ok"] is False:
            reply["error"] = _clean(reply["error"][:500])
        if "wire" in reply and reply["wire"] is not None and type(reply["wire"]) is not str:
            self._die("protocol violation: result reply without wire text", _FORGED)
        return reply


def _check_cgroups(use_cgroups: bool) -> None:
    """Without a cgroup the memory limit is per process (4 processes and the tmpfs hold several times
    memory_bytes), CPU is unbounded and cleanup is by uid: only when asked for, and loudly."""
    reason = backends.probe().cgroups
    if use_cgroups and reason is not None:
        raise SandboxUnavailable(
            f"no per-sandbox cgroup can be made here ({reason}); without one the memory limit holds per "
            "process only and CPU is unbounded. Pass use_cgroups=False to run so anyway.")
    if not use_cgroups:
        message = ("exactgrade.sandbox: running WITHOUT a cgroup (use_cgroups=False): memory is limited per "
                   "process by RLIMIT_AS, processes by RLIMIT_NPROC of the sandbox uid, CPU not at all")
        print(f"WARNING: {message}", file=sys.stderr)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _clean(text: str) -> str:
    """Text from the sandbox made safe to encode anywhere (lone surrogates from a forged reply)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _wait_for(fd: int, event: int, timeout: float) -> bool:
    """poll() one fd (select() breaks on fd numbers above 1023, common in busy harnesses)."""
    poller = select.poll()
    poller.register(fd, event | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(max(timeout, 0) * 1000))


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"bare {name} in a reply")
