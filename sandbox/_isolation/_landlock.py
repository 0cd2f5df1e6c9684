"""The ``landlock`` layer: the file system a child may reach, and (by ABI) its network and scopes.

:class:`Landlock` builds the ruleset while the child can still open every path (before the uid
drop) and :meth:`Landlock.restrict_self` enforces it: read-only access to the Python
installation (:func:`python_paths`) and the workspace's ``refs/``, read-write access (no
symlinks, no devices, no renames across directories) to ``out/`` (:func:`workspace_rules`),
nothing else; where the kernel's ABI allows, no TCP bind or connect, no abstract Unix sockets
and no signals to processes outside the child's own domain.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import sysconfig
from collections.abc import Sequence
from typing import Final

from ._libc import check, syscall

__all__ = ["Landlock", "landlock_abi", "open_python_paths", "python_paths", "workspace_rules"]

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
    result = syscall(
        ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_long(0),
        ctypes.c_long(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return check(result, "landlock_create_ruleset(VERSION)")


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
    candidates.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # sandbox/
    seen: list[str] = []
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and real not in seen:
            seen.append(real)
    return tuple(seen)


def open_python_paths() -> tuple[int, ...]:
    """An ``O_PATH`` fd of each directory of :func:`python_paths` that exists, opened once (by
    the zygote, before it forks) for :class:`Landlock` to name in every child's ruleset."""
    fds = []
    for path in python_paths():
        try:
            fds.append(os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY))
        except FileNotFoundError:
            continue
    return tuple(fds)


class Landlock:
    """A ruleset built while the child can still open every path (before the uid drop).

    The Python installation's directories are named by ``python_dirs`` (fds of
    :func:`open_python_paths`, which stay open) when given, else opened here by path.
    """

    def __init__(
        self,
        abi: int,
        workspace_rules: Sequence[tuple[str, int]],
        python_dirs: Sequence[int] | None = None,
    ) -> None:
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
        self.fd = check(
            syscall(
                ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
                ctypes.byref(attr),
                ctypes.c_long(size),
                ctypes.c_long(0),
            ),
            "landlock_create_ruleset",
        )
        try:
            read_only = _FS_READ_FILE | _FS_READ_DIR
            if python_dirs is None:
                for path in python_paths():
                    self._allow(path, read_only)
            else:
                for fd in python_dirs:
                    self._add_rule(fd, read_only, "a Python directory")
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
            self._add_rule(parent, access, path)
        finally:
            os.close(parent)

    def _add_rule(self, parent: int, access: int, what: str) -> None:
        rule = _PathBeneathAttr(allowed_access=access, parent_fd=parent)
        check(
            syscall(
                ctypes.c_long(_SYS_LANDLOCK_ADD_RULE),
                ctypes.c_long(self.fd),
                ctypes.c_long(_LANDLOCK_RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_long(0),
            ),
            f"landlock_add_rule({what})",
        )

    def restrict_self(self) -> None:
        """Enforce the ruleset on this process (needs no_new_privs or CAP_SYS_ADMIN)."""
        try:
            check(
                syscall(
                    ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF),
                    ctypes.c_long(self.fd),
                    ctypes.c_long(0),
                ),
                "landlock_restrict_self",
            )
        finally:
            os.close(self.fd)


def workspace_rules() -> list[tuple[str, int]]:
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
