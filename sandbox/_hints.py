"""What an error a script meets says to do instead: the habits models bring, answered.

The hints are fixed text, chosen by names the sandbox itself holds (a module's, a tool's, a
builtin's), never by anything a script's object says of itself; the closest names are taken
from the sandbox's own lists (:func:`closest`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Final

__all__ = ["MISSING_ATTRIBUTES", "MISSING_NAMES", "closest"]

MISSING_ATTRIBUTES: Final[dict[tuple[str, str], str]] = {
    ("time", "sleep"): "use `await asyncio.sleep(seconds)` (import asyncio): it sleeps within "
    "the run's wall time",
}
"""(module, name) a script reaches for that its module doesn't offer -> what to use instead."""

MISSING_NAMES: Final[dict[str, str]] = {
    "open": "read a saved payload with read_text('refs/<name>') (or read_bytes) and write a "
    "file with write_text('out/<name>', text)",
    "input": "the run's inputs are the dict `inputs`",
    "exit": "end the script with a top-level `return value`, or let its last expression be "
    "its value",
    "quit": "end the script with a top-level `return value`, or let its last expression be "
    "its value",
}
"""Builtins a script reaches for that the sandbox doesn't offer -> what to use instead."""


def closest(name: str, names: Iterable[str], *, most: int = 3) -> list[str]:
    """The ``most`` names of ``names`` closest to ``name`` (``difflib``'s ratio of 0.6 or
    more), closest first; none when none is close."""
    return difflib.get_close_matches(name, list(names), n=most, cutoff=0.6)
