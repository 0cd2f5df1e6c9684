"""The zygote: a warm fork server that makes one fresh sandbox child per script.

One long-lived process (started by :meth:`sandbox.ZygoteProcess.start`) has already imported
and exercised RestrictedPython, msgpack, the child's side of the protocol, the runtime and the
allowlisted modules (:func:`sandbox._warm.warm_up`). For each ``spawn`` request of the
zygote's protocol (:mod:`sandbox.protocol._zygote_messages`) it receives the child's ends of
its channel over the socket (``SCM_RIGHTS``), forks (as root, the child is pid 1 of a PID
namespace of its own: :class:`~sandbox._isolation.PidNamespaces`), and the child isolates itself
(:func:`sandbox._isolation.apply_isolation`), says ``ready``, primes itself while no ``start``
is waiting (:func:`sandbox._warm.prime`: the pages a run touches are copied while a spare
waits, not between ``start`` and ``done``) and serves exactly one script
(:func:`sandbox._runtime.serve`); it exits right after its last message, before anything of the
script's is released, so no script code runs after ``done``.
The zygote sets malloc to keep and reuse freed memory (:func:`_keep_freed_memory`), for itself
and every child. The zygote reaps every child (through a pidfd each) and reports its exit status
and resource use on ``wait``. No child ever runs a second script, and a child never returns
into the zygote's loop. When root, the zygote lives in a mount namespace of its own and puts
each child's ``out/`` on a tmpfs of the run's disk quota before the fork, which it copies to the
disk and unmounts when it reaps the child, before it reports the exit (:mod:`sandbox._quota`).
As root, each child also gets a uid and gid of its own (:class:`~sandbox._isolation.ChildIds`),
held until it is reaped.

Every request is validated before it is acted on (:func:`sandbox._zygote_wire.read_request`,
against the bounds of the host's models; the zygote never loads pydantic); a malformed one is
dropped. When the requester's end of the socket closes, the zygote kills every child it still
has, reaps them and exits; children also get ``SIGKILL`` if the zygote dies.

Work each child needs that can be done before its fork is: the seccomp program (built once, and
filled in for a child that is pid 1 of its own PID namespace), landlock's Python directories
(opened once), the address-space baseline of its memory limit (read before each fork), and its
network namespace (made between requests, :class:`~sandbox._isolation.NetNamespaces`).

This module is the fork server only: the host's side (the client, starting the process, a
child's channel) is :mod:`sandbox._launcher`, which this module never imports.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import signal
import socket
import subprocess  # noqa: F401  (held by every child: see below)
import sys
from typing import Any, Final

from . import _runtime, _warm
from ._blocking_channel import BlockingChannel
from ._isolation import (
    ChildIds,
    IsolationError,
    LayerProbe,
    NetNamespaces,
    PidNamespaces,
    Privilege,
    address_space_now,
    apply_isolation,
    enter_zygote_namespace,
    fill_seccomp,
    open_python_paths,
    probe_here,
    seccomp_arch,
    seccomp_template,
)
from ._quota import OutMount, enter_private_mounts
from ._wire import RunError
from ._zygote_wire import Kill, Spawn, Wait, pack_reply, read_request
from .protocol import ProtocolError, ZygoteError
from .protocol._names import DATAGRAM

__all__ = ["main"]


# Every child holds ``subprocess`` (and ``_posixsubprocess``, ``fcntl``) loaded, though no
# trusted code of a child uses it: a script that reaches it through ``sys.modules`` (with the
# language layer off) meets the OS layers, and the security suite's process attacks test those
# layers, not the module's absence.


# --------------------------------------------------------------------------------------------
# Server (runs in the zygote process)


class _Server:
    def __init__(
        self,
        sock: socket.socket,
        privilege: Privilege,
        mounts: str | None,
        layers: list[LayerProbe],
    ) -> None:
        self.sock = sock
        self.pid = os.getpid()
        self.privilege = privilege
        self.layers = layers
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ, None)
        self.pid_namespaces = PidNamespaces(privilege.refusal.cause if privilege.refusal else None)
        self.net_namespaces = NetNamespaces(ahead=privilege.mode == "root")
        self.net_namespaces.prepare()
        self.python_dirs = open_python_paths()
        self.child_ids = ChildIds(
            shared=privilege.mode == "root", start=int.from_bytes(os.urandom(2), "little")
        )
        self.ids: dict[int, int] = {}  # live child pid -> its uid and gid (ChildIds)
        self.pidfds: dict[int, int] = {}  # live child pid -> pidfd
        self.mounts = mounts  # None once in a mount namespace of its own; else why not
        self.outs: dict[int, OutMount] = {}  # live child pid -> the tmpfs on its out/
        self.exits: dict[int, dict[str, Any]] = {}  # reaped, not yet waited for: exited's fields
        self.waiters: dict[int, list[int]] = {}  # pid -> req_ids waiting

    def reply(self, op: str, **fields: Any) -> None:
        """Send the reply ``op`` with ``fields`` (:func:`~sandbox._zygote_wire.pack_reply`; the
        requester validates every reply)."""
        with contextlib.suppress(OSError):
            self.sock.send(pack_reply(op, **fields))

    def reply_with_fds(self, op: str, fds: list[int], **fields: Any) -> None:
        """:meth:`reply`, with copies of ``fds`` in the datagram (``SCM_RIGHTS``)."""
        with contextlib.suppress(OSError):
            socket.send_fds(self.sock, [pack_reply(op, **fields)], fds)

    def run(self) -> None:
        self.reply("hello", pid=self.pid, layers=[vars(probe) for probe in self.layers])
        while True:
            for key, _events in self.selector.select():
                if key.data is None:
                    if not self.receive():
                        self.shutdown()
                        return
                else:
                    self.reap(key.data)

    def receive(self) -> bool:
        try:
            data, fds, _flags, _address = socket.recv_fds(self.sock, DATAGRAM, 2)
        except OSError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        try:
            request = read_request(data)
        except ZygoteError:
            for fd in fds:
                os.close(fd)
            return True
        if isinstance(request, Spawn):
            self.spawn(request, fds)
            return True
        for fd in fds:
            os.close(fd)
        if isinstance(request, Wait):
            self.wait(request)
        else:
            self.kill(request)
        return True

    def spawn(self, request: Spawn, fds: list[int]) -> None:
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            self.reply("failed", req_id=request.req_id, message="a spawn needs exactly two fds")
            return
        out, unmounted = self.mount_out(request)
        try:
            child_id = self.child_ids.take()
        except LookupError as exc:
            for fd in fds:
                os.close(fd)
            if out is not None:
                out.finish()
            self.reply("failed", req_id=request.req_id, message=str(exc))
            return
        netns = self.net_namespaces.take(request.disable)
        address_space = address_space_now()
        try:
            pid, pid_namespace = self.pid_namespaces.fork(request.disable)
        except OSError as exc:
            self.child_ids.release(child_id)
            for fd in [*fds, *([] if netns is None else [netns])]:
                os.close(fd)
            if out is not None:
                out.finish()
            self.reply("failed", req_id=request.req_id, message=f"fork failed: {exc}")
            return
        if pid == 0:  # pragma: no cover - the child; coverage can't follow it
            status = 70
            try:
                status = self.child(
                    request, fds, out, unmounted, pid_namespace, child_id, netns, address_space
                )
            finally:
                os._exit(status)
        self.ids[pid] = child_id
        for fd in [*fds, *([] if netns is None else [netns])]:
            os.close(fd)
        if out is not None:
            self.outs[pid] = out
        pidfd = os.pidfd_open(pid)
        self.pidfds[pid] = pidfd
        self.selector.register(pidfd, selectors.EVENT_READ, pid)
        held = [pidfd] if out is None else [pidfd, out.mount]  # the host's means to end it at once
        self.reply_with_fds("spawned", held, req_id=request.req_id, pid=pid, out=out is not None)
        self.net_namespaces.prepare()  # the next child's, while this one isolates itself

    def mount_out(self, request: Spawn) -> tuple[OutMount | None, str | None]:
        """The tmpfs for the child of ``request`` (the ``quota`` layer), or why there is none."""
        if "quota" in request.disable:
            return None, "disabled"
        if self.mounts is not None:
            return None, self.mounts
        busy = {key for out in self.outs.values() for key in out.keys}
        limits = request.limits
        try:
            out = OutMount.attach(
                request.workspace, limits.max_out_bytes, limits.max_out_files, busy=busy
            )
        except OSError as exc:
            return None, f"could not mount a tmpfs on out/: {exc}"
        return out, None

    def child(  # pragma: no cover - in the child
        self,
        request: Spawn,
        fds: list[int],
        out: OutMount | None,
        unmounted: str | None,
        pid_namespace: str | None,
        child_id: int,
        netns: int | None,
        address_space: int,
    ) -> int:
        # Every fd the zygote held (its socket and selector, the pidfds, the out/ mounts' and
        # the disk's fds) is closed by the hygiene, before anything else; the objects that own
        # them stay referenced from this frame until the child exits, so none closes an fd
        # number again.
        try:
            kept, report = apply_isolation(
                workspace=request.workspace,
                limits=request.limits,
                keep_fds=fds,
                parent_pid=self.pid,
                pid_namespace=pid_namespace,
                child_id=child_id,
                privilege=self.privilege,
                disable=frozenset(request.disable),
                address_space=address_space,
                netns_fd=netns,
                python_dirs=self.python_dirs,
            )
        except IsolationError as exc:
            with contextlib.suppress(OSError, ProtocolError):
                BlockingChannel(fds[0], fds[1]).send(
                    RunError(type="SandboxSetupFailed", message=str(exc), phase="setup")
                )
            return 71
        if unmounted is None:  # applied by the zygote before the fork
            report.applied.insert(0, "quota")
        else:
            report.skip("quota", unmounted)
        channel = BlockingChannel(kept[0], kept[1])
        return _runtime.serve(
            channel,
            pid=report.pid,
            applied=report.applied,
            skipped=report.skipped,
            restricted="restricted-python" not in request.disable,
            end=os._exit,
            idle=_warm.prime,
        )

    def reap(self, pid: int) -> None:
        pidfd = self.pidfds.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        out = self.outs.pop(pid, None)
        self.child_ids.release(self.ids.pop(pid))  # no process holds it any more
        exited = {
            "pid": pid,
            "returncode": os.waitstatus_to_exitcode(status),
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "max_rss_kb": usage.ru_maxrss,
            "quota_exceeded": None if out is None else out.finish(),  # on the disk before the reply
        }
        waiting = self.waiters.pop(pid, [])
        if not waiting:
            self.exits[pid] = exited
        for req_id in waiting:
            self.reply("exited", req_id=req_id, **exited)

    def wait(self, request: Wait) -> None:
        if request.pid in self.exits:
            self.reply("exited", req_id=request.req_id, **self.exits.pop(request.pid))
        elif request.pid in self.pidfds:
            self.waiters.setdefault(request.pid, []).append(request.req_id)
        else:
            self.reply(
                "failed", req_id=request.req_id, message=f"no child {request.pid} to wait for"
            )

    def kill(self, request: Kill) -> None:
        pidfd = self.pidfds.get(request.pid)
        delivered = False
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, request.signal)
                delivered = True
            except ProcessLookupError:
                delivered = False
        self.reply("signalled", req_id=request.req_id, delivered=delivered)

    def shutdown(self) -> None:
        for pidfd in self.pidfds.values():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        for pid, pidfd in list(self.pidfds.items()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.close(pidfd)
        self.pidfds.clear()
        self.selector.close()
        self.sock.close()


_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3


def _keep_freed_memory() -> None:
    """Make malloc keep and reuse what a child frees, for the zygote and every child it forks.

    Blocks under 32 MiB come from the heap and freed memory is kept (up to 64 MiB), so a child
    handling a large message (a 1 MiB tool result is copied a few times on its way in) reuses
    the pages of one copy for the next instead of faulting in fresh ones, as glibc's defaults
    (a fresh mapping for each block of 128 KiB or more, freed memory trimmed) would have it.
    A child is short-lived, and its ``rlimits`` cap its address space either way. A libc
    without ``mallopt`` is left as it is.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_TRIM_THRESHOLD, 64 << 20)
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)


def main(fd: int) -> None:
    """The zygote's entry point: warm up, then serve requests on socket ``fd`` until it
    closes. Exits the process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    privilege = enter_zygote_namespace()  # first: unshare(CLONE_NEWUSER) wants one thread
    mounts = privilege.refusal.cause if privilege.refusal else enter_private_mounts()
    _keep_freed_memory()
    _warm.warm_up()
    if (arch := seccomp_arch()) is not None:
        seccomp_template(arch)  # made once, here, for every child
        fill_seccomp(arch, 1)  # and ready for each child in a PID namespace of its own
    layers = probe_here(privilege, mounts)  # what its children get, said in hello
    _Server(sock, privilege, mounts, layers).run()
    sys.exit(0)
