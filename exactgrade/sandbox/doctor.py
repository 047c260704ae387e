"""`python -m exactgrade doctor`: which sandbox backend runs here and what it does and does not guarantee."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys

HELP = "report the sandbox backend in use on this machine and what it guarantees"

GUARANTEES = {
    "namespaces": [
        "own mount namespace: only /usr, the runtime tree (interpreter, stdlib, allowed packages) and "
        "a fresh tmpfs /work and /tmp are visible; the project, datasets, HF cache, /root, host /tmp are not",
        "own pid namespace and /proc: no host process is visible or signallable",
        "own network namespace with no interfaces up: no TCP/UDP/DNS at all, abstract unix sockets isolated",
        "own ipc and uts namespaces",
        "a dedicated uid per sandbox, no capabilities (bounding set empty), no_new_privs, seccomp deny-list",
        "memory and process limits via a per-sandbox cgroup v1 (if cgroups are writable; else rlimits)",
        "wall-clock limit per call enforced by the host killing the sandbox; RLIMIT_CPU per process",
        "cleanup: the cgroup (or the uid) is killed and the pid namespace collapses on close()",
    ],
    "landlock": [
        "Landlock: read-only access to the runtime tree and system libraries, read/write only the work dir",
        "Landlock ABI >= 4: TCP bind/connect denied; seccomp also denies socket() (no DNS, no unix sockets)",
        "Landlock ABI >= 6: signals and abstract unix sockets scoped to the sandbox",
        "a dedicated uid per sandbox, no capabilities, no_new_privs, seccomp deny-list",
        "memory and process limits via a per-sandbox cgroup v1 (if writable; else RLIMIT_AS/RLIMIT_NPROC)",
        "NOT guaranteed: no pid namespace (host pids can be probed with kill(pid, 0): EPERM vs ESRCH; "
        "/proc itself is denied except cpuinfo and the process's own entry); the work dir is on the host "
        "disk (RLIMIT_FSIZE caps each file, not the total); processes started by model code that outlive a "
        "crashed host are only reaped when their uid slot is reused, unless cgroups are available",
    ],
    "unsafe": [
        "NOTHING: the code can read host files, use the network and signal host processes of its uid",
    ],
}


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
    cgroup_text = "per-sandbox v1 memory + pids" if found.cgroups is None else f"NO: {found.cgroups}"
    print(f"cgroups:    {cgroup_text}")
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
        print("  - NOTE: no cgroups here: memory is capped by RLIMIT_AS (torch alone reserves ~0.6 GB of it)")
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
print('uid', os.getuid())
"""


def _live_check(backend: str) -> int:
    import exactgrade
    from exactgrade.sandbox import Sandbox

    inputs = {"project_file": exactgrade.__file__, "host_pid": os.getpid()}
    with Sandbox(inputs=inputs, backend=backend) as sb:
        out = sb.execute_code(_PROBES)
        ready = sb.ready_seconds
    print(f"\nlive check ({backend}, sandbox ready in {ready * 1000:.0f} ms):")
    print("".join(f"  {line}\n" for line in out.splitlines()), end="")
    failed = "REACHED" in out or "uid 0" in out
    print("live check:", "FAILED" if failed else "passed")
    sys.stdout.flush()
    return 1 if failed else 0
