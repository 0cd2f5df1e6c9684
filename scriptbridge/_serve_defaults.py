"""``serve``'s defaults, apart from ``serve`` itself: the command line says them in its help
without importing :mod:`scriptbridge._serve` (and with it the ``mcp`` SDK's server), which it
loads only when ``serve`` runs."""

from __future__ import annotations

from typing import Final

__all__ = ["DESCRIBE_BUDGET", "MAX_SESSIONS", "SESSION_IDLE_S"]

MAX_SESSIONS: Final = 256
"""Sessions open at once."""
SESSION_IDLE_S: Final = 600.0
"""A session unused this long is closed (its handle then answers ``expired``)."""
DESCRIBE_BUDGET: Final = 8192
"""Bytes of tool stubs ``run_python``'s description carries at most; past it, an index."""
