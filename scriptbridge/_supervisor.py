"""The trio supervisor: ``Bridge`` runs each script in a fresh sandbox child and serves it.

A ``Bridge`` owns a zygote (the warm fork server of :mod:`sandbox._zygote`, driven from trio
without threads by :mod:`scriptbridge._zygote_link`), the reference registry, the workspace and
fetcher, the host's tools and the connected tool servers. Each :meth:`Bridge.run` gets one fresh
child, speaks the channel of :mod:`sandbox.protocol` with it, and serves its requests until the
script ends (the demand-fetch loop):

- a tool call is dispatched to a ``python_tool`` or an MCP server; its result is ingested first
  (never marks land before anything is awaited) and only its script view is sent to the child;
  an error result or a tool that raises gives the script a ``ToolError`` with a one-line reason;
- a fetch names a reference id this run was given (any other id ends the run with
  ``ProtocolViolation``); a saved payload is hard-linked into the run's own ``refs/``;
- printed output is streamed, capped at ``Limits.max_output_bytes``.

Every message from the child is validated before it is acted on (:mod:`scriptbridge._channel`);
a malformed, oversized, out-of-order or unknown one ends that run with ``ProtocolViolation`` and
kills the child. ``run`` never raises for anything the child does: every ending is a
``ScriptResult``. It raises only ``trio.Cancelled`` (when the caller is cancelled, after the
child has been killed and reaped) and :class:`~scriptbridge.ScriptBridgeError` when the bridge
isn't open.

Spare children keep the fork and the isolation off the request path: while it is open the
bridge keeps :data:`SPARE_CHILDREN` children forked, isolated and waiting for ``start`` (their
``ready`` already read and checked), each bound to a directory made ahead of time under
``<workspace>/.spares/``, since a child's working directory and landlock rules are fixed when it
isolates itself. A run takes one if its limits are the bridge's: the spare's directory is
renamed to the run's (the child's open working directory and its rules follow the rename), and
once that run is finished a replacement is forked in the background. A spare serves at most one
run, as every child does; a run with other limits, or that finds no spare, forks its own child
as before, and a spare that died while waiting is dropped, never handed out.

Each run gets a directory of its own, ``<workspace>/runs/<run-id>/``, holding ``refs/`` (hard
links to the payloads this run fetched, read-only to the child) and ``out/`` (its scratch space,
writable). A run can't see another run's files. A payload whose record is marked never is
unlinked from every run at once. When a run ends, before ``run`` returns, the payload links in
its ``refs/`` are removed; its ``out/`` is kept when the script wrote something
(``ScriptResult.outputs`` lists those files). Otherwise the whole directory, by then empty but
for its two empty folders, leaves ``runs/`` in one rename (to ``<workspace>/.trash/``) and is
removed in the background: removing a directory costs this machine 100 to 300 µs a folder,
about a tenth of a run's start. Closing the bridge stops every server, cancels running scripts
(their results say ``Cancelled``) and stops the zygote, which kills and reaps any child left,
spares included, and removes the spares' directories and the trash.

A run's ``out/`` is bounded by its disk quota (``Limits.max_out_bytes`` and ``max_out_files``):
``write_text`` refuses the write that would pass it, and where the zygote is root the ``quota``
layer (:mod:`sandbox._quota`) makes ``out/`` a tmpfs of that size while the run runs and copies
what it holds to the disk, within the quota, before it reports the child's exit. A run that
passed the quota ends with ``DiskQuotaExceeded`` whatever the child said (unless it was
``Cancelled``): the zygote's finding doesn't rely on the child, and, as a last bound for a
machine without the layer, the host reads what is on the disk (never following a symlink, at
most one entry past the quota) and throws the whole ``out/`` away if it passes the quota.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import signal
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trio

from sandbox._isolation import ChildLimits
from sandbox._zygote import ChildExit, SpawnedChild, ZygoteError, ZygoteProcess
from sandbox.protocol import (
    PROTOCOL_VERSION,
    CallFailed,
    CallOk,
    CallTool,
    CallTools,
    Done,
    Fetch,
    FetchResult,
    Output,
    ProtocolError,
    Ready,
    RunError,
    RunLimits,
    Start,
    ToolFailed,
    ToolResult,
    ToolResults,
    check_plain,
)

from . import lanes, markers
from ._channel import ChildChannel
from ._exceptions import ProtocolViolation, ScriptBridgeError
from ._fetcher import ReferenceFetcher, Saved
from ._limits import Limits, ScriptError, ScriptResult
from ._mcp import McpServer, ToolServerError
from ._registry import ReferenceRecord, ReferenceRegistry
from ._render import render_script_view
from ._tools import PythonTool, python_tool
from ._workspace import Workspace, remove_tree
from ._zygote_link import ZygoteLink

__all__ = ["Bridge", "RunProgress"]

log = logging.getLogger("scriptbridge.supervisor")

READY_TIMEOUT_S: Final = 30.0
SPARE_CHILDREN: Final = 2
"""Children the bridge keeps forked, isolated and ready ahead of runs (module doc)."""
SPARES_DIR: Final = ".spares"
TRASH_DIR: Final = ".trash"
"""Where a finished run's directory waits, out of ``runs/``, to be removed off the request path."""
SPARE_RETRY_S: Final = (0.05, 5.0)
"""The first and the longest pause before forking a spare again after a failure."""
EXIT_GRACE_S: Final = 5.0
REAP_TIMEOUT_S: Final = 10.0
REASON_MAX_CHARS: Final = 500
TOOL_ERROR_MAX_CHARS: Final = 100_000
SERVER_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")


class _Child:
    """One sandbox child of a run: its pid, the host's ends of its channel, and how to reap it.

    This is the zygote's child; tests of hostile children put a real process of their own
    behind the same three methods (see ``tests/test_supervisor.py``).
    """

    ready: Ready | None = None
    """Its ``ready``, when it was read ahead (a spare); otherwise the run reads it first."""
    channel: ChildChannel | None = None
    """The channel that read ``ready`` ahead (a spare); otherwise the run opens one."""

    def __init__(self, bridge: Bridge, spawned: SpawnedChild) -> None:
        self._bridge = bridge
        self.pid = spawned.pid
        self.to_child = spawned.to_child
        self.from_child = spawned.from_child

    async def wait(self, timeout: float) -> ChildExit:
        """Wait until it exited and was reaped. Raises TimeoutError or ZygoteError."""
        return await self._bridge._live_link().wait(self.pid, timeout)

    async def kill(self) -> None:
        """Kill it (race-free: through the zygote's pidfd). Raises ZygoteError."""
        await self._bridge._live_link().kill(self.pid)

    async def stop(self) -> ChildExit:
        """Kill it and wait until it is reaped. Raises ZygoteError or TimeoutError."""
        await self.kill()
        return await self.wait(REAP_TIMEOUT_S)


@dataclass
class _Spare:
    """A child forked, isolated and ``ready`` ahead of any run, and the directory it is bound
    to (its working directory, with ``refs/`` and ``out/``)."""

    child: _Child
    dir: Path
    limits: ChildLimits
    """The OS limits it was forked with: it serves only a run whose limits are these."""


class _RunEnded(Exception):
    """Ends a run early with an error of a limit's type (raised inside the conversation)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class _Run:
    """The state of one run while it is served."""

    id: str
    dir: Path
    limits: Limits
    stdout: list[str] = field(default_factory=list)
    stdout_bytes: int = 0
    tool_calls: int = 0
    fetches: int = 0
    given_ids: set[str] = field(default_factory=set)
    linked: dict[str, Path] = field(default_factory=dict)
    """Payload links in this run's ``refs/``, by the canonical key of the record's uri."""
    fetch_requests: int = 0
    """Fetches of this run that needed a payload request (bounded by ``max_fetches``)."""
    failed_fetches: dict[str, str] = field(default_factory=dict)
    """Reference id -> the reason its fetch failed in this run (answered again, no request)."""
    isolation: list[str] = field(default_factory=list)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    closing: bool = False
    ended_cleanly: bool = False
    """The child said done or error: it exits on its own, so it isn't killed at once."""
    started: float = field(default_factory=time.monotonic)
    fetching: bool = False
    next_call_id: int = 1
    """The call id the child's next request must carry (1, 2, ... as the protocol says)."""


@dataclass(frozen=True)
class RunProgress:
    """A snapshot of one running script, for a progress line (:meth:`Bridge.progress`)."""

    run_id: str
    elapsed_s: float
    tool_calls: int
    fetches: int
    fetching: bool
    """A payload is being fetched for it right now."""


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

    Use it as an async context manager under trio; everything it started (zygote, children,
    servers, fetches) is stopped and reaped when the ``async with`` block exits.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        limits: Limits | None = None,
        fetch_allow: Iterable[str] = (),
        *,
        eager_max_bytes: int | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.workspace = Workspace(workspace)
        self.registry = ReferenceRegistry()
        self._servers: dict[str, McpServer] = {}
        self.fetcher = ReferenceFetcher(
            self.registry,
            self.workspace,
            allow=fetch_allow,
            eager_max_bytes=eager_max_bytes,
            servers=self._servers,
        )
        self._tools: dict[str, PythonTool | tuple[McpServer, str]] = {}
        self._runs_by_id: dict[str, _Run] = {}
        self._zygote: ZygoteProcess | None = None
        self._link: ZygoteLink | None = None
        self._spares: deque[_Spare] = deque()
        self._spares_wanted = trio.Event()
        self._trash: deque[Path] = deque()
        self._trash_added = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self.registry.add_key_listener(self._unlink_marked)

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Bridge:
        stack = contextlib.AsyncExitStack()
        self._nursery = await stack.enter_async_context(trio.open_nursery())
        try:
            self._zygote = await trio.to_thread.run_sync(ZygoteProcess.start)
        except BaseException:
            self._nursery.cancel_scope.cancel()
            await stack.aclose()
            self._nursery = None
            raise
        self._link = ZygoteLink(self._zygote)
        await self._nursery.start(self._link.serve)
        (self.workspace.root / "runs").mkdir(exist_ok=True)
        (self.workspace.root / SPARES_DIR).mkdir(exist_ok=True)
        trash = self.workspace.root / TRASH_DIR
        trash.mkdir(exist_ok=True)
        self._trash.extend(trash.iterdir())  # left by a bridge that couldn't close: garbage too
        self._nursery.start_soon(self._keep_spares)
        self._nursery.start_soon(self._empty_trash)
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Cancel running scripts, stop servers and fetches, then the zygote and its children."""
        with trio.CancelScope(shield=True):
            for run in list(self._runs_by_id.values()):
                run.closing = True
                run.scope.cancel()
            for server in list(self._servers.values()):
                await server.aclose()
            self.fetcher.close()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        try:
            if self._stack is not None:
                await self._stack.aclose()
        finally:
            self._nursery = None
            self._stack = None
            with trio.CancelScope(shield=True):
                while self._spares:  # the zygote kills them as it stops; here: fds and dirs
                    spare = self._spares.popleft()
                    if spare.child.channel is not None:
                        await spare.child.channel.aclose()
                    remove_tree(spare.dir)
                with contextlib.suppress(OSError):
                    (self.workspace.root / SPARES_DIR).rmdir()
                while self._trash:
                    remove_tree(self._trash.popleft())
                with contextlib.suppress(OSError):
                    (self.workspace.root / TRASH_DIR).rmdir()
            self._link = None
            zygote, self._zygote = self._zygote, None
            if zygote is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(zygote.close)

    # --- tools ------------------------------------------------------------------------------

    def add_tool(self, tool: PythonTool | Any, name: str | None = None) -> None:
        """Offer a host tool to scripts (a ``python_tool``, or a callable, wrapped here).

        Raises ``ValueError`` for a name already taken or one scripts couldn't call.
        """
        wrapped = tool if isinstance(tool, PythonTool) else python_tool(tool, name=name)
        self._claim_name(wrapped.name)
        self._tools[wrapped.name] = wrapped

    async def add_server(self, server: McpServer) -> None:
        """Start a tool server and offer its tools to scripts as ``<name>.<tool>``.

        Raises :class:`~scriptbridge._mcp.ToolServerError` when it can't be started, and
        ``ValueError`` for a name already taken.
        """
        if self._nursery is None:
            raise ScriptBridgeError("open the Bridge (async with) before adding servers")
        if not SERVER_NAME.fullmatch(server.name) or server.name in self._servers:
            raise ValueError(f"not a usable server name: {server.name!r}")
        await server.open(self._nursery)
        names = [f"{server.name}.{tool}" for tool in server.tools]
        for full in names:
            if full in self._tools:
                await server.aclose()
                raise ValueError(f"tool name {full!r} is already taken")
        self._servers[server.name] = server
        for tool, full in zip(server.tools, names, strict=True):
            self._tools[full] = (server, tool)

    @property
    def tool_names(self) -> list[str]:
        """The names scripts can call, sorted."""
        return sorted(self._tools)

    def _claim_name(self, name: str) -> None:
        if name in self._tools:
            raise ValueError(f"tool name {name!r} is already taken")

    # --- the host's own view of results -----------------------------------------------------

    def ingest(self, result: object, *, server: str | None) -> list[ReferenceRecord]:
        """Register a result's references and apply its never marks (synchronously), and start
        the eager pass on them when it is on. Returns the records it registered."""
        records = self.registry.ingest(result, server=server)
        if self._nursery is not None and self.fetcher.eager_max_bytes is not None:
            self.fetcher.start_eager(self._nursery, records)
        return records

    # --- runs -------------------------------------------------------------------------------

    def progress(self) -> list[RunProgress]:
        """What each running script has done so far (pure; for progress lines)."""
        now = time.monotonic()
        return [
            RunProgress(run.id, now - run.started, run.tool_calls, run.fetches, run.fetching)
            for run in self._runs_by_id.values()
        ]

    async def run(
        self,
        source: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
    ) -> ScriptResult:
        """Run one script in a fresh sandbox child and return how it ended.

        When this returns or raises, the child has exited and been reaped, and the run's
        ``refs/`` is gone. Never raises for anything the script or the child does.

        Raises:
            ScriptBridgeError: the bridge isn't open.
            ValueError: ``inputs`` isn't plain data (str keys; None, bool, int, float, str,
                bytes, lists and dicts), checked before any child is started.
            trio.Cancelled: the caller was cancelled (the child is killed first).
        """
        self._live_link()
        try:
            check_plain(dict(inputs or {}))
        except ValueError as exc:
            raise ValueError(f"inputs must be plain data: {exc}") from exc
        limits = limits or self.limits
        started = time.perf_counter()
        run = _Run(id=secrets.token_hex(8), dir=self.workspace.root / "runs", limits=limits)
        run.dir = run.dir / run.id
        self._runs_by_id[run.id] = run
        child: _Child | None = None
        channel: ChildChannel | None = None
        value: Any = None
        error: ScriptError | None = None
        wall_hit = False
        try:
            with self.registry.journal():
                try:
                    with trio.CancelScope(shield=True):  # a fork we don't hear of would leak
                        child = await self._spawn(run)
                except (ZygoteError, TimeoutError, OSError) as exc:
                    error = ScriptError(type="SandboxCrashed", message=f"couldn't start: {exc}")
                if child is not None:
                    _make_run_dir(run.dir)  # there already, unless a test double is the child
                    channel = child.channel or ChildChannel(
                        child.from_child, child.to_child, limit=limits.max_message_bytes
                    )
                    channel.limit = limits.max_message_bytes
                    with run.scope:
                        with trio.move_on_after(limits.wall_s) as wall:
                            try:
                                value, error = await self._converse(
                                    run, channel, child.ready, source, dict(inputs or {})
                                )
                            except ProtocolViolation as exc:
                                error = ScriptError(type="ProtocolViolation", message=str(exc))
                            except _RunEnded as exc:
                                error = ScriptError(type=exc.kind, message=exc.message)
                        wall_hit = wall.cancelled_caught
                    if run.scope.cancelled_caught and run.closing:
                        error = ScriptError(type="Cancelled", message="the bridge was closed")
                    elif wall_hit:
                        error = ScriptError(
                            type="WallTimeExceeded",
                            message=f"the script ran past its {limits.wall_s:g} s wall time",
                        )
        finally:
            with trio.CancelScope(shield=True):
                exit_status = await self._finish(run, child, channel)
            self._runs_by_id.pop(run.id, None)
        if error is None and value is _NO_ENDING:
            error = (
                _crash_error(exit_status, limits)
                if exit_status is not None
                else ScriptError(type="SandboxCrashed", message="the sandbox process vanished")
            )
        outputs, passed = _outputs(run.dir, limits)
        quota = exit_status.quota_exceeded if exit_status is not None else None
        if passed is not None:  # no quota layer kept it to the quota (not root): nothing kept
            self._throw_away(run)
            outputs = []
            quota = f"the script left {passed} in out/, so none of it was kept"
        if quota is not None and (error is None or error.type != "Cancelled"):
            error = ScriptError(type="DiskQuotaExceeded", message=quota)
        if error is not None:
            value = None
        return ScriptResult(
            ok=error is None,
            value=value,
            stdout="".join(run.stdout),
            error=error,
            tool_calls=run.tool_calls,
            fetches=run.fetches,
            duration_s=time.perf_counter() - started,
            isolation=run.isolation,
            outputs=outputs,
        )

    def _live_link(self) -> ZygoteLink:
        if self._link is None:
            raise ScriptBridgeError("open the Bridge (async with) before running scripts")
        return self._link

    async def _spawn(self, run: _Run) -> _Child:
        """A fresh child for ``run``, in ``run.dir``: a spare if one fits, else forked now."""
        link = self._live_link()
        limits = _child_limits(run.limits)
        while self._spares and self._spares[0].limits == limits:
            spare = self._spares.popleft()  # replaced once this run is finished
            if not link.exited(spare.child.pid):
                try:  # the child's working directory and landlock rules follow the rename
                    os.rename(spare.dir, run.dir)
                except OSError as exc:
                    log.error("couldn't move spare %s to run %s: %s", spare.dir, run.id, exc)
                else:
                    return spare.child
            await self._drop_spare(spare)
        _make_run_dir(run.dir)
        return _Child(self, await link.spawn(run.dir, limits))

    # --- spare children ---------------------------------------------------------------------

    async def _keep_spares(self) -> None:
        """Keep :data:`SPARE_CHILDREN` spares ready, one fork at a time, for as long as the
        bridge is open (runs nursery task). A spare that fails to start is dropped and logged,
        and the next one waits a little longer."""
        pause = SPARE_RETRY_S[0]
        while True:
            if len(self._spares) >= SPARE_CHILDREN:
                self._spares_wanted = trio.Event()
                await self._spares_wanted.wait()
                continue
            try:
                self._spares.append(await self._start_spare())
            except (ZygoteError, TimeoutError, OSError, ProtocolViolation) as exc:
                if self._live_link().broken:
                    return  # the zygote is gone: runs say so themselves
                log.warning("couldn't start a spare child: %s", exc)
                await trio.sleep(pause)
                pause = min(pause * 2, SPARE_RETRY_S[1])
            else:
                pause = SPARE_RETRY_S[0]

    async def _start_spare(self) -> _Spare:
        """Fork a child bound to a new directory under ``.spares/`` and read its ``ready``.

        Raises ZygoteError, TimeoutError, OSError or ProtocolViolation; the child is then
        killed and its directory removed.
        """
        directory = self.workspace.root / SPARES_DIR / secrets.token_hex(8)
        _make_run_dir(directory)
        limits = _child_limits(self.limits)
        spare: _Spare | None = None
        try:
            with trio.CancelScope(shield=True):  # a fork we don't hear of would leak
                with trio.fail_after(READY_TIMEOUT_S):
                    spawned = await self._live_link().spawn(directory, limits)
            spare = _Spare(_Child(self, spawned), directory, limits)
            channel = ChildChannel(
                spawned.from_child, spawned.to_child, limit=self.limits.max_message_bytes
            )
            spare.child.channel = channel
            with trio.fail_after(READY_TIMEOUT_S):
                first = await channel.receive()
            if not isinstance(first, Ready) or first.protocol != PROTOCOL_VERSION:
                raise ProtocolViolation(f"a spare child answered {first!r} instead of ready")
            spare.child.ready = first
        except BaseException as exc:
            with trio.CancelScope(shield=True):
                if spare is None:
                    remove_tree(directory)
                else:  # the bridge is closing: the zygote kills it as it stops
                    await self._drop_spare(spare, kill=not isinstance(exc, trio.Cancelled))
            raise
        return spare

    async def _drop_spare(self, spare: _Spare, *, kill: bool = True) -> None:
        """Close a spare that serves no run, kill and reap it, and remove its directory."""
        child = spare.child
        with trio.CancelScope(shield=True):
            if child.channel is not None:
                await child.channel.aclose()
            else:
                for fd in (child.to_child, child.from_child):
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if kill:
                try:
                    await child.stop()
                except (ZygoteError, TimeoutError, ScriptBridgeError) as exc:
                    log.error("couldn't reap spare child %d: %s", child.pid, exc)
            remove_tree(spare.dir)

    async def _finish(
        self, run: _Run, child: _Child | None, channel: ChildChannel | None
    ) -> ChildExit | None:
        """Kill (if needed) and reap the child, close the channel, drop the run's links."""
        status: ChildExit | None = None
        if channel is not None:
            await channel.aclose()
        if child is not None:
            try:
                if run.ended_cleanly:  # it exits on its own; killed only if it lingers
                    with contextlib.suppress(TimeoutError):
                        status = await child.wait(EXIT_GRACE_S)
                if status is None:
                    status = await child.stop()
            except (ZygoteError, TimeoutError, ScriptBridgeError) as exc:
                log.error("couldn't reap child %d of run %s: %s", child.pid, run.id, exc)
        refs = run.dir / "refs"
        if run.linked or _holds_anything(refs):  # payload links go now, wherever the dir goes
            remove_tree(refs)
        run.linked.clear()
        if _holds_anything(run.dir / "out"):
            with contextlib.suppress(OSError):
                os.rmdir(refs)
        else:
            self._throw_away(run)
        self._spares_wanted.set()  # replace the spare this run may have taken, now
        return status

    def _throw_away(self, run: _Run) -> None:
        """Move a finished run's directory out of ``runs/`` at once, to be removed later."""
        trash = self.workspace.root / TRASH_DIR / run.id
        try:
            os.rename(run.dir, trash)
        except FileNotFoundError:
            return
        except OSError:  # no trash to move it to: removed here, as it must go either way
            remove_tree(run.dir)
            return
        self._trash.append(trash)
        self._trash_added.set()

    async def _empty_trash(self) -> None:
        """Remove thrown-away run directories, off the request path, for as long as the bridge
        is open (runs nursery task; what is left when it closes is removed then)."""
        while True:
            if not self._trash:
                self._trash_added = trio.Event()
                await self._trash_added.wait()
            await trio.lowlevel.checkpoint()  # let whoever threw it away go on first
            if self._trash:
                remove_tree(self._trash.popleft())

    # --- the conversation -------------------------------------------------------------------

    async def _converse(
        self,
        run: _Run,
        channel: ChildChannel,
        ready: Ready | None,
        source: str,
        inputs: dict[str, Any],
    ) -> tuple[Any, ScriptError | None]:
        """Serve the child until it says it is done; returns (value, error).

        ``ready`` is the child's ``ready`` when it was read ahead (a spare's); otherwise the
        child's first message is read here.
        """
        first: object = ready
        if first is None:
            with trio.move_on_after(READY_TIMEOUT_S) as ready_wait:
                first = await channel.receive()
            if ready_wait.cancelled_caught:
                raise _RunEnded("SandboxCrashed", "the sandbox didn't report ready in time")
        if first is None:  # it ended before a word: its exit status tells why
            return _NO_ENDING, None
        if isinstance(first, RunError) and first.phase == "setup":
            raise _RunEnded("SandboxCrashed", f"couldn't start: {_one_line(first.message)}")
        if not isinstance(first, Ready):
            raise ProtocolViolation(f"expected ready first, got {_op(first)}")
        if first.protocol != PROTOCOL_VERSION:
            raise ProtocolViolation(f"the child speaks protocol {first.protocol}")
        run.isolation = list(first.isolation)
        for skipped in first.skipped:
            log.info("run %s: layer %s skipped: %s", run.id, skipped.layer, skipped.reason)
        limits = run.limits
        start = Start(
            source=source,
            inputs=inputs,
            tools=self.tool_names,
            limits=RunLimits(
                max_output_bytes=limits.max_output_bytes,
                max_tool_calls=limits.max_tool_calls,
                max_message_bytes=limits.max_message_bytes,
                max_out_bytes=limits.max_out_bytes,
                max_out_files=limits.max_out_files,
            ),
        )
        try:
            await channel.send(start)
        except ProtocolError as exc:
            raise _RunEnded("ProtocolViolation", f"the run's start message: {exc}") from exc
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _RunEnded("SandboxCrashed", "the sandbox closed its channel") from exc
        while True:
            message = await channel.receive()
            call_id = getattr(message, "call_id", None)
            if call_id is not None:  # a request: acted on only with the id that is due
                if call_id != run.next_call_id:
                    raise ProtocolViolation(f"call id {call_id} where {run.next_call_id} was due")
                run.next_call_id += 1
            match message:
                case None:
                    return _NO_ENDING, None
                case Output(text=text):
                    self._output(run, text)
                case CallTool(call_id=call_id, name=name, args=args):
                    self._count_calls(run, 1)
                    ok, answer = await self._call(run, name, args)
                    reply: Any = (
                        ToolResult(call_id=call_id, view=answer)
                        if ok
                        else ToolFailed(call_id=call_id, message=answer)
                    )
                    await self._send(channel, reply, call_id)
                case CallTools(call_id=call_id, calls=calls):
                    self._count_calls(run, len(calls))
                    outcomes = await self._call_batch(run, [(c.name, c.args) for c in calls])
                    await self._send(
                        channel, ToolResults(call_id=call_id, results=outcomes), call_id
                    )
                case Fetch(call_id=call_id, ref_id=ref_id):
                    await self._send(channel, await self._fetch(run, call_id, ref_id), call_id)
                case Done(value=value):
                    run.ended_cleanly = True
                    return value, None
                case RunError(type=kind, message=text, line=line):
                    run.ended_cleanly = True
                    return None, ScriptError(type=kind, message=text, line=line)
                case Ready():
                    raise ProtocolViolation("the child sent ready twice")
                case _:
                    raise ProtocolViolation(f"unexpected message {_op(message)}")

    async def _send(self, channel: ChildChannel, reply: Any, call_id: int) -> None:
        """Answer the child; an answer too large for a frame is answered as a failure."""
        try:
            try:
                await channel.send(reply)
            except ProtocolError:
                reason = f"its answer is larger than this run's {channel.limit}-byte message limit"
                if isinstance(reply, FetchResult):
                    await channel.send(FetchResult(call_id=call_id, unfetchable=reason))
                elif isinstance(reply, ToolResults):
                    failed: list[CallOk | CallFailed] = [
                        CallFailed(message=reason) for _ in reply.results
                    ]
                    await channel.send(ToolResults(call_id=call_id, results=failed))
                else:
                    await channel.send(ToolFailed(call_id=call_id, message=reason))
        except ProtocolError as exc:  # even its failures don't fit: a batch too large to answer
            raise _RunEnded(
                "ToolCallsExceeded",
                "the script's batch of tool calls can't be answered, even as failures, within "
                f"this run's {channel.limit}-byte message limit",
            ) from exc
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the child is gone; its exit status tells why

    def _output(self, run: _Run, text: str) -> None:
        if not text:  # nothing to keep: a flood of empty frames must not grow the list
            return
        room = run.limits.max_output_bytes - run.stdout_bytes
        data = text.encode("utf-8", "replace")
        if len(data) > room:
            run.stdout.append(data[: max(room, 0)].decode("utf-8", "ignore"))
            run.stdout_bytes = run.limits.max_output_bytes
            raise _RunEnded(
                "OutputExceeded",
                f"the script printed more than {run.limits.max_output_bytes} bytes",
            )
        run.stdout.append(text)
        run.stdout_bytes += len(data)

    def _count_calls(self, run: _Run, count: int) -> None:
        run.tool_calls += count
        if run.tool_calls > run.limits.max_tool_calls:
            raise _RunEnded(
                "ToolCallsExceeded",
                f"the script made more than {run.limits.max_tool_calls} tool calls",
            )

    async def _call_batch(
        self, run: _Run, calls: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[CallOk | CallFailed]:
        """Run a batch's calls concurrently; every result is ingested before any view of the
        batch is rendered, so a never in one call's result reaches every call's view."""
        invoked: list[tuple[bool, Any] | None] = [None] * len(calls)
        limiter = trio.CapacityLimiter(run.limits.max_parallel_calls)

        async def one(index: int, name: str, args: dict[str, Any]) -> None:
            async with limiter:
                invoked[index] = await self._invoke(run, name, args)

        async with trio.open_nursery() as nursery:
            for index, (name, args) in enumerate(calls):
                nursery.start_soon(one, index, name, args)
        outcomes: list[CallOk | CallFailed] = []
        for (name, _args), done in zip(calls, invoked, strict=True):
            if done is None:  # pragma: no cover - every task of the nursery finished
                continue
            ok, answer = self._answer(run, name, *done)
            outcomes.append(CallOk(view=answer) if ok else CallFailed(message=answer))
        return outcomes

    async def _call(self, run: _Run, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """Call one tool; returns (True, script view) or (False, one-line reason). The view is
        rendered after the result is ingested, with no await before it is handed back."""
        return self._answer(run, name, *await self._invoke(run, name, args))

    async def _invoke(self, run: _Run, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """Call one tool and ingest its result; returns (True, the result) or (False, a
        one-line reason). Its marks have landed when this returns."""
        entry = self._tools.get(name)
        if entry is None:
            return False, f"no tool is named {name!r}"
        server_id: str | None = None
        try:
            if isinstance(entry, PythonTool):
                result: Any = await entry.call(args)
            else:
                server, tool = entry
                server_id = server.name
                result = await server.call_tool(tool, args)
        except ToolServerError as exc:
            return False, _one_line(str(exc))
        except Exception as exc:
            log.info("run %s: tool %s raised %s", run.id, name, type(exc).__name__)
            return False, _one_line(f"{type(exc).__name__}: {exc}")
        self.ingest(result, server=server_id)  # marks land before anything is awaited
        return True, result

    def _answer(self, run: _Run, name: str, ok: bool, result: Any) -> tuple[bool, Any]:
        """What the script gets for an invoked call: its view, rendered now against every mark
        ingested so far (synchronous: the caller sends it without awaiting in between), or
        the failure's reason."""
        if not ok:
            return False, result
        if isinstance(result, dict) and result.get("isError") is True:
            text = lanes.stored_copy(result, self.registry).strip()
            return False, (text or f"the tool {name} failed")[:TOOL_ERROR_MAX_CHARS]
        view = render_script_view(result, self.registry)
        try:
            check_plain(view)  # what a message may carry (values, depth): else no message
        except ValueError as exc:
            return False, f"its result can't be handed to a script: {exc}"
        run.given_ids.update(_reference_ids(view))
        return True, view

    async def _fetch(self, run: _Run, call_id: int, ref_id: str) -> FetchResult:
        if ref_id not in run.given_ids:
            raise ProtocolViolation("the child fetched a reference id this run was never given")
        record = self.registry.get(ref_id)
        if record is None:
            return FetchResult(call_id=call_id, unfetchable=markers.NO_LONGER_HELD)
        if record.payload_never or self.registry.is_marked(record.uri):
            return FetchResult(call_id=call_id, unfetchable=markers.PAYLOAD_NEVER)
        failed = run.failed_fetches.get(ref_id)
        if failed is not None:  # answered again without a new request
            return FetchResult(call_id=call_id, unfetchable=failed)
        run.fetches += 1
        if record.saved_path is None:  # this one may cost a request
            if run.fetch_requests >= run.limits.max_fetches:
                reason = markers.fetch_limit(run.limits.max_fetches)
                return FetchResult(call_id=call_id, unfetchable=reason)
            run.fetch_requests += 1
        run.fetching = True
        try:
            outcome = await self.fetcher.fetch(record)
        finally:
            run.fetching = False
        if not isinstance(outcome, Saved):
            if outcome.reason != markers.PAYLOAD_NEVER:
                run.failed_fetches[ref_id] = outcome.reason
            return FetchResult(call_id=call_id, unfetchable=outcome.reason)
        if self.registry.is_marked(record.uri):  # marked meanwhile: not linked, not named
            return FetchResult(call_id=call_id, unfetchable=markers.PAYLOAD_NEVER)
        name = Path(outcome.path).name
        link = run.dir / "refs" / name
        try:
            if not link.exists():
                os.link(self.workspace.root / outcome.path, link)
        except OSError as exc:
            log.error("run %s: couldn't link %s: %s", run.id, outcome.path, exc)
            return FetchResult(call_id=call_id, unfetchable=markers.WORKSPACE_FAILED)
        run.linked[record.key] = link
        return FetchResult(call_id=call_id, saved_to=f"refs/{name}")

    def _unlink_marked(self, key: str) -> None:
        """The registry's key listener: unlink every payload under ``key`` from every running
        script, whether or not its record still lives."""
        for run in self._runs_by_id.values():
            link = run.linked.pop(key, None)
            if link is not None:
                with contextlib.suppress(FileNotFoundError):
                    link.unlink()


_NO_ENDING: Final = object()
"""What a conversation returns when the child closed its channel without done or error."""


def _crash_error(status: ChildExit, limits: Limits) -> ScriptError:
    """Why a child that ended without a word ended: CPU, memory, or a crash."""
    code = status.returncode
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and status.cpu_s >= limits.cpu_s):
        return ScriptError(
            type="CpuTimeExceeded", message=f"the script used its {limits.cpu_s:g} s of CPU time"
        )
    if code < 0 and status.max_rss_kb >= limits.memory_mb * 1024 * 0.9:
        return ScriptError(
            type="MemoryExceeded", message=f"the script used its {limits.memory_mb} MiB of memory"
        )
    try:
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
    except ValueError:  # a real-time signal has no name
        how = f"signal {-code}"
    return ScriptError(type="SandboxCrashed", message=f"the sandbox process ended with {how}")


def _make_run_dir(directory: Path) -> None:
    """Make a run's (or a spare's) directory with its ``refs/`` and ``out/``, if missing."""
    if not directory.is_dir():
        (directory / "refs").mkdir(parents=True)
        (directory / "out").mkdir()


def _holds_anything(directory: Path) -> bool:
    """Whether ``directory`` has an entry: ``False`` when it is gone, ``True`` when it can't be
    read (then it is treated as holding something, never thrown away unseen)."""
    try:
        with os.scandir(directory) as entries:
            return next(entries, None) is not None
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _child_limits(limits: Limits) -> ChildLimits:
    """The OS limits a child for a run with ``limits`` is forked with."""
    return ChildLimits(
        cpu_s=limits.cpu_s,
        memory_mb=limits.memory_mb,
        max_out_bytes=limits.max_out_bytes,
        max_out_files=limits.max_out_files,
    )


def _one_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "it failed"
    return markers.well_formed(line[:REASON_MAX_CHARS])


def _op(message: object) -> str:
    return getattr(message, "op", type(message).__name__)


def _reference_ids(view: Any) -> set[str]:
    """The reference ids a view gives a script (its script objects' ids), iteratively."""
    found: set[str] = set()
    stack = [view]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "reference" and isinstance(item.get("id"), str):
                found.add(item["id"])
            else:
                stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _outputs(run_dir: Path, limits: Limits) -> tuple[list[str], str | None]:
    """The files the script left in its ``out/``, relative to the workspace root, and why they
    pass the run's disk quota (``None`` when they don't).

    The walk never follows a symlink, lists regular files only, and stops at the first entry
    past ``max_out_files``: what a child left can't make it long.
    """
    root = run_dir.parent.parent
    found: list[str] = []
    size = entries = 0
    pending = [run_dir / "out"]
    while pending:
        try:
            listing = os.scandir(pending.pop())
        except OSError:
            continue
        with listing:
            for entry in listing:
                entries += 1
                if entries > limits.max_out_files:
                    return sorted(found), f"more than {limits.max_out_files} files and directories"
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    size += entry.stat(follow_symlinks=False).st_size
                    found.append(str(Path(entry.path).relative_to(root)))
    if size > limits.max_out_bytes:
        return sorted(found), f"more than {limits.max_out_bytes} bytes"
    return sorted(found), None
