"""A seccomp filter that refuses user namespaces, as a container's default profile does.

Docker's default profile answers ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` with
``EPERM`` (and ``clone3``, whose flags a classic filter can't read, with ``ENOSYS``); this
filter does the same and allows everything else, so a test can show what a host under such a
profile is told. Standalone (no import of the project): it runs before the interpreter
``exec``s the zygote, as the user, from :mod:`unprivileged`'s prelude.
"""

from __future__ import annotations

import ctypes
import errno
import platform

_ARCH = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
_CLONE_NEWUSER = 0x10000000
_LD_W_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000


class _Filter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter)))


def deny_user_namespaces() -> None:
    """Put the calling process (and what it ``exec``s) under the filter; raises ``OSError``."""
    arch, unshare, clone, clone3 = _ARCH[platform.machine()]
    program = [
        (_LD_W_ABS, 0, 0, 4),  # 0: the arch
        (_JEQ, 1, 0, arch),  # 1: ours: on to 3
        (_RET, 0, 0, _ALLOW),  # 2
        (_LD_W_ABS, 0, 0, 0),  # 3: the call's number
        (_JEQ, 3, 0, unshare),  # 4: to 8
        (_JEQ, 2, 0, clone),  # 5: to 8
        (_JEQ, 0, 4, clone3),  # 6: to 7, else to 11
        (_RET, 0, 0, _ERRNO | errno.ENOSYS),  # 7
        (_LD_W_ABS, 0, 0, 16),  # 8: the flags, args[0]'s low word
        (_JSET, 0, 1, _CLONE_NEWUSER),  # 9: to 10, else to 11
        (_RET, 0, 0, _ERRNO | errno.EPERM),  # 10
        (_RET, 0, 0, _ALLOW),  # 11
    ]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    array = (_Filter * len(program))(*(_Filter(c, jt, jf, k) for c, jt, jf, k in program))
    fprog = _Program(len(program), array)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
