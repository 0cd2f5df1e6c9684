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

import bisect
import contextlib
import errno
import fcntl
import math
import os
import random
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
    fork_with,
    prctl,
    setns,
    unshare,
)
from ._userns import drop_bounding_set, drop_capabilities, own_user_namespace

__all__ = [
    "CHILD_ID_BASE",
    "CHILD_ID_SLOTS",
    "ID_BLOCK",
    "ID_LOCK_DIRS",
    "ChildIds",
    "IsolationError",
    "NetNamespaces",
    "PidNamespaces",
    "address_space_now",
    "apply_rlimits",
    "drop_uid",
    "hygiene",
    "ids_from_proc",
    "seal_ipc_namespace",
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


ID_BLOCK: Final = 256
"""How many ids of the range a zygote reserves at once under root (:class:`ChildIds`)."""

ID_LOCK_DIRS: Final = ("/run/scriptbridge/ids", "/dev/shm/.scriptbridge-ids")
"""Where root's zygotes reserve blocks of ids, the first that can be used: a directory of
root's own (made so, mode 0700, if missing), one lock file per block."""


class ChildIds:
    """The ids the zygote hands its children for the ``uid`` layer (the same number as uid and
    gid), from :data:`CHILD_ID_BASE` on; no two live children share one.

    ``shared=True`` (root: the ids are the machine's): ids are drawn only from blocks of
    :data:`ID_BLOCK` that this zygote holds for itself machine-wide, each by an exclusive
    ``flock`` on a file named for it in a directory of root's (:data:`ID_LOCK_DIRS`). A block
    is taken when every id of the held ones is in use, tried in a random order, and held until
    the zygote exits: the kernel drops the lock with the process, however it ends. So two
    zygotes, of one host or of two, never hand out the same id while both run; an id of a
    block comes back into use once its child was reaped and the block's other ids were handed
    out since. ``shared=False`` (each child in a user namespace of its own, where no other
    process has ids): round-robin over the whole range, no reservation.
    """

    def __init__(
        self,
        *,
        shared: bool,
        start: int = 0,
        slots: int = CHILD_ID_SLOTS,
        lock_dirs: Sequence[str] = ID_LOCK_DIRS,
    ) -> None:
        self._slots = slots
        self._shared = shared
        self._lock_dirs = lock_dirs
        self._next = start % slots
        self._held: set[int] = set()
        self._blocks: dict[int, int] = {}  # block number -> fd of its held lock file
        self._owned: list[int] = []  # the slots of those blocks, sorted
        self._order = list(range(-(-slots // ID_BLOCK)))
        random.shuffle(self._order)

    def take(self) -> int:
        """Return a free id and hold it until :meth:`release`.

        Raises:
            LookupError: no id can be had (every one held, or no block could be reserved:
                the message says why); nothing is held anew.
        """
        if not self._shared:
            return CHILD_ID_BASE + self._take_from(range(self._slots))
        try:
            return CHILD_ID_BASE + self._take_from(self._owned)
        except LookupError:
            block = self._reserve_block()
            self._owned = sorted([*self._owned, *self._block_slots(block)])
            return CHILD_ID_BASE + self._take_from(self._block_slots(block))

    def _block_slots(self, block: int) -> range:
        return range(block * ID_BLOCK, min((block + 1) * ID_BLOCK, self._slots))

    def _take_from(self, slots: Sequence[int]) -> int:
        """A free slot of ``slots``, the first at or after the round-robin cursor."""
        if slots:
            start = bisect.bisect_left(slots, self._next)
            for index in range(len(slots)):
                slot = slots[(start + index) % len(slots)]
                if slot not in self._held:
                    self._held.add(slot)
                    self._next = (slot + 1) % self._slots
                    return slot
        raise LookupError(f"all {len(self._held)} child ids held here are in use")

    def _reserve_block(self) -> int:
        """Lock the file of a block no other zygote holds; return the block's number."""
        fd = _lock_dir(self._lock_dirs)
        try:
            for block in self._order:
                if block in self._blocks:
                    continue
                lock = os.open(
                    f"{block}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                    dir_fd=fd,
                )  # fmt: skip
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(lock)
                    continue
                self._blocks[block] = lock
                return block
        finally:
            os.close(fd)
        raise LookupError("every block of child ids is held by a zygote")

    def release(self, child_id: int) -> None:
        """Free ``child_id`` (its child was reaped); a no-op for an id not held."""
        self._held.discard(child_id - CHILD_ID_BASE)


def _lock_dir(candidates: Sequence[str]) -> int:
    """An fd of the first of ``candidates`` that is a directory of root's that no one else may
    write (made so if missing), never through a symlink.

    Raises:
        LookupError: none is; the message says why for each.
    """
    reasons = []
    for path in candidates:
        try:
            with contextlib.suppress(FileExistsError):
                os.makedirs(path, mode=0o700)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            reasons.append(f"{path}: {exc.strerror}")
            continue
        info = os.fstat(fd)
        if info.st_uid == 0 and not info.st_mode & 0o022:
            return fd
        os.close(fd)
        reasons.append(f"{path}: not root's alone")
    raise LookupError(f"no directory to reserve child ids in ({'; '.join(reasons)})")


class PidNamespaces:
    """The zygote's half of the ``pidns`` layer: :meth:`fork` forks each child as pid 1 of a
    PID namespace of its own, with ``clone(CLONE_NEWPID)`` (:func:`fork_with`), which leaves
    the zygote's own namespaces as they were: it works as root and as 0 of a user namespace
    alike.

    The child learns its own and its parent's pid as the zygote numbers them from
    ``/proc/self/stat`` (``getpid()`` and ``getppid()`` say 1 and 0 there), so the layer is
    unavailable where ``/proc`` is not the zygote's PID namespace's.
    """

    def __init__(self, refusal: str | None = None) -> None:
        self.unavailable: str | None = None
        """Why no child can get a namespace here (``refusal``: why the zygote has no user
        namespace, if it has none), or ``None``."""
        if os.geteuid() != 0:
            self.unavailable = refusal or "not started as root"
            return
        try:
            if os.readlink("/proc/self") != str(os.getpid()):
                self.unavailable = "/proc is not this process's PID namespace's"
        except OSError as exc:
            self.unavailable = f"can't read /proc/self: {exc}"

    def fork(self, disable: Collection[str]) -> tuple[int, str | None]:
        """Fork a child; return ``os.fork``'s answer and ``None`` when the child is pid 1 of a
        PID namespace of its own, or why it isn't.

        Raises:
            OSError: the fork failed.
        """
        reason = "disabled" if "pidns" in disable else self.unavailable
        if reason is None:
            try:
                return fork_with(CLONE_NEWPID), None
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EINVAL, errno.ENOSYS, errno.EUSERS):
                    raise
                reason = str(exc)
        return os.fork(), reason


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

    def __init__(self, *, ahead: bool) -> None:
        self._own: int | None = None
        self._next: int | None = None
        if not ahead or os.geteuid() != 0:
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
    # Counted per uid, so for an ordinary user's child the user's (the host's) share: signals
    # queued (and, set before the child's user namespace is made, that namespace's bound),
    # and POSIX message queues' bytes.
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (SIGNALS_QUEUED, SIGNALS_QUEUED))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))


SIGNALS_QUEUED: Final = 64
"""The most signals a child may have queued (``RLIMIT_SIGPENDING``): its own bound, not its
uid's whole share."""

IPC_LIMITS: Final = (
    ("kernel/shmmax", "0"), ("kernel/shmall", "0"), ("kernel/shmmni", "0"),
    ("kernel/shm_rmid_forced", "1"), ("kernel/msgmni", "0"), ("kernel/msgmnb", "0"),
    ("kernel/sem", "0 0 0 0"), ("fs/mqueue/queues_max", "0"),
)  # fmt: skip
"""The limits of a child's IPC namespace: no SysV segment, queue or semaphore and no POSIX
queue can be made in it. Their memory is the kernel's, which no rlimit counts."""


def seal_ipc_namespace() -> None:
    """Set :data:`IPC_LIMITS` in the calling process's IPC namespace (a fresh one of its own:
    they are per namespace), through ``/proc/sys``.

    Raises:
        OSError: one could not be set.
    """
    for name, value in IPC_LIMITS:
        fd = os.open(f"/proc/sys/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, value.encode("ascii"))
        finally:
            os.close(fd)


def drop_uid(child_id: int, *, userns: bool, hand_over_out: bool) -> None:
    """The ``uid`` layer: become ``child_id`` (uid and gid) holding no capability.

    As root (``userns=False``): no supplementary groups, the bounding set emptied, real,
    effective and saved ids set (which clears the rest), ``out/`` handed over first when
    ``hand_over_out``. As 0 of the zygote's user namespace (``userns=True``): a user namespace
    of the child's own (:func:`own_user_namespace`); ``out/`` is the user's already, which is
    ``child_id`` there. Either way ``setuid(0)`` must fail after, and ``RLIMIT_NPROC`` is 0.

    Raises:
        OSError: a step failed; the child must not run a script.
    """
    if userns:
        own_user_namespace(child_id)
    else:
        if hand_over_out:  # the workspace's out/ (relative to the cwd, which is the workspace)
            with contextlib.suppress(FileNotFoundError):
                os.chown("out", child_id, child_id)
        os.setgroups([])
        drop_bounding_set()
        os.setresgid(child_id, child_id, child_id)
        os.setresuid(child_id, child_id, child_id)
        drop_capabilities()
    try:
        os.setuid(0)
    except OSError:
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
