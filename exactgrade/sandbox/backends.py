"""Backends (how a sandbox is isolated) and the zygote processes that fork sandboxes.

namespaces  (default) one long-lived bubblewrap per profile, started as root with its own mount
            view (runtime tree, the system view below, nothing else), pid/net/ipc/uts namespaces and only the
            capabilities needed to confine children; inside it the zygote forks each sandbox into
            fresh mount/pid/net/ipc/uts/cgroup namespaces as its own uid (see inside/zygote.py).
landlock    (fallback where namespaces are refused, e.g. an unprivileged container) the zygote runs
            on the host; each child drops to its uid and applies Landlock + seccomp + rlimits.
unsafe      rlimits (and a separate uid when root) only. Never chosen unless asked for.

Zygotes are started from one long-lived thread: bwrap's --die-with-parent is tied to the thread
that spawned it, and harness threads come and go.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactgrade.sandbox.errors import SandboxUnavailable
from exactgrade.sandbox.inside import confine
from exactgrade.sandbox.runtime import Runtime

BACKENDS = ("namespaces", "landlock", "unsafe")
INSIDE_ROOT = "/opt/eg"  # where the runtime tree appears inside the namespaces backend
_BOOT = ("import sys; sys.path[:0] = [sys.argv[3], sys.argv[4]]; "
         "from _eginside.zygote import main; main()")
# What the zygote needs to confine its children: mounts and namespaces, the uid change, dropping the
# bounding set, and CAP_SYS_RESOURCE so that a child's oom_score_adj floor can be raised to 1000.
_CAPS_KEPT = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_SYS_RESOURCE")


@dataclass(frozen=True, slots=True)
class Probe:
    """What this machine offers; each field is None when usable, else the reason it is not."""

    namespaces: str | None
    landlock: str | None
    cgroups: str | None

    def unavailable(self, backend: str) -> str | None:
        if backend == "unsafe":
            return None
        return self.namespaces if backend == "namespaces" else self.landlock


_probe_lock = threading.Lock()
_probe_cache: Probe | None = None


def probe() -> Probe:
    """Detect usable backends once per process (a bwrap dry run takes a few milliseconds)."""
    global _probe_cache
    from exactgrade.sandbox import cgroups

    with _probe_lock:
        if _probe_cache is None:
            _probe_cache = Probe(_namespaces_reason(), _landlock_reason(), cgroups.unavailable_reason())
        return _probe_cache


def _namespaces_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (to give each sandbox its own uid)"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (apt-get install -y bubblewrap)"
    argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--cap-drop", "ALL",
            *[arg for cap in _CAPS_KEPT for arg in ("--cap-add", cap)],
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap dry run failed: {error}"
    if done.returncode != 0:
        return f"bwrap dry run failed: {done.stderr.decode(errors='replace').strip()[:300]}"
    if not confine.seccomp_supported():
        return f"the seccomp filter is written for x86_64 only (this is {platform.machine()})"
    return None


def _landlock_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (to give each sandbox its own uid)"
    if not confine.seccomp_supported():
        return f"the seccomp filter is written for x86_64 only (this is {platform.machine()})"
    abi = confine.landlock_abi()
    if abi < 4:
        return f"Landlock ABI {abi} (need >= 4 for TCP restrictions; 0 means absent or disabled)"
    return None


# The system view: binaries and shared libraries, never a Python site directory (a pip install as
# root puts packages, and so a project's answer keys, under /usr/local or /usr/lib/python3*).
_SYSTEM_ROOTS = ("/usr/bin", "/usr/sbin", "/usr/libexec", "/usr/lib", "/usr/lib64", "/usr/lib32",
                 "/usr/libx32", "/bin", "/sbin", "/lib", "/lib64")  # the last four where not links to /usr
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")


@dataclass(frozen=True, slots=True)
class SystemView:
    """The host directories a sandbox may read besides the runtime tree."""

    roots: tuple[str, ...]  # visible, except for `hidden`
    hidden: tuple[str, ...]  # Python directories inside a root (python3, python3.11, ...)

    def landlock_paths(self) -> list[str]:
        """Landlock can only allow: every root that hides nothing, and the children of the others."""
        paths = []
        for root in self.roots:
            if any(h.startswith(root + "/") for h in self.hidden):
                paths += [entry.path for entry in sorted(os.scandir(root), key=lambda e: e.name)
                          if entry.path not in self.hidden]
            else:
                paths.append(root)
        return paths + [f for f in SYSTEM_FILES if os.path.exists(f)]

    def shows(self, path: str) -> bool:
        """True if a sandbox can read host path `path` (symlinks resolved)."""
        real = os.path.realpath(path)
        inside = (real == d or real.startswith(d + "/") for d in self.roots)
        return any(inside) and not any(real == h or real.startswith(h + "/") for h in self.hidden)


def system_view() -> SystemView:
    roots = tuple(r for r in _SYSTEM_ROOTS if os.path.isdir(r) and not os.path.islink(r))
    hidden = tuple(entry.path for root in roots if "/lib" in root for entry in sorted(os.scandir(root),
                   key=lambda e: e.name) if entry.name.startswith("python") and entry.is_dir())
    return SystemView(roots, hidden)


_spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="eg-sandbox-zygote")


class Zygote:
    """A running zygote for one (backend, profile): forks a confined worker per request."""

    def __init__(self, backend: str, profile: str, runtime: Runtime) -> None:
        self.backend = backend
        self.profile = profile
        self.runtime = runtime
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        argv, env = self._command(theirs.fileno())
        debug = bool(os.environ.get("EXACTGRADE_SANDBOX_DEBUG"))
        started = time.monotonic()
        self.process = _spawner.submit(
            subprocess.Popen, argv, env=env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=None if debug else subprocess.DEVNULL,
            start_new_session=backend != "namespaces",
        ).result()
        theirs.close()
        self.control.settimeout(120)
        try:
            hello = self.control.recv(1 << 10)
        except OSError as error:
            hello = f"{error}".encode()
        finally:
            self.control.settimeout(None)
        if hello != b'{"ready": true}':
            self.close()
            raise SandboxUnavailable(
                f"the {backend} zygote for profile {profile!r} did not start (got {hello[:200]!r}; "
                "set EXACTGRADE_SANDBOX_DEBUG=1 to see its stderr)")
        self.boot_seconds = time.monotonic() - started

    def paths(self) -> dict[str, str]:
        """Where the runtime pieces are, as seen by the zygote and its children."""
        if self.backend == "namespaces":
            root = INSIDE_ROOT
            return {"prefix": f"{root}/python", "site": f"{root}/site", "lib": f"{root}/lib"}
        return {"prefix": str(self.runtime.python_prefix), "site": str(self.runtime.site(self.profile)),
                "lib": str(self.runtime.lib)}

    def _command(self, control_fd: int) -> tuple[list[str], dict[str, str]]:
        paths = self.paths()
        python = f"{paths['prefix']}/bin/{self.runtime.python.name}"
        env = {"LD_LIBRARY_PATH": f"{paths['prefix']}/lib", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
        if os.environ.get("EXACTGRADE_SANDBOX_DEBUG"):
            env["EXACTGRADE_SANDBOX_DEBUG"] = "1"
        zygote = [python, "-I", "-c", _BOOT, str(control_fd), self.profile, paths["lib"], paths["site"]]
        if self.backend != "namespaces":
            return zygote, env
        argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--clearenv",
                "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--cap-drop", "ALL", *[arg for cap in _CAPS_KEPT for arg in ("--cap-add", cap)]]
        view = system_view()
        argv += ["--perms", "0755", "--dir", "/usr"]
        for root in view.roots:
            argv += ["--ro-bind", root, root]
        for hidden in view.hidden:  # other interpreters' packages: not part of the view
            argv += ["--tmpfs", hidden]
        argv += [arg for link in ("bin", "sbin", "lib", "lib64") if os.path.islink(f"/{link}")
                 for arg in ("--symlink", os.readlink(f"/{link}"), f"/{link}")]
        argv += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/opt",
                 "--perms", "0755", "--dir", INSIDE_ROOT]
        for etc in SYSTEM_FILES:
            if os.path.exists(etc):
                argv += ["--ro-bind", etc, etc]
        argv += ["--ro-bind", str(self.runtime.python_prefix), paths["prefix"],
                 "--ro-bind", str(self.runtime.site(self.profile)), paths["site"],
                 "--ro-bind", str(self.runtime.lib), paths["lib"],
                 "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/work",
                 "--remount-ro", "/", "--chdir", "/"]
        for name, value in env.items():
            argv += ["--setenv", name, value]
        return argv + ["--", *zygote], env

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, spec: dict[str, Any], fds: list[int]) -> int:
        """Ask for one confined worker; returns its pid in the zygote's view."""
        with self.lock:
            try:
                socket.send_fds(self.control, [json.dumps(spec).encode()], fds)
                self.control.settimeout(30)
                answer = self.control.recv(1 << 10)
                self.control.settimeout(None)
            except OSError as error:  # includes the timeout: a wedged zygote is replaced next time
                answer = b""
                detail = f": {error}"
            else:
                detail = ""
        if not answer:
            self.close()
            raise SandboxUnavailable(f"the {self.backend} zygote for profile {self.profile!r} failed{detail}")
        return int(json.loads(answer)["pid"])

    def close(self) -> None:
        self.control.close()  # the zygote exits on EOF; bwrap then tears down its namespaces
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_zygotes: dict[tuple[str, str, str], Zygote] = {}
_zygotes_lock = threading.Lock()


def zygote_for(backend: str, profile: str, runtime: Runtime) -> Zygote:
    """The shared zygote for (backend, profile), started on first use and restarted if it died."""
    key = (backend, profile, str(runtime.root))
    with _zygotes_lock:
        zygote = _zygotes.get(key)
        if zygote is None or not zygote.alive():
            if zygote is not None:
                zygote.close()
            zygote = Zygote(backend, profile, runtime)
            _zygotes[key] = zygote
        return zygote


def shutdown_zygotes() -> None:
    """Stop every zygote of this process (sandboxes of the namespaces backend die with theirs)."""
    with _zygotes_lock:
        for zygote in _zygotes.values():
            zygote.close()
        _zygotes.clear()


def resolve(requested: str, unsafe: bool, found: Probe | None = None) -> str:
    """The backend to use: `requested` if it works, or for "auto" the first isolating one that does."""
    found = found or probe()
    if requested == "auto":
        for backend in ("namespaces", "landlock"):
            if found.unavailable(backend) is None:
                return backend
        if not unsafe:
            raise SandboxUnavailable(
                "no isolating sandbox backend works on this machine "
                f"(namespaces: {found.namespaces}; landlock: {found.landlock}). Refusing to run untrusted "
                "code; pass unsafe=True to run it anyway with rlimits only.")
        requested = "unsafe"
    if requested not in BACKENDS:
        raise ValueError(f"backend={requested!r} must be 'auto' or one of {BACKENDS}")
    if requested == "unsafe":
        if not unsafe:
            raise SandboxUnavailable("backend='unsafe' isolates nothing; it also needs unsafe=True")
        message = ("exactgrade.sandbox: running untrusted code WITHOUT isolation (unsafe=True): it can read "
                   "host files, use the network and see answer keys")
        print(f"WARNING: {message}", file=sys.stderr)
        import warnings

        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return requested
    reason = found.unavailable(requested)
    if reason is not None:
        raise SandboxUnavailable(f"backend {requested!r} is unavailable here: {reason}")
    return requested


def work_root(state_dir: Path) -> Path:
    """Host parent of the work dirs of landlock/unsafe sandboxes (namespaces ones use a tmpfs)."""
    root = state_dir / "work"
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    return root
