"""Where a run's child comes from: the launcher seam of :class:`~scriptbridge.Bridge`.

A :class:`Launcher` starts with the bridge, hands each run a fresh :class:`Child` bound to the
run's directory (:meth:`Launcher.spawn`), reaps it when the run is over (:meth:`Launcher.reap`)
and stops with the bridge, killing and reaping every child it started. The bridge speaks to a
child only through its two fds and these methods, so a test (or a host with its own process
manager) passes a launcher of its own, ``Bridge(..., launcher=...)``, as httpx's tests pass a
transport.

:class:`ZygoteLauncher`, the default, forks children from a warm zygote
(:class:`sandbox.ZygoteProcess`, driven from trio by :class:`~scriptbridge._zygote_link.ZygoteLink`)
and keeps spare children ready ahead of runs (:class:`~scriptbridge._spares.SparePool`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
from typing import Final, Protocol

import trio

from sandbox import ChildExit, ChildLimits, SpawnedChild, ZygoteError, ZygoteProcess
from sandbox.protocol import Ending, LayerState, Ready

from ._channel import ChildChannel
from ._exceptions import ScriptBridgeError
from ._limits import Limits
from ._results import ScriptError
from ._run_dirs import RunDir, RunDirs
from ._spares import MAX_SPARES, SparePool
from ._zygote_link import ZygoteLink, close_quietly

__all__ = ["Child", "Launcher", "ZygoteChild", "ZygoteLauncher", "child_limits", "exit_error"]

log = logging.getLogger("scriptbridge.supervisor")

EXIT_GRACE_S: Final = 5.0
"""How long a child that said done or error may take to exit on its own before it is killed."""
REAP_TIMEOUT_S: Final = 10.0
"""How long a reap (and a closing bridge, for every reap still pending) waits for the zygote."""
ZYGOTE_STOP_TIMEOUT_S: Final = 10.0
"""How long a stopping zygote may take to kill and reap its children before it is killed (its
children, whose parent-death signal is SIGKILL, die with it)."""


class Child:
    """One sandbox child of a run: its pid, the host's ends of its channel, how to reap it.

    A subclass says how to wait for it and kill it; :meth:`stop` and :meth:`close_fds` hold for
    every kind of child.
    """

    pid: int
    to_child: int
    from_child: int
    ready: Ready | None = None
    """Its ``ready``, when it was read ahead (a spare); otherwise the run reads it first."""
    channel: ChildChannel | None = None
    """The channel that read ``ready`` ahead (a spare); otherwise the run opens one."""

    async def wait(self, timeout: float) -> ChildExit:
        """Wait until it exited and was reaped. Raises TimeoutError or ZygoteError."""
        raise NotImplementedError

    async def kill(self) -> None:
        """Kill it (it may have exited already)."""
        raise NotImplementedError

    def exited(self) -> bool:
        """Whether it is known to have exited already."""
        return False

    def kill_now(self) -> bool:
        """Kill it from here, at once; ``True`` when it can run no more code once this returns
        (``SIGKILL`` is queued: none of its threads returns to user space again; or it had
        exited already). ``False``: it can't be killed from here (the launcher kills it as it
        reaps it)."""
        return False

    def out_is_empty(self) -> bool | None:
        """Whether the tmpfs on its ``out/`` (the ``quota`` layer) holds nothing; ``None`` when
        there is none (its ``out/`` is the directory on the disk)."""
        return None

    async def stop(self) -> ChildExit:
        """Kill it and wait until it is reaped. Raises ZygoteError or TimeoutError."""
        await self.kill()
        return await self.wait(REAP_TIMEOUT_S)

    async def close_fds(self) -> None:
        """Close the host's ends of its channel (through the channel, when one was opened)."""
        if self.channel is not None:
            await self.channel.aclose()
            return
        close_quietly((self.to_child, self.from_child))


class ZygoteChild(Child):
    """A child the zygote forked: waited for and killed (race-free, by pidfd) through it."""

    def __init__(self, link: ZygoteLink, spawned: SpawnedChild) -> None:
        self._link = link
        self.pid = spawned.pid
        self.to_child = spawned.to_child
        self.from_child = spawned.from_child
        self._pidfd = spawned.pidfd
        self._out_fd = spawned.out_fd

    async def wait(self, timeout: float) -> ChildExit:
        return await self._link.wait(self.pid, timeout)

    async def kill(self) -> None:
        await self._link.kill(self.pid)

    def exited(self) -> bool:
        return self._link.exited(self.pid)

    def kill_now(self) -> bool:
        if self._pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        except ProcessLookupError:
            return True  # it has exited
        except OSError:
            return False
        return True

    def out_is_empty(self) -> bool | None:
        if self._out_fd is None:
            return None
        try:
            room = os.fstatvfs(self._out_fd)
        except OSError:
            return False  # unknown: the zygote's copy decides
        return room.f_files - room.f_ffree <= 1 and room.f_bfree == room.f_blocks  # its root

    async def close_fds(self) -> None:
        await super().close_fds()
        held, self._pidfd, self._out_fd = (self._pidfd, self._out_fd), None, None
        close_quietly(held)


class Launcher(Protocol):
    """What a bridge needs of where its children come from (module doc)."""

    async def start(self, nursery: trio.Nursery, dirs: RunDirs, limits: Limits) -> None:
        """Get ready to spawn; background work goes into ``nursery`` (the bridge's)."""

    async def spawn(self, run_dir: RunDir, limits: Limits) -> Child:
        """A fresh child for one run, working in ``run_dir`` (made when this returns).

        Raises ZygoteError, TimeoutError or OSError when none could be started."""

    async def reap(self, child: Child, *, exits_on_its_own: bool) -> ChildExit | None:
        """Reap ``child`` (killing it first unless it ``exits_on_its_own`` within a grace
        time); ``None`` when it couldn't be reaped (logged)."""

    async def aclose(self) -> None:
        """Stop: every child started here is killed and reaped."""

    def layers(self) -> list[LayerState] | None:
        """What its children get, layer by layer, once started; ``None`` when it can't say
        (then each run's child says it in its ``ready``)."""


class ZygoteLauncher:
    """The default launcher: children forked by a zygote, with spares kept ready.

    Spares are forked for the bridge's default limits; a run with other limits, or that finds
    no spare, gets a child forked on the spot.

    Args:
        max_spares: the most spare children held plus being forked at once
            (:class:`~scriptbridge._spares.SparePool`: their number follows the bursts of runs
            that came, within this bound); 0 keeps none. Each idle spare is a process of a few
            MiB.

        python: the command the zygote is started with, in place of this interpreter (one
            that takes Python's arguments: a wrapper that starts it as another user, say).

    Raises:
        ValueError: ``max_spares`` is negative.
    """

    def __init__(self, *, max_spares: int = MAX_SPARES, python: str = sys.executable) -> None:
        if max_spares < 0:
            raise ValueError(f"max_spares must be 0 or more, not {max_spares}")
        self._max_spares = max_spares
        self._python = python
        self._zygote: ZygoteProcess | None = None
        self._link: ZygoteLink | None = None
        self._spares: SparePool | None = None

    async def start(self, nursery: trio.Nursery, dirs: RunDirs, limits: Limits) -> None:
        zygote = await trio.to_thread.run_sync(
            functools.partial(ZygoteProcess.start, python=self._python)
        )
        self._zygote = zygote
        self._link = ZygoteLink(zygote)
        await nursery.start(self._link.serve)
        link = self._link
        self._spares = SparePool(
            self._fork,
            dirs,
            child_limits(limits),
            limits.max_message_bytes,
            lambda: link.broken,
            max_spares=self._max_spares,
        )
        nursery.start_soon(self._spares.keep)

    def layers(self) -> list[LayerState] | None:
        return list(self._zygote.layers) if self._zygote is not None else None

    @property
    def zygote_pid(self) -> int | None:
        """The zygote's pid while it runs (every child is its descendant)."""
        return self._zygote.pid if self._zygote is not None else None

    def spare_pids(self) -> list[int]:
        """The pids of the spares waiting for a run, the next one to be taken first."""
        return self._spares.pids() if self._spares is not None else []

    def has_exited(self, pid: int) -> bool:
        """Whether the zygote has reported that its child ``pid`` exited."""
        return self._link is not None and self._link.exited(pid)

    def _live_link(self) -> ZygoteLink:
        if self._link is None:
            raise ScriptBridgeError("the launcher isn't started")
        return self._link

    async def _fork(self, directory: RunDir, limits: ChildLimits) -> Child:
        link = self._live_link()
        return ZygoteChild(link, await link.spawn(directory.path, limits))

    async def spawn(self, run_dir: RunDir, limits: Limits) -> Child:
        wanted = child_limits(limits)
        if self._spares is not None:
            spare = await self._spares.take(wanted, run_dir)
            if spare is not None:
                return spare
        run_dir.make()
        return await self._fork(run_dir, wanted)

    async def reap(self, child: Child, *, exits_on_its_own: bool) -> ChildExit | None:
        try:
            return await reap(child, exits_on_its_own=exits_on_its_own)
        finally:
            if self._spares is not None:
                self._spares.want()  # replace the spare this run may have taken, now

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            if self._spares is not None:
                await self._spares.close()  # the zygote kills them as it stops
            self._link = None
            zygote, self._zygote = self._zygote, None
            if zygote is not None:
                await trio.to_thread.run_sync(zygote.close, ZYGOTE_STOP_TIMEOUT_S)


async def reap(child: Child, *, exits_on_its_own: bool) -> ChildExit | None:
    """Wait for ``child`` (a grace time, when it ``exits_on_its_own``), else kill and wait;
    ``None`` (logged) when it couldn't be reaped."""
    status: ChildExit | None = None
    try:
        if exits_on_its_own:
            with contextlib.suppress(TimeoutError):
                status = await child.wait(EXIT_GRACE_S)
        if status is None:
            status = await child.stop()
    except (ZygoteError, TimeoutError, ScriptBridgeError) as exc:
        log.error("couldn't reap child %d: %s", child.pid, exc)
    return status


def child_limits(limits: Limits) -> ChildLimits:
    """The OS limits a child for a run with ``limits`` is forked with."""
    return ChildLimits(
        cpu_s=limits.cpu_s,
        memory_mb=limits.memory_mb,
        max_out_bytes=limits.max_out_bytes,
        max_out_files=limits.max_out_files,
    )


def exit_error(status: ChildExit, limits: Limits) -> ScriptError:
    """Why a child that ended without a word ended: CPU, memory, or a crash."""
    code = status.returncode
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and status.cpu_s >= limits.cpu_s):
        return ScriptError(
            ending=Ending.CpuTimeExceeded,
            message=f"the script used its {limits.cpu_s:g} s of CPU time",
        )
    if code < 0 and status.max_rss_kb >= limits.memory_mb * 1024 * 0.9:
        return ScriptError(
            ending=Ending.MemoryExceeded,
            message=f"the script used its {limits.memory_mb} MiB of memory",
        )
    try:
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
    except ValueError:  # a real-time signal has no name
        how = f"signal {-code}"
    return ScriptError(
        ending=Ending.SandboxCrashed, message=f"the sandbox process ended with {how}"
    )
