"""The host side of one child's channel: trio streams over its two pipes.

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
from collections import deque
from typing import Final

import trio

from sandbox.protocol import (
    ChildMessage,
    FrameDecoder,
    HostMessage,
    ProtocolError,
    encode_frame,
    parse_child_message,
)

from ._exceptions import ProtocolViolation

__all__ = ["ChildChannel"]

READ_CHUNK: Final = 65536


class ChildChannel:
    """Frames to and from one child over two pipe fds, which it owns and closes."""

    def __init__(self, read_fd: int, write_fd: int, *, limit: int) -> None:
        self.limit = limit
        self._reader = trio.lowlevel.FdStream(read_fd)
        self._writer = trio.lowlevel.FdStream(write_fd)
        self._decoder = FrameDecoder(limit=limit)
        self._bodies: deque[bytes] = deque()

    async def receive(self) -> ChildMessage | None:
        """The child's next message, validated; ``None`` when it closed its end cleanly.

        Raises:
            ProtocolViolation: the bytes break the protocol (see the module doc).
        """
        while not self._bodies:
            try:
                chunk = await self._reader.receive_some(READ_CHUNK)
            except (trio.BrokenResourceError, OSError) as exc:
                raise ProtocolViolation(f"the child's pipe failed: {exc}") from exc
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

    async def send(self, message: HostMessage) -> None:
        """Send one message to the child.

        Raises:
            ProtocolError: the message can't be framed within the limit (nothing was sent).
            trio.BrokenResourceError: the child closed its end.
        """
        await self._writer.send_all(encode_frame(message, limit=self.limit))

    async def aclose(self) -> None:
        """Close both pipes; never raises."""
        for stream in (self._reader, self._writer):
            with contextlib.suppress(OSError, trio.ClosedResourceError):
                await stream.aclose()
