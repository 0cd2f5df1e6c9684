"""Process hygiene, rlimits, the uid drop and namespaces: the layers a child sets on its process.

:func:`hygiene` (every child, always): a new session and process group, every inherited fd
closed but the channel's, ``/dev/null`` on fds 0-2, default signal handlers, an empty
environment, the workspace as working directory; it raises :class:`IsolationError` when any of
that fails. :func:`apply_rlimits` (the ``rlimits`` layer), :func:`drop_uid` (``uid``, with the
ids of :class:`ChildIds`), :class:`PidNamespaces` (the zygote's half of ``pidns``) and
:func:`watch_parent` (the parent-death signal) are the rest; :mod:`sandbox._isolation._apply`
orders them. ``netns`` is one ``unshare`` there.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import resource
import signal
from collections.abc import Collection, Sequence
from typing import Final

from .._zygote_wire import ChildLimits
from ._libc import (
    CLONE_NEWNET,
    CLONE_NEWPID,
    PR_SET_PDEATHSIG,
    check,
    os_error,
    prctl,
    setns,
    unshare,
)

__all__ = [
    "CHILD_ID_BASE",
    "CHILD_ID_SLOTS",
    "ChildIds",
    "IsolationError",
    "NetNamespaces",
    "PidNamespaces",
    "address_space_now",
    "apply_rlimits",
    "drop_uid",
    "hygiene",
    "ids_from_proc",
    "watch_parent",
]

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


class IsolationError(OSError):
    """A step every child needs (session, fds, environment, workspace) failed.

    The child is then only partly isolated and must exit without reading a script.
    """


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
        if unshare(CLONE_NEWPID) != 0:
            return str(os_error("unshare(CLONE_NEWPID)"))
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
            check(setns(self._own, CLONE_NEWPID), "setns(CLONE_NEWPID)")


class NetNamespaces:
    """The zygote's half of the ``netns`` layer: a fresh network namespace made ahead of each
    child, so the child only enters it (``setns``) rather than making one on its way to
    ``ready``.

    :meth:`prepare` (in the zygote, between requests) makes one: ``unshare(CLONE_NEWNET)``, an
    fd of it from ``/proc/self/ns/net``, and ``setns`` back to the zygote's own namespace,
    which the zygote never leaves for longer. :meth:`take` hands that fd to the next fork and
    forgets it; the zygote closes its copy after the fork, so each namespace is entered by one
    child only, and disappears with it. Root only; where it can't be done, :meth:`take` says
    ``None`` and the child makes its own (reporting why it couldn't, if it can't either).
    """

    def __init__(self) -> None:
        self._own: int | None = None
        self._next: int | None = None
        if os.geteuid() != 0:
            return
        try:
            self._own = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._own = None

    def prepare(self) -> None:
        """Make the namespace for the next child, unless one is ready; never raises (a failure
        leaves the next child to make its own)."""
        if self._own is None or self._next is not None:
            return
        if unshare(CLONE_NEWNET) != 0:
            return
        try:
            self._next = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._next = None
        if setns(self._own, CLONE_NEWNET) != 0:  # pragma: no cover - root can always go back
            if self._next is not None:
                os.close(self._next)
            self._next, self._own = None, None  # made no more: the zygote stays where it is

    def take(self, disable: Collection[str]) -> int | None:
        """The fd of a fresh namespace for the child forked next (the caller closes it after the
        fork), or ``None`` (the layer is disabled or none could be made)."""
        if "netns" in disable:
            return None
        self.prepare()
        fd, self._next = self._next, None
        return fd


def ids_from_proc() -> tuple[int, int]:
    """This process's pid and its parent's as ``/proc`` numbers them (the zygote's namespace:
    :class:`PidNamespaces` checks it), where ``getpid()`` and ``getppid()`` say 1 and 0."""
    fd = os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC)  # no file object: fewer pages
    try:
        line = os.read(fd, 4096)
    finally:
        os.close(fd)
    return int(line.split(b" ", 1)[0]), int(line.rsplit(b")", 1)[1].split()[1])


def hygiene(workspace: str, keep_fds: Sequence[int]) -> list[int]:
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


def address_space_now() -> int:
    """This process's address space in bytes (``/proc/self/statm``)."""
    fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
    try:
        pages = int(os.read(fd, 4096).split()[0])
    finally:
        os.close(fd)
    return pages * os.sysconf("SC_PAGE_SIZE")


def apply_rlimits(limits: ChildLimits, address_space: int | None = None) -> None:
    """Set the ``rlimits`` layer's limits; the address space may grow by ``limits.memory_mb``
    past ``address_space`` (the zygote's, read before the fork), or past this process's now."""
    cpu = max(1, math.ceil(limits.cpu_s))
    baseline = address_space_now() if address_space is None else address_space
    memory = baseline + limits.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # One byte past the quota: a file that passed it shows so in out/ (sandbox._quota).
    file_size = min(limits.max_file_bytes, limits.max_out_bytes + 1)
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))


def drop_uid(child_id: int, *, hand_over_out: bool) -> None:
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


def watch_parent(parent: int, *, own_namespace: bool) -> int:
    """Arm the parent-death signal and return this process's pid as the zygote numbers it;
    exit at once if the zygote is already gone."""
    # Set after the uid drop: a credential change clears the parent-death signal.
    check(prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    pid, ppid = ids_from_proc() if own_namespace else (os.getpid(), os.getppid())
    if ppid != parent:
        os._exit(70)  # the zygote died before the signal was armed
    return pid
