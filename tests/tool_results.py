"""Tool-result blocks the tests build by hand."""

from __future__ import annotations

from typing import Any


def link(uri: str, **fields: Any) -> dict[str, Any]:
    """A ``resource_link`` block to ``uri`` with ``fields`` (a name, a disposition, ...)."""
    return {"type": "resource_link", "uri": uri, **fields}
