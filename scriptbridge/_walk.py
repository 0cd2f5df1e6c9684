"""Walk limits shared by every walk of nested data (SPEC section 2), and result normalizing.

Every walk (claims, the script view, the lanes) is iterative: none recurses on the Python
stack, so no input can overflow it. Each walk keeps:

- a depth limit: the result itself is at depth 0, and a container deeper than
  :data:`MAX_DEPTH` is not read;
- a seen set: a container reached a second time in one walk (a cycle, or a list or dict shared
  under itself by a Python tool) counts as too deep, so no input makes a walk super-linear;
- a node budget of :data:`NODE_BUDGET` values per result, counted as containers are opened.

Past a limit a walk fails closed: the claims walk calls the result unreadable, and a view shows
``DATA_TOO_DEEP`` in place of what it could not read.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

MAX_DEPTH: Final = 100
NODE_BUDGET: Final = 1_000_000

PLAIN_SCALARS: Final = (str, int, float, bool, type(None), bytes)
"""Leaf values a walk reads as they are (made well formed where they are strings)."""


def result_dict(result: object) -> dict[Any, Any] | None:
    """Return a tool result as a dict, or ``None`` when it can't be read as one.

    Accepts a dict (returned as it is, not copied); a pydantic model such as the ``mcp`` SDK's
    ``CallToolResult`` (dumped by alias, so its fields read ``structuredContent`` and
    ``isError``); or a list of blocks, read as a result with that content (a push, channel or
    injection message, which hosts ingest the same way). Never raises.
    """
    if isinstance(result, dict):
        return result
    if isinstance(result, list | tuple):
        return {"content": result}
    if isinstance(result, BaseModel):
        try:
            dumped = result.model_dump(mode="python", by_alias=True, exclude_none=True)
        except Exception:
            return None
        return dumped if isinstance(dumped, dict) else None
    return None
