"""Tests of the tool table (scriptbridge._tool_table): one interface, names taken once."""

from __future__ import annotations

import pytest

from scriptbridge import python_tool
from scriptbridge._tool_table import ToolTable


def test_names_are_taken_once_and_a_batch_is_all_or_none() -> None:
    """A name already taken (or twice in one batch) refuses the whole batch."""
    table = ToolTable()
    table.add([python_tool(lambda: 1, name="a")])
    with pytest.raises(ValueError, match="'a' is already taken"):
        table.add([python_tool(lambda: 2, name="b"), python_tool(lambda: 3, name="a")])
    with pytest.raises(ValueError, match="'c' is already taken"):
        table.add([python_tool(lambda: 2, name="c"), python_tool(lambda: 3, name="c")])
    assert table.names == ["a"] and table.get("b") is None


async def test_a_host_tool_calls_through_the_interface() -> None:
    """A python tool is a Tool: no server, and call() gives its MCP-shaped result."""
    table = ToolTable()
    table.add([python_tool(lambda x: x * 2, name="double")])
    tool = table.get("double")
    assert tool is not None and tool.server is None
    assert await tool.call({"x": 21}) == {
        "content": [{"type": "text", "text": "42"}],
        "structuredContent": 42,
    }
