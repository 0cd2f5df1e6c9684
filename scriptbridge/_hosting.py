"""Where a ``Bridge`` runs for the host that opened it: in the host's trio run, or, for an
asyncio host, in a trio thread of its own.

:func:`open_host` looks at the caller's event loop (``sniffio``) and opens the bridge's trio
side (``lifetime``, an async context manager) there:

- under **trio**, a :class:`TrioHost` runs everything in the caller's own run: a call is a
  plain ``await``, nothing is added;
- under **asyncio**, an :class:`AsyncioHost` starts a :class:`~scriptbridge._portal.TrioThread`
  and holds the bridge open in one task of it until closed; every call crosses to it and back
  (:meth:`~scriptbridge._portal.TrioThread.call_from_asyncio`, so cancelling the caller kills
  and reaps the run's child before the cancellation goes on), and a host's coroutine-function
  tool runs back on the host's loop (:meth:`AsyncioHost.call_tool`);
- under anything else, or outside any loop, :class:`~scriptbridge.ScriptBridgeError`.

:class:`ThreadHost` is the same trio thread for sync callers (``SyncBridge``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

import outcome
import sniffio
import trio

from ._exceptions import ScriptBridgeError
from ._portal import TrioThread, run_on_loop
from ._tool_table import Tool
from ._tools import PythonTool

__all__ = ["AsyncioHost", "Host", "ThreadHost", "TrioHost", "open_host"]

T = TypeVar("T")
log = logging.getLogger("scriptbridge.supervisor")

Lifetime = Callable[[], AbstractAsyncContextManager[object]]
"""Makes the bridge's trio side: entered once to open it, left once to close it."""


class Host(Protocol):
    """How a bridge's public methods reach its trio side."""

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run the trio coroutine function ``fn(*args)`` on the bridge's trio side."""

    def sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the plain function ``fn(*args)`` where the bridge's state lives."""

    async def call_tool(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """Call ``tool`` from the trio side, on the host's own loop where it belongs."""

    def listener(self, fn: Callable[[str], object]) -> Callable[[str], None]:
        """``fn`` made callable from the trio side: each call runs ``fn`` on the host's loop
        (at once under trio and in a SyncBridge's thread, soon on an asyncio loop); what it
        raises is logged, never passed on."""

    async def close(self) -> None:
        """Close the bridge's trio side and whatever this host started."""


def host_library() -> str:
    """The caller's async library, ``"trio"`` or ``"asyncio"``; raises ScriptBridgeError for
    none or another."""
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        raise ScriptBridgeError(
            "Bridge needs a trio or asyncio event loop (from sync code, use SyncBridge)"
        ) from None
    if library not in ("trio", "asyncio"):
        raise ScriptBridgeError(f"Bridge runs under trio or asyncio, not {library}")
    return library


async def open_host(lifetime: Lifetime) -> Host:
    """Open the bridge's trio side for the caller's loop (module doc)."""
    if host_library() == "trio":
        trio_host = TrioHost(lifetime())
        await trio_host.open()
        return trio_host
    asyncio_host = AsyncioHost(lifetime, asyncio.get_running_loop())
    await asyncio_host.open()
    return asyncio_host


class TrioHost:
    """The bridge in the caller's own trio run."""

    def __init__(self, lifetime: AbstractAsyncContextManager[object]) -> None:
        self._lifetime = lifetime

    async def open(self) -> None:
        await self._lifetime.__aenter__()

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        return await fn(*args)

    def sync(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    async def call_tool(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        return await tool.call(arguments)

    def listener(self, fn: Callable[[str], object]) -> Callable[[str], None]:
        return _guarded(fn)

    async def close(self) -> None:
        await self._lifetime.__aexit__(None, None, None)


class ThreadHost:
    """The bridge held open in a :class:`TrioThread`, for callers outside it.

    :meth:`open_blocking` and :meth:`close_blocking` serve sync callers; :class:`AsyncioHost`
    adds the asyncio side.
    """

    def __init__(self, lifetime: Lifetime) -> None:
        self._lifetime = lifetime
        self.thread = TrioThread()
        self._closing: trio.Event | None = None
        self._closed: concurrent.futures.Future[None] = concurrent.futures.Future()

    def open_blocking(self) -> None:
        """Start the thread and open the bridge in it; raises what opening raised."""
        self.thread.start()
        opened: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.thread.submit(self._hold, opened, done=self._held)
        try:
            opened.result()
        except BaseException:
            self.thread.stop()
            raise

    async def _hold(self, opened: concurrent.futures.Future[None]) -> None:
        self._closing = trio.Event()
        try:
            async with self._lifetime():
                opened.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    def _held(self, result: outcome.Outcome[None]) -> None:
        if isinstance(result, outcome.Error):
            self._closed.set_exception(result.error)
        else:
            self._closed.set_result(None)

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if self.thread.in_thread():
            return await fn(*args)
        raise ScriptBridgeError("this bridge belongs to a SyncBridge: call it through that")

    def sync(self, fn: Callable[..., T], *args: Any) -> T:
        if self.thread.in_thread():
            return fn(*args)
        return trio.from_thread.run_sync(fn, *args, trio_token=self.thread.token)

    def call_blocking(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        return self.thread.call(fn, *args)

    async def call_tool(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        return await tool.call(arguments)

    def listener(self, fn: Callable[[str], object]) -> Callable[[str], None]:
        return _guarded(fn)

    async def close(self) -> None:
        raise ScriptBridgeError("this bridge belongs to a SyncBridge: close that")

    def close_blocking(self) -> None:
        """Close the bridge in its thread, wait for it, and stop the thread."""
        closing = self._closing
        if closing is not None:
            with contextlib.suppress(trio.RunFinishedError):
                self.thread.token.run_sync_soon(closing.set)
            with contextlib.suppress(BaseException):
                self._closed.result()
        self.thread.stop()


class AsyncioHost(ThreadHost):
    """The bridge in a trio thread, its calls awaited on the host's asyncio ``loop``."""

    def __init__(self, lifetime: Lifetime, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(lifetime)
        self.loop = loop

    async def open(self) -> None:
        await self.loop.run_in_executor(None, self.open_blocking)

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if self.thread.in_thread():
            return await fn(*args)
        return await self.thread.call_from_asyncio(fn, *args)

    async def call_tool(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """A host tool whose function is a coroutine function runs on the host's loop (it may
        use the host's asyncio clients, locks and sessions); every other tool here."""
        if isinstance(tool, PythonTool) and tool.is_coroutine:
            return await run_on_loop(self.loop, tool.call(arguments))
        return await tool.call(arguments)

    def listener(self, fn: Callable[[str], object]) -> Callable[[str], None]:
        guarded, loop = _guarded(fn), self.loop

        def soon(text: str) -> None:
            with contextlib.suppress(RuntimeError):  # the host's loop is closed: nobody hears
                loop.call_soon_threadsafe(guarded, text)

        return soon

    async def close(self) -> None:
        await self.loop.run_in_executor(None, self.close_blocking)


def _guarded(fn: Callable[[str], object]) -> Callable[[str], None]:
    """``fn``, whose exceptions are logged and dropped."""

    def call(text: str) -> None:
        try:
            fn(text)
        except Exception:
            log.warning("a run's on_output callback raised", exc_info=True)

    return call
