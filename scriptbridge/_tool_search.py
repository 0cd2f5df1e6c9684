"""Tools found on demand: a text ranking of tool specs, and an index of them within a budget.

:class:`ToolIndex` ranks the tools offered by how well each matches a query, with Okapi BM25
(k1 = 1.2, b = 0.75) over words of the tool's name (split at ``.``, ``_``, ``-`` and case
changes; counted twice, as a name says more than a sentence of its description) and of its
description. Ranking is deterministic: equal scores go in name order, and a tool that shares no
word with the query is not returned. :func:`index_lines` lists tools as ``name: first line of
its description``, or by name alone when those don't fit, within a byte budget: for a
description that can't carry every stub.

Pure: no I/O, and the same specs and query give the same answer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Final

from sandbox.protocol import MAX_QUERY_CHARS

from ._stubs import render_tool_stub
from ._tool_spec import ToolSpec

__all__ = [
    "SEARCH_LIMIT",
    "ToolIndex",
    "brief",
    "describe_result",
    "index_lines",
    "search_result",
]

SEARCH_LIMIT: Final = 10
"""Tools one search returns at most."""
FIRST_LINE_CHARS: Final = 160
K1: Final = 1.2
B: Final = 0.75
NAME_WEIGHT: Final = 2

_WORD: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(text: str) -> list[str]:
    """The words of ``text``, lower case: runs of letters split at case changes, and numbers
    (``getWeather2`` -> ``get``, ``weather``, ``2``)."""
    return [word.lower() for word in _WORD.findall(text)]


def first_line(description: str) -> str:
    """A description's first non-blank line, cut to :data:`FIRST_LINE_CHARS`."""
    for line in description.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= FIRST_LINE_CHARS else line[: FIRST_LINE_CHARS - 3] + "..."
    return ""


def brief(spec: ToolSpec) -> str:
    """``name: first line of its description`` (the name alone without one)."""
    line = first_line(spec.description)
    return f"{spec.name}: {line}" if line else spec.name


class ToolIndex:
    """The BM25 ranking of ``specs`` (module doc)."""

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self._specs = sorted(specs, key=lambda spec: spec.name)
        self._counts: list[Counter[str]] = []
        for spec in self._specs:
            counted = Counter(words(spec.description))
            for word in words(spec.name):
                counted[word] += NAME_WEIGHT
            self._counts.append(counted)
        self._lengths = [sum(counted.values()) for counted in self._counts]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        documents: Counter[str] = Counter()
        for counted in self._counts:
            documents.update(counted.keys())
        total = len(self._specs)
        self._idf = {
            word: math.log(1 + (total - n + 0.5) / (n + 0.5)) for word, n in documents.items()
        }

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> list[ToolSpec]:
        """The tools matching ``query`` best, best first, at most ``limit``."""
        asked = set(words(query[:MAX_QUERY_CHARS]))
        scored: list[tuple[float, str, ToolSpec]] = []
        for spec, counted, length in zip(self._specs, self._counts, self._lengths, strict=True):
            score = 0.0
            for word in asked & counted.keys():
                frequency = counted[word]
                norm = K1 * (1 - B + B * length / (self._average or 1.0))
                score += self._idf[word] * frequency * (K1 + 1) / (frequency + norm)
            if score > 0:
                scored.append((-score, spec.name, spec))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [spec for _, _, spec in scored[: max(0, limit)]]


def index_lines(specs: Sequence[ToolSpec], budget: int) -> str:
    """An index of ``specs`` in name order within ``budget`` bytes of UTF-8: one :func:`brief`
    line a tool when they all fit; else every name, a line of names at a time; and when even
    the names don't fit, as many as do, with a last line saying how many more there are."""
    ordered = sorted(specs, key=lambda spec: spec.name)
    lines = [f"# {brief(spec)}\n" for spec in ordered]
    if sum(len(line.encode()) for line in lines) <= budget:
        return "".join(lines)
    names = _packed([spec.name for spec in ordered])
    if sum(len(line.encode()) for line in names) <= budget:
        return "".join(names)
    kept: list[str] = []
    used = len(_more(len(ordered)).encode())  # room for the last line, kept first
    shown = 0
    for line in names:
        size = len(line.encode())
        if used + size > budget:
            break
        kept.append(line)
        used += size
        shown += line.count(",") + 1
    return "".join(kept) + _more(len(ordered) - shown)


def _packed(names: list[str], width: int = 96) -> list[str]:
    """``names`` as comment lines of at most about ``width`` characters, comma-separated."""
    lines: list[str] = []
    line = ""
    for name in names:
        if line and len(line) + len(name) + 2 > width:
            lines.append(f"# {line}\n")
            line = ""
        line = f"{line}, {name}" if line else name
    if line:
        lines.append(f"# {line}\n")
    return lines


def _more(count: int) -> str:
    return f"# ... and {count} more: search for them\n"


def search_result(specs: Sequence[ToolSpec], arguments: dict[str, object]) -> dict[str, object]:
    """A script's ``tools.search(query)``: the stubs of the best matches among ``specs`` (the
    run's tools), as a tool result whose ``data`` is their list. Raises ``ValueError`` for a
    query that isn't a string."""
    query = arguments.get("query")
    if not isinstance(query, str):
        raise ValueError("tools.search takes a query, a string of words")
    stubs = [render_tool_stub(spec) for spec in ToolIndex(specs).search(query)]
    return {"content": [], "structuredContent": stubs}


def describe_result(specs: Sequence[ToolSpec], arguments: dict[str, object]) -> dict[str, object]:
    """A script's ``tools.describe(name)``: the stub of the run's tool ``name`` (its name as
    ``call_tool`` takes it, or as ``tools.<name>``), as a tool result whose ``data`` is it.
    Raises ``LookupError`` for a name no tool of the run has."""
    name = arguments.get("name")
    for spec in specs:
        if name in (spec.name, spec.attribute):
            return {"content": [], "structuredContent": render_tool_stub(spec)}
    raise LookupError(f"no tool is named {name!r}: tools.search(words) finds tools")
