"""What a run's child may ask for, answered: tool calls and payload fetches (the demand-fetch
loop's host side).

Guarantees:

- A tool's result is ingested whole (every never mark of it landed) before its view is
  rendered, and the script gets only its script view, rendered with no await between the
  render and the hand-back. In a batch, every result is ingested before any view of the batch
  is rendered, so a never in one call's result reaches every call's view. A big result is
  ingested in slices (:class:`~scriptbridge._marks_gate.MarksGate`), so the loop isn't held;
  every view, and every fetch decision, waits until no ingestion is under way (of this run or
  any other), so none is made against fewer marks than the results that arrived before it
  carry.
- An error result, a tool that raises, an unknown tool name, or a view that no message could
  carry is a failure with a one-line reason (the script's ``ToolError``), never an error of
  the run.
- A fetch names a reference id this run was given (any other ends the run with
  ``ProtocolViolation``). A never payload is never linked or named; a saved payload is hard
  linked into the run's own ``refs/``. At most ``Limits.max_fetches`` fetches of a run cost a
  request, and a fetch that failed is answered again from the run's memory.
- A tool call's progress (a server's ``notifications/progress``) shows in the run's
  :class:`~scriptbridge._run_state.RunProgress` while the call is in flight.
"""

from __future__ import annotations

import difflib
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

import trio

from sandbox.protocol import DESCRIBE_TOOL, MAX_DATA_NODES, SEARCH_TOOLS, FetchResult

from . import lanes, markers
from ._exceptions import ProtocolViolation
from ._fetcher import ReferenceFetcher, Saved
from ._mcp import ToolServerError, progress_reporter
from ._registry import ReferenceRecord, ReferenceRegistry
from ._render import render_for_script
from ._run_dirs import RunDir
from ._run_state import RunState, ToolProgress
from ._tool_search import describe_result, search_result
from ._tool_table import Tool, ToolTable
from ._tools import InvalidArguments

__all__ = ["RunServices", "call_and_ingest"]

log = logging.getLogger("scriptbridge.supervisor")

TOOL_ERROR_MAX_CHARS: Final = 100_000

Ingest = Callable[[object, str | None], Awaitable[list[ReferenceRecord]]]
"""Registers a result's references and applies its marks: ``await ingest(result, server)``;
every mark has landed when it returns, also when the caller was cancelled meanwhile."""

WaitSettled = Callable[[], Awaitable[None]]
"""Returns when no ingestion is under way (``MarksGate.wait_settled``)."""


CallTool = Callable[[Tool, dict[str, Any]], Awaitable[Any]]
"""Calls a tool where it belongs (a host's asyncio tool on the host's loop)."""


async def _call_here(tool: Tool, arguments: dict[str, Any]) -> Any:
    return await tool.call(arguments)


async def call_and_ingest(
    tool: Tool, args: dict[str, Any], call_tool: CallTool, ingest: Ingest
) -> tuple[bool, Any]:
    """Call ``tool`` where it belongs and ingest its result: (True, the result), or (False, a
    one-line reason) when the tool raised. Its marks have all landed when this returns, also
    when the caller was cancelled meanwhile."""
    try:
        result = await call_tool(tool, args)
    except (ToolServerError, InvalidArguments) as exc:  # their own lines say it all
        return False, markers.one_line(str(exc))
    except Exception as exc:
        log.info("tool %s raised %s", tool.name, type(exc).__name__)
        return False, markers.one_line(f"{type(exc).__name__}: {exc}")
    await ingest(result, tool.server)  # whole, even if the caller is cancelled meanwhile
    return True, result


class RunServices:
    """Serves one run's tool calls and fetches (module doc)."""

    def __init__(
        self,
        run: RunState,
        run_dir: RunDir,
        tools: ToolTable,
        registry: ReferenceRegistry,
        fetcher: ReferenceFetcher,
        ingest: Ingest,
        wait_settled: WaitSettled,
        workspace_root: Path,
        *,
        call_tool: CallTool | None = None,
    ) -> None:
        self._run = run
        self._dir = run_dir
        self._tools = tools
        self._registry = registry
        self._fetcher = fetcher
        self._ingest = ingest
        self._wait_settled = wait_settled
        self._root = workspace_root
        self._call_tool = call_tool or _call_here
        self._call_keys = itertools.count()

    async def call(self, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """Call one tool; returns (True, script view) or (False, one-line reason)."""
        ok, result = await self._invoke(name, args)
        if ok:
            await self._wait_settled()
        return self._answer(name, ok, result)

    async def call_batch(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Run a batch's calls concurrently (at most ``max_parallel_calls`` at once); the
        answers are in the order of the calls."""
        invoked: list[tuple[bool, Any] | None] = [None] * len(calls)
        limiter = trio.CapacityLimiter(self._run.limits.max_parallel_calls)

        async def one(index: int, name: str, args: dict[str, Any]) -> None:
            async with limiter:
                invoked[index] = await self._invoke(name, args)

        async with trio.open_nursery() as nursery:
            for index, (name, args) in enumerate(calls):
                nursery.start_soon(one, index, name, args)
        await self._wait_settled()  # then every view is rendered with no await between
        outcomes: list[dict[str, Any]] = []
        for (name, _args), done in zip(calls, invoked, strict=True):
            if done is None:  # pragma: no cover - every task of the nursery finished
                continue
            ok, answer = self._answer(name, *done)
            # the bodies of CallOk / CallFailed (see tool_reply): built here, not validated
            outcomes.append(
                {"kind": "ok", "view": answer} if ok else {"kind": "error", "message": answer}
            )
        return outcomes

    async def _invoke(self, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """Call one tool and ingest its result; returns (True, the result) or (False, a
        one-line reason). Its marks have landed when this returns."""
        if name in (SEARCH_TOOLS, DESCRIBE_TOOL):  # tools.search, tools.describe: the run's own
            specs = [tool.spec() for tool in self._tools.select(None)]
            try:
                found = search_result if name == SEARCH_TOOLS else describe_result
                return True, found(specs, args)
            except (LookupError, ValueError) as exc:
                return False, str(exc)
        tool = self._tools.get(name)
        if tool is None:
            return False, _no_such_tool(name, self._tools.names)
        key = next(self._call_keys)
        shown = self._run.tool_progress

        def report(progress: float, total: float | None, message: str | None) -> None:
            shown[key] = ToolProgress(name, progress, total, message)

        reporting = progress_reporter.set(report)
        try:
            return await call_and_ingest(tool, args, self._call_tool, self._ingest)
        finally:
            progress_reporter.reset(reporting)
            shown.pop(key, None)

    def _answer(self, name: str, ok: bool, result: Any) -> tuple[bool, Any]:
        """What the script gets for an invoked call: its view, rendered now against every mark
        ingested so far (the caller has waited for the ingestions under way, so the view is a
        settled one), or the failure's reason."""
        if not ok:
            return False, result
        if isinstance(result, dict) and result.get("isError") is True:
            with self._registry.settled_view():
                text = lanes.stored_copy(result, self._registry).strip()
            return False, (text or f"the tool {name} failed")[:TOOL_ERROR_MAX_CHARS]
        with self._registry.settled_view():
            done = render_for_script(result, self._registry)
        if done.nodes > MAX_DATA_NODES:  # its depth is within the protocol's by construction
            return False, (
                "its result can't be handed to a script: "
                f"plain data has more than {MAX_DATA_NODES} values"
            )
        self._run.given_ids.update(done.reference_ids)
        return True, done.view

    async def fetch(self, call_id: int, ref_id: str) -> FetchResult:
        """Answer a fetch of ``ref_id``: the path of its payload in the run's ``refs/``, or why
        it can't be had. Raises ``ProtocolViolation`` for an id this run wasn't given."""
        run = self._run
        if ref_id not in run.given_ids:
            raise ProtocolViolation("the child fetched a reference id this run was never given")
        await self._wait_settled()  # no decision before the marks under way have landed
        record = self._registry.get(ref_id)
        if record is None:
            return FetchResult(call_id=call_id, unfetchable=markers.NO_LONGER_HELD)
        if record.payload_never or self._registry.is_marked(record.uri):
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
            outcome = await self._fetcher.fetch(record)
        finally:
            run.fetching = False
        if not isinstance(outcome, Saved):
            if outcome.reason != markers.PAYLOAD_NEVER:
                run.failed_fetches[ref_id] = outcome.reason
            return FetchResult(call_id=call_id, unfetchable=outcome.reason)
        await self._wait_settled()
        if self._registry.is_marked(record.uri):  # marked meanwhile: not linked, not named
            return FetchResult(call_id=call_id, unfetchable=markers.PAYLOAD_NEVER)
        try:
            saved_to = self._dir.link(record.key, self._root / outcome.path)
        except OSError as exc:
            log.error("run %s: couldn't link %s: %s", run.id, outcome.path, exc)
            return FetchResult(call_id=call_id, unfetchable=markers.WORKSPACE_FAILED)
        return FetchResult(call_id=call_id, saved_to=saved_to)


def _no_such_tool(name: str, offered: list[str]) -> str:
    """Why a call named no tool, with the closest names offered (at most three)."""
    near = difflib.get_close_matches(name, offered, n=3, cutoff=0.6)
    if not near:
        return f"no tool is named {name!r}"
    return f"no tool is named {name!r} (the closest: {', '.join(repr(n) for n in near)})"
