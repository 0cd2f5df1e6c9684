"""The libc calls and constants the isolation layers need, through ``ctypes``.

Every call sets ``errno`` on failure (``use_errno``); :func:`check` turns a negative result into
an ``OSError`` naming the call.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal
from typing import Final

__all__ = [
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CLONE_THREAD",
    "LIBC",
    "PR_SET_PDEATHSIG",
    "PR_SET_SECCOMP",
    "SECCOMP_MODE_FILTER",
    "check",
    "fork_with",
    "os_error",
    "prctl",
    "set_no_new_privs",
    "setns",
    "syscall",
    "unshare",
]

LIBC: Final = ctypes.CDLL(None, use_errno=True)
syscall = LIBC.syscall
syscall.restype = ctypes.c_long
prctl = LIBC.prctl
prctl.restype = ctypes.c_int
prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
unshare = LIBC.unshare
unshare.restype = ctypes.c_int
unshare.argtypes = [ctypes.c_int]
setns = LIBC.setns
setns.restype = ctypes.c_int
setns.argtypes = [ctypes.c_int, ctypes.c_int]

_PYTHON: Final = ctypes.PyDLL(None, use_errno=True)
"""The same symbols, called with the GIL held: :func:`fork_with`'s ``clone`` is a fork."""
_clone_syscall = _PYTHON.syscall
_clone_syscall.restype = ctypes.c_long
_SYS_CLONE: Final = {"x86_64": 56, "aarch64": 220}

PR_SET_PDEATHSIG: Final = 1
PR_SET_SECCOMP: Final = 22
PR_SET_NO_NEW_PRIVS: Final = 38
SECCOMP_MODE_FILTER: Final = 2
CLONE_NEWNS: Final = 0x00020000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWNET: Final = 0x40000000
CLONE_NEWPID: Final = 0x20000000
CLONE_THREAD: Final = 0x00010000


def os_error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def check(result: int, what: str) -> int:
    if result < 0:
        raise os_error(what)
    return result


def set_no_new_privs() -> None:
    check(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def fork_with(flags: int) -> int:
    """``os.fork``, with ``clone`` flags: the child gets the namespaces ``flags`` name (the
    parent's stay as they were). Returns the child's pid in the parent and 0 in the child.

    It does what ``os.fork`` does around the call (``PyOS_BeforeFork`` and the ``AfterFork``
    of each side: the import lock, the GIL, ``os.register_at_fork`` hooks such as ``random``'s
    reseeding), with the GIL held across it; the caller must be single-threaded, as a zygote
    is. A ``clone`` with ``CLONE_NEWPID`` is how a process without capabilities in its own PID
    namespace's owner (a zygote in a user namespace) forks children into PID namespaces of
    their own: ``unshare`` then ``setns`` back, root's other way, needs them.

    Raises:
        OSError: ``clone`` failed (nothing was forked), or this architecture isn't known here.
    """
    number = _SYS_CLONE.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"clone: no number known for {platform.machine()}")
    zero = ctypes.c_long(0)
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = int(_clone_syscall(ctypes.c_long(number), ctypes.c_long(flags | signal.SIGCHLD),
                             zero, zero, zero, zero))  # fmt: skip
    code = ctypes.get_errno()
    if pid == 0:  # pragma: no cover - the child
        ctypes.pythonapi.PyOS_AfterFork_Child()
    else:
        ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(code, f"clone: {os.strerror(code)}")
    return pid
