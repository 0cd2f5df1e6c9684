"""The names and bounds the protocol's two sides share, with no pydantic. No I/O.

The child (the zygote and every sandbox child) imports this and :mod:`._framing` and
:mod:`._plain` only; the pydantic models that validate messages (:mod:`._messages`,
:mod:`._zygote_messages`) are the host's, and take their constants from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, get_args

import msgpack

__all__ = [
    "CARRY_MAX_BYTES",
    "CARRY_MAX_DEFINITIONS",
    "CARRY_MAX_NAMES",
    "DATAGRAM",
    "DESCRIBE_TOOL",
    "LAYER_NAMES",
    "MAX_PARAMETERS",
    "MAX_QUERY_CHARS",
    "PROTOCOL_VERSION",
    "SEARCH_TOOLS",
    "ChildExit",
    "Layer",
    "ZygoteError",
    "carry_bytes",
]

PROTOCOL_VERSION: Final = 1
"""Sent in ``ready``; the host refuses a child that speaks another version."""

Layer: TypeAlias = Literal[
    "restricted-python",
    "rlimits",
    "seccomp",
    "landlock",
    "netns",
    "pidns",
    "ipcns",
    "uid",
    "quota",
]
"""The isolation layers a child reports by name."""

LAYER_NAMES: Final[tuple[Layer, ...]] = get_args(Layer)
"""Every layer, in the order they are listed to users."""

MAX_PARAMETERS: Final = 32
"""The most argument names of one tool a ``start`` carries (a tool with more takes its
arguments by keyword only)."""

SEARCH_TOOLS: Final = "tools:search"
DESCRIBE_TOOL: Final = "tools:describe"
"""The names a script's ``tools.search(words)`` and ``tools.describe(name)`` call, which the
host answers from the run's own tools: names no tool can have (a tool's name has no ``:``)."""

MAX_QUERY_CHARS: Final = 1000
"""The longest ``tools.search`` query read (a longer one is read up to here)."""

CARRY_MAX_BYTES: Final = 2**20
"""The most a session step may carry to the next: the msgpack bytes of its plain globals (name
and value) plus the UTF-8 bytes of its definitions' sources (:func:`carry_bytes`). A step's
own bound is this, or a quarter of its frame limit when that is smaller (``CarryIn.max_bytes``).
"""

CARRY_MAX_DEFINITIONS: Final = 1000
"""The most definitions (top-level ``def``, ``class``, ``import``) a session carries."""

CARRY_MAX_NAMES: Final = 10_000
"""The most globals a session carries, and the most names one step reports dropped."""


def _packed_size(value: Any) -> int:
    try:
        return len(msgpack.packb(value, use_bin_type=True))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"cannot pack a carried value: {exc}") from exc


def carry_bytes(globals: dict[str, Any], definitions: list[str]) -> int:
    """What ``globals`` (plain data) and ``definitions`` cost against a carry's bound: the
    msgpack bytes of each name and value plus the UTF-8 bytes of each definition (lone
    surrogates counted as the three bytes they are sent as). Raises ``ValueError`` for a
    value msgpack can't pack."""
    size = sum(_packed_size(name) + _packed_size(value) for name, value in globals.items())
    return size + sum(len(text.encode("utf-8", "surrogatepass")) for text in definitions)


DATAGRAM: Final = 65536
"""The largest datagram either end of the zygote's socket reads; every message is far smaller."""


class ZygoteError(RuntimeError):
    """The zygote is gone, refused a request, or answered outside its protocol."""


@dataclass(frozen=True)
class ChildExit:
    """How a child ended: ``returncode`` as in ``subprocess`` (``-N`` for signal ``N``),
    its CPU time (user + system) and its peak resident set; and ``quota_exceeded``, why the
    run passed its disk quota (the zygote's own finding, :mod:`sandbox._quota`), or ``None``."""

    pid: int
    returncode: int
    cpu_s: float
    max_rss_kb: int
    quota_exceeded: str | None = None
