"""scriptbridge as an MCP server: one tool, ``run_python``, for any MCP client ("code mode").

:class:`RunPythonServer` wraps an open :class:`~scriptbridge.Bridge` in the ``mcp`` SDK's
low-level ``Server`` and serves it over stdio under trio (the SDK runs on anyio, here on its
trio backend), or over streamable HTTP under asyncio (uvicorn). Its one tool takes ``code``,
optional ``inputs`` (an object, the script's ``inputs``) and optional ``session`` (a handle); its
description says what a script can do and carries ``bridge.tool_stubs()`` of every tool the
bridge offers, read afresh on each ``tools/list``. The upstream tools aren't offered to the
client directly: a script calls them.

A call's result is text (what the script printed, then its value or its error's type, line
and message, then the files it wrote to ``out/``), ``structuredContent`` with the whole
:class:`~scriptbridge.ScriptResult` as JSON, and ``isError`` when the run didn't end ``ok``.
Images a script's tools returned are not forwarded.

With ``expose_tools``, every tool the bridge offers is also listed beside ``run_python``, as
the bridge names it (``server.tool``), with its description and input schema and no output
schema: a call goes through :meth:`~scriptbridge.Bridge.call_tool`, so its result is ingested
first and the client gets the model's live lane of it (text and images; a never-marked
reference as its stub, never its uri or payload; no ``structuredContent``).

Guarantees:

- Over HTTP (:meth:`RunPythonServer.serve_http`), with a token every request must carry
  ``Authorization: Bearer <token>`` (compared in constant time), else 401 and nothing runs.
- One message is at most :data:`~scriptbridge._mcp_stdio.MAX_LINE_BYTES` (16 MiB) on either
  transport: over HTTP a larger body gets 413 before it is read whole; over stdio a longer
  line is dropped as it streams past (linear time, bounded memory) and the next one is read.

- At most ``max_concurrent`` runs at once; beyond that a call waits in a queue of
  ``max_queued``, and past that it fails at once with an ``isError`` result saying the server
  is busy (nothing is run).
- A client's ``notifications/cancelled`` cancels the call's task; :meth:`Bridge.run` then kills
  and reaps the child before the call ends, well within a second.
- When the client sent a progress token, ``notifications/progress`` comes every
  :data:`PROGRESS_EVERY_S` while the script runs: ``progress`` is the seconds elapsed, and the
  message says the elapsed time, the tool calls and fetches its run made so far, and the last
  line it printed.
- What a script prints comes as ``notifications/message`` at level ``info`` (logger
  ``run_python``) while it runs, in order, before the call's answer: at most every
  :data:`PRINTED_EVERY_S`, each piece at most :data:`PRINTED_PIECE_CHARS` characters. On a
  connection that opts in per request (2026-07-28 and later) only a request that opted in to
  ``info`` hears it; on older ones ``logging/setLevel`` above ``info`` silences it, for every
  client of this server (the SDK gives its handler no per-connection state).
- Every ``run_python`` call runs a step of a :class:`~scriptbridge.BridgeSession`: the one
  ``session`` names, or a new one when no ``session`` is given. ``session`` is a handle this
  server minted (:mod:`scriptbridge._handles`: 256 random bits, bound to the caller's identity,
  expiring after ``session_idle_s`` unused) and every answer carries it, in
  ``structuredContent.session`` and in the text. The caller's identity is the token's name
  (``--token-file`` lines ``NAME TOKEN``), else the MCP session (``Mcp-Session-Id``) on a
  handshake-era HTTP connection, else ``stdio`` (the one client of a stdio server) or ``http``
  (a stateless connection without a token, which only a handle's randomness keeps apart: give
  clients tokens). A handle of another identity, a made-up one and an expired one are refused
  with one error naming only ``expired`` (a handle of the caller's own that expired, or was
  closed to make room) or ``unknown``. Plain globals and top-level definitions carry from one
  successful step to the next. At most ``max_sessions`` (:data:`MAX_SESSIONS` by default) are
  open; opening one more closes the longest idle of the same caller's, or is refused with an
  error result when the caller has none idle: a caller's sessions are never closed to make
  room for another's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import itertools
import logging
import math
import os
import reprlib
import signal
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import FrameType
from typing import Any, Final

import anyio
import mcp_types as types
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from sandbox.protocol import check_plain

from ._handles import HandleRefused, Handles
from ._mcp_stdio import MAX_LINE_BYTES, READ_CHUNK, LineSplitter
from ._results import ScriptResult
from ._run_state import RunProgress
from ._serve_defaults import DESCRIBE_BUDGET, MAX_SESSIONS, SESSION_IDLE_S
from ._sessions import BridgeSession
from ._stubs import render_tool_stub
from ._supervisor import Bridge
from ._tool_search import SEARCH_LIMIT, ToolIndex, brief, index_lines

__all__ = ["MAX_SESSIONS", "PROGRESS_EVERY_S", "BearerGate", "RunPythonServer"]

# Logging (notifications/message, logging/setLevel) is deprecated as of MCP 2026-07-28, yet it
# is how every client before that hears a run's output: the SDK's warning about it, raised at
# this module's calls, is not for the user of this server.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, module=__name__)

log = logging.getLogger("scriptbridge.serve")

TOOL_NAME: Final = "run_python"
PROGRESS_EVERY_S: Final = 0.5
"""How often a run with a progress token is reported on (at least once a second)."""
ANSWER_GRACE_S: Final = 0.2
"""After a drain, how long the answers of the last calls are given to reach the client."""
GRACEFUL_SHUTDOWN_S: Final = 2
"""After a drain, the seconds uvicorn waits for open connections before it closes them."""
TOOL_LIST_TTL_MS: Final = 10_000
"""How long a client may cache ``tools/list`` (2026-07-28's ``ttlMs``): a listing is the same
for every client (``public``), and a tool server's new tools reach it within this."""
PRINTED_MAX_CHARS: Final = 20_000
"""Characters of a script's printed output put in the text content (all of it is in
``structuredContent``)."""
PRINTED_FLUSH_S: Final = 1.0
"""How long what a run printed may still be sent on once it has ended (and let go its slot)."""
VALUE_MAX_CHARS: Final = 20_000
"""Characters of a script's value's ``repr`` put in the text content (the value itself is in
``structuredContent``)."""
PRINTED_EVERY_S: Final = 0.1
"""How often printed output is sent on as ``notifications/message`` (at most)."""
PRINTED_PIECE_CHARS: Final = 16_000
"""The most characters of printed output one ``notifications/message`` carries."""
LAST_LINE_CHARS: Final = 200
"""The most characters of the last printed line a progress message shows."""
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

DESCRIPTION: Final = """\
Run a Python script in a fresh, restricted sandbox and get back what it printed and its value \
(the last expression, or a top-level `return`). Each call runs in a new process: no network, \
a private workspace, bounded time and memory. Pass `inputs` (an object) to read as `inputs` \
in the script. Every answer carries a `session` handle: pass it back as `session` to keep \
plain globals and top-level def/class/import statements from one call to the next (a \
session unused for {idle} is closed).

Inside the script, call tools with `tools.NAME(arg=...)` or `call_tool("NAME", {...})`; \
`call_tools([...])` or `await asyncio.gather(...)` calls several at once. A tool call returns \
a dict: its `data` (structured output), `content` (blocks) and `isError`. Write files to \
`out/`; they are listed in the result. `fetch(ref)` downloads a reference's payload and \
`read_text(path)` reads it. Prefer one script that calls many tools over many calls.

The tools a script can call:

"""
INDEXED: Final = """\
Too many to show here in full: each line below is one of them, with \
the first line of its description. Call search_tools(query) to see the matching ones in full \
(detail="full"), or, in a script, tools.search(query) (their stubs) and tools.describe(name).

"""
SEARCH_TOOL: Final = "search_tools"


class Busy(Exception):
    """The run queue is full."""


class TooManySessions(Exception):
    """No session can be opened: ``max_sessions`` are open and none of the caller's is idle."""


class ShuttingDown(Exception):
    """The server is draining: no new run starts."""


SHUTTING_DOWN: Final = "the server is shutting down: it starts no new runs"


class _StdinLines:
    """This process's stdin as lines, read without a thread (so a shutdown can stop the read
    at once); fd 0 itself is pointed at the null device meanwhile, as the SDK does.

    Each line costs time linear in its length and at most :data:`MAX_LINE_BYTES` of memory: a
    longer one is dropped as it streams past, with one warning, and the next is read. A last
    line with no newline is dropped (a stdio message ends with one)."""

    def __init__(self) -> None:
        self._fd = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self._splitter = LineSplitter(MAX_LINE_BYTES)
        self._ready: collections.deque[bytes] = collections.deque()

    def close(self) -> None:
        os.dup2(self._fd, 0)
        os.close(self._fd)

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        while not self._ready:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, READ_CHUNK)
            if not chunk:
                raise StopAsyncIteration
            for line in self._splitter.feed(chunk):
                if isinstance(line, int):
                    log.warning("dropped a line of %d bytes from the client (past the bound)", line)
                else:
                    self._ready.append(line)
        return self._ready.popleft().decode("utf-8", "replace")


class _StdoutWriter:
    """This process's stdout for the MCP messages, written without a thread, so a shutdown can
    stop a write that a client never reads; fd 1 itself points at stderr meanwhile, as the SDK
    does (a stray print never reaches the wire). It is what the SDK's ``stdio_server`` writes
    to: ``write`` buffers a message, ``flush`` sends it whole."""

    def __init__(self) -> None:
        self._fd = os.dup(1)
        os.set_blocking(self._fd, False)
        os.dup2(2, 1)
        self._buffer = bytearray()

    def close(self) -> None:
        os.set_blocking(self._fd, True)
        os.dup2(self._fd, 1)
        os.close(self._fd)

    async def write(self, text: str) -> None:
        self._buffer += text.encode("utf-8")

    async def flush(self) -> None:
        sent = 0
        data = memoryview(self._buffer)
        try:
            while sent < len(data):
                try:
                    sent += os.write(self._fd, data[sent:])
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)
        finally:
            data.release()
            del self._buffer[:sent]


class _Printed:
    """What one call's script printed, as it arrives: the text not yet sent on, and the last
    line that isn't blank (for the progress message)."""

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._partial = ""
        self.last_line = ""
        self.arrived = anyio.Event()
        self.ended = anyio.Event()
        self.sent = anyio.Event()
        """Set when the run has ended and all it printed has been sent on."""

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def hear(self, text: str) -> None:
        self._pending.append(text)
        *whole, partial = (self._partial + text).split("\n")
        self._partial = partial[:LAST_LINE_CHARS]
        for line in reversed([*whole, self._partial]):
            if line.strip():
                self.last_line = line[:LAST_LINE_CHARS]
                break
        self.arrived.set()

    def take(self) -> str:
        text = "".join(self._pending)
        self._pending.clear()
        self.arrived = anyio.Event()
        return text

    def end(self) -> None:
        self.ended.set()
        self.arrived.set()


class RunPythonServer:
    """The ``run_python`` MCP server over an open ``bridge`` (module doc).

    Args:
        bridge: an open :class:`~scriptbridge.Bridge`, on the loop this serves on.
        max_concurrent: runs at once.
        max_queued: calls waiting for a run slot; past it a call fails at once.
        session_idle_s: a session unused for this long is closed.
        max_sessions: sessions open at once.
        expose_tools: list the bridge's tools beside ``run_python`` (module doc).
        describe_budget: bytes of stubs ``run_python``'s description carries; past it, an index
            of the tools (name and first line each, within the budget) and ``search_tools``.
    """

    def __init__(
        self,
        bridge: Bridge,
        *,
        max_concurrent: int,
        max_queued: int,
        session_idle_s: float = SESSION_IDLE_S,
        max_sessions: int = MAX_SESSIONS,
        expose_tools: bool = False,
        unavailable: Mapping[str, str] | None = None,
        result_detail: str = "brief",
        describe_budget: int = DESCRIBE_BUDGET,
    ) -> None:
        if max_concurrent < 1 or max_queued < 0 or max_sessions < 1:
            raise ValueError("--max-concurrent and sessions must be at least 1, a queue 0")
        self.bridge = bridge
        self.max_queued = max_queued
        self.session_idle_s = session_idle_s
        self.max_sessions = max_sessions
        self._slots = anyio.Semaphore(max_concurrent)
        self._sessions: Handles[BridgeSession] = Handles(session_idle_s)
        """Each open session, by the handle minted for it (module doc)."""
        self._draining = False
        self._in_flight = 0
        self._scopes: set[anyio.CancelScope] = set()
        self.expose_tools = expose_tools
        if result_detail not in ("brief", "full"):
            raise ValueError(f"--result-detail is brief or full, not {result_detail!r}")
        self.result_detail = result_detail
        """What ``structuredContent`` holds: ``brief`` (:data:`BRIEF_FIELDS`) or ``full``."""
        self.describe_budget = describe_budget
        self.unavailable: Mapping[str, str] = {} if unavailable is None else unavailable
        """Tool servers that couldn't start, and why (a live view: ``serve`` tries them
        again), named in ``run_python``'s description."""
        self._labels = itertools.count(1)
        self._log_floor = LOG_LEVELS.index("debug")
        self.server: Server[Any] = Server(
            "scriptbridge",
            version=_installed_version(),
            cache_hints={"tools/list": CacheHint(ttl_ms=TOOL_LIST_TTL_MS, scope="public")},
            instructions="Call run_python with a script; its description lists the tools.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_set_logging_level=self._set_logging_level,
        )

    # --- serving ----------------------------------------------------------------------------

    async def serve_stdio(self, *, drain_s: float = 30.0) -> None:
        """Serve one client on this process's stdin and stdout until stdin closes or SIGTERM
        comes (then :meth:`drain` for ``drain_s``); sessions are expired meanwhile. When this
        returns, every run it started has ended and every call has had its answer."""
        lines, out = _StdinLines(), _StdoutWriter()
        try:
            async with anyio.create_task_group() as nursery:
                nursery.start_soon(self.expire_sessions)
                nursery.start_soon(self._drain_on_sigterm, drain_s, nursery.cancel_scope)
                async with stdio_server(stdin=lines, stdout=out) as (read, write):  # type: ignore[arg-type]
                    await self.server.run(read, write, self.server.create_initialization_options())
                nursery.cancel_scope.cancel()
        finally:
            out.close()
            lines.close()

    async def _drain_on_sigterm(self, drain_s: float, serving: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                await self.drain(drain_s)
                serving.cancel()
                return

    async def drain(self, drain_s: float) -> None:
        """Refuse new calls (each is answered with an error saying the server is shutting
        down), let the calls in flight finish for up to ``drain_s``, then cancel what still
        runs (its child killed and reaped; its call answered with an error). Returns when no
        call is in flight, :data:`ANSWER_GRACE_S` later, for the last answers to be sent."""
        self._draining = True
        with anyio.move_on_after(drain_s):
            while self._in_flight:
                await anyio.sleep(0.02)
        for scope in list(self._scopes):
            scope.cancel()
        while self._in_flight:
            await anyio.sleep(0.01)
        await anyio.sleep(ANSWER_GRACE_S)

    async def serve_http(
        self,
        host: str,
        port: int,
        *,
        tokens: Mapping[str, str] | None,
        drain_s: float = 30.0,
        on_listening: Callable[[str], object] | None = None,
    ) -> None:
        """Serve streamable HTTP at ``/mcp`` on ``host:port`` (under asyncio: uvicorn) until
        SIGINT or SIGTERM, which :meth:`drain` for ``drain_s`` first (a second one stops at
        once); with ``tokens`` (token -> name), a request without ``Authorization: Bearer``
        and one of them gets 401 and reaches nothing. ``on_listening`` is called with the
        endpoint's URL once it listens (the port the kernel chose, for port 0). When this
        returns, every run it started has ended."""
        app: ASGIApp = self.server.streamable_http_app(
            host=host, max_request_body_size=MAX_LINE_BYTES
        )
        if tokens:
            app = BearerGate(app, tokens)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,  # a request that never ends can't
        )  # hold the exit
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        server = _DrainingUvicorn(config, lambda: loop.call_soon_threadsafe(stopping.set))

        async def drain_then_stop() -> None:
            await stopping.wait()
            await self.drain(drain_s)
            server.should_exit = True

        async def say_where() -> None:
            while not server.started:
                await anyio.sleep(0.01)
            if on_listening is not None:
                bound = server.servers[0].sockets[0].getsockname() if server.servers else None
                where = host if ":" not in host else f"[{host}]"
                on_listening(f"http://{where}:{bound[1] if bound else port}/mcp")

        async with anyio.create_task_group() as nursery:
            nursery.start_soon(self.expire_sessions)
            nursery.start_soon(drain_then_stop)
            nursery.start_soon(say_where)
            await server.serve()
            nursery.cancel_scope.cancel()

    @property
    def open_sessions(self) -> list[str]:
        """The handle of each open session, sorted."""
        return sorted(self._sessions)

    async def expire_sessions(self) -> None:
        """Forever: close each session idle for ``session_idle_s`` and not running."""
        while True:
            await anyio.sleep(min(30.0, max(self.session_idle_s / 4, 0.05)))
            for _, session in self._sessions.expired():
                await session.__aexit__(None, None, None)

    # --- handlers ---------------------------------------------------------------------------

    def tool(self, stubs: str | None = None) -> types.Tool:
        """``run_python`` as ``tools/list`` shows it, with the bridge's current stubs
        (``stubs``, when the caller has rendered them), or an index of its tools when the stubs
        are past ``describe_budget``."""
        stubs = self.bridge.tool_stubs() if stubs is None else stubs
        if self.indexed(stubs):
            stubs = INDEXED + index_lines(self.bridge.tool_specs(), self.describe_budget)
        stubs = stubs or "# (no tools are offered)"
        down = "".join(
            f"\n# server {name!r} isn't available now (tried again in the background): {why}"
            for name, why in sorted(self.unavailable.items())
        )
        return types.Tool(
            name=TOOL_NAME,
            description=DESCRIPTION.replace("{idle}", _duration(self.session_idle_s))
            + stubs
            + down,
            input_schema={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "the Python script to run"},
                    "inputs": {
                        "type": "object",
                        "description": "plain data the script reads as `inputs`",
                    },
                    "session": {
                        "type": "string",
                        "description": "the `session` an earlier answer carried: continue that "
                        f"session (one unused for {_duration(self.session_idle_s)} is closed)",
                    },
                },
                "required": ["code"],
            },
        )

    def indexed(self, stubs: str) -> bool:
        """Whether the tools' ``stubs`` are past ``describe_budget`` (so ``run_python``'s
        description carries an index, and ``search_tools`` is offered)."""
        return len(stubs.encode()) > self.describe_budget

    def search_tool(self) -> types.Tool:
        """``search_tools`` as ``tools/list`` shows it."""
        return types.Tool(
            name=SEARCH_TOOL,
            description=(
                "Find the tools a run_python script can call by what they do: the best "
                f"matches for `query` (at most {SEARCH_LIMIT}), each as its name and the first "
                'line of its description (detail="brief") or as its whole stub, how a script '
                'calls it (detail="full").'
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "words of what the tool does"},
                    "detail": {"type": "string", "enum": ["brief", "full"], "default": "brief"},
                },
                "required": ["query"],
            },
        )

    def _search(self, arguments: Mapping[str, Any]) -> types.CallToolResult:
        query, detail = arguments.get("query"), arguments.get("detail", "brief")
        if not isinstance(query, str):
            return _refusal("`query` must be a string: words of what the tool does")
        if detail not in ("brief", "full"):
            return _refusal('`detail` is "brief" or "full"')
        found = ToolIndex(self.bridge.tool_specs()).search(query)
        shown = [brief(spec) if detail == "brief" else render_tool_stub(spec) for spec in found]
        text = ("\n" if detail == "brief" else "\n\n").join(shown) or "no tool matches"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content={"tools": shown},
        )

    def exposed(self) -> list[types.Tool]:
        """The bridge's own tools as ``tools/list`` shows them with ``expose_tools`` (else
        none): name, description and input schema, no output schema (module doc)."""
        if not self.expose_tools:
            return []
        return [
            types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema)
            for spec in sorted(self.bridge.tool_specs(), key=lambda spec: spec.name)
            if spec.name != TOOL_NAME
        ]

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        stubs = self.bridge.tool_stubs()
        search = [self.search_tool()] if self.indexed(stubs) else []
        return types.ListToolsResult(tools=[self.tool(stubs), *search, *self.exposed()])

    async def _set_logging_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self._log_floor = LOG_LEVELS.index(params.level)
        return types.EmptyResult()

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments: Mapping[str, Any] = params.arguments or {}
        if params.name == SEARCH_TOOL and self.indexed(self.bridge.tool_stubs()):
            return self._search(arguments)
        if params.name != TOOL_NAME:
            if self.expose_tools and params.name in self.bridge.tool_names:
                return await self._served(self._call_exposed, params.name, arguments)
            return _refusal(f"there is no tool {params.name!r}: call {TOOL_NAME}")
        code, inputs, handle = (arguments.get(k) for k in ("code", "inputs", "session"))
        if not isinstance(code, str):
            return _refusal("`code` must be a string: the Python script to run")
        if inputs is not None and not isinstance(inputs, dict):
            return _refusal("`inputs` must be an object")
        if "session_id" in arguments:
            return _refusal(
                "`session_id` is gone: pass `session`, the handle an earlier answer carried "
                "(a call without one starts a new session and answers with its handle)"
            )
        try:
            check_plain(inputs or {})
        except ValueError as exc:
            return _refusal(f"`inputs` must be plain data: {exc}")
        return await self._served(self._run_python, ctx, code, inputs, handle)

    async def _served(
        self, call: Callable[..., Awaitable[types.CallToolResult]], *args: Any
    ) -> types.CallToolResult:
        """``call(*args)`` in a slot: refused while draining, waiting in the queue (or refused
        when it is full), cancelled by a drain that runs out of time; counted in flight."""
        if self._draining:
            return _refusal(SHUTTING_DOWN)
        self._in_flight += 1
        scope = anyio.CancelScope()
        self._scopes.add(scope)
        try:
            with scope:
                answer = await call(*args)
            if scope.cancelled_caught:
                return _refusal("the server shut down before this call ended: it was cancelled")
            return answer
        except ShuttingDown:
            return _refusal(SHUTTING_DOWN)
        except Busy:
            return _refusal(
                f"the server is busy: {self.max_queued} call(s) already wait for a run slot; "
                "try again later"
            )
        except HandleRefused as refused:
            return _refusal(
                "this `session` has expired (unused too long, or closed to make room): call "
                "without `session` to start a new one"
                if refused.reason == "expired"
                else "this `session` is unknown here: pass one an answer of this server gave "
                "you, or call without `session` to start a new one"
            )
        except TooManySessions:
            return _refusal(
                f"the server holds {self.max_sessions} sessions, the most it keeps, and none of "
                f"yours is idle: pass the `session` of one of yours, or wait for one to end (a "
                f"session idle for {self.session_idle_s:g} s is closed)"
            )
        finally:
            self._scopes.discard(scope)
            self._in_flight -= 1

    async def _take_slot(self) -> Callable[[], None]:
        """Take one of ``max_concurrent`` slots, waiting in the queue for it (:class:`Busy`
        when the queue is full; :class:`ShuttingDown` when a drain began meanwhile); returns
        what lets it go (at most once, however often it is called). The queue is the calls
        still waiting: one granted a slot as another let it go is no longer in it, though its
        task has yet to run."""
        waiting = self._slots.statistics().tasks_waiting
        if self._slots.value == 0 and waiting >= self.max_queued:
            raise Busy
        await self._slots.acquire()
        held = [True]

        def release() -> None:
            if held:
                held.clear()
                self._slots.release()

        if self._draining:
            release()
            raise ShuttingDown
        return release

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """Hold a slot (:meth:`_take_slot`) for the block."""
        release = await self._take_slot()
        try:
            yield
        finally:
            release()

    async def _call_exposed(self, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """One of the bridge's tools, called for the client in a slot: its live lane (module
        doc)."""
        async with self._slot():
            shown = await self.bridge.call_tool(name, arguments)
        return types.CallToolResult.model_validate(shown)

    async def _run_python(
        self,
        ctx: ServerRequestContext[Any],
        code: str,
        inputs: dict[str, Any] | None,
        handle: object,
    ) -> types.CallToolResult:
        """Run ``code`` as a step of the session ``handle`` names (of a new one without it) in
        a slot, reporting its progress and sending on what it prints. The slot is let go as
        the run ends; what it printed is then sent on for at most :data:`PRINTED_FLUSH_S` more
        (a client that doesn't read can't hold a slot). :class:`HandleRefused`, :class:`Busy`,
        :class:`ShuttingDown` and :class:`TooManySessions` come from here, bare."""
        owner = _identity_of(ctx)
        held = self._sessions.look_up(handle, owner) if handle is not None else None
        if held is not None:
            held.in_use += 1  # not expired while it waits for a slot
        try:
            release = await self._take_slot()
            try:
                if held is None:
                    handle = await self._open_session(owner)
                    held = self._sessions.held(handle)
                    held.in_use += 1
                label = f"run_python-{next(self._labels)}"
                printed = _Printed()
                async with anyio.create_task_group() as sending:
                    sending.start_soon(self._send_printed, ctx, printed)
                    try:
                        async with anyio.create_task_group() as reporting:
                            reporting.start_soon(self._report_progress, ctx, label, printed)
                            result = await held.value.run(
                                code, inputs=inputs, label=label, on_output=printed.hear
                            )
                            reporting.cancel_scope.cancel()
                    finally:
                        release()
                        printed.end()
                    with anyio.move_on_after(PRINTED_FLUSH_S):
                        await printed.sent.wait()
                    sending.cancel_scope.cancel()
            finally:
                release()
        finally:
            if held is not None:
                held.in_use -= 1
                held.last_used = time.monotonic()
        assert isinstance(handle, str)
        return _answer(result, self.result_detail, session=handle)

    async def _send_printed(self, ctx: ServerRequestContext[Any], printed: _Printed) -> None:
        """Send on what the script prints as ``notifications/message`` (module doc), until
        the run ends and all of it has been sent."""
        while True:
            await printed.arrived.wait()
            text = printed.take()
            if text and self._log_floor <= LOG_LEVELS.index("info"):
                for start in range(0, len(text), PRINTED_PIECE_CHARS):
                    piece = text[start : start + PRINTED_PIECE_CHARS]
                    await ctx.session.send_log_message(
                        "info", piece, logger=TOOL_NAME, related_request_id=ctx.request_id
                    )
            if printed.ended.is_set() and not printed.pending:
                printed.sent.set()
                return
            with anyio.move_on_after(PRINTED_EVERY_S):
                await printed.ended.wait()

    async def _open_session(self, owner: str) -> str:
        """A new session for ``owner``; its handle. When ``max_sessions`` are open, the
        longest idle session of the same owner is closed to make room (its handle then
        answers ``expired``); :class:`TooManySessions` when the owner has none idle: no
        caller's sessions are ever closed to make room for another's."""
        if len(self._sessions) >= self.max_sessions:
            idle = self._sessions.idle_of(owner)
            if not idle:
                raise TooManySessions
            await self._sessions.drop(idle[0], expired=True).__aexit__(None, None, None)
        session = self.bridge.session()
        await session.__aenter__()
        return self._sessions.mint(owner, session)

    async def _report_progress(
        self, ctx: ServerRequestContext[Any], label: str, printed: _Printed
    ) -> None:
        """Every :data:`PROGRESS_EVERY_S`, a progress notification for the run ``label``
        names (a no-op when the client sent no progress token)."""
        started = time.monotonic()
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            run = next((r for r in self.bridge.progress() if r.label == label), None)
            elapsed = time.monotonic() - started
            message = _progress_message(run, elapsed, printed.last_line)
            await ctx.session.report_progress(math.floor(elapsed * 10) / 10, message=message)


class _DrainingUvicorn(uvicorn.Server):
    """uvicorn, whose first SIGINT or SIGTERM calls ``on_signal`` (to drain) instead of
    stopping; a second one stops it."""

    def __init__(self, config: uvicorn.Config, on_signal: Callable[[], object]) -> None:
        super().__init__(config)
        self._on_signal = on_signal
        self._signalled = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._signalled:
            super().handle_exit(sig, frame)
        else:
            self._signalled = True
            self._on_signal()


IDENTITY_KEY: Final = "scriptbridge.identity"
"""Where :class:`BearerGate` puts the name of the token a request carried, in its ASGI scope."""


class BearerGate:
    """An ASGI app letting through only HTTP requests that carry ``Authorization: Bearer
    <token>`` for one of ``tokens`` (token -> its name; each compared in constant time, all of
    them every time); every other request gets 401 and reaches nothing. The name of the token
    a request carried is its scope's :data:`IDENTITY_KEY`: who a session handle belongs to."""

    def __init__(self, app: ASGIApp, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ValueError("a BearerGate needs at least one token")
        self.app = app
        self._expected = [(f"Bearer {token}".encode(), name) for token, name in tokens.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            name: str | None = None
            for expected, holder in self._expected:  # no early exit: every token compared
                if hmac.compare_digest(given, expected):
                    name = holder
            if name is None:
                body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
                headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            scope = {**scope, IDENTITY_KEY: name}
        await self.app(scope, receive, send)


def _identity_of(ctx: ServerRequestContext[Any]) -> str:
    """Who is calling, as a session handle is bound to it (module doc): ``token:NAME`` (the
    :class:`BearerGate` let the request in for that name), ``mcp-session:ID`` (a handshake-era
    HTTP connection's ``Mcp-Session-Id``, which the SDK checks against the sessions it
    opened), ``http`` (a stateless request without a token: the ``Mcp-Session-Id`` header such
    a request may carry is checked by nothing, so it names no one) or ``stdio`` (the one client
    of a stdio server)."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict):
        return "stdio"
    name = scope.get(IDENTITY_KEY)
    if isinstance(name, str):
        return f"token:{name}"
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return "http"  # stateless: an Mcp-Session-Id header it carries is checked by no one
    headers = getattr(request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return f"mcp-session:{value}" if isinstance(value, str) else "http"


def _installed_version() -> str:
    """This package's installed version, as ``server/discover`` and ``initialize`` say it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scriptbridge")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _duration(seconds: float) -> str:
    """``seconds`` as a person says it: ``10 min``, ``90 s``, ``2 h``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _progress_message(run: RunProgress | None, elapsed_s: float, last_line: str) -> str:
    calls = run.tool_calls if run is not None else 0
    fetches = run.fetches if run is not None else 0
    message = f"running {elapsed_s:.0f} s, {calls} tool call(s), {fetches} fetch(es)"
    return f"{message}; printed: {last_line}" if last_line else message


def _refusal(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = VALUE_MAX_CHARS
_REPR.maxlong = 1_000
_REPR.maxlevel = 8
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 200


def _short_repr(value: Any) -> str:
    """``repr(value)`` at most :data:`VALUE_MAX_CHARS` long, built in time bounded by that
    (a long string or a big container is cut with ``...``); the whole value is in
    ``structuredContent``."""
    shown = _REPR.repr(value)
    if len(shown) <= VALUE_MAX_CHARS:
        return shown
    return shown[:VALUE_MAX_CHARS] + " ... (cut; all of it is in structuredContent.value)"


BRIEF_FIELDS: Final = frozenset(
    {"ok", "value", "stdout", "error", "outputs", "dropped", "value_note"}
)
"""What ``structuredContent`` holds by default (``result_detail="brief"``): what a model needs
of a run. ``"full"`` gives every field of the ``ScriptResult`` (isolation, timings, counts)."""


def _answer(result: ScriptResult, detail: str, *, session: str) -> types.CallToolResult:
    """``result`` as a ``tools/call`` result: text, ``structuredContent`` (:data:`BRIEF_FIELDS`,
    or every field for ``detail="full"``, and ``session``), ``isError``."""
    lines: list[str] = []
    if result.stdout:
        printed = result.stdout[:PRINTED_MAX_CHARS]
        cut = " (cut; all of it is in structuredContent.stdout)" if printed != result.stdout else ""
        lines.append(f"printed{cut}:\n{printed.rstrip(chr(10))}")
    if result.error is not None:
        error = result.error
        where = f" (line {error.line})" if error.line else ""
        lines.append(f"error: {error.type}{where}: {error.message}")
    else:
        lines.append(f"value: {_short_repr(result.value)}")
    lines += [f"wrote: out/{output}" for output in result.outputs]
    lines.append(f"session: {session} (pass it as `session` to continue this session)")
    structured = result.model_dump(
        mode="json", include=None if detail == "full" else set(BRIEF_FIELDS)
    )
    structured["session"] = session
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(lines))],
        structured_content=structured,
        is_error=not result.ok,
    )
