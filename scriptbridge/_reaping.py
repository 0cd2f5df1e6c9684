"""How a run's child ends: killed the moment its run is over, and reaped after the run returns
when nothing the run reports can depend on the reap.

:func:`end_child` takes a run's child once the conversation is over. A child that said ``done``
or ``error`` (``run.ended_cleanly``), that the host can kill itself (its pidfd:
:meth:`~scriptbridge._launcher.Child.kill_now`) and whose ``out/`` was empty when it was killed,
is *killed and left to be reaped*: ``SIGKILL`` is queued, so none of its threads returns to user
space again, and the run's result is complete without the reap:

- its value or error came in its last message;
- what it left in ``out/`` is nothing: ``ScriptResult.outputs`` is ``[]``, and anything a
  write already under way when it was killed adds to ``out/`` is removed with its directory
  after the reap (:meth:`~scriptbridge._run_dirs.RunDir.finish_unreaped`);
- its exit status is of no use to a run that ended cleanly, and an empty ``out/`` passed no
  disk quota.

Its channel is closed and it is reaped after the run returns (:class:`Reaps`, a task of the
bridge's nursery), and the bridge waits for every reap before it stops its launcher. Every other
child (a run that ended any other way, wrote something to ``out/``, or whose child can't be
killed from here) is reaped before its run returns, as the result needs its exit status or its
files on the disk.

What "its last message" means for ``outputs``: the host kills the child (``SIGKILL`` through its
pidfd) the moment it reads the child's ``done`` or ``error``, before it looks at ``out/``. So
``outputs`` is what ``out/`` held at that kill. A child that escaped the language layer can go
on after *sending* its last message until the host reads it (a few hundred microseconds, where
it was up to a 5 s grace before); what it writes then can't be told from what it wrote before,
and counts as its output, within its quota. Nothing it does after the kill counts when
``out/`` was empty: it runs no more code, and what a syscall already under way at the kill
still writes (one per thread; the ``uid`` layer's ``RLIMIT_NPROC`` of 0 leaves it one thread)
lands in a directory thrown away unseen.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

import trio

from sandbox import ChildExit

from ._launcher import Child, Launcher
from ._run_dirs import RunDir
from ._run_state import RunState

__all__ = ["ChildEnding", "Reaps", "end_child"]

log = logging.getLogger("scriptbridge.supervisor")


@dataclass(frozen=True)
class ChildEnding:
    """How a run's child ended, as far as its run needs to know.

    Attributes:
        status: how it exited, when it was reaped before the run returns (``None`` when it
            wasn't, couldn't be, or there was no child).
        reap_later: it was killed and is to be reaped after the run returns (:class:`Reaps`);
            its ``out/`` was empty.
    """

    status: ChildExit | None
    reap_later: bool = False


async def end_child(
    launcher: Launcher, run: RunState, run_dir: RunDir, child: Child | None, *, may_defer: bool
) -> ChildEnding:
    """End ``child`` (module doc): killed and left to be reaped, its channel still open for the
    reaper to close, when ``may_defer`` and the run may return before the reap; else its
    channel closed and reaped here (killed first unless it said done or error and exits on
    its own)."""
    if child is None:
        return ChildEnding(None)
    if may_defer and run.ended_cleanly and child.kill_now() and _out_empty(child, run_dir):
        return ChildEnding(None, reap_later=True)
    await child.close_fds()
    return ChildEnding(await launcher.reap(child, exits_on_its_own=run.ended_cleanly))


def _out_empty(child: Child, run_dir: RunDir) -> bool:
    """Whether the killed ``child``'s ``out/`` holds nothing: its tmpfs, or the disk's."""
    empty = child.out_is_empty()
    return run_dir.is_empty_out() if empty is None else empty


class Reaps:
    """The reaps of children whose runs returned first (:func:`end_child`), one after another
    in one task of the bridge's nursery (:meth:`serve`): each child's channel is closed, it is
    reaped (shielded), and then its run's directory is removed. :meth:`wait` returns once none
    is left, so a closing bridge stops its launcher only after every reap."""

    def __init__(self, launcher: Launcher) -> None:
        self._launcher = launcher
        self._queue: deque[tuple[Child, RunDir]] = deque()
        self._added = trio.Event()
        self._none_left = trio.Event()
        self._none_left.set()

    def start(self, child: Child, run_dir: RunDir) -> None:
        """Have ``child`` reaped and then ``run_dir`` (finished unreaped) removed (no await:
        nothing between the run's end and its result)."""
        if not self._queue:
            self._none_left = trio.Event()
        self._queue.append((child, run_dir))
        self._added.set()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Reap what :meth:`start` was given, in order, until cancelled (between reaps)."""
        task_status.started()
        while True:
            if not self._queue:
                self._added = trio.Event()
                await self._added.wait()
            child, run_dir = self._queue[0]
            with trio.CancelScope(shield=True):
                try:
                    await child.close_fds()
                    await self._launcher.reap(child, exits_on_its_own=True)  # killed: it exits
                except Exception:  # a launcher's bug: logged, and the next reap goes on
                    log.exception("couldn't reap child %s", child.pid)
                finally:
                    run_dir.reaped()
                    self._queue.popleft()
                    if not self._queue:
                        self._none_left.set()

    async def wait(self, timeout: float) -> None:
        """Return once every reap started so far has ended (while :meth:`serve` runs), or
        after ``timeout`` seconds (a hung zygote: the launcher's stop kills every child)."""
        with trio.move_on_after(timeout):
            await self._none_left.wait()

    async def abandon(self) -> None:
        """For what is left once :meth:`serve` has stopped (the bridge is closing, and its
        launcher's stop kills and reaps every child): close the channels and let the
        directories be removed."""
        while self._queue:
            child, run_dir = self._queue.popleft()
            await child.close_fds()
            run_dir.reaped()
        self._none_left.set()
