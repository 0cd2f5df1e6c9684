"""A tool result read as a dict: whatever shape a tool or server handed it in."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["data_of", "result_dict"]


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


def data_of(top: dict[Any, Any]) -> Any:
    """A result's data: ``structuredContent``, or ``data`` when it has none.

    Reading ``data`` too lets a rendered script view be read again as the result it came from.
    """
    return top["structuredContent"] if "structuredContent" in top else top.get("data")
