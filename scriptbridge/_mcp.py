"""Tool servers over stdio, read raw: ``McpServer``.

The ``mcp`` SDK's ``ClientSession`` validates every ``tools/call`` result against its typed
models: it refuses an MCPL reference (a ``resource`` block with a top-level ``uri``) and silently
drops unknown fields such as ``disposition`` from a ``resource_link``, and a dropped ``never``
would let a payload through. So this module keeps the SDK's stdio transport (``stdio_client``,
which runs under trio through anyio and carries JSON-RPC envelopes whose ``result`` is a plain
dict) and puts a small session of its own on top: ``initialize``, ``tools/list``,
``tools/call``, ``resources/read`` and ``ping``, with request ids and timeouts. Results are
returned exactly as the server sent them, for the registry to ingest and the renderer to show.

Guarantees:

- A server is untrusted. Nothing it sends raises out of this module except as
  :class:`ToolServerError` (a clear one-line reason); a malformed line is logged and skipped.
- A request that gets no answer within its timeout fails with :class:`ToolServerError`, and the
  server is told with ``notifications/cancelled``.
- A server that exits or crashes fails every pending request at once; the next request starts
  it again (a fresh process and handshake), so one crash costs the calls in flight, not later
  ones.
- :meth:`McpServer.aclose` stops the server process and waits for it (the SDK's transport
  terminates, then kills, a server that won't exit).
- Requests from the server to the client are answered: ``ping`` with an empty result, anything
  else with "method not found" (this client offers no sampling, roots or elicitation).
"""

from __future__ import annotations

import itertools
import logging
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, TextIO

import anyio
import trio
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from ._exceptions import ToolServerError

__all__ = ["McpServer", "ToolServerError"]

log = logging.getLogger("scriptbridge.mcp")

PROTOCOL_VERSION: Final = "2025-11-25"
MAX_TOOL_PAGES: Final = 100
MAX_TOOLS_PER_SERVER: Final = 1000
"""Tools one server may offer; the rest of its list is left out (and logged), so the tool names
every run's ``start`` message carries stay bounded."""
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
"""A tool name as MCP allows it (1 to 128 of ASCII letters, digits, ``_``, ``-`` and ``.``):
what a script can pass to ``call_tool``. Other names are left out when a server lists them."""
METHOD_NOT_FOUND: Final = -32601


class _Connection:
    """One running server process and its pending requests; never restarted."""

    def __init__(self, server: McpServer) -> None:
        self._server = server
        self._ids = itertools.count(1)
        self._pending: dict[int, trio.MemorySendChannel[tuple[bool, Any]]] = {}
        self._write: Any = None
        self._scope = trio.CancelScope()
        self.alive = False
        self.finished = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the transport until the server exits or :meth:`close`; never raises after start."""
        params = StdioServerParameters(
            command=self._server.command,
            args=list(self._server.args),
            env=dict(self._server.env) if self._server.env is not None else None,
        )
        started = False
        with self._scope:
            try:
                async with stdio_client(params, errlog=self._server.errlog) as (read, write):
                    self._write = write
                    self.alive = True
                    task_status.started()
                    started = True
                    async for item in read:
                        await self._dispatch(item)
            except Exception as exc:
                if not started:
                    raise ToolServerError(
                        f"couldn't start server {self._server.name!r}: {exc}"
                    ) from exc
                log.warning("server %r: transport failed: %r", self._server.name, exc)
            finally:
                self.alive = False
                for channel in self._pending.values():
                    channel.close()
                self._pending.clear()
                self.finished.set()
        if started:
            log.info("server %r exited", self._server.name)

    def close(self) -> None:
        """Stop the transport; the SDK then stops the server process (shielded, bounded)."""
        self._scope.cancel()

    async def _dispatch(self, item: SessionMessage | Exception) -> None:
        if isinstance(item, Exception):
            log.warning("server %r sent a line that isn't JSON-RPC: %s", self._server.name, item)
            return
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            channel = self._pending.get(message.id) if isinstance(message.id, int) else None
            if channel is None:
                log.warning("server %r answered an unknown id %r", self._server.name, message.id)
                return
            outcome = (
                (True, message.result)
                if isinstance(message, JSONRPCResponse)
                else (False, message.error.message)
            )
            try:
                channel.send_nowait(outcome)
            except (trio.WouldBlock, trio.ClosedResourceError):
                log.warning("server %r answered id %r twice", self._server.name, message.id)
        elif isinstance(message, JSONRPCRequest):
            if message.method == "ping":
                reply: JSONRPCResponse | JSONRPCError = JSONRPCResponse(
                    jsonrpc="2.0", id=message.id, result={}
                )
            else:
                reply = JSONRPCError(
                    jsonrpc="2.0",
                    id=message.id,
                    error=ErrorData(code=METHOD_NOT_FOUND, message="method not found"),
                )
            await self._write.send(SessionMessage(reply))

    async def request(self, method: str, params: dict[str, Any], timeout_s: float) -> Any:
        """Send one request and return its ``result`` as sent; raises ToolServerError."""
        if not self.alive:
            raise ToolServerError(f"server {self._server.name!r} isn't running")
        request_id = next(self._ids)
        send, receive = trio.open_memory_channel[tuple[bool, Any]](1)
        self._pending[request_id] = send
        try:
            with trio.move_on_after(timeout_s) as deadline:
                await self._write.send(
                    SessionMessage(
                        JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
                    )
                )
                ok, value = await receive.receive()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ToolServerError(f"server {self._server.name!r} isn't running") from exc
        except trio.EndOfChannel:
            raise ToolServerError(
                f"server {self._server.name!r} exited before it answered {method}"
            ) from None
        finally:
            self._pending.pop(request_id, None)
        if deadline.cancelled_caught:
            await self._notify_cancelled(request_id)
            raise ToolServerError(
                f"server {self._server.name!r} didn't answer {method} within {timeout_s:g} s"
            )
        if not ok:
            raise ToolServerError(f"server {self._server.name!r} refused {method}: {value}")
        return value

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._write.send(
            SessionMessage(JSONRPCNotification(jsonrpc="2.0", method=method, params=params))
        )

    async def _notify_cancelled(self, request_id: int) -> None:
        with trio.move_on_after(1):
            try:
                await self.notify(
                    "notifications/cancelled", {"requestId": request_id, "reason": "timeout"}
                )
            except Exception:
                log.debug("server %r: couldn't send the cancellation", self._server.name)


class McpServer:
    """An MCP or MCPL tool server, started as a subprocess and spoken to over stdio, raw.

    Args:
        command: the executable to start.
        args: its arguments.
        name: the server's id; its tools appear to scripts as ``<name>.<tool>``.
        env: extra environment variables, merged over the SDK's minimal default
            environment (``HOME``, ``PATH`` and the like; never the host's whole environment).
        timeout_s: how long any one request may take before it fails.
        errlog: where the server's stderr goes (a file with a ``fileno``).

    Open it with :meth:`open` inside a trio nursery that outlives its calls (the ``Bridge`` does
    this), and close it with :meth:`aclose`.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        name: str = "server",
        env: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 60.0,
        errlog: TextIO = sys.stderr,
    ) -> None:
        self.command = command
        self.args = tuple(args)
        self.name = name
        self.env = env
        self.timeout_s = timeout_s
        self.errlog = errlog
        self.tools: dict[str, dict[str, Any]] = {}
        self.restarts = 0
        self._nursery: trio.Nursery | None = None
        self._connection: _Connection | None = None
        self._starting = trio.Lock()

    async def open(self, nursery: trio.Nursery) -> None:
        """Start the server in ``nursery``, shake hands and list its tools.

        Raises :class:`ToolServerError` when it can't be started or won't shake hands; the
        process is stopped before this raises.
        """
        self._nursery = nursery
        await self._connected()

    async def aclose(self) -> None:
        """Stop the server; when this returns its process has been stopped and reaped."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
            with trio.CancelScope(shield=True):
                await connection.finished.wait()  # the transport's shutdown is bounded

    async def call_tool(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call one tool and return its result exactly as the server sent it (a dict)."""
        result = await self._request("tools/call", {"name": tool, "arguments": dict(arguments)})
        if not isinstance(result, dict):
            raise ToolServerError(f"server {self.name!r} sent a tool result that isn't an object")
        return result

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """Read a resource (``resources/read``) and return its result as sent."""
        result = await self._request("resources/read", {"uri": uri})
        if not isinstance(result, dict):
            raise ToolServerError(f"server {self.name!r} sent a resource that isn't an object")
        return result

    async def ping(self) -> None:
        """Check that the server answers."""
        await self._request("ping", {})

    async def _request(self, method: str, params: dict[str, Any]) -> Any:
        connection = await self._connected()
        return await connection.request(method, params, self.timeout_s)

    async def _connected(self) -> _Connection:
        async with self._starting:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            if self._nursery is None:
                raise ToolServerError(f"server {self.name!r} isn't open")
            if connection is not None:
                self.restarts += 1
                log.warning("server %r stopped; starting it again", self.name)
            connection = _Connection(self)
            await self._nursery.start(connection.run)
            try:
                await self._handshake(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
            return connection

    async def _handshake(self, connection: _Connection) -> None:
        await connection.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "scriptbridge", "version": "0.1"},
            },
            self.timeout_s,
        )
        await connection.notify("notifications/initialized")
        tools: dict[str, dict[str, Any]] = {}
        left_out: dict[str, int] = {}
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor else {}
            page = await connection.request("tools/list", params, self.timeout_s)
            listed = page.get("tools") if isinstance(page, dict) else None
            for tool in listed if isinstance(listed, list) else []:
                reason = self._unusable(tool, tools)
                if reason is None:
                    tools[tool["name"]] = tool
                else:
                    left_out[reason] = left_out.get(reason, 0) + 1
            cursor = page.get("nextCursor") if isinstance(page, dict) else None
            if not isinstance(cursor, str) or not cursor:
                break
        for reason, count in left_out.items():
            log.warning("server %r: left out %d listed tool(s): %s", self.name, count, reason)
        self.tools = tools

    @staticmethod
    def _unusable(tool: object, kept: Mapping[str, object]) -> str | None:
        """Why a listed tool is left out, or ``None`` when it is kept."""
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return "not a tool with a string name"
        name = tool["name"]
        if not TOOL_NAME.fullmatch(name):
            shown = repr(name[:40]) + ("..." if len(name) > 40 else "")
            return (
                "names MCP doesn't allow (1-128 of A-Z a-z 0-9 _ - .), such as "
                f"{shown} of {len(name)} characters"
            )
        if name in kept:
            return "names listed twice (the first is kept)"
        if len(kept) >= MAX_TOOLS_PER_SERVER:
            return f"past the first {MAX_TOOLS_PER_SERVER} tools"
        return None
