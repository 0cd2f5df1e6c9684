"""How a run can end, as one enum both sides use (the host reads it through ``sandbox.protocol``).

This module imports nothing, so the child and the host can both hold it without pulling in
anything else.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = ["LIMITS", "Ending"]


class Ending(StrEnum):
    """How a run that did not finish ended. Each value is its own name.

    ``ScriptRejected`` and ``ScriptFailed`` are the script's own doing; the six limits (see
    :data:`LIMITS`) stopped a script that ran too long, too much or too big; the last three are
    the host's: the sandbox died, broke the protocol, or the bridge was closed under the run.
    """

    ScriptRejected = "ScriptRejected"
    """The restricted compiler refused the script (a syntax error, a forbidden construct)."""
    ScriptFailed = "ScriptFailed"
    """The script raised an exception."""
    WallTimeExceeded = "WallTimeExceeded"
    """The run passed its wall time (the host kills the child at the deadline)."""
    CpuTimeExceeded = "CpuTimeExceeded"
    """The child used its CPU seconds (an rlimit)."""
    MemoryExceeded = "MemoryExceeded"
    """The child ran out of its memory limit."""
    OutputExceeded = "OutputExceeded"
    """The script printed more than it may."""
    ToolCallsExceeded = "ToolCallsExceeded"
    """The script made more tool calls than it may (or a batch too large to answer)."""
    DiskQuotaExceeded = "DiskQuotaExceeded"
    """The script's ``out/`` would pass its disk quota."""
    SandboxCrashed = "SandboxCrashed"
    """The sandbox process died, or could not start."""
    ProtocolViolation = "ProtocolViolation"
    """The sandbox process sent a malformed, oversized, out-of-order or unknown message."""
    Cancelled = "Cancelled"
    """The bridge was closed while the run ran."""

    @property
    def is_limit(self) -> bool:
        """Whether this ending is one of the :data:`LIMITS`."""
        return self in LIMITS


LIMITS: Final[frozenset[Ending]] = frozenset(
    {
        Ending.WallTimeExceeded,
        Ending.CpuTimeExceeded,
        Ending.MemoryExceeded,
        Ending.OutputExceeded,
        Ending.ToolCallsExceeded,
        Ending.DiskQuotaExceeded,
    }
)
"""The endings that are a limit of :class:`~scriptbridge.Limits` running out."""
