"""The zygote: a warm fork server that makes one fresh sandbox child per script.

One long-lived process (started by :meth:`ZygoteProcess.start` with an empty environment, in a
session of its own, holding only its end of a Unix ``SOCK_SEQPACKET`` socket) has already
imported and exercised RestrictedPython, msgpack, pydantic, the protocol, the runtime and the
allowlisted modules. For each ``spawn`` request it receives the child's ends of its channel
(:func:`open_channel`) over the socket (``SCM_RIGHTS``), forks (as root, the child is pid 1 of
a PID namespace of its own: :class:`~sandbox._isolation.PidNamespaces`), and the child
isolates itself (:mod:`sandbox._isolation`), primes itself (:func:`sandbox._runtime.prime`: the
pages a run touches are copied before it says ``ready``, not between ``start`` and ``done``) and
serves exactly one script (:func:`sandbox._runtime.serve`); it exits right after its last
message, before anything of the script's is released, so no script code runs after ``done``.
The zygote sets malloc to keep and reuse freed memory (:func:`_keep_freed_memory`), for itself
and every child. The zygote reaps every child (through a pidfd each) and reports its exit status and
resource use on ``wait``. No child ever runs a second script, and a child never returns into
the zygote's loop. When root, the zygote lives in a mount namespace of its own and puts each
child's ``out/`` on a tmpfs of the run's disk quota before the fork, which it copies to the
disk and unmounts when it reaps the child, before it reports the exit (:mod:`sandbox._quota`).
As root, each child also gets a uid and gid of its own (:class:`~sandbox._isolation.ChildIds`),
held until it is reaped.

Requests and replies are small msgpack maps, one per datagram, validated by pydantic on both
ends. When the requester's end of the socket closes, the zygote kills every child it still has,
reaps them and exits; children also get ``SIGKILL`` if the zygote dies.

:class:`ZygoteClient` is synchronous and thread-safe: several threads may spawn, wait and kill
at once (tests, benchmarks and the small blocking host of :mod:`sandbox.testing` use it). A host
with an event loop drives the same socket itself (:attr:`ZygoteProcess.socket`) with the sans-I/O
pair :func:`encode_request` / :func:`read_reply`, so no thread is needed per request; it must
then not use the client, apart from :meth:`ZygoteProcess.close`.
"""

from __future__ import annotations

import contextlib
import ctypes
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
from typing import Annotated, Any, Final, Literal, TypeAlias

import msgpack
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from . import _runtime
from ._isolation import (
    ChildIds,
    ChildLimits,
    IsolationError,
    PidNamespaces,
    apply_isolation,
    python_paths,
    seccomp_arch,
    seccomp_template,
)
from ._quota import OutMount, enter_private_mounts
from .protocol import BlockingChannel, Layer, ProtocolError, RunError

__all__ = [
    "ChildExit",
    "SpawnedChild",
    "ZygoteClient",
    "ZygoteError",
    "ZygoteProcess",
    "ZygoteReply",
    "encode_request",
    "open_channel",
    "read_reply",
]

_DATAGRAM: Final = 65536
_START_TIMEOUT: Final = 60.0


class ZygoteError(RuntimeError):
    """The zygote is gone, refused a request, or answered outside its protocol."""


# --------------------------------------------------------------------------------------------
# The zygote's own protocol (host <-> zygote; both trusted)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


_ReqId = Annotated[int, Field(ge=1)]


class _Spawn(_Model):
    op: Literal["spawn"] = "spawn"
    req_id: _ReqId
    workspace: Annotated[str, Field(min_length=1, max_length=4096)]
    limits: ChildLimits
    disable: list[Layer] = Field(default_factory=list)


class _Wait(_Model):
    op: Literal["wait"] = "wait"
    req_id: _ReqId
    pid: int


class _Kill(_Model):
    op: Literal["kill"] = "kill"
    req_id: _ReqId
    pid: int
    signal: Annotated[int, Field(ge=1, le=64)] = int(signal.SIGKILL)


class _Hello(_Model):
    op: Literal["hello"] = "hello"
    pid: int


class _Spawned(_Model):
    op: Literal["spawned"] = "spawned"
    req_id: _ReqId
    pid: int


class _Failed(_Model):
    op: Literal["failed"] = "failed"
    req_id: _ReqId
    message: str


class _Exited(_Model):
    op: Literal["exited"] = "exited"
    req_id: _ReqId
    pid: int
    returncode: int
    cpu_s: float
    max_rss_kb: int
    quota_exceeded: str | None = None


class _Signalled(_Model):
    op: Literal["signalled"] = "signalled"
    req_id: _ReqId
    delivered: bool


_Request: TypeAlias = Annotated[_Spawn | _Wait | _Kill, Field(discriminator="op")]
_Reply: TypeAlias = Annotated[
    _Hello | _Spawned | _Failed | _Exited | _Signalled, Field(discriminator="op")
]
_REQUESTS: TypeAdapter[_Request] = TypeAdapter(_Request)
_REPLIES: TypeAdapter[_Reply] = TypeAdapter(_Reply)


def _pack(message: _Model) -> bytes:
    return msgpack.packb(message.model_dump(mode="python"), use_bin_type=True)  # type: ignore[no-any-return]


def _unpack(adapter: TypeAdapter[Any], data: bytes) -> Any:
    try:
        return adapter.validate_python(msgpack.unpackb(data, raw=False, strict_map_key=True))
    except (ValueError, TypeError, msgpack.UnpackException, ValidationError) as exc:
        raise ZygoteError(f"malformed zygote message: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Sans-I/O requests and replies (for a host that drives the socket itself)


@dataclass(frozen=True)
class ZygoteReply:
    """One reply read from the zygote's socket by :func:`read_reply`.

    Attributes:
        op: ``spawned`` (``pid`` is the new child), ``failed`` (``message`` says why),
            ``exited`` (``exit`` says how the child ended), ``signalled`` (``delivered``), or
            ``hello`` (sent once at start; ``req_id`` is ``None``).
        req_id: the request this answers.
    """

    op: str
    req_id: int | None
    pid: int | None = None
    message: str | None = None
    exit: ChildExit | None = None
    delivered: bool = False


def encode_request(
    op: Literal["spawn", "wait", "kill"],
    req_id: int,
    *,
    pid: int = 0,
    workspace: str | os.PathLike[str] = "",
    limits: ChildLimits | None = None,
    disable: Collection[Layer] = (),
    sig: int = signal.SIGKILL,
) -> bytes:
    """One request datagram, validated as the zygote will validate it.

    A ``spawn`` needs ``workspace`` (made absolute here) and must be sent with the child's two
    pipe ends (its read end of host -> child, then its write end of child -> host) attached as
    ``SCM_RIGHTS``; ``wait`` and ``kill`` need ``pid``. Each ``req_id`` must be unique per
    socket and at least 1.

    Raises:
        ValueError: a field is out of range (pydantic's ``ValidationError``).
    """
    request: _Model
    if op == "spawn":
        request = _Spawn(
            req_id=req_id,
            workspace=os.path.abspath(os.fspath(workspace)),
            limits=limits or ChildLimits(),
            disable=sorted(set(disable)),
        )
    elif op == "wait":
        request = _Wait(req_id=req_id, pid=pid)
    else:
        request = _Kill(req_id=req_id, pid=pid, signal=int(sig))
    return _pack(request)


def read_reply(data: bytes) -> ZygoteReply:
    """Validate one datagram from the zygote and return it as a :class:`ZygoteReply`.

    Raises:
        ZygoteError: it is not a reply of the zygote's protocol (an empty datagram means the
            zygote closed its end).
    """
    if not data:
        raise ZygoteError("the zygote exited")
    reply = _unpack(_REPLIES, data)
    if isinstance(reply, _Hello):
        return ZygoteReply("hello", None, pid=reply.pid)
    if isinstance(reply, _Spawned):
        return ZygoteReply("spawned", reply.req_id, pid=reply.pid)
    if isinstance(reply, _Failed):
        return ZygoteReply("failed", reply.req_id, message=reply.message)
    if isinstance(reply, _Exited):
        status = _child_exit(reply)
        return ZygoteReply("exited", reply.req_id, pid=reply.pid, exit=status)
    assert isinstance(reply, _Signalled)
    return ZygoteReply("signalled", reply.req_id, delivered=reply.delivered)


# --------------------------------------------------------------------------------------------
# Client


TO_CHILD_SEND_BUFFER: Final = 1 << 20
"""Send buffer asked for the host -> child stream (the kernel doubles it, and caps it at
``net.core.wmem_max``): a 1 MiB tool result fits in it, so it crosses in one write."""


def open_channel() -> tuple[int, int, int, int]:
    """Open the two streams of one child's channel; return ``(to_child, from_child, child_read,
    child_write)``, the host's two ends and then the child's. The caller owns all four fds.

    Host -> child is a Unix stream socket pair rather than a pipe. A pipe's capacity is capped
    by ``fs.pipe-max-size`` and each user's pipe pages, so a large tool result crossed a pipe
    in many writes, each a switch between host and child on one CPU; a socket's send buffer
    (:data:`TO_CHILD_SEND_BUFFER`) takes a 1 MiB result in one (``benchmarks/compare.py``,
    ``payload_1mib``). The host's end is shut for reading before the child gets its own, so
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
    """

    pid: int
    to_child: int
    from_child: int


@dataclass(frozen=True)
class ChildExit:
    """How a child ended: ``returncode`` as in ``subprocess`` (``-N`` for signal ``N``),
    its CPU time (user + system) and its peak resident set; and ``quota_exceeded``, why the
    run passed its disk quota (the zygote's own finding, :mod:`sandbox._quota`), or ``None``."""

    pid: int
    returncode: int
    cpu_s: float
    max_rss_kb: int
    quota_exceeded: str | None = None


def _child_exit(reply: _Exited) -> ChildExit:
    return ChildExit(
        reply.pid, reply.returncode, reply.cpu_s, reply.max_rss_kb, reply.quota_exceeded
    )


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

    def _send(self, request: _Model, fds: Sequence[int] = ()) -> None:
        data = _pack(request)
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
            data = self._sock.recv(_DATAGRAM)
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
                reply = _unpack(_REPLIES, data)
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
        request = _Spawn(
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
        if isinstance(reply, _Failed):
            os.close(to_child)
            os.close(from_child)
            raise ZygoteError(f"the zygote could not spawn a child: {reply.message}")
        if not isinstance(reply, _Spawned):
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
        request = _Wait(req_id=self._new_id(), pid=pid)
        self._send(request)
        reply = self._await(request.req_id, timeout)
        if isinstance(reply, _Failed):
            raise ZygoteError(reply.message)
        if not isinstance(reply, _Exited):
            raise ZygoteError(f"unexpected zygote reply {reply.op}")
        return _child_exit(reply)

    def kill(self, pid: int, sig: int = signal.SIGKILL, timeout: float | None = 10.0) -> bool:
        """Send ``sig`` to child ``pid`` through the zygote (race-free: by pidfd, before
        reaping). Returns whether it was delivered (false once the child has exited).

        A child in a PID namespace of its own (the ``pidns`` layer) is that namespace's init:
        of the signals it has no handler for, it takes only ``SIGKILL`` and ``SIGSTOP``."""
        request = _Kill(req_id=self._new_id(), pid=pid, signal=int(sig))
        self._send(request)
        reply = self._await(request.req_id, timeout)
        if not isinstance(reply, _Signalled):
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

    def __init__(self, process: subprocess.Popen[bytes], client: ZygoteClient) -> None:
        self.process = process
        self.client = client

    @property
    def pid(self) -> int:
        """The zygote's pid."""
        return self.process.pid

    @property
    def socket(self) -> socket.socket:
        """The host's end of the zygote's socket, for a host that drives it itself (see the
        module doc); :meth:`close` still closes it."""
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
            data = ours.recv(_DATAGRAM) if ready else b""
            hello = _unpack(_REPLIES, data) if data else None
            if not isinstance(hello, _Hello):
                raise ZygoteError("the zygote did not start")
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


# --------------------------------------------------------------------------------------------
# Server (runs in the zygote process)


class _Server:
    def __init__(self, sock: socket.socket, mounts: str | None) -> None:
        self.sock = sock
        self.pid = os.getpid()
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ, None)
        self.pid_namespaces = PidNamespaces()
        self.child_ids = ChildIds(start=int.from_bytes(os.urandom(2), "little"))
        self.ids: dict[int, int] = {}  # live child pid -> its uid and gid (ChildIds)
        self.pidfds: dict[int, int] = {}  # live child pid -> pidfd
        self.mounts = mounts  # None once in a mount namespace of its own; else why not
        self.outs: dict[int, OutMount] = {}  # live child pid -> the tmpfs on its out/
        self.exits: dict[int, _Exited] = {}  # reaped, not yet waited for (req_id 1 dummy)
        self.waiters: dict[int, list[int]] = {}  # pid -> req_ids waiting

    def reply(self, message: _Model) -> None:
        with contextlib.suppress(OSError):
            self.sock.send(_pack(message))

    def run(self) -> None:
        self.reply(_Hello(pid=self.pid))
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
            data, fds, _flags, _address = socket.recv_fds(self.sock, _DATAGRAM, 2)
        except OSError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        try:
            request = _unpack(_REQUESTS, data)
        except ZygoteError:
            for fd in fds:
                os.close(fd)
            return True
        if isinstance(request, _Spawn):
            self.spawn(request, fds)
            return True
        for fd in fds:
            os.close(fd)
        if isinstance(request, _Wait):
            self.wait(request)
        else:
            self.kill(request)
        return True

    def spawn(self, request: _Spawn, fds: list[int]) -> None:
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            self.reply(_Failed(req_id=request.req_id, message="a spawn needs exactly two fds"))
            return
        out, unmounted = self.mount_out(request)
        try:
            child_id = self.child_ids.take()
        except LookupError as exc:
            for fd in fds:
                os.close(fd)
            if out is not None:
                out.finish()
            self.reply(_Failed(req_id=request.req_id, message=str(exc)))
            return
        pid_namespace = self.pid_namespaces.enter(request.disable)
        try:
            pid = os.fork()
        except OSError as exc:
            self.pid_namespaces.leave()
            self.child_ids.release(child_id)
            for fd in fds:
                os.close(fd)
            if out is not None:
                out.finish()
            self.reply(_Failed(req_id=request.req_id, message=f"fork failed: {exc}"))
            return
        if pid == 0:  # pragma: no cover - the child; coverage can't follow it
            status = 70
            try:
                status = self.child(request, fds, out, unmounted, pid_namespace, child_id)
            finally:
                os._exit(status)
        self.pid_namespaces.leave()  # if this raises, the zygote exits: its children die too
        self.ids[pid] = child_id
        for fd in fds:
            os.close(fd)
        if out is not None:
            self.outs[pid] = out
        pidfd = os.pidfd_open(pid)
        self.pidfds[pid] = pidfd
        self.selector.register(pidfd, selectors.EVENT_READ, pid)
        self.reply(_Spawned(req_id=request.req_id, pid=pid))

    def mount_out(self, request: _Spawn) -> tuple[OutMount | None, str | None]:
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
        request: _Spawn,
        fds: list[int],
        out: OutMount | None,
        unmounted: str | None,
        pid_namespace: str | None,
        child_id: int,
    ) -> int:
        self.selector.close()
        self.sock.close()
        for pidfd in self.pidfds.values():
            os.close(pidfd)
        self.pidfds.clear()
        for other in [*self.outs.values(), *([out] if out is not None else [])]:
            other.forget()  # the mounts stay; the fds (the disk's out/ among them) go
        self.outs.clear()
        try:
            kept, report = apply_isolation(
                workspace=request.workspace,
                limits=request.limits,
                keep_fds=fds,
                parent_pid=self.pid,
                pid_namespace=pid_namespace,
                child_id=child_id,
                disable=frozenset(request.disable),
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
        _runtime.prime()
        return _runtime.serve(
            channel,
            pid=report.pid,
            applied=report.applied,
            skipped=report.skipped,
            restricted="restricted-python" not in request.disable,
            end=os._exit,
        )

    def reap(self, pid: int) -> None:
        pidfd = self.pidfds.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        out = self.outs.pop(pid, None)
        self.child_ids.release(self.ids.pop(pid))  # no process holds it any more
        exited = _Exited(
            req_id=1,
            pid=pid,
            returncode=os.waitstatus_to_exitcode(status),
            cpu_s=usage.ru_utime + usage.ru_stime,
            max_rss_kb=usage.ru_maxrss,
            quota_exceeded=None if out is None else out.finish(),  # on the disk before the reply
        )
        waiting = self.waiters.pop(pid, [])
        if not waiting:
            self.exits[pid] = exited
        for req_id in waiting:
            self.reply(exited.model_copy(update={"req_id": req_id}))

    def wait(self, request: _Wait) -> None:
        if request.pid in self.exits:
            exited = self.exits.pop(request.pid)
            self.reply(exited.model_copy(update={"req_id": request.req_id}))
        elif request.pid in self.pidfds:
            self.waiters.setdefault(request.pid, []).append(request.req_id)
        else:
            self.reply(
                _Failed(req_id=request.req_id, message=f"no child {request.pid} to wait for")
            )

    def kill(self, request: _Kill) -> None:
        pidfd = self.pidfds.get(request.pid)
        delivered = False
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, request.signal)
                delivered = True
            except ProcessLookupError:
                delivered = False
        self.reply(_Signalled(req_id=request.req_id, delivered=delivered))

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

    By default glibc maps each block of 128 KiB or more afresh and trims freed memory at the
    top of the heap, so a child handling a large message (a 1 MiB tool result is copied a few
    times on its way in) faults in every page of every copy again: about half of such a call's
    time. Blocks under 32 MiB now come from the heap and freed memory is kept (up to 64 MiB):
    a child is short-lived, and its ``rlimits`` cap its address space either way. A libc
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
    mounts = enter_private_mounts()
    _keep_freed_memory()
    _runtime.warm_up()
    python_paths()
    if (arch := seccomp_arch()) is not None:
        seccomp_template(arch)  # made once, here, for every child
    _Server(sock, mounts).run()
    sys.exit(0)
