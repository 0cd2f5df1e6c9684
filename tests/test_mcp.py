"""Tests for McpServer: real tool servers over stdio, their results read raw."""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import AsyncIterator

import pytest
import trio

from scriptbridge._mcp import McpServer, ToolServerError

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = str(ROOT / "examples" / "peer.py")
SDK_SERVER = str(ROOT / "examples" / "mcp_server.py")
HOSTILE = str(ROOT / "tests" / "servers" / "hostile_server.py")


def child_pids() -> set[int]:
    """The pids of this process's live children, read from /proc."""
    me, found = os.getpid(), set()
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.add(int(entry.name))
    return found


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as nursery:
        yield nursery
        nursery.cancel_scope.cancel()


async def open_server(nursery: trio.Nursery, path: str, name: str, **kw: object) -> McpServer:
    server = McpServer(sys.executable, [path], name=name, **kw)  # type: ignore[arg-type]
    await server.open(nursery)
    return server


async def test_peer_results_arrive_raw(nursery: trio.Nursery) -> None:
    """A resource_link's never and an MCPL reference arrive intact, unlike through ClientSession."""
    peer = await open_server(nursery, PEER, "peer")
    try:
        assert {"link_never", "never_reference", "embedded_pdf"} <= set(peer.tools)
        link = await peer.call_tool("link_never", {})
        assert link["content"][0]["disposition"] == "never"
        assert link["content"][0]["type"] == "resource_link"
        reference = await peer.call_tool("never_reference", {})
        block = reference["content"][0]
        assert (block["type"], block["disposition"]) == ("resource", "never")
        assert block["uri"].endswith("/payroll.csv")
        failed = await peer.call_tool("fail", {})
        assert failed["isError"] is True
    finally:
        await peer.aclose()


async def test_sdk_server_works_unchanged(nursery: trio.Nursery) -> None:
    """A standard server built on the SDK: tools, embedded resources, links, resources/read."""
    docs = await open_server(nursery, SDK_SERVER, "docs")
    try:
        assert {"search", "logo", "page", "attachment"} <= set(docs.tools)
        found = await docs.call_tool("search", {"q": "trio"})
        assert "trio" in found["content"][0]["text"]
        page = await docs.call_tool("page", {"name": "intro"})
        assert page["content"][0]["resource"]["text"].startswith("# intro")
        link = (await docs.call_tool("attachment", {}))["content"][1]
        assert link == {
            "type": "resource_link",
            "uri": "docs://files/guide.txt",
            "name": "guide.txt",
            "mimeType": "text/plain",
        }
        read = await docs.read_resource("docs://files/guide.txt")
        assert read["contents"][0]["text"].startswith("The guide")
        await docs.ping()
    finally:
        await docs.aclose()


async def test_crash_fails_the_call_and_the_next_call_restarts(nursery: trio.Nursery) -> None:
    """A server that dies fails the call in flight; the next call starts it again."""
    server = await open_server(nursery, HOSTILE, "hostile")
    try:
        first = await server.call_tool("echo", {"n": 1})
        with pytest.raises(ToolServerError, match=r"exited|isn.t running"):
            await server.call_tool("crash", {})
        again = await server.call_tool("echo", {"n": 2})
        assert again["content"][0]["text"] == '{"n": 2}'
        assert again["pid"] != first["pid"]
        assert server.restarts == 1
    finally:
        await server.aclose()


async def test_hang_times_out(nursery: trio.Nursery) -> None:
    """A call the server never answers fails after the timeout; the server stays usable."""
    server = await open_server(nursery, HOSTILE, "hostile")
    try:
        server.timeout_s = 0.5  # for the call that never gets an answer only
        with pytest.raises(ToolServerError, match=r"didn.t answer tools/call within 0\.5 s"):
            await server.call_tool("hang", {})
        server.timeout_s = 60.0
        assert (await server.call_tool("echo", {}))["content"][0]["text"] == "{}"
    finally:
        await server.aclose()


async def test_garbage_lines_and_server_requests_are_survived(nursery: trio.Nursery) -> None:
    """A non-JSON line is skipped and a request from the server is refused; the call answers."""
    server = await open_server(nursery, HOSTILE, "hostile")
    try:
        assert (await server.call_tool("garbage", {"a": 1}))["content"][0]["text"] == '{"a": 1}'
        assert (await server.call_tool("ask", {}))["content"][0]["text"] == "{}"
    finally:
        await server.aclose()


async def test_unknown_command_fails_clearly(nursery: trio.Nursery) -> None:
    """A server that can't start raises ToolServerError saying so."""
    server = McpServer("/nonexistent/server-binary", name="ghost")
    with pytest.raises(ToolServerError, match="couldn't start server 'ghost'"):
        await server.open(nursery)


async def test_aclose_leaves_no_process(nursery: trio.Nursery) -> None:
    """After aclose the server process is gone."""
    before = child_pids()
    server = await open_server(nursery, HOSTILE, "hostile")
    assert child_pids() - before
    await server.aclose()
    assert child_pids() - before == set()
