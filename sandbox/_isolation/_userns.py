"""Every layer for an ordinary user: user namespaces, for the zygote and for each child.

Root gets the namespace layers (``netns``, ``pidns``, ``ipcns``, ``uid``, ``quota``) from its
capabilities. An ordinary user gets them the way bubblewrap and nsjail do, from a user
namespace, when the kernel lets unprivileged users make one:

The zygote's namespace (:func:`enter_zygote_namespace`)
    Once, at start, a zygote that isn't root moves into a user namespace of its own
    (``unshare(CLONE_NEWUSER)``; its mount namespace follows, :mod:`sandbox._quota`) in which
    its own uid and gid are 0
    (``uid_map`` ``0 <uid> 1``; ``setgroups`` denied, as the kernel requires of an unprivileged
    map). It then holds every capability *in that namespace only*: it can make network, PID,
    IPC and mount namespaces owned by it and mount tmpfs in its mount namespace, and nothing
    outside; on the host it is still its user, and every file it makes is that user's. Only
    that one id is mapped, so the user's supplementary groups stay as they were (the kernel
    won't drop them in a namespace that denies ``setgroups``).

Each child's namespace (:func:`own_user_namespace`)
    Each child, after its other namespaces and before its script, makes a user namespace of
    its own below the zygote's, in which it is :class:`~sandbox._isolation.ChildIds`'s id
    (``uid_map`` ``<id> 0 1``), and drops every capability it holds there
    (:func:`drop_capabilities`: bounding set, ambient set, then effective, permitted and
    inheritable; the kernel would not clear them itself, as the id 0 doesn't exist in that
    namespace). It then has no capability anywhere, can't go back to 0 (``setuid(0)`` fails:
    unmapped), and every namespace it is in is owned by the zygote's user namespace, where it
    has none either. Outside, it is still the user; other runs, the zygote and the host are
    kept from it by the PID namespace, landlock and seccomp, as under root.

Where the kernel says no (:func:`explain_refusal`)
    The common refusals are named, with their remedy: ``user.max_user_namespaces`` at 0,
    Debian's ``kernel.unprivileged_userns_clone=0``, Ubuntu's
    ``kernel.apparmor_restrict_unprivileged_userns=1`` (the namespace is made, but the
    capabilities in it are refused), and a seccomp filter on the process (a container's
    default profile) that refuses ``unshare`` or ``clone`` with namespace flags.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from dataclasses import dataclass
from typing import Final

from ._libc import CLONE_NEWNS, CLONE_NEWUSER, LIBC, check, os_error, prctl, unshare

__all__ = [
    "Privilege",
    "Refusal",
    "drop_bounding_set",
    "drop_capabilities",
    "enter_zygote_namespace",
    "explain_refusal",
    "holds_no_capability",
    "own_user_namespace",
]

_PR_CAPBSET_READ: Final = 23
_PR_CAPBSET_DROP: Final = 24
_PR_CAP_AMBIENT: Final = 47
_PR_CAP_AMBIENT_CLEAR_ALL: Final = 4
_CAPABILITY_VERSION_3: Final = 0x20080522

_capset = LIBC.capset
_capset.restype = ctypes.c_int
_capget = LIBC.capget
_capget.restype = ctypes.c_int


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


@dataclass(frozen=True)
class Refusal:
    """Why this machine won't make a user namespace for an ordinary user, and what would."""

    cause: str
    remedy: str

    def __str__(self) -> str:
        return f"{self.cause} ({self.remedy})"


@dataclass(frozen=True)
class Privilege:
    """Where the zygote's namespace layers come from.

    Attributes:
        mode: ``"root"`` (started as root), ``"userns"`` (an ordinary user, in a user
            namespace of its own) or ``"none"`` (an ordinary user the kernel gives no user
            namespace: the namespace layers can't apply).
        uid: the uid the zygote was started as, on the host.
        refusal: in mode ``"none"``, why.
    """

    mode: str
    uid: int
    refusal: Refusal | None = None

    @property
    def userns(self) -> bool:
        """Whether each child gets a user namespace of its own (the ``uid`` layer's way)."""
        return self.mode == "userns"

    def describe(self) -> str:
        """How the namespace layers are given, in words for ``doctor``."""
        if self.mode == "root":
            return "as root"
        if self.mode == "userns":
            return f"through user namespaces (started as uid {self.uid}, not root)"
        return f"not given: {self.refusal}"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except (OSError, ValueError):
        return None


def _seccomp_mode(status_path: str) -> int:
    """The calling process's seccomp mode from ``/proc/self/status`` (0: none, 2: filter)."""
    text = _read(status_path) or ""
    for line in text.splitlines():
        if line.startswith("Seccomp:"):
            with contextlib.suppress(ValueError):
                return int(line.split()[1])
    return 0


def explain_refusal(
    code: int,
    what: str,
    *,
    sysctl: str = "/proc/sys",
    status: str = "/proc/self/status",
) -> Refusal:
    """Name the cause of ``what`` failing with ``code`` for an ordinary user, and the remedy.

    The causes are read from the machine (``sysctl`` and the process's ``status`` are its
    ``/proc`` files, taken as arguments so a test can lay out another machine's): the
    namespace limit at 0, Debian's switch for unprivileged user namespaces, Ubuntu's AppArmor
    restriction, a seccomp filter on the process. Anything else is said as the kernel said it.
    """
    said = f"{what}: {os.strerror(code)}"
    if _read(f"{sysctl}/user/max_user_namespaces") == "0":
        return Refusal(
            f"{said}: user namespaces are switched off (user.max_user_namespaces = 0)",
            "set it above 0: sysctl -w user.max_user_namespaces=15000, or start as root",
        )
    if _read(f"{sysctl}/kernel/unprivileged_userns_clone") == "0":
        return Refusal(
            f"{said}: unprivileged user namespaces are switched off "
            "(kernel.unprivileged_userns_clone = 0)",
            "sysctl -w kernel.unprivileged_userns_clone=1, or start as root",
        )
    if _read(f"{sysctl}/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return Refusal(
            f"{said}: AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns = 1)",
            "give this Python an AppArmor profile that allows userns (SECURITY.md), "
            "or start as root",
        )
    if code == errno.EPERM and _seccomp_mode(status) == 2:
        return Refusal(
            f"{said}: a seccomp filter on this process refuses namespaces "
            "(a container's default profile, as Docker's)",
            "run the container with the seccomp profile in contrib/seccomp-userns.json "
            "(SECURITY.md), or start as root",
        )
    if code == errno.ENOSPC:
        return Refusal(
            f"{said}: the user namespace limit is reached (user.max_user_namespaces)",
            "raise user.max_user_namespaces, or start as root",
        )
    return Refusal(said, "start as root, or on a kernel that allows unprivileged user namespaces")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def _map_ids(inside: int, outside_uid: int, outside_gid: int) -> None:
    """Map ``inside`` to the ids one level out, for the calling process's new namespace."""
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inside} {outside_uid} 1")
    _write("/proc/self/gid_map", f"{inside} {outside_gid} 1")


def _try_in_child() -> Refusal | None:
    """Make and map a user namespace in a throwaway child: ``None`` if it works, else why not.

    So the calling process never enters a namespace it can't map (it could not leave it)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the throwaway child
        message = b""
        try:
            os.close(read_fd)
            uid, gid = os.geteuid(), os.getegid()
            if unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
                code = ctypes.get_errno()
                message = b"%d unshare(CLONE_NEWUSER)" % code
            else:
                try:
                    _map_ids(0, uid, gid)
                    check(unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
                except OSError as exc:
                    message = b"%d %s" % (exc.errno or 0, b"writing the namespace's id map")
            os.write(write_fd, message)
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        said = pipe.read()
    os.waitpid(pid, 0)
    if not said:
        return None
    number, _, what = said.decode("ascii", "replace").partition(" ")
    return explain_refusal(int(number) if number.isdigit() else 0, what)


def enter_zygote_namespace() -> Privilege:
    """Give the calling process (the zygote, at start, single-threaded) what it needs for the
    namespace layers: nothing as root; else a user and mount namespace of its own, tried in a
    throwaway child first. Never raises: a refusal is returned, named (mode ``"none"``)."""
    uid = os.geteuid()
    if uid == 0:
        return Privilege("root", 0)
    gid = os.getegid()
    refusal = _try_in_child()
    if refusal is not None:
        return Privilege("none", uid, refusal)
    try:
        check(unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
        _map_ids(0, uid, gid)
    except OSError as exc:  # pragma: no cover - the child just did the same
        return Privilege("none", uid, explain_refusal(exc.errno or 0, str(exc)))
    return Privilege("userns", uid)


def own_user_namespace(child_id: int) -> None:
    """Move the calling child into a user namespace of its own as ``child_id`` (uid and gid),
    holding no capability (module doc). Call it as the zygote namespace's 0.

    Raises:
        OSError: a step failed; the child may hold capabilities and must not run a script.
    """
    check(unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    _map_ids(child_id, 0, 0)
    os.setresgid(child_id, child_id, child_id)
    os.setresuid(child_id, child_id, child_id)
    drop_capabilities()


_LAST_CAP: Final = int(_read("/proc/sys/kernel/cap_last_cap") or 40)
"""The kernel's last capability, read once (in the zygote, before any child is forked)."""


def drop_bounding_set() -> bool:
    """Empty the bounding set (no capability can be gained again, even by ``execve``), where
    the process holds ``CAP_SETPCAP`` (root, or 0 of a user namespace); return whether it did.
    A process without it (a root started with a narrowed set) keeps its set as it is, which
    nothing but an ``execve`` of a file with capabilities, denied to a child, could use.

    Raises:
        OSError: some were dropped and then one could not be, or one is left after.
    """
    dropped = 0
    for cap in range(_LAST_CAP + 1):
        if prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
            dropped += 1
            continue
        code = ctypes.get_errno()
        if code == errno.EINVAL:  # past the kernel's last capability
            break
        if dropped == 0 and code == errno.EPERM:
            return False
        raise OSError(code, f"prctl(PR_CAPBSET_DROP, {cap}): {os.strerror(code)}")
    left = [cap for cap in range(_LAST_CAP + 1) if prctl(_PR_CAPBSET_READ, cap, 0, 0, 0) == 1]
    if left:
        raise OSError(errno.EPERM, f"capabilities {left} are still in the bounding set")
    return True


def drop_capabilities() -> None:
    """Drop every capability: the bounding and ambient sets, then the effective, permitted and
    inheritable ones; checked after. Needs ``CAP_SETPCAP`` for the bounding set (root, or 0 of
    a user namespace), else only what the process holds is dropped.

    Raises:
        OSError: a capability is still held.
    """
    drop_bounding_set()
    prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _capset(ctypes.byref(header), data) != 0:
        raise os_error("capset")
    if not holds_no_capability():
        raise OSError(errno.EPERM, "capabilities are still held after dropping them")


def holds_no_capability() -> bool:
    """Whether the calling process's effective, permitted and inheritable sets are empty (so
    is its ambient set then: the kernel keeps it within permitted and inheritable)."""
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _capget(ctypes.byref(header), data) != 0:
        return False
    return not any(part.effective or part.permitted or part.inheritable for part in data)
