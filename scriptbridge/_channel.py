"""The host side of one child's channel: trio I/O over its two fds (a pipe from the child, and
a read-only socket to it: :func:`sandbox.open_channel`).

Frames are a 4-byte big-endian length and a msgpack body (:mod:`sandbox.protocol`, the schema
both sides share). Every message from the child is hostile until validated:

- a length prefix is checked against the limit *before* its body is read, so one frame never
  holds more than the limit in memory (the decoder buffers at most one frame plus one read);
- every body is validated by the protocol's pydantic models before anyone acts on it;
- anything else (a bad prefix, bytes that aren't msgpack, an unknown op, a stream that ends
  inside a frame) raises :class:`~scriptbridge.ProtocolViolation`, translated at this boundary
  with ``raise ... from``.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections import deque
from collections.abc import Mapping
from typing import Any, Final

import trio

from sandbox import write_parts
from sandbox.protocol import (
    ChildMessage,
    FrameDecoder,
    HostMessage,
    ProtocolError,
    encode_parts,
    parse_child_message,
)

from ._exceptions import ProtocolViolation

__all__ = ["ChildChannel"]

READ_CHUNK: Final = 65536
YIELD_EVERY: Final = 16
"""Most messages :meth:`ChildChannel.receive` returns without yielding to other tasks."""


class ChildChannel:
    """Frames to and from one child over two fds, which it owns and closes.

    The fds are made non-blocking and read and written directly: a frame that is already there
    (or fits in the socket's buffer) costs no trip through trio's scheduler, which is most of a
    tool call's round trip. Only an empty pipe or a full socket waits (``wait_readable`` /
    ``wait_writable``). Every call still notices a cancellation at once, and :meth:`receive`
    yields to other tasks at least every :data:`YIELD_EVERY` messages, so a child that floods
    the pipe can neither starve other runs nor outlive its wall time.
    """

    def __init__(self, read_fd: int, write_fd: int, *, limit: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        self._open = True
        self._decoder = FrameDecoder(limit=limit)
        self._bodies: deque[bytes] = deque()
        self._unyielded = 0

    @property
    def limit(self) -> int:
        """The largest frame body accepted or sent, in bytes."""
        return self._decoder.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._decoder.limit = value

    async def receive(self) -> ChildMessage | None:
        """The child's next message, validated; ``None`` when it closed its end cleanly.

        Raises:
            ProtocolViolation: the bytes break the protocol (see the module doc).
            trio.ClosedResourceError: the channel was closed.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self._unyielded += 1
        if self._unyielded >= YIELD_EVERY:
            self._unyielded = 0
            await trio.lowlevel.cancel_shielded_checkpoint()
        while not self._bodies:
            chunk = await self._read()
            if not chunk:
                if self._decoder.at_boundary:
                    return None
                raise ProtocolViolation("the child's stream ended inside a frame")
            try:
                self._bodies.extend(self._decoder.feed(chunk))
            except ProtocolError as exc:
                raise ProtocolViolation(str(exc)) from exc
        try:
            return parse_child_message(self._bodies.popleft())
        except ProtocolError as exc:
            raise ProtocolViolation(str(exc)) from exc

    async def _read(self) -> bytes:
        while True:
            if not self._open:
                raise trio.ClosedResourceError("the channel is closed")
            try:
                return os.read(self._read_fd, READ_CHUNK)
            except BlockingIOError:
                self._unyielded = 0
                await trio.lowlevel.wait_readable(self._read_fd)
            except OSError as exc:
                raise ProtocolViolation(f"the child's pipe failed: {exc}") from exc

    async def send(self, message: HostMessage | Mapping[str, Any]) -> None:
        """Send one message to the child: a message model, or the body of one the host built
        itself (:func:`~scriptbridge._conversation.tool_reply`).

        Raises:
            ProtocolError: the message can't be framed within the limit (nothing was sent).
            trio.BrokenResourceError: the child closed its end.
            trio.ClosedResourceError: the channel was closed.
        """
        parts = encode_parts(message, limit=self.limit)
        total, written = len(parts[0]) + len(parts[1]), 0
        await trio.lowlevel.checkpoint_if_cancelled()
        while written < total:
            if not self._open:
                raise trio.ClosedResourceError("the channel is closed")
            try:
                written = write_parts(self._write_fd, parts, written)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._write_fd)
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the channel is closed") from exc
                raise trio.BrokenResourceError(f"the child's pipe failed: {exc}") from exc

    async def aclose(self) -> None:
        """Close both fds; never raises."""
        if self._open:
            self._open = False
            for fd in (self._read_fd, self._write_fd):
                trio.lowlevel.notify_closing(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)
        await trio.lowlevel.cancel_shielded_checkpoint()
