"""The zygote, driven from trio: spawn, wait and kill without a thread per request.

:class:`ZygoteLink` speaks the zygote's own socket protocol (the sans-I/O pair
:func:`sandbox.protocol.encode_request` / :func:`~sandbox.protocol.read_reply`) on the socket of
a running :class:`sandbox.ZygoteProcess`. Each request is one datagram; one reader task
(:meth:`ZygoteLink.serve`) hands every reply to the task waiting for it.

Every child is watched from the moment it exists: :meth:`ZygoteLink.spawn` sends the child's
``wait`` request right after the zygote reports the fork, so the exit status arrives as soon as
the zygote reaps the child and :meth:`ZygoteLink.wait` only waits for it.

When the reader stops (the zygote exited, its socket broke, or the reader was cancelled), every
request still waiting fails with :class:`sandbox.ZygoteError`, and so does every later
one.
"""

from __future__ import annotations

import array
import contextlib
import itertools
import logging
import os
import signal
import socket
from collections.abc import Collection, Iterable
from typing import Final

import trio

from sandbox import ChildExit, ChildLimits, SpawnedChild, ZygoteError, ZygoteProcess, open_channel
from sandbox.protocol import Layer, ZygoteReply, encode_request, read_reply

__all__ = ["ZygoteLink", "close_quietly"]

log = logging.getLogger("scriptbridge.zygote")

_DATAGRAM: Final = 65536
_MAX_FDS: Final = 2
"""The most fds a reply carries (``spawned``: the child's pidfd and its tmpfs's fd)."""
_FD_SIZE: Final = array.array("i").itemsize


class _Slot:
    """Where the reply to one request lands; ``reply`` stays ``None`` if the link broke."""

    __slots__ = ("done", "fds", "reply")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: ZygoteReply | None = None
        self.fds: list[int] = []  # what came with the reply; whoever takes it closes them


class ZygoteLink:
    """Requests to one zygote over its socket, from trio tasks (not thread-safe).

    The link does not own the socket: :meth:`ZygoteProcess.close` still closes it (after the
    reader task has stopped).
    """

    def __init__(self, zygote: ZygoteProcess) -> None:
        self._sock = trio.socket.from_stdlib_socket(zygote.socket)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Slot] = {}
        self._exits: dict[int, _Slot] = {}  # pid -> the slot of its wait request
        self._abandoned: set[int] = set()  # spawn requests nobody waits for any more
        self._broken: str | None = None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read and hand out replies until the zygote's socket ends or this task is cancelled;
        then fail every waiting request."""
        task_status.started()
        try:
            while True:
                fds: list[int] = []
                try:
                    data, fds = await self._receive()
                    reply = read_reply(data)
                except (OSError, ZygoteError) as exc:
                    close_quietly(fds)
                    self._broken = f"the zygote is gone: {exc}"
                    return
                slot = None if reply.req_id is None else self._pending.pop(reply.req_id, None)
                if slot is None or reply.op != "spawned":
                    close_quietly(
                        fds
                    )  # only a spawned reply carries fds, and only to its requester
                if reply.req_id is None:
                    continue  # hello
                if reply.req_id in self._abandoned:
                    self._abandoned.discard(reply.req_id)
                    if reply.op == "spawned" and reply.pid is not None:
                        await self._send(encode_request("kill", next(self._ids), pid=reply.pid))
                    continue
                if slot is not None:
                    slot.reply = reply
                    slot.fds = fds if reply.op == "spawned" else []
                    slot.done.set()
        finally:
            if self._broken is None:
                self._broken = "the zygote link is closed"
            for slot in self._pending.values():
                slot.done.set()
            self._pending.clear()

    async def _receive(self) -> tuple[bytes, list[int]]:
        """One datagram and the fds it carried (``spawned``'s pidfd and tmpfs fd), each
        close-on-exec from the moment it exists here: no program the host starts inherits one
        (it could kill a child, or write in a spare's ``out/``)."""
        data, ancillary, _flags, _address = await self._sock.recvmsg(
            _DATAGRAM, socket.CMSG_SPACE(_MAX_FDS * _FD_SIZE), socket.MSG_CMSG_CLOEXEC
        )
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % _FD_SIZE])
        return data, list(fds)

    @property
    def broken(self) -> bool:
        """Whether the reader has stopped: every request fails from now on."""
        return self._broken is not None

    async def _send(self, data: bytes, fds: list[int] | None = None) -> None:
        if self._broken is not None:
            raise ZygoteError(self._broken)
        try:
            if fds:
                rights = (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))
                await self._sock.sendmsg([data], [rights])
            else:
                await self._sock.send(data)
        except OSError as exc:
            raise ZygoteError(f"the zygote is gone: {exc}") from exc

    def _slot(self) -> tuple[int, _Slot]:
        req_id = next(self._ids)
        slot = self._pending[req_id] = _Slot()
        return req_id, slot

    def _reply_of(self, slot: _Slot) -> ZygoteReply:
        if slot.reply is None:
            raise ZygoteError(self._broken or "the zygote did not answer")
        return slot.reply

    async def spawn(
        self, workspace: os.PathLike[str], limits: ChildLimits, disable: Collection[Layer] = ()
    ) -> SpawnedChild:
        """Fork a fresh child for one run in ``workspace``, watched from now on.

        Returns it with the host's ends of its channel (:func:`sandbox.open_channel`;
        the caller owns them), and its pidfd and tmpfs fd when the zygote sent them. Cancelling
        this abandons the request: a child forked for it later is killed when reported.
        ``disable`` skips layers, as :meth:`sandbox.ZygoteClient.spawn`'s does (for tests of
        single layers and the security suite only).

        Raises:
            ZygoteError: the zygote is gone or could not fork; no fd is left open.
        """
        req_id, slot = self._slot()
        data = encode_request("spawn", req_id, workspace=workspace, limits=limits, disable=disable)
        to_child, from_child, child_read, child_write = open_channel()
        try:
            try:
                await self._send(data, [child_read, child_write])
            finally:
                os.close(child_read)
                os.close(child_write)
            await slot.done.wait()
            reply = self._reply_of(slot)
            if reply.op != "spawned" or reply.pid is None:
                raise ZygoteError(f"the zygote could not spawn a child: {reply.message}")
            wait_id, watch = self._slot()
            self._exits[reply.pid] = watch
            await self._send(encode_request("wait", wait_id, pid=reply.pid))
        except BaseException:
            if self._pending.pop(req_id, None) is not None:
                self._abandoned.add(req_id)
            close_quietly([to_child, from_child, *slot.fds])
            raise
        pidfd, out_fd = _held(slot.fds, reply.out)
        return SpawnedChild(
            pid=reply.pid, to_child=to_child, from_child=from_child, pidfd=pidfd, out_fd=out_fd
        )

    def exited(self, pid: int) -> bool:
        """Whether child ``pid``'s exit has been reported (it can then be waited for at once)."""
        watch = self._exits.get(pid)
        return watch is not None and watch.done.is_set()

    async def wait(self, pid: int, timeout: float) -> ChildExit:
        """Wait until child ``pid`` has exited and been reaped; return how it ended.

        Raises:
            TimeoutError: it had not exited within ``timeout`` (it may be waited for again).
            ZygoteError: ``pid`` isn't a child spawned here, or the zygote is gone.
        """
        watch = self._exits.get(pid)
        if watch is None:
            raise ZygoteError(f"no child {pid} to wait for")
        with trio.move_on_after(timeout):
            await watch.done.wait()
        if not watch.done.is_set():
            raise TimeoutError(f"child {pid} did not exit within {timeout:g} s")
        del self._exits[pid]
        reply = self._reply_of(watch)
        if reply.exit is None:
            raise ZygoteError(reply.message or f"the zygote could not wait for child {pid}")
        return reply.exit

    async def kill(self, pid: int, sig: int = signal.SIGKILL) -> bool:
        """Send ``sig`` to child ``pid`` through the zygote (race-free: by pidfd, before it is
        reaped). Returns whether it was delivered (false once the child has exited).

        Raises:
            ZygoteError: the zygote is gone.
        """
        req_id, slot = self._slot()
        try:
            await self._send(encode_request("kill", req_id, pid=pid, sig=sig))
            await slot.done.wait()
        finally:
            self._pending.pop(req_id, None)
        return self._reply_of(slot).delivered


def _held(fds: list[int], out: bool) -> tuple[int | None, int | None]:
    """The pidfd and the tmpfs fd a ``spawned`` reply carried (either ``None`` if it didn't:
    the host then ends the child through the zygote, as before)."""
    wanted = 2 if out else 1
    if len(fds) != wanted:
        close_quietly(fds)
        return None, None
    return fds[0], fds[1] if out else None


def close_quietly(fds: Iterable[int | None]) -> None:
    """Close each fd of ``fds`` (``None``: none there), whatever closing one raises."""
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
