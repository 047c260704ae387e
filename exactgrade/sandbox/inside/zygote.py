"""The zygote: a warm interpreter (sympy, and torch for the torch profile, imported but never run)
that forks one confined worker per sandbox.

Started by the host (inside a long-lived bwrap for the "namespaces" backend, directly for the
"landlock" and "unsafe" backends) with a SOCK_SEQPACKET control socket. Each message is a JSON
spec plus, via SCM_RIGHTS, the worker's request/reply pipe ends, the write end of a status pipe
and the sandbox's cgroup.procs files. The forked child confines itself before any model code
exists in it:

  namespaces: join cgroups -> unshare mount/pid/net/ipc/uts/cgroup namespaces -> fork the
              namespace's pid 1 -> fresh /proc, tmpfs /work and /tmp -> rlimits -> drop to the
              sandbox uid (no capabilities, no_new_privs) -> seccomp -> fork the worker (pid 2);
              pid 1 only reaps, writes the worker's wait status to the status pipe (which only
              it holds: the host tells from it that the worker ended, rather than the jail being
              killed from outside), and its exit tears the whole namespace down.
  landlock:   join cgroups -> rlimits -> drop uid -> Landlock (read-only runtime, writable work
              dir, no TCP, scoped signals) -> seccomp (also no socket()) -> become the worker.
  unsafe:     rlimits (and the sandbox uid when root) only.
A failure at any step is written to the reply pipe as an error line and the child exits, so a
half-confined process never runs model code. Shipped as `_eginside.zygote`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

from . import confine, worker

_HIGH_FD = 100  # request pipe; _HIGH_FD + 1: reply pipe; _STATUS_FD: status pipe (pid 1 only)
_STATUS_FD = _HIGH_FD + 2
MAX_PTYS = 8  # ptys one namespaces sandbox may hold at once


def main() -> None:
    control_fd, profile = int(sys.argv[1]), sys.argv[2]
    import sympy  # noqa: F401  (warm imports shared by every fork)
    from _egwire import wire  # noqa: F401

    from . import readback  # noqa: F401

    if profile == "torch":
        # Imported, never run: torch's thread pools are not fork-safe. torch._dynamo too: the first
        # step of any torch.optim optimizer imports it, ~1.5-2 s of CPU in every sandbox that steps
        # one; imported here once, it is shared by every fork (it starts no thread).
        import torch  # noqa: F401
        import torch._dynamo  # noqa: F401
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # auto-reap forked children
    if os.getpid() != 1:
        confine.prctl(confine.PR_SET_CHILD_SUBREAPER, 1)  # orphans of landlock/unsafe workers come here
    control = socket.socket(fileno=control_fd)
    control.send(b'{"ready": true}')
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 1 << 16, 8)
        except (ConnectionError, OSError):
            return
        if not message:
            return
        spec = json.loads(message)
        pid = os.fork()
        if pid == 0:
            control.close()
            _child(spec, fds)  # never returns
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"pid": pid}).encode())


def _child(spec: dict[str, Any], fds: list[int]) -> None:
    reply_fd = fds[1]
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        request_fd, reply_fd = _move_high(fds[0], fds[1], fds[2])
        for fd in fds[3:]:
            os.write(fd, b"0")  # cgroup v1: "0" moves the writing process
            os.close(fd)
        os.closerange(3, _HIGH_FD)
        os.closerange(_STATUS_FD + 1, 1 << 16)
        devnull = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(devnull, target)
        os.close(devnull)
        mode = spec["mode"]
        if mode == "namespaces":
            _enter_namespaces(spec)
        else:
            os.close(_STATUS_FD)  # no init to report: the worker must not hold it
        _set_limits(spec)
        if os.getuid() == 0:
            confine.prefer_for_oom_kill()
            confine.drop_privileges(spec["uid"], spec["gid"])
        if mode != "namespaces":  # no pid namespace to collapse: die with the zygote (set after the
            confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)  # uid change, which clears it)
            if os.getppid() == 1:
                raise OSError("the zygote exited during setup")
        if mode == "landlock":
            confine.landlock_restrict(read_paths=spec["read_paths"] + _DEVICES_READ,
                                      write_paths=[spec["workdir"], "/dev/null"])
        if mode in ("namespaces", "landlock"):
            confine.install_seccomp(namespaced=(mode == "namespaces"))
        if mode == "namespaces":
            _become_init_and_fork_worker()
        _run_worker(spec, request_fd, reply_fd)
    except BaseException as error:
        try:
            detail = f"{type(error).__name__}: {error}"
            message = {"id": None, "ok": False, "error": f"sandbox setup failed: {detail}"[:2000]}
            os.write(reply_fd, (json.dumps(message) + "\n").encode())
            if os.environ.get("EXACTGRADE_SANDBOX_DEBUG"):
                traceback.print_exc()
        finally:
            os._exit(70)
    os._exit(0)


# Besides the runtime tree and the system view (spec["read_paths"]): what torch and Python read at
# run time. Not /proc/self: without a network namespace its net/ lists the host's sockets.
_DEVICES_READ = ["/proc/cpuinfo", "/dev/urandom", "/dev/zero"]


def _move_high(request_fd: int, reply_fd: int, status_fd: int) -> tuple[int, int]:
    import fcntl

    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, target) for fd, target in
                  ((request_fd, _HIGH_FD), (reply_fd, _HIGH_FD + 1), (status_fd, _STATUS_FD)))
    if moved != (_HIGH_FD, _HIGH_FD + 1, _STATUS_FD):
        raise OSError(f"protocol fds landed on {moved}")
    return moved[0], moved[1]


def _enter_namespaces(spec: dict[str, Any]) -> None:
    confine.unshare(confine.CLONE_NEWNS | confine.CLONE_NEWPID | confine.CLONE_NEWNET | confine.CLONE_NEWIPC
                    | confine.CLONE_NEWUTS | confine.CLONE_NEWCGROUP)
    confine.mount(None, "/", None, confine.MS_REC | confine.MS_PRIVATE)
    if os.fork() != 0:
        os._exit(0)  # the first child of the new pid namespace carries on as its pid 1
    flags = confine.MS_NOSUID | confine.MS_NODEV
    confine.mount("proc", "/proc", "proc", flags | confine.MS_NOEXEC)
    # One tmpfs for /work, /tmp and /dev/shm: one budget of tmpfs_bytes for all three, not one each
    # (and of tmpfs_inodes, plus the root and the three subdirs).
    # Mounted on /tmp, its three subdirs are bound into place and /tmp's own bind then covers it.
    size = f"size={spec['tmpfs_bytes']},nr_inodes={spec['tmpfs_inodes'] + 4}"
    confine.mount("tmpfs", "/tmp", "tmpfs", flags, f"{size},mode=0755")
    for name, mode, owner in (("work", 0o700, spec["uid"]), ("shm", 0o1777, 0), ("tmp", 0o1777, 0)):
        os.mkdir(f"/tmp/{name}")
        os.chown(f"/tmp/{name}", owner, owner)
        os.chmod(f"/tmp/{name}", mode)
    for name, target in (("work", "/work"), ("shm", "/dev/shm"), ("tmp", "/tmp")):
        confine.mount(f"/tmp/{name}", target, None, confine.MS_BIND)
    # A private pty instance with a small max: ptys come out of one host-wide pool (kernel.pty.max),
    # and one sandbox must not take every pty of the others. /dev/ptmx links to pts/ptmx.
    confine.mount("devpts", "/dev/pts", "devpts", confine.MS_NOSUID | confine.MS_NOEXEC,
                  f"newinstance,ptmxmode=0666,mode=0620,max={MAX_PTYS}")
    confine.sethostname("sandbox")


def _set_limits(spec: dict[str, Any]) -> None:
    has_cgroup = spec["cgroup"]
    confine.set_rlimits(
        cpu_seconds=spec["cpu_seconds"],
        address_space=None if has_cgroup else spec["memory_bytes"],
        nproc=None if has_cgroup else spec["max_processes"],
        fsize=spec["max_file_bytes"],
        nofile=1024,
    )


def _become_init_and_fork_worker() -> None:
    """As pid 1 of the sandbox's pid namespace: fork the worker, reap everything, report the worker's
    wait status on the status pipe, exit with it."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)  # pid 1 ignores default-action signals sent from inside
    worker = os.fork()
    if worker == 0:
        os.close(_STATUS_FD)  # model code must not be able to report (or withhold) its own end
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        return
    os.close(_HIGH_FD)
    os.close(_HIGH_FD + 1)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == worker:
            os.write(_STATUS_FD, f"{status}\n".encode())
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _run_worker(spec: dict[str, Any], request_fd: int, reply_fd: int) -> None:
    confine.prctl(confine.PR_SET_DUMPABLE, 1)
    os.chdir(spec["workdir"])
    os.umask(0o022)
    os.environ.clear()
    os.environ.update(spec["env"])
    if spec["profile"] == "torch":
        import torch

        torch.set_num_threads(1)
    worker.Worker(request_fd, reply_fd, spec["workdir"], spec["profile"], spec["max_output"],
                  spec["max_reply"]).serve()
