"""An example standard MCP server on the ``mcp`` SDK: standard servers work unchanged.

Its tools return text, an image, an embedded resource and a resource link, through the SDK's
own types. Run: ``python examples/mcp_server.py`` (stdio).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import (
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42"
    "mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("example-docs")


@server.tool()
def search(q: str) -> str:
    """Search the docs; returns a line of text."""
    return f"3 results for {q!r}: trio, anyio, httpx"


@server.tool()
def logo() -> list[ImageContent]:
    """The project's logo, a 1x1 PNG."""
    return [ImageContent(type="image", data=PNG_1X1, mimeType="image/png")]


@server.tool()
def page(name: str) -> list[EmbeddedResource]:
    """A docs page, embedded as a text resource."""
    return [
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri=f"docs://pages/{name}", mimeType="text/markdown", text=f"# {name}\n\nIt works."
            ),
        )
    ]


@server.tool()
def attachment() -> list[TextContent | ResourceLink]:
    """A link to an attachment the client may fetch."""
    return [
        TextContent(type="text", text="see the attachment"),
        ResourceLink(
            type="resource_link",
            uri="docs://files/guide.txt",
            name="guide.txt",
            mimeType="text/plain",
        ),
    ]


@server.resource("docs://files/guide.txt", mime_type="text/plain")
def guide() -> str:
    """The guide the attachment links to."""
    return "The guide: read it through resources/read."


if __name__ == "__main__":
    server.run("stdio")
