"""Tool servers, over stdio or streamable HTTP, read raw: ``McpServer``.

The ``mcp`` SDK's ``ClientSession`` validates every ``tools/call`` result against its typed
models: it refuses an MCPL reference (a ``resource`` block with a top-level ``uri``) and silently
drops unknown fields such as ``disposition`` from a ``resource_link``, and a dropped ``never``
would let a payload through. So this module uses the SDK one layer down, where results are
plain dicts:

- ``mcp.shared.jsonrpc_dispatcher.JSONRPCDispatcher`` (``send_raw_request`` and ``notify``)
  carries request ids, per-request timeouts, ``notifications/cancelled`` for a request that
  timed out or whose caller was cancelled (a shielded, bounded write), ``progressToken`` and
  ``notifications/progress`` routing, answers to the server's own requests, and the
  ``CONNECTION_CLOSED`` failure of every waiter when the transport ends. It writes only valid
  JSON-RPC (no ``"params": null``), and hands back each ``result`` as the dict the server sent.
- Streamable HTTP: the SDK's ``streamable_http_client`` as it is (SSE events bounded by
  ``max_sse_event_size``, set to this server's line bound).
- stdio: :mod:`scriptbridge._mcp_stdio`, our own reader (the SDK's ``stdio_client`` can't bound
  a line or survive a byte that isn't UTF-8; that module says why), under the same dispatcher.

The SDK is pinned to ``mcp>=2.3,<2.4`` (and ``mcp-types`` with it) in ``pyproject.toml``: the
dispatcher's lifecycle surface is provisional in 2.x.

Guarantees:

- A server is untrusted. Nothing it sends raises out of this module except as
  :class:`ToolServerError` (a clear one-line reason). A line or message that is too long, isn't
  UTF-8, isn't JSON or isn't JSON-RPC is dropped with one log line and the server keeps working.
- A request that gets no answer within ``timeout_s`` fails with :class:`ToolServerError`. A
  request abandoned for any reason (its timeout, its caller's cancellation, a run's wall time,
  :meth:`McpServer.aclose`) is cancelled at the server with ``notifications/cancelled``.
- A server whose transport ends (it exited, crashed or closed its stdout; an HTTP connection
  failed) fails every request in flight at once; the next request starts it again (a fresh
  process or HTTP session, and a fresh handshake), so one crash costs the calls in flight.
- ``notifications/tools/list_changed`` lists the server's tools again; :attr:`McpServer.tools`
  then holds the new list, and each callback given to :meth:`McpServer.on_tools_changed` is
  called with the server.
- Each ``tools/call`` carries a ``progressToken``; the server's ``notifications/progress`` for
  it reach the reporter in :data:`progress_reporter` at the time of the call.
- ``notifications/message`` goes to logging under ``scriptbridge.mcp.<server>`` at its level;
  a stdio server's stderr goes there too (at ``INFO``).
- Requests from the server are answered: ``ping`` with an empty result, anything else with
  "method not found" (this client offers no sampling, roots or elicitation).
- :meth:`McpServer.aclose` cancels the calls in flight, then stops the server; when it returns
  the process has been stopped and reaped (or the HTTP session ended).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from typing import Any, Final, Protocol, TextIO

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
from ._mcp_stdio import (
    MAX_LINE_BYTES,
    ProcessWatch,
    Streams,
    server_logger,
    shown,
    stdio_transport,
)

__all__ = ["MAX_LINE_BYTES", "McpServer", "ProgressReport", "ToolServerError", "progress_reporter"]

log = logging.getLogger("scriptbridge.mcp")

PROTOCOL_VERSION: Final = "2025-11-25"
MAX_TOOL_PAGES: Final = 100
MAX_TOOLS_PER_SERVER: Final = 1000
"""Tools one server may offer; the rest of its list is left out (and logged), so the tool names
every run's ``start`` message carries stay bounded."""
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
"""A tool name as MCP allows it (1 to 128 of ASCII letters, digits, ``_``, ``-`` and ``.``):
what a script can pass to ``call_tool``. Other names are left out when a server lists them."""
EXIT_WAIT_S: Final = 2.0
"""How long a server whose connection closed as it started is given to exit, so its exit
status and last words can be said."""
CLOSE_GRACE_S: Final = 2.0
"""How long :meth:`McpServer.aclose` lets cancelled calls tell the server before it stops it."""
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

progress_reporter: ContextVar[ProgressReport | None] = ContextVar(
    "scriptbridge_progress_reporter", default=None
)
"""Where the progress of a ``tools/call`` made in this context goes (set by a run's services)."""


class _Starter(Protocol):
    """A trio nursery or an anyio task group: what :meth:`McpServer.open` starts tasks in."""

    async def start(self, fn: Callable[..., Any], *args: Any) -> Any: ...


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


class _Connection:
    """One transport session with a server and its dispatcher; never restarted."""

    def __init__(self, server: McpServer) -> None:
        self._server = server
        self._log = server_logger(server.name)
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
        self.watch = ProcessWatch() if self._server.url is None else None
        with self._scope:
            try:
                async with self._server._transport(self.watch) as (read, write):
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
                        f"couldn't start server {self._server.name!r}: {_reason(exc)}"
                    ) from exc
                self._log.warning(
                    "server %r: its connection failed: %s", self._server.name, _reason(exc)
                )
            finally:
                self.alive = False
                self.finished.set()
        if started:
            self._log.info("server %r: connection ended", self._server.name)

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
        name = self._server.name
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
                    return await self.dispatcher.send_raw_request(method, params, options)
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
        name = self._server.name
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
            why = "" if exc.message == "Connection closed" else f" ({shown(exc.message, 200)})"
            return ToolServerError(
                f"server {name!r} exited or closed its connection before it answered {method}{why}"
            )
        return ToolServerError(f"server {name!r} refused {method}: {shown(str(exc.message))}")

    async def start_failure(self, failed: ToolServerError) -> ToolServerError:
        """``failed`` (the handshake's), in the words of what the server's process did: how it
        exited, the last of its stderr, whether its stdout was MCP at all."""
        watch = self.watch
        if watch is None or "exited or closed its connection" not in str(failed):
            return failed
        exited = await watch.wait_ended(EXIT_WAIT_S)
        if not exited and not watch.not_mcp:
            return failed
        name = self._server.name
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
            await self._server._relist(self)
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
            self._server.name,
            where,
            shown(text),
        )

    async def _stream_exception(self, exc: Exception) -> None:
        self._log.warning("server %r: dropped a message: %s", self._server.name, _reason(exc))


class McpServer:
    """An MCP or MCPL tool server, started as a subprocess and spoken to over stdio, raw.

    Args:
        command: the executable to start.
        args: its arguments.
        name: the server's id; its tools appear to scripts as ``<name>.<tool>``.
        env: extra environment variables, merged over the SDK's minimal default
            environment (``HOME``, ``PATH`` and the like; never the host's whole environment).
        timeout_s: how long any one request may take before it fails.
        errlog: a file for the server's stderr; by default each line goes to logging
            (``scriptbridge.mcp.<name>``, ``INFO``).
        max_line_bytes: the longest line (stdio) or event (HTTP) read from the server; a longer
            one is dropped and logged. 16 MiB, the channel's frame limit, by default.

    :meth:`http` connects a streamable HTTP server instead. Open it with :meth:`open` inside a
    trio nursery that outlives its calls (the ``Bridge`` does this), and close it with
    :meth:`aclose`.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        name: str = "server",
        env: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 60.0,
        errlog: TextIO | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.command = command
        self.args = tuple(args)
        self.name = name
        self.env = env
        self.timeout_s = timeout_s
        self.errlog = errlog
        self.max_line_bytes = max_line_bytes
        self.url: str | None = None
        self.headers: dict[str, str] = {}
        self.tools: dict[str, dict[str, Any]] = {}
        self.restarts = 0
        self._starter: _Starter | None = None
        self._connection: _Connection | None = None
        self._closed = False
        self._starting = anyio.Lock()
        self._listing = anyio.Lock()
        self._relist_wanted = False
        self._listeners: list[Callable[[McpServer], None]] = []

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> McpServer:
        """A streamable HTTP server at ``url`` (the SDK's client transport), with ``headers``
        sent on every request (an ``Authorization`` header, say).

        The host's own configured servers are trusted to be where the host says: the fetcher's
        network policy (which refuses loopback and private addresses for payloads) does not
        apply to them, so ``http://127.0.0.1:8000/mcp`` works without ``fetch_allow``.
        """
        server = cls(url, name=name, timeout_s=timeout_s)
        server.url = url
        server.headers = dict(headers or {})
        return server

    def _transport(self, watch: ProcessWatch | None = None) -> AbstractAsyncContextManager[Streams]:
        if self.url is not None:
            return _http_transport(self.url, self.headers, self.max_line_bytes)
        return stdio_transport(
            self.command,
            self.args,
            self.env,
            name=self.name,
            max_line_bytes=self.max_line_bytes,
            errlog=self.errlog,
            watch=watch,
        )

    def on_tools_changed(self, callback: Callable[[McpServer], None]) -> None:
        """Call ``callback(server)`` each time the server's tools were listed again (after
        ``notifications/tools/list_changed`` or a restart)."""
        self._listeners.append(callback)

    async def open(self, nursery: _Starter) -> None:
        """Start the server in ``nursery``, shake hands and list its tools.

        Raises :class:`ToolServerError` when it can't be started or won't shake hands; the
        process is stopped before this raises.
        """
        self._starter = nursery
        self._closed = False
        self._starting = anyio.Lock()  # made here, on the loop that serves the server
        self._listing = anyio.Lock()
        await self._connected()

    async def aclose(self) -> None:
        """Cancel the calls in flight (each is cancelled at the server), then stop the server;
        when this returns its process has been stopped and reaped."""
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is None:
            return
        for scope in list(connection.calls):
            scope.cancel()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(CLOSE_GRACE_S):
                while connection.calls:
                    await anyio.sleep(0.005)
            connection.close()
            await connection.finished.wait()  # the transport's shutdown is bounded

    async def call_tool(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call one tool and return its result exactly as the server sent it (a dict)."""
        report = progress_reporter.get()
        connection = await self._connected()
        return await connection.request(
            "tools/call",
            {"name": tool, "arguments": dict(arguments)},
            self.timeout_s,
            report if report is not None else _ignore_progress,
        )

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """Read a resource (``resources/read``) and return its result as sent."""
        connection = await self._connected()
        return await connection.request("resources/read", {"uri": uri}, self.timeout_s)

    async def ping(self) -> None:
        """Check that the server answers."""
        connection = await self._connected()
        await connection.request("ping", {}, self.timeout_s)

    async def _connected(self) -> _Connection:
        async with self._starting:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            if self._starter is None or self._closed:
                raise ToolServerError(f"server {self.name!r} isn't open")
            if connection is not None:
                self.restarts += 1
                log.warning("server %r stopped; starting it again", self.name)
            connection = _Connection(self)
            await self._starter.start(connection.run)
            try:
                await self._handshake(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
            return connection

    async def _handshake(self, connection: _Connection) -> None:
        try:
            await connection.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "scriptbridge", "version": "0.1"},
                },
                self.timeout_s,
            )
        except ToolServerError as failed:
            raise await connection.start_failure(failed) from None
        await connection.notify("notifications/initialized")
        await self._list_tools(connection)

    async def _relist(self, connection: _Connection) -> None:
        """List the tools again for ``notifications/tools/list_changed``; notices that arrive
        while a listing runs are answered by one more listing, not one each."""
        if self._listing.locked():
            self._relist_wanted = True
            return
        async with self._listing:
            self._relist_wanted = True
            while self._relist_wanted and connection.alive:
                self._relist_wanted = False
                try:
                    await self._list_tools(connection)
                except ToolServerError as exc:
                    if not self._closed:  # a listing the closing cut short is no failure
                        log.warning("server %r: couldn't list its tools again: %s", self.name, exc)
                    return

    async def _list_tools(self, connection: _Connection) -> None:
        tools: dict[str, dict[str, Any]] = {}
        left_out: dict[str, int] = {}
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor else {}
            page = await connection.request("tools/list", params, self.timeout_s)
            listed = page.get("tools")
            for tool in listed if isinstance(listed, list) else []:
                reason = self._unusable(tool, tools)
                if reason is None:
                    tools[tool["name"]] = tool
                else:
                    left_out[reason] = left_out.get(reason, 0) + 1
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        for reason, count in left_out.items():
            log.warning("server %r: left out %d listed tool(s): %s", self.name, count, reason)
        changed = tools != self.tools
        self.tools = tools
        if changed:
            for callback in self._listeners:
                callback(self)

    @staticmethod
    def _unusable(tool: object, kept: Mapping[str, object]) -> str | None:
        """Why a listed tool is left out, or ``None`` when it is kept."""
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return "not a tool with a string name"
        name = tool["name"]
        if not TOOL_NAME.fullmatch(name):
            shown_name = repr(name[:40]) + ("..." if len(name) > 40 else "")
            return (
                "names MCP doesn't allow (1-128 of A-Z a-z 0-9 _ - .), such as "
                f"{shown_name} of {len(name)} characters"
            )
        if name in kept:
            return "names listed twice (the first is kept)"
        if len(kept) >= MAX_TOOLS_PER_SERVER:
            return f"past the first {MAX_TOOLS_PER_SERVER} tools"
        return None


def _ignore_progress(progress: float, total: float | None, message: str | None) -> None:
    """Progress of a call made outside any run: nobody shows it."""


def _reason(exc: BaseException) -> str:
    """A one-line reason for ``exc`` (the first of a group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return shown(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 300)


@asynccontextmanager
async def _http_transport(
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
