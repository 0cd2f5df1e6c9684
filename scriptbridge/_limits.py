"""What a run may use: ``Limits``, a pydantic model. What a run gives back is in ``_results``.

``Limits`` are enforced from outside the child (the supervisor kills it at the wall-time
deadline, counts tool calls and output, caps frame sizes) and inside it (rlimits for CPU time
and memory, the runtime's own counters), so a child that lies can't outlive them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, ConfigDict, Field

from sandbox.protocol import Ending

if TYPE_CHECKING:
    from ._results import ScriptError

__all__ = ["LIMIT_FIELDS", "Limits", "name_the_limit"]


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


LIMIT_FIELDS: Final[dict[Ending, str]] = {
    Ending.WallTimeExceeded: "wall_s",
    Ending.CpuTimeExceeded: "cpu_s",
    Ending.MemoryExceeded: "memory_mb",
    Ending.OutputExceeded: "max_output_bytes",
    Ending.ToolCallsExceeded: "max_tool_calls",
    Ending.DiskQuotaExceeded: "max_out_bytes, max_out_files",
}
"""The ``Limits`` field behind each ending that a limit causes."""


def name_the_limit(error: ScriptError, limits: Limits) -> str:
    """``error``'s message, stating the limit it passed and the ``Limits`` field that sets it
    (``the script used more than its 64 MiB of memory (Limits.memory_mb)``); any other
    error's as it is."""
    field = LIMIT_FIELDS.get(error.ending)
    if field is None or "(Limits." in error.message:
        return error.message
    message = error.message
    if error.ending is Ending.MemoryExceeded and "MiB" not in message:
        message = f"the script used more than its {limits.memory_mb} MiB of memory"
    return f"{message} (Limits.{field})"
