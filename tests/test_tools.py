"""Tests for python_tool and how a tool's return value becomes an MCP-shaped result."""

from __future__ import annotations

import threading
from typing import Any

import mcp.types as mcp_types
import pytest
import trio

from scriptbridge._tools import as_tool_result, python_tool


def test_str_becomes_one_text_block() -> None:
    """A plain str becomes one text block."""
    assert as_tool_result("hi") == {"content": [{"type": "text", "text": "hi"}]}


def test_dict_and_list_become_structured_content_with_json_text() -> None:
    """A dict or list becomes structuredContent with a text block of its JSON."""
    assert as_tool_result({"a": [1, "é"]}) == {
        "content": [{"type": "text", "text": '{"a": [1, "é"]}'}],
        "structuredContent": {"a": [1, "é"]},
    }
    assert as_tool_result([1, 2])["content"] == [{"type": "text", "text": "[1, 2]"}]


def test_data_holding_a_block_gets_no_json_text() -> None:
    """Data holding a block (an embedded resource's uri) gets no JSON text that could leak it."""
    data = {"att": {"type": "resource", "resource": {"uri": "mem://secret", "text": "t"}}}
    assert as_tool_result(data) == {"content": [], "structuredContent": data}


def test_unreadable_data_gets_no_json_text() -> None:
    """Data past the walk limits or not JSON gets no text block."""
    loop: list[Any] = []
    loop.append(loop)
    assert as_tool_result({"loop": loop})["content"] == []
    assert as_tool_result({"b": b"bytes"})["content"] == []


def test_mcp_shaped_results_kept() -> None:
    """An MCP-shaped dict is kept; the SDK's CallToolResult is dumped by alias."""
    shaped = {"content": [{"type": "text", "text": "x"}], "isError": True}
    assert as_tool_result(shaped) is shaped
    sdk = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="y")], structuredContent={"k": 1}
    )
    assert as_tool_result(sdk)["structuredContent"] == {"k": 1}
    assert as_tool_result(sdk)["content"] == [{"type": "text", "text": "y"}]


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    """A sync callable runs off the trio thread and gets its arguments as keywords."""
    main = threading.get_ident()

    def add(a: int, b: int) -> dict[str, Any]:
        """Add two numbers."""
        return {"sum": a + b, "same_thread": threading.get_ident() == main}

    tool = python_tool(add)
    assert (tool.name, tool.description) == ("add", "Add two numbers.")
    result = await tool.call({"a": 2, "b": 3})
    assert result["structuredContent"] == {"sum": 5, "same_thread": False}


async def test_async_tool_and_errors() -> None:
    """An async callable is awaited; what a tool raises propagates to the caller."""

    async def echo(text: str) -> str:
        await trio.lowlevel.checkpoint()
        return text

    async def broken() -> str:
        raise RuntimeError("no database")

    assert (await python_tool(echo, name="util.echo").call({"text": "x"}))["content"][0][
        "text"
    ] == "x"
    with pytest.raises(RuntimeError, match="no database"):
        await python_tool(broken).call({})


@pytest.mark.parametrize("name", ["", "1abc", "a b", "-x", "x" * 200, "a/b"])
def test_unusable_names_refused(name: str) -> None:
    """A name scripts couldn't call is refused at once."""
    with pytest.raises(ValueError):
        python_tool(lambda: None, name=name)
