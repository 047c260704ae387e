"""One test per attack on the sandbox, each asserting the attack failed and the host carries on.

Every test runs against each isolating backend that works on this machine (namespaces = the
default bubblewrap backend; landlock = the fallback), skipped with the reason where the kernel
or the privileges are missing. A call limit that must fire is small; work that must finish gets
FINISHES, 60 s of its own time (calltime.py: a loaded host does not spend it). Nothing races a
clock: a sleep that must outlast the test is FOREVER, ended by the test or by the limit under test.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from textwrap import dedent

import pytest
from sandbox_leftovers import FOREVER, HANG_GUARD, busy_loops, leftovers, wait_for

import exactgrade
from exactgrade.sandbox import Limits, ResultNotEncodable, Sandbox, SandboxDied, backends, uids
from exactgrade.sandbox.cgroups import PARENT, SandboxCgroup
from exactgrade.wire import WireError

FINISHES = Limits(call_timeout=60)


@pytest.fixture
def open_dir():
    """A world-readable, world-writable host dir: only the sandbox can keep the sandbox out."""
    path = Path(tempfile.mkdtemp(prefix="eg-attack-", dir="/var/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def token():
    return f"TOKEN{os.urandom(8).hex()}"


def _assert_host_fine(backend):
    """The host process is alive and can still make a working sandbox on the same backend."""
    with Sandbox(backend=backend) as sb:
        assert sb.execute_code("print(6 * 7)") == "42\n"


def test_reading_a_secret_host_file(backend, open_dir, token):
    secret = open_dir / "answer_key.txt"
    secret.write_text(token)
    secret.chmod(0o644)
    with Sandbox(inputs={"path": str(secret)}, backend=backend) as sb:
        out = sb.execute_code(dedent("""
            try:
                print(open(path).read())
            except OSError as e:
                print(type(e).__name__)
        """))
        out += sb.bash(f"cat {secret}; ls {open_dir}")
    assert token not in out
    assert ("FileNotFoundError" in out) if backend == "namespaces" else ("PermissionError" in out)


def test_importing_exactgrade_or_reading_its_files(backend):
    package_dir = Path(exactgrade.__file__).parent
    targets = [str(package_dir / "values.py"), str(package_dir.parent / "pyproject.toml"),
               os.path.expanduser("~/.cache/huggingface"), str(package_dir / "domains"),
               os.path.expanduser("~")]
    code = dedent("""
        import os
        try:
            import exactgrade
            print('IMPORTED')
        except ImportError as e:
            print(repr(e))
        for p in targets:
            try:
                print(p, len(open(p).read()) if os.path.isfile(p) else os.listdir(p))
            except OSError as e:
                print(p, type(e).__name__)
    """)
    with Sandbox(inputs={"targets": targets}, backend=backend) as sb:
        out = sb.execute_code(code)
        out += sb.bash(f"python3 -c 'import exactgrade' 2>&1; cat {targets[0]} | head -3")
    assert "IMPORTED" not in out
    assert "No module named 'exactgrade'" in out
    assert "TensorValue" not in out and "[project]" not in out
    assert out.count("Error") >= len(targets)


def test_reading_proc_1_environ_and_host_cmdlines(backend, token):
    victim = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({FOREVER})", token],
                              env={"EG_SECRET": token})
    try:
        code = dedent("""
            import os
            found = []
            for pid in ['1', str(victim)] + [p for p in os.listdir('/proc') if p.isdigit()]:
                for name in ('environ', 'cmdline'):
                    try:
                        found.append(open(f'/proc/{pid}/{name}', 'rb').read().decode(errors='replace'))
                    except OSError as e:
                        found.append(type(e).__name__)
            print(found)
        """)
        with Sandbox(inputs={"victim": victim.pid}, backend=backend) as sb:
            out = sb.execute_code(code)
            out += sb.bash(f"cat /proc/1/environ /proc/{victim.pid}/cmdline; ps aux")
    finally:
        victim.kill()
        victim.wait()
    assert token not in out
    assert "EG_SECRET" not in out


def test_tcp_connect_to_a_host_server(backend):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    port = server.getsockname()[1]
    code = dedent("""
        import socket
        try:
            socket.create_connection(('127.0.0.1', port), timeout=2)
            print('CONNECTED')
        except OSError as e:
            print('blocked', type(e).__name__)
    """)
    try:
        with Sandbox(inputs={"port": port}, backend=backend, limits=FINISHES) as sb:
            out = sb.execute_code(code)
            out += sb.bash(f"echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED")
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert "CONNECTED" not in out
    assert "blocked" in out


def test_dns_lookup(backend):
    code = dedent("""
        import socket
        try:
            print('RESOLVED', socket.getaddrinfo('pypi.org', 443))
        except OSError as e:
            print('blocked', type(e).__name__)
    """)
    with Sandbox(backend=backend, limits=FINISHES) as sb:
        out = sb.execute_code(code)
    assert "RESOLVED" not in out
    assert "blocked" in out


def test_signalling_the_host(backend):
    victim = subprocess.Popen(["sleep", str(FOREVER)])
    code = dedent("""
        import os, signal
        for pid in (victim, host):
            for sig in (signal.SIGKILL, signal.SIGTERM):
                try:
                    os.kill(pid, sig)
                    print('SENT')
                except OSError as e:
                    print(type(e).__name__)
    """)
    try:
        with Sandbox(inputs={"victim": victim.pid, "host": os.getpid()}, backend=backend) as sb:
            out = sb.execute_code(code)
            try:
                sb.bash(f"kill -9 {victim.pid} {os.getpid()}; kill -9 -1")
            except SandboxDied:
                pass  # kill -1 may take the sandbox itself down; the host must not notice
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
    assert "SENT" not in out
    _assert_host_fine(backend)


def test_writing_outside_the_work_dir(backend, open_dir, token):
    runtime_file = Path(exactgrade.wire.__file__)
    before = runtime_file.read_bytes()
    targets = [str(open_dir / "pwned"), f"/tmp/pwned-{token}", "/usr/pwned", "/etc/pwned",
               "/opt/eg/lib/_egwire/wire.py", "/opt/eg/python/bin/python3", str(runtime_file)]
    code = dedent("""
        for p in targets:
            try:
                open(p, 'a').write('pwned')
                print('WROTE', p)
            except OSError as e:
                print(type(e).__name__, p)
    """)
    with Sandbox(inputs={"targets": targets}, backend=backend) as sb:
        out = sb.execute_code(code)
        sb.bash(f"echo pwned > {open_dir}/pwned2; touch /pwned")
    assert not list(open_dir.iterdir())
    assert not Path(f"/tmp/pwned-{token}").exists()
    assert not Path("/pwned").exists() and not Path("/usr/pwned").exists()
    assert runtime_file.read_bytes() == before
    for line in out.splitlines():
        if line.startswith("WROTE"):
            # only the namespaces backend's private /tmp (a tmpfs inside the sandbox) is writable
            assert backend == "namespaces" and line == f"WROTE /tmp/pwned-{token}", out


def test_allocating_8_gib(backend):
    with Sandbox(backend=backend, limits=FINISHES) as sb:
        try:
            out = sb.execute_code("x = b'x' * (8 << 30)\nprint('ALLOCATED', len(x))")
        except SandboxDied as died:
            assert "out of memory" in str(died)
        else:
            assert "MemoryError" in out and "ALLOCATED" not in out
    _assert_host_fine(backend)


@pytest.mark.timing
def test_cpu_spin(backend):
    limits = Limits(call_timeout=1.5, wall_factor=30)  # spinning is the model's own time, even when starved
    with Sandbox(backend=backend, limits=limits) as sb:
        with pytest.raises(SandboxDied, match="exec timed out after 1.5 s"):
            sb.execute_code("while True:\n    pass")
        call = sb.last_call
        with pytest.raises(SandboxDied, match="timed out"):
            sb.result()
    assert call.charged >= limits.call_timeout - 0.01, call  # ended by its limit, in its own time
    _assert_host_fine(backend)


@pytest.mark.timing
def test_sleep_past_the_call_limit(backend):
    limits = Limits(call_timeout=1.0)
    with Sandbox(backend=backend, limits=limits) as sb:
        with pytest.raises(SandboxDied, match="bash timed out after 1 s"):
            sb.bash(f"sleep {FOREVER}")  # it never ends: only the limit can
        call = sb.last_call
        with pytest.raises(SandboxDied, match="timed out"):
            sb.execute_code("print(1)")
    assert call.charged >= limits.call_timeout - 0.01, call


def _assert_no_processes(uid):
    """Nothing of the closed sandbox `uid` is left: no process, cgroup or work dir. Checked with
    the uid's slot held, since another process on the host may claim the uid right after close."""
    assert leftovers({uid}) == {}


FORK_300 = dedent(f"""
    n = 0
    for _ in range(300):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep({FOREVER})
            os._exit(0)
        n += 1
    print('forked', n)
""")
"""Fork up to 300 sleeping children and print how many forks succeeded."""


@pytest.mark.timing
def test_fork_storm(backend):
    code = "import os, time\n" + FORK_300
    with Sandbox(backend=backend, limits=Limits(call_timeout=60, max_processes=64)) as sb:
        out = sb.execute_code(code)
        uid = sb.uid
    forked = int(out.split("forked ")[1])
    assert forked < 64
    _assert_no_processes(uid)
    with Sandbox(backend=backend, limits=Limits(call_timeout=1, wall_factor=30)) as sb:  # only must fire
        with pytest.raises(SandboxDied, match="timed out"):
            sb.execute_code(dedent("""
                import os
                while True:
                    try:
                        os.fork()
                    except OSError:
                        pass
            """))
        uid = sb.uid
    _assert_no_processes(uid)


CLOSES = 50


@pytest.mark.timing
@pytest.mark.alone
def test_closing_fork_storms_beside_busy_loops_leaves_nothing(backend):
    """close() returns only once no process of the sandbox is left, also when busy loops on
    every CPU preempt the killed processes while they exit (one was left right after close, under load)."""
    left = {}
    with busy_loops(HANG_GUARD):
        for _ in range(CLOSES):
            with Sandbox(backend=backend, limits=Limits(call_timeout=60, max_processes=64)) as sb:
                out = sb.execute_code("import os, time\n" + FORK_300)
                uid = sb.uid
            assert int(out.split("forked ")[1]) > 0, out
            left.update(leftovers({uid}))  # checked at once: close() has returned
    assert left == {}


def test_rlimit_fallback_contains_memory_forks_and_daemons(backend):
    """Without cgroups: RLIMIT_AS stops the allocation, RLIMIT_NPROC of the sandbox's own uid stops
    the fork storm, and close() kills every process of that uid, daemons included."""
    code = dedent("""
        import os, subprocess, time
        try:
            x = b'x' * (8 << 30)
        except MemoryError:
            print('MemoryError')
        subprocess.Popen(['setsid', 'sleep', '600'])
    """) + FORK_300
    with pytest.warns(RuntimeWarning, match="WITHOUT a cgroup"), \
            Sandbox(backend=backend, use_cgroups=False, limits=FINISHES) as sb:
        out = sb.execute_code(code)
        uid = sb.uid
        for pid in uids.processes_of(uid):  # none of them is in a cgroup of ours
            assert f"/{PARENT}/" not in Path(f"/proc/{pid}/cgroup").read_text()
    assert out.startswith("MemoryError\nforked ")
    assert int(out.split("forked ")[1]) < 64
    _assert_no_processes(uid)


def test_setsid_daemon_does_not_survive_close(backend):
    code = dedent("""
        import os, subprocess, time
        subprocess.Popen(['setsid', 'sleep', '600'])
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(600)
            os._exit(0)
    """)
    with Sandbox(backend=backend) as sb:
        sb.execute_code(code)
        sb.bash("nohup setsid sleep 600 >/dev/null 2>&1 &")
        uid = sb.uid
        # the worker (+ pid 1) and the three daemons, once they run (the last is started in the background)
        wait_for(lambda: len(uids.processes_of(uid)) >= 4, "the sandbox's daemons")
    _assert_no_processes(uid)


def test_os_exit(backend):
    with Sandbox(backend=backend) as sb:
        sb.execute_code("result = 5")
        with pytest.raises(SandboxDied, match="worker exited"):
            sb.execute_code("import os; os._exit(0)")
        with pytest.raises(SandboxDied, match="worker exited"):
            sb.result()
    with Sandbox(backend=backend) as sb:  # a background thread exits in a later call (told by a file)
        sb.execute_code("import os, threading, time\ndef wait():\n    while not os.path.exists('go'):\n"
                        "        time.sleep(0.01)\n    os._exit(0)\nthreading.Thread(target=wait).start()")
        with pytest.raises(SandboxDied, match="worker exited"):
            sb.execute_code(f"open('go', 'w').close()\nimport time\ntime.sleep({FOREVER})")
    _assert_host_fine(backend)


def test_killing_the_parent(backend):
    code = dedent("""
        import os, signal
        for pid in (os.getppid(), 1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as e:
                print(type(e).__name__)
        result = 1
    """)
    with Sandbox(backend=backend) as sb:
        try:
            sb.execute_code(code)
            assert sb.result() == 1  # the signal was refused or ignored
        except SandboxDied:
            pass  # or the sandbox took itself down; either way only the sandbox
    assert os.getpid() > 0
    _assert_host_fine(backend)


FORGE_WITH_LIVE_ID = """
import sys, os, json
frame = sys._getframe()
while frame is not None and 'request' not in frame.f_locals:
    frame = frame.f_back
rid = frame.f_locals['request']['id']
os.write(101, (json.dumps({'id': rid, 'ok': True, 'output': 'forged'}) + '\\n').encode())
"""


@pytest.mark.parametrize(("name", "code"), [
    ("foreign id", "import os\nos.write(101, b'{\"id\": \"0\", \"ok\": true, \"output\": \"forged\"}\\n')"),
    ("live id", FORGE_WITH_LIVE_ID),
    ("non-json", "import os\nos.write(101, b'result = 42\\n')"),
    ("oversized", "import os\nos.write(101, b'x' * (4 << 20))"),
])
def test_protocol_forgery(backend, name, code):
    with Sandbox(backend=backend, limits=FINISHES) as sb:
        with pytest.raises(SandboxDied, match="protocol violation"):
            sb.execute_code(code)  # a forged line is either rejected now ...
            sb.execute_code("result = 1")  # ... or the real reply behind it is caught on the next call
        with pytest.raises(SandboxDied, match="protocol violation"):
            sb.result()


def test_forged_result_reply_is_decoded_strictly(backend):
    code = ("import _eginside.worker as w\n"
            "w.Worker.encode_result = lambda self: {'ok': True, 'wire': '{\"$frac\": \"1/0\"}'}\n")
    with Sandbox(backend=backend) as sb:
        sb.execute_code(code)
        with pytest.raises(WireError) as refused:
            sb.result()
        assert type(refused.value) is WireError  # refused by the host, not reported by the sandbox


@pytest.mark.parametrize(("patch", "outcome"), [
    ("import json\njson.dumps = lambda *a, **k: '42'\njson.loads = lambda *a, **k: {}", "value"),
    ("import _eginside.worker as w\nw._dumps = lambda *a, **k: '42'", "died"),
    ("import _eginside.worker as w\nw._dumps = lambda m, **k: '{\"id\": \"%s\", \"ok\": true}' % m['id']",
     "died"),
])
def test_monkeypatched_json(backend, patch, outcome):
    with Sandbox(backend=backend) as sb:
        sb.execute_code("result = 7")
        if outcome == "value":  # the worker restores json before encoding: the patch changes nothing
            sb.execute_code(patch)
            assert sb.result() == 7
        else:  # the patched reply of this very call, or of the next, is caught by the host
            with pytest.raises(SandboxDied, match="protocol violation"):
                sb.execute_code(patch)
                sb.result()
            with pytest.raises(SandboxDied, match="protocol violation"):
                sb.result()


@pytest.mark.parametrize(("name", "code", "error"), [
    ("AlwaysEqual", "class A:\n    __eq__ = lambda self, other: True\nresult = A()", "cannot encode"),
    # subclasses of int/float/str/list/dict are read back as their base value: see test_readback.py
    ("Fraction subclass", "import fractions\nclass Q(fractions.Fraction):\n"
     "    __eq__ = lambda self, other: True\nresult = Q(1, 3)", "cannot encode"),
    ("huge int", "result = 10**10**6", "digits"),
    ("deep nesting", "r = []\nfor _ in range(100000):\n    r = [r]\nresult = r", "nested deeper"),
    ("200 MB string", "result = 'x' * 200_000_000", "char"),
])
def test_hostile_result_values(backend, name, code, error):
    with Sandbox(backend=backend, limits=FINISHES) as sb:
        sb.execute_code(code)
        with pytest.raises(ResultNotEncodable, match=error):  # a wrong answer, not a harness failure
            sb.result()
        assert sb.execute_code("print('alive')") == "alive\n"


def test_bool_for_an_int_stays_a_bool(backend):
    with Sandbox(backend=backend) as sb:
        sb.execute_code("result = [True, 1, False, 0]")
        value = sb.result()
    assert [type(v) for v in value] == [bool, int, bool, int]


def test_sandbox_processes_cannot_signal_the_zygote_or_each_other(backend):
    with Sandbox(backend=backend) as a, Sandbox(backend=backend) as b:
        a.execute_code("import os\nresult = os.getpid()")
        assert a.uid != b.uid
        out = b.execute_code(
            "import os, signal\nfor pid in range(1, 200):\n    try:\n        os.kill(pid, 0)\n"
            "        print('visible', pid)\n    except OSError:\n        pass\n")
        assert a.execute_code("print('alive')") == "alive\n"
    if backend == "namespaces":  # own pid namespace: only itself (pid 1 init, pid 2 worker)
        assert out.split() == ["visible", "1", "visible", "2"]


# ---- kernel resources shared with the host, and a trickled reply --------------------------

SOCKET_PROBE = dedent("""
    import errno, socket
    for name, family, kind, proto in probes:
        try:
            socket.socket(family, kind, proto).close()
            print(name, 'OPENED')
        except OSError as e:
            print(name, errno.errorcode[e.errno])
    try:
        socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        print('socketpair OPENED')
    except OSError as e:
        print('socketpair', errno.errorcode[e.errno])
""")
# (name, family, type, protocol): every family but AF_UNIX carries the network or host kernel state
SOCKET_FAMILIES = [
    ("vsock", socket.AF_VSOCK, socket.SOCK_STREAM, 0),  # not separated by network namespaces
    ("netlink_usersock", socket.AF_NETLINK, socket.SOCK_RAW, 2),  # queues outside the memory cgroup
    ("netlink_route", socket.AF_NETLINK, socket.SOCK_RAW, 0),
    ("inet_tcp", socket.AF_INET, socket.SOCK_STREAM, 0),
    ("inet_udp", socket.AF_INET, socket.SOCK_DGRAM, 0),
    ("inet6", socket.AF_INET6, socket.SOCK_DGRAM, 0),
    ("packet", socket.AF_PACKET, socket.SOCK_DGRAM, 0),
    ("unix", socket.AF_UNIX, socket.SOCK_STREAM, 0),
]


def test_only_unix_sockets(backend):
    """AF_VSOCK is one port space with the host (a vsock port bound on the host is taken inside too);
    NETLINK queues are kernel memory outside the memory cgroup. Only AF_UNIX is left, and only where
    the sandbox has its own network namespace (namespaces); landlock refuses socket() altogether."""
    probes = [[name, int(family), int(kind), proto] for name, family, kind, proto in SOCKET_FAMILIES]
    with Sandbox(inputs={"probes": probes}, backend=backend) as sb:
        out = sb.execute_code(SOCKET_PROBE)
    seen = dict(line.split() for line in out.splitlines())
    unix = "OPENED" if backend == "namespaces" else "EAFNOSUPPORT"
    assert seen == {**{name: "EAFNOSUPPORT" for name, *_ in SOCKET_FAMILIES}, "unix": unix,
                    "socketpair": "OPENED"}


def _has_cap_sys_resource() -> bool:
    status = Path("/proc/self/status").read_text()
    cap_eff = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff")), 16)
    return bool(cap_eff & (1 << 24))


def test_sandboxes_are_the_oom_killers_first_choice(backend):
    code = dedent("""
        for value in ('-1', '0'):
            try:
                with open('/proc/self/oom_score_adj', 'w') as f:
                    f.write(value)
                print('lowered to', value)
            except OSError as e:
                print('refused', type(e).__name__)
    """)
    with Sandbox(backend=backend) as sb:
        sb.bash(f"sleep {FOREVER} >/dev/null 2>&1 &")  # still there when read: close() ends it
        adjustments = {Path(f"/proc/{pid}/oom_score_adj").read_text() for pid in uids.processes_of(sb.uid)}
        out = sb.execute_code(code).splitlines()
    assert adjustments == {"1000\n"}  # the worker, its pid 1 and what it started
    assert out[0].startswith("refused")  # below the floor: never
    if backend == "landlock" or _has_cap_sys_resource():  # floor raised to 1000 (or no write access)
        assert out[1].startswith("refused")
    else:  # this host's root lacks CAP_SYS_RESOURCE: the floor stays 0 (README, accepted)
        assert out[1] == "lowered to 0"


def test_kernel_aio_contexts_are_refused(backend):
    """16 io_setup(4096) fill the host-wide fs.aio-max-nr; io_uring is refused as well."""
    code = dedent("""
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        ctx = ctypes.c_ulong(0)
        for nr, name in ((206, 'io_setup'), (425, 'io_uring_setup')):
            ret = libc.syscall(nr, 4096, ctypes.byref(ctx))
            print(name, ret, errno.errorcode.get(ctypes.get_errno()))
    """)
    with Sandbox(backend=backend) as sb:
        out = sb.execute_code(code)
    assert out.split("\n")[:2] == ["io_setup -1 EPERM", "io_uring_setup -1 EPERM"]


OPEN_PTYS = dedent("""
    import os
    ptys = []
    try:
        while len(ptys) < 100:
            ptys.append(os.openpty())
    except OSError as e:
        print(type(e).__name__, e.errno)
    print('ptys', len(ptys))
""")


def test_one_sandbox_cannot_take_every_pty(backend):
    """Namespaces: a private devpts per sandbox with a small max; landlock: no pty at all."""
    from exactgrade.sandbox.inside.zygote import MAX_PTYS

    with Sandbox(backend=backend) as a, Sandbox(backend=backend) as b:
        hog = a.execute_code(OPEN_PTYS)
        other = b.execute_code(OPEN_PTYS)
    if backend == "namespaces":
        assert hog == other == f"OSError 28\nptys {MAX_PTYS}\n"  # ENOSPC at its own max, not the host's
    else:
        assert hog == other == "PermissionError 13\nptys 0\n"


TRICKLE = dedent("""
    import _eginside.worker as w, fcntl, json, os, time
    def trickle(self, message):
        flags = fcntl.fcntl(self.reply_fd, fcntl.F_GETFL)
        fcntl.fcntl(self.reply_fd, fcntl.F_SETFL, flags | os.O_DIRECT)  # packet mode: a write per read
        data = json.dumps(message).encode() + b'\\n'
        data = prefix.encode() + b' ' * 900_000 + data[len(prefix):]
        for start in range(0, len(data), chunk):
            os.write(self.reply_fd, data[start:start + chunk])
            time.sleep(pause)
    genuine = w.Worker.reply
    w.Worker.reply = lambda self, message: (trickle if 'wire' in message else genuine)(self, message)
    result = 42
""")


@pytest.mark.parametrize(("prefix", "chunk", "pause", "reason"), [
    ("", 1, 0, "protocol violation: reply does not start with '{'"),  # leading whitespace
    ("{", 1, 0, "protocol violation: reply trickled"),  # valid JSON, one byte per read
    ("{", 4096, 0.05, "result timed out after 2 s"),  # page-sized pieces, slowly: held to the limit only
])
@pytest.mark.timing
def test_a_trickled_reply_ends_at_the_time_limit(backend, prefix, chunk, pause, reason):
    inputs = {"prefix": prefix, "chunk": chunk, "pause": pause}
    with Sandbox(inputs=inputs, backend=backend, limits=Limits(call_timeout=2, wall_factor=30)) as sb:
        sb.execute_code(TRICKLE)
        with pytest.raises(SandboxDied) as died:
            sb.result()
        call = sb.last_call
    assert str(died.value).startswith(reason)
    if "timed out" in reason:  # held to its limit in its own time, however slowly the pieces come
        assert call.charged >= 2 - 0.01, call


def _cpu_seconds(pids: set[int]) -> float:
    """Seconds pids ran on a CPU (host view: /proc/PID/schedstat, in ns; utime + stime are whole clock
    ticks, up to one tick off per process, 0.6 s over 60 processes)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9


@pytest.mark.timing
def test_busy_loops_left_between_calls_get_almost_no_cpu(backend):
    """60 setsid busy loops (60 sessions, so 60 autogroups outside a cgroup) left running after a call:
    in the sandbox's cpu group they share its quota, which between calls is IDLE_CPUS."""
    from exactgrade.sandbox.cgroups import IDLE_CPUS

    with Sandbox(backend=backend) as a:
        a.bash("for i in $(seq 60); do setsid sh -c 'while :; do :; done' >/dev/null 2>&1 & done")
        group = SandboxCgroup(f"sb-{a.uid}")
        pids = group.pids()
        assert len(pids) >= 60 and pids <= set(uids.processes_of(a.uid))  # setsid did not leave it
        used, started = _cpu_seconds(pids), time.monotonic()
        time.sleep(1.0)  # a window to measure in, however long it really lasts
        idle_cpu, window = _cpu_seconds(pids) - used, time.monotonic() - started
        assert a.execute_code("print('alive')") == "alive\n"
    # unthrottled they would take up to every CPU of the window (measured: about IDLE_CPUS * window)
    assert idle_cpu < 10 * IDLE_CPUS * window + 0.05, (idle_cpu, window)


# ---- what the system view shows ------------------------------------------------------

@pytest.fixture
def bait_in_site_dirs(token):
    """An answer key planted where `pip install` as root puts packages: /usr/local/lib and a
    distro's /usr/lib/python3*/ (removed afterwards)."""
    planted = []
    for parent in ("/usr/local/lib", "/usr/lib/python3"):
        if os.path.isdir(parent):
            bait = Path(tempfile.mkdtemp(prefix="eg-bait-", dir=parent))
            bait.chmod(0o755)
            (bait / "answer_key.json").write_text(token)
            (bait / "answer_key.json").chmod(0o644)
            planted.append(bait)
    yield planted
    for bait in planted:
        shutil.rmtree(bait)


def test_python_site_directories_are_not_visible(backend, bait_in_site_dirs, token):
    files = [str(bait / "answer_key.json") for bait in bait_in_site_dirs]
    code = dedent("""
        import os
        for path in files + ['/usr/local', '/usr/lib/python3']:
            try:
                print(path, open(path).read() if os.path.isfile(path) else os.listdir(path))
            except OSError as e:
                print(path, type(e).__name__)
    """)
    with Sandbox(inputs={"files": files}, backend=backend) as sb:
        out = sb.execute_code(code)
        out += sb.bash("cat " + " ".join(files) + "; ls /usr/local /usr/lib/python3 2>&1; echo bash works")
        out += sb.execute_code("import subprocess; print(subprocess.run(['python3', '-c', 'print(6*7)'], "
                               "capture_output=True, text=True).stdout)")
    assert token not in out
    refused = "PermissionError" if backend == "landlock" else "FileNotFoundError"
    for path in files:
        assert f"{path} {refused}" in out
    assert f"/usr/local {refused}" in out  # not even listed
    assert f"/usr/lib/python3 {'PermissionError' if backend == 'landlock' else '[]'}" in out
    assert "bash works" in out and "42" in out  # binaries and libraries still are


def test_proc_net_does_not_list_host_sockets(backend):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = f":{server.getsockname()[1]:04X}"  # as /proc/net/tcp writes it
    code = dedent("""
        for path in ('/proc/self/net/tcp', '/proc/net/tcp', '/proc/net/unix', '/proc/self/net/unix'):
            try:
                print(path, open(path).read())
            except OSError as e:
                print(path, type(e).__name__)
    """)
    try:
        assert port in Path("/proc/net/tcp").read_text()  # the host does list it
        with Sandbox(backend=backend) as sb:
            out = sb.execute_code(code)
    finally:
        server.close()
    assert port not in out
    if backend == "landlock":  # no network namespace: not readable at all
        assert out.count("PermissionError") == 4, out


SYSV_IPC = dedent("""
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    def report(name, ret):
        print(name, 'ok' if ret != -1 else errno.errorcode[ctypes.get_errno()])
    shm = libc.shmget(key, 1 << 20, 0o1666)  # IPC_CREAT | 0666
    report('shmget', shm)
    if shm != -1 and write:
        ctypes.memmove(libc.shmat(shm, None, 0), token.encode(), len(token))
    if shm != -1 and not write:
        print('read', ctypes.string_at(libc.shmat(shm, None, 0), len(token)).decode(errors='replace'))
    report('msgget', libc.msgget(key, 0o1666))
    report('semget', libc.semget(key, 1, 0o1666))
    libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    report('mq_open', libc.mq_open(b'/eg-attack', 0o100 | 2, 0o666, None))  # O_CREAT | O_RDWR
""")


def test_sysv_ipc_is_private_or_refused(backend, token):
    """SysV shm of one sandbox must not be readable by another (another uid) or outlive it."""
    key = int.from_bytes(os.urandom(3), "big") + 1
    inputs = {"key": key, "token": token}
    with Sandbox(inputs={**inputs, "write": True}, backend=backend) as a, \
            Sandbox(inputs={**inputs, "write": False}, backend=backend) as b:
        wrote = a.execute_code(SYSV_IPC)
        read = b.execute_code(SYSV_IPC)
        uid_a = a.uid
    assert token not in read
    if backend == "landlock":  # the host's IPC namespace: refused
        assert wrote == read == "shmget EPERM\nmsgget EPERM\nsemget EPERM\nmq_open EPERM\n"
    else:  # its own IPC namespace: b's shmget makes a fresh, empty segment
        assert wrote.startswith("shmget ok\nmsgget ok\nsemget ok\nmq_open ok")
    host_objects = [line for kind in ("shm", "msg", "sem")
                    for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]]
    assert not [line for line in host_objects if str(uid_a) in line.split()]


# ---- one disk budget, without a cgroup too ---------------------------

FILL = dedent("""
    import os
    print(len({os.stat(d).st_dev for d in ('/work', '/tmp', '/dev/shm')}), 'filesystem(s)')
    for d in DIRS:
        with open(f'{d}/fill', 'wb') as f:
            for _ in range(40):
                f.write(b'x' * (1 << 20))  # 40 MiB in pieces: RLIMIT_AS is 64 MiB too
        print(d, 'filled')
""")


@pytest.mark.parametrize("dirs", [("/work",), ("/tmp",), ("/dev/shm",), ("/work", "/tmp"),
                                  ("/tmp", "/dev/shm")])
def test_the_three_tmpfs_share_one_budget(dirs):
    """Namespaces (landlock has no tmpfs: disk.py accounts for its work dir): /work, /tmp and /dev/shm
    are one tmpfs of disk_bytes, so 40 MiB fit in any one of them but not in two, even without a
    cgroup: the full tmpfs ends the sandbox as the model's fault."""
    if backends.probe().unavailable("namespaces") is not None:
        pytest.skip("namespaces backend unavailable on this machine")
    limits = Limits(memory_bytes=64 << 20, disk_bytes=64 << 20, call_timeout=60)
    with pytest.warns(RuntimeWarning), Sandbox(inputs={"DIRS": list(dirs)}, backend="namespaces",
                                               use_cgroups=False, limits=limits) as sb:
        if len(dirs) == 1:
            assert sb.execute_code(FILL) == f"1 filesystem(s)\n{dirs[0]} filled\n"
            return
        with pytest.raises(SandboxDied) as died:
            sb.execute_code(FILL)
    death = died.value.death
    assert death.cause == "model" and "tmpfs of 67108864 bytes" in death.evidence, death


def test_running_without_a_cgroup_is_an_explicit_opt_in(backend):
    from exactgrade.sandbox import SandboxUnavailable
    from exactgrade.sandbox.sandbox import _check_cgroups

    reason = backends.probe().cgroups
    if reason is None:  # cgroups work here: the default uses them, asking for none warns
        with Sandbox(backend=backend) as sb:
            assert SandboxCgroup(f"sb-{sb.uid}").pids()
    else:
        with pytest.raises(SandboxUnavailable, match="use_cgroups=False"):
            Sandbox(backend=backend)
    with pytest.warns(RuntimeWarning, match="WITHOUT a cgroup"):
        _check_cgroups(False)
