"""Tests of frames over raw fds: write_parts on a non-blocking pipe, BlockingChannel over
real pipes."""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Iterator

import pytest

from sandbox import _wire
from sandbox._blocking_channel import BlockingChannel, write_parts
from sandbox.protocol import Output, ProtocolError, ToolResult, encode_frame, encode_parts


def test_write_parts_resumes_partial_writes() -> None:
    """A non-blocking pipe that takes part of a frame is resumed where it stopped."""
    parts = encode_parts(ToolResult(call_id=1, view="y" * 200_000))
    total = len(parts[0]) + len(parts[1])
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    received = bytearray()
    written = 0
    try:
        while written < total:
            try:
                written = write_parts(write_fd, parts, written)
            except BlockingIOError:
                received += os.read(read_fd, 1 << 20)
        os.close(write_fd)
        while chunk := os.read(read_fd, 1 << 20):
            received += chunk
    finally:
        os.close(read_fd)
    assert bytes(received) == parts[0] + parts[1]


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    """Two pipes: (a_read, a_write, b_read, b_write); whatever is still open is closed."""
    a_read, a_write = os.pipe()
    b_read, b_write = os.pipe()
    fds = [a_read, a_write, b_read, b_write]
    yield a_read, a_write, b_read, b_write
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def test_blocking_channel_over_pipes(pipes: tuple[int, int, int, int]) -> None:
    """Messages cross real pipes both ways, including frames larger than the pipe buffer: the
    child reads a host's message as its own class holds it, the host a child's as the
    protocol's model."""
    a_read, a_write, b_read, b_write = pipes
    host = BlockingChannel(b_read, a_write)
    child = BlockingChannel(a_read, b_write)
    big = ToolResult(call_id=1, view={"blob": b"x" * (1 << 20)})
    writer = threading.Thread(target=host.send, args=(big,))
    writer.start()
    assert child.receive_host() == _wire.ToolResult(call_id=1, view=big.view)
    writer.join()
    child.send(_wire.Output(text="hi"))
    assert host.receive_child() == Output(text="hi")


def test_blocking_channel_eof(pipes: tuple[int, int, int, int]) -> None:
    """EOF at a frame boundary reads as None; EOF inside a frame is a ProtocolError."""
    a_read, a_write, b_read, b_write = pipes
    os.close(a_write)
    assert BlockingChannel(a_read, b_write).receive_host() is None
    os.write(b_write, encode_frame(Output(text="hello"))[:6])
    os.close(b_write)
    with pytest.raises(ProtocolError):
        BlockingChannel(b_read, a_read).receive_child()


def test_blocking_channel_refuses_oversized_frame(pipes: tuple[int, int, int, int]) -> None:
    """A prefix over the channel's limit is refused without reading the body."""
    a_read, a_write, _, b_write = pipes
    os.write(a_write, struct.pack(">I", 5000) + b"x" * 10)
    with pytest.raises(ProtocolError):
        BlockingChannel(a_read, b_write, limit=4096).read_body()
