"""Spare children: forked, isolated and ``ready`` ahead of runs, so a run's start skips the fork.

A :class:`SparePool` keeps :data:`SPARE_CHILDREN` children waiting for ``start``, each bound to a
directory of its own under ``.spares/`` (a child's working directory and landlock rules are fixed
when it isolates itself) and with its ``ready`` already read and checked. Guarantees:

- A spare serves at most one run, as every child does, and only a run whose OS limits are the
  ones it was forked with (:meth:`SparePool.take`).
- A spare that died while waiting is dropped (killed, reaped, its directory removed), never
  handed out.
- Forking happens in one background task, one child at a time (:meth:`SparePool.keep`); a
  replacement is forked only when asked (:meth:`SparePool.want`, once a run is finished), so it
  doesn't compete with a running script for the CPU. A spare that fails to start is logged and
  the next attempt waits longer, up to :data:`SPARE_RETRY_S`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import trio

from sandbox import ChildLimits, ZygoteError
from sandbox.protocol import PROTOCOL_VERSION, Ready

from ._channel import ChildChannel
from ._exceptions import ProtocolViolation, ScriptBridgeError
from ._run_dirs import RunDir, RunDirs

if TYPE_CHECKING:
    from ._launcher import Child

__all__ = ["READY_TIMEOUT_S", "SPARE_CHILDREN", "SparePool"]

log = logging.getLogger("scriptbridge.supervisor")

READY_TIMEOUT_S: Final = 30.0
"""How long a new child may take to report ``ready``."""
SPARE_CHILDREN: Final = 2
"""Children kept forked, isolated and ready ahead of runs."""
SPARE_RETRY_S: Final = (0.05, 5.0)
"""The first and the longest pause before forking a spare again after a failure."""

Fork = Callable[[RunDir, ChildLimits], Awaitable["Child"]]


@dataclass
class _Spare:
    child: Child
    dir: RunDir
    limits: ChildLimits
    """The OS limits it was forked with: it serves only a run whose limits are these."""


class SparePool:
    """Spares forked by ``fork`` for ``limits``, in directories of ``dirs``; their channels read
    frames of at most ``message_limit`` bytes. ``broken()`` says when forking can't work any
    more (the zygote is gone): then :meth:`keep` stops."""

    def __init__(
        self,
        fork: Fork,
        dirs: RunDirs,
        limits: ChildLimits,
        message_limit: int,
        broken: Callable[[], bool],
    ) -> None:
        self._fork = fork
        self._dirs = dirs
        self._limits = limits
        self._message_limit = message_limit
        self._broken = broken
        self._spares: deque[_Spare] = deque()
        self._wanted = trio.Event()

    def pids(self) -> list[int]:
        """The pids of the spares waiting now, the next one to be taken first."""
        return [spare.child.pid for spare in self._spares]

    def want(self) -> None:
        """Ask for the pool to be filled up again (a spare may have been taken)."""
        self._wanted.set()

    async def take(self, limits: ChildLimits, run_dir: RunDir) -> Child | None:
        """A live spare forked with ``limits``, its directory renamed to ``run_dir``; ``None``
        when there is none."""
        while self._spares and self._spares[0].limits == limits:
            spare = self._spares.popleft()
            if not spare.child.exited() and self._dirs.adopt(spare.dir, run_dir):
                return spare.child
            await self._drop(spare)
        return None

    async def keep(self) -> None:
        """Keep :data:`SPARE_CHILDREN` spares ready until cancelled (a nursery task)."""
        pause = SPARE_RETRY_S[0]
        while True:
            if len(self._spares) >= SPARE_CHILDREN:
                self._wanted = trio.Event()
                await self._wanted.wait()
                continue
            try:
                self._spares.append(await self._start())
            except (ZygoteError, TimeoutError, OSError, ProtocolViolation) as exc:
                if self._broken():
                    return  # the zygote is gone: runs say so themselves
                log.warning("couldn't start a spare child: %s", exc)
                await trio.sleep(pause)
                pause = min(pause * 2, SPARE_RETRY_S[1])
            else:
                pause = SPARE_RETRY_S[0]

    async def _start(self) -> _Spare:
        """Fork a child bound to a new directory under ``.spares/`` and read its ``ready``.

        Raises ZygoteError, TimeoutError, OSError or ProtocolViolation; the child is then
        killed and its directory removed.
        """
        directory = self._dirs.new_spare()
        spare: _Spare | None = None
        try:
            with trio.CancelScope(shield=True):  # a fork we don't hear of would leak
                with trio.fail_after(READY_TIMEOUT_S):
                    child = await self._fork(directory, self._limits)
            spare = _Spare(child, directory, self._limits)
            child.channel = ChildChannel(
                child.from_child, child.to_child, limit=self._message_limit
            )
            with trio.fail_after(READY_TIMEOUT_S):
                first = await child.channel.receive()
            if not isinstance(first, Ready) or first.protocol != PROTOCOL_VERSION:
                raise ProtocolViolation(f"a spare child answered {first!r} instead of ready")
            child.ready = first
        except BaseException as exc:
            with trio.CancelScope(shield=True):
                if spare is None:
                    self._dirs.remove(directory)
                else:  # the bridge is closing: the zygote kills it as it stops
                    await self._drop(spare, kill=not isinstance(exc, trio.Cancelled))
            raise
        return spare

    async def _drop(self, spare: _Spare, *, kill: bool = True) -> None:
        """Close a spare that serves no run, kill and reap it, and remove its directory."""
        child = spare.child
        with trio.CancelScope(shield=True):
            await child.close_fds()
            if kill:
                try:
                    await child.stop()
                except (ZygoteError, TimeoutError, ScriptBridgeError) as exc:
                    log.error("couldn't reap spare child %d: %s", child.pid, exc)
            self._dirs.remove(spare.dir)

    async def close(self) -> None:
        """Close every waiting spare's fds and remove its directory (whoever stops the zygote
        kills the spares)."""
        with trio.CancelScope(shield=True):
            while self._spares:
                spare = self._spares.popleft()
                await spare.child.close_fds()
                self._dirs.remove(spare.dir)
