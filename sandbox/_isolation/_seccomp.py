"""The ``seccomp`` layer: a classic BPF filter written here (no libseccomp needed).

:data:`DENIED_SYSCALLS` lists what it denies. The filter is assembled once per arch
(:func:`seccomp_template`, in the zygote before it forks); :func:`install_seccomp` copies it in
a child, fills in the child's own pid and installs it (after ``PR_SET_NO_NEW_PRIVS``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import sys
from typing import Final

from ._libc import CLONE_THREAD, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, check, prctl

__all__ = [
    "DENIED_SYSCALLS",
    "build_seccomp_filter",
    "fill_seccomp",
    "install_seccomp",
    "seccomp_arch",
    "seccomp_template",
]

_AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# Numbers from the kernel's uapi headers: asm/unistd_64.h (x86_64), asm-generic/unistd.h
# (aarch64). Each name maps to (x86_64, aarch64); None where the arch has no such call.
_SYSCALLS: Final[dict[str, tuple[int | None, int | None]]] = {
    # process creation and replacement
    "fork": (57, None), "vfork": (58, None),
    "execve": (59, 221), "execveat": (322, 281),
    # sockets: none may be made, and the one the child has (its channel from the host,
    # sandbox._zygote.open_channel) may only be read and written like a pipe
    "socket": (41, 198), "socketpair": (53, 199),
    "connect": (42, 203), "accept": (43, 202), "accept4": (288, 242),
    "sendto": (44, 206), "recvfrom": (45, 207), "sendmsg": (46, 211), "recvmsg": (47, 212),
    "sendmmsg": (307, 269), "recvmmsg": (299, 243), "shutdown": (48, 210), "bind": (49, 200),
    "listen": (50, 201), "getsockname": (51, 204), "getpeername": (52, 205),
    "setsockopt": (54, 208), "getsockopt": (55, 209),
    # other processes' memory, descriptors and state: read, write, compare, trace or reap
    # them (whatever the pid: a script has no use for any of these on itself either)
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_open": (434, 434), "pidfd_getfd": (438, 438), "pidfd_send_signal": (424, 424),
    "kcmp": (312, 272), "process_madvise": (440, 440), "process_mrelease": (448, 448),
    "get_robust_list": (274, 100),  # set_robust_list takes no pid; glibc sets it per thread
    # another process's scheduling, priority, CPUs and I/O priority, set by pid (or, for
    # setpriority and ioprio_set, by process group or by uid: every process of the child's
    # uid). The child needs none of them for itself; reading its own is allowed below.
    "setpriority": (141, 140), "sched_setparam": (142, 118),
    "sched_setscheduler": (144, 119), "sched_setaffinity": (203, 122),
    "sched_setattr": (314, 274), "ioprio_set": (251, 30),
    # namespaces, mounts, roots
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428),
    "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265),
    # kernel facilities a script has no use for (perf_event_open and migrate_pages/move_pages
    # also take another process's pid)
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427), "fanotify_init": (300, 262),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "swapon": (167, 224),
    "swapoff": (168, 225), "reboot": (169, 142), "acct": (163, 89), "quotactl": (179, 60),
    "quotactl_fd": (443, 443), "syslog": (103, 116), "vhangup": (153, 58),
    "lookup_dcookie": (212, 18), "migrate_pages": (256, 238), "move_pages": (279, 239),
    "personality": (135, 92), "settimeofday": (164, 170), "clock_settime": (227, 112),
    "clock_adjtime": (305, 266), "adjtimex": (159, 171), "sethostname": (170, 161),
    "setdomainname": (171, 162),
    # a file's metadata and watches, which landlock's rights don't cover: modes (set-id and
    # world-writable bits), owners, times, extended attributes (ACLs, capabilities) and
    # inotify. The uid layer keeps a child off other users' files; as an ordinary user a
    # child is that user on the host, owner of every file of the user's (_userns)
    "chmod": (90, None), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452),
    "chown": (92, None), "fchown": (93, 55), "lchown": (94, None), "fchownat": (260, 54),
    "utime": (132, None), "utimes": (235, None), "futimesat": (261, None),
    "utimensat": (280, 88), "setxattr": (188, 5), "lsetxattr": (189, 6),
    "fsetxattr": (190, 7), "removexattr": (197, 14), "lremovexattr": (198, 15),
    "fremovexattr": (199, 16), "setxattrat": (463, 463), "removexattrat": (466, 466),
    "inotify_init": (253, None), "inotify_init1": (294, 26), "inotify_add_watch": (254, 27),
    # anonymous files: their pages, written and never mapped, count against no rlimit
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
    # identity changes
    "setuid": (105, 146), "setgid": (106, 144), "setreuid": (113, 145),
    "setregid": (114, 143), "setresuid": (117, 147), "setresgid": (119, 149),
    "setfsuid": (122, 151), "setfsgid": (123, 152), "setgroups": (116, 159),
}  # fmt: skip
_CLONE: Final = (56, 220)
_CLONE3: Final = (435, 435)
# Signals: allowed only when their first argument is the child's own pid (in a PID namespace
# of its own that is 1); not 0 (its process group), -1 (every process it may signal) or -pgid.
_SIGNAL_CALLS: Final = {
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
}
# Calls that name a process by their first argument and read it, or (prlimit64, setpgid) act
# on it: allowed for 0 (the caller) and the child's own pid only. glibc's getrlimit and
# setrlimit are prlimit64(0, ...), and a child lowering its own limits once the rlimits
# layer set them is harmless; the rest read what another run is doing.
_SELF_CALLS: Final = {
    "prlimit64": (302, 261),
    "sched_getaffinity": (204, 123),
    "sched_getparam": (143, 121),
    "sched_getscheduler": (145, 120),
    "sched_getattr": (315, 275),
    "sched_rr_get_interval": (148, 127),
    "getpgid": (121, 155),
    "getsid": (124, 156),
    "setpgid": (109, 154),  # the kernel allows only the caller and its children anyway
}
# Calls that name their target by (which, who): allowed only for one process, who being 0 (the
# caller) or the child's own pid; not a process group, nor every process of a uid.
_WHO_CALLS: Final = {
    "getpriority": ((140, 141), 0),  # PRIO_PROCESS
    "ioprio_get": ((252, 31), 1),  # IOPRIO_WHO_PROCESS
}
# Calls whose first argument is a clock id, which may name another process's (or thread's)
# CPU clock: ((~pid << 3) | clock), negative. Allowed for every ordinary clock (0 and up) and
# the caller's own CPU clocks (pid 0: -8 to -1); not another process's CPU time, nor a
# dynamic clock (a /dev/ptp fd, also negative).
_CLOCK_CALLS: Final = {
    "clock_gettime": (228, 113),
    "clock_getres": (229, 114),
    "clock_nanosleep": (230, 115),
    "timer_create": (222, 107),
}
_OWN_CPU_CLOCKS: Final = 0xFFFFFFF8  # the clock ids -8 to -1 as unsigned 32-bit words
# Calls denied for some of their commands (their second argument); every other fcntl and
# ioctl is allowed:
# - those that make the kernel signal a process of the caller's choosing for it, past the
#   signal rules above: SIGIO/SIGURG for a file (fcntl F_SETOWN, F_SETOWN_EX) or a socket
#   (ioctl FIOSETOWN, SIOCSPGRP, on the channel say) go to the owner named there;
# - those acting on a file it may only read (a payload in refs/), which landlock's rights
#   don't cover and which as an ordinary user it owns: a lease (fcntl F_SETLEASE: the
#   host's own opens of it would wait for the child), a directory notice (F_NOTIFY), inode
#   flags, attributes, versions, encryption and verity (FS_IOC_*);
# - F_SETPIPE_SZ, which grows a pipe's buffer from its uid's share of pipe pages: as an
#   ordinary user that share is the user's (the host's channels included), not the child's.
_COMMAND_CALLS: Final = {
    "fcntl": (
        (72, 25),
        (8, 15, 1024, 1026, 1031),  # F_SETOWN, F_SETOWN_EX, F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ
    ),
    "ioctl": (
        (16, 29),
        (
            0x8901, 0x8902,  # FIOSETOWN, SIOCSPGRP
            0x40086602, 0x40046602,  # FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS
            0x40087602, 0x40047602,  # FS_IOC_SETVERSION, FS_IOC32_SETVERSION
            0x401C5820,  # FS_IOC_FSSETXATTR
            0x800C6613, 0xC0506617,  # FS_IOC_SET_ENCRYPTION_POLICY, FS_IOC_ADD_ENCRYPTION_KEY
            0x40806685,  # FS_IOC_ENABLE_VERITY
        ),
    ),
}  # fmt: skip
# Allowed whatever their pid: capget (it reads capability sets, and its pid sits in memory a
# classic filter can't read), wait4 and waitid (only the caller's own children), and
# set_robust_list (no pid).
_X32_SYSCALL_BIT: Final = 0x40000000

DENIED_SYSCALLS: Final = (
    *sorted(_SYSCALLS),
    "clone (without CLONE_THREAD)",
    "clone3",
    *(f"{name} (but to the child itself)" for name in _SIGNAL_CALLS),
    *(f"{name} (but of pid 0 or the child itself)" for name in _SELF_CALLS),
    *(f"{name} (but of one process, 0 or the child itself)" for name in _WHO_CALLS),
    *(f"{name} (on another process's CPU clock)" for name in _CLOCK_CALLS),
    "fcntl (F_SETOWN, F_SETOWN_EX, F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ)",
    "ioctl (FIOSETOWN, SIOCSPGRP, and the FS_IOC_ calls that set inode flags, attributes, "
    "versions, encryption and verity)",
)
"""What the seccomp filter denies, with the conditions of the calls it denies in part."""

_BPF_LD_W_ABS: Final = 0x20
_BPF_JEQ: Final = 0x15
_BPF_JGE: Final = 0x35
_BPF_JSET: Final = 0x45
_BPF_RET: Final = 0x06
_RET_KILL_PROCESS: Final = 0x80000000
_RET_ERRNO: Final = 0x00050000
_RET_ALLOW: Final = 0x7FFF0000
_DATA_NR: Final = 0
_DATA_ARCH: Final = 4
_DATA_ARG_LOW: Final = (16, 24)  # little-endian low words of args[0] and args[1]


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter)))


def seccomp_arch() -> str | None:
    """Return this machine's arch name if the filter supports it, else ``None``."""
    machine = platform.machine()
    return machine if machine in _AUDIT_ARCH and sys.byteorder == "little" else None


_Instruction = tuple[int, int, str | None, str | None]  # (code, k, true label, false label)


def _ret(value: int) -> _Instruction:
    return (_BPF_RET, value, None, None)


def _load_arg(index: int) -> _Instruction:
    return (_BPF_LD_W_ABS, _DATA_ARG_LOW[index], None, None)


_EPERM: Final = _RET_ERRNO | errno.EPERM


_OWN_PID: Final = -1  # in an assembled program: the child's own pid (no real k is negative)


def build_seccomp_filter(arch: str, own_pid: int) -> list[tuple[int, int, int, int]]:
    """Return the filter as (code, jt, jf, k) instructions for ``arch``.

    The program checks the arch, then the call's number against each rule in turn; a rule
    that matches ends in a return of its own right after its check (so every jump is short,
    however many rules there are), but for the calls denied outright, which all jump to one
    ``EPERM`` after the last of them; a call no rule names is allowed. The args' checks read
    the low 32 bits only: every argument checked is an ``int`` (a pid, a clock id, a command)
    that the kernel truncates to them. It is assembled once per arch (the zygote does it
    before it forks) and only ``own_pid`` filled in per call.

    Raises:
        ValueError: ``arch`` is not supported, or a jump does not fit in 8 bits.
    """
    return [(c, jt, jf, own_pid if k == _OWN_PID else k) for c, jt, jf, k in _assembled(arch)]


@functools.cache
def _assembled(arch: str) -> tuple[tuple[int, int, int, int], ...]:
    """The filter for ``arch``, with :data:`_OWN_PID` where the child's own pid goes."""
    own_pid = _OWN_PID
    column = {"x86_64": 0, "aarch64": 1}[arch]
    # A label of None falls through; a str in the program is a label for what follows it.
    program: list[_Instruction | str] = [
        (_BPF_LD_W_ABS, _DATA_ARCH, None, None),
        (_BPF_JEQ, _AUDIT_ARCH[arch], "native", None),
        _ret(_RET_KILL_PROCESS),
        "native",
        (_BPF_LD_W_ABS, _DATA_NR, None, None),
    ]
    if arch == "x86_64":
        program += [(_BPF_JGE, _X32_SYSCALL_BIT, None, "x86_64"), _ret(_RET_KILL_PROCESS)]
        program.append("x86_64")

    def rule(name: str, number: int | None, *body: _Instruction | str) -> None:
        """``body``, whose labels are its own and which ends in a return, decides the call
        numbered ``number`` (none on this arch: no rule)."""
        if number is None:
            return

        def mine(label: str | None) -> str | None:
            return None if label is None else f"{name}:{label}"

        program.append((_BPF_JEQ, number, None, mine("next")))
        for item in body:
            if isinstance(item, str):
                program.append(f"{name}:{item}")
            else:
                program.append((item[0], item[1], mine(item[2]), mine(item[3])))
        program.append(f"{name}:next")

    allow, deny = _ret(_RET_ALLOW), _ret(_EPERM)
    rule("clone3", _CLONE3[column], _ret(_RET_ERRNO | errno.ENOSYS))
    rule(  # threads only
        "clone", _CLONE[column],
        _load_arg(0), (_BPF_JSET, CLONE_THREAD, None, "no"), allow, "no", deny,
    )  # fmt: skip
    for name, numbers in _SIGNAL_CALLS.items():
        rule(
            name, numbers[column],
            _load_arg(0), (_BPF_JEQ, own_pid, None, "no"), allow, "no", deny,
        )  # fmt: skip
    for name, numbers in _SELF_CALLS.items():
        rule(
            name, numbers[column],
            _load_arg(0), (_BPF_JEQ, 0, "yes", None), (_BPF_JEQ, own_pid, "yes", None), deny,
            "yes", allow,
        )  # fmt: skip
    for name, (numbers, which) in _WHO_CALLS.items():
        rule(
            name, numbers[column],
            _load_arg(0), (_BPF_JEQ, which, None, "no"),
            _load_arg(1), (_BPF_JEQ, 0, "yes", None), (_BPF_JEQ, own_pid, "yes", "no"),
            "yes", allow, "no", deny,
        )  # fmt: skip
    for name, numbers in _CLOCK_CALLS.items():
        rule(
            name, numbers[column],
            _load_arg(0), (_BPF_JGE, 0x80000000, None, "yes"),
            (_BPF_JGE, _OWN_CPU_CLOCKS, "yes", None), deny, "yes", allow,
        )  # fmt: skip
    for name, (numbers, commands) in _COMMAND_CALLS.items():
        rule(
            name, numbers[column],
            _load_arg(1), *((_BPF_JEQ, command, "no", None) for command in commands), allow,
            "no", deny,
        )  # fmt: skip
    # The calls denied outright share one return: one comparison each, all of them jumping to
    # the same EPERM right after the last (so every jump stays short).
    for on_each_arch in _SYSCALLS.values():
        if (number := on_each_arch[column]) is not None:
            program.append((_BPF_JEQ, number, "denied", None))
    program += [allow, "denied", deny]

    labels: dict[str, int] = {}
    instructions: list[_Instruction] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)

    def offset(index: int, label: str | None) -> int:
        if label is None:
            return 0
        distance = labels[label] - index - 1
        if not 0 <= distance <= 255:
            raise ValueError(f"jump to {label} does not fit: {distance}")
        return distance

    return tuple(
        (code, offset(i, true), offset(i, false), k)
        for i, (code, k, true, false) in enumerate(instructions)
    )


@functools.cache
def seccomp_template(arch: str) -> tuple[ctypes.Array[_SockFilter], tuple[int, ...]]:
    """The filter for ``arch`` as the kernel reads it, made once (the zygote does it before it
    forks), and the indices of the instructions that compare with the child's own pid (0
    there): a child copies it and fills its pid in.

    Raises:
        ValueError: as :func:`build_seccomp_filter`.
    """
    instructions = _assembled(arch)
    array = (_SockFilter * len(instructions))(
        *(_SockFilter(code, jt, jf, 0 if k == _OWN_PID else k) for code, jt, jf, k in instructions)
    )
    return array, tuple(i for i, (*_, k) in enumerate(instructions) if k == _OWN_PID)


@functools.cache
def _filled(arch: str, own_pid: int) -> tuple[ctypes.Array[_SockFilter], _SockFprog]:
    """The program for ``arch`` with ``own_pid`` filled in, and its ``sock_fprog`` (which
    points into it) for ``prctl``."""
    template, own_pid_at = seccomp_template(arch)
    array = type(template).from_buffer_copy(template)
    for index in own_pid_at:
        array[index].k = own_pid
    return array, _SockFprog(len(array), array)


def fill_seccomp(arch: str, own_pid: int) -> None:
    """Make the program of a child whose own pid will be ``own_pid`` ahead (the zygote does,
    for the pid 1 of a child in a PID namespace of its own): :func:`install_seccomp` then
    only installs it."""
    _filled(arch, own_pid)


def install_seccomp(arch: str) -> None:
    _, program = _filled(arch, os.getpid())
    check(
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(program), 0, 0),
        "prctl(PR_SET_SECCOMP)",
    )
