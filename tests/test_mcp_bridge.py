"""Tool servers through a Bridge: a call abandoned for any reason is cancelled at the server,
a server's new tools reach the runs that start after it says so, and its progress shows in
``Bridge.progress()``. A real hostile stdio server that records what it received."""

from __future__ import annotations

import json
import pathlib
import sys
from functools import partial
from typing import Any

import trio

from scriptbridge import Limits
from scriptbridge._mcp import McpServer
from scriptbridge._supervisor import Bridge

HOSTILE = str(pathlib.Path(__file__).resolve().parent / "servers" / "hostile_server.py")


def received(record: pathlib.Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_bytes().splitlines()]


def hang_ids(record: pathlib.Path) -> list[object]:
    return [
        m["id"]
        for m in received(record)
        if m.get("method") == "tools/call" and m["params"]["name"] == "hang"
    ]


async def test_abandoned_calls_are_cancelled_at_the_server(
    tmp_path: pathlib.Path, nursery: trio.Nursery
) -> None:
    """Wall time, the caller's cancellation, a batch ended by wall time and the bridge closing
    each send notifications/cancelled for the abandoned request's id (every one of the five
    reached the server before it was abandoned)."""
    record = tmp_path / "received.jsonl"
    quick = Limits(wall_s=1.5)  # the call reaches the server long before

    async def reached(count: int) -> None:
        with trio.fail_after(30):
            while len(hang_ids(record)) < count:
                await trio.sleep(0.01)

    async with Bridge(tmp_path / "ws") as bridge:
        server = McpServer(sys.executable, [HOSTILE], name="h", env={"HOSTILE_RECORD": str(record)})
        await bridge.add_server(server)
        walled = await bridge.run("call_tool('h.hang', {})", limits=quick)
        assert walled.error is not None and walled.error.type == "WallTimeExceeded"
        await reached(1)
        async with trio.open_nursery() as caller:
            caller.start_soon(partial(bridge.run, "call_tool('h.hang', {})"))
            await reached(2)
            caller.cancel_scope.cancel()
        batch = await bridge.run("call_tools([('h.hang', {}), ('h.hang', {'n': 2})])", limits=quick)
        assert batch.error is not None and batch.error.type == "WallTimeExceeded"
        await reached(4)
        nursery.start_soon(bridge.run, "call_tool('h.hang', {'last': 1})")
        await reached(5)
    messages = received(record)
    cancelled = [
        m["params"]["requestId"] for m in messages if m.get("method") == "notifications/cancelled"
    ]
    assert sorted(map(str, cancelled)) == sorted(map(str, hang_ids(record)))


async def test_new_tools_reach_later_runs(tmp_path: pathlib.Path) -> None:
    """After notifications/tools/list_changed the server's tools are listed again, and a run
    that starts after it can call the new tool."""
    async with Bridge(tmp_path / "ws") as bridge:
        await bridge.add_server(McpServer(sys.executable, [HOSTILE], name="h"))
        assert "h.added" not in bridge.tool_names
        first = await bridge.run("call_tool('h.addtool', {})['content'][0]['text']")
        assert first.ok, first.error
        with trio.fail_after(5):
            while "h.added" not in bridge.tool_names:
                await trio.sleep(0.01)
        later = await bridge.run("call_tool('h.added', {'x': 1})['content'][0]['text']")
        assert later.ok and later.value == '{"x": 1}', later.error


async def test_a_servers_progress_shows_for_its_run(tmp_path: pathlib.Path) -> None:
    """notifications/progress for a call shows in Bridge.progress() for the run making it."""
    async with Bridge(tmp_path / "ws") as bridge:
        await bridge.add_server(McpServer(sys.executable, [HOSTILE], name="h"))
        seen: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.run, "call_tool('h.progress', {'seconds': 1})")
            with trio.fail_after(10):
                while not seen:
                    seen = [p for run in bridge.progress() for p in run.tool_progress]
                    await trio.sleep(0.01)
        (progress,) = seen
        assert (progress.tool, progress.progress, progress.total, progress.message) == (
            "h.progress",
            1,
            2,
            "half",
        )
        assert bridge.progress() == []


async def test_a_bridge_exits_cleanly_whatever_a_server_did(
    tmp_path: pathlib.Path, nursery: trio.Nursery
) -> None:
    """Invalid UTF-8, a closed stdout and a crash cost their own calls at most; the runs end
    and ``async with Bridge`` exits without raising."""
    async with Bridge(tmp_path / "ws") as bridge:
        await bridge.add_server(McpServer(sys.executable, [HOSTILE], name="h", timeout_s=10))
        result = await bridge.run(
            "out = [call_tool('h.badutf8', {})['content'][0]['text']]\n"
            "for name in ('closeout', 'crash'):\n"
            "    try:\n"
            "        call_tool('h.' + name, {})\n"
            "    except ToolError as exc:\n"
            "        out.append('exited' in str(exc))\n"
            "out.append(call_tool('h.echo', {'n': 1})['content'][0]['text'])\n"
            "out\n"
        )
        assert result.ok and result.value == ["{}", True, True, '{"n": 1}'], result.error
        started = trio.Event()

        async def one_more() -> None:
            started.set()  # it runs on into bridge.run up to its first checkpoint
            await bridge.run("call_tool('h.badutf8', {})")

        nursery.start_soon(one_more)
        await started.wait()  # the bridge closes with that run under way (or just done)


async def test_a_server_wanting_input_reaches_the_script_as_a_tool_error(
    tmp_path: pathlib.Path,
) -> None:
    """SEP-2322's ``input_required`` reaches a script as a ``ToolError`` saying what the server
    wanted (not an empty result)."""
    async with Bridge(tmp_path / "ws") as bridge:
        await bridge.add_server(McpServer(sys.executable, [HOSTILE], name="h"))
        result = await bridge.run(
            "try:\n    call_tool('h.needinput', {})\n"
            "except ToolError as exc:\n    said = str(exc)\n"
            "said"
        )
        assert result.ok, result.error
        assert "asked for input (elicitation: 'Which account" in result.value
