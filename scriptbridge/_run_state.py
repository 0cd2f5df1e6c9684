"""The state of one run while the bridge serves it, and the snapshot hosts see of it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from sandbox.protocol import Carry, CarryIn, Ending, carry_bytes

from ._exceptions import ProtocolViolation
from ._limits import Limits

__all__ = ["RunEnded", "RunProgress", "RunState", "ToolProgress", "Watch"]


class RunEnded(Exception):
    """Ends a run early with ``ending`` (raised while it is served)."""

    def __init__(self, ending: Ending, message: str) -> None:
        super().__init__(message)
        self.ending = ending
        self.message = message


@dataclass(frozen=True)
class Watch:
    """What a host asked to hear of one run: its ``label`` in progress snapshots, and each
    piece of printed text as it comes (``on_output``, on the host's loop)."""

    label: str | None = None
    on_output: Callable[[str], object] | None = None


@dataclass
class RunState:
    """What one run has done so far, and what it may still do."""

    id: str
    limits: Limits
    stdout: list[str] = field(default_factory=list)
    stdout_bytes: int = 0
    tool_calls: int = 0
    fetches: int = 0
    given_ids: set[str] = field(default_factory=set)
    """The reference ids this run was given: the only ones it may fetch."""
    fetch_requests: int = 0
    """Fetches of this run that needed a payload request (bounded by ``max_fetches``)."""
    failed_fetches: dict[str, str] = field(default_factory=dict)
    """Reference id -> the reason its fetch failed in this run (answered again, no request)."""
    isolation: list[str] = field(default_factory=list)
    value_note: str | None = None
    """Why the script's value came back as its repr (``ScriptResult.value_note``)."""
    required: frozenset[str] = frozenset()
    """The layers its child must report in force before the script is sent
    (``require_isolation``)."""
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    closing: bool = False
    """The bridge is closing: the run was cancelled by it, not by its caller."""
    ended_cleanly: bool = False
    """The child said done or error: it exits on its own, so it isn't killed at once."""
    started: float = field(default_factory=time.monotonic)
    fetching: bool = False
    next_call_id: int = 1
    """The call id the child's next request must carry (1, 2, ... as the protocol says)."""
    tool_progress: dict[int, ToolProgress] = field(default_factory=dict)
    """The last progress each tool call in flight reported, by a key of the call."""
    carry_in: CarryIn | None = None
    """For a step of a session: what carries into it (``None``: a lone run)."""
    carry_out: Carry | None = None
    """For a step of a session: what its child said carries out of it."""
    label: str | None = None
    """The host's name for the run, shown in its progress."""
    on_output: Callable[[str], None] | None = None
    """Hears each piece of printed text it keeps, as it is kept (must not raise)."""

    def keep_carry(self, carry: Carry) -> None:
        """Keep a step's carry-out; ``ProtocolViolation`` when this run isn't a session's step,
        has one already, or the carry is past the step's bound."""
        if self.carry_in is None:
            raise ProtocolViolation("the child sent a carry in a run that isn't a session's step")
        if self.carry_out is not None:
            raise ProtocolViolation("the child sent its carry twice")
        try:
            size = carry_bytes(carry.globals, carry.definitions)
        except ValueError as exc:
            raise ProtocolViolation(f"the child's carry: {exc}") from exc
        if size > self.carry_in.max_bytes:
            raise ProtocolViolation(
                f"the child's carry is {size} bytes, past its {self.carry_in.max_bytes}"
            )
        self.carry_out = carry

    def print(self, text: str) -> None:
        """Keep printed ``text``, within ``max_output_bytes``; past it the run ends
        (``RunEnded``, with what fits kept). Empty text keeps nothing, so a flood of empty
        frames can't grow the list."""
        if not text:
            return
        room = self.limits.max_output_bytes - self.stdout_bytes
        data = text.encode("utf-8", "replace")
        if len(data) > room:
            self._keep(data[: max(room, 0)].decode("utf-8", "ignore"))
            self.stdout_bytes = self.limits.max_output_bytes
            raise RunEnded(
                Ending.OutputExceeded,
                f"the script printed more than {self.limits.max_output_bytes} bytes",
            )
        self._keep(text)
        self.stdout_bytes += len(data)

    def _keep(self, text: str) -> None:
        self.stdout.append(text)
        if self.on_output is not None and text:
            self.on_output(text)

    def count_calls(self, count: int) -> None:
        """Count ``count`` tool calls; past ``max_tool_calls`` the run ends (``RunEnded``)."""
        self.tool_calls += count
        if self.tool_calls > self.limits.max_tool_calls:
            raise RunEnded(
                Ending.ToolCallsExceeded,
                f"the script made more than {self.limits.max_tool_calls} tool calls",
            )

    def progress(self, now: float) -> RunProgress:
        return RunProgress(
            self.id,
            now - self.started,
            self.tool_calls,
            self.fetches,
            self.fetching,
            tuple(self.tool_progress.values()),
            self.label,
        )


@dataclass(frozen=True)
class ToolProgress:
    """The last progress a tool call in flight reported (``notifications/progress``)."""

    tool: str
    progress: float
    total: float | None
    message: str | None


@dataclass(frozen=True)
class RunProgress:
    """A snapshot of one running script, for a progress line (:meth:`Bridge.progress`)."""

    run_id: str
    elapsed_s: float
    tool_calls: int
    fetches: int
    fetching: bool
    """A payload is being fetched for it right now."""
    tool_progress: tuple[ToolProgress, ...] = ()
    """What its tool calls in flight last said of their progress, if they said anything."""
    label: str | None = None
    """The name the host gave the run (``Bridge.run(label=...)``), if it gave one."""
