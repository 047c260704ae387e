"""What three attacks of issue 15 cost the host and the other sandboxes, measured on the real sandbox.

    python benchmarks/bench_sandbox_attacks.py trickle [--backend B]  # call time under a trickle
    python benchmarks/bench_sandbox_attacks.py kmem [--backend B]     # kernel memory under a flood
    python benchmarks/bench_sandbox_attacks.py cpu [--backend B]      # sandbox B under A's busy loops

Each prints its baseline from the same run (the call limit; /proc/meminfo before the flood; B's work
with A idle). Run it with PYTHONPATH pointing at another checkout to measure that version ("before").
Other jobs share the machine: the load average is printed with every figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path
from textwrap import dedent

from exactgrade.sandbox import Limits, Sandbox, SandboxDied

TRICKLE = dedent("""
    import _eginside.worker as w, fcntl, json, os
    def trickle(self, message):
        fd = self.reply_fd
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)  # 1 byte per read
        data = json.dumps(message).encode() + b'\\n'
        os.write(fd, prefix.encode())
        writers = []  # several writers keep the pipe full, so every poll() of the host finds data
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                for _ in range(padding // 4):
                    os.write(fd, b' ')
                os._exit(0)
            writers.append(pid)
        for pid in writers:
            os.waitpid(pid, 0)
        for byte in data[len(prefix):]:
            os.write(fd, bytes([byte]))
    genuine = w.Worker.reply
    w.Worker.reply = lambda self, message: (trickle if 'wire' in message else genuine)(self, message)
    result = 42
""")

FLOOD = dedent("""
    import errno, socket
    held, queued, payload = [], 0, b'x' * size
    def opened(family, kind, proto=0):
        if family == socket.AF_NETLINK:
            s = socket.socket(family, kind, proto)
            s.bind((0, 0))
            return s, s, s.getsockname()
        a, b = socket.socketpair(family, kind)
        return a, b, None
    try:
        while queued < budget:
            sender, receiver, address = opened(*family)
            held += [sender, receiver]
            sender.setblocking(False)
            while queued < budget:
                try:
                    queued += sender.sendto(payload, address) if address else sender.send(payload)
                except OSError as e:
                    if e.errno in (errno.EAGAIN, errno.ENOBUFS):
                        break
                    raise
    except OSError as e:
        print('stopped:', errno.errorcode.get(e.errno, e.errno))
    print('queued', queued, 'bytes in', len(held), 'sockets')
""")
FAMILIES = {"netlink_usersock": (16, 3, 2), "unix_dgram": (1, 2), "unix_stream": (1, 1)}

BUSY = dedent("""
    for i in $(seq 60); do setsid sh -c 'while :; do :; done' >/dev/null 2>&1 & done
""")
WORK = "import time\nt = time.monotonic()\nx = 0\nfor i in range(n):\n    x += i\nprint(time.monotonic() - t)"


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def _meminfo() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, value = line.split(":")
        fields[name] = int(value.split()[0]) * 1024
    return fields


def _grew(field: str, before: dict[str, int], now: dict[str, int]) -> str:
    return f"{field} {(now[field] - before[field]) / (1 << 20):+.0f} MiB"


def trickle(backend: str) -> None:
    limit = Limits().call_timeout  # the default, 30 s
    for prefix, what in (("", "900 KB of leading whitespace"), ("{", "'{' then 900 KB of whitespace")):
        padding = 900_000
        with Sandbox(inputs={"prefix": prefix, "padding": padding}, backend=backend,
                     limits=Limits(call_timeout=limit)) as sb:
            sb.execute_code(TRICKLE)
            started, cpu_started = time.monotonic(), time.process_time()
            try:
                outcome = f"returned {sb.result()!r}"
            except SandboxDied as died:
                outcome = f"SandboxDied: {died}"
            held, spent = time.monotonic() - started, time.process_time() - cpu_started
        print(f"trickle ({what}, 1 byte per read): result() held {held:.2f} s against a {limit:g} s limit, "
              f"{spent:.2f} CPU-s of the host; {outcome}; load {_load()}")


def kmem(backend: str) -> None:
    budget = 256 << 20
    limit = 64 << 20
    for name, family in FAMILIES.items():
        before = _meminfo()
        with Sandbox(inputs={"family": list(family), "budget": budget, "size": 4096},
                     backend=backend, limits=Limits(memory_bytes=limit, call_timeout=60)) as sb:
            try:
                out = sb.execute_code(FLOOD).strip().replace("\n", "; ")
            except SandboxDied as died:
                out = f"SandboxDied: {died}"
            during = _meminfo()
            usage = Path(f"/sys/fs/cgroup/memory/exactgrade/sb-{sb.uid}/memory.usage_in_bytes")
            charged = int(usage.read_text()) if usage.exists() else -1
        after = _meminfo()
        held = ", ".join(_grew(field, before, during) for field in ("SUnreclaim", "Slab", "MemAvailable"))
        print(f"kmem {name} (memory limit {limit >> 20} MiB): {out}; while held: {held}, memory cgroup "
              f"{charged >> 20} MiB; after close: {_grew('SUnreclaim', before, after)}; load {_load()}")


def cpu(backend: str, rounds: int) -> None:
    n = 3_000_000
    with Sandbox(backend=backend, inputs={"n": n}) as b:
        alone = [float(b.execute_code(WORK)) for _ in range(rounds)]
        host_alone = [_host_work(n) for _ in range(rounds)]
        with Sandbox(backend=backend) as a:
            a.bash(BUSY)  # A's call returns; its 60 session leaders keep spinning (or are frozen)
            time.sleep(1)
            between = [float(b.execute_code(WORK)) for _ in range(rounds)]
            host_between = [_host_work(n) for _ in range(rounds)]
        with Sandbox(backend=backend, limits=Limits(call_timeout=120)) as a:
            attack = threading.Thread(target=_until_closed, args=(a, BUSY + "sleep 600"), daemon=True)
            attack.start()  # now the loops run inside one of A's calls
            time.sleep(1)
            during = [float(b.execute_code(WORK)) for _ in range(rounds)]
            host_during = [_host_work(n) for _ in range(rounds)]
    b_alone, h_alone = statistics.median(alone), statistics.median(host_alone)
    for when, b_times, h_times in (("between A's calls", between, host_between),
                                   ("during one of A's calls", during, host_during)):
        b_attacked, h_attacked = statistics.median(b_times), statistics.median(h_times)
        print(f"cpu, A's 60 setsid busy loops {when}: sandbox B's loop {b_alone:.3f} s alone, "
              f"{b_attacked:.3f} s attacked ({b_attacked / b_alone:.1f}x); the host's {h_alone:.3f} s vs "
              f"{h_attacked:.3f} s ({h_attacked / h_alone:.1f}x); medians of {rounds}; load {_load()}")


def _until_closed(sandbox: Sandbox, cmd: str) -> None:
    try:
        sandbox.bash(cmd)
    except SandboxDied:
        pass  # closed by the measuring thread


def _host_work(n: int) -> float:
    started = time.monotonic()
    x = 0
    for i in range(n):
        x += i
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("attack", choices=("trickle", "kmem", "cpu"))
    parser.add_argument("--backend", default="namespaces")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"code under test: {Path(__import__('exactgrade').__file__).parent.parent}; pid {os.getpid()}")
    if args.attack == "trickle":
        trickle(args.backend)
    elif args.attack == "kmem":
        kmem(args.backend)
    else:
        cpu(args.backend, args.rounds)


if __name__ == "__main__":
    main()
