"""Tool servers' tool lists, validated when a server is added: names no script can call, too
long for the protocol, or listed twice are left out with a logged reason, a server's list is
capped, and every later run still works. A real hostile stdio server."""

from __future__ import annotations

import logging
import pathlib
import sys

import pytest

from scriptbridge._mcp import MAX_TOOLS_PER_SERVER, McpServer
from scriptbridge._supervisor import Bridge

HOSTILE_SERVER = str(pathlib.Path(__file__).resolve().parent / "servers" / "hostile_server.py")


async def test_uncallable_tool_names_are_left_out_with_a_reason(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 600-character name, spaces, a non-str, an empty or duplicate name are left out and
    logged; the valid tools stay and a run works."""
    async with Bridge(tmp_path / "ws") as bridge:
        server = McpServer(sys.executable, [HOSTILE_SERVER], name="h", env={"HOSTILE_TOOLS": "odd"})
        with caplog.at_level(logging.WARNING, logger="scriptbridge.mcp"):
            await bridge.add_server(server)
        plain = McpServer(sys.executable, [HOSTILE_SERVER], name="plain")
        await bridge.add_server(plain)  # the same server's list without the odd names
        assert set(server.tools) == {*plain.tools, "ok.b-c_d"}
        assert "left out" in caplog.text and "600" in caplog.text
        result = await bridge.run("call_tool('h.echo', {'a': 1})['content'][0]['text']")
    assert result.ok, result.error


async def test_a_huge_tool_list_is_capped_and_runs_still_start(tmp_path: pathlib.Path) -> None:
    """A server listing 40,000 tools offers the first MAX_TOOLS_PER_SERVER; runs still work."""
    async with Bridge(tmp_path / "ws") as bridge:
        server = McpServer(
            sys.executable, [HOSTILE_SERVER], name="h", env={"HOSTILE_TOOLS": "many"}
        )
        await bridge.add_server(server)
        assert len(server.tools) == MAX_TOOLS_PER_SERVER
        result = await bridge.run("len(call_tool('h.echo', {})['content'])")
    assert result.ok, result.error
