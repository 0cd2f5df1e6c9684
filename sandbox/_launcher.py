"""The host's side of the zygote: start it, and ask it for children. Runs in the host.

:meth:`ZygoteProcess.start` starts the fork server (:mod:`sandbox._zygote`) with an empty
environment, in a session of its own, holding only its end of a Unix ``SOCK_SEQPACKET`` socket,
and returns once it is warm. :func:`open_channel` makes one child's two streams; a ``spawn``
hands the child's ends to the zygote (``SCM_RIGHTS``), and the zygote forks the child.

:class:`ZygoteClient` is synchronous and thread-safe: several threads may spawn, wait and kill
at once (tests, benchmarks and the small blocking host of :mod:`sandbox.testing` use it). A host
with an event loop drives the same socket itself (:attr:`ZygoteProcess.socket`) with the sans-I/O
pair :func:`sandbox.protocol.encode_request` / :func:`~sandbox.protocol.read_reply`, so no thread
is needed per request; it must then not use the client, apart from :meth:`ZygoteProcess.close`.

This module needs no event loop (no trio) and is never imported by the fork server or a child;
the host reaches it through the door, ``sandbox``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from .protocol import ChildExit, ChildLimits, Layer, ZygoteError
from .protocol._zygote_messages import (
    DATAGRAM,
    REPLIES,
    Exited,
    Failed,
    Hello,
    Kill,
    LayerState,
    Signalled,
    Spawn,
    Spawned,
    Wait,
    child_exit,
    pack,
    unpack,
)

__all__ = ["TO_CHILD_SEND_BUFFER", "SpawnedChild", "ZygoteClient", "ZygoteProcess", "open_channel"]

_START_TIMEOUT: Final = 60.0


TO_CHILD_SEND_BUFFER: Final = 1 << 20
"""Send buffer asked for the host -> child stream (the kernel doubles it, and caps it at
``net.core.wmem_max``): a 1 MiB tool result fits in it, so it crosses in one write."""


def open_channel() -> tuple[int, int, int, int]:
    """Open the two streams of one child's channel; return ``(to_child, from_child, child_read,
    child_write)``, the host's two ends and then the child's. The caller owns all four fds.

    Host -> child is a Unix stream socket pair rather than a pipe: its send buffer
    (:data:`TO_CHILD_SEND_BUFFER`) takes a 1 MiB tool result in one write, where a pipe's
    capacity (capped by ``fs.pipe-max-size`` and each user's pipe pages) takes it in many, each
    a switch between host and child on one CPU. The host's end is shut for reading before the
    child gets its own, so
    the child can only read, as from a pipe: anything it writes fails with ``EPIPE``. What a
    socket has and a pipe doesn't (``sendmsg`` and its descriptor passing, ``bind``,
    ``setsockopt``, ...) the child's seccomp filter denies; and in case seccomp is off, the
    child's end is already bound to an autobound abstract name (the kernel's choice; nothing
    can connect to it), so it can't take a name of its choosing in the host's network
    namespace. Child -> host stays a pipe.

    Raises:
        OSError: the system is out of fds or socket memory; nothing is left open.
    """
    host_end, child_read = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with host_end, child_read:
        host_end.shutdown(socket.SHUT_RD)
        child_read.bind("")  # autobind
        with contextlib.suppress(OSError):  # best effort: the kernel caps it at wmem_max
            host_end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TO_CHILD_SEND_BUFFER)
        from_child, child_write = os.pipe()
        return host_end.detach(), from_child, child_read.detach(), child_write


@dataclass(frozen=True)
class SpawnedChild:
    """A child forked for one run. The caller owns both fds and must close them.

    Attributes:
        pid: the child's pid (valid until :meth:`ZygoteClient.wait` has returned for it).
        to_child: the host's (write-only) end of the host -> child stream (:func:`open_channel`).
        from_child: read end of the child -> host pipe.
        pidfd: the child's pidfd, when the zygote sent it (a requester reading its replies
            with room for fds): it kills the child race-free, and is readable once it exited.
        out_fd: the fd of the tmpfs on the child's ``out/`` (the ``quota`` layer), when sent.
    """

    pid: int
    to_child: int
    from_child: int
    pidfd: int | None = None
    out_fd: int | None = None


class ZygoteClient:
    """Synchronous, thread-safe requests to a zygote over its socket.

    The client owns ``sock`` and closes it in :meth:`close`, which makes the zygote kill its
    children and exit.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._send_lock = threading.Lock()
        self._state = threading.Condition()
        self._replies: dict[int, Any] = {}
        self._abandoned: set[int] = set()
        self._reader_active = False
        self._next_id = 1
        self._closed = False
        self._broken: str | None = None

    def _new_id(self) -> int:
        with self._state:
            req_id = self._next_id
            self._next_id += 1
            return req_id

    def _send(self, request: BaseModel, fds: Sequence[int] = ()) -> None:
        data = pack(request)
        with self._send_lock:
            if self._closed:
                raise ZygoteError("the zygote client is closed")
            try:
                if fds:
                    socket.send_fds(self._sock, [data], list(fds))
                else:
                    self._sock.send(data)
            except OSError as exc:
                raise ZygoteError(f"the zygote is gone: {exc}") from exc

    def _await(self, req_id: int, timeout: float | None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._state:
                while True:
                    if req_id in self._replies:
                        return self._replies.pop(req_id)
                    if self._broken is not None:
                        raise ZygoteError(self._broken)
                    if not self._reader_active:
                        self._reader_active = True
                        break
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        self._abandoned.add(req_id)
                        raise TimeoutError(f"the zygote did not answer request {req_id}")
                    self._state.wait(remaining)
            try:
                self._read_one(deadline)
            except TimeoutError:
                with self._state:
                    self._abandoned.add(req_id)
                raise
            finally:
                with self._state:
                    self._reader_active = False
                    self._state.notify_all()

    def _read_one(self, deadline: float | None) -> None:
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        selector = selectors.DefaultSelector()
        try:
            selector.register(self._sock, selectors.EVENT_READ)
            if not selector.select(remaining):
                raise TimeoutError("the zygote did not answer in time")
        finally:
            selector.close()
        try:
            data = self._sock.recv(DATAGRAM)
        except OSError as exc:
            data = b""
            reason = f"the zygote socket failed: {exc}"
        else:
            reason = "the zygote exited"
        with self._state:
            if not data:
                self._broken = reason
                return
            try:
                reply = unpack(REPLIES, data)
            except ZygoteError as exc:
                self._broken = str(exc)
                return
            req_id = getattr(reply, "req_id", None)
            if req_id is None:
                return  # a late hello
            if req_id in self._abandoned:
                self._abandoned.discard(req_id)
            else:
                self._replies[req_id] = reply

    def spawn(
        self,
        workspace: str | os.PathLike[str],
        limits: ChildLimits | None = None,
        *,
        disable: Collection[Layer] = (),
        timeout: float | None = 30.0,
    ) -> SpawnedChild:
        """Fork a fresh child for one run in ``workspace`` and return it with the host's ends
        of its channel (:func:`open_channel`).

        The child isolates itself, then sends ``ready`` on ``from_child``. Layers named in
        ``disable`` are skipped (reported with the reason ``disabled``); tests and the security
        suite's modes only.

        Raises:
            ZygoteError: the zygote is gone or could not fork; no fd is left open.
            TimeoutError: no answer within ``timeout``; no fd is left open, and a child forked
                later is killed when it is reported.
        """
        request = Spawn(
            req_id=self._new_id(),
            workspace=os.path.abspath(os.fspath(workspace)),
            limits=limits or ChildLimits(),
            disable=sorted(set(disable)),
        )
        to_child, from_child, child_read, child_write = open_channel()
        try:
            self._send(request, [child_read, child_write])
        except BaseException:
            for fd in (to_child, from_child):
                os.close(fd)
            raise
        finally:
            os.close(child_read)
            os.close(child_write)
        try:
            reply = self._await(request.req_id, timeout)
        except BaseException:
            os.close(to_child)
            os.close(from_child)
            raise
        if isinstance(reply, Failed):
            os.close(to_child)
            os.close(from_child)
            raise ZygoteError(f"the zygote could not spawn a child: {reply.message}")
        if not isinstance(reply, Spawned):
            os.close(to_child)
            os.close(from_child)
            raise ZygoteError(f"unexpected zygote reply {reply.op}")
        return SpawnedChild(pid=reply.pid, to_child=to_child, from_child=from_child)

    def wait(self, pid: int, timeout: float | None = None) -> ChildExit:
        """Block until child ``pid`` has exited and been reaped; return how it ended.

        Each child can be waited for once; its status is kept by the zygote until then.

        Raises:
            ZygoteError: ``pid`` is not a child of this zygote (or was already waited for).
            TimeoutError: it had not exited within ``timeout`` (it may be waited for again).
        """
        request = Wait(req_id=self._new_id(), pid=pid)
        self._send(request)
        reply = self._await(request.req_id, timeout)
        if isinstance(reply, Failed):
            raise ZygoteError(reply.message)
        if not isinstance(reply, Exited):
            raise ZygoteError(f"unexpected zygote reply {reply.op}")
        return child_exit(reply)

    def kill(self, pid: int, sig: int = signal.SIGKILL, timeout: float | None = 10.0) -> bool:
        """Send ``sig`` to child ``pid`` through the zygote (race-free: by pidfd, before
        reaping). Returns whether it was delivered (false once the child has exited).

        A child in a PID namespace of its own (the ``pidns`` layer) is that namespace's init:
        of the signals it has no handler for, it takes only ``SIGKILL`` and ``SIGSTOP``."""
        request = Kill(req_id=self._new_id(), pid=pid, signal=int(sig))
        self._send(request)
        reply = self._await(request.req_id, timeout)
        if not isinstance(reply, Signalled):
            raise ZygoteError(f"unexpected zygote reply {reply.op}")
        return reply.delivered

    def close(self) -> None:
        """Close the socket; the zygote then kills and reaps its children and exits."""
        with self._send_lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()


class ZygoteProcess:
    """A running zygote process and its client; use as a context manager or call
    :meth:`close`. When :meth:`close` returns, the zygote and all its children have exited."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        client: ZygoteClient,
        layers: Sequence[LayerState] = (),
    ) -> None:
        self.process = process
        self.client = client
        self.layers: list[LayerState] = list(layers)
        """What its children get, layer by layer (the zygote's probe at start, in ``hello``)."""

    @property
    def pid(self) -> int:
        """The zygote's pid."""
        return self.process.pid

    @property
    def socket(self) -> socket.socket:
        """The host's end of the zygote's socket, for a host that drives it itself with
        :func:`sandbox.protocol.encode_request` and :func:`~sandbox.protocol.read_reply` (see
        the module doc); :meth:`close` still closes it."""
        return self.client._sock

    @classmethod
    def start(
        cls, *, python: str = sys.executable, timeout: float = _START_TIMEOUT
    ) -> ZygoteProcess:
        """Start a zygote with an empty environment and wait until it is warm.

        Raises:
            ZygoteError: it exited or did not report ready within ``timeout``; nothing is left
                running.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        boot = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from sandbox._zygote import main; main(int(sys.argv[2]))"
        )
        try:
            process = subprocess.Popen(
                [python, "-I", "-c", boot, package_parent, str(theirs.fileno())],
                env={},
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        zygote = cls(process, ZygoteClient(ours))
        try:
            selector = selectors.DefaultSelector()
            try:
                selector.register(ours, selectors.EVENT_READ)
                ready = selector.select(timeout)
            finally:
                selector.close()
            data = ours.recv(DATAGRAM) if ready else b""
            hello = unpack(REPLIES, data) if data else None
            if not isinstance(hello, Hello):
                raise ZygoteError("the zygote did not start")
            zygote.layers = list(hello.layers)
        except BaseException:
            zygote.close()
            raise
        return zygote

    def close(self, timeout: float = 10.0) -> None:
        """Stop the zygote: it kills and reaps its children; it is killed itself after
        ``timeout`` seconds. Idempotent."""
        self.client.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ZygoteProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
