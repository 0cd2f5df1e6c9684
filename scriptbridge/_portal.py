"""A trio run in a thread of its own, for hosts that aren't trio: asyncio hosts and sync ones.

The supervisor is trio code, one implementation. A host on another loop (asyncio) or on none
(sync code, many threads) reaches it through a :class:`TrioThread`: a daemon thread running
``trio.run``, which runs what it is handed as tasks of one nursery and hands back outcomes.

- :meth:`TrioThread.call` runs an async function there and blocks the calling thread until it
  is done (thread-safe; what a :class:`~scriptbridge.SyncBridge` uses).
- :meth:`TrioThread.call_from_asyncio` runs it there and awaits it on the caller's asyncio
  loop. Cancelling the awaiting task (``asyncio.wait_for``, ``task.cancel()``) cancels the trio
  task and waits, shielded, until it has finished (so a run's child has been killed and reaped)
  before the cancellation goes on.
- :func:`run_on_loop` is the other way: a trio task awaits a coroutine on a host's asyncio
  loop (a host's asyncio tool); cancelling the trio task cancels the asyncio task, without
  waiting for it.

Every hop is a ``call_soon_threadsafe`` or a ``TrioToken.run_sync_soon``: no thread is blocked
per call, and no polling.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import outcome
import trio

from ._exceptions import ScriptBridgeError

__all__ = ["TrioThread", "run_on_loop"]

T = TypeVar("T")

log = logging.getLogger("scriptbridge.supervisor")


class TrioThread:
    """One trio run in a daemon thread, serving calls until :meth:`stop`."""

    def __init__(self, name: str = "scriptbridge-trio") -> None:
        self._name = name
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stopped: trio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None

    def start(self) -> None:
        """Start the thread and wait until it serves calls."""
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()
        self._started.wait()
        if self._failure is not None:
            raise ScriptBridgeError(f"couldn't start the bridge's trio thread: {self._failure}")

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # pragma: no cover - trio itself failed
            self._failure = exc
        finally:
            self._started.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stopped = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._started.set()
            await self._stopped.wait()
            nursery.cancel_scope.cancel()

    @property
    def token(self) -> trio.lowlevel.TrioToken:
        if self._token is None:
            raise ScriptBridgeError("the bridge's trio thread isn't running")
        return self._token

    def in_thread(self) -> bool:
        """Whether the caller runs in this trio thread."""
        return threading.current_thread() is self._thread

    def submit(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        done: Callable[[outcome.Outcome[T]], object],
    ) -> trio.CancelScope:
        """Run ``fn(*args)`` as a task of the thread; ``done(outcome)`` is called in the trio
        thread when it ends (a cancel of the returned scope ends it with ``trio.Cancelled``).
        Thread-safe."""
        scope = trio.CancelScope()

        async def task() -> None:
            with scope:  # acapture keeps even a trio.Cancelled: done() hears of every ending
                done(await outcome.acapture(fn, *args))

        def spawn() -> None:
            if self._nursery is None:  # pragma: no cover - stopped meanwhile
                done(outcome.Error(ScriptBridgeError("the bridge is closed")))
                return
            self._nursery.start_soon(task)

        try:
            self.token.run_sync_soon(spawn)
        except trio.RunFinishedError as exc:
            raise ScriptBridgeError("the bridge is closed") from exc
        return scope

    def cancel(self, scope: trio.CancelScope) -> None:
        """Cancel a task :meth:`submit` started (thread-safe; it may have ended already)."""
        with contextlib.suppress(trio.RunFinishedError):
            self.token.run_sync_soon(scope.cancel)

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` in the trio thread and return its result (blocks this thread)."""
        if self.in_thread():
            raise ScriptBridgeError("a blocking bridge call from inside the bridge's own thread")
        finished: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.submit(fn, *args, done=lambda result: _settle(finished, result))
        return finished.result()

    async def call_from_asyncio(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` in the trio thread and await it here (module doc)."""
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[T] = loop.create_future()

        def done(result: outcome.Outcome[T]) -> None:
            loop.call_soon_threadsafe(_settle_asyncio, finished, result)

        scope = self.submit(fn, *args, done=done)
        try:
            return await asyncio.shield(finished)
        except asyncio.CancelledError:
            self.cancel(scope)
            while not finished.done():  # shielded: the trio task kills and reaps first
                try:
                    await asyncio.shield(finished)
                except asyncio.CancelledError:
                    continue
                except BaseException:
                    break
            raise

    def stop(self) -> None:
        """Cancel everything still running in the thread and wait for it to end."""
        if self._token is not None and self._stopped is not None:
            stopped = self._stopped
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(stopped.set)
        if self._thread is not None and not self.in_thread():
            self._thread.join()


def _settle(future: concurrent.futures.Future[T], result: outcome.Outcome[T]) -> None:
    if isinstance(result, outcome.Value):
        future.set_result(result.value)
    elif isinstance(result, outcome.Error):
        future.set_exception(_foreign(result.error))


def _settle_asyncio(future: asyncio.Future[T], result: outcome.Outcome[T]) -> None:
    if future.done():
        return
    if isinstance(result, outcome.Value):
        future.set_result(result.value)
    elif isinstance(result, outcome.Error):
        future.set_exception(_foreign(result.error))


def _foreign(error: BaseException) -> BaseException:
    """What a trio task's error is on the caller's side: a trio cancellation is no error of
    the caller's (it happened because the caller cancelled, or the bridge closed)."""
    if isinstance(error, trio.Cancelled):
        return ScriptBridgeError("the call was cancelled in the bridge")
    return error


async def run_on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the asyncio ``loop`` (another thread's) from a trio task; cancelling
    this cancels the asyncio task without waiting for it.

    This is on every host coroutine tool's call, so it takes the fewest turns of each loop:
    one hop there (``call_soon_threadsafe``, which creates the task), the coroutine run as that
    task, and one hop back made by the task itself as its coroutine ends (``run_sync_soon``,
    which reschedules this trio task with the outcome), with no done callback, no
    ``concurrent.futures`` and no trio ``Event`` in between.

    A coroutine that raises once this stopped waiting for it is logged as a warning (its value
    is dropped); a host loop that closes mid-call never answers, and the caller's own deadline
    (a run's wall time) ends the wait.
    """
    token = trio.lowlevel.current_trio_token()
    waiter = trio.lowlevel.current_task()
    started: list[asyncio.Task[None]] = []  # holds the task while this waits (asyncio won't)
    abandoned = False

    def deliver(result: outcome.Outcome[T]) -> None:  # in this trio thread
        if not abandoned:
            trio.lowlevel.reschedule(waiter, result)
            return
        error = result.error if isinstance(result, outcome.Error) else None
        if error is not None and not isinstance(error, asyncio.CancelledError):
            log.warning("a host coroutine raised once its call was cancelled", exc_info=error)

    async def settle() -> None:  # on the host's loop
        result: outcome.Outcome[T]
        try:
            result = outcome.Value(await coro)
        except BaseException as exc:  # handed on to the trio task, which raises it
            result = outcome.Error(exc)
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(deliver, result)

    def start() -> None:
        started.append(loop.create_task(settle()))

    def abort(_: object) -> trio.lowlevel.Abort:
        nonlocal abandoned
        abandoned = True
        with contextlib.suppress(RuntimeError):  # the host's loop is closed: nothing to cancel
            loop.call_soon_threadsafe(lambda: started and started[0].cancel())
        return trio.lowlevel.Abort.SUCCEEDED  # raising here would end the whole trio run

    loop.call_soon_threadsafe(start)
    value: T = await trio.lowlevel.wait_task_rescheduled(abort)
    return value
