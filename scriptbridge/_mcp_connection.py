"""One live connection to a tool server: its transport and the ``mcp`` SDK's dispatcher.

:class:`Connection` is what :class:`scriptbridge._mcp.McpServer` opens each time it starts a
server (never restarted: a new one replaces it). This module is the only one of the client's
that imports the SDK's dispatcher and transports, and :mod:`scriptbridge._mcp` imports it only
when a server is opened, so a host that runs scripts without a tool server never loads the SDK.
The guarantees are :mod:`scriptbridge._mcp`'s.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

import anyio
import anyio.abc
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import CallOptions, DispatchContext
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND, REQUEST_TIMEOUT

from ._exceptions import ToolServerError
from ._mcp_stdio import ProcessWatch, Streams, server_logger, shown

__all__ = ["Connection", "ProgressReport", "http_transport"]

EXIT_WAIT_S: Final = 2.0
"""How long a server whose connection closed as it started is given to exit, so its exit
status and last words can be said."""
PROGRESS_MESSAGE_CHARS: Final = 200
LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

ProgressReport = Callable[[float, "float | None", "str | None"], None]
"""Takes a call's progress: ``report(progress, total, message)``."""

OpenTransport = Callable[["ProcessWatch | None"], AbstractAsyncContextManager[Streams]]
"""Opens a server's transport (a stdio server's reports to the watch it is given)."""


class _OneLine(logging.Filter):
    """Keeps the SDK's transport logs to one line: a traceback becomes its exception's text."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {shown(type(error).__name__ + ': ' + str(error))}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


for _name in ("mcp.client.streamable_http", "mcp.shared.jsonrpc_dispatcher"):
    logging.getLogger(_name).addFilter(_OneLine())


for _name in ("mcp.client.streamable_http", "mcp.shared.jsonrpc_dispatcher"):
    logging.getLogger(_name).addFilter(_OneLine())


class Connection:
    """One transport session with a server and its dispatcher; never restarted.

    Args:
        name: the server's name (for errors and logs).
        open_transport: opens the transport; given a :class:`ProcessWatch` for a stdio server
            (``stdio=True``), ``None`` for an HTTP one.
        on_list_changed: awaited with this connection on
            ``notifications/tools/list_changed``.
    """

    def __init__(
        self,
        name: str,
        open_transport: OpenTransport,
        *,
        stdio: bool,
        on_list_changed: Callable[[Connection], Awaitable[None]],
    ) -> None:
        self.name = name
        self._open_transport = open_transport
        self._stdio = stdio
        self._on_list_changed = on_list_changed
        self._log = server_logger(name)
        self._closed_on: str | None = None
        """The method a request was waiting on when the transport ended, if one was."""
        self.dispatcher: JSONRPCDispatcher[TransportContext] | None = None
        self.calls: set[anyio.CancelScope] = set()
        self._scope = anyio.CancelScope()
        self.alive = False
        self.finished = anyio.Event()
        self.watch: ProcessWatch | None = None
        """What a stdio server's process did (for the words of its failure to start)."""

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the transport until it ends or :meth:`close`; raises only before it started."""
        started = False
        self.watch = ProcessWatch() if self._stdio else None
        with self._scope:
            try:
                async with self._open_transport(self.watch) as (read, write):
                    dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                        read, write, on_stream_exception=self._stream_exception
                    )

                    async def pump(*, task_status: anyio.abc.TaskStatus[None]) -> None:
                        try:
                            await dispatcher.run(
                                self._on_request, self._on_notify, task_status=task_status
                            )
                        finally:
                            self.alive = False  # before any waiter it woke can call again

                    async with anyio.create_task_group() as tasks:
                        await tasks.start(pump)
                        self.dispatcher = dispatcher
                        self.alive = True
                        task_status.started()
                        started = True
            except Exception as exc:
                if not started:
                    raise ToolServerError(
                        f"couldn't start server {self.name!r}: {_reason(exc)}"
                    ) from exc
                self._log.warning("server %r: its connection failed: %s", self.name, _reason(exc))
            finally:
                self.alive = False
                self.finished.set()
        if started:
            self._log.info("server %r: connection ended", self.name)

    def close(self) -> None:
        """Stop the transport (it then stops the server process, shielded and bounded)."""
        self._scope.cancel()

    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        timeout_s: float,
        on_progress: ProgressReport | None = None,
    ) -> dict[str, Any]:
        """Send one request and return its ``result`` as sent; raises ToolServerError."""
        name = self.name
        if not self.alive or self.dispatcher is None:
            raise ToolServerError(f"server {name!r} isn't running")
        options: CallOptions = {"timeout": timeout_s, "cancel_on_abandon": method != "initialize"}
        if on_progress is not None:
            report = on_progress

            async def progressed(progress: float, total: float | None, message: str | None) -> None:
                report(
                    progress, total, None if message is None else message[:PROGRESS_MESSAGE_CHARS]
                )

            options["on_progress"] = progressed
        scope = anyio.CancelScope()
        self.calls.add(scope)
        started = time.monotonic()
        try:
            with scope:
                try:
                    result = await self.dispatcher.send_raw_request(method, params, options)
                    return _complete(name, method, result)
                except MCPError as exc:
                    raise self._failure(
                        method, exc, time.monotonic() - started, timeout_s
                    ) from None
        finally:
            self.calls.discard(scope)
        raise ToolServerError(f"server {name!r} was closed before it answered {method}")

    def _failure(
        self, method: str, exc: MCPError, elapsed_s: float, timeout_s: float
    ) -> ToolServerError:
        name = self.name
        if exc.code == REQUEST_TIMEOUT and elapsed_s >= timeout_s:
            return ToolServerError(f"server {name!r} didn't answer {method} within {timeout_s:g} s")
        if method == "initialize" and exc.code == METHOD_NOT_FOUND:
            return ToolServerError(
                f"server {name!r} doesn't speak MCP: it answered initialize with 'method not "
                "found', as a command that echoes what it reads does (every MCP server knows "
                "initialize)"
            )
        if exc.code == CONNECTION_CLOSED:  # the transport ended (or the SDK's says why)
            self.alive = False  # the next request starts the server again
            self._closed_on = method
            why = "" if exc.message == "Connection closed" else f" ({shown(exc.message, 200)})"
            return ToolServerError(
                f"server {name!r} exited or closed its connection before it answered {method}{why}"
            )
        return ToolServerError(f"server {name!r} refused {method}: {shown(str(exc.message))}")

    async def start_failure(self, failed: ToolServerError) -> ToolServerError:
        """``failed`` (the handshake's), in the words of what the server's process did: how it
        exited, the last of its stderr, whether its stdout was MCP at all."""
        watch = self.watch
        if watch is None or self._closed_on != "initialize":
            return failed
        exited = await watch.wait_ended(EXIT_WAIT_S)
        if not exited and not watch.not_mcp:
            return failed
        name = self.name
        said = f"server {name!r} {watch.exit()} before it answered initialize"
        if watch.not_mcp:
            count = watch.not_mcp
            what = (
                "line of its stdout wasn't an MCP message"
                if count == 1
                else "lines of its stdout weren't MCP messages"
            )
            said = (
                f"server {name!r} doesn't speak MCP: it {watch.exit()} before it answered "
                f"initialize, and {count} {what}"
            )
        if watch.last_words():
            said += f"; its last stderr lines: {watch.last_words()}"
        return ToolServerError(said)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.notify(method, params)

    async def _on_request(
        self, ctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method == "ping":
            return {}
        raise MCPError(code=METHOD_NOT_FOUND, message="method not found")

    async def _on_notify(
        self, ctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> None:
        if method == "notifications/tools/list_changed":
            await self._on_list_changed(self)
        elif method == "notifications/message":
            self._log_message(params or {})

    def _log_message(self, params: Mapping[str, Any]) -> None:
        level = params.get("level")
        data = params.get("data")
        logger = params.get("logger")
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        where = f" ({shown(logger, 100)})" if isinstance(logger, str) else ""
        self._log.log(
            LOG_LEVELS.get(level, logging.INFO) if isinstance(level, str) else logging.INFO,
            "server %r%s: %s",
            self.name,
            where,
            shown(text),
        )

    async def _stream_exception(self, exc: Exception) -> None:
        self._log.warning("server %r: dropped a message: %s", self.name, _reason(exc))


def _ignore_progress(progress: float, total: float | None, message: str | None) -> None:
    """Progress of a call made outside any run: nobody shows it."""


INPUT_WANTED: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling: a model's completion",
    "roots/list": "roots: the client's roots",
}
"""What each request a server may ask of its client is, as an error says it."""


def _complete(name: str, method: str, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` if it is a complete result (``resultType`` absent or ``complete``); raises
    :class:`ToolServerError` for one that asks for input (``input_required``, SEP-2322: this
    client answers no server requests, so the call can't go on), saying what the server
    wanted, and for a result type this client doesn't know."""
    kind = result.get("resultType")
    if kind is None or kind == "complete":
        return result
    if kind != "input_required":
        return_type = shown(repr(kind), 60)
        raise ToolServerError(
            f"server {name!r} answered {method} with a result of type {return_type}, which "
            "this client doesn't read"
        )
    requests = result.get("inputRequests")
    wanted: list[str] = []
    for request in list(requests.values())[:3] if isinstance(requests, dict) else []:
        asked = request.get("method") if isinstance(request, dict) else None
        what = INPUT_WANTED.get(asked, shown(repr(asked), 60)) if isinstance(asked, str) else "?"
        params = request.get("params") if isinstance(request, dict) else None
        message = params.get("message") if isinstance(params, dict) else None
        wanted.append(f"{what}: {shown(repr(message), 300)}" if isinstance(message, str) else what)
    said = "; ".join(wanted) or "it didn't say what"
    raise ToolServerError(
        f"server {name!r} asked for input ({said}) to finish {method}, and this client gives "
        "none: call it with the arguments it needs, or use it from a client that can answer"
    )


def _reason(exc: BaseException) -> str:
    """A one-line reason for ``exc`` (the first of a group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return shown(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 300)


@asynccontextmanager
async def http_transport(
    url: str, headers: Mapping[str, str], max_event_bytes: int
) -> AsyncIterator[Streams]:
    """The SDK's streamable HTTP transport on a client of our own (headers, timeouts)."""
    client = httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(30.0, read=300.0))
    async with (
        client,
        streamable_http_client(
            url, http_client=client, max_sse_event_size=max_event_bytes
        ) as streams,
    ):
        yield streams
