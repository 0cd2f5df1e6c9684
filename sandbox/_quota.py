"""The ``quota`` layer: while a run runs, its ``out/`` is a tmpfs of its own, limited in size
and in inodes; once its child has exited, what the tmpfs holds is copied to the disk, within
the quota, and the tmpfs is gone.

``write_text`` keeps the quota in the child (:mod:`sandbox._session`); this layer keeps it for
a child that escaped the language layer and writes with plain ``os`` calls, many files,
directories, links, sparse or preallocated files. ``RLIMIT_FSIZE`` (:mod:`sandbox._isolation`)
is capped at one byte past ``max_out_bytes`` as well.

Who mounts, and where (the choice, and why)
    The zygote mounts, never the host. When it starts as root, :func:`enter_private_mounts`
    moves the zygote into a mount namespace of its own whose mounts are all slaves of the
    host's (``unshare(CLONE_NEWNS)``, then ``/`` made ``MS_REC | MS_SLAVE``): what the host
    mounts later still reaches it, nothing it mounts reaches the host. So no other process's
    mount table ever shows a run's tmpfs, and every one of them vanishes with the namespace
    when the zygote and its children are gone, however they died: a crashed host or zygote
    leaves no mount behind. (The host mounting in its own namespace would show every tmpfs
    machine-wide and leave them mounted if it crashed.) Children are forked into the same
    namespace; seccomp denies them every mount call.

    For each spawn, before the fork, :meth:`OutMount.attach` opens the on-disk ``out/``
    (``O_NOFOLLOW``), makes a tmpfs with the new mount API (``fsopen``, ``fsconfig``,
    ``fsmount``: no path is involved) and moves it onto that directory through its fd
    (``move_mount``). The child finds its ``out/`` covered and isolates itself over it (the
    landlock rule for ``out/`` and the ``uid`` layer's ``chown`` land on the tmpfs); it keeps
    neither fd. A spare child's directory is renamed from ``.spares/<x>`` to ``runs/<id>``
    after the child isolated itself: that renames the directory *holding* the mount point,
    which the kernel allows from any namespace, and the mount follows it.

    When the zygote reaps the child, before it reports the exit, :meth:`OutMount.finish`
    detaches the tmpfs (``umount2(MNT_DETACH)`` through the mount's own fd, which keeps the
    detached tmpfs readable), copies what it holds into the on-disk ``out/`` through the fd
    opened before the mount, and closes both. So when the host hears of the exit, the files
    are on the disk, and the host lists them (``ScriptResult.outputs``) as before.

The copy
    Every call is relative to an open directory fd (``openat``-style), with ``O_NOFOLLOW``, and
    no path is ever built from a name; a name is used as the kernel gave it (it holds no
    ``/``), so it can only name an entry of the directory at hand. Only regular files and
    directories are copied (a symlink, fifo, socket or device is left out), with fixed modes
    (``0644``, ``0755``: no set-id bit, whatever the child set). Entries go in name order,
    depth first: the walk stops at the first entry past ``max_out_files``, and a file whose
    size doesn't fit in the bytes left is not copied at all (a sparse file counts its size,
    so a huge hole can't become a huge copy); each hard link is copied as the file it names
    and counts as such. So the disk gets at most ``max_out_files`` entries and
    ``max_out_bytes`` bytes of a run. An entry already on the disk (a workspace reused
    by several runs, as the tests do) is replaced if it is a file, merged if a directory.

Sizing, and how the zygote knows the quota was passed
    ``nr_inodes`` is ``max_out_files + 2``: ``out/`` itself, the quota, and one entry past it,
    so that a run that tried to pass the quota is seen to have passed it (a tmpfs full at
    exactly the quota would look like one that refused the next file). Hard links take an
    inode each on tmpfs. ``size`` is ``max_out_bytes + 1`` rounded up to pages, plus one page
    per entry: tmpfs counts whole pages, so a run within the quota never fills it and the
    counts a run within its limits meets are ``write_text``'s, exactly. The zygote's finding,
    :meth:`OutMount.finish`'s answer (reported to the host with the exit, which ends the run
    with ``DiskQuotaExceeded``), never relies on the child, which is hostile when the language
    layer is off: the quota was passed when the tmpfs ran out of blocks or inodes, or holds
    more than ``max_out_files`` entries or more than ``max_out_bytes`` bytes of files. A request
    the kernel refused whole and undid (one ``fallocate`` larger than the room left) leaves no
    trace: the script saw ``ENOSPC``, nothing past the quota was stored, and the run ends as
    the script ends it.

Costs
    A mount and an unmount per child, before the fork and at the reap; then the copy of what
    the run left to the disk, which costs mostly the disk's own time. The copy is made in the
    zygote's loop, which serves no other request (spawn, kill, wait) meanwhile: it is bounded
    by the quota, and most runs leave a file or none (a copier process per run would take it
    off the loop). A run's ``out/`` is in memory until the run ends: up to ``max_out_bytes``
    plus a page per entry, besides the child's ``memory_mb``.

The layer is skipped, with the reason, when the zygote is not root, when it couldn't make its
namespace, when this architecture's mount calls aren't known here, or when the mount fails
(a missing ``out/``, one another live child's tmpfs covers already).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat
import sys
from typing import Final

__all__ = ["OutMount", "enter_private_mounts", "probe_tmpfs", "tmpfs_size"]

_LIBC: Final = ctypes.CDLL(None, use_errno=True)
_syscall = _LIBC.syscall
_syscall.restype = ctypes.c_long
_unshare = _LIBC.unshare
_unshare.restype = ctypes.c_int
_unshare.argtypes = [ctypes.c_int]
_mount = _LIBC.mount
_mount.restype = ctypes.c_int
_mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]
_umount2 = _LIBC.umount2
_umount2.restype = ctypes.c_int
_umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]

_ARCHES: Final = ("x86_64", "aarch64")
"""Where the new mount API has the numbers below (the generic table, since Linux 5.2)."""
_SYS_MOVE_MOUNT: Final = 429
_SYS_FSOPEN: Final = 430
_SYS_FSCONFIG: Final = 431
_SYS_FSMOUNT: Final = 432
_CLONE_NEWNS: Final = 0x00020000
_MS_REC: Final = 0x4000
_MS_SLAVE: Final = 1 << 19
_MNT_DETACH: Final = 2
_FSOPEN_CLOEXEC: Final = 1
_FSMOUNT_CLOEXEC: Final = 1
_FSCONFIG_SET_STRING: Final = 1
_FSCONFIG_CMD_CREATE: Final = 6
_MOUNT_ATTR_NOSUID: Final = 0x2
_MOUNT_ATTR_NODEV: Final = 0x4
_MOUNT_ATTR_NOEXEC: Final = 0x8
_MOVE_MOUNT_F_EMPTY_PATH: Final = 0x4
_MOVE_MOUNT_T_EMPTY_PATH: Final = 0x40
_PAGE: Final = os.sysconf("SC_PAGE_SIZE")
_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _call(number: int, *args: int | bytes | None) -> int:
    """``syscall(number, *args)``, every int passed as a C long."""
    return int(
        _syscall(
            ctypes.c_long(number), *(ctypes.c_long(a) if isinstance(a, int) else a for a in args)
        )
    )


def _checked(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def enter_private_mounts() -> str | None:
    """Move the calling process (the zygote, once, at start) into a mount namespace of its own
    whose mounts are slaves of the host's (module doc). Returns ``None`` when it did, else
    why the layer can't be applied here; the process is then in a namespace whose mounts
    would reach the host, or in none of its own, and must make no mount."""
    if os.geteuid() != 0:
        return "not started as root"
    if platform.machine() not in _ARCHES:
        return f"no mount calls known for {platform.machine()}"
    try:
        _checked(_unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _checked(_mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "mount(/, MS_SLAVE)")
    except OSError as exc:
        return str(exc)
    return None


def tmpfs_size(max_bytes: int, max_files: int) -> tuple[int, int]:
    """The tmpfs of a run with this quota: (size in bytes, inodes), as the module doc says."""
    pages = -(-(max_bytes + 1) // _PAGE) + max_files + 2
    return pages * _PAGE, max_files + 2


def _make_tmpfs(size: int, inodes: int) -> int:
    """A new, detached tmpfs of ``size`` bytes and ``inodes`` inodes; returns its mount fd."""
    fs = _checked(_call(_SYS_FSOPEN, b"tmpfs", _FSOPEN_CLOEXEC), "fsopen(tmpfs)")
    try:
        for key, value in ((b"size", b"%d" % size), (b"nr_inodes", b"%d" % inodes)):
            _checked(
                _call(_SYS_FSCONFIG, fs, _FSCONFIG_SET_STRING, key, value, 0),
                f"fsconfig({key.decode()}={value.decode()})",
            )
        _checked(_call(_SYS_FSCONFIG, fs, _FSCONFIG_SET_STRING, b"mode", b"0755", 0), "fsconfig")
        _checked(_call(_SYS_FSCONFIG, fs, _FSCONFIG_CMD_CREATE, None, None, 0), "fsconfig")
        attributes = _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV | _MOUNT_ATTR_NOEXEC
        return _checked(_call(_SYS_FSMOUNT, fs, _FSMOUNT_CLOEXEC, attributes), "fsmount")
    finally:
        os.close(fs)


class OutMount:
    """The tmpfs on one child's ``out/``, made by the zygote before the fork.

    Attributes:
        disk: an fd of the on-disk ``out/``, opened before the mount (the copy's target).
        mount: an fd of the tmpfs's root (the copy's source; it keeps the tmpfs alive).
        keys: the device and inode of the on-disk ``out/`` and of the tmpfs's root: opening
            that ``out/`` by its path gives one of them while the tmpfs covers it.
    """

    def __init__(self, disk: int, mount: int, max_bytes: int, max_files: int) -> None:
        self.disk = disk
        self.mount = mount
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.keys = {(info.st_dev, info.st_ino) for info in (os.fstat(disk), os.fstat(mount))}

    @classmethod
    def attach(
        cls, workspace: str, max_bytes: int, max_files: int, *, busy: set[tuple[int, int]]
    ) -> OutMount:
        """Mount a tmpfs sized for this quota on ``<workspace>/out``.

        Raises:
            OSError: ``out/`` is missing or a symlink, it is in ``busy`` (the keys of the live
                children's mounts: another one's tmpfs covers it), or a mount call failed;
                nothing is left mounted or open.
        """
        parent = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            disk = os.open("out", _DIRECTORY, dir_fd=parent)
        finally:
            os.close(parent)
        mount = -1
        try:
            info = os.fstat(disk)
            if (info.st_dev, info.st_ino) in busy:
                raise OSError(errno.EBUSY, "another child that still runs has its tmpfs there")
            mount = _make_tmpfs(*tmpfs_size(max_bytes, max_files))
            flags = _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH
            _checked(_call(_SYS_MOVE_MOUNT, mount, b"", disk, b"", flags), "move_mount")
        except BaseException:
            os.close(disk)
            if mount >= 0:
                os.close(mount)
            raise
        return cls(disk, mount, max_bytes, max_files)

    def forget(self) -> None:
        """Close both fds and leave the mount as it is. Never raises. (A forked child holds
        neither once its hygiene closed every fd it inherited: the disk fd would let it write
        past the tmpfs.)"""
        for fd in (self.disk, self.mount):
            with contextlib.suppress(OSError):
                os.close(fd)

    def finish(self) -> str | None:
        """Detach the tmpfs, copy what it holds to the disk (module doc) and close both fds;
        call it once the child has exited. Returns why the run passed its quota, or ``None``.

        Never raises: an entry that can't be copied is left out and reported on stderr.
        """
        try:
            with contextlib.suppress(OSError):  # gone already if the host removed the directory
                _checked(_umount2(f"/proc/self/fd/{self.mount}".encode(), _MNT_DETACH), "umount2")
            passed = None
            with contextlib.suppress(OSError):
                room = os.fstatvfs(self.mount)
                if room.f_bfree == 0 or room.f_ffree == 0:
                    passed = "the script filled its out/ (its tmpfs ran out of room)"
            root = os.open(".", _DIRECTORY, dir_fd=self.mount)  # the mount fd is O_PATH
            umask = os.umask(0o022)  # the modes below exactly, whatever the host's umask
            try:
                copied = _copy_tree(root, self.disk, self.max_bytes, self.max_files)
            finally:
                os.umask(umask)
                os.close(root)
            return copied or passed
        except Exception as exc:  # pragma: no cover - a bug here must not take the zygote down
            print(f"sandbox quota: couldn't copy out/: {exc!r}", file=sys.stderr)
            return None
        finally:
            self.forget()


def _copy_tree(source: int, target: int, max_bytes: int, max_files: int) -> str | None:
    """Copy the tree under directory fd ``source`` into directory fd ``target`` (module doc);
    return why it passes the quota, or ``None``. Leaves ``source`` and ``target`` open."""
    entries = size = 0
    passed: str | None = None
    stack: list[tuple[int, int, list[str]]] = [(source, target, _names(source))]
    try:
        while stack:
            src, dst, names = stack[-1]
            if not names:
                stack.pop()
                if src != source:
                    os.close(src)
                    os.close(dst)
                continue
            name = names.pop()
            entries += 1
            if entries > max_files:
                return f"the script left more than {max_files} files and directories in out/"
            try:
                info = os.stat(name, dir_fd=src, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    inner = os.open(name, _DIRECTORY, dir_fd=src)
                    try:
                        stack.append((inner, _directory(name, dst), _names(inner)))
                    except BaseException:
                        os.close(inner)
                        raise
                elif stat.S_ISREG(info.st_mode):
                    if size + info.st_size > max_bytes:
                        passed = f"the script left more than {max_bytes} bytes in out/"
                        continue
                    size += _copy_file(name, src, dst, max_bytes - size)
            except OSError as exc:
                print(f"sandbox quota: left {name!r} out of the copy: {exc}", file=sys.stderr)
    finally:
        for src, dst, _ in stack:
            if src != source:
                os.close(src)
                os.close(dst)
    return passed


def _names(directory: int) -> list[str]:
    """The names in ``directory``, last first (they are popped off the end)."""
    return sorted(os.listdir(directory), reverse=True)


def _directory(name: str, parent: int) -> int:
    """Open directory ``name`` of ``parent`` on the disk, made if missing (a non-directory in
    its place is removed first); returns its fd."""
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        if not stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=parent)
            os.mkdir(name, 0o755, dir_fd=parent)
    return os.open(name, _DIRECTORY, dir_fd=parent)


def _copy_file(name: str, source: int, target: int, limit: int) -> int:
    """Copy regular file ``name`` of ``source`` to ``target`` (replacing a file there), at most
    ``limit`` bytes of it; returns the bytes copied."""
    reading = os.open(
        name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=source
    )
    try:
        info = os.fstat(reading)
        if not stat.S_ISREG(info.st_mode):
            return 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            writing = os.open(name, flags, 0o644, dir_fd=target)
        except FileExistsError:
            os.unlink(name, dir_fd=target)  # a directory there stays, and the open fails
            writing = os.open(name, flags, 0o644, dir_fd=target)
        try:
            wanted, copied = min(info.st_size, limit), 0
            while copied < wanted:
                sent = os.sendfile(writing, reading, copied, wanted - copied)
                if sent == 0:
                    break
                copied += sent
            return copied
        finally:
            os.close(writing)
    finally:
        os.close(reading)


def probe_tmpfs() -> str | None:
    """For a layer probe, in a throwaway child of a zygote set up by
    :func:`enter_private_mounts`: ``None`` when a tmpfs can be made here, else why not."""
    try:
        os.close(_make_tmpfs(*tmpfs_size(0, 0)))
    except OSError as exc:
        return f"could not make a tmpfs: {exc}"
    return None
