"""Hostile sandbox children for tests of the supervisor, and process and fd bookkeeping.

A :class:`HostileLauncher` is the real launcher of a :class:`~scriptbridge.Bridge` (passed as
``Bridge(..., launcher=HostileLauncher())``) whose next run, in the task that asks for it
(:meth:`HostileLauncher.hostile`), gets a hostile child in place of a sandbox; every other run,
concurrent ones included, gets a real sandbox child. The supervisor side is always the real
one: its channel reads the hostile child's bytes from a real pipe.

Two kinds of hostile child:

- :class:`ProcessChild` is a real process (``python -c``) writing what a hostile sandbox
  would: one interpreter per run, for the few cases where a real process must be the child
  (an exit by a signal, a process that outlives its pipes).
- :class:`PipeChild` is no process: two real ``os.pipe`` pairs whose far ends a trio task of
  the test drives (:class:`ChildEnd`). It costs no interpreter, so a fuzz harness can run
  thousands of runs against the real supervisor. "Exiting" closes its ends; being killed
  cancels its task and reports ``-SIGKILL``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any

import msgpack
import trio

from sandbox import ChildExit
from sandbox.protocol import (
    MAX_FRAME,
    FrameDecoder,
    HostMessage,
    ProtocolError,
    parse_host_message,
)
from scriptbridge._launcher import Child, ZygoteLauncher
from scriptbridge._limits import Limits
from scriptbridge._run_dirs import RunDir

# --- processes and fds ------------------------------------------------------------------------


def open_fds() -> set[str]:
    """This process's open fds, each as ``"<fd> -> <target>"`` (from /proc/self/fd)."""
    found = set()
    for entry in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the fd listdir itself used is gone by now
            found.add(f"{entry} -> {os.readlink(f'/proc/self/fd/{entry}')}")
    return found


# --- frames -----------------------------------------------------------------------------------


def frame(body: object, *, use_bin_type: bool = True) -> bytes:
    """``body`` packed with msgpack and framed with its true 4-byte length."""
    packed: bytes = msgpack.packb(body, use_bin_type=use_bin_type)
    return len(packed).to_bytes(4, "big") + packed


def ready_body(**changes: Any) -> dict[str, Any]:
    """A valid ``ready`` message body, with ``changes`` applied."""
    return {"op": "ready", "protocol": 1, "pid": 4242, "isolation": [], "skipped": []} | changes


# --- a launcher whose next run may get a hostile child ----------------------------------------

ChildFactory = Callable[[], Child]

_NEXT_CHILD: ContextVar[ChildFactory | None] = ContextVar("_NEXT_CHILD", default=None)


class HostileLauncher(ZygoteLauncher):
    """A launcher whose runs inside :meth:`hostile` get a hostile child, the rest real ones."""

    @contextlib.contextmanager
    def hostile(self, factory: ChildFactory) -> Iterator[None]:
        """Give runs started by this task inside the block the child ``factory()`` makes."""
        token = _NEXT_CHILD.set(factory)
        try:
            yield
        finally:
            _NEXT_CHILD.reset(token)

    async def spawn(self, run_dir: RunDir, limits: Limits) -> Child:
        factory = _NEXT_CHILD.get()
        if factory is None:
            return await super().spawn(run_dir, limits)
        return factory()


# --- a real process as the child --------------------------------------------------------------

HOSTILE_PRELUDE = """
import msgpack, os, signal, struct, sys, time
out = int(sys.argv[1]); inp = int(sys.argv[2])
def frame(body):
    data = msgpack.packb(body)
    os.write(out, struct.pack(">I", len(data)) + data)
def ready():
    frame({"op": "ready", "protocol": 1, "pid": os.getpid(), "isolation": [], "skipped": []})
"""

HOSTILE_ACTS = {
    "garbage": "os.write(out, b'\\xff' * 64); time.sleep(30)",
    "huge_prefix": "os.write(out, struct.pack('>I', 4 * 2**30 - 1)); time.sleep(30)",
    "unknown_op": "ready(); frame({'op': 'launch', 'call_id': 1}); time.sleep(30)",
    "foreign_id": "ready(); os.read(inp, 65536); "
    "frame({'op': 'fetch', 'call_id': 1, 'ref_id': 'ref_000000000000'}); time.sleep(30)",
    "ready_twice": "ready(); ready(); time.sleep(30)",
    "silent_exit": "ready(); os.read(inp, 65536); sys.exit(3)",
    "exit_before_ready": "sys.exit(3)",
    "realtime_signal": "ready(); os.read(inp, 65536); os.kill(os.getpid(), signal.SIGRTMIN + 6)",
}


class ProcessChild(Child):
    """A real process in a child's place, writing what a hostile sandbox would."""

    def __init__(self, act: str) -> None:
        child_r, self.to_child = os.pipe()
        self.from_child, child_w = os.pipe()
        code = HOSTILE_PRELUDE + HOSTILE_ACTS[act]
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, str(child_w), str(child_r)],
            pass_fds=(child_w, child_r),
        )
        os.close(child_r)
        os.close(child_w)
        self.pid = self.process.pid

    async def wait(self, timeout: float) -> ChildExit:
        try:
            code = await trio.to_thread.run_sync(self.process.wait, timeout)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError from exc
        return ChildExit(self.pid, code, 0.0, 0)

    async def kill(self) -> None:
        self.process.kill()


# --- two pipes driven by the test as the child ------------------------------------------------


class HostGone(Exception):
    """The host closed its end of the pipe the child was writing to."""


class ChildEnd:
    """The child's ends of a run's two real pipes, as trio streams, for a :class:`PipeChild`.

    Every host message is read as it arrives (so the host never blocks on a full pipe), parsed
    with the protocol's own validator, and queued for :meth:`receive`; :attr:`received` keeps
    them all in order. Anything the host sends that breaks the protocol is kept in
    :attr:`problems` (a test asserts there is none) and ends the reading.
    """

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self._out: trio.lowlevel.FdStream | None = trio.lowlevel.FdStream(write_fd)
        self._in = trio.lowlevel.FdStream(read_fd)
        self._queue_in, self._queue_out = trio.open_memory_channel[HostMessage](math.inf)
        self.received: list[HostMessage] = []
        self.problems: list[str] = []
        self.host_closed = trio.Event()

    async def write(self, data: bytes) -> None:
        """Write raw bytes to the host. Raises :class:`HostGone` when it closed its end."""
        if self._out is None:
            raise HostGone("the child closed its output")
        try:
            await self._out.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise HostGone(str(exc)) from exc

    async def send(self, body: object) -> None:
        """Write one msgpack frame with its true length."""
        await self.write(frame(body))

    async def close_output(self) -> None:
        """Close the child -> host pipe (the host reads end of stream) and keep reading."""
        if self._out is not None:
            out, self._out = self._out, None
            await out.aclose()

    async def receive(self) -> HostMessage | None:
        """The host's next message; ``None`` once the host closed its end."""
        try:
            return await self._queue_out.receive()
        except trio.EndOfChannel:
            return None

    async def read_host(self) -> None:
        """Read, parse and queue host messages until the host closes its end."""
        decoder = FrameDecoder(limit=MAX_FRAME)
        try:
            while True:
                try:
                    chunk = await self._in.receive_some(65536)
                except trio.BrokenResourceError:
                    chunk = b""
                if not chunk:
                    if not decoder.at_boundary:
                        self.problems.append("the host's stream ended inside a frame")
                    return
                for body in decoder.feed(chunk):
                    message = parse_host_message(body)  # the host must send valid messages
                    self.received.append(message)
                    self._queue_in.send_nowait(message)
        except ProtocolError as exc:
            self.problems.append(f"the host broke the protocol: {exc}")
        finally:
            self.host_closed.set()
            self._queue_in.close()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.close_output()
            await self._in.aclose()


Act = Callable[[ChildEnd], Awaitable[int]]
"""What a :class:`PipeChild` does; returns its exit status (it "exits" when this returns)."""

_pids = itertools.count(2**22 + 1)  # above any pid_max: clearly not a process


class PipeChild(Child):
    """A run's child that is two real pipes whose far ends ``act`` drives in ``nursery``.

    It "exits" with the status ``act`` returns (closing both its ends); :meth:`kill` cancels
    ``act`` and the exit status is ``-SIGKILL``; ``act`` raising :class:`HostGone` exits 1 (as
    a process dies of a broken pipe). Any other exception from ``act`` fails the test.
    """

    def __init__(self, nursery: trio.Nursery, act: Act) -> None:
        child_r, self.to_child = os.pipe()
        self.from_child, child_w = os.pipe()
        self.pid = next(_pids)
        self.end = ChildEnd(child_w, child_r)
        self.returncode: int | None = None
        self.exited = trio.Event()
        self._scope = trio.CancelScope()
        nursery.start_soon(self._live, act)

    async def _live(self, act: Act) -> None:
        code = -signal.SIGKILL
        try:
            async with trio.open_nursery() as inner:
                inner.start_soon(self.end.read_host)
                with self._scope:
                    try:
                        code = await act(self.end)
                    except HostGone:
                        code = 1
                inner.cancel_scope.cancel()
        finally:
            await self.end.aclose()
            self.returncode = code
            self.exited.set()

    async def wait(self, timeout: float) -> ChildExit:
        with trio.move_on_after(timeout):
            await self.exited.wait()
        if self.returncode is None:
            raise TimeoutError(f"pipe child {self.pid} is still running")
        return ChildExit(self.pid, self.returncode, 0.0, 0)

    async def kill(self) -> None:
        self._scope.cancel()


def raw_act(data: bytes, *, hang: bool = False, code: int = 0) -> Act:
    """An act that writes ``data``, closes its output unless it should ``hang`` (then the host
    never reads the end of its stream), reads until the host closes its end, and exits
    ``code``."""

    async def act(end: ChildEnd) -> int:
        await end.write(data)
        if not hang:
            await end.close_output()
        await end.host_closed.wait()
        return code

    return act
