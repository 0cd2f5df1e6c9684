"""The libc calls and constants the isolation layers need, through ``ctypes``.

Every call sets ``errno`` on failure (``use_errno``); :func:`check` turns a negative result into
an ``OSError`` naming the call.
"""

from __future__ import annotations

import ctypes
import os
from typing import Final

__all__ = [
    "CLONE_NEWNET",
    "CLONE_NEWPID",
    "CLONE_THREAD",
    "LIBC",
    "PR_SET_PDEATHSIG",
    "PR_SET_SECCOMP",
    "SECCOMP_MODE_FILTER",
    "check",
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

PR_SET_PDEATHSIG: Final = 1
PR_SET_SECCOMP: Final = 22
PR_SET_NO_NEW_PRIVS: Final = 38
SECCOMP_MODE_FILTER: Final = 2
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
