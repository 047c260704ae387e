"""`python -m exactgrade doctor`: which sandbox backend runs here and what it does and does not guarantee."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys

HELP = "report the sandbox backend in use on this machine and what it guarantees"

CALL_LIMIT = ("call limit in the sandbox's own time: wall time minus the time the host kept it from a CPU "
              "(cgroup PSI 'full' less its own quota throttling), enforced by the host killing the sandbox "
              "however the reply is trickled; a call the host starves to wall_factor x call_timeout of wall "
              "time is a harness failure (flagged), not a wrong answer; RLIMIT_CPU per process")
GUARANTEES = {
    "namespaces": [
        "own mount namespace: only the system view (/usr/bin, /usr/sbin, /usr/libexec, /usr/lib*, "
        "without any python* directory; no /usr/local, no /usr/share), the runtime tree (interpreter, "
        "stdlib, allowed packages) and fresh tmpfs /work, /tmp and /dev/shm are visible; the project, "
        "datasets, HF cache, /root, host /tmp are not",
        "own pid namespace and /proc: no host process is visible or signallable",
        "own network namespace with no interfaces up, and seccomp allows socket() only for AF_UNIX: no "
        "TCP/UDP/DNS, no AF_VSOCK (not separated by network namespaces), no NETLINK",
        "own ipc and uts namespaces (SysV IPC and POSIX message queues die with the sandbox)",
        "a dedicated uid per sandbox, no capabilities (bounding set empty), no_new_privs, seccomp deny-list "
        "(also io_setup and io_uring: kernel AIO contexts are a host-wide pool)",
        "a private devpts per sandbox with at most 8 ptys",
        "oom_score_adj 1000: a host-wide OOM kills sandbox processes first (its floor is raised only where "
        "root has CAP_SYS_RESOURCE; without it model code can set it back to 0, never lower)",
        "memory, process and CPU limits via a per-sandbox cgroup: 1 CPU during a call, 1% of one between "
        "calls",
        "disk: the three tmpfs (/work, /tmp, /dev/shm) share one budget of disk_bytes and max_files inodes "
        "(also charged to the memory cgroup); a full tmpfs ends the sandbox as the model's fault",
        CALL_LIMIT,
        "cleanup: the cgroup (or the uid) is killed and the pid namespace collapses on close()",
    ],
    "landlock": [
        "Landlock: read-only access to the runtime tree and the system view (binaries and shared libraries, "
        "no python* directory, no /usr/local, no /proc/self), read/write only the work dir",
        "Landlock ABI >= 4: TCP bind/connect denied; seccomp also denies socket() (no DNS, no unix sockets, "
        "no vsock, no netlink), SysV IPC and POSIX message queues",
        "Landlock ABI >= 6: signals and abstract unix sockets scoped to the sandbox",
        "a dedicated uid per sandbox, no capabilities, no_new_privs, seccomp deny-list (also kernel AIO); "
        "no pty (/dev/ptmx is outside the allowed paths)",
        "oom_score_adj 1000 with its floor raised (the sandbox cannot lower it)",
        "memory, process and CPU limits via a per-sandbox cgroup; without one only if asked for "
        "(use_cgroups=False): RLIMIT_AS/RLIMIT_NPROC, no CPU bound",
        "disk: the work dir is on the host disk; RLIMIT_FSIZE caps each file and the host walks the work dir "
        "(and the deleted files the sandbox holds open or mapped) at most every 50 ms while a call runs and "
        "after it: over disk_bytes or max_files the sandbox is killed as the model's fault and its work dir "
        "deleted. NOT exact: it can overshoot by what it writes between two walks (tens of MiB measured, "
        "see BENCHMARKS.md)",
        CALL_LIMIT + "; without a cgroup: the worker's own run-queue delay, as long as no other process "
        "of the sandbox used CPU",
        "NOT guaranteed: no pid namespace (host pids can be probed with kill(pid, 0): EPERM vs ESRCH; "
        "/proc itself is denied except cpuinfo); processes started by model code that outlive a crashed "
        "host are only reaped when their uid slot is reused, unless cgroups are available",
    ],
    "unsafe": [
        "NOTHING: the code can read host files, use the network and signal host processes of its uid",
    ],
}
# Top-level names of the project's packages: a copy of any of them in the sandbox's view leaks keys.
PROJECT_PACKAGES = ("exactgrade", "scaling_env", "pytorch_env", "deeplearning_env")


def installed_copies() -> list[str]:
    """Every copy of the project's packages (code, datasets) installed on this host that we can find:
    this checkout and every site directory of every interpreter layout we know."""
    import glob
    import site

    import exactgrade

    found = {os.path.dirname(os.path.abspath(exactgrade.__file__))}
    sites = set(site.getsitepackages()) | {site.getusersitepackages()}
    for pattern in ("/usr/local/lib/python3*/*-packages", "/usr/lib/python3*/*-packages",
                    "/usr/lib64/python3*/*-packages", "/usr/local/lib64/python3*/*-packages"):
        sites.update(glob.glob(pattern))
    for site_dir in sites:
        for name in PROJECT_PACKAGES:
            found.update(glob.glob(os.path.join(site_dir, f"{name}*")))
    return sorted(found)


def _visible_copies() -> list[str]:
    from exactgrade.sandbox import backends

    view = backends.system_view()
    return [path for path in installed_copies() if view.shows(path)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="also start a sandbox on the chosen backend and run a few live escape probes")


def run(args: argparse.Namespace) -> int:
    from exactgrade.sandbox import backends
    from exactgrade.sandbox.inside import confine

    found = backends.probe()
    bwrap = shutil.which("bwrap")
    version = "-"
    if bwrap:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"machine:    {platform.system()} {platform.release()} {platform.machine()}, euid {os.geteuid()}")
    print(f"bubblewrap: {bwrap or 'not installed'} ({version})")
    print(f"landlock:   ABI {confine.landlock_abi()}; seccomp filter: "
          f"{'yes' if confine.seccomp_supported() else 'no (x86_64 only)'}")
    from exactgrade.sandbox import cgroups

    cgroup_text = (f"per-sandbox v{cgroups.version()} memory + pids + cpu" if found.cgroups is None
                   else f"NO: {found.cgroups}")
    print(f"cgroups:    {cgroup_text}")
    psi = cgroups.psi_reason()
    print(f"call clock: {'own time (PSI cpu.pressure per sandbox)' if psi is None else 'wall time: ' + psi}")
    for backend in ("namespaces", "landlock"):
        reason = found.unavailable(backend)
        print(f"backend {backend:<10} {'available' if reason is None else 'unavailable: ' + reason}")
    chosen = next((b for b in ("namespaces", "landlock") if found.unavailable(b) is None), None)
    if chosen is None:
        print("\nIN USE: none. Sandbox() refuses to run untrusted code here unless unsafe=True is passed.")
        for line in GUARANTEES["unsafe"]:
            print(f"  - with unsafe=True: {line}")
        return 1
    print(f"\nIN USE: {chosen}")
    for line in GUARANTEES[chosen]:
        print(f"  - {line}")
    if found.cgroups is not None:
        print("  - NOTE: no cgroups here: Sandbox() refuses to run unless use_cgroups=False is passed; "
              "then memory is capped per process by RLIMIT_AS (torch alone reserves ~0.6 GB), CPU not at all")
    copies, visible = installed_copies(), _visible_copies()
    if visible:
        print(f"  - FAILED: installed copies of the project visible to a sandbox: {visible}")
        return 1
    print(f"  - installed copies of the project found on this host: {len(copies)}; "
          "visible to a sandbox: none")
    return _live_check(chosen) if args.check else 0


_PROBES = """
import os, socket
def attempt(name, action):
    try:
        action()
        print(name, 'REACHED')
    except Exception as e:
        print(name, 'blocked', type(e).__name__)
attempt('tcp', lambda: socket.create_connection(('127.0.0.1', 22), timeout=1))
attempt('dns', lambda: socket.getaddrinfo('pypi.org', 443))
attempt('host_file', lambda: open(project_file).read())
attempt('import_project', lambda: __import__('exactgrade'))
attempt('signal_host', lambda: os.kill(host_pid, 0))
attempt('vsock', lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM))
attempt('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2))
hits = [os.path.join(d, n) for top in view for d, dirs, files in os.walk(top)
        for n in dirs + files if n.startswith(tuple(packages))]
print('installed_copy', f'REACHED {hits[:3]}' if hits else 'blocked (none of the project packages in view)')
print('uid', os.getuid())
"""


def _live_check(backend: str) -> int:
    import exactgrade
    from exactgrade.sandbox import Sandbox, backends

    view = [*backends.system_view().landlock_paths(), "/opt", "/etc", "/work", "/tmp"]
    inputs = {"project_file": exactgrade.__file__, "host_pid": os.getpid(), "view": view,
              "packages": list(PROJECT_PACKAGES)}
    with Sandbox(inputs=inputs, backend=backend) as sb:
        out = sb.execute_code(_PROBES)
        ready = sb.ready_seconds
    print(f"\nlive check ({backend}, sandbox ready in {ready * 1000:.0f} ms):")
    print("".join(f"  {line}\n" for line in out.splitlines()), end="")
    failed = "REACHED" in out or "uid 0" in out
    print("live check:", "FAILED" if failed else "passed")
    sys.stdout.flush()
    return 1 if failed else 0
