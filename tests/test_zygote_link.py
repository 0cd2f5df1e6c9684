"""Tests of the trio driver of the zygote: real zygote, real children, no threads."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
from collections.abc import AsyncIterator

import pytest
import trio

from sandbox import TO_CHILD_SEND_BUFFER, BlockingChannel, ChildLimits, ZygoteError, ZygoteProcess
from sandbox.protocol import Ready
from scriptbridge._zygote_link import ZygoteLink


@pytest.fixture
def workspace(tmp_path: pathlib.Path) -> pathlib.Path:
    for name in ("refs", "out"):
        (tmp_path / name).mkdir()
    return tmp_path


@pytest.fixture
async def link(nursery: trio.Nursery) -> AsyncIterator[ZygoteLink]:
    zygote = await trio.to_thread.run_sync(ZygoteProcess.start)
    link = ZygoteLink(zygote)
    scope = trio.CancelScope()

    async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await link.serve(task_status=task_status)

    await nursery.start(serve)
    try:
        yield link
    finally:
        scope.cancel()
        await trio.to_thread.run_sync(zygote.close)


async def test_spawned_child_is_watched_and_its_exit_reported(
    link: ZygoteLink, workspace: pathlib.Path
) -> None:
    """A spawned child says ready; once its host pipe closes it exits and wait reports it."""
    child = await link.spawn(workspace, ChildLimits())
    ready = await trio.to_thread.run_sync(
        BlockingChannel(child.from_child, child.to_child).receive_child
    )
    assert isinstance(ready, Ready) and ready.pid == child.pid
    assert not link.exited(child.pid)
    os.close(child.to_child)  # the child reads end of stream before start: it exits
    os.close(child.from_child)
    with trio.fail_after(10):
        status = await link.wait(child.pid, timeout=10)
    assert status.pid == child.pid and status.returncode == 3
    with pytest.raises(ZygoteError):
        await link.wait(child.pid, timeout=1)  # each child is waited for once


async def test_kill_wait_and_timeout(link: ZygoteLink, workspace: pathlib.Path) -> None:
    """wait times out on a live child and can be retried; kill is delivered once."""
    child = await link.spawn(workspace, ChildLimits())
    try:
        with pytest.raises(TimeoutError):
            await link.wait(child.pid, timeout=0.05)
        assert await link.kill(child.pid) is True
        status = await link.wait(child.pid, timeout=10)
        assert status.returncode == -signal.SIGKILL
        assert link.exited(child.pid) is False  # forgotten once waited for
        assert await link.kill(child.pid) is False
    finally:
        os.close(child.to_child)
        os.close(child.from_child)


async def test_host_to_child_stream_takes_a_large_frame_in_one_write(
    link: ZygoteLink, workspace: pathlib.Path
) -> None:
    """The host's end of the host -> child stream is a socket whose send buffer is
    TO_CHILD_SEND_BUFFER (doubled by the kernel, capped at wmem_max), shut for reading."""
    child = await link.spawn(workspace, ChildLimits())
    try:
        with socket.socket(fileno=os.dup(child.to_child)) as host_end:
            wmem_max = int(pathlib.Path("/proc/sys/net/core/wmem_max").read_text())
            expected = 2 * min(TO_CHILD_SEND_BUFFER, wmem_max)
            assert host_end.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == expected
            assert host_end.recv(1, socket.MSG_DONTWAIT) == b""  # shut: reads end at once
    finally:
        await link.kill(child.pid)
        await link.wait(child.pid, timeout=10)
        os.close(child.to_child)
        os.close(child.from_child)


async def test_a_stopped_link_fails_every_request(workspace: pathlib.Path) -> None:
    """When the zygote is gone, waiting requests and new ones raise ZygoteError."""
    zygote = await trio.to_thread.run_sync(ZygoteProcess.start)
    link = ZygoteLink(zygote)
    async with trio.open_nursery() as nursery:
        await nursery.start(link.serve)
        child = await link.spawn(workspace, ChildLimits())
        os.close(child.to_child)
        os.close(child.from_child)
        zygote.process.kill()  # the zygote dies: its socket ends
        with trio.fail_after(10):
            while not link.broken:
                await trio.sleep(0.01)
    await trio.to_thread.run_sync(zygote.close)
    with pytest.raises(ZygoteError):
        await link.wait(child.pid, timeout=1)
    with pytest.raises(ZygoteError):
        await link.spawn(workspace, ChildLimits())
