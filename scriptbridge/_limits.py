"""What a run may use (``Limits``) and what it gives back (``ScriptResult``), as pydantic models.

``Limits`` are enforced from outside the child (the supervisor kills it at the wall-time
deadline, counts tool calls and output, caps frame sizes) and inside it (rlimits for CPU time
and memory, the runtime's own counters), so a child that lies can't outlive them.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from .markers import well_formed

__all__ = ["LIMIT_ERRORS", "Limits", "ScriptError", "ScriptResult"]

LimitError = Literal[
    "WallTimeExceeded",
    "CpuTimeExceeded",
    "MemoryExceeded",
    "OutputExceeded",
    "ToolCallsExceeded",
    "DiskQuotaExceeded",
    "SandboxCrashed",
    "ProtocolViolation",
    "Cancelled",
]
LIMIT_ERRORS: frozenset[str] = frozenset(LimitError.__args__)  # type: ignore[attr-defined]
"""The ``error.type`` values a run ends with when a limit (not the script) stopped it."""


class Limits(BaseModel):
    """The limits of one run. Every field has a safe default; all are validated on creation.

    Attributes:
        wall_s: seconds from start to result; the child is killed at the deadline.
        cpu_s: CPU seconds the child may use (an rlimit; SIGXCPU, then SIGKILL).
        memory_mb: the child's address-space limit, in MiB.
        max_tool_calls: tool calls in one run (each call of a batch counts).
        max_parallel_calls: calls of one ``call_tools`` batch run at once.
        max_output_bytes: bytes of printed output kept; past it the run ends.
        max_message_bytes: the largest frame either side may send.
        max_fetches: payload requests one run may cause: fetches of references not already
            saved (a saved copy is answered without a request, and a failed fetch of a record
            is answered again from the run's memory). Past it a fetch raises ``Unfetchable``
            in the script, saying so; the run goes on.
        max_out_bytes: bytes of file contents the run may leave in its ``out/`` (every file's
            size, summed); past it the run ends with ``DiskQuotaExceeded``.
        max_out_files: entries the run may leave in its ``out/``: every file and every
            directory counts one (``out/`` itself doesn't), and so does anything else a
            script could make there; past it the run ends with ``DiskQuotaExceeded``.

    The disk quota (the last two) is enforced by ``write_text``, which refuses the write that
    would pass it, and, where the machine allows (root), by the OS: ``out/`` is then a tmpfs
    of that size while the run runs (so a run may hold up to ``max_out_bytes`` of memory
    besides ``memory_mb``), copied to the disk within the quota when the child has exited.
    Either way the disk keeps no more than the quota of a run.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(default=30.0, gt=0, le=24 * 3600)
    cpu_s: float = Field(default=10.0, gt=0, le=24 * 3600)
    memory_mb: int = Field(default=256, ge=32, le=1024 * 1024)
    max_tool_calls: int = Field(default=1000, ge=0, le=10**9)
    max_parallel_calls: int = Field(default=8, ge=1, le=1024)
    max_output_bytes: int = Field(default=1_000_000, ge=0, le=2**40)
    max_message_bytes: int = Field(default=16 * 2**20, ge=1024, le=64 * 2**20)
    max_fetches: int = Field(default=100, ge=0, le=10**6)
    max_out_bytes: int = Field(default=64 * 2**20, ge=0, le=2**40)
    max_out_files: int = Field(default=1000, ge=0, le=10**6)


def json_safe(value: Any) -> Any:
    """``value`` as JSON can carry it: every string well formed (a lone surrogate becomes
    U+FFFD), ``bytes`` as ``{"$bytes": "<base64>"}``, tuples as lists, dict keys as strings.
    Plain data from a child is at most 100 deep; anything nested deeper (a host's own value)
    is cut to its ``repr``."""

    def convert(item: Any, depth: int) -> Any:
        if isinstance(item, str):
            return well_formed(item)
        if isinstance(item, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(item).decode("ascii")}
        if depth > 200:
            return well_formed(repr(item)[:1000])
        if isinstance(item, dict):
            return {well_formed(str(k)): convert(v, depth + 1) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [convert(child, depth + 1) for child in item]
        return item

    return convert(value, 0)


class ScriptError(BaseModel):
    """Why a run did not finish: the script's exception, or the limit that stopped it."""

    model_config = ConfigDict(frozen=True)

    type: str
    message: str
    line: int | None = None

    @field_serializer("type", "message", when_used="json")
    def _well_formed(self, text: str) -> str:
        return well_formed(text)


class ScriptResult(BaseModel):
    """The outcome of one run.

    Attributes:
        ok: the script ran to its end.
        value: the value of its last expression statement, as plain data (a ``repr`` when it
            wasn't plain data).
        stdout: what it printed (capped at ``Limits.max_output_bytes``).
        error: why it didn't finish, or ``None``.
        tool_calls: tool calls it made.
        fetches: reference payloads it fetched.
        duration_s: seconds from request to result.
        isolation: the isolation layers that were in force, in the order applied.
        outputs: the files the script left in its ``out/``, relative to the workspace
            (``runs/<run-id>/out/report.md``); each run has an ``out/`` of its own.

    A result always serializes to JSON (``model_dump_json``, ``model_dump(mode="json")``):
    every string is made well formed (a lone surrogate, from a file name that isn't UTF-8 say,
    becomes U+FFFD) and ``bytes`` in ``value`` become ``{"$bytes": "<base64>"}``. In Python
    (``result.value``, ``model_dump()``) bytes stay bytes.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    value: object = None
    stdout: str = ""
    error: ScriptError | None = None
    tool_calls: int = 0
    fetches: int = 0
    duration_s: float = 0.0
    isolation: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)

    @field_serializer("value", when_used="json")
    def _json_value(self, value: Any) -> Any:
        return json_safe(value)

    @field_serializer("stdout", when_used="json")
    def _well_formed(self, text: str) -> str:
        return well_formed(text)

    @field_serializer("outputs", "isolation", when_used="json")
    def _well_formed_list(self, texts: list[str]) -> list[str]:
        return [well_formed(text) for text in texts]
