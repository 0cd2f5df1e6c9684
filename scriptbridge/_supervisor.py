"""The trio supervisor: ``Bridge`` runs each script in a fresh sandbox child and serves it.

``Bridge`` is thin: it composes the parts that own each job and holds the host's tools.

- a launcher (:mod:`scriptbridge._launcher`; by default a zygote with spare children kept
  ready, :mod:`scriptbridge._spares`) gives each run one fresh child and reaps it;
- the run directories (:mod:`scriptbridge._run_dirs`) own the workspace layout: a directory per
  run with ``refs/`` and ``out/``, payload links unlinked the moment a mark lands, the trash;
- the conversation (:mod:`scriptbridge._conversation`) speaks the channel of
  :mod:`sandbox.protocol` with the child, and :mod:`scriptbridge._run_services` answers its tool
  calls and fetches (the demand-fetch loop);
- the tool table (:mod:`scriptbridge._tool_table`) holds host tools and servers' tools behind
  one interface; the registry, the workspace and the fetcher are the public building blocks.

Every message from the child is validated before it is acted on (:mod:`scriptbridge._channel`);
a malformed, oversized, out-of-order or unknown one ends that run with ``ProtocolViolation`` and
kills the child. ``run`` never raises for anything the child does: every ending is a
``ScriptResult``. It raises only ``trio.Cancelled`` (when the caller is cancelled, after the
child has been killed, and reaped unless it had ended) and
:class:`~scriptbridge.ScriptBridgeError` when the bridge isn't open. When ``run`` returns, the
child can run no more code, the run's payload links are gone, and its ``out/`` is kept when the
script wrote something (``ScriptResult.outputs``). A child that said done or error with nothing
in ``out/`` is killed and reaped after ``run`` returns (:mod:`scriptbridge._reaping`: nothing of
its result depends on the reap); every other child has been reaped when ``run`` returns;
closing the bridge waits for every reap.

A run's ``out/`` is bounded by its disk quota (``Limits.max_out_bytes`` and ``max_out_files``):
``write_text`` refuses the write that would pass it, and where the zygote is root the ``quota``
layer makes ``out/`` a tmpfs of that size while the run runs and copies what it holds to the
disk, within the quota, before it reports the child's exit. A run that passed the quota ends
with ``DiskQuotaExceeded`` whatever the child said (unless it was ``Cancelled``): the zygote's
finding doesn't rely on the child, and, as a last bound for a machine without the layer, the
host reads what is on the disk (never following a symlink, at most one entry past the quota)
and throws the whole ``out/`` away if it passes the quota.

Closing the bridge stops every server, cancels running scripts (their results say
``Cancelled``) and stops the launcher, which kills and reaps every child left, spares included;
then the spares' directories and the trash are removed.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

import trio

from sandbox import ChildExit, ZygoteError
from sandbox.protocol import Ending, check_plain

from . import lanes
from ._conversation import NO_ENDING, serve_child, start_message
from ._exceptions import IsolationUnavailable, ScriptBridgeError
from ._fetcher import ReferenceFetcher
from ._hosting import Host, open_host
from ._isolation_policy import RequiredIsolation, refuse_or_warn, required_layers
from ._launcher import REAP_TIMEOUT_S, Child, Launcher, ZygoteLauncher, exit_error
from ._limits import Limits, name_the_limit
from ._marks_gate import MarksGate
from ._mcp import McpServer
from ._reaping import ChildEnding, Reaps, end_child
from ._registry import ReferenceRecord, ReferenceRegistry
from ._result_dict import result_dict
from ._results import ScriptError, ScriptResult
from ._run_dirs import RunDir, RunDirs
from ._run_services import RunServices, call_and_ingest
from ._run_state import RunProgress, RunState, Watch
from ._sessions import BridgeSession, SessionState
from ._stubs import render_stubs
from ._tool_spec import ToolSpec
from ._tool_table import McpTool, ToolTable
from ._tools import PythonTool, python_tool
from ._workspace import Workspace

__all__ = ["Bridge", "RunProgress"]

log = logging.getLogger("scriptbridge.supervisor")

T = TypeVar("T")

SERVER_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")


class Bridge:
    """Runs agent-written scripts in fresh sandbox children and serves their tool calls.

    Args:
        workspace: the directory for saved payloads (``refs/``) and runs (``runs/``); created
            if missing.
        limits: the default limits of each run.
        fetch_allow: hosts or networks the fetcher may reach beyond public addresses
            (``["127.0.0.1"]`` for a loopback payload server).
        eager_max_bytes: fetch references at most this large in the background as results
            arrive; ``None`` (the default) fetches only on demand.
        launcher: where runs' children come from (a :class:`~scriptbridge._launcher.Launcher`);
            by default a zygote with spare children. Tests pass one that hands out hostile ones.
        max_spares: the default launcher's bound on spares, forked ahead of runs as bursts ask
            (0: none; 8 by default); a ``ValueError`` if negative or with a ``launcher``.
        require_isolation: ``None``, ``"all"`` or layer names that must apply, else opening
            raises ``IsolationUnavailable`` (:mod:`scriptbridge._isolation_policy`).

    An async context manager under trio or asyncio; all it started is stopped and reaped when
    the block exits. Under asyncio (:mod:`scriptbridge._hosting`) its trio side, registry and
    fetcher live in a thread of its own (reach them through its methods while it is open), and
    a host's coroutine-function tool runs on the host's loop.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        limits: Limits | None = None,
        fetch_allow: Iterable[str] = (),
        *,
        eager_max_bytes: int | None = None,
        launcher: Launcher | None = None,
        max_spares: int | None = None,
        require_isolation: RequiredIsolation = None,
    ) -> None:
        self.required_layers = required_layers(require_isolation)
        self.launcher: Launcher = _launcher(launcher, max_spares)
        self.limits = limits or Limits()
        self.workspace = Workspace(workspace)
        self.registry = ReferenceRegistry()
        self._gate = MarksGate(self.registry)
        self._servers: dict[str, McpServer] = {}
        self.fetcher = ReferenceFetcher(
            self.registry,
            self.workspace,
            allow=fetch_allow,
            eager_max_bytes=eager_max_bytes,
            servers=self._servers,
            settled=self._gate.wait_settled,
        )
        self._tools = ToolTable()
        self._dirs = RunDirs(self.workspace.root)
        self._reaps = Reaps(self.launcher)
        self._runs: dict[str, RunState] = {}
        self._nursery: trio.Nursery | None = None
        self._host: Host | None = None
        self.registry.add_key_listener(self._dirs.unlink_everywhere)

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Bridge:
        """Open the bridge for the caller's loop: trio or asyncio (``ScriptBridgeError`` for
        another, or for none)."""
        if self._host is not None:
            raise ScriptBridgeError("this Bridge is open already")
        self._host = await open_host(self._lifetime)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Cancel running scripts, stop servers and fetches, then the launcher's children."""
        host, self._host = self._host, None
        if host is not None:
            await host.close()

    @contextlib.asynccontextmanager
    async def _lifetime(self) -> AsyncIterator[None]:
        """The bridge's trio side, open while the block runs (in the host's trio run, or in
        the bridge's own trio thread); raises ``IsolationUnavailable`` once all it started
        is stopped."""
        refused: IsolationUnavailable | None = None
        async with trio.open_nursery() as nursery:
            try:
                refused = await _open(self, nursery)
                if refused is None:
                    yield
            finally:
                self._nursery = None
                with trio.CancelScope(shield=True):
                    for run in list(self._runs.values()):
                        run.closing = True
                        run.scope.cancel()
                    for server in list(self._servers.values()):
                        await server.aclose()
                    self.fetcher.close()
                    await self._reaps.wait(REAP_TIMEOUT_S)  # while the launcher can reap
                nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await self._reaps.abandon()  # none, unless the bridge failed as it opened
            await self.launcher.aclose()
            self._dirs.close()
        if refused is not None:
            raise refused

    def _live(self) -> Host:
        if self._host is None:
            raise ScriptBridgeError("open the Bridge (async with) before using it")
        return self._host

    def _sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` where the bridge's state lives (its trio thread, under asyncio)."""
        return fn(*args) if self._host is None else self._host.sync(fn, *args)

    # --- tools ------------------------------------------------------------------------------

    def add_tool(self, tool: PythonTool | Any, name: str | None = None) -> None:
        """Offer a host tool to scripts (a ``python_tool``, or a callable, wrapped here).
        Raises ``ValueError`` for a name already taken or one scripts couldn't call."""
        wrapped = tool if isinstance(tool, PythonTool) else python_tool(tool, name=name)
        self._sync(self._tools.add, [wrapped])

    async def add_server(self, server: McpServer) -> None:
        """Start a tool server and offer its tools to scripts as ``<name>.<tool>`` (runs that
        start after it lists them again see the new list). Raises ``ToolServerError`` when it
        can't start, ``ValueError`` for a name already taken."""
        await self._live().call(start_server, self, server)

    @property
    def tool_names(self) -> list[str]:
        """The names scripts can call, sorted."""
        return self._sync(lambda: self._tools.names)

    def tool_specs(self, tools: list[str] | None = None) -> list[ToolSpec]:
        """Each tool offered (or each of ``tools``), described for a model, sorted by name.
        Raises ``ValueError`` for a name in ``tools`` that isn't offered."""
        return self._sync(lambda: [tool.spec() for tool in self._tools.select(tools)])

    def tool_stubs(self, tools: list[str] | None = None) -> str:
        """Python source describing each tool offered (or each of ``tools``) for a model's
        prompt (:func:`~scriptbridge._stubs.render_stubs`). Raises ``ValueError`` as
        :meth:`tool_specs` does."""
        return render_stubs(self.tool_specs(tools))

    # --- the host's own view of results -----------------------------------------------------

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call one offered tool for the host's model, not a script; ingest its result first.
        Returns an MCP ``CallToolResult`` dict: ``content`` is its live lane (``lanes.live_copy``;
        a text fallback as one text block), ``isError`` is kept (a raise gives its one-line
        reason). Raises ``ValueError`` for a name not offered."""
        return await self._live().call(_model_call, self, name, dict(arguments))

    def ingest(self, result: object, *, server: str | None) -> list[ReferenceRecord]:
        """Register a result's references and apply its never marks (synchronously), and start
        the eager pass on them when it is on. Returns the records it registered."""
        return self._sync(self._ingest, result, server)

    def _ingest(self, result: object, server: str | None) -> list[ReferenceRecord]:
        return _eagerly(self, self.registry.ingest(result, server=server))

    # --- runs -------------------------------------------------------------------------------

    def progress(self) -> list[RunProgress]:
        """What each running script has done so far (pure; for progress lines)."""
        now = time.monotonic()
        return self._sync(lambda: [run.progress(now) for run in list(self._runs.values())])

    async def run(
        self,
        source: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
        tools: Sequence[str] | None = None,
        label: str | None = None,
        on_output: Callable[[str], object] | None = None,
    ) -> ScriptResult:
        """Run one script in a fresh sandbox child and return how it ended.

        When this returns or raises, the child can run no more code and the run's ``refs/``
        is gone. A child that said done or error with nothing in ``out/`` is killed and reaped
        after this returns (``outputs`` is ``[]``, whatever lands in ``out/`` after the kill);
        every other child has been reaped, its files on the disk (see ``_reaping``).

        Never raises for anything the script or the child does. ``tools`` offers only those
        tools to this run (``None``: every tool). ``label`` names the run in :meth:`progress`.
        ``on_output`` hears what the script prints while it runs, in order, each piece as it
        reaches the host (the pieces join to the result's ``stdout``), on the host's loop (in
        a SyncBridge's thread); what it raises is logged and ignored.

        Raises:
            ScriptBridgeError: the bridge isn't open.
            ValueError: ``inputs`` isn't plain data (str keys; None, bool, int, float, str,
                bytes, lists and dicts), or ``tools`` names a tool not offered; checked before
                any child is started.
            trio.Cancelled, asyncio.CancelledError: the caller was cancelled (the child is
                killed first, and reaped too unless it had said done or error).
        """
        watch = Watch(label, on_output)
        return await self._live().call(self._run, source, inputs, limits, tools, None, watch)

    def session(
        self, tools: Sequence[str] | None = None, limits: Limits | None = None
    ) -> BridgeSession:
        """A session (:mod:`scriptbridge._sessions`): an async context manager whose
        ``run(source, *, inputs=None)`` runs each step in a fresh child, starting from the plain
        globals and the definitions its earlier successful steps left. ``tools`` and ``limits``
        are those of each step, as :meth:`run` takes them."""
        return BridgeSession(self, tools, limits)

    async def _run(
        self,
        source: str,
        inputs: Mapping[str, Any] | None,
        limits: Limits | None,
        tools: Sequence[str] | None,
        session: SessionState | None = None,
        watch: Watch | None = None,
    ) -> ScriptResult:
        if self._nursery is None:
            raise ScriptBridgeError("open the Bridge (async with) before running scripts")
        _check_inputs(inputs)
        table = self._tools if tools is None else self._tools.only(tools)
        started = time.perf_counter()
        run = _new_run(limits or self.limits, session, watch, self._live())
        run.required = self.required_layers
        run_dir = self._dirs.for_run(run.id)
        self._runs[run.id] = run
        child: Child | None = None
        value: Any = NO_ENDING
        error: ScriptError | None = None
        try:
            with self.registry.journal():
                with trio.CancelScope(shield=True):  # a fork we don't hear of would leak
                    spawned = await _spawn(self.launcher, run, run_dir)
                if isinstance(spawned, ScriptError):
                    error = spawned
                else:
                    child = spawned
                    value, error = await _serve(self, run, run_dir, child, table, source, inputs)
        finally:
            with trio.CancelScope(shield=True):
                ending = await _end_run(self, run, run_dir, child)
        result = _result(run, run_dir, value, error, ending.status, time.perf_counter() - started)
        return result if session is None else session.end(run, result)


async def _end_run(
    bridge: Bridge, run: RunState, run_dir: RunDir, child: Child | None
) -> ChildEnding:
    """End the run's child (:func:`~scriptbridge._reaping.end_child`) and finish its directory;
    a child left to be reaped goes to the bridge's reaper (:class:`~scriptbridge._reaping.Reaps`),
    unless the bridge is closing."""
    may_defer = bridge._nursery is not None
    ending = await end_child(bridge.launcher, run, run_dir, child, may_defer=may_defer)
    bridge._dirs.release(run_dir)
    bridge._runs.pop(run.id, None)
    if ending.reap_later and child is not None:
        run_dir.finish_unreaped()
        bridge._reaps.start(child, run_dir)
    else:
        run_dir.finish()
    return ending


def _check_inputs(inputs: Mapping[str, Any] | None) -> None:
    try:
        check_plain(dict(inputs or {}))
    except ValueError as exc:
        raise ValueError(f"inputs must be plain data: {exc}") from exc


def _new_run(
    limits: Limits, session: SessionState | None, watch: Watch | None, host: Host
) -> RunState:
    """A run's state: a fresh id, its limits, what its session carries into it, and what the
    host asked to hear of it (its output reaches the host's loop)."""
    run = RunState(id=secrets.token_hex(8), limits=limits)
    if watch is not None:
        run.label = watch.label
        if watch.on_output is not None:
            run.on_output = host.listener(watch.on_output)
    if session is not None:
        session.seed(run)
    return run


async def _ingest_in_slices(
    bridge: Bridge, result: object, server: str | None
) -> list[ReferenceRecord]:
    """Ingest ``result`` through the marks gate (in slices: a flood of claims doesn't hold the
    loop), then start the eager pass on its records when it is on."""
    return _eagerly(bridge, await bridge._gate.ingest(result, server))


def _eagerly(bridge: Bridge, records: list[ReferenceRecord]) -> list[ReferenceRecord]:
    """``records``, just ingested, after starting the eager pass on them when it is on."""
    if bridge._nursery is not None and bridge.fetcher.eager_max_bytes is not None:
        bridge.fetcher.start_eager(bridge._nursery, records)
    return records


async def _model_call(bridge: Bridge, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    tool = bridge._tools.get(name)
    if tool is None:
        raise ValueError(f"no tool is named {name!r}")
    ingest = functools.partial(_ingest_in_slices, bridge)
    ok, answer = await call_and_ingest(tool, arguments, bridge._live().call_tool, ingest)
    if not ok:
        return {"content": [{"type": "text", "text": answer}], "isError": True}
    await bridge._gate.wait_settled()  # no await from here to the view: marks before views
    with bridge.registry.settled_view():
        shown = lanes.live_copy(answer, bridge.registry)
    content = [{"type": "text", "text": shown}] if isinstance(shown, str) else shown
    top = result_dict(answer)
    return {"content": content, "isError": top is not None and top.get("isError") is True}


async def _open(bridge: Bridge, nursery: trio.Nursery) -> IsolationUnavailable | None:
    """Start the bridge's parts in ``nursery``: its directories, its launcher, then (unless
    the launcher's children lack a required layer: the refusal is returned) its sweeper and
    reaper; the bridge is open once this returns ``None``."""
    bridge._dirs.open()
    await bridge.launcher.start(nursery, bridge._dirs, bridge.limits)
    refused = refuse_or_warn(bridge.launcher.layers(), bridge.required_layers)
    if refused is None:
        nursery.start_soon(bridge._dirs.sweep)
        await nursery.start(bridge._reaps.serve)
        bridge._nursery = nursery
    return refused


async def start_server(bridge: Bridge, server: McpServer) -> None:
    """Start ``server`` in the bridge's nursery and offer its tools (``Bridge.add_server``)."""
    if bridge._nursery is None:
        raise ScriptBridgeError("open the Bridge (async with) before adding servers")
    _check_server_name(server.name, bridge._servers)
    await server.open(bridge._nursery)
    try:
        _offer_tools_of(server, bridge._tools)
    except ValueError:
        await server.aclose()
        raise
    bridge._servers[server.name] = server


def _offer_tools_of(server: McpServer, table: ToolTable) -> None:
    """Offer ``server``'s tools in ``table``, and its new list each time it lists them anew.
    Raises ``ValueError`` for a name already taken (nothing is offered then)."""
    table.add(McpTool(server, tool) for tool in server.tools)
    server.on_tools_changed(
        lambda changed: table.replace_server(
            changed.name, [McpTool(changed, tool) for tool in changed.tools]
        )
    )


def _check_server_name(name: str, taken: Mapping[str, object]) -> None:
    """``ValueError`` for a server name that is taken or that scripts couldn't use."""
    if name in taken:
        raise ValueError(f"server name {name!r} is taken: give each server a name of its own")
    if not SERVER_NAME.fullmatch(name):
        raise ValueError(
            f"not a usable server name: {name!r} (1-64 of A-Z a-z 0-9 _ -, "
            "not starting with a digit or -)"
        )


def _launcher(launcher: Launcher | None, max_spares: int | None) -> Launcher:
    """The bridge's launcher: ``launcher``, or the default one with ``max_spares``."""
    if launcher is not None:
        if max_spares is not None:
            raise ValueError("max_spares is the default launcher's: give it to your launcher")
        return launcher
    return ZygoteLauncher() if max_spares is None else ZygoteLauncher(max_spares=max_spares)


async def _serve(
    bridge: Bridge,
    run: RunState,
    run_dir: RunDir,
    child: Child,
    table: ToolTable,
    source: str,
    inputs: Mapping[str, Any] | None,
) -> tuple[Any, ScriptError | None]:
    """Serve the run's child within its wall time; returns (value, error). Its tool results
    are ingested in slices (:class:`MarksGate`: the loop isn't held by a flood of claims)."""
    run_dir.make()  # there already, unless the launcher's child is a test's double
    services = RunServices(
        run,
        run_dir,
        table,
        bridge.registry,
        bridge.fetcher,
        functools.partial(_ingest_in_slices, bridge),
        bridge._gate.wait_settled,
        bridge.workspace.root,
        call_tool=bridge._live().call_tool,
    )
    start = start_message(run, source, dict(inputs or {}), table.names, table.parameters())
    return await serve_child(run, child, start, services)


async def _spawn(launcher: Launcher, run: RunState, run_dir: RunDir) -> Child | ScriptError:
    """The run's child, or why none could be started."""
    try:
        return await launcher.spawn(run_dir, run.limits)
    except (ZygoteError, TimeoutError, OSError) as exc:
        return ScriptError(ending=Ending.SandboxCrashed, message=f"couldn't start: {exc}")


def _result(
    run: RunState,
    run_dir: RunDir,
    value: Any,
    error: ScriptError | None,
    status: ChildExit | None,
    duration_s: float,
) -> ScriptResult:
    """The run's result, from what the child said and how it exited, and its out/."""
    if error is None and value is NO_ENDING:
        error = (
            exit_error(status, run.limits)
            if status is not None
            else ScriptError(ending=Ending.SandboxCrashed, message="the sandbox process vanished")
        )
    limits = run.limits
    outputs, passed = run_dir.outputs(limits.max_out_files, limits.max_out_bytes)
    quota = status.quota_exceeded if status is not None else None
    if passed is not None:  # no quota layer kept it to the quota (not root): nothing kept
        run_dir.throw_away()
        outputs = []
        quota = f"the script left {passed} in out/, so none of it was kept"
    if quota is not None and (error is None or error.ending is not Ending.Cancelled):
        error = ScriptError(ending=Ending.DiskQuotaExceeded, message=quota)
    if error is not None:
        error = error.model_copy(update={"message": name_the_limit(error, limits)})
    return ScriptResult(
        ok=error is None,
        value=None if error is not None else value,
        stdout="".join(run.stdout),
        error=error,
        tool_calls=run.tool_calls,
        fetches=run.fetches,
        duration_s=duration_s,
        isolation=run.isolation,
        outputs=outputs,
        value_note=run.value_note if error is None else None,
    )
