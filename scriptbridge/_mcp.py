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

The SDK's dispatcher and transports live in :mod:`scriptbridge._mcp_connection` and
:mod:`scriptbridge._mcp_stdio`, imported when the first server opens: a host that runs scripts
without a tool server never loads them.

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

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol, TextIO

import anyio

from sandbox.protocol import DEFAULT_FRAME_LIMIT

from ._exceptions import ToolServerError

if TYPE_CHECKING:
    from ._mcp_connection import Connection, ProgressReport
    from ._mcp_stdio import ProcessWatch, Streams

__all__ = ["McpServer", "ToolServerError", "progress_reporter"]

log = logging.getLogger("scriptbridge.mcp")

PROTOCOL_VERSION: Final = "2025-11-25"
MAX_TOOL_PAGES: Final = 100
MAX_TOOLS_PER_SERVER: Final = 1000
"""Tools one server may offer; the rest of its list is left out (and logged), so the tool names
every run's ``start`` message carries stay bounded."""
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
"""A tool name as MCP allows it (1 to 128 of ASCII letters, digits, ``_``, ``-`` and ``.``):
what a script can pass to ``call_tool``. Other names are left out when a server lists them."""
CLOSE_GRACE_S: Final = 2.0
"""How long :meth:`McpServer.aclose` lets cancelled calls tell the server before it stops it."""

progress_reporter: ContextVar[ProgressReport | None] = ContextVar(
    "scriptbridge_progress_reporter", default=None
)
"""Where the progress of a ``tools/call`` made in this context goes (set by a run's services)."""


class _Starter(Protocol):
    """A trio nursery or an anyio task group: what :meth:`McpServer.open` starts tasks in."""

    async def start(self, fn: Callable[..., Any], *args: Any) -> Any: ...


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
        max_line_bytes: int = DEFAULT_FRAME_LIMIT,
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
        self._connection: Connection | None = None
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
            from ._mcp_connection import http_transport

            return http_transport(self.url, self.headers, self.max_line_bytes)
        from ._mcp_stdio import stdio_transport

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

    async def _connected(self) -> Connection:
        async with self._starting:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            if self._starter is None or self._closed:
                raise ToolServerError(f"server {self.name!r} isn't open")
            if connection is not None:
                self.restarts += 1
                log.warning("server %r stopped; starting it again", self.name)
            from ._mcp_connection import Connection  # the SDK, loaded with the first server

            connection = Connection(
                self.name,
                self._transport,
                stdio=self.url is None,
                on_list_changed=self._relist,
            )
            await self._starter.start(connection.run)
            try:
                await self._handshake(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
            return connection

    async def _handshake(self, connection: Connection) -> None:
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

    async def _relist(self, connection: Connection) -> None:
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

    async def _list_tools(self, connection: Connection) -> None:
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
