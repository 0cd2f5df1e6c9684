"""Spare children: forked, isolated and ``ready`` ahead of runs, so a run's start skips the fork.

A :class:`SparePool` keeps children waiting for ``start``, each bound to a directory of its own
under ``.spares/`` (a child's working directory and landlock rules are fixed when it isolates
itself) and with its ``ready`` already read and checked. Guarantees:

- A spare serves at most one run, as every child does, and only a run whose OS limits are the
  ones it was forked with (:meth:`SparePool.take`).
- A spare that died while waiting is dropped (killed, reaped, its directory removed), never
  handed out.
- Spares held plus forks in flight never pass ``max_spares``, the bound the host sets; with
  ``max_spares=0`` there are none.
- Up to ``parallel`` spares are forked at once (by default as many as there are CPUs), each in
  a task of its own (:meth:`SparePool.keep`): the zygote forks without waiting on a child's
  set-up, so children isolate themselves side by side.
- The number kept follows demand: it is the most runs that arrived within the time one spare
  takes to start (measured), over the last :data:`SPARE_MEMORY_S`, and never less than
  :data:`SPARE_CHILDREN` (nor more than ``max_spares``). So a burst of runs larger than the pool
  raises it, and the next burst of that size finds a spare for every run; once no burst has come
  for :data:`SPARE_MEMORY_S`, the spares beyond that are killed, reaped and removed.
- The pool fills up when asked (:meth:`SparePool.want`, once a run is finished) and as its forks
  end, never on a take alone, so a running script isn't raced for the CPU by its own
  replacement. A spare that fails to start is logged and the next attempt waits longer, up to
  :data:`SPARE_RETRY_S`.
"""

from __future__ import annotations

import logging
import os
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

__all__ = [
    "MAX_SPARES",
    "READY_TIMEOUT_S",
    "SPARE_CHILDREN",
    "SPARE_MEMORY_S",
    "SparePool",
    "usable_cpus",
]

log = logging.getLogger("scriptbridge.supervisor")

READY_TIMEOUT_S: Final = 30.0
"""How long a new child may take to report ``ready``."""
SPARE_CHILDREN: Final = 2
"""Children kept forked, isolated and ready ahead of runs when no burst asks for more."""
MAX_SPARES: Final = 8
"""The default bound on spares held plus forks in flight (``max_spares``)."""
SPARE_MEMORY_S: Final = 30.0
"""How long a burst of runs keeps the pool at the size it asked for."""
_FIRST_START_S: Final = 0.02
"""What a spare's start is taken to cost before one was measured."""
SPARE_RETRY_S: Final = (0.05, 5.0)
"""The first and the longest pause before forking a spare again after a failure."""

Fork = Callable[[RunDir, ChildLimits], Awaitable["Child"]]


@dataclass
class _Spare:
    child: Child
    dir: RunDir
    limits: ChildLimits
    """The OS limits it was forked with: it serves only a run whose limits are these."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or a pinning's share),
    at least 1; the machine's count where affinity can't be read."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class SparePool:
    """Spares forked by ``fork`` for ``limits``, in directories of ``dirs``; their channels read
    frames of at most ``message_limit`` bytes. ``broken()`` says when forking can't work any
    more (the zygote is gone): then :meth:`keep` stops.

    ``max_spares`` bounds spares held plus forks in flight; ``parallel`` bounds forks in flight
    (by default the CPUs this process may run on, :func:`usable_cpus`, within ``max_spares``).

    Raises:
        ValueError: ``max_spares`` is negative or ``parallel`` is below 1.
    """

    def __init__(
        self,
        fork: Fork,
        dirs: RunDirs,
        limits: ChildLimits,
        message_limit: int,
        broken: Callable[[], bool],
        *,
        max_spares: int = MAX_SPARES,
        parallel: int | None = None,
    ) -> None:
        if max_spares < 0:
            raise ValueError(f"max_spares must be 0 or more, not {max_spares}")
        if parallel is not None and parallel < 1:
            raise ValueError(f"parallel must be 1 or more, not {parallel}")
        self._fork = fork
        self._dirs = dirs
        self._limits = limits
        self._message_limit = message_limit
        self._broken = broken
        self._max = max_spares
        self._parallel = parallel if parallel is not None else usable_cpus()
        self._spares: deque[_Spare] = deque()
        self._starting = 0
        self._wanted = trio.Event()
        self._pause = SPARE_RETRY_S[0]
        self._start_s = _FIRST_START_S
        self._arrivals: deque[float] = deque()  # runs that asked, within one start time
        self._peaks: deque[tuple[float, int]] = deque()  # (when, runs), decreasing runs

    def pids(self) -> list[int]:
        """The pids of the spares waiting now, the next one to be taken first."""
        return [spare.child.pid for spare in self._spares]

    def want(self) -> None:
        """Ask for the pool to be filled up again (a spare may have been taken)."""
        self._wanted.set()

    def target(self) -> int:
        """How many spares the pool keeps now (the module doc's rule)."""
        now = trio.current_time()
        while self._peaks and self._peaks[0][0] + SPARE_MEMORY_S <= now:
            self._peaks.popleft()
        peak = self._peaks[0][1] if self._peaks else 0
        return min(self._max, max(SPARE_CHILDREN, peak))

    def _arrived(self) -> None:
        """Count a run that asked for a spare into the demand :meth:`target` follows."""
        now = trio.current_time()
        self._arrivals.append(now)
        while self._arrivals[0] < now - self._start_s:
            self._arrivals.popleft()
        runs = len(self._arrivals)
        while self._peaks and self._peaks[-1][1] <= runs:
            self._peaks.pop()
        self._peaks.append((now, runs))

    async def take(self, limits: ChildLimits, run_dir: RunDir) -> Child | None:
        """A live spare forked with ``limits``, its directory renamed to ``run_dir``; ``None``
        when there is none."""
        if limits != self._limits:
            return None
        self._arrived()
        while self._spares:
            spare = self._spares.popleft()
            if not spare.child.exited() and self._dirs.adopt(spare.dir, run_dir):
                return spare.child
            await self._drop(spare)
        return None

    async def keep(self) -> None:
        """Keep :meth:`target` spares ready until cancelled (a nursery task); returns once
        forking can't work any more."""
        async with trio.open_nursery() as nursery:
            while not self._broken():
                target = self.target()
                while len(self._spares) > target:
                    await self._drop(self._spares.pop())  # the newest: the oldest go first
                if len(self._spares) + self._starting < target and self._starting < min(
                    self._parallel, self._max
                ):
                    self._starting += 1
                    nursery.start_soon(self._start_one)
                    continue
                self._wanted = trio.Event()
                with trio.move_on_at(self._next_change()):
                    await self._wanted.wait()
            nursery.cancel_scope.cancel()

    def _next_change(self) -> float:
        """When :meth:`target` may next fall (the oldest peak past that still counts)."""
        if len(self._peaks) and self._peaks[0][1] > SPARE_CHILDREN:
            return self._peaks[0][0] + SPARE_MEMORY_S
        return float("inf")

    async def _start_one(self) -> None:
        """One spare started into the pool (or, failing, logged and paused after)."""
        try:
            began = trio.current_time()
            try:
                spare = await self._start()
            except (ZygoteError, TimeoutError, OSError, ProtocolViolation) as exc:
                if self._broken():
                    return  # the zygote is gone: runs say so themselves
                log.warning("couldn't start a spare child: %s", exc)
                await trio.sleep(self._pause)
                self._pause = min(self._pause * 2, SPARE_RETRY_S[1])
                return
            self._pause = SPARE_RETRY_S[0]
            self._start_s = 0.75 * self._start_s + 0.25 * (trio.current_time() - began)
            self._spares.append(spare)
        finally:
            self._starting -= 1
            self._wanted.set()

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
