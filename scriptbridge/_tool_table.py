"""The tools a bridge offers scripts, each behind one small interface (:class:`Tool`).

A host tool (:class:`~scriptbridge.PythonTool`) and a tool of a connected MCP server
(:class:`McpTool`) look the same to the run that calls them: a ``name`` as ``call_tool`` takes
it, the ``server`` whose result it is (``None`` for the host's own), and ``call(arguments)``,
which returns the MCP-shaped result or raises. :class:`ToolTable` holds them by name; a name
is taken once, and a server's tools are added all together or not at all;
:meth:`ToolTable.replace_server` swaps a server's tools for its new list.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from sandbox.protocol import MAX_PARAMETERS

from ._mcp import McpServer
from ._tool_spec import ToolSpec, listed_spec

__all__ = ["McpTool", "Tool", "ToolTable"]

log = logging.getLogger("scriptbridge.mcp")


class Tool(Protocol):
    """One tool a script can call."""

    @property
    def name(self) -> str:
        """The name ``call_tool`` takes."""

    @property
    def server(self) -> str | None:
        """The server the result comes from (for the registry), ``None`` for a host tool."""

    async def call(self, arguments: Mapping[str, Any]) -> Any:
        """Call it; returns its MCP-shaped result, or raises."""

    def spec(self) -> ToolSpec:
        """It, described for a model."""


class McpTool:
    """Tool ``tool`` of a connected MCP server, offered as ``<server>.<tool>``."""

    def __init__(self, server: McpServer, tool: str) -> None:
        self._server = server
        self._tool = tool
        self.name = f"{server.name}.{tool}"

    @property
    def server(self) -> str:
        return self._server.name

    async def call(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return await self._server.call_tool(self._tool, arguments)

    def spec(self) -> ToolSpec:
        """What the server listed for it (read as :func:`listed_spec` reads it)."""
        return listed_spec(self.name, self._server.tools.get(self._tool))


class ToolTable:
    """Tools by name (module doc)."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, tools: Iterable[Tool]) -> None:
        """Offer ``tools``, all or none. Raises ``ValueError`` for a name already taken."""
        adding = list(tools)
        seen: set[str] = set()
        for tool in adding:
            if tool.name in self._tools or tool.name in seen:
                raise ValueError(f"tool name {tool.name!r} is already taken")
            seen.add(tool.name)
        for tool in adding:
            self._tools[tool.name] = tool

    def replace_server(self, server: str, tools: Iterable[Tool]) -> None:
        """Offer ``tools`` in place of every tool of ``server`` (its new list); a name another
        tool already holds is left out, and logged."""
        for name in [name for name, tool in self._tools.items() if tool.server == server]:
            del self._tools[name]
        for tool in tools:
            if tool.name in self._tools:
                log.warning("server %r: left out its tool %r: the name is taken", server, tool.name)
            else:
                self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def select(self, names: Iterable[str] | None) -> list[Tool]:
        """The tools named (every tool for ``None``), sorted by name. Raises ``ValueError``
        for a name not offered."""
        if names is None:
            return [self._tools[name] for name in self.names]
        wanted = set(names)
        missing = sorted(wanted - self._tools.keys())
        if missing:
            raise ValueError(f"no tool is offered as {', '.join(map(repr, missing))}")
        return [self._tools[name] for name in sorted(wanted)]

    def only(self, names: Iterable[str]) -> ToolTable:
        """A table of just the tools named (for one run). Raises ``ValueError`` for a name
        not offered."""
        subset = ToolTable()
        subset.add(self.select(names))
        return subset

    @property
    def names(self) -> list[str]:
        """The names scripts can call, sorted."""
        return sorted(self._tools)

    def parameters(self) -> dict[str, list[str]]:
        """Each tool's argument names in its schema's order (``properties``), for binding a
        script's positionals; a tool with none, or more than ``MAX_PARAMETERS``, or a name
        past 128 characters, is left out (it takes keywords only)."""
        found: dict[str, list[str]] = {}
        for name, tool in self._tools.items():
            properties = tool.spec().input_schema.get("properties")
            if not isinstance(properties, dict) or not 0 < len(properties) <= MAX_PARAMETERS:
                continue
            names = [key for key in properties if isinstance(key, str) and 0 < len(key) <= 128]
            if len(names) == len(properties):
                found[name] = names
        return found
