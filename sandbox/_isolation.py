"""OS isolation of one sandbox child, applied after ``fork`` and before the script is read.

:func:`apply_isolation` runs in the freshly forked child. It always does the basic hygiene
(a new session and process group, every inherited fd closed but the channel's, ``/dev/null``
on fds 0-2, an empty environment, the run's workspace as working directory) and then the named
layers, each reported in :class:`IsolationReport` as applied or skipped with its reason:

``pidns``
    Root only: the child is pid 1 of a PID namespace of its own, so no other process exists for
    it: not another run's child, not the zygote, not the host. This one is applied by the zygote
    before it forks (:class:`PidNamespaces`) and only reported here. As a namespace's init the
    child ignores every signal it has no handler for, from inside its namespace, and every
    such signal but ``SIGKILL`` and ``SIGSTOP`` from outside; the soft CPU limit's ``SIGXCPU``
    included, so the hard limit's ``SIGKILL`` ends it. ``/proc`` is still the host's (it lists
    the host's pids; landlock keeps the child out of it).
``rlimits``
    CPU seconds (``SIGXCPU`` at the soft limit kills the child, ``SIGKILL`` a second later),
    address space (the inherited baseline plus ``memory_mb``), file size (a write past it fails
    with ``EFBIG``; at most one byte past the disk quota), open files, no core dumps.
``netns``
    Root only: a private network namespace, whose only interface is a loopback that is down.
``uid``
    Root only: the child gets an id of its own from a private range (:class:`ChildIds`: no two
    live children of a zygote share one), ``out/`` is handed to it as uid and gid,
    supplementary groups are dropped, real, effective and saved uid and gid become it, and
    ``RLIMIT_NPROC`` is set to 0. What the kernel lets a process do to another of its own uid
    (``prlimit64``, ``setpriority``, ``sched_setaffinity``, ``ioprio_set``, signals) and what it
    counts per uid (processes, pending signals, pipe buffers) are then the child's alone.
``landlock``
    Read-only access to the Python installation (``sys.prefix``, ``sys.base_prefix``, the
    stdlib and site-packages, this package's directory) and to the workspace's ``refs/``;
    read-write access (no symlinks, no devices, no renames across directories) to ``out/``;
    nothing else on the file system. Where the kernel's ABI allows: no TCP bind or connect, no
    abstract Unix sockets and no signals to processes outside the child's own domain.
``seccomp``
    ``PR_SET_NO_NEW_PRIVS`` and a classic BPF filter written here (no libseccomp needed; see
    :data:`DENIED_SYSCALLS`): process creation, exec, sockets, tracing, namespaces, mounts,
    kernel keys and modules, BPF, perf, ``io_uring``, identity changes and the like fail with
    ``EPERM``; ``clone`` is allowed only with ``CLONE_THREAD``; ``clone3`` fails with
    ``ENOSYS`` so that libc falls back to ``clone``; signals may be sent only to the child
    itself; every call that acts on another process fails: on its memory, descriptors and
    robust list, its limits, priority, scheduling, CPUs and I/O priority (reading and lowering
    its own limits, and reading its own priority, scheduling and CPUs, stay allowed), its CPU
    clock, and pointing a file's or socket's ``SIGIO`` at it; a system call of a foreign ABI
    (x32, i386) kills the process.

``quota`` is applied by the zygote, before the fork: the child's ``out/`` is a tmpfs of the
run's disk quota (:mod:`sandbox._quota`); the child only reports it.

A layer this machine cannot apply is skipped with the reason (for example "not started as
root", "the kernel has no landlock"), never silently. A layer named in ``disable`` (tests of
single layers, and the security suite's "OS layers off" mode) is skipped with the reason
``disabled``.
:func:`probe_layers` answers, for ``scriptbridge doctor``, which layers this machine can apply.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import math
import os
import platform
import resource
import signal
import sys
import sysconfig
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

from . import _quota
from .protocol import ChildLimits, Layer, SkippedLayer

__all__ = [
    "CHILD_ID_BASE",
    "CHILD_ID_SLOTS",
    "DENIED_SYSCALLS",
    "OS_LAYERS",
    "ChildIds",
    "ChildLimits",
    "IsolationError",
    "IsolationReport",
    "LayerProbe",
    "PidNamespaces",
    "apply_isolation",
    "probe_layers",
]

OS_LAYERS: Final[tuple[Layer, ...]] = (
    "pidns", "rlimits", "netns", "uid", "landlock", "seccomp", "quota"
)  # fmt: skip
"""The OS layers: ``pidns`` (made by the zygote at the fork), those this module applies, in the
order it applies them, then ``quota`` (the zygote's, applied before the fork)."""

CHILD_ID_BASE: Final = 0x7000_0000
"""The first uid (and gid) of the private range children run as under the ``uid`` layer.

0x70000000 (1,879,048,192) is the first id past every range something hands out on a Linux
system: system users (below 1000), regular users (1000-60000), systemd-homed (60001-60513) and
dynamic service users (61184-65519), ``nobody`` (65534), and the 64K blocks systemd and most
container managers give containers' user namespaces (524288-0x6FFFFFFF). systemd's
``docs/UIDS-GIDS.md`` lists what follows as unused up to its foreign-id range (0x7FFE0000),
and the range stays below 2**31, so nothing that reads an id as a signed 32-bit number sees
one as negative. No user database names these ids: no file outside a workspace is theirs, and
no process but a sandbox child runs as one.
"""

CHILD_ID_SLOTS: Final = 65536
"""How many ids the range holds (``CHILD_ID_BASE`` to ``CHILD_ID_BASE + 65535``): far more
than a zygote has live children, so an id comes back into use only long after it was freed."""

_PROBE_ID: Final = CHILD_ID_BASE + CHILD_ID_SLOTS
"""The id ``probe_layers`` drops to: just past the children's range, never one of theirs."""


class IsolationError(OSError):
    """A step every child needs (session, fds, environment, workspace) failed.

    The child is then only partly isolated and must exit without reading a script.
    """


@dataclass
class IsolationReport:
    """The named layers in force, in the order applied, and those skipped, with reasons; and
    the child's pid as the zygote (and the host) number it, which is not ``os.getpid()`` in a
    PID namespace of its own."""

    applied: list[Layer] = field(default_factory=list)
    skipped: list[SkippedLayer] = field(default_factory=list)
    pid: int = 0

    def skip(self, layer: Layer, reason: str) -> None:
        """Record ``layer`` as skipped because of ``reason``."""
        self.skipped.append(SkippedLayer(layer=layer, reason=reason))


@dataclass(frozen=True)
class LayerProbe:
    """Whether this machine can apply one layer, and if not, why."""

    layer: Layer
    available: bool
    reason: str | None = None


# --------------------------------------------------------------------------------------------
# libc


_LIBC: Final = ctypes.CDLL(None, use_errno=True)
_syscall = _LIBC.syscall
_syscall.restype = ctypes.c_long
_prctl = _LIBC.prctl
_prctl.restype = ctypes.c_int
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_unshare = _LIBC.unshare
_unshare.restype = ctypes.c_int
_unshare.argtypes = [ctypes.c_int]
_setns = _LIBC.setns
_setns.restype = ctypes.c_int
_setns.argtypes = [ctypes.c_int, ctypes.c_int]

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_SECCOMP: Final = 22
_PR_SET_NO_NEW_PRIVS: Final = 38
_SECCOMP_MODE_FILTER: Final = 2
_CLONE_NEWNET: Final = 0x40000000
_CLONE_NEWPID: Final = 0x20000000
_CLONE_THREAD: Final = 0x00010000


def _os_error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def _check(result: int, what: str) -> int:
    if result < 0:
        raise _os_error(what)
    return result


def _set_no_new_privs() -> None:
    _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


# --------------------------------------------------------------------------------------------
# Child ids and PID namespaces (the zygote's side)


class ChildIds:
    """The ids the zygote hands its children for the ``uid`` layer (the same number as uid and
    gid), from :data:`CHILD_ID_BASE` on: round-robin over :data:`CHILD_ID_SLOTS` slots from
    ``start``, skipping every id a live child still holds, so no two live children of one
    zygote share one.

    Two zygotes on one machine draw from the same range without knowing of each other; each
    starts at a random slot (``start``), so their children rarely meet, but they may. The PID
    namespace and the seccomp filter keep such children apart all the same.
    """

    def __init__(self, start: int = 0, slots: int = CHILD_ID_SLOTS) -> None:
        self._slots = slots
        self._next = start % slots
        self._held: set[int] = set()

    def take(self) -> int:
        """Return a free id and hold it until :meth:`release`.

        Raises:
            LookupError: every id of the range is held (nothing is held anew).
        """
        for step in range(self._slots):
            slot = (self._next + step) % self._slots
            if slot not in self._held:
                self._held.add(slot)
                self._next = (slot + 1) % self._slots
                return CHILD_ID_BASE + slot
        raise LookupError(f"all {self._slots} child ids are held by live children")

    def release(self, child_id: int) -> None:
        """Free ``child_id`` (its child was reaped); a no-op for an id not held."""
        self._held.discard(child_id - CHILD_ID_BASE)


class PidNamespaces:
    """The zygote's half of the ``pidns`` layer: each child it forks is pid 1 of a PID
    namespace of its own.

    :meth:`enter`, just before ``fork``, makes the next child the first process of a new
    namespace (``unshare(CLONE_NEWPID)`` changes the namespace of the zygote's children only,
    never its own); :meth:`leave`, just after it in the zygote, points later children back at
    the zygote's own namespace (``setns`` on ``/proc/self/ns/pid``, opened once here), which
    the next :meth:`enter` needs: a second ``unshare`` would fail with ``EINVAL``.

    The child learns its own and its parent's pid as the zygote numbers them from
    ``/proc/self/stat`` (``getpid()`` and ``getppid()`` say 1 and 0 there), so the layer is
    unavailable where ``/proc`` is not the zygote's PID namespace's.
    """

    def __init__(self) -> None:
        self._own: int | None = None
        self._entered = False
        self.unavailable: str | None = None
        """Why no child can get a namespace here, or ``None``."""
        if os.geteuid() != 0:
            self.unavailable = "not started as root"
            return
        try:
            if os.readlink("/proc/self") != str(os.getpid()):
                self.unavailable = "/proc is not this process's PID namespace's"
                return
            self._own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self.unavailable = f"can't open /proc/self/ns/pid: {exc}"

    def enter(self, disable: Collection[str]) -> str | None:
        """Make the next child forked pid 1 of a new PID namespace; return ``None``, or why
        not (then it is forked into the zygote's own). Call :meth:`leave` after the fork."""
        if "pidns" in disable:
            return "disabled"
        if self.unavailable is not None:
            return self.unavailable
        if _unshare(_CLONE_NEWPID) != 0:
            return str(_os_error("unshare(CLONE_NEWPID)"))
        self._entered = True
        return None

    def leave(self) -> None:
        """Fork later children into the zygote's own namespace again (after :meth:`enter`,
        whether the fork worked or not; a no-op otherwise).

        Raises:
            OSError: ``setns`` failed. The zygote must then fork nothing more: a child would
                land in the previous child's namespace.
        """
        if self._entered:
            assert self._own is not None
            self._entered = False
            _check(_setns(self._own, _CLONE_NEWPID), "setns(CLONE_NEWPID)")


def _ids_from_proc() -> tuple[int, int]:
    """This process's pid and its parent's as ``/proc`` numbers them (the zygote's namespace:
    :class:`PidNamespaces` checks it), where ``getpid()`` and ``getppid()`` say 1 and 0."""
    with open("/proc/self/stat", "rb") as stat:
        line = stat.read()
    return int(line.split(b" ", 1)[0]), int(line.rsplit(b")", 1)[1].split()[1])


# --------------------------------------------------------------------------------------------
# Landlock

_SYS_LANDLOCK_CREATE_RULESET: Final = 444  # the same number on x86_64 and aarch64
_SYS_LANDLOCK_ADD_RULE: Final = 445
_SYS_LANDLOCK_RESTRICT_SELF: Final = 446
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1
_LANDLOCK_RULE_PATH_BENEATH: Final = 1

_FS_EXECUTE: Final = 1 << 0
_FS_WRITE_FILE: Final = 1 << 1
_FS_READ_FILE: Final = 1 << 2
_FS_READ_DIR: Final = 1 << 3
_FS_REMOVE_DIR: Final = 1 << 4
_FS_REMOVE_FILE: Final = 1 << 5
_FS_MAKE_CHAR: Final = 1 << 6
_FS_MAKE_DIR: Final = 1 << 7
_FS_MAKE_REG: Final = 1 << 8
_FS_MAKE_SOCK: Final = 1 << 9
_FS_MAKE_FIFO: Final = 1 << 10
_FS_MAKE_BLOCK: Final = 1 << 11
_FS_MAKE_SYM: Final = 1 << 12
_FS_REFER: Final = 1 << 13  # ABI 2
_FS_TRUNCATE: Final = 1 << 14  # ABI 3
_FS_IOCTL_DEV: Final = 1 << 15  # ABI 5
_NET_BIND_TCP: Final = 1 << 0  # ABI 4
_NET_CONNECT_TCP: Final = 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0  # ABI 6
_SCOPE_SIGNAL: Final = 1 << 1  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def landlock_abi() -> int:
    """Return the kernel's landlock ABI version.

    Raises:
        OSError: landlock is missing (``ENOSYS``) or disabled at boot (``EOPNOTSUPP``).
    """
    result = _syscall(
        ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_long(0),
        ctypes.c_long(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return _check(result, "landlock_create_ruleset(VERSION)")


def _handled_fs(abi: int) -> int:
    handled = (1 << 13) - 1  # EXECUTE .. MAKE_SYM, ABI 1
    if abi >= 2:
        handled |= _FS_REFER
    if abi >= 3:
        handled |= _FS_TRUNCATE
    if abi >= 5:
        handled |= _FS_IOCTL_DEV
    return handled


@functools.cache
def python_paths() -> tuple[str, ...]:
    """The Python installation's directories landlock lets a child read (computed once)."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths = sysconfig.get_paths()
    candidates += [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    candidates.append(os.path.dirname(os.path.abspath(__file__)))
    seen: list[str] = []
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and real not in seen:
            seen.append(real)
    return tuple(seen)


class _Landlock:
    """A ruleset built while the child can still open every path (before the uid drop)."""

    def __init__(self, abi: int, workspace_rules: Sequence[tuple[str, int]]) -> None:
        self.abi = abi
        handled_fs = _handled_fs(abi)
        attr = _RulesetAttr(handled_access_fs=handled_fs)
        size = 8
        if abi >= 4:
            attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
            size = 16
        if abi >= 6:
            attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
            size = 24
        self.fd = _check(
            _syscall(
                ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
                ctypes.byref(attr),
                ctypes.c_long(size),
                ctypes.c_long(0),
            ),
            "landlock_create_ruleset",
        )
        try:
            read_only = _FS_READ_FILE | _FS_READ_DIR
            for path in python_paths():
                self._allow(path, read_only)
            for path, access in workspace_rules:
                self._allow(path, access & handled_fs)
        except BaseException:
            os.close(self.fd)
            raise

    def _allow(self, path: str, access: int) -> None:
        try:
            parent = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
        except FileNotFoundError:
            return
        try:
            rule = _PathBeneathAttr(allowed_access=access, parent_fd=parent)
            _check(
                _syscall(
                    ctypes.c_long(_SYS_LANDLOCK_ADD_RULE),
                    ctypes.c_long(self.fd),
                    ctypes.c_long(_LANDLOCK_RULE_PATH_BENEATH),
                    ctypes.byref(rule),
                    ctypes.c_long(0),
                ),
                f"landlock_add_rule({path})",
            )
        finally:
            os.close(parent)

    def restrict_self(self) -> None:
        """Enforce the ruleset on this process (needs no_new_privs or CAP_SYS_ADMIN)."""
        try:
            _check(
                _syscall(
                    ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF),
                    ctypes.c_long(self.fd),
                    ctypes.c_long(0),
                ),
                "landlock_restrict_self",
            )
        finally:
            os.close(self.fd)


def _workspace_rules() -> list[tuple[str, int]]:
    write = (
        _FS_READ_FILE
        | _FS_READ_DIR
        | _FS_WRITE_FILE
        | _FS_MAKE_REG
        | _FS_MAKE_DIR
        | _FS_REMOVE_FILE
        | _FS_REMOVE_DIR
        | _FS_TRUNCATE
    )
    return [("refs", _FS_READ_FILE | _FS_READ_DIR), ("out", write)]


# --------------------------------------------------------------------------------------------
# Seccomp


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
# Calls that make the kernel signal a process of the caller's choosing for it, past the
# signal rules above: SIGIO/SIGURG for a file (fcntl F_SETOWN and F_SETOWN_EX) or a socket
# (ioctl FIOSETOWN and SIOCSPGRP, on the channel say) go to the owner named there. Denied
# for those commands (their second argument); every other fcntl and ioctl is allowed.
_OWNER_CALLS: Final = {
    "fcntl": ((72, 25), (8, 15)),  # F_SETOWN, F_SETOWN_EX
    "ioctl": ((16, 29), (0x8901, 0x8902)),  # FIOSETOWN, SIOCSPGRP
}
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
    "fcntl (F_SETOWN, F_SETOWN_EX)",
    "ioctl (FIOSETOWN, SIOCSPGRP)",
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
    however many rules there are), and a call no rule names is allowed. The args' checks read
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
        _load_arg(0), (_BPF_JSET, _CLONE_THREAD, None, "no"), allow, "no", deny,
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
    for name, (numbers, commands) in _OWNER_CALLS.items():
        rule(
            name, numbers[column],
            _load_arg(1), *((_BPF_JEQ, command, "no", None) for command in commands), allow,
            "no", deny,
        )  # fmt: skip
    for name, on_each_arch in _SYSCALLS.items():
        rule(name, on_each_arch[column], deny)
    program.append(allow)

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


def _install_seccomp(arch: str) -> None:
    template, own_pid_at = seccomp_template(arch)
    array = type(template).from_buffer_copy(template)
    for index in own_pid_at:
        array[index].k = os.getpid()
    program = _SockFprog(len(array), array)
    _check(
        _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(program), 0, 0),
        "prctl(PR_SET_SECCOMP)",
    )


# --------------------------------------------------------------------------------------------
# Steps


def _hygiene(workspace: str, keep_fds: Sequence[int]) -> list[int]:
    """New session, fds, /dev/null on 0-2, empty environment, cwd; returns the kept fds."""
    try:
        os.setsid()
        kept: list[int] = []
        for fd in keep_fds:
            if fd <= 2:
                fd = os.dup(fd)  # the lowest free fd is above 2 once 0-2 are open
            kept.append(fd)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            if null != target and target not in kept:
                os.dup2(null, target, inheritable=False)
        keep = sorted({0, 1, 2, *kept})
        low = 3
        for fd in keep:
            if fd >= low:
                os.closerange(low, fd)
                low = fd + 1
        os.closerange(low, 1 << 20)
        for name in (signal.SIGINT, signal.SIGTERM, signal.SIGXCPU, signal.SIGCHLD):
            signal.signal(name, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        os.environ.clear()
        os.chdir(workspace)
    except OSError as exc:
        raise IsolationError(exc.errno, f"could not prepare the child: {exc}") from exc
    return kept


def _address_space_now() -> int:
    with open("/proc/self/statm", "rb") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _apply_rlimits(limits: ChildLimits) -> None:
    cpu = max(1, math.ceil(limits.cpu_s))
    memory = _address_space_now() + limits.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # One byte past the quota: a file that passed it shows so in out/ (sandbox._quota).
    file_size = min(limits.max_file_bytes, limits.max_out_bytes + 1)
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))


def _drop_uid(child_id: int, *, hand_over_out: bool) -> None:
    if hand_over_out:  # the workspace's out/ (relative to the cwd, which is the workspace)
        with contextlib.suppress(FileNotFoundError):
            os.chown("out", child_id, child_id)
    os.setgroups([])
    os.setresgid(child_id, child_id, child_id)
    os.setresuid(child_id, child_id, child_id)
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:  # pragma: no cover - the kernel would have to be broken
        raise OSError(errno.EPERM, "setuid(0) still succeeds after the drop")
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def _watch_parent(parent: int, *, own_namespace: bool) -> int:
    """Arm the parent-death signal and return this process's pid as the zygote numbers it;
    exit at once if the zygote is already gone."""
    # Set after the uid drop: a credential change clears the parent-death signal.
    _check(_prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    pid, ppid = _ids_from_proc() if own_namespace else (os.getpid(), os.getppid())
    if ppid != parent:
        os._exit(70)  # the zygote died before the signal was armed
    return pid


def apply_isolation(
    *,
    workspace: str,
    limits: ChildLimits,
    keep_fds: Sequence[int],
    parent_pid: int,
    pid_namespace: str | None,
    child_id: int,
    disable: Collection[str] = frozenset(),
) -> tuple[list[int], IsolationReport]:
    """Isolate the calling process (a fresh child) and report what is in force.

    Args:
        workspace: the run's workspace directory (holding ``refs/`` and ``out/``).
        limits: the OS limits to apply.
        keep_fds: the channel's fds; everything else is closed.
        parent_pid: the zygote's pid; the child is killed if it dies.
        pid_namespace: ``None`` when the zygote forked this child as pid 1 of a PID namespace
            of its own (:meth:`PidNamespaces.enter`), else the reason it did not.
        child_id: the uid and gid the ``uid`` layer drops to (:meth:`ChildIds.take`).
        disable: OS layers to skip (reason ``disabled``); for tests of single layers and the
            security suite's "OS layers off" mode only.

    Returns:
        The kept fds (renumbered above 2 if needed, in the order given) and the report. A
        layer that failed is in ``report.skipped`` with the error; the others still apply.

    Raises:
        IsolationError: the session, fds, environment or working directory could not be set
            up; the process is then partly isolated and must exit without running a script.
    """
    kept = _hygiene(workspace, keep_fds)
    report = IsolationReport()
    root = os.geteuid() == 0
    if pid_namespace is None:
        report.applied.append("pidns")
    else:
        report.skip("pidns", pid_namespace)

    def wanted(layer: Layer, *, needs_root: bool = False) -> bool:
        if layer in disable:
            report.skip(layer, "disabled")
            return False
        if needs_root and not root:
            report.skip(layer, "not started as root")
            return False
        return True

    if wanted("rlimits"):
        try:
            _apply_rlimits(limits)
        except (OSError, ValueError) as exc:
            report.skip("rlimits", f"setrlimit failed: {exc}")
        else:
            report.applied.append("rlimits")

    if wanted("netns", needs_root=True):
        if _unshare(_CLONE_NEWNET) != 0:
            report.skip("netns", str(_os_error("unshare(CLONE_NEWNET)")))
        else:
            report.applied.append("netns")

    landlock: _Landlock | None = None
    if wanted("landlock"):
        try:  # built now, while every path can still be opened; enforced after the uid drop
            landlock = _Landlock(landlock_abi(), _workspace_rules())
        except OSError as exc:
            reason = "the kernel has no landlock" if exc.errno == errno.ENOSYS else str(exc)
            report.skip("landlock", reason)

    if wanted("uid", needs_root=True):
        try:
            _drop_uid(child_id, hand_over_out=True)
        except OSError as exc:
            report.skip("uid", f"could not drop to uid {child_id}: {exc}")
        else:
            report.applied.append("uid")
    report.pid = _watch_parent(parent_pid, own_namespace=pid_namespace is None)

    seccomp = wanted("seccomp")
    if landlock is None and not seccomp:
        return kept, report
    try:
        _set_no_new_privs()
    except OSError as exc:
        if landlock is not None:
            os.close(landlock.fd)
            report.skip("landlock", str(exc))
        if seccomp:
            report.skip("seccomp", str(exc))
        return kept, report

    if landlock is not None:
        try:
            landlock.restrict_self()
        except OSError as exc:
            report.skip("landlock", str(exc))
        else:
            report.applied.append("landlock")

    if seccomp:
        arch = seccomp_arch()
        if arch is None:
            report.skip("seccomp", f"no filter for {platform.machine()} ({sys.byteorder}-endian)")
        else:
            try:
                _install_seccomp(arch)
            except OSError as exc:
                report.skip("seccomp", str(exc))
            else:
                report.applied.append("seccomp")
    return kept, report


# --------------------------------------------------------------------------------------------
# Probing (for `scriptbridge doctor`)


def _probe_pid_namespace() -> str | None:
    """Fork a child as the zygote would, as pid 1 of a namespace of its own; ``None`` if it
    was, else why not."""
    namespaces = PidNamespaces()
    reason = namespaces.enter(())
    if reason is not None:
        return reason
    parent = os.getpid()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the probe's child
            os._exit(0 if os.getpid() == 1 and _ids_from_proc()[1] == parent else 1)
    except OSError as exc:
        return f"could not fork into a PID namespace: {exc}"
    finally:
        namespaces.leave()
    _, status = os.waitpid(pid, 0)
    return None if status == 0 else "a child forked into a PID namespace was not pid 1 of it"


def _probe_in_child() -> dict[str, str | None]:
    results: dict[str, str | None] = {}
    try:
        import RestrictedPython  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a dependency of this package
        results["restricted-python"] = f"RestrictedPython is not importable: {exc}"
    else:
        results["restricted-python"] = None
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        results["rlimits"] = None
    except (OSError, ValueError) as exc:
        results["rlimits"] = f"setrlimit failed: {exc}"
    root = os.geteuid() == 0
    results["pidns"] = _probe_pid_namespace()
    if not root:
        results["netns"] = results["uid"] = "not started as root"
    else:
        results["netns"] = (
            None if _unshare(_CLONE_NEWNET) == 0 else str(_os_error("unshare(CLONE_NEWNET)"))
        )
    results["quota"] = _quota.probe()
    ruleset: _Landlock | None = None
    try:
        ruleset = _Landlock(landlock_abi(), [])
    except OSError as exc:
        results["landlock"] = (
            "the kernel has no landlock" if exc.errno == errno.ENOSYS else str(exc)
        )
    if root:
        try:
            _drop_uid(_PROBE_ID, hand_over_out=False)
            results["uid"] = None
        except OSError as exc:
            results["uid"] = f"could not drop to uid {_PROBE_ID}: {exc}"
    try:
        _set_no_new_privs()
    except OSError as exc:
        results["landlock"] = results["seccomp"] = str(exc)
        return results
    if ruleset is not None:
        try:
            ruleset.restrict_self()
            results["landlock"] = None
        except OSError as exc:
            results["landlock"] = str(exc)
    arch = seccomp_arch()
    if arch is None:
        results["seccomp"] = f"no filter for {platform.machine()} ({sys.byteorder}-endian)"
    else:
        try:
            _install_seccomp(arch)
            results["seccomp"] = None
        except OSError as exc:
            results["seccomp"] = str(exc)
    return results


def probe_layers() -> list[LayerProbe]:
    """Return, for each layer, whether this machine can apply it and why not.

    The layers are really applied, in a forked child that then exits, so the answer is the
    kernel's. The calling process is left unchanged. Never raises: a probe that cannot run at
    all reports every layer unavailable with the reason.
    """
    from .protocol import LAYER_NAMES

    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        return [LayerProbe(layer, False, f"could not fork a probe: {exc}") for layer in LAYER_NAMES]
    if pid == 0:  # pragma: no cover - runs in the probe child
        status = 1
        try:
            os.close(read_fd)
            payload = json.dumps(_probe_in_child()).encode()
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        raw = pipe.read()
    os.waitpid(pid, 0)
    try:
        found: dict[str, str | None] = json.loads(raw)
    except ValueError:
        found = {}
    probes = []
    for layer in LAYER_NAMES:
        if layer not in found:
            probes.append(LayerProbe(layer, False, "the probe child failed"))
        else:
            reason = found[layer]
            probes.append(LayerProbe(layer, reason is None, reason))
    return probes
