"""Kernel confinement primitives used inside the sandbox (stdlib + ctypes only).

This module is shipped into the sandbox runtime as part of the neutral package `_eginside`,
so it must not import anything from exactgrade. Every function either succeeds or raises
OSError with the failing step named: a half-confined child must never run user code.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                   | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

_NR_CAPSET = 126
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _check(_libc.mount(raw(source), target.encode(), raw(fstype), flags, raw(data)), f"mount {target}")


def umount_detach(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, len(raw)), "sethostname")


def prctl(option: int, arg2: int = 0) -> int:
    return _check(_libc.prctl(option, arg2, 0, 0, 0), f"prctl({option})")


def set_rlimits(cpu_seconds: int, address_space: int | None, nproc: int | None, fsize: int,
                nofile: int) -> None:
    """Hard rlimits (the sandbox cannot raise them again)."""
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if address_space is not None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def prefer_for_oom_kill() -> None:
    """oom_score_adj 1000: a host-wide OOM kills sandbox processes before anything else. Written while
    still privileged, so the kernel also sets the floor (oom_score_adj_min) to 1000: no process of
    the sandbox can lower it again."""
    with open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")


def drop_privileges(uid: int, gid: int) -> None:
    """Become uid/gid for good: empty capability bounding set, no supplementary groups, no_new_privs."""
    if os.getuid() == 0:
        for cap in range(64):
            if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 and ctypes.get_errno() != errno.EINVAL:
                raise OSError(ctypes.get_errno(), f"dropping capability {cap} from the bounding set")
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(errno.EPERM, f"could not become uid {uid}/gid {gid}")
    if platform.machine() == "x86_64":  # the syscall number below is x86_64's
        _clear_capability_sets()
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def _clear_capability_sets() -> None:
    """setuid() empties the effective and permitted sets but keeps the inheritable one: empty it too."""
    header = ctypes.create_string_buffer(struct.pack("Ii", 0x20080522, 0), 8)  # _LINUX_CAPABILITY_VERSION_3
    data = ctypes.create_string_buffer(bytes(24), 24)  # two {effective, permitted, inheritable} u32 triples
    _check(_libc.syscall(_NR_CAPSET, header, data), "capset")


# ---- seccomp: a small deny-list filter, x86_64 only -------------------------------------------------------

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06

# Syscalls no grading code needs and that widen the kernel attack surface or escape confinement;
# io_setup because kernel AIO contexts come out of one host-wide pool (fs.aio-max-nr);
# sched_setaffinity because pinning itself to a CPU the host keeps busy would make the sandbox's
# own waits look like the host starving it (the call limit is charged in its own time).
DENIED_SYSCALLS = {
    "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "iopl": 172, "ioperm": 173,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_setup": 206, "sched_setaffinity": 203, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
}
# Refused where the sandbox shares the host's IPC namespace (landlock): SysV shm/msg/sem objects and
# POSIX message queues would be visible to other uids' sandboxes and outlive the sandbox.
HOST_IPC_SYSCALLS = {
    "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66, "shmdt": 67,
    "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220, "mq_open": 240,
    "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
}
# Refused where the work dir is on the host disk (landlock): allocating blocks with no data to copy
# outruns any walk of the work dir (3.2 GB made before the first walk here, disk.py).
HOST_DISK_UNSUPPORTED = {"fallocate": 285}
_NR_CLONE = 56
_NR_CLONE3 = 435
_NR_SOCKET = 41
_NR_SOCKETPAIR = 53
_NR_IOCTL = 16
_TIOCSTI = 0x5412
_AF_UNIX = 1


def seccomp_supported() -> bool:
    return platform.machine() == "x86_64"


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def seccomp_program(namespaced: bool) -> bytes:
    """The BPF program: wrong arch -> kill; denied syscalls -> EPERM; clone3 -> ENOSYS (glibc falls back
    to clone, whose flags we can inspect); clone with namespace flags -> EPERM; TIOCSTI -> EPERM;
    socketpair() of any family but AF_UNIX -> EAFNOSUPPORT. socket(): with its own network and IPC
    namespaces (`namespaced`) only AF_UNIX, everything else (AF_VSOCK, which no network namespace
    separates; AF_NETLINK, whose queues are kernel memory outside the memory cgroup; AF_INET: the
    sandbox's loopback is down anyway) -> EAFNOSUPPORT. Without them (landlock: the host's network and
    IPC) socket() is refused for every family (Landlock before ABI 8 does not restrict connecting to
    host unix sockets) and so are SysV IPC and POSIX message queues, and fallocate() -> EOPNOTSUPP (as
    on a filesystem without it: glibc's posix_fallocate falls back to writing)."""
    eperm = _SECCOMP_RET_ERRNO | errno.EPERM
    no_family = _SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT
    load_nr = _insn(_BPF_LD_W_ABS, 0)
    load_arg0 = _insn(_BPF_LD_W_ABS, 16)  # low 32 bits of args[0] (little endian)
    prog = [
        _insn(_BPF_LD_W_ABS, 4),
        _insn(_BPF_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        _insn(_BPF_RET_K, _SECCOMP_RET_KILL_PROCESS),
        load_nr,
        _insn(_BPF_JGE_K, _X32_SYSCALL_BIT, 0, 1),
        _insn(_BPF_RET_K, eperm),
    ]
    denied = dict(DENIED_SYSCALLS) if namespaced else {**DENIED_SYSCALLS, **HOST_IPC_SYSCALLS}
    for nr in sorted(denied.values()):
        prog += [_insn(_BPF_JEQ_K, nr, 0, 1), _insn(_BPF_RET_K, eperm)]
    if not namespaced:
        for nr in sorted(HOST_DISK_UNSUPPORTED.values()):
            prog += [_insn(_BPF_JEQ_K, nr, 0, 1), _insn(_BPF_RET_K, _SECCOMP_RET_ERRNO | errno.EOPNOTSUPP)]
    prog += [_insn(_BPF_JEQ_K, _NR_CLONE3, 0, 1), _insn(_BPF_RET_K, _SECCOMP_RET_ERRNO | errno.ENOSYS)]
    # Argument checks: compare, load the argument, test, deny, reload the syscall number.
    prog += [_insn(_BPF_JEQ_K, _NR_CLONE, 0, 3), _insn(_BPF_LD_W_ABS, 16),
             _insn(_BPF_JSET_K, NAMESPACE_FLAGS, 0, 1), _insn(_BPF_RET_K, eperm), load_nr]
    prog += [_insn(_BPF_JEQ_K, _NR_IOCTL, 0, 3), _insn(_BPF_LD_W_ABS, 24),
             _insn(_BPF_JEQ_K, _TIOCSTI, 0, 1), _insn(_BPF_RET_K, eperm), load_nr]
    prog += [_insn(_BPF_JEQ_K, _NR_SOCKETPAIR, 0, 3), load_arg0,
             _insn(_BPF_JEQ_K, _AF_UNIX, 1, 0), _insn(_BPF_RET_K, no_family), load_nr]
    if namespaced:
        prog += [_insn(_BPF_JEQ_K, _NR_SOCKET, 0, 3), load_arg0,
                 _insn(_BPF_JEQ_K, _AF_UNIX, 1, 0), _insn(_BPF_RET_K, no_family), load_nr]
    else:
        prog += [_insn(_BPF_JEQ_K, _NR_SOCKET, 0, 1), _insn(_BPF_RET_K, no_family)]
    prog.append(_insn(_BPF_RET_K, _SECCOMP_RET_ALLOW))
    return b"".join(prog)


def install_seccomp(namespaced: bool) -> None:
    """Install the filter on the calling thread (inherited by every later child). Needs no_new_privs."""
    if not seccomp_supported():
        raise OSError(errno.ENOSYS, f"seccomp filter is only written for x86_64, not {platform.machine()}")
    code = seccomp_program(namespaced)
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(code) // 8, ctypes.addressof(buf))
    ret = _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0)
    _check(ret, "installing the seccomp filter")


# ---- Landlock (used by the fallback backend) -----------------------------------------------------------

_NR_LANDLOCK_CREATE_RULESET = 444
_NR_LANDLOCK_ADD_RULE = 445
_NR_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13
FS_TRUNCATE = 1 << 14
FS_IOCTL_DEV = 1 << 15
_FILE_ONLY_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel, 0 when absent or disabled."""
    ret = _libc.syscall(_NR_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(ret), 0)


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def landlock_restrict(read_paths: list[str], write_paths: list[str]) -> int:
    """Allow reading/executing under read_paths and everything under write_paths, nothing else on the
    filesystem; deny TCP bind/connect (ABI >= 4); scope signals and abstract unix sockets (ABI >= 6).
    Returns the ABI used. Needs no_new_privs."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available on this kernel")
    handled_fs = _fs_rights(abi)
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", handled_fs, handled_net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr_buf = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _check(_libc.syscall(_NR_LANDLOCK_CREATE_RULESET, attr_buf, ctypes.c_size_t(size),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        read_rights = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
        for rights, paths in ((read_rights, read_paths), (handled_fs, write_paths)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                try:
                    allowed = rights if os.path.isdir(path) else rights & _FILE_ONLY_RIGHTS
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
                    _check(_libc.syscall(_NR_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                                         ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)),
                           f"landlock_add_rule {path}")
                finally:
                    os.close(fd)
        _check(_libc.syscall(_NR_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi
