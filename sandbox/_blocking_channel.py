"""Frames over raw file descriptors: the I/O half that :mod:`sandbox.protocol` leaves out.

:func:`write_parts` writes an encoded frame to an fd with one ``os.writev`` (the host's trio
channel uses it on a non-blocking pipe, resuming where it stopped); :class:`BlockingChannel`
sends and receives whole messages over two fds, blocking (the child side, and the small
blocking hosts of :mod:`sandbox.testing`, the tests and the benchmarks). The child reads host
messages as :mod:`sandbox._wire` holds them; a host reads a child's validated by the protocol's
models (loaded on first use: the child never loads them).
"""

from __future__ import annotations

import contextlib
import os
import select
from typing import TYPE_CHECKING, Any, Final

from ._wire import HostMessage, read_host_message
from .protocol._framing import DEFAULT_FRAME_LIMIT, FrameDecoder, ProtocolError, encode_parts

if TYPE_CHECKING:
    from .protocol import ChildMessage

__all__ = ["BlockingChannel", "write_parts"]

_READ_CHUNK: Final = 65536


def write_parts(fd: int, parts: tuple[bytes, memoryview], written: int = 0) -> int:
    """Write what is left of ``parts`` after their first ``written`` bytes to ``fd`` with one
    ``os.writev``; return the new count of bytes written (a non-blocking ``fd`` may take only
    part). Raises what ``os.writev`` raises (``BlockingIOError`` when a non-blocking pipe is
    full)."""
    prefix, body = parts
    if written < len(prefix):
        buffers: list[bytes | memoryview] = [prefix[written:], body]
    else:
        buffers = [body[written - len(prefix) :]]
    return written + os.writev(fd, buffers)


class BlockingChannel:
    """Blocking frame I/O over two raw file descriptors (typically pipes).

    The channel does not own the fds unless :meth:`close` is called; it never closes them on
    error. Reads and writes are retried on partial transfers; ``EINTR`` is retried by Python.
    """

    def __init__(self, read_fd: int, write_fd: int, *, limit: int = DEFAULT_FRAME_LIMIT) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._decoder = FrameDecoder(limit=limit)
        self._ready: list[bytes] = []

    @property
    def limit(self) -> int:
        """The frame limit for both directions."""
        return self._decoder.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._decoder.limit = value

    def send(self, message: Any) -> None:
        """Write ``message`` (a protocol model, a :mod:`sandbox._wire` message or a body) as
        one frame; returns once every byte is written.

        Raises:
            ProtocolError: the message cannot be encoded within the limit (nothing written).
            OSError: the write failed (``BrokenPipeError`` when the reader is gone); part of
                the frame may have been written.
        """
        parts = encode_parts(message, limit=self.limit)
        total, written = len(parts[0]) + len(parts[1]), 0
        while written < total:
            written = write_parts(self.write_fd, parts, written)

    def waiting(self) -> bool:
        """Whether a message (or part of one, or the end of the stream) can be read without
        blocking."""
        if self._ready:
            return True
        readable, _, _ = select.select([self.read_fd], [], [], 0)
        return bool(readable)

    def read_body(self) -> bytes | None:
        """Block until one whole frame arrives and return its body; ``None`` at a clean EOF.

        Raises:
            ProtocolError: the stream ended inside a frame, or a frame is over the limit.
            OSError: the read failed.
        """
        while not self._ready:
            # The rest of a large body in one read (a socket may hold all of it; see
            # sandbox.open_channel): one allocation and one kernel copy, not many.
            chunk = os.read(self.read_fd, max(_READ_CHUNK, self._decoder.missing))
            if not chunk:
                if self._decoder.at_boundary:
                    return None
                raise ProtocolError("the stream ended inside a frame")
            self._ready.extend(self._decoder.feed(chunk))
        return self._ready.pop(0)

    def receive_host(self) -> HostMessage | None:
        """Read one host message (:func:`sandbox._wire.read_host_message`); ``None`` at a clean
        EOF (see :meth:`read_body`)."""
        body = self.read_body()
        return None if body is None else read_host_message(body)

    def receive_child(self) -> ChildMessage | None:
        """Read and validate one child message; ``None`` at a clean EOF (see
        :meth:`read_body`)."""
        from .protocol import parse_child_message  # the host's: the child never calls this

        body = self.read_body()
        return None if body is None else parse_child_message(body)

    def close(self) -> None:
        """Close both fds (each at most once); never raises."""
        for fd in {self.read_fd, self.write_fd}:
            with contextlib.suppress(OSError):
                os.close(fd)
