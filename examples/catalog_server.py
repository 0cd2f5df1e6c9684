"""An example MCP server on the ``mcp`` SDK whose tools are typed: what ``tool_stubs`` reads.

Its tools take nested object arguments (``add_item``), an enum (``set_status``) and defaults
(``search``), and two return structured output, so the SDK lists an ``outputSchema`` for them.
Run: ``python examples/catalog_server.py`` (stdio).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

server = MCPServer("example-catalog")


class Size(BaseModel):
    """How big an item is, in centimetres."""

    width: float
    height: float


class Item(BaseModel):
    """An item of the catalog."""

    name: str = Field(description="What the item is called.")
    tags: list[str] = []
    size: Size | None = None


class Hit(BaseModel):
    name: str
    score: float


class SearchResults(BaseModel):
    """What a search found."""

    query: str
    hits: list[Hit]


class Status(StrEnum):
    draft = "draft"
    published = "published"
    retired = "retired"


@server.tool()
def search(
    query: str, limit: int = 3, order: Literal["relevance", "name"] = "relevance"
) -> SearchResults:
    """Search the catalog.

    Returns at most ``limit`` hits, best first (or by name).
    """
    names = sorted(["lamp", "desk", "chair", "shelf"])[:limit]
    return SearchResults(query=query, hits=[Hit(name=n, score=1.0) for n in names])


@server.tool()
def add_item(item: Item, count: int = 1) -> str:
    """Add ``count`` of an item to the catalog; returns a line saying what was added."""
    size = f" ({item.size.width}x{item.size.height} cm)" if item.size else ""
    return f"added {count} x {item.name}{size} tagged {', '.join(item.tags) or 'nothing'}"


@server.tool()
def set_status(name: str, status: Status) -> dict[str, str]:
    """Set an item's status."""
    return {"name": name, "status": status.value}


if __name__ == "__main__":
    server.run("stdio")
